//===- Transformer.cpp - recognising transformer blocks in imported IR ----===//
#include "zen/Passes/Transformer.h"

#include "zen/Passes/IRPlan.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>

using namespace mlir;

namespace zen {

std::string WeightGemm::nodeName() const {
  ComputeOp gemm = op;  // op accessors are not const
  if (auto node = gemm.getNode())
    return node->str();
  return gemm.getOpType().str();
}

namespace {

/// The experts' weights and biases of an MoE layer.
std::vector<ParamOp> expertParams(const MoeLayerOps &layer) {
  MoeExpertsOp experts = layer.experts;
  std::vector<ParamOp> params;
  for (Value value : {experts.getFc1Weight(), experts.getFc1Bias(), experts.getFc2Weight(),
                      experts.getFc2Bias()})
    if (ParamOp param = value ? value.getDefiningOp<ParamOp>() : ParamOp())
      params.push_back(param);
  return params;
}

bool sameLayer(const cost::MoeShape &a, const cost::MoeShape &b) {
  return a.tokens == b.tokens && a.hidden == b.hidden && a.ffn == b.ffn && a.fc1Rows == b.fc1Rows &&
         a.experts == b.experts && a.topK == b.topK && a.capacityRows == b.capacityRows &&
         a.biases == b.biases;
}

bool isForward(Operation *op, StringRef opType) {
  auto compute = dyn_cast<ComputeOp>(op);
  return compute && compute.getPhase() == Phase::forward && compute.getOpType() == opType;
}

ParamOp paramOf(Value value) { return value.getDefiningOp<ParamOp>(); }

/// The model's parameter shape: a tensor-parallel shard's type is one rank's part.
SmallVector<int64_t> logicalShape(ParamOp param) {
  SmallVector<int64_t> shape(param.getType().getShape());
  if (ShardAttr shard = param.getShardAttr())
    shape[shard.getDim()] *= shard.getParts();
  return shape;
}

int64_t elementsOf(ParamOp param) {
  int64_t elements = 1;
  for (int64_t dim : logicalShape(param))
    elements *= dim;
  return elements;
}

/// The weight GEMM `op` is, if any.
std::optional<WeightGemm> matchWeightGemm(ComputeOp op) {
  bool isGemm = op.getOpType() == "Gemm";
  if (op.getPhase() != Phase::forward || (op.getOpType() != "MatMul" && !isGemm) ||
      op.getInputs().size() < 2 || op->getNumResults() != 1)
    return std::nullopt;
  auto input = dyn_cast<RankedTensorType>(op.getInputs()[0].getType());
  auto output = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!input || !output || input.getRank() < 1 || output.getRank() < 1)
    return std::nullopt;
  WeightGemm gemm;
  gemm.op = op;
  Value weight = op.getInputs()[1];
  bool transposed = false;
  if (auto transpose = weight.getDefiningOp<ComputeOp>();
      transpose && isForward(transpose, "Transpose") && transpose.getInputs().size() == 1) {
    gemm.weightTranspose = transpose;
    weight = transpose.getInputs()[0];
    transposed = true;
  }
  gemm.weight = paramOf(weight);
  if (!gemm.weight || gemm.weight.getType().getRank() != 2)
    return std::nullopt;
  gemm.inFeatures = input.getShape().back();
  gemm.outFeatures = output.getShape().back();
  SmallVector<int64_t> dims = logicalShape(gemm.weight);
  // MatMul reads the weight as [in, out]; a Gemm stores it [out, in] when its
  // second dimension is the input features (transB, PyTorch's Linear export;
  // a square weight is taken that way too). A Transpose in between flips either.
  bool storedOutIn = isGemm && dims[1] == gemm.inFeatures;
  gemm.outDim = storedOutIn != transposed ? 0 : 1;
  gemm.inDim = 1 - gemm.outDim;
  if (dims[gemm.inDim] != gemm.inFeatures || dims[gemm.outDim] != gemm.outFeatures)
    return std::nullopt;
  if (isGemm) {
    if (op.getInputs().size() > 2)
      gemm.bias = paramOf(op.getInputs()[2]);
  } else if (Value output = op->getResult(0); output.hasOneUse()) {
    // A row-parallel GEMM's partial outputs are summed before its bias Add.
    Operation *user = *output.getUsers().begin();
    bool roleCollective = isa<CollectiveOpInterface>(user) &&
                          user->hasAttr(ZenDialect::RoleAttrHelper::getNameStr());
    if (roleCollective && user->getResult(0).hasOneUse())
      user = *user->getResult(0).getUsers().begin();
    auto add = dyn_cast<ComputeOp>(user);
    if (add && isForward(add, "Add") && add.getInputs().size() == 2)
      for (Value operand : add.getInputs())
        if (ParamOp bias = paramOf(operand);
            bias && bias.getType().getRank() == 1 && logicalShape(bias)[0] == gemm.outFeatures) {
          gemm.bias = bias;
          gemm.biasAdd = add;
        }
  }
  return gemm;
}

/// Element count of a shape without its last dimension (tokens of an activation).
int64_t leadingElements(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  int64_t product = 1;
  for (int64_t d = 0; d + 1 < tensor.getRank(); ++d)
    product *= tensor.getDimSize(d);
  return product;
}

/// True when the value a gap's last parameter op produces feeds a residual Add
/// (an Add of two activations): the normalisation closes the previous block
/// (post-LN). In a pre-LN block it only feeds the next block's GEMMs.
bool feedsResidual(Operation *op) {
  for (Operation *user : op->getResult(0).getUsers())
    if (isForward(user, "Add") && llvm::none_of(user->getOperands(), [](Value operand) {
          return static_cast<bool>(paramOf(operand));
        }))
      return true;
  return false;
}

} // namespace

