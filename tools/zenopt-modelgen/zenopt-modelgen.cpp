//===- zenopt-modelgen.cpp - graph-only ONNX models for what-if planning ---===//
//
// Writes ONNX files shaped like PyTorch's exports (opset 14, LayerNorm, RMSNorm,
// GELU and SiLU decomposed, initializers marked as external data with no bytes
// shipped) for GPT-style decoders, BERT-style encoders, Llama-style decoders
// (optionally with Mixtral's MoE experts) and deep MLPs of any size, so that
// zenopt can plan models that are never materialised, e.g. GPT-3 175B.
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "ExitCodes.h"
#include "zenrt/Plan.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <iostream>

namespace {

constexpr int kExitUsage = 2;

/// Builds one graph: fresh value names, initializers without data, nodes in order.
class GraphBuilder {
public:
  explicit GraphBuilder(onnx::GraphProto &graph, std::string weightsFile)
      : graph_(graph), weightsFile_(std::move(weightsFile)) {}

  /// A trainable (or constant) float initializer with dims only.
  std::string weight(const std::string &name, std::vector<int64_t> dims) {
    onnx::TensorProto *tensor = graph_.add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t dim : dims)
      tensor->add_dims(dim);
    tensor->set_data_location(onnx::TensorProto::EXTERNAL);
    onnx::StringStringEntryProto *location = tensor->add_external_data();
    location->set_key("location");
    location->set_value(weightsFile_);
    return name;
  }

  /// A small int64 or float constant, as the exporter emits for shapes and scalars.
  std::string constantInts(const std::string &scope, const std::vector<int64_t> &values) {
    onnx::TensorProto tensor;
    tensor.set_data_type(onnx::TensorProto::INT64);
    tensor.add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values)
      tensor.add_int64_data(v);
    return constantNode(scope, tensor);
  }
  std::string constantFloat(const std::string &scope, float value) {
    onnx::TensorProto tensor;
    tensor.set_data_type(onnx::TensorProto::FLOAT);
    tensor.add_float_data(value);
    return constantNode(scope, tensor);
  }

  /// An initializer with its (few) values inline: shapes, axes and sizes the shape
  /// inference must read.
  std::string inlineInts(const std::string &name, const std::vector<int64_t> &dims,
                         const std::vector<int64_t> &values) {
    onnx::TensorProto *tensor = graph_.add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(onnx::TensorProto::INT64);
    for (int64_t dim : dims)
      tensor->add_dims(dim);
    for (int64_t v : values)
      tensor->add_int64_data(v);
    return name;
  }
  std::string inlineFloats(const std::string &name, const std::vector<float> &values) {
    onnx::TensorProto *tensor = graph_.add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(onnx::TensorProto::FLOAT);
    tensor->add_dims(static_cast<int64_t>(values.size()));
    for (float v : values)
      tensor->add_float_data(v);
    return name;
  }

  /// A node with `outputs` results (TopK's values and indices).
  std::vector<std::string>
  nodeOutputs(const std::string &opType, const std::string &scope,
              const std::vector<std::string> &inputs, int outputs,
              const std::vector<std::pair<std::string, int64_t>> &intAttrs) {
    std::string first = node(opType, scope, inputs, intAttrs);
    onnx::NodeProto *added = graph_.mutable_node(graph_.node_size() - 1);
    std::vector<std::string> names{first};
    for (int i = 1; i < outputs; ++i)
      names.push_back(*added->add_output() = added->name() + "_output_" + std::to_string(i));
    return names;
  }

  std::string node(const std::string &opType, const std::string &scope,
                   const std::vector<std::string> &inputs,
                   const std::vector<std::pair<std::string, int64_t>> &intAttrs = {},
                   const std::vector<std::pair<std::string, std::vector<int64_t>>> &listAttrs = {}) {
    onnx::NodeProto *node = graph_.add_node();
    std::string name = fmt::format("{}/{}_{}", scope, opType, counter_++);
    node->set_name(name);
    node->set_op_type(opType);
    for (const std::string &input : inputs)
      node->add_input(input);
    std::string output = name + "_output_0";
    node->add_output(output);
    for (const auto &[key, value] : intAttrs) {
      onnx::AttributeProto *attr = node->add_attribute();
      attr->set_name(key);
      attr->set_type(onnx::AttributeProto::INT);
      attr->set_i(value);
    }
    for (const auto &[key, values] : listAttrs) {
      onnx::AttributeProto *attr = node->add_attribute();
      attr->set_name(key);
      attr->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : values)
        attr->add_ints(v);
    }
    return output;
  }

  void input(const std::string &name, int elemType, const std::vector<int64_t> &dims) {
    describe(graph_.add_input(), name, elemType, dims);
  }
  void output(const std::string &name, const std::vector<int64_t> &dims) {
    describe(graph_.add_output(), name, onnx::TensorProto::FLOAT, dims);
  }

