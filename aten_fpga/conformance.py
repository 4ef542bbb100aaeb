"""python -m aten_fpga.conformance [--sweep] [--quick] [--samples N] [--ops a,b] [--json PATH] [--write-docs]

Runs PyTorch's own OpInfo samples (`torch.testing._internal.common_methods_invocations.op_db`) on
device "fpga" against the same samples on the CPU. Every input tensor is made valid only in device
memory first (a device-side copy), as when one fpga op feeds the next, so an op that reads a stale
host shadow gives a wrong answer (with ATEN_FPGA_SANITIZE=1 a poisoned one).

- The table run (default): every op in the FPGA table, in its functional, in-place and out=
  variants, for every dtype the table lists, counting the kernels its samples launched.
- The sweep (--sweep): every OpInfo of op_db, float32 and complex64 where the op defines it on the
  CPU, the first few samples of each, in the variants the OpInfo describes. Each failure gets a
  reason and a class. Ops run in forked processes so that a crash or a hang is recorded as a
  failure of that op instead of ending the run. --write-docs puts the results in
  docs/conformance.md.

Exits 1 if anything failed (the sweep: if fewer than 99% of its checks passed).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

import torch
from torch.utils._pytree import tree_flatten, tree_map

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "native_functions_fpga.yaml")
DOC = os.path.join(ROOT, "docs", "conformance.md")
SWEEP_TARGET = 0.99  # fraction of the sweep's checks that must pass
SWEEP_DTYPES = (torch.float32, torch.complex64)
OP_TIMEOUT = 120.0  # seconds one OpInfo's checks may take in the sweep before it counts as hung

# Ops with no FPGA kernel, run in the table run to show the fallback is faithful (float32, functional).
FALLBACK_SAMPLE = ("kthvalue", "median", "nanmedian", "mode", "searchsorted", "bucketize", "histc", "lgamma",
                   "digamma", "transpose")
# Table ops PyTorch has no OpInfo for, or whose OpInfo is named after the composite that reaches
# them (softmax, batch_norm, nll_loss...), backward ops (the samples do not require grad), the
# multi-tensor and fused optimizer ops (not in op_db), and the random ops, which draw from the
# device's own generator (a stream of its own, docs/rng.md): their coverage is in
# tests/test_kernels_*.py and tests/test_model_*.py.
NO_OPINFO: frozenset[str] = frozenset({
    "threshold_backward", "sigmoid_backward", "tanh_backward", "silu_backward", "leaky_relu_backward",
    "elu_backward", "hardtanh_backward", "gelu_backward", "relu_", "hardtanh_", "mse_loss_backward",
    "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward",
    "_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
    "native_batch_norm", "native_batch_norm_backward", "native_layer_norm", "native_layer_norm_backward",
    "native_group_norm", "native_group_norm_backward",
    "_adaptive_avg_pool2d_backward", "avg_pool2d_backward", "convolution_backward_overrideable",
    "embedding_dense_backward", "unfold_backward", "copy_",
    "_foreach_add", "_foreach_add_", "_foreach_addcdiv_", "_foreach_addcmul_", "_foreach_div", "_foreach_div_",
    "_foreach_lerp_", "_foreach_maximum_", "_foreach_mul", "_foreach_mul_", "_foreach_neg", "_foreach_neg_",
    "_foreach_sqrt", "_foreach_sqrt_", "_fused_adam_", "_fused_adamw_", "_fused_sgd_",
    "bernoulli_", "exponential_", "normal_", "random_", "uniform_", "native_dropout", "randperm",
    "hardsigmoid_backward", "hardswish_backward", "mish_backward", "softplus_backward",
    "upsample_bilinear2d_backward", "upsample_nearest2d_backward", "upsample_bicubic2d_backward",
    "_weight_norm_interface", "_weight_norm_interface_backward", "_ctc_loss_backward"})
# OpInfos named after the composite op that reaches a table op: the table run runs them too.
REACHES: dict[str, tuple[str, ...]] = {
    "fft.fft": ("_fft_c2c",), "fft.rfft": ("_fft_r2c",), "fft.irfft": ("_fft_c2r",),
    "nn.functional.conv2d": ("convolution_overrideable",),
    "nn.functional.adaptive_avg_pool2d": ("_adaptive_avg_pool2d",),
    "nn.functional.max_pool2d": ("max_pool2d_with_indices",),
    "nn.functional.pad.reflect": ("reflection_pad1d",),
    "masked_fill": ("masked_fill_",), "fill": ("fill_",), "index_put": ("_index_put_impl_",),
    "__getitem__": ("index",), "logcumsumexp": ("_logcumsumexp",),
    "nn.functional.interpolate.bilinear": ("upsample_bilinear2d",),
    "nn.functional.interpolate.nearest": ("upsample_nearest2d",),
    "nn.functional.interpolate.bicubic": ("upsample_bicubic2d",),
    "cummax": ("_cummax_helper",), "cummin": ("_cummin_helper",), "argsort": ("sort",),
    "nn.functional.ctc_loss": ("_ctc_loss",)}
# Table ops whose OpInfo samples only call overloads the table leaves to the fallback: clamp's
# samples pass tensor bounds (clamp.Tensor); the table runs the scalar-bound overloads.
SAMPLES_USE_OTHER_OVERLOADS = frozenset({"clamp", "clamp_min", "clamp_max"})
# Table ops whose float16 kernels compute in float32 and round once, where ATen's float16 CPU
# kernels round intermediate steps (addr's outer product and sum, batch norm's statistics): their
# float16 results differ from the CPU's by about an ulp of the result (and batch norm's statistics
# of an empty batch come back as float32). Their own tests compare them with the CPU's float32
# result rounded to float16 (tests/test_kernels_gemm.py, tests/test_kernels_norm.py).
ROUNDS_ONCE_IN_FLOAT16 = frozenset({"addr", "native_batch_norm"})


# --- one check: a sample through one variant, on "fpga" against the CPU ------------------------------

def device_only(t: torch.Tensor) -> torch.Tensor:
    """A contiguous fpga copy of the CPU tensor `t` whose bytes are valid only in device memory,
    as if an fpga kernel had produced it: `t` goes to the device every other element, and gathering
    that strided view is a copy on the device (a dense `.to("fpga").clone()` would be a block copy
    of the host shadow, valid on the host)."""
    spread = torch.empty((t.numel(), 2), dtype=t.dtype)
    spread[:, 0] = t.reshape(-1)
    return spread.to("fpga")[:, 0].clone().view(t.shape)


def _storage_view(x: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    return flat.as_strided(x.size(), x.stride(), x.storage_offset())


def for_side(x, side: str):
    """A fresh copy of `x`, a value of a sample made for device "fpga", for one side of a check.
    fpga tensors keep their exact view (sizes, strides, storage offset, overlap) over a copy of
    their whole storage: on the CPU side a CPU copy; on the "fpga" side a copy valid only in device
    memory (`device_only`). Tensors the sample keeps on the CPU stay there; on the CPU side, devices
    named in the sample become "cpu"."""
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided or x.is_conj() or x.is_neg():
            return x.to(side) if x.device.type == "fpga" else x.clone()
        storage = x.untyped_storage()
        flat = torch.empty(0, dtype=x.dtype, device=x.device).set_(storage, 0, (storage.nbytes() // x.element_size(),))
        if x.device.type != "fpga":
            return _storage_view(x, flat.clone())
        return _storage_view(x, device_only(flat.cpu()) if side == "fpga" else flat.cpu())
    if side == "cpu" and isinstance(x, torch.device) and x.type == "fpga":
        return torch.device("cpu")
    if side == "cpu" and isinstance(x, str) and x.split(":")[0] == "fpga":
        return "cpu"
    return x


def _call(fn, sample, side: str, out_like=None, seed: int = 0):
    """Run `fn` on a fresh copy of `sample` for `side`, after torch.manual_seed(seed) (which seeds
    the device's generator too). `out_like`: the CPU's functional result, whose shapes and dtypes
    give out= tensors."""
    args = tree_map(lambda x: for_side(x, side), (sample.input, *sample.args))
    kwargs = tree_map(lambda x: for_side(x, side), sample.kwargs)
    if out_like is not None:
        kwargs["out"] = tree_map(lambda t: torch.empty_like(t, device=side) if isinstance(t, torch.Tensor) else t,
                                 out_like)
    torch.manual_seed(seed)
    return fn(*args, **kwargs)


def _first_line(ex: BaseException) -> str:
    lines = [line for line in str(ex).splitlines() if line.strip()]
    return lines[0].strip()[:200] if lines else ""


def _compare(actual, expected, metadata_only: bool) -> str | None:
    """Why `actual` (run on "fpga") is not `expected` (the CPU's), or None."""
    flat_a, spec_a = tree_flatten(actual)
    flat_e, spec_e = tree_flatten(expected)
    if spec_a != spec_e:
        return f"result structure differs: {spec_a} on fpga, {spec_e} on the CPU"
    for a, e in zip(flat_a, flat_e):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"returned {type(a).__name__} where the CPU returned a tensor"
            if a.device.type != ("fpga" if e.device.type == "cpu" else e.device.type):
                return f"result on {a.device}, not fpga"
            if (a.dtype, a.shape) != (e.dtype, e.shape):
                return f"dtype/shape differ: {a.dtype}{list(a.shape)} on fpga, {e.dtype}{list(e.shape)} on the CPU"
            if metadata_only or e.layout != torch.strided:
                continue
            a = a.cpu()
            if a.is_floating_point() or a.is_complex():
                stale = torch.isnan(a) & ~torch.isnan(e)
                if stale.any():
                    return f"NaN where the CPU has a number ({int(stale.sum())} of {e.numel()} elements)"
            try:
                torch.testing.assert_close(a, e, equal_nan=True)
            except AssertionError as ex:
                detail = [line.strip() for line in str(ex).splitlines() if line.strip().startswith(("Mismatched", "Greatest absolute"))]
                return "values differ: " + "; ".join(detail or [_first_line(ex)])
        else:
            try:
                torch.testing.assert_close(a, e, equal_nan=True)
            except Exception:  # noqa: BLE001 -- not numbers: equality decides
                if not (a == e):
                    return f"returned {a!r} where the CPU returned {e!r}"
    return None


def check(fn, sample, variant: str = "functional", metadata_only: bool = False) -> str | None:
    """One variant ("functional", "inplace" or "out") of `fn` on one sample: None if "fpga" agrees
    with the CPU (the same result, or the same exception type), else why not."""
    out_like = None
    if variant == "out":
        try:
            out_like = _call(fn, sample, "cpu")
        except Exception:  # noqa: BLE001 -- the functional form rejects the sample: out= must too
            out_like = None
        if not isinstance(out_like, torch.Tensor) and not (
                isinstance(out_like, tuple) and out_like and all(isinstance(t, torch.Tensor) for t in out_like)):
            return None  # no tensor result for out= to hold: nothing to check
    try:
        expected = _call(fn, sample, "cpu", out_like)
    except Exception as cpu_ex:  # noqa: BLE001 -- the CPU rejects this sample: fpga must reject it too
        try:
            _call(fn, sample, "fpga", out_like)
        except Exception as ex:  # noqa: BLE001
            if type(ex) is type(cpu_ex):
                return None
            return f"fpga raised {type(ex).__name__} where the CPU raised {type(cpu_ex).__name__}: {_first_line(ex)}"
        return f"the CPU raised {type(cpu_ex).__name__} ({_first_line(cpu_ex)}), fpga returned a result"
    try:
        actual = _call(fn, sample, "fpga", out_like)
    except Exception as ex:  # noqa: BLE001 -- a conformance failure, recorded with its reason
        return f"fpga raised {type(ex).__name__}: {_first_line(ex)}"
    if not metadata_only and _compare(_call(fn, sample, "cpu", out_like, seed=1), expected, False) is not None:
        # A random op (its CPU result depends on the seed): "fpga" draws from the device's own
        # generator (docs/rng.md), so its numbers are not the CPU's. It must give the CPU's dtypes
        # and shapes, and the same numbers again for the same seed.
        why = _compare(actual, expected, metadata_only=True)
        if why is None and _compare(_call(fn, sample, "fpga", out_like), _on_cpu(actual), False) is not None:
            why = "random op not reproducible: the same seed gave other numbers"
        return why
    return _compare(actual, expected, metadata_only)


def _on_cpu(result):
    return tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, result)


def failure_class(reason: str) -> str:
    """The class of a failure reason: the reason without its numbers, shapes and names."""
    if reason.startswith("values differ"):
        return "values differ"
    if reason.startswith("NaN where the CPU has a number"):
        return "NaN where the CPU has a number (a read of a stale copy)"
    if reason.startswith("dtype/shape differ"):
        return "dtype/shape differ"
    text = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "'…'", reason)
    text = re.sub(r"\[[^\]]*\]|\([^)]*\)", "(…)", text)
    text = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", text)
    return text[:140]


