//===- Scalar.h - Scalar conversions shared by CPU and CUDA kernels ---------===//
//
// Branch-free (after F. Giesen's public-domain half conversions) so CPU loops
// vectorise, and __host__ __device__ so the CUDA kernels round identically.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_LIB_SCALAR_H
#define ZENRT_LIB_SCALAR_H

#include <cstdint>
#include <cmath>
#include <cstring>

#ifdef __CUDACC__
#define ZENRT_HD __host__ __device__ __forceinline__
#else
#define ZENRT_HD inline
#endif

namespace zenrt::scalar {

ZENRT_HD uint32_t bitsOf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
ZENRT_HD float floatOf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

ZENRT_HD uint16_t toHalf(float value) {
  const uint32_t infinity32 = 255u << 23, overflow16 = (127u + 16u) << 23;
  const uint32_t denormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t x = bitsOf(value);
  uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint32_t big = x > infinity32 ? 0x7e00u : 0x7c00u;
  uint32_t denormal = bitsOf(floatOf(x) + floatOf(denormMagic)) - denormMagic;
  uint32_t odd = (x >> 13) & 1u;
  uint32_t normal = (x + ((15u - 127u) << 23) + 0xfffu + odd) >> 13;
  uint32_t out = x >= overflow16 ? big : (x < (113u << 23) ? denormal : normal);
  return uint16_t(out | (sign >> 16));
}

ZENRT_HD float fromHalf(uint16_t h) {
  const uint32_t shiftedExp = 0x7c00u << 13;
  uint32_t o = (uint32_t(h) & 0x7fffu) << 13;
  uint32_t exp = shiftedExp & o;
  o += (127u - 15u) << 23;
  uint32_t infNan = o + ((128u - 16u) << 23);
  uint32_t denormal = bitsOf(floatOf(o + (1u << 23)) - floatOf(113u << 23));
  o = exp == shiftedExp ? infNan : (exp == 0 ? denormal : o);
  return floatOf(o | ((uint32_t(h) & 0x8000u) << 16));
}

ZENRT_HD uint16_t toBF16(float value) {
  uint32_t x = bitsOf(value);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  bool isNan = (x & 0x7fffffffu) > 0x7f800000u;
  return uint16_t(isNan ? ((x >> 16) | 0x40u) : rounded);
}

ZENRT_HD float fromBF16(uint16_t b) { return floatOf(uint32_t(b) << 16); }

/// int8 code of x in a block whose inverse scale is 127 / max|x| (0 for a zero block).
/// Branch-free: round half away from zero, then clamp as an integer (|r| <= 127
/// up to rounding by construction of the scale).
ZENRT_HD int8_t quantize(float x, float inverse) {
  float r = x * inverse;
  int32_t q = int32_t(r + copysignf(0.5f, r));
  q = q < -127 ? -127 : q;
  q = q > 127 ? 127 : q;
  return int8_t(q);
}

}  // namespace zenrt::scalar

#endif  // ZENRT_LIB_SCALAR_H