private:
  std::string constantNode(const std::string &scope, const onnx::TensorProto &value) {
    onnx::NodeProto *node = graph_.add_node();
    std::string name = fmt::format("{}/Constant_{}", scope, counter_++);
    node->set_name(name);
    node->set_op_type("Constant");
    node->add_output(name + "_output_0");
    onnx::AttributeProto *attr = node->add_attribute();
    attr->set_name("value");
    attr->set_type(onnx::AttributeProto::TENSOR);
    *attr->mutable_t() = value;
    return name + "_output_0";
  }
  static void describe(onnx::ValueInfoProto *info, const std::string &name, int elemType,
                       const std::vector<int64_t> &dims) {
    info->set_name(name);
    onnx::TypeProto_Tensor *tensor = info->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(elemType);
    for (int64_t dim : dims)
      tensor->mutable_shape()->add_dim()->set_dim_value(dim);
  }

  onnx::GraphProto &graph_;
  std::string weightsFile_;
  int64_t counter_ = 0;
};

/// Mixture-of-Experts MLPs: every `every`-th block's MLP becomes `experts` experts.
struct MoeShape {
  int64_t experts = 0; // 0: no MoE layers
  int64_t topK = 2, every = 2, expertFfn = 0;
  double capacityFactor = 1.25;
};

struct TransformerShape {
  int64_t layers = 12, hidden = 768, heads = 12, vocab = 50257, sequence = 128, ffn = 0;
  bool causal = true; // GPT (pre-LN, causal) or BERT (post-LN, bidirectional)
  MoeShape moe;
  // Llama only: K/V heads (0: as many as the query heads) and the output layer reading
  // the token embedding.
  int64_t kvHeads = 0;
  bool tieEmbeddings = false;
};

/// LayerNorm as PyTorch 1.13 exports it at opset 14.
std::string layerNorm(GraphBuilder &g, const std::string &scope, const std::string &x,
                      int64_t hidden) {
  std::string mean = g.node("ReduceMean", scope, {x}, {{"keepdims", 1}}, {{"axes", {-1}}});
  std::string centred = g.node("Sub", scope, {x, mean});
  std::string squared = g.node("Pow", scope, {centred, g.constantFloat(scope, 2.0f)});
  std::string variance = g.node("ReduceMean", scope, {squared}, {{"keepdims", 1}}, {{"axes", {-1}}});
  std::string shifted = g.node("Add", scope, {variance, g.constantFloat(scope, 1e-5f)});
  std::string normed = g.node("Div", scope, {centred, g.node("Sqrt", scope, {shifted})});
  std::string scaled = g.node("Mul", scope, {normed, g.weight(scope + ".weight", {hidden})});
  return g.node("Add", scope, {scaled, g.weight(scope + ".bias", {hidden})});
}

std::string linear(GraphBuilder &g, const std::string &scope, const std::string &x, int64_t in,
                   int64_t out, bool bias = true) {
  std::string y = g.node("MatMul", scope, {x, g.weight(scope + ".weight", {in, out})});
  return bias ? g.node("Add", scope, {y, g.weight(scope + ".bias", {out})}) : y;
}

/// GELU as exported: x * 0.5 * (1 + erf(x / sqrt(2))).
std::string gelu(GraphBuilder &g, const std::string &scope, const std::string &x) {
  std::string erf = g.node("Erf", scope, {g.node("Div", scope, {x, g.constantFloat(scope, 1.4142135f)})});
  std::string onePlus = g.node("Add", scope, {erf, g.constantFloat(scope, 1.0f)});
  return g.node("Mul", scope, {g.node("Mul", scope, {x, onePlus}), g.constantFloat(scope, 0.5f)});
}