# --- the table run -----------------------------------------------------------------------------------

@dataclass
class Result:
    op: str  # OpInfo name (with variant)
    kind: str  # "table" or "fallback"
    aten: tuple[str, ...]  # the table's ATen operators it exercises
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    fpga_runs: int = 0
    cpu_fallbacks: int = 0
    failures: list[str] = field(default_factory=list)

    def record(self, what: str, reason: str | None) -> None:
        if reason is None:
            self.passed += 1
        else:
            self.failed += 1
            self.failures.append(f"{what}: {reason}")


def _table_ops() -> dict[str, tuple[torch.dtype, ...]]:
    """ATen base name -> dtypes, from the table (without loading PyTorch's own table)."""
    from codegen.table import load_table

    out: dict[str, set] = defaultdict(set)
    for e in load_table(TABLE).entries:
        out[e.func.split(".")[0]].update(getattr(torch, d) for d in e.dtypes)
    return {k: tuple(sorted(v, key=str)) for k, v in out.items()}


def _variants(opinfo, all_variants: bool):
    """(variant name, callable) pairs the OpInfo describes."""
    yield "functional", opinfo.op
    if all_variants and opinfo.inplace_variant is not None:
        yield "inplace", opinfo.inplace_variant
    if all_variants and opinfo.supports_out:
        yield "out", opinfo.op


