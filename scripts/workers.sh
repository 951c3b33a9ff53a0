#!/usr/bin/env bash
# Sourced by test.sh and test-newest.sh: pytest-xdist's arguments. One worker per core
# (NAPARI_OZX_TEST_WORKERS overrides; 0 runs the suite in pytest's own process); each test
# module stays on one worker, so its module-scoped fixtures are made once.
xdist_args() {
  local n="${NAPARI_OZX_TEST_WORKERS:-auto}"
  [ "$n" = "0" ] || echo "-n $n --dist loadfile"
}
