//===- ApplySyncPatterns.cpp - the synchronisation patterns as a pass -----===//
#include "zen/CostModel/CostModel.h"
#include "zen/Passes/Passes.h"
#include "zen/Passes/Patterns.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace zen {
#define GEN_PASS_DEF_APPLYSYNCPATTERNS
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;

namespace zen {
namespace {

struct ApplySyncPatternsPass : impl::ApplySyncPatternsBase<ApplySyncPatternsPass> {
  using ApplySyncPatternsBase::ApplySyncPatternsBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (chunks < 0 || chunks > 1024) {
      module.emitError("zen-apply-sync-patterns: chunks must be in [0, 1024], got ")
          << static_cast<int64_t>(chunks);
      return signalPassFailure();
    }
    SyncPatternOptions options;
    options.splitAllReduce = splitAllReduce;
    options.chunks = chunks;
    if (!compressor.empty()) {
      std::string error;
      std::optional<cost::CompressionSpec> spec = cost::parseCompressionSpec(compressor, &error);
      if (!spec) {
        module.emitError("zen-apply-sync-patterns: compressor: ") << error;
        return signalPassFailure();
      }
      options.compression = CompressionAttr::get(&getContext(), fromVocabulary(spec->method),
                                                 spec->ratio, spec->rank);
      options.device = fromVocabulary(spec->device);
    }
    RewritePatternSet patterns(&getContext());
    populateZenSyncPatterns(patterns, options);
    // Only the buckets' collectives: folding the rest would drop unused values.
    SmallVector<Operation *> heads;
    module.walk([&](CollectiveOpInterface op) {
      if (op->hasAttr("sync"))
        heads.push_back(op);
    });
    GreedyRewriteConfig config;
    config.strictMode = GreedyRewriteStrictness::ExistingAndNewOps;
    if (failed(applyOpPatternsAndFold(heads, std::move(patterns), config)))
      return signalPassFailure();
  }
};

} // namespace
} // namespace zen
