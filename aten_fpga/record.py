"""Record a workload into a plan: per ATen op it ran on "fpga", the kernels it launched (name, library
op, dtype, engine), their launch counts, bytes and launch sizes, and whether it ran as a kernel or
fell back to the CPU; the image to build for it (`build:`) and each op's projected time on the
loaded image's card. The plan is YAML, for a person to read and edit, and what
`scons plan=<file>` builds (docs/workflow.md).

    with aten_fpga.record("plan.yaml"):
        loss = model(x.to("fpga")).sum(); loss.backward()

    python -m aten_fpga.record -o plan.yaml script.py [args...]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import sys

import yaml

HEADER = """\
# An aten_fpga workload plan (aten_fpga.record). Build the image that serves it:
#   scons target=hw platform=u250 opt=4 plan={name}   (or target=emu to run it on the emulator)
# build.kernels / build.dtypes: what the image holds (default: the library ops and dtypes of the
#   kernels under ops:); build.cus: CUs per engine category, and build.gemm_pe: the GEMM's PE array
#   on the card (default: the build's, per card). As recorded: the CUs and array that serve these
#   ops best within {platform}'s budget, by the projection below (another card: record with
#   --platform, or edit).
# ops: per ATen op, its runs on fpga and CPU fallbacks, the bytes it synced over the host link, and
#   per kernel its launches, the device memory they spanned, their work (GEMM multiply-adds, FFT
#   samples) and launch sizes; projected_ms: its time on {platform} (aten_fpga.projection).
"""


def _delta(before: dict, after: dict) -> dict:
    """report()'s rows of what ran between two snapshots (counts subtracted, sizes included)."""
    out = {}
    for op, a in after.items():
        b = before.get(op)
        if b is None:
            out[op] = a
            continue
        row = {k: a[k] - b[k] for k in ("fpga", "launches", "cpu_fallback", "bytes_to_device", "bytes_to_host",
                                         "fpga_seconds", "cpu_seconds", "kernel_bytes")}
        row["by_kernel"] = {}
        for name, k in a["by_kernel"].items():
            was = b["by_kernel"].get(name, {"launches": 0, "bytes": 0, "work": 0, "sizes": []})
            counts = {}
            for entry in k["sizes"]:
                key = tuple(sorted((n, v) for n, v in entry.items() if n != "launches"))
                counts[key] = counts.get(key, 0) + entry["launches"]
            for entry in was["sizes"]:
                key = tuple(sorted((n, v) for n, v in entry.items() if n != "launches"))
                counts[key] = counts.get(key, 0) - entry["launches"]
            launches = k["launches"] - was["launches"]
            if launches:
                row["by_kernel"][name] = {"launches": launches, "bytes": k["bytes"] - was["bytes"],
                                          "work": k["work"] - was["work"],
                                          "sizes": [dict(key, launches=c) for key, c in counts.items() if c]}
        row["kernels"] = {n: k["launches"] for n, k in row["by_kernel"].items()}
        if row["fpga"] or row["cpu_fallback"] or row["launches"] or row["bytes_to_device"] or row["bytes_to_host"]:
            out[op] = row
    return out


def plan_of(rows: dict, workload: str = "", platform: str | None = None) -> dict:
    """The plan (a dict, as written) of report() rows: ops with their kernels, and the build for
    `platform` (default the loaded image's): the CUs and GEMM array that serve these rows best
    within that card's budget (projection.plan_image)."""
    from . import image, projection

    library = {k.name: k for k in projection.plan(projection.TABLE).kernels}
    img = projection.loaded_image(platform)
    projected = projection.project_rows(rows, img)
    ops = {}
    for op, r in sorted(rows.items(), key=lambda kv: -projected[kv[0]]["projected_seconds"]):
        kernels = {}
        for name, k in r["by_kernel"].items():
            lib = library.get(name)
            entry = {"op": lib.op.name, "dtype": lib.dtype.name, "engine": lib.op.category} if lib else {"fused": True}
            entry.update(launches=k["launches"], bytes=k["bytes"], work=k["work"])
            if k["sizes"]:
                entry["sizes"] = k["sizes"]
            kernels[name] = entry
        ops[op] = {"ran": "fallback" if r["cpu_fallback"] and not r["fpga"] else
                   "kernel" if not r["cpu_fallback"] else "kernel and fallback",
                   "fpga": r["fpga"], "cpu_fallback": r["cpu_fallback"],
                   "bytes_to_device": r["bytes_to_device"], "bytes_to_host": r["bytes_to_host"],
                   "fallback_cpu_ms": round(r["cpu_seconds"] * 1e3, 6) if r["cpu_fallback"] else 0,
                   "kernels": kernels, "projected_ms": round(projected[op]["projected_seconds"] * 1e3, 6)}
    ran = [k for o in ops.values() for k in o["kernels"].values() if "op" in k]
    total = sum(p["projected_seconds"] for p in projected.values())
    watts = projection.board_watts(img)
    build = {"kernels": sorted({k["op"] for k in ran}), "dtypes": sorted({k["dtype"] for k in ran})}
    planned = None
    if ran:  # the image holds only these kernels: its CUs and GEMM array get what the table's others took
        planned, entries = projection.plan_image(rows, img.platform, tuple(build["kernels"]), tuple(build["dtypes"]),
                                                 img.level)
        build.update(entries)
    return {"workload": {"script": workload, "image": image(), "platform": img.platform.alias, "opt": img.level,
                         "projected_ms": round(total * 1e3, 6),
                         "planned_ms": round(projection.workload_seconds(rows, planned) * 1e3, 6) if planned else None,
                         "projected_mj": round(watts * total * 1e3, 6) if watts else None},
            "build": build, "ops": ops}


