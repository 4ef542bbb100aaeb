"""Reductions on device "fpga" (kernels/hls/reduce, host/ps/fpga_reduce.cpp) at every XCL_OPT level,
against PyTorch on the CPU: every op x dtype over reduced dims (none, one, several, negative),
keepdim, rows shorter and longer than a tile and not whole vectors, empty and single-element rows,
non-contiguous inputs; then dtype=, out=, special values, errors and the counted fallbacks.

Float results are compared with assert_close's default tolerances against the CPU's result in double
precision (see run()); integer, bool, amax/amin and argmax/argmin results bit for bit against the
CPU's own."""
import math
import textwrap
import warnings
import zlib

import pytest
import torch

import aten_fpga
from codegen import abi
from codegen.abi import LEVELS

F32, F16, C64, I32, I64, BOOL = torch.float32, torch.float16, torch.complex64, torch.int32, torch.int64, torch.bool
WIDE = {F32: torch.float64, F16: torch.float64, C64: torch.complex128}



def data(shape, dtype, op):
    """Test data for `op`: values whose reduction is well conditioned, with ties where they matter."""
    g = torch.Generator().manual_seed(zlib.crc32(repr((shape, dtype, op)).encode()))
    if op in ("all", "any") and dtype != BOOL:
        return data(shape, BOOL, op).to(dtype)
    if dtype == BOOL:
        return torch.rand(shape, generator=g) > (0.02 if op == "all" else 0.98)
    if dtype in (I32, I64):
        if op == "prod":  # +-1: products neither overflow nor vanish
            return (torch.randint(0, 2, shape, generator=g) * 2 - 1).to(dtype)
        return torch.randint(-40, 40, shape, generator=g, dtype=dtype)
    if op == "prod":  # near 1, so long products stay normal
        x = torch.empty(shape).uniform_(0.9, 1.1, generator=g)
        if dtype == C64:
            x = x * torch.exp(1j * torch.empty(shape).uniform_(-0.3, 0.3, generator=g))
        return x.to(dtype)
    if op in ("amax", "amin", "argmax", "argmin"):  # few distinct values: ties
        return torch.randint(-8, 8, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g, dtype=C64 if dtype == C64 else F32).to(dtype)


def run(fn, x, view=lambda t: t, stat=None, exact=False, wide=True):
    """fn(view(x)) on the fpga against the CPU; `stat` must have run on the fpga, not fallen back.
    Inexact (floating point) results are compared with PyTorch's CPU result in double precision,
    rounded once: the kernels accumulate in double (float in float16), and ATen's own float sums of
    long rows are off by more than the default tolerance (its complex64 norm of 1e5 elements by
    1.6e-6, its float16 prod of 129 elements by several ulps). wide=False: fn fixes the dtype itself."""
    expected = fn(view(x))
    if wide and not exact and x.dtype in WIDE:
        expected = fn(view(x.to(WIDE[x.dtype]))).to(expected.dtype)
    aten_fpga.reset_stats()
    actual = fn(view(x.to("fpga")))
    assert actual.device.type == "fpga"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual, expected)
    tol = {"rtol": 0, "atol": 0} if exact else {}
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **tol)
    if stat is not None:
        s = aten_fpga.stats().get(stat, {"fpga": 0, "cpu_fallback": 0})
        # An FPGA run is an op that launched a kernel. With one element per output, several of
        # ATen's impls skip the stub (argmax fills 0, all/any copy the input, the norm is an abs):
        # no reduction kernel then, and no fallback either.
        trivial = x.numel() <= max(1, expected.numel())  # (nothing to reduce: no kernel either)
        assert s["cpu_fallback"] == 0 and (s["fpga"] >= 1 or trivial), (stat, aten_fpga.stats())


def dims_call(f):
    """A reduction taking dim=None | int | tuple and keepdim."""
    return lambda x, dim, keepdim: f(x) if dim is None else f(x, dim, keepdim)


