//===- Moe.cpp - Mixture-of-Experts layers in ONNX models -----------------===//
#include "Moe.h"

#include "onnx/defs/schema.h"
#include "onnx/defs/shape_inference.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace zen::importer {
namespace {

/// Saturating product, as the cost rules count: adversarial shapes clamp.
int64_t mul(std::initializer_list<int64_t> factors) {
  int64_t result = 1;
  for (int64_t factor : factors)
    if (__builtin_mul_overflow(result, factor, &result))
      return std::numeric_limits<int64_t>::max() / 4;
  return result;
}

int64_t ceilLog2(int64_t value) {
  int64_t log = 0;
  while ((int64_t{1} << log) < value && log < 62)
    ++log;
  return log;
}

} // namespace

int64_t MoeLayer::dispatchFlops() const {
  // Softmax over the logits (5 per element, as the Softmax rule counts) and a
  // top-k selection (a heap of k: log2 k comparisons per logit, at least one).
  return mul({tokens, experts, 5 + std::max<int64_t>(1, ceilLog2(topK))});
}

int64_t MoeLayer::expertFlops() const {
  // Every capacity row runs, filled or not: the buffers are dense.
  const int64_t rows = mul({experts, capacity});
  const int64_t biasWidth =
      (fc1Bias ? fc1Width() : 0) + (fc3Bias ? ffn : 0) + (fc2Bias ? hidden : 0);
  return mul({2, rows, hidden, fc1Rows + ffn}) + mul({rows, biasWidth});
}

int64_t MoeLayer::fc1Width() const { return fc3 ? fc1Rows - ffn : fc1Rows; }

int64_t MoeLayer::combineFlops() const { return mul({2, tokens, topK, hidden}); }

namespace detail {
namespace {

const char *const kActivations[] = {"relu", "gelu", "silu", "swiglu", "identity"};

std::string formatDims(const Tensor &tensor) {
  std::string text = "[";
  for (size_t i = 0; i < tensor.dims.size(); ++i)
    text += (i ? ", " : "") + std::to_string(tensor.dims[i]);
  return text + "]";
}

bool hasDims(const Tensor &tensor, std::initializer_list<int64_t> dims) {
  return tensor.dims == std::vector<int64_t>(dims);
}

// Input positions of the com.microsoft MoE operator.
enum MoeInput { kInput, kRouter, kFc1, kFc1Bias, kFc2, kFc2Bias, kFc3, kFc3Bias };

} // namespace

bool isMoeNode(const onnx::NodeProto &node) {
  return node.op_type() == "MoE" && node.domain() == kMoeDomain;
}

void registerMoeSchema() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto &ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance();
    if (!ranges.Map().count(kMoeDomain))
      ranges.AddDomainToVersion(kMoeDomain, 1, 1);
    if (onnx::OpSchemaRegistry::Schema("MoE", 1, kMoeDomain))
      return;
    using onnx::AttributeProto;
    using Option = onnx::OpSchema::FormalParameterOption;
    onnx::OpSchema schema;
    schema.SetName("MoE").SetDomain(kMoeDomain).SinceVersion(1);
    schema.SetDoc("ONNX Runtime's Mixture-of-Experts contrib operator (version 1).");
    schema.Attr("activation_alpha", "alpha of the activation", AttributeProto::FLOAT, false);
    schema.Attr("activation_beta", "beta of the activation", AttributeProto::FLOAT, false);
    schema.Attr("activation_type", "relu, gelu, silu, swiglu or identity", AttributeProto::STRING,
                false);
    schema.Attr("k", "experts per token", AttributeProto::INT, false);
    schema.Attr("normalize_routing_weights", "normalise the top-k weights", AttributeProto::INT,
                false);
    schema.Attr("swiglu_fusion", "0: FC1 and FC3, 1: interleaved, 2: concatenated",
                AttributeProto::INT, false);
    schema.Attr("swiglu_limit", "SwiGLU clamp", AttributeProto::FLOAT, false);
    schema.Attr("use_sparse_mixer", "sparse mixer routing", AttributeProto::INT, false);
    schema.Input(kInput, "input", "[tokens, hidden] or [batch, sequence, hidden]", "T");
    schema.Input(kRouter, "router_probs", "[tokens, experts]", "T");
    schema.Input(kFc1, "fc1_experts_weights", "[experts, rows, hidden]", "T");
    schema.Input(kFc1Bias, "fc1_experts_bias", "[experts, rows]", "T", Option::Optional);
    schema.Input(kFc2, "fc2_experts_weights", "[experts, hidden, inter]", "T");
    schema.Input(kFc2Bias, "fc2_experts_bias", "[experts, hidden]", "T", Option::Optional);
    schema.Input(kFc3, "fc3_experts_weights", "[experts, inter, hidden]", "T", Option::Optional);
    schema.Input(kFc3Bias, "fc3_experts_bias", "[experts, inter]", "T", Option::Optional);
    schema.Output(0, "output", "the input's shape", "T");
    schema.TypeConstraint("T", {"tensor(float)", "tensor(float16)", "tensor(bfloat16)"},
                          "float tensors");
    schema.TypeAndShapeInferenceFunction([](onnx::InferenceContext &ctx) {
      onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
      if (onnx::hasInputShape(ctx, 0))
        onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
    });
    onnx::OpSchemaRegistry::OpSchemaRegisterOnce registration(schema);
  });
}

