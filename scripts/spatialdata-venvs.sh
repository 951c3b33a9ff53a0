#!/usr/bin/env bash
# Two virtual environments with the real spatialdata packages, for the read-back test of
# stores napari-ozx writes (tests/layers/spatial/test_save_readback.py) and for
# tests/ngff/spatial/make_fixtures.py:
#
#   .venv-sd073  spatialdata 0.7.3 ("anndata<0.13": anndata 0.13 stores X as a layer
#                named None, which 0.7.3's table validation refuses)
#   .venv-sd080  spatialdata 0.8.0 (needs Python >= 3.12)
#
# Both live in the clone and are git-ignored; NAPARI_OZX_SD073 / NAPARI_OZX_SD080 override
# the places (the test reads the same variables). An environment that exists and imports
# spatialdata is kept. spatialdata pins a dask older than the project's, so these never
# share the project's .venv. Each build prints how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {  # the oldest Python >= $1 on PATH or under pyenv (spatialdata's wheels)
  local minor="$1" cand
  for cand in python3.12 python3.13 python3.14 \
      "$HOME"/.pyenv/versions/3.12*/bin/python "$HOME"/.pyenv/versions/3.13*/bin/python; do
    if command -v "$cand" >/dev/null 2>&1 \
        && "$cand" -c "import sys, venv, ensurepip; sys.exit(sys.version_info < (3, $minor))" \
          2>/dev/null; then
      echo "$cand"; return 0
    fi
  done
  return 1
}

build() {  # build VENV VERSION PACKAGE...
  local venv="$1" version="$2"; shift 2
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c \
      "import spatialdata, sys; sys.exit(spatialdata.__version__ != '$version')" 2>/dev/null; then
    echo "spatialdata-venvs: $venv has spatialdata $version already"
    return 0
  fi
  local py start=$SECONDS
  if ! py="$(find_python 12)"; then
    echo "spatialdata-venvs: no Python >= 3.12 on PATH or under pyenv; spatialdata $version needs one" >&2
    return 1
  fi
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@"
  "$venv/bin/python" -c "import spatialdata; print('spatialdata', spatialdata.__version__)"
  echo "spatialdata-venvs: $venv built in $((SECONDS - start)) s"
}

build "${NAPARI_OZX_SD073:-.venv-sd073}" 0.7.3 "spatialdata==0.7.3" "anndata<0.13"
build "${NAPARI_OZX_SD080:-.venv-sd080}" 0.8.0 "spatialdata==0.8.0"
