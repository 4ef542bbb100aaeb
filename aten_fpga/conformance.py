"""python -m aten_fpga.conformance [--quick] [--json PATH] [--ops a,b]

Runs PyTorch's own OpInfo samples (`torch.testing._internal.common_methods_invocations.op_db`)
for every op in the FPGA table on device "fpga" against the CPU -- functional, in-place and out=
variants, every dtype the table lists -- plus a sample of ops that only run through the CPU
fallback. Prints pass/fail/skip per op and totals; exits 1 if anything failed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field

import torch
from torch.utils._pytree import tree_map

import aten_fpga

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "native_functions_fpga.yaml")

# Ops with no FPGA kernel, run to show the fallback is faithful (float32, functional variant).
FALLBACK_SAMPLE = ("matmul", "cat", "sort", "softmax", "nn.functional.relu", "index_select", "cumsum",
                   "topk", "flip", "roll", "masked_fill", "gather", "mm", "transpose", "nn.functional.linear")


# Table ops PyTorch has no OpInfo for (their coverage is in tests/test_kernels_*.py).
NO_OPINFO: frozenset[str] = frozenset()
# Table ops whose OpInfo samples only call overloads the table leaves to the fallback: clamp's
# samples pass tensor bounds (clamp.Tensor); the table runs the scalar-bound overloads.
SAMPLES_USE_OTHER_OVERLOADS = frozenset({"clamp", "clamp_min", "clamp_max"})
# Table ops whose ATen impl bypasses the stub (gelu's calls GeluKernel(kCPU, ...)): they launch no
# kernel on "fpga" until they get a host: implementation (#10).
BYPASSES_STUB = frozenset({"gelu"})


@dataclass
class Result:
    op: str  # OpInfo name (with variant)
    kind: str  # "table" or "fallback"
    aten: str  # the ATen operator it exercises
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    fpga_runs: int = 0
    cpu_fallbacks: int = 0
    failures: list[str] = field(default_factory=list)


def _to(device):
    return lambda x: x.to(device) if isinstance(x, torch.Tensor) else x


def _cpu(x):
    return x.cpu() if isinstance(x, torch.Tensor) else x


def _table_ops() -> dict[str, tuple[torch.dtype, ...]]:
    """ATen base name -> dtypes, from the table (without loading PyTorch's own table)."""
    sys.path.insert(0, ROOT)
    from codegen.table import load_table

    out: dict[str, set] = defaultdict(set)
    for e in load_table(TABLE).entries:
        out[e.func.split(".")[0]].update(getattr(torch, d) for d in e.dtypes)
    return {k: tuple(sorted(v, key=str)) for k, v in out.items()}


def _compare(result: Result, what: str, run_cpu, run_fpga) -> None:
    try:
        expected = run_cpu()
    except Exception:  # the CPU rejects this sample: the device must reject it too
        try:
            run_fpga()
        except Exception:
            result.passed += 1
            return
        result.failed += 1
        result.failures.append(f"{what}: the CPU raised, fpga did not")
        return
    try:
        actual = run_fpga()
        flat_a, flat_e = torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)
        for a, e in zip(flat_a, flat_e):
            if isinstance(e, torch.Tensor):
                assert isinstance(a, torch.Tensor) and a.device.type == "fpga", f"result on {getattr(a, 'device', a)}"
                torch.testing.assert_close(a.cpu(), e, equal_nan=True)
            else:
                assert a == e or (a != a and e != e), f"{a!r} != {e!r}"
        result.passed += 1
    except Exception as ex:  # noqa: BLE001 -- a conformance failure, recorded with its reason
        result.failed += 1
        result.failures.append(f"{what}: {type(ex).__name__}: {str(ex).splitlines()[0][:300]}")


