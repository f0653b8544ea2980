//===- Kernels.cpp - CPU compression kernels ---------------------------------===//
#include "zenrt/Kernels.h"

#include "Mutation.h"
#include "Scalar.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

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

inline uint32_t magnitudeBits(float x) { return bitsOf(x) & 0x7fffffffu; }

/// Candidates of a top-k selection: indices ascending with their values.
struct Candidates {
  uint32_t *indices;
  float *values;
};

/// Appends to `out` the index and value of every in[i], i in [begin, end), with
/// magnitude bits >= bound, in index order; returns the count. Branch-free: each
/// element is stored unconditionally and the cursor advances on a hit, so `out`
/// needs room for the hits plus 8.
size_t collectAtLeastScalar(const float *in, size_t begin, size_t end, uint32_t bound,
                            Candidates out) {
  size_t count = 0;
  for (size_t i = begin; i < end; ++i) {
    out.indices[count] = uint32_t(i);
    out.values[count] = in[i];
    count += magnitudeBits(in[i]) >= bound;
  }
  return count;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define ZENRT_HAVE_AVX2_COLLECT 1
/// Lane permutations that move the lanes of an 8-bit mask to the front.
struct CompressTable {
  alignas(32) uint32_t lanes[256][8];
  CompressTable() {
    for (uint32_t mask = 0; mask < 256; ++mask) {
      uint32_t next = 0;
      for (uint32_t lane = 0; lane < 8; ++lane)
        if (mask & (1u << lane))
          lanes[mask][next++] = lane;
      while (next < 8)
        lanes[mask][next++] = 0;
    }
  }
};
const CompressTable compressTable;

/// collectAtLeastScalar, eight lanes at a time: compare, movemask, and a table
/// permutation that packs the hits (unaligned 8-lane stores).
__attribute__((target("avx2,popcnt"))) size_t
collectAtLeastAvx2(const float *in, size_t begin, size_t end, uint32_t bound, Candidates out) {
  // Magnitudes are below 2^31, so a signed compare against bound - 1 is ">= bound" (bound
  // 0 gives -1: every lane).
  const __m256i limit = _mm256_set1_epi32(int32_t(bound - 1));
  const __m256i absMask = _mm256_set1_epi32(0x7fffffff);
  const __m256i step = _mm256_set1_epi32(8);
  __m256i index = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                   _mm256_set1_epi32(int32_t(begin)));
  size_t count = 0, i = begin;
  for (; i + 8 <= end; i += 8) {
    __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + i));
    __m256i hit = _mm256_cmpgt_epi32(_mm256_and_si256(bits, absMask), limit);
    uint32_t mask = uint32_t(_mm256_movemask_ps(_mm256_castsi256_ps(hit)));
    __m256i order =
        _mm256_load_si256(reinterpret_cast<const __m256i *>(compressTable.lanes[mask]));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out.indices + count),
                        _mm256_permutevar8x32_epi32(index, order));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out.values + count),
                        _mm256_permutevar8x32_epi32(bits, order));
    count += size_t(__builtin_popcount(mask));
    index = _mm256_add_epi32(index, step);
  }
  return count + collectAtLeastScalar(in, i, end, bound,
                                      {out.indices + count, out.values + count});
}
#endif

size_t collectAtLeast(const float *in, size_t begin, size_t end, uint32_t bound,
                      Candidates out) {
#ifdef ZENRT_HAVE_AVX2_COLLECT
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  if (avx2)
    return collectAtLeastAvx2(in, begin, end, bound, out);
#endif
  return collectAtLeastScalar(in, begin, end, bound, out);
}

/// Work space of kthLargestBits for `count` values.
constexpr size_t kRadixBins = size_t(1) << 16;
size_t radixWorkSize(size_t count) { return kRadixBins + count + 8; }

/// The magnitude bits of the k-th largest of values[0..count): a radix select on the
/// top 16 magnitude bits (one counting pass), then nth_element on the members of the
/// bin that holds it. `work` has radixWorkSize(count) entries.
uint32_t kthLargestBits(const float *values, size_t count, size_t k, uint32_t *work) {
  uint32_t *histogram = work, *members = work + kRadixBins;
  std::fill(histogram, histogram + kRadixBins, 0u);
  for (size_t j = 0; j < count; ++j)
    ++histogram[magnitudeBits(values[j]) >> 15];
  size_t bin = kRadixBins, atOrAbove = 0;
  while (atOrAbove < k)
    atOrAbove += histogram[--bin];
  size_t rankInBin = k - (atOrAbove - histogram[bin]);  // 1 = the bin's largest
  size_t memberCount = 0;
  for (size_t j = 0; j < count; ++j) {
    uint32_t magnitude = magnitudeBits(values[j]);
    members[memberCount] = magnitude;
    memberCount += (magnitude >> 15) == bin;
  }
  std::nth_element(members, members + (memberCount - rankInBin), members + memberCount);
  return members[memberCount - rankInBin];
}

