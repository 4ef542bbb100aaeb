"""bench/perf_model.py projects the image the build plans: its engines' CUs (variables.Config), each
CU's two masters and their banks (connectivity.plan), the members' compute lanes (codegen/model.py)
and the GEMM engine's PE arrays against the DSPs the rest of the image leaves (resources.estimate).
Each test changes or reads one of those and checks that the projection follows."""
import dataclasses
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import perf_model as pm  # noqa: E402  (puts site_scons on sys.path, as SConstruct does)
from afpga import platforms, resources, variables  # noqa: E402
from afpga.platforms import ALIASES, PLATFORMS  # noqa: E402
from codegen.engines import READ_BUNDLE, WRITE_BUNDLE  # noqa: E402

N = 1 << 24


def plat(alias: str, **changes):
    return dataclasses.replace(PLATFORMS[ALIASES[alias]], **changes)


def seconds(category: str, img, member: str | None = None) -> float:
    return pm.device_seconds(category, img, N, member)["seconds"]


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_engine_cus_are_the_builds(level):
    for p in PLATFORMS.values():
        img = pm.image(level, p)
        for category in img.engines:
            if category == "gemm" and level == 4:
                want = platforms.gemm_cus(p, platforms.GEMM_PE[p.alias])
            else:
                streaming = {3: p.stream_cus, 4: p.vector_stream_cus or p.stream_cus}.get(level, 1)
                if level == 4:
                    streaming = dict(p.vector_stream_cus_of).get(category, streaming)
                want = streaming if category in variables.STREAMING else 1
            assert img.cus(category) == want, (p.alias, category)
    assert pm.image(4, plat("u55c")).cus("binary") == 2 and pm.image(4, plat("u250")).cus("binary") == 2
    assert pm.image(4, plat("u200")).cus("binary") == 1 and pm.image(3, plat("u200")).cus("binary") == 2


def test_two_masters_per_cu_each_on_its_own_bank():
    img = pm.image(4, plat("u250"))
    streams = img.streams("v_add_float32")
    assert [(s.bundle, s.per_word, s.output) for s in streams] == \
        [(READ_BUNDLE, 16, False), (READ_BUNDLE, 16, False), (WRITE_BUNDLE, 16, True)]
    banks = [img.bank(cu, s.arg) for cu in img.cu_names("binary") for s in streams]
    # both inputs on the read master's bank; the 2 CUs' 4 masters on the 4 DDR banks
    assert banks[0] == banks[1] and len({banks[0], banks[2], banks[3], banks[5]}) == 4


def test_binary_inputs_share_the_read_channel():
    # Below XCL_OPT 4 a master moves one element a cycle: a binary op's two inputs share it.
    img = pm.image(2, plat("u250"))
    unary, _, unary_bound = pm.throughput("unary", 2, img.platform, N, img=img)
    binary, _, binary_bound = pm.throughput("binary", 2, img.platform, N, img=img)
    ternary, _, _ = pm.throughput("ternary", 2, img.platform, N, img=img)
    assert unary_bound == binary_bound == "read port"
    assert binary == pytest.approx(unary / 2) and ternary == pytest.approx(unary / 3)
    # At XCL_OPT 4 on a DDR card the read master carries 8 bytes of an add's element: its bank bounds it.
    img = pm.image(4, plat("u250"))
    rate, cus, bound = pm.throughput("binary", 4, img.platform, N, img=img)
    assert (cus, bound) == (2, "memory banks") and rate == pytest.approx(cus * img.platform.bank_gbps * 1e9 / 8)


@pytest.mark.parametrize("level", [3, 4])
def test_stream_cus_changes_the_projection(level):
    two, one = pm.image(level, plat("u250")), pm.image(level, plat("u250", stream_cus=1))
    for category in ("unary", "binary", "ternary", "reduce_all"):
        r2, c2, _ = pm.throughput(category, level, two.platform, N, img=two)
        r1, c1, _ = pm.throughput(category, level, one.platform, N, img=one)
        assert (c2, c1) == (2, 1)
        assert r2 == pytest.approx(2 * r1, rel=1e-4), category  # each CU on banks of its own (a piece a CU)
        assert seconds(category, two) < seconds(category, one)