MoeLayer describeMoe(const CostSite &site, const std::string &path) {
  auto bad = [&](const std::string &message) {
    return ImportError(ErrorKind::BadInput,
                       path + ": node '" + site.proto.name() + "' (MoE): " + message);
  };
  for (size_t i = 0; i < site.inputs.size(); ++i) {
    const Tensor *tensor = site.input(i);
    if (tensor && (!tensor->rankKnown || std::any_of(tensor->dims.begin(), tensor->dims.end(),
                                                     [](int64_t dim) { return dim < 0; })))
      throw bad("the shape of input '" + tensor->name + "' is not known");
  }
  // A node the schema check let through (an unknown domain version) may lack them.
  for (auto [index, name] : {std::pair{kInput, "input"}, std::pair{kRouter, "router_probs"},
                             std::pair{kFc1, "fc1_experts_weights"},
                             std::pair{kFc2, "fc2_experts_weights"}})
    if (!site.input(index))
      throw bad(std::string("the required input '") + name + "' is missing");
  const Tensor &input = *site.input(kInput), &router = *site.input(kRouter);
  const Tensor &fc1 = *site.input(kFc1), &fc2 = *site.input(kFc2);
  const Tensor *fc3 = site.input(kFc3);
  MoeLayer layer;
  if (input.dims.size() != 2 && input.dims.size() != 3)
    throw bad("input must be [tokens, hidden] or [batch, sequence, hidden], got " +
              formatDims(input));
  layer.tokens = input.dims.size() == 2 ? input.dims[0] : input.dims[0] * input.dims[1];
  layer.hidden = input.dims.back();
  if (layer.tokens < 1 || layer.hidden < 1)
    throw bad("input has no tokens or no features: " + formatDims(input));
  if (router.dims.size() != 2 || router.dims[0] != layer.tokens || router.dims[1] < 1)
    throw bad("router_probs must be [tokens = " + std::to_string(layer.tokens) +
              ", experts >= 1], got " + formatDims(router));
  layer.experts = router.dims[1];

  layer.activation = site.attrString("activation_type", "relu");
  if (std::find(std::begin(kActivations), std::end(kActivations), layer.activation) ==
      std::end(kActivations))
    throw bad("activation_type '" + layer.activation +
              "' is not one of relu, gelu, silu, swiglu, identity");
  const int64_t fusion = site.attrInt("swiglu_fusion", 0);
  if (fusion < 0 || fusion > 2)
    throw bad("swiglu_fusion must be 0, 1 or 2, got " + std::to_string(fusion));
  layer.fc3 = fc3 != nullptr;
  if (layer.activation == "swiglu" && fusion != 0 && layer.fc3)
    throw bad("fc3_experts_weights with swiglu_fusion = " + std::to_string(fusion) +
              ": fc1_experts_weights already holds both halves");
  if (site.input(kFc3Bias) && !layer.fc3)
    throw bad("fc3_experts_bias needs fc3_experts_weights");
  // SwiGLU without fc3 has both halves in fc1, whatever swiglu_fusion says (ONNX Runtime
  // reads exports that left it at 0 so).
  const bool fused = layer.activation == "swiglu" && !layer.fc3;

  // ONNX Runtime keeps the expert weights [experts, out, in]; its earlier releases kept
  // them [experts, in, out]. The input's hidden size tells which side of fc2 is the inter
  // size; every weight must then fit the same layout.
  auto fits = [&](const Tensor &weight, int64_t out, bool inOut) {
    return inOut ? hasDims(weight, {layer.experts, layer.hidden, out})
                 : hasDims(weight, {layer.experts, out, layer.hidden});
  };
  bool found = false;
  for (bool inOut : {false, true}) {
    if (fc2.dims.size() != 3 || fc2.dims[0] != layer.experts ||
        fc2.dims[inOut ? 2 : 1] != layer.hidden || fc2.dims[inOut ? 1 : 2] < 1)
      continue;
    const int64_t ffn = fc2.dims[inOut ? 1 : 2];
    const int64_t rows = fused ? 2 * ffn : ffn;
    if (fits(fc1, rows, inOut) && (!fc3 || fits(*fc3, ffn, inOut))) {
      layer.ffn = ffn;
      layer.fc1Rows = layer.fc3 ? 2 * ffn : rows;
      found = true;
      break;
    }
  }
  if (!found) {
    const std::string e = std::to_string(layer.experts), h = std::to_string(layer.hidden);
    const std::string rows = fused ? "2 x inter_size" : "inter_size";
    std::string given = "fc1_experts_weights " + formatDims(fc1) + ", fc2_experts_weights " +
                        formatDims(fc2);
    std::string current = "fc1 [" + e + ", " + rows + ", " + h + "], fc2 [" + e + ", " + h +
                          ", inter_size]";
    std::string earlier = "fc1 [" + e + ", " + h + ", " + rows + "], fc2 [" + e +
                          ", inter_size, " + h + "]";
    if (fc3) {
      given += ", fc3_experts_weights " + formatDims(*fc3);
      current += ", fc3 [" + e + ", inter_size, " + h + "]";
      earlier += ", fc3 [" + e + ", " + h + ", inter_size]";
    }
    throw bad("no expert-weight layout fits the input's hidden size " + h + " and the " + e +
              " experts of router_probs: " + given + "; ONNX Runtime takes " + current +
              ", or as its earlier releases did " + earlier);
  }
  const std::string experts = std::to_string(layer.experts);
  auto checkBias = [&](MoeInput index, const char *name, int64_t width) {
    const Tensor *bias = site.input(index);
    if (bias && !hasDims(*bias, {layer.experts, width}))
      throw bad(std::string(name) + " must be [" + experts + ", " + std::to_string(width) +
                "], got " + formatDims(*bias));
    return bias != nullptr;
  };
  layer.fc1Bias = checkBias(kFc1Bias, "fc1_experts_bias", layer.fc1Width());
  layer.fc2Bias = checkBias(kFc2Bias, "fc2_experts_bias", layer.hidden);
  layer.fc3Bias = checkBias(kFc3Bias, "fc3_experts_bias", layer.ffn);
  layer.topK = site.attrInt("k", 1);
  if (layer.topK < 1)
    throw bad("k must be at least 1, got " + std::to_string(layer.topK));
  if (layer.topK > layer.experts)
    throw bad("k = " + std::to_string(layer.topK) + " is more than the " + experts + " experts");
  // ONNX Runtime drops no token; its buffers are sized here at the mean load
  // (capacity factor 1), the busiest expert's excess being the cost model's
  // imbalance factor. A fused pattern carries the capacity it was written with.
  const int64_t capacity = site.attrInt("zen_capacity", 0);
  layer.capacity = capacity > 0
                       ? capacity
                       : (mul({layer.topK, layer.tokens}) + layer.experts - 1) / layer.experts;
  return layer;
}

