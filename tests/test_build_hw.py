"""The v++ targets (sw_emu, hw_emu, hw) through a fake v++/emconfigutil (tests/fake_vitis): exact
command lines (one v++ -c per engine, the link, the member-table step), the generated connectivity
for a DDR and an HBM platform, the default CUs per level, card and engine, the fit check,
incrementality, CacheDir, progress, the report, and the stop when Vitis is missing. Each test
builds in its own copy of the sources, never in the checkout's build/."""
import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fake_vitis"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site_scons"))
from scons_repo import add_category, make_repo, ok, scons, steps_run, tool_log  # noqa: E402

from afpga import platforms, xclbin  # noqa: E402

U250 = "xilinx_u250_gen3x16_xdma_4_1_202210_1"
U55C = "xilinx_u55c_gen3x16_xdma_3_202210_1"
U200 = "xilinx_u200_gen3x16_xdma_2_202110_1"
U280 = "xilinx_u280_gen3x16_xdma_1_202211_1"
ZCU102 = "xilinx_zcu102_base_202210_1"


@pytest.fixture
def repo(tmp_path):
    """The sources plus a second category (`pair`, one kernel) so that one template's edit can be
    told apart from the others."""
    r = make_repo(tmp_path)
    add_category(r, "pair", "maximum", "(a > b ? a : b)", "maximum.out")
    return r


# The GEMM PE array each platform's kernels are compiled with by default (gemm_pe=).
GEMM_PE = {U250: (20, 20), U55C: (8, 20), ZCU102: (16, 16), U280: (8, 20)}
# The image's engines (v++ kernels), in link order, and their members in opcode order.
ENGINES = {"e_binary": ("v_add_float32", "v_mul_float32"), "e_pair": ("v_maximum_float32",)}
# The member table the image carries (codegen/engines.py): each member's engine, opcode and the
# engine argument behind each of its arguments.
MEMBERS = """\
aten_fpga engines 1
engine e_binary opcode
member v_add_float32 e_binary 0 in1=in1 in2=in2 out=out alpha=alpha size=size
member v_mul_float32 e_binary 1 in1=in1 in2=in2 out=out size=size
engine e_pair opcode
member v_maximum_float32 e_pair 0 in1=in1 in2=in2 out=out size=size
"""


def compile_cmd(target, platform, opt, engine):
    out = f"build/{target}/{platform}/opt{opt}"
    pm, pn = GEMM_PE[platform]
    uram = ["-DAFPGA_URAM"] if platform != ZCU102 else []  # the Alveo cards' large arrays go to UltraRAM
    return ["v++", "-c", "-t", target, "--platform", platform, "-k", engine, "-I", "kernels/hls/include",
            f"-DAFPGA_GEMM_PE_M={pm}", f"-DAFPGA_GEMM_PE_N={pn}", *uram,
            "--temp_dir", f"{out}/tmp/{engine}", "--report_dir", f"{out}/reports/{engine}",
            "--log_dir", f"{out}/logs/{engine}", "-o", f"{out}/xo/{engine}.xo",
            f"build/gen/hls/engines/{engine}_opt{opt}.cpp"]


def link_cmd(target, platform, opt, engines, extra=()):
    """v++ -l writes link/torch.xclbin; the member-table step then writes torch.xclbin beside link/."""
    out = f"build/{target}/{platform}/opt{opt}"
    return (["v++", "-l", "-t", target, "--platform", platform, *extra, "--config", f"{out}/connectivity.cfg",
             "--temp_dir", f"{out}/tmp/link", "--report_dir", f"{out}/reports/link", "--log_dir", f"{out}/logs/link",
             "-o", f"{out}/link/torch.xclbin"] + [f"{out}/xo/{e}.xo" for e in engines])


def members_step(target, platform, opt):
    return f"add the member table to build/{target}/{platform}/opt{opt}/torch.xclbin (USER_METADATA)"


