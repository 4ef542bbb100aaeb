#!/usr/bin/env bash
# Installs what aten_fpga needs on a fresh machine (Python 3.11, g++): torch pinned to 2.13.0
# (the CPU build), then the package itself, editable, with its build and test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check torch==2.13.0
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