OpCost moeCost(const MoeLayer &layer, size_t inputs) {
  OpCost cost;
  cost.forwardFlops = layer.dispatchFlops() + layer.expertFlops() + layer.combineFlops();
  const int64_t rows = mul({layer.experts, layer.capacity});
  const int64_t gemm1 = mul({2, rows, layer.fc1Width(), layer.hidden});
  const int64_t gemm2 = mul({2, rows, layer.ffn, layer.hidden});
  const int64_t gemm3 = layer.fc3 ? gemm2 : 0;
  cost.inputGradFlops.assign(inputs, 0);
  // The input's gradient flows back through the combine, the GEMMs and the dispatch; the
  // router's through the gates (a dot product per token and expert) and the softmax.
  cost.inputGradFlops[kInput] = gemm1 + gemm2 + gemm3 + 2 * layer.combineFlops();
  cost.inputGradFlops[kRouter] = layer.combineFlops() + mul({4, layer.tokens, layer.experts});
  cost.inputGradFlops[kFc1] = gemm1;
  cost.inputGradFlops[kFc2] = gemm2;
  auto set = [&](MoeInput index, int64_t flops) {
    if (inputs > size_t(index))
      cost.inputGradFlops[index] = flops;
  };
  set(kFc1Bias, mul({rows, layer.fc1Width()}));
  set(kFc2Bias, mul({rows, layer.hidden}));
  set(kFc3, gemm3);
  set(kFc3Bias, layer.fc3 ? mul({rows, layer.ffn}) : 0);
  return cost;
}

