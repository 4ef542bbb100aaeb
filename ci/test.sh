#!/usr/bin/env bash
# The test command: install, build the emulated image at every XCL_OPT level and the host
# extension, then run the test suite (torch 2.13.0). Under CI (CI=true), or with
# ATEN_FPGA_TEST_UPGRADE=1, then the suite again on torch 2.14.1 (ci/test-upgrade.sh: a 5.5 GB venv);
# ATEN_FPGA_TEST_UPGRADE=0 skips that.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install.sh
for level in 1 2 3 4; do
  python3 -m SCons -Q opt=$level
done
# The coherence sanitizer (docs/runtime.md): a read that skipped a sync sees poison, not stale data.
export ATEN_FPGA_SANITIZE=1
python3 -m pytest -q "$@"
case "${ATEN_FPGA_TEST_UPGRADE:-${CI:-}}" in
  1|true) bash ci/test-upgrade.sh "$@" ;;
esac
