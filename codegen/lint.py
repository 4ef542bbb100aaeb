"""The pragma lint: does a generated HLS kernel follow the Vitis conventions its level promises?

    python -m codegen.lint build/gen [--level N]     (also `scons lint`)

Rules, per kernel source (build/gen/hls/<category>/v_<op>_<dtype>_opt<N>.cpp) as Vitis HLS reads it
(`#ifndef __SYNTHESIS__` blocks, C simulation only, left out):
  top        one `extern "C"` top function
  m_axi      every pointer argument has an m_axi interface, each on its own bundle (several may share
             one only when the pragma line says why: `// shared: <reason>`)
  s_axilite  every scalar argument, and `return`, has an s_axilite interface
  dataflow   levels 2-4 have `#pragma HLS DATAFLOW`
  pipeline   every streaming loop -- one that holds no other (non-unrolled) loop and calls no
             stage function -- is `PIPELINE II=1`, or is `UNROLL`ed inside one (a partial
             `UNROLL factor=N` leaves it a loop: it must be pipelined itself)
  label      every loop is labelled (`name:` before the `for`), so reports and directives can name it
  tripcount  every loop whose bound is not a constant (a literal or an UPPER_CASE name) and is not
             UNROLLed has `LOOP_TRIPCOUNT`, so the report's latency is a number
  512-bit    level 4: the widest port moves 512 bits per beat (hls::vector or ap_uint<512>); a port
             whose m_axi pragma line says `// random access: <reason>` (a gather or scatter, whose
             addresses are data) or `// element stream: <reason>` (a fused chain whose rows are not
             whole words; a compiled convolution's ports, read once into on-chip planes) is exempt
Each problem is reported as `path: rule: what`, and the exit status is 1 when there is any.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys

from . import abi, interface

_PRAGMA = re.compile(r"#pragma\s+HLS\s+INTERFACE\s+(\w+)\s+([^\n]*)")
_FOR = re.compile(r"\bfor\s*\(")
_LABEL = re.compile(r"\b\w+\s*:\s*$")
_CONSTANT = re.compile(r"^(\d+|[A-Z][A-Z0-9_]*)$")
_UNROLLED = re.compile(r"#pragma\s+HLS\s+UNROLL\b(?!\s+factor=)")  # completely: no loop is left
# The categories whose templates label every loop and bound every variable trip count; the label and
# tripcount rules apply to their kernels (the other templates are yet to be converted).
LABELLED = ("unary", "binary", "ternary", "reduce", "norm")


def _body(text: str, start: int) -> tuple[int, int]:
    """The braces-delimited block that starts at or after `start`: (open, close) offsets."""
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return i, j
    raise ValueError("unbalanced braces")


# What an m_axi pragma line says to exempt its port from the 512-bit rule (the reason follows it).
NARROW_MARKS = ("random access:", "element stream:")


def synthesized(text: str) -> str:
    """`text` as Vitis HLS reads it: without the C-simulation-only code (`#ifndef __SYNTHESIS__` up to
    its `#else` or `#endif`), which g++ alone compiles and no rule applies to."""
    kept, depth, skipping = [], 0, 0  # depth of #if nesting; skipping: the depth of the skipped block
    for line in text.splitlines(keepends=True):
        directive = line.strip()
        if directive.startswith("#if"):
            depth += 1
            if not skipping and re.match(r"#ifndef\s+__SYNTHESIS__\b", directive):
                skipping = depth
                continue
        elif directive.startswith(("#else", "#elif")) and skipping == depth:
            skipping = 0
            continue
        elif directive.startswith("#endif"):
            depth -= 1
            if skipping == depth + 1:
                skipping = 0
                continue
        if not skipping:
            kept.append(line)
    return "".join(kept)


def lint_source(text: str, level: int, labelled: bool = True) -> list[str]:
    """Every convention `text`, a kernel at XCL_OPT `level`, breaks (empty: it is fine)."""
    text = synthesized(text)
    problems = []
    found = interface.tops(text)
    if len(found) != 1:
        return [f"top: expected one extern \"C\" top function, found {len(found)}"]
    try:
        top = interface.parse(text, "kernel")
    except interface.InterfaceError as e:
        return [f"top: {e}"]
    name = top.name
    pragmas: dict[str, dict[str, str]] = {}
    bundles: dict[str, list[str]] = {}
    for kind, rest in _PRAGMA.findall(text):
        fields = dict(re.findall(r"(\w+)=(\S+)", rest))
        port = fields.get("port")
        if port is None:
            continue
        pragmas.setdefault(port, {})[kind] = rest
        if kind == "m_axi":
            if "shared:" not in rest:
                bundles.setdefault(fields.get("bundle", interface.DEFAULT_BUNDLE), []).append(port)
    for a in top.args:
        if a.pointer and a.bundle is None:
            problems.append(f"m_axi: pointer '{a.name}' of {name} has no m_axi interface")
        elif not a.pointer and "s_axilite" not in pragmas.get(a.name, {}):
            problems.append(f"s_axilite: scalar '{a.name}' of {name} has no s_axilite interface")
    if "s_axilite" not in pragmas.get("return", {}):
        problems.append(f"s_axilite: {name} has no s_axilite interface for return")
    for bundle, ports in sorted(bundles.items()):
        if len(ports) > 1:
            problems.append(f"m_axi: ports {', '.join(ports)} share bundle {bundle}; give each its own or "
                            "say why on the pragma line (// shared: <reason>)")
    if level >= 2 and not re.search(r"#pragma\s+HLS\s+DATAFLOW\b", text):
        problems.append(f"dataflow: XCL_OPT {level} needs #pragma HLS DATAFLOW")
    problems += _loop_problems(text)
    if labelled:
        problems += _label_problems(text)
    if level == 4:
        widths = {a.name: a.width for a in top.args
                  if a.pointer and not any(m in pragmas.get(a.name, {}).get("m_axi", "") for m in NARROW_MARKS)}
        unknown = [p for p, w in widths.items() if w is None]
        if unknown:
            problems.append(f"512-bit: cannot tell the width of port(s) {', '.join(unknown)}")
        elif widths and max(widths.values()) != abi.WORD_BITS:
            problems.append(f"512-bit: XCL_OPT 4 ports must be {abi.WORD_BITS} bits wide (the widest); got "
                            f"{', '.join(f'{p}={w}' for p, w in widths.items())}")
    return problems


def _loop_problems(text: str) -> list[str]:
    loops = []  # (open, close, pragma block at the top of the body)
    for m in _FOR.finditer(text):
        try:
            i, j = _body(text, m.end())
        except ValueError:
            return ["pipeline: unbalanced braces"]
        head = text[i + 1:j].lstrip()
        pragmas = ""
        while head.startswith("#pragma"):
            line, _, head = head.partition("\n")
            pragmas += line + "\n"
            head = head.lstrip()
        loops.append((i, j, pragmas, text[m.start():i].strip()))
    # A loop that calls a stage function (a `void` function of the file: a dataflow region) walks
    # tiles, not elements; it is not a streaming loop.
    stages = set(re.findall(r"^\s*void\s+(\w+)\s*\(", text, re.M))
    problems = []
    for i, j, pragmas, header in loops:
        unrolled = bool(_UNROLLED.search(pragmas))
        inner = [l for l in loops if i < l[0] < j and not _UNROLLED.search(l[2])]
        calls_stage = any(re.search(rf"(?<![.\w]){f}\s*(<[^;(){{}}]*>)?\s*\(", text[i:j])  # not s.read();
                          for f in stages)  # a template stage: f<R, C>(...)
        if unrolled or inner or calls_stage:
            continue
        if not re.search(r"PIPELINE\s+II=1\b", pragmas):
            problems.append(f"pipeline: loop `{header}` is not PIPELINE II=1")
    return problems


def _label_problems(text: str) -> list[str]:
    problems = []
    for m in _FOR.finditer(text):
        header = text[m.start():text.index("{", m.end())].strip()
        before = re.sub(r"//[^\n]*", "", text[:m.start()]).rstrip()
        if not _LABEL.search(before.split("\n")[-1]):
            problems.append(f"label: loop `{header}` has no label")
        i, j = _body(text, m.end())
        pragmas = re.match(r"(\s*#pragma[^\n]*\n)*", text[i + 1:j]).group(0)
        cond = header[header.index("(") + 1:].split(";")[1] if header.count(";") >= 2 else ""
        bound = re.split(r"<=|<|>=|>|!=", cond)[-1].strip()
        if _UNROLLED.search(pragmas) or _CONSTANT.match(bound) or "LOOP_TRIPCOUNT" in pragmas:
            continue
        problems.append(f"tripcount: loop `{header}` has a variable bound and no LOOP_TRIPCOUNT")
    return problems


def lint_tree(gen_root: str, levels=abi.LEVELS) -> dict[str, list[str]]:
    """{kernel source: problems} for the generated kernels of the given levels under gen_root: those
    its kernels.json lists (sources of kernels no longer in the table may linger), else all found."""
    manifest = os.path.join(gen_root, "kernels.json")
    listed = None
    if os.path.exists(manifest):
        with open(manifest, encoding="utf-8") as f:
            listed = {os.path.join(gen_root, k["sources"][str(level)])
                      for k in json.load(f)["kernels"].values() for level in levels}
    found = {}
    for level in levels:
        for path in sorted(glob.glob(os.path.join(gen_root, "hls", "*", f"*_opt{level}.cpp"))):
            if listed is not None and path not in listed:
                continue
            with open(path, encoding="utf-8") as f:
                category = os.path.basename(os.path.dirname(path))
                found[path] = lint_source(f.read(), level, category in LABELLED)
    return found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m codegen.lint", description=__doc__.splitlines()[0])
    p.add_argument("gen", nargs="?", default="build/gen", help="the codegen output folder")
    p.add_argument("--level", type=int, action="append", choices=abi.LEVELS,
                   help="only this XCL_OPT level (repeatable; default: every level found)")
    args = p.parse_args(argv)
    results = lint_tree(args.gen, tuple(args.level or abi.LEVELS))
    if not results:
        print(f"lint: no generated kernels under {args.gen}/hls; run `scons` first", file=sys.stderr)
        return 1
    bad = {path: probs for path, probs in results.items() if probs}
    for path, probs in bad.items():
        for prob in probs:
            print(f"{path}: {prob}")
    print(f"lint: {len(results)} kernel sources, {len(bad)} with problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
