"""Reductions over a middle dim in place (the reduce kernels' COLUMNS mode) and reductions split over
the compute units (PARTIAL pieces, then a COMBINE launch), at every XCL_OPT level, against PyTorch
on the CPU. Inputs are device-resident (the output of another fpga kernel, no current host copy)
and the runs are checked in report(): the reduce kernel launched, no copy kernel (no transpose),
no fallback. Exact ops (amax, argmax, all) bit for bit; sums against the CPU's double result."""
import math
import warnings

import pytest
import torch

import aten_fpga

F32, F16, C64, I32, I64, BOOL = torch.float32, torch.float16, torch.complex64, torch.int32, torch.int64, torch.bool
LANES = {F32: 16, F16: 32, C64: 8, I32: 16, I64: 8, BOOL: 64}  # elements per 512-bit word


def resident(x):
    """x on the device as the output of a kernel there (no current host copy)."""
    d = x.to("fpga")
    return d.logical_not().logical_not() if x.dtype == BOOL else d.mul(1)


def kernels_run():
    """{kernel: launches} of every op since the last reset."""
    out = {}
    for row in aten_fpga.report().values():
        for k, n in row["kernels"].items():
            out[k] = out.get(k, 0) + n
    return out


def check(fn, x, kernel, exact=False, launches=None, in_place=True):
    """fn on the device-resident x against the CPU; `kernel` launched (`launches` times), nothing
    else (in_place: no copy), no fallback."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # var of one element
        if exact or x.dtype in (I32, I64, BOOL):
            expected = fn(x)
        else:
            expected = fn(x.to(torch.complex128 if x.is_complex() else torch.float64)).to(fn(x[:1]).dtype)
        dev = resident(x)
        aten_fpga.reset_stats()
        actual = fn(dev)
    ran = kernels_run()
    assert actual.device.type == "fpga"
    tol = {"rtol": 0, "atol": 0} if exact else {}
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **tol)
    if kernel is None:  # ATen skips the stub (argmax of one row fills 0, the norm of one is an abs)
        return
    assert all(s["cpu_fallback"] == 0 for s in aten_fpga.stats().values()), aten_fpga.stats()
    assert kernel in ran, ran
    if launches is not None:
        assert ran[kernel] == launches, ran
    if in_place:
        assert set(ran) == {kernel}, f"launched besides {kernel}: {ran}"


def name(op, dtype):
    return f"v_{op}_{str(dtype).replace('torch.', '')}"


# (shape, dim): dim 0 of [R, C] with C a whole number of words or not, one row, one column
# (then a row reduction), a 3-d middle dim, several leading dims.
SHAPES = [((64, 48), 0), ((33, 20), 0), ((1, 40), 0), ((300, 7), 0), ((4, 37, 24), 1), ((5, 6, 32), (0, 1)),
          ((70, 130), 0)]


def in_place(shape, dim, dtype, level):
    """Whether the column kernel reads x as it is: its rows are whole port words (or the level has
    no words), and the reduced dims are not the last."""
    last = len(shape) - 1
    dims = dim if isinstance(dim, tuple) else (dim,)
    c = math.prod(shape[max(dims) + 1:])
    return last not in dims and (level < 4 or c % LANES[dtype] == 0)


OPS = {
    "sum": (lambda t, d: t.sum(d), "sum", (F32, F16, C64, I64), False),
    "mean": (lambda t, d: t.mean(d), "mean", (F32, F16), False),
    "amax": (lambda t, d: t.amax(d), "amax", (F32, F16, I32, BOOL), True),
    "argmax": (lambda t, d: t.argmax(d if isinstance(d, int) else None), "argmax", (F32, F16, I64), True),
    "argmin": (lambda t, d: t.argmin(d if isinstance(d, int) else None), "argmin", (F32, I32), True),
    "var": (lambda t, d: t.var(d), "std_var", (F32, F16, C64), False),
    "std": (lambda t, d: t.std(d, correction=0), "std_var", (F32,), False),
    "norm": (lambda t, d: torch.linalg.vector_norm(t, 2, d), "norm2", (F32, F16, C64), False),
    "prod": (lambda t, d: t.prod(d if isinstance(d, int) else 0), "prod", (F32,), False),
}


def values(shape, dtype, exact, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == BOOL:
        return torch.rand(shape, generator=g) > 0.3
    if exact or dtype in (I32, I64):  # few distinct values: ties, first index wins
        return torch.randint(-3, 3, shape, generator=g).to(dtype)
    if dtype == C64:
        return torch.randn(shape, generator=g, dtype=C64)
    return (torch.randn(shape, generator=g) + 3).to(dtype)  # an offset: var's shift matters


@pytest.mark.parametrize("op", list(OPS))
def test_columns(level, op):
    fn, kernel, dtypes, exact = OPS[op]
    for dtype in dtypes:
        for shape, dim in SHAPES:
            if op in ("argmax", "argmin", "prod") and isinstance(dim, tuple):
                continue
            x = values(shape, dtype, exact)
            if op == "prod":
                x = torch.empty(shape).uniform_(0.9, 1.1).to(dtype)
            trivial = shape[0] == 1 and op in ("argmax", "argmin", "norm")
            check(lambda t: fn(t, dim), x, None if trivial else name(kernel, dtype), exact,
                  in_place=in_place(shape, dim, dtype, level))


def test_columns_non_contiguous(level):
    # A transposed input reduced along its outer dim in memory: a column reduction of the base.
    base = values((48, 320), F32, False)
    check(lambda t: t.t().sum(1), base, "v_sum_float32")
    check(lambda t: t.t().argmax(1), values((48, 320), F32, True), "v_argmax_float32", exact=True)
    # A slice (rows not dense): gathered first, still right.
    check(lambda t: t[:, 1:40].sum(0), values((50, 48), F32, False), "v_sum_float32", in_place=False)


def test_columns_keepdim_and_out(level):
    x = values((40, 64), F32, False)
    check(lambda t: t.sum(0, keepdim=True), x, "v_sum_float32")
    check(lambda t: t.amax(0, keepdim=True), x, "v_amax_float32", exact=True)


def test_columns_nan_and_norm_orders(level):
    x = values((45, 32), F32, False)
    x[7, 3] = math.nan
    x[40, 3] = math.inf
    x[2, 30] = math.nan
    x[9, 11] = -math.inf
    check(lambda t: t.amax(0), x, "v_amax_float32", exact=True)
    check(lambda t: t.amin(0), x, "v_amin_float32", exact=True)
    check(lambda t: t.argmax(0), x, "v_argmax_float32", exact=True)
    check(lambda t: t.sum(0), x, "v_sum_float32")
    y = values((45, 32), F32, False)
    y[::4] = 0
    for p, kernel in ((0, "norm0"), (1, "norm1"), (2, "norm2"), (3, "norm"), (math.inf, "norm_max"),
                      (-math.inf, "norm_min")):
        check(lambda t: torch.linalg.vector_norm(t, p, 0), y, f"v_{kernel}_float32")


@pytest.mark.parametrize("dtype", [F32, F16, C64])
def test_general_p_norm_every_lane(level, dtype):
    """The general p-norm's lanes share one pow unit at XCL_OPT 4, a pass over the data per lane
    (aten_fpga_reduce.h Turns): every lane must still fold each of its elements once -- columns
    wider than one tile of 256 words, the last word partly past the columns' end; rows whose last
    word is partly past the row's end; p fractional and negative -- against the CPU in double."""
    cols = LANES[dtype] * 256 + 5
    x = values((2, 40, cols), dtype, False)
    for p in (3.5, -1.5):
        check(lambda t: torch.linalg.vector_norm(t, p, 1), x, name("norm", dtype),
              in_place=in_place(x.shape, 1, dtype, level))
        # rows not whole words: the host pads them on the device first (a copy launch)
        check(lambda t: torch.linalg.vector_norm(t, p, -1), x[0], name("norm", dtype), in_place=False)


