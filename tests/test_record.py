"""aten_fpga.record: a workload's plan (YAML) from the host's accounting -- per op its kernels
(name, library op, dtype), launches, bytes, launch sizes, kernel or fallback -- written by the block
or by `python -m aten_fpga.record`, and built by `scons plan=` with the fake v++: the image holds the
engines the plan's ops ran, with the CUs its build.cus gives, and one that cannot fit is refused
before any v++."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

import aten_fpga

sys.path.insert(0, str(Path(__file__).resolve().parent / "fake_vitis"))
from scons_repo import add_category, make_repo, ok, scons, tool_log  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site_scons"))
from afpga import platforms  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
U250 = "xilinx_u250_gen3x16_xdma_4_1_202210_1"


def record_chain(path: Path) -> dict:
    x = torch.randn(5000).to("fpga")
    with aten_fpga.record(path, workload="a chain"):
        y = torch.mul(x + x, x)  # the mul reads the add's output in device memory
        z = torch.lgamma(y.abs() + 1)  # no lgamma kernel: a counted fallback
    torch.testing.assert_close(z.cpu(), torch.lgamma((x.cpu() + x.cpu()).mul(x.cpu()).abs() + 1))
    return yaml.safe_load(path.read_text())


def test_record_writes_what_each_op_ran(tmp_path):
    aten_fpga.reset_stats()
    warm = torch.randn(10).to("fpga") + 1  # before the block: not in the plan
    plan = record_chain(tmp_path / "plan.yaml")
    assert aten_fpga.stats()["add.out"]["fpga"] == 3 and warm is not None
    ops = plan["ops"]
    add = ops["add.out"]
    assert add["ran"] == "kernel" and add["fpga"] == 2 and add["cpu_fallback"] == 0  # x + x, and abs() + 1
    assert add["kernels"]["v_add_float32"] == {"op": "add", "dtype": "float32", "engine": "binary", "launches": 2,
                                               # x + x spans x once and its output; abs() + 1
                                               # its input, the 1 made a device tensor, its output
                                               "bytes": (2 + 3) * 5000 * 4, "work": 0,
                                               "sizes": [{"size": 5000, "launches": 2}]}
    assert ops["mul.out"]["kernels"]["v_mul_float32"]["launches"] == 1
    lgamma = ops["lgamma.out"]
    assert lgamma["ran"] == "fallback" and lgamma["cpu_fallback"] == 1 and lgamma["kernels"] == {}
    assert lgamma["bytes_to_host"] == 5000 * 4  # its input came back over the host link
    # 5,000 elements a launch: a CU more buys nothing, so the streaming engines keep one
    assert plan["build"] == {"kernels": ["abs", "add", "mul"], "dtypes": ["float32"],
                             "cus": {"binary": 1, "unary": 1}}
    assert plan["workload"]["planned_ms"] <= plan["workload"]["projected_ms"]
    assert plan["workload"]["script"] == "a chain" and plan["workload"]["platform"] == "u250"
    assert plan["workload"]["projected_ms"] == pytest.approx(sum(o["projected_ms"] for o in ops.values()), rel=1e-3)
    assert plan["workload"]["projected_mj"] == pytest.approx(225 * plan["workload"]["projected_ms"], rel=1e-3)
    assert (tmp_path / "plan.yaml").read_text().startswith("# An aten_fpga workload plan")


def test_record_writes_the_plan_when_the_block_raises(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with aten_fpga.record(tmp_path / "p.yaml"):
            torch.neg(torch.randn(100).to("fpga"))
            1 / 0
    assert "v_neg_float32" in yaml.safe_load((tmp_path / "p.yaml").read_text())["ops"]["neg.out"]["kernels"]


def test_record_a_script_from_the_command_line(tmp_path):
    script = tmp_path / "step.py"
    script.write_text("import sys, torch, aten_fpga\n"
                      "n = int(sys.argv[1])\n"
                      "a, b = torch.randn(n, n).to('fpga'), torch.randn(n, n).to('fpga')\n"
                      "print((a @ b).relu().sum().item())\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "aten_fpga.record", "-o", str(tmp_path / "mm.yaml"), str(script), "64"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "wrote" in p.stderr and "projected on u250 opt=4" in p.stderr
    plan = yaml.safe_load((tmp_path / "mm.yaml").read_text())
    gemm = next(k for o in plan["ops"].values() for n, k in o["kernels"].items() if n == "v_gemm_float32")
    assert gemm["work"] == 64 ** 3 and gemm["sizes"][0]["m"] == 64 and gemm["sizes"][0]["k"] == 64
    assert "gemm" in plan["build"]["kernels"] and plan["workload"]["script"].endswith("step.py 64")
    # The plan's build: CUs and a GEMM array with which its image fits (how they are chosen:
    # test_the_plan_puts_cus_where_the_time_goes).
    from aten_fpga import projection
    u250 = projection.platform_of("u250")
    pe, cus = platforms.parse_gemm_pe(plan["build"]["gemm_pe"]), plan["build"]["cus"]["gemm"]
    wanted, dtypes = tuple(plan["build"]["kernels"]), tuple(plan["build"]["dtypes"])
    assert projection.image(4, u250, wanted, dtypes, pe, tuple(plan["build"]["cus"].items())).fit.fits
    assert cus >= 1 and "on the plan's image" in p.stderr


def test_the_plan_puts_cus_where_the_time_goes():
    """projection.plan_image: a memory-bound workload of large adds gets more binary CUs on an HBM
    card than the build's default, the GEMM of a matmul-bound one a larger array; each image fits and
    projects faster than the default image of the same kernels, and a step more would not fit or help."""
    from aten_fpga import projection

    u55c = projection.platform_of("u55c")
    adds = {"add.out": {"fpga": 100, "cpu_fallback": 0, "bytes_to_device": 0, "bytes_to_host": 0, "cpu_seconds": 0,
                        "by_kernel": {"v_add_float32": {"launches": 100, "bytes": 100 * 3 * 2 ** 26, "work": 0}}}}
    mms = {"mm.out": {"fpga": 10, "cpu_fallback": 0, "bytes_to_device": 0, "bytes_to_host": 0, "cpu_seconds": 0,
                      "by_kernel": {"v_gemm_float32": {"launches": 10, "bytes": 10 * 3 * 4 * 2048 ** 2,
                                                       "work": 10 * 2048 ** 3}}}}
    for rows, wanted in ((adds, ("add",)), (mms, ("add", "gemm"))):
        img, build = projection.plan_image(rows, u55c, wanted, ("float32",))
        default = projection.image(4, u55c, wanted, ("float32",))
        assert img.fit.fits and projection.workload_seconds(rows, img) < projection.workload_seconds(rows, default)
        more = dict(build["cus"], binary=build["cus"]["binary"] + 1)
        bigger = projection.image(4, u55c, wanted, ("float32",), img.config.gemm_pe, tuple(sorted(more.items())))
        assert not bigger.fit.fits or \
            projection.workload_seconds(rows, bigger) >= projection.workload_seconds(rows, img) * (1 - 1e-3)
    adds_build = projection.plan_image(adds, u55c, ("add",), ("float32",))[1]
    assert adds_build["cus"]["binary"] > u55c.stream_cus
    mm_img, mm_build = projection.plan_image(mms, u55c, ("add", "gemm"), ("float32",))
    pm, pn = platforms.parse_gemm_pe(mm_build["gemm_pe"])
    assert pm * pn * mm_build["cus"]["gemm"] > platforms.GEMM_PE["u55c"][0] * platforms.GEMM_PE["u55c"][1]


@pytest.fixture
def repo(tmp_path):
    r = make_repo(tmp_path)
    add_category(r, "pair", "maximum", "(a > b ? a : b)", "maximum.out")
    return r


def compiled(repo: Path) -> list[str]:
    """The engines the fake v++ compiled (-k) since the last look."""
    return [run[run.index("-k") + 1] for run in tool_log(repo) if run[:2] == ["v++", "-c"]]


def test_record_plan_build_round_trip(tmp_path, repo):
    """The recorded plan builds the engines its ops ran (e_binary: add, mul; not e_pair), into an
    image folder of its own; target=emu plans the same image for the emulator."""
    plan = record_chain(repo / "chain.yaml")
    assert plan["build"]["kernels"] == ["abs", "add", "mul"]
    # the build tests' table has add and mul only: keep the plan to the ops it can serve
    doc = yaml.safe_load((repo / "chain.yaml").read_text())
    doc["build"]["kernels"] = ["add", "mul"]
    (repo / "chain.yaml").write_text(yaml.safe_dump(doc))
    ok(scons(repo, "target=hw", "platform=u250", "opt=4", "plan=chain.yaml", "xclbin"))
    assert compiled(repo) == ["e_binary"]
    out = repo / f"build/hw/{U250}/opt4-plan-chain"
    assert (out / "torch.xclbin").exists() and not (repo / f"build/hw/{U250}/opt4").exists()
    dry = ok(scons(repo, "-n", "target=emu", "opt=4", "plan=chain.yaml", "xclbin"))
    assert "build/emu/opt4-plan-chain/torch_emu.so" in dry
    # build.gemm_pe is the card's array (v++ -c's -D flags); the emulated image keeps the host's.
    doc["build"]["gemm_pe"] = "12x20"
    (repo / "chain.yaml").write_text(yaml.safe_dump(doc))
    assert "-DAFPGA_GEMM_PE_M=12 -DAFPGA_GEMM_PE_N=20" in ok(scons(repo, "-n", "target=hw", "platform=u250", "opt=4",
                                                                   "plan=chain.yaml", "xclbin"))
    assert "-DAFPGA_GEMM_PE_M=12" not in ok(scons(repo, "-n", "target=emu", "opt=4", "plan=chain.yaml", "xclbin"))
    # without a plan the image holds the whole table
    ok(scons(repo, "target=hw", "platform=u250", "opt=4", "xclbin"))
    assert sorted(compiled(repo)) == ["e_binary", "e_pair"]
    # -n runs no codegen: the table's interface file is not the estimate of a plan of `add` alone
    doc["build"]["kernels"] = ["add"]
    (repo / "chain.yaml").write_text(yaml.safe_dump(doc))
    dry = ok(scons(repo, "-n", "target=hw", "platform=u250", "opt=4", "plan=chain.yaml", "xclbin"))
    assert "for this selection; run without -n to see it" in dry and "Resource estimate" not in dry
    assert "Resource estimate" in ok(scons(repo, "-n", "target=hw", "platform=u250", "opt=4", "xclbin"))


def test_a_plan_that_cannot_fit_is_refused_before_any_vpp(repo):
    (repo / "big.yaml").write_text(yaml.safe_dump({"build": {"kernels": ["add"], "dtypes": ["float32"],
                                                             "cus": {"binary": 64}}, "ops": {}}))
    p = scons(repo, "target=hw", "platform=u250", "plan=big.yaml", "xclbin")
    assert p.returncode != 0
    # 64 CUs' 128 masters over the four DDR banks
    assert "m_axi masters on DDR[0] (Vitis: 15 per bank): needs 32, the limit is 15" in p.stdout, p.stdout
    assert "nothing was compiled" in p.stdout and compiled(repo) == []


@pytest.mark.parametrize("plan, error", [
    ({"ops": {}}, "no op of it ran a kernel on fpga"),
    ({"build": {"kernels": ["nosuch"]}, "ops": {}}, "unknown kernels nosuch"),
    ({"build": {"kernels": ["add"], "cus": {"binary": 0}}, "ops": {}}, "build.cus binary: 0"),
    ({"build": {"kernels": ["add"], "gemm_pe": "10x16"}, "ops": {}}, "build.gemm_pe '10x16'; give PMxPN"),
])
def test_a_bad_plan_names_its_cause_and_fix(repo, plan, error):
    (repo / "bad.yaml").write_text(yaml.safe_dump(plan))
    p = scons(repo, "-n", "target=hw", "platform=u250", "plan=bad.yaml", "xclbin")
    assert p.returncode != 0 and error in p.stderr + p.stdout, p.stderr + p.stdout
    p = scons(repo, "-n", "target=hw", "plan=none.yaml", "xclbin")
    assert "plan=none.yaml: no such file" in p.stderr + p.stdout
    p = scons(repo, "-n", "target=hw", "plan=bad.yaml", "kernels=add", "xclbin")
    assert "drop kernels= and dtypes=" in p.stderr + p.stdout


def test_the_plans_emulated_image_runs_what_the_card_would_and_counts_the_rest(tmp_path, repo):
    """scons target=emu plan=: the emulated image of the plan (here `add` alone) runs the plan's ops
    as kernels, and an op whose kernel the image lacks (mul, maximum) falls back to the CPU,
    counted, with the right values -- what the card built from the same plan would do."""
    from aten_fpga._paths import emu_image_path

    doc = {"build": {"kernels": ["add"], "dtypes": ["float32"], "cus": {"binary": 2}}, "ops": {}}
    (repo / "just_add.yaml").write_text(yaml.safe_dump(doc))
    ok(scons(repo, "target=emu", "opt=4", "plan=just_add.yaml", "xclbin"))
    image = repo / "build/emu/opt4-plan-just_add/torch.xclbin"
    try:
        aten_fpga.load(str(image))
        assert "v_add_float32" in aten_fpga._C.kernel_names() and "v_mul_float32" not in aten_fpga._C.kernel_names()
        assert aten_fpga._C.kernel_cus("v_add_float32") == 2
        a, b = torch.randn(70_001), torch.randn(70_001)
        aten_fpga.reset_stats()
        s = torch.add(a.to("fpga"), b.to("fpga"))
        got = torch.maximum(torch.mul(s, s), s)  # chained on the add's device output
        torch.testing.assert_close(got.cpu(), torch.maximum((a + b) * (a + b), a + b), rtol=0, atol=0)
        stats = aten_fpga.stats()
        assert stats["add.out"]["fpga"] == 1 and stats["add.out"]["cpu_fallback"] == 0
        assert stats["mul.out"]["fpga"] == 0 and stats["mul.out"]["cpu_fallback"] == 1
        assert stats["maximum.out"]["cpu_fallback"] == 1
    finally:
        aten_fpga.load(emu_image_path(4))
