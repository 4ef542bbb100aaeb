"""native_functions_fpga.yaml: parse (syntax, at the edge) and resolve against PyTorch's table and
the kernel library (meaning). Every mistake is a TableError naming file:line and the fix.

The rules about an entry's ATen op are written once, over `OpTable` facts, so that `generate`
(torchgen's parse of the installed torch) and `check` (any version's file) say the same thing.
"""
from __future__ import annotations

import difflib
import re

from . import yamlsrc
from .model import DTYPES, Category, Entry, Kernel, KernelOp, ResolvedEntry, Table, TableError
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torchgen's types, named in annotations only: the build's plan must not import torch
    from .native import NativeTable, OpInfo, OpTable

KEYS = ("kernel", "dtypes", "stub", "host", "kernels")  # `stub`, `host` and `kernels` are optional
REQUIRED = ("kernel", "dtypes")
EXAMPLE = "add.out: {kernel: binary/add, dtypes: [float32]}"

_OVERLOAD = re.compile(r"[A-Za-z_]\w*(\.\w+)?")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def _closest(word: str, choices, n: int = 3) -> list[str]:
    return difflib.get_close_matches(word, list(choices), n=n, cutoff=0.6)


def _describe(value) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


# --- Syntax: the file itself -------------------------------------------------------------------

def _func_name(func: str, loc) -> str:
    if _OVERLOAD.fullmatch(func):
        return func
    if "(" in func and _OVERLOAD.fullmatch(func.split("(", 1)[0].strip()):
        name = func.split("(", 1)[0].strip()
        raise TableError(loc, f"'{func}' is a schema; the key is the overload name only: '{name}'")
    raise TableError(loc, f"'{func}' is not an ATen overload name; write 'name.overload' as in "
                          "native_functions.yaml, e.g. 'add.out'")


