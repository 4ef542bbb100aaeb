"""python -m aten_fpga.compile export <folder> [--level N] <script.py> [args...]

Runs `script.py` (which runs a model under torch.compile(backend="aten_fpga")), then writes the HLS
source of every fused kernel it ran into <folder>, for `scons target=hw ... fused=<folder>`."""
from __future__ import annotations

import argparse
import runpy
import sys

from codegen.abi import LEVELS


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m aten_fpga.compile", description=__doc__.split("\n\n")[1])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="run a script, then write the fused kernels it ran")
    e.add_argument("folder")
    e.add_argument("--level", type=int, default=4, choices=LEVELS, help="XCL_OPT level of the sources (default 4)")
    e.add_argument("script", help="a Python script that runs the model under torch.compile")
    e.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    import aten_fpga.compile as afc

    sys.argv = [a.script, *a.args]
    runpy.run_path(a.script, run_name="__main__")
    written = afc.export(a.folder, a.level)
    if not written:
        print(f"{a.script} ran no fused kernel: nothing to export (does it call torch.compile(..., "
              f"backend=\"aten_fpga\") on fpga tensors?)", file=sys.stderr)
        return 1
    print(f"wrote {len(written)} fused kernel(s) at XCL_OPT {a.level} to {a.folder}; build them with "
          f"`scons target=hw opt={a.level} fused={a.folder} ...`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
