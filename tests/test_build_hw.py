"""The v++ targets (sw_emu, hw_emu, hw) through a fake v++/emconfigutil (tests/fake_vitis): exact
command lines, the generated connectivity for a DDR and an HBM platform, incrementality, CacheDir,
progress, the report, and the stop when Vitis is missing. Each test builds in its own copy of the
sources, never in the checkout's build/."""
import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fake_vitis"))
from scons_repo import add_category, make_repo, ok, scons, steps_run, tool_log  # noqa: E402

U250 = "xilinx_u250_gen3x16_xdma_4_1_202210_1"
U55C = "xilinx_u55c_gen3x16_xdma_3_202210_1"
ZCU102 = "xilinx_zcu102_base_202210_1"


@pytest.fixture
def repo(tmp_path):
    """The sources plus a second category (`pair`, one kernel) so that one template's edit can be
    told apart from the others."""
    r = make_repo(tmp_path)
    add_category(r, "pair", "maximum", "(a > b ? a : b)", "maximum.out")
    return r


# The GEMM PE array each platform's kernels are compiled with by default (gemm_pe=).
GEMM_PE = {U250: (32, 48), U55C: (32, 32), ZCU102: (16, 16), "xilinx_u280_gen3x16_xdma_1_202211_1": (32, 32)}


def compile_cmd(target, platform, opt, kernel, category):
    out = f"build/{target}/{platform}/opt{opt}"
    pm, pn = GEMM_PE[platform]
    return ["v++", "-c", "-t", target, "--platform", platform, "-k", kernel, "-I", "kernels/hls/include",
            f"-DAFPGA_GEMM_PE_M={pm}", f"-DAFPGA_GEMM_PE_N={pn}",
            "--temp_dir", f"{out}/tmp/{kernel}", "--report_dir", f"{out}/reports/{kernel}",
            "--log_dir", f"{out}/logs/{kernel}", "-o", f"{out}/xo/{kernel}.xo",
            f"build/gen/hls/{category}/{kernel}_opt{opt}.cpp"]


def link_cmd(target, platform, opt, kernels, extra=()):
    out = f"build/{target}/{platform}/opt{opt}"
    return (["v++", "-l", "-t", target, "--platform", platform, *extra, "--config", f"{out}/connectivity.cfg",
             "--temp_dir", f"{out}/tmp/link", "--report_dir", f"{out}/reports/link", "--log_dir", f"{out}/logs/link",
             "-o", f"{out}/torch.xclbin"] + [f"{out}/xo/{k}.xo" for k in kernels])


KERNELS = {"v_add_float32": "binary", "v_mul_float32": "binary", "v_maximum_float32": "pair"}


