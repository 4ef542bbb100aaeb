"""masked_select and nonzero (host/ps/fpga_select.cpp: a count, one host sync, then a compaction by
index/scatter_rows) against torch on the CPU, bit exact, at every XCL_OPT level; inputs chained
(made by other kernels), broadcast masks, empty selections."""
from __future__ import annotations

import pytest
import torch

import aten_fpga
from runtime_support import assert_ran

DTYPES = [torch.float32, torch.float16, torch.int32, torch.int64, torch.bool]


def values(shape, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(-2, 3, shape, generator=gen)
    return x.bool() if dtype == torch.bool else x.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_masked_select(level, fresh_stats, dtype):
    x = values((5, 37, 3), dtype)
    mask = values((5, 37, 3), torch.float32, seed=1) > 0
    d = x.to("fpga")
    got = torch.masked_select(d.clone(), torch.gt(values((5, 37, 3), torch.float32, seed=1).to("fpga"), 0))
    assert got.device.type == "fpga"
    assert torch.equal(got.cpu(), torch.masked_select(x, mask))
    assert_ran("masked_select")


def test_masked_select_broadcast_and_empty(fresh_stats):
    x = values((4, 6), torch.float32)
    row_mask = torch.tensor([True, False, True, True, False, True])
    assert torch.equal(torch.masked_select(-(-x.to("fpga")), row_mask.to("fpga")).cpu(), torch.masked_select(x, row_mask))
    none = torch.zeros(4, 6, dtype=torch.bool)
    got = torch.masked_select(x.to("fpga"), none.to("fpga"))
    assert got.shape == (0,) and got.device.type == "fpga"
    assert_ran("masked_select")


def test_masked_select_chains_into_kernels(fresh_stats):
    """wav2vec2's use: labels >= 0 as the mask, the selection fed to the next op on the device."""
    labels = torch.tensor([[3, 1, -100, -100], [2, 2, 5, -100]])
    d = labels.to("fpga")
    flat = torch.masked_select(d, d >= 0)
    assert torch.equal((flat * 2).cpu(), torch.masked_select(labels, labels >= 0) * 2)
    assert_ran("masked_select")


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
def test_nonzero(level, fresh_stats, dtype):
    x = values((3, 4, 29), dtype, seed=2)
    got = torch.nonzero(x.to("fpga").clone())
    assert got.dtype == torch.int64 and got.device.type == "fpga"
    assert torch.equal(got.cpu(), torch.nonzero(x))
    assert_ran("nonzero")


def test_nonzero_empty_and_1d(fresh_stats):
    assert torch.equal(torch.nonzero(torch.zeros(7).to("fpga")).cpu(), torch.nonzero(torch.zeros(7)))
    x = values((50,), torch.float32)
    assert torch.equal(torch.nonzero(x.to("fpga")).cpu(), torch.nonzero(x))
    assert_ran("nonzero")


def test_masked_select_mask_of_another_dtype_is_atens_error(fresh_stats):
    with pytest.raises(RuntimeError, match="expected BoolTensor for mask"):
        torch.masked_select(torch.ones(3).to("fpga"), torch.ones(3).to("fpga"))
