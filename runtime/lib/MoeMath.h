//===- MoeMath.h - The MoE layer's buffers and expert kernels (internal) ---===//
//
// Moe.cpp runs one algorithm (chunks, all-to-alls, expert MLPs) in host memory with Eigen or
// in a CUDA device's memory with CUDA kernels; this is what differs between the two. Device
// work queues on the MoeMath's own stream, apart from the all-to-alls' (NCCL's): synchronize()
// before a collective reads what a kernel wrote. Every row's product is computed on its own
// (no blocking across rows that changes its summation order), so a row's result does not
// depend on how many rows come with it: the pipelined layer's chunks give the same bits.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_LIB_MOEMATH_H
#define ZENRT_LIB_MOEMATH_H

#include "zenrt/Moe.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace zenrt {

class MoeMath {
public:
  virtual ~MoeMath() = default;
  virtual bool onDevice() const = 0;
  /// Why the caller's buffer or weights at `data` cannot be read or written here ("" when
  /// they can).
  virtual std::string rejectBuffer(const void *data) const = 0;

  /// Zero-filled bytes in this memory. Failures throw RuntimeError(ZENRT_ERR_BACKEND), which
  /// the layer reports as zenrt::Error.
  virtual std::shared_ptr<void> allocate(size_t bytes) = 0;
  template <typename T> std::shared_ptr<T> allocateArray(size_t count) {
    return std::static_pointer_cast<T>(allocate(count * sizeof(T)));
  }
  /// Waits until the queued work is done.
  virtual void synchronize() = 0;
  /// From this memory into host memory, complete on return.
  virtual void download(void *host, const void *from, size_t bytes) = 0;

  /// `rows` rows of `rowBytes` each, the i-th at from + i * fromPitch, to to + i * toPitch.
  virtual void copyRows(void *to, size_t toPitch, const void *from, size_t fromPitch,
                        size_t rowBytes, size_t rows) = 0;
  /// Rows of `width` floats into TokenFormat bytes (each row on its own) and back.
  virtual void encodeRows(moe::TokenFormat format, const float *rows, size_t count, size_t width,
                          uint8_t *out) = 0;
  virtual void decodeRows(moe::TokenFormat format, const uint8_t *in, size_t count, size_t width,
                          float *rows) = 0;

  /// out[n x m] = x[n x k] * w^T with w [m x k] (transposed), or x * w with w [k x m];
  /// row-major, each row's result independent of n.
  virtual void rowProduct(const float *x, size_t n, size_t k, const float *w, size_t m,
                          bool transposed, float *out) = 0;
  /// rows[n x m] += bias[m] on every row.
  virtual void addBias(float *rows, size_t n, size_t m, const float *bias) = 0;
  /// data = max(data, 0).
  virtual void relu(float *data, size_t count) = 0;
  /// gradient = units > 0 ? gradient : 0.
  virtual void reluGradient(const float *units, float *gradient, size_t count) = 0;
  /// out[ka x kb] += a[n x ka]^T * b[n x kb].
  virtual void accumulateTransposedProduct(const float *a, size_t n, size_t ka, const float *b,
                                           size_t kb, float *out) = 0;
  /// out[width] += each of rows[n x width], in row order.
  virtual void accumulateRows(const float *rows, size_t n, size_t width, float *out) = 0;
};

/// Host memory and Eigen (Moe.cpp, built for the host CPU).
std::unique_ptr<MoeMath> createHostMoeMath();

#ifdef ZENRT_HAVE_CUDA
/// Memory of CUDA device `device` and CUDA kernels on a stream of its own
/// (cuda/DeviceMoeMath.cu).
std::unique_ptr<MoeMath> createDeviceMoeMath(int device);
#endif

} // namespace zenrt

#endif // ZENRT_LIB_MOEMATH_H
