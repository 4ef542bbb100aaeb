"""Fixtures every test layer shares (pytest finds them here; helpers to import live in
runtime_support.py).

- `level`: each XCL_OPT level's emulated image loaded in turn (module scope, so pytest groups a
  module's tests by level and each image loads once); the default image (opt=4) afterwards.
- `fresh_stats`: aten_fpga.stats() / report() start from zero for the test.
"""
import pytest

from codegen.abi import LEVELS


@pytest.fixture(scope="module", params=LEVELS, ids=[f"opt{l}" for l in LEVELS])
def level(request):
    import aten_fpga

    aten_fpga.load(request.param)
    yield request.param
    aten_fpga.load(4)


@pytest.fixture
def fresh_stats():
    import aten_fpga

    aten_fpga.reset_stats()
