"""PyTorch's side: its native_functions.yaml (parsed with torchgen, the version matching the installed
headers) and the DispatchStubs its headers declare."""
from __future__ import annotations

import functools
import importlib.util
import os
import re
from dataclasses import dataclass

import torchgen
from torchgen.gen import parse_native_yaml
from torchgen.model import DispatchKey, NativeFunction

TORCHGEN_NATIVE = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native")


@dataclass(frozen=True)
class NativeTable:
    """One version of PyTorch's operator table, indexed by overload name ("add.out")."""

    path: str
    functions: dict[str, NativeFunction]
    cpu_kernels: dict[str, str]  # overload -> CPU kernel name ("ufunc_add_CPU", "mul_out")

    def structured_class(self, f: NativeFunction) -> str | None:
        kernel = self.cpu_kernels.get(str(f.func.name))
        return f"structured_{kernel}" if f.structured and kernel else None


@functools.lru_cache(maxsize=None)
def load_native(path: str | None = None) -> NativeTable:
    """Parse a native_functions.yaml (default: the installed torch's), with the tags.yaml beside it."""
    path = os.path.abspath(path or os.path.join(TORCHGEN_NATIVE, "native_functions.yaml"))
    tags = os.path.join(os.path.dirname(path), "tags.yaml")
    parsed = parse_native_yaml(path, tags, skip_native_fns_gen=True)
    cpu = parsed.backend_indices[DispatchKey.CPU]
    functions = {str(f.func.name): f for f in parsed.native_functions}
    kernels = {}
    for name, f in functions.items():
        m = cpu.get_kernel(f)
        if m is not None:
            kernels[name] = m.kernel
    return NativeTable(path, functions, kernels)


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