//===----------------------------------------------------------------------===//
// Fusing the plain-ONNX pattern
//===----------------------------------------------------------------------===//

namespace {

class PatternFuser {
public:
  explicit PatternFuser(onnx::ModelProto &model) : model(model), graph(*model.mutable_graph()) {}

  bool run() {
    // Every layer is found on the graph as it is, then all are replaced at once: the
    // layers do not share nodes, so fusing one changes nothing another's analysis reads.
    std::vector<Fusion> fusions;
    std::unordered_set<int> claimed;
    // The index reads the whole graph: built only once a candidate is seen (most models
    // route nothing through TopK).
    bool indexed = false;
    for (int n = 0; n < graph.node_size(); ++n) {
      if (!isOnnx(graph.node(n), "TopK") || claimed.count(n))
        continue;
      if (!indexed)
        index();
      indexed = true;
      std::optional<Fusion> fusion = analyse(n);
      if (!fusion || std::any_of(fusion->region.begin(), fusion->region.end(),
                                 [&](int node) { return claimed.count(node) > 0; }))
        continue;
      claimed.insert(fusion->region.begin(), fusion->region.end());
      fusions.push_back(std::move(*fusion));
    }
    if (fusions.empty())
      return false;
    replace(fusions);
    for (const onnx::OperatorSetIdProto &opset : model.opset_import())
      if (opset.domain() == kMoeDomain)
        return true;
    onnx::OperatorSetIdProto *opset = model.add_opset_import();
    opset->set_domain(kMoeDomain);
    opset->set_version(1);
    return true;
  }

private:
  /// One layer to fuse: its nodes, the one whose result it ends in, and the MoE node
  /// that replaces them.
  struct Fusion {
    std::unordered_set<int> region;
    int end = -1;
    onnx::NodeProto moe;
  };

  void index() {
    producer.clear();
    consumers.clear();
    dims.clear();
    initializers.clear();
    for (const onnx::TensorProto &init : graph.initializer())
      initializers[init.name()] = &init;
    auto record = [&](const onnx::ValueInfoProto &info) {
      if (!info.type().has_tensor_type() || !info.type().tensor_type().has_shape())
        return;
      std::vector<int64_t> shape;
      for (const auto &dim : info.type().tensor_type().shape().dim())
        shape.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
      dims[info.name()] = std::move(shape);
    };
    for (const auto &info : graph.input())
      record(info);
    for (const auto &info : graph.value_info())
      record(info);
    graphOutputs.clear();
    for (const auto &info : graph.output()) {
      record(info);
      graphOutputs.insert(info.name());
    }
    for (const onnx::TensorProto &init : graph.initializer())
      dims[init.name()].assign(init.dims().begin(), init.dims().end());
    for (int n = 0; n < graph.node_size(); ++n) {
      for (const std::string &output : graph.node(n).output())
        producer[output] = n;
      for (const std::string &input : graph.node(n).input())
        if (!input.empty())
          consumers[input].push_back(n);
    }
  }

  /// Whether `node` is the default domain's `opType` (a custom domain may reuse the name
  /// with any arity).
  static bool isOnnx(const onnx::NodeProto &node, const char *opType) {
    return node.op_type() == opType && (node.domain().empty() || node.domain() == "ai.onnx");
  }

  /// A node computing only from constants and parameters: initializers and
  /// Constant nodes.
  bool isPreparation(const onnx::NodeProto &node) const {
    return std::all_of(node.input().begin(), node.input().end(), [&](const std::string &input) {
      int source = producerOf(input);
      return input.empty() || initializers.count(input) ||
             (source >= 0 && isOnnx(graph.node(source), "Constant"));
    });
  }