# op: (the call (x, dim, keepdim), the overload that runs it for an int / tuple / no dim, input
# dtypes (each runs on the fpga), whether dims may be a tuple, exact)
OPS = {
    "sum": (dims_call(torch.sum), "sum.IntList_out", (F32, F16, C64, I32, I64, BOOL), True, False),
    "mean": (dims_call(torch.mean), "mean.out", (F32, F16, C64), True, False),
    "prod": (dims_call(torch.prod), "prod.int_out", (F32, F16, C64, I32, I64, BOOL), False, False),
    "amax": (lambda x, d, k: torch.amax(x, () if d is None else d, k), "amax.out", (F32, F16, I32, I64, BOOL), True,
             True),
    "amin": (lambda x, d, k: torch.amin(x, () if d is None else d, k), "amin.out", (F32, F16, I32, I64, BOOL), True,
             True),
    "argmax": (lambda x, d, k: torch.argmax(x, d, k), "argmax.out", (F32, F16, I32, I64), False, True),
    "argmin": (lambda x, d, k: torch.argmin(x, d, k), "argmin.out", (F32, F16, I32, I64), False, True),
    "all": (dims_call(torch.all), "all", (BOOL, F32, I64), True, True),
    "any": (dims_call(torch.any), "any", (BOOL, F32, I64), True, True),
    "norm": (lambda x, d, k: torch.linalg.vector_norm(x, 2, d, k), "linalg_vector_norm.out", (F32, F16, C64), True,
             False),
    "var": (lambda x, d, k: torch.var(x, d, keepdim=k), "var.correction", (F32, F16, C64), True, False),
    "std": (lambda x, d, k: torch.std(x, d, keepdim=k), "std.correction", (F32, F16, C64), True, False),
}

# (shape, view applied on the device, dims): dims include negative ones and tuples; rows of 1, 7,
# 17, 33, 129 elements are not whole 512-bit words, 5000 and 12001 span several tiles (4096).
CASES = [
    ((1,), None, [None, 0]),
    ((7,), None, [None, -1]),
    ((37, 129), None, [None, 1, 0, -1, (0, 1), (-2,)]),
    ((3, 4, 33), None, [2, (0, 2), (-1, 0), 1]),
    ((2, 5000), None, [1, None]),
    ((12001,), None, [0]),
    ((4, 1), None, [1]),
    ((129, 37), lambda t: t.t(), [1, 0, None]),            # transposed
    ((40, 34), lambda t: t[1:, ::2], [1, 0]),               # sliced: strided, misaligned start
    ((17, 1), lambda t: t.expand(17, 9), [1, 0]),           # expanded: stride 0
    ((6, 5, 4), lambda t: t.permute(2, 0, 1), [(1, 2), 0]),  # permuted
]


def calls(tuples):
    """(shape, view, dim) of every case; a tuple of dims becomes its one dim for int-dim ops."""
    for shape, view, dims in CASES:
        for d in dims:
            if isinstance(d, tuple) and not tuples:
                if len(d) != 1:
                    continue
                d = d[0]
            yield shape, view, d


def stat_of(op, base, dim):
    if op in ("all", "any"):
        return f"{op}.all_out" if dim is None else f"{op}.dims_out" if isinstance(dim, tuple) else f"{op}.out"
    if op == "prod" and dim is None:
        return "prod"
    return base


@pytest.mark.parametrize("op,dtype", [(op, d) for op, spec in OPS.items() for d in spec[2]],
                         ids=lambda v: str(v).replace("torch.", ""))
def test_op(level, op, dtype):
    fn, base, _, tuples, exact = OPS[op]
    for shape, view, dim in calls(tuples):
        for keepdim in (False, True):
            if dim is None and keepdim and op != "argmax" and op != "argmin":
                continue  # no dim: keepdim is not an argument there
            x = data(shape, dtype, op)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # var/std of one element: degrees of freedom <= 0
                run(lambda t: fn(t, dim, keepdim), x, view or (lambda t: t), stat_of(op, base, dim), exact)


def test_multi_cu_row_split(level):
    # Enough rows and elements that the multi-CU image (opt3: 4 CUs) splits the rows across its CUs.
    x = torch.randn(300, 1000)
    for op in ("sum", "amax", "argmin", "var", "norm"):
        fn, base, _, _, exact = OPS[op]
        run(lambda t: fn(t, 1, False), x, stat=base, exact=exact)
        run(lambda t: fn(t, 0, True), x, stat=base, exact=exact)


