"""aten_fpga.load takes a level, an image folder, an xclbin or the emulated .so; nothing else."""
from __future__ import annotations

import os

import pytest
import torch

import aten_fpga
from aten_fpga._paths import build_dir, emu_image_path

ACCEPTS = "XCL_OPT level 1-4 .* image folder .* .xclbin"


@pytest.fixture
def restore():
    yield
    aten_fpga.load(4)


def adds():
    a = torch.randn(100)
    torch.testing.assert_close((a.to("fpga") + 1).cpu(), a + 1, rtol=0, atol=0)


@pytest.mark.parametrize("form", ["level", "folder", "relative folder", "xclbin", "so"])
def test_every_form_loads(form, restore):
    folder = os.path.join(build_dir(), "emu", "opt1")
    image = {"level": 1, "folder": folder, "relative folder": os.path.relpath(folder),
             "xclbin": os.path.join(folder, "torch.xclbin"), "so": os.path.join(folder, "torch_emu.so")}[form]
    path = aten_fpga.load(image)
    assert os.path.dirname(path) == folder and aten_fpga.image() == path
    adds()


def test_anything_else_names_what_is_accepted(tmp_path, restore):
    with pytest.raises(FileNotFoundError, match="no torch.xclbin in it.*" + ACCEPTS):
        aten_fpga.load(str(tmp_path))
    (tmp_path / "notes.txt").write_text("not an image")
    with pytest.raises(ValueError, match="is not an image; expected an " + ACCEPTS):
        aten_fpga.load(str(tmp_path / "notes.txt"))
    with pytest.raises(TypeError, match="expected an " + ACCEPTS):
        aten_fpga.load(None)
    with pytest.raises(TypeError, match="expected an " + ACCEPTS):
        aten_fpga.load(True)
    with pytest.raises(ValueError, match="level 7 does not exist"):
        aten_fpga.load(7)
    assert aten_fpga.image() == emu_image_path(4)  # a refused image leaves the loaded one
    adds()
