"""The AXI interface of a rendered HLS kernel: its `extern "C"` top function's arguments (types
resolved through the file's typedefs and constants, widths from the ABI table) and the bundle of
each `#pragma HLS INTERFACE m_axi` port.

The one reader of kernel signatures. The codegen runs it on every source it renders and hands the
result to the build in interface_opt<N>.json (the link config and the emulated xclbin's metadata
are derived from that, so they describe exactly the kernel v++ or g++ compiles); the lint runs it
on the text it checks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields
from functools import lru_cache

from . import abi

DEFAULT_BUNDLE = "gmem"  # what Vitis HLS names an m_axi port given no bundle=


def word(keyword: str) -> str:
    """`\\b<keyword>` (a keyword that starts with a word character) as a pattern that begins with the
    literal: the regex engine then scans for it quickly, instead of trying a match at every character
    of a rendered kernel (hundreds of kilobytes for some)."""
    return rf"{keyword}(?<!\w{keyword})"


_TOP = re.compile(r'extern\s+"C"\s+void\s+(\w+)\s*\(([^)]*)\)\s*\{')
_M_AXI = re.compile(r"#pragma\s+HLS\s+INTERFACE\s+m_axi\b([^\n]*)")
FIELDS = re.compile(r"(\w+)=(\w+)")  # a pragma's key=value fields
_PARAM = re.compile(r"(.+?)\s*(\*?)\s*(\w+)", re.S)
_CONST = re.compile(r"\bconst\b")
_TYPEDEF = re.compile(word("typedef") + r"\s+([^;]+?)\s+(\w+)\s*;")
_CONST_INT = re.compile(word("const") + r"\s+(?:int|unsigned|uint64_t|int64_t)\s+(\w+)\s*=\s*(\d+)\s*;")
_NAMESPACE = re.compile(word("namespace") + r"\s+(\w+)\s*\{")
_QUALIFIER = re.compile(r"\b(\w+)::")
_NAME = re.compile(r"(?<!::)\b(\w+)\b")
_OPMATH = re.compile(r"afpga::opmath_t<\s*([\w:]+(?:<[\w:, ]+>)?)\s*>")
_SPACES = re.compile(r"\s+")
_COMMA = re.compile(r"\s*,\s*")
_VECTOR = re.compile(r"hls::vector<(.+),(\d+)>")
_AP_INT = re.compile(r"ap_u?int<(\d+)>")


class InterfaceError(Exception):
    pass


@dataclass(frozen=True)
class Arg:
    name: str
    type: str  # resolved C type: "float*", "hls::vector<float, 16>*", "uint64_t"
    pointer: bool
    bundle: str | None  # the m_axi bundle of a pointer (None: it has no m_axi pragma)
    width: int | None  # bits: the port word of a pointer, the value of a scalar (None: unknown type)

    @property
    def port(self) -> str:
        """The kernel port's name in the xclbin metadata (v++ upper-cases the HLS name)."""
        return f"M_AXI_{self.bundle.upper()}" if self.pointer else "S_AXI_CONTROL"


@dataclass(frozen=True)
class TopFunction:
    name: str
    args: tuple[Arg, ...]

    @property
    def bundles(self) -> tuple[str, ...]:
        """m_axi bundles in argument order; arguments sharing a bundle share one port and bank."""
        return tuple(dict.fromkeys(a.bundle for a in self.args if a.pointer))

    def to_json(self) -> dict:
        return {"name": self.name, "args": [{f: getattr(a, f) for f in _ARG_FIELDS} for a in self.args]}

    @staticmethod
    def from_json(doc: dict) -> TopFunction:
        return TopFunction(doc["name"], tuple(Arg(**a) for a in doc["args"]))


_ARG_FIELDS = tuple(f.name for f in fields(Arg))  # an Arg's JSON: its fields (all plain values), in order


@lru_cache(maxsize=None)
def bits(ctype: str) -> int | None:
    """Bits of a value of interface type `ctype` (an hls::vector's lanes together), or None."""
    t = ctype.replace(" ", "")
    m = _VECTOR.fullmatch(t)
    if m:
        lane = bits(m.group(1))
        return lane * int(m.group(2)) if lane else None
    m = _AP_INT.fullmatch(t)
    if m:
        return int(m.group(1))
    known = abi.ctype(t)
    return known.bits if known else None


