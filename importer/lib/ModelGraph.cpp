//===- ModelGraph.cpp - an ONNX model as a costed training graph ----------===//
#include "zen/Importer/ModelGraph.h"

#include "CostRules.h"
#include "Moe.h"
#include "NameTable.h"
#include "OnnxLoader.h"
#include "SparseGradients.h"

#include "onnx/defs/schema.h"
#include "zen/Support/FileIO.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <future>
#include <limits>
#include <set>
#include <sstream>
#include <string_view>

namespace zen::importer {

const char *batchModeName(BatchMode mode) {
  return mode == BatchMode::Symbolic ? "symbolic" : "scaled";
}

bool Tensor::isFloat() const {
  return onnxType == onnx::TensorProto::FLOAT || onnxType == onnx::TensorProto::FLOAT16 ||
         onnxType == onnx::TensorProto::DOUBLE || onnxType == onnx::TensorProto::BFLOAT16;
}

int64_t ModelGraph::forwardFlops() const {
  int64_t total = 0;
  for (const Node &node : nodes)
    total += node.flops;
  return total;
}

int64_t ModelGraph::backwardFlops() const {
  int64_t total = 0;
  for (const BackwardStep &step : backward)
    total += step.flops;
  return total;
}

int64_t ModelGraph::trainableElements() const {
  int64_t total = 0;
  for (const Parameter &param : parameters)
    total += param.elements;
  return total;
}

int64_t ModelGraph::trainableBytes() const {
  int64_t total = 0;
  for (const Parameter &param : parameters)
    total += param.bytes;
  return total;
}

std::map<std::string, int64_t> ModelGraph::flopsByOpType() const {
  std::map<std::string, int64_t> byType;
  for (const Node &node : nodes)
    byType[node.opType] += node.flops;
  return byType;
}

std::vector<std::string> ModelGraph::unsupportedOps() const {
  std::set<std::string> ops;
  for (const Node &node : nodes)
    if (node.unsupported)
      ops.insert(node.opType);
  return {ops.begin(), ops.end()};
}

std::vector<int> ModelGraph::parametersByReadyOrder() const {
  std::vector<int> order(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i)
    order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return parameters[a].readyOrder < parameters[b].readyOrder;
  });
  return order;
}

std::string fnv1a64Hex(const std::string &bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

namespace {

using detail::CostSite;
using detail::LoadedModel;
using detail::OpCost;

/// FLOPs and byte counts saturate here instead of overflowing (the cost rules' own products
/// do too), and an import with any count that reached it is refused, naming the count:
/// 2^61 is far beyond any real model, and totals of counts below it cannot overflow.
constexpr int64_t kCountLimit = std::numeric_limits<int64_t>::max() / 4;

int64_t addCounts(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) || sum > kCountLimit ? kCountLimit : sum;
}

int64_t mulCounts(int64_t a, int64_t b) {
  int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) || product > kCountLimit ? kCountLimit : product;
}

/// Ops a parameter passes through unchanged on its way to the op that uses it.
bool isParameterPassThrough(const std::string &op) {
  return op == "Identity" || op == "Transpose" || op == "Concat" || op == "Unsqueeze" ||
         op == "Squeeze" || op == "Reshape" || op == "Flatten" || op == "Cast";
}

/// Tensors a walk looking for a buffer's role passes at most (bufferRole).
constexpr size_t kRoleWalkLimit = 256;

/// Whether gradients cross input `index` of an op with `schema`: every input ONNX does not
/// mark non-differentiable (a variadic formal covers the inputs from its position on).
bool formalIsDifferentiable(const onnx::OpSchema *schema, size_t index) {
  if (!schema || schema->inputs().empty())
    return true;
  const auto &formals = schema->inputs();
  const auto &formal = formals[std::min(index, formals.size() - 1)];
  return formal.GetDifferentiationCategory() != onnx::OpSchema::NonDifferentiable;
}

/// Ops whose output size follows the values of a shape input.
bool sizesFromShapeValues(const std::string &op) {
  return op == "ConstantOfShape" || op == "Expand" || op == "Tile" || op == "Range" ||
         op == "Resize";
}

class GraphBuilder {
public:
  GraphBuilder(LoadedModel &loaded, ModelGraph &graph, const std::set<std::string> &frozen)
      : loaded(loaded), graph(graph), frozen(frozen) {}

  void build() {
    createTensors();
    for (const std::string &name : frozen)
      if (int id = tensorId(name); id < 0 || !graph.tensors[id].isInitializer)
        graph.warnings.push_back(graph.path + ": warning: frozen initializer '" + name +
                                 "' is not an initializer of the model");
    createNodes();
    findSchemas();
    markBatchProportional();
    findParameterCandidates();
    propagateRequiresGrad();
    findBackwardNodes();
    finalizeParameters();
    costForward();
    deriveBackward();
    checkCounts();
  }

private:
  const onnx::GraphProto &proto() const { return loaded.model->graph(); }

  int tensorId(const std::string &name) const {
    auto it = values.find(name);
    return it == values.end() ? -1 : it->second.tensorId;
  }

