"""Engines (codegen/engines.py): what the card holds. Each category's kernels become members of one
top function that an opcode register steers; the image's member table tells the host which engine
argument carries each member argument. Checked on the whole table, rendered in memory at every
level, and against the card limits the resource model enforces (site_scons/afpga/resources.py)."""
from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from codegen import engines, interface
from codegen.generate import HLS_ROOT, add_engines
from codegen.gen_hls import generate_hls, template_env
from codegen.model import LEVELS
from codegen.plan import interface_file, member_file, plan

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "site_scons"))
from afpga import resources, variables  # noqa: E402
from afpga.gen import KernelSource  # noqa: E402
from afpga import platforms  # noqa: E402
from afpga.platforms import PLATFORMS, gemm_pe_default  # noqa: E402

TABLE = str(ROOT / "native_functions_fpga.yaml")


@lru_cache(maxsize=None)
def rendered(level: int) -> dict[str, str]:
    kernels = plan(TABLE).kernels
    files = generate_hls(kernels, template_env(HLS_ROOT), (level,))
    add_engines(kernels, files, level)
    return files


@pytest.mark.parametrize("level", LEVELS)
def test_every_member_argument_lands_on_an_engine_argument_of_its_type(level):
    files = rendered(level)
    doc = json.loads(files[interface_file(level)])
    kernels = plan(TABLE).kernels
    assert sorted(doc["engines"]) == sorted({engines.engine_name(engines.engine_key(k, level)) for k in kernels})
    assert sorted(m for ms in doc["engines"].values() for m in ms) == sorted(k.name for k in kernels)
    table = files[member_file(level)].splitlines()
    assert table[0] == engines.MEMBER_TABLE_MAGIC
    for line in table[1:]:
        if line.startswith("engine "):
            _, engine, opcode = line.split()
            top = interface.TopFunction.from_json(doc["kernels"][engine])
            by_name = {a.name: a for a in top.args}
            assert by_name[opcode].type == "uint32_t" and not by_name[opcode].pointer
            # two bundles: every read port on gmem0, every write port on gmem1
            assert set(top.bundles) <= {engines.READ_BUNDLE, engines.WRITE_BUNDLE}
            opcodes = []
            continue
        _, member, owner, code, *pairs = line.split()
        assert owner == engine
        opcodes.append(int(code))
        assert opcodes == list(range(len(opcodes)))  # a member's opcode is its index
        own = interface.TopFunction.from_json(doc["kernels"][member])
        assert [p.split("=")[0] for p in pairs] == [a.name for a in own.args]  # the member's order
        for a, pair in zip(own.args, pairs):
            carried = by_name[pair.split("=")[1]]
            assert (carried.type, carried.pointer) == (a.type, a.pointer), (member, a.name)
            if a.pointer:
                writes = a.name in {p.name for k in kernels if k.name == member for p in k.ports if p.is_output}
                two = engines.WRITE_BUNDLE in top.bundles
                assert carried.bundle == (engines.WRITE_BUNDLE if writes and two else engines.READ_BUNDLE), \
                    (member, a.name)


def test_the_engine_calls_the_member_its_opcode_names():
    text = rendered(4)[engines.engine_source("reduce", 4)]
    doc = json.loads(rendered(4)[interface_file(4)])
    members = doc["engines"]["e_reduce"]
    for code, member in enumerate(members):
        assert f"  case {code}:\n    {member}(" in text
    assert text.count("#include \"../reduce/") == len(members)
    # the text the build reads back is the interface the codegen planned
    assert interface.parse(text, "e_reduce").to_json() == doc["kernels"]["e_reduce"]


