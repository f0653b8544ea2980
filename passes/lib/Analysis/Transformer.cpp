//===- Transformer.cpp - recognising transformer blocks in imported IR ----===//
#include "zen/Analysis/Transformer.h"

#include "zen/Analysis/IRPlan.h"

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
                      experts.getFc2Bias(), experts.getFc3Weight(), experts.getFc3Bias()})
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
  if (auto slice = weight.getDefiningOp<ComputeOp>(); slice && isForward(slice, "Slice") &&
                                                      !slice.getInputs().empty() &&
                                                      paramOf(slice.getInputs()[0])) {
    gemm.weightSlice = slice;
    weight = slice.getInputs()[0];
  }
  gemm.weight = paramOf(weight);
  if (!gemm.weight || gemm.weight.getType().getRank() != 2)
    return std::nullopt;
  gemm.inFeatures = input.getShape().back();
  gemm.outFeatures = output.getShape().back();
  SmallVector<int64_t> dims = logicalShape(gemm.weight);
  if (gemm.weightSlice) {
    auto sliced = dyn_cast<RankedTensorType>(gemm.weightSlice->getResult(0).getType());
    if (!sliced || sliced.getRank() != 2 || !sliced.hasStaticShape())
      return std::nullopt;
    dims.assign(sliced.getShape().begin(), sliced.getShape().end());
  }
  // MatMul reads the weight as [in, out]; a Gemm stores it [out, in] when its
  // second dimension is the input features (transB, PyTorch's Linear export;
  // a square weight is taken that way too). A Transpose in between flips either.
  bool storedOutIn = isGemm && dims[1] == gemm.inFeatures;
  gemm.outDim = storedOutIn != transposed ? 0 : 1;
  gemm.inDim = 1 - gemm.outDim;
  // Shape inference can lose an input's width (after a Loop, as torch's
  // repeat_interleave exports): the weight's other dimension is the width.
  if (ShapedType::isDynamic(gemm.inFeatures) && !isGemm)
    gemm.inFeatures = dims[gemm.inDim];
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
      for (Value operand : add.getInputs()) {
        // The bias, or its slice of a packed bias (as the weight's of a packed weight).
        auto width = dyn_cast<RankedTensorType>(operand.getType());
        Value biasValue = operand;
        if (auto slice = operand.getDefiningOp<ComputeOp>();
            gemm.weightSlice && slice && isForward(slice, "Slice") && !slice.getInputs().empty())
          biasValue = slice.getInputs()[0];
        ParamOp bias = paramOf(biasValue);
        if (bias && bias.getType().getRank() == 1 && width && width.getRank() == 1 &&
            (biasValue == operand ? logicalShape(bias)[0] : width.getDimSize(0)) == gemm.outFeatures) {
          gemm.bias = bias;
          gemm.biasAdd = add;
        }
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

/// One attention's weight GEMMs starting at some index: `projections` GEMMs
/// (Q, K and V fused; Q and fused KV; or Q, K, V), then the output GEMM.
struct AttentionMatch {
  size_t projections = 0;
  int64_t queryWidth = 0, kvWidth = 0;  // heads x head size; key/value heads x head size
  bool cross = false;                   // K/V read another value than Q (cross-attention)
};

/// Ops between the attention scores GEMM and the Softmax: scaling, masking, casts.
bool onScoresPath(StringRef opType) {
  return opType == "Add" || opType == "Sub" || opType == "Mul" || opType == "Div" ||
         opType == "Where" || opType == "Cast" || opType == "Identity";
}

/// True when `value` is computed without any function argument (from constants
/// and frozen buffers only); bounded, a deep graph counts as not static.
bool isStatic(Value value) {
  SmallVector<Value> frontier{value};
  llvm::DenseSet<Operation *> seen;
  while (!frontier.empty()) {
    Value current = frontier.pop_back_val();
    Operation *producer = current.getDefiningOp();
    if (!producer)
      return false;
    if (isa<ParamOp>(producer) || !seen.insert(producer).second)
      continue;
    if (seen.size() > 64)
      return false;
    frontier.append(producer->operand_begin(), producer->operand_end());
  }
  return true;
}

/// Walks back from a Softmax's input over the scores path to the Q·Kᵀ MatMul;
/// `staticMask` is set when a mask on that path is computed from constants
/// only (a causal mask: a padding mask comes from an input).
ComputeOp scoresGemm(ComputeOp softmax, bool &staticMask) {
  if (softmax.getInputs().empty())
    return {};
  Value value = softmax.getInputs()[0];
  for (int hops = 0; hops < 8; ++hops) {
    auto op = value.getDefiningOp<ComputeOp>();
    if (!op || op.getPhase() != Phase::forward)
      return {};
    StringRef type = op.getOpType();
    if (type == "MatMul" && !matchWeightGemm(op))
      return op;
    if (!onScoresPath(type) || op.getInputs().empty())
      return {};
    // Follow the operand that is not static: the scores; the others mask or scale.
    Value scores;
    for (Value input : op.getInputs())
      if (!isStatic(input) && !scores)
        scores = input;
    if (!scores)
      return {};
    bool masking = type == "Add" || type == "Sub" || type == "Where";
    // A masking op whose mask is a frozen buffer (not in the IR) has lost that operand.
    size_t arity = type == "Where" ? 3 : 2;
    if (masking && (op.getInputs().size() < arity ||
                    llvm::any_of(op.getInputs(), [&](Value input) {
                      auto type = dyn_cast<RankedTensorType>(input.getType());
                      return input != scores && isStatic(input) && !input.getDefiningOp<ParamOp>() &&
                             type && type.hasStaticShape() && type.getNumElements() > 1;
                    })))
      staticMask = true;
    value = scores;
  }
  return {};
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

  const char *noBlock = "no transformer block (an attention: Q/K/V GEMM(s), Softmax, output GEMM; then "
                        "an MLP of two or three GEMMs, or an MoE layer) with 2-D zen.param weights";
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
  std::vector<ComputeOp> forwardOps;
  std::vector<ParamOp> params;
  DenseMap<Operation *, size_t> firstUse;
  DenseSet<Operation *> gatheredTables;
  bool trilu = false;
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
    forwardOps.push_back(compute);
    for (Value input : compute.getInputs())
      if (ParamOp param = paramOf(input))
        firstUse.try_emplace(param, at);
    if (std::optional<WeightGemm> gemm = matchWeightGemm(compute)) {
      gemm->position = at;
      gemms.push_back(*gemm);
    } else if (compute.getOpType() == "Softmax") {
      softmaxes.push_back(compute);
    } else if (compute.getOpType() == "Trilu") {
      trilu = true;
    } else if (compute.getOpType() == "Gather" && !compute.getInputs().empty()) {
      if (ParamOp table = paramOf(compute.getInputs()[0]); table && table.getType().getRank() == 2) {
        widestTable = std::max(widestTable, logicalShape(table)[0]);
        gatheredTables.insert(table);
      }
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
  auto inputOf = [&](size_t k) { return gemms[k].op.getInputs()[0]; };
  auto matchAttention = [&](size_t g, int64_t h) -> std::optional<AttentionMatch> {
    for (size_t count : {3, 2, 1}) {
      if (g + count >= gemms.size())
        continue;
      const WeightGemm &q = gemms[g], &out = gemms[g + count];
      bool widths = out.outFeatures == h;
      for (size_t k = g; k < g + count; ++k)
        widths = widths && gemms[k].inFeatures == h;
      if (!widths)
        continue;
      AttentionMatch match;
      match.projections = count;
      match.queryWidth = out.inFeatures;
      if (count == 1) {
        if (q.outFeatures <= match.queryWidth || (q.outFeatures - match.queryWidth) % 2)
          continue;
        match.kvWidth = (q.outFeatures - match.queryWidth) / 2;
      } else if (q.outFeatures != match.queryWidth) {
        continue;
      } else if (count == 2) {
        if (gemms[g + 1].outFeatures % 2)
          continue;
        match.kvWidth = gemms[g + 1].outFeatures / 2;
      } else {
        if (gemms[g + 1].outFeatures != gemms[g + 2].outFeatures || inputOf(g + 1) != inputOf(g + 2))
          continue;
        match.kvWidth = gemms[g + 1].outFeatures;
      }
      if (match.kvWidth <= 0 || match.kvWidth > match.queryWidth ||
          match.queryWidth % match.kvWidth != 0 ||
          !softmaxBetween(gemms[g + count - 1].position, out.position))
        continue;
      match.cross = count > 1 && inputOf(g) != inputOf(g + 1);
      return match;
    }
    return std::nullopt;
  };

  // Blocks: an attention (a cross-attention after it in a decoder block), then
  // the MLP or an MoE layer; widths as the first block's throughout.
  std::vector<bool> inBlock(gemms.size(), false);
  int64_t hidden = 0, ffn = 0, queryWidth = 0, kvWidth = 0;
  std::optional<size_t> mlpGemms;  // 2 or 3 (gate and up, then down), as the first dense block's
  size_t g = 0;
  while (g < gemms.size()) {
    int64_t h = hidden ? hidden : gemms[g].inFeatures;
    std::optional<AttentionMatch> self = matchAttention(g, h);
    if (!self || self->cross ||
        (queryWidth && (self->queryWidth != queryWidth || self->kvWidth != kvWidth))) {
      ++g;
      continue;
    }
    size_t next = g + self->projections + 1;
    std::optional<AttentionMatch> cross = matchAttention(next, h);
    if (cross && (!cross->cross || cross->queryWidth != self->queryWidth || cross->kvWidth != self->kvWidth))
      cross.reset();
    size_t mlp = cross ? next + cross->projections + 1 : next;
    if (mlp >= gemms.size()) {
      ++g;
      continue;
    }
    std::optional<size_t> moeLayer;
    size_t dense = 0;  // GEMMs of a dense MLP
    if (auto router = routed.find(gemms[mlp].op); router != routed.end()) {
      if (gemms[mlp].inFeatures == h)
        moeLayer = router->second;
    } else {
      auto fits = [&](size_t count) {
        if (mlp + count > gemms.size() || (mlpGemms && *mlpGemms != count))
          return false;
        const WeightGemm &in = gemms[mlp], &down = gemms[mlp + count - 1];
        if (in.inFeatures != h || down.outFeatures != h || (ffn && down.inFeatures != ffn))
          return false;
        if (count == 3)  // gate and up read one input, down reads their product
          return gemms[mlp + 1].inFeatures == h && gemms[mlp + 1].outFeatures == in.outFeatures &&
                 inputOf(mlp) == inputOf(mlp + 1) && down.inFeatures == in.outFeatures;
        // A fused gate-up GEMM is twice as wide as the down GEMM's input.
        return in.outFeatures == down.inFeatures || in.outFeatures == 2 * down.inFeatures;
      };
      dense = fits(3) ? 3 : fits(2) ? 2 : 0;
    }
    if (!dense && !moeLayer) {
      ++g;
      continue;
    }
    TransformerBlock block;
    block.qkv.assign(gemms.begin() + g, gemms.begin() + g + self->projections);
    block.attentionOut = gemms[g + self->projections];
    if (cross) {
      block.crossQkv.assign(gemms.begin() + next, gemms.begin() + next + cross->projections);
      block.crossOut = gemms[next + cross->projections];
    }
    block.begin = gemms[g].weightTranspose ? position[gemms[g].weightTranspose] : gemms[g].position;
    size_t end = mlp;
    if (dense) {
      block.mlpIn.assign(gemms.begin() + mlp, gemms.begin() + mlp + dense - 1);
      block.mlpOut = gemms[mlp + dense - 1];
      block.end = block.mlpOut.biasAdd ? position[block.mlpOut.biasAdd] : block.mlpOut.position;
      ffn = block.mlpOut.inFeatures;
      mlpGemms = dense;
      end += dense;
    } else {
      block.router = gemms[mlp];
      block.moeLayer = structure.moeLayers.size();
      structure.moeLayers.push_back((*moeLayers)[*moeLayer]);
      block.end = position[structure.moeLayers.back().combine];
      end += 1;
    }
    for (size_t k = g; k < end; ++k)
      inBlock[k] = true;
    hidden = h;
    queryWidth = self->queryWidth;
    kvWidth = self->kvWidth;
    structure.blocks.push_back(std::move(block));
    g = end;
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
    for (WeightGemm &gemm : block.crossQkv)
      all.push_back(&gemm);
    if (!block.crossQkv.empty())
      all.push_back(&block.crossOut);
    if (block.moeLayer)
      all.push_back(&block.router);
    for (WeightGemm &gemm : block.mlpIn)
      all.push_back(&gemm);
    if (!block.moeLayer)
      all.push_back(&block.mlpOut);
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
  // A block's own norms in a gap: as many as the smallest inner gap holds. A
  // gap with more (an encoder's final norm before the decoder's first block)
  // keeps those nearest the block it belongs to; the rest stand outside the blocks.
  size_t perGap = 0;
  for (size_t w = 1; w < layers; ++w)
    perGap = w == 1 ? gaps[w].size() : std::min(perGap, gaps[w].size());
  for (size_t w = 1; w < layers; ++w)
    for (size_t k = 0; k < gaps[w].size(); ++k) {
      bool own = postNorm ? k < perGap : k + perGap >= gaps[w].size();
      owner[gaps[w][k]] = !own ? -2 : static_cast<int>(postNorm ? w - 1 : w);
    }
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
  // Dense blocks alike, decoder blocks (with a cross-attention) alike, MoE
  // blocks alike (their parameters besides the experts, and their layers).
  std::optional<double> denseParams, crossParams, moeBlockParams;
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
    bool decoder = !block.crossQkv.empty();
    if (decoder && block.moeLayer)
      return fail("a decoder block with a cross-attention and an MoE layer ('" + block.router.nodeName() +
                  "') is not supported");
    if (!decoder && shape.crossAttentionBlocks)
      return fail("an encoder block after the decoder's blocks ('" + block.attentionOut.nodeName() + "')");
    if (decoder)
      ++shape.crossAttentionBlocks;
    std::optional<double> &alike = block.moeLayer ? moeBlockParams : decoder ? crossParams : denseParams;
    if (!alike)
      alike = params;
    else if (params != *alike)
      return fail(std::string(block.moeLayer ? "MoE" : decoder ? "decoder" : "transformer") +
                  " blocks differ in their parameters (" + std::to_string(static_cast<int64_t>(params)) +
                  " vs " + std::to_string(static_cast<int64_t>(*alike)) + ")");
  }
  if (crossParams && !denseParams)
    return fail("blocks with a cross-attention but no encoder blocks before them");
  shape.layerParams = denseParams.value_or(0);
  if (crossParams)
    shape.crossAttentionParams = *crossParams - shape.layerParams;
  if (shape.moe)
    shape.moe->blockParams = *moeBlockParams;
  shape.embeddingParams = countOf(structure.embeddingParams);
  shape.headParams = countOf(structure.headParams);

  TransformerBlock &first = structure.blocks.front();
  shape.layers = static_cast<int64_t>(layers);
  shape.hidden = hidden;
  // Every block MoE: the experts' width stands for the MLP's in the checks.
  shape.ffn = ffn ? ffn : shape.moe->layer.ffn;
  // The attention scores are [..., seq, seq]: their last dimension is the
  // sequence, and the Q·Kᵀ GEMM before them contracts over the head size.
  ComputeOp firstSoftmax;
  for (ComputeOp softmax : softmaxes)
    if (position[softmax] > first.qkv.back().position &&
        position[softmax] < first.attentionOut.position) {
      firstSoftmax = softmax;
      break;
    }
  shape.seq = cast<RankedTensorType>(firstSoftmax->getResult(0).getType()).getShape().back();
  if (shape.seq <= 0 || ShapedType::isDynamic(shape.seq))
    return fail("the attention scores have no static sequence length");
  int64_t tokens = leadingElements(first.qkv.front().op.getInputs()[0].getType());
  shape.modelBatch = std::max<int64_t>(1, tokens / shape.seq);

  // A mask on any attention's scores computed from constants only is causal.
  bool causal = trilu;
  int64_t headSize = 0;
  for (ComputeOp softmax : softmaxes) {
    bool staticMask = false;
    ComputeOp scores = scoresGemm(softmax, staticMask);
    causal = causal || staticMask;
    if (softmax == firstSoftmax && scores)
      if (auto query = dyn_cast<RankedTensorType>(scores.getInputs()[0].getType());
          query && query.getRank() >= 2 && !ShapedType::isDynamic(query.getShape().back()))
        headSize = query.getShape().back();
  }
  shape.family = shape.crossAttentionBlocks ? "encoder-decoder" : causal ? "gpt" : "bert";

  // Heads: the attributes when given (--heads/--kv-heads), else the head size.
  auto attribute = [&](StringRef name) -> int64_t {
    auto value = module->getAttrOfType<IntegerAttr>(name);
    return value ? value.getInt() : 0;
  };
  int64_t heads = attribute(ZenDialect::HeadsAttrHelper::getNameStr()),
          kvHeads = attribute(ZenDialect::KvHeadsAttrHelper::getNameStr());
  const std::string where = "the attention of block 0 (Softmax '" +
                            (firstSoftmax.getNode() ? firstSoftmax.getNode()->str() : std::string("?")) +
                            "', Q width " + std::to_string(queryWidth) + ", K/V width " +
                            std::to_string(kvWidth) + ")";
  structure.headsFrom = heads || kvHeads ? "attributes" : "scores";
  if (heads) {
    if (queryWidth % heads)
      return fail("--heads " + std::to_string(heads) + " does not divide " + where);
    headSize = queryWidth / heads;
  } else if (kvHeads) {
    if (kvWidth % kvHeads)
      return fail("--kv-heads " + std::to_string(kvHeads) + " does not divide " + where);
    headSize = kvWidth / kvHeads;
  } else if (headSize <= 0) {
    return fail("cannot read the heads of " + where +
                ": no Q·Kᵀ MatMul with a static head size feeds its Softmax; give --heads (and --kv-heads)");
  }
  if (queryWidth % headSize || kvWidth % headSize)
    return fail("the head size " + std::to_string(headSize) + " read from " + where +
                " does not divide its projections; give --heads (and --kv-heads)");
  shape.heads = queryWidth / headSize;
  shape.kvHeads = kvWidth / headSize;
  if (kvHeads && kvHeads != shape.kvHeads)
    return fail("--kv-heads " + std::to_string(kvHeads) + " does not match " + where + " with " +
                std::to_string(shape.heads) + " heads");

  // The MLP's activation: what runs between its first GEMM and its down GEMM.
  auto activationIn = [&](size_t from, size_t to) -> std::string {
    bool sigmoid = false, gelu = false, relu = false;
    for (ComputeOp op : forwardOps) {
      size_t at = position[op];
      if (at <= from || at >= to)
        continue;
      StringRef type = op.getOpType();
      sigmoid = sigmoid || type == "Sigmoid" || type == "HardSwish";
      gelu = gelu || type == "Gelu" || type == "Erf" || type == "Tanh" || type == "FastGelu" ||
             type == "BiasGelu";
      relu = relu || type == "Relu";
    }
    return sigmoid ? "silu" : gelu ? "gelu" : relu ? "relu" : "";
  };
  for (const TransformerBlock &block : structure.blocks) {
    if (block.moeLayer)
      continue;
    std::string activation = activationIn(block.mlpIn.front().position, block.mlpOut.position);
    bool gated = block.mlpIn.size() == 2 || block.mlpIn.front().outFeatures == 2 * block.mlpOut.inFeatures;
    if (gated)
      shape.mlp = activation == "gelu" ? "geglu" : "swiglu";
    else
      shape.mlp = activation.empty() || activation == "silu" ? "gelu" : activation;
    break;
  }
  if (!denseParams && shape.moe && shape.moe->layer.fc1Rows == 2 * shape.moe->layer.ffn)
    shape.mlp = "swiglu";

  // The norm: an ONNX normalisation op, else the chain torch exports (LayerNorm
  // subtracts the mean; RMSNorm only divides by the root mean square).
  bool layerNorm = false, rmsNorm = false;
  for (ComputeOp op : forwardOps) {
    if (position[op] > first.end)
      break;
    StringRef type = op.getOpType();
    auto fromOp = [&](Value value, StringRef producer) {
      auto defining = value.getDefiningOp<ComputeOp>();
      return defining && defining.getOpType() == producer;
    };
    if (type == "LayerNormalization" ||
        (type == "Sub" && llvm::any_of(op.getInputs(), [&](Value v) { return fromOp(v, "ReduceMean"); })))
      layerNorm = true;
    else if (type == "SimplifiedLayerNormalization" || type == "RMSNormalization" ||
             type == "SkipSimplifiedLayerNormalization" ||
             (type == "ReduceMean" && !op.getInputs().empty() && fromOp(op.getInputs()[0], "Pow")))
      rmsNorm = true;
  }
  shape.norm = rmsNorm && !layerNorm ? "rmsnorm" : "layernorm";

  // Positions: rotary where the attention rotates Q and K (rotate_half's Neg,
  // or ONNX Runtime's RotaryEmbedding); learned where a table of seq x hidden
  // is used before the first block besides the token embedding; else none.
  shape.positions = "none";
  for (ComputeOp op : forwardOps) {
    size_t at = position[op];
    if (at > first.qkv.front().position && at < position[firstSoftmax] &&
        (op.getOpType() == "Neg" || op.getOpType() == "RotaryEmbedding"))
      shape.positions = "rotary";
  }
  // (A table of fewer rows than the sequence, BERT's token types, is not positions.)
  if (shape.positions == "none")
    for (ParamOp param : structure.embeddingParams) {
      SmallVector<int64_t> dims = logicalShape(param);
      if (dims.size() >= 2 && dims.back() == hidden && dims[dims.size() - 2] >= shape.seq &&
          dims[dims.size() - 2] != widestTable)
        shape.positions = "learned";
    }

  // Vocabulary: the output projection after the last block, else the widest
  // embedding table; tied when that projection's weight is the embedding table.
  for (const WeightGemm &gemm : structure.replicated)
    if (gemm.position > structure.blocks.back().end) {
      shape.vocab = gemm.outFeatures;
      shape.tiedEmbeddings = gatheredTables.contains(gemm.weight);
    }
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

std::optional<TensorParallelBlocker> tensorParallelBlocker(const TransformerStructure &structure,
                                                           int64_t degree) {
  for (const TransformerBlock &block : structure.blocks)
    for (const WeightGemm &gemm : block.crossQkv)
      if (gemm.weightSlice)
        return TensorParallelBlocker{gemm.op, "tensor parallelism does not partition a weight sliced "
                                              "from a packed parameter in the IR yet ('" +
                                                  gemm.nodeName() + "', tp = " + std::to_string(degree) + ")"};
  for (const TransformerBlock &block : structure.blocks)
    if (block.moeLayer)
      return TensorParallelBlocker{structure.moeLayers[*block.moeLayer].dispatch,
                                   "tensor parallelism does not partition MoE blocks in the IR yet (tp = " +
                                       std::to_string(degree) + ")"};
  return std::nullopt;
}

} // namespace zen
