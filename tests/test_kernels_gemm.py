"""Matrix products on device "fpga" (kernels/hls/gemm, host/ps/fpga_gemm.cpp) at every XCL_OPT level,
against PyTorch on the CPU: mm, addmm, bmm, baddbmm, addmv/mv, dot, addr and what lowers to them
(matmul with batch broadcast, linear and its backward, einsum); edge shapes (k = 1, m and n not
multiples of a tile, zero-size dims), transposed and strided operands, float16, alpha/beta with
beta = 0 ignoring NaN in the output. Inputs are produced on the device by another kernel (valid only
in device memory), and every product must have run as a kernel (aten_fpga.stats()).

Tolerance: the kernel's float32 sums of k products differ from the CPU's (another summation order)
by at most about k * eps * sum_p |a_ip * b_pj| (the classic bound); results are compared with the
product in float64 against that bound, plus half an ulp of the result dtype. Integer-valued inputs,
whose sums are exact in float32, must match the CPU bit for bit."""
import subprocess
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import torch.nn.functional as F

import aten_fpga

F32, F16 = torch.float32, torch.float16
EPS32 = torch.finfo(F32).eps




def gen(*key):
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


def randn(shape, dtype=F32, key=()):
    return torch.randn(shape, generator=gen(shape, dtype, *key)).to(dtype)


def ints(shape, dtype=F32, key=()):
    return torch.randint(-4, 5, shape, generator=gen(shape, dtype, "int", *key)).to(dtype)


def dev(x):
    """x on the fpga, made there by a kernel: its bytes live only in device memory."""
    return x.to("fpga") * 1


def close(actual, expected, k, scale=None):
    """|actual - expected| <= (k + 2) * eps32 * scale + half an ulp of the result dtype, elementwise;
    `expected` in float64 (or rounded to actual's dtype), `scale` = the sum of |terms| (default |expected|)."""
    assert actual.device.type == "fpga"
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype or expected.dtype == torch.float64, (actual.dtype, expected.dtype)
    got, want = actual.cpu().double(), expected.double()
    scale = want.abs() if scale is None else scale
    bound = (k + 2) * EPS32 * scale + torch.finfo(actual.dtype).eps / 2 * want.abs() + 1e-30
    assert torch.isfinite(got).all() and ((got - want).abs() <= bound).all(), (got - want).abs().max()


def ran(*ops):
    s = aten_fpga.stats()
    for op in ops:
        assert s.get(op, {}).get("fpga", 0) >= 1 and s[op]["cpu_fallback"] == 0, (op, s.get(op))


def mm_check(a, b, fn=torch.mm, op="mm"):
    """fn(a, b) on the fpga (inputs made on the device) against float64 on the CPU."""
    aten_fpga.reset_stats()
    out = fn(dev(a), dev(b))
    want = fn(a.double(), b.double())
    assert out.dtype == a.dtype
    close(out, want, a.shape[-1], fn(a.double().abs(), b.double().abs()))
    ran(op)


# m, k, n: k = 1, tiny, a tile, not multiples of a tile (64 at XCL_OPT 1-3; at 4, 128 x 192 in the
# emulated image's default 16 x 24 PE array, 256 x 384 in the U250's 32 x 48), k
# longer than one chunk, one row, one column.
SHAPES = [(1, 1, 1), (5, 1, 7), (64, 64, 64), (65, 33, 129), (3, 200, 5), (130, 70, 300), (1, 300, 17),
          (17, 300, 1), (257, 129, 385)]


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_mm(level, m, k, n):
    mm_check(randn((m, k)), randn((k, n)))


@pytest.mark.parametrize("dtype", [F32, F16])
def test_integer_valued_inputs_are_bit_exact(level, dtype):
    a, b = ints((70, 90), dtype), ints((90, 50), dtype)
    aten_fpga.reset_stats()
    torch.testing.assert_close((dev(a) @ dev(b)).cpu(), a @ b, rtol=0, atol=0)
    c, x, y = ints((70, 50), dtype, "c"), ints((70, 1), dtype, "x"), ints((1, 50), dtype, "y")
    torch.testing.assert_close(torch.addmm(dev(c), dev(a), dev(b), beta=2, alpha=3).cpu(),
                               torch.addmm(c, a, b, beta=2, alpha=3), rtol=0, atol=0)
    torch.testing.assert_close(torch.addmm(dev(c), dev(x), dev(y)).cpu(), torch.addmm(c, x, y), rtol=0, atol=0)
    ran("mm", "addmm")


