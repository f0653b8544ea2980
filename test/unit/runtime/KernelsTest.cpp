// CPU compression kernels: exactness of the casts, bounds of int8, selection of
// top-k / random-k, sign round trip, and the error-feedback identity.
#include "zenrt/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

namespace k = zenrt::kernels;

namespace {
std::vector<float> randomVector(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(n);
  for (float &v : out)
    v = normal(generator);
  return out;
}
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
}  // namespace

TEST(Kernels, HalfRoundTripsEveryHalfValue) {
  // Every finite half converts to float and back unchanged.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t in = uint16_t(h), back;
    float f;
    k::halfToFloat(&in, &f, 1);
    k::floatToHalf(&f, &back, 1);
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
      EXPECT_TRUE(std::isnan(f)) << h;
    else
      EXPECT_EQ(back, in) << h;
  }
}

TEST(Kernels, HalfRoundsToNearestEven) {
  float values[] = {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65504.0f, 65520.0f, 1e-8f, -2.5f};
  uint16_t out[6];
  k::floatToHalf(values, out, 6);
  EXPECT_EQ(out[0], 0x3c00);  // tie -> even (1.0)
  EXPECT_EQ(out[1], 0x3c02);  // tie -> even (1 + 2/1024)
  EXPECT_EQ(out[2], 0x7bff);  // max half
  EXPECT_EQ(out[3], 0x7c00);  // overflow -> inf
  EXPECT_EQ(out[4], 0x0000);  // below half the smallest subnormal
  EXPECT_EQ(out[5], 0xc100);
}

TEST(Kernels, BF16RoundsToNearestEvenAndKeepsNaN) {
  float values[] = {1.0f, 1.00390625f /* tie */, 1.01171875f /* tie up */,
                    std::numeric_limits<float>::quiet_NaN()};
  uint16_t out[4];
  k::floatToBF16(values, out, 4);
  EXPECT_EQ(out[0], 0x3f80);
  EXPECT_EQ(out[1], 0x3f80);
  EXPECT_EQ(out[2], 0x3f82);
  float back;
  k::bf16ToFloat(&out[3], &back, 1);
  EXPECT_TRUE(std::isnan(back));
  std::vector<float> x = randomVector(1000, 3);
  std::vector<uint16_t> encoded(1000);
  std::vector<float> decoded(1000);
  k::floatToBF16(x.data(), encoded.data(), 1000);
  k::bf16ToFloat(encoded.data(), decoded.data(), 1000);
  for (size_t i = 0; i < 1000; ++i)
    EXPECT_LE(std::fabs(decoded[i] - x[i]), std::ldexp(std::fabs(x[i]), -8));
}

TEST(Kernels, HalfSumRoundsOnce) {
  std::vector<float> a = randomVector(257, 5), b = randomVector(257, 6);
  std::vector<uint16_t> ha(257), hb(257);
  k::floatToHalf(a.data(), ha.data(), 257);
  k::floatToHalf(b.data(), hb.data(), 257);
  std::vector<float> fa(257), fb(257);
  k::halfToFloat(ha.data(), fa.data(), 257);
  k::halfToFloat(hb.data(), fb.data(), 257);
  k::halfSum(ha.data(), hb.data(), 257);
  for (size_t i = 0; i < 257; ++i) {
    float sum = fa[i] + fb[i];  // exact in float
    uint16_t expected;
    k::floatToHalf(&sum, &expected, 1);
    EXPECT_EQ(hb[i], expected);
  }
}

TEST(Kernels, Int8ErrorWithinHalfAScalePerBlock) {
  size_t n = 2 * k::kInt8Block + 77;
  std::vector<float> x = randomVector(n, 7, 3.0f);
  x[5] = 0;
  std::vector<uint8_t> payload(k::int8PayloadBytes(n));
  std::vector<float> y(n);
  k::quantizeInt8(x.data(), n, payload.data());
  k::dequantizeInt8(payload.data(), n, y.data(), false);
  for (size_t block = 0; block * k::kInt8Block < n; ++block) {
    size_t begin = block * k::kInt8Block, end = std::min(n, begin + k::kInt8Block);
    float maxAbs = 0;
    for (size_t i = begin; i < end; ++i)
      maxAbs = std::max(maxAbs, std::fabs(x[i]));
    for (size_t i = begin; i < end; ++i)
      EXPECT_LE(std::fabs(y[i] - x[i]), maxAbs / 254 * 1.0001f) << i;
  }
  EXPECT_EQ(y[5], 0.0f);
  // An all-zero block has scale 0 and decodes to zeros; accumulate adds.
  std::vector<float> zeros(10, 0.0f), acc(10, 1.0f);
  std::vector<uint8_t> zp(k::int8PayloadBytes(10));
  k::quantizeInt8(zeros.data(), 10, zp.data());
  k::dequantizeInt8(zp.data(), 10, acc.data(), true);
  for (float v : acc)
    EXPECT_EQ(v, 1.0f);
}