/// SiLU as exported: x * sigmoid(x).
std::string silu(GraphBuilder &g, const std::string &scope, const std::string &x) {
  return g.node("Mul", scope, {x, g.node("Sigmoid", scope, {x})});
}

/// RMSNorm as PyTorch exports Llama's: x * (1 / sqrt(mean(x^2) + eps)) * weight.
std::string rmsNorm(GraphBuilder &g, const std::string &scope, const std::string &x,
                    int64_t hidden) {
  std::string squared = g.node("Pow", scope, {x, g.constantFloat(scope, 2.0f)});
  std::string mean = g.node("ReduceMean", scope, {squared}, {{"keepdims", 1}}, {{"axes", {-1}}});
  std::string shifted = g.node("Add", scope, {mean, g.constantFloat(scope, 1e-6f)});
  std::string inverse =
      g.node("Div", scope, {g.constantFloat(scope, 1.0f), g.node("Sqrt", scope, {shifted})});
  std::string normed = g.node("Mul", scope, {x, inverse});
  return g.node("Mul", scope, {normed, g.weight(scope + ".weight", {hidden})});
}

std::string attention(GraphBuilder &g, const std::string &scope, const std::string &x,
                      const TransformerShape &s, const std::string &mask) {
  const int64_t headDim = s.hidden / s.heads;
  auto heads = [&](const std::string &name) {
    std::string projected = linear(g, scope + "." + name, x, s.hidden, s.hidden);
    std::string split = g.node("Reshape", scope, {projected, g.constantInts(scope, {1, s.sequence, s.heads, headDim})});
    return g.node("Transpose", scope, {split}, {}, {{"perm", {0, 2, 1, 3}}});
  };
  std::string q = heads("q"), k = heads("k"), v = heads("v");
  std::string kT = g.node("Transpose", scope, {k}, {}, {{"perm", {0, 1, 3, 2}}});
  std::string scores = g.node("Div", scope, {g.node("MatMul", scope, {q, kT}),
                                             g.constantFloat(scope, std::sqrt(float(headDim)))});
  if (!mask.empty())
    scores = g.node("Add", scope, {scores, mask});
  std::string probs = g.node("Softmax", scope, {scores}, {{"axis", -1}});
  std::string context = g.node("MatMul", scope, {probs, v});
  std::string merged = g.node("Reshape", scope,
                              {g.node("Transpose", scope, {context}, {}, {{"perm", {0, 2, 1, 3}}}),
                               g.constantInts(scope, {1, s.sequence, s.hidden})});
  return linear(g, scope + ".out_proj", merged, s.hidden, s.hidden);
}

