//===- CudaKernels.cu - CUDA compression kernels -----------------------------===//
#include "zenrt/CudaKernels.h"

#include "../lib/Scalar.h"
#include "zenrt/Kernels.h"

#include <cub/device/device_scan.cuh>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace zenrt::cuda {
namespace {

void check(cudaError_t code, const char *what) {
  if (code != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(code));
}
void check(cublasStatus_t code, const char *what) {
  if (code != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(int(code)));
}

constexpr int kThreads = 256;
unsigned blocksFor(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

/// A device buffer freed on scope exit (stream-ordered).
template <typename T> struct DeviceBuffer {
  DeviceBuffer(size_t count, cudaStream_t stream) : stream(stream) {
    check(cudaMallocAsync(reinterpret_cast<void **>(&data), count * sizeof(T) + 1, stream),
          "cudaMallocAsync");
  }
  ~DeviceBuffer() { cudaFreeAsync(data, stream); }
  T *data = nullptr;
  cudaStream_t stream;
};

__global__ void toHalfKernel(const float *in, uint16_t *out, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = scalar::toHalf(in[i]);
}
__global__ void fromHalfKernel(const uint16_t *in, float *out, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = scalar::fromHalf(in[i]);
}
__global__ void toBF16Kernel(const float *in, uint16_t *out, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = scalar::toBF16(in[i]);
}
__global__ void fromBF16Kernel(const uint16_t *in, float *out, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = scalar::fromBF16(in[i]);
}

/// One CUDA block per int8 block of 1024 elements: max |x|, then the codes.
__global__ void quantizeInt8Kernel(const float *in, size_t n, uint8_t *payload) {
  __shared__ float partial[kThreads];
  size_t begin = size_t(blockIdx.x) * kernels::kInt8Block;
  size_t end = min(n, begin + kernels::kInt8Block);
  float maxAbs = 0;
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    maxAbs = fmaxf(maxAbs, fabsf(in[i]));
  partial[threadIdx.x] = maxAbs;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + stride]);
    __syncthreads();
  }
  maxAbs = partial[0];
  float inverse = maxAbs > 0 ? __fdiv_rn(127.0f, maxAbs) : 0.0f;
  int8_t *values = reinterpret_cast<int8_t *>(payload);
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    values[i] = scalar::quantize(in[i], inverse);
  if (threadIdx.x == 0) {
    float scale = __fdiv_rn(maxAbs, 127.0f);
    memcpy(payload + n + 4 * blockIdx.x, &scale, 4);
  }
}
__global__ void dequantizeInt8Kernel(const uint8_t *payload, size_t n, float *out,
                                     bool accumulate) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float scale;
  memcpy(&scale, payload + n + 4 * (i / kernels::kInt8Block), 4);
  float value = __fmul_rn(float(reinterpret_cast<const int8_t *>(payload)[i]), scale);
  out[i] = accumulate ? __fadd_rn(out[i], value) : value;
}

__global__ void signBitsKernel(const float *in, size_t n, uint8_t *payload, double *sumAbs) {
  size_t byte = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t begin = byte * 8;
  if (begin >= n)
    return;
  uint8_t bits = 0;
  double magnitude = 0;
  for (size_t i = begin; i < begin + 8 && i < n; ++i) {
    bits |= uint8_t(in[i] >= 0) << (i - begin);
    magnitude += fabs(double(in[i]));
  }
  payload[byte] = bits;
  atomicAdd(sumAbs, magnitude);
}
__global__ void signScaleKernel(const double *sumAbs, size_t n, uint8_t *payload) {
  float scale = float(*sumAbs / double(n));
  memcpy(payload + (n + 7) / 8, &scale, 4);
}
__global__ void decompressSignKernel(const uint8_t *payload, size_t n, float *out,
                                     bool accumulate) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float scale;
  memcpy(&scale, payload + (n + 7) / 8, 4);
  float value = ((payload[i / 8] >> (i % 8)) & 1u) ? scale : -scale;
  out[i] = accumulate ? out[i] + value : value;
}

