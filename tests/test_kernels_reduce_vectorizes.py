"""The reduce kernels' lane loops over float32 (kernels/hls/reduce: the XCL_OPT 4 fold's `add_into` of a
word's 16 lanes, the drain's `merge_into` of two partials' lanes) are code g++ vectorizes. The emulated
reductions are memory bound only if they do: argmax's compare chain and whole-struct store once kept
its fold scalar at four times the CPU's time. Each loop is compiled on its own line with the emulated
image's flags (site_scons/afpga/emu.py), and each must vectorize (the fold's step is `fold_lane`, on a
Lane and its Tag).

A lane loop alone is not enough: in the kernels it is the inner loop of the fold's loop over words,
and g++ unrolls it into that loop first, so its 16 lanes vectorize only as straight-line code -- with
no branch in it. The rows fold as the kernel writes it (`fold_lane` over a word into part[w %
PARTIALS]) is compiled in a file of its own and must vectorize too: amax's NaN test as a ?: was a
branch there, which kept amax along dim 0 at 1.6x the CPU's time while its lane loop alone vectorized.

The column fold is checked in the generated XCL_OPT 4 kernel itself, to the instruction: its slots
are an array the fold is handed, which g++ must assume may alias a float input, and it then
vectorized the slot's stores but kept amax's compares scalar, one per lane (amax along dim 0 at 3x
the CPU's time). Read as bytes out of the raw 64-bit words the card's members share, the slot's lanes
were selected in integer registers and compared one at a time too: C simulation folds in typed tiles
of the member's own (reduce/_kernel.j2 Slot). Its code must hold no scalar float compare and some
packed arithmetic."""
from __future__ import annotations

import re
import subprocess

import pytest

from codegen import abi
from codegen import library as kernel_library
from codegen.gen_hls import template_env
from codegen.generate import HLS_ROOT, ROOT
from codegen.emu_flags import emu_cxxflags
from codegen.model import DTYPES, Kernel
from codegen.plan import ABI_HEADER

from vectorizes import vectorized as vectorized_in
from vectorizes import vectorized_alone

OPS = {  # name: (functor, output type)
    "sum": ("Sum", "float"),
    "amax": ("Max", "float"),
    "amin": ("Min", "float"),
    "argmax": ("ArgMax", "int64_t"),
    "argmin": ("ArgMin", "int64_t"),
    "norm1": ("Norm1", "float"),
    "norm2": ("Norm2", "float"),
    "norm_max": ("NormMax", "float"),
}


def loops(name: str, functor: str, out: str) -> list[tuple[str, str]]:
    op = f"afpga::reduce::{functor}<float, {out}>"
    lane, tag = (f"afpga::reduce::{trait}<{op} >::type" for trait in ("LaneOf", "TagOf"))
    make = f"const {op} op{'(2.0)' if functor.startswith('Norm') else ''};"
    return [
        (f"{name}.add", f"void add_{name}({lane}* a, {tag}* t, const float* x, uint64_t at) {{ {make} "
                        f"for (int l = 0; l < 16; ++l) afpga::reduce::fold_lane(op, a[l], t[l], x[l], x[0], at + l); }}"),
        (f"{name}.merge", f"void merge_{name}({op}::Acc* a, const {op}::Acc* b) {{ {make} "
                          f"for (int l = 0; l < 16; ++l) afpga::reduce::merge_into(op, a[l], b[l]); }}"),
    ]


def folds(name: str, functor: str, out: str) -> list[tuple[str, str]]:
    """The folds' loops, their accumulators local arrays as in the kernels (so g++ knows the input
    does not alias them), filled and used by functions defined elsewhere (so the file holds no other
    code g++ could have vectorized)."""
    op = f"afpga::reduce::{functor}<float, {out}>"
    lane, tag = (f"afpga::reduce::{trait}<{op} >::type" for trait in ("LaneOf", "TagOf"))
    make = f"const {op} op{'(2.0)' if functor.startswith('Norm') else ''};"
    word = "const hls::vector<float, 16>"
    extern = "void source(void*, void*); void sink(const void*, const void*);"
    return [
        (f"{name}.rows", f"{extern} void rows_{name}({word}* in, uint64_t n, uint64_t at) {{ {make} "
                         f"{lane} part[16][16]; {tag} tag[16][16]; source(part, tag); "
                         f"for (uint64_t w = 0; w < n; ++w) {{ {word}& x = in[w]; "
                         f"{lane}* slot = part[w % 16]; {tag}* slot_tag = tag[w % 16]; for (int l = 0; l < 16; ++l) "
                         f"afpga::reduce::fold_lane(op, slot[l], slot_tag[l], x[l], x[0], at + w * 16 + l); }} "
                         f"sink(part, tag); }}"),
    ]


