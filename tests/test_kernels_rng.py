"""Random numbers on device "fpga" (kernels/hls/rng, host/ps/fpga_rng.cpp, host/ps/generator.h) at
every XCL_OPT level. The device's Philox stream is not the CPU's (a Mersenne Twister), so values
are tested statistically -- a Kolmogorov-Smirnov test against the distribution (scipy when
installed, else the asymptotic critical value), and moments -- and for reproducibility: the same
seed gives the same values at every level and split across any number of compute units."""
import math

import numpy as np
import pytest
import torch

import aten_fpga

try:
    from scipy import stats as sps
except ImportError:  # pragma: no cover - the asymptotic KS bound below serves
    sps = None

LEVELS = (1, 2, 3, 4)
N = 200_000  # several compute units and tiles
ALPHA = 1e-4  # a fixed seed's test fails with this probability if the kernel is right




def ks_ok(sample, cdf):
    """The sample passes a KS test against `cdf` (a numpy-vectorized CDF) at level ALPHA."""
    x = np.sort(np.asarray(sample, dtype=np.float64))
    n = len(x)
    if sps is not None:
        return sps.kstest(x, cdf).pvalue > ALPHA
    f = cdf(x)
    d = max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(0, n) / n))
    return d < math.sqrt(-0.5 * math.log(ALPHA / 2)) / math.sqrt(n)


def ran_on_fpga(op):
    s = aten_fpga.stats().get(op, {})
    return s.get("fpga", 0) >= 1 and s.get("cpu_fallback", 0) == 0


def normal_cdf(x):
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) if sps is None else sps.norm.cdf(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_uniform(level, dtype):
    torch.fpga.manual_seed(1)
    aten_fpga.reset_stats()
    x = torch.empty(N, dtype=dtype, device="fpga").uniform_(-2, 3)
    assert ran_on_fpga("uniform_")
    v = x.cpu().double().numpy()
    assert v.min() >= -2 and v.max() <= 3
    if dtype != torch.float16:  # float16 rounding makes the distribution discrete at 2^-9
        assert ks_ok(v, lambda t: np.clip((t + 2) / 5, 0, 1))
    assert abs(v.mean() - 0.5) < 5 * 5 / math.sqrt(12 * N)
    r = torch.rand(1000, device="fpga")  # torch.rand: empty + uniform_(0, 1)
    assert 0 <= r.min().item() and r.max().item() < 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_normal(level, dtype):
    torch.fpga.manual_seed(2)
    aten_fpga.reset_stats()
    x = torch.randn(N, dtype=dtype, device="fpga") * 1
    assert ran_on_fpga("normal_")
    v = x.cpu().numpy()
    assert ks_ok(v, normal_cdf)
    assert abs(v.mean()) < 5 / math.sqrt(N) and abs(v.std() - 1) < 5 / math.sqrt(2 * N)
    y = torch.empty(N, device="fpga").normal_(3, 0.5).cpu().numpy()
    assert ks_ok((y - 3) / 0.5, normal_cdf)
    assert np.isfinite(torch.randn(N, dtype=torch.float16, device="fpga").cpu().float().numpy()).all()


def test_exponential(level):
    torch.fpga.manual_seed(3)
    aten_fpga.reset_stats()
    v = torch.empty(N, device="fpga").exponential_(2.0).cpu().double().numpy()
    assert ran_on_fpga("exponential_")
    assert (v >= 0).all() and np.isfinite(v).all()
    assert ks_ok(v, lambda t: 1 - np.exp(-2 * np.maximum(t, 0)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bool, torch.int64])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_bernoulli(level, dtype, p):
    torch.fpga.manual_seed(4)
    aten_fpga.reset_stats()
    x = torch.empty(N, dtype=dtype, device="fpga").bernoulli_(p)
    assert ran_on_fpga("bernoulli_.float")
    v = x.cpu().double().numpy()
    assert set(np.unique(v)) <= {0.0, 1.0}
    assert abs(v.mean() - p) <= 5 * math.sqrt(p * (1 - p) / N)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.bool])