@pytest.mark.parametrize("rows", [0, 3])
def test_empty_rows(level, rows):
    # Reducing an empty dim gives the op's value of nothing (or ATen's error, checked below).
    x = torch.randn(rows, 0)
    run(lambda t: t.sum(1), x, stat="sum.IntList_out", exact=True)
    run(lambda t: t.prod(1), x, stat="prod.int_out", exact=True)
    run(lambda t: t.prod(), x, stat="prod", exact=True)
    run(lambda t: t.mean(1), x, stat="mean.out")
    run(lambda t: torch.linalg.vector_norm(t, 2, 1), x, stat="linalg_vector_norm.out")
    run(lambda t: torch.linalg.vector_norm(t, 0, 1), x, stat="linalg_vector_norm.out")
    run(lambda t: (t > 0).all(1), x, stat="all.out", exact=True)
    run(lambda t: (t > 0).any(1), x, stat="any.out", exact=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(lambda t: t.var(1), x, stat="var.correction")
    if rows:  # reducing the rows instead: an empty output
        run(lambda t: t.amax(0), x, stat="amax.out", exact=True)
        run(lambda t: t.argmax(0), x, stat="argmax.out", exact=True)


def test_empty_reductions_fail_as_on_cpu(level):
    x = torch.randn(0, 3)
    for fn in (lambda t: t.amax(), lambda t: t.amin(0), lambda t: t.argmax(), lambda t: t.argmin(0),
               lambda t: torch.linalg.vector_norm(t, math.inf)):
        with pytest.raises((RuntimeError, IndexError)) as cpu:
            fn(x)
        with pytest.raises((RuntimeError, IndexError)) as dev:
            fn(x.to("fpga"))
        assert type(cpu.value) is type(dev.value)
        assert str(cpu.value).splitlines()[0] == str(dev.value).splitlines()[0]


def test_full_reduction_to_0_dim(level):
    x = torch.randn(5, 6, 7)
    for op in ("sum", "mean", "amax", "argmax", "norm", "std"):
        fn, base, _, _, exact = OPS[op]
        run(lambda t: fn(t, None, False), x, stat=base, exact=exact)
    run(lambda t: t.prod(), x.uniform_(0.9, 1.1), stat="prod")
    run(lambda t: (t > -1).all(), x, stat="all.all_out", exact=True)


@pytest.mark.parametrize("n", [1, 37, 1000])
def test_one_ragged_row_is_read_in_place(level, n):
    """A whole-tensor reduction of a row that ends mid-word (x.sum() of a few elements) reads the
    row where it lies: its block holds the rest of the last word, which the kernel ignores. One
    launch, no padded copy first; the padding lanes hold whatever the block held, which a kernel
    that folded them would add in."""
    x = torch.randn(n, generator=torch.Generator().manual_seed(n))
    dev = x.to("fpga") * 1  # made by a kernel: valid only on the device
    for fn in (torch.sum, torch.amax, torch.argmax):
        aten_fpga.reset_stats()
        got = fn(dev)
        launched = {op: r["launches"] for op, r in aten_fpga.report().items() if r["launches"]}
        assert list(launched.values()) == [1] and "copy_" not in launched, launched
        if fn is torch.sum:
            torch.testing.assert_close(got.cpu().double(), x.double().sum(), rtol=2e-6, atol=1e-6)
        else:
            assert torch.equal(got.cpu(), fn(x))


def sum_on_device(fn, dev: torch.Tensor) -> torch.Tensor:
    """fn(dev) on the host, after checking that it launched the reduce kernel (one launch; no CPU
    fallback): a fallback's sum would be ATen's, not the fold's order these tests pin down."""
    aten_fpga.reset_stats()
    got = fn(dev).cpu()
    assert aten_fpga.stats()["sum.IntList_out"] == {"fpga": 1, "cpu_fallback": 0}, aten_fpga.stats()
    assert aten_fpga.report()["sum.IntList_out"]["launches"] >= 1
    return got


def card_order_sum(x: torch.Tensor) -> torch.Tensor:
    """The float32 sum of one row exactly as the XCL_OPT 4 fold computes it, written out from
    kernels/hls/reduce/opt4.cpp.j2: lane l of word w adds into float32 partial [w % 8][l] (8 =
    codegen/abi.py REDUCE_LANE_PARTIALS), in word order; the drain widens partial j + 4 into j in
    double, halves the partials twice more, and sums the 16 lanes by a balanced tree."""
    lanes, partials = 16, abi.REDUCE_LANE_PARTIALS
    words = -(-x.numel() // lanes)
    padded = torch.zeros(words * lanes)
    padded[:x.numel()] = x
    part = torch.zeros(partials, lanes)
    for w, word in enumerate(padded.view(words, lanes)):
        part[w % partials] += word  # float32, one add per lane (the padding's zeros change nothing)
    wide = part.double()
    while len(wide) > 1:
        wide = wide[:len(wide) // 2] + wide[len(wide) // 2:]
    tree = wide[0]
    while len(tree) > 1:
        tree = tree.view(-1, 2).sum(1)  # pairs of neighbours: the balanced tree over the lanes
    return tree[0].float()


@pytest.mark.parametrize("n", [16, 8 * 16, 8 * 16 + 1, 37 * 16 + 5, 1000 * 16 - 3])
def test_float32_sum_in_the_card_order(n):
    """x.sum() of a float32 row is the card's sum to the bit: the emulator folds whole groups of
    words in a loop of its own (C simulation only, for registers), which must make the same adds in
    the same order as the words loop Vitis HLS synthesizes -- groups and the words after them, and
    a last word that ends mid-word. One run of one CU (below the rows a CU splits, and within one
    region of the emulator's dataflow), so the result is one fold's."""
    aten_fpga.load(4)
    x = torch.randn(n, generator=torch.Generator().manual_seed(n)) * 1000
    dev = x.to("fpga") * 1  # made by a kernel: valid only on the device
    got = sum_on_device(torch.sum, dev)
    assert torch.equal(got, card_order_sum(x)), (got.item(), card_order_sum(x).item())


def scalar_order_sum(x: torch.Tensor) -> torch.Tensor:
    """The float32 sum of one row as the scalar levels' fold computes it (kernels/hls/reduce/opt1 and
    opt2): element i adds into double partial i % 16 (codegen/abi.py REDUCE_PARTIALS), in order, and
    the partials are summed by a balanced tree."""
    part = torch.zeros(abi.REDUCE_PARTIALS, dtype=torch.float64)
    for i, v in enumerate(x.double()):
        part[i % abi.REDUCE_PARTIALS] += v
    while len(part) > 1:
        part = part.view(-1, 2).sum(1)
    return part[0].float()


@pytest.mark.parametrize("level_", [1, 2, 3])
@pytest.mark.parametrize("n", [15, 16, 33, 1000, 4093])
def test_float32_sum_in_the_scalar_levels_order(level_, n):
    """At XCL_OPT 1-3 the emulator folds whole groups of 16 elements in a loop of its own (C
    simulation only, vectorized across the partials): the same adds in the same order as the
    elements loop Vitis HLS synthesizes, so x.sum() is that fold's to the bit. One run: a row within
    one tile (4096 elements) and one region, on one CU."""
    aten_fpga.load(level_)
    try:
        x = torch.randn(n, generator=torch.Generator().manual_seed(n))
        if n > 32:  # partial 0 holds 2^60 from element 0 to 32: it absorbs element 16 alone
            x[0], x[32] = 2.0 ** 60, -2.0 ** 60
        got = sum_on_device(torch.sum, x.to("fpga") * 1)  # the input made by a kernel: valid only on the device
        assert torch.equal(got, scalar_order_sum(x)), (got.item(), scalar_order_sum(x).item())
    finally:
        aten_fpga.load(4)


@pytest.mark.parametrize("level_", [1, 2])
def test_float32_column_sum_in_the_scalar_levels_order(level_):
    """x.sum(0) at XCL_OPT 1-2 folds each column's rows in order into one double (a tile of 16 or
    more columns has one slot per column): the emulator folds whole rows as loops of their own (C
    simulation only), which must keep that order. Column c's rows 0..2 are 2^60, 1, -2^60: in order
    the 1 is lost."""
    aten_fpga.load(level_)
    try:
        x = torch.randn(100, 32, generator=torch.Generator().manual_seed(7))
        x[0], x[1], x[2] = 2.0 ** 60, 1.0, -2.0 ** 60
        got = sum_on_device(lambda t: t.sum(0), x.to("fpga") * 1)  # the input made by a kernel
        expected = x.double().cumsum(0)[-1].float()  # a sequential sum down each column
        assert torch.equal(got, expected), (got - expected).abs().max()
    finally:
        aten_fpga.load(4)


@pytest.mark.parametrize("dtype", [F32, F16])
def test_special_values(level, dtype):
    nan, inf = math.nan, math.inf
    rows = torch.tensor([
        [1.0, nan, 3.0, nan, -inf, 2.0, 0.0, 5.0, 5.0, 1.0, 2.0, 3.0, 4.0, 6.0, 7.0, 8.0, 9.0],
        [inf, 1.0, -inf, 2.0, 3.0, 0.0, -0.0, 4.0, inf, 1.0, 2.0, 3.0, 4.0, 6.0, 7.0, 8.0, -2.0],
        [-inf] * 17,
        [inf] * 16 + [nan],
        [0.0, -0.0] * 8 + [-0.0],
        [2.0] * 17,
    ], dtype=dtype)
    for op in ("sum", "mean", "amax", "amin", "argmax", "argmin", "norm", "var", "all", "any"):
        fn, base, _, _, exact = OPS[op]
        for d in (1, 0):
            run(lambda t: fn(t, d, False), rows, stat=stat_of(op, base, d), exact=exact)
    for p in (0, 1, 3.5, math.inf, -math.inf, -1):
        run(lambda t: torch.linalg.vector_norm(t, p, 1), rows, stat="linalg_vector_norm.out")


def test_argmax_first_index_of_ties_and_nan(level):
    x = torch.zeros(3, 1000)
    x[0, 500:] = 1           # ties: the first 1
    x[1, 7] = x[1, 900] = math.nan  # the first NaN
    x[2, 5::3] = -1          # argmin: the first -1
    for fn in (lambda t: t.argmax(1), lambda t: t.argmin(1), lambda t: t.argmax(), lambda t: t.argmin()):
        run(fn, x, stat=None, exact=True)


@pytest.mark.parametrize("p", [0, 1, 2, 3.5, math.inf, -math.inf, -1.5])
@pytest.mark.parametrize("dtype", [F32, C64])
def test_norm_orders(level, p, dtype):
    x = torch.randn(33, 70, dtype=dtype)
    x[0, :5] = 0
    for dim in (1, 0, None, (0, 1)):
        run(lambda t: torch.linalg.vector_norm(t, p, dim), x, stat="linalg_vector_norm.out")
    run(lambda t: torch.norm(t, p, 1), x, stat="linalg_vector_norm.out")  # torch.norm goes there too
    # Each kind of order is its own kernel (no pow built into the others): the host picks it by p.
    kind = {0: "norm0", 1: "norm1", 2: "norm2", math.inf: "norm_max", -math.inf: "norm_min"}.get(p, "norm")
    name = f"v_{kind}_{'float32' if dtype == F32 else 'complex64'}"
    assert aten_fpga.report()["linalg_vector_norm.out"]["kernels"] == {name: 1}, aten_fpga.report()


@pytest.mark.parametrize("correction", [0, 1, 2.5, 70])
def test_var_std_correction(level, correction):
    x = torch.randn(33, 70) * 3 + 1000  # a large mean: the one-pass sums must not cancel
    for fn, stat in ((torch.var, "var.correction"), (torch.std, "std.correction")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for dim in (1, 0, None):
                run(lambda t: fn(t, dim, correction=correction), x, stat=stat)
            run(lambda t: fn(t.to(C64) * (1 + 2j), 1, correction=correction), x, stat=stat)


def test_dtype_argument(level):
    x = torch.randint(-1000, 1000, (40, 300), dtype=I32)
    run(lambda t: t.sum(1, dtype=I32), x, stat="sum.IntList_out", exact=True)
    run(lambda t: t.sum(dtype=I64), x, stat="sum.IntList_out", exact=True)
    run(lambda t: (t % 2 * 2 - 1).prod(1, dtype=I32), x, stat="prod.int_out", exact=True)
    h = torch.randn(40, 300).to(F16)
    run(lambda t: t.sum(1, dtype=F32), h, stat="sum.IntList_out", wide=False)  # cast on the device
    run(lambda t: t.mean(0, dtype=F32), h, stat="mean.out", wide=False)
    run(lambda t: torch.linalg.vector_norm(t, 2, 1, dtype=F32), h, stat="linalg_vector_norm.out", wide=False)


def test_out_argument(level):
    x = torch.randn(50, 60)
    base = torch.zeros(50, 3, device="fpga")
    torch.sum(x.to("fpga"), 1, out=base[:, 1])  # a strided out= view: written through
    expected = torch.zeros(50, 3)
    expected[:, 1] = x.sum(1)
    torch.testing.assert_close(base.cpu(), expected)
    out = torch.empty(0, dtype=I64, device="fpga")
    r = torch.argmax(x.to("fpga"), 0, keepdim=True, out=out)
    assert r is out
    torch.testing.assert_close(out.cpu(), x.argmax(0, keepdim=True), rtol=0, atol=0)
    for fn, stat in ((torch.var, "var.correction_out"), (torch.std, "std.correction_out")):
        out = torch.empty(0, device="fpga")
        aten_fpga.reset_stats()
        fn(x.to("fpga"), 1, out=out)
        torch.testing.assert_close(out.cpu(), fn(x, 1))
        assert aten_fpga.stats()[stat] == {"fpga": 1, "cpu_fallback": 0}


def test_chained_reductions_stay_on_device(level):
    x = torch.randn(64, 100)
    aten_fpga.reset_stats()
    y = x.to("fpga")
    r = (y * y).sum(1).amax()
    torch.testing.assert_close(r.cpu(), (x * x).sum(1).amax())
    s = aten_fpga.stats()
    assert s["sum.IntList_out"]["fpga"] == 1 and s["amax.out"]["fpga"] == 1 and s["mul.out"]["fpga"] == 1


@pytest.mark.parametrize("fn,x,stat", [
    (lambda t: t.sum(1), torch.randn(4, 5, dtype=torch.float64), "sum.IntList_out"),
    (lambda t: t.amax(1), torch.randint(0, 9, (4, 5), dtype=torch.int8), "amax.out"),
    (lambda t: t.all(1), torch.randint(0, 2, (4, 5), dtype=torch.uint8), "all.out"),
    (lambda t: t.var(1), torch.randn(4, 5, dtype=torch.float64), "var.correction"),
    (lambda t: torch.std(t, 1, out=torch.empty(0, dtype=C64, device=t.device)), torch.randn(4, 5, dtype=C64),
     "std.correction_out"),
    (lambda t: t.prod(), torch.randn(4, 5, dtype=torch.float64), "prod"),
    (lambda t: t.sum(1, dtype=torch.float64), torch.randn(4, 5), "sum.IntList_out"),
])
def test_other_dtypes_fall_back_and_are_counted(level, fn, x, stat):
    expected = fn(x)
    aten_fpga.reset_stats()
    actual = fn(x.to("fpga"))
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)
    assert aten_fpga.stats()[stat] == {"fpga": 0, "cpu_fallback": 1}


# --- The codegen pieces reductions need ------------------------------------------------------------

def codegen_table(tmp_path, text):
    from codegen import library as kernel_library
    from codegen.generate import HLS_ROOT
    from codegen.native import dispatch_stubs, load_native, torch_include_dir
    from codegen.table import load_table, resolve

    path = tmp_path / "table.yaml"
    path.write_text(text)
    library = kernel_library.load_library(HLS_ROOT)
    return resolve(load_table(str(path)), load_native(), library, dispatch_stubs(torch_include_dir())), library


def test_codegen_reduce_kernels(tmp_path):
    from codegen.gen_hls import arg_names

    entries, library = codegen_table(tmp_path, textwrap.dedent("""
        argmax.out: {kernel: reduce/argmax, dtypes: [float16]}
        linalg_vector_norm.out: {kernel: reduce/norm, dtypes: [complex64], stub: norm_stub}
        var.correction: {kernel: reduce/std_var, dtypes: [float32], host: fpga_var}
    """))
    argmax, norm, var = (r.kernels[0] for r in entries)
    assert (argmax.name, argmax.out.name, norm.out.name, var.out.name) == (
        "v_argmax_float16", "int64", "float32", "float32")
    assert arg_names(norm) == ["in", "out", "part", "p", "outer", "inner", "cols", "pitch", "first", "length", "mode"]
    assert [(s.name, s.ctype) for s in var.op.scalars] == [("correction", "double"), ("take_sqrt", "bool")]
    assert entries[2].stub is None and entries[0].stub == "argmax_stub"


def test_codegen_host_entry_wrapper(tmp_path):
    from codegen.gen_fpga_type import generate_fpga_type

    entries, _ = codegen_table(tmp_path, "var.correction: {kernel: reduce/std_var, dtypes: [float32], host: fpga_var}\n"
                                         "sum.IntList_out: {kernel: reduce/sum, dtypes: [float32]}\n")
    files = generate_fpga_type(entries)
    assert ("at::Tensor fpga_var(const KernelRef& kernel, const at::Tensor & self, at::OptionalIntArrayRef dim"
            in files["FPGAType.h"])
    unit = files["FPGAType_0.cpp"]
    assert ('static const aten_fpga::KernelRef kernel{.name = "std_var", .reduction = true, '
            '.dtypes = aten_fpga::dtype_mask({at::ScalarType::Float})};') in unit
    assert "aten_fpga::fpga_var(kernel, self, dim, correction, keepdim)" in unit
    assert "run_or_fallback<at::_ops::var_correction>" in unit  # host/ps/wrapper.h: the counted fallback
    assert "REGISTER_PRIVATEUSE1_DISPATCH(sum_stub," in unit and "std_var_stub" not in unit


@pytest.mark.parametrize("text,line,words", [
    ("var.correction: {kernel: reduce/std_var, dtypes: [float32], host: fpga_var, stub: std_var_stub}", 1,
     ["names a host function", "remove 'stub:'"]),
    ("var.correction: {kernel: reduce/std_var, dtypes: [float32], host: 3}", 1, ["host of 'var.correction'"]),
    ("var.correction: {kernel: reduce/std_var, dtypes: [float32]}", 1,
     ["is a functional/in-place overload", "named with 'host:'"]),
])
def test_codegen_host_entry_errors(tmp_path, text, line, words):
    from codegen.model import TableError

    with pytest.raises(TableError) as err:
        codegen_table(tmp_path, text + "\n")
    assert err.value.loc.line == line
    for w in words:
        assert w in str(err.value)


@pytest.mark.parametrize("spec,words", [
    ("{expr: S, types: {out: float128}}", ["unknown dtype 'float128'", "real"]),
    ("{expr: S, scalars: [{p: double, q: float}]}", ["a scalar is a name", "{name: ..., dtype: ..."]),
])
def test_codegen_category_errors(tmp_path, spec, words):
    from codegen import library as kernel_library
    from codegen.model import TableError

    folder = tmp_path / "red"
    folder.mkdir()
    (folder / "ops.yaml").write_text(f"inputs: [in]\noutputs: [out]\nsizes: [outer, inner]\nops:\n  s: {spec}\n")
    for level in LEVELS:
        (folder / f"opt{level}.cpp.j2").write_text("")
    with pytest.raises(TableError) as err:
        kernel_library.load_category(str(tmp_path), "red")
    assert err.value.loc.line == 5
    for w in words:
        assert w in str(err.value)


def test_codegen_word_only_for_pointwise(tmp_path):
    """ops.yaml's `word` (a whole-word op function) is called by the pointwise XCL_OPT 4 template only:
    on a reduce op it is an error at its line, not silently ignored."""
    from codegen import library as kernel_library
    from codegen.model import TableError

    folder = tmp_path / "red"
    folder.mkdir()
    (folder / "ops.yaml").write_text("inputs: [in]\noutputs: [out]\nsizes: [outer, inner]\ndriver: reduce\n"
                                     "ops:\n  s: {expr: S, word: s_lanes}\n")
    for level in LEVELS:
        (folder / f"opt{level}.cpp.j2").write_text("")
    with pytest.raises(TableError) as err:
        kernel_library.load_category(str(tmp_path), "red")
    assert err.value.loc.line == 6
    assert "'word' of op 's'" in str(err.value) and "remove it" in str(err.value)