  /// Whether a value node `n` computes is read outside `region` (the end's
  /// result aside).
  bool readOutside(int n, const std::unordered_set<int> &region, int end) const {
    if (n == end)
      return false;
    for (const std::string &output : graph.node(n).output()) {
      if (graphOutputs.count(output))
        return true;
      auto it = consumers.find(output);
      if (it != consumers.end())
        for (int consumer : it->second)
          if (!region.count(consumer))
            return true;
    }
    return false;
  }

  int producerOf(const std::string &tensor) const {
    auto it = producer.find(tensor);
    return it == producer.end() ? -1 : it->second;
  }

  std::vector<int64_t> shapeOf(const std::string &tensor) const {
    auto it = dims.find(tensor);
    return it == dims.end() ? std::vector<int64_t>{} : it->second;
  }

  /// A 3-D float initializer read by input 1 of a batched MatMul through a
  /// Transpose that swaps its last two axes: an expert weight kept as [experts,
  /// out, in].
  std::string expertWeightOf(const onnx::NodeProto &matmul) const {
    if (!isOnnx(matmul, "MatMul") || matmul.input_size() != 2)
      return "";
    int transpose = producerOf(matmul.input(1));
    if (transpose < 0 || !isOnnx(graph.node(transpose), "Transpose"))
      return "";
    const onnx::NodeProto &t = graph.node(transpose);
    bool swapsLast = false;
    for (const auto &attr : t.attribute())
      if (attr.name() == "perm")
        swapsLast = std::vector<int64_t>(attr.ints().begin(), attr.ints().end()) ==
                    std::vector<int64_t>{0, 2, 1};
    auto init = initializers.find(t.input(0));
    if (!swapsLast || init == initializers.end() || init->second->dims_size() != 3 ||
        init->second->data_type() != onnx::TensorProto::FLOAT)
      return "";
    return t.input(0);
  }

