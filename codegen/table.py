"""native_functions_fpga.yaml: parse (syntax, at the edge) and resolve against PyTorch's table and
the kernel library (meaning). Every mistake is a TableError naming file:line and the fix."""
from __future__ import annotations

import difflib

from . import yamlsrc
from .model import DTYPES, Category, Entry, Kernel, ResolvedEntry, Table, TableError
from .native import NativeTable

_KEYS = {"kernel", "dtypes", "stub"}


def load_table(path: str) -> Table:
    doc = yamlsrc.load(path)
    if not isinstance(doc.value, dict):
        raise TableError(doc.loc, "the table must be a mapping of ATen overloads to entries, "
                                  "e.g. 'add.out: {kernel: binary/add, dtypes: [float32]}'")
    entries = []
    for func, (loc, spec) in doc.value.items():
        if not isinstance(spec.value, dict):
            raise TableError(loc, f"'{func}' needs a mapping with 'kernel' and 'dtypes'")
        fields = {k: v for k, (_, v) in spec.value.items()}
        for key, (kloc, _) in spec.value.items():
            if key not in _KEYS:
                raise TableError(kloc, f"unknown key '{key}' in '{func}'; allowed: {', '.join(sorted(_KEYS))}")
        for key in ("kernel", "dtypes"):
            if key not in fields:
                raise TableError(loc, f"'{func}' lacks '{key}'")
        kernel = fields["kernel"]
        if not isinstance(kernel.value, str) or kernel.value.count("/") != 1:
            raise TableError(kernel.loc, f"kernel must be 'category/name' (e.g. binary/add), got {kernel.value!r}")
        dtypes = fields["dtypes"]
        if not isinstance(dtypes.value, list) or not dtypes.value:
            raise TableError(dtypes.loc, "dtypes must be a non-empty list, e.g. [float32, complex64]")
        names = []
        for d in dtypes.value:
            if d.value not in DTYPES:
                close = difflib.get_close_matches(str(d.value), DTYPES, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise TableError(d.loc, f"unknown dtype '{d.value}'{hint}; known: {', '.join(DTYPES)}")
            if d.value in names:
                raise TableError(d.loc, f"dtype '{d.value}' is listed twice")
            names.append(d.value)
        stub = fields.get("stub")
        entries.append(Entry(func, kernel.value, tuple(names), stub.value if stub else None, loc))
    return Table(path, tuple(entries))


def resolve(table: Table, native: NativeTable, library: dict[str, Category], stubs: dict[str, str]) -> tuple[ResolvedEntry, ...]:
    """Join each entry with PyTorch's op and our template; all errors name the entry's line."""
    resolved = []
    stub_owner: dict[str, Entry] = {}
    for e in table.entries:
        f = native.functions.get(e.func)
        if f is None:
            close = difflib.get_close_matches(e.func, native.functions, n=3)
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise TableError(e.loc, f"unknown ATen op '{e.func}' in {native.path}{hint}")
        if f.structured_delegate is not None:
            raise TableError(e.loc, f"'{e.func}' is a functional/in-place variant that delegates to "
                                    f"'{f.structured_delegate}'; list '{f.structured_delegate}' instead")
        cls = native.structured_class(f)
        if cls is None or f.precomputed is not None:
            raise TableError(e.loc, f"'{e.func}' is not a structured op with a CPU kernel; it needs a "
                                    "hand-written kernel in host/ps (the generator supports structured ops)")
        category = library.get(e.category)
        if category is None:
            raise TableError(e.loc, f"unknown kernel category '{e.category}'; templates exist for: "
                                    f"{', '.join(sorted(library))} (kernels/hls/<category>/)")
        op = category.ops.get(e.kernel_name)
        if op is None:
            close = difflib.get_close_matches(e.kernel_name, category.ops, n=3)
            hint = f" (closest: {', '.join(close)})" if close else ""
            raise TableError(e.loc, f"unknown kernel '{e.kernel}'{hint}: add it to kernels/hls/{e.category}/ops.yaml")
        for d in e.dtypes:
            if d not in op.dtypes:
                raise TableError(e.loc, f"kernel '{e.kernel}' is not written for {d} "
                                        f"(it supports {', '.join(op.dtypes)}); remove {d} or extend the template")
        stub = e.stub or f"{f.func.name.name.base}_stub"
        if stub not in stubs:
            raise TableError(e.loc, f"'{e.func}' has no DispatchStub '{stub}' in ATen's headers; name the "
                                    "stub its CPU kernel calls with 'stub:', or hand-write the kernel")
        if stub in stub_owner and stub_owner[stub].kernel != e.kernel:
            other = stub_owner[stub]
            raise TableError(e.loc, f"'{e.func}' calls {stub}, which '{other.func}' (line {other.loc.line}) "
                                    f"already binds to kernel {other.kernel}; one stub runs one kernel")
        stub_owner[stub] = e
        kernels = tuple(Kernel(op, DTYPES[d]) for d in e.dtypes)
        resolved.append(ResolvedEntry(
            e, op, kernels, str(f.func), cls, f"ATen/ops/{f.root_name}_native.h", stub, stubs[stub], f))
    return tuple(resolved)