  int addTensor(const std::string &name, bool isInitializer = false) {
    auto [it, untyped] = values.try_emplace(name);
    detail::ValueEntry &value = it->second;
    if (value.tensorId >= 0)
      return value.tensorId;
    value.tensorId = static_cast<int>(graph.tensors.size());
    Tensor tensor;
    tensor.name = name;
    if (value.type && value.type->has_sequence_type() &&
        value.type->sequence_type().elem_type().has_tensor_type()) {
      // A sequence (SplitToSequence, a Loop's scan outputs) is costed and differentiated as
      // its element type, of unknown shape: gradients flow through it as through a tensor.
      tensor.onnxType = value.type->sequence_type().elem_type().tensor_type().elem_type();
      tensor.rankKnown = false;
    } else if (!value.type || !value.type->has_tensor_type()) {
      tensor.rankKnown = false;
      if (untyped && !isInitializer)
        graph.warnings.push_back(graph.path + ": warning: no type inferred for tensor '" +
                                 name + "'; its costs count it as one element");
    } else {
      const auto &tensorType = value.type->tensor_type();
      tensor.onnxType = tensorType.elem_type();
      tensor.rankKnown = tensorType.has_shape();
      if (tensorType.has_shape())
        for (const auto &dim : tensorType.shape().dim())
          tensor.dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    }
    graph.tensors.push_back(std::move(tensor));
    return value.tensorId;
  }

  /// The loader's table when the memoized inference left one (it types the same names
  /// this would, each declared once), else one of the declared types, the last of a name's
  /// declarations winning.
  void indexTypes() {
    onnx::GraphProto &g = *loaded.model->mutable_graph();
    if (!values.empty())
      return;
    values.reserve(g.input_size() + g.value_info_size() + g.output_size() + g.initializer_size() +
                   g.node_size());
    for (auto *infos : {g.mutable_input(), g.mutable_value_info(), g.mutable_output()})
      for (onnx::ValueInfoProto &info : *infos)
        values[info.name()].type = info.mutable_type();
  }

  void createTensors() {
    const onnx::GraphProto &g = proto();
    indexTypes();
    graph.tensors.reserve(g.input_size() + g.initializer_size() + g.node_size());
    detail::NameSet initializerNames;
    initializerNames.reserve(g.initializer_size());
    for (const auto &init : g.initializer())
      initializerNames.insert(init.name());
    for (const auto &info : g.input())
      if (!initializerNames.count(info.name()))
        graph.graphInputs.push_back(addTensor(info.name()));
    for (const auto &init : g.initializer()) {
      int id = addTensor(init.name(), /*isInitializer=*/true);
      Tensor &tensor = graph.tensors[id];
      tensor.isInitializer = true;
      tensor.onnxType = init.data_type();
      tensor.rankKnown = true;
      tensor.dims.assign(init.dims().begin(), init.dims().end());
    }
    for (int id : graph.graphInputs)
      graph.tensors[id].isGraphInput = true;
  }

  void createNodes() {
    const onnx::GraphProto &g = proto();
    graph.nodes.reserve(g.node_size());
    for (const onnx::NodeProto &nodeProto : g.node()) {
      Node node;
      node.name = nodeProto.name();
      node.opType = nodeProto.op_type();
      node.domain = nodeProto.domain();
      for (const std::string &input : nodeProto.input())
        node.inputs.push_back(input.empty() ? -1 : tensorId(input));
      addOuterScopeInputs(nodeProto, node);
      for (const std::string &output : nodeProto.output()) {
        int id = output.empty() ? -1 : addTensor(output);
        if (id >= 0)
          graph.tensors[id].producer = static_cast<int>(graph.nodes.size());
        node.outputs.push_back(id);
      }
      graph.nodes.push_back(std::move(node));
    }
    for (const auto &output : g.output()) {
      int id = tensorId(output.name());
      graph.tensors[id].isGraphOutput = true;
      graph.graphOutputs.push_back(id);
    }
    for (Tensor &tensor : graph.tensors) {
      tensor.dtype = detail::onnxDtypeName(tensor.onnxType);
      tensor.elements = 1;
      for (int64_t dim : tensor.dims)
        tensor.elements *= std::max<int64_t>(dim, 1);  // dims were checked not to overflow
    }
  }

