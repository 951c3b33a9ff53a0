#!/usr/bin/env bash
# Install napari-ozx (with PyQt6) into the clone's virtual environment (.venv, see
# venv.sh), make it napari's reader for OME-Zarr folders, and open the bundled sample
# .ozx in napari. Afterwards: `.venv/bin/napari image.ozx` (or `source .venv/bin/activate`).
# Without a display (a server, CI) napari runs on Xvfb and saves a screenshot instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
. scripts/venv.sh
pip_install -e ".[all]"
# napari's builtin reader also claims *.zarr and is preselected in its "which plugin?"
# dialog: record napari-ozx as the reader for OME-Zarr folders (undo: --undo)
"$VENV/bin/napari-ozx" set-default-reader
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec "$VENV/bin/napari" --plugin napari-ozx resources/cells.ozx
fi
exec xvfb-run -a -s "-screen 0 1400x900x24" "$PY" scripts/screenshot.py resources/cells.ozx quickstart.png
