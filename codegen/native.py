"""PyTorch's side: its native_functions.yaml (parsed with torchgen, the version matching the installed
headers) and the DispatchStubs its headers declare."""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import torchgen
import yaml
from torchgen.model import DispatchKey, NativeFunction

from . import cache
from .model import Location, TableError

TORCHGEN_NATIVE = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native")
INSTALLED_NATIVE = os.path.join(TORCHGEN_NATIVE, "native_functions.yaml")

# Tags that name a family of ops (as opposed to a property such as `core` or `inplace_view`):
# the upgrade report proposes new members of the families the table already covers.
FAMILY_TAGS = frozenset({"pointwise", "reduction"})


@dataclass(frozen=True)
class NativeTable:
    """One version of PyTorch's operator table, indexed by overload name ("add.out")."""

    path: str
    functions: dict[str, NativeFunction]
    cpu_kernels: dict[str, str]  # overload -> CPU kernel name ("ufunc_add_CPU", "mul_out")
    # out= overload -> its functional and in-place overloads that delegate to it and have no
    # composite kernel of their own ("add.out" -> add.Tensor, add_.Tensor)
    delegates: dict[str, tuple[NativeFunction, ...]]

    def structured_class(self, f: NativeFunction) -> str | None:
        kernel = self.cpu_kernels.get(str(f.func.name))
        return f"structured_{kernel}" if f.structured and kernel else None

    @functools.cached_property
    def op_table(self) -> OpTable:
        """The same facts as `load_ops` reads from any version's file, taken from torchgen's parse
        (built per overload on first use: `generate` looks at only the table's few)."""
        return OpTable(self.path, _NativeFacts(self))

    def info(self, name: str) -> OpInfo:
        f = self.functions[name]
        return OpInfo(
            schema=parse_schema(str(f.func)),
            structured=f.structured,
            structured_delegate=str(f.structured_delegate) if f.structured_delegate else None,
            ufunc=bool(f.ufunc_inner_loop),
            cpu_kernel=self.cpu_kernels.get(name),
            precomputed=f.precomputed is not None,
            families=frozenset(str(t) for t in f.tags) & FAMILY_TAGS,
            line=f.loc.line,
        )


class _NativeFacts(Mapping):
    """NativeTable's overloads as OpInfos, each made when first looked up."""

    def __init__(self, native: NativeTable):
        self._native = native
        self._made: dict[str, OpInfo] = {}

    def __getitem__(self, name: str) -> OpInfo:
        info = self._made.get(name)
        if info is None:
            info = self._made[name] = self._native.info(name)  # KeyError for unknown names
        return info

    def __iter__(self):
        return iter(self._native.functions)

    def __len__(self) -> int:
        return len(self._native.functions)


@functools.lru_cache(maxsize=None)
def load_native(path: str | None = None) -> NativeTable:
    """Parse a native_functions.yaml (default: the installed torch's), with the tags.yaml beside it.
    torchgen's parse takes most of a second; the codegen's cache keeps it (codegen/cache.py), keyed
    by both files' content and the torchgen that parsed them."""
    path = os.path.abspath(path or INSTALLED_NATIVE)
    tags = os.path.join(os.path.dirname(path), "tags.yaml")
    texts = []
    for needed in (path, tags):
        try:
            with open(needed, "rb") as f:
                texts.append(f.read())
        except OSError:
            raise TableError(None, f"cannot read {needed}: no such file") from None
    name = "native/" + hashlib.sha256(path.encode()).hexdigest()[:16]
    k = cache.key(path, *texts, torch_version(), TORCHGEN_NATIVE)
    native = cache.load(name, k)
    if native is None:
        native = _parse_native(path, tags)
        cache.store(name, k, native)
    return native


