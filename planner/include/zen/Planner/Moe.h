//===- Moe.h - expert parallelism and MoE pipelining decisions --*- C++ -*-===//
//
// Plans a model's Mixture-of-Experts layers on top of its data-parallel plan
// (docs/design.md "Mixture of Experts"): the expert-parallel degree ep, and per
// layer the pipelining degrees of dispatch -> experts -> combine in forward and
// backward and the all-to-all algorithm, all priced by cost::moePhaseUs; with
// the baselines moe-nopipe, tutel and pipemoe on the same ep. No MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PLANNER_MOE_H
#define ZEN_PLANNER_MOE_H

#include "zen/CostModel/Moe.h"
#include "zen/Planner/Planning.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zen::plan {

/// One MoE layer of the model, as one rank runs it per iteration.
struct MoeLayer {
  std::string name;
  cost::MoeShape shape;
  /// The experts' weights and biases (their gradients carry these names).
  std::vector<std::string> parameters;
};

/// Where an MoE layer's experts sit in a Problem's compute segments, and what
/// the problem prices them at (their FLOPs and bytes): the time its pipelined
/// phases replace.
struct MoeLayerSite {
  int forwardSegment = -1;  // the forward segment the experts' forward starts
  int backwardSegment = -1; // the backward segment their backward ends
  double forwardUs = 0;
  double backwardUs = 0;
  /// The FLOPs the problem's segments count for them (a runtime that runs the
  /// layer itself leaves them out of the segments' work).
  int64_t forwardFlops = 0;
  int64_t backwardFlops = 0;
};

/// A data-parallel gradient schedule and which of its gradients are experts'.
struct GradientSync {
  Problem problem;
  PlanChoice plan;
  std::vector<bool> expert;        // parallels problem.gradients
  std::vector<MoeLayerSite> sites; // parallels the MoE layers
};

/// `sync` with the expert gradients synchronised over their dp / ep replicas
/// (cost::expertReplicaGroup, the problem's expertReplicas): every expert
/// gradient becomes one rank's experts / ep of it (its elements, bytes and
/// optimizer step divided by ep, expertParallel = ep, readyOrder its index in
/// `sync`), and a bucket holding expert gradients and others becomes two, in
/// its place and with its settings: the others over the data-parallel group,
/// then the experts' over the replicas (expertReplicas). In each bucket the
/// gradients keep their ready order. At ep 1, `sync` as it is. Throws
/// std::logic_error when the expert flags do not parallel the gradients or an
/// expert gradient does not divide by ep.
struct ExpertParallelSync {
  Problem problem;
  PlanChoice plan;
};
ExpertParallelSync expertParallelSync(const GradientSync &sync, int64_t ep, cost::Group dp);

/// `sync`'s iteration when the expert gradients synchronise over their dp / ep
/// replicas instead of the dp group: expertParallelSync's schedule, simulated.
/// At ep 1 the schedule as it is. Throws std::logic_error as
/// expertParallelSync and when the schedule cannot be simulated.
double expertParallelSyncUs(const GradientSync &sync, int64_t ep, cost::Group dp,
                            const cost::CostModel &model);

struct MoeRequest {
  cost::Group dp;            // the data-parallel ranks
  std::optional<int64_t> ep; // nullopt: searched
  double imbalance = 1.0;    // the busiest expert's load over the mean (>= 1)
  cost::TrainingSetup setup; // compute precision and optimizer (memory)
  /// Compressors the user allows (--compressor, in its order); those that
  /// shrink the dispatched tokens (cost::compressesTokens) are tried on them.
  std::vector<cost::CompressionMethod> compressors;
  /// One rank's memory for everything but the experts (the other parameters
  /// replicated, the reserve, the capacity): with the experts' under an ep it
  /// must fit, else that ep is not a choice.
  cost::MemoryBreakdown dense;
  /// The data-parallel gradient sync the layers sit on (nullopt: the layers
  /// alone, whose expert parallelism then changes no gradient's sync).
  std::optional<GradientSync> sync;
};

struct MoeLayerTime {
  cost::MoeLayerChoice choice;
  double forwardUs = 0;  // the phases alone (cost::moePhaseUs)
  double backwardUs = 0;
};

/// Every layer's choice and time under one rule.
struct MoeStrategy {
  std::vector<MoeLayerTime> layers;
  double moeUs = 0; // the layers' forward and backward alone, summed
  /// With the request's sync: the iteration with the layers co-scheduled in
  /// it (moeScheduleUs); without one, 0.
  double iterationUs = 0;
};