  /// The fusion of the pattern whose TopK is node `topk`, on the graph as it is; nullopt
  /// when it is not one.
  std::optional<Fusion> analyse(int topk) {
    int softmax = producerOf(graph.node(topk).input(0));
    if (softmax < 0 || !isOnnx(graph.node(softmax), "Softmax"))
      return std::nullopt;
    const std::string logits = graph.node(softmax).input(0);
    const std::vector<int64_t> logitDims = shapeOf(logits);
    const std::vector<int64_t> topkDims = shapeOf(graph.node(topk).output(0));
    if (logitDims.size() != 2 || topkDims.size() != 2 || logitDims[0] < 1 || logitDims[1] < 1 ||
        topkDims[1] < 1)
      return std::nullopt; // routing of unknown shape: left as plain ops
    const int64_t tokens = logitDims[0];

    // Walk forward in topological order from the logits: the nodes reading what
    // routing derived, the expert GEMMs (two, or three when gated: SwiGLU's gate and up,
    // then down), and the first value back in [tokens, hidden] after the last GEMM, which
    // ends the layer.
    std::unordered_set<std::string> derived{logits};
    std::vector<int> downstream, gemms;
    int end = -1;
    for (int n = softmax; n < graph.node_size() && end < 0; ++n) {
      const onnx::NodeProto &node = graph.node(n);
      bool reads = std::any_of(node.input().begin(), node.input().end(),
                               [&](const std::string &input) { return derived.count(input); });
      if (!reads)
        continue;
      downstream.push_back(n);
      for (const std::string &output : node.output())
        derived.insert(output);
      if (!expertWeightOf(node).empty() && gemms.size() < 3) {
        gemms.push_back(n);
        continue;
      }
      // The combine reads two routed values (the weights and the experts' output); a
      // reshape of the experts' output alone may have the same shape.
      if (gemms.size() < 2 || node.output_size() == 0)
        continue;
      const std::vector<int64_t> out = shapeOf(node.output(0));
      const std::vector<int64_t> experts = shapeOf(graph.node(gemms.back()).output(0));
      const auto routedInputs =
          std::count_if(node.input().begin(), node.input().end(),
                        [&](const std::string &input) { return derived.count(input) > 0; });
      if (routedInputs >= 2 && out.size() == 2 && !experts.empty() && out[0] == tokens &&
          out[1] == experts.back())
        end = n;
    }
    if (end < 0)
      return std::nullopt;

    // The layer: what the end depends on among those nodes, plus the
    // preparation of constants and parameters (the Transposes and Unsqueezes of
    // expert weights and biases, Constant nodes) that nothing outside the layer
    // reads.
    std::unordered_set<int> downstreamSet(downstream.begin(), downstream.end());
    std::unordered_set<int> region{end};
    std::vector<std::string> pending(graph.node(end).input().begin(),
                                     graph.node(end).input().end());
    while (!pending.empty()) {
      std::string tensor = pending.back();
      pending.pop_back();
      int n = producerOf(tensor);
      if (n < 0 || region.count(n))
        continue;
      const onnx::NodeProto &node = graph.node(n);
      if (!downstreamSet.count(n) && !isPreparation(node))
        continue;
      region.insert(n);
      pending.insert(pending.end(), node.input().begin(), node.input().end());
    }
    // A preparation node that something outside reads stays; any other value of
    // the layer read outside (or a graph output) means this is not a layer to
    // fuse.
    for (bool dropped = true; dropped;) {
      dropped = false;
      for (int n : region)
        if (n != end && isPreparation(graph.node(n)) && readOutside(n, region, end)) {
          region.erase(n);
          dropped = true;
          break;
        }
    }
    for (int n : region)
      if (readOutside(n, region, end))
        return std::nullopt;

    // The GEMMs' roles: the last is fc2 (down); of two before it (a gated layer), the one
    // the activation reads is fc1 (the gate), the other fc3 (the linear half).
    const int down = gemms.back();
    int gate = gemms[0], up = -1;
    if (gemms.size() == 3) {
      const bool first = activates(gemms[0], down, region);
      const bool second = activates(gemms[1], down, region);
      if (first == second)
        return std::nullopt; // no single gate: not a layer this fusion knows
      gate = first ? gemms[0] : gemms[1];
      up = first ? gemms[1] : gemms[0];
    }

    // The layer's inputs: the logits, one activation, the expert weights and
    // biases.
    std::string activation, fc1Bias, fc2Bias, fc3Bias;
    const std::string fc1Name = expertWeightOf(graph.node(gate));
    const std::string fc2Name = expertWeightOf(graph.node(down));
    const std::string fc3Name = up < 0 ? "" : expertWeightOf(graph.node(up));
    for (int n : region)
      for (const std::string &input : graph.node(n).input()) {
        if (input.empty() || input == logits || input == fc1Name || input == fc2Name ||
            input == fc3Name)
          continue;
        int source = producerOf(input);
        if (source >= 0 && region.count(source))
          continue;
        auto init = initializers.find(input);
        if (init != initializers.end()) {
          if (init->second->data_type() != onnx::TensorProto::FLOAT ||
              init->second->dims_size() != 2)
            continue; // a constant: depth, values, axes
          // A 2-D parameter is a bias: of the nearest GEMM before the node reading it.
          int owner = gemms[0];
          for (int gemm : gemms)
            if (gemm < n)
              owner = gemm;
          std::string &bias = owner == down ? fc2Bias : owner == gate ? fc1Bias : fc3Bias;
          if (!bias.empty() && bias != input)
            return std::nullopt;
          bias = input;
          continue;
        }
        if (source >= 0 && isOnnx(graph.node(source), "Constant"))
          continue;
        if (!activation.empty() && activation != input)
          return std::nullopt; // two activations: not a layer this fusion knows
        activation = input;
      }
    const std::vector<int64_t> hiddenDims = shapeOf(activation);
    const std::vector<int64_t> dispatched = shapeOf(graph.node(gate).input(0));
    if (activation.empty() || hiddenDims.size() != 2 || hiddenDims[0] != tokens ||
        dispatched.size() != 3 || dispatched[1] < 1)
      return std::nullopt;

    onnx::NodeProto moe;
    const std::string &topkName = graph.node(topk).name();
    const size_t slash = topkName.rfind('/');
    moe.set_name(slash == std::string::npos ? topkName + "/MoE"
                                            : topkName.substr(0, slash) + "/MoE");
    moe.set_op_type("MoE");
    moe.set_domain(kMoeDomain);
    for (const std::string &input : {activation, logits, fc1Name, fc1Bias, fc2Name, fc2Bias})
      moe.add_input(input);
    if (!fc3Name.empty()) {
      moe.add_input(fc3Name);
      moe.add_input(fc3Bias);
    }
    moe.add_output(graph.node(end).output(0));
    auto addInt = [&](const char *name, int64_t value) {
      onnx::AttributeProto *attr = moe.add_attribute();
      attr->set_name(name);
      attr->set_type(onnx::AttributeProto::INT);
      attr->set_i(value);
    };
    addInt("k", topkDims[1]);
    addInt("zen_capacity", dispatched[1]);
    onnx::AttributeProto *act = moe.add_attribute();
    act->set_name("activation_type");
    act->set_type(onnx::AttributeProto::STRING);
    act->set_s(activationBetween(gate, down, region));
    return Fusion{std::move(region), end, std::move(moe)};
  }

