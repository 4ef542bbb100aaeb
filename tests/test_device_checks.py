"""What PyTorch's device-generic tests found on "fpga" (issue #29, item 7), each checked against the
CPU: the same values, the same exception type and message, the same warnings.

Inputs are other kernels' outputs (`torch.neg(torch.neg(x.to("fpga")))`), so that their bytes are
newer on the device; the suite runs under the coherence sanitizer (ATEN_FPGA_SANITIZE=1).
"""
import math
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import aten_fpga

INF, NAN = math.inf, math.nan


def on_device(x):
    """x on fpga, its bytes written by kernels (newer on the device)."""
    return torch.neg(torch.neg(x.to("fpga")))


def message(w):
    """A warning's text without the C++ source location ATen appends (its line is the compiler's)."""
    return str(w.message).split(" (Triggered internally at")[0]


def outcome(fn, device):
    """What fn(device) does: ('ok', result on the CPU, warnings) or ('error', type, message, warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = fn(device)
        except Exception as e:  # noqa: BLE001 -- the point is to compare whatever is raised
            return ("error", type(e), str(e).split("\n")[0], [message(w) for w in caught])
    r = r.cpu() if isinstance(r, torch.Tensor) else r
    return ("ok", r, [message(w) for w in caught])


def assert_same_as_cpu(fn, values=True):
    """fn("fpga") raises what fn("cpu") raises (type and message) and warns what it warns; with
    `values`, a result equal bit for bit."""
    cpu, fpga = outcome(fn, "cpu"), outcome(fn, "fpga")
    assert fpga[0] == cpu[0], (cpu, fpga)
    if cpu[0] == "error":
        assert fpga[1:] == cpu[1:], (cpu, fpga)
    else:
        assert fpga[2] == cpu[2], (cpu[2], fpga[2])
        if values:
            torch.testing.assert_close(fpga[1], cpu[1], rtol=0, atol=0, equal_nan=True)
    return cpu


def counts(op):
    return aten_fpga.stats().get(op, {"fpga": 0, "cpu_fallback": 0})


# --- Storage the allocator did not make ------------------------------------------------------


def test_dlpack_storage_is_refused_by_name():
    # Without the check, .cpu() of such a tensor segfaulted, returned garbage, failed an internal
    # assert or deadlocked: run it in a process of its own.
    code = textwrap.dedent(
        """
        import torch, aten_fpga
        from torch.utils import dlpack
        x = torch.neg(torch.neg(torch.arange(6.0).to("fpga")))
        y = torch.from_dlpack(dlpack.to_dlpack(x))
        assert y.device.type == "fpga"
        uses = {"cpu": lambda: y.cpu(), "kernel": lambda: y + 1, "reduce": lambda: y.sum(),
                "fallback": lambda: torch.lgamma(y), "copy_into": lambda: y.copy_(x),
                "copy_from": lambda: x.copy_(y), "resize": lambda: y.resize_(1000)}
        for name, use in uses.items():
            try:
                use()
            except RuntimeError as e:
                assert "was not allocated by aten_fpga" in str(e) and "from_dlpack" in str(e), (name, e)
            else:
                raise AssertionError(name + " did not refuse the DLPack storage")
        assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        print("ok")
        """
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, ATEN_FPGA_SANITIZE="1"))
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr


# --- float16 ops with a Python scalar --------------------------------------------------------


def test_half_scalar_examples_from_the_issue():
    aten_fpga.reset_stats()
    x = torch.tensor([100.0, 1e-5], dtype=torch.half)
    torch.testing.assert_close(on_device(x).div(1e5).cpu(), x.div(1e5), rtol=0, atol=0)
    assert x.div(1e5)[0].item() == pytest.approx(0.0010004, abs=1e-7)  # not 0
    torch.testing.assert_close((on_device(x) * 1e5).cpu(), x * 1e5, rtol=0, atol=0)
    assert (x * 1e5)[1].item() == 1.0009765625  # not inf
    assert counts("div.out")["fpga"] == 1 and counts("mul.out")["fpga"] == 1


HALF_VALUES = torch.cat([
    torch.randn(200, generator=torch.Generator().manual_seed(0)) * 1000,
    torch.tensor([0.0, -0.0, 1e-5, -1e-7, 6e-8, 1.0, 3.0, 100.0, 1000.0, 65504.0, -65504.0, INF, -INF, NAN]),
]).half()
SCALARS = [1e5, 1e-5, -3.14159, 1 / 3, 70000.0, -1e-8, 2.0, 0.5, 100001, 7, 0.0, INF, NAN]
OPS = {
    "mul": lambda x, s: x * s,
    "div": lambda x, s: x / s,
    "div_trunc": lambda x, s: torch.div(x, s, rounding_mode="trunc"),
    "div_floor": lambda x, s: torch.div(x, s, rounding_mode="floor"),
    "add": lambda x, s: x + s,
    "sub": lambda x, s: x - s,
    "rsub": lambda x, s: s - x,
    "remainder": lambda x, s: torch.remainder(x, s),
    "fmod": lambda x, s: torch.fmod(x, s),
    "pow": lambda x, s: torch.pow(x, torch.tensor(s)),
    "lt": lambda x, s: x < s,
    "eq": lambda x, s: x == s,
    "maximum": lambda x, s: torch.maximum(x, torch.tensor(s, dtype=x.dtype)),
}


@pytest.mark.parametrize("dtype", [torch.half, torch.bfloat16])
@pytest.mark.parametrize("op", OPS)
def test_reduced_float_ops_with_a_scalar_match_the_cpu_bit_for_bit(op, dtype):
    x = HALF_VALUES.to(dtype)
    xf = on_device(x)
    for s in SCALARS:
        got = OPS[op](xf, s).cpu()
        torch.testing.assert_close(got, OPS[op](x, s), rtol=0, atol=0, equal_nan=True, msg=f"{op} {s}")


@pytest.mark.parametrize("op", ["mul", "div", "div_trunc", "div_floor"])
def test_half_scalar_operand_kinds(op):
    # ATen reads the second operand in float whenever it is one value (a 0-dim CPU float32 tensor,
    # a 0-dim fpga float32 tensor); a first operand, or a float16 one, is read as float16.
    x = HALF_VALUES
    xf = on_device(x)
    for s in (torch.tensor(1e5), torch.tensor(1e-5), torch.tensor(1e5, dtype=torch.float64)):
        torch.testing.assert_close(OPS[op](xf, on_device(s)).cpu(), OPS[op](x, s), rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(OPS[op](xf, s).cpu(), OPS[op](x, s), rtol=0, atol=0, equal_nan=True)
    first = torch.tensor(1e-3).half()
    torch.testing.assert_close(OPS[op](on_device(first), 1e5).cpu(), OPS[op](first, 1e5), rtol=0, atol=0)


def test_half_scalar_into_a_float32_out_falls_back_counted():
    # ATen rounds to float16 before the cast to a float32 out=: the fallback does it.
    aten_fpga.reset_stats()
    x = HALF_VALUES
    out = torch.empty(x.shape, device="fpga")
    torch.mul(on_device(x), 1e-5, out=out)
    torch.testing.assert_close(out.cpu(), torch.mul(x, 1e-5, out=torch.empty(x.shape)), rtol=0, atol=0, equal_nan=True)
    assert counts("mul.out")["cpu_fallback"] == 1


# --- complex prod -------------------------------------------------------------------------------


COMPLEX_CASES = [
    [complex(INF, 0), 1 + 1j],  # the issue's: nan+nanj, not inf-infj
    [complex(INF, 0), 1 + 0j],
    [complex(INF, 0), complex(0, 0)],
    [2j, complex(INF, 0)] * 9,
    [complex(0, INF), 2.0, 3.0],
    [complex(INF, INF), 1 + 1j, 1 - 1j],
    [complex(NAN, 0), 1 + 1j],
    [1 + 1j, complex(-INF, 2), 0.5j, 3.0],
    [complex(INF, 0)] + [1 + 0j] * 40 + [2 + 1j],
]


def test_complex_prod_with_infinities_matches_aten(level):
    aten_fpga.reset_stats()
    for case in COMPLEX_CASES:
        x = torch.tensor(case, dtype=torch.complex64)
        got = on_device(x).prod().cpu()
        torch.testing.assert_close(torch.view_as_real(got), torch.view_as_real(x.prod()), rtol=0, atol=0,
                                   equal_nan=True, msg=str(case))
    # Rows (one reduced per output) and columns, with infinities inside them.
    m = torch.randn(6, 40, dtype=torch.complex64, generator=torch.Generator().manual_seed(1))
    m[1, 3] = complex(INF, 0)
    m[4, 0] = complex(NAN, 1)
    m[2, 7] = complex(0, -INF)
    for dim in (0, 1):
        torch.testing.assert_close(torch.view_as_real(on_device(m).prod(dim).cpu()), torch.view_as_real(m.prod(dim)),
                                   rtol=1e-5, atol=1e-5, equal_nan=True)
        nan = torch.view_as_real(m.prod(dim)).isnan()
        assert torch.equal(torch.view_as_real(on_device(m).prod(dim).cpu()).isnan(), nan)
    assert sum(v["fpga"] for k, v in aten_fpga.stats().items() if k.startswith("prod")) >= len(COMPLEX_CASES)


# --- the checks ATen makes ----------------------------------------------------------------------


F32_MAX = torch.finfo(torch.float32).max


@pytest.mark.parametrize("dtype, args", [
    (torch.int32, (0, 2**31 + 1)),
    (torch.int32, (-2**31 - 1, 0)),
    (torch.bool, (0, 42)),
    (torch.bool, (-1, 1)),
    (torch.int64, (5, 5)),
    (torch.float16, (0, 70000)),
    (torch.float32, (0, 2**25)),  # a warning: beyond 2^24 float32 is not a uniform integer
    (torch.float32, (-2**30, 0)),
    (torch.float64, (3, 2)),
])
def test_random_bounds_as_cpu(dtype, args):
    cpu = assert_same_as_cpu(lambda d: torch.empty(64, dtype=dtype, device=d).random_(*args), values=False)
    if cpu[0] == "ok":
        aten_fpga.reset_stats()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = on_device(torch.zeros(64, dtype=dtype)).random_(*args).cpu().double()
        assert ((got >= args[0]) & (got < args[1])).all()
        assert counts("random_.from")["fpga"] == 1


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int64, torch.bool])
def test_random_full_and_upper_ranges_as_cpu(dtype):
    assert_same_as_cpu(lambda d: torch.empty(64, dtype=dtype, device=d).random_(), values=False)
    assert_same_as_cpu(lambda d: torch.empty(64, dtype=dtype, device=d).random_(3), values=False)
    assert_same_as_cpu(lambda d: torch.empty(64, dtype=dtype, device=d).random_(-3, None), values=False)


@pytest.mark.parametrize("dtype, args", [
    (torch.float32, (-F32_MAX, F32_MAX)),  # to - from overflows: an error, not infinities
    (torch.float16, (-65504.0, 65504.0)),
    (torch.float32, (0.0, INF)),
    (torch.float32, (1.0, 0.0)),
    (torch.float64, (-1e308, 1e308)),
])
def test_uniform_bounds_as_cpu(dtype, args):
    assert_same_as_cpu(lambda d: torch.empty(16, dtype=dtype, device=d).uniform_(*args), values=False)


def test_uniform_values_stay_finite_and_in_range():
    x = on_device(torch.zeros(4096)).uniform_(-F32_MAX / 2, F32_MAX / 2).cpu()
    assert torch.isfinite(x).all() and (x.abs() <= F32_MAX / 2).all()


def test_distribution_parameter_checks_as_cpu():
    assert_same_as_cpu(lambda d: torch.empty(8, device=d).normal_(0, -1), values=False)
    assert_same_as_cpu(lambda d: torch.empty(8, device=d).exponential_(0), values=False)
    assert_same_as_cpu(lambda d: torch.empty(8, device=d).bernoulli_(1.5), values=False)
    assert_same_as_cpu(lambda d: torch.zeros(1, device=d).expand(8).bernoulli_(0.5), values=False)


@pytest.mark.parametrize("op", [torch._fused_adam_, torch._fused_adamw_])
def test_fused_adam_without_amsgrad_refuses_max_exp_avg_sqs_as_cpu(op):
    def step(d):
        params = [torch.randn(5).to(d) * 1]
        state = [[torch.zeros(5).to(d) * 1] for _ in range(3)]
        op(params, [torch.randn(5).to(d) * 1], *state, [torch.tensor(1.0).to(d) * 1], lr=0.1, beta1=0.9,
           beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
        return params[0]

    assert assert_same_as_cpu(step, values=False)[0] == "error"


def test_unfold_backward_step_zero_as_cpu():
    grad = torch.ones(3, 2)
    assert_same_as_cpu(lambda d: torch.ops.aten.unfold_backward(grad.to(d) * 1, [4], 0, 2, 0))
    assert_same_as_cpu(lambda d: torch.ops.aten.unfold_backward(grad.to(d) * 1, [4], 0, 2, 1))


@pytest.mark.parametrize("size, stride", [((2, 3), ()), ((5,), ()), ((2, 3), (1,)), ((2,), (1, 2)),
                                          ((2, -3), (3, 1)), ((2, 3), (-1, 1))])
def test_empty_strided_with_mismatched_strides_as_cpu(size, stride):
    assert_same_as_cpu(lambda d: torch.empty_strided(size, stride, device=d), values=False)


def test_index_put_check_order_and_error_types_as_cpu():
    def put(indices, value):
        def run(d):
            a = torch.zeros(3, 3, device=d) * 1
            a[tuple(torch.tensor(i, device=d) for i in indices)] = value.to(d) if isinstance(value, torch.Tensor) else value
            return a
        return run

    cpu = assert_same_as_cpu(put([[0, 1], [0, 1, 2]], 0))  # the issue's: IndexError
    assert cpu[1] is IndexError
    assert_same_as_cpu(put([[0, 5]], torch.ones(2)))  # the value's shape is checked before the bounds
    assert_same_as_cpu(put([[0, 5]], torch.ones(3)))  # IndexError: out of bounds
    assert_same_as_cpu(put([[0, 1]], torch.ones(3, dtype=torch.float64)))  # dtype after the shape
    assert_same_as_cpu(put([[0, 1]], torch.ones(2, dtype=torch.float64)))
    assert_same_as_cpu(put([[0], [1], [2]], 1.0))  # too many indices
    assert_same_as_cpu(put([[0, -1], [2, -3]], torch.tensor([1.0, 2.0])))  # a valid one
    assert_same_as_cpu(lambda d: torch.zeros(3, 3, device=d)[torch.tensor([0, 1], device=d),
                                                            torch.tensor([0, 1, 2], device=d)])
    assert_same_as_cpu(lambda d: torch.zeros(0, 3, device=d)[torch.tensor([0], device=d)])

    def overlapping(d):
        a = torch.arange(6.0, device=d) * 1
        a[torch.tensor([0, 1], device=d)] = a[1:3]
        return a

    assert_same_as_cpu(overlapping)


# --- the CPU fallback keeps ATen's semantics ----------------------------------------------------


def test_fallback_out_on_another_device_is_the_same_device_error():
    x = on_device(torch.rand(3))
    with pytest.raises(RuntimeError) as structured:  # what a table op's ATen meta says
        torch.atan(x, out=torch.empty(3))
    with pytest.raises(RuntimeError) as fallback:  # digamma has no kernel: the fallback
        torch.digamma(x, out=torch.empty(3))
    assert str(fallback.value) == str(structured.value)
    assert "Expected all tensors to be on the same device" in str(fallback.value)


def test_fallback_keeps_input_output_overlap_errors():
    def pow_overlap(d):
        x = torch.arange(5.0, device=d) * 1
        return torch.pow(42, x[0:3], out=x[1:4])

    cpu = assert_same_as_cpu(pow_overlap)
    assert cpu[0] == "error" and "single memory location" in cpu[2]

    def digamma_overlap(d):
        x = torch.arange(1.0, 6.0, device=d) * 1
        return torch.digamma(x[0:3], out=x[1:4])

    assert_same_as_cpu(digamma_overlap)

    def in_place_full_overlap(d):  # allowed: every element read before it is written
        x = torch.arange(1.0, 6.0, device=d) * 1
        return torch.digamma(x, out=x)

    assert_same_as_cpu(in_place_full_overlap)


def test_fallback_allows_what_aten_allows_on_internal_overlap():
    def fill_expanded(d):
        base = torch.zeros(2, 1, device=d) * 1
        base.expand(2, 4).fill_(2.5)
        return base

    assert_same_as_cpu(fill_expanded)

    def index_put_expanded(d):  # ATen warns and writes
        base = torch.zeros(1, device=d) * 1
        base.expand(3).index_put_((torch.tensor([0, 1], device=d),), torch.ones(2, device=d))
        return base

    assert_same_as_cpu(index_put_expanded)


def test_fallback_writes_in_place_and_resizes_out():
    aten_fpga.reset_stats()
    a = torch.rand(4, 5) + 0.5

    def lgamma_strided(d):  # a strided view written in place, the rest of the storage kept
        x = a.to(d) * 1
        x[:, 1::2].lgamma_()
        return x

    assert_same_as_cpu(lgamma_strided)

    def digamma_resized(d):  # out= of the wrong shape: ATen warns, resizes and writes
        out = torch.zeros(3, device=d) * 1
        torch.digamma(a.to(d) * 1, out=out)
        return out

    assert_same_as_cpu(digamma_resized)

    def digamma_grown_view(d):  # out= empty view of a larger storage grows into new memory
        out = torch.empty(0, device=d)
        torch.digamma(a.to(d) * 1, out=out)
        return out

    assert_same_as_cpu(digamma_grown_view)
    assert counts("digamma.out")["cpu_fallback"] >= 2 and counts("lgamma.out")["cpu_fallback"] >= 1


def test_uint8_mask_indexing_warns_once_as_cpu():
    def masked(d):
        a = torch.arange(6.0, device=d) * 1
        return a[(a > 2).to(torch.uint8)]

    cpu = assert_same_as_cpu(masked)
    assert len(cpu[2]) == 1 and "uint8" in cpu[2][0]
    assert_same_as_cpu(lambda d: (torch.arange(6.0, device=d) * 1)[torch.arange(6, device=d) > 2])


# --- quantized and sparse tensors: an error naming the limit ------------------------------------


@pytest.mark.parametrize("make", [
    lambda: torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.qint8).to("fpga"),
    lambda: torch.ones(3).to_sparse().to("fpga"),
    lambda: torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([1.0, 2.0]), (3,), device="fpga"),
    lambda: torch.eye(3).to_sparse_csr().to("fpga").to_dense(),  # made by composite ops; refused at first use
    lambda: on_device(torch.eye(3)).to_sparse(),
])
def test_quantized_and_sparse_tensors_name_the_limit(make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own deprecation of quantized tensors
        with pytest.raises(NotImplementedError, match=r"(quantized|sparse) tensors are not supported on fpga"):
            make()
