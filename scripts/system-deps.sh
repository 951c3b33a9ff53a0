#!/usr/bin/env bash
# Debian/Ubuntu libraries that Qt 6 (PyQt6 wheels) and napari's OpenGL canvas need,
# plus Xvfb for headless use, and python3-venv (the scripts install into a virtual
# environment). Installs only what is missing.
set -euo pipefail
PACKAGES="xvfb xauth libgl1-mesa-dri libglx-mesa0 libegl1 libxkbcommon-x11-0 \
libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 \
libxcb-xinerama0 libxcb-xfixes0 libxcb-shape0 libxcb-cursor0 libdbus-1-3 libfontconfig1"
command -v dpkg-query >/dev/null || { echo "not a Debian-like system: install Qt 6 / OpenGL libraries yourself" >&2; exit 0; }
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# python3 -m venv needs ensurepip, which Debian ships apart (python3-venv)
python3 -c "import ensurepip, venv" 2>/dev/null || missing="$missing python3-venv"
[ -z "$missing" ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