def _vectorized_by_name(folder, make, compile_and_check) -> dict[str, bool]:
    """{name: whether g++ vectorized it} for the functions `make` writes for every op."""
    named = [item for name, (functor, out) in OPS.items() for item in make(name, functor, out)]
    done = compile_and_check(folder, "aten_fpga_reduce.h", [body for _, body in named])
    return {name: ok for (name, _), ok in zip(named, done)}


@pytest.fixture(scope="module")
def vectorized(tmp_path_factory) -> dict[str, bool]:
    """Each op's lane loops (compiled together) and its folds as the kernels write them (each in a
    file of its own)."""
    return {**_vectorized_by_name(tmp_path_factory.mktemp("reduce_lanes"), loops, vectorized_in),
            **_vectorized_by_name(tmp_path_factory.mktemp("reduce_folds"), folds, vectorized_alone)}


@pytest.mark.parametrize("loop", [f"{name}.{step}" for name in OPS for step in ("add", "merge", "rows")])
def test_reduce_loop_vectorizes(vectorized, loop):
    assert vectorized[loop], f"g++ left {loop} scalar (a branch in its lanes, or a whole-struct store?)"


def fold_asm(tmp_path, name: str, function: str) -> str:
    """The assembly of `function` (fold_columns: the column fold; fold: the rows fold) of the generated
    XCL_OPT 4 float32 kernel of reduce op `name`, compiled with the emulated image's flags for AVX2
    (x86-64-v3) whatever the host: the checks read %ymm registers, and AVX2 has 16 of them where an
    AVX-512 build (-march=native there) would use %zmm and 32."""
    op = kernel_library.load_library(HLS_ROOT)["reduce"].ops[name]
    kernel = Kernel(op, DTYPES["float32"])
    (tmp_path / ABI_HEADER).write_text(abi.header())
    src = tmp_path / "kernel.cpp"
    src.write_text(template_env(HLS_ROOT).get_template("reduce/opt4.cpp.j2").render(
        kernel=kernel, op=op, dtype=kernel.dtype, level=4))
    asm = src.with_suffix(".s")
    cc = subprocess.run(["g++", *emu_cxxflags("x86-64-v3"), "-fno-ipa-icf", f"-I{ROOT}/kernels/hls/emu/include",
                         f"-I{ROOT}/kernels/hls/include", f"-I{tmp_path}", "-S", str(src), "-o", str(asm)],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    text = asm.read_text()
    start = re.search(rf"^_ZN\d+{kernel.name}_opt4{len(function)}{function}E\S*:$", text, re.M)
    assert start, f"no {function} in {kernel.name}'s code"
    return text[start.end():text.index(".cfi_endproc", start.end())]


@pytest.mark.parametrize("name", ["sum", "amax", "amin", "norm2", "norm_max"])
def test_column_fold_is_vector_code(tmp_path, name):
    code = fold_asm(tmp_path, name, "fold_columns")
    scalar = re.findall(r"\bv?u?comis[sd]\b", code)
    assert not scalar, f"{name}'s column fold compares {len(scalar)} lanes one at a time"
    assert re.search(r"\bv(add|max|min|blendv|cmp\w*)p[sd]\b|\bvpblendvb\b", code), f"{name}'s column fold is scalar"


@pytest.mark.parametrize("name", ["sum", "norm1", "norm2"])
def test_rows_fold_keeps_float32_partials_in_registers(tmp_path, name):
    """In C simulation the rows fold takes whole groups of words with each of its 8 x 16 float32
    partials at a constant index (fold_groups), so that g++ keeps the partials of the float sums in
    the 16 AVX2 registers: loaded and stored every word (part[w % FOLD_PARTIALS]), they cost a fifth
    of the DRAM bandwidth. The group loop (the block that reads the most input) must read a whole
    group, 2 x 8 half-words, and store at most a few partials spilled to the stack."""
    code = fold_asm(tmp_path, name, "fold")
    # Basic blocks: from a label to the first jump.
    blocks = [re.split(r"^\s+j\w+\s", b, maxsplit=1, flags=re.M)[0] for b in re.split(r"^\.L\d+:$", code, flags=re.M)]
    reads_input = r"-?\w*\(%r(?!sp)[^)]*\),\s*%ymm"  # a memory source off the stack: the input
    loop = max(blocks, key=lambda b: len(re.findall(reads_input, b)))
    reads = len(re.findall(reads_input, loop))
    spills = len(re.findall(r"\bvmov\w+\s+%ymm\d+,\s*-?\w*\(%rsp\)", loop))
    assert reads >= 2 * abi.REDUCE_LANE_PARTIALS, f"{name}: the group loop reads {reads} half-words"
    assert spills <= 4, f"{name}'s group loop stores {spills} partials to the stack"