def _split_params(text: str) -> list[str]:
    """Split at commas outside <...> (template arguments have commas of their own)."""
    out, depth, cur = [], 0, ""
    for c in text:
        depth += (c == "<") - (c == ">")
        if c == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
    return [p.strip() for p in out + [cur] if p.strip()]


def resolver(code: str):
    """Expand the file's `typedef X Name;` and `const int NAME = n;` inside a type, and drop the
    qualifiers of namespaces the file declares (the kernels keep their helpers in one)."""
    names = {n: t for t, n in _TYPEDEF.findall(code)}
    names.update(_CONST_INT.findall(code))
    return _resolver(tuple(names.items()), frozenset(_NAMESPACE.findall(code)))


@lru_cache(maxsize=None)
def _resolver(declared: tuple[tuple[str, str], ...], namespaces: frozenset[str]):
    """One resolver per set of declarations: the kernels of a template share theirs, and each
    type is resolved once."""
    names = dict(declared)

    @lru_cache(maxsize=None)
    def resolve(t: str) -> str:
        for _ in range(8):  # typedefs of typedefs; a bound keeps a cycle from spinning
            t2 = _QUALIFIER.sub(lambda m: "" if m.group(1) in namespaces else m.group(0), t)
            t2 = _NAME.sub(lambda m: names.get(m.group(1), m.group(1)), t2)
            t2 = _OPMATH.sub(  # once its argument is a type, not a typedef
                lambda m: m.group(0) if m.group(1) in names else abi.OPMATH.get(m.group(1), m.group(1)), t2)
            if t2 == t:
                break
            t = t2
        return _COMMA.sub(", ", _SPACES.sub(" ", t)).strip()

    return resolve


def tops(code: str) -> list[str]:
    """The names of the `extern "C"` top functions in `code`."""
    return [name for name, _ in _TOP.findall(code)]


def parse(code: str, where: str, resolve=None) -> TopFunction:
    """The one top function of `code`, as written (a pointer without m_axi pragma has bundle None,
    an argument of unknown type width None: `check` says so). `where` names the source in errors;
    `resolve`: the file's `resolver`, if the caller has built it."""
    found = _TOP.findall(code)
    if len(found) != 1:
        raise InterfaceError(f"{where}: expected one extern \"C\" void top function, found {len(found)}")
    name, params = found[0]
    bundles = {}
    for pragma in _M_AXI.findall(code):
        fields = dict(FIELDS.findall(pragma))
        if "port" not in fields:
            raise InterfaceError(f"{where}: m_axi pragma without port=: {pragma.strip()}")
        bundles[fields["port"]] = fields.get("bundle", DEFAULT_BUNDLE)
    resolve = resolve or resolver(code)
    args = []
    for p in _split_params(params):
        m = _PARAM.fullmatch(p)
        if not m:
            raise InterfaceError(f"{where}: cannot read parameter '{p}' of {name}")
        base = resolve(_CONST.sub("", m.group(1)))
        pointer, arg = bool(m.group(2)), m.group(3)
        args.append(Arg(arg, base + "*" if pointer else base, pointer, bundles.get(arg) if pointer else None,
                        bits(base)))
    return TopFunction(name, tuple(args))


def check(top: TopFunction, where: str) -> TopFunction:
    """`top`, if the build can link and describe it: every pointer has an m_axi bundle and every
    argument a known width; else an InterfaceError naming the fix."""
    for a in top.args:
        if a.pointer and a.bundle is None:
            raise InterfaceError(f"{where}: pointer argument '{a.name}' of {top.name} has no "
                                 "#pragma HLS INTERFACE m_axi")
        if a.width is None:
            raise InterfaceError(f"{where}: unknown width of interface type '{a.type.rstrip('*')}' of argument "
                                 f"'{a.name}'; add the type to CTYPES in codegen/abi.py")
    return top
