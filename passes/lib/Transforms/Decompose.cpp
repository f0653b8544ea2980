//===- Decompose.cpp - chunks and reduce-scatter + all-gather ===//
//
// Sets chunk counts in place and splits dense all-reduces into a reduce-scatter
// overlapped with backward plus a decoupled all-gather (DeAR), rewriting only
// the buckets whose decomposition changes.
//
//===----------------------------------------------------------------------===//
#include "../PassSupport.h"
#include "zen/Passes/Passes.h"

namespace zen {
#define GEN_PASS_DEF_DECOMPOSE
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;
using namespace zen::plan;

namespace zen {
namespace {
/// Communication streams the plan uses: 2 when decoupled all-gathers have their own.
int streamsOf(const PlanChoice &choice) {
  for (const BucketChoice &bucket : choice.buckets)
    if (bucket.decomposed() && bucket.gatherStream != bucket.stream)
      return 2;
  return 1;
}

struct DecomposePass : impl::DecomposeBase<DecomposePass> {
  using DecomposeBase::DecomposeBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (chunks < 0 || chunks > 1024) {
      module.emitError("zen-decompose: chunks must be in [0, 1024], got ")
          << static_cast<int64_t>(chunks);
      return signalPassFailure();
    }
    FailureOr<detail::PlanningState> state =
        detail::preparePlanning(module, cluster, nodes, getAnalysis<CostModelAnalysis>(),
                                std::nullopt, StringRef("zen-decompose"));
    if (failed(state))
      return signalPassFailure();
    PlanChoice choice = *state->existing;
    const Problem &problem = state->training.problem;
    const int streams = streamsOf(choice);
    for (BucketChoice &bucket : choice.buckets)
      bucket.scheme = vocab::schemeFor(bucket.compression.method, split == SplitMode::all);
    assignSchedule(choice, streams);
    if (chunks == 0)
      chooseChunks(problem, choice, *state->model);
    else
      for (BucketChoice &bucket : choice.buckets)
        bucket.chunks = chunks;
    if (split == SplitMode::automatic)
      detail::improvePerBucket(problem, choice, *state->model, [&](const BucketChoice &bucket) {
        std::vector<BucketChoice> variants;
        BucketChoice flipped = bucket;
        flipped.scheme = vocab::schemeFor(bucket.compression.method, !bucket.decomposed());
        if (flipped.scheme != bucket.scheme)
          variants.push_back(flipped);
        return variants;
      });
    if (failed(applyPlan(state->training, choice, state->group)))
      return signalPassFailure();
    markAnalysesPreserved<CostModelAnalysis>();
  }
};
} // namespace
} // namespace zen