@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_transposed_operands(level, ta, tb):
    # pitches of whole 512-bit words, so that XCL_OPT 4 reads them in place too
    a = randn((96, 64), key=("a",)) if ta else randn((64, 96), key=("a",))
    b = randn((32, 96), key=("b",)) if tb else randn((96, 32), key=("b",))
    da, db = dev(a), dev(b)
    aten_fpga.reset_stats()
    out = (da.t() if ta else da) @ (db.t() if tb else db)
    a2, b2 = (a.t() if ta else a).double(), (b.t() if tb else b).double()
    close(out, (a2 @ b2).float(), 96, a2.abs() @ b2.abs())
    ran("mm")
    # a transposed operand is read in place: the only launch is the product itself
    assert sum(v["fpga"] for v in aten_fpga.stats().values()) == 1, aten_fpga.stats()
    # and odd pitches (packed on the device at XCL_OPT 4)
    a, b = randn((33, 70), key=("a2",)), randn((50, 33), key=("b2",))
    out = dev(a).t() @ dev(b).t()
    close(out, (a.t().double() @ b.t().double()).float(), 33, a.t().double().abs() @ b.t().double().abs())


@pytest.mark.parametrize("dtype", [F32, F16])
def test_operand_layout_does_not_change_bits(level, dtype):
    """Each output is one sum in k order whatever the operands' layouts, so an operand read in place
    transposed gives the bits of its contiguous copy: at XCL_OPT 4 a transposed b is turned into rows
    in the read stage (the PE array's buffer is stored by rows only) and a transposed a lands by
    columns. Shapes across tiles (m, n not whole tiles) and chunks (k longer than a chunk, the last
    one short), inputs made on the device, batched too."""
    for m, k, n in [(130, 200, 390), (17, 70, 33), (257, 64, 20)]:
        a, b = randn((k, m), dtype, key=("la", m)), randn((n, k), dtype, key=("lb", m))  # stored transposed
        da, db = dev(a), dev(b)
        aten_fpga.reset_stats()
        want = (da.t().contiguous() @ db.t().contiguous()).cpu()
        for x, y in [(da.t(), db.t().contiguous()), (da.t().contiguous(), db.t()), (da.t(), db.t())]:
            torch.testing.assert_close((x @ y).cpu(), want, rtol=0, atol=0)
        ran("mm")
    a, b = randn((3, 90, 40), dtype, key=("lba",)), randn((3, 70, 90), dtype, key=("lbb",))
    da, db = dev(a), dev(b)
    want = torch.bmm(da.transpose(1, 2).contiguous(), db.transpose(1, 2).contiguous()).cpu()
    torch.testing.assert_close(torch.bmm(da.transpose(1, 2), db.transpose(1, 2)).cpu(), want, rtol=0, atol=0)
    ran("bmm")


def test_strided_operands(level):
    """Neither inner stride is 1 (a column slice of a column slice): packed on the device first."""
    a, b = randn((40, 120), key=("a",)), randn((120, 70), key=("b",))
    aten_fpga.reset_stats()
    out = dev(a)[:, ::2] @ dev(b)[::2, 1::3].t().t()
    a2, b2 = a[:, ::2].double(), b[::2, 1::3].double()
    close(out, (a2 @ b2).float(), 60, a2.abs() @ b2.abs())
    ran("mm")


def test_output_views(level):
    """out= a strided view (a column slice) and a transposed one: written through, the rest kept."""
    a, b = randn((30, 20), key=("a",)), randn((20, 10), key=("b",))
    base = dev(randn((30, 25), key=("c",)))
    want = base.cpu().clone()
    torch.mm(dev(a), dev(b), out=base[:, 5:15])
    want[:, 5:15] = (a.double() @ b.double()).float()
    torch.testing.assert_close(base.cpu(), want, rtol=1e-5, atol=1e-5)
    out_t = dev(torch.zeros(10, 30)).t()
    torch.mm(dev(a), dev(b), out=out_t)
    torch.testing.assert_close(out_t.cpu(), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m,k,n", [(0, 5, 3), (4, 5, 0), (4, 0, 3), (0, 0, 0)])
def test_zero_size(level, m, k, n):
    a, b, c = randn((m, k)), randn((k, n)), randn((m, n), key=("c",))
    torch.testing.assert_close((dev(a) @ dev(b)).cpu(), a @ b)
    torch.testing.assert_close(torch.addmm(dev(c), dev(a), dev(b), beta=2).cpu(), torch.addmm(c, a, b, beta=2))
    torch.testing.assert_close(torch.bmm(dev(a[None]), dev(b[None])).cpu(), torch.bmm(a[None], b[None]))


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1.5), (-1, 0.25)])
def test_addmm_alpha_beta(level, beta, alpha):
    a, b = randn((33, 70), key=("a",)), randn((70, 45), key=("b",))
    for bias in (randn((45,), key=("bias",)), randn((33, 45), key=("c",)), randn((33, 1), key=("col",))):
        aten_fpga.reset_stats()
        out = torch.addmm(dev(bias), dev(a), dev(b), beta=beta, alpha=alpha)
        want = torch.addmm(bias.double(), a.double(), b.double(), beta=beta, alpha=alpha)
        scale = abs(alpha) * (a.double().abs() @ b.double().abs()) + abs(beta) * bias.double().abs()
        close(out, want.float(), 72, scale)
        ran("addmm")


