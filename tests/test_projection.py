"""aten_fpga.projection: the one performance model (bench/perf_model.py prints from it) projecting
what the host counted -- per op and kernel, launches, bytes and work -- onto a card's image:
report()'s projected_seconds, format_report(platform=...) and the profiler ranges' projected time.
The model moves the right way: twice the bytes about twice the time, more CUs less time until the
banks saturate, HBM ahead of DDR on memory-bound ops, a GEMM's work on its PE array."""
import dataclasses

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import aten_fpga
from aten_fpga import projection as pj
from aten_fpga.projection import ALIASES, PLATFORMS

ADD = "v_add_float32"
BIG = float(1 << 28)  # bytes: well past the launch latency and pipeline fill


def plat(alias: str, **changes):
    return dataclasses.replace(PLATFORMS[ALIASES[alias]], **changes)


def test_twice_the_bytes_about_twice_the_time():
    img = pj.image(4, plat("u250"))
    for member in (ADD, "v_neg_float32", "v_exp_float32", "v_sum_float32"):
        one, two = pj.launch_seconds(img, member, BIG), pj.launch_seconds(img, member, 2 * BIG)
        assert two / one == pytest.approx(2, rel=0.05), member  # a reduction's row drains amortize a little
    # small launches are their latency: the bytes hardly count
    assert pj.launch_seconds(img, ADD, 2048) == pytest.approx(pj.launch_seconds(img, ADD, 1024), rel=0.05)


def test_more_cus_less_time_until_the_banks_saturate():
    """A plan's CUs for the binary engine (as build.cus gives them): on a U250's four DDR banks, two
    CUs' four masters fill the banks; more share them."""
    times = {c: pj.launch_seconds(pj.image(4, plat("u250"), cus=(("binary", c),)), ADD, BIG) for c in (1, 2, 4, 8)}
    assert times[2] < 0.6 * times[1]
    assert times[4] == pytest.approx(times[2], rel=0.02) and times[8] == pytest.approx(times[2], rel=0.02)
    hbm = {c: pj.launch_seconds(pj.image(4, plat("u55c"), cus=(("binary", c),)), ADD, BIG) for c in (1, 2, 8, 16)}
    assert hbm[1] > hbm[2] > hbm[8]  # 32 pseudo-channels: more CUs keep helping longer


def test_hbm_beats_ddr_on_memory_bound_ops():
    ddr, hbm = pj.image(4, plat("u250")), pj.image(4, plat("u55c", stream_cus=16))
    for member in (ADD, "v_neg_float32", "v_sum_float32"):
        assert pj.launch_seconds(hbm, member, BIG) < 0.5 * pj.launch_seconds(ddr, member, BIG), member


def test_gemm_work_runs_on_the_pe_array():
    img = pj.image(4, plat("u250"))
    pm, pn = img.config.gemm_pe
    macs = 4096 ** 3
    t = pj.launch_seconds(img, "v_gemm_float32", 3 * 4096 * 4096 * 4, macs)
    assert t == pytest.approx(macs / (pm * pn * img.cus("gemm") * img.clock_hz), rel=0.01)
    assert pj.launch_seconds(img, "v_gemm_float32", 3 * 4096 * 4096 * 4, 2 * macs) == pytest.approx(2 * t, rel=0.01)


