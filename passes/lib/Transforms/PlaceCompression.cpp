//===- PlaceCompression.cpp - per-bucket compression ===//
//
// Chooses each bucket's compression (method, device, error feedback) and
// rewrites only the buckets whose compression changes.
//
//===----------------------------------------------------------------------===//
#include "../PassSupport.h"
#include "zen/Passes/Passes.h"

namespace zen {
#define GEN_PASS_DEF_PLACECOMPRESSION
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;
using namespace zen::plan;

namespace zen {
namespace {
BucketChoice withCompression(BucketChoice bucket, const cost::CompressionSpec &spec) {
  bucket.compression = spec;
  bucket.compression.errorFeedback = wantsErrorFeedback(spec.method);
  bucket.scheme = vocab::schemeFor(spec.method, bucket.decomposed());
  if (spec.method != cost::CompressionMethod::None)
    bucket.chunks = 1;
  return bucket;
}

struct PlaceCompressionPass : impl::PlaceCompressionBase<PlaceCompressionPass> {
  using PlaceCompressionBase::PlaceCompressionBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<std::vector<cost::CompressionSpec>> allowed =
        detail::compressorsOption(module, compressor);
    if (!allowed)
      return signalPassFailure();
    FailureOr<detail::PlanningState> state =
        detail::preparePlanning(module, cluster, nodes, getAnalysis<CostModelAnalysis>(),
                                std::nullopt, StringRef("zen-place-compression"));
    if (failed(state))
      return signalPassFailure();
    PlanChoice choice = *state->existing;
    const bool everywhere = mode == CompressionMode::all && !allowed->empty();
    for (BucketChoice &bucket : choice.buckets)
      bucket = withCompression(bucket, everywhere ? allowed->front() : cost::CompressionSpec{});
    if (mode == CompressionMode::automatic && !allowed->empty())
      detail::improvePerBucket(state->training.problem, choice, *state->model,
                               [&](const BucketChoice &bucket) {
                                 std::vector<BucketChoice> variants;
                                 for (const cost::CompressionSpec &spec : *allowed)
                                   for (const cost::CompressionSpec &placed : placements(spec))
                                     variants.push_back(withCompression(bucket, placed));
                                 return variants;
                               });
    if (failed(applyPlan(state->training, choice, state->group)))
      return signalPassFailure();
    markAnalysesPreserved<CostModelAnalysis>();
  }
};
} // namespace
} // namespace zen