def run_opinfo(opinfo, dtypes, kind: str, quick: bool, reaches: tuple[str, ...] = ()) -> Result:
    import aten_fpga

    result = Result(_full_name(opinfo), kind, reaches or (_aten_name(opinfo),))
    supported = opinfo.supported_dtypes("cpu")
    before = aten_fpga.stats()
    for dtype in dtypes:
        if dtype not in supported:
            result.skipped += 1
            continue
        torch.manual_seed(0)
        samples = list(opinfo.sample_inputs("fpga", dtype, requires_grad=False))
        if quick:  # the three largest: 0-dim samples often take shortcuts that reach no kernel
            samples = sorted(samples, key=lambda s: -(s.input.numel() if isinstance(s.input, torch.Tensor) else 0))[:3]
        for i, s in enumerate(samples):
            for variant, fn in _variants(opinfo, kind == "table"):
                what = f"{dtype} sample {i}" + ("" if variant == "functional" else f" {variant}")
                result.record(what, check(fn, s, variant))
    # The FPGA runs of the ops it reaches (not the copies that made its inputs), and every fallback
    # while its samples ran (composite ops run several ATen ops).
    for op, counts in aten_fpga.stats().items():
        b = before.get(op, {"fpga": 0, "cpu_fallback": 0})
        if op.split(".")[0] in result.aten:
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
        reached = REACHES.get(_full_name(opinfo), (base, base + "_"))  # an in-place op by its OpInfo
        reached = tuple(op for op in reached if op in table and op not in NO_OPINFO and (not only or op in only or base in only))
        if reached:
            dtypes = {d for op in reached for d in table[op]}
            if not any(d.is_complex for d in opinfo.supported_dtypes("cpu")):  # rfft: complex64 from float32
                dtypes = {d.to_real() for d in dtypes}
            dtypes = sorted(dtypes, key=str)
            # A composite's largest samples may all take its fallback (an FFT of 3 x 5): all of them.
            results.append(run_opinfo(opinfo, dtypes, "table", quick and _full_name(opinfo) not in REACHES, reached))
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


