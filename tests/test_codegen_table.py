"""Validation of native_functions_fpga.yaml: every mistake is a TableError at file:line that says
what is wrong and how to fix it. One test per mistake, on small tables written to tmp_path."""
from __future__ import annotations

import os
import textwrap

import pytest

from codegen import library as kernel_library
from codegen.generate import HLS_ROOT, ROOT
from codegen.model import TableError
from codegen.native import (INSTALLED_NATIVE, dispatch_stubs, load_native, load_ops, parse_schema,
                            torch_include_dir)
from codegen.table import load_table, resolve, validate

DATA = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data",
                                     "native_functions"))


def write(tmp_path, text: str, name: str = "table.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return str(path)


def load_error(tmp_path, text: str) -> tuple[str, TableError]:
    path = write(tmp_path, text)
    with pytest.raises(TableError) as info:
        load_table(path)
    return path, info.value


def assert_error(err: TableError, path: str, line: int, *words: str) -> None:
    text = str(err)
    assert text.startswith(f"{path}:{line}: "), text
    assert err.loc is not None and err.loc.line == line
    for w in words:
        assert w in text, f"{w!r} not in {text!r}"


@pytest.fixture(scope="module")
def library():
    return kernel_library.load_library(HLS_ROOT)


@pytest.fixture(scope="module")
def native():
    return load_native()


@pytest.fixture(scope="module")
def stubs():
    return dispatch_stubs(torch_include_dir())


def resolve_error(tmp_path, text: str, native, library, stubs) -> tuple[str, TableError]:
    path = write(tmp_path, text)
    table = load_table(path)
    with pytest.raises(TableError) as info:
        resolve(table, native, library, stubs)
    return path, info.value


# --- The real table ------------------------------------------------------------------------------

def test_project_table_resolves(native, library, stubs):
    table = load_table(os.path.join(ROOT, "native_functions_fpga.yaml"))
    entries = resolve(table, native, library, stubs)
    by_func = {r.entry.func: r for r in entries}
    assert by_func["add.out"].stub == "add_stub"
    assert by_func["add.out"].structured_class == "structured_ufunc_add_CPU"
    assert by_func["mul.out"].structured_class == "structured_mul_out"
    assert all(r.entry.loc.line > 1 for r in entries)
    # A structured entry serves the functional and in-place overloads that delegate to it; those
    # with a composite kernel of their own (all.dims) keep it.
    assert sorted(str(f.func.name) for f in by_func["add.out"].variants) == ["add.Tensor", "add_.Tensor"]
    assert [str(f.func.name) for f in by_func["all.dims_out"].variants] == []
    # mse_loss is an entry of its own (host:), so mse_loss.out does not register it again.
    assert [str(f.func.name) for f in by_func["mse_loss.out"].variants] == []


def test_structured_entry_registers_its_functional_and_in_place_forms(tmp_path, native, library, stubs):
    from codegen.gen_fpga_type import generate_fpga_type

    path = write(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
    """)
    unit = generate_fpga_type(resolve(load_table(path), native, library, stubs))["FPGAType_0.cpp"]
    for func, ident, form in [("add.out", "add_out", "Out"), ("add.Tensor", "add_Tensor", "Functional"),
                              ("add_.Tensor", "add__Tensor", "Inplace")]:
        assert f'm.impl("{func}", TORCH_FN(aten_fpga::gen::{ident}));' in unit
        assert f"StructuredOp<at::native::structured_ufunc_add_CPU, aten_fpga::Form::{form}, 1>" in unit
    # A kernel the image lacks: every form falls back as add.out, counted there; each form checks
    # for it once the meta has built the iterator, before ATen's impl.
    assert unit.count('op_stats("add.out")') == 3 and unit.count("run_or_fallback<at::_ops::add_out>") == 3
    assert unit.count("op.meta(self, other, alpha);\n    aten_fpga::require_kernel(op, add_out_kernel);") == 3


def test_valid_table_keeps_lines_and_optional_stub(tmp_path):
    path = write(tmp_path, """
        # comment
        add.out:
          kernel: binary/add
          dtypes: [float32, float64]
        mul.out: {kernel: binary/mul, dtypes: [float32], stub: mul_stub}
        sub.out: {kernel: binary/add, dtypes: [float32], stub: null}
    """)
    table = load_table(path)
    assert [(e.func, e.loc.line, e.dtypes, e.stub) for e in table.entries] == [
        ("add.out", 2, ("float32", "float64"), None),
        ("mul.out", 5, ("float32",), "mul_stub"),
        ("sub.out", 6, ("float32",), None),
    ]


def test_empty_table_is_valid(tmp_path):
    assert load_table(write(tmp_path, "# nothing yet\n")).entries == ()


# --- Syntax (load_table) -------------------------------------------------------------------------

def test_missing_file(tmp_path):
    with pytest.raises(TableError) as info:
        load_table(str(tmp_path / "nope.yaml"))
    assert "cannot read" in str(info.value) and "nope.yaml" in str(info.value)


def test_malformed_yaml(tmp_path):
    path, err = load_error(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
        mul.out: {kernel: binary/mul, dtypes: [float32}
    """)
    assert_error(err, path, 2, "malformed YAML")


def test_duplicate_entry(tmp_path):
    path, err = load_error(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
        mul.out: {kernel: binary/mul, dtypes: [float32]}
        add.out: {kernel: binary/add, dtypes: [float64]}
    """)
    assert_error(err, path, 3, "duplicate entry 'add.out'", "first at line 1", "keep one entry")


def test_duplicate_key_in_entry(tmp_path):
    path, err = load_error(tmp_path, """
        add.out:
          kernel: binary/add
          dtypes: [float32]
          kernel: binary/mul
    """)
    assert_error(err, path, 4, "duplicate key 'kernel'", "first at line 2")


def test_table_is_a_list(tmp_path):
    path, err = load_error(tmp_path, """
        - func: add.out
    """)
    assert_error(err, path, 1, "mapping, not a list", "add.out: {kernel: binary/add")


def test_table_is_a_scalar(tmp_path):
    path, err = load_error(tmp_path, "just words\n")
    assert_error(err, path, 1, "must be a mapping of ATen overloads")


def test_non_string_key(tmp_path):
    path, err = load_error(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
        3: {kernel: binary/add, dtypes: [float32]}
    """)
    assert_error(err, path, 2, "keys must be strings")


def test_key_is_a_schema(tmp_path):
    path, err = load_error(tmp_path, """
        "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)": {kernel: binary/add, dtypes: [float32]}
    """)
    assert_error(err, path, 1, "is a schema", "overload name only: 'add.out'")


def test_key_is_not_an_overload_name(tmp_path):
    path, err = load_error(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
        "add out": {kernel: binary/add, dtypes: [float32]}
    """)
    assert_error(err, path, 2, "'add out' is not an ATen overload name", "'name.overload'")


def test_entry_not_a_mapping(tmp_path):
    path, err = load_error(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
        mul.out: binary/mul
    """)
    assert_error(err, path, 2, "'mul.out' must map to a mapping", "'kernel' and 'dtypes'", "str 'binary/mul'")


def test_entry_empty(tmp_path):
    path, err = load_error(tmp_path, """
        add.out:
        mul.out: {kernel: binary/mul, dtypes: [float32]}
    """)
    assert_error(err, path, 1, "'add.out' must map to a mapping", "got nothing")


def test_unknown_key(tmp_path):
    path, err = load_error(tmp_path, """
        add.out:
          kernel: binary/add
          dtype: [float32]
    """)
    assert_error(err, path, 3, "unknown key 'dtype' in 'add.out'", "did you mean 'dtypes'",
                 "allowed keys: kernel, dtypes, stub")


@pytest.mark.parametrize("missing,present", [("kernel", "dtypes: [float32]"), ("dtypes", "kernel: binary/add")])
def test_missing_key(tmp_path, missing, present):
    path, err = load_error(tmp_path, f"""
        add.out: {{kernel: binary/add, dtypes: [float32]}}
        mul.out:
          {present}
    """)
    assert_error(err, path, 2, f"'mul.out' lacks '{missing}'", "kernel and dtypes")


@pytest.mark.parametrize("kernel", ["add", "binary/", "binary/add/x", "3", "[binary, add]"])
def test_bad_kernel_name(tmp_path, kernel):
    path, err = load_error(tmp_path, f"""
        add.out:
          dtypes: [float32]
          kernel: {kernel}
    """)
    assert_error(err, path, 3, "kernel of 'add.out' must be 'category/name'", "kernels/hls/<category>/")


def test_dtypes_not_a_list(tmp_path):
    path, err = load_error(tmp_path, """
        add.out:
          kernel: binary/add
          dtypes: float32
    """)
    assert_error(err, path, 3, "dtypes of 'add.out' must be a list", "write [float32]")


@pytest.mark.parametrize("dtypes", ["[]", "{float32: 1}", "3"])
def test_dtypes_empty_or_not_a_list(tmp_path, dtypes):
    path, err = load_error(tmp_path, f"""
        add.out:
          kernel: binary/add
          dtypes: {dtypes}
    """)
    assert_error(err, path, 3, "dtypes of 'add.out' must be a non-empty list")


def test_dtype_not_a_name(tmp_path):
    path, err = load_error(tmp_path, """
        add.out:
          kernel: binary/add
          dtypes:
            - float32
            - [float64]
    """)
    assert_error(err, path, 5, "dtypes of 'add.out' must be dtype names", "known: float32")


def test_unknown_dtype(tmp_path):
    path, err = load_error(tmp_path, """
        add.out:
          kernel: binary/add
          dtypes:
            - float32
            - flaot64
    """)
    assert_error(err, path, 5, "unknown dtype 'flaot64' in 'add.out'", "did you mean 'float64'", "known: float32")


def test_duplicate_dtype(tmp_path):
    path, err = load_error(tmp_path, """
        add.out:
          kernel: binary/add
          dtypes: [float32,
                   float32]
    """)
    assert_error(err, path, 4, "dtype 'float32' is listed twice in 'add.out'")


@pytest.mark.parametrize("stub", ["3", "add-stub", "[add_stub]"])
def test_bad_stub(tmp_path, stub):
    path, err = load_error(tmp_path, f"""
        add.out:
          kernel: binary/add
          dtypes: [float32]
          stub: {stub}
    """)
    assert_error(err, path, 4, "stub of 'add.out' must be the C++ name of a DispatchStub", "omit it")


# --- Meaning (resolve against the installed torch and the kernel library) ----------------------

def test_unknown_op_with_closest_names(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
        mull.out: {kernel: binary/mul, dtypes: [float32]}
    """, native, library, stubs)
    assert_error(err, path, 2, "unknown ATen op 'mull.out'", "closest: ", "mul.out")


def test_op_without_overload_suggests_out_first(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        mul: {kernel: binary/mul, dtypes: [float32]}
    """, native, library, stubs)
    assert_error(err, path, 1, "unknown ATen op 'mul'", "closest: mul.out")


@pytest.mark.parametrize("func,target", [("add.Tensor", "add.out"), ("mul_.Tensor", "mul.out")])
def test_functional_or_inplace_variant(tmp_path, native, library, stubs, func, target):
    path, err = resolve_error(tmp_path, f"""
        {func}: {{kernel: binary/add, dtypes: [float32]}}
    """, native, library, stubs)
    assert_error(err, path, 1, f"'{func}' is a functional/in-place variant", f"delegates to '{target}'",
                 f"list '{target}' instead")


def test_functional_overload_without_delegate(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
        add.Scalar: {kernel: binary/add, dtypes: [float32]}
    """, native, library, stubs)
    assert_error(err, path, 2, "'add.Scalar' is a functional/in-place overload", "use 'add.out' instead")


def test_functional_overload_whose_out_is_not_structured(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        cholesky_inverse: {kernel: binary/mul, dtypes: [float32]}
    """, native, library, stubs)
    assert_error(err, path, 1, "'cholesky_inverse' is a functional/in-place overload",
                 "'cholesky_inverse.out' is not a structured", "host/ps")


def test_op_without_any_out_overload(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        _cdist_backward: {kernel: binary/mul, dtypes: [float32]}
    """, native, library, stubs)
    assert_error(err, path, 1, "'_cdist_backward' is not an out= overload and has none", "host/ps")


def test_not_structured(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
        cholesky_inverse.out: {kernel: binary/mul, dtypes: [float32]}
    """, native, library, stubs)
    assert_error(err, path, 2, "'cholesky_inverse.out' is not a structured op", "PyTorch", "hand-written kernel")


def test_precomputed(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        cat.out: {kernel: binary/add, dtypes: [float32]}
    """, native, library, stubs)
    assert_error(err, path, 1, "'cat.out' uses precomputed meta arguments")


def test_no_cpu_kernel(tmp_path, library):
    # No installed op is structured without a CPU kernel: use a one-op PyTorch table.
    native_yaml = write(tmp_path, """
        - func: frob.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
          structured: True
          dispatch:
            CUDA: frob_out_cuda
    """, "native_functions.yaml")
    path = write(tmp_path, """
        frob.out: {kernel: binary/add, dtypes: [float32]}
    """)
    errors = validate(load_table(path), load_ops(native_yaml), library, None)
    assert_error(errors["frob.out"][0], path, 1, "'frob.out' has no CPU kernel", "remove the entry")


def test_unknown_kernel_category(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        add.out: {kernel: binry/add, dtypes: [float32]}
    """, native, library, stubs)
    assert_error(err, path, 1, "unknown kernel category 'binry'", "did you mean 'binary'", "kernels/hls/<category>/")


def test_unknown_kernel(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}

        mul.out: {kernel: binary/mull, dtypes: [float32]}
    """, native, library, stubs)
    assert_error(err, path, 3, "unknown kernel 'binary/mull'", "closest: binary/mul",
                 "kernels/hls/binary/ops.yaml")


def test_unsupported_dtype(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32, bool]}
    """, native, library, stubs)
    assert_error(err, path, 1, "unsupported dtype bool in 'add.out'", "written for float32, float64",
                 "kernels/hls/binary/ops.yaml")


