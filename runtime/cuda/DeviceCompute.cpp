//===- DeviceCompute.cpp - Device memory with the CUDA kernels on a stream ---===//
//
// Every call makes the runtime's device current for its duration (DeviceScope):
// the executor's calls come from the progress thread and from the caller's
// threads, whose current device is their own business.
//
//===----------------------------------------------------------------------===//
#include "../lib/Compute.h"

#include "../lib/Backend.h"
#include "DeviceScope.h"
#include "zenrt/CudaKernels.h"
#include "zenrt/zenrt.h"

#include <cuda_runtime.h>

#include <stdexcept>

namespace zenrt {
namespace {

void checkCuda(cudaError_t code, const char *what) {
  if (code != cudaSuccess)
    throw RuntimeError(ZENRT_ERR_BACKEND, std::string(what) + ": " + cudaGetErrorString(code));
}

class DeviceCompute final : public Compute {
public:
  DeviceCompute(int device, cudaStream_t stream) : device(device), stream(stream) {}
  bool onDevice() const override { return true; }

  std::shared_ptr<void> allocateBytes(size_t bytes) override {
    DeviceScope scope(device);
    void *data = nullptr;
    if (cudaMalloc(&data, bytes ? bytes : 1) != cudaSuccess) {
      cudaGetLastError();  // clears the sticky error of a failed allocation
      throw AllocationError(bytes);
    }
    std::shared_ptr<void> owned(data, [device = device](void *pointer) {
      try {
        DeviceScope scope(device);
        cudaFree(pointer);
      } catch (const RuntimeError &) {
        // The device is gone: nothing left to free.
      }
    });
    // Zeroed on this stream and waited for: the buffer may next be used on another stream.
    checkCuda(cudaMemsetAsync(data, 0, bytes, stream), "cudaMemsetAsync");
    synchronize();
    return owned;
  }
  std::string rejectGradient(const void *data) const override {
    return deviceMemoryProblem(device, data,
                               "not device memory (the runtime was initialised for device "
                               "buffers: ZENRT_MEMORY_DEVICE)");
  }

  void copy(void *to, const void *from, size_t bytes) override {
    DeviceScope scope(device);
    if (bytes)
      checkCuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync");
  }
  void zero(void *to, size_t bytes) override {
    DeviceScope scope(device);
    if (bytes)
      checkCuda(cudaMemsetAsync(to, 0, bytes, stream), "cudaMemsetAsync");
  }
  void upload(void *to, const void *from, size_t bytes) override {
    DeviceScope scope(device);
    if (!bytes)
      return;
    checkCuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync");
    synchronize();  // `from` is the caller's again on return
  }
  void synchronize() override {
    DeviceScope scope(device);
    checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }

  void floatToHalf(const float *in, uint16_t *out, size_t n) override {
    runOnDevice(device, [&] { cuda::floatToHalf(in, out, n, stream); });
  }
  void halfToFloat(const uint16_t *in, float *out, size_t n) override {
    runOnDevice(device, [&] { cuda::halfToFloat(in, out, n, stream); });
  }
  void floatToBF16(const float *in, uint16_t *out, size_t n) override {
    runOnDevice(device, [&] { cuda::floatToBF16(in, out, n, stream); });
  }
  void bf16ToFloat(const uint16_t *in, float *out, size_t n) override {
    runOnDevice(device, [&] { cuda::bf16ToFloat(in, out, n, stream); });
  }
  void quantizeInt8(const float *in, size_t n, uint8_t *payload) override {
    runOnDevice(device, [&] { cuda::quantizeInt8(in, n, payload, stream); });
  }
  void dequantizeInt8(const uint8_t *payload, size_t n, float *out, bool accumulate) override {
    runOnDevice(device, [&] { cuda::dequantizeInt8(payload, n, out, accumulate, stream); });
  }
  void compressSign(const float *in, size_t n, uint8_t *payload) override {
    runOnDevice(device, [&] { cuda::compressSign(in, n, payload, stream); });
  }
  void decompressSign(const uint8_t *payload, size_t n, float *out, bool accumulate) override {
    runOnDevice(device, [&] { cuda::decompressSign(payload, n, out, accumulate, stream); });
  }
  void selectTopK(const float *in, size_t n, size_t k, uint32_t *indices,
                  float *values) override {
    runOnDevice(device, [&] { cuda::selectTopK(in, n, k, indices, values, stream); });
  }
  void gather(const float *in, const uint32_t *indices, size_t k, float *values) override {
    runOnDevice(device, [&] { cuda::gather(in, indices, k, values, stream); });
  }
  void scatter(const float *values, const uint32_t *indices, size_t k, float *out,
               bool accumulate) override {
    runOnDevice(device, [&] { cuda::scatter(values, indices, k, out, accumulate, stream); });
  }
  void scale(float *data, size_t n, float factor) override {
    runOnDevice(device, [&] { cuda::scale(data, n, factor, stream); });
  }
  void subtract(const float *a, const float *b, float *out, size_t n) override {
    runOnDevice(device, [&] { cuda::subtract(a, b, out, n, stream); });
  }
  void add(const float *in, float *inout, size_t n) override {
    runOnDevice(device, [&] { cuda::add(in, inout, n, stream); });
  }
  void multiply(const float *m, size_t rows, size_t cols, const float *in, float *out,
                size_t rank, bool transposeM) override {
    runOnDevice(device,
                [&] { cuda::powerSgdMultiply(m, rows, cols, in, out, rank, transposeM, stream); });
  }
  void orthonormalise(float *p, size_t rows, size_t rank) override {
    runOnDevice(device, [&] { cuda::orthonormalise(p, rows, rank, stream); });
  }
  void outerProduct(const float *p, const float *q, size_t rows, size_t cols, size_t rank,
                    float *out) override {
    runOnDevice(device, [&] { cuda::outerProduct(p, q, rows, cols, rank, out, stream); });
  }

private:
  int device;
  cudaStream_t stream;
};

}  // namespace

std::unique_ptr<Compute> createDeviceCompute(int device, void *stream) {
  return std::make_unique<DeviceCompute>(device, static_cast<cudaStream_t>(stream));
}

}  // namespace zenrt
