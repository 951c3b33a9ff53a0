#!/usr/bin/env bash
# Install what a fresh Debian/Ubuntu machine lacks, then run the whole test suite in the
# clone's virtual environment (.venv: created if missing, reused after; see venv.sh).
# GUI tests need a real OpenGL context: pytest-xvfb starts Xvfb for them (one per worker).
# The suite is spread over the machine's cores (pytest-xdist; a test module stays on one
# worker, so its module-scoped fixtures are made once): NAPARI_OZX_TEST_WORKERS sets how
# many workers (0: none, in this process).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
. scripts/venv.sh
. scripts/workers.sh
pip_install -e ".[testing,pyqt6]"
# test data fetched once, before pytest: collection only looks for it (xdist's workers
# collect at the same time; downloading there raced on every fresh clone)
"$PY" -m tests._support.conformance
exec "$PY" -m pytest $(xdist_args) "$@"
