"""The AXI interface of a generated HLS kernel, read from its source: the `extern "C"` top
function's arguments (types resolved through the file's typedefs and constants) and the bundle of
each `#pragma HLS INTERFACE m_axi` port.

The link config (which CU port goes to which bank) and the emulated xclbin's metadata are both
derived from this, so they describe exactly the kernel v++ (or g++) compiles.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Bits of the C types our kernels use on their interfaces.
_BITS = {"bool": 8, "char": 8, "int8_t": 8, "uint8_t": 8, "half": 16, "int16_t": 16, "uint16_t": 16,
         "float": 32, "int": 32, "int32_t": 32, "uint32_t": 32, "double": 64, "int64_t": 64,
         "uint64_t": 64, "std::complex<float>": 64, "std::complex<double>": 128}
# aten_fpga_hls.h's afpga::opmath_t<T>: the type an op computes in (ATen widens half to float).
OPMATH = {"half": "float"}
DEFAULT_BUNDLE = "gmem"  # what Vitis HLS names an m_axi port given no bundle=


class InterfaceError(Exception):
    pass


@dataclass(frozen=True)
class Arg:
    name: str
    type: str  # resolved C type: "float*", "hls::vector<float, 16>*", "uint64_t"
    pointer: bool
    bundle: str | None  # the m_axi bundle of a pointer
    width: int  # bits: the port word of a pointer, the value of a scalar

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


def bits(ctype: str, where: str) -> int:
    t = ctype.replace(" ", "")
    m = re.fullmatch(r"hls::vector<(.+),(\d+)>", t)
    if m:
        return bits(m.group(1), where) * int(m.group(2))
    m = re.fullmatch(r"ap_u?int<(\d+)>", t)
    if m:
        return int(m.group(1))
    for name, n in _BITS.items():
        if t == name.replace(" ", ""):
            return n
    raise InterfaceError(f"{where}: unknown width of interface type '{ctype}'; "
                         "add it to _BITS in site_scons/afpga/hls_interface.py")


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


def _resolver(code: str):
    """Expand the file's `typedef X Name;` and `const int NAME = n;` inside a type, and drop the
    qualifiers of namespaces the file declares (the kernels keep their helpers in one)."""
    names = {n: t for t, n in re.findall(r"\btypedef\s+([^;]+?)\s+(\w+)\s*;", code)}
    names.update(re.findall(r"\bconst\s+(?:int|unsigned|uint64_t|int64_t)\s+(\w+)\s*=\s*(\d+)\s*;", code))
    namespaces = set(re.findall(r"\bnamespace\s+(\w+)\s*\{", code))

    def resolve(t: str) -> str:
        for _ in range(8):  # typedefs of typedefs; a bound keeps a cycle from spinning
            t2 = re.sub(r"\b(\w+)::", lambda m: "" if m.group(1) in namespaces else m.group(0), t)
            t2 = re.sub(r"(?<!::)\b(\w+)\b", lambda m: names.get(m.group(1), m.group(1)), t2)
            t2 = re.sub(r"afpga::opmath_t<\s*([\w:]+(?:<[\w:, ]+>)?)\s*>",  # once its argument is a type, not a typedef
                        lambda m: m.group(0) if m.group(1) in names else OPMATH.get(m.group(1), m.group(1)), t2)
            if t2 == t:
                break
            t = t2
        return re.sub(r"\s*,\s*", ", ", re.sub(r"\s+", " ", t)).strip()

    return resolve


def parse(code: str, where: str) -> TopFunction:
    """`where` names the source in errors (a path)."""
    tops = re.findall(r'extern\s+"C"\s+void\s+(\w+)\s*\(([^)]*)\)\s*\{', code)
    if len(tops) != 1:
        raise InterfaceError(f"{where}: expected one extern \"C\" void top function, found {len(tops)}")
    name, params = tops[0]
    bundles = {}
    for pragma in re.findall(r"#pragma\s+HLS\s+INTERFACE\s+m_axi\b([^\n]*)", code):
        fields = dict(re.findall(r"(\w+)=(\w+)", pragma))
        if "port" not in fields:
            raise InterfaceError(f"{where}: m_axi pragma without port=: {pragma.strip()}")
        bundles[fields["port"]] = fields.get("bundle", DEFAULT_BUNDLE)
    resolve = _resolver(code)
    args = []
    for p in _split_params(params):
        m = re.fullmatch(r"(.+?)\s*(\*?)\s*(\w+)", p, re.S)
        if not m:
            raise InterfaceError(f"{where}: cannot read parameter '{p}' of {name}")
        base = resolve(re.sub(r"\bconst\b", "", m.group(1)))
        pointer, arg = bool(m.group(2)), m.group(3)
        if pointer and arg not in bundles:
            raise InterfaceError(f"{where}: pointer argument '{arg}' of {name} has no "
                                 "#pragma HLS INTERFACE m_axi")
        args.append(Arg(arg, base + "*" if pointer else base, pointer, bundles.get(arg) if pointer else None,
                        bits(base, where)))
    return TopFunction(name, tuple(args))


def parse_file(path: str) -> TopFunction:
    with open(path, encoding="utf-8") as f:
        return parse(f.read(), path)
