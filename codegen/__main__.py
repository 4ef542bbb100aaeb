"""python -m codegen {generate,check} -- see docs/table.md and docs/upgrading.md."""
from __future__ import annotations

import argparse
import os
import sys

from .model import LEVELS, TableError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m codegen", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write FPGAType.h/.cpp and the HLS kernel sources")
    g.add_argument("--table", default=os.path.join(ROOT, "native_functions_fpga.yaml"))
    g.add_argument("--out", default=os.path.join(ROOT, "build", "gen"))
    g.add_argument("--levels", default=",".join(map(str, LEVELS)), help="XCL_OPT levels, e.g. 2,4")
    g.add_argument("--kernels", default="", help="only these categories or ops (e.g. binary,mul)")
    args = p.parse_args(argv)

    from . import generate  # imports torchgen: kept out of `--help`

    try:
        if args.command == "generate":
            levels = tuple(int(x) for x in args.levels.split(","))
            kernels = tuple(x for x in args.kernels.split(",") if x)
            written = generate.run(args.table, args.out, levels, kernels)
            print(f"codegen: {len(written[0])} files in {args.out} ({len(written[1])} changed)")
            return 0
    except TableError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
