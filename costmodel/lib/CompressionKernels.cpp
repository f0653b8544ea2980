//===- CompressionKernels.cpp - reference CPU compression loops -----------===//
#include "CompressionKernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace zen::cost {
namespace {

constexpr double kSparseRatio = 0.01;
constexpr size_t kInt8Chunk = 1024;

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

/// IEEE binary32 -> binary16, round to nearest even; overflow to infinity,
/// values below the half range to (signed) zero.
uint16_t toHalf(float value) {
  uint32_t bits = bitsOf(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xffu) - 127 + 15;
  uint32_t mantissa = bits & 0x7fffffu;
  if (exponent >= 31)
    return static_cast<uint16_t>(sign | 0x7c00u | (((bits & 0x7f800000u) == 0x7f800000u && mantissa) ? 0x200u : 0));
  if (exponent <= 0)
    return static_cast<uint16_t>(sign);
  uint32_t half = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
    ++half;  // may carry into the exponent, which is the correct rounding
  return static_cast<uint16_t>(half);
}

uint16_t toBFloat16(float value) {
  uint32_t bits = bitsOf(value);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

double checksum(const unsigned char *data, size_t size) {
  double sum = 0;
  for (size_t i = 0; i < size; i += 4096)
    sum += data[i];
  return sum + (size ? data[size - 1] : 0);
}

} // namespace

std::vector<CompressionMethod> cpuKernelMethods() {
  return {CompressionMethod::FP16, CompressionMethod::BF16, CompressionMethod::Int8,
          CompressionMethod::TopK, CompressionMethod::RandomK, CompressionMethod::Sign};
}

double encodeOnCpu(CompressionMethod method, const float *input, size_t count,
                   CompressionScratch &scratch) {
  size_t kept = std::max<size_t>(1, static_cast<size_t>(kSparseRatio * static_cast<double>(count)));
  switch (method) {
  case CompressionMethod::FP16:
  case CompressionMethod::BF16: {
    scratch.bytes.resize(2 * count);
    auto *out = reinterpret_cast<uint16_t *>(scratch.bytes.data());
    if (method == CompressionMethod::FP16)
      for (size_t i = 0; i < count; ++i)
        out[i] = toHalf(input[i]);
    else
      for (size_t i = 0; i < count; ++i)
        out[i] = toBFloat16(input[i]);
    return checksum(scratch.bytes.data(), scratch.bytes.size());
  }
  case CompressionMethod::Int8: {
    size_t chunks = (count + kInt8Chunk - 1) / kInt8Chunk;
    scratch.bytes.resize(count + 4 * chunks);
    auto *scales = reinterpret_cast<float *>(scratch.bytes.data() + count);
    for (size_t chunk = 0; chunk < chunks; ++chunk) {
      size_t begin = chunk * kInt8Chunk, end = std::min(count, begin + kInt8Chunk);
      float maxAbs = 0;
      for (size_t i = begin; i < end; ++i)
        maxAbs = std::max(maxAbs, std::fabs(input[i]));
      float scale = maxAbs > 0 ? maxAbs / 127.0f : 1.0f;
      float inverse = 1.0f / scale;
      for (size_t i = begin; i < end; ++i)
        scratch.bytes[i] = static_cast<unsigned char>(static_cast<int8_t>(std::lrintf(input[i] * inverse)));
      std::memcpy(&scales[chunk], &scale, sizeof scale);
    }
    return checksum(scratch.bytes.data(), scratch.bytes.size());
  }
  case CompressionMethod::TopK: {
    // Exact threshold: the kept-th largest magnitude, then one compaction pass.
    scratch.floats.resize(count);
    for (size_t i = 0; i < count; ++i)
      scratch.floats[i] = std::fabs(input[i]);
    std::nth_element(scratch.floats.begin(), scratch.floats.begin() + static_cast<long>(kept - 1),
                     scratch.floats.end(), std::greater<float>());
    float threshold = scratch.floats[kept - 1];
    scratch.bytes.resize(8 * kept);
    size_t written = 0;
    for (size_t i = 0; i < count && written < kept; ++i)
      if (std::fabs(input[i]) >= threshold) {
        uint32_t index = static_cast<uint32_t>(i);
        std::memcpy(&scratch.bytes[8 * written], &input[i], 4);
        std::memcpy(&scratch.bytes[8 * written + 4], &index, 4);
        ++written;
      }
    return checksum(scratch.bytes.data(), 8 * written);
  }
  case CompressionMethod::RandomK: {
    // Strided random indices from a fixed-seed LCG (as a shared seed gives every rank).
    scratch.bytes.resize(8 * kept);
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (size_t j = 0; j < kept; ++j) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      uint32_t index = static_cast<uint32_t>((state >> 33) % count);
      std::memcpy(&scratch.bytes[8 * j], &input[index], 4);
      std::memcpy(&scratch.bytes[8 * j + 4], &index, 4);
    }
    return checksum(scratch.bytes.data(), scratch.bytes.size());
  }
  case CompressionMethod::Sign: {
    size_t packed = (count + 7) / 8;
    scratch.bytes.assign(packed + 4, 0);
    double magnitude = 0;
    for (size_t i = 0; i < count; ++i)
      magnitude += std::fabs(input[i]);
    for (size_t i = 0; i < count; ++i)
      scratch.bytes[i / 8] |= static_cast<unsigned char>((bitsOf(input[i]) >> 31) << (i % 8));
    float scale = static_cast<float>(magnitude / static_cast<double>(std::max<size_t>(count, 1)));
    std::memcpy(&scratch.bytes[packed], &scale, sizeof scale);
    return checksum(scratch.bytes.data(), scratch.bytes.size());
  }
  case CompressionMethod::None:
  case CompressionMethod::PowerSGD:
    return 0;
  }
  return 0;
}

} // namespace zen::cost
