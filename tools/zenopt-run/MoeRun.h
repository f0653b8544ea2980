//===- MoeRun.h - zenopt-run for plans with Mixture-of-Experts layers -*- C++ -*-===//
//
// A plan with `moe` runs each of its MoE layers through libzenrt (zenrt/Moe.h): forward and
// backward on deterministic inputs and weights of the layer's shape, the experts spread over
// each group of ep consecutive ranks, with the plan's degrees and all-to-all algorithm. The
// first run is checked against the same layer unpipelined (r = 1, flat: bit for bit) and
// against a reference computed on each rank alone, with no communication (within fp32
// rounding); the rest are timed next to the plan's forward_us and backward_us.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_ZENOPT_RUN_MOERUN_H
#define ZEN_TOOLS_ZENOPT_RUN_MOERUN_H

#include "Agreement.h"
#include "zenrt/Plan.h"

namespace zen::run {

/// Runs and checks the plan's MoE layers on this rank; returns the exit status (0 ok,
/// 1 numerics failed). Throws zenrt::PlanError for a `moe` section the runtime cannot run and
/// zenrt::Error (ZENRT_ERR_MISMATCH) for a plan made for another number of ranks.
int runMoe(const RunnerOptions &options, const zenrt::Plan &plan, int rank, int ranks);

} // namespace zen::run

#endif // ZEN_TOOLS_ZENOPT_RUN_MOERUN_H