# --- the sweep of all of op_db -----------------------------------------------------------------------

def _full_name(opinfo) -> str:
    return opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")


def sweep_op(opinfo, samples: int, skip: int = 0):
    """The sweep's checks of one OpInfo, as events: before check number n, {"check_started": n}
    with the check's key; after it, its record (the key and "reason": None when it passed).
    Checks before number `skip` are not run."""
    supported = opinfo.supported_dtypes("cpu")
    n = 0
    for dtype in SWEEP_DTYPES:
        if dtype not in supported:
            continue
        torch.manual_seed(0)
        chosen = []
        try:
            for s in opinfo.sample_inputs("fpga", dtype, requires_grad=False):
                chosen.append(s)
                if len(chosen) == samples:
                    break
        except Exception as ex:  # noqa: BLE001 -- PyTorch's own sample generator failed
            yield dict(op=_full_name(opinfo), dtype=str(dtype)[6:], sample=len(chosen), variant="samples", reason=None,
                       skipped=f"sample_inputs raised {type(ex).__name__}: {_first_line(ex)}")
        for i, s in enumerate(chosen):
            for variant, fn in _variants(opinfo, True):
                n += 1
                if n <= skip:
                    continue
                key = dict(op=_full_name(opinfo), dtype=str(dtype)[6:], sample=i, variant=variant)
                yield dict(check_started=n, **key)
                yield dict(key, reason=check(fn, s, variant, metadata_only=opinfo.has_nondeterministic_output))


