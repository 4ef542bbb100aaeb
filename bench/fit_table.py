"""What the images ask of each card: the resource estimate of the build's fit check
(site_scons/afpga/resources.py) for the whole table and for the mission's `kernels=binary,unary`,
on every platform at every XCL_OPT level, with the build's default CUs and GEMM array.

    PYTHONPATH=$PWD python3 bench/fit_table.py [--json PATH]

Prints the markdown table of docs/building.md ("Will it fit?"): CUs, the busiest bank's masters, and
each resource as a share of the budget (80% of what the shell leaves: up to 100% fits). Writes the
same rows as JSON (default build/bench/fit_table.json). It renders the kernels in memory, as
`scons -n target=hw platform=P opt=N` estimates them: no build is needed.
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import ROOT, machine, write_json  # noqa: E402

sys.path.insert(0, ROOT)
from aten_fpga.projection import image  # noqa: E402  (puts site_scons on the path)
from afpga import resources  # noqa: E402
from afpga.platforms import PLATFORMS  # noqa: E402

IMAGES = {"the whole table": (), "kernels=binary,unary": ("binary", "unary")}


def rows() -> list[dict]:
    out = []
    for what, wanted in IMAGES.items():
        for level in (1, 2, 3, 4):
            for p in PLATFORMS.values():
                fit = image(level, p, wanted).fit
                have = {r: getattr(fit.capacity.left, r) * resources.BUDGET for r in resources.RESOURCES}
                out.append({"image": what, "platform": p.alias, "opt": level, "cus": fit.cus,
                            "masters_per_bank": max(fit.ports_per_bank.values()), "fits": fit.fits,
                            "use": {r: getattr(fit.total, r) / have[r] if have[r] else None
                                    for r in resources.RESOURCES},
                            "overflows": [o.what for o in fit.overflows]})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "fit_table.json"))
    args = p.parse_args(argv)
    table = rows()
    for what in IMAGES:
        print(f"\n{what}:\n")
        print("| platform | opt | CUs (limit 128) | masters on the busiest bank (limit 15) | "
              + " | ".join(r.upper() for r in resources.RESOURCES) + " | fits |")
        print("|---" * (5 + len(resources.RESOURCES)) + "|")
        for r in (r for r in table if r["image"] == what):
            cells = [f"{u:.0%}" if u is not None else "-" for u in r["use"].values()]
            print(f"| {r['platform']} | {r['opt']} | {r['cus']} | {r['masters_per_bank']} | " + " | ".join(cells)
                  + f" | {'yes' if r['fits'] else 'no'} |")
    write_json(args.json, {"benchmark": "fit_table", "machine": machine(), "rows": table})
    return 0


if __name__ == "__main__":
    sys.exit(main())
