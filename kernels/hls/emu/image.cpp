// The exported entry points of an emulated device image. AFPGA_OPT_LEVEL and AFPGA_CUS come from
// the build (scons opt= and cus=).
#include "image.h"

extern "C" const afpga_emu_kernel* afpga_emu_kernels(int* count) {
  *count = static_cast<int>(afpga_emu::registry().size());
  return afpga_emu::registry().data();
}

extern "C" int afpga_emu_cus() { return AFPGA_CUS; }
extern "C" int afpga_emu_level() { return AFPGA_OPT_LEVEL; }