def test_beta_zero_ignores_nan_and_inf(level):
    a, b = randn((20, 30), key=("a",)), randn((30, 40), key=("b",))
    junk = torch.full((20, 40), float("nan"))
    junk[::2] = float("inf")
    out = torch.addmm(dev(junk), dev(a), dev(b), beta=0)
    want = (a.double() @ b.double()).float()
    close(out, want, 30, a.double().abs() @ b.double().abs())
    dst = dev(junk)
    torch.mm(dev(a), dev(b), out=dst)  # mm's out= is beta = 0 too
    close(dst, want, 30, a.double().abs() @ b.double().abs())
    y = dev(junk[:, 0])
    torch.addmv(y, dev(a), dev(b[:, 0]), beta=0, out=y)
    close(y, want[:, 0], 30, (a.double().abs() @ b.double().abs())[:, 0])


def test_in_place_and_out(level):
    a, b, c = randn((20, 30), key=("a",)), randn((30, 40), key=("b",)), randn((20, 40), key=("c",))
    aten_fpga.reset_stats()
    x = dev(c)
    x.addmm_(dev(a), dev(b), beta=0.5, alpha=2)
    want = torch.addmm(c.double(), a.double(), b.double(), beta=0.5, alpha=2)
    close(x, want.float(), 32, 2 * (a.double().abs() @ b.double().abs()) + 0.5 * c.double().abs())
    out = dev(torch.empty(0))  # resized by the op
    torch.addmm(dev(c), dev(a), dev(b), out=out)
    close(out, torch.addmm(c.double(), a.double(), b.double()).float(), 32,
          a.double().abs() @ b.double().abs() + c.double().abs())
    ran("addmm_", "addmm.out")


def test_bmm_baddbmm(level):
    a, b, c = randn((3, 40, 70), key=("a",)), randn((3, 70, 50), key=("b",)), randn((3, 40, 50), key=("c",))
    mm_check(a, b, torch.bmm, "bmm")
    aten_fpga.reset_stats()
    out = torch.baddbmm(dev(c), dev(a), dev(b), beta=0.5, alpha=-2)
    want = torch.baddbmm(c.double(), a.double(), b.double(), beta=0.5, alpha=-2)
    close(out, want.float(), 72, 2 * (a.double().abs() @ b.double().abs()) + 0.5 * c.double().abs())
    # a broadcast bias, and batch items that are transposed views
    out = torch.baddbmm(dev(c[0, 0]), dev(a.transpose(1, 2).contiguous()).transpose(1, 2), dev(b))
    close(out, torch.baddbmm(c[0, 0].double(), a.double(), b.double()).float(), 72,
          a.double().abs() @ b.double().abs() + c[0, 0].double().abs())
    ran("baddbmm")


def test_matmul_batch_broadcast_and_einsum(level):
    a, b = randn((2, 1, 20, 30), key=("a",)), randn((3, 30, 10), key=("b",))
    aten_fpga.reset_stats()
    out = torch.matmul(dev(a), dev(b))
    close(out, (a.double() @ b.double()).float(), 30, a.double().abs() @ b.double().abs())
    s = aten_fpga.stats()
    assert sum(v["fpga"] for k, v in s.items() if k.startswith(("bmm", "mm"))) >= 1, s
    assert sum(v["cpu_fallback"] for v in s.values()) == 0, s
    x, y = randn((4, 12, 16), key=("x",)), randn((4, 16, 8), key=("y",))
    aten_fpga.reset_stats()
    out = torch.einsum("bij,bjk->bik", dev(x), dev(y))
    close(out, torch.einsum("bij,bjk->bik", x.double(), y.double()).float(), 16,
          x.double().abs() @ y.double().abs())
    ran("bmm")


