// Lists what XRT's own xrt::xclbin reads from an xclbin: the platform, then per kernel its
// arguments (index, name, type, size, offset, port, memories) and its compute units.
// tests/test_build_emu.py compiles it against Debian's libxrt-dev and compares with the table.
//   g++ -std=c++17 list_xclbin.cpp -lxrt_coreutil -luuid -pthread && ./a.out torch.xclbin
#include <iostream>

#include <xrt/xrt_uuid.h>
#include <experimental/xrt_xclbin.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: list_xclbin FILE.xclbin\n";
    return 2;
  }
  try {
    xrt::xclbin xclbin(argv[1]);
    std::cout << "platform " << xclbin.get_xsa_name() << "\n";
    for (const auto& m : xclbin.get_mems())
      if (m.get_used()) std::cout << "mem " << m.get_index() << " " << m.get_tag() << "\n";
    for (const auto& k : xclbin.get_kernels()) {
      std::cout << "kernel " << k.get_name() << " args " << k.get_num_args() << "\n";
      for (const auto& a : k.get_args()) {
        std::cout << "  arg " << a.get_index() << " " << a.get_name() << " type=" << a.get_host_type()
                  << " size=" << a.get_size() << " offset=" << a.get_offset() << " port=" << a.get_port() << "\n";
      }
      for (const auto& cu : k.get_cus()) {
        std::cout << "  cu " << cu.get_name();
        for (const auto& a : cu.get_args()) {
          for (const auto& m : a.get_mems()) std::cout << " " << a.get_name() << "=" << m.get_tag();
        }
        std::cout << "\n";
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "list_xclbin: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
