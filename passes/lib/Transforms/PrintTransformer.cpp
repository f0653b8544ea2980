//===- PrintTransformer.cpp - report the recognised transformer ===//
//
// An analysis printer: one remark with the shape the structural recognition
// reads, so that a model's recognition can be checked from the command line.
//
//===----------------------------------------------------------------------===//
#include "zen/Passes/Passes.h"
#include "zen/Analysis/Transformer.h"

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
    const size_t projections = structure->blocks.front().qkv.size();
    remark << shape.family << ": layers " << shape.layers << ", hidden " << shape.hidden
           << ", heads " << shape.heads << ", kv heads " << shape.keyValueHeads() << " (from the "
           << structure->headsFrom << ")"
           << ", ffn " << shape.ffn << ", mlp " << shape.mlp << ", norm " << shape.norm
           << ", positions " << shape.positions << (shape.tiedEmbeddings ? ", tied embeddings" : "")
           << ", seq " << shape.seq << ", vocab " << shape.vocab
           << ", batch " << shape.modelBatch << ", qkv "
           << (projections == 1 ? "fused" : projections == 2 ? "q + fused kv" : "separate")
           << "; params per block " << static_cast<int64_t>(shape.layerParams)
           << ", embedding " << static_cast<int64_t>(shape.embeddingParams) << ", head "
           << static_cast<int64_t>(shape.headParams);
    if (shape.crossAttentionBlocks)
      remark << "; " << shape.crossAttentionBlocks << " decoder blocks with a cross-attention of "
             << static_cast<int64_t>(shape.crossAttentionParams) << " params";
    remark << "; replicated ["
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
