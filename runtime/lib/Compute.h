//===- Compute.h - Buffers and kernels of one memory kind (internal) -------===//
//
// Where a bucket's buffers live and the kernels that work on them: host memory
// with the CPU kernels (zenrt/Kernels.h, Eigen), or the memory of one CUDA
// device with the CUDA kernels (zenrt/CudaKernels.h, cuBLAS) queued on one CUDA
// stream. The bucket programs and the executor are written once against this
// interface. Device work is asynchronous: it is ordered on the stream and
// complete after synchronize() or after an event recorded behind it.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_LIB_COMPUTE_H
#define ZENRT_LIB_COMPUTE_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace zenrt {

/// A buffer that could not be had: `bytes` is its size, SIZE_MAX when the size itself
/// does not fit in size_t. The executor names the rank and bucket it was for.
struct AllocationError : std::runtime_error {
  explicit AllocationError(size_t bytes)
      : std::runtime_error(bytes == SIZE_MAX ? "buffer size overflows size_t"
                                             : "cannot allocate " + std::to_string(bytes) +
                                                   " bytes"),
        bytes(bytes) {}
  size_t bytes;
};

/// count * width, or AllocationError(SIZE_MAX) when the product overflows.
inline size_t bufferBytes(size_t count, size_t width) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, width, &bytes))
    throw AllocationError(SIZE_MAX);
  return bytes;
}

/// Zero-filled storage of `count` T owned by a Compute's memory; copies share it.
template <typename T> class Buffer {
public:
  Buffer() = default;
  Buffer(std::shared_ptr<void> storage, size_t count)
      : storage(std::move(storage)), count(count) {}
  T *data() const { return static_cast<T *>(storage.get()); }
  size_t size() const { return count; }
  bool empty() const { return count == 0; }

private:
  std::shared_ptr<void> storage;
  size_t count = 0;
};

class Compute {
public:
  virtual ~Compute() = default;
  virtual bool onDevice() const = 0;

  /// Zero-filled bytes in this memory (never null, also for 0 bytes). Throws
  /// AllocationError when the memory is exhausted.
  virtual std::shared_ptr<void> allocateBytes(size_t bytes) = 0;
  template <typename T> Buffer<T> allocate(size_t count) {
    return Buffer<T>(allocateBytes(bufferBytes(count, sizeof(T))), count);
  }
  /// Why `data` cannot be a gradient buffer of this memory ("" when it can).
  virtual std::string rejectGradient(const void *data) const = 0;

  /// Within this memory.
  virtual void copy(void *to, const void *from, size_t bytes) = 0;
  virtual void zero(void *to, size_t bytes) = 0;
  /// From host memory; `from` may be reused when this returns.
  virtual void upload(void *to, const void *from, size_t bytes) = 0;
  /// Waits until the queued work is done.
  virtual void synchronize() = 0;

  virtual void floatToHalf(const float *in, uint16_t *out, size_t n) = 0;
  virtual void halfToFloat(const uint16_t *in, float *out, size_t n) = 0;
  virtual void floatToBF16(const float *in, uint16_t *out, size_t n) = 0;
  virtual void bf16ToFloat(const uint16_t *in, float *out, size_t n) = 0;
  virtual void quantizeInt8(const float *in, size_t n, uint8_t *payload) = 0;
  virtual void dequantizeInt8(const uint8_t *payload, size_t n, float *out, bool accumulate) = 0;
  virtual void compressSign(const float *in, size_t n, uint8_t *payload) = 0;
  virtual void decompressSign(const uint8_t *payload, size_t n, float *out, bool accumulate) = 0;
  /// Top-k by magnitude, indices ascending (the same set on host and device).
  virtual void selectTopK(const float *in, size_t n, size_t k, uint32_t *indices,
                          float *values) = 0;
  /// values[i] = in[indices[i]]; out[indices[i]] (+)= values[i] (indices distinct).
  virtual void gather(const float *in, const uint32_t *indices, size_t k, float *values) = 0;
  virtual void scatter(const float *values, const uint32_t *indices, size_t k, float *out,
                       bool accumulate) = 0;
  virtual void scale(float *data, size_t n, float factor) = 0;
  /// out = a - b; inout += in.
  virtual void subtract(const float *a, const float *b, float *out, size_t n) = 0;
  virtual void add(const float *in, float *inout, size_t n) = 0;

  /// PowerSGD on column-major matrices: out[rows x r] = m[rows x cols] * in[cols x r], or
  /// (transposeM) out[cols x r] = m^T * in[rows x r].
  virtual void multiply(const float *m, size_t rows, size_t cols, const float *in, float *out,
                        size_t rank, bool transposeM) = 0;
  /// Orthonormal columns spanning p[rows x r]'s, in place.
  virtual void orthonormalise(float *p, size_t rows, size_t rank) = 0;
  /// out[rows x cols] = p[rows x r] * q[cols x r]^T.
  virtual void outerProduct(const float *p, const float *q, size_t rows, size_t cols,
                            size_t rank, float *out) = 0;
};

/// Host memory and the CPU kernels (thread-compatible: callers serialise kernel calls).
std::unique_ptr<Compute> createHostCompute();

#ifdef ZENRT_HAVE_CUDA
/// Memory of CUDA device `device`, kernels queued on `stream` (a cudaStream_t).
std::unique_ptr<Compute> createDeviceCompute(int device, void *stream);
#endif

}  // namespace zenrt

#endif  // ZENRT_LIB_COMPUTE_H
