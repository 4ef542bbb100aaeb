// A small reader of xclbin files (XRT's public xclbin.h layout), our own: the kernels, their
// arguments and compute units, the memory banks, and the member table (engines and members). Both device backends discover an image's
// kernels through it, the emulated device from the xclbin the build writes beside its g++ image.
// Needs neither XRT nor torch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace aten_fpga::xclbin {

struct Arg {
  std::string name;
  int index = 0;
  bool is_pointer = false;  // addressQualifier 1: a buffer on an m_axi port
  std::string port;         // M_AXI_GMEM0, S_AXI_CONTROL
  int port_width = 0;       // bits of the port's data bus (a buffer's word)
  size_t size = 0;          // bytes of its control register(s)
  std::string type;         // C type as the kernel declares it: "float*", "uint64_t"
};

struct Kernel {
  std::string name;
  std::vector<Arg> args;           // by index
  std::vector<std::string> cus;    // compute unit names, from IP_LAYOUT
};

struct Memory {
  std::string tag;  // DDR[0], HBM[3]
  bool used = false;
};

// The member table, a USER_METADATA section (kind 16) whose text starts with the line
// "aten_fpga engines 1" (site_scons/afpga/xclbin.py writes it):
//   engine <engine kernel> <its opcode argument>
//   member <member> <engine> <opcode> <member arg>=<engine arg> ...   (the member's args in order)
// A member is a kernel the host asks for by name (v_add_float32) that the image runs as `opcode`
// of an engine kernel (e_binary).
struct Engine {
  std::string kernel;      // one of the image's kernels
  std::string opcode_arg;  // its scalar argument selecting the member
};

struct Member {
  std::string name;
  std::string engine;
  uint32_t opcode = 0;
  std::vector<std::pair<std::string, std::string>> args;  // (member arg, engine arg), in the member's order
};

struct Image {
  std::string platform;         // the header's VBNV
  std::vector<Kernel> kernels;  // in metadata order
  std::vector<Memory> memories;
  std::string emulation_image;  // the g++ image holding the kernel code ("" for a v++ image)
  std::vector<Engine> engines;  // from the member table, in its order (none without one)
  std::vector<Member> members;
};

// Reads `path`; throws std::runtime_error naming the file and what is wrong (for the member table,
// the line too). Validated: engines are kernels with a scalar opcode argument, members name a
// declared engine and its arguments (each once, never the opcode's), names and opcodes are unique.
Image read(const std::string& path);

// How the host encodes a scalar argument of this C type in its 64-bit slot (an AFPGA_KIND_* of
// afpga_abi.h: 'f' floating point, 'i' signed, 'u' unsigned, 'b' bool, 'c' complex); a pointer by
// the elements it carries. The C types are the ABI table's (codegen/abi.py).
char encoding(const std::string& type);
// Bytes of one element a port type carries ("hls::vector<float, 16>*" -> 4, "half*" -> 2).
int element_bytes(const std::string& type);
// Bytes of one word a buffer argument moves: an hls::vector's lanes of its element, one element,
// or -- a type the ABI table lacks (ap_uint<N>) -- the port's data width. Arguments bundled on one
// port may move narrower words than its data bus (an engine's bool output beside its float ones).
int word_bytes(const Arg& a);

}  // namespace aten_fpga::xclbin