def _parse_native(path: str, tags: str) -> NativeTable:
    from torchgen.gen import parse_native_yaml  # its import alone is a tenth of a second

    try:
        parsed = parse_native_yaml(path, tags, skip_native_fns_gen=True)
    except (AssertionError, RuntimeError, KeyError, ValueError, yaml.YAMLError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TableError(None, f"torchgen {torch_version()} cannot parse {path} ({first}); generate only "
                               "against the installed torch's table, and compare other versions with "
                               "`python -m codegen check --native-functions PATH`") from None
    cpu = parsed.backend_indices[DispatchKey.CPU]
    functions = {str(f.func.name): f for f in parsed.native_functions}
    kernels = {}
    for name, f in functions.items():
        m = cpu.get_kernel(f)
        if m is not None:
            kernels[name] = m.kernel
    composite = [parsed.backend_indices[k] for k in (DispatchKey.CompositeImplicitAutograd,
                                                     DispatchKey.CompositeExplicitAutograd)]
    delegates: dict[str, tuple[NativeFunction, ...]] = {}
    for f in parsed.native_functions:
        if f.structured_delegate is not None and not any(b.get_kernel(f) for b in composite):
            delegates[str(f.structured_delegate)] = delegates.get(str(f.structured_delegate), ()) + (f,)
    return NativeTable(path, functions, kernels, delegates)


def torch_include_dir() -> str:
    # Found without importing torch (that alone takes a second).
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("torch is not installed: pip install torch==2.13.0")
    return os.path.join(list(spec.submodule_search_locations)[0], "include")


# The stub's name is the last argument: DECLARE_DISPATCH(fn_type, name). fn_type may span lines.
_DECLARE_DISPATCH = re.compile(r"DECLARE_DISPATCH\(([^;()]*(?:\([^;()]*\)[^;()]*)*),\s*(\w+)\s*\)")


@functools.lru_cache(maxsize=None)
def dispatch_stubs(include_dir: str) -> dict[str, str]:
    """stub name -> the ATen header that declares it (`DECLARE_DISPATCH(fn_type, name)`)."""
    native = os.path.join(include_dir, "ATen", "native")
    stubs: dict[str, str] = {}
    for dirpath, _, files in sorted(os.walk(native)):
        for fname in sorted(files):
            if not fname.endswith(".h"):
                continue
            full = os.path.join(dirpath, fname)
            with open(full, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if "DECLARE_DISPATCH(" not in text:
                continue
            for m in _DECLARE_DISPATCH.finditer(text):
                stubs.setdefault(m.group(2), os.path.relpath(full, include_dir))
    return stubs


def torch_version() -> str:
    """The installed torch's version, read from its metadata (importing torch takes a second)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def is_installed(path: str) -> bool:
    """Whether `path` is the installed torch's own native_functions.yaml."""
    return os.path.realpath(path) == os.path.realpath(INSTALLED_NATIVE)


def version_of(path: str) -> str:
    """A label for the PyTorch version a native_functions.yaml belongs to: the installed torch's
    version, or its folder's name when that looks like a version (".../2.15.0/native_functions.yaml"),
    else the path itself."""
    if is_installed(path):
        return torch_version()
    folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return folder if re.fullmatch(r"v?\d+\.\d+(\.\d+)?\S*", folder) else path


# --- A version-independent reading of native_functions.yaml -------------------------------------
#
# torchgen only parses its own version's table (an older one has types it dropped, such as
# Dimname; a newer one trips its invariants). The upgrade report must read any version, so it uses
# this small reader: the schema grammar `name.overload(args) -> returns` and the handful of keys
# that decide how an op is dispatched have been stable across releases. Facts, not semantics:
# types and defaults stay strings.


@dataclass(frozen=True)
class Arg:
    type: str  # as written: "Tensor(a!)", "SymInt[1]", "ScalarType?"
    name: str
    default: str | None
    kwarg_only: bool

    @property
    def is_mutable(self) -> bool:
        return "!" in self.type

    def __str__(self) -> str:
        return f"{self.type} {self.name}" + ("" if self.default is None else f"={self.default}")


@dataclass(frozen=True)
class Schema:
    name: str  # overload name: "add.out"
    args: tuple[Arg, ...]
    returns: str  # as written: "Tensor(a!)", "(Tensor values, Tensor indices)", "()"

    @property
    def base(self) -> str:
        """The operator's base name as torchgen derives it ("add" for add_.Tensor, "and" for
        __iand__.Tensor): the default DispatchStub is `<base>_stub`."""
        op = self.name.split(".", 1)[0]
        m = re.fullmatch(r"__(\w+?)__", op)
        if m:
            op = m.group(1)
            return op[1:] if op.startswith("i") else op
        if op.endswith("_"):
            op = op[:-1]
        return op[: -len("_functional")] if op.endswith("_functional") else op

    @property
    def out(self) -> tuple[Arg, ...]:
        """The out= arguments: keyword-only and mutable, from the first such one on."""
        kw = [a for a in self.args if a.kwarg_only]
        first = next((i for i, a in enumerate(kw) if a.is_mutable), len(kw))
        return tuple(kw[first:])

    @property
    def is_out(self) -> bool:
        return bool(self.out)

    def __str__(self) -> str:
        parts: list[str] = []
        star = False
        for a in self.args:
            if a.kwarg_only and not star:
                parts.append("*")
                star = True
            parts.append(str(a))
        return f"{self.name}({', '.join(parts)}) -> {self.returns}"


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside brackets and quotes."""
    parts, depth, quote, start, escaped = [], 0, "", 0, False
    for i, c in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced '{c}'")
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth or quote:
        raise ValueError("unbalanced brackets or quotes")
    parts.append(text[start:])
    return parts


def parse_schema(text: str) -> Schema:
    """`add.out(Tensor self, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)`; ValueError if not."""
    m = re.match(r"\s*([A-Za-z_][\w]*(?:\.\w+)?)\s*\(", text)
    if not m:
        raise ValueError("expected 'name.overload(arguments) -> returns'")
    name, depth, end = m.group(1), 0, None
    for i in range(m.end() - 1, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                end = i
                break
    if end is None:
        raise ValueError("the argument list is not closed")
    rest = re.fullmatch(r"\s*->\s*(\S.*?)\s*", text[end + 1:])
    if not rest:
        raise ValueError("expected '-> returns' after the arguments")
    args: list[Arg] = []
    kwarg_only = False
    body = text[m.end():end]
    for piece in (_split_top(body) if body.strip() else []):
        piece = piece.strip()
        if piece == "*":
            kwarg_only = True
            continue
        decl, default = piece, None
        eq = _split_top(piece, "=")
        if len(eq) == 2:
            decl, default = eq[0].strip(), eq[1].strip()
        elif len(eq) > 2:
            raise ValueError(f"cannot read argument '{piece}'")
        am = re.fullmatch(r"(\S.*?)\s+([A-Za-z_]\w*)", decl)
        if not am:
            raise ValueError(f"cannot read argument '{piece}' (expected 'Type name[=default]')")
        args.append(Arg(re.sub(r"\s+", " ", am.group(1)), am.group(2), default, kwarg_only))
    return Schema(name, tuple(args), re.sub(r"\s+", " ", rest.group(1)))


@dataclass(frozen=True)
class OpInfo:
    """What one version of PyTorch says about one overload, as far as the FPGA table cares."""

    schema: Schema
    structured: bool
    structured_delegate: str | None  # the out= overload a functional/in-place variant routes to
    ufunc: bool  # has ufunc_inner_loop (its CPU kernel is generated: ufunc_<op>_CPU)
    cpu_kernel: str | None  # the CPU dispatch entry, e.g. "mul_out", "ufunc_add_CPU"
    precomputed: bool
    families: frozenset[str]  # its FAMILY_TAGS
    line: int  # where native_functions.yaml defines it (0 if unknown)

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def eligible(self) -> bool:
        """A structured out= overload with a CPU kernel: what the generator can register."""
        return (self.schema.is_out and self.structured and self.cpu_kernel is not None
                and not self.precomputed and self.structured_delegate is None)


@dataclass(frozen=True)
class OpTable:
    """One version's overloads by name, read by `load_ops` or taken from torchgen (NativeTable)."""

    path: str
    ops: Mapping[str, OpInfo]

    @property
    def version(self) -> str:
        return version_of(self.path)

    def get(self, name: str) -> OpInfo | None:
        return self.ops.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self.ops


def _cpu_kernel(entry: dict, schema: Schema) -> str | None:
    for keys, kernel in (entry.get("dispatch") or {}).items():
        if "CPU" in (k.strip() for k in str(keys).split(",")):
            return str(kernel)
    if entry.get("ufunc_inner_loop") and schema.is_out:
        return f"ufunc_{schema.name.split('.', 1)[0]}_CPU"
    return None


def _tags(entry: dict) -> frozenset[str]:
    tags = entry.get("tags") or ()
    return frozenset([tags] if isinstance(tags, str) else (str(t) for t in tags))


@functools.lru_cache(maxsize=None)
def load_ops(path: str) -> OpTable:
    """Read any PyTorch version's native_functions.yaml into OpInfos (no torchgen involved).
    A missing file, malformed YAML or an unreadable schema is a TableError naming file:line."""
    path = os.path.abspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise TableError(None, f"cannot read {path}: {e.strerror or e}") from None
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise TableError(Location(path, mark.line + 1 if mark else 1),
                         f"malformed YAML: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(doc, list) or not all(isinstance(e, dict) and isinstance(e.get("func"), str) for e in doc):
        raise TableError(Location(path, 1), "not a native_functions.yaml: expected a list of '- func: ...' entries")
    # The C loader keeps no line numbers; every entry starts with a `- func:` line, in order.
    lines = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith("- func:")]
    if len(lines) != len(doc):
        lines = [0] * len(doc)
    ops: dict[str, OpInfo] = {}
    for entry, line in zip(doc, lines):
        try:
            schema = parse_schema(entry["func"])
        except ValueError as e:
            raise TableError(Location(path, line or 1), f"cannot read the schema '{entry['func']}': {e}") from None
        precomputed = entry.get("precomputed")
        ops[schema.name] = OpInfo(
            schema=schema,
            structured=bool(entry.get("structured", False)),
            structured_delegate=str(entry["structured_delegate"]) if entry.get("structured_delegate") else None,
            ufunc=bool(entry.get("ufunc_inner_loop")),
            cpu_kernel=_cpu_kernel(entry, schema),
            precomputed=bool(precomputed),
            families=_tags(entry) & FAMILY_TAGS,
            line=line,
        )
    return OpTable(path, ops)
