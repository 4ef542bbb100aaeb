"""The pragma lint (codegen/lint.py): every kernel the library can generate passes it, each rule
catches a template broken on purpose (a copy of kernels/hls in tmp_path, edited), and the loop
rules cover every category: every label and every trip count its kernels have is one the lint
asks for."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from codegen import library as kernel_library
from codegen.gen_hls import template_env
from codegen.generate import HLS_ROOT
from codegen.lint import lint_source, lint_tree, loops, main, synthesized
from codegen.model import DTYPES, LEVELS, Kernel


def render(root, category: str, op: str, dtype: str, level: int) -> str:
    lib = kernel_library.load_library(str(root))
    k = Kernel(lib[category].ops[op], DTYPES[dtype])
    return template_env(str(root)).get_template(f"{category}/opt{level}.cpp.j2").render(
        kernel=k, op=k.op, dtype=k.dtype, level=level)


def test_every_library_kernel_passes():
    lib = kernel_library.load_library(HLS_ROOT)
    env = template_env(HLS_ROOT)
    checked = 0
    for cat in lib.values():
        for op in cat.ops.values():
            for d in op.dtypes:
                k = Kernel(op, DTYPES[d])
                for level in LEVELS:
                    text = env.get_template(f"{cat.name}/opt{level}.cpp.j2").render(
                        kernel=k, op=op, dtype=k.dtype, level=level)
                    assert lint_source(text, level) == [], (k.name, level)
                    checked += 1
    assert checked > 500


@pytest.fixture
def broken(tmp_path):
    """A copy of the template tree to break; returns (root, edit(file, old, new))."""
    root = tmp_path / "hls"
    shutil.copytree(HLS_ROOT, root)

    def edit(rel: str, old: str, new: str) -> None:
        path = root / rel
        text = path.read_text()
        assert old in text, f"{old!r} not in {rel}: the test is out of date with the template"
        path.write_text(text.replace(old, new))

    return root, edit


@pytest.mark.parametrize("rel,old,new,level,rule", [
    # a pointer without its m_axi interface
    ("pointwise/_kernel.j2", "#pragma HLS INTERFACE m_axi port={{ p.name }}", "// (no m_axi for {{ p.name }})",
     1, "m_axi: pointer 'in1'"),
    # two pointers on one bundle, no reason given
    ("pointwise/_kernel.j2", "bundle=gmem{{ loop.index0 }}", "bundle=gmem", 2, "share bundle gmem"),
    # a scalar without s_axilite
    ("pointwise/_kernel.j2", "{% for s in op.scalars %}#pragma HLS INTERFACE s_axilite port={{ s.name }}",
     "{% for s in op.scalars %}// {{ s.name }}", 1, "s_axilite: scalar 'alpha'"),
    # no s_axilite for return
    ("pointwise/_kernel.j2", "#pragma HLS INTERFACE s_axilite port=return", "", 3, "for return"),
    # the dataflow region lost its pragma
    ("pointwise/_dataflow.j2", "#pragma HLS DATAFLOW", "", 2, "dataflow: XCL_OPT 2"),
    # a streaming loop not pipelined
    ("pointwise/opt1.cpp.j2", "#pragma HLS PIPELINE II=1\n      buf_{{ p.name }}[i]", "      buf_{{ p.name }}[i]", 1,
     "pipeline: loop"),
    ("pointwise/_dataflow.j2", "#pragma HLS PIPELINE II=1\n    out[i]", "#pragma HLS PIPELINE II=2\n    out[i]", 4,
     "pipeline: loop"),
    # level 4 ports narrower than 512 bits
    ("pointwise/_dataflow.j2", "const int LANES = {{ kernel.lanes }};", "const int LANES = {{ kernel.lanes // 2 }};", 4,
     "512-bit: XCL_OPT 4 ports must be 512 bits"),
    # no extern "C" top function
    ("pointwise/_dataflow.j2", 'extern "C" void', "void", 4, 'top: expected one extern "C"'),
    # a loop without its label
    ("pointwise/_dataflow.j2", "compute:\n", "", 2, "label: loop"),
    # a loop of a variable trip count without LOOP_TRIPCOUNT
    ("pointwise/opt1.cpp.j2", "#pragma HLS LOOP_TRIPCOUNT min=1 max=512\n#pragma HLS PIPELINE II=1\n      buf_{{ p.name }}[i]",
     "#pragma HLS PIPELINE II=1\n      buf_{{ p.name }}[i]", 1, "tripcount: loop"),
])
def test_lint_catches_a_broken_template(broken, rel, old, new, level, rule):
    root, edit = broken
    assert lint_source(render(root, "binary", "add", "float32", level), level) == []  # intact: clean
    edit(rel, old, new)
    problems = lint_source(render(root, "binary", "add", "float32", level), level)
    assert any(rule in p for p in problems), problems


# The loop rules in categories they once skipped (their templates had unlabelled loops, and loops
# of variable trip count without LOOP_TRIPCOUNT): each edit breaks one loop of one kernel.
@pytest.mark.parametrize("rel,old,new,category,op,level,rule", [
    ("copy/opt1.cpp.j2", "  gather:\n", "", "copy", "copy_float32", 1, "label: loop `for (uint64_t i = 0; i < len;"),
    ("copy/opt2.cpp.j2", "#pragma HLS LOOP_TRIPCOUNT min=1 max=4096\n#pragma HLS PIPELINE II=1\n    out[dst.off]",
     "#pragma HLS PIPELINE II=1\n    out[dst.off]", "copy", "triu", 3, "tripcount: loop `for (uint64_t i = 0; i < len;"),
    ("index/opt2.cpp.j2", "void move(const T* in, T* out, hls::stream<Move>& moves, uint64_t len) {\nelements:\n",
     "void move(const T* in, T* out, hls::stream<Move>& moves, uint64_t len) {\n", "index", "gather_rows", 4,
     "label: loop `for (uint64_t n = 0; n < len;"),
    ("index/opt1.cpp.j2", "#pragma HLS LOOP_TRIPCOUNT min=1 max=1048576\n", "", "index", "scatter_add", 1,
     "tripcount: loop `for (uint64_t f = begin; f < begin + size;"),
    ("rng/opt2.cpp.j2", "  lanes:\n", "", "rng", "uniform", 4, "label: loop `for (int l = 0; l < LANES;"),
    ("rng/opt2.cpp.j2", "tiles:\n  for (uint64_t base = 0; base < words; base += TILE) {\n#pragma HLS LOOP_TRIPCOUNT min=1 max=4096\n",
     "tiles:\n  for (uint64_t base = 0; base < words; base += TILE) {\n", "range", "arange", 2,
     "tripcount: loop `for (uint64_t base = 0; base < words; base += TILE)`"),
    ("multi/_dataflow.j2", "  lanes:\n", "", "foreach_unary", "mt_sqrt", 4, "label: loop `for (int l = 0; l < LANES;"),
    ("multi/_dataflow.j2", "void write(hls::stream<E>& s, E* out, uint64_t n) {\nelements:\n",
     "void write(hls::stream<E>& s, E* out, uint64_t n) {\n", "fused_adam", "mt_adam", 2, "label: loop"),
    ("randperm/opt2.cpp.j2", "void draws(hls::stream<uint64_t>& positions, int64_t seed, int64_t offset, uint64_t size) {\nsteps:\n",
     "void draws(hls::stream<uint64_t>& positions, int64_t seed, int64_t offset, uint64_t size) {\n", "randperm",
     "randperm", 3, "label: loop `for (uint64_t i = size; i > 1; --i)`"),
    # a loop that counts down from a variable start to a constant bound has a variable trip count
    ("randperm/opt1.cpp.j2", "#pragma HLS LOOP_TRIPCOUNT min=1 max=65536\n#pragma HLS PIPELINE II=1\n    const uint64_t j",
     "#pragma HLS PIPELINE II=1\n    const uint64_t j", "randperm", "randperm", 1,
     "tripcount: loop `for (uint64_t i = size; i > 1; --i)`"),
])
def test_lint_catches_a_broken_loop_in_every_category(broken, rel, old, new, category, op, level, rule):
    root, edit = broken
    dtype = kernel_library.load_library(str(root))[category].ops[op].dtypes[0]
    assert lint_source(render(root, category, op, dtype, level), level) == []
    edit(rel, old, new)
    problems = lint_source(render(root, category, op, dtype, level), level)
    assert any(p.startswith(rule) for p in problems), problems


_LOOP_LABEL = re.compile(r"^[ \t]*\w+:[ \t]*\n(?=[ \t]*(?:for|while|do)\b)", re.M)
_TRIPCOUNT = re.compile(r"^[ \t]*#pragma HLS LOOP_TRIPCOUNT[^\n]*\n", re.M)


def test_loop_rules_cover_every_category():
    """Per category and level (a kernel of its first op): removing any one loop label, or any one
    LOOP_TRIPCOUNT, of the code Vitis HLS reads is a problem the lint reports. So the rules apply to
    every category, and no template carries a trip count its loop does not need."""
    lib = kernel_library.load_library(HLS_ROOT)
    env = template_env(HLS_ROOT)
    removed = {}
    for cat in lib.values():
        op = next(iter(cat.ops.values()))
        k = Kernel(op, DTYPES[op.dtypes[0]])
        for level in LEVELS:
            text = synthesized(env.get_template(f"{cat.name}/opt{level}.cpp.j2").render(
                kernel=k, op=op, dtype=k.dtype, level=level))
            assert lint_source(text, level) == [], (k.name, level)
            for rule, mark in (("label", _LOOP_LABEL), ("tripcount", _TRIPCOUNT)):
                for m in mark.finditer(text):
                    problems = lint_source(text[:m.start()] + text[m.end():], level)
                    assert any(p.startswith(f"{rule}:") for p in problems), (k.name, level, m.group(0), problems)
                    removed[cat.name, rule] = removed.get((cat.name, rule), 0) + 1
    assert {c for c, _ in removed} == set(lib) and len(lib) == 24, sorted(removed)
    assert all(removed.get((c, rule)) for c in lib for rule in ("label", "tripcount")), removed


def test_lint_tree_checks_loops_in_every_category(tmp_path):
    """`scons lint` (lint_tree over build/gen) holds every category's kernels to the loop rules: a
    kernel of each, given a helper with an unlabelled loop of variable trip count, is reported."""
    lib = kernel_library.load_library(HLS_ROOT)
    env = template_env(HLS_ROOT)
    extra = "void extra(uint64_t n, uint64_t& x) {\n  for (uint64_t i = 0; i < n; ++i) {\n#pragma HLS PIPELINE II=1\n" \
            "    x += i;\n  }\n}\n"
    expected = set()
    for cat in lib.values():
        op = next(iter(cat.ops.values()))
        k = Kernel(op, DTYPES[op.dtypes[0]])
        text = env.get_template(f"{cat.name}/opt2.cpp.j2").render(kernel=k, op=op, dtype=k.dtype, level=2)
        top = text.index('extern "C"')
        path = tmp_path / "hls" / cat.name / f"{k.name}_opt2.cpp"
        path.parent.mkdir(parents=True)
        path.write_text(text[:top] + extra + text[top:])
        expected.add(str(path))
    found = lint_tree(str(tmp_path), (2,))
    assert set(found) == expected and len(found) == 24
    for path, problems in found.items():
        assert sorted(p.split(":")[0] for p in problems) == ["label", "tripcount"], (path, problems)


def test_loops_are_found_in_every_form():
    """for, while and do loops, braced or not, with their labels and the trip counts they need."""
    text = ("void f(uint64_t n, int* a) {\n"
            "fill:\n  for (int i = 0; i < N * 2; ++i) a[i] = 0;\n"  # constant: literals and UPPER_CASE names
            "  for (uint64_t i = n; i > 1; --i) {\n    a[i] = 1;\n  }\n"  # a variable start
            "wait:\n  while (a[0] < 3) {\n#pragma HLS LOOP_TRIPCOUNT min=1 max=3\n    ++a[0];\n  }\n"
            "  do {\n    --a[0];\n  } while (a[0] > 0);\n"
            "outer: for (int i = 0; i < (N > M ? N : M); i += STEP) for (int j = 0; j < n; ++j) a[j] += i;\n}\n")
    found = loops(text)
    assert [(l.kind, l.labelled, l.constant) for l in found] == [
        ("for", True, True), ("for", False, False), ("while", True, False), ("do", False, False),
        ("for", True, True), ("for", False, False)]
    assert "LOOP_TRIPCOUNT" in found[2].pragmas and found[3].header == "do ... while (a[0] > 0)"
    assert text[found[4].open:found[4].close + 1] == "for (int j = 0; j < n; ++j) a[j] += i;"


def test_shared_bundle_with_a_reason_is_allowed(broken):
    root, edit = broken
    edit("pointwise/_kernel.j2", "bundle=gmem{{ loop.index0 }}", "bundle=gmem  // shared: one HBM bank")
    assert lint_source(render(root, "binary", "add", "float32", 2), 2) == []


def test_cli_reports_and_fails(tmp_path, broken, capsys):
    root, edit = broken
    (tmp_path / "gen" / "hls" / "binary").mkdir(parents=True)
    good = render(root, "binary", "mul", "float32", 2)
    edit("pointwise/_dataflow.j2", "#pragma HLS DATAFLOW", "")
    bad = render(root, "binary", "add", "float32", 2)
    (tmp_path / "gen" / "hls" / "binary" / "v_mul_float32_opt2.cpp").write_text(good)
    (tmp_path / "gen" / "hls" / "binary" / "v_add_float32_opt2.cpp").write_text(bad)
    assert set(lint_tree(str(tmp_path / "gen"), (2,))) == {
        str(tmp_path / "gen" / "hls" / "binary" / f"v_{o}_float32_opt2.cpp") for o in ("add", "mul")}
    assert main([str(tmp_path / "gen")]) == 1
    out = capsys.readouterr().out
    assert "v_add_float32_opt2.cpp: dataflow" in out and "v_mul" not in out.split("lint:")[0]
    assert main([str(tmp_path / "nothing")]) == 1
    # With a manifest only the kernels it lists are linted (a stale source is not).
    (tmp_path / "gen" / "kernels.json").write_text(json.dumps(
        {"kernels": {"v_mul_float32": {"sources": {str(l): f"hls/binary/v_mul_float32_opt{l}.cpp" for l in LEVELS}}}}))
    assert main([str(tmp_path / "gen"), "--level", "2"]) == 0


def test_c_simulation_only_code_is_not_linted():
    """An `#ifndef __SYNTHESIS__` block is g++'s alone (the XCL_OPT 4 rows fold's groups): Vitis HLS
    never reads it, so no rule applies to it; its `#else` branch, and code after it, are linted."""
    def loop(v):  # unlabelled, with a variable bound and no pragma: three problems anywhere HLS reads it
        return f"  for (uint64_t {v} = 0; {v} < n; ++{v}) {{\n    x += {v};\n  }}\n"
    text = ("#ifndef __SYNTHESIS__\n#if 1\n" + loop("a") + "#endif\n" + loop("b") +
            "#else\n" + loop("c") + "#endif\n" + loop("d"))
    kept = synthesized(text)
    assert "uint64_t a" not in kept and "uint64_t b" not in kept
    assert "uint64_t c" in kept and "uint64_t d" in kept
    src = render(HLS_ROOT, "binary", "add", "float32", 2)
    top = src.index('extern "C"')
    extra = "void extra(uint64_t n, uint64_t& x) {\n" + loop("e") + "}\n"
    assert any("label" in p for p in lint_source(src[:top] + extra + src[top:], 2))
    hidden = src[:top] + "#ifndef __SYNTHESIS__\n" + extra + "#endif\n" + src[top:]
    assert lint_source(hidden, 2) == []