def check_image(out: Path, members: str) -> None:
    """torch.xclbin is v++'s linked image, every section unchanged, plus the member table as its last
    section (USER_METADATA), which the host reads back."""
    linked, final = (out / "link/torch.xclbin").read_bytes(), (out / "torch.xclbin").read_bytes()
    assert xclbin.members_of(linked) is None and xclbin.members_of(final) == members
    before, after = xclbin.section_table(linked), xclbin.section_table(final)
    assert [kind for kind, _, _ in after] == [kind for kind, _, _ in before] + [xclbin.USER_METADATA]
    assert [linked[o:o + n] for _, o, n in before] == [final[o:o + n] for _, o, n in after[:-1]]


def config_lines(out: Path) -> list[str]:
    return (out / "connectivity.cfg").read_text().splitlines()


def nk(out: Path) -> dict[str, int]:
    return {line[3:].split(":")[0]: int(line.split(":")[1]) for line in config_lines(out) if line.startswith("nk=")}


def sp(out: Path) -> dict[str, str]:
    return dict(line[3:].rsplit(":", 1) for line in config_lines(out) if line.startswith("sp="))


def bundles(repo: Path, opt: int) -> dict[str, dict[str, str]]:
    """{engine: {buffer argument: m_axi bundle}} from the generated engines' pragmas."""
    out = {}
    for src in sorted((repo / "build/gen/hls/engines").glob(f"e_*_opt{opt}.cpp")):
        out[src.name.rsplit("_opt", 1)[0]] = dict(
            re.findall(r"#pragma HLS INTERFACE m_axi port=(\w+) offset=slave bundle=(\w+)", src.read_text()))
    return out


def masters_per_bank(repo: Path, out: Path, opt: int) -> dict[str, int]:
    """The m_axi masters (a CU's bundle) on each bank, from connectivity.cfg; arguments that share a
    bundle must share its bank."""
    banks, count = sp(out), {}
    for engine, n in nk(out).items():
        for cu in range(1, n + 1):
            by_bundle = {}
            for arg, bundle in bundles(repo, opt)[engine].items():
                by_bundle.setdefault(bundle, set()).add(banks[f"{engine}_{cu}.{arg}"])
            assert all(len(b) == 1 for b in by_bundle.values()), (engine, cu, by_bundle)
            for (bank,) in by_bundle.values():
                count[bank] = count.get(bank, 0) + 1
    return count


