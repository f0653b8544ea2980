//===- ComputeWork.cpp - real CPU work standing in for compute tasks -------===//
#include "ComputeWork.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace zen::run {
namespace {

// GEMM shape: a fixed S x S left operand times panels of up to P columns, so any FLOP count
// is met to within one column (2 S^2 = 32768 FLOPs) with cache-friendly operands.
constexpr size_t kSide = 128, kPanel = 256;
// A memory pass wraps around buffers of at most this size each: larger than a core's share
// of the last-level cache, so a pass streams from memory.
constexpr size_t kLargestBuffer = size_t(64) << 20;

using Matrix = Eigen::Map<Eigen::MatrixXf>;
using ConstMatrix = Eigen::Map<const Eigen::MatrixXf>;

}  // namespace

ComputeWork::ComputeWork(double largestBytes)
    : left(kSide * kSide, 1.0f / kSide), right(kSide * kPanel, 0.5f),
      product(kSide * kPanel, 0.0f) {
  // A copy reads and writes each byte once: half the bytes per buffer.
  size_t bufferBytes = size_t(std::min(std::max(largestBytes / 2, 1.0), double(kLargestBuffer)));
  source.assign(bufferBytes, 1);
  target.assign(bufferBytes, 0);
}

void ComputeWork::run(double flops, double bytes) {
  multiply(flops);
  stream(bytes);
}

void ComputeWork::multiply(double flops) {
  double columns = std::round(flops / (2.0 * kSide * kSide));
  ConstMatrix a(left.data(), kSide, kSide);
  for (double done = 0; done < columns; done += kPanel) {
    Eigen::Index width = Eigen::Index(std::min(double(kPanel), columns - done));
    Matrix(product.data(), kSide, width).noalias() =
        a * ConstMatrix(right.data(), kSide, width);
  }
}

void ComputeWork::stream(double bytes) {
  double remaining = std::round(bytes / 2);  // bytes to copy
  while (remaining > 0) {
    size_t length = size_t(std::min(remaining, double(source.size() - cursor)));
    std::memcpy(target.data() + cursor, source.data() + cursor, length);
    cursor = (cursor + length) % source.size();
    remaining -= double(length);
  }
}

}  // namespace zen::run
