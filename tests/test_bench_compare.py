"""bench/compare_checkouts.py's pure parts: the rows it reads from the benchmarks' JSON, how it
pairs the old and new rounds' rows, the medians, new / old, and the flag. (Running the benchmarks
themselves is the tool's job, not a test's: it takes minutes.)"""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import compare_checkouts as cc  # noqa: E402


def pointwise(*ratios_by_op, n=1024):
    """A bench_pointwise JSON: rows of (op, ratio, fpga_s) in the order given."""
    return {"benchmark": "pointwise", "load_average": 1.0,
            "rows": [{"op": op, "level": 4, "n": n, "cpu_s": 1.0, "fpga_s": fpga, "ratio": ratio}
                     for op, ratio, fpga in ratios_by_op]}


def overhead(small_ratio, mlp_ratio):
    """A bench_overhead JSON: a list section, a dict section with a ratio, one without."""
    return {"benchmark": "overhead", "small_ops": [{"op": "x + y", "cpu_us": 1.0, "fpga_us": 2.0, "ratio": small_ratio}],
            "partial_sync": {"tensor_bytes": 1, "one_element_bytes": 64},
            "mlp_step": {"cpu_ms": 1.0, "fpga_ms": 3.0, "ratio": mlp_ratio, "fpga_ops": {"mm": 3}}}


def by_row(results):
    return {r["row"]: r for r in results}


def test_rows_reads_every_section_with_a_ratio():
    got = cc.rows(overhead(1.5, 3.0))
    assert got == {("small_ops", ("op", "x + y")): {"ratio": 1.5, "fpga_time": 2.0},
                   ("mlp_step",): {"ratio": 3.0, "fpga_time": 3.0}}
    assert [cc.label(k) for k in got] == ["small_ops op=x + y", "mlp_step"]
    reduce_row = {"case": "sum.dim0", "level": 4, "cpu_s": 1.0, "fpga_s": 2.0, "ratio": 2.0, "time_ratio": 1.5}
    assert cc.rows({"rows": [reduce_row]}) == {("rows", ("case", "sum.dim0"), ("level", 4)):
                                               {"ratio": 2.0, "time_ratio": 1.5, "fpga_time": 2.0}}


def test_rows_refuses_two_rows_with_one_key():
    doc = pointwise(("add", 1.0, 1.0), ("add", 2.0, 1.0))
    with pytest.raises(ValueError, match="two rows of pointwise"):
        cc.rows(doc)


def test_rows_pair_by_key_not_by_position():
    old = [pointwise(("add", 1.0, 0.1), ("exp", 2.0, 0.2))]
    new = [pointwise(("exp", 2.0, 0.2), ("add", 1.5, 0.15))]  # another order: the same rows
    got = by_row(cc.compare("b", old, new, 0.10))
    assert got["op=add n=1024 level=4"]["ratio"]["new_over_old"] == pytest.approx(1.5)
    assert got["op=add n=1024 level=4"]["fpga_time"]["new_over_old"] == pytest.approx(1.5)
    assert got["op=exp n=1024 level=4"]["ratio"]["new_over_old"] == pytest.approx(1.0)
    assert [r["regressed"] for r in got.values()] == [True, False]


def test_medians_over_rounds_and_each_rounds_own_change():
    # one disturbed old round (4.0) must not decide: the medians are 1.0 and 1.05
    old = [pointwise(("add", r, 1.0)) for r in (1.0, 4.0, 0.9)]
    new = [pointwise(("add", r, 1.0)) for r in (1.05, 1.2, 1.0)]
    (r,) = cc.compare("b", old, new, 0.10)
    assert (r["ratio"]["old"], r["ratio"]["new"]) == (1.0, 1.05)
    assert r["ratio"]["new_over_old"] == pytest.approx(1.05)
    assert r["ratio"]["round_min"] == pytest.approx(0.3)  # round 2: 1.2 / 4.0
    assert r["ratio"]["round_max"] == pytest.approx(1.0 / 0.9)
    assert not r["regressed"]


@pytest.mark.parametrize("threshold, flagged", [(0.10, True), (0.25, False)])
def test_the_flag_follows_the_threshold(threshold, flagged):
    (r,) = cc.compare("b", [pointwise(("exp", 2.0, 1.0))], [pointwise(("exp", 2.4, 1.0))], threshold)
    assert r["ratio"]["new_over_old"] == pytest.approx(1.2)
    assert r["regressed"] is flagged


def test_faster_is_never_flagged():
    (r,) = cc.compare("b", [pointwise(("exp", 2.0, 1.0))], [pointwise(("exp", 1.0, 0.5))], 0.10)
    assert r["ratio"]["new_over_old"] == pytest.approx(0.5) and not r["regressed"]


def test_a_row_one_side_lacks_is_kept_unflagged():
    old = [overhead(1.5, 3.0)]
    new = [dict(overhead(1.5, 3.0), transfers=[{"copy": "to device", "ms": 5.0, "ratio": 1.2}])]
    got = by_row(cc.compare("b", old, new, 0.10))
    only_new = got["transfers copy=to device"]
    assert only_new["ratio"]["old"] is None and only_new["ratio"]["new"] == 1.2
    assert only_new["ratio"]["new_over_old"] is None and not only_new["regressed"]
    assert got["mlp_step"]["ratio"]["new_over_old"] == pytest.approx(1.0)
    only_old = by_row(cc.compare("b", new, old, 0.10))["transfers copy=to device"]  # a row new dropped
    assert only_old["ratio"]["new"] is None and only_old["ratio"]["new_over_old"] is None
    assert not only_old["regressed"]
