//===- Deterministic.h - seeded values independent of partitioning -*- C++ -*-===//
//
// The executors' weights and tokens are a function of (seed, tensor name, element index in
// the unpartitioned tensor), so every partitioning of a model draws the same model: the
// hybrid executor and the serving engine alike. SplitMix64 also spreads row indices for the
// sparse schemes' owners and hash slots.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_LIB_DETERMINISTIC_H
#define ZENRT_LIB_DETERMINISTIC_H

#include <cstdint>
#include <string>

namespace zenrt::detail {

/// SplitMix64's finaliser.
inline uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A tensor's stream: the seed mixed with the FNV-1a hash of its name.
inline uint64_t streamOf(uint64_t seed, const std::string &name) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (unsigned char c : name)
    hash = (hash ^ c) * 0x100000001B3ull;
  return splitMix64(seed ^ hash);
}

/// Element `index` of a stream, uniform in [-1, 1).
inline float uniformAt(uint64_t stream, uint64_t index) {
  return float(double(splitMix64(stream + index) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

} // namespace zenrt::detail

#endif // ZENRT_LIB_DETERMINISTIC_H