def _selected(op_db, only: tuple[str, ...]):
    return [o for o in op_db if not only or o.name in only or _full_name(o) in only]


def sweep(ops: tuple[str, ...] = (), samples: int = 3, isolate: bool = True, progress=None) -> list[dict]:
    """Every OpInfo of op_db (or those named in `ops`): the records of their checks. `isolate`: in
    forked processes of a fresh interpreter, so that a crash or a hang is recorded as the failure of
    the check that caused it; otherwise in this process."""
    if isolate:
        return _sweep_isolated(ops, samples, progress)
    from torch.testing._internal.common_methods_invocations import op_db

    return [e for opinfo in _selected(op_db, ops) for e in sweep_op(opinfo, samples) if "check_started" not in e]


def _sweep_isolated(ops, samples, progress) -> list[dict]:
    """Runs this file as a script (not as part of the package, so aten_fpga is not loaded and
    nothing has started threads), which imports op_db once and forks workers (`_zygote`)."""
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, os.path.abspath(__file__), "--zygote", "--samples", str(samples), "--ops", ",".join(ops)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, cwd=ROOT)
    records = []
    for line in proc.stdout:
        msg = json.loads(line)
        if "op_started" in msg:
            if progress:
                progress(msg["name"])
        elif "check_started" not in msg:
            records.append(msg)
    if proc.wait() != 0:
        raise RuntimeError(f"the sweep's driver failed (exit {proc.returncode}): {' '.join(cmd)}")
    return records