__global__ void countAtLeastKernel(const float *in, size_t n, uint32_t threshold,
                                   unsigned long long *count) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  bool hit = i < n && (scalar::bitsOf(in[i]) & 0x7fffffffu) >= threshold;
  unsigned votes = __popc(__ballot_sync(0xffffffffu, hit));
  if ((threadIdx.x & 31) == 0 && votes)
    atomicAdd(count, (unsigned long long)votes);
}
__global__ void flagKernel(const float *in, size_t n, uint32_t threshold, uint32_t *above,
                           uint32_t *tie) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  uint32_t magnitude = scalar::bitsOf(in[i]) & 0x7fffffffu;
  above[i] = magnitude > threshold;
  tie[i] = magnitude == threshold;
}
__global__ void keepKernel(const uint32_t *above, const uint32_t *tie, const uint32_t *tieRank,
                           size_t n, uint32_t ties, uint32_t *keep) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    keep[i] = above[i] || (tie[i] && tieRank[i] < ties);
}
__global__ void compactKernel(const float *in, const uint32_t *keep, const uint32_t *position,
                              size_t n, uint32_t *indices, float *values) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && keep[i]) {
    indices[position[i]] = uint32_t(i);
    values[position[i]] = in[i];
  }
}
__global__ void gatherKernel(const float *in, const uint32_t *indices, size_t k, float *values) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < k)
    values[i] = in[indices[i]];
}
__global__ void scatterKernel(const float *values, const uint32_t *indices, size_t k, float *out,
                              bool accumulate) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < k) {
    if (accumulate)
      atomicAdd(out + indices[i], values[i]);
    else
      out[indices[i]] = values[i];
  }
}
__global__ void scaleKernel(float *data, size_t n, float factor) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    data[i] *= factor;
}
__global__ void subtractKernel(const float *a, const float *b, float *out, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = a[i] - b[i];
}
__global__ void addKernel(const float *in, float *inout, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    inout[i] += in[i];
}

void exclusiveSum(const uint32_t *in, uint32_t *out, size_t n, cudaStream_t stream) {
  size_t bytes = 0;
  check(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, n, stream), "cub scan");
  DeviceBuffer<uint8_t> temp(bytes, stream);
  check(cub::DeviceScan::ExclusiveSum(temp.data, bytes, in, out, n, stream), "cub scan");
}

cublasHandle_t cublasFor(cudaStream_t stream) {
  thread_local cublasHandle_t handle = nullptr;
  if (!handle)
    check(cublasCreate(&handle), "cublasCreate");
  check(cublasSetStream(handle, stream), "cublasSetStream");
  return handle;
}

}  // namespace

int deviceCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

void floatToHalf(const float *in, uint16_t *out, size_t n, cudaStream_t s) {
  if (n)
    toHalfKernel<<<blocksFor(n), kThreads, 0, s>>>(in, out, n);
  check(cudaGetLastError(), "floatToHalf");
}
void halfToFloat(const uint16_t *in, float *out, size_t n, cudaStream_t s) {
  if (n)
    fromHalfKernel<<<blocksFor(n), kThreads, 0, s>>>(in, out, n);
  check(cudaGetLastError(), "halfToFloat");
}
void floatToBF16(const float *in, uint16_t *out, size_t n, cudaStream_t s) {
  if (n)
    toBF16Kernel<<<blocksFor(n), kThreads, 0, s>>>(in, out, n);
  check(cudaGetLastError(), "floatToBF16");
}
void bf16ToFloat(const uint16_t *in, float *out, size_t n, cudaStream_t s) {
  if (n)
    fromBF16Kernel<<<blocksFor(n), kThreads, 0, s>>>(in, out, n);
  check(cudaGetLastError(), "bf16ToFloat");
}
void quantizeInt8(const float *in, size_t n, uint8_t *payload, cudaStream_t s) {
  if (n)
    quantizeInt8Kernel<<<unsigned(kernels::int8ScaleCount(n)), kThreads, 0, s>>>(in, n, payload);
  check(cudaGetLastError(), "quantizeInt8");
}
void dequantizeInt8(const uint8_t *payload, size_t n, float *out, bool accumulate,
                    cudaStream_t s) {
  if (n)
    dequantizeInt8Kernel<<<blocksFor(n), kThreads, 0, s>>>(payload, n, out, accumulate);
  check(cudaGetLastError(), "dequantizeInt8");
}
void compressSign(const float *in, size_t n, uint8_t *payload, cudaStream_t s) {
  DeviceBuffer<double> sum(1, s);
  check(cudaMemsetAsync(sum.data, 0, sizeof(double), s), "cudaMemsetAsync");
  if (n)
    signBitsKernel<<<blocksFor((n + 7) / 8), kThreads, 0, s>>>(in, n, payload, sum.data);
  signScaleKernel<<<1, 1, 0, s>>>(sum.data, n ? n : 1, payload);
  check(cudaGetLastError(), "compressSign");
}
void decompressSign(const uint8_t *payload, size_t n, float *out, bool accumulate,
                    cudaStream_t s) {
  if (n)
    decompressSignKernel<<<blocksFor(n), kThreads, 0, s>>>(payload, n, out, accumulate);
  check(cudaGetLastError(), "decompressSign");
}

