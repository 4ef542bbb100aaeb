"""Accounting: aten_fpga.report() per op (FPGA launches, CPU fallbacks, bytes synced each way,
time), the ATEN_FPGA_FALLBACK policy, and FPGA launches as named ranges in torch.profiler."""
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import aten_fpga
from runtime_support import exact, last_json, op_report, run_python


def test_report_counts_launches_fallbacks_and_bytes_each_way():
    a, b = torch.randn(1000), torch.randn(1000)
    x, y = a.to("fpga"), b.to("fpga")  # written to the host shadows: nothing synced yet
    aten_fpga.reset_stats()
    s = x + y        # both inputs go to the device: 2 x 4000 bytes
    p = s * y        # all on the device already
    e = torch.lgamma(p)  # fallback: p comes back to the host (4000 bytes), e is written there
    q = e + x        # e goes to the device; x is there
    host = q.cpu()   # 4000 bytes back
    exact(q, torch.lgamma((a + b) * b) + a)
    rep = aten_fpga.report()
    assert {k: rep["add.out"][k] for k in ("fpga", "cpu_fallback", "bytes_to_device", "bytes_to_host")} == \
        {"fpga": 2, "cpu_fallback": 0, "bytes_to_device": 12000, "bytes_to_host": 0}
    assert op_report("mul.out") == {"fpga": 1, "cpu_fallback": 0, "bytes_to_device": 0, "bytes_to_host": 0}
    assert op_report("lgamma.out") == {"fpga": 0, "cpu_fallback": 1, "bytes_to_device": 0, "bytes_to_host": 4000}
    # the .cpu() above and exact()'s own .cpu(): each a transfer of q (the device copy alone is current)
    assert op_report("_copy_from")["bytes_to_host"] == 2 * 4000
    assert rep["add.out"]["fpga_seconds"] > 0 and rep["lgamma.out"]["cpu_seconds"] > 0
    assert rep["add.out"]["cpu_seconds"] == 0 and rep["lgamma.out"]["fpga_seconds"] == 0
    # each FPGA run launched one kernel, named per kernel
    assert rep["add.out"]["launches"] == 2 and rep["add.out"]["kernels"] == {"v_add_float32": 2}
    assert rep["mul.out"]["kernels"] == {"v_mul_float32": 1}
    assert rep["lgamma.out"]["launches"] == 0 and rep["lgamma.out"]["kernels"] == {}
    del host
    text = aten_fpga.format_report()
    assert text.splitlines()[0].split() == ["op", "fpga", "launches", "cpu_fallback", "to_device", "to_host",
                                            "fpga_ms", "cpu_ms", "u250_ms", "u250_mJ"]
    assert any(line.split()[:4] == ["add.out", "2", "2", "0"] for line in text.splitlines())
    aten_fpga.reset_stats()
    assert aten_fpga.report() == {} and aten_fpga.stats() == {}


def test_profiler_shows_each_launch_as_a_named_range():
    x = torch.randn(5000).to("fpga")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        y = x + x
        y = y * x
        y = y + 1
    names = [e.name for e in prof.events()]
    assert names.count("v_add_float32") == 2 and names.count("v_mul_float32") == 1
    launch = next(e for e in prof.events() if e.name == "v_mul_float32")
    parent = launch.cpu_parent
    while parent is not None and not parent.name.startswith("aten::mul"):
        parent = parent.cpu_parent
    assert parent is not None  # the range sits inside its ATen op


POLICY_SCRIPT = """
    import json, warnings, torch, aten_fpga
    r = {}
    x = torch.randn(10).to("fpga")
    r["fpga_op"] = (x + x).cpu().tolist() == (x.cpu() * 2).tolist()  # kernels are never affected
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            torch.lgamma(x); torch.lgamma(x); torch.digamma(x)
            r["ran"] = True
        except RuntimeError as e:
            r["error"] = str(e).splitlines()[0]
    r["warnings"] = [str(m.message) for m in w if "aten_fpga" in str(m.message)]
    r["stats"] = aten_fpga.stats().get("lgamma.out")
    print(json.dumps(r))
"""


@pytest.mark.parametrize("policy", ["silent", "warn", "error"])
def test_fallback_policy(policy):
    r = last_json(run_python(POLICY_SCRIPT, ATEN_FPGA_FALLBACK=policy))
    assert r["fpga_op"]
    if policy == "silent":
        assert r["ran"] and r["warnings"] == [] and r["stats"] == {"fpga": 0, "cpu_fallback": 2}
    elif policy == "warn":  # once per op
        assert r["ran"] and r["stats"] == {"fpga": 0, "cpu_fallback": 2}
        assert r["warnings"] == [
            "aten_fpga: lgamma.out has no FPGA kernel and runs on the CPU (ATEN_FPGA_FALLBACK=warn)",
            "aten_fpga: digamma.out has no FPGA kernel and runs on the CPU (ATEN_FPGA_FALLBACK=warn)"]
    else:
        assert "ran" not in r and r["stats"] is None
        assert r["error"].startswith("aten_fpga: lgamma.out has no FPGA kernel (ATEN_FPGA_FALLBACK=error)")
        assert "native_functions_fpga.yaml" in r["error"]


def test_bad_fallback_policy_is_named():
    r = run_python("import torch, aten_fpga; torch.lgamma(torch.ones(2, device='fpga'))", ATEN_FPGA_FALLBACK="loud")
    assert r.returncode != 0 and "ATEN_FPGA_FALLBACK='loud': expected silent, warn or error" in r.stderr


def test_reductions_share_the_launch_path():
    # A reduction is booked like a pointwise op: its run, launch, syncs and time go to its op (not
    # to "(outside ops)"), and its launch is a named range in the profiler.
    a = torch.randn(4096)
    x = a.to("fpga")  # host copy newer: the reduction syncs it to the device
    aten_fpga.reset_stats()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        s = x.sum()
    # float32 sums fold in float lanes, then merge in double (docs/reductions.md): as close to the
    # exact sum as ATen's own float sum, not bit for bit the double sum rounded once.
    torch.testing.assert_close(s.cpu(), a.double().sum().float())
    rep = aten_fpga.report()
    assert rep["sum.IntList_out"]["fpga"] == 1 and rep["sum.IntList_out"]["kernels"] == {"v_sum_float32": 1}
    assert rep["sum.IntList_out"]["bytes_to_device"] == 4096 * 4 and rep["sum.IntList_out"]["fpga_seconds"] > 0
    assert "(outside ops)" not in rep
    assert [e.name for e in prof.events()].count("v_sum_float32") == 1


def test_an_op_that_launches_no_kernel_is_no_fpga_run():
    x = torch.randn(0).to("fpga")
    aten_fpga.reset_stats()
    y = x + x  # empty: ATen's meta and impl run, but no kernel is launched
    assert y.shape == (0,)
    assert aten_fpga.stats() == {}