  /// A Loop, If or Scan node uses every value of this graph that its subgraphs read: they are
  /// appended to its inputs, differentiable where some read is (its weights train through the
  /// node). A float initializer of a subgraph itself, read differentiably, would be a weight
  /// that no gradient here reaches: the import stops rather than drop it.
  void addOuterScopeInputs(const onnx::NodeProto &proto, Node &node) {
    if (std::none_of(proto.attribute().begin(), proto.attribute().end(),
                     [](const onnx::AttributeProto &attr) {
                       return attr.has_g() || attr.graphs_size() > 0;
                     }))
      return;
    const size_t first = node.inputs.size();
    std::vector<bool> differentiable;
    detail::forEachSubgraphRead(proto, [&](const detail::SubgraphRead &read) {
      const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
          read.reader.op_type(), static_cast<int>(loaded.opsetVersion), read.reader.domain());
      bool readsDifferentiably = formalIsDifferentiable(schema, static_cast<size_t>(read.input));
      if (read.initializer) {
        const int32_t type = read.initializer->data_type();
        if (readsDifferentiably && (type == onnx::TensorProto::FLOAT ||
                                    type == onnx::TensorProto::FLOAT16 ||
                                    type == onnx::TensorProto::DOUBLE ||
                                    type == onnx::TensorProto::BFLOAT16))
          throw ImportError(ErrorKind::BadInput,
                            graph.path + ": node '" + node.name + "' (" + node.opType +
                                "): its subgraph holds float initializer '" + read.name +
                                "', read by " +
                                (read.reader.name().empty()
                                     ? "a " + read.reader.op_type() + " node"
                                     : "node '" + read.reader.name() + "' (" +
                                           read.reader.op_type() + ")") +
                                "; a weight inside a Loop, If or Scan body is not imported: "
                                "make it an initializer of the main graph");
        return;
      }
      int id = tensorId(read.name);
      auto known = std::find(node.inputs.begin(), node.inputs.end(), id);
      if (known != node.inputs.end()) {  // an input already: read once
        size_t index = size_t(known - node.inputs.begin());
        if (readsDifferentiably && index >= first)
          differentiable[index - first] = true;
        return;
      }
      node.inputs.push_back(id);
      differentiable.push_back(readsDifferentiably);
    });
    node.outerScopeInputs = static_cast<int>(node.inputs.size() - first);
    if (node.outerScopeInputs > 0)
      outerDifferentiable[graph.nodes.size()] = std::move(differentiable);
  }

  void markBatchProportional() {
    for (int id : graph.graphInputs)
      graph.tensors[id].batchProportional = true;
    std::vector<bool> batchValued(graph.tensors.size(), false);
    for (Node &node : graph.nodes) {
      bool sized = false, valued = false;
      for (int input : node.inputs) {
        if (input < 0)
          continue;
        sized |= graph.tensors[input].batchProportional;
        valued |= batchValued[input];
      }
      bool metadata = node.opType == "Shape" || node.opType == "Size";
      bool outputSized = metadata ? false : sized || (valued && sizesFromShapeValues(node.opType));
      bool outputValued = metadata ? sized : valued;
      node.batchProportional = sized || outputSized;
      for (int output : node.outputs) {
        if (output < 0)
          continue;
        graph.tensors[output].batchProportional = outputSized;
        batchValued[output] = outputValued;
      }
    }
    const double scale = batchScale();
    for (Tensor &tensor : graph.tensors) {
      int64_t bytes = 0;
      __builtin_mul_overflow(tensor.elements, detail::onnxElementSize(tensor.onnxType), &bytes);
      tensor.bytes = tensor.batchProportional ? scaled(bytes, scale) : bytes;
    }
  }

  double batchScale() const {
    if (graph.batchMode == BatchMode::Symbolic)
      return 1.0;
    return static_cast<double>(graph.batch) / static_cast<double>(graph.exportBatch);
  }

  static int64_t scaled(int64_t value, double scale) {
    long double result = static_cast<long double>(value) * scale;
    if (result >= static_cast<long double>(kCountLimit))
      return kCountLimit;
    return static_cast<int64_t>(result + 0.5L);
  }

  /// Refuses the import when a count saturated (see kCountLimit), naming it. `what`
  /// builds the name only then: one string per node would cost more than the check.
  void checkCounts() const {
    auto check = [&](int64_t count, auto what) {
      if (count >= kCountLimit)
        throw ImportError(ErrorKind::BadInput, graph.path + ": " + what() +
                                                   " overflows (2^61 or more) at batch " +
                                                   std::to_string(graph.batch));
    };
    for (const Tensor &tensor : graph.tensors)
      check(tensor.bytes, [&] { return "the byte size of tensor '" + tensor.name + "'"; });
    int64_t forward = 0, backward = 0, elements = 0, bytes = 0;
    for (const Node &node : graph.nodes) {
      auto name = [&] { return "node '" + node.name + "' (" + node.opType + ")"; };
      check(node.flops, [&] { return "the forward FLOPs of " + name(); });
      check(node.bytes, [&] { return "the forward bytes of " + name(); });
      forward = addCounts(forward, node.flops);
    }
    for (const BackwardStep &step : graph.backward) {
      auto name = [&] {
        return step.node >= 0 ? "node '" + graph.nodes[size_t(step.node)].name + "'"
                              : "step " + step.opType;
      };
      check(step.flops, [&] { return "the backward FLOPs of " + name(); });
      check(step.bytes, [&] { return "the backward bytes of " + name(); });
      backward = addCounts(backward, step.flops);
    }
    for (const Parameter &param : graph.parameters) {
      elements = addCounts(elements, param.elements);
      bytes = addCounts(bytes, param.bytes);
    }
    check(forward, [] { return std::string("the model's forward FLOPs"); });
    check(backward, [] { return std::string("the model's backward FLOPs"); });
    check(elements, [] { return std::string("the model's trainable elements"); });
    check(bytes, [] { return std::string("the model's trainable bytes"); });
  }

  int64_t scaledFor(bool batchProportional, int64_t value) const {
    return batchProportional ? scaled(value, batchScale()) : value;
  }

  /// Each node's schema, looked up once: the registry keys it by op type, opset and
  /// domain strings, and every input of every node asks for it several times.
  void findSchemas() {
    schemas.reserve(graph.nodes.size());
    for (const Node &node : graph.nodes)
      schemas.push_back(onnx::OpSchemaRegistry::Schema(
          node.opType, static_cast<int>(loaded.opsetVersion), node.domain));
  }

  /// Whether gradients flow through input `index` of node `nodeIndex` (float tensors at
  /// inputs the ONNX schema does not mark non-differentiable; never BatchNorm's running
  /// statistics).
  bool isDifferentiableInput(size_t nodeIndex, size_t index) const {
    const Node &node = graph.nodes[nodeIndex];
    int id = node.inputs[index];
    if (id < 0 || !graph.tensors[id].isFloat())
      return false;
    if (node.opType == "BatchNormalization" && index >= 3)
      return false;
    const size_t outerFirst = node.inputs.size() - size_t(node.outerScopeInputs);
    if (index >= outerFirst)
      return outerDifferentiable.at(nodeIndex)[index - outerFirst];
    return formalIsDifferentiable(schemas[nodeIndex], index);
  }

  /// Consumers of each tensor, as (node, input index).
  void indexConsumers() {
    consumers.assign(graph.tensors.size(), {});
    for (size_t n = 0; n < graph.nodes.size(); ++n)
      for (size_t i = 0; i < graph.nodes[n].inputs.size(); ++i)
        if (graph.nodes[n].inputs[i] >= 0)
          consumers[graph.nodes[n].inputs[i]].push_back({static_cast<int>(n), i});
  }

  /// Float initializers that reach a differentiable use, directly or through pass-through
  /// ops, are trained, unless frozen or recognised as a buffer by their role (bufferRole).
  /// Running statistics and shape/index constants never reach one.
  void findParameterCandidates() {
    indexConsumers();
    constantRules.assign(graph.tensors.size(), nullptr);
    seenFrom.assign(graph.tensors.size(), -1);
    for (int id = 0; id < static_cast<int>(graph.tensors.size()); ++id) {
      const Tensor &tensor = graph.tensors[id];
      if (!tensor.isInitializer)
        continue;
      if (frozen.count(tensor.name))
        constantRules[id] = "frozen";
      else if (!tensor.isFloat())
        constantRules[id] = "integer";
      else if (const char *role = bufferRole(id))
        constantRules[id] = role;
      else if (reachesUse(
                   id, [&](int node, size_t) { return isParameterPassThrough(opOf(node)); },
                   [](int, size_t) { return true; }) == Reach::All)
        graph.tensors[id].requiresGrad = true;
    }
  }

  enum class Reach { None, Some, All };

  const std::string &opOf(int node) const { return graph.nodes[size_t(node)].opType; }

  /// Walks from initializer `id` through its differentiable uses, past the nodes
  /// `passes(node, input)` lets it through, to the ops that use it: None when there are none,
  /// All when `accepts(node, input)` holds for every one (the first use not accepted ends
  /// the walk: Some). A walk past more than `limit` tensors ends as Some too: a buffer's
  /// uses are near it, and no walk crosses the model once per initializer.
  template <typename Passes, typename Accepts>
  Reach reachesUse(int id, Passes passes, Accepts accepts,
                   size_t limit = std::numeric_limits<size_t>::max()) {
    // seenFrom[t] == walk: this walk reached t (no set per walk).
    const int walk = ++walks;
    seenFrom[id] = walk;
    frontier.assign(1, id);
    bool any = false;
    for (size_t visited = 0; !frontier.empty(); ++visited) {
      if (visited > limit)
        return Reach::Some;
      int current = frontier.back();
      frontier.pop_back();
      for (auto [nodeIndex, input] : consumers[current]) {
        const Node &node = graph.nodes[nodeIndex];
        if (!isDifferentiableInput(nodeIndex, input))
          continue;
        if (passes(nodeIndex, input)) {
          for (int output : node.outputs)
            if (output >= 0 && graph.tensors[output].isFloat() && seenFrom[output] != walk) {
              seenFrom[output] = walk;
              frontier.push_back(output);
            }
          continue;
        }
        if (!accepts(nodeIndex, input))
          return Reach::Some;
        any = true;
      }
    }
    return any ? Reach::All : Reach::None;
  }

  /// The role of a float initializer that is a buffer of the model, not a weight: every
  /// differentiable use is the role's. A weight used in the same place has another use
  /// as well (its GEMM, its Gather), so it is never taken for one.
  const char *bufferRole(int id) {
    // An additive attention mask: sliced and broadcast to the scores' shape on the way, not
    // gathered (a learned relative-position bias is gathered from an embedding).
    // Scaled by a scalar too: torch's baddbmm (nn.MultiheadAttention with attn_mask) adds
    // beta * mask to alpha * scores.
    auto maskViews = [&](int node, size_t input) {
      const std::string &op = opOf(node);
      return isParameterPassThrough(op) || (input == 0 && (op == "Slice" || op == "Expand")) ||
             isScalarScaling(node, input);
    };
    if (reachesUse(
            id, maskViews, [&](int node, size_t input) { return isAttentionMaskUse(node, input); },
            kRoleWalkLimit) == Reach::All)
      return "attention-mask";
    // A rotary table: sliced to the sequence, or gathered at the positions; or the inverse
    // frequencies the angles, their cos and sin are computed from (recent Hugging Face
    // code), scaled on the way. A weight reaching a rotary product as its activation
    // (q = x Wq) reaches the Neg of rotate_half too, which ends the walk.
    auto tableViews = [&](int node, size_t input) {
      const std::string &op = opOf(node);
      if (isParameterPassThrough(op) ||
          (input == 0 && (op == "Slice" || op == "Expand" || op == "Gather")))
        return true;
      return op == "Cos" || op == "Sin" || op == "MatMul" || op == "Einsum" ||
             ((op == "Mul" || op == "Div") && !isRotaryUse(node));
    };
    if (reachesUse(
            id, tableViews, [&](int node, size_t) { return isRotaryUse(node); },
            kRoleWalkLimit) == Reach::All)
      return "rotary-table";
    return nullptr;
  }

  /// Whether node `n` multiplies its input `input` by a scalar (or divides it by one).
  bool isScalarScaling(int n, size_t input) const {
    const Node &node = graph.nodes[n];
    if ((node.opType != "Mul" && !(node.opType == "Div" && input == 0)) || node.inputs.size() != 2)
      return false;
    const int other = node.inputs[1 - input];
    if (other < 0 || !graph.tensors[other].rankKnown)
      return false;
    const std::vector<int64_t> &dims = graph.tensors[other].dims;
    return std::all_of(dims.begin(), dims.end(), [](int64_t dim) { return dim == 1; });
  }

  /// The producer of tensor `id` seen through ops that keep values (casts, reshapes):
  /// -1 for an input or initializer.
  int producerThroughViews(int id) const {
    for (int depth = 0; id >= 0 && depth < 8; ++depth) {
      int producer = graph.tensors[id].producer;
      if (producer < 0)
        return -1;
      const Node &node = graph.nodes[producer];
      const std::string &op = node.opType;
      if (op != "Cast" && op != "Identity" && op != "Reshape" && op != "Flatten" &&
          op != "Unsqueeze" && op != "Squeeze")
        return producer;
      id = node.inputs.empty() ? -1 : node.inputs[0];
    }
    return -1;
  }

  /// Whether tensor `id` is attention scores: a MatMul (or Einsum) of two activations (both
  /// grow with the batch: a layer's GEMM has a weight operand), possibly scaled or already
  /// masked on the way.
  bool isAttentionScores(int id, int depth = 0) const {
    int producer = producerThroughViews(id);
    if (producer < 0 || depth > 4)
      return false;
    const Node &node = graph.nodes[producer];
    if (node.opType == "MatMul" || node.opType == "Einsum") {
      int activations = 0;
      for (int input : node.inputs)
        activations += input >= 0 && graph.tensors[input].batchProportional;
      return activations >= 2;
    }
    if (node.opType == "Div" || node.opType == "Mul" || node.opType == "Add" ||
        node.opType == "Sub" || node.opType == "Where")
      for (size_t i = node.opType == "Where" ? 1 : 0; i < node.inputs.size(); ++i)
        if (node.inputs[i] >= 0 && isAttentionScores(node.inputs[i], depth + 1))
          return true;
    return false;
  }

  /// Whether input `input` of node `n` masks attention scores: an Add, Sub or Where (as a
  /// selected value) with attention scores as its other operand, whose result reaches a
  /// Softmax through scaling, further masking and casts only.
  bool isAttentionMaskUse(int n, size_t input) const {
    const Node &node = graph.nodes[n];
    const bool where = node.opType == "Where";
    if (!(node.opType == "Add" || node.opType == "Sub" || (where && input >= 1)) ||
        node.inputs.size() != (where ? 3u : 2u))
      return false;
    int other = node.inputs[where ? 3 - input : 1 - input];
    if (other < 0 || !isAttentionScores(other))
      return false;
    // Forward to the Softmax.
    int current = node.outputs.empty() ? -1 : node.outputs[0];
    for (int depth = 0; current >= 0 && depth < 6; ++depth) {
      int next = -1;
      for (auto [consumer, at] : consumers[size_t(current)]) {
        const std::string &op = graph.nodes[consumer].opType;
        if (op == "Softmax" || op == "LogSoftmax")
          return true;
        if (op == "Add" || op == "Sub" || op == "Div" || op == "Mul" || op == "Cast" ||
            op == "Reshape" || (op == "Where" && at >= 1))
          next = graph.nodes[consumer].outputs[0];
      }
      current = next;
    }
    return false;
  }

  /// Whether Mul node `n` is one of the two products of rotary positions,
  /// x * cos + rotate_half(x) * sin: its result is summed with another Mul's, and one of
  /// the two multiplies a rotate_half (a Concat of a negated half).
  bool isRotaryUse(int n) const {
    const Node &mul = graph.nodes[n];
    if (mul.opType != "Mul" || mul.outputs.empty() || mul.outputs[0] < 0)
      return false;
    auto rotatesHalf = [&](const Node &product) {
      for (int operand : product.inputs) {
        int concat = operand >= 0 ? producerThroughViews(operand) : -1;
        if (concat < 0 || graph.nodes[concat].opType != "Concat")
          continue;
        for (int part : graph.nodes[concat].inputs) {
          int neg = part >= 0 ? producerThroughViews(part) : -1;
          if (neg >= 0 && graph.nodes[neg].opType == "Neg")
            return true;
        }
      }
      return false;
    };
    for (auto [consumer, at] : consumers[size_t(mul.outputs[0])]) {
      const Node &add = graph.nodes[consumer];
      if (add.opType != "Add" || add.inputs.size() != 2)
        continue;
      int otherProduct = add.inputs[1 - at] >= 0 ? graph.tensors[add.inputs[1 - at]].producer : -1;
      if (otherProduct < 0 || graph.nodes[otherProduct].opType != "Mul")
        continue;
      if (rotatesHalf(mul) != rotatesHalf(graph.nodes[otherProduct]))
        return true;
    }
    return false;
  }

  void propagateRequiresGrad() {
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      const Node &node = graph.nodes[n];
      bool any = false;
      for (size_t i = 0; i < node.inputs.size() && !any; ++i)
        any = isDifferentiableInput(n, i) && graph.tensors[node.inputs[i]].requiresGrad;
      if (!any)
        continue;
      for (int output : node.outputs)
        if (output >= 0 && graph.tensors[output].isFloat())
          graph.tensors[output].requiresGrad = true;
    }
  }

  /// A node has a backward step when a gradient reaches one of its outputs and one of its
  /// differentiable inputs needs a gradient; expected[t] counts the steps contributing
  /// to tensor t's gradient.
  void findBackwardNodes() {
    receivesGrad.assign(graph.tensors.size(), false);
    expectedContributions.assign(graph.tensors.size(), 0);
    for (int output : graph.graphOutputs)
      if (graph.tensors[output].requiresGrad) {
        receivesGrad[output] = true;
        expectedContributions[output] = 1;  // the loss gradient
      }
    hasBackward.assign(graph.nodes.size(), false);
    // countedFor[t] == n: node n already counted its contribution to t (no set per node).
    std::vector<int> countedFor(graph.tensors.size(), -1);
    for (int n = static_cast<int>(graph.nodes.size()) - 1; n >= 0; --n) {
      const Node &node = graph.nodes[n];
      bool gradientArrives = false;
      for (int output : node.outputs)
        gradientArrives |= output >= 0 && receivesGrad[output];
      if (!gradientArrives)
        continue;
      bool anyInput = false;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        int input = node.inputs[i];
        if (isDifferentiableInput(n, i) && graph.tensors[input].requiresGrad &&
            countedFor[input] != n) {
          countedFor[input] = n;
          anyInput = true;
          receivesGrad[input] = true;
          ++expectedContributions[input];
        }
      }
      hasBackward[n] = anyInput;
    }
  }

  /// Every initializer becomes a parameter or a constant, in initializer order.
  void finalizeParameters() {
    std::vector<bool> feedsOutput = findValuesFeedingOutputs();
    graph.parameters.reserve(static_cast<size_t>(std::count_if(
        graph.tensors.begin(), graph.tensors.end(),
        [](const Tensor &tensor) { return tensor.isInitializer && tensor.requiresGrad; })));
    for (int id = 0; id < static_cast<int>(graph.tensors.size()); ++id) {
      Tensor &tensor = graph.tensors[id];
      if (!tensor.isInitializer)
        continue;
      if (tensor.requiresGrad && !receivesGrad[id]) {
        if (!feedsOutput[id])
          graph.warnings.push_back(graph.path + ": warning: initializer '" + tensor.name +
                                   "' affects no graph output; it is not trained");
        tensor.requiresGrad = false;
      }
      if (!tensor.requiresGrad) {
        const char *rule = constantRules[id];
        if (!rule)
          rule = feedsOutput[id] ? "no-differentiable-use" : "unused";
        graph.constants.push_back({tensor.name, id, rule});
        continue;
      }
      Parameter param;
      param.name = tensor.name;
      param.tensor = id;
      param.elements = tensor.elements;
      param.bytes = tensor.bytes;
      param.dtype = tensor.dtype;
      tensor.parameter = static_cast<int>(graph.parameters.size());
      graph.parameters.push_back(std::move(param));
    }
    warnOfInferenceExport();
  }

  /// Whether each tensor reaches a graph output through any of the nodes' inputs.
  std::vector<bool> findValuesFeedingOutputs() const {
    std::vector<bool> feeds(graph.tensors.size(), false);
    for (int output : graph.graphOutputs)
      feeds[size_t(output)] = true;
    for (auto node = graph.nodes.rbegin(); node != graph.nodes.rend(); ++node) {
      if (std::none_of(node->outputs.begin(), node->outputs.end(),
                       [&](int output) { return output >= 0 && feeds[size_t(output)]; }))
        continue;
      for (int input : node->inputs)
        if (input >= 0)
          feeds[size_t(input)] = true;
    }
    return feeds;
  }

  /// An export for inference renames the parameters it folds (BatchNorm into the
  /// convolutions: onnx::Conv_NN) and drops the training-mode ops: its parameters are not
  /// the model's. Warned about once, with the way to export for training.
  void warnOfInferenceExport() {
    auto anonymous = std::find_if(graph.parameters.begin(), graph.parameters.end(),
                                  [](const Parameter &param) {
                                    return param.name.rfind("onnx::", 0) == 0;
                                  });
    if (anonymous == graph.parameters.end())
      return;
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      const Node &node = graph.nodes[n];
      if (node.opType == "Dropout")
        return;
      if (node.opType == "BatchNormalization") {
        const onnx::NodeProto &proto = this->proto().node(static_cast<int>(n));
        bool training = proto.output_size() > 1;  // the running statistics are updated
        for (const auto &attr : proto.attribute())
          training |= attr.name() == "training_mode" && attr.i() != 0;
        if (training)
          return;
      }
    }
    graph.warnings.push_back(
        graph.path + ": warning: this looks like an export for inference (parameter '" +
        anonymous->name + "' has an anonymous name, and no Dropout or training-mode "
        "BatchNormalization is left): folded parameters (BatchNorm into convolutions) are not "
        "the model's own; re-export for training with torch.onnx.export(..., "
        "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)");
  }

  CostSite siteOf(size_t nodeIndex) const {
    const Node &node = graph.nodes[nodeIndex];
    CostSite site{proto().node(static_cast<int>(nodeIndex)), {}, {}};
    for (int input : node.inputs)
      site.inputs.push_back(input >= 0 ? &graph.tensors[input] : nullptr);
    for (int output : node.outputs)
      site.outputs.push_back(output >= 0 ? &graph.tensors[output] : nullptr);
    return site;
  }

  void costForward() {
    std::map<std::string, std::vector<std::string>> unsupported;
    costs.resize(graph.nodes.size());
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      Node &node = graph.nodes[n];
      CostSite site = siteOf(n);
      if (detail::isMoeNode(site.proto)) {
        node.moe = detail::describeMoe(site, graph.path);
        // Its dispatch buffers are the export batch's tokens: scaling the layer's costs
        // alone would price all-to-alls and expert GEMMs of another shape.
        if (graph.batchMode == BatchMode::Scaled && graph.batch != graph.exportBatch)
          throw ImportError(ErrorKind::BadInput,
                            graph.path + ": node '" + node.name + "' (MoE): --batch " +
                                std::to_string(graph.batch) + " needs a model exported with "
                                "a symbolic batch dimension; this one fixes the batch at " +
                                std::to_string(graph.exportBatch) +
                                ", and with it every MoE layer's tokens and capacity");
      }
      std::optional<OpCost> cost =
          node.moe ? detail::moeCost(*node.moe, node.inputs.size()) : detail::costOf(site);
      if (!cost) {
        node.unsupported = true;
        unsupported[node.opType].push_back(node.name);
        cost = OpCost{};
        cost->inputGradFlops.assign(node.inputs.size(), 0);
      }
      node.flops = scaledFor(node.batchProportional, cost->forwardFlops);
      node.bytes = forwardBytes(node, *cost);
      costs[n] = std::move(*cost);
    }
    for (const auto &[op, names] : unsupported)
      graph.warnings.push_back(graph.path + ": warning: no cost rule for op '" + op +
                               "' (node '" + names.front() + "'" +
                               (names.size() > 1 ? " and " + std::to_string(names.size() - 1) +
                                                       " more"
                                                 : std::string()) +
                               "); counting its bytes only");
  }

  int64_t forwardBytes(const Node &node, const OpCost &cost) const {
    if (cost.isView)
      return 0;
    int64_t bytes = 0;
    for (int output : node.outputs)
      if (output >= 0)
        bytes = addCounts(bytes, graph.tensors[output].bytes);
    if (cost.readsMetadataOnly)
      return bytes;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      int input = node.inputs[i];
      if (input < 0)
        continue;
      bool partial = cost.readsOutputSizedPart && i == 0 && node.outputs[0] >= 0;
      bytes = addCounts(bytes, partial ? graph.tensors[node.outputs[0]].bytes
                                       : graph.tensors[input].bytes);
    }
    return bytes;
  }

  int addStep(BackwardStep step) {
    graph.backward.push_back(std::move(step));
    return static_cast<int>(graph.backward.size()) - 1;
  }

  /// Records that result `result` of `step` contributes to `tensor`'s gradient; a
  /// parameter whose last contribution this is becomes complete (summed first when
  /// several steps contributed).
  void contribute(int tensor, int step, int result) {
    contributions[tensor].push_back({step, result});
    int param = graph.tensors[tensor].parameter;
    if (param < 0 ||
        static_cast<int>(contributions[tensor].size()) != expectedContributions[tensor])
      return;
    if (contributions[tensor].size() == 1) {
      completeParameter(param, step, result);
      return;
    }
    pendingAccumulations.push_back(tensor);
  }

  void completeParameter(int param, int step, int result) {
    Parameter &parameter = graph.parameters[param];
    parameter.gradient = {step, result};
    parameter.readyStep = step;
    graph.backward[step].completedParameters.push_back(param);
  }

  void emitPendingAccumulations() {
    for (int tensor : pendingAccumulations) {
      const Tensor &t = graph.tensors[tensor];
      BackwardStep step;
      step.kind = BackwardStep::Kind::Accumulate;
      step.opType = "GradAccumulate";
      step.incomingGrads = contributions[tensor];
      step.gradTensors = {tensor};
      int64_t count = static_cast<int64_t>(contributions[tensor].size());
      step.flops = mulCounts(count - 1, t.elements);
      step.bytes = mulCounts(count + 1, t.bytes);
      int index = addStep(std::move(step));
      completeParameter(t.parameter, index, 0);
    }
    pendingAccumulations.clear();
  }

  void deriveBackward() {
    contributions.assign(graph.tensors.size(), {});
    // At most the loss step, a step per node and an accumulation per parameter: reserved
    // (untouched capacity costs no memory), the steps are never moved while they grow.
    graph.backward.reserve(1 + graph.nodes.size() + graph.parameters.size());
    // The loss gradient seeds every output that depends on a parameter.
    BackwardStep seed;
    seed.kind = BackwardStep::Kind::LossGradient;
    seed.opType = "LossGrad";
    for (int output : graph.graphOutputs) {
      if (!receivesGrad[output] ||
          std::find(seed.gradTensors.begin(), seed.gradTensors.end(), output) !=
              seed.gradTensors.end())
        continue;
      const Tensor &tensor = graph.tensors[output];
      seed.savedTensors.push_back(output);
      seed.gradTensors.push_back(output);
      seed.flops = addCounts(seed.flops, scaledFor(tensor.batchProportional, tensor.elements));
      seed.bytes = addCounts(seed.bytes, mulCounts(2, tensor.bytes));
    }
    if (seed.gradTensors.empty())
      return;
    int seedStep = addStep(std::move(seed));
    for (size_t i = 0; i < graph.backward[seedStep].gradTensors.size(); ++i)
      contribute(graph.backward[seedStep].gradTensors[i], seedStep, static_cast<int>(i));
    emitPendingAccumulations();

    for (int n = static_cast<int>(graph.nodes.size()) - 1; n >= 0; --n) {
      if (!hasBackward[n])
        continue;
      Node &node = graph.nodes[n];
      const OpCost &cost = costs[n];
      BackwardStep step;
      step.kind = BackwardStep::Kind::NodeGradient;
      step.opType = node.opType + "Grad";
      step.node = n;
      int64_t flops = 0, bytes = 0;
      for (int output : node.outputs) {
        if (output < 0 || !receivesGrad[output])
          continue;
        const auto &incoming = contributions[output];
        step.incomingGrads.insert(step.incomingGrads.end(), incoming.begin(), incoming.end());
        // Several consumers' gradients are summed here.
        int64_t count = static_cast<int64_t>(incoming.size());
        flops = addCounts(flops, mulCounts(count - 1, graph.tensors[output].elements));
        bytes = addCounts(bytes, mulCounts(count, graph.tensors[output].bytes));
      }
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        int input = node.inputs[i];
        if (input < 0)
          continue;
        bool needsGrad = isDifferentiableInput(n, i) && graph.tensors[input].requiresGrad;
        if (needsGrad) {
          flops = addCounts(flops, cost.inputGradFlops[i]);
          if (std::find(step.gradTensors.begin(), step.gradTensors.end(), input) ==
              step.gradTensors.end()) {
            step.gradTensors.push_back(input);
            bytes = addCounts(bytes, graph.tensors[input].bytes);
          } else {
            flops = addCounts(flops, graph.tensors[input].elements);  // the same tensor twice: summed
          }
        }
        bool reads = (cost.backwardReadsInputs && !cost.backwardReadsOutput) ||
                     (!graph.tensors[input].isFloat() && cost.readsOutputSizedPart);
        if (reads && !cost.isView &&
            std::find(step.savedTensors.begin(), step.savedTensors.end(), input) ==
                step.savedTensors.end()) {
          step.savedTensors.push_back(input);
          bool partial = cost.readsOutputSizedPart && i == 0;
          bytes = addCounts(bytes, partial ? 0 : graph.tensors[input].bytes);
        }
      }
      if (cost.backwardReadsOutput && !node.outputs.empty() && node.outputs[0] >= 0) {
        step.savedTensors.push_back(node.outputs[0]);
        bytes = addCounts(bytes, graph.tensors[node.outputs[0]].bytes);
      }
      if (cost.isView)
        bytes = 0;
      // Costs proportional to activations grow with the batch; the weight-gradient
      // writes counted in `bytes` use the tensors' own (unscaled) sizes already.
      step.flops = scaledFor(node.batchProportional, flops);
      step.bytes = bytes;
      int index = addStep(std::move(step));
      node.backwardStep = index;
      const auto gradTensors = graph.backward[index].gradTensors;
      for (size_t r = 0; r < gradTensors.size(); ++r)
        contribute(gradTensors[r], index, static_cast<int>(r));
      emitPendingAccumulations();
    }
    int order = 0;
    for (const BackwardStep &step : graph.backward)
      for (int param : step.completedParameters)
        graph.parameters[param].readyOrder = order++;
  }

  LoadedModel &loaded;
  ModelGraph &graph;
  const std::set<std::string> &frozen;
  /// Every value by name (views of the model's own names: no name is copied), its type
  /// and its tensor once created.
  detail::ValueTable &values = loaded.values;
  std::vector<const onnx::OpSchema *> schemas;
  /// For nodes with outer-scope inputs: whether each is read differentiably.
  std::map<size_t, std::vector<bool>> outerDifferentiable;
  std::vector<std::vector<std::pair<int, size_t>>> consumers;
  /// The rule that made each initializer a constant (null: none yet).
  std::vector<const char *> constantRules;
  /// Scratch of reachesUse: the last walk that reached each tensor, the walk's frontier.
  std::vector<int> seenFrom;
  std::vector<int> frontier;
  int walks = 0;
  std::vector<bool> receivesGrad;
  std::vector<int> expectedContributions;
  std::vector<bool> hasBackward;
  std::vector<OpCost> costs;
  std::vector<std::vector<GradValue>> contributions;
  std::vector<int> pendingAccumulations;
};