def test_report_projects_each_op_on_the_loaded_images_card():
    aten_fpga.reset_stats()
    x = torch.randn(1 << 20).to("fpga")
    y = torch.neg(torch.neg(x))  # chained: the second reads the first's output in device memory
    z = y + x
    a, b = torch.randn(64, 128).to("fpga"), torch.randn(128, 32).to("fpga")
    c = a @ b
    torch.testing.assert_close(z.cpu(), x.cpu() * 1 + x.cpu(), rtol=0, atol=0)
    torch.testing.assert_close(c.cpu(), a.cpu() @ b.cpu(), rtol=1e-4, atol=1e-4)
    rep = aten_fpga.report()
    assert aten_fpga.stats()["neg.out"]["fpga"] == 2
    neg = rep["neg.out"]
    assert neg["by_kernel"]["v_neg_float32"]["launches"] == 2
    img = pj.loaded_image()
    assert img.platform.alias == "u250"  # the emulated image is planned for the U250
    # with the CUs it was built with: the streaming engines' (not their narrow engines' one)
    assert img.cus("unary") == aten_fpga._C.kernel_cus("e_unary") == 2 and img.cus("unary_narrow") == 1
    per = neg["by_kernel"]["v_neg_float32"]["bytes"] / 2
    assert neg["bytes_to_device"] == 4 << 20  # the first neg synced x to the device: over the host link
    link = neg["bytes_to_device"] / (img.platform.host_link_gbps * 1e9)
    assert neg["projected_seconds"] == pytest.approx(2 * pj.launch_seconds(img, "v_neg_float32", per) + link)
    assert neg["projected_joules"] == pytest.approx(225 * neg["projected_seconds"])
    mm = next(r for op, r in rep.items() if "v_gemm_float32" in r["by_kernel"])
    assert mm["by_kernel"]["v_gemm_float32"]["work"] == 64 * 32 * 128  # multiply-adds, over its CUs
    u55c = aten_fpga.report(platform="u55c")
    assert u55c["neg.out"]["projected_seconds"] != neg["projected_seconds"]
    assert u55c["neg.out"]["projected_joules"] == pytest.approx(150 * u55c["neg.out"]["projected_seconds"])
    text = aten_fpga.format_report(platform="u55c")
    assert text.splitlines()[0].split()[-2:] == ["u55c_ms", "u55c_mJ"] and "projected on u55c (opt=4)" in text
    with pytest.raises(ValueError, match="unknown platform 'u999'"):
        aten_fpga.format_report(platform="u999")


def test_a_fallback_costs_its_cpu_time_and_the_host_link():
    aten_fpga.reset_stats()
    p = torch.rand(1000).to("fpga") + 1
    torch.lgamma(p)
    row = aten_fpga.report()["lgamma.out"]
    link = (row["bytes_to_device"] + row["bytes_to_host"]) / (PLATFORMS[ALIASES["u250"]].host_link_gbps * 1e9)
    assert row["cpu_fallback"] == 1 and row["projected_seconds"] == pytest.approx(row["cpu_seconds"] + link)


def test_profiler_ranges_carry_the_projected_time():
    x = torch.randn(5000).to("fpga")
    assert pj.install() == "u250"
    try:
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            torch.neg(torch.neg(x))
        launches = [e for e in prof.events() if e.name == "v_neg_float32"]
        assert len(launches) == 2
        img = pj.loaded_image()
        for e in launches:
            kw = e.kwinputs
            assert kw["platform"] == "u250" and kw["bytes"] == 2 * 5000 * 4
            want = pj.launch_seconds(img, "v_neg_float32", kw["bytes"]) * 1e6
            assert kw["projected_us"] == pytest.approx(want, rel=0.02)
        assert pj.install("u55c") == "u55c"
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            torch.neg(x)
        assert next(e for e in prof.events() if e.name == "v_neg_float32").kwinputs["platform"] == "u55c"
    finally:
        aten_fpga.load(aten_fpga.image())  # loading clears the table
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.neg(x)
    assert "projected_us" not in next(e for e in prof.events() if e.name == "v_neg_float32").kwinputs


def test_a_step_projects_both_ways():
    """step_projection: synchronous launches add the host's time to the device's, asynchronous ones
    overlap them (the longer of the two); the device idles less asynchronously; a host slower than
    the device makes the asynchronous step the host's (its launches' starts included)."""
    img = pj.image(4, plat("u250"))
    rows = {**pj.one_kernel_workload("add.out", ADD, 100, 100 * float(1 << 22)),
            **pj.one_kernel_workload("mm", "v_gemm_float32", 10, 10 * 3 * 4 * 512.0 ** 2, 10 * 512.0 ** 3)}
    busy = pj.workload_seconds(rows, img) - 110 * pj.LAUNCH_S
    fast_host = pj.step_projection(rows, img, 0.2 * busy)
    assert fast_host["launches"] == 110
    assert fast_host["device_busy_seconds"] == pytest.approx(busy)
    assert fast_host["sync_seconds"] == pytest.approx(1.2 * busy + 110 * pj.LAUNCH_S)
    assert fast_host["async_seconds"] == pytest.approx(busy)  # the host's work hides behind the device's
    assert fast_host["async_device_idle"] == pytest.approx(0.0, abs=1e-9)
    assert fast_host["sync_device_idle"] > 0.15
    slow_host = pj.step_projection(rows, img, 3 * busy)
    assert slow_host["async_seconds"] == pytest.approx(3 * busy + 110 * pj.LAUNCH_S)
    assert slow_host["sync_seconds"] > slow_host["async_seconds"] > slow_host["device_busy_seconds"]
