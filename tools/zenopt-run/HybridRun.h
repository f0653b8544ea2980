//===- HybridRun.h - zenopt-run for large-model plans -------------*- C++ -*-===//
//
// A plan with `parallel` runs through libzenrt's hybrid executor (zenrt/Hybrid.h): every
// rank its stage's program with real compute. Before timing, the first step is checked
// against the unpartitioned model computed on each rank alone (loss, every gradient and
// weight the rank holds, within fp32 rounding) and, when the plan decomposes, against the
// same plan undecomposed (bit for bit).
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_ZENOPT_RUN_HYBRIDRUN_H
#define ZEN_TOOLS_ZENOPT_RUN_HYBRIDRUN_H

#include "Agreement.h"
#include "zenrt/Plan.h"

namespace zen::run {

/// Runs and checks the plan on this rank; returns the exit status (0 ok, 1 numerics failed).
int runHybrid(const RunnerOptions &options, const zenrt::Plan &plan, int rank, int ranks);

} // namespace zen::run

#endif // ZEN_TOOLS_ZENOPT_RUN_HYBRIDRUN_H
