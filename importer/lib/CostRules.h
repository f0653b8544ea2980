//===- CostRules.h - FLOPs of ONNX operators, forward and backward -*- C++ -*-===//
//
// One rule per ONNX op type, counted at the model's shapes (batch scaling is applied by
// the caller): forward FLOPs (2 per multiply-accumulate) and, for the backward pass, the
// FLOPs of the gradient with respect to each input. Bytes are derived by the caller from
// tensor sizes, using the access flags of the rule.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_IMPORTER_COSTRULES_H
#define ZEN_IMPORTER_COSTRULES_H

#include "zen/Importer/ModelGraph.h"

#include "onnx/onnx_pb.h"

#include <optional>
#include <vector>

namespace zen::importer::detail {

/// The node a rule costs: its proto (for attributes) and its tensors.
struct CostSite {
  const onnx::NodeProto &proto;
  std::vector<const Tensor *> inputs;   ///< nullptr for an omitted optional input
  std::vector<const Tensor *> outputs;  ///< nullptr for an omitted optional output

  const Tensor *input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  const Tensor *output(size_t i) const { return i < outputs.size() ? outputs[i] : nullptr; }
  int64_t inputElements(size_t i) const;
  int64_t outputElements(size_t i) const;
  int64_t attrInt(const char *name, int64_t fallback) const;
  std::vector<int64_t> attrInts(const char *name) const;
  std::string attrString(const char *name, const std::string &fallback) const;
};

struct OpCost {
  int64_t forwardFlops = 0;
  /// Backward FLOPs of the gradient with respect to input i (only counted for inputs that
  /// need a gradient).
  std::vector<int64_t> inputGradFlops;
  /// The backward step reads the forward inputs (false: it needs only the output gradient,
  /// as for additions and data movement).
  bool backwardReadsInputs = true;
  /// What the backward reads is the forward output, not the inputs: autograd saves the
  /// result of softmax, sigmoid, tanh, exp, relu, sqrt and reciprocal (PyTorch's
  /// tools/autograd/derivatives.yaml), which the next op often keeps anyway.
  bool backwardReadsOutput = false;
  /// A view (Reshape, Squeeze, ...): moves no bytes.
  bool isView = false;
  /// Reads only tensor metadata (Shape, Size): its bytes are the output's.
  bool readsMetadataOnly = false;
  /// Reads only the output-sized part of input 0 (Gather, Slice).
  bool readsOutputSizedPart = false;
};

/// The cost of `site`, or nullopt when the op type has no rule.
std::optional<OpCost> costOf(const CostSite &site);

} // namespace zen::importer::detail

#endif // ZEN_IMPORTER_COSTRULES_H
