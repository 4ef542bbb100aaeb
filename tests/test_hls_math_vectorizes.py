"""The float element functions of aten_fpga_hls.h are written so that g++ vectorizes a loop over them:
no branch in them (a ?: whose one side is costly, or an && in a select's condition, becomes one, and a
loop with a branch stays scalar: gelu_backward ran at 1/6 of the CPU's speed so). Each function is
compiled in a loop of its own with the emulated image's flags, and each loop must vectorize."""
from __future__ import annotations

import pytest

from vectorizes import vectorized as vectorized_in

# One loop per line: (name, loop).
LOOPS = {
    "exp": "o[i] = afpga::math::exp(a[i]);",
    "log": "o[i] = afpga::math::log(a[i]);",
    "tanh": "o[i] = afpga::math::tanh(a[i]);",
    "erf_for_gelu": "o[i] = afpga::math::erf_for_gelu(a[i]);",
    "sigmoid": "o[i] = afpga::sigmoid(a[i]);",
    "silu": "o[i] = afpga::silu(a[i]);",
    "gelu": "o[i] = afpga::gelu(a[i]);",
    "gelu_tanh": "o[i] = afpga::gelu_tanh(a[i]);",
    "gelu_backward": "o[i] = afpga::gelu_backward(a[i], b[i]);",
    "gelu_backward_tanh": "o[i] = afpga::gelu_backward_tanh(a[i], b[i]);",
    "silu_backward": "o[i] = afpga::silu_backward(a[i], b[i]);",
}


@pytest.fixture(scope="module")
def vectorized(tmp_path_factory) -> dict[str, bool]:
    functions = [f"void f_{name}(const float* a, const float* b, float* o) {{ for (int i = 0; i < 1024; ++i) {{ {body} }} }}"
                 for name, body in LOOPS.items()]
    return dict(zip(LOOPS, vectorized_in(tmp_path_factory.mktemp("hls_math"), "aten_fpga_hls.h", functions)))


@pytest.mark.parametrize("name", list(LOOPS))
def test_float_function_loop_vectorizes(vectorized, name):
    assert vectorized[name], f"g++ left the loop over {name} scalar (a branch in it?)"
