//===- MoeKernels.h - CUDA kernels of the MoE layer's experts (internal) ---===//
//
// Launchers on a stream, for DeviceMoeMath.cpp; each throws std::runtime_error when a launch
// fails. The products add each output's terms in ascending order, one thread per output, so a
// row's result never depends on how many rows come with it.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_CUDA_MOEKERNELS_H
#define ZENRT_CUDA_MOEKERNELS_H

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace zenrt::cuda::moe {

/// out[n x m] = x[n x k] * w^T with w [m x k] (transposed), or x * w with w [k x m].
void rowProduct(const float *x, size_t n, size_t k, const float *w, size_t m, bool transposed,
                float *out, cudaStream_t stream);
/// out[ka x kb] += a[n x ka]^T * b[n x kb].
void accumulateTransposedProduct(const float *a, size_t n, size_t ka, const float *b, size_t kb,
                                 float *out, cudaStream_t stream);
/// out[width] += rows[0], rows[1], ... in order.
void accumulateRows(const float *rows, size_t n, size_t width, float *out, cudaStream_t stream);
void addBias(float *rows, size_t n, size_t m, const float *bias, cudaStream_t stream);
void relu(float *data, size_t count, cudaStream_t stream);
/// gradient = units > 0 ? gradient : 0.
void reluGradient(const float *units, float *gradient, size_t count, cudaStream_t stream);
/// Each row of `width` floats as its fp32 scale max |x| / 127, then round(x / scale) as int8
/// (the layout and rounding of Moe.cpp's host rows); and back.
void quantizeRows(const float *rows, size_t count, size_t width, uint8_t *out,
                  cudaStream_t stream);
void dequantizeRows(const uint8_t *in, size_t count, size_t width, float *rows,
                    cudaStream_t stream);

} // namespace zenrt::cuda::moe

#endif // ZENRT_CUDA_MOEKERNELS_H