def test_missing_default_stub(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        tril.out: {kernel: binary/mul, dtypes: [float32]}
    """, native, library, stubs)
    assert_error(err, path, 1, "no DispatchStub 'tril_stub'", "with 'stub:'")


def test_unknown_explicit_stub(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        mul.out: {kernel: binary/mul, dtypes: [float32], stub: mull_stub}
    """, native, library, stubs)
    assert_error(err, path, 1, "no DispatchStub 'mull_stub'", "closest: mul_stub", "fix 'stub:'")


def test_one_stub_two_kernels(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
        sub.out: {kernel: binary/mul, dtypes: [float32], stub: add_stub}
    """, native, library, stubs)
    assert_error(err, path, 2, "calls add_stub, which 'add.out' (line 1) already binds to kernel binary/add",
                 "one stub runs one kernel")


def test_validate_reports_every_broken_entry(tmp_path, native, library, stubs):
    path = write(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
        mull.out: {kernel: binary/mul, dtypes: [float32]}
        mul.out: {kernel: binary/nope, dtypes: [float32]}
        add.Tensor: {kernel: binary/add, dtypes: [float32]}
    """)
    errors = validate(load_table(path), native.op_table, library, stubs)
    assert errors["add.out"] == ()
    assert [e.loc.line for name in ("mull.out", "mul.out", "add.Tensor") for e in errors[name]] == [2, 3, 4]


