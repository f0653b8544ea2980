//===- CpuMemory.h - what one CPU rank may take to execute a plan -*- C++ -*-===//
//
// Plans made for GPU clusters can be far beyond a CPU rank. The executors of a plan's real
// compute (the hybrid stages, the MoE layers) refuse such a plan by name before they
// allocate, not by running out of memory halfway.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_LIB_CPUMEMORY_H
#define ZENRT_LIB_CPUMEMORY_H

#include <cstdint>
#include <string>

namespace zenrt::detail {

/// The most memory one rank may take to execute a plan's model on the CPU.
constexpr double kMostRankBytes = 8.0 * (1 << 30);

/// "" when `floats` (4 bytes each) fit in kMostRankBytes; else what they need, for the
/// error's message: "needs about 12 GB per rank to execute on the CPU (at most 8 GiB)".
inline std::string cpuMemoryExcess(double floats) {
  if (!(floats * 4 > kMostRankBytes))
    return "";
  return "needs about " + std::to_string(int64_t(floats * 4 / 1e9)) +
         " GB per rank to execute on the CPU (at most 8 GiB)";
}

} // namespace zenrt::detail

#endif // ZENRT_LIB_CPUMEMORY_H
