#!/usr/bin/env bash
# Sourced by quickstart.sh and test.sh: the clone's own virtual environment.
# A stock Debian 12+ / Ubuntu 23.04+ Python refuses `pip install` outside a virtual
# environment (PEP 668, "externally-managed-environment"), and installing into the base
# interpreter would change packages other tools pin. So napari-ozx lives in .venv in the
# clone (NAPARI_OZX_VENV overrides the place): created when missing, reused after.
VENV="${NAPARI_OZX_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
VENV="$(cd "$VENV" && pwd)"
PY="$VENV/bin/python"
# console scripts (napari, npe2, napari-ozx) for the tests and the user's first run
export PATH="$VENV/bin:$PATH"
pip_install() {
  "$PY" -m pip install -q --disable-pip-version-check "$@"
}