def _zygote(ops: tuple[str, ...], samples: int) -> None:
    """The isolated sweep's driver. It forks a worker that runs the ops from a position on (an op
    and a check in it), passing on each event as a JSON line. A worker that dies, or gives no event
    for OP_TIMEOUT seconds, fails the check it had started (or its op, outside a check), and the
    next worker starts after it. Workers import aten_fpga themselves, after the fork."""
    torch.utils.rename_privateuse1_backend("fpga")  # before common_device_type reads the name
    from torch.testing._internal.common_methods_invocations import op_db

    todo = _selected(op_db, ops)
    op_index, skip = 0, 0
    while op_index < len(todo):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _worker(todo, op_index, skip, samples, write_fd)
        os.close(write_fd)
        started, failure = None, None  # the check under way, if any
        with os.fdopen(read_fd, "r") as pipe:
            while True:
                ready, _, _ = select.select([pipe], [], [], OP_TIMEOUT)
                if not ready:
                    os.kill(pid, signal.SIGKILL)
                    failure = f"timed out (nothing within {OP_TIMEOUT:.0f} s)"
                    break
                line = pipe.readline()
                if not line:
                    break
                msg = json.loads(line)
                if "op_started" in msg:
                    op_index, started = msg["op_started"], None
                elif "check_started" in msg:
                    started = msg
                else:
                    started = None
                sys.stdout.write(line)
                sys.stdout.flush()
        _, status = os.waitpid(pid, 0)
        if failure is None and status != 0:
            failure = (f"crashed ({signal.Signals(os.WTERMSIG(status)).name})" if os.WIFSIGNALED(status)
                       else f"the worker exited with status {os.WEXITSTATUS(status)}")
        if failure is None:
            return
        if started is not None:
            key = {k: started[k] for k in ("op", "dtype", "sample", "variant")}
            skip = started["check_started"]
        else:
            key = dict(op=_full_name(todo[op_index]), dtype="", sample="", variant="")
            op_index, skip = op_index + 1, 0
        sys.stdout.write(json.dumps(dict(key, reason=failure)) + "\n")
        sys.stdout.flush()


def _worker(todo, op_index: int, skip: int, samples: int, fd: int) -> None:
    """In a forked worker: quiet stdout and stderr (ops print and warn), then run the ops from
    todo[op_index] on, skipping that op's first `skip` checks, writing events to `fd`."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    status = 0
    try:
        import warnings

        import aten_fpga  # noqa: F401 -- registers the device in this process

        warnings.simplefilter("ignore")
        with os.fdopen(fd, "w") as out:
            for i in range(op_index, len(todo)):
                out.write(json.dumps({"op_started": i, "name": _full_name(todo[i])}) + "\n")
                out.flush()
                for event in sweep_op(todo[i], samples, skip if i == op_index else 0):
                    out.write(json.dumps(event) + "\n")
                    out.flush()
    except BaseException:  # noqa: BLE001 -- the driver reports the check that was under way
        status = 3
    os._exit(status)


@dataclass
class SweepSummary:
    checks: int
    passed: int
    failed: int
    skipped: int
    ops: int
    ops_all_passed: int
    classes: list[tuple[str, int]]  # failure class, count: most frequent first

    @property
    def rate(self) -> float:
        return self.passed / self.checks if self.checks else 0.0


def summarize(records: list[dict]) -> SweepSummary:
    checks = [r for r in records if not r.get("skipped")]
    failed = [r for r in checks if r["reason"]]
    by_op = defaultdict(list)
    for r in checks:
        by_op[r["op"]].append(r)
    classes = Counter(failure_class(r["reason"]) for r in failed)
    return SweepSummary(checks=len(checks), passed=len(checks) - len(failed), failed=len(failed),
                        skipped=len(records) - len(checks), ops=len(by_op),
                        ops_all_passed=sum(all(not r["reason"] for r in rs) for rs in by_op.values()),
                        classes=sorted(classes.items(), key=lambda kv: (-kv[1], kv[0])))


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def sweep_markdown(records: list[dict], command: str, seconds: float, image: str) -> str:
    """The sweep's results as the markdown section of docs/conformance.md."""
    s = summarize(records)
    lines = [f"`{command}` ({datetime.date.today().isoformat()}, image `{image}`, {seconds:.0f} s): "
             f"**{s.passed} of {s.checks} checks pass ({100 * s.rate:.2f}%)**; {s.failed} fail. "
             f"{s.ops} OpInfos ran, {s.ops_all_passed} of them with every check passing. A check is one "
             f"sample in one variant (functional, in-place, out=) and dtype.", ""]
    if s.skipped:
        lines += [f"{s.skipped} sample sets were skipped because PyTorch's own sample generator raised on the CPU.", ""]
    lines += ["### Failure classes", "", "| class | checks |", "|---|---|"]
    lines += [f"| {_md_cell(c)} | {n} |" for c, n in s.classes]
    lines += ["", "### Every failure", "", "| op | dtype | sample | variant | reason |", "|---|---|---|---|---|"]
    lines += [f"| `{r['op']}` | {r['dtype']} | {r['sample']} | {r['variant']} | {_md_cell(r['reason'])} |"
              for r in records if r["reason"]]
    return "\n".join(lines)


