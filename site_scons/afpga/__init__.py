"""The aten_fpga build, as SCons tools: variables, codegen, the emulated image, the host extension."""
