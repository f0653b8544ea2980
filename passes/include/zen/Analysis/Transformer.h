//===- Transformer.h - recognising transformer blocks in imported IR -*- C++ -*-===//
//
// Finds the repeated transformer blocks of an imported model by structure:
// weight GEMMs (forward MatMul/Gemm whose weight is a 2-D zen.param, possibly
// through a forward Transpose) in the order of an attention (Q, K and V as one
// fused GEMM, Q and a fused KV, or three GEMMs; K/V narrower than Q under
// grouped-query attention), a Softmax, its output projection; in a decoder
// block of an encoder-decoder a second such attention reading the encoder's
// output; then the MLP: two GEMMs (h -> ffn -> h), three (gate and up, then
// down: SwiGLU/GeGLU) or a fused gate-up GEMM, or in an MoE block the router
// GEMM feeding a zen.moe_dispatch. Heads and key/value heads are read from the
// head size the attention scores contract over, never guessed; the module
// attributes `zen.heads` and `zen.kv_heads` (zenopt's --heads/--kv-heads)
// override them. docs/design.md "Partitioning passes" describes the rules.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_ANALYSIS_TRANSFORMER_H
#define ZEN_ANALYSIS_TRANSFORMER_H

#include "zen/CostModel/Transformer.h"
#include "zen/Dialect/ZenDialect.h"
#include "zen/Passes/Moe.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace zen {

/// A forward GEMM with a trainable 2-D weight.
struct WeightGemm {
  ComputeOp op;
  ParamOp weight;
  ComputeOp weightTranspose;  // the forward Transpose between weight and GEMM, or null
  /// The forward Slice taking this GEMM's rows out of a packed weight, or null
  /// (nn.MultiheadAttention's in_proj when Q and K/V read different inputs).
  ComputeOp weightSlice;
  ParamOp bias;               // Gemm's third operand or the Add right after a MatMul, or null
  ComputeOp biasAdd;          // that Add (null for a Gemm's fused bias)
  int64_t inFeatures = 0, outFeatures = 0;
  int64_t inDim = 0, outDim = 1;  // the weight's dimensions holding them
  size_t position = 0;            // index among the function's ops

  std::string nodeName() const;
};

struct TransformerBlock {
  llvm::SmallVector<WeightGemm, 3> qkv;  // one fused GEMM, Q and fused KV, or three
  WeightGemm attentionOut;
  /// A decoder block of an encoder-decoder: the cross-attention's projections
  /// (Q from the block, K/V from the encoder's output) and output; empty otherwise.
  llvm::SmallVector<WeightGemm, 3> crossQkv;
  WeightGemm crossOut;
  /// The column-parallel MLP GEMMs (the first; gate and up; or the fused
  /// gate-up) and the row-parallel down GEMM; empty and unset in an MoE block.
  llvm::SmallVector<WeightGemm, 2> mlpIn;
  WeightGemm mlpOut;
  /// An MoE block: the router GEMM and the layer's index in
  /// TransformerStructure::moeLayers (its dispatch, experts and combine).
  WeightGemm router;
  std::optional<size_t> moeLayer;
  std::vector<ParamOp> params;          // every parameter of the block
  size_t begin = 0, end = 0;            // op positions of its first and last weight GEMM
};

/// The recognised model with the IR it was read from.
struct TransformerStructure {
  cost::TransformerShape shape;
  /// Where heads and kv_heads came from: "scores" (the head size Q·Kᵀ
  /// contracts over) or "attributes" (zen.heads / zen.kv_heads).
  std::string headsFrom;
  mlir::func::FuncOp func;
  std::vector<TransformerBlock> blocks;
  std::vector<WeightGemm> replicated;  // weight GEMMs outside the blocks
  std::vector<ParamOp> embeddingParams, headParams;
  std::vector<MoeLayerOps> moeLayers;  // the MoE blocks' layers, in block order
};

/// The transformer in `module`, or nullopt with the reason in `whyNot`.
std::optional<TransformerStructure> analyzeTransformer(mlir::ModuleOp module, std::string *whyNot);

/// What the IR cannot partition yet at tensor parallelism `degree` (> 1): a
/// cross-attention weight sliced from a packed parameter (nn.MultiheadAttention's
/// in_proj), whose slices would need sharding apart, or an MoE block, whose tokens
/// Megatron-Core splits over the tp ranks around the experts. The op and the reason.
struct TensorParallelBlocker {
  mlir::Operation *op;
  std::string reason;
};
std::optional<TensorParallelBlocker> tensorParallelBlocker(const TransformerStructure &structure,
                                                           int64_t degree);

/// The shape alone (what the cost model needs).
std::optional<cost::TransformerShape> recognizeTransformer(mlir::ModuleOp module,
                                                           std::string *whyNot);

} // namespace zen

#endif // ZEN_ANALYSIS_TRANSFORMER_H
