"""aten_fpga codegen: PyTorch's native_functions.yaml + native_functions_fpga.yaml -> C++ and HLS.

The model (model.py) is parsed and validated once, at the edge; the generators (gen_*.py) are pure
functions from that model to text.
"""
