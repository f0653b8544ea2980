//===- Agreement.h - what the runners without a zenrt::Runtime share -*- C++ -*-===//
//
// The large-model and MoE runners (HybridRun.h, MoeRun.h) take the same options, and sum up
// over ranks and check that every rank runs the same plan with their own MPI calls, bounded
// by the timeout like the runtime's waits, and naming the rank that stopped answering as
// they do (zenrt/WatchedWaits.h).
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_ZENOPT_RUN_AGREEMENT_H
#define ZEN_TOOLS_ZENOPT_RUN_AGREEMENT_H

#include "zenrt/Plan.h"
#include "zenrt/Runtime.h"
#include "zenrt/WatchedWaits.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace zen::run {

/// What the runners of plans with real compute (`parallel`, `moe`) take from the command line.
struct RunnerOptions {
  std::string planPath;
  int iterations = 5;
  bool json = false;
  double timeoutSeconds = 300;
  uint64_t seed = 1;
  /// MoE layers in CUDA device memory with NCCL, as the gradients (--device).
  bool device = false;
  /// With `json`: the report of the plan's gradient sync run before (main.cpp), which
  /// the runner's JSON object carries as `gradient_sync`; null otherwise.
  nlohmann::ordered_json gradientSync;
  /// The test hook (--fault-kill-rank, --fault-stall-rank): called when the runner reaches
  /// `phase` ("collectives": its first step is about to communicate); kills or stalls this
  /// rank when it is the one asked for.
  std::function<void(const std::string &phase)> fault = [](const std::string &) {};
};

/// Reductions of one value over MPI_COMM_WORLD. Collective to construct (it starts the watch).
class Aggregate {
public:
  Aggregate(double timeoutSeconds, int rank) : waits(nullptr, timeoutSeconds), rank(rank) {}
  double reduce(double value, MPI_Op op) {
    double out = 0;
    MPI_Request request;
    MPI_Iallreduce(&value, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD, &request);
    waits.await(
        [&] {
          int done = 0;
          MPI_Test(&request, &done, MPI_STATUS_IGNORE);
          return done != 0;
        },
        [] { return std::string("the summary over ranks (MPI_Iallreduce)"); });
    return out;
  }
  /// Ranks running different programs would wait on each other until the timeout: fails
  /// with ZENRT_ERR_MISMATCH unless every rank was given the same plan.
  void requireSamePlan(const zenrt::Plan &plan) {
    const double hash = double(std::hash<std::string>{}(zenrt::writePlan(plan)) >> 12);
    if (reduce(hash, MPI_MIN) != reduce(hash, MPI_MAX))
      throw zenrt::Error(ZENRT_ERR_MISMATCH, "rank " + std::to_string(rank) +
                                                 ": the ranks were given different plans; every "
                                                 "rank must run the same plan file");
  }

private:
  zenrt::WatchedWaits waits;
  int rank;
};

} // namespace zen::run

#endif // ZEN_TOOLS_ZENOPT_RUN_AGREEMENT_H