def rows_of(doc: dict) -> dict:
    """report()-style rows of a plan (a loaded plan file), to project it on any image:
    projection.project_rows(rows_of(plan), projection.image(4, platform, kernels, dtypes, gemm_pe))."""
    return {op: {"fpga": o["fpga"], "cpu_fallback": o["cpu_fallback"], "bytes_to_device": o["bytes_to_device"],
                 "bytes_to_host": o["bytes_to_host"], "cpu_seconds": o.get("fallback_cpu_ms", 0) / 1e3,
                 "by_kernel": {n: {"launches": k["launches"], "bytes": k["bytes"], "work": k["work"]}
                               for n, k in o["kernels"].items()}}
            for op, o in doc["ops"].items()}


def write(path: str | os.PathLike, rows: dict, workload: str = "", platform: str | None = None) -> dict:
    doc = plan_of(rows, workload, platform)
    with open(path, "w", encoding="utf-8") as f:
        f.write(HEADER.format(name=os.path.basename(os.fspath(path)), platform=doc["workload"]["platform"]))
        yaml.safe_dump(doc, f, sort_keys=False, default_flow_style=None, width=110)
    return doc


@contextlib.contextmanager
def record(path: str | os.PathLike, workload: str = "", platform: str | None = None):
    """Record what runs inside the block and write its plan to `path` when the block ends (also
    when it raises). `workload`: a description kept in the plan; `platform`: the card the plan's
    build is for (default the loaded image's)."""
    from . import _C, _rows

    before = _rows()
    _C.set_record_sizes(True)
    try:
        yield
    finally:
        _C.set_record_sizes(False)
        write(path, _delta(before, _rows()), workload, platform)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m aten_fpga.record",
                                description="Run a script and write the plan of what it ran on fpga.")
    p.add_argument("-o", "--output", default="plan.yaml", help="the plan file to write (default plan.yaml)")
    p.add_argument("--platform", default=None, help="the card the plan's build is for: u250, u55c, ... (default the "
                                                    "loaded image's, the U250 for the emulated one)")
    p.add_argument("script", help="the Python script to run (as `python script.py args...` would)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    a = p.parse_args(argv)
    if not os.path.isfile(a.script):
        p.error(f"{a.script}: no such script")
    sys.argv = [a.script, *a.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(a.script)))
    if a.platform:
        from .projection import platform_of

        try:
            platform_of(a.platform)
        except ValueError as e:
            p.error(str(e))
    with record(a.output, workload=" ".join([a.script, *a.args]), platform=a.platform):
        runpy.run_path(a.script, run_name="__main__")
    with open(a.output, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    w = doc["workload"]
    falls = [op for op, o in doc["ops"].items() if o["cpu_fallback"]]
    print(f"wrote {a.output}: {len(doc['ops'])} ops, {len(doc['build']['kernels'])} library ops in the image"
          f" ({', '.join(doc['build']['dtypes'])}); {len(falls)} op(s) fell back to the CPU"
          f"{': ' + ', '.join(falls[:8]) if falls else ''}; projected on {w['platform']} opt={w['opt']}: "
          f"{w['projected_ms']:.3f} ms" + (f", {w['projected_mj']:.3f} mJ" if w["projected_mj"] is not None else "") +
          (f"; on the plan's image {w['planned_ms']:.3f} ms" if w["planned_ms"] is not None else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
