#!/usr/bin/env bash
# The whole test suite on the newest releases of zarr, dask, numcodecs and napari on the
# package index (issue 26): a second environment, .venv-newest (NAPARI_OZX_VENV_NEWEST
# overrides), beside the README's .venv. Then again with dask's array query planning on,
# once dask's query-planning arrays turn into numpy arrays: in dask 2026.8 they do not
# (np.asarray gives an object array of dask arrays, dask issue #11922), so napari cannot
# show any dask array under it, ours or another plugin's; the probe below says so and
# the query-planning run starts by itself when a dask release fixes it.
#
# zarr >= 3.2 needs Python >= 3.12: the newest Python 3.12+ found on PATH or under pyenv
# is used. Without one, this says so and runs on the Python there is (zarr's newest for
# it), so the query-planning run still happens.
set -euo pipefail
cd "$(dirname "$0")/.."
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
"$PY" -m pytest "$@"
if DASK_ARRAY__QUERY_PLANNING=True "$PY" -c "
import sys, numpy as np, dask.array as da
a = da.ones((2, 2), chunks=1)
sys.exit(0 if da.Array.__module__.startswith('dask.array._array_expr') and np.asarray(a).dtype == a.dtype else 1)
"; then
  echo "test-newest: the suite again with dask's array query planning on"
  DASK_ARRAY__QUERY_PLANNING=True "$PY" -m pytest "$@"
else
  echo "test-newest: dask's array query planning not run: its arrays do not convert to numpy" \
    "(np.asarray gives an object array; dask issue #11922), so napari can show no dask array under it"
fi