def digests(folder: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_hw_commands_and_ddr_connectivity(repo):
    ok(scons(repo, "target=hw", "platform=u250", "opt=3", "cus=2", "xclbin"))
    runs = tool_log(repo)
    compiles = sorted(r for r in runs if r[1] == "-c")
    assert compiles == sorted(compile_cmd("hw", U250, 3, k, c) for k, c in KERNELS.items())
    assert runs[-1] == link_cmd("hw", U250, 3, ["v_add_float32", "v_mul_float32", "v_maximum_float32"])
    assert len(runs) == 4  # no emconfigutil, no package step for hw on a card
    out = repo / f"build/hw/{U250}/opt3"
    # Three m_axi ports per CU, two CUs per kernel, round-robin over the U250's four DDR banks.
    assert (out / "connectivity.cfg").read_text().splitlines()[2:] == [
        "[connectivity]",
        "nk=v_add_float32:2:v_add_float32_1.v_add_float32_2",
        "nk=v_maximum_float32:2:v_maximum_float32_1.v_maximum_float32_2",
        "nk=v_mul_float32:2:v_mul_float32_1.v_mul_float32_2",
        "sp=v_add_float32_1.in1:DDR[0]", "sp=v_add_float32_1.in2:DDR[1]", "sp=v_add_float32_1.out:DDR[2]",
        "sp=v_add_float32_2.in1:DDR[3]", "sp=v_add_float32_2.in2:DDR[0]", "sp=v_add_float32_2.out:DDR[1]",
        "sp=v_maximum_float32_1.in1:DDR[2]", "sp=v_maximum_float32_1.in2:DDR[3]",
        "sp=v_maximum_float32_1.out:DDR[0]",
        "sp=v_maximum_float32_2.in1:DDR[1]", "sp=v_maximum_float32_2.in2:DDR[2]",
        "sp=v_maximum_float32_2.out:DDR[3]",
        "sp=v_mul_float32_1.in1:DDR[0]", "sp=v_mul_float32_1.in2:DDR[1]", "sp=v_mul_float32_1.out:DDR[2]",
        "sp=v_mul_float32_2.in1:DDR[3]", "sp=v_mul_float32_2.in2:DDR[0]", "sp=v_mul_float32_2.out:DDR[1]",
    ]
    assert (out / "torch.xclbin").read_text().startswith("fake xclbin")


def test_hw_emu_on_hbm_runs_emconfigutil_and_spreads_over_pseudo_channels(repo):
    # One kernel: two would need 1,536 BRAM36 for their 192 m_axi adapters, over the U55C's budget.
    ok(scons(repo, "target=hw_emu", f"platform={U55C}", "kernels=add", "freq=250", "xclbin"))
    runs = tool_log(repo)
    out = f"build/hw_emu/{U55C}/opt4"
    assert ["emconfigutil", "--platform", U55C, "--od", out] in runs
    expected_compile = compile_cmd("hw_emu", U55C, 4, "v_add_float32", "binary")
    expected_compile[10:10] = ["--kernel_frequency", "250"]
    assert expected_compile in runs
    assert link_cmd("hw_emu", U55C, 4, ["v_add_float32"], ["--kernel_frequency", "250"]) in runs
    assert len(runs) == 3
    assert json.loads((repo / out / "emconfig.json").read_text())["Platform"]["Boards"][0]["Name"] == U55C
    # opt=4 on an HBM card: 32 CUs of a streaming kernel, their 96 ports 3 to every pseudo-channel,
    # each CU's own ports on three different ones.
    cfg = (repo / out / "connectivity.cfg").read_text().splitlines()
    assert [line for line in cfg if line.startswith("nk=")] == [
        f"nk={k}:32:" + ".".join(f"{k}_{i}" for i in range(1, 33)) for k in ("v_add_float32",)]
    sp = dict(line[3:].split(":") for line in cfg if line.startswith("sp="))
    for k in ("v_add_float32",):
        banks = [sp[f"{k}_{i}.{a}"] for i in range(1, 33) for a in ("in1", "in2", "out")]
        assert sorted(banks) == sorted(f"HBM[{b}]" for b in range(32) for _ in range(3))
        assert all(len(set(banks[3 * c:3 * c + 3])) == 3 for c in range(32))


def test_default_cus_at_opt4_per_card_and_category(repo):
    """A DDR card: the streaming kernels (binary) get 4 CUs, one per bank for each of their ports;
    the others (here `pair`) keep one; cus= gives every kernel its count."""
    dry = ok(scons(repo, "-n", "target=hw", "platform=u250", "xclbin"))
    assert f"build/hw/{U250}/opt4/torch.xclbin" in dry
    ok(scons(repo, "target=hw", "platform=u250", "xclbin"))
    cfg = (repo / f"build/hw/{U250}/opt4/connectivity.cfg").read_text().splitlines()
    nk = {line.split(":")[0][3:]: int(line.split(":")[1]) for line in cfg if line.startswith("nk=")}
    assert nk == {"v_add_float32": 4, "v_maximum_float32": 1, "v_mul_float32": 4}
    sp = dict(line[3:].split(":") for line in cfg if line.startswith("sp="))
    for arg in ("in1", "in2", "out"):
        assert sorted(sp[f"v_add_float32_{i}.{arg}"] for i in range(1, 5)) == [f"DDR[{b}]" for b in range(4)]
    ok(scons(repo, "target=hw", "platform=u250", "cus=2", "xclbin"))
    cfg = (repo / f"build/hw/{U250}/opt4/connectivity.cfg").read_text().splitlines()
    assert sorted(int(line.split(":")[1]) for line in cfg if line.startswith("nk=")) == [2, 2, 2]


@pytest.mark.parametrize("bundles,banks,cus", [(2, 4, 4), (2, 32, 32), (3, 32, 32), (4, 4, 4), (1, 32, 32), (2, 4, 8)])
def test_every_bundle_of_a_kernel_reaches_every_bank(bundles, banks, cus):
    """A reduction's input (bundle 0 of 2) lands on every bank, not on every other one; each CU's
    ports on different banks."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site_scons"))
    from afpga.connectivity import bank_index

    for start in (0, 5):
        ports = [[bank_index(start, c * bundles + b, bundles, banks) for b in range(bundles)] for c in range(cus)]
        for b in range(bundles):
            assert sorted(p[b] for p in ports) == sorted(list(range(banks)) * (cus // banks))
        assert all(len(set(p)) == bundles for p in ports)


def test_embedded_platform_packages_with_the_common_image(repo):
    p = scons(repo, "target=hw", "platform=zcu102", "kernels=mul", "xclbin")
    assert p.returncode == 2 and "common_image=<folder>" in p.stderr and "EDGE_COMMON_SW" in p.stderr
    ok(scons(repo, "target=sw_emu", "platform=zcu102", "kernels=mul", "common_image=/opt/common", "xclbin"))
    runs = tool_log(repo)
    out = f"build/sw_emu/{ZCU102}/opt4"
    assert runs[-1] == ["v++", "-p", "-t", "sw_emu", "--platform", ZCU102, "--package.out_dir", f"{out}/package",
                        "--package.rootfs", "/opt/common/rootfs.ext4", "--package.kernel_image", "/opt/common/Image",
                        "--package.boot_mode", "sd", "--package.sd_file", f"{out}/torch.xclbin",
                        "--package.sd_file", f"{out}/emconfig.json", f"{out}/torch.xclbin"]
    assert (repo / out / "package/sd_card.img").exists()
    assert (repo / out / "connectivity.cfg").read_text().splitlines()[-3:] == [  # 4 CUs over the 4 HP ports
        "sp=v_mul_float32_4.in1:HP1", "sp=v_mul_float32_4.in2:HP2", "sp=v_mul_float32_4.out:HP3"]


def test_incremental(repo):
    args = ("target=hw", "platform=u250", "xclbin")
    first = ok(scons(repo, *args))
    assert len(tool_log(repo)) == 4
    assert "ETA unknown" in first  # nothing learnt yet

    # Nothing changed: nothing runs.
    again = ok(scons(repo, *args))
    assert tool_log(repo) == [] and "[" not in again and "is up to date" in again

    # One template edited: its kernels' .xo files and the link, nothing else.
    t = repo / "kernels/hls/binary/opt4.cpp.j2"
    t.write_text("// binary kernels, edited\n" + t.read_text())
    out = ok(scons(repo, *args))
    runs = tool_log(repo)
    assert sorted(r[7] for r in runs if r[1] == "-c") == ["v_add_float32", "v_mul_float32"]
    assert [r[1] for r in runs] == ["-c", "-c", "-l"]
    # Progress: n/total with an ETA learnt from the first build.
    lines = steps_run(out)
    assert [re.match(r"\[(\d+)/(\d+)\]", line).groups() for line in lines] == [
        ("1", "3"), ("2", "3"), ("3", "3")]
    assert all(re.search(r"elapsed \d:\d\d:\d\d, this step ~\d:\d\d:\d\d, ETA \d:\d\d:\d\d\)", line)
               for line in lines), lines

    # Another level builds beside this one and leaves it untouched.
    before = digests(repo / f"build/hw/{U250}/opt4")
    ok(scons(repo, "target=hw", "platform=u250", "opt=2", "xclbin"))
    runs = tool_log(repo)
    assert {r[r.index("-o") + 1].split("/")[3] for r in runs} == {"opt2"} and len(runs) == 4
    assert digests(repo / f"build/hw/{U250}/opt4") == before
    times = json.loads((repo / f"build/hw/{U250}/times.json").read_text())["steps"]
    assert {"opt4/link", "opt2/link", "opt4/xo/v_add_float32", "opt2/xo/v_add_float32"} <= set(times)


def test_cachedir_reuses_finished_xo_files(repo):
    ok(scons(repo, "target=hw", "platform=u250", "xclbin"))
    tool_log(repo)
    import shutil

    shutil.rmtree(repo / "build/hw")
    out = ok(scons(repo, "target=hw", "platform=u250", "xclbin"))
    assert [r[1] for r in tool_log(repo)] == ["-l"]  # the three .xo came from build/cache
    assert out.count("Retrieved") == 3


def test_report_lists_kernels_banks_steps_and_vitis_reports(repo):
    ok(scons(repo, "target=hw", "platform=u55c", "kernels=add,maximum", "cus=2", "xclbin"))
    out = repo / f"build/hw/{U55C}/opt4"
    r = json.loads((out / "report.json").read_text())
    assert r["target"] == "hw" and r["opt"] == 4 and r["level"] == "vectorized" and r["cus_per_kernel"] == 2
    assert [(k["name"], k["cus"]) for k in r["kernels"]] == [
        ("v_add_float32", ["v_add_float32_1", "v_add_float32_2"]),
        ("v_maximum_float32", ["v_maximum_float32_1", "v_maximum_float32_2"])]
    assert [a["name"] for a in r["kernels"][0]["args"]] == ["in1", "in2", "out", "alpha", "size"]
    assert r["kernels"][0]["args"][0] == {"name": "in1", "type": "hls::vector<float, 16>*", "port": "M_AXI_GMEM0",
                                          "width": 512}
    sp = [line[3:].split(":") for line in (out / "connectivity.cfg").read_text().splitlines() if line.startswith("sp=")]
    assert {f"{cu}.{arg}": bank for cu, ports in r["bank_map"].items() for arg, bank in ports.items()} == dict(sp)
    assert {s["step"] for s in r["steps"]} == {"codegen opt4", "v++ -c v_add_float32", "v++ -c v_maximum_float32",
                                              "v++ -l torch.xclbin (2 kernels)"}
    assert r["vitis_reports"]["link"]["summary"] == {"path": f"build/hw/{U55C}/opt4/torch.xclbin.link_summary",
                                                     "exists": True}
    assert r["vitis_reports"]["v_add_float32"]["report_dir"]["exists"]
    md = (out / "report.md").read_text()
    assert "| v_add_float32_2 | in1 -> HBM[3], in2 -> HBM[4], out -> HBM[5] |" in md


def test_missing_vitis_stops_before_anything_and_dry_run_prints_every_command(repo):
    p = scons(repo, "target=hw", "platform=u280", "xclbin", vitis=False)
    assert p.returncode == 2
    assert "v++ is not on PATH" in p.stderr and "Nothing was built" in p.stderr
    assert "source /opt/xilinx/Vitis/2022.2/settings64.sh" in p.stderr and "source /opt/xilinx/xrt/setup.sh" in p.stderr
    assert not (repo / "build").exists()
    p = scons(repo, "target=hw_emu", "platform=u280", vitis=False)  # the default target is the xclbin too
    assert p.returncode == 2 and "v++ and emconfigutil are not on PATH" in p.stderr

    dry = ok(scons(repo, "-n", "target=hw", "platform=u280", vitis=False))
    printed = [line.split() for line in dry.splitlines() if line.startswith("v++")]
    u280 = "xilinx_u280_gen3x16_xdma_1_202211_1"
    assert sorted(printed) == sorted([compile_cmd("hw", u280, 4, k, c) for k, c in KERNELS.items()]
                                     + [link_cmd("hw", u280, 4, ["v_add_float32", "v_mul_float32", "v_maximum_float32"])])
    assert not (repo / "build/hw").exists()


def test_bad_values_stop_at_once_with_the_valid_ones(repo):
    p = scons(repo, "target=fpga")
    assert p.returncode == 2 and "'emu', 'sw_emu', 'hw_emu', 'hw'" in p.stderr
    p = scons(repo, "platform=u9")
    assert p.returncode == 2 and U55C in p.stderr and "'zcu102'" in p.stderr
    p = scons(repo, "kernels=binary,softmax")
    assert p.returncode == 2 and "unknown softmax" in p.stderr
    valid = p.stderr.split("Valid: ")[1].split(" (")[0].split(", ")
    assert {"add", "binary", "maximum", "mul", "pair"} <= set(valid) and valid == sorted(valid)
    p = scons(repo, "target=hw", "dtypes=float64")
    assert p.returncode == 2 and "selects no kernel" in p.stderr and "v_maximum_float32" in p.stderr
    p = scons(repo, "cus=65")
    assert p.returncode == 2 and "from 1 to 64" in p.stderr
    assert not (repo / "build").exists()
    h = ok(scons(repo, "-h"))
    for text in ("target:", "(emu|sw_emu|hw_emu|hw)", "default: emu", "opt:", "default: 4", "kernels:", "dtypes:",
                 "platform:", f"default: {U250}", "u55c", "HBM[0..31]", "ZCU102", "cus:", "-j N"):
        assert text in h, text


def test_an_image_that_cannot_fit_stops_before_any_compile(repo):
    """cus=64 of three kernels is 192 compute units, where XRT serves 128: refused after the codegen,
    in seconds, before any v++ -c, with a table that names the limit and the fix."""
    p = scons(repo, "target=hw", "platform=u250", "cus=64", "xclbin")
    assert p.returncode != 0
    assert "compute units (XRT's limit): needs 192, the limit is 128" in p.stdout, p.stdout
    assert "give fewer CUs (cus=1)" in p.stdout and "nothing was compiled" in p.stdout
    assert not [r for r in tool_log(repo) if r[:2] == ["v++", "-c"]]
    # 4 CUs a kernel fit: built, and the estimate is in the report and in `scons -n`.
    ok(scons(repo, "target=hw", "platform=u250", "xclbin"))
    report = json.loads((repo / f"build/hw/{U250}/opt4/report.json").read_text())["resources"]
    assert report["fits"] and report["cus"] == sum(k["cus"] for k in report["kernels"])
    assert {k["name"] for k in report["kernels"]} >= set(KERNELS)
    assert all(k["total"]["lut"] > 0 and k["total"]["bram36"] > 0 for k in report["kernels"])
    assert "## Resources (estimate): fits" in (repo / f"build/hw/{U250}/opt4/report.md").read_text()
    dry = ok(scons(repo, "-n", "target=hw", "platform=u250", "cus=64", "xclbin"))
    assert "Resource estimate for Alveo U250" in dry and "DOES NOT FIT" in dry
