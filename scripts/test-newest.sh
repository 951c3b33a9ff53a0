#!/usr/bin/env bash
# The whole test suite on the newest releases of zarr, dask, numcodecs and napari on the
# package index (issue 26): a second environment, .venv-newest (NAPARI_OZX_VENV_NEWEST
# overrides), beside the README's .venv. Then the test modules that make dask arrays (the
# only ones whose outcome can depend on it) again with dask's array query planning on
# (dask.array.query-planning): napari-ozx's levels are its own LevelArray there. What
# cannot run in-process under it is other people's code (ome-zarr-py, ngff-zarr, napari
# showing a plain dask array: dask issue #11922): tests/_support/classic_dask.py says how the
# suite runs their writers in a child and which of their reads only the first run does.
#
# zarr >= 3.2 needs Python >= 3.12: the newest Python 3.12+ found on PATH or under pyenv
# is used. Without one, this says so and runs on the Python there is (zarr's newest for
# it), so the query-planning run still happens.
set -euo pipefail
cd "$(dirname "$0")/.."
step_start=$SECONDS
bash scripts/system-deps.sh
PY_NEW=""
for cand in python3.14 python3.13 python3.12 \
    "$HOME"/.pyenv/versions/3.14*/bin/python "$HOME"/.pyenv/versions/3.13*/bin/python \
    "$HOME"/.pyenv/versions/3.12*/bin/python; do
  if command -v "$cand" >/dev/null 2>&1 \
      && "$cand" -c "import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 12))" 2>/dev/null; then
    PY_NEW="$cand"; break
  fi
done
if [ -z "$PY_NEW" ]; then
  echo "test-newest: no Python >= 3.12 here; zarr's newest releases need it. Using python3." >&2
  PY_NEW=python3
fi
VENV="${NAPARI_OZX_VENV_NEWEST:-.venv-newest}"
[ -x "$VENV/bin/python" ] || "$PY_NEW" -m venv "$VENV"
PY="$(cd "$VENV" && pwd)/bin/python"
export PATH="$(dirname "$PY"):$PATH"
"$PY" -m pip install -q --disable-pip-version-check --upgrade --upgrade-strategy eager \
  -e ".[testing,pyqt6]" zarr dask numcodecs napari
"$PY" - <<'PYEOF'
import sys, zarr, dask, numcodecs, napari
print(f"test-newest: Python {sys.version.split()[0]}, zarr {zarr.__version__}, dask {dask.__version__}, "
      f"numcodecs {numcodecs.__version__}, napari {napari.__version__}")
PYEOF
. scripts/workers.sh
"$PY" -m tests._support.conformance  # before pytest, never during collection (test.sh)
times() { [ -n "${NAPARI_OZX_TIMES:-}" ] && echo "$1" >> "$NAPARI_OZX_TIMES" || true; }
times "newest environment (.venv-newest): install $((SECONDS - step_start)) s"
# The classic run records which test modules make dask arrays (tests/_support/suitetime.py);
# only those can depend on the dask array implementation, so only those run again under
# query planning. With arguments (a selection of tests), both runs take the same ones.
RECORD="$(mktemp -d)"
trap 'rm -rf "$RECORD"' EXIT
step_start=$SECONDS
NAPARI_OZX_RECORD_DASK_MODULES="$RECORD" "$PY" -m pytest $(xdist_args) "$@"
times "newest environment, classic dask: $((SECONDS - step_start)) s"
if [ $# -eq 0 ]; then
  mapfile -t MODULES < <(cat "$RECORD"/*.txt | sort -u)
  [ ${#MODULES[@]} -gt 0 ] || { echo "test-newest: no module recorded a dask array" >&2; exit 1; }
  echo "test-newest: ${#MODULES[@]} test modules make dask arrays; they run again with dask's array query planning on (their slow tests once, above)"
  MODULES+=(-m "not slow")  # mypy, child pytests, whole exports: ran twice already
else
  MODULES=("$@")
  echo "test-newest: the same tests again with dask's array query planning on"
fi
step_start=$SECONDS
DASK_ARRAY__QUERY_PLANNING=True "$PY" -m pytest $(xdist_args) "${MODULES[@]}"
times "newest environment, dask query planning: $((SECONDS - step_start)) s"