/// A GShard/Switch-style MoE MLP on `x` ([1, seq, hidden]) in plain ONNX ops, as the
/// importer recognises it (importer/lib/Moe.cpp): router MatMul -> Softmax -> TopK; each
/// token's slot in an expert is the count of earlier tokens routed there (CumSum), slots
/// past the capacity one-hot to nothing (dropped); dispatch and combine are MatMuls with the
/// [tokens, experts x capacity] masks; the experts are batched MatMuls with weights kept as
/// ONNX Runtime's MoE keeps them, [experts, out, in]. Experts are GELU MLPs with biases
/// (fc1, fc2), or with `gated` Mixtral's bias-free SwiGLU: w2(silu(w1 x) * w3 x).
std::string moeLayer(GraphBuilder &g, const std::string &scope, const std::string &x3,
                     const TransformerShape &s, int64_t ffn, bool gated = false) {
  const MoeShape &m = s.moe;
  const int64_t tokens = s.sequence, experts = m.experts, hidden = s.hidden;
  const int64_t capacity = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(m.capacityFactor * static_cast<double>(m.topK * tokens) /
                                        static_cast<double>(experts))));
  auto ints = [&](const std::string &what, std::vector<int64_t> dims, std::vector<int64_t> v) {
    return g.inlineInts(scope + "." + what, dims, v);
  };
  const std::string zeroOne = g.inlineFloats(scope + ".one_hot_values", {0.0f, 1.0f});
  const std::string axis1 = ints("axis1", {1}, {1}), axis2 = ints("axis2", {1}, {2});
  auto unsqueeze = [&](const std::string &v, const std::string &axes) {
    return g.node("Unsqueeze", scope, {v, axes});
  };

  std::string x = g.node("Reshape", scope, {x3, ints("tokens_shape", {2}, {tokens, hidden})});
  std::string logits = linear(g, scope + ".router", x, hidden, experts, /*bias=*/false);
  std::string probs = g.node("Softmax", scope, {logits}, {{"axis", -1}});
  std::vector<std::string> top =
      g.nodeOutputs("TopK", scope, {probs, ints("k", {1}, {m.topK})}, 2, {{"axis", -1}});
  std::string choice =
      g.node("OneHot", scope, {top[1], ints("experts", {1}, {experts}), zeroOne}, {{"axis", -1}});
  std::string chosen = g.node("ReduceSum", scope, {choice, axis1}, {{"keepdims", 0}});
  std::string position =
      g.node("CumSum", scope, {chosen, ints("token_axis", {}, {0})}, {{"exclusive", 1}});
  std::string slot = g.node("OneHot", scope,
                            {g.node("Cast", scope, {position}, {{"to", onnx::TensorProto::INT64}}),
                             ints("capacity", {1}, {capacity}), zeroOne},
                            {{"axis", -1}});
  std::string dispatchMask = g.node("Mul", scope, {slot, unsqueeze(chosen, axis2)});
  std::string gate =
      g.node("ReduceSum", scope, {g.node("Mul", scope, {choice, unsqueeze(top[0], axis2)}), axis1},
             {{"keepdims", 0}});
  std::string combineMask = g.node("Mul", scope, {dispatchMask, unsqueeze(gate, axis2)});
  const std::string slotsShape = ints("slots_shape", {2}, {tokens, experts * capacity});
  std::string dispatched = g.node(
      "Reshape", scope,
      {g.node("MatMul", scope,
              {g.node("Transpose", scope, {g.node("Reshape", scope, {dispatchMask, slotsShape})},
                      {}, {{"perm", {1, 0}}}),
               x}),
       ints("dispatched_shape", {3}, {experts, capacity, hidden})});

  auto expertLinear = [&](const std::string &name, const std::string &in, int64_t inF,
                          int64_t outF) {
    std::string w =
        g.node("Transpose", scope, {g.weight(scope + "." + name + ".weight", {experts, outF, inF})},
               {}, {{"perm", {0, 2, 1}}});
    std::string y = g.node("MatMul", scope, {in, w});
    if (gated)
      return y;
    return g.node("Add", scope,
                  {y, unsqueeze(g.weight(scope + "." + name + ".bias", {experts, outF}), axis1)});
  };
  std::string expertOut;
  if (gated) {
    std::string gate = silu(g, scope, expertLinear("w1", dispatched, hidden, ffn));
    std::string units = g.node("Mul", scope, {gate, expertLinear("w3", dispatched, hidden, ffn)});
    expertOut = expertLinear("w2", units, ffn, hidden);
  } else {
    std::string h = gelu(g, scope, expertLinear("fc1", dispatched, hidden, ffn));
    expertOut = expertLinear("fc2", h, ffn, hidden);
  }
  std::string combined =
      g.node("MatMul", scope,
             {g.node("Reshape", scope, {combineMask, slotsShape}),
              g.node("Reshape", scope,
                     {expertOut, ints("rows_shape", {2}, {experts * capacity, hidden})})});
  return g.node("Reshape", scope, {combined, ints("output_shape", {3}, {1, tokens, hidden})});
}

