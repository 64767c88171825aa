// How a CUDA schedule asks for a kernel's register budget: Halide names each kernel after
// its outermost block loop, and the runtime reads the names in the PTX it compiles
// (runtime/src/ptx_budgets.cpp). A kernel whose name holds kWideKernel gets its variant's
// budget (the kernel table's REGISTERS column, `registers=` in generators/CMakeLists.txt);
// one whose name holds kLargeKernel (a large register tile: Knobs::large_tile) gets
// kLargeRegisters; every other kernel gets Halide's 64 registers a thread.
#pragma once

namespace fsattn {

constexpr char kWideKernel[] = "wide_registers";
constexpr char kLargeKernel[] = "large_registers";
constexpr int kLargeRegisters = 255;  // the most a thread may have (sm_90)

}  // namespace fsattn
