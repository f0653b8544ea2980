//===- zenrt/Kernels.h - CPU compression kernels ---------------------------===//
//
// The CPU compression kernels the executor uses, public for tests and
// benchmarks. Plain loops the compiler vectorises; no allocation except where
// noted. Error feedback is the caller's: every compressor has a matching
// decoder so residual = input - decode(encode(input)).
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_KERNELS_H
#define ZENRT_KERNELS_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zenrt::kernels {

/// IEEE binary16, round to nearest even; overflow -> infinity, NaN kept.
void floatToHalf(const float *in, uint16_t *out, size_t n);
void halfToFloat(const uint16_t *in, float *out, size_t n);
/// bfloat16, round to nearest even; NaN kept.
void floatToBF16(const float *in, uint16_t *out, size_t n);
void bf16ToFloat(const uint16_t *in, float *out, size_t n);
/// inout[i] = round(inout[i] + in[i]) in 16 bits (the reduction of fp16/bf16 collectives).
void halfSum(const uint16_t *in, uint16_t *inout, size_t n);
void bf16Sum(const uint16_t *in, uint16_t *inout, size_t n);

/// int8 with one scale per block of kInt8Block elements: q = round(x / s),
/// s = max|x| / 127 of the block (0 for an all-zero block).
inline constexpr size_t kInt8Block = 1024;
inline size_t int8ScaleCount(size_t n) { return (n + kInt8Block - 1) / kInt8Block; }
/// Bytes of an int8 payload of n elements: n values then the float scales.
inline size_t int8PayloadBytes(size_t n) { return n + 4 * int8ScaleCount(n); }
void quantizeInt8(const float *in, size_t n, uint8_t *payload);
/// out[i] (+)= dequantised value; `accumulate` adds instead of storing.
void dequantizeInt8(const uint8_t *payload, size_t n, float *out, bool accumulate);

/// Number of kept elements for a kept fraction: max(1, round(ratio * n)), at most n.
size_t keptCount(size_t n, double ratio);

/// Top-k by magnitude: threshold selection (nth_element on the candidates a
/// strided sample admits, or on all magnitudes; no full sort), then one
/// branch-free compaction; ties at the threshold are taken in index order.
/// Magnitudes compare as their bits (|x| & 0x7fffffff, as the CUDA kernel), so
/// NaN ranks above infinity. Indices ascending. `scratch` is reused across calls.
void selectTopK(const float *in, size_t n, size_t k, uint32_t *indices, float *values,
                std::vector<uint32_t> &scratch);

/// k distinct indices in [0, n), ascending, from `seed` (Floyd's sampling with
/// a splitmix64 generator): identical on every rank for the same seed.
/// `bitmap` is scratch, resized to (n + 63) / 64.
void randomKIndices(uint64_t seed, size_t n, size_t k, uint32_t *indices,
                    std::vector<uint64_t> &bitmap);

/// values[i] = in[indices[i]] (a sparse payload's values); out[indices[i]] (+)=
/// values[i], `accumulate` adding instead of storing (indices distinct).
void gather(const float *in, const uint32_t *indices, size_t k, float *values);
void scatter(const float *values, const uint32_t *indices, size_t k, float *out, bool accumulate);

/// Sign compression (EF-SignSGD): one bit per element (1 = x >= 0) and the
/// scale mean|x|. Payload: ceil(n/8) bytes of bits then the float scale.
inline size_t signPayloadBytes(size_t n) { return (n + 7) / 8 + 4; }
void compressSign(const float *in, size_t n, uint8_t *payload);
/// out[i] (+)= scale * (bit ? 1 : -1).
void decompressSign(const uint8_t *payload, size_t n, float *out, bool accumulate);

/// out[i] = a[i] - b[i] (residual update), and out[i] *= factor (averaging).
void subtract(const float *a, const float *b, float *out, size_t n);
void scale(float *data, size_t n, float factor);
void add(const float *in, float *inout, size_t n);

}  // namespace zenrt::kernels

#endif  // ZENRT_KERNELS_H
