"""python bench/run.py [--quick] [--json PATH]: every benchmark, one after the other.

Each benchmark prints its table and writes its own JSON under build/bench/ and its plot under
docs/img/; this runner also writes them all together to --json (default build/bench/all.json).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import ROOT, write_json  # noqa: E402

# (module, extra arguments for --quick)
BENCHMARKS = [
    ("bench_ops", ["--quick"]),
    ("bench_overhead", []),
    ("bench_codegen", ["--repeat", "1"]),
    ("bench_scons", []),
    ("perf_model", []),
    ("fit_table", []),
    ("bench_zoo", ["--models", "gpt2", "resnet", "--steps", "1"]),
]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer sizes and ops")
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "all.json"))
    args = p.parse_args(argv)
    out_dir = os.path.join(ROOT, "build", "bench")
    combined, status = {}, 0
    for name, quick_args in BENCHMARKS:
        if not os.path.exists(os.path.join(HERE, name + ".py")):
            print(f"\n== {name}: not present, skipped")
            continue
        print(f"\n== {name}")
        path = os.path.join(out_dir, name.replace("bench_", "") + ".json")
        t0 = time.time()
        status |= importlib.import_module(name).main((quick_args if args.quick else []) + ["--json", path])
        print(f"({time.time() - t0:.1f} s)")
        with open(path, encoding="utf-8") as f:
            combined[name] = json.load(f)
    write_json(args.json, combined)
    return status


if __name__ == "__main__":
    sys.exit(main())