def write_docs(section: str, path: str = DOC) -> None:
    """Replace the text between the sweep markers of docs/conformance.md with `section`."""
    begin, end = "<!-- sweep results: generated by python -m aten_fpga.conformance --sweep --write-docs -->", "<!-- end of sweep results -->"
    with open(path) as f:
        text = f.read()
    if begin not in text:
        raise ValueError(f"{path} has no line {begin!r} to put the sweep's results after")
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1] if end in rest else ""
    with open(path, "w") as f:
        f.write(f"{head}{begin}\n\n{section}\n\n{end}{tail}")


# --- command line --------------------------------------------------------------------------------------

def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m aten_fpga.conformance", description=__doc__.splitlines()[0])
    p.add_argument("--sweep", action="store_true", help="sweep all of op_db instead of the table's ops")
    p.add_argument("--quick", action="store_true", help="table run: three samples per op and dtype")
    p.add_argument("--samples", type=int, default=3, help="sweep: samples per op and dtype (default 3)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--ops", default="", help="only these ops (table run: ATen base names; sweep: OpInfo names)")
    p.add_argument("--write-docs", action="store_true", help="sweep: put the results in docs/conformance.md")
    p.add_argument("--zygote", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    only = tuple(x for x in args.ops.split(",") if x)
    if args.zygote:
        _zygote(only, args.samples)
        return 0
    import aten_fpga

    t0 = time.time()
    if not args.sweep:
        results = run(args.quick, only)
        print(format_results(results))
        print(f"({time.time() - t0:.1f} s, image {aten_fpga.image()})")
        payload = [asdict(r) for r in results]
        failed = any(r.failed for r in results)
    else:
        records = sweep(only, args.samples, progress=lambda op: print(f"  {op}", file=sys.stderr, flush=True))
        seconds = time.time() - t0
        command = "python -m aten_fpga.conformance --sweep" + (f" --samples {args.samples}" if args.samples != 3 else "")
        image = os.path.relpath(aten_fpga.image(), ROOT) if aten_fpga.image() else "none"
        section = sweep_markdown(records, command + (f" --ops {args.ops}" if only else ""), seconds, image)
        print(section)
        if args.write_docs:
            write_docs(section)
        payload = records
        failed = summarize(records).rate < SWEEP_TARGET
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # run as a script (the sweep's driver): this folder is not a place to import from
    sys.exit(main())
