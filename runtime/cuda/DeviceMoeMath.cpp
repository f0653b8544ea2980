//===- DeviceMoeMath.cpp - The MoE layer's buffers and kernels on a device ---===//
//
// Device memory of one CUDA device and the kernels of MoeKernels.cu and CudaKernels.cu, all
// queued on a stream of its own: the NCCL backend's all-to-alls run on theirs, and Moe.cpp
// synchronises this one before a collective reads what a kernel wrote. Errors are the
// backends' RuntimeError, which Moe.cpp reports as zenrt::Error.
//
//===----------------------------------------------------------------------===//
#include "../lib/MoeMath.h"

#include "DeviceScope.h"
#include "MoeKernels.h"
#include "zenrt/CudaKernels.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace zenrt {
namespace {

void checkCuda(cudaError_t code, const char *what) {
  if (code != cudaSuccess)
    throw RuntimeError(ZENRT_ERR_BACKEND, std::string("MoE layer: ") + what + ": " +
                                              cudaGetErrorString(code));
}

class DeviceMoeMath final : public MoeMath {
public:
  explicit DeviceMoeMath(int device) : device(device) {
    DeviceScope scope(device);
    checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~DeviceMoeMath() override {
    int previous = device;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
    cudaSetDevice(previous);
  }
  DeviceMoeMath(const DeviceMoeMath &) = delete;
  DeviceMoeMath &operator=(const DeviceMoeMath &) = delete;

  bool onDevice() const override { return true; }
  std::string rejectBuffer(const void *data) const override {
    return deviceMemoryProblem(device, data, "host memory, but the layer runs in device memory");
  }
  std::shared_ptr<void> allocate(size_t bytes) override {
    DeviceScope scope(device);
    void *data = nullptr;
    if (cudaMalloc(&data, bytes ? bytes : 1) != cudaSuccess) {
      cudaGetLastError(); // clears the error of the failed allocation
      throw RuntimeError(ZENRT_ERR_BACKEND, "MoE layer: cannot allocate " +
                                                std::to_string(bytes) + " bytes on CUDA device " +
                                                std::to_string(device));
    }
    std::shared_ptr<void> owned(data, [device = device](void *pointer) {
      int previous = device;
      cudaGetDevice(&previous);
      cudaSetDevice(device);
      cudaFree(pointer); // waits for the work that uses it
      cudaSetDevice(previous);
    });
    checkCuda(cudaMemsetAsync(data, 0, bytes, stream), "cudaMemsetAsync");
    return owned;
  }
  void synchronize() override {
    DeviceScope scope(device);
    checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  void download(void *host, const void *from, size_t bytes) override {
    DeviceScope scope(device);
    if (bytes)
      checkCuda(cudaMemcpyAsync(host, from, bytes, cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync");
    synchronize();
  }
  void copyRows(void *to, size_t toPitch, const void *from, size_t fromPitch, size_t rowBytes,
                size_t rows) override {
    DeviceScope scope(device);
    if (rows && rowBytes)
      checkCuda(cudaMemcpy2DAsync(to, toPitch, from, fromPitch, rowBytes, rows,
                                  cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpy2DAsync");
  }
  void encodeRows(moe::TokenFormat format, const float *rows, size_t count, size_t width,
                  uint8_t *out) override {
    runOnDevice(device, [&] {
      auto *halves = reinterpret_cast<uint16_t *>(out);
      if (format == moe::TokenFormat::Fp16)
        cuda::floatToHalf(rows, halves, count * width, stream);
      else if (format == moe::TokenFormat::Bf16)
        cuda::floatToBF16(rows, halves, count * width, stream);
      else
        cuda::moe::quantizeRows(rows, count, width, out, stream);
    });
  }
  void decodeRows(moe::TokenFormat format, const uint8_t *in, size_t count, size_t width,
                  float *rows) override {
    runOnDevice(device, [&] {
      const auto *halves = reinterpret_cast<const uint16_t *>(in);
      if (format == moe::TokenFormat::Fp16)
        cuda::halfToFloat(halves, rows, count * width, stream);
      else if (format == moe::TokenFormat::Bf16)
        cuda::bf16ToFloat(halves, rows, count * width, stream);
      else
        cuda::moe::dequantizeRows(in, count, width, rows, stream);
    });
  }
  void rowProduct(const float *x, size_t n, size_t k, const float *w, size_t m, bool transposed,
                  float *out) override {
    runOnDevice(device, [&] { cuda::moe::rowProduct(x, n, k, w, m, transposed, out, stream); });
  }
  void addBias(float *rows, size_t n, size_t m, const float *bias) override {
    runOnDevice(device, [&] { cuda::moe::addBias(rows, n, m, bias, stream); });
  }
  void relu(float *data, size_t count) override {
    runOnDevice(device, [&] { cuda::moe::relu(data, count, stream); });
  }
  void reluGradient(const float *units, float *gradient, size_t count) override {
    runOnDevice(device, [&] { cuda::moe::reluGradient(units, gradient, count, stream); });
  }
  void accumulateTransposedProduct(const float *a, size_t n, size_t ka, const float *b,
                                   size_t kb, float *out) override {
    runOnDevice(device,
                [&] { cuda::moe::accumulateTransposedProduct(a, n, ka, b, kb, out, stream); });
  }
  void accumulateRows(const float *rows, size_t n, size_t width, float *out) override {
    runOnDevice(device, [&] { cuda::moe::accumulateRows(rows, n, width, out, stream); });
  }

private:
  int device;
  cudaStream_t stream = nullptr;
};

} // namespace

std::unique_ptr<MoeMath> createDeviceMoeMath(int device) {
  return std::make_unique<DeviceMoeMath>(device);
}

} // namespace zenrt
