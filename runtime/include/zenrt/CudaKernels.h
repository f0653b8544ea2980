//===- zenrt/CudaKernels.h - CUDA compression kernels -------------------------===//
//
// The GPU twins of zenrt/Kernels.h, on device pointers and a CUDA stream, with
// the same payload layouts and rounding so CPU and GPU results agree bit for
// bit (top-k: the same set; PowerSGD: cuBLAS). Available when libzenrt was
// built with CUDA (ZENRT_HAVE_CUDA). Errors throw std::runtime_error.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_CUDA_KERNELS_H
#define ZENRT_CUDA_KERNELS_H

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace zenrt::cuda {

/// Number of CUDA devices, 0 when there is no usable driver or device.
int deviceCount();

void floatToHalf(const float *in, uint16_t *out, size_t n, cudaStream_t stream);
void halfToFloat(const uint16_t *in, float *out, size_t n, cudaStream_t stream);
void floatToBF16(const float *in, uint16_t *out, size_t n, cudaStream_t stream);
void bf16ToFloat(const uint16_t *in, float *out, size_t n, cudaStream_t stream);
/// int8 payload as kernels::quantizeInt8: n values then one float scale per 1024.
void quantizeInt8(const float *in, size_t n, uint8_t *payload, cudaStream_t stream);
void dequantizeInt8(const uint8_t *payload, size_t n, float *out, bool accumulate,
                    cudaStream_t stream);
/// Sign payload as kernels::compressSign: ceil(n/8) bytes of bits then the scale.
void compressSign(const float *in, size_t n, uint8_t *payload, cudaStream_t stream);
void decompressSign(const uint8_t *payload, size_t n, float *out, bool accumulate,
                    cudaStream_t stream);
/// Top-k by threshold selection (bisection on the magnitude's bits, counting
/// passes; no sort of the input). Indices ascending, ties in index order, as
/// kernels::selectTopK. Synchronises `stream`.
void selectTopK(const float *in, size_t n, size_t k, uint32_t *indices, float *values,
                cudaStream_t stream);
/// values[i] = in[indices[i]]; out[indices[i]] (+)= values[i].
void gather(const float *in, const uint32_t *indices, size_t k, float *values,
            cudaStream_t stream);
void scatter(const float *values, const uint32_t *indices, size_t k, float *out, bool accumulate,
             cudaStream_t stream);
void scale(float *data, size_t n, float factor, cudaStream_t stream);
void subtract(const float *a, const float *b, float *out, size_t n, cudaStream_t stream);
/// inout[i] += in[i].
void add(const float *in, float *inout, size_t n, cudaStream_t stream);

/// PowerSGD factor step with cuBLAS on column-major matrices:
/// p[rows x r] = m[rows x cols] * q[cols x r] (transposeM = false) or
/// q[cols x r] = m^T * p (transposeM = true).
void powerSgdMultiply(const float *m, size_t rows, size_t cols, const float *in, float *out,
                      size_t rank, bool transposeM, cudaStream_t stream);
/// out[rows x cols] = p[rows x r] * q[cols x r]^T (the PowerSGD approximation).
void outerProduct(const float *p, const float *q, size_t rows, size_t cols, size_t rank,
                  float *out, cudaStream_t stream);
/// Orthonormalises the columns of p[rows x r] in place (modified Gram-Schmidt).
void orthonormalise(float *p, size_t rows, size_t rank, cudaStream_t stream);

}  // namespace zenrt::cuda

#endif  // ZENRT_CUDA_KERNELS_H