def run_opinfo(opinfo, dtypes, kind: str, quick: bool) -> Result:
    result = Result(opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else ""), kind,
                    _aten_name(opinfo))
    supported = opinfo.supported_dtypes("cpu")
    before = aten_fpga.stats()
    for dtype in dtypes:
        if dtype not in supported:
            result.skipped += 1
            continue
        torch.manual_seed(0)
        samples = list(opinfo.sample_inputs("cpu", dtype, requires_grad=False))
        if quick:  # the three largest: 0-dim samples often take shortcuts that reach no kernel
            samples = sorted(samples, key=lambda s: -(s.input.numel() if isinstance(s.input, torch.Tensor) else 0))[:3]
        for i, s in enumerate(samples):
            what = f"{dtype} sample {i}"
            args = (s.input, *s.args)
            fargs = tree_map(_to("fpga"), args)
            fkw = tree_map(_to("fpga"), s.kwargs)
            _compare(result, what, lambda: opinfo(*args, **s.kwargs), lambda: opinfo(*fargs, **fkw))
            if kind == "fallback":
                continue
            if opinfo.inplace_variant is not None and isinstance(s.input, torch.Tensor):
                ip = opinfo.inplace_variant
                _compare(result, what + " in-place",
                         lambda: ip(s.input.clone(), *s.args, **s.kwargs),
                         lambda: ip(fargs[0].clone(), *fargs[1:], **fkw))
            if opinfo.supports_out:
                try:
                    ref = opinfo(*args, **s.kwargs)
                except Exception:
                    continue
                if not isinstance(ref, torch.Tensor):
                    continue
                _compare(result, what + " out=",
                         lambda: opinfo(*args, **s.kwargs, out=torch.empty_like(ref)),
                         lambda: opinfo(*fargs, **fkw, out=torch.empty_like(ref, device="fpga")))
    # Every launch and fallback while this op's samples ran (composite ops run several ATen ops).
    for op, counts in aten_fpga.stats().items():
        b = before.get(op, {"fpga": 0, "cpu_fallback": 0})
        result.fpga_runs += counts["fpga"] - b["fpga"]
        result.cpu_fallbacks += counts["cpu_fallback"] - b["cpu_fallback"]
    return result


def _aten_name(opinfo) -> str:
    """The ATen operator an OpInfo exercises (nn.functional.silu's aten_name is its Python name)."""
    name = opinfo.aten_name
    return name.rsplit(".", 1)[-1] if name.startswith("nn.functional.") else name


def run(quick: bool = False, only: tuple[str, ...] = ()) -> list[Result]:
    from torch.testing._internal.common_methods_invocations import op_db

    table = _table_ops()
    results = []
    for opinfo in op_db:
        base = _aten_name(opinfo)
        if base in table and (not only or base in only):
            results.append(run_opinfo(opinfo, table[base], "table", quick))
        elif opinfo.name in FALLBACK_SAMPLE and not opinfo.variant_test_name and not only:
            results.append(run_opinfo(opinfo, (torch.float32,), "fallback", quick))
    return results


def format_results(results: list[Result]) -> str:
    width = max([len("op")] + [len(r.op) for r in results])
    lines = [f"{'op':<{width}}  {'kind':<8} {'pass':>5} {'fail':>5} {'skip':>5} {'fpga':>6} {'cpu':>6}"]
    for r in results:
        lines.append(f"{r.op:<{width}}  {r.kind:<8} {r.passed:>5} {r.failed:>5} {r.skipped:>5} "
                     f"{r.fpga_runs:>6} {r.cpu_fallbacks:>6}")
        lines += [f"    FAIL {f}" for f in r.failures[:5]]
    t = [sum(getattr(r, k) for r in results) for k in ("passed", "failed", "skipped")]
    lines.append(f"{t[0]} passed, {t[1]} failed, {t[2]} skipped")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m aten_fpga.conformance", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="three samples per op and dtype")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--ops", default="", help="only these table ops (ATen base names, comma separated)")
    args = p.parse_args(argv)
    t0 = time.time()
    results = run(args.quick, tuple(x for x in args.ops.split(",") if x))
    print(format_results(results))
    print(f"({time.time() - t0:.1f} s, image {aten_fpga.image()})")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in results], f, indent=1)
    return 1 if any(r.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
