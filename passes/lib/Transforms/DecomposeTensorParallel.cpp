//===- DecomposeTensorParallel.cpp - chunked TP GEMM + collective pairs ---===//
//
// Pairs every tensor-parallel collective with the GEMM next to it and splits
// both into the chunks its region and phase take (docs/design.md
// "Partitioning passes"): the collective's `chunks`, the GEMM's
// `zen.tp_chunks`.
//
//===----------------------------------------------------------------------===//
#include "zen/Passes/Passes.h"
#include "zen/Passes/Patterns.h"
#include "zen/Analysis/Transformer.h"

#include "mlir/IR/Builders.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace zen {
#define GEN_PASS_DEF_DECOMPOSETENSORPARALLEL
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;

namespace zen {
namespace {

enum class Region { attention, mlp };

struct DecomposeTensorParallelPass
    : impl::DecomposeTensorParallelBase<DecomposeTensorParallelPass> {
  using DecomposeTensorParallelBase::DecomposeTensorParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (int64_t chunks :
         {attentionForward.getValue(), attentionBackward.getValue(),
          mlpForward.getValue(), mlpBackward.getValue()})
      if (chunks < 1) {
        module.emitError(
            "zen-decompose-tensor-parallel: chunks must be at least 1, got ")
            << chunks;
        return signalPassFailure();
      }
    std::string whyNot;
    std::optional<TransformerStructure> structure =
        analyzeTransformer(module, &whyNot);
    if (!structure) {
      module.emitError(
          "zen-decompose-tensor-parallel needs a recognised transformer: ")
          << whyNot;
      return signalPassFailure();
    }
    // Forward and backward GEMMs share their forward node's name.
    llvm::StringMap<Region> regionOf;
    for (const TransformerBlock &block : structure->blocks) {
      for (const WeightGemm &gemm : block.qkv)
        regionOf[gemm.nodeName()] = Region::attention;
      regionOf[block.attentionOut.nodeName()] = Region::attention;
      for (const WeightGemm &gemm : block.crossQkv)
        regionOf[gemm.nodeName()] = Region::attention;
      if (!block.crossQkv.empty())
        regionOf[block.crossOut.nodeName()] = Region::attention;
      for (const WeightGemm &gemm : block.mlpIn)
        regionOf[gemm.nodeName()] = Region::mlp;
      if (!block.moeLayer)
        regionOf[block.mlpOut.nodeName()] = Region::mlp;
    }
    auto blockGemm = [&](Operation *op) -> ComputeOp {
      auto compute = dyn_cast_or_null<ComputeOp>(op);
      if (!compute || !compute.getNode() || !regionOf.count(*compute.getNode()))
        return nullptr;
      return compute;
    };

    bool failedAny = false;
    llvm::DenseMap<Operation *, std::pair<Operation *, int64_t>> chunksOf;
    SmallVector<Operation *> collectives;
    structure->func.walk([&](Operation *op) {
      auto role = op->getAttrOfType<CollectiveRoleAttr>(
          ZenDialect::RoleAttrHelper::getNameStr());
      if (!role || (role.getValue() != CollectiveRole::tensor_parallel &&
                    role.getValue() != CollectiveRole::sequence_parallel))
        return;
      // A reduction follows its GEMM; a gather precedes the GEMM reading it
      // (its first reader: the backward op of that GEMM reads the gathered
      // value too).
      ComputeOp gemm = blockGemm(op->getOperand(0).getDefiningOp());
      if (!gemm)
        for (Operation *user : op->getResult(0).getUsers())
          if (ComputeOp reader = blockGemm(user);
              reader && (!gemm || reader->isBeforeInBlock(gemm)))
            gemm = reader;
      if (!gemm)
        return;
      const bool forward = gemm.getPhase() == Phase::forward;
      const int64_t chunks =
          regionOf.lookup(*gemm.getNode()) == Region::attention
              ? (forward ? attentionForward : attentionBackward)
              : (forward ? mlpForward : mlpBackward);
      if (chunks == 1)
        return;
      auto type = cast<RankedTensorType>(gemm->getResult(0).getType());
      const int64_t tokens = type.getNumElements() / type.getShape().back();
      if (tokens % chunks != 0) {
        gemm.emitError("zen-decompose-tensor-parallel: ")
            << chunks << " chunks do not divide the " << tokens
            << " tokens of '" << *gemm.getNode() << "'";
        failedAny = true;
        return;
      }
      chunksOf[op] = {gemm, chunks};
      collectives.push_back(op);
    });
    if (failedAny)
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populateZenTensorParallelPatterns(patterns, chunksOf);
    GreedyRewriteConfig config;
    config.strictMode = GreedyRewriteStrictness::ExistingOps;
    if (failed(applyOpPatternsAndFold(collectives, std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
} // namespace zen
