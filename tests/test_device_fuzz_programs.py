"""Differential program fuzzing (aten_fpga/fuzz.py): 200 seeded random programs run on "fpga" and on
the CPU agree; a failing program is shrunk to its shortest failing form and printed as Python."""
import re
from collections import Counter

import torch

import aten_fpga
from aten_fpga import fuzz

PROGRAMS = 200


def test_programs_agree_with_the_cpu():
    aten_fpga.reset_stats()
    failures = fuzz.fuzz(PROGRAMS, first_seed=0)
    assert not failures, f"{len(failures)} of {PROGRAMS} programs differ; the shortest forms:\n\n" + fuzz.report(failures)
    # the programs ran FPGA kernels and CPU fallbacks both
    counts = aten_fpga.stats()
    assert sum(r["fpga"] for r in counts.values()) > 1000, counts
    assert sum(r["cpu_fallback"] for r in counts.values()) > 50, counts  # (fewer as ops gain kernels)


def test_programs_are_seeded_sized_and_mixed():
    programs = [fuzz.generate(seed) for seed in range(PROGRAMS)]
    assert fuzz.generate(7).steps == programs[7].steps  # a seed reproduces its program
    assert all(10 <= len(p.steps) <= 30 for p in programs)
    text = "\n".join(line for p in programs for line in p.steps)
    uses = Counter({
        "kernel op": len(re.findall(r"torch\.(add|sub|mul|maximum|exp|sigmoid|tanh|where|lt|floor)\(", text)),
        "fallback op": len(re.findall(r"torch\.(softmax|cumsum|roll|sort|tril|cat|logsumexp|sinc)\(|\.flip\(| @ ", text)),
        "view": len(re.findall(r"\.(transpose|narrow|select|unsqueeze|reshape|view|t|mT|diagonal)\b|\[", text)),
        "expand": text.count(".expand("),
        "in-place": len(re.findall(r"\.\w+_\(|\] = ", text)),
        "out=": text.count("out="),
        "cast": text.count(".to(torch."),
        "broadcast (row, column)": len(re.findall(r"\bv[23]\b", text)),
        ".cpu()": text.count(".cpu()"),
        ".item()": text.count(".item()"),
        "reduction": len(re.findall(r"\.(sum|mean|amax|amin|argmax|prod|var|std|all|any)\(", text)),
    })
    assert all(n >= 20 for n in uses.values()), uses


def test_a_failing_program_is_shrunk_to_the_step_that_fails():
    # A planted divergence: one step adds 1 on fpga only, amid steps that agree.
    program = fuzz.generate(3)
    planted = "v99 = v0 + (1 if v0.device.type == 'fpga' else 0)"
    steps = program.steps[:5] + [planted] + program.steps[5:]
    bad = fuzz.Program(program.seed, program.inputs, steps, program.inexact)
    why = fuzz.failure(bad)
    assert why.startswith("v99: ")
    small, small_why = fuzz.shrink(bad, why)
    assert small.steps == [planted] and small_why.startswith("v99: ")
    # the report is Python that reproduces the failure on the device
    source = fuzz.report([(small, small_why)])
    env = {}
    exec(source, env)  # noqa: S102
    assert env["dev"] == "fpga" and env["v99"].device.type == "fpga"
    torch.testing.assert_close(env["v99"].cpu(), env["v0"].cpu() + 1)
