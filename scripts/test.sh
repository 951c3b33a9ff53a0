#!/usr/bin/env bash
# Install what a fresh Debian/Ubuntu machine lacks, then run the whole test suite.
# GUI tests need a real OpenGL context: pytest-xvfb starts Xvfb for them.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES="xvfb xauth libgl1-mesa-dri libglx-mesa0 libegl1 libxkbcommon-x11-0 \
libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 \
libxcb-xinerama0 libxcb-xfixes0 libxcb-shape0 libxcb-cursor0 libdbus-1-3 libfontconfig1"

missing=""
for p in $APT_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi

python3 -m pip install -q --disable-pip-version-check -e ".[testing,pyqt6]"
exec python3 -m pytest "$@"
