//===- DeterministicValues.h - reproducible test inputs for the checks -*- C++ -*-===//
#ifndef ZEN_TOOLS_DETERMINISTICVALUES_H
#define ZEN_TOOLS_DETERMINISTICVALUES_H

#include <cstdint>
#include <vector>

namespace zen::cli {

/// Uniform values in [-1, 1) from a 64-bit LCG (Knuth's MMIX constants): the same on every
/// rank and platform.
class DeterministicValues {
public:
  explicit DeterministicValues(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
  float next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<double>(state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
  std::vector<float> take(size_t count) {
    std::vector<float> values(count);
    for (float &v : values)
      v = next();
    return values;
  }

private:
  uint64_t state;
};

} // namespace zen::cli

#endif // ZEN_TOOLS_DETERMINISTICVALUES_H
