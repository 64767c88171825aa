// The benchmark shape the autoscheduled baselines are built for: the autoschedulers' estimates,
// and the head, channel and mode or slot counts the baselines hold as constants. The runtime
// refuses a baseline at any other of those counts (runtime/src/kernels.cpp).
#pragma once

namespace fsattn::baseline {

constexpr int kB = 2, kT = 2048, kH = 4, kD = 64;
constexpr int kFeatures = 64;  // IDA modes, BLA slots
constexpr int kBlaModes = 31;  // BLA Fourier modes (an estimate only)

}  // namespace fsattn::baseline