def test_vector_products(level):
    m, v, w = randn((50, 70), key=("m",)), randn((70,), key=("v",)), randn((50,), key=("w",))
    aten_fpga.reset_stats()
    close(torch.mv(dev(m), dev(v)), (m.double() @ v.double()).float(), 70, m.double().abs() @ v.double().abs())
    close(torch.addmv(dev(w), dev(m), dev(v), beta=2, alpha=0.5),
          torch.addmv(w.double(), m.double(), v.double(), beta=2, alpha=0.5).float(), 70,
          0.5 * (m.double().abs() @ v.double().abs()) + 2 * w.double().abs())
    close(torch.dot(dev(v), dev(v * 2)), torch.dot(v.double(), 2 * v.double()).float(), 70,
          torch.dot(v.double().abs(), 2 * v.double().abs()))
    close(dev(v) @ dev(v), (v.double() @ v.double()).float(), 70, v.double() @ v.double())
    close(torch.addr(dev(m), dev(w), dev(v), beta=0.5, alpha=3),
          torch.addr(m.double(), w.double(), v.double(), beta=0.5, alpha=3).float(), 1,
          3 * torch.outer(w.double().abs(), v.double().abs()) + 0.5 * m.double().abs())
    ran("addmv_", "addmv", "dot", "addr")


def test_float16(level):
    a, b, bias = randn((70, 90), F16, ("a",)), randn((90, 50), F16, ("b",)), randn((50,), F16, ("bias",))
    mm_check(a, b)
    aten_fpga.reset_stats()
    out = F.linear(dev(a), dev(b.t()), dev(bias))
    want = F.linear(a.double(), b.t().double(), bias.double())  # exact: the kernel rounds once to half
    close(out, want, 90, a.double().abs() @ b.double().abs() + bias.double().abs())
    ran("addmm")


def test_linear_forward_and_backward(level):
    """nn.Linear: forward (addmm with weight.t() read in place) and every gradient on the fpga."""
    torch.manual_seed(0)
    cpu = torch.nn.Linear(70, 30)
    fpga = torch.nn.Linear(70, 30).to("fpga")
    fpga.load_state_dict(cpu.state_dict())
    x, g = randn((40, 70), key=("x",)), randn((40, 30), key=("g",))
    aten_fpga.reset_stats()
    xf = dev(x).requires_grad_()
    fpga(xf).backward(dev(g))
    xc = x.clone().requires_grad_()
    cpu(xc).backward(g)
    for got, want in ((xf.grad, xc.grad), (fpga.weight.grad, cpu.weight.grad), (fpga.bias.grad, cpu.bias.grad)):
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    s = aten_fpga.stats()
    ran("addmm", "mm")
    gemm_fallbacks = {k: v for k, v in s.items() if k.split(".")[0] in ("mm", "addmm", "t", "bmm") and v["cpu_fallback"]}
    assert not gemm_fallbacks, gemm_fallbacks


def test_errors_name_the_cause(level):
    a, b = dev(randn((3, 4))), dev(randn((5, 6)))
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(a, b)
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(a, dev(randn((4, 2))).half())


def test_other_dtypes_fall_back_counted(level):
    a = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    aten_fpga.reset_stats()
    torch.testing.assert_close((a.to("fpga") @ a.t().to("fpga")).cpu(), a @ a.t())
    assert aten_fpga.stats()["mm"]["cpu_fallback"] == 1


# The ops the MLP step below still runs on the CPU: their kernels belong to other families (the
# loss, the activation and its backward, fill). Every matrix product of the step runs on the fpga.
MLP_NON_GEMM_FALLBACKS: set[str] = set()  # none: ReLU, the MSE loss and the fills are kernels too


