//===- CostRules.cpp - FLOPs of ONNX operators, forward and backward -----===//
//
// Conventions: FLOPs are 2 per multiply-accumulate. A contraction's gradient with respect
// to each operand costs as much as the forward contraction (dX = dY W^T, dW = X^T dY), so
// an op with weights costs about twice its forward in backward. Elementwise and
// normalization ops use per-element counts listed in the tables below.
//
//===----------------------------------------------------------------------===//
#include "CostRules.h"

#include <functional>
#include <map>
#include <set>
#include <unordered_map>

namespace zen::importer::detail {

int64_t CostSite::inputElements(size_t i) const {
  const Tensor *tensor = input(i);
  return tensor ? tensor->elements : 0;
}

int64_t CostSite::outputElements(size_t i) const {
  const Tensor *tensor = output(i);
  return tensor ? tensor->elements : 0;
}

int64_t CostSite::attrInt(const char *name, int64_t fallback) const {
  for (const auto &attr : proto.attribute())
    if (attr.name() == name)
      return attr.i();
  return fallback;
}

std::vector<int64_t> CostSite::attrInts(const char *name) const {
  for (const auto &attr : proto.attribute())
    if (attr.name() == name)
      return {attr.ints().begin(), attr.ints().end()};
  return {};
}

std::string CostSite::attrString(const char *name, const std::string &fallback) const {
  for (const auto &attr : proto.attribute())
    if (attr.name() == name)
      return attr.s();
  return fallback;
}

namespace {

/// Saturating product: costs of adversarial shapes clamp instead of overflowing.
int64_t mul(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_mul_overflow(a, b, &result))
    return std::numeric_limits<int64_t>::max() / 4;
  return result;
}

int64_t productFrom(const std::vector<int64_t> &dims, size_t first) {
  int64_t product = 1;
  for (size_t i = first; i < dims.size(); ++i)
    product = mul(product, std::max<int64_t>(dims[i], 1));
  return product;
}

/// Every input's gradient costs `flops` (inputs without a gradient are never charged).
std::vector<int64_t> sameForAll(const CostSite &site, int64_t flops) {
  return std::vector<int64_t>(site.inputs.size(), flops);
}

using Rule = std::function<OpCost(const CostSite &)>;

/// Elementwise op: `forward` FLOPs per output element; each input's gradient `backward`
/// FLOPs per output element (covers the broadcast reduction).
Rule elementwise(int64_t forward, int64_t backward, bool readsInputs = true) {
  return [=](const CostSite &site) {
    OpCost cost;
    int64_t elements = site.outputElements(0);
    cost.forwardFlops = mul(forward, elements);
    cost.inputGradFlops = sameForAll(site, mul(backward, elements));
    cost.backwardReadsInputs = readsInputs;
    return cost;
  };
}

/// Pure data movement: no arithmetic; the gradient is the inverse movement.
Rule dataMovement(bool isView = false) {
  return [=](const CostSite &site) {
    OpCost cost;
    cost.inputGradFlops = sameForAll(site, 0);
    cost.backwardReadsInputs = false;
    cost.isView = isView;
    return cost;
  };
}

OpCost convCost(const CostSite &site, bool transposed) {
  OpCost cost;
  const Tensor *weight = site.input(1);
  // Conv W: [Cout, Cin/group, k...]; each output element takes Cin/group * prod(k) MACs.
  // ConvTranspose W: [Cin, Cout/group, k...]; each input element scatters that many.
  int64_t perElement = weight ? productFrom(weight->dims, 1) : 0;
  int64_t macs = mul(transposed ? site.inputElements(0) : site.outputElements(0), perElement);
  int64_t biasFlops = site.input(2) ? site.outputElements(0) : 0;
  cost.forwardFlops = mul(2, macs) + biasFlops;
  cost.inputGradFlops = {mul(2, macs), mul(2, macs), site.outputElements(0)};
  return cost;
}

OpCost gemmCost(const CostSite &site) {
  OpCost cost;
  const Tensor *a = site.input(0);
  int64_t k = 0;
  if (a && a->dims.size() == 2)
    k = std::max<int64_t>(a->dims[site.attrInt("transA", 0) ? 0 : 1], 1);
  int64_t mn = site.outputElements(0);
  int64_t macs = mul(mn, k);
  cost.forwardFlops = mul(2, macs) + (site.input(2) ? mn : 0);
  cost.inputGradFlops = {mul(2, macs), mul(2, macs), mn};
  return cost;
}

OpCost matMulCost(const CostSite &site) {
  OpCost cost;
  const Tensor *a = site.input(0);
  int64_t k = (a && !a->dims.empty()) ? std::max<int64_t>(a->dims.back(), 1) : 1;
  int64_t macs = mul(std::max<int64_t>(site.outputElements(0), 1), k);
  cost.forwardFlops = mul(2, macs);
  cost.inputGradFlops = {mul(2, macs), mul(2, macs)};
  return cost;
}

/// Einsum: every combination of index values costs one MAC per extra operand.
OpCost einsumCost(const CostSite &site) {
  OpCost cost;
  std::string equation = site.attrString("equation", "");
  std::string lhs = equation.substr(0, equation.find("->"));
  std::map<char, int64_t> sizes;
  int64_t ellipsis = 1;
  size_t operand = 0;
  size_t start = 0;
  while (start <= lhs.size() && operand < site.inputs.size()) {
    size_t end = lhs.find(',', start);
    std::string term = lhs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const Tensor *tensor = site.input(operand);
    if (tensor) {
      size_t dots = term.find("...");
      std::string letters;
      for (char c : term)
        if (std::isalpha(static_cast<unsigned char>(c)))
          letters += c;
      size_t ellipsisRank = tensor->dims.size() > letters.size()
                                ? tensor->dims.size() - letters.size() : 0;
      size_t dim = 0;
      for (size_t i = 0; i < term.size(); ++i) {
        if (i == dots) {
          int64_t product = 1;
          for (size_t j = 0; j < ellipsisRank && dim < tensor->dims.size(); ++j)
            product = mul(product, std::max<int64_t>(tensor->dims[dim++], 1));
          ellipsis = std::max(ellipsis, product);
          i += 2;
        } else if (std::isalpha(static_cast<unsigned char>(term[i])) &&
                   dim < tensor->dims.size()) {
          int64_t size = std::max<int64_t>(tensor->dims[dim++], 1);
          sizes[term[i]] = std::max(sizes[term[i]], size);
        }
      }
    }
    ++operand;
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  int64_t combinations = ellipsis;
  for (const auto &[letter, size] : sizes)
    combinations = mul(combinations, size);
  int64_t operands = static_cast<int64_t>(site.inputs.size());
  cost.forwardFlops = operands >= 2 ? mul(2 * (operands - 1), combinations)
                                    : site.inputElements(0);
  cost.inputGradFlops = sameForAll(site, cost.forwardFlops);
  return cost;
}

/// BatchNormalization (training), LayerNormalization, InstanceNormalization,
/// GroupNormalization: statistics (mean 1, variance 2), normalize (2), affine (2) = 7
/// per element; the input gradient 8 per element, scale 2, bias 1. Running statistics
/// get no gradient.
OpCost normalizationCost(const CostSite &site) {
  OpCost cost;
  int64_t elements = site.inputElements(0);
  cost.forwardFlops = mul(7, elements);
  cost.inputGradFlops = {mul(8, elements), mul(2, elements), elements, 0, 0};
  return cost;
}

OpCost reduceCost(const CostSite &site, bool divides) {
  OpCost cost;
  cost.forwardFlops = site.inputElements(0) + (divides ? site.outputElements(0) : 0);
  cost.inputGradFlops = sameForAll(site, site.inputElements(0));
  return cost;
}

/// Max: one comparison per window element; Average: one add per window element and a
/// divide per output; Lp: power and add per window element.
OpCost poolCost(const CostSite &site, int64_t perWindowElement, bool divides) {
  OpCost cost;
  int64_t window = productFrom(site.attrInts("kernel_shape"), 0);
  int64_t outputs = site.outputElements(0);
  cost.forwardFlops = mul(mul(perWindowElement, window), outputs) + (divides ? outputs : 0);
  cost.inputGradFlops = sameForAll(site, std::max(mul(window, outputs), site.inputElements(0)));
  return cost;
}

OpCost globalPoolCost(const CostSite &site, bool divides) {
  OpCost cost;
  cost.forwardFlops = site.inputElements(0) + (divides ? site.outputElements(0) : 0);
  cost.inputGradFlops = sameForAll(site, site.inputElements(0));
  return cost;
}

/// LSTM (4 gates), GRU (3), RNN (1): per time step and direction the gates take
/// [x, h] times [W; R]; the gate nonlinearities and cell update cost `pointwise` FLOPs per
/// hidden unit. Gradients: X through W, W and R as X^T dG and H^T dG, bias one add.
OpCost recurrentCost(const CostSite &site, int64_t gates, int64_t pointwise) {
  OpCost cost;
  const Tensor *x = site.input(0);
  const Tensor *r = site.input(2);
  int64_t hidden = site.attrInt("hidden_size", 0);
  if (hidden <= 0 && r && r->dims.size() == 3)
    hidden = r->dims[2];
  hidden = std::max<int64_t>(hidden, 1);
  int64_t inputSize = (x && x->dims.size() == 3) ? std::max<int64_t>(x->dims[2], 1) : 1;
  int64_t steps = std::max<int64_t>(site.inputElements(0) / inputSize, 1);  // seq * batch
  int64_t directions = site.attrString("direction", "forward") == "bidirectional" ? 2 : 1;
  int64_t units = mul(mul(steps, directions), hidden);
  int64_t inputMacs = mul(mul(units, gates), inputSize);
  int64_t recurrentMacs = mul(mul(units, gates), hidden);
  int64_t biasFlops = site.input(3) ? mul(2, mul(units, gates)) : 0;
  int64_t pointwiseFlops = mul(pointwise, units);
  cost.forwardFlops = mul(2, inputMacs + recurrentMacs) + biasFlops + pointwiseFlops;
  int64_t dataGrad = mul(2, inputMacs + recurrentMacs) + mul(2, pointwiseFlops);
  cost.inputGradFlops = {dataGrad,  mul(2, inputMacs), mul(2, recurrentMacs),
                         biasFlops, 0, 0, 0, units};
  return cost;
}

OpCost softmaxCost(const CostSite &site) {
  // max, subtract, exp, sum, divide; gradient y * (dy - sum(dy * y)).
  OpCost cost;
  int64_t elements = site.outputElements(0);
  cost.forwardFlops = mul(5, elements);
  cost.inputGradFlops = sameForAll(site, mul(4, elements));
  cost.backwardReadsOutput = true;
  return cost;
}

const std::unordered_map<std::string, Rule> &rules() {
  static const std::unordered_map<std::string, Rule> table = [] {
    std::unordered_map<std::string, Rule> r;
    r["Conv"] = [](const CostSite &s) { return convCost(s, false); };
    r["ConvTranspose"] = [](const CostSite &s) { return convCost(s, true); };
    r["Gemm"] = gemmCost;
    r["MatMul"] = matMulCost;
    r["Einsum"] = einsumCost;
    for (const char *op : {"BatchNormalization", "LayerNormalization",
                           "InstanceNormalization", "GroupNormalization"})
      r[op] = normalizationCost;
    r["Softmax"] = softmaxCost;
    r["LogSoftmax"] = softmaxCost;
    r["ReduceMean"] = [](const CostSite &s) { return reduceCost(s, true); };
    for (const char *op : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                           "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})
      r[op] = [](const CostSite &s) { return reduceCost(s, false); };
    r["MaxPool"] = [](const CostSite &s) { return poolCost(s, 1, false); };
    r["AveragePool"] = [](const CostSite &s) { return poolCost(s, 1, true); };
    r["LpPool"] = [](const CostSite &s) { return poolCost(s, 2, false); };
    r["GlobalAveragePool"] = [](const CostSite &s) { return globalPoolCost(s, true); };
    r["GlobalMaxPool"] = [](const CostSite &s) { return globalPoolCost(s, false); };
    r["GlobalLpPool"] = [](const CostSite &s) { return globalPoolCost(s, false); };
    r["LSTM"] = [](const CostSite &s) { return recurrentCost(s, 4, 12); };
    r["GRU"] = [](const CostSite &s) { return recurrentCost(s, 3, 10); };
    r["RNN"] = [](const CostSite &s) { return recurrentCost(s, 1, 2); };

    // Elementwise: {forward, backward} FLOPs per output element.
    struct Pointwise { const char *op; int64_t forward, backward; bool readsInputs; };
    for (const Pointwise &p : std::initializer_list<Pointwise>{
             {"Add", 1, 1, false}, {"Sub", 1, 1, false}, {"Sum", 1, 1, false},
             {"Mul", 1, 1, true}, {"Div", 1, 2, true}, {"Pow", 1, 3, true},
             {"Max", 1, 1, true}, {"Min", 1, 1, true}, {"Mean", 1, 1, false},
             {"Mod", 1, 0, true}, {"Where", 1, 1, true}, {"PRelu", 2, 2, true},
             {"Equal", 1, 0, false}, {"Less", 1, 0, false}, {"Greater", 1, 0, false},
             {"LessOrEqual", 1, 0, false}, {"GreaterOrEqual", 1, 0, false},
             {"And", 1, 0, false}, {"Or", 1, 0, false}, {"Xor", 1, 0, false},
             {"Not", 1, 0, false}, {"IsNaN", 1, 0, false}, {"IsInf", 1, 0, false},
             {"Relu", 1, 1, true}, {"LeakyRelu", 2, 2, true}, {"Elu", 3, 3, true},
             {"Selu", 4, 3, true}, {"Celu", 4, 3, true}, {"ThresholdedRelu", 1, 1, true},
             {"Sigmoid", 4, 3, true}, {"HardSigmoid", 3, 2, true}, {"HardSwish", 4, 3, true},
             {"Tanh", 4, 3, true}, {"Softplus", 3, 3, true}, {"Softsign", 3, 3, true},
             {"Mish", 6, 8, true}, {"Gelu", 8, 10, true}, {"Erf", 4, 3, true},
             {"Exp", 1, 1, true}, {"Log", 1, 1, true}, {"Sqrt", 1, 2, true},
             {"Reciprocal", 1, 2, true}, {"Neg", 1, 1, false}, {"Abs", 1, 1, true},
             {"Sign", 1, 0, false}, {"Floor", 1, 0, false}, {"Ceil", 1, 0, false},
             {"Round", 1, 0, false}, {"Sin", 1, 2, true}, {"Cos", 1, 2, true},
             {"Tan", 1, 2, true}, {"Clip", 1, 1, true}, {"Shrink", 2, 1, true},
             // Training-mode Dropout: draw the mask, multiply by it and the 1/(1-p) scale.
             {"Dropout", 2, 1, true}})
      r[p.op] = elementwise(p.forward, p.backward, p.readsInputs);
    for (const char *op : {"Relu", "Sigmoid", "Tanh", "Exp", "Sqrt", "Reciprocal"})
      r[op] = [input = r[op]](const CostSite &s) {
        OpCost cost = input(s);
        cost.backwardReadsOutput = true;
        return cost;
      };
    // Selection and search: comparisons per input element.
    for (const char *op : {"ArgMax", "ArgMin", "CumSum"})
      r[op] = [](const CostSite &s) {
        OpCost cost;
        cost.forwardFlops = s.inputElements(0);
        cost.inputGradFlops = sameForAll(s, s.inputElements(0));
        return cost;
      };
    r["TopK"] = [](const CostSite &s) {
      OpCost cost;
      int64_t k = std::max<int64_t>(s.outputElements(0), 1);
      int64_t logK = 1;
      while ((int64_t{1} << logK) < k && logK < 62)
        ++logK;
      cost.forwardFlops = mul(s.inputElements(0), logK);
      cost.inputGradFlops = sameForAll(s, s.outputElements(0));
      return cost;
    };
    r["Resize"] = [](const CostSite &s) {
      // Nearest copies; linear blends 2 points per axis (4 in 2-D); cubic 16.
      std::string mode = s.attrString("mode", "nearest");
      int64_t perOutput = mode == "nearest" ? 0 : mode == "cubic" ? 32 : 8;
      OpCost cost;
      cost.forwardFlops = mul(perOutput, s.outputElements(0));
      cost.inputGradFlops = sameForAll(s, mul(perOutput, s.outputElements(0)));
      return cost;
    };

    // Data movement: 0 FLOPs, bytes only.
    for (const char *op : {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"})
      r[op] = dataMovement(/*isView=*/true);
    for (const char *op : {"Transpose", "Concat", "Split", "Expand", "Tile", "Pad", "Constant",
                           "ConstantOfShape", "Range", "Cast", "CastLike", "Trilu",
                           "DepthToSpace", "SpaceToDepth", "ScatterND", "ScatterElements",
                           "OneHot", "NonZero", "EyeLike", "ReverseSequence",
                           // Tensor sequences (torch's repeat_interleave, unbind, ...).
                           "SplitToSequence", "ConcatFromSequence", "SequenceConstruct",
                           "SequenceEmpty", "SequenceInsert", "SequenceAt", "SequenceErase",
                           "SequenceLength"})
      r[op] = dataMovement();
    for (const char *op : {"Shape", "Size"})
      r[op] = [](const CostSite &s) {
        OpCost cost = dataMovement()(s);
        cost.readsMetadataOnly = true;
        return cost;
      };
    // Gather (embeddings): reads only the gathered rows; the gradient scatter-adds them.
    for (const char *op : {"Gather", "GatherElements", "GatherND", "Slice"})
      r[op] = [](const CostSite &s) {
        OpCost cost = dataMovement()(s);
        cost.readsOutputSizedPart = true;
        cost.inputGradFlops[0] = s.outputElements(0);
        return cost;
      };
    return r;
  }();
  return table;
}

} // namespace

std::optional<OpCost> costOf(const CostSite &site) {
  if (!site.proto.domain().empty() && site.proto.domain() != "ai.onnx")
    return std::nullopt;
  auto it = rules().find(site.proto.op_type());
  if (it == rules().end())
    return std::nullopt;
  OpCost cost = it->second(site);
  cost.inputGradFlops.resize(site.inputs.size(), 0);
  return cost;
}

} // namespace zen::importer::detail