def digests(folder: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_hw_commands_and_ddr_connectivity(repo):
    ok(scons(repo, "target=hw", "platform=u250", "opt=3", "cus=2", "xclbin"))
    runs = tool_log(repo)
    compiles = sorted(r for r in runs if r[1] == "-c")
    assert compiles == sorted(compile_cmd("hw", U250, 3, e) for e in ENGINES)
    assert runs[-1] == link_cmd("hw", U250, 3, list(ENGINES))
    assert len(runs) == 3  # no emconfigutil, no package step for hw on a card
    out = repo / f"build/hw/{U250}/opt3"
    # Two m_axi bundles per CU of a streaming engine (gmem0: in1 and in2, which share its bank;
    # gmem1: out), one for the others (pair: all on gmem0), two CUs per engine, round-robin over the
    # U250's four DDR banks.
    assert config_lines(out)[2:] == [
        "[connectivity]",
        "nk=e_binary:2:e_binary_1.e_binary_2",
        "nk=e_pair:2:e_pair_1.e_pair_2",
        "sp=e_binary_1.in1:DDR[0]", "sp=e_binary_1.in2:DDR[0]", "sp=e_binary_1.out:DDR[1]",
        "sp=e_binary_2.in1:DDR[2]", "sp=e_binary_2.in2:DDR[2]", "sp=e_binary_2.out:DDR[3]",
        "sp=e_pair_1.in1:DDR[0]", "sp=e_pair_1.in2:DDR[0]", "sp=e_pair_1.out:DDR[0]",
        "sp=e_pair_2.in1:DDR[1]", "sp=e_pair_2.in2:DDR[1]", "sp=e_pair_2.out:DDR[1]",
    ]
    assert (repo / "build/gen/members_opt3.txt").read_text() == MEMBERS
    check_image(out, MEMBERS)


def test_hw_emu_on_hbm_runs_emconfigutil_and_spreads_over_pseudo_channels(repo):
    ok(scons(repo, "target=hw_emu", f"platform={U55C}", "kernels=add", "freq=250", "cus=16", "xclbin"))
    runs = tool_log(repo)
    out = f"build/hw_emu/{U55C}/opt4"
    assert ["emconfigutil", "--platform", U55C, "--od", out] in runs
    expected_compile = compile_cmd("hw_emu", U55C, 4, "e_binary")
    expected_compile[10:10] = ["--kernel_frequency", "250"]
    assert expected_compile in runs
    assert link_cmd("hw_emu", U55C, 4, ["e_binary"], ["--kernel_frequency", "250"]) in runs
    assert len(runs) == 3
    assert json.loads((repo / out / "emconfig.json").read_text())["Platform"]["Boards"][0]["Name"] == U55C
    # 16 CUs of the binary engine on an HBM card: their 32 masters one to every pseudo-channel; a
    # CU's reads (in1, in2: gmem0) on one, its writes on another.
    assert [line for line in config_lines(repo / out) if line.startswith("nk=")] == [
        "nk=e_binary:16:" + ".".join(f"e_binary_{i}" for i in range(1, 17))]
    banks = sp(repo / out)
    assert all(banks[f"e_binary_{c}.in1"] == banks[f"e_binary_{c}.in2"] != banks[f"e_binary_{c}.out"]
               for c in range(1, 17))
    assert sorted(banks[f"e_binary_{c}.{a}"] for c in range(1, 17) for a in ("in1", "out")) == sorted(
        f"HBM[{b}]" for b in range(32))
    # kernels=add: the engine holds that member alone.
    check_image(repo / out, "aten_fpga engines 1\nengine e_binary opcode\n"
                            "member v_add_float32 e_binary 0 in1=in1 in2=in2 out=out alpha=alpha size=size\n")


def test_default_cus_per_level_card_and_engine(repo):
    """cus= unset: one CU per engine at opt=1-2; at 3-4 the streaming engines (binary) get the card's
    Platform.stream_cus (2, on DDR and HBM cards alike), the others (pair) one, and the GEMM engine at
    opt=4 as many CUs of a gemm_pe= array as fit in ~60% of the DSPs, whatever its members' dtypes
    (they share a CU's array). cus= gives every engine its count."""
    with open(repo / "native_functions_fpga.yaml", "a") as f:
        f.write("mm.out: {kernel: gemm/gemm, dtypes: [float32, float16], host: fpga_mm_out}\n")
    dry = ok(scons(repo, "-n", "target=hw", "platform=u250", "xclbin"))
    assert f"build/hw/{U250}/opt4/torch.xclbin" in dry
    u250, u55c = platforms.PLATFORMS[U250], platforms.PLATFORMS[U55C]
    for platform, opt, args, expected in [
            (U250, 2, (), {"e_binary": 1, "e_gemm": 1, "e_pair": 1}),
            (U250, 3, (), {"e_binary": 2, "e_gemm": 1, "e_pair": 1}),
            (U55C, 3, (), {"e_binary": 2, "e_gemm": 1, "e_pair": 1}),
            # The U200 holds the whole table's XCL_OPT 4 image with one CU per streaming engine.
            (U200, 4, (), {"e_binary": 1, "e_gemm": 1, "e_pair": 1}),
            # One 16x16 array per CU, which the members (float32, float16) share: 5 CUs in 60% of
            # 12,288 DSPs, whatever the members' dtypes.
            (U250, 4, ("gemm_pe=16x16",), {"e_binary": 2, "e_gemm": 5, "e_pair": 1}),
            (U250, 4, ("gemm_pe=16x16", "dtypes=float32"), {"e_binary": 2, "e_gemm": 5, "e_pair": 1}),
            (U250, 4, ("gemm_pe=16x16", "cus=2"), {"e_binary": 2, "e_gemm": 2, "e_pair": 2})]:
        ok(scons(repo, "target=hw", f"platform={platform}", f"opt={opt}", *args, "xclbin"))
        assert nk(repo / f"build/hw/{platform}/opt{opt}") == expected, (platform, opt, args)
    assert u250.stream_cus == 2 and u55c.stream_cus == 2
    assert platforms.gemm_cus(u250, (16, 16)) == 5
    # The binary engine's two CUs at opt=4 on the U250: its four masters on the four banks.
    banks = sp(repo / f"build/hw/{U250}/opt4")
    assert sorted(banks[f"e_binary_{c}.{a}"] for c in (1, 2) for a in ("in1", "out")) == [f"DDR[{b}]" for b in range(4)]


@pytest.mark.parametrize("bundles,banks,cus", [(2, 4, 4), (2, 32, 32), (3, 32, 32), (4, 4, 4), (1, 32, 32), (2, 4, 8)])
def test_every_bundle_of_a_kernel_reaches_every_bank(bundles, banks, cus):
    """A reduction's input (bundle 0 of 2) lands on every bank, not on every other one; each CU's
    ports on different banks."""
    from afpga.connectivity import bank_index

    for start in (0, 5):
        ports = [[bank_index(start, c * bundles + b, bundles, banks) for b in range(bundles)] for c in range(cus)]
        for b in range(bundles):
            assert sorted(p[b] for p in ports) == sorted(list(range(banks)) * (cus // banks))
        assert all(len(set(p)) == bundles for p in ports)


@pytest.mark.parametrize("opt", [1, 2, 3, 4])
def test_every_card_links_within_the_cu_and_bank_limits(repo, opt):
    """The engine design's promise, on every platform at every level: the image links with at most
    128 CUs (XRT) and at most 15 m_axi masters on any bank (Vitis), read from connectivity.cfg."""
    for name, p in platforms.PLATFORMS.items():
        ok(scons(repo, "target=hw", f"platform={name}", f"opt={opt}", "common_image=/opt/common", "xclbin"))
        out = repo / f"build/hw/{name}/opt{opt}"
        cus = nk(out)
        streaming = {1: 1, 2: 1, 3: p.stream_cus, 4: p.vector_stream_cus or p.stream_cus}[opt]
        assert cus == {"e_binary": streaming, "e_pair": 1}, name
        assert sum(cus.values()) <= 128
        masters = masters_per_bank(repo, out, opt)
        per_cu = {e: len(set(b.values())) for e, b in bundles(repo, opt).items()}  # binary 2, pair 1
        assert per_cu == {"e_binary": 2, "e_pair": 1}
        assert sum(masters.values()) == sum(per_cu[e] * n for e, n in cus.items()), (name, masters)
        assert max(masters.values()) <= 15, (name, masters)
        assert set(masters) <= {b.tag for b in p.banks}
        check_image(out, MEMBERS)


def test_embedded_platform_packages_with_the_common_image(repo):
    p = scons(repo, "target=hw", "platform=zcu102", "kernels=mul", "xclbin")
    assert p.returncode == 2 and "common_image=<folder>" in p.stderr and "EDGE_COMMON_SW" in p.stderr
    ok(scons(repo, "target=sw_emu", "platform=zcu102", "kernels=mul", "common_image=/opt/common", "xclbin"))
    runs = tool_log(repo)
    out = f"build/sw_emu/{ZCU102}/opt4"
    # The package holds torch.xclbin, the image with the member table.
    assert runs[-1] == ["v++", "-p", "-t", "sw_emu", "--platform", ZCU102, "--package.out_dir", f"{out}/package",
                        "--package.rootfs", "/opt/common/rootfs.ext4", "--package.kernel_image", "/opt/common/Image",
                        "--package.boot_mode", "sd", "--package.sd_file", f"{out}/torch.xclbin",
                        "--package.sd_file", f"{out}/emconfig.json", f"{out}/torch.xclbin"]
    assert (repo / out / "package/sd_card.img").exists()
    assert config_lines(repo / out)[-3:] == [  # 2 CUs x 2 masters over the 4 HP ports
        "sp=e_binary_2.in1:HP2", "sp=e_binary_2.in2:HP2", "sp=e_binary_2.out:HP3"]
    check_image(repo / out, "aten_fpga engines 1\nengine e_binary opcode\n"
                            "member v_mul_float32 e_binary 0 in1=in1 in2=in2 out=out size=size\n")


def test_incremental(repo):
    args = ("target=hw", "platform=u250", "xclbin")
    out = repo / f"build/hw/{U250}/opt4"
    first = ok(scons(repo, *args))
    assert len(tool_log(repo)) == 3
    assert "ETA unknown" in first  # nothing learnt yet

    # Nothing changed: nothing runs.
    again = ok(scons(repo, *args))
    assert tool_log(repo) == [] and "[" not in again and "is up to date" in again

    # One category's template edited: its engine's .xo and the link, nothing else; the image with
    # the member table follows the new link.
    before = (out / "torch.xclbin").read_bytes()
    t = repo / "kernels/hls/binary/opt4.cpp.j2"
    t.write_text("// binary kernels, edited\n" + t.read_text())
    log = ok(scons(repo, *args))
    runs = tool_log(repo)
    assert runs == [compile_cmd("hw", U250, 4, "e_binary"), link_cmd("hw", U250, 4, list(ENGINES))]
    assert members_step("hw", U250, 4) in log.splitlines()
    assert (out / "torch.xclbin").read_bytes() != before
    check_image(out, MEMBERS)
    # Progress: n/total with an ETA learnt from the first build.
    lines = steps_run(log)
    assert [re.match(r"\[(\d+)/(\d+)\]", line).groups() for line in lines] == [("1", "2"), ("2", "2")]
    assert all(re.search(r"elapsed \d:\d\d:\d\d, this step ~\d:\d\d:\d\d, ETA \d:\d\d:\d\d\)", line)
               for line in lines), lines

    # The other category's template: its engine alone.
    t = repo / "kernels/hls/pair/opt4.cpp.j2"
    t.write_text("// pair kernels, edited\n" + t.read_text())
    ok(scons(repo, *args))
    assert tool_log(repo) == [compile_cmd("hw", U250, 4, "e_pair"), link_cmd("hw", U250, 4, list(ENGINES))]

    # Other CU counts: the link alone.
    ok(scons(repo, *args, "cus=1"))
    assert [r[1] for r in tool_log(repo)] == ["-l"]
    assert nk(out) == {"e_binary": 1, "e_pair": 1}

    # Another level builds beside this one and leaves it untouched.
    before = digests(out)
    ok(scons(repo, "target=hw", "platform=u250", "opt=2", "xclbin"))
    runs = tool_log(repo)
    assert {r[r.index("-o") + 1].split("/")[3] for r in runs} == {"opt2"} and len(runs) == 3
    assert digests(out) == before
    times = json.loads((repo / f"build/hw/{U250}/times.json").read_text())["steps"]
    assert {"opt4/link", "opt2/link", "opt4/xo/e_binary", "opt2/xo/e_binary", "opt2/xo/e_pair"} <= set(times)


def test_a_failed_engine_compile_stops_before_the_link(repo):
    """v++ -c of one engine fails: no link, no image; the next build compiles what did not finish
    (that engine, and the other one if the failure stopped the build before it ran)."""
    p = scons(repo, "target=hw", "platform=u250", "xclbin", FAKE_VPP_FAIL="e_pair")
    assert p.returncode != 0 and "ERROR: [v++ 60-000] fake failure compiling e_pair" in p.stderr
    first = tool_log(repo)
    assert [r[1] for r in first] == ["-c"] * len(first) and "e_pair" in [r[7] for r in first]
    out = repo / f"build/hw/{U250}/opt4"
    assert not (out / "link").exists() and not (out / "torch.xclbin").exists()
    done = {r[7] for r in first} - {"e_pair"}
    ok(scons(repo, "target=hw", "platform=u250", "xclbin"))
    runs = tool_log(repo)
    assert sorted(runs[:-1]) == sorted(compile_cmd("hw", U250, 4, e) for e in ENGINES if e not in done)
    assert runs[-1] == link_cmd("hw", U250, 4, list(ENGINES))
    check_image(out, MEMBERS)


def test_cachedir_reuses_finished_xo_files(repo):
    ok(scons(repo, "target=hw", "platform=u250", "xclbin"))
    tool_log(repo)
    import shutil

    shutil.rmtree(repo / "build/hw")
    out = ok(scons(repo, "target=hw", "platform=u250", "xclbin"))
    assert [r[1] for r in tool_log(repo)] == ["-l"]  # both engines' .xo came from build/cache
    assert out.count("Retrieved") == 2
    check_image(repo / f"build/hw/{U250}/opt4", MEMBERS)


def test_report_lists_kernels_banks_steps_and_vitis_reports(repo):
    ok(scons(repo, "target=hw", "platform=u55c", "kernels=add,maximum", "cus=2", "xclbin"))
    out = repo / f"build/hw/{U55C}/opt4"
    r = json.loads((out / "report.json").read_text())
    assert r["target"] == "hw" and r["opt"] == 4 and r["level"] == "vectorized" and r["cus_per_kernel"] == 2
    assert [(k["name"], k["cus"]) for k in r["kernels"]] == [
        ("e_binary", ["e_binary_1", "e_binary_2"]), ("e_pair", ["e_pair_1", "e_pair_2"])]
    assert [a["name"] for a in r["kernels"][0]["args"]] == ["in1", "in2", "out", "opcode", "alpha", "size"]
    assert r["kernels"][0]["args"][0] == {"name": "in1", "type": "hls::vector<float, 16>*", "port": "M_AXI_GMEM0",
                                          "width": 512}
    assert r["kernels"][0]["args"][2]["port"] == "M_AXI_GMEM1"
    banks = sp(out)
    assert {f"{cu}.{arg}": bank for cu, ports in r["bank_map"].items() for arg, bank in ports.items()} == banks
    assert {s["step"] for s in r["steps"]} == {"codegen opt4", "v++ -c e_binary", "v++ -c e_pair",
                                              "v++ -l torch.xclbin (2 kernels)"}
    assert r["vitis_reports"]["link"]["summary"] == {
        "path": f"build/hw/{U55C}/opt4/link/torch.xclbin.link_summary", "exists": True}
    assert r["vitis_reports"]["e_binary"]["report_dir"]["exists"]
    md = (out / "report.md").read_text()
    assert "| e_binary_2 | in1 -> HBM[2], in2 -> HBM[2], out -> HBM[3] |" in md


def test_missing_vitis_stops_before_anything_and_dry_run_prints_every_command(repo):
    p = scons(repo, "target=hw", "platform=u280", "xclbin", vitis=False)
    assert p.returncode == 2
    assert "v++ is not on PATH" in p.stderr and "Nothing was built" in p.stderr
    assert "source /opt/xilinx/Vitis/2022.2/settings64.sh" in p.stderr and "source /opt/xilinx/xrt/setup.sh" in p.stderr
    assert not (repo / "build").exists()
    p = scons(repo, "target=hw_emu", "platform=u280", vitis=False)  # the default target is the xclbin too
    assert p.returncode == 2 and "v++ and emconfigutil are not on PATH" in p.stderr

    # `scons -n` prints every step of the image, the member table's too, in an order the build may
    # run them: the fit check before any v++ -c, the link after both, the member table after it.
    dry = ok(scons(repo, "-n", "target=hw", "platform=u280", vitis=False)).splitlines()
    out = f"build/hw/{U280}/opt4"
    steps = [line for line in dry if not line.startswith(("(resource estimate", sys.executable))]
    compiles = [" ".join(compile_cmd("hw", U280, 4, e)) for e in ENGINES]
    assert sorted(steps) == sorted([
        f"estimate the image's resources -> {out}/fit.json", f"write {out}/connectivity.cfg", *compiles,
        " ".join(link_cmd("hw", U280, 4, list(ENGINES))), members_step("hw", U280, 4),
        f"write {out}/report.json {out}/report.md"])
    at = {line: i for i, line in enumerate(steps)}
    link = at[" ".join(link_cmd("hw", U280, 4, list(ENGINES)))]
    assert at[f"estimate the image's resources -> {out}/fit.json"] < min(at[c] for c in compiles)
    assert max(at[c] for c in compiles) < link and at[f"write {out}/connectivity.cfg"] < link
    assert link < at[members_step("hw", U280, 4)] < at[f"write {out}/report.json {out}/report.md"]
    assert dry[0].startswith("(resource estimate") and dry[1].startswith(sys.executable + " -m codegen generate")
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
    """cus=64 of two engines is 128 CUs, XRT's limit, but 48 masters on every DDR bank (64 CUs of
    the binary engine with two each, 64 of the pair engine with one) where Vitis connects 15: refused after the codegen, in seconds, before any v++ runs, with a table that names
    the limit and the fix. A third engine makes it 192 CUs, over XRT's limit too."""
    p = scons(repo, "target=hw", "platform=u250", "cus=64", "xclbin")
    assert p.returncode != 0
    assert "m_axi masters on DDR[0] (Vitis: 15 per bank): needs 48, the limit is 15" in p.stdout, p.stdout
    assert "compute units (XRT's limit)" not in p.stdout
    assert "give fewer CUs (cus=1)" in p.stdout and "nothing was compiled" in p.stdout
    assert tool_log(repo) == [] and not (repo / f"build/hw/{U250}/opt4/xo").exists()
    add_category(repo, "triple", "minimum", "(a < b ? a : b)", "minimum.out")
    p = scons(repo, "target=hw", "platform=u250", "cus=64", "xclbin")
    assert p.returncode != 0
    assert "compute units (XRT's limit): needs 192, the limit is 128 -- give fewer CUs (cus=1)" in p.stdout, p.stdout
    assert "m_axi masters on DDR[0] (Vitis: 15 per bank): needs 64, the limit is 15" in p.stdout
    assert tool_log(repo) == []
    # By default they fit: built, and the estimate is in the report and in `scons -n`.
    ok(scons(repo, "target=hw", "platform=u250", "xclbin"))
    report = json.loads((repo / f"build/hw/{U250}/opt4/report.json").read_text())["resources"]
    assert report["fits"] and report["cus"] == 4 == sum(k["cus"] for k in report["kernels"])
    assert [(k["name"], k["cus"]) for k in report["kernels"]] == [("e_binary", 2), ("e_pair", 1), ("e_triple", 1)]
    assert all(k["total"]["lut"] > 0 and k["total"]["bram36"] > 0 for k in report["kernels"])
    assert "## Resources (estimate): fits" in (repo / f"build/hw/{U250}/opt4/report.md").read_text()
    dry = ok(scons(repo, "-n", "target=hw", "platform=u250", "cus=64", "xclbin"))
    assert "Resource estimate for Alveo U250" in dry and "DOES NOT FIT" in dry
