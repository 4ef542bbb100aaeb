"""A card's image with torch.compile's fused kernels: the sources aten_fpga.compile.export writes
are built into torch.xclbin by the same v++ flow as the table's kernels (`scons fused=<dir>`),
through the fake v++ (tests/fake_vitis)."""
import re
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from aten_fpga.compile import codegen
from aten_fpga.compile.conv import ConvKernel, fuse_convolutions
from aten_fpga.compile.fuse import DTYPES, partition, plan

sys.path.insert(0, str(Path(__file__).resolve().parent / "fake_vitis"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site_scons"))
from scons_repo import make_repo, ok, scons, tool_log  # noqa: E402

from afpga import xclbin  # noqa: E402

U250 = "xilinx_u250_gen3x16_xdma_4_1_202210_1"


@pytest.fixture(autouse=True)
def keep_global_rng():
    """Later tests' unseeded draws see the stream they would without these tests."""
    with torch.random.fork_rng(devices=[]):
        yield


def fused_kernels():
    """A fused chain, a fused GEMM (a linear layer's addmm with its bias and relu) and one whose a
    operand is made in its read stage (a scaled gradient, its column sum as the rows' sums)."""
    def f(x, b, w, s, d, h):
        g = d * s
        return torch.tanh(F.gelu(x + b) * 0.5), F.relu(F.linear(x, w, b)), torch.mm(g.t(), h), g.sum(0)

    gm = make_fx(f, tracing_mode="fake")(torch.randn(4, 32), torch.randn(32), torch.randn(32, 32), torch.tensor(2.0),
                                         torch.randn(8, 32), torch.randn(8, 16))
    return [plan(g).kernel for g in partition(gm)]


def conv_kernels():
    """A convolution with its bias and ReLU (the forward conv kernel), and a weight gradient's."""
    gm = make_fx(lambda x, w, b: F.conv2d(x, w, b).relu(), tracing_mode="fake")(
        torch.randn(2, 3, 12, 12), torch.randn(4, 3, 3, 3), torch.randn(4))
    (forward,) = fuse_convolutions(gm)
    return forward.kernel, ConvKernel(DTYPES["float32"], "weight_grad", bias=True, kw=3)


def test_hw_builds_the_exported_fused_kernels(tmp_path):
    repo = make_repo(tmp_path)
    chain, gemm, prologue = fused_kernels()
    conv, conv_grad = conv_kernels()
    assert prologue.a_steps and prologue.a_rows is not None, prologue
    assert conv.role == "forward" and conv.bias and len(conv.steps) == 1, conv
    folder = tmp_path / "fused"
    folder.mkdir()
    for kernel in (chain, gemm, prologue, conv, conv_grad):
        (folder / f"{kernel.name}.cpp").write_text(codegen.render(kernel, 4))
    ok(scons(repo, "target=hw", "platform=u250", "opt=4", f"fused={folder}", "xclbin"))
    runs = tool_log(repo)
    out = f"build/hw/{U250}/opt4"
    compiles = {r[r.index("-k") + 1]: r for r in runs if r[1] == "-c"}
    # The table's kernels in their engine, each fused kernel a v++ kernel of its own.
    assert set(compiles) == {"e_binary", chain.name, gemm.name, prologue.name, conv.name, conv_grad.name}
    assert compiles["e_binary"][-1] == "build/gen/hls/engines/e_binary_opt4.cpp"
    link = runs[-1]
    assert link[1] == "-l" and link[link.index("-o") + 1] == f"{out}/link/torch.xclbin"
    assert sorted(link[link.index("-o") + 2:]) == sorted(f"{out}/xo/{k}.xo" for k in compiles)
    config = (repo / out / "connectivity.cfg").read_text()
    assert "nk=e_binary:2:e_binary_1.e_binary_2" in config
    # Each of their ports on a bank of its own, as the table's kernels' ports: the chain's in0,
    # in1, out0; the GEMM's a, b, c and its epilogue's bias in0; the prologue's scale and row sums.
    for kernel, ports in ((chain, ("in0", "in1", "out0")), (gemm, ("a", "b", "c", "in0")),
                          (prologue, ("a", "b", "c", "in0", "arows"))):
        assert compiles[kernel.name][-1] == str(folder / f"{kernel.name}.cpp")
        assert f"nk={kernel.name}:1:{kernel.name}_1" in config
        banks = [re.search(rf"^sp={kernel.name}_1\.{p}:(DDR\[\d\])$", config, re.M) for p in ports]
        assert all(banks) and len({b.group(1) for b in banks}) == min(len(ports), 4), (kernel.name, config)
    # The member table names the table's kernels alone: the host finds a fused kernel by its own name.
    table = xclbin.members_of((repo / out / "torch.xclbin").read_bytes())
    assert table == (repo / "build/gen/members_opt4.txt").read_text()
    assert [line.split()[1] for line in table.splitlines() if line.startswith("member ")] == [
        "v_add_float32", "v_mul_float32"]


def test_fused_needs_a_card_target_and_sources(tmp_path):
    repo = make_repo(tmp_path)
    empty = tmp_path / "none"
    empty.mkdir()
    p = scons(repo, "target=hw", "platform=u250", f"fused={empty}", "xclbin")
    assert p.returncode != 0 and "python -m aten_fpga.compile export" in p.stdout + p.stderr
    p = scons(repo, f"fused={empty}", "xclbin")
    assert p.returncode != 0 and "compiles them on demand" in p.stdout + p.stderr