def _entry(func: str, loc, spec: yamlsrc.Node) -> Entry:
    if not isinstance(spec.value, dict):
        raise TableError(loc, f"'{func}' must map to a mapping with 'kernel' and 'dtypes', got "
                              f"{_describe(spec.value)}; e.g. {EXAMPLE}")
    for key, (kloc, _) in spec.value.items():
        if key not in KEYS:
            close = _closest(key, KEYS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise TableError(kloc, f"unknown key '{key}' in '{func}'{hint}; allowed keys: {', '.join(KEYS)}")
    fields = {k: v for k, (_, v) in spec.value.items()}
    for key in REQUIRED:
        if key not in fields:
            raise TableError(loc, f"'{func}' lacks '{key}'; every entry needs {' and '.join(REQUIRED)}, "
                                  f"e.g. {EXAMPLE}")

    kernel = fields["kernel"]
    parts = kernel.value.split("/") if isinstance(kernel.value, str) else []
    if len(parts) != 2 or not all(_IDENT.fullmatch(p) for p in parts):
        raise TableError(kernel.loc, f"kernel of '{func}' must be 'category/name', a template under "
                                     f"kernels/hls/<category>/ (e.g. binary/add), got {_describe(kernel.value)}")

    dtypes = fields["dtypes"]
    if isinstance(dtypes.value, str):
        raise TableError(dtypes.loc, f"dtypes of '{func}' must be a list: write [{dtypes.value}]")
    if not isinstance(dtypes.value, list) or not dtypes.value:
        raise TableError(dtypes.loc, f"dtypes of '{func}' must be a non-empty list, e.g. [float32, complex64], "
                                     f"got {_describe(dtypes.value)}")
    names: list[str] = []
    for d in dtypes.value:
        if not isinstance(d.value, str):
            raise TableError(d.loc, f"dtypes of '{func}' must be dtype names, got {_describe(d.value)}; "
                                    f"known: {', '.join(DTYPES)}")
        if d.value not in DTYPES:
            close = _closest(d.value, DTYPES, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise TableError(d.loc, f"unknown dtype '{d.value}' in '{func}'{hint}; known: {', '.join(DTYPES)}")
        if d.value in names:
            raise TableError(d.loc, f"dtype '{d.value}' is listed twice in '{func}'; list it once")
        names.append(d.value)

    stub = fields.get("stub")
    host_node = fields.get("host")
    host = host_node.value if host_node is not None else None
    if host_node is not None and (not isinstance(host, str) or not _IDENT.fullmatch(host)):
        raise TableError(host_node.loc, f"host of '{func}' must be the C++ name of a function in namespace "
                                        f"aten_fpga (host/ps) that runs the op, got {_describe(host)}")
    if host is not None and stub is not None and stub.value is not None:
        raise TableError(stub.loc, f"'{func}' names a host function, which runs its kernel itself (ATen's stubs "
                                   "are not callable from outside libtorch): remove 'stub:'")
    more = _more_kernels(func, fields.get("kernels"), host, kernel.value)
    if stub is not None and isinstance(stub.value, dict):
        return Entry(func, kernel.value, tuple(names), None, loc, stubs=_stub_map(func, kernel.value, stub))
    if stub is not None and stub.value is not None and (
            not isinstance(stub.value, str) or not _IDENT.fullmatch(stub.value)):
        raise TableError(stub.loc, f"stub of '{func}' must be the C++ name of a DispatchStub (e.g. add_stub), "
                                   f"or a mapping of stubs to kernels, got {_describe(stub.value)}; omit it to "
                                   "use '<op>_stub'")
    return Entry(func, kernel.value, tuple(names), stub.value if stub is not None else None, loc, host=host,
                 more_kernels=more)


def _more_kernels(func: str, node: yamlsrc.Node | None, host: str | None, kernel: str) -> tuple[str, ...]:
    """`kernels: [copy/copy_float16, ...]`: further kernels a host function runs besides `kernel`
    (a family named per operand dtype, as the casts of copy_), or that the reduce driver picks
    instead of it (the norm's orders), built for the entry's dtypes."""
    if node is None:
        return ()
    if host is None and kernel.split("/", 1)[0] != "reduce":
        raise TableError(node.loc, f"'kernels' of '{func}' lists further kernels a host function runs; name the "
                                   "function with 'host:' or remove 'kernels'")
    if not isinstance(node.value, list) or not all(
            isinstance(k.value, str) and len(k.value.split("/")) == 2 and all(_IDENT.fullmatch(p) for p in
                                                                            k.value.split("/"))
            for k in node.value):
        raise TableError(node.loc, f"'kernels' of '{func}' must be a list of kernels 'category/name', "
                                   f"got {_describe(node.value)}")
    return tuple(k.value for k in node.value)


def _stub_map(func: str, kernel: str, stub: yamlsrc.Node) -> tuple[tuple[str, str], ...]:
    """`stub: {div_true_stub: binary/div, div_floor_stub: binary/div_floor}`: an op whose CPU impl
    picks one of several stubs binds each to its kernel; `kernel` must be one of them."""
    pairs = []
    for name, (sloc, k) in stub.value.items():
        if not _IDENT.fullmatch(name):
            raise TableError(sloc, f"stub of '{func}' must map C++ DispatchStub names to kernels, got {name!r}")
        parts = k.value.split("/") if isinstance(k.value, str) else []
        if len(parts) != 2 or not all(_IDENT.fullmatch(p) for p in parts):
            raise TableError(k.loc, f"stub {name} of '{func}' must map to a kernel 'category/name', got "
                                    f"{_describe(k.value)}")
        pairs.append((name, k.value))
    if kernel not in (k for _, k in pairs):
        raise TableError(stub.loc, f"kernel {kernel} of '{func}' is bound to none of its stubs; map one of "
                                   f"{', '.join(n for n, _ in pairs) or 'them'} to it")
    return tuple(pairs)


def load_table(path: str) -> Table:
    """Parse the table; the first mistake raises a TableError (file:line: what and how to fix)."""
    doc = yamlsrc.load(path)
    if isinstance(doc.value, list):
        raise TableError(doc.loc, "the table is a mapping, not a list: write one "
                                  f"'overload: {{kernel: ..., dtypes: [...]}}' per line, e.g. {EXAMPLE}")
    if not isinstance(doc.value, dict):
        raise TableError(doc.loc, f"the table must be a mapping of ATen overloads to entries, got "
                                  f"{_describe(doc.value)}; e.g. {EXAMPLE}")
    entries = tuple(_entry(_func_name(func, loc), loc, spec) for func, (loc, spec) in doc.value.items())
    return Table(path, entries)


# --- Meaning: the entry against one PyTorch version and the kernel library -----------------------

def _where(ops: OpTable) -> str:
    v = ops.version
    return f"in {v}" if v == ops.path else f"in PyTorch {v}"


def out_overloads(ops: OpTable, base: str) -> list[str]:
    """The out= overloads of an operator, those the generator can register first."""
    outs = [i for i in ops.ops.values() if i.schema.base == base and i.schema.is_out]
    return [i.name for i in sorted(outs, key=lambda i: (not i.eligible, i.name))]


def op_error(e: Entry, ops: OpTable) -> TableError | None:
    """Whether the entry names an overload the generator can register, in that version."""
    info = ops.get(e.func)
    if info is None:
        base = e.func.split(".", 1)[0]
        close = [n for n in (f"{e.func}.out",) if n in ops] + _closest(e.func, ops.ops)
        close += [n for n in out_overloads(ops, base) if n not in close]
        hint = f"; closest: {', '.join(dict.fromkeys(close[:4]))}" if close else ""
        return TableError(e.loc, f"unknown ATen op '{e.func}' {_where(ops)}{hint}")
    if e.host is not None:
        return None  # hand-written in host/ps: any overload, structured or not
    if info.structured_delegate is not None:
        return TableError(e.loc, f"'{e.func}' is a functional/in-place variant that delegates to "
                                 f"'{info.structured_delegate}'; list '{info.structured_delegate}' instead "
                                 "(the variants route to it by themselves)")
    if not info.structured and info.cpu_kernel is not None and (e.stub or e.stubs):
        return None  # registered by forwarding to at::native::<cpu kernel>, whose stub runs our kernel
    if not info.schema.is_out:
        outs = out_overloads(ops, info.schema.base)
        usable = [o for o in outs if ops.ops[o].eligible]
        if usable:
            return TableError(e.loc, f"'{e.func}' is a functional/in-place overload, but the table lists out= "
                                     f"overloads: use {' or '.join(repr(o) for o in usable[:3])} instead")
        if outs:
            return TableError(e.loc, f"'{e.func}' is a functional/in-place overload, and its out= overload "
                                     f"{' / '.join(repr(o) for o in outs[:3])} is not a structured op "
                                     f"{_where(ops)}: name the DispatchStub its CPU kernel calls with 'stub:' "
                                     "to register it by forwarding, hand-write its kernel in host/ps (a function "
                                     "in namespace aten_fpga, named with 'host:'), or remove the entry")
        return TableError(e.loc, f"'{e.func}' is not an out= overload and has none: the generator registers "
                                 "only the out= overloads of structured ops; hand-write its kernel in host/ps"
                                 " (a function in namespace aten_fpga, named with 'host:') or remove the entry")
    if not info.structured:
        how = (f"name the DispatchStub its CPU kernel {info.cpu_kernel} calls with 'stub:' (the generator then "
               f"forwards to at::native::{info.cpu_kernel}), or it needs a hand-written kernel in host/ps (a "
               "function in namespace aten_fpga, named with 'host:')"
               if info.cpu_kernel else "and has no CPU kernel to forward to: it needs a hand-written kernel in "
               "host/ps (a function in namespace aten_fpga, named with 'host:'), or remove the entry")
        return TableError(e.loc, f"'{e.func}' is not a structured op {_where(ops)}{':' if info.cpu_kernel else ''} {how}")
    if info.cpu_kernel is None:
        return TableError(e.loc, f"'{e.func}' has no CPU kernel {_where(ops)} (the generator subclasses its "
                                 "structured CPU impl); remove the entry")
    if info.precomputed:
        return TableError(e.loc, f"'{e.func}' uses precomputed meta arguments, which the generator does not "
                                 "support; remove the entry or hand-write its kernel in host/ps (a function in "
                                 "namespace aten_fpga, named with 'host:')")
    return None


def kernel_of(e: Entry, library: dict[str, Category], kernel: str | None = None) -> tuple[KernelOp | None, list[TableError]]:
    """One of the entry's kernel templates (default: its `kernel`) and any mistakes in naming it
    or its dtypes."""
    kernel = kernel or e.kernel
    cat_name, op_name = kernel.split("/", 1)
    category = library.get(cat_name)
    if category is None:
        close = _closest(cat_name, library, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return None, [TableError(e.loc, f"unknown kernel category '{cat_name}' in '{e.func}'{hint}; templates "
                                        f"exist for: {', '.join(sorted(library))} (kernels/hls/<category>/)")]
    op = category.ops.get(op_name)
    if op is None:
        close = _closest(op_name, category.ops)
        hint = f" (closest: {', '.join(f'{cat_name}/{c}' for c in close)})" if close else ""
        return None, [TableError(e.loc, f"unknown kernel '{kernel}' in '{e.func}'{hint}: add "
                                        f"'{op_name}' to kernels/hls/{cat_name}/ops.yaml")]
    # A further kernel of a host function (`kernels:`) may be written for some of the entry's
    # dtypes: the host runs it where the image has it (the depthwise members, float32 only).
    # It must cover one of them at least, or it would never be built.
    further = kernel != e.kernel and kernel in e.more_kernels
    bad = [d for d in e.dtypes if d not in op.dtypes]
    if further and len(bad) < len(e.dtypes):
        bad = []
    if bad:
        return op, [TableError(e.loc, f"unsupported dtype {', '.join(bad)} in '{e.func}': kernel '{kernel}' "
                                      f"is written for {', '.join(op.dtypes)}; remove {', '.join(bad)} or "
                                      f"add it to the op's dtypes in kernels/hls/{cat_name}/ops.yaml")]
    return op, []


def entry_kernels(e: Entry, library: dict[str, Category]) -> tuple[Kernel, ...]:
    """Every kernel (op x dtype) the entry runs, from the kernel library alone (no PyTorch table):
    what `resolve` attaches and what the build plans, so the two cannot disagree."""
    ops = []
    for name in e.kernel_names:
        op, errors = kernel_of(e, library, name)
        if errors:
            raise errors[0]
        ops.append(op)
    return tuple(Kernel(op, DTYPES[d]) for op in ops for d in e.dtypes if d in op.dtypes)


def bindings_of(e: Entry, info: OpInfo) -> tuple[tuple[str, str], ...]:
    """(stub, kernel) pairs: the entry's stub mapping, or its one stub and kernel."""
    return e.stubs or ((stub_of(e, info), e.kernel),)


def stub_of(e: Entry, info: OpInfo) -> str:
    return e.stub or f"{info.schema.base}_stub"


def stub_error(e: Entry, stub: str, kernel: str, stubs: dict[str, str],
               owner: dict[str, tuple[Entry, str]]) -> TableError | None:
    """Whether a DispatchStub of the entry exists and runs only this kernel. Updates `owner`."""
    if stub not in stubs:
        bases = {s[: -len("_stub")] if s.endswith("_stub") else s: s for s in stubs}
        close = [bases[b] for b in difflib.get_close_matches(stub.removesuffix("_stub"), list(bases), n=3, cutoff=0.8)]
        hint = f" (closest: {', '.join(close)})" if close else ""
        how = "fix 'stub:'" if e.stub or e.stubs else "name the stub its CPU kernel calls with 'stub:'"
        return TableError(e.loc, f"'{e.func}' has no DispatchStub '{stub}' in ATen's headers{hint}; {how}, "
                                 "or hand-write the kernel")
    other, other_kernel = owner.get(stub, (None, kernel))
    if other is not None and other_kernel != kernel:
        return TableError(e.loc, f"'{e.func}' calls {stub}, which '{other.func}' (line {other.loc.line}) "
                                 f"already binds to kernel {other_kernel}; one stub runs one kernel, so use "
                                 f"kernel {other_kernel} here too or drop one entry")
    owner.setdefault(stub, (e, kernel))
    return None


def entry_errors(e: Entry, ops: OpTable, library: dict[str, Category], stubs: dict[str, str] | None,
                 owner: dict[str, Entry]) -> list[TableError]:
    """Every mistake of one entry against one PyTorch version; stubs are checked when known
    (only the installed torch's headers declare them)."""
    errors = [err for err in (op_error(e, ops),) if err is not None]
    for kernel in e.kernel_names:
        errors += kernel_of(e, library, kernel)[1]
    if not errors and stubs is not None and e.host is None:
        for stub, kernel in bindings_of(e, ops.ops[e.func]):
            errors += [err for err in (stub_error(e, stub, kernel, stubs, owner),) if err is not None]
    return errors


def validate(table: Table, ops: OpTable, library: dict[str, Category],
             stubs: dict[str, str] | None) -> dict[str, tuple[TableError, ...]]:
    """{overload: its mistakes} for every entry (empty tuple when it is fine)."""
    owner: dict[str, tuple[Entry, str]] = {}
    return {e.func: tuple(entry_errors(e, ops, library, stubs, owner)) for e in table.entries}


def resolve(table: Table, native: NativeTable, library: dict[str, Category],
            stubs: dict[str, str]) -> tuple[ResolvedEntry, ...]:
    """Join each entry with PyTorch's op and our template; the first mistake raises."""
    resolved = []
    owner: dict[str, tuple[Entry, str]] = {}
    ops = native.op_table
    listed = {e.func for e in table.entries}  # a functional overload may be an entry itself (host:)
    for e in table.entries:
        errors = entry_errors(e, ops, library, stubs, owner)
        if errors:
            raise errors[0]
        f = native.functions[e.func]
        info = ops.ops[e.func]
        op, _ = kernel_of(e, library)
        kernels = entry_kernels(e, library)
        if e.host:  # the host function runs the kernel itself: no stub to bind
            bindings, stub = (), None
        else:
            bindings = tuple((stub, stubs[stub], kernel_of(e, library, k)[0]) for stub, k in bindings_of(e, info))
            stub = next((b[0] for b in bindings if b[2] is op), bindings[0][0])
        resolved.append(ResolvedEntry(
            e, op, kernels, str(f.func), native.structured_class(f), f"ATen/ops/{f.root_name}_native.h",
            stub, stubs[stub] if stub else None, f, bindings, None if info.structured else info.cpu_kernel,
            tuple(v for v in native.delegates.get(e.func, ()) if str(v.func.name) not in listed)
            if info.structured and not e.host else ()))
    return tuple(resolved)