def test_default_image_splits_rows_over_its_gemm_cus():
    """The default emulated image has as many GEMM engine CUs as a U250 holds of its 16 x 48 array
    (one per CU, which the float16 and float32 members share): 2;
    each computes a band of whole 64-row granules of c, on its own host thread, and the bits are
    those of a one-CU product."""
    aten_fpga.load(4)
    assert aten_fpga._C.kernel_cus("v_gemm_float32") == 2
    a, b = ints((600, 48)), ints((48, 80))  # rows of whole port words: no packing copies
    x, y = dev(a), dev(b)
    before = [c["runs"] for c in aten_fpga._C.cu_activity()]  # the CUs that ran so far
    aten_fpga.reset_stats()
    out = x @ y
    activity = aten_fpga._C.cu_activity()
    assert aten_fpga.stats()["mm"] == {"fpga": 1, "cpu_fallback": 0} and "copy_" not in aten_fpga.stats()
    torch.testing.assert_close(out.cpu(), a @ b, rtol=0, atol=0)
    before += [0] * (len(activity) - len(before))
    assert [c["runs"] - r for c, r in zip(activity, before)] == [1, 1] + [0] * (len(activity) - 2)
    assert len({c["last_thread"] for c in activity[:2]}) == 2
    # (a, b, c, alpha, beta, m, ...): c's offset and the rows of each band
    bands = [(c["last_args"][2][1], c["last_args"][5][1]) for c in activity[:2]]
    assert bands == [(0, 320), (320 * 80 * 4, 280)]


def test_mlp_training_step():
    """Linear(64, 128) -> ReLU -> Linear(128, 10), MSE loss, SGD, batch 32: 20 steps on the fpga give
    the CPU's weights within 1e-4 relative; every GEMM of forward and backward runs as a kernel."""
    aten_fpga.load(4)

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))

    x, y = randn((32, 64), key=("x",)), randn((32, 10), key=("y",))
    models = {}
    aten_fpga.reset_stats()
    for device in ("cpu", "fpga"):
        model = make().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        xd, yd = (dev(x), dev(y)) if device == "fpga" else (x, y)
        for _ in range(20):
            opt.zero_grad()
            F.mse_loss(model(xd), yd).backward()
            opt.step()
        models[device] = model
    for (name, want), got in zip(models["cpu"].state_dict().items(), models["fpga"].state_dict().values()):
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-6, msg=name)
    s = aten_fpga.stats()
    assert s["addmm"]["fpga"] == 40 and s["mm"]["fpga"] == 60, s  # 2 forward, 3 backward per step
    fallbacks = {op for op, v in s.items() if v["cpu_fallback"]}
    assert fallbacks <= MLP_NON_GEMM_FALLBACKS, fallbacks - MLP_NON_GEMM_FALLBACKS


# The XCL_OPT 4 kernel alone, compiled by g++ as the emulated image compiles it, driven on products
# of random floats: m x n x k, the transpose bits, beta (0 or not), k not a whole chunk, m and n not
# whole tiles. The driver prints every output's bits.
PE_DRIVER = r"""
#include <cstdio>
#include <cstring>
#include "gemm.cpp"
using namespace v_gemm_float32_opt4;
static unsigned seed = 12345;
static float rnd() { seed = seed * 1664525u + 1013904223u; return float(int(seed >> 8) - (1 << 23)) / float(1 << 20); }
static uint64_t whole(uint64_t x) { return (x + LANES - 1) / LANES * LANES; }
static V* words(uint64_t elements) {
  V* p = new V[whole(elements) / LANES + 1];  // -faligned-new: whole 64-byte words
  for (uint64_t i = 0; i < whole(elements); ++i) reinterpret_cast<T*>(p)[i] = rnd();
  return p;
}
int main() {
  const uint64_t cases[][5] = {{130, 300, 200, 0, 0}, {257, 385, 129, 1, 1}, {65, 33, 1000, 2, 0},
                               {1, 17, 70, 3, 1}, {300, 520, 64, 0, 1}, {40, 50, 0, 0, 1}};
  for (const auto& cs : cases) {
    const uint64_t m = cs[0], n = cs[1], k = cs[2], trans = cs[3];
    const float beta = cs[4] ? 0.5f : 0.0f;
    const uint64_t lda = whole(trans & 1 ? m : k), ldb = whole(trans & 2 ? k : n), ldc = whole(n);
    V* a = words((trans & 1 ? k : m) * lda);
    V* b = words((trans & 2 ? n : k) * ldb);
    V* c = words(m * ldc);
    v_gemm_float32(a, b, c, 1.5f, beta, m, n, k, 1, trans, lda, ldb, ldc, 0, 0, 0);
    for (uint64_t i = 0; i < m; ++i)
      for (uint64_t j = 0; j < n; ++j) {
        uint32_t bits;
        std::memcpy(&bits, reinterpret_cast<T*>(c) + i * ldc + j, 4);
        std::printf("%08x\n", bits);
      }
    delete[] a, delete[] b, delete[] c;
  }
}
"""