/// Writes, in index order, the candidates with magnitude bits above `threshold` and the
/// first `k - above` equal to it: exactly k. Branch-free but for the loop bound.
void keepTopK(Candidates candidates, size_t count, uint32_t threshold, size_t k,
              uint32_t *indices, float *values) {
  size_t above = 0;
  for (size_t j = 0; j < count; ++j)
    above += magnitudeBits(candidates.values[j]) > threshold;
  size_t tiesLeft = k - above, taken = 0;
  for (size_t j = 0; j < count && taken < k; ++j) {
    uint32_t magnitude = magnitudeBits(candidates.values[j]);
    size_t tie = magnitude == threshold;
    size_t keep = size_t(magnitude > threshold) | (tie & size_t(tiesLeft != 0));
    tiesLeft -= tie & keep;
    indices[taken] = candidates.indices[j];  // overwritten unless kept; taken < k bounds it
    values[taken] = candidates.values[j];
    taken += keep;
  }
  if (mutated(Mutation::TopKDropsOne))
    values[k - 1] = 0.0f;
}

/// Scratch of at least `size` entries; never shrinks, so a reused vector is not
/// re-initialised (or re-faulted) call after call.
uint32_t *scratchOf(std::vector<uint32_t> &scratch, size_t size) {
  if (scratch.size() < size)
    scratch.resize(size);
  return scratch.data();
}

}  // namespace

size_t keptCount(size_t n, double ratio) {
  double kept = std::round(ratio * double(n));
  return std::min(n, std::max<size_t>(1, size_t(kept)));
}

// Magnitudes compare as their bits (as the CUDA kernel does): exact for floats, and NaN
// ranks above infinity instead of breaking the selection.
void selectTopK(const float *in, size_t n, size_t k, uint32_t *indices, float *values,
                std::vector<uint32_t> &scratch) {
  if (k == 0 || k > n)
    return;
  constexpr size_t kSample = 4096, kBlock = 4096, kSlack = 8;
  // Scratch: candidate indices, candidate values (each with the collector's slack), then
  // the radix select's work space.
  auto layout = [&](size_t room) {
    uint32_t *base = scratchOf(scratch, 2 * room + radixWorkSize(room));
    return std::make_pair(Candidates{base, reinterpret_cast<float *>(base + room)},
                          base + 2 * room);
  };
  // Large inputs: a strided sample gives a lower bound that about 2k elements reach; one
  // vectorised pass collects those candidates, and the selection runs on them only.
  if (n >= 16 * kSample && k <= n / 8 && n <= size_t(UINT32_MAX)) {
    size_t limit = n / 4;  // more candidates than this: the sample misled
    auto [candidates, work] = layout(limit + kBlock + kSlack);
    size_t stride = n / kSample;
    for (size_t s = 0; s < kSample; ++s)
      work[s] = magnitudeBits(in[s * stride]);
    size_t expected = std::max<size_t>(8, 2 * k * kSample / n);
    size_t rank = kSample - std::min(kSample, expected);
    std::nth_element(work, work + rank, work + kSample);
    uint32_t bound = work[rank];
    size_t count = 0;
    for (size_t begin = 0; begin < n && count <= limit; begin += kBlock)
      count += collectAtLeast(in, begin, std::min(n, begin + kBlock), bound,
                              {candidates.indices + count, candidates.values + count});
    if (count >= k && count <= limit) {
      uint32_t threshold = kthLargestBits(candidates.values, count, k, work);
      keepTopK(candidates, count, threshold, k, indices, values);
      return;
    }
  }
  // Everything at or above the exact threshold, then exactly k of them.
  auto [candidates, work] = layout(n + kSlack);
  uint32_t threshold = kthLargestBits(in, n, k, work);
  size_t count = collectAtLeast(in, 0, n, threshold, candidates);
  keepTopK(candidates, count, threshold, k, indices, values);
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
  if (mutated(Mutation::RandomKRepeatsIndex) && k >= 2)
    indices[k - 1] = indices[k - 2];
}

void gather(const float *in, const uint32_t *indices, size_t k, float *values) {
  for (size_t i = 0; i < k; ++i)
    values[i] = in[indices[i]];
}
void scatter(const float *values, const uint32_t *indices, size_t k, float *out, bool accumulate) {
  if (accumulate)
    for (size_t i = 0; i < k; ++i)
      out[indices[i]] += values[i];
  else
    for (size_t i = 0; i < k; ++i)
      out[indices[i]] = values[i];
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
  if (mutated(Mutation::SignFlipsOne) && n > 0)
    payload[0] ^= 1u;
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