std::optional<TransformerStructure> analyzeTransformer(ModuleOp module, std::string *whyNot) {
  auto fail = [&](const std::string &reason) -> std::optional<TransformerStructure> {
    if (whyNot)
      *whyNot = reason;
    return std::nullopt;
  };
  TransformerStructure structure;
  plan::forEachFunction(module, [&](func::FuncOp func) {
    if (!structure.func && !func.getBody().empty() && !func.getBody().getOps<ParamOp>().empty())
      structure.func = func;
  });
  if (!structure.func)
    return fail("no function with zen.param ops");

  const char *noBlock = "no transformer block (QKV GEMM(s), Softmax, attention output, two "
                        "MLP GEMMs) with 2-D zen.param weights";
  // Without a Softmax there is no block to look for: answered before every op is indexed.
  if (llvm::none_of(structure.func.getBody().getOps<ComputeOp>(), [](ComputeOp compute) {
        return compute.getPhase() == Phase::forward && compute.getOpType() == "Softmax";
      }))
    return fail(noBlock);

  // Positions of every op, the weight GEMMs and the Softmaxes, in forward order.
  DenseMap<Operation *, size_t> position;
  // Sized once: a 100 000-tensor model has ~700 000 ops.
  position.reserve(structure.func.getBody().front().getOperations().size());
  std::vector<WeightGemm> gemms;
  std::vector<ComputeOp> softmaxes;
  std::vector<ParamOp> params;
  DenseMap<Operation *, size_t> firstUse;
  bool causal = false;
  int64_t widestTable = 0;
  for (Operation &op : structure.func.getBody().front()) {
    size_t at = position.size();
    position[&op] = at;
    if (auto param = dyn_cast<ParamOp>(op)) {
      params.push_back(param);
      continue;
    }
    auto compute = dyn_cast<ComputeOp>(op);
    if (!compute || compute.getPhase() != Phase::forward)
      continue;
    for (Value input : compute.getInputs())
      if (ParamOp param = paramOf(input))
        firstUse.try_emplace(param, at);
    if (std::optional<WeightGemm> gemm = matchWeightGemm(compute)) {
      gemm->position = at;
      gemms.push_back(*gemm);
    } else if (compute.getOpType() == "Softmax") {
      softmaxes.push_back(compute);
    } else if (compute.getOpType() == "Trilu") {
      causal = true;
    } else if (compute.getOpType() == "Gather" && !compute.getInputs().empty()) {
      if (ParamOp table = paramOf(compute.getInputs()[0]); table && table.getType().getRank() == 2)
        widestTable = std::max(widestTable, table.getType().getDimSize(0));
    }
  }
  // MoE layers by their router GEMM (the op computing the dispatch's logits).
  std::string moeError;
  std::optional<std::vector<MoeLayerOps>> moeLayers = collectMoeLayers(module, moeError);
  if (!moeLayers)
    return fail(moeError);
  DenseMap<Operation *, size_t> routed;
  for (size_t l = 0; l < moeLayers->size(); ++l)
    if (Operation *router = (*moeLayers)[l].dispatch.getRouter().getDefiningOp())
      routed[router] = l;
  auto softmaxBetween = [&](size_t from, size_t to) {
    return llvm::any_of(softmaxes, [&](ComputeOp softmax) {
      return position[softmax] > from && position[softmax] < to;
    });
  };

  // Blocks: QKV, Softmax, attention output, MLP in, MLP out; same widths throughout.
  std::vector<bool> inBlock(gemms.size(), false);
  int64_t hidden = 0, ffn = 0;
  size_t g = 0;
  while (g < gemms.size()) {
    auto sameInput = [&](size_t a, size_t b) {
      return gemms[a].op.getInputs()[0] == gemms[b].op.getInputs()[0];
    };
    int64_t h = hidden ? hidden : gemms[g].inFeatures;
    size_t qkvCount = 0;
    if (gemms[g].inFeatures == h && gemms[g].outFeatures == 3 * h)
      qkvCount = 1;
    else if (g + 2 < gemms.size() && llvm::all_of(std::initializer_list<size_t>{g, g + 1, g + 2},
                                                  [&](size_t k) {
                                                    return gemms[k].inFeatures == h &&
                                                           gemms[k].outFeatures == h &&
                                                           sameInput(g, k);
                                                  }))
      qkvCount = 3;
    size_t next = g + qkvCount;
    bool attention = qkvCount && next + 1 < gemms.size() && gemms[next].inFeatures == h &&
                     gemms[next].outFeatures == h &&
                     softmaxBetween(gemms[next - 1].position, gemms[next].position);
    std::optional<size_t> moeLayer;
    bool dense = false;
    if (attention) {
      if (auto router = routed.find(gemms[next + 1].op); router != routed.end()) {
        if (gemms[next + 1].inFeatures == h)
          moeLayer = router->second;
      } else if (next + 2 < gemms.size()) {
        const WeightGemm &in = gemms[next + 1], &back = gemms[next + 2];
        int64_t f = ffn ? ffn : in.outFeatures;
        dense = in.inFeatures == h && in.outFeatures == f && back.inFeatures == f && back.outFeatures == h;
      }
    }
    if (!dense && !moeLayer) {
      ++g;
      continue;
    }
    TransformerBlock block;
    block.qkv.assign(gemms.begin() + g, gemms.begin() + next);
    block.attentionOut = gemms[next];
    block.begin = gemms[g].weightTranspose ? position[gemms[g].weightTranspose] : gemms[g].position;
    size_t gemmsInBlock = next + 1 - g;
    if (dense) {
      block.mlpIn = gemms[next + 1];
      block.mlpOut = gemms[next + 2];
      block.end = block.mlpOut.biasAdd ? position[block.mlpOut.biasAdd] : block.mlpOut.position;
      ffn = gemms[next + 1].outFeatures;
      gemmsInBlock += 2;
    } else {
      block.router = gemms[next + 1];
      block.moeLayer = structure.moeLayers.size();
      structure.moeLayers.push_back((*moeLayers)[*moeLayer]);
      block.end = position[structure.moeLayers.back().combine];
      gemmsInBlock += 1;
    }
    for (size_t k = g; k < g + gemmsInBlock; ++k)
      inBlock[k] = true;
    hidden = h;
    structure.blocks.push_back(std::move(block));
    g += gemmsInBlock;
  }
  if (structure.blocks.empty())
    return fail(noBlock);
  for (size_t k = 0; k < gemms.size(); ++k)
    if (!inBlock[k])
      structure.replicated.push_back(gemms[k]);

  // Parameters: block GEMM weights and biases, then the others by where they are
  // first used: inside a block's span, or in the gap before or after one.
  const size_t layers = structure.blocks.size();
  DenseMap<Operation *, int> owner;  // block index; -1 embedding, -2 head
  for (size_t b = 0; b < layers; ++b) {
    TransformerBlock &block = structure.blocks[b];
    SmallVector<WeightGemm *> all;
    for (WeightGemm &gemm : block.qkv)
      all.push_back(&gemm);
    all.push_back(&block.attentionOut);
    if (block.moeLayer)
      all.push_back(&block.router);
    else
      all.append({&block.mlpIn, &block.mlpOut});
    for (WeightGemm *gemm : all) {
      owner[gemm->weight] = static_cast<int>(b);
      if (gemm->bias)
        owner[gemm->bias] = static_cast<int>(b);
    }
    if (block.moeLayer)
      for (ParamOp expert : expertParams(structure.moeLayers[*block.moeLayer]))
        owner[expert] = static_cast<int>(b);
  }
  // gaps[w]: parameters first used before block w (w = layers: after the last), in use order.
  std::vector<std::vector<ParamOp>> gaps(layers + 1);
  std::vector<ParamOp> unused;
  for (ParamOp param : params) {
    if (owner.count(param))
      continue;
    auto use = firstUse.find(param);
    if (use == firstUse.end()) {
      unused.push_back(param);
      continue;
    }
    size_t at = use->second;
    size_t w = 0;
    while (w < layers && at > structure.blocks[w].end)
      ++w;
    if (w < layers && at >= structure.blocks[w].begin)
      owner[param] = static_cast<int>(w);
    else
      gaps[w].push_back(param);
  }
  auto byUse = [&](ParamOp a, ParamOp b) { return firstUse[a] < firstUse[b]; };
  for (std::vector<ParamOp> &gap : gaps)
    std::sort(gap.begin(), gap.end(), byUse);
  auto lastUser = [&](const std::vector<ParamOp> &gap) -> Operation * {
    Operation *last = nullptr;
    for (ParamOp param : gap)
      for (Operation *user : param->getUsers())
        if (isa<ComputeOp>(user) && cast<ComputeOp>(user).getPhase() == Phase::forward &&
            (!last || position[user] > position[last]))
          last = user;
    return last;
  };
  // Pre-LN or post-LN, from an inner gap when there is one, else the first.
  bool postNorm = false;
  const std::vector<ParamOp> &probe = layers > 1 && !gaps[1].empty() ? gaps[1] : gaps[0];
  if (Operation *last = lastUser(probe); last && last->getNumResults())
    postNorm = feedsResidual(last);
  size_t perGap = layers > 1 ? gaps[1].size() : 0;
  for (size_t w = 1; w < layers; ++w)
    for (ParamOp param : gaps[w])
      owner[param] = static_cast<int>(postNorm ? w - 1 : w);
  // The outer gaps hold the embedding and the head besides the first block's
  // leading norm (pre-LN) or the last block's trailing one (post-LN).
  std::vector<ParamOp> &before = gaps.front(), &after = gaps.back();
  size_t leading = postNorm ? 0 : std::min(perGap, before.size());
  size_t trailing = postNorm ? std::min(perGap, after.size()) : 0;
  for (size_t k = 0; k < before.size(); ++k)
    owner[before[k]] = k + leading >= before.size() ? 0 : -1;
  for (size_t k = 0; k < after.size(); ++k)
    owner[after[k]] = k < trailing ? static_cast<int>(layers) - 1 : -2;
  for (const WeightGemm &gemm : structure.replicated)
    for (ParamOp param : {gemm.weight, gemm.bias})
      if (param && !owner.count(param))
        owner[param] = gemm.position < structure.blocks.front().begin ? -1 : -2;
  for (ParamOp param : unused)
    owner[param] = -2;

  for (ParamOp param : params) {
    int who = owner.lookup(param);
    if (who >= 0)
      structure.blocks[who].params.push_back(param);
    else if (who == -1)
      structure.embeddingParams.push_back(param);
    else
      structure.headParams.push_back(param);
  }
  auto countOf = [](const std::vector<ParamOp> &list) {
    double total = 0;
    for (ParamOp param : list)
      total += static_cast<double>(elementsOf(param));
    return total;
  };
  cost::TransformerShape &shape = structure.shape;
  // Dense blocks alike, MoE blocks alike (their parameters besides the experts, and their layers).
  std::optional<double> denseParams, moeBlockParams;
  for (size_t b = 0; b < layers; ++b) {
    const TransformerBlock &block = structure.blocks[b];
    double params = countOf(block.params);
    if (block.moeLayer) {
      const MoeLayerOps &layer = structure.moeLayers[*block.moeLayer];
      params -= countOf(expertParams(layer));
      if (!shape.moe) {
        shape.moe.emplace();
        shape.moe->layer = layer.layer.shape;
        shape.moe->expertParams = countOf(expertParams(layer));
      } else if (!sameLayer(shape.moe->layer, layer.layer.shape)) {
        return fail("MoE layers differ in their shape ('" + layer.layer.name + "')");
      }
      shape.moe->blocks.push_back(static_cast<int64_t>(b));
    }
    std::optional<double> &alike = block.moeLayer ? moeBlockParams : denseParams;
    if (!alike)
      alike = params;
    else if (params != *alike)
      return fail(std::string(block.moeLayer ? "MoE" : "transformer") +
                  " blocks differ in their parameters (" + std::to_string(static_cast<int64_t>(params)) +
                  " vs " + std::to_string(static_cast<int64_t>(*alike)) + ")");
  }
  shape.layerParams = denseParams.value_or(0);
  if (shape.moe)
    shape.moe->blockParams = *moeBlockParams;
  shape.embeddingParams = countOf(structure.embeddingParams);
  shape.headParams = countOf(structure.headParams);

  TransformerBlock &first = structure.blocks.front();
  shape.family = causal ? "gpt" : "bert";
  shape.layers = static_cast<int64_t>(layers);
  shape.hidden = hidden;
  // Every block MoE: the experts' width stands for the MLP's in the checks.
  shape.ffn = ffn ? ffn : shape.moe->layer.ffn;
  // The attention scores are [..., seq, seq]: their last dimension is the sequence.
  for (ComputeOp softmax : softmaxes)
    if (position[softmax] > first.qkv.back().position &&
        position[softmax] < first.attentionOut.position) {
      shape.seq = cast<RankedTensorType>(softmax->getResult(0).getType()).getShape().back();
      break;
    }
  if (shape.seq <= 0)
    return fail("the attention scores have no static sequence length");
  int64_t tokens = leadingElements(first.qkv.front().op.getInputs()[0].getType());
  shape.modelBatch = std::max<int64_t>(1, tokens / shape.seq);
  // Heads: the Reshape that splits the QKV output into [..., heads, hidden / heads].
  for (Operation &op : structure.func.getBody().front()) {
    size_t at = position[&op];
    if (at <= first.qkv.front().position || at >= first.attentionOut.position ||
        !isForward(&op, "Reshape"))
      continue;
    auto result = cast<RankedTensorType>(op.getResult(0).getType());
    if (result.getRank() >= 3) {
      int64_t heads = result.getDimSize(result.getRank() - 2);
      if (heads * result.getShape().back() == hidden) {
        shape.heads = heads;
        break;
      }
    }
  }
  if (!shape.heads) {
    structure.headsInferred = true;
    shape.heads = std::max<int64_t>(1, hidden / 64);
  }
  // Vocabulary: the output projection after the last block, else the widest embedding table.
  for (const WeightGemm &gemm : structure.replicated)
    if (gemm.position > structure.blocks.back().end)
      shape.vocab = gemm.outFeatures;
  if (!shape.vocab)
    shape.vocab = widestTable;
  for (const WeightGemm &gemm : structure.replicated)
    shape.replicated.push_back(gemm.nodeName());
  return structure;
}

std::optional<cost::TransformerShape> recognizeTransformer(ModuleOp module, std::string *whyNot) {
  std::optional<TransformerStructure> structure = analyzeTransformer(module, whyNot);
  if (!structure)
    return std::nullopt;
  return structure->shape;
}

} // namespace zen