def test_pe_geometry_does_not_change_results(tmp_path):
    """Each output of the XCL_OPT 4 kernel is one float32 sum in k order whatever the PE array, so
    every gemm_pe gives the same bits: the emulated image's default 16 x 48, the U250's 32 x 48 and
    a 4 x 4 (many small tiles). This is why the emulated image may run the array its CPU runs fastest."""
    from codegen import library as kernel_library
    from codegen.gen_hls import template_env
    from codegen.generate import HLS_ROOT, ROOT
    from codegen.model import DTYPES, Kernel

    kernel = Kernel(kernel_library.load_library(HLS_ROOT)["gemm"].ops["gemm"], DTYPES["float32"])
    (tmp_path / "gemm.cpp").write_text(template_env(HLS_ROOT).get_template("gemm/opt4.cpp.j2").render(
        kernel=kernel, op=kernel.op, dtype=kernel.dtype, level=4))
    (tmp_path / "driver.cpp").write_text(PE_DRIVER)

    def run(pe):
        exe = tmp_path / f"pe_{pe[0]}x{pe[1]}"
        # The emulated image's flags (site_scons/afpga/emu.py) that bear on the arithmetic.
        subprocess.run(["g++", "-std=c++14", "-faligned-new", "-O3", "-march=native", "-ffp-contract=off",
                        "-Wno-unknown-pragmas", "-Wno-unused-label", f"-DAFPGA_GEMM_PE_M={pe[0]}",
                        f"-DAFPGA_GEMM_PE_N={pe[1]}", *(f"-I{ROOT}/kernels/hls/{d}" for d in ("emu/include", "include")),
                        f"-I{tmp_path}", str(tmp_path / "driver.cpp"), "-o", str(exe)], check=True)
        return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()

    with ThreadPoolExecutor(2) as pool:
        default, u250, small = pool.map(run, [(16, 48), (32, 48), (4, 4)])
    assert len(default) == 130 * 300 + 257 * 385 + 65 * 33 + 17 + 300 * 520 + 40 * 50
    assert len(set(default)) > len(default) // 2  # distinct sums, not a constant
    assert default == u250 and default == small


@pytest.mark.parametrize("op", ["mm", "mm_t", "bmm", "addmm", "linear"])
def test_float16_runs_the_float32_array(op):
    """The float16 member streams its operands, widened, through the float32 member's PE array and
    rounds each result once: every float16 product is bit for bit the float32 product of the same
    (widened) inputs, rounded to float16 -- same accumulation order, one array. Inputs are another
    kernel's outputs (neg), as in a chain."""
    aten_fpga.load(4)
    shapes = {"bmm": ((3, 70, 150), (3, 150, 90))}
    sa, sb = shapes.get(op, ((130, 300), (300, 200)))
    a, b = randn(sa, torch.float16, ("f16", op, 0)), randn(sb, torch.float16, ("f16", op, 1))
    bias = randn((sa[0], sb[-1]), torch.float16, ("f16", op, 2))

    def run(x, y, c):
        x, y, c = torch.neg(dev(x)), torch.neg(dev(y)), torch.neg(dev(c))
        if op == "mm_t":  # both operands stored transposed (b is turned in the read stage)
            return torch.mm(x.t().contiguous().t(), y.t().contiguous().t())
        if op == "bmm":
            return torch.bmm(x, y)
        if op == "addmm":
            return torch.addmm(c, x, y, beta=0.5, alpha=1.5)
        if op == "linear":
            return F.linear(x, y.t().contiguous(), c[0])
        return torch.mm(x, y)

    aten_fpga.reset_stats()
    half = run(a, b, bias).cpu()
    single = run(a.float(), b.float(), bias.float()).cpu()
    products = {k: v for k, v in aten_fpga.stats().items() if k in ("mm", "bmm", "addmm", "linear")}
    assert sum(v["fpga"] for v in products.values()) == 2, products  # the float16 and the float32 product
    assert sum(v["cpu_fallback"] for v in products.values()) == 0, products
    if op in ("addmm", "linear"):
        # the epilogue adds the float16 bias in float: the float32 run's, rounded once
        torch.testing.assert_close(half, single.half(), rtol=0, atol=0)
    else:
        assert torch.equal(half.view(torch.int16), single.half().view(torch.int16))
    # and a float16 product of small integers is exact: the CPU's, bit for bit
    x, y = ints(sa, torch.float16, ("f16i", op)), ints(sb, torch.float16, ("f16i", op, 1))
    if op != "bmm":
        torch.testing.assert_close(torch.mm(torch.neg(dev(x)), dev(y)).cpu(), torch.mm(-x.float(), y.float()).half(),
                                   rtol=0, atol=0)
