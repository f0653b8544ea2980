//===- Moe.h - Mixture-of-Experts layers in ONNX models ---------*- C++ -*-===//
//
// Two spellings of an MoE layer become one: ONNX Runtime's fused com.microsoft
// MoE contrib operator (docs/ContribOperators.md of onnxruntime; its expert
// weights in the current [experts, out, in] layout or its earlier releases'
// [experts, in, out], gated experts with fc3), and the plain-ONNX routing
// pattern that `zenopt-modelgen moe` and `mixtral` write (router logits ->
// Softmax -> TopK -> dispatch -> batched expert MatMuls, two or three when gated
// -> combine back to [tokens, hidden]), which the loader fuses into a
// com.microsoft MoE node so that everything after it sees a single form.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_IMPORTER_MOE_H
#define ZEN_IMPORTER_MOE_H

#include "CostRules.h"

#include "onnx/onnx_pb.h"

#include <string>

namespace zen::importer::detail {

constexpr const char *kMoeDomain = "com.microsoft";

/// Whether `node` is an MoE node (after fusion, every MoE layer is one).
bool isMoeNode(const onnx::NodeProto &node);

/// Registers the com.microsoft MoE schema (version 1) with ONNX, so that the
/// schema checks and shape inference cover it: 5 to 8 inputs, its attributes
/// and their types, output of the input's type and shape. Idempotent and thread-safe
/// (a concurrent call waits); the first call makes ONNX register its own schemas too.
void registerMoeSchema();

/// Replaces every plain-ONNX MoE pattern of the shape-inferred `model` by a
/// com.microsoft MoE node (with the pattern's capacity in the attribute
/// `zen_capacity`). A pattern whose intermediate values are read outside it is
/// left as plain ops. Returns whether any pattern was fused.
bool fuseMoePatterns(onnx::ModelProto &model);

/// Reads and checks an MoE node's shapes and attributes, taking whichever expert-weight
/// layout fits the input's hidden size; throws ImportError (BadInput) naming the node for
/// anything malformed (for weights no layout fits, naming their shapes).
MoeLayer describeMoe(const CostSite &site, const std::string &path);

/// The node's cost: forward FLOPs and the backward FLOPs of each input's
/// gradient.
OpCost moeCost(const MoeLayer &layer, size_t inputs);

} // namespace zen::importer::detail

#endif // ZEN_IMPORTER_MOE_H