TEST(Kernels, TopKSelectsLargestMagnitudesWithTiesInIndexOrder) {
  std::vector<float> x = {0.5f, -3.0f, 2.0f, -2.0f, 1.0f, 2.0f, 0.0f};
  std::vector<uint32_t> idx(3), scratch;
  std::vector<float> val(3);
  k::selectTopK(x.data(), x.size(), 3, idx.data(), val.data(), scratch);
  EXPECT_EQ(idx, (std::vector<uint32_t>{1, 2, 3}));  // |-3|, then the first two of the |2| ties
  EXPECT_EQ(val, (std::vector<float>{-3.0f, 2.0f, -2.0f}));
  std::vector<float> big = randomVector(100000, 9);
  size_t kept = k::keptCount(big.size(), 0.01);
  EXPECT_EQ(kept, 1000u);
  idx.resize(kept);
  val.resize(kept);
  k::selectTopK(big.data(), big.size(), kept, idx.data(), val.data(), scratch);
  std::vector<float> magnitudes(big.size());
  for (size_t i = 0; i < big.size(); ++i)
    magnitudes[i] = std::fabs(big[i]);
  std::sort(magnitudes.begin(), magnitudes.end(), std::greater<float>());
  float smallestKept = INFINITY;
  for (size_t i = 0; i < kept; ++i) {
    EXPECT_EQ(big[idx[i]], val[i]);
    if (i)
      EXPECT_LT(idx[i - 1], idx[i]);
    smallestKept = std::min(smallestKept, std::fabs(val[i]));
  }
  EXPECT_EQ(smallestKept, magnitudes[kept - 1]);
  EXPECT_EQ(k::keptCount(10, 1e-9), 1u);
  EXPECT_EQ(k::keptCount(10, 1.0), 10u);
}

/// Top-k by a full sort: magnitude bits descending, index ascending; indices ascending.
static std::vector<uint32_t> referenceTopK(const std::vector<float> &x, size_t k) {
  std::vector<uint32_t> order(x.size());
  for (uint32_t i = 0; i < order.size(); ++i)
    order[i] = i;
  auto magnitude = [&](uint32_t i) { return bits(x[i]) & 0x7fffffffu; };
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return magnitude(a) > magnitude(b); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

TEST(Kernels, TopKMatchesAFullSortOnEveryPath) {
  std::vector<float> random = randomVector(1 << 20, 21), coarse = randomVector(1 << 20, 22);
  for (float &v : coarse)
    v = std::round(v * 4.0f) / 4.0f;  // many ties at any threshold
  // The strided sample sees only large values: its bound admits too few candidates,
  // so the selection falls back to all magnitudes.
  std::vector<float> misleading = randomVector(1 << 17, 23);
  for (size_t s = 0; s < 4096; ++s)
    misleading[s * (misleading.size() / 4096)] = 1000.0f + float(s);
  struct Case {
    const std::vector<float> *input;
    double ratio;
  };
  std::vector<uint32_t> scratch;  // reused across sizes, as the executor does
  for (Case c : {Case{&random, 0.01}, Case{&random, 0.001}, Case{&random, 0.3},
                 Case{&coarse, 0.01}, Case{&coarse, 0.1}, Case{&misleading, 0.01}}) {
    const std::vector<float> &x = *c.input;
    size_t kept = k::keptCount(x.size(), c.ratio);
    std::vector<uint32_t> idx(kept);
    std::vector<float> val(kept);
    k::selectTopK(x.data(), x.size(), kept, idx.data(), val.data(), scratch);
    ASSERT_EQ(idx, referenceTopK(x, kept)) << x.size() << " " << c.ratio;
    for (size_t i = 0; i < kept; ++i)
      ASSERT_EQ(bits(val[i]), bits(x[idx[i]]));
  }
  std::vector<float> withNaN = {1.0f, std::numeric_limits<float>::quiet_NaN(), -3.0f, 2.0f};
  std::vector<uint32_t> idx(2);
  std::vector<float> val(2);
  k::selectTopK(withNaN.data(), withNaN.size(), 2, idx.data(), val.data(), scratch);
  EXPECT_EQ(idx, (std::vector<uint32_t>{1, 2}));  // NaN ranks above every number
}

TEST(Kernels, RandomKIsDistinctSortedAndSeedDetermined) {
  std::vector<uint32_t> a(500), b(500), c(500);
  std::vector<uint64_t> bitmap;
  k::randomKIndices(42, 10000, 500, a.data(), bitmap);
  k::randomKIndices(42, 10000, 500, b.data(), bitmap);
  k::randomKIndices(43, 10000, 500, c.data(), bitmap);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::set<uint32_t>(a.begin(), a.end()).size(), 500u);
  EXPECT_LT(a.back(), 10000u);
  std::vector<uint32_t> all(64);
  k::randomKIndices(1, 64, 64, all.data(), bitmap);  // k == n takes everything
  for (uint32_t i = 0; i < 64; ++i)
    EXPECT_EQ(all[i], i);
}

TEST(Kernels, SignKeepsSignsAndMeanMagnitude) {
  std::vector<float> x = {1.0f, -2.0f, 0.0f, 3.0f, -4.0f, 5.0f, -6.0f, 7.0f, -8.0f, 9.0f, -10.0f};
  std::vector<uint8_t> payload(k::signPayloadBytes(x.size()));
  k::compressSign(x.data(), x.size(), payload.data());
  std::vector<float> y(x.size());
  k::decompressSign(payload.data(), x.size(), y.data(), false);
  float scale = 55.0f / 11.0f;
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(y[i], x[i] >= 0 ? scale : -scale) << i;
}

TEST(Kernels, ErrorFeedbackIdentityHoldsExactlyForSparseMethods) {
  std::vector<float> v = randomVector(4096, 11), sent(4096, 0.0f), residual(4096);
  std::vector<uint32_t> idx(k::keptCount(4096, 0.05)), scratch;
  std::vector<float> val(idx.size());
  k::selectTopK(v.data(), v.size(), idx.size(), idx.data(), val.data(), scratch);
  for (size_t i = 0; i < idx.size(); ++i)
    sent[idx[i]] = val[i];
  k::subtract(v.data(), sent.data(), residual.data(), v.size());
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(bits(sent[i] + residual[i]), bits(v[i]));
}
