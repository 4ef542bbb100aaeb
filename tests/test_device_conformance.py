"""PyTorch's own OpInfo samples for every op in the table, on "fpga" against the CPU (quick)."""
import pytest

from aten_fpga import conformance


@pytest.fixture(scope="module")
def results():
    return conformance.run(quick=True)


def test_every_table_op_conforms(results):
    table = [r for r in results if r.kind == "table"]
    failures = [f"{r.op}: {f}" for r in table for f in r.failures]
    assert not failures, "\n".join(failures)
    # every op of the table has OpInfo coverage here, and its samples really ran FPGA kernels
    covered = {r.aten for r in table}
    missing = set(conformance._table_ops()) - covered - conformance.NO_OPINFO
    assert not missing, f"table ops with no OpInfo run: {sorted(missing)}"
    # ...and really ran FPGA kernels, except where PyTorch's samples only use overloads the table
    # leaves to the fallback (docs/conformance.md).
    ran = {r.aten for r in table if r.passed > 0 and r.fpga_runs > 0}
    assert covered - ran == conformance.SAMPLES_USE_OTHER_OVERLOADS, [(r.op, r.passed, r.fpga_runs) for r in table]


def test_fallback_sample_conforms(results):
    fallback = [r for r in results if r.kind == "fallback"]
    assert len(fallback) >= 10
    failures = [f"{r.op}: {f}" for r in fallback for f in r.failures]
    assert not failures, "\n".join(failures)
    assert all(r.cpu_fallbacks > 0 for r in fallback if r.op not in ("transpose",)), \
        [(r.op, r.cpu_fallbacks) for r in fallback]


def test_cli_reports_totals_and_writes_json(tmp_path, capsys):
    path = tmp_path / "c.json"
    assert conformance.main(["--quick", "--ops", "mul", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "mul" in out and " passed, 0 failed" in out
    assert '"op": "mul"' in path.read_text()