def test_random(level, dtype):
    torch.fpga.manual_seed(5)
    aten_fpga.reset_stats()
    lo, hi = (0, 2) if dtype == torch.bool else (-3, 7)
    x = torch.empty(N, dtype=dtype, device="fpga").random_(lo, hi)
    assert ran_on_fpga("random_.from")
    v = x.cpu().long().numpy()
    counts = np.bincount(v - lo, minlength=hi - lo)
    assert len(counts) == hi - lo and v.min() == lo and v.max() == hi - 1
    if sps is not None:
        assert sps.chisquare(counts).pvalue > ALPHA
    y = torch.randint(0, 5, (N,), device="fpga").cpu()  # torch.randint: random_.from
    assert y.min() == 0 and y.max() == 4
    z = torch.empty(N, dtype=torch.int64, device="fpga").random_(10).cpu()  # random_.to
    assert z.min() == 0 and z.max() == 9
    f = torch.empty(N, device="fpga").random_().cpu()  # [0, 2^24]
    assert f.min() >= 0 and f.max() <= 2**24 and f.max() > 2**23


def test_invalid_parameters(level):
    x = torch.empty(4, device="fpga")
    with pytest.raises(RuntimeError, match="from=3.*to=1"):
        x.uniform_(3, 1)
    with pytest.raises(RuntimeError, match="std >= 0"):
        x.normal_(0, -1)
    with pytest.raises(RuntimeError, match="in \\[0, 1\\]"):
        x.bernoulli_(1.5)


def test_dropout(level):
    torch.fpga.manual_seed(6)
    x = (torch.randn(64, 1000) + 3).to("fpga") * 1  # valid only on the device
    aten_fpga.reset_stats()
    y = torch.nn.functional.dropout(x, 0.1, training=True)
    # native_dropout's own work is other ops' launches (bernoulli_, mul), counted where they run
    assert ran_on_fpga("bernoulli_.float") and ran_on_fpga("mul.out")
    assert not any(v["cpu_fallback"] for v in aten_fpga.stats().values()), aten_fpga.stats()
    yc, xc = y.cpu(), x.cpu()
    kept = yc != 0
    assert abs(kept.float().mean().item() - 0.9) < 5 * math.sqrt(0.09 / x.numel())
    torch.testing.assert_close(yc[kept], xc[kept] / 0.9)
    # the backward scales the same elements
    xr = x.detach().requires_grad_()
    torch.fpga.manual_seed(6)
    y2 = torch.nn.functional.dropout(xr, 0.1, training=True)
    assert torch.equal(y2.detach().cpu(), yc)  # reproducible for a seed
    y2.sum().backward()
    torch.testing.assert_close(xr.grad.cpu(), kept.float() / 0.9)


def draw(seed, n=3 * 2**16 + 5):
    torch.fpga.manual_seed(seed)
    return torch.cat([torch.rand(n, device="fpga").cpu(), torch.randn(n, device="fpga").cpu(),
                      torch.empty(n, device="fpga").bernoulli_(0.3).cpu()])


def test_reproducible_across_levels_and_cus():
    # 3 * 2^16 + 5 elements: four compute units at XCL_OPT 3, ragged words at XCL_OPT 4.
    try:
        runs = []
        for lv in LEVELS:
            aten_fpga.load(lv)
            runs.append(draw(11))
            assert torch.equal(draw(11), runs[-1])  # the same seed, the same values
            assert not torch.equal(draw(12), runs[-1])
    finally:
        aten_fpga.load(4)
    for r in runs[1:]:
        assert torch.equal(r, runs[0])