def test_more_cus_less_time_until_the_banks_saturate():
    # HBM: 32 pseudo-channels, two masters a CU: faster up to 16 CUs, then the masters share banks.
    times = {c: seconds("binary", pm.image(4, plat("u55c", stream_cus=c))) for c in (1, 2, 4, 8, 16, 32)}
    assert times[1] > times[2] > times[4] > times[8] > times[16]
    assert times[32] == pytest.approx(times[16], rel=1e-3)
    # DDR: 4 banks, saturated by 2 CUs.
    ddr = {c: seconds("binary", pm.image(4, plat("u250", stream_cus=c))) for c in (1, 2, 4)}
    assert ddr[1] > ddr[2] and ddr[4] == pytest.approx(ddr[2], rel=1e-3)
    # Below XCL_OPT 4 a CU's port, not the bank, bounds it: more CUs keep helping.
    assert seconds("binary", pm.image(3, plat("u250", stream_cus=4))) < seconds("binary", pm.image(3, plat("u250")))


@pytest.mark.parametrize("alias", ["u250", "u55c"])
def test_costly_and_narrow_members_compute_an_eighth_of_the_word(alias):
    img = pm.image(4, plat(alias))
    for member, category, lanes in (("v_exp_float32", "unary", 2), ("v_div_float32", "binary", 2),
                                    ("v_neg_float16", "unary", 4), ("v_add_float16", "binary", 4)):
        word = img.kernels[member].lanes
        assert img.compute_lanes(member) == lanes == word // 8, member
        # a narrow member is its category's narrow engine's, which has one CU (codegen/engines.py)
        assert img.engine_of(member).key == category + "_narrow" and img.cus(category + "_narrow") == 1
        rate, _, bound = pm.throughput(category, 4, img.platform, N, member, img)
        assert bound == "compute" and rate == pytest.approx(img.clock_hz * lanes), member
    for member, category in (("v_neg_float32", "unary"), ("v_add_float32", "binary")):
        assert img.compute_lanes(member) == 16
        assert pm.throughput(category, 4, img.platform, N, member, img)[2] != "compute"
    assert seconds("unary", img, "v_exp_float32") > 4 * seconds("unary", img, "v_neg_float32")


@pytest.mark.parametrize("level", [3, 4])
def test_hbm_beats_ddr_on_memory_bound_ops(level):
    # Given the CUs to reach its pseudo-channels (cus=16; the default image has 2, all that fits
    # beside the rest of the whole table), an HBM card outruns a DDR one.
    hbm, ddr = pm.image(level, plat("u55c", stream_cus=16)), pm.image(level, plat("u250"))
    for category in ("unary", "binary", "ternary", "reduce", "reduce_all", "reduce_cols"):
        assert seconds(category, hbm) < seconds(category, ddr) / 4, category


def test_gemm_engine_from_the_plan():
    u250 = plat("u250")
    d = pm.gemm_design(4, u250)
    img = pm.image(4, u250)
    pm_, pn = platforms.GEMM_PE["u250"]
    assert (d["pe"], d["macs"], d["members"]) == (f"{pm_}x{pn}", pm_ * pn, 2)
    assert d["cus"] == platforms.gemm_cus(u250, (pm_, pn))
    # the DSPs: the estimate's e_gemm, and the rest of the image's
    assert d["dsps"] + d["dsp_rest"] == pytest.approx(img.fit.total.dsp)
    assert d["dsp_left"] == pytest.approx(img.fit.capacity.left.dsp * 0.8 - d["dsp_rest"])
    # the members share the CU's array: a float32-only GEMM image holds the same one, less the
    # float16 member's epilogue lanes; a smaller array fits more CUs
    alone = pm.gemm_design(4, u250, None, ("gemm",), ("float32",))
    assert alone["members"] == 1 and alone["dsp_rest"] == 0
    assert d["dsps"] - alone["dsps"] == resources.lane_cost("gemm", "float32", "gemm").dsp * 32 * d["cus"]
    small = pm.gemm_throughput(4, u250, 4096, (16, 16), ("gemm",), ("float32",))
    assert small["cus"] == platforms.gemm_cus(u250, (16, 16)) > 1
    assert small["peak_gflops"] == pytest.approx(2 * 256 * small["cus"] * pm.CLOCK_HZ / 1e9)
    big = pm.gemm_throughput(4, u250)
    assert big["bound"] == "compute" and 0.9 * big["peak_gflops"] < big["gflops"] < big["peak_gflops"]


