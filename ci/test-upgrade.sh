#!/usr/bin/env bash
# The upgrade job: the suite against the newest torch pyproject.toml accepts (2.14.1), reached the
# way a user upgrades. Run after ci/test.sh's main run (whose build/ was generated against torch
# 2.13.0): torch 2.14.1 goes into its own venv (the main environment keeps 2.13.0), `scons` at every
# level prints the upgrade report, writes build/upgrade-report.md and rebuilds the host extension
# against 2.14.1, then the tests run with that venv's python.
#
# PyPI's torch 2.14.1 pulls its CUDA packages: about 5.5 GB in the venv, and about 2.5 minutes to
# install where the wheels lie on disk (docs/upgrading.md, "In CI"). The venv is kept for the next
# run (ATEN_FPGA_UPGRADE_VENV to put it elsewhere). This leaves build/ for torch 2.14.1; a later
# `python3 -m SCons -Q` with torch 2.13.0 regenerates for it (printing that report in turn).
set -euo pipefail
cd "$(dirname "$0")/.."
torch_version=2.14.1
venv="${ATEN_FPGA_UPGRADE_VENV:-$HOME/.cache/aten_fpga/venv-torch-$torch_version}"
need_gb=8

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$torch_version')" 2>/dev/null; then
  mkdir -p "$(dirname "$venv")"
  free_gb=$(df -Pk "$(dirname "$venv")" | awk 'NR == 2 {print int($4 / 1048576)}')
  if [ "$free_gb" -lt "$need_gb" ]; then
    echo "ci/test-upgrade.sh: SKIPPED: torch $torch_version needs about $need_gb GB (its CUDA packages); $(dirname "$venv") has $free_gb GB free. Free some space, or point ATEN_FPGA_UPGRADE_VENV elsewhere." >&2
    exit 0
  fi
  python3 -m venv "$venv"
fi
start=$SECONDS
# A machine whose package index does not serve torch $torch_version cannot run this job: it says so
# and skips (the suite on 2.13.0 has run); a test that fails on the new torch still fails CI.
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "torch==$torch_version" -e '.[test]'; then
  echo "ci/test-upgrade.sh: SKIPPED: could not install torch $torch_version into $venv (see pip's message above)" >&2
  exit 0
fi
echo "ci/test-upgrade.sh: torch $torch_version in $venv ($((SECONDS - start)) s)"

for level in 1 2 3 4; do
  "$venv/bin/python" -m SCons -Q opt=$level
done
test -e build/upgrade-report.md && echo "ci/test-upgrade.sh: the upgrade report is build/upgrade-report.md"

export ATEN_FPGA_SANITIZE=1
"$venv/bin/python" -m pytest -q "$@"
