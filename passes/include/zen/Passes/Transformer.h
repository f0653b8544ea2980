//===- Transformer.h - recognising transformer blocks in imported IR -*- C++ -*-===//
//
// Finds the repeated transformer blocks of an imported model structurally:
// weight GEMMs (forward MatMul/Gemm whose weight is a 2-D zen.param, possibly
// through a forward Transpose) in the order QKV (one h->3h GEMM or three h->h
// GEMMs reading one input), a Softmax, the attention output h->h, then the MLP
// h->ffn and ffn->h, or in an MoE block the router GEMM h->experts feeding a
// zen.moe_dispatch (with its experts and combine). docs/design.md "Partitioning passes" describes the rules.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PASSES_TRANSFORMER_H
#define ZEN_PASSES_TRANSFORMER_H

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
  ParamOp bias;               // Gemm's third operand or the Add right after a MatMul, or null
  ComputeOp biasAdd;          // that Add (null for a Gemm's fused bias)
  int64_t inFeatures = 0, outFeatures = 0;
  int64_t inDim = 0, outDim = 1;  // the weight's dimensions holding them
  size_t position = 0;            // index among the function's ops

  std::string nodeName() const;
};

struct TransformerBlock {
  llvm::SmallVector<WeightGemm, 3> qkv;  // one fused GEMM or three
  WeightGemm attentionOut, mlpIn, mlpOut;  // mlpIn and mlpOut unset in an MoE block
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
  bool headsInferred = false;  // heads = hidden / 64: no head-split Reshape was found
  mlir::func::FuncOp func;
  std::vector<TransformerBlock> blocks;
  std::vector<WeightGemm> replicated;  // weight GEMMs outside the blocks
  std::vector<ParamOp> embeddingParams, headParams;
  std::vector<MoeLayerOps> moeLayers;  // the MoE blocks' layers, in block order
};

/// The transformer in `module`, or nullopt with the reason in `whyNot`.
std::optional<TransformerStructure> analyzeTransformer(mlir::ModuleOp module, std::string *whyNot);

/// The shape alone (what the cost model needs).
std::optional<cost::TransformerShape> recognizeTransformer(mlir::ModuleOp module,
                                                           std::string *whyNot);

} // namespace zen

#endif // ZEN_PASSES_TRANSFORMER_H
