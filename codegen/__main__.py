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
    g.add_argument("--dtypes", default="", help="only kernels of these dtypes (e.g. float32,int64)")
    c = sub.add_parser(
        "check", help="report what another PyTorch version changes for the table (exit 0 valid, 1 broken, 2 bad input)",
        description="Compare the table's ops between two versions of PyTorch's native_functions.yaml: "
                    "removed/renamed ops, schema and dispatch changes, validity with the target, and new "
                    "ops in the families the table covers. See docs/upgrading.md.")
    c.add_argument("--table", default=os.path.join(ROOT, "native_functions_fpga.yaml"))
    c.add_argument("--native-functions", dest="target", metavar="PATH", default=None,
                   help="the target version's native_functions.yaml (or its folder); default: the installed torch's")
    c.add_argument("--baseline", metavar="PATH", default=None,
                   help="the version the table was written for; default: the one the build recorded "
                        "(build/gen/pytorch/record.json), else the installed torch's")
    c.add_argument("--gen", metavar="DIR", default=None,
                   help="the codegen folder whose recorded baseline is the default (default: build/gen)")
    c.add_argument("--json", action="store_true", help="print the report as JSON, for tools")
    args = p.parse_args(argv)

    if args.command == "check":
        return _check(args)

    from . import generate  # imports torchgen: kept out of `--help`
    from .interface import InterfaceError

    try:
        levels = tuple(int(x) for x in args.levels.split(","))
        kernels = tuple(x for x in args.kernels.split(",") if x)
        dtypes = tuple(x for x in args.dtypes.split(",") if x)
        written = generate.run(args.table, args.out, levels, kernels, dtypes=dtypes)
    except (TableError, InterfaceError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"codegen: {len(written[0])} files in {args.out} ({len(written[1])} changed)")
    return 0


def _check(args) -> int:
    import json

    from . import check

    try:
        report = check.check(args.table, args.target, args.baseline, args.gen)
    except TableError as e:
        if args.json:
            print(json.dumps({"error": str(e), "exit_status": check.EXIT_BAD_INPUT}))
        print(f"error: {e}", file=sys.stderr)
        return check.EXIT_BAD_INPUT
    sys.stdout.write(check.to_json(report) if args.json else check.format_text(report))
    return report.exit_status


if __name__ == "__main__":
    sys.exit(main())
