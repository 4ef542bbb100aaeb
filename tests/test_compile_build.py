"""A card's image with torch.compile's fused kernels: the sources aten_fpga.compile.export writes
are built into torch.xclbin by the same v++ flow as the table's kernels (`scons fused=<dir>`),
through the fake v++ (tests/fake_vitis)."""
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from aten_fpga.compile import codegen
from aten_fpga.compile.fuse import partition, plan

sys.path.insert(0, str(Path(__file__).resolve().parent / "fake_vitis"))
from scons_repo import make_repo, ok, scons, tool_log  # noqa: E402

U250 = "xilinx_u250_gen3x16_xdma_4_1_202210_1"


@pytest.fixture(autouse=True)
def keep_global_rng():
    """Later tests' unseeded draws see the stream they would without these tests."""
    with torch.random.fork_rng(devices=[]):
        yield


def fused_kernel():
    gm = make_fx(lambda x, b: torch.tanh(F.gelu(x + b) * 0.5), tracing_mode="fake")(torch.randn(4, 32), torch.randn(32))
    return plan(partition(gm)[0]).kernel


def test_hw_builds_the_exported_fused_kernels(tmp_path):
    repo = make_repo(tmp_path)
    kernel = fused_kernel()
    folder = tmp_path / "fused"
    folder.mkdir()
    (folder / f"{kernel.name}.cpp").write_text(codegen.render(kernel, 4))
    ok(scons(repo, "target=hw", "platform=u250", "opt=4", f"fused={folder}", "xclbin"))
    runs = tool_log(repo)
    out = f"build/hw/{U250}/opt4"
    compiles = {r[r.index("-k") + 1]: r for r in runs if r[1] == "-c"}
    assert set(compiles) == {"v_add_float32", "v_mul_float32", kernel.name}
    assert compiles[kernel.name][-1] == str(folder / f"{kernel.name}.cpp")
    link = runs[-1]
    assert link[1] == "-l" and f"{out}/xo/{kernel.name}.xo" in link
    config = (repo / out / "connectivity.cfg").read_text()
    # Each of its ports (in0, in1, out0) on a bank of its own, as the table's kernels' ports.
    assert f"nk={kernel.name}:1:{kernel.name}_1" in config
    assert all(f"sp={kernel.name}_1.{p}:DDR[" in config for p in ("in0", "in1", "out0"))


def test_fused_needs_a_card_target_and_sources(tmp_path):
    repo = make_repo(tmp_path)
    empty = tmp_path / "none"
    empty.mkdir()
    p = scons(repo, "target=hw", "platform=u250", f"fused={empty}", "xclbin")
    assert p.returncode != 0 and "python -m aten_fpga.compile export" in p.stdout + p.stderr
    p = scons(repo, f"fused={empty}", "xclbin")
    assert p.returncode != 0 and "compiles them on demand" in p.stdout + p.stderr