std::string stem(const std::string &path) {
  size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = name.find('.');
  return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
}

} // namespace

ModelGraph importModelFromBytes(const std::string &bytes, const std::string &path,
                                const ImportOptions &options) {
  if (options.batch && *options.batch <= 0)
    throw std::invalid_argument("batch must be positive");
  // The hash reads the file a byte at a time (~30 ms for a 100 000-tensor model's 24 MB):
  // on a second thread, beside the parse.
  std::future<std::string> hash = std::async(std::launch::async, fnv1a64Hex, std::cref(bytes));
  detail::LoadedModel loaded = detail::loadOnnxModel(bytes, path, options);
  ModelGraph graph;
  graph.path = path;
  graph.modelName = stem(path);
  graph.modelHash = hash.get();
  graph.irVersion = loaded.model->ir_version();
  graph.opsetVersion = loaded.opsetVersion;
  graph.batch = loaded.batch;
  graph.exportBatch = loaded.exportBatch;
  graph.batchMode = loaded.batchMode;
  graph.warnings = std::move(loaded.warnings);
  GraphBuilder(loaded, graph, options.frozen).build();
  detail::findSparseGradients(loaded.model->graph(), graph);
  return graph;
}

ModelGraph importModel(const std::string &path, const ImportOptions &options) {
  // ONNX registers every opset's operator schemas the first time one is looked up (8 ms, a
  // fifth of planning GPT-2 small end to end): on a second thread, while the file is read and
  // parsed. The import waits for it before it first reads a registry.
  std::future<void> schemas = std::async(std::launch::async, detail::registerMoeSchema);
  // Protobuf's own limit on a message: larger models keep their weights as external data.
  constexpr uint64_t kMaxModelBytes = uint64_t(std::numeric_limits<int>::max());
  std::string bytes;
  try {
    bytes = zen::io::readBounded(path, kMaxModelBytes, "model file");
  } catch (const zen::io::FileError &error) {
    throw ImportError(error.kind, error.what());
  }
  return importModelFromBytes(bytes, path, options);
}

} // namespace zen::importer
