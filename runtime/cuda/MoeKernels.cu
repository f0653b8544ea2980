//===- MoeKernels.cu - CUDA kernels of the MoE layer's experts -------------===//
#include "MoeKernels.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace zenrt::cuda::moe {
namespace {

void checkLaunch(const char *what) {
  cudaError_t code = cudaGetLastError();
  if (code != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(code));
}

constexpr int kThreads = 256;
constexpr int kTile = 16;
unsigned blocksFor(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

/// Tiles of 16 x 16 outputs; each thread adds its output's k terms in ascending order (tiles
/// of the k terms in order, then the terms of a tile in order).
__global__ void rowProductKernel(const float *x, int64_t n, int64_t k, const float *w, int64_t m,
                                 bool transposed, float *out) {
  __shared__ float rows[kTile][kTile], weights[kTile][kTile];
  const int64_t i = int64_t(blockIdx.x) * kTile + threadIdx.y;
  const int64_t j = int64_t(blockIdx.y) * kTile + threadIdx.x;
  float sum = 0.0f;
  for (int64_t t0 = 0; t0 < k; t0 += kTile) {
    const int64_t tx = t0 + threadIdx.x, ty = t0 + threadIdx.y;
    rows[threadIdx.y][threadIdx.x] = i < n && tx < k ? x[i * k + tx] : 0.0f;
    weights[threadIdx.y][threadIdx.x] =
        j < m && ty < k ? (transposed ? w[j * k + ty] : w[ty * m + j]) : 0.0f;
    __syncthreads();
    const int terms = int(k - t0 < kTile ? k - t0 : kTile);
    for (int t = 0; t < terms; ++t)
      sum = fmaf(rows[threadIdx.y][t], weights[t][threadIdx.x], sum);
    __syncthreads();
  }
  if (i < n && j < m)
    out[i * m + j] = sum;
}

__global__ void transposedProductKernel(const float *a, int64_t n, int64_t ka, const float *b,
                                        int64_t kb, float *out) {
  __shared__ float left[kTile][kTile], right[kTile][kTile];
  const int64_t i = int64_t(blockIdx.x) * kTile + threadIdx.y;
  const int64_t j = int64_t(blockIdx.y) * kTile + threadIdx.x;
  const int64_t li = int64_t(blockIdx.x) * kTile + threadIdx.x; // the column this thread loads
  float sum = 0.0f;
  for (int64_t r0 = 0; r0 < n; r0 += kTile) {
    const int64_t r = r0 + threadIdx.y;
    left[threadIdx.y][threadIdx.x] = r < n && li < ka ? a[r * ka + li] : 0.0f;
    right[threadIdx.y][threadIdx.x] = r < n && j < kb ? b[r * kb + j] : 0.0f;
    __syncthreads();
    const int terms = int(n - r0 < kTile ? n - r0 : kTile);
    for (int t = 0; t < terms; ++t)
      sum = fmaf(left[t][threadIdx.y], right[t][threadIdx.x], sum);
    __syncthreads();
  }
  if (i < ka && j < kb)
    out[i * kb + j] += sum;
}

__global__ void accumulateRowsKernel(const float *rows, int64_t n, int64_t width, float *out) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= width)
    return;
  float sum = out[j];
  for (int64_t r = 0; r < n; ++r)
    sum += rows[r * width + j];
  out[j] = sum;
}

__global__ void addBiasKernel(float *rows, size_t count, int64_t m, const float *bias) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count)
    rows[i] += bias[int64_t(i % size_t(m))];
}

__global__ void reluKernel(float *data, size_t count) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count && !(data[i] > 0.0f))
    data[i] = 0.0f;
}

__global__ void reluGradientKernel(const float *units, float *gradient, size_t count) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count && !(units[i] > 0.0f))
    gradient[i] = 0.0f;
}

