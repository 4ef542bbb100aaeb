"""The codegen's caches on disk: what it derives from a text, stored under a hash of that text, so a
warm `python -m codegen generate` (the one a build waits for) redoes only what changed.

The folder is build/codegen-cache (build/cache is SCons's CacheDir), or $AFPGA_CODEGEN_CACHE.
Every entry is keyed by its whole input (and the codegen's own sources, `FINGERPRINT`), so a stale
entry cannot be found: deleting the folder only makes the next run cold. A folder that cannot be
written leaves the codegen correct, only slower.
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import pickle
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def folder() -> str:
    return os.environ.get("AFPGA_CODEGEN_CACHE") or os.path.join(ROOT, "build", "codegen-cache")


def subfolder(*names: str) -> str | None:
    """A folder of the cache, made if needed; None if it cannot be written."""
    path = os.path.join(folder(), *names)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK) else None


def _sources_hash() -> str:
    """The codegen's own code: a cached result is as good as the code that computed it."""
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            with open(os.path.join(here, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


FINGERPRINT = _sources_hash()


def key(*parts: str | bytes) -> str:
    """A hash of `parts` and FINGERPRINT."""
    h = hashlib.sha256(FINGERPRINT.encode())
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


def _path(name: str) -> str:
    return os.path.join(folder(), name + ".pickle")


@contextlib.contextmanager
def no_gc():
    """Without the cyclic garbage collector: the codegen makes hundreds of thousands of long-lived
    objects (torchgen's parse, the kernels' interfaces) and little cyclic garbage, and the collector
    would rescan all of them at every threshold -- a quarter of a run."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load(name: str, k: str):
    """The value stored as `name` if it was stored with the key `k`, else None."""
    try:
        with open(_path(name), "rb") as f, no_gc():
            stored, value = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError, ImportError):
        return None  # none yet, or written by another version of the code
    return value if stored == k else None


def store(name: str, k: str, value) -> None:
    """Store `value` as `name` with the key `k`, replacing what was there: one entry a name, so the
    folder does not grow (atomically: concurrent builds may share it)."""
    where = subfolder(os.path.dirname(name))
    if where is None:
        return  # a read-only tree: generate stays correct, only cold
    try:
        fd, tmp = tempfile.mkstemp(dir=where, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump((k, value), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, _path(name))
    except OSError:
        pass  # a full disk: the same
