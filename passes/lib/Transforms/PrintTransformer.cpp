//===- PrintTransformer.cpp - report the recognised transformer ===//
//
// An analysis printer: one remark with the shape the structural recognition
// reads, so that a model's recognition can be checked from the command line.
//
//===----------------------------------------------------------------------===//
#include "zen/Passes/Passes.h"
#include "zen/Passes/Transformer.h"

#include "llvm/ADT/StringExtras.h"

namespace zen {
#define GEN_PASS_DEF_PRINTTRANSFORMER
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;

namespace zen {
namespace {
struct PrintTransformerPass : impl::PrintTransformerBase<PrintTransformerPass> {
  using PrintTransformerBase::PrintTransformerBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string whyNot;
    std::optional<TransformerStructure> structure = analyzeTransformer(module, &whyNot);
    markAllAnalysesPreserved();
    if (!structure) {
      module.emitWarning("no transformer recognised: ") << whyNot;
      return;
    }
    const cost::TransformerShape &shape = structure->shape;
    InFlightDiagnostic remark = module.emitRemark("transformer ");
    remark << shape.family << ": layers " << shape.layers << ", hidden " << shape.hidden
           << ", heads " << shape.heads
           << (structure->headsInferred ? " (hidden / 64: no head-split Reshape)"
                                        : " (from the head-split Reshape)")
           << ", ffn " << shape.ffn << ", seq " << shape.seq << ", vocab " << shape.vocab
           << ", batch " << shape.modelBatch << ", qkv "
           << (structure->blocks.front().qkv.size() == 1 ? "fused" : "separate")
           << "; params per block " << static_cast<int64_t>(shape.layerParams)
           << ", embedding " << static_cast<int64_t>(shape.embeddingParams) << ", head "
           << static_cast<int64_t>(shape.headParams) << "; replicated ["
           << llvm::join(shape.replicated, ", ") << "]";
    if (const std::optional<cost::MoeBlocks> &moe = shape.moe) {
      remark << "; MoE blocks [";
      llvm::interleaveComma(moe->blocks, remark);
      remark << "]: " << moe->layer.experts << " experts, top-" << moe->layer.topK
             << ", expert ffn " << moe->layer.ffn << ", params per MoE block "
             << static_cast<int64_t>(moe->blockParams) << " besides its experts' "
             << static_cast<int64_t>(moe->expertParams);
    }
  }
};
} // namespace
} // namespace zen