@pytest.mark.parametrize("level", LEVELS)
def test_a_pointwise_engine_runs_each_member_on_one_shared_datapath(level):
    """Members that move the same words share a datapath (tests/test_engine_datapaths.py runs them);
    every member is in exactly one, and the engine sends its opcode there. At XCL_OPT 4 a pointwise
    category's narrow members are an engine of their own."""
    doc = json.loads(rendered(level)[interface_file(level)])
    kernels = {k.name: k for k in plan(TABLE).kernels}
    for name, members in doc["engines"].items():
        category = kernels[members[0]].op.category
        if category not in engines.SHARED_DATAPATH:
            assert name not in doc["datapaths"]
            continue
        if level == 4 and engines.SHARED_DATAPATH[category] == "pointwise":
            assert {kernels[m].compute_lanes < kernels[m].lanes for m in members} == {name.endswith(engines.NARROW)}
        else:
            assert not name.endswith(engines.NARROW)
        text = rendered(level)[f"hls/engines/{name}_opt{level}.cpp"]
        shared = doc["datapaths"][name]
        assert sorted(c for cs in shared for c in cs) == list(range(len(members)))
        for i, codes in enumerate(shared):
            words = {tuple(p.dtype.name for p in kernels[members[c]].ports) for c in codes}
            assert len(words) == 1, (name, i, words)  # one datapath moves one kind of word
            block = "".join(f"  case {c}:\n" for c in codes) + f"    {name}_opt{level}_d{i}::run("
            assert block in text, (name, i)


def test_a_member_named_like_the_opcode_is_refused():
    arg = interface.Arg(engines.OPCODE, "uint32_t", False, None, 32)
    k = plan(TABLE, ("neg",)).kernels[0]
    with pytest.raises(ValueError, match="opcode"):
        engines.build(k.op.category, 4, (k,), {k.name: interface.TopFunction(k.name, (arg,))})


def image_params(level: int, platform) -> dict:
    """resources.params for the whole table's image as the build would declare it (Config defaults)."""
    p = plan(TABLE)
    pe = tuple(int(x) for x in gemm_pe_default(platform).split("x"))
    cfg = variables.Config("hw", level, (), (), platform, variables.default_cus(level, platform), None, "", "",
                           pe, False)
    kernels = [KernelSource(engines.engine_name(key), ks[0].op.category, "", "", "", tuple(
        KernelSource(k.name, k.op.category, k.dtype.name, "", k.op.name, (), k.compute_lanes if level == 4 else 1)
        for k in ks)) for key, ks in engines.groups(p.kernels, level).items()]
    return resources.params(cfg, kernels)


# What fits (docs/building.md, "Will it fit?"): a change that makes one of these overflow is a
# regression of the design, not of the estimate's wording.
ALVEO = ("u200", "u250", "u50", "u55c", "u280")
FITS = {(level, a) for level in (1, 2, 3) for a in ALVEO} | {(4, "u200"), (4, "u250"), (4, "u55c"), (4, "u280")}


@pytest.mark.parametrize("level", LEVELS)
def test_the_whole_table_keeps_the_cards_limits(level, tmp_path):
    path = tmp_path / interface_file(level)
    path.write_text(rendered(level)[interface_file(level)])
    for platform in PLATFORMS.values():
        fit = resources.fit_of(str(path), image_params(level, platform))
        assert fit.cus <= resources.MAX_CUS, platform.alias
        assert max(fit.ports_per_bank.values()) <= resources.MAX_PORTS_PER_BANK, platform.alias
        assert fit.fits == ((level, platform.alias) in FITS), (platform.alias, resources.table(fit))


@pytest.mark.parametrize("alias", ["u200", "u250", "u55c", "u280"])
def test_the_default_gemm_is_the_largest_that_fits_beside_the_whole_table(alias, tmp_path):
    """platforms.GEMM_PE / GEMM_CUS: the whole table's XCL_OPT 4 image fits with them, and not with
    one more CU or an array a row or a column (4 PEs) larger."""
    path = tmp_path / interface_file(4)
    path.write_text(rendered(4)[interface_file(4)])
    platform = next(p for p in PLATFORMS.values() if p.alias == alias)
    pm, pn = platforms.GEMM_PE[alias]
    cus = platforms.gemm_cus(platform, (pm, pn))

    def fits(pe, n):
        p = image_params(4, platform)
        p["gemm_pe"], p["cus"]["e_gemm"] = list(pe), n
        return resources.fit_of(str(path), p).fits

    assert fits((pm, pn), cus)
    assert not fits((pm, pn), cus + 1)
    assert not fits((pm + 4, pn), cus) and not fits((pm, pn + 4), cus)
