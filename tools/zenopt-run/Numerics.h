//===- Numerics.h - zenopt-run's gradients and numerics check ---*- C++ -*-===//
//
// The check compares what the runtime did with what each compression method is defined to
// do (docs/plan-format.md), computed here from the bucket's input alone by plain reference
// code: it shares no code path with the executor or its kernels, so a broken kernel fails it
// (test/Runtime/mutants.test breaks each one on purpose).
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_ZENOPT_RUN_NUMERICS_H
#define ZEN_TOOLS_ZENOPT_RUN_NUMERICS_H

#include "Collectives.h"
#include "zenrt/Plan.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zen::run {

/// The gradients zenopt-run feeds (--gradients). Every mode draws normal values, seeded per
/// rank and iteration; `Tied` rounds the values of top-k buckets to multiples of 1/8, so
/// that the top-k threshold has ties; `LowRank` makes every PowerSGD bucket's matrix one of
/// the planned rank (same column space on every rank, the same matrix every iteration), so
/// that the average PowerSGD must reproduce exactly has that rank.
enum class GradientMode { Normal, Tied, LowRank };

/// Fills `values` (one vector per plan tensor, sized to it) for one rank and iteration.
void fillGradients(const zenrt::Plan &plan, GradientMode mode, uint64_t seed, int rank,
                   int iteration, std::vector<std::vector<float>> &values);

/// One bucket's data of one iteration, packed like its fusion buffer.
struct BucketData {
  std::vector<float> input;     // gradient + old residual, added in float as the runtime does
  std::vector<float> result;    // what the runtime wrote back
  std::vector<float> sent;      // the runtime's decoded local contribution
  std::vector<float> residual;  // the runtime's new residual (error feedback only)
};

struct BucketCheck {
  std::string check;
  double maxError = 0;  // max over elements of |result - reference|
  double bound = 0;     // the bound at the element of maxError
  bool ok = true;
  std::string detail;   // the first violation
};

/// Checks one bucket. Collective over all ranks: every rank calls it for every bucket.
BucketCheck checkBucket(const zenrt::Bucket &bucket, size_t index, const BucketData &data,
                        GradientMode mode, int ranks, BoundedCollectives &mpi);

}  // namespace zen::run

#endif  // ZEN_TOOLS_ZENOPT_RUN_NUMERICS_H
