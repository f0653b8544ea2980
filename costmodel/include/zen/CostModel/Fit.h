//===- Fit.h - alpha-beta least-squares fits of measured collectives -*- C++ -*-===//
//
// `zenopt profile` measures time(bytes) and fits time = alpha + beta * bytes,
// piecewise over contiguous size ranges (MPI and NCCL switch protocols with
// size, so one line rarely fits 4 B .. 64 MB). Pure math, no MPI.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_FIT_H
#define ZEN_COSTMODEL_FIT_H

#include <vector>

namespace zen::cost {

struct Sample {
  double bytes = 0;
  double timeUs = 0;
};

struct LinearFit {
  double minBytes = 0, maxBytes = 0;  // the size range the fit applies to
  double alphaUs = 0, betaUsPerByte = 0;
  double rSquared = 0;                // on the range's own samples
  double worstRelativeError = 0;      // on the range's own samples
};

/// Least squares on relative error (each sample weighted by 1/time, so small
/// and large messages count alike), with alpha, beta >= 0.
LinearFit fitAlphaBeta(const std::vector<Sample> &samples);

/// Splits samples (any order; at least one) into at most `maxSegments`
/// contiguous size ranges of at least `minPoints` samples each and fits each.
/// A split is kept only when it cuts the total squared relative error by at
/// least a fifth. Adjacent ranges meet at the geometric midpoint of the
/// neighbouring samples, so the ranges tile [smallest, largest] sample.
std::vector<LinearFit> fitPiecewise(std::vector<Sample> samples, int maxSegments, int minPoints);

} // namespace zen::cost

#endif // ZEN_COSTMODEL_FIT_H
