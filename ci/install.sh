#!/usr/bin/env bash
# Installs what aten_fpga needs on a fresh machine (Python 3.11, g++): torch pinned to 2.13.0
# (the CPU build), then the package itself, editable, with its build and test tools (the test
# extra pins transformers for tests/test_zoo.py).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check torch==2.13.0
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'

# XRT's headers and libraries (Debian's libxrt-dev, XRT 2.13): the tests check that XRT's own
# xrt::xclbin reads our torch.xclbin. Optional: without it those tests skip, saying why.
# Debian's clang: Vitis HLS parses kernels with clang, and tests/test_build_cxx14.py compiles every
# kernel with it too (that test fails without it).
if [ ! -e /usr/include/xrt/experimental/xrt_xclbin.h ] || ! command -v clang++ >/dev/null; then
  sudo=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo="sudo -n"; fi
  if command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
    { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libxrt-dev clang >/dev/null; } \
      || echo "ci/install.sh: could not install libxrt-dev and clang; the XRT tests will skip, test_build_cxx14 will fail" >&2
  else
    echo "ci/install.sh: apt-get unavailable (or not root); skipping libxrt-dev and clang, the XRT tests will skip" \
      "and test_build_cxx14 will fail" >&2
  fi
fi
