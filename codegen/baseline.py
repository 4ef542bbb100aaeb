"""What build/gen was generated against, so that a torch upgrade is noticed and explained.

`generate` records, in its output folder:

    pytorch/record.json           {"generated_with": "2.14.1", "baseline": "2.13.0+cpu"}
    pytorch/<baseline>/           native_functions.yaml, tags.yaml, dispatch_stubs.json

`generated_with` is the torch the last generation ran against; `baseline` the last torch that every
table entry generated against, whose operator table and DispatchStubs are kept (the installed torch
is replaced by `pip install`, taking its files with it). When the installed torch is not the
baseline, an entry that worked with the baseline and no longer does is the upgrade's doing: the
generator skips it and names it, instead of failing; an entry broken with both is a table mistake
and still stops the build. The baseline moves to the installed torch once nothing is skipped.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .model import Location, TableError

FOLDER = "pytorch"
RECORD = os.path.join(FOLDER, "record.json")
STUBS = "dispatch_stubs.json"


@dataclass(frozen=True)
class Record:
    generated_with: str  # the torch version of the last generation
    baseline: str  # the last torch version every entry generated against

    def folder(self, out_dir: str) -> str:
        """The baseline's kept files; named after its version, so reports say "PyTorch 2.13.0"."""
        return os.path.join(out_dir, FOLDER, self.baseline)

    def native_functions(self, out_dir: str) -> str:
        return os.path.join(self.folder(out_dir), "native_functions.yaml")


def read(out_dir: str) -> Record | None:
    """The record of the last generation into `out_dir`, or None if there was none."""
    path = os.path.join(out_dir, RECORD)
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        record = Record(str(doc["generated_with"]), str(doc["baseline"]))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as e:
        raise TableError(Location(path, 1), f"unreadable build record ({e}); delete {os.path.dirname(path)} "
                                            "and regenerate (the next upgrade report then starts from here)") from None
    if not os.path.isfile(record.native_functions(out_dir)):
        raise TableError(Location(path, 1), f"the recorded baseline PyTorch {record.baseline} lacks its copy "
                                            f"{record.native_functions(out_dir)}; delete {os.path.dirname(path)} "
                                            "and regenerate")
    return record


def stubs(out_dir: str, record: Record) -> dict[str, str]:
    """The DispatchStubs the baseline's headers declared (stub -> header)."""
    with open(os.path.join(record.folder(out_dir), STUBS), encoding="utf-8") as f:
        return json.load(f)


def files(out_dir: str, version: str, native_dir: str, stub_headers: dict[str, str],
          complete: bool) -> tuple[Record, dict[str, str]]:
    """The record of a generation against torch `version` (its tables in `native_dir`), as {path
    relative to out_dir: text}. `complete`: every entry generated, so `version` becomes the baseline
    and its files are kept (`stale` then names the old baseline's folder)."""
    old = read(out_dir)
    record = Record(version, version if complete or old is None else old.baseline)
    out = {RECORD: json.dumps({"generated_with": record.generated_with, "baseline": record.baseline}, indent=1) + "\n"}
    if record.baseline == version:
        keep = os.path.join(FOLDER, version)
        for name in ("native_functions.yaml", "tags.yaml"):
            with open(os.path.join(native_dir, name), encoding="utf-8") as f:
                out[os.path.join(keep, name)] = f.read()
        out[os.path.join(keep, STUBS)] = json.dumps(stub_headers, indent=0, sort_keys=True) + "\n"
    return record, out


def stale(out_dir: str, record: Record) -> list[str]:
    """Kept folders of earlier baselines."""
    root = os.path.join(out_dir, FOLDER)
    return [os.path.join(root, n) for n in sorted(os.listdir(root))
            if n != record.baseline and os.path.isdir(os.path.join(root, n))]
