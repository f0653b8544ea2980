//===- Kernels.cpp - CPU compression kernels ---------------------------------===//
#include "zenrt/Kernels.h"

#include "Scalar.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace zenrt::kernels {
namespace {

using namespace scalar;

inline uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

// The hot loops are compiled twice, for AVX2 and the baseline, and picked at load
// time (GCC function multiversioning): vector speed without a -march requirement.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZENRT_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ZENRT_VECTOR_CLONES
#endif

ZENRT_VECTOR_CLONES
void floatToHalf(const float *in, uint16_t *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = toHalf(in[i]);
}
ZENRT_VECTOR_CLONES
void halfToFloat(const uint16_t *in, float *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = fromHalf(in[i]);
}
ZENRT_VECTOR_CLONES
void floatToBF16(const float *in, uint16_t *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = toBF16(in[i]);
}
ZENRT_VECTOR_CLONES
void bf16ToFloat(const uint16_t *in, float *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = fromBF16(in[i]);
}
ZENRT_VECTOR_CLONES
void halfSum(const uint16_t *in, uint16_t *inout, size_t n) {
  for (size_t i = 0; i < n; ++i)
    inout[i] = toHalf(fromHalf(in[i]) + fromHalf(inout[i]));
}
ZENRT_VECTOR_CLONES
void bf16Sum(const uint16_t *in, uint16_t *inout, size_t n) {
  for (size_t i = 0; i < n; ++i)
    inout[i] = toBF16(fromBF16(in[i]) + fromBF16(inout[i]));
}

ZENRT_VECTOR_CLONES
void quantizeInt8(const float *in, size_t n, uint8_t *payload) {
  int8_t *values = reinterpret_cast<int8_t *>(payload);
  uint8_t *scaleBytes = payload + n;
  for (size_t block = 0, begin = 0; begin < n; ++block, begin += kInt8Block) {
    size_t end = std::min(n, begin + kInt8Block);
    // max |x| on the magnitude bits: an integer max reduction the compiler vectorises
    // (float max is not reassociable without -ffast-math).
    uint32_t maxBits = 0;
    for (size_t i = begin; i < end; ++i)
      maxBits = std::max(maxBits, bitsOf(in[i]) & 0x7fffffffu);
    float maxAbs = floatOf(maxBits);
    float scale = maxAbs / 127.0f;
    float inverse = maxAbs > 0 ? 127.0f / maxAbs : 0.0f;
    for (size_t i = begin; i < end; ++i)
      values[i] = quantize(in[i], inverse);
    std::memcpy(scaleBytes + 4 * block, &scale, 4);
  }
}

ZENRT_VECTOR_CLONES
void dequantizeInt8(const uint8_t *payload, size_t n, float *out, bool accumulate) {
  const int8_t *values = reinterpret_cast<const int8_t *>(payload);
  const uint8_t *scaleBytes = payload + n;
  for (size_t block = 0, begin = 0; begin < n; ++block, begin += kInt8Block) {
    size_t end = std::min(n, begin + kInt8Block);
    float scale;
    std::memcpy(&scale, scaleBytes + 4 * block, 4);
    if (accumulate)
      for (size_t i = begin; i < end; ++i)
        out[i] += float(values[i]) * scale;
    else
      for (size_t i = begin; i < end; ++i)
        out[i] = float(values[i]) * scale;
  }
}

namespace {
/// The k-th largest |x|, exactly. For large inputs a strided sample gives a lower
/// bound t that about 2k elements reach; nth_element then runs on those
/// candidates only (one vectorised counting pass and one gather over the input).
/// Falls back to nth_element on all magnitudes when the sample misleads.
float kthLargestMagnitude(const float *in, size_t n, size_t k, std::vector<float> &scratch) {
  constexpr size_t kSample = 4096;
  if (n >= 16 * kSample && k <= n / 8) {
    size_t stride = n / kSample;
    scratch.resize(kSample);
    for (size_t s = 0; s < kSample; ++s)
      scratch[s] = std::fabs(in[s * stride]);
    size_t expected = std::max<size_t>(8, 2 * k * kSample / n);
    size_t rank = kSample - std::min(kSample, expected);
    std::nth_element(scratch.begin(), scratch.begin() + long(rank), scratch.end());
    float bound = scratch[rank];
    size_t candidates = 0;
    for (size_t i = 0; i < n; ++i)
      candidates += std::fabs(in[i]) >= bound;
    if (candidates >= k && candidates <= n / 4) {
      scratch.resize(candidates);
      size_t out = 0;
      for (size_t i = 0; i < n; ++i)
        if (std::fabs(in[i]) >= bound)
          scratch[out++] = std::fabs(in[i]);
      std::nth_element(scratch.begin(), scratch.begin() + long(candidates - k), scratch.end());
      return scratch[candidates - k];
    }
  }
  scratch.resize(n);
  for (size_t i = 0; i < n; ++i)
    scratch[i] = std::fabs(in[i]);
  std::nth_element(scratch.begin(), scratch.begin() + long(n - k), scratch.end());
  return scratch[n - k];
}
}  // namespace

size_t keptCount(size_t n, double ratio) {
  double kept = std::round(ratio * double(n));
  return std::min(n, std::max<size_t>(1, size_t(kept)));
}

void selectTopK(const float *in, size_t n, size_t k, uint32_t *indices, float *values,
                std::vector<float> &scratch) {
  float threshold = kthLargestMagnitude(in, n, k, scratch);
  size_t above = 0;
  for (size_t i = 0; i < n; ++i)
    above += std::fabs(in[i]) > threshold;
  size_t tiesToTake = k - above, taken = 0;
  for (size_t i = 0; i < n && taken < k; ++i) {
    float magnitude = std::fabs(in[i]);
    bool keep = magnitude > threshold || (magnitude == threshold && tiesToTake > 0);
    if (magnitude == threshold && keep)
      --tiesToTake;
    if (keep) {
      indices[taken] = uint32_t(i);
      values[taken] = in[i];
      ++taken;
    }
  }
}

void randomKIndices(uint64_t seed, size_t n, size_t k, uint32_t *indices,
                    std::vector<uint64_t> &bitmap) {
  bitmap.assign((n + 63) / 64, 0);
  uint64_t state = seed;
  // Floyd: for j in [n-k, n): pick t in [0, j]; take t unless taken, else take j.
  for (size_t j = n - k; j < n; ++j) {
    uint64_t t = uint64_t((static_cast<unsigned __int128>(splitmix64(state)) * (j + 1)) >> 64);
    if (bitmap[t / 64] & (1ull << (t % 64)))
      t = j;
    bitmap[t / 64] |= 1ull << (t % 64);
  }
  size_t out = 0;
  for (size_t word = 0; word < bitmap.size(); ++word)
    for (uint64_t bits = bitmap[word]; bits; bits &= bits - 1)
      indices[out++] = uint32_t(word * 64 + size_t(__builtin_ctzll(bits)));
}

ZENRT_VECTOR_CLONES
void compressSign(const float *in, size_t n, uint8_t *payload) {
  // Eight independent double lanes: a reduction the compiler vectorises without
  // reassociating, and precise for long buckets.
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t fullBytes = n / 8;
  for (size_t byte = 0; byte < fullBytes; ++byte)
    for (size_t bit = 0; bit < 8; ++bit)
      lanes[bit] += std::fabs(double(in[byte * 8 + bit]));
  for (size_t byte = 0; byte < fullBytes; ++byte) {
    uint32_t bits = 0;
    for (uint32_t bit = 0; bit < 8; ++bit)
      bits |= uint32_t(in[byte * 8 + bit] >= 0.0f) << bit;
    payload[byte] = uint8_t(bits);
  }
  double sumAbs = 0;
  for (double lane : lanes)
    sumAbs += lane;
  if (n % 8) {
    uint8_t bits = 0;
    for (size_t i = fullBytes * 8; i < n; ++i) {
      bits |= uint8_t(in[i] >= 0) << (i % 8);
      sumAbs += std::fabs(double(in[i]));
    }
    payload[fullBytes] = bits;
  }
  float scale = n ? float(sumAbs / double(n)) : 0.0f;
  std::memcpy(payload + (n + 7) / 8, &scale, 4);
}

ZENRT_VECTOR_CLONES
void decompressSign(const uint8_t *payload, size_t n, float *out, bool accumulate) {
  float scale;
  std::memcpy(&scale, payload + (n + 7) / 8, 4);
  uint32_t magnitude = bitsOf(scale) & 0x7fffffffu;
  // The value's sign bit is the inverted payload bit: integer ops only, so it vectorises.
  for (size_t i = 0; i < n; ++i) {
    uint32_t bit = (uint32_t(payload[i / 8]) >> (i % 8)) & 1u;
    float value = floatOf(magnitude | ((bit ^ 1u) << 31));
    out[i] = accumulate ? out[i] + value : value;
  }
}

ZENRT_VECTOR_CLONES
void subtract(const float *a, const float *b, float *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = a[i] - b[i];
}
ZENRT_VECTOR_CLONES
void scale(float *data, size_t n, float factor) {
  for (size_t i = 0; i < n; ++i)
    data[i] *= factor;
}
ZENRT_VECTOR_CLONES
void add(const float *in, float *inout, size_t n) {
  for (size_t i = 0; i < n; ++i)
    inout[i] += in[i];
}

}  // namespace zenrt::kernels