/// The simulator tasks of `sync`'s schedule with the expert gradients
/// synchronised over their replicas (as expertParallelSyncUs) and every MoE
/// layer's experts (sync.sites) replaced by its pipelined phases under
/// `layers[l]`'s choice (cost::moePhasePieces): per piece a dispatch
/// all-to-all, the experts on the compute stream, a combine all-to-all.
/// Forward pieces start the segment where the experts' forward starts,
/// backward pieces end the one where their backward ends. A layer's
/// all-to-alls run on a stream of their own (GradientSyncMode::Concurrent:
/// sharing each link level with the gradient collectives in flight) or on the
/// gradient sync's first stream ahead of its waiting collectives (Serial).
/// Names: "moe.<layer>.{fwd,bwd}.{dispatch,experts,combine}<piece>".
/// Throws std::logic_error when the sites do not parallel the layers or name
/// no segment, zen::Error as cost::moePhasePieces.
std::vector<cost::SimTask> moeScheduleTasks(const GradientSync &sync,
                                            const std::vector<MoeLayer> &layers,
                                            const std::vector<MoeLayerTime> &choices, int64_t ep,
                                            const MoeRequest &request,
                                            const cost::CostModel &model);
/// The iteration of moeScheduleTasks, simulated. Throws std::logic_error when
/// it cannot be simulated, and as moeScheduleTasks.
double moeScheduleUs(const GradientSync &sync, const std::vector<MoeLayer> &layers,
                     const std::vector<MoeLayerTime> &choices, int64_t ep,
                     const MoeRequest &request, const cost::CostModel &model);

/// The layers under one ep: auto's choices and the baselines'.
struct MoeEvaluation {
  int64_t ep = 1;
  /// auto: with the request's sync, the fastest co-scheduled iteration of
  /// per-layer choices (each phase's fastest degree, algorithm and token
  /// compression alone) and of every baseline's, then per layer in turn each
  /// other degree, algorithm and gradient sync mode tried in the schedule and
  /// kept where faster by more than 0.01%; without a sync, per layer the
  /// fastest phases alone.
  MoeStrategy best;
  std::map<std::string, MoeStrategy> baselines; // concurrent with the gradient sync
  /// What the data-parallel schedule prices the layers' experts at (the
  /// request's sync), or without one the layers at ep 1 and degree 1.
  double localUs = 0;
  /// The request's schedule as it is (the experts at localUs, every gradient
  /// over the dp group): what the co-scheduled iterations are counted from.
  double scheduleUs = 0;
  /// The experts' gradient all-reduce per iteration over their dp / ep
  /// replicas (expertReplicaGroup), alone; and what syncing them so saves on
  /// the request's schedule: scheduleUs less expertParallelSyncUs (negative
  /// when the split collectives cost more than they save).
  double expertSyncUs = 0;
  double syncSavingUs = 0;
  bool scheduled = false; // the request had a sync
  cost::MoeMemory memory; // ZeRO 0, one micro-batch in flight

  /// What `strategy` adds to the data-parallel plan's iteration: its
  /// co-scheduled iteration less scheduleUs, or without a schedule its phases
  /// less localUs.
  double extraUs(const MoeStrategy &strategy) const {
    return scheduled ? strategy.iterationUs - scheduleUs : strategy.moeUs - localUs;
  }
};

struct MoePlan {
  MoeEvaluation chosen;
  /// auto's extraUs under every ep tried that fits, in increasing ep.
  std::map<int64_t, double> searched;
  /// The per-GPU bytes of every ep tried that does not fit.
  std::map<int64_t, double> notFitting;
};

/// One rank's whole memory under `eval`'s ep: the request's dense part with
/// the experts' (ZeRO 0, one micro-batch in flight).
cost::MemoryBreakdown moeModelMemory(const MoeEvaluation &eval, const MoeRequest &request);

/// The baselines, in report order: moe-nopipe (degree 1, flat all-to-all:
/// DeepSpeed-MoE), tutel (one degree from {1, 2, 4, 8} and one algorithm for
/// the whole model, the fastest), pipemoe (per layer the degree a linear cost
/// model finds best, the same in forward and backward, flat).
const std::vector<std::string> &moeBaselineNames();

/// The pipelining degrees tried for a layer (cost::moeDegrees).
using cost::moeDegrees;

/// Why `ep` cannot run these layers on the request's dp group (it must divide
/// every layer's experts and dp, and be placeable, cost::checkExpertPlacement);
/// "" when it can.
std::string checkMoeParallel(const std::vector<MoeLayer> &layers, int64_t ep,
                             const MoeRequest &request);

/// The layers under `ep` (checkMoeParallel must pass): auto per layer (every
/// degree in forward and backward apart, both algorithms) and the baselines,
/// which auto's choices include, so auto is never slower than one by
/// construction.
MoeEvaluation evaluateMoe(const std::vector<MoeLayer> &layers, int64_t ep,
                          const cost::CostModel &model, const MoeRequest &request);

/// The forced ep, or the one with the least extraUs among the divisors of the
/// experts that checkMoeParallel accepts and whose moeModelMemory fits (the
/// smaller on ties). Throws zen::Error naming the reason for no
/// layers, a bad imbalance, a forced ep that checkMoeParallel refuses or that
/// does not fit, or no ep fitting.
MoePlan planMoe(const std::vector<MoeLayer> &layers, const cost::CostModel &model,
                const MoeRequest &request);

} // namespace zen::plan

#endif // ZEN_PLANNER_MOE_H