void buildTransformer(GraphBuilder &g, const TransformerShape &s) {
  const int64_t ffn = s.ffn > 0 ? s.ffn : 4 * s.hidden;
  g.input("input_ids", onnx::TensorProto::INT64, {1, s.sequence});
  std::string tokens = g.node("Gather", "/wte", {g.weight("wte.weight", {s.vocab, s.hidden}), "input_ids"});
  std::string positions = g.node("Gather", "/wpe", {g.weight("wpe.weight", {s.sequence, s.hidden}),
                                                    g.constantInts("/wpe", [&] {
                                                      std::vector<int64_t> p(s.sequence);
                                                      for (int64_t i = 0; i < s.sequence; ++i) p[i] = i;
                                                      return p;
                                                    }())});
  std::string x = g.node("Add", "/embed", {tokens, positions});
  // The causal mask is a constant additive bias, as the exporter folds it.
  std::string mask;
  if (s.causal) {
    mask = g.node("Trilu", "/mask", {g.node("ConstantOfShape", "/mask", {g.constantInts("/mask", {s.sequence, s.sequence})})}, {{"upper", 1}});
  }
  if (!s.causal)
    x = layerNorm(g, "embed.ln", x, s.hidden);
  for (int64_t layer = 0; layer < s.layers; ++layer) {
    std::string scope = fmt::format("blocks.{}", layer);
    if (s.causal) { // pre-LN (GPT)
      x = g.node("Add", scope, {x, attention(g, scope + ".attn", layerNorm(g, scope + ".ln1", x, s.hidden), s, mask)});
      std::string normed = layerNorm(g, scope + ".ln2", x, s.hidden);
      std::string mlp;
      if (s.moe.experts > 0 && (layer + 1) % s.moe.every == 0)
        mlp = moeLayer(g, scope + ".moe", normed, s, s.moe.expertFfn > 0 ? s.moe.expertFfn : ffn);
      else
        mlp =
            linear(g, scope + ".fc2",
                   gelu(g, scope, linear(g, scope + ".fc1", normed, s.hidden, ffn)), ffn, s.hidden);
      x = g.node("Add", scope, {x, mlp});
    } else { // post-LN (BERT)
      x = layerNorm(g, scope + ".ln1", g.node("Add", scope, {x, attention(g, scope + ".attn", x, s, "")}), s.hidden);
      std::string h = gelu(g, scope, linear(g, scope + ".fc1", x, s.hidden, ffn));
      x = layerNorm(g, scope + ".ln2", g.node("Add", scope, {x, linear(g, scope + ".fc2", h, ffn, s.hidden)}), s.hidden);
    }
  }
  std::string out;
  if (s.causal)
    out = linear(g, "head", layerNorm(g, "ln_f", x, s.hidden), s.hidden, s.vocab, /*bias=*/false);
  else
    out = x;
  g.output(out, s.causal ? std::vector<int64_t>{1, s.sequence, s.vocab}
                         : std::vector<int64_t>{1, s.sequence, s.hidden});
}

/// Llama's attention on `x` ([1, seq, hidden]): bias-free Q/K/V projections (K and V of
/// kv-heads x head_dim), each split into heads by Reshape + Transpose; rotary positions
/// (x * cos + rotate_half(x) * sin with the cos/sin tables the model's buffers); K/V heads
/// repeated to the query heads as Llama's repeat_kv exports (Unsqueeze, Expand, Reshape);
/// scaled scores plus the causal-mask buffer, Softmax, context, heads merged, o_proj.
std::string llamaAttention(GraphBuilder &g, const std::string &scope, const std::string &x,
                           const TransformerShape &s, const std::string &cos,
                           const std::string &sin, const std::string &mask) {
  const int64_t headDim = s.hidden / s.heads, half = headDim / 2, seq = s.sequence;
  auto split = [&](const std::string &name, int64_t heads) {
    std::string projected =
        linear(g, scope + "." + name, x, s.hidden, heads * headDim, /*bias=*/false);
    std::string shaped =
        g.node("Reshape", scope, {projected, g.constantInts(scope, {1, seq, heads, headDim})});
    return g.node("Transpose", scope, {shaped}, {}, {{"perm", {0, 2, 1, 3}}});
  };
  auto rotary = [&](const std::string &t) {
    std::string rotated = g.node("Mul", scope, {t, cos});
    auto slice = [&](int64_t begin, int64_t end) {
      return g.node("Slice", scope,
                    {t, g.constantInts(scope, {begin}), g.constantInts(scope, {end}),
                     g.constantInts(scope, {3})});
    };
    std::string firstHalf = slice(0, half);
    std::string secondHalf = g.node("Neg", scope, {slice(half, headDim)});
    std::string turned = g.node("Concat", scope, {secondHalf, firstHalf}, {{"axis", -1}});
    return g.node("Add", scope, {rotated, g.node("Mul", scope, {turned, sin})});
  };
  auto repeat = [&](const std::string &t) {
    if (s.kvHeads == s.heads)
      return t;
    const int64_t groups = s.heads / s.kvHeads;
    std::string widened = g.node("Unsqueeze", scope, {t, g.constantInts(scope, {2})});
    std::string expanded = g.node(
        "Expand", scope, {widened, g.constantInts(scope, {1, s.kvHeads, groups, seq, headDim})});
    return g.node("Reshape", scope,
                  {expanded, g.constantInts(scope, {1, s.heads, seq, headDim})});
  };
  std::string q = rotary(split("q_proj", s.heads));
  std::string k = repeat(rotary(split("k_proj", s.kvHeads)));
  std::string v = repeat(split("v_proj", s.kvHeads));
  std::string kT = g.node("Transpose", scope, {k}, {}, {{"perm", {0, 1, 3, 2}}});
  std::string scores = g.node("Div", scope, {g.node("MatMul", scope, {q, kT}),
                                             g.constantFloat(scope, std::sqrt(float(headDim)))});
  std::string probs =
      g.node("Softmax", scope, {g.node("Add", scope, {scores, mask})}, {{"axis", -1}});
  std::string context = g.node("MatMul", scope, {probs, v});
  std::string merged = g.node("Reshape", scope,
                              {g.node("Transpose", scope, {context}, {}, {{"perm", {0, 2, 1, 3}}}),
                               g.constantInts(scope, {1, seq, s.hidden})});
  return linear(g, scope + ".o_proj", merged, s.hidden, s.hidden, /*bias=*/false);
}