def test_main_writes_the_plan_it_projected(tmp_path, monkeypatch):
    monkeypatch.setattr(pm, "pyplot", lambda: None)  # no plots over docs/img
    monkeypatch.setattr(pm, "cpu_seconds", lambda n: {c: 1e-3 for c in pm.CATEGORY_MEMBER})
    out = tmp_path / "perf.json"
    assert pm.main(["--n", str(N), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    rows = {(r["category"], r["level"], r["platform"]): r for r in doc["rows"]}
    assert rows[("binary", 4, "u250")]["cus"] == 2 and rows[("binary", 4, "u55c")]["cus"] == 2
    assert rows[("binary", 3, "u250")]["cus"] == 2 and rows[("binary", 2, "u55c")]["cus"] == 1
    exp = [r for r in doc["members"] if r["member"] == "v_exp_float32" and r["platform"] == "u250"]
    assert exp[0]["compute_lanes"] == 2 and exp[0]["bound"] == "compute"
    assert {r["platform"] for r in doc["gemm"]} == {p.alias for p in PLATFORMS.values()}
    # --kernels selects the image: no streaming engine, no streaming rows
    out2 = tmp_path / "gemm.json"
    assert pm.main(["--n", str(N), "--json", str(out2), "--kernels", "gemm", "--dtypes", "float32"]) == 0
    doc = json.loads(out2.read_text())
    assert doc["rows"] == [] and doc["gemm"] and all(r["members"] == 1 for r in doc["gemm"])


def test_the_fit_is_the_builds():
    # the model prices each member's arrays as the build does (the interface file's "memories"):
    # the whole table fits a U250 and a U200 at XCL_OPT 4, not a U50 (docs/building.md, "Will it fit?")
    assert pm.image(4, plat("u250")).fit.fits and pm.image(4, plat("u200")).fit.fits
    assert not pm.image(4, plat("u50")).fit.fits


def test_a_plans_gemm_array_and_cus_are_projected(tmp_path, capsys):
    """--plan: the GEMM table of the plan's image, with its build.gemm_pe and build.cus.gemm."""
    plan = tmp_path / "p.yaml"
    plan.write_text("build: {kernels: [add, gemm], dtypes: [float32], gemm_pe: 16x24, cus: {gemm: 4}}\nops: {}\n")
    assert pm.main(["--plan", str(plan)]) == 0
    u250 = next(line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("u250") and " 4 " in line[:14])
    assert u250[2:4] == ["16x24", "4"]
    g = pm.gemm_throughput(4, plat("u250"), pe=(16, 24), wanted=("add", "gemm"), dtypes=("float32",),
                           cus=(("gemm", 4),))
    assert g["cus"] == 4 and g["peak_gflops"] == 2 * 16 * 24 * 4 * 300e6 / 1e9 and g["image_fits"]


def test_the_pointwise_target_holds_on_every_cards_plan_image():
    """>= 70% of each card's peak bandwidth for unary and binary at 2^24 elements: on the image a
    plan of the op builds (plan_image's CUs: 16 on an HBM card, whose whole-table image has 2)."""
    whole = [{"category": c, "level": 4, "platform": p.alias, "percent_of_peak": 0.0}
             for c in ("unary", "binary", "reduce") for p in PLATFORMS.values()]
    rows = pm.plan_rows(N, whole)
    assert {r["platform"] for r in rows} == {p.alias for p in PLATFORMS.values()}
    for r in rows:
        if r["category"] in ("unary", "binary"):
            assert r["percent_of_peak"] >= 70, r
            assert r["image_fit"].startswith("yes"), r
    hbm = [r for r in rows if r["platform"] == "u55c" and r["category"] == "binary"]
    assert hbm[0]["cus"] > plat("u55c").stream_cus
