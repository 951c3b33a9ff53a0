#!/usr/bin/env bash
# Install what a fresh Debian/Ubuntu machine lacks, then run the whole test suite.
# GUI tests need a real OpenGL context: pytest-xvfb starts Xvfb for them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
python3 -m pip install -q --disable-pip-version-check -e ".[testing,pyqt6]"
exec python3 -m pytest "$@"