def test_generator_api():
    g = torch.Generator(device="fpga")
    assert g.device.type == "fpga"
    g.manual_seed(7)
    a = torch.rand(100, device="fpga", generator=g).cpu()
    g.manual_seed(7)
    assert torch.equal(torch.rand(100, device="fpga", generator=g).cpu(), a)
    # torch.manual_seed seeds the device generator too
    torch.manual_seed(8)
    b = torch.rand(100, device="fpga").cpu()
    torch.manual_seed(8)
    assert torch.equal(torch.rand(100, device="fpga").cpu(), b)
    assert torch.fpga.initial_seed() == 8
    # state round trip: 16 bytes (seed, offset)
    state = torch.fpga.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    c = torch.rand(100, device="fpga").cpu()
    torch.fpga.set_rng_state(state)
    assert torch.equal(torch.rand(100, device="fpga").cpu(), c)
    s = torch.fpga.seed()
    assert torch.fpga.initial_seed() == s
    torch.fpga.manual_seed_all(9)
    assert torch.fpga.initial_seed() == 9
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.fpga.set_rng_state(torch.zeros(8, dtype=torch.uint8))


# --- randperm: a Fisher-Yates shuffle on the device (kernels/hls/randperm) ----------------------

@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("n", [0, 1, 2, 7, 70_001])
def test_randperm_is_a_permutation(level, dtype, n):
    aten_fpga.reset_stats()
    p = torch.randperm(n, dtype=dtype, device="fpga")
    assert p.dtype == dtype and p.device.type == "fpga"
    assert torch.equal(p.cpu().sort().values, torch.arange(n, dtype=dtype))
    if n > 0:
        assert ran_on_fpga("randperm.generator_out")
    if n > 2:
        assert not torch.equal(p.cpu(), torch.arange(n, dtype=dtype))


def test_randperm_feeds_other_kernels(level):
    # a shuffle of rows as a data loader does it: the permutation stays on the device
    x = torch.arange(12.0, device="fpga").reshape(6, 2) * 1
    torch.fpga.manual_seed(3)
    p = torch.randperm(6, device="fpga")
    aten_fpga.reset_stats()
    rows = x.index_select(0, p)
    assert torch.equal(rows.cpu(), torch.arange(12.0).reshape(6, 2)[p.cpu()])
    assert ran_on_fpga("index_select")


def test_randperm_is_uniform(level):
    # 24,000 permutations of 4: a chi-square test of the 24 orders, and of each value's position
    g = torch.Generator(device="fpga").manual_seed(5)
    perms = torch.stack([torch.randperm(4, generator=g, device="fpga") for _ in range(2_000)]).cpu()
    codes = (perms * torch.tensor([64, 16, 4, 1])).sum(1)
    counts = torch.bincount(codes, minlength=256)[codes.unique()]
    assert counts.numel() == 24
    expected = perms.shape[0] / 24
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 49.7  # 23 degrees of freedom, p = 1e-3
    # and of a long permutation: each position's value is uniform (its mean and spread)
    n = 100_000
    p = torch.randperm(n, generator=g, device="fpga").cpu().double()
    first_half = p[: n // 2]
    assert abs(first_half.mean().item() - (n - 1) / 2) < 5 * n / (12 * (n / 2)) ** 0.5
    # no fixed structure: few fixed points (Poisson(1))
    assert int((p == torch.arange(n, dtype=torch.float64)).sum()) < 10


def test_randperm_reproducible_across_levels_and_cus():
    try:
        runs = []
        for lv in LEVELS:
            aten_fpga.load(lv)
            torch.fpga.manual_seed(21)
            runs.append(torch.cat([torch.randperm(50_000, device="fpga").cpu(), torch.randperm(9, device="fpga").cpu()]))
            torch.fpga.manual_seed(21)
            assert torch.equal(torch.cat([torch.randperm(50_000, device="fpga").cpu(),
                                          torch.randperm(9, device="fpga").cpu()]), runs[-1])
            g = torch.Generator(device="fpga").manual_seed(22)
            assert not torch.equal(torch.randperm(50_000, device="fpga", generator=g).cpu(), runs[-1][:50_000])
    finally:
        aten_fpga.load(4)
    for r in runs[1:]:
        assert torch.equal(r, runs[0])


def test_randperm_errors(level):
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.randperm(-1, out=torch.empty(0, dtype=torch.int64, device="fpga"))
    with pytest.raises(RuntimeError, match="n is too large"):
        torch.randperm(2**31 + 1, out=torch.empty(0, dtype=torch.int32, device="fpga"))