/// A Llama-2-style decoder (pre-RMSNorm, rotary positions, grouped-query attention, SwiGLU
/// MLP, no biases); with experts (`s.moe.experts` > 0) every `every`-th block's MLP is
/// Mixtral's: SwiGLU experts routed top-k.
void buildLlama(GraphBuilder &g, const TransformerShape &s) {
  const int64_t headDim = s.hidden / s.heads;
  g.input("input_ids", onnx::TensorProto::INT64, {1, s.sequence});
  const std::string embedding = g.weight("embed_tokens.weight", {s.vocab, s.hidden});
  std::string x = g.node("Gather", "embed_tokens", {embedding, "input_ids"});
  // The model's buffers, shared by every block as torch exports them: the rotary tables
  // and the additive causal mask.
  const std::string cos = g.weight("cos_cached", {1, 1, s.sequence, headDim});
  const std::string sin = g.weight("sin_cached", {1, 1, s.sequence, headDim});
  const std::string mask = g.weight("causal_mask", {s.sequence, s.sequence});
  for (int64_t layer = 0; layer < s.layers; ++layer) {
    const std::string scope = fmt::format("layers.{}", layer);
    std::string normed = rmsNorm(g, scope + ".input_layernorm", x, s.hidden);
    x = g.node("Add", scope,
               {x, llamaAttention(g, scope + ".self_attn", normed, s, cos, sin, mask)});
    normed = rmsNorm(g, scope + ".post_attention_layernorm", x, s.hidden);
    std::string mlp;
    if (s.moe.experts > 0 && (layer + 1) % s.moe.every == 0) {
      mlp = moeLayer(g, scope + ".block_sparse_moe", normed, s,
                     s.moe.expertFfn > 0 ? s.moe.expertFfn : s.ffn, /*gated=*/true);
    } else {
      const std::string mlpScope = scope + ".mlp";
      std::string gate = linear(g, mlpScope + ".gate_proj", normed, s.hidden, s.ffn, false);
      std::string up = linear(g, mlpScope + ".up_proj", normed, s.hidden, s.ffn, false);
      std::string units = g.node("Mul", mlpScope, {silu(g, mlpScope, gate), up});
      mlp = linear(g, mlpScope + ".down_proj", units, s.ffn, s.hidden, false);
    }
    x = g.node("Add", scope, {x, mlp});
  }
  std::string normed = rmsNorm(g, "norm", x, s.hidden);
  std::string logits;
  if (s.tieEmbeddings)
    logits = g.node("MatMul", "lm_head",
                    {normed, g.node("Transpose", "lm_head", {embedding}, {}, {{"perm", {1, 0}}})});
  else
    logits = linear(g, "lm_head", normed, s.hidden, s.vocab, /*bias=*/false);
  g.output(logits, {1, s.sequence, s.vocab});
}

/// A deep MLP with `tensors` trainable tensors (weight + bias per layer).
void buildMlp(GraphBuilder &g, int64_t tensors, int64_t hidden, int64_t batch) {
  g.input("input", onnx::TensorProto::FLOAT, {batch, hidden});
  std::string x = "input";
  int64_t layers = tensors / 2;
  for (int64_t layer = 0; layer < layers; ++layer) {
    std::string scope = fmt::format("layers.{}", layer);
    x = linear(g, scope, x, hidden, hidden, /*bias=*/true);
    if (layer + 1 < layers || tensors % 2 == 1)
      x = g.node("Relu", scope, {x});
  }
  if (tensors % 2 == 1) // an odd count ends with a bias-free projection
    x = linear(g, "head", x, hidden, hidden, /*bias=*/false);
  g.output(x, {batch, hidden});
}

