//===- CompressionKernels.h - reference CPU compression loops ---*- C++ -*-===//
//
// Plain CPU encoders whose throughput `zenopt profile` measures to price CPU
// offload. Each returns a checksum of its output so the work is observable.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_COMPRESSIONKERNELS_H
#define ZEN_COSTMODEL_COMPRESSIONKERNELS_H

#include "zen/CostModel/Cluster.h"

#include <cstddef>
#include <vector>

namespace zen::cost {

/// Scratch space reused across calls (sized on first use).
struct CompressionScratch {
  std::vector<unsigned char> bytes;
  std::vector<float> floats;
  std::vector<unsigned> indices;
};

/// Encodes `count` floats with `method` (ratio 0.01 for the sparse methods).
/// Methods without a CPU kernel here (none, powersgd) return 0 and do nothing.
double encodeOnCpu(CompressionMethod method, const float *input, size_t count,
                   CompressionScratch &scratch);

/// The methods encodeOnCpu implements.
std::vector<CompressionMethod> cpuKernelMethods();

} // namespace zen::cost

#endif // ZEN_COSTMODEL_COMPRESSIONKERNELS_H