void selectTopK(const float *in, size_t n, size_t k, uint32_t *indices, float *values,
                cudaStream_t s) {
  if (k == 0 || k > n)
    throw std::runtime_error("selectTopK: k must be in [1, n]");
  DeviceBuffer<unsigned long long> count(1, s);
  auto countAtLeast = [&](uint32_t threshold) {
    check(cudaMemsetAsync(count.data, 0, sizeof(unsigned long long), s), "cudaMemsetAsync");
    countAtLeastKernel<<<blocksFor(n), kThreads, 0, s>>>(in, n, threshold, count.data);
    unsigned long long host = 0;
    check(cudaMemcpyAsync(&host, count.data, sizeof(host), cudaMemcpyDeviceToHost, s), "copy");
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    return host;
  };
  // The k-th largest magnitude's bits: the largest T with count(|x| >= T) >= k.
  uint32_t threshold = 0;
  for (int bit = 30; bit >= 0; --bit) {
    uint32_t candidate = threshold | (1u << bit);
    if (countAtLeast(candidate) >= k)
      threshold = candidate;
  }
  uint32_t above = threshold == 0x7fffffffu ? 0 : uint32_t(countAtLeast(threshold + 1));
  DeviceBuffer<uint32_t> aboveFlags(n, s), tieFlags(n, s), tieRank(n, s), keep(n, s), position(n, s);
  flagKernel<<<blocksFor(n), kThreads, 0, s>>>(in, n, threshold, aboveFlags.data, tieFlags.data);
  exclusiveSum(tieFlags.data, tieRank.data, n, s);
  keepKernel<<<blocksFor(n), kThreads, 0, s>>>(aboveFlags.data, tieFlags.data, tieRank.data, n,
                                                uint32_t(k) - above, keep.data);
  exclusiveSum(keep.data, position.data, n, s);
  compactKernel<<<blocksFor(n), kThreads, 0, s>>>(in, keep.data, position.data, n, indices, values);
  check(cudaGetLastError(), "selectTopK");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

void gather(const float *in, const uint32_t *indices, size_t k, float *values, cudaStream_t s) {
  if (k)
    gatherKernel<<<blocksFor(k), kThreads, 0, s>>>(in, indices, k, values);
  check(cudaGetLastError(), "gather");
}
void scatter(const float *values, const uint32_t *indices, size_t k, float *out, bool accumulate,
             cudaStream_t s) {
  if (k)
    scatterKernel<<<blocksFor(k), kThreads, 0, s>>>(values, indices, k, out, accumulate);
  check(cudaGetLastError(), "scatter");
}
void scale(float *data, size_t n, float factor, cudaStream_t s) {
  if (n)
    scaleKernel<<<blocksFor(n), kThreads, 0, s>>>(data, n, factor);
  check(cudaGetLastError(), "scale");
}
void subtract(const float *a, const float *b, float *out, size_t n, cudaStream_t s) {
  if (n)
    subtractKernel<<<blocksFor(n), kThreads, 0, s>>>(a, b, out, n);
  check(cudaGetLastError(), "subtract");
}

void add(const float *in, float *inout, size_t n, cudaStream_t s) {
  if (n)
    addKernel<<<blocksFor(n), kThreads, 0, s>>>(in, inout, n);
  check(cudaGetLastError(), "add");
}
void powerSgdMultiply(const float *m, size_t rows, size_t cols, const float *in, float *out,
                      size_t rank, bool transposeM, cudaStream_t s) {
  cublasHandle_t handle = cublasFor(s);
  const float one = 1.0f, zero = 0.0f;
  if (!transposeM)
    check(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(rows), int(rank), int(cols), &one, m,
                      int(rows), in, int(cols), &zero, out, int(rows)),
          "cublasSgemm");
  else
    check(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(cols), int(rank), int(rows), &one, m,
                      int(rows), in, int(rows), &zero, out, int(cols)),
          "cublasSgemm");
}

void outerProduct(const float *p, const float *q, size_t rows, size_t cols, size_t rank,
                  float *out, cudaStream_t s) {
  cublasHandle_t handle = cublasFor(s);
  const float one = 1.0f, zero = 0.0f;
  check(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, int(rows), int(cols), int(rank), &one, p,
                    int(rows), q, int(cols), &zero, out, int(rows)),
        "cublasSgemm");
}
void orthonormalise(float *p, size_t rows, size_t rank, cudaStream_t s) {
  cublasHandle_t handle = cublasFor(s);
  check(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  for (size_t j = 0; j < rank; ++j) {
    float *column = p + j * rows;
    for (size_t i = 0; i < j; ++i) {
      float dot = 0;
      check(cublasSdot(handle, int(rows), p + i * rows, 1, column, 1, &dot), "cublasSdot");
      float minus = -dot;
      check(cublasSaxpy(handle, int(rows), &minus, p + i * rows, 1, column, 1), "cublasSaxpy");
    }
    float norm = 0;
    check(cublasSnrm2(handle, int(rows), column, 1, &norm), "cublasSnrm2");
    float inverse = norm > 1e-30f ? 1.0f / norm : 0.0f;
    check(cublasSscal(handle, int(rows), &inverse, column, 1), "cublasSscal");
  }
}

}  // namespace zenrt::cuda
