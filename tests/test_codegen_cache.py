"""The codegen's speed-ups must not change a byte: its JSON writer is json.dumps' format, and a run
from a warm cache (codegen/cache.py: torchgen's parse, the templates' bytecode, the interfaces read
back from rendered sources) writes exactly what a cold run writes -- and reads a changed text anew."""
from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codegen import cache, generate, interface
from codegen.gen_hls import template_env

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    {}, [], 0, "x", None, [[[]]], {"k": {"j": {"i": 1.0}}},
    {"b": [1, 2.5, None, True, False, "caf\u00e9 \"q\"\n\t", {}, []], "a": {"c": [], "d": (1, 2)},
     "leaf": {"s": "\u00e9", "t": True, "u": None, "v": -3, "f": 1e-300, "n": float("nan"), "i": float("-inf")},
     "Z": -0.0, "z": float("inf"), "big": 10**30},
]


@pytest.mark.parametrize("doc", DOCS, ids=range(len(DOCS)))
def test_json_text_is_json_dumps_indent_1_sorted(doc):
    assert generate.json_text(doc) == json.dumps(doc, indent=1, sort_keys=True) + "\n"


KERNEL = """#include "x.h"
namespace detail { typedef float T; }
extern "C" void v_k(const detail::T* in1, float* out, uint64_t size) {
#pragma HLS INTERFACE m_axi port=in1 bundle=gmem0
#pragma HLS INTERFACE m_axi port=out bundle=gmem1
  float tile[4096];
}
"""


def test_read_back_reads_a_changed_text_and_ignores_a_stale_or_broken_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AFPGA_CODEGEN_CACHE", str(tmp_path))
    first, second = KERNEL, KERNEL.replace("float* out", "double* out")
    (top, arrays), = generate.read_back([("k", first)], "test")
    assert [a.type for a in top.args] == ["float*", "float*", "uint64_t"]
    assert arrays["bram36"] > 0  # the 4096-float tile
    assert (tmp_path / "interfaces" / "test.pickle").is_file()
    (top2, _), = generate.read_back([("k", second)], "test")
    assert [a.type for a in top2.args] == ["float*", "double*", "uint64_t"]
    # a cache written by other code (another FINGERPRINT) is not believed
    cache.store("interfaces/test", cache.key(), {k: (interface.TopFunction("wrong", ()), {}) for k in
                                                 cache.load("interfaces/test", cache.key())})
    monkeypatch.setattr(cache, "FINGERPRINT", "other code")
    (top3, _), = generate.read_back([("k", second)], "test")
    assert top3 == top2
    (tmp_path / "interfaces" / "test.pickle").write_bytes(b"not a pickle")
    (top4, _), = generate.read_back([("k", first)], "test")
    assert top4 == top


def test_an_edited_template_renders_anew_from_the_bytecode_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AFPGA_CODEGEN_CACHE", str(tmp_path / "cache"))
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.j2").write_text("one {{ x }}\n")
    assert template_env(str(tmp_path / "t")).get_template("a.j2").render(x=1) == "one 1\n"
    assert list((tmp_path / "cache" / "jinja").rglob("*.cache"))  # its bytecode was kept
    (tmp_path / "t" / "a.j2").write_text("two {{ x }}\n")
    assert template_env(str(tmp_path / "t")).get_template("a.j2").render(x=1) == "two 1\n"


def _generate(out: Path, cache_dir: Path) -> None:
    subprocess.run([sys.executable, "-m", "codegen", "generate", "--out", str(out), "--levels", "1,4",
                    "--kernels", "binary,reduce"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": str(ROOT), "AFPGA_CODEGEN_CACHE": str(cache_dir)})


def _differences(a: Path, b: Path) -> list[str]:
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    _, mismatch, errors = filecmp.cmpfiles(a, b, files, shallow=False)
    return mismatch + errors


def test_a_warm_run_writes_the_bytes_of_a_cold_run(tmp_path):
    _generate(tmp_path / "cold", tmp_path / "cache")
    stored = sorted(p.relative_to(tmp_path / "cache").parts[0] for p in (tmp_path / "cache").rglob("*.*"))
    assert {"interfaces", "jinja", "native", "renders"} <= set(stored)
    _generate(tmp_path / "warm", tmp_path / "cache")
    assert _differences(tmp_path / "cold", tmp_path / "warm") == []


def test_a_kernels_text_comes_from_the_cache_only_for_the_same_templates(tmp_path, monkeypatch):
    """generate_hls keeps each kernel's text under its kernel, level and the templates' bytes; an
    edited template (any file of the folder: the templates include each other) renders anew, and
    the engines (add_engines) follow."""
    import shutil

    from codegen.gen_hls import generate_hls
    from codegen.plan import HLS_ROOT, plan

    monkeypatch.setenv("AFPGA_CODEGEN_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "hls"
    shutil.copytree(HLS_ROOT, root)
    kernels = tuple(k for k in plan(str(ROOT / "native_functions_fpga.yaml"), ("add",), ("float32",)).kernels)
    first = generate_hls(kernels, template_env(str(root)), (4,))
    files = dict(first)
    generate.add_engines(kernels, files, 4, template_env(str(root)))
    assert list((tmp_path / "cache" / "renders").glob("*.pickle"))
    helper = root / "pointwise" / "datapath.j2"  # the engine's template, not the kernel's own
    helper.write_text(helper.read_text() + "{# edited #}\n// an edit\n")
    own = root / "binary" / "opt4.cpp.j2"
    own.write_text(own.read_text() + "// edited\n")
    second = generate_hls(kernels, template_env(str(root)), (4,))
    assert all(second[p] == first[p] + "// edited\n" for p in first)
    again = dict(second)
    generate.add_engines(kernels, again, 4, template_env(str(root)))
    engine = next(p for p in again if p.startswith("hls/engines/"))
    assert "// an edit" in again[engine] and "// an edit" not in files[engine]
