"""The AXI interfaces of the image's kernels, as the codegen read them from the sources it rendered
(build/gen/interface_opt<N>.json, written by codegen/interface.py, the one reader of kernel
signatures). The link config (which CU port goes to which bank) and the emulated xclbin's metadata
are both derived from this, so they describe exactly the kernels v++ (or g++) compiles."""
from __future__ import annotations

import json

from codegen.interface import Arg, TopFunction  # noqa: F401  (the build's view of a kernel)


def load(path: str, names) -> list[TopFunction]:
    """The interfaces of kernels `names` from the codegen's interface file `path`."""
    with open(path, encoding="utf-8") as f:
        kernels = json.load(f)["kernels"]
    return [TopFunction.from_json(kernels[n]) for n in names]
