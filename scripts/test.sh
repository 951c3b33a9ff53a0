#!/usr/bin/env bash
# Install what a fresh Debian/Ubuntu machine lacks, then run the whole test suite in the
# clone's virtual environment (.venv: created if missing, reused after; see venv.sh).
# GUI tests need a real OpenGL context: pytest-xvfb starts Xvfb for them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
. scripts/venv.sh
pip_install -e ".[testing,pyqt6]"
exec "$PY" -m pytest "$@"
