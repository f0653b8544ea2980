//===- ModelGraph.h - an ONNX model as a costed training graph --*- C++ -*-===//
//
// The ZenOnnx library (plain C++, no MLIR) reads an ONNX model, infers its
// shapes, costs every node and derives the backward pass. The result is a
// ModelGraph; buildZenModule (ZenImporter.h) turns it into zen IR.
//
// Errors are reported by throwing ImportError of kind Unreadable (input missing
// or unreadable) or BadInput (bad model data).
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_IMPORTER_MODELGRAPH_H
#define ZEN_IMPORTER_MODELGRAPH_H

#include "zen/Errors.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace zen::importer {

/// A model that is malformed (BadInput) or cannot be read (Unreadable).
struct ImportError : Error {
  using Error::Error;
};

struct ImportOptions {
  /// Samples per GPU; unset keeps the model's own batch (1 when symbolic).
  std::optional<int64_t> batch;
  /// Initializers that are constants of training although gradients could flow into them:
  /// buffers (masks, tables) and frozen weights. ONNX cannot tell them from parameters; the
  /// framework that exported the model can. Names the model lacks are reported as warnings.
  /// The importer recognises common buffers by their role itself (ModelGraph::constants).
  std::set<std::string> frozen;
  /// Called once the file is parsed, with the bytes of its graph: the file less its
  /// initializers (weights stored in the file). Memory the import and the planning use grows
  /// with it (zenopt prepares its heap from it); weights are copied once at most.
  std::function<void(uint64_t graphBytes)> parsed;
};

/// How `batch` was applied: "symbolic" set the symbolic batch dimension and re-inferred
/// shapes; "scaled" multiplied the batch-proportional costs of a baked-in export batch.
enum class BatchMode { Symbolic, Scaled };
const char *batchModeName(BatchMode mode);

struct Tensor {
  std::string name;
  /// Dims at the model's (possibly re-inferred) shapes; -1 is a dimension that stayed unknown.
  std::vector<int64_t> dims;
  bool rankKnown = true;
  int32_t onnxType = 0;   ///< onnx::TensorProto_DataType
  std::string dtype;      ///< short name: f32, f16, bf16, f64, i64, i32, i8, ui8, i1, ...
  int64_t elements = 0;   ///< product of dims, unknown dims counted as 1
  int64_t bytes = 0;      ///< elements * element size, times the batch scale if batchProportional
  bool isInitializer = false;
  bool isGraphInput = false;
  bool isGraphOutput = false;
  /// Depends on a graph input other than through Shape/Size: grows with the batch.
  bool batchProportional = false;
  /// Depends on a trainable parameter through differentiable inputs.
  bool requiresGrad = false;
  int producer = -1;   ///< index of the producing node, -1 for inputs and initializers
  int parameter = -1;  ///< index into ModelGraph::parameters when trainable
  bool isFloat() const;
};

/// The shape of a Mixture-of-Experts layer: an ONNX Runtime com.microsoft MoE node, or the
/// plain-ONNX routing pattern the loader fuses into one (importer/lib/Moe.cpp).
struct MoeLayer {
  int64_t tokens = 0; ///< rows of the router logits
  int64_t hidden = 0;
  int64_t experts = 0;
  int64_t topK = 1;
  int64_t capacity = 0;            ///< dispatch rows per expert
  int64_t ffn = 0;                 ///< inter size of each expert
  /// Rows of the first GEMM(s): ffn, or 2 x ffn when gated (fused SwiGLU, or fc3 beside fc1).
  int64_t fc1Rows = 0;
  std::string activation = "relu"; ///< relu, gelu, silu, swiglu or identity
  bool fc3 = false;                ///< gated: fc3 holds the linear half fc1's activation multiplies
  bool fc1Bias = false;
  bool fc2Bias = false;
  bool fc3Bias = false;
  /// Forward FLOPs of each part at the model's shapes: routing (softmax and top-k over the
  /// logits), the experts' GEMMs and bias adds over every capacity row, the weighted sum.
  int64_t dispatchFlops() const;
  int64_t expertFlops() const;
  int64_t combineFlops() const;
  /// Rows of fc1 alone (fc1Rows less fc3's).
  int64_t fc1Width() const;
};

struct Node {
  std::string name;
  std::string opType;
  std::string domain;
  std::vector<int> inputs;   ///< tensor ids; -1 for an omitted optional input
  std::vector<int> outputs;  ///< tensor ids; -1 for an omitted optional output
  int64_t flops = 0;         ///< forward, 2 per multiply-accumulate, batch scale applied
  int64_t bytes = 0;         ///< forward bytes read + written, batch scale applied
  bool unsupported = false;  ///< no cost rule: bytes only
  bool batchProportional = false;
  int backwardStep = -1;     ///< index into ModelGraph::backward, -1 when no gradient flows
  std::optional<MoeLayer> moe; ///< set for a com.microsoft MoE node
  /// The last this many `inputs` are values of the enclosing graph that the node's subgraphs
  /// (Loop, If, Scan bodies) read: the node uses them as it uses its own inputs.
  int outerScopeInputs = 0;
};

/// A gradient value: result `result` of backward step `step`.
struct GradValue {
  int step = -1;
  int result = -1;
};

