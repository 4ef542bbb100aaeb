"""sort, argsort and topk (kernels/hls/sort: merge passes over rows, host/ps/fpga_sort.cpp) against
torch on the CPU, at every XCL_OPT level.

ATen's CPU sort with stable=True is a stable sort of (key, index) pairs, NaN above every number and
-0.0 equal to 0.0: the kernel's merge gives the same permutation, so values (bit for bit) and
indices are exact. For stable=False and topk ATen leaves the order of equal keys unspecified
(std::sort, std::partial_sort): there the tests use inputs without ties for exact indices, and
check with ties that the values are exact and the indices the stable order. Inputs are chained
(the output of another kernel); each op must have run on the FPGA with no fallback.
"""
from __future__ import annotations

import math

import pytest
import torch

import aten_fpga
from runtime_support import assert_ran

F32, F16, I32, I64 = torch.float32, torch.float16, torch.int32, torch.int64
BITS = {F32: torch.int32, F16: torch.int16, I32: I32, I64: I64}


def chained(x: torch.Tensor) -> torch.Tensor:
    """x on the device as the output of kernels (a copy, then two negations: -0.0 and NaN survive)."""
    return -(-x.to("fpga"))


def same_bits(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal bit for bit (-0.0 is not 0.0; NaNs equal themselves)."""
    assert actual.device.type == "cpu" and actual.dtype == expected.dtype and actual.shape == expected.shape
    bad = actual.view(BITS[actual.dtype]) != expected.view(BITS[expected.dtype])
    assert not bad.any(), (actual[bad][:8], expected[bad][:8])


def with_ties(shape, dtype, seed=0):
    """Few distinct keys (many ties); floats add NaN, +-inf, -0.0 and 0.0."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(-4, 5, shape, generator=gen)
    if dtype in (I32, I64):
        return x.to(dtype)
    x = x.to(dtype) / 2
    special = torch.tensor([math.nan, math.inf, -math.inf, -0.0, 0.0, -math.nan], dtype=dtype)
    where = torch.randint(0, 4, shape, generator=gen) == 0
    picks = special[torch.randint(0, len(special), shape, generator=gen)]
    return torch.where(where, picks, x)


def distinct(shape, dtype, seed=0):
    """Keys without ties along every dim: a permutation of a range (float16: within its integers)."""
    gen = torch.Generator().manual_seed(seed)
    n = math.prod(shape)
    x = torch.randperm(n, generator=gen) - n // 2
    return (x.to(dtype) / (1 if dtype in (I32, I64, F16) else 4)).reshape(shape)


SHAPE = (3, 37, 21)  # 37 is no power of two: a run without a partner, a short last pair


@pytest.mark.parametrize("dtype", [F32, F16, I32, I64], ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_stable_sort_is_exact(level, dim, dtype):
    aten_fpga.reset_stats()
    x = with_ties(SHAPE, dtype, seed=dim + 3)
    for descending in (False, True):
        values, indices = torch.sort(chained(x), dim=dim, descending=descending, stable=True)
        expected = torch.sort(x, dim=dim, descending=descending, stable=True)
        assert values.device.type == "fpga" and indices.dtype == I64
        same_bits(values.cpu(), expected.values)
        torch.testing.assert_close(indices.cpu(), expected.indices, rtol=0, atol=0)
    assert_ran("sort.values_stable")


@pytest.mark.parametrize("dtype", [F32, I64], ids=str)
@pytest.mark.parametrize("length", [1, 2, 3, 16, 1000, 4097])
def test_sort_lengths(level, length, dtype):
    """Every pass count: a row of one (one pass, index 0) to 4097 (13 passes, the last run alone)."""
    aten_fpga.reset_stats()
    x = with_ties((2, length), dtype, seed=length)
    values, indices = torch.sort(chained(x), stable=True)
    expected = torch.sort(x, stable=True)
    same_bits(values.cpu(), expected.values)
    torch.testing.assert_close(indices.cpu(), expected.indices, rtol=0, atol=0)
    assert_ran("sort.values_stable")


@pytest.mark.parametrize("dtype", [F32, F16, I32, I64], ids=str)
def test_unstable_sort_and_argsort(level, dtype):
    """stable=False (sort's and argsort's default): exact without ties; with ties the values are
    exact and equal keys keep their input order (the CPU's stable order)."""
    aten_fpga.reset_stats()
    x = distinct((6, 50), dtype)
    for descending in (False, True):
        values, indices = torch.sort(chained(x), dim=1, descending=descending)
        expected = torch.sort(x, dim=1, descending=descending)
        same_bits(values.cpu(), expected.values)
        torch.testing.assert_close(indices.cpu(), expected.indices, rtol=0, atol=0)
        torch.testing.assert_close(torch.argsort(chained(x), dim=0, descending=descending).cpu(),
                                   torch.argsort(x, dim=0, descending=descending), rtol=0, atol=0)
    y = with_ties((6, 50), dtype)
    values, indices = torch.sort(chained(y), dim=1)
    # equal as numbers to the CPU's unstable sort (-0.0 and 0.0, NaN signs may sit elsewhere among
    # equal keys), and bit for bit its stable order
    torch.testing.assert_close(values.cpu(), torch.sort(y, dim=1).values, rtol=0, atol=0, equal_nan=True)
    stable = torch.sort(y, dim=1, stable=True)
    same_bits(values.cpu(), stable.values)
    torch.testing.assert_close(indices.cpu(), stable.indices, rtol=0, atol=0)
    assert_ran("sort.values_stable")


def test_sort_out_edges_and_errors(level):
    aten_fpga.reset_stats()
    x = with_ties((9, 7), F32)
    values = torch.empty(7, 9, device="fpga").t()  # strided outs: written through the copy kernel
    indices = torch.empty(7, 9, device="fpga", dtype=I64).t()
    torch.sort(chained(x), dim=0, stable=True, out=(values, indices))
    expected = torch.sort(x, dim=0, stable=True)
    same_bits(values.cpu(), expected.values)
    torch.testing.assert_close(indices.cpu(), expected.indices, rtol=0, atol=0)
    y = chained(x)
    y.sort(dim=1, stable=True)  # the method
    scalar = torch.sort(torch.tensor(2.5, device="fpga"))
    assert scalar.values.item() == 2.5 and scalar.indices.item() == 0 and scalar.values.dim() == 0
    empty = torch.sort(torch.empty(0, 3, device="fpga"), dim=0)
    assert empty.values.shape == (0, 3) and empty.indices.shape == (0, 3)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.sort(chained(x), dim=2)
    with pytest.raises(RuntimeError, match="expected indices to have dtype Long"):
        torch.sort(chained(x), out=(torch.empty(0, device="fpga"), torch.empty(0, device="fpga", dtype=I32)))
    assert_ran("sort.values_stable")


def test_sort_of_bool_falls_back_counted(level):
    aten_fpga.reset_stats()
    x = torch.tensor([True, False, True, False])
    values, indices = torch.sort(x.to("fpga"), stable=True)
    expected = torch.sort(x, stable=True)
    torch.testing.assert_close(values.cpu(), expected.values)
    torch.testing.assert_close(indices.cpu(), expected.indices)
    assert aten_fpga.stats()["sort.values_stable"]["cpu_fallback"] == 1


@pytest.mark.parametrize("dtype", [F32, F16, I32, I64], ids=str)
def test_topk(level, dtype):
    aten_fpga.reset_stats()
    x = distinct((4, 300), dtype, seed=1)
    for k in (1, 5, 300):
        for largest in (True, False):
            actual = torch.topk(chained(x), k, dim=1, largest=largest)
            expected = torch.topk(x, k, dim=1, largest=largest)
            same_bits(actual.values.cpu(), expected.values)
            torch.testing.assert_close(actual.indices.cpu(), expected.indices, rtol=0, atol=0)
    along0 = torch.topk(chained(x), 2, dim=0)
    torch.testing.assert_close(along0.indices.cpu(), torch.topk(x, 2, dim=0).indices, rtol=0, atol=0)
    unsorted = torch.topk(chained(x), 7, dim=1, sorted=False)  # any order is ATen's contract: compare sets
    expected = torch.topk(x, 7, dim=1, sorted=False)
    torch.testing.assert_close(unsorted.values.cpu().sort(1).values, expected.values.sort(1).values)
    torch.testing.assert_close(unsorted.indices.cpu().sort(1).values, expected.indices.sort(1).values)
    assert_ran("topk.values")


def test_topk_ties_nan_and_errors(level):
    """With ties and NaN (NaN is largest, as on the CPU) the values are exact and the indices point
    at them, the lowest index first among equal keys."""
    aten_fpga.reset_stats()
    x = with_ties((5, 64), F32, seed=7)
    for largest in (True, False):
        actual = torch.topk(chained(x), 10, largest=largest)
        expected = torch.topk(x, 10, largest=largest)
        torch.testing.assert_close(actual.values.cpu(), expected.values, rtol=0, atol=0, equal_nan=True)
        stable = torch.sort(x, descending=largest, stable=True)
        same_bits(actual.values.cpu(), stable.values[:, :10])  # -0.0 / 0.0 and NaN signs in stable order
        same_bits(x.gather(1, actual.indices.cpu()), actual.values.cpu())
        torch.testing.assert_close(actual.indices.cpu(), stable.indices[:, :10], rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        torch.topk(chained(x), 65)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        torch.topk(x, 65)  # the CPU's message is the same
    assert torch.topk(chained(x), 0).values.shape == (5, 0)
    assert_ran("topk.values")


def test_sampling_chain(level):
    """What top-k / top-p sampling and beam search run on a vocabulary's probabilities, all on the
    device: topk, sort (descending), cumsum, a mask and a gather of the kept token ids."""
    aten_fpga.reset_stats()
    gen = torch.Generator().manual_seed(5)
    probs = torch.softmax(torch.randn(4, 5000, generator=gen) * 3, dim=-1)

    def step(probs):
        top_values, top_ids = torch.topk(probs, 40)
        sorted_probs, sorted_ids = torch.sort(probs, descending=True, stable=True)  # the row has ties
        keep = torch.cumsum(sorted_probs, dim=-1) <= 0.9
        return top_values, top_ids, sorted_probs, sorted_ids, keep, torch.gather(sorted_ids, 1, top_ids.argsort(1))

    for actual, expected in zip(step(chained(probs)), step(probs)):
        torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)
    assert_ran("topk.values", "sort.values_stable", "cumsum.out")