# --- PyTorch's side ------------------------------------------------------------------------------

def test_version_independent_reader_agrees_with_torchgen(native):
    """load_ops reads any version without torchgen; on the installed file it must say exactly what
    torchgen says, or the report and `generate` would disagree."""
    ours = load_ops(INSTALLED_NATIVE).ops
    theirs = native.op_table.ops
    assert ours.keys() == theirs.keys() and len(ours) > 2000
    assert [name for name in ours if ours[name] != theirs[name]] == []
    f = native.functions
    assert all(str(f[name].func) == str(ours[name].schema) for name in ours)
    assert all(f[name].func.name.name.base == ours[name].schema.base for name in ours)
    assert all(f[name].func.is_out_fn() == ours[name].schema.is_out for name in ours)


def test_parse_schema():
    s = parse_schema("gelu.out(Tensor self, *, str approximate='none, x', Tensor(a!) out) -> Tensor(a!)")
    assert [(a.type, a.name, a.default, a.kwarg_only) for a in s.args] == [
        ("Tensor", "self", None, False), ("str", "approximate", "'none, x'", True), ("Tensor(a!)", "out", None, True)]
    assert s.is_out and [a.name for a in s.out] == ["out"] and s.base == "gelu"
    assert parse_schema("__iand__.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)").base == "and"
    with pytest.raises(ValueError):
        parse_schema("add.out(Tensor self")
    with pytest.raises(ValueError):
        parse_schema("add.out(Tensor) -> Tensor")