int writeModel(const onnx::ModelProto &model, const std::string &path) {
  std::string bytes;
  if (!model.SerializeToString(&bytes)) {
    std::cerr << "zenopt-modelgen: error: " << path << ": the model cannot be serialised\n";
    return zen::cli::ExitCantCreate;
  }
  try {
    zenrt::writeFileAtomically(path, bytes);
  } catch (const zenrt::PlanError &error) {
    std::cerr << "zenopt-modelgen: error: " << error.what() << "\n";
    return zen::cli::exitCodeOf(error.kind);
  }
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  CLI::App app{"zenopt-modelgen: writes graph-only ONNX models (dims and dtypes, no weights)"};
  app.require_subcommand(1);
  std::string output, name;
  TransformerShape gpt, bert;
  bert.causal = false;
  bert.vocab = 30522;
  bert.sequence = 128;
  int64_t mlpTensors = 1000, mlpHidden = 256, mlpBatch = 32;

  auto addTransformer = [&](CLI::App *sub, TransformerShape &s,
                            const char *ffnHelp = "Feed-forward size (default 4 x hidden)") {
    sub->add_option("--layers", s.layers, "Transformer blocks")->check(zen::cli::wholeNumber(1, 1000000));
    sub->add_option("--hidden", s.hidden, "Hidden size")->check(zen::cli::wholeNumber(1, 1 << 20));
    sub->add_option("--heads", s.heads, "Attention heads (must divide hidden)")->check(zen::cli::wholeNumber(1, 1 << 16));
    sub->add_option("--vocab", s.vocab, "Vocabulary size")->check(zen::cli::wholeNumber(1, 1 << 24));
    sub->add_option("--seq", s.sequence, "Sequence length")->check(zen::cli::wholeNumber(1, 1 << 20));
    sub->add_option("--ffn", s.ffn, ffnHelp)->check(zen::cli::wholeNumber(0, 1 << 22));
  };
  auto addMoe = [&](CLI::App *sub, MoeShape &m) {
    sub->add_option("--experts", m.experts, "Experts per MoE layer")
        ->check(zen::cli::wholeNumber(1, 1 << 16));
    sub->add_option("--top-k", m.topK, "Experts each token is routed to")
        ->check(zen::cli::wholeNumber(1, 1 << 16));
    sub->add_option("--capacity-factor", m.capacityFactor,
                    "Expert capacity as a multiple of the mean load top-k x tokens / experts")
        ->check(CLI::Range(1e-3, 1e3));
    sub->add_option("--expert-ffn", m.expertFfn,
                    "Feed-forward size of each expert (default: --ffn)")
        ->check(zen::cli::wholeNumber(0, 1 << 22));
    sub->add_option("--moe-every", m.every, "Every K-th block has an MoE MLP (K = 1: all)")
        ->check(zen::cli::wholeNumber(1, 1000000));
  };
  // A small Llama; the MLP width follows Llama's rule (8 x hidden / 3, up to a multiple
  // of 256) unless --ffn is given.
  TransformerShape llama;
  llama.layers = 4, llama.hidden = 512, llama.heads = 8, llama.vocab = 32000, llama.sequence = 256;
  auto addLlama = [&](CLI::App *sub, TransformerShape &s) {
    addTransformer(sub, s,
                   "Feed-forward size (default 8 x hidden / 3 rounded up to a multiple of 256)");
    sub->add_option("--kv-heads", s.kvHeads, "Key/value heads (default: --heads; must divide it)")
        ->check(zen::cli::wholeNumber(1, 1 << 16));
    sub->add_flag("--tie-embeddings", s.tieEmbeddings,
                  "The output layer reads the token embedding (transposed), no weight of its own");
  };
  CLI::App *gptCmd = app.add_subcommand("gpt", "GPT-style decoder (pre-LN, causal, untied head)");
  addTransformer(gptCmd, gpt);
  TransformerShape moe = gpt;
  moe.moe.experts = 8;
  CLI::App *moeCmd = app.add_subcommand(
      "moe", "GPT-style decoder whose MLP is a Mixture of Experts every --moe-every blocks");
  addTransformer(moeCmd, moe);
  addMoe(moeCmd, moe.moe);
  CLI::App *llamaCmd = app.add_subcommand(
      "llama",
      "Llama-2-style decoder (RMSNorm, rotary positions, grouped-query attention, SwiGLU)");
  addLlama(llamaCmd, llama);
  TransformerShape mixtral = llama;
  mixtral.moe.experts = 8;
  mixtral.moe.every = 1;
  CLI::App *mixtralCmd = app.add_subcommand(
      "mixtral", "Llama's decoder whose MLP is Mixtral's SwiGLU experts every --moe-every blocks");
  addLlama(mixtralCmd, mixtral);
  addMoe(mixtralCmd, mixtral.moe);
  CLI::App *bertCmd = app.add_subcommand("bert", "BERT-style encoder (post-LN)");
  addTransformer(bertCmd, bert);
  CLI::App *mlpCmd = app.add_subcommand("mlp", "Deep MLP with a chosen number of gradient tensors");
  mlpCmd->add_option("--tensors", mlpTensors, "Trainable tensors")->check(zen::cli::wholeNumber(1, 10000000));
  mlpCmd->add_option("--hidden", mlpHidden, "Layer width")->check(zen::cli::wholeNumber(1, 1 << 20));
  mlpCmd->add_option("--batch", mlpBatch, "Batch size of the graph")->check(zen::cli::wholeNumber(1, 1 << 20));
  for (CLI::App *sub : {gptCmd, moeCmd, llamaCmd, mixtralCmd, bertCmd, mlpCmd}) {
    sub->add_option("-o,--output", output, "Output .onnx file")->required();
    sub->add_option("--name", name, "Graph name (default: from the output file name)");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError &error) {
    std::cerr << "zenopt-modelgen: error: " << error.what() << "\n";
    return kExitUsage;
  }
  for (const TransformerShape *s : {&moe, &mixtral})
    if (s->moe.topK > s->moe.experts) {
      std::cerr << "zenopt-modelgen: error: --top-k " << s->moe.topK << " is more than --experts "
                << s->moe.experts << "\n";
      return kExitUsage;
    }
  for (const TransformerShape *s : {&gpt, &moe, &bert, &llama, &mixtral})
    if (s->hidden % s->heads != 0) {
      std::cerr << "zenopt-modelgen: error: --heads " << s->heads << " does not divide --hidden "
                << s->hidden << "\n";
      return kExitUsage;
    }
  for (TransformerShape *s : {&llama, &mixtral}) {
    if (s->kvHeads == 0)
      s->kvHeads = s->heads;
    if (s->heads % s->kvHeads != 0) {
      std::cerr << "zenopt-modelgen: error: --kv-heads " << s->kvHeads
                << " does not divide --heads " << s->heads << "\n";
      return kExitUsage;
    }
    if ((s->hidden / s->heads) % 2 != 0) {
      std::cerr << "zenopt-modelgen: error: the head size " << s->hidden / s->heads
                << " (--hidden / --heads) must be even: rotary positions turn pairs\n";
      return kExitUsage;
    }
    if (s->ffn == 0)
      s->ffn = (8 * s->hidden / 3 + 255) / 256 * 256;
  }

  onnx::ModelProto model;
  model.set_ir_version(7);
  model.set_producer_name("zenopt-modelgen");
  model.set_producer_version("0.1.0");
  onnx::OperatorSetIdProto *opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(14);
  onnx::GraphProto *graph = model.mutable_graph();
  if (name.empty()) {
    name = output.substr(output.find_last_of('/') + 1);
    name = name.substr(0, name.find('.'));
  }
  graph->set_name(name);
  GraphBuilder builder(*graph, name + ".weights");
  if (gptCmd->parsed())
    buildTransformer(builder, gpt);
  else if (moeCmd->parsed())
    buildTransformer(builder, moe);
  else if (llamaCmd->parsed())
    buildLlama(builder, llama);
  else if (mixtralCmd->parsed())
    buildLlama(builder, mixtral);
  else if (bertCmd->parsed())
    buildTransformer(builder, bert);
  else
    buildMlp(builder, mlpTensors, mlpHidden, mlpBatch);
  return writeModel(model, output);
}
