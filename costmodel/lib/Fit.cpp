//===- Fit.cpp - alpha-beta least-squares fits ----------------------------===//
#include "zen/CostModel/Fit.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>

namespace zen::cost {
namespace {

double squaredRelativeError(const LinearFit &fit, const std::vector<Sample> &samples, size_t begin,
                            size_t end) {
  double total = 0;
  for (size_t i = begin; i < end; ++i) {
    double predicted = fit.alphaUs + fit.betaUsPerByte * samples[i].bytes;
    double relative = (predicted - samples[i].timeUs) / samples[i].timeUs;
    total += relative * relative;
  }
  return total;
}

LinearFit fitRange(const std::vector<Sample> &samples, size_t begin, size_t end) {
  Eigen::Index count = static_cast<Eigen::Index>(end - begin);
  Eigen::MatrixXd design(count, 2);
  Eigen::VectorXd target = Eigen::VectorXd::Ones(count);
  for (Eigen::Index row = 0; row < count; ++row) {
    const Sample &sample = samples[begin + static_cast<size_t>(row)];
    // Dividing each equation by the measured time minimises relative error.
    design(row, 0) = 1.0 / sample.timeUs;
    design(row, 1) = sample.bytes / sample.timeUs;
  }
  LinearFit fit;
  Eigen::Vector2d solution = design.colPivHouseholderQr().solve(target);
  fit.alphaUs = solution(0);
  fit.betaUsPerByte = solution(1);
  // Non-negative least squares for two unknowns: if the free optimum has a
  // negative term, the constrained optimum has that term at zero.
  if (!(fit.alphaUs >= 0) || !(fit.betaUsPerByte >= 0)) {
    double alphaOnly = design.col(0).dot(target) / design.col(0).squaredNorm();
    double betaOnly = design.col(1).squaredNorm() > 0
                          ? design.col(1).dot(target) / design.col(1).squaredNorm()
                          : 0;
    LinearFit latency = fit, bandwidth = fit;
    latency.alphaUs = std::max(alphaOnly, 0.0);
    latency.betaUsPerByte = 0;
    bandwidth.alphaUs = 0;
    bandwidth.betaUsPerByte = std::max(betaOnly, 0.0);
    bool latencyBetter = bandwidth.betaUsPerByte <= 0 ||
                         squaredRelativeError(latency, samples, begin, end) <=
                             squaredRelativeError(bandwidth, samples, begin, end);
    fit = latencyBetter ? latency : bandwidth;
  }
  double mean = 0;
  for (size_t i = begin; i < end; ++i)
    mean += samples[i].timeUs;
  mean /= static_cast<double>(count);
  double residual = 0, spread = 0;
  for (size_t i = begin; i < end; ++i) {
    double predicted = fit.alphaUs + fit.betaUsPerByte * samples[i].bytes;
    residual += (samples[i].timeUs - predicted) * (samples[i].timeUs - predicted);
    spread += (samples[i].timeUs - mean) * (samples[i].timeUs - mean);
    fit.worstRelativeError =
        std::max(fit.worstRelativeError, std::abs(predicted - samples[i].timeUs) / samples[i].timeUs);
  }
  // A range of identical times has nothing to explain: a perfect fit is R^2 = 1.
  fit.rSquared = spread > 0 ? 1.0 - residual / spread : (residual > 0 ? 0.0 : 1.0);
  fit.minBytes = samples[begin].bytes;
  fit.maxBytes = samples[end - 1].bytes;
  return fit;
}

struct Segmentation {
  std::vector<size_t> cuts;  // segment starts after the first
  double error = std::numeric_limits<double>::infinity();
};

/// Best segmentation into exactly `segments` ranges (exhaustive: sweeps have
/// a few dozen sizes, so at most a few thousand small fits).
void search(const std::vector<Sample> &samples, int segments, int minPoints, size_t begin,
            std::vector<size_t> &cuts, double errorSoFar, Segmentation &best) {
  size_t n = samples.size();
  if (segments == 1) {
    if (n - begin < static_cast<size_t>(minPoints))
      return;
    double error = errorSoFar + squaredRelativeError(fitRange(samples, begin, n), samples, begin, n);
    if (error < best.error) {
      best.error = error;
      best.cuts = cuts;
    }
    return;
  }
  for (size_t cut = begin + static_cast<size_t>(minPoints);
       cut + static_cast<size_t>(minPoints * (segments - 1)) <= n; ++cut) {
    double error =
        errorSoFar + squaredRelativeError(fitRange(samples, begin, cut), samples, begin, cut);
    if (error >= best.error)
      continue;
    cuts.push_back(cut);
    search(samples, segments - 1, minPoints, cut, cuts, error, best);
    cuts.pop_back();
  }
}

} // namespace

LinearFit fitAlphaBeta(const std::vector<Sample> &samples) {
  std::vector<Sample> sorted = samples;
  std::sort(sorted.begin(), sorted.end(),
            [](const Sample &a, const Sample &b) { return a.bytes < b.bytes; });
  return fitRange(sorted, 0, sorted.size());
}

std::vector<LinearFit> fitPiecewise(std::vector<Sample> samples, int maxSegments, int minPoints) {
  std::sort(samples.begin(), samples.end(),
            [](const Sample &a, const Sample &b) { return a.bytes < b.bytes; });
  minPoints = std::max(minPoints, 2);
  Segmentation chosen;
  chosen.error = squaredRelativeError(fitRange(samples, 0, samples.size()), samples, 0, samples.size());
  for (int segments = 2; segments <= maxSegments; ++segments) {
    Segmentation best;
    std::vector<size_t> cuts;
    search(samples, segments, minPoints, 0, cuts, 0, best);
    // Each extra segment must cut the error by a fifth and by more than noise.
    if (best.error < 0.8 * chosen.error && chosen.error - best.error > 1e-4)
      chosen = best;
  }
  std::vector<LinearFit> fits;
  size_t begin = 0;
  chosen.cuts.push_back(samples.size());
  for (size_t end : chosen.cuts) {
    fits.push_back(fitRange(samples, begin, end));
    begin = end;
  }
  for (size_t i = 0; i + 1 < fits.size(); ++i) {
    double boundary = std::sqrt(fits[i].maxBytes * fits[i + 1].minBytes);
    fits[i].maxBytes = boundary;
    fits[i + 1].minBytes = boundary;
  }
  return fits;
}

} // namespace zen::cost