def test_torchgen_cannot_parse_other_versions_clearly():
    path = os.path.join(DATA, "2.7.0", "native_functions.yaml")
    if not os.path.exists(path):
        pytest.skip(f"shared test data absent: {DATA}")
    with pytest.raises(TableError) as info:
        load_native(path)
    assert "cannot parse" in str(info.value) and "codegen check" in str(info.value)


# --- Ops whose CPU impl picks among stubs, and ops that are not structured ----------------------

def test_stub_mapping_binds_every_stub(tmp_path, native, library, stubs):
    path = write(tmp_path, """
        div.out_mode:
          kernel: binary/div
          stub: {div_true_stub: binary/div, div_trunc_stub: binary/div_trunc, div_floor_stub: binary/div_floor}
          dtypes: [float32]
    """)
    (r,) = resolve(load_table(path), native, library, stubs)
    assert [(s, op.name) for s, _, op in r.bindings] == [
        ("div_true_stub", "div"), ("div_trunc_stub", "div_trunc"), ("div_floor_stub", "div_floor")]
    assert [k.name for k in r.kernels] == ["v_div_float32", "v_div_trunc_float32", "v_div_floor_float32"]
    assert r.stub == "div_true_stub" and r.cpu_kernel is None


def test_stub_mapping_must_include_the_kernel(tmp_path):
    path, err = load_error(tmp_path, """
        div.out_mode:
          kernel: binary/mul
          stub: {div_true_stub: binary/div}
          dtypes: [float32]
    """)
    assert_error(err, path, 3, "kernel binary/mul of 'div.out_mode' is bound to none of its stubs", "div_true_stub")


