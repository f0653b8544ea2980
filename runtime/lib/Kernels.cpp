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

void floatToHalf(const float *in, uint16_t *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = toHalf(in[i]);
}
void halfToFloat(const uint16_t *in, float *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = fromHalf(in[i]);
}
void floatToBF16(const float *in, uint16_t *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = toBF16(in[i]);
}
void bf16ToFloat(const uint16_t *in, float *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = fromBF16(in[i]);
}
void halfSum(const uint16_t *in, uint16_t *inout, size_t n) {
  for (size_t i = 0; i < n; ++i)
    inout[i] = toHalf(fromHalf(in[i]) + fromHalf(inout[i]));
}
void bf16Sum(const uint16_t *in, uint16_t *inout, size_t n) {
  for (size_t i = 0; i < n; ++i)
    inout[i] = toBF16(fromBF16(in[i]) + fromBF16(inout[i]));
}

void quantizeInt8(const float *in, size_t n, uint8_t *payload) {
  int8_t *values = reinterpret_cast<int8_t *>(payload);
  uint8_t *scaleBytes = payload + n;
  for (size_t block = 0, begin = 0; begin < n; ++block, begin += kInt8Block) {
    size_t end = std::min(n, begin + kInt8Block);
    float maxAbs = 0;
    for (size_t i = begin; i < end; ++i)
      maxAbs = std::max(maxAbs, std::fabs(in[i]));
    float scale = maxAbs / 127.0f;
    float inverse = maxAbs > 0 ? 127.0f / maxAbs : 0.0f;
    for (size_t i = begin; i < end; ++i)
      values[i] = quantize(in[i], inverse);
    std::memcpy(scaleBytes + 4 * block, &scale, 4);
  }
}

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

size_t keptCount(size_t n, double ratio) {
  double kept = std::round(ratio * double(n));
  return std::min(n, std::max<size_t>(1, size_t(kept)));
}

void selectTopK(const float *in, size_t n, size_t k, uint32_t *indices, float *values,
                std::vector<float> &scratch) {
  scratch.resize(n);
  for (size_t i = 0; i < n; ++i)
    scratch[i] = std::fabs(in[i]);
  std::nth_element(scratch.begin(), scratch.begin() + (n - k), scratch.end());
  float threshold = scratch[n - k];
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

void compressSign(const float *in, size_t n, uint8_t *payload) {
  double sumAbs = 0;
  for (size_t i = 0; i < n; ++i)
    sumAbs += std::fabs(in[i]);
  size_t fullBytes = n / 8;
  for (size_t byte = 0; byte < fullBytes; ++byte) {
    uint8_t bits = 0;
    for (size_t bit = 0; bit < 8; ++bit)
      bits |= uint8_t(in[byte * 8 + bit] >= 0) << bit;
    payload[byte] = bits;
  }
  if (n % 8) {
    uint8_t bits = 0;
    for (size_t i = fullBytes * 8; i < n; ++i)
      bits |= uint8_t(in[i] >= 0) << (i % 8);
    payload[fullBytes] = bits;
  }
  float scale = n ? float(sumAbs / double(n)) : 0.0f;
  std::memcpy(payload + (n + 7) / 8, &scale, 4);
}

void decompressSign(const uint8_t *payload, size_t n, float *out, bool accumulate) {
  float scale;
  std::memcpy(&scale, payload + (n + 7) / 8, 4);
  for (size_t i = 0; i < n; ++i) {
    float value = ((payload[i / 8] >> (i % 8)) & 1u) ? scale : -scale;
    out[i] = accumulate ? out[i] + value : value;
  }
}

void subtract(const float *a, const float *b, float *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = a[i] - b[i];
}
void scale(float *data, size_t n, float factor) {
  for (size_t i = 0; i < n; ++i)
    data[i] *= factor;
}
void add(const float *in, float *inout, size_t n) {
  for (size_t i = 0; i < n; ++i)
    inout[i] += in[i];
}

}  // namespace zenrt::kernels
