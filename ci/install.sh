#!/usr/bin/env bash
# Installs what aten_fpga needs on a fresh machine (Python 3.11, g++): torch pinned to 2.13.0
# (the CPU build), then the package itself, editable, with its build and test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check torch==2.13.0
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
# XRT's headers and libraries (Debian's libxrt-dev) let scons build the XRT device; without apt
# or root this is skipped and the extension is built without it.
if ! dpkg -s libxrt-dev >/dev/null 2>&1; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libxrt-dev; } >/dev/null 2>&1 \
      || echo "ci/install.sh: could not install libxrt-dev; building without the XRT device" >&2
  else
    echo "ci/install.sh: no apt-get as root; building without the XRT device" >&2
  fi
fi