/// One step of the derived backward pass. Steps are in execution order: the loss gradient
/// first, then the forward nodes in reverse topological order.
struct BackwardStep {
  enum class Kind { LossGradient, NodeGradient, Accumulate };
  Kind kind = Kind::NodeGradient;
  std::string opType;  ///< "LossGrad", "<OpType>Grad", or "GradAccumulate"
  int node = -1;       ///< forward node for NodeGradient
  int64_t flops = 0;
  int64_t bytes = 0;
  std::vector<GradValue> incomingGrads;  ///< gradients this step consumes
  std::vector<int> savedTensors;         ///< forward tensors it reads (activations, weights)
  std::vector<int> gradTensors;          ///< result i is the gradient (contribution) of this tensor
  std::vector<int> completedParameters;  ///< parameters whose gradient is complete after it
};

struct Parameter {
  std::string name;
  int tensor = -1;
  int64_t elements = 0;
  int64_t bytes = 0;
  std::string dtype;
  GradValue gradient;  ///< the complete gradient
  int readyStep = -1;  ///< backward step after which the gradient is complete
  int readyOrder = -1; ///< 0 = first gradient ready in backward
};

/// An initializer that is not trained, and the rule that decided it:
///  "frozen"                 named by ImportOptions::frozen (--frozen);
///  "integer"                not a floating-point tensor;
///  "attention-mask"         added to attention scores (or selected into them) before a Softmax;
///  "rotary-table"           the cos or sin table of rotary positions, x*cos + rotate_half(x)*sin;
///  "no-differentiable-use"  reaches graph outputs only through inputs gradients do not cross
///                           (indices, shapes, comparisons, running statistics);
///  "unused"                 reaches no graph output (warned about).
struct Constant {
  std::string name;
  int tensor = -1;
  std::string rule;
};

/// A parameter whose gradient is row-sparse: every forward use gathers rows of it (`Gather` on
/// axis 0 reading it as data: nn.Embedding; such a `Gather` inside a `Loop` body:
/// nn.EmbeddingBag), so a step's gradient is non-zero only in the rows the step looked up
/// (importer/lib/SparseGradients.cpp).
struct SparseGradient {
  int parameter = -1;      ///< index into ModelGraph::parameters
  int64_t rows = 0;        ///< the table's first dimension
  int64_t rowElements = 0; ///< elements of one row (the product of the other dimensions)
  /// Row lookups one sample makes (the index input's elements per sample).
  int64_t lookupsPerSample = 0;
  /// The index input does not grow with the batch (position ids): every sample looks up the
  /// same rows, so a step touches at most lookupsPerSample rows whatever the batch.
  bool sharedAcrossSamples = false;
  /// Row lookups per rank per step (not distinct rows): batch x lookupsPerSample, or
  /// lookupsPerSample when shared across samples.
  int64_t lookupsPerStep(int64_t batch) const {
    return sharedAcrossSamples ? lookupsPerSample : batch * lookupsPerSample;
  }
};

/// A parameter gathered by rows that is also used densely (a tied output projection): its
/// gradient is dense. `node` and `opType` name the first dense use found.
struct DenselyUsedTable {
  int parameter = -1;
  std::string node;
  std::string opType;
};

struct ModelGraph {
  std::string path;
  std::string modelName;  ///< file name without extension
  std::string modelHash;  ///< hex FNV-1a 64 of the file bytes
  int64_t irVersion = 0;
  int64_t opsetVersion = 0;
  int64_t batch = 1;
  int64_t exportBatch = 1;
  BatchMode batchMode = BatchMode::Scaled;
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;            ///< topological order
  std::vector<Parameter> parameters;  ///< initializer order
  std::vector<Constant> constants;    ///< initializer order: every initializer not trained
  std::vector<SparseGradient> sparseGradients;  ///< parameter order
  std::vector<DenselyUsedTable> denselyUsedTables; ///< parameter order
  std::vector<BackwardStep> backward;
  std::vector<int> graphInputs;       ///< tensor ids of non-initializer graph inputs
  std::vector<int> graphOutputs;
  std::vector<std::string> warnings;  ///< one line each, for stderr

  int64_t forwardFlops() const;
  int64_t backwardFlops() const;
  int64_t trainableElements() const;
  int64_t trainableBytes() const;
  std::map<std::string, int64_t> flopsByOpType() const;
  /// Sorted op types without a cost rule.
  std::vector<std::string> unsupportedOps() const;
  /// Parameter ids in ready order.
  std::vector<int> parametersByReadyOrder() const;
};

/// Reads `path` (binary .onnx, or ONNX text syntax when it ends in .onnxtxt) and builds
/// the costed training graph. Throws ImportError.
ModelGraph importModel(const std::string &path, const ImportOptions &options = {});

/// The same from bytes already in memory; `path` names the source in messages and
/// selects the text syntax by extension.
ModelGraph importModelFromBytes(const std::string &bytes, const std::string &path,
                                const ImportOptions &options = {});

/// Hex FNV-1a 64-bit hash.
std::string fnv1a64Hex(const std::string &bytes);

} // namespace zen::importer

#endif // ZEN_IMPORTER_MODELGRAPH_H