def test_columns_all_any(level):
    x = values((70, 128), BOOL, True)
    x[:, 5] = True
    check(lambda t: t.all(0), x, "v_all_bool", exact=True)
    check(lambda t: t.any(0), ~x, "v_any_bool", exact=True)


def cus(kernel="v_sum_float32"):
    """The CUs of `kernel`'s engine: at XCL_OPT 4 a narrow reduction's engine has one."""
    return aten_fpga._C.kernel_cus(kernel)


def pieces_and_combine(kernel):
    """Launches of a reduction long enough for every CU of `kernel`'s engine: pieces, and a combine."""
    return 2 if cus(kernel) > 1 else 1


def test_whole_tensor_split_over_cus(level):
    # Long enough that every CU takes a piece: then one launch of pieces and one combine.
    n = 1 << 18
    launches = 2 if cus() > 1 else 1
    for op, fn, exact in (("sum", lambda t: t.sum(), False), ("mean", lambda t: t.mean(), False),
                          ("amax", lambda t: t.amax(), True), ("argmax", lambda t: t.argmax(), True),
                          ("argmin", lambda t: t.argmin(), True), ("std_var", lambda t: t.var(), False),
                          ("norm2", lambda t: torch.linalg.vector_norm(t), False)):
        x = values((n + 5,), F32, exact, seed=1)  # a ragged last word
        check(fn, x, f"v_{op}_float32", exact, launches=launches)
    x = values((n,), F32, True)
    x[n // 2] = math.nan
    x[n - 3] = math.nan
    check(lambda t: t.argmax(), x, "v_argmax_float32", exact=True, launches=launches)  # the first NaN
    check(lambda t: t.amax(), x, "v_amax_float32", exact=True, launches=launches)
    check(lambda t: t.sum(), values((n,), F16, False), "v_sum_float16", launches=pieces_and_combine("v_sum_float16"))
    check(lambda t: t.sum(), values((n,), I64, False), "v_sum_int64", exact=True,
          launches=pieces_and_combine("v_sum_int64"))


def test_few_long_rows_split_over_cus(level):
    # Two rows, each split over half the CUs; a ragged last word per row (at XCL_OPT 4 the rows are
    # padded to whole words first).
    x = values((2, (1 << 17) + 3), F32, True)
    launches = 2 if cus() >= 4 else 1
    check(lambda t: t.argmax(1), x, "v_argmax_float32", exact=True, launches=launches, in_place=level < 4)
    check(lambda t: t.var(1), values(x.shape, F32, False), "v_std_var_float32", launches=launches, in_place=level < 4)
    check(lambda t: t.sum(1), values((2, 1 << 17), F32, False), "v_sum_float32", launches=launches)


@pytest.mark.parametrize("shape", [(1 << 15, 16), (4096, 256)], ids=["few_columns", "rows_are_tiles"])
def test_column_rows_split_over_cus(level, shape):
    # A row of at most one tile (REDUCE_COLUMN_TILE items), and rows enough that the partials cost
    # little: the rows go over the CUs in blocks (each CU one contiguous stretch), then a second
    # launch combines the partials.
    x = values(shape, F32, False)
    launches = 2 if cus() > 1 else 1
    check(lambda t: t.sum(0), x, "v_sum_float32", launches=launches)
    check(lambda t: t.var(0), x, "v_std_var_float32", launches=launches)
    check(lambda t: t.argmax(0), values(x.shape, F32, True), "v_argmax_float32", exact=True, launches=launches)


@pytest.mark.parametrize("shape", [(64, 1 << 13), (256, 1024)], ids=["rows_wider_than_a_tile", "few_rows"])
def test_column_blocks_over_cus(level, shape):
    # Rows wider than a tile, or too few rows for the partials to pay: each CU a block of columns,
    # one launch.
    x = values(shape, F32, False)
    check(lambda t: t.sum(0), x, "v_sum_float32", launches=1)
    check(lambda t: t.amax(0), x, "v_amax_float32", exact=True, launches=1)


def test_every_cu_runs(level):
    # A whole-tensor reduction and a column reduction each keep every CU of the image busy.
    n = cus()
    for fn in (lambda t: t.sum(), lambda t: t.sum(0)):
        x = resident(values((512, 1024), F32, False))
        before = [a["runs"] for a in aten_fpga._C.cu_activity()[:n]]
        fn(x).cpu()
        after = [a["runs"] for a in aten_fpga._C.cu_activity()[:n]]
        assert all(b > a for a, b in zip(before, after)), (before, after)