/// One block per row: the row's largest magnitude, then its scale and values.
__global__ void quantizeRowsKernel(const float *rows, int64_t width, uint8_t *out) {
  __shared__ float largest[kThreads];
  const float *row = rows + int64_t(blockIdx.x) * width;
  uint8_t *to = out + int64_t(blockIdx.x) * (int64_t(sizeof(float)) + width);
  float most = 0.0f;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x)
    most = fmaxf(most, fabsf(row[i]));
  largest[threadIdx.x] = most;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half)
      largest[threadIdx.x] = fmaxf(largest[threadIdx.x], largest[threadIdx.x + half]);
    __syncthreads();
  }
  const float scale = largest[0] / 127.0f;
  if (threadIdx.x == 0)
    memcpy(to, &scale, sizeof scale);
  auto *values = reinterpret_cast<int8_t *>(to + sizeof scale);
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x)
    values[i] = scale > 0.0f ? int8_t(fminf(fmaxf(rintf(row[i] / scale), -127.0f), 127.0f))
                             : int8_t(0);
}

__global__ void dequantizeRowsKernel(const uint8_t *in, size_t count, int64_t width,
                                     float *rows) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count)
    return;
  const int64_t r = int64_t(i / size_t(width)), c = int64_t(i % size_t(width));
  const uint8_t *from = in + r * (int64_t(sizeof(float)) + width);
  float scale;
  memcpy(&scale, from, sizeof scale);
  rows[i] = float(reinterpret_cast<const int8_t *>(from + sizeof scale)[c]) * scale;
}

dim3 tilesFor(size_t rows, size_t columns) {
  const size_t y = (columns + kTile - 1) / kTile;
  if (y > 65535)
    throw std::runtime_error("MoE kernel: more than 2^20 output columns");
  return dim3(unsigned((rows + kTile - 1) / kTile), unsigned(y));
}

} // namespace

void rowProduct(const float *x, size_t n, size_t k, const float *w, size_t m, bool transposed,
                float *out, cudaStream_t stream) {
  if (n == 0 || m == 0)
    return;
  rowProductKernel<<<tilesFor(n, m), dim3(kTile, kTile), 0, stream>>>(
      x, int64_t(n), int64_t(k), w, int64_t(m), transposed, out);
  checkLaunch("MoE rowProduct kernel");
}

void accumulateTransposedProduct(const float *a, size_t n, size_t ka, const float *b, size_t kb,
                                 float *out, cudaStream_t stream) {
  if (ka == 0 || kb == 0)
    return;
  transposedProductKernel<<<tilesFor(ka, kb), dim3(kTile, kTile), 0, stream>>>(
      a, int64_t(n), int64_t(ka), b, int64_t(kb), out);
  checkLaunch("MoE transposed product kernel");
}

void accumulateRows(const float *rows, size_t n, size_t width, float *out, cudaStream_t stream) {
  if (width == 0)
    return;
  accumulateRowsKernel<<<blocksFor(width), kThreads, 0, stream>>>(rows, int64_t(n),
                                                                  int64_t(width), out);
  checkLaunch("MoE row sum kernel");
}

void addBias(float *rows, size_t n, size_t m, const float *bias, cudaStream_t stream) {
  if (n * m == 0)
    return;
  addBiasKernel<<<blocksFor(n * m), kThreads, 0, stream>>>(rows, n * m, int64_t(m), bias);
  checkLaunch("MoE bias kernel");
}

void relu(float *data, size_t count, cudaStream_t stream) {
  if (count == 0)
    return;
  reluKernel<<<blocksFor(count), kThreads, 0, stream>>>(data, count);
  checkLaunch("MoE ReLU kernel");
}

void reluGradient(const float *units, float *gradient, size_t count, cudaStream_t stream) {
  if (count == 0)
    return;
  reluGradientKernel<<<blocksFor(count), kThreads, 0, stream>>>(units, gradient, count);
  checkLaunch("MoE ReLU gradient kernel");
}

void quantizeRows(const float *rows, size_t count, size_t width, uint8_t *out,
                  cudaStream_t stream) {
  if (count == 0)
    return;
  quantizeRowsKernel<<<unsigned(count), kThreads, 0, stream>>>(rows, int64_t(width), out);
  checkLaunch("MoE int8 row kernel");
}

void dequantizeRows(const uint8_t *in, size_t count, size_t width, float *rows,
                    cudaStream_t stream) {
  if (count * width == 0)
    return;
  dequantizeRowsKernel<<<blocksFor(count * width), kThreads, 0, stream>>>(
      in, count * width, int64_t(width), rows);
  checkLaunch("MoE int8 row decode kernel");
}

} // namespace zenrt::cuda::moe
