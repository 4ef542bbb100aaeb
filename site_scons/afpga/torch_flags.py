"""Compiler and linker flags for code that includes ATen, from the installed torch.

Importing torch costs seconds, so the flags are kept in build/torch_flags.json, keyed by torch's
version and location (both read without importing it): a no-op build never imports torch, and a
different torch recomputes them."""
import importlib.metadata
import importlib.util
import json
import os
import sys
import sysconfig

CACHE = "build/host/torch_flags.json"


def _key():
    spec = importlib.util.find_spec("torch")
    if spec is None:
        raise SystemExit("scons: torch is not installed; run `pip install torch==2.13.0` first")
    return {"torch": importlib.metadata.version("torch"), "origin": spec.origin, "python": sys.executable}


def _compute():
    import torch
    from torch.utils import cpp_extension

    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    abi = int(torch.compiled_with_cxx11_abi())
    return {
        "CPPPATH": cpp_extension.include_paths() + [sysconfig.get_paths()["include"]],
        "CPPDEFINES": [("_GLIBCXX_USE_CXX11_ABI", abi), ("TORCH_EXTENSION_NAME", "_C"), "TORCH_API_INCLUDE_EXTENSION_H"],
        "LIBPATH": [lib],
        "LIBS": ["c10", "torch", "torch_cpu", "torch_python"],
        "RPATH": [lib],
        "EXT_SUFFIX": sysconfig.get_config_var("EXT_SUFFIX"),
        "VERSION": torch.__version__,
    }


def torch_flags(cache: str = CACHE):
    key = _key()
    try:
        with open(cache, encoding="utf-8") as f:
            doc = json.load(f)
        if doc["key"] == key:
            flags = doc["flags"]
            flags["CPPDEFINES"] = [tuple(d) if isinstance(d, list) else d for d in flags["CPPDEFINES"]]
            return flags
    except (FileNotFoundError, ValueError, KeyError):
        pass
    flags = _compute()
    os.makedirs(os.path.dirname(os.path.abspath(cache)), exist_ok=True)
    with open(cache + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"key": key, "flags": flags}, f, indent=1)
    os.replace(cache + ".tmp", cache)
    return flags
