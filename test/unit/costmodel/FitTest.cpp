//===- FitTest.cpp - alpha-beta fits --------------------------------------===//
#include "zen/CostModel/Fit.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace zen::cost;

TEST(Fit, RecoversAnExactLine) {
  std::vector<Sample> samples;
  for (double bytes = 4; bytes <= 1 << 26; bytes *= 2)
    samples.push_back({bytes, 12.5 + 3e-4 * bytes});
  LinearFit fit = fitAlphaBeta(samples);
  EXPECT_NEAR(fit.alphaUs, 12.5, 1e-6);
  EXPECT_NEAR(fit.betaUsPerByte, 3e-4, 1e-12);
  EXPECT_NEAR(fit.rSquared, 1, 1e-9);
  EXPECT_LT(fit.worstRelativeError, 1e-9);
  EXPECT_EQ(fit.minBytes, 4);
  EXPECT_EQ(fit.maxBytes, 1 << 26);
}

TEST(Fit, KeepsTermsNonNegative) {
  // Times that fall with size would need a negative slope: clamp it to zero.
  std::vector<Sample> samples = {{4, 10}, {8, 9}, {16, 8}, {32, 7}};
  LinearFit fit = fitAlphaBeta(samples);
  EXPECT_GE(fit.alphaUs, 0);
  EXPECT_GE(fit.betaUsPerByte, 0);
}

TEST(Fit, PiecewiseFindsAProtocolSwitch) {
  // Eager below 64 KiB, rendezvous above: two different lines.
  std::vector<Sample> samples;
  for (double bytes = 4; bytes <= 1 << 26; bytes *= 2)
    samples.push_back({bytes, bytes < 65536 ? 5 + 1e-3 * bytes : 80 + 2e-4 * bytes});
  std::vector<LinearFit> fits = fitPiecewise(samples, 3, 4);
  ASSERT_GE(fits.size(), 2u);
  EXPECT_EQ(fits.front().minBytes, 4);
  EXPECT_EQ(fits.back().maxBytes, 1 << 26);
  for (size_t i = 0; i + 1 < fits.size(); ++i)
    EXPECT_EQ(fits[i].maxBytes, fits[i + 1].minBytes);
  for (const LinearFit &fit : fits)
    EXPECT_LT(fit.worstRelativeError, 0.05);
  // A single line stays a single segment.
  std::vector<Sample> line;
  for (double bytes = 4; bytes <= 1 << 20; bytes *= 2)
    line.push_back({bytes, 7 + 1e-3 * bytes});
  EXPECT_EQ(fitPiecewise(line, 3, 4).size(), 1u);
}
