//===- ComputeWork.h - real CPU work standing in for compute tasks -*- C++ -*-===//
//
// zenopt-run --compute gemm: each compute task of the plan runs, on this rank's CPU, a
// single-precision Eigen GEMM of the task's FLOPs and then a memory pass (a copy) of its
// bytes, so that measured iteration times include measured compute. The cost model prices a
// task at max(FLOPs / peak, bytes / bandwidth); this work takes about their sum.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_ZENOPT_RUN_COMPUTEWORK_H
#define ZEN_TOOLS_ZENOPT_RUN_COMPUTEWORK_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zen::run {

class ComputeWork {
public:
  /// Buffers for memory passes of up to `largestBytes` (capped: longer passes wrap around).
  explicit ComputeWork(double largestBytes);

  /// About `flops` floating-point operations and `bytes` bytes read plus written.
  void run(double flops, double bytes);

private:
  void multiply(double flops);
  void stream(double bytes);

  std::vector<float> left, right, product;  // the GEMM's operands: S x S, S x P, S x P
  std::vector<char> source, target;         // the memory pass copies between these
  size_t cursor = 0;  // where the next pass starts, so consecutive tasks touch new memory
};

}  // namespace zen::run

#endif  // ZEN_TOOLS_ZENOPT_RUN_COMPUTEWORK_H
