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
  label      every loop (for, while, do) is labelled (`name:` before it), so reports and directives
             can name it
  tripcount  every loop whose trip count is not a constant -- a `for` whose start, bound and step
             are not all literals or UPPER_CASE names, and every while and do loop -- and is not
             UNROLLed has `LOOP_TRIPCOUNT`, so the report's latency is a number
  512-bit    level 4: the widest port moves 512 bits per beat (hls::vector or ap_uint<512>); a port
             whose m_axi pragma line says `// random access: <reason>` (a gather or scatter, whose
             addresses are data) or `// element stream: <reason>` (a fused chain whose rows are not
             whole words; a compiled convolution's ports, read once into on-chip planes) is exempt
The rules hold for every category (and for the fused kernels aten_fpga/compile generates).
Each problem is reported as `path: rule: what`, and the exit status is 1 when there is any.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from typing import NamedTuple

from . import abi, interface

_PRAGMA = re.compile(r"#pragma\s+HLS\s+INTERFACE\s+(\w+)\s+([^\n]*)")
_LABEL = re.compile(r"(?<![:\w])\w+\s*:$")  # `name:` ending the code before a loop (not `a::`)
_SPACE = re.compile(r"\s*")
_UNROLLED = re.compile(r"#pragma\s+HLS\s+UNROLL\b(?!\s+factor=)")  # completely: no loop is left


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


def lint_source(text: str, level: int) -> list[str]:
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


class Loop(NamedTuple):
    header: str  # `for (...)`, `while (...)` or `do ... while (...)`, for messages
    kind: str  # "for", "while" or "do"
    open: int  # the body: text[open:close + 1] (a block, or one statement)
    close: int
    pragmas: str  # the #pragma lines at the top of its block
    labelled: bool
    constant: bool  # a `for` whose start, bound and step are all constants: its trip count is known


_BRACKETS = {"()": re.compile(r"[()]"), "{}": re.compile(r"[{}]")}
_STATEMENT = re.compile(r"[(){;]")


def _matching(text: str, i: int, pair: str) -> int:
    """The offset of the bracket that closes the one at text[i] (pair: "()" or "{}")."""
    depth = 0
    for m in _BRACKETS[pair].finditer(text, i):
        depth += 1 if m.group() == pair[0] else -1
        if depth == 0:
            return m.start()
    raise ValueError("unbalanced brackets")


def _statement_end(text: str, i: int) -> int:
    """The offset of the last character of the statement at or after `i`: a block, or up to its `;`
    (a nested braceless loop's own header parentheses hold `;`s of their own)."""
    depth = 0
    for m in _STATEMENT.finditer(text, i):
        c = m.group()
        if c in "()":
            depth += 1 if c == "(" else -1
        elif depth == 0:
            return _matching(text, m.start(), "{}") if c == "{" else m.start()
    raise ValueError("unterminated statement")


def _constant(expr: str) -> bool:
    """Whether `expr` is a constant expression: of literals and UPPER_CASE names (and sizeof)."""
    return (re.fullmatch(r"[\w\s+\-*/%()<>=!?:&|^~]+", expr) is not None
            and all(re.fullmatch(r"\d\w*|[A-Z][A-Z0-9_]*|sizeof", w) for w in re.findall(r"\w+", expr)))


def _constant_trip(header: str) -> bool:
    """A `for (init; cond; step)` whose init value, bound and step are constants."""
    parts = header[header.index("(") + 1:header.rindex(")")].split(";")
    if len(parts) != 3:
        return False
    init, cond, step = parts
    start = re.fullmatch(r"\s*(?:[\w:]+\s+)?\w+\s*=\s*(.+)", init)
    bound = re.fullmatch(r"\s*\w+\s*(?:<=|<|>=|>|!=)\s*(.+)", cond)
    stride = re.fullmatch(r"\s*(?:\+\+\w+|\w+\+\+|--\w+|\w+--|\w+\s*[-+]=\s*(.+))\s*", step)
    return bool(start and bound and stride) and _constant(start.group(1)) and _constant(bound.group(1)) and (
        stride.group(1) is None or _constant(stride.group(1)))


def loops(text: str) -> list[Loop]:
    """Every for, while and do loop of `text` (C++ with its comments already removed)."""
    found = []
    for m in re.finditer(r"\b(for|while|do)\b", text):
        kind = m.group(1)
        if kind == "do":
            i = text.index("{", m.end()) if text[m.end():].lstrip().startswith("{") else m.end()
            close = _statement_end(text, i)
            tail = re.match(r"\s*while\s*\(", text[close + 1:])
            cond_end = _matching(text, close + 1 + tail.end() - 1, "()") if tail else close
            header = "do ... " + re.sub(r"\s+", " ", text[close + 1:cond_end + 1]).strip()
        else:
            paren = text.find("(", m.end())
            if paren < 0 or text[m.end():paren].strip():
                continue  # `for` in a name or a string, not a loop
            end = _matching(text, paren, "()")
            if kind == "while" and re.match(r"\s*;", text[end + 1:]):
                continue  # the tail of a do loop
            header = re.sub(r"\s+", " ", text[m.start():end + 1])
            i = _SPACE.match(text, end + 1).end()
            close = _statement_end(text, i)
        block = text[i + 1:close] if text[i] == "{" else ""
        pragmas = re.match(r"(\s*#pragma[^\n]*\n)*", block).group(0)
        code_end = m.start()  # where the code before the loop ends
        while code_end and text[code_end - 1].isspace():
            code_end -= 1
        before = text[text.rfind("\n", 0, code_end) + 1:code_end]
        found.append(Loop(header, kind, i, close, pragmas, bool(_LABEL.search(before)),
                          kind == "for" and _constant_trip(header)))
    return found


def _uncommented(text: str) -> str:
    """`text` without its // and /* */ comments (a comment may say `for (each row)`)."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)


def _loop_problems(text: str) -> list[str]:
    text = _uncommented(text)
    try:
        found = loops(text)
    except ValueError as e:
        return [f"pipeline: {e}"]
    # A loop that calls a stage function (a `void` function of the file: a dataflow region) walks
    # tiles, not elements; it is not a streaming loop.
    stages = set(re.findall(r"^\s*void\s+(\w+)\s*\(", text, re.M))
    call = re.compile(rf"(?<![.\w])({'|'.join(sorted(stages))})\s*(<[^;(){{}}]*>)?\s*\(")  # not s.read(); f<R, C>(...)
    problems = []
    for loop in found:
        unrolled = bool(_UNROLLED.search(loop.pragmas))
        inner = [l for l in found if loop.open < l.open < loop.close and not _UNROLLED.search(l.pragmas)]
        calls_stage = bool(stages) and call.search(text, loop.open, loop.close) is not None
        if not (unrolled or inner or calls_stage) and not re.search(r"PIPELINE\s+II=1\b", loop.pragmas):
            problems.append(f"pipeline: loop `{loop.header}` is not PIPELINE II=1")
        if not loop.labelled:
            problems.append(f"label: loop `{loop.header}` has no label")
        if not (unrolled or loop.constant or "LOOP_TRIPCOUNT" in loop.pragmas):
            problems.append(f"tripcount: loop `{loop.header}` has a variable trip count and no LOOP_TRIPCOUNT")
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
                found[path] = lint_source(f.read(), level)
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