def test_stub_mapping_values_are_kernels(tmp_path):
    path, err = load_error(tmp_path, """
        div.out_mode:
          kernel: binary/div
          stub: {div_true_stub: div}
          dtypes: [float32]
    """)
    assert_error(err, path, 3, "stub div_true_stub of 'div.out_mode' must map to a kernel 'category/name'")


def test_stub_mapping_kernels_support_the_dtypes(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        div.out_mode:
          kernel: binary/div
          stub: {div_true_stub: binary/div, div_floor_stub: binary/div_floor, div_trunc_stub: binary/bitwise_and}
          dtypes: [float16]
    """, native, library, stubs)
    assert_error(err, path, 1, "unsupported dtype float16 in 'div.out_mode': kernel 'binary/bitwise_and'")


def test_not_structured_with_a_stub_forwards_to_the_cpu_kernel(tmp_path, native, library, stubs):
    path = write(tmp_path, """
        where.self_out: {kernel: ternary/where, dtypes: [float32], stub: where_kernel}
        where.self: {kernel: ternary/where, dtypes: [float32], stub: where_kernel}
    """)
    entries = resolve(load_table(path), native, library, stubs)
    assert [(r.entry.func, r.cpu_kernel, r.structured_class) for r in entries] == [
        ("where.self_out", "where_self_out", None), ("where.self", "where", None)]
    from codegen.gen_fpga_type import generate_fpga_type
    unit = generate_fpga_type(entries)["FPGAType_0.cpp"]
    assert "at::native::where_self_out(condition, self, other, out)" in unit
    assert "REGISTER_PRIVATEUSE1_DISPATCH(where_kernel" in unit
    # named by `self`'s dtype, run only for the dtypes listed
    assert ('KernelRef fpga_where_kernel_kernel{.name = "where", .dtype_operand = 2, '
            '.dtypes = aten_fpga::dtype_mask({at::ScalarType::Float})}') in unit
    # the table decides before ATen's kernel runs: by the dtype of the operands the kernel computes in
    assert "aten_fpga::require_kernel({self, other}, where_self_out_kernel);" in unit


def test_not_structured_without_a_stub_says_how(tmp_path, native, library, stubs):
    path, err = resolve_error(tmp_path, """
        logical_and.out: {kernel: binary/logical_and, dtypes: [float32]}
    """, native, library, stubs)
    assert_error(err, path, 1, "'logical_and.out' is not a structured op", "with 'stub:'",
                 "at::native::logical_and_out")