  static bool isActivation(const std::string &op) {
    return op == "Erf" || op == "Gelu" || op == "Relu" || op == "Sigmoid";
  }

  /// Whether the value GEMM `gemm` computes reaches an activation op of `region` before
  /// node `before`.
  bool activates(int gemm, int before, const std::unordered_set<int> &region) const {
    std::unordered_set<std::string> reached(graph.node(gemm).output().begin(),
                                            graph.node(gemm).output().end());
    for (int n = gemm + 1; n < before; ++n) {
      const onnx::NodeProto &node = graph.node(n);
      auto isReached = [&](const std::string &in) { return reached.count(in) > 0; };
      if (!region.count(n) || std::none_of(node.input().begin(), node.input().end(), isReached))
        continue;
      if (isActivation(node.op_type()))
        return true;
      reached.insert(node.output().begin(), node.output().end());
    }
    return false;
  }

  /// The activation between the expert GEMMs, by the ops that compute it
  /// (GELU is exported as Erf, SiLU as x * Sigmoid(x)).
  std::string activationBetween(int first, int second, const std::unordered_set<int> &region) {
    for (int n = first + 1; n < second; ++n) {
      if (!region.count(n))
        continue;
      const std::string &op = graph.node(n).op_type();
      if (op == "Erf" || op == "Gelu")
        return "gelu";
      if (op == "Relu")
        return "relu";
      if (op == "Sigmoid")
        return "silu";
    }
    return "identity";
  }

  /// Puts each fusion's MoE node where its end node was, drops the rest of its region, and
  /// the constants and shape annotations only the regions used. The kept nodes move by
  /// pointer (no node is copied but the MoE nodes).
  void replace(std::vector<Fusion> &fusions) {
    std::unordered_set<std::string> inside, read;
    std::unordered_set<int> dropped;
    std::unordered_map<int, onnx::NodeProto *> moeAt;
    for (Fusion &fusion : fusions) {
      for (int n : fusion.region) {
        for (const std::string &output : graph.node(n).output())
          if (output != fusion.moe.output(0))
            inside.insert(output);
        for (const std::string &input : graph.node(n).input())
          read.insert(input);
        if (n != fusion.end)
          dropped.insert(n);
      }
      moeAt[fusion.end] = &fusion.moe;
    }
    auto *nodes = graph.mutable_node();
    const int count = nodes->size();
    int kept = 0;
    for (int n = 0; n < count; ++n) {
      if (dropped.count(n))
        continue;
      if (auto moe = moeAt.find(n); moe != moeAt.end())
        *nodes->Mutable(n) = std::move(*moe->second);
      nodes->SwapElements(kept++, n);
    }
    nodes->DeleteSubrange(kept, count - kept);
    std::unordered_set<std::string> stillRead;
    for (const onnx::NodeProto &node : graph.node())
      stillRead.insert(node.input().begin(), node.input().end());
    auto *inits = graph.mutable_initializer();
    inits->erase(std::remove_if(inits->begin(), inits->end(),
                                [&](const onnx::TensorProto &init) {
                                  return read.count(init.name()) && !stillRead.count(init.name());
                                }),
                 inits->end());
    auto *infos = graph.mutable_value_info();
    infos->erase(std::remove_if(infos->begin(), infos->end(),
                                [&](const onnx::ValueInfoProto &info) {
                                  return inside.count(info.name()) > 0;
                                }),
                 infos->end());
  }

  onnx::ModelProto &model;
  onnx::GraphProto &graph;
  std::unordered_map<std::string, int> producer;
  std::unordered_map<std::string, std::vector<int>> consumers;
  std::unordered_map<std::string, std::vector<int64_t>> dims;
  std::unordered_map<std::string, const onnx::TensorProto *> initializers;
  std::unordered_set<std::string> graphOutputs;
};

} // namespace

bool fuseMoePatterns(onnx::ModelProto &model) { return PatternFuser(model).run(); }

} // namespace detail
} // namespace zen::importer
