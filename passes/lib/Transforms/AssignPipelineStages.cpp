//===- AssignPipelineStages.cpp - pipeline stages and their transfers -----===//
//
// Splits the recognised transformer's blocks into `pp` contiguous pipeline
// stages (given by `stage-layers`, else balanced by forward plus backward
// FLOPs with the embedding on the first stage and the head on the last), sets
// `stage` on every param, compute and gradient op, and inserts a zen.send /
// zen.recv pair for each value one stage produces and another reads:
// activations forward, their gradients backward. docs/design.md
// "Partitioning passes".
//
//===----------------------------------------------------------------------===//
#include "../Partitioning.h"
#include "zen/Passes/Passes.h"
#include "zen/Analysis/Transformer.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace zen {
#define GEN_PASS_DEF_ASSIGNPIPELINESTAGES
#include "zen/Passes/Passes.h.inc"
}  // namespace zen

using namespace mlir;

namespace zen {
namespace {

/// Where a forward op sits: -1 before the first block (embedding), a block
/// index, or `layers` after the last block (head). Between two blocks, the
/// ops go to the earlier or the later one at the cut that the fewest values
/// cross (a pre-LN block's leading normalisation goes with it, the residual
/// Add before it with the previous block), without moving an op that reads
/// one block's parameters to the other.
class ForwardRegions {
public:
  explicit ForwardRegions(TransformerStructure &structure) : layers(structure.blocks.size()) {
    DenseMap<Operation *, int> blockOfParam;
    for (size_t b = 0; b < layers; ++b)
      for (ParamOp param : structure.blocks[b].params)
        blockOfParam[param] = static_cast<int>(b);
    std::vector<ComputeOp> forward;
    // Per block, the first and last position of a forward op reading its parameters.
    std::vector<size_t> firstUse(layers, std::numeric_limits<size_t>::max()), lastUse(layers, 0);
    for (Operation &op : structure.func.getBody().front()) {
      size_t at = position.size();
      position[&op] = at;
      auto compute = dyn_cast<ComputeOp>(op);
      if (!compute || compute.getPhase() != Phase::forward)
        continue;
      forward.push_back(compute);
      for (Value input : compute.getInputs())
        if (auto owner = blockOfParam.find(input.getDefiningOp()); owner != blockOfParam.end()) {
          firstUse[owner->second] = std::min(firstUse[owner->second], at);
          lastUse[owner->second] = std::max(lastUse[owner->second], at);
        }
    }
    starts.push_back(std::min<size_t>(structure.blocks.front().begin, firstUse.front()));
    for (size_t b = 0; b + 1 < layers; ++b) {
      size_t earliest = std::max<size_t>(structure.blocks[b].end, lastUse[b]);
      size_t latest = std::min<size_t>(structure.blocks[b + 1].begin, firstUse[b + 1]) - 1;
      size_t bestCut = earliest, fewest = std::numeric_limits<size_t>::max();
      for (size_t cut = earliest; cut <= latest; ++cut) {
        size_t crossing = 0;
        for (ComputeOp op : forward) {
          size_t at = position.lookup(op);
          if (at < starts[b] || at > cut)
            continue;
          for (Value result : op->getResults())
            crossing += llvm::any_of(result.getUsers(), [&](Operation *user) {
              return position.lookup(user) > cut && isa<ComputeOp>(user) &&
                     cast<ComputeOp>(user).getPhase() == Phase::forward;
            });
        }
        if (crossing < fewest) {
          fewest = crossing;
          bestCut = cut;
        }
      }
      starts.push_back(bestCut + 1);
    }
    lastBlockEnd = structure.blocks.back().end;
  }

  int regionOf(Operation *op) const {
    size_t at = position.lookup(op);
    if (at > lastBlockEnd)
      return static_cast<int>(layers);
    int region = -1;
    for (size_t b = 0; b < layers; ++b)
      if (at >= starts[b])
        region = static_cast<int>(b);
    return region;
  }

private:
  size_t layers;
  DenseMap<Operation *, size_t> position;
  std::vector<size_t> starts;
  size_t lastBlockEnd = 0;
};

/// Blocks per stage minimising the costliest stage; `first` and `last` are
/// the embedding's and the head's work, which the first and last stage carry.
std::vector<int64_t> balanceStages(const std::vector<double> &blockCost, double first, double last,
                                   int64_t stages) {
  const size_t layers = blockCost.size();
  std::vector<double> prefix(layers + 1, 0);
  std::partial_sum(blockCost.begin(), blockCost.end(), prefix.begin() + 1);
  auto stageCost = [&](size_t from, size_t to, int64_t stage) {
    return prefix[to] - prefix[from] + (stage == 0 ? first : 0) + (stage == stages - 1 ? last : 0);
  };
  const double infinity = std::numeric_limits<double>::infinity();
  // best[s][i]: the costliest stage when stages 0..s hold blocks [0, i); cut[s][i] where s starts.
  std::vector<std::vector<double>> best(stages, std::vector<double>(layers + 1, infinity));
  std::vector<std::vector<size_t>> cut(stages, std::vector<size_t>(layers + 1, 0));
  for (size_t i = 1; i <= layers; ++i)
    best[0][i] = stageCost(0, i, 0);
  for (int64_t s = 1; s < stages; ++s)
    for (size_t i = s + 1; i <= layers; ++i)
      for (size_t j = s; j < i; ++j) {
        double worst = std::max(best[s - 1][j], stageCost(j, i, s));
        if (worst < best[s][i]) {
          best[s][i] = worst;
          cut[s][i] = j;
        }
      }
  std::vector<int64_t> perStage(stages);
  size_t end = layers;
  for (int64_t s = stages - 1; s >= 0; --s) {
    size_t begin = s ? cut[s][end] : 0;
    perStage[s] = static_cast<int64_t>(end - begin);
    end = begin;
  }
  return perStage;
}

struct AssignPipelineStagesPass : impl::AssignPipelineStagesBase<AssignPipelineStagesPass> {
  using AssignPipelineStagesBase::AssignPipelineStagesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (detail::hasGradientSync(module)) {
      module.emitError("zen-assign-pipeline-stages runs before gradient synchronisation: run it "
                       "before zen-autotune / zen-insert-grad-sync");
      return signalPassFailure();
    }
    const int64_t stages = pp ? static_cast<int64_t>(pp) : detail::parallelOf(module).getPp();
    if (stages < 1) {
      module.emitError("pp must be at least 1, got ") << stages;
      return signalPassFailure();
    }
    std::string whyNot;
    std::optional<TransformerStructure> structure = analyzeTransformer(module, &whyNot);
    if (!structure) {
      module.emitError("pipeline stages need a recognised transformer: ") << whyNot;
      return signalPassFailure();
    }
    const int64_t layers = static_cast<int64_t>(structure->blocks.size());
    if (stages > layers) {
      module.emitError("pp = ") << stages << " exceeds the " << layers << " transformer blocks";
      return signalPassFailure();
    }
    func::FuncOp func = structure->func;
    ForwardRegions regions(*structure);
    llvm::StringMap<SmallVector<ComputeOp, 2>> backward = detail::backwardOpsByNode(func);

    std::vector<int64_t> perStage(stageLayers.begin(), stageLayers.end());
    if (!perStage.empty()) {
      int64_t total = std::accumulate(perStage.begin(), perStage.end(), int64_t{0});
      if (static_cast<int64_t>(perStage.size()) != stages || total != layers ||
          llvm::any_of(perStage, [](int64_t count) { return count < 1; })) {
        module.emitError("stage-layers [")
            << llvm::join(llvm::map_range(perStage, [](int64_t n) { return std::to_string(n); }),
                          ", ")
            << "] must give each of the " << stages << " stages at least one block and add up "
            << "to the " << layers << " blocks";
        return signalPassFailure();
      }
    } else {
      // Forward plus backward FLOPs of each region.
      std::vector<double> blockCost(layers, 0);
      double embeddingCost = 0, headCost = 0;
      func.walk([&](ComputeOp op) {
        if (op.getPhase() != Phase::forward)
          return;
        double flops = static_cast<double>(op.getFlopsAttr().getInt());
        if (std::optional<StringRef> node = op.getNode())
          for (ComputeOp grad : backward.lookup(*node))
            flops += static_cast<double>(grad.getFlopsAttr().getInt());
        int region = regions.regionOf(op);
        (region < 0 ? embeddingCost : region == layers ? headCost : blockCost[region]) += flops;
      });
      perStage = balanceStages(blockCost, embeddingCost, headCost, stages);
    }
    std::vector<int64_t> stageOfBlock;
    for (int64_t s = 0; s < stages; ++s)
      stageOfBlock.insert(stageOfBlock.end(), perStage[s], s);
    auto stageOfRegion = [&](int region) -> int64_t {
      return region < 0 ? 0 : region >= layers ? stages - 1 : stageOfBlock[region];
    };

    assignStages(*structure, regions, stageOfRegion, stages);
    if (failed(insertTransfers(func, stages)))
      return signalPassFailure();

    std::string summary;
    for (int64_t s = 0, block = 0; s < stages; block += perStage[s], ++s)
      summary += (s ? "; " : "") + std::string("stage ") + std::to_string(s) + ": blocks " +
                 std::to_string(block) + "-" + std::to_string(block + perStage[s] - 1);
    module.emitRemark("pipeline stages: ") << summary;
    detail::recordParallel(module, [&](cost::ParallelConfig &config) {
      config.pp = stages;
      config.stageLayers.clear();
      if (stages > 1)
        config.stageLayers.assign(perStage.begin(), perStage.end());
    });
  }

private:
  /// Every param, compute and gradient op gets its stage; other ops (the
  /// tensor-parallel collectives) are only noted, on their operand's stage.
  template <typename StageOfRegion>
  void assignStages(TransformerStructure &structure, const ForwardRegions &regions,
                    StageOfRegion stageOfRegion, int64_t stages) {
    Builder builder(structure.func.getContext());
    DenseMap<Operation *, int64_t> paramStage;
    for (size_t b = 0; b < structure.blocks.size(); ++b)
      for (ParamOp param : structure.blocks[b].params)
        paramStage[param] = stageOfRegion(static_cast<int>(b));
    for (ParamOp param : structure.headParams)
      paramStage[param] = stages - 1;
    llvm::StringMap<int64_t> forwardStage;
    auto fromOperands = [&](Operation *op, int64_t otherwise) {
      int64_t stage = -1;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (auto found = stageOf.find(def); found != stageOf.end())
            stage = std::max(stage, found->second);
      return stage < 0 ? otherwise : stage;
    };
    for (Operation &op : structure.func.getBody().front()) {
      int64_t stage;
      if (auto param = dyn_cast<ParamOp>(op)) {
        stage = paramStage.lookup(param);  // embedding parameters: stage 0
        param.setStageAttr(builder.getI64IntegerAttr(stage));
      } else if (auto gradient = dyn_cast<GradientOp>(op)) {
        stage = stageOf.lookup(gradient.getParam().getDefiningOp());
        gradient.setStageAttr(builder.getI64IntegerAttr(stage));
      } else if (auto compute = dyn_cast<ComputeOp>(op)) {
        std::optional<StringRef> node = compute.getNode();
        if (compute.getPhase() == Phase::forward) {
          stage = stageOfRegion(regions.regionOf(compute));
          if (node)
            forwardStage[*node] = stage;
        } else if (auto found = node ? forwardStage.find(*node) : forwardStage.end();
                   found != forwardStage.end()) {
          stage = found->second;
        } else {
          // No forward counterpart (a loss seed, an accumulation): where its inputs are;
          // backward without any starts on the last stage.
          stage = fromOperands(compute, compute.getPhase() == Phase::backward ? stages - 1 : 0);
        }
        compute.setStageAttr(builder.getI64IntegerAttr(stage));
      } else {
        stage = fromOperands(&op, 0);
        // A tensor-parallel collective runs on its block's stage.
        if (isa<CollectiveOpInterface>(op))
          op.setAttr("stage", builder.getI64IntegerAttr(stage));
      }
      stageOf[&op] = stage;
    }
  }

  /// A send on the producing stage and a recv on the consuming one for each
  /// value read on another stage (once per value and consuming stage). A
  /// constant (an op without operands) is recomputed on the consuming stage instead.
  LogicalResult insertTransfers(func::FuncOp func, int64_t stages) {
    MLIRContext *context = func.getContext();
    OpBuilder builder(context);
    auto group = ProcessGroupAttr::get(context, stages, 1);
    DenseMap<std::pair<Value, int64_t>, Value> received;
    SmallVector<Operation *> ops;
    for (Operation &op : func.getBody().front())
      if (stageOf.count(&op))
        ops.push_back(&op);
    for (Operation *user : ops) {
      int64_t consumer = stageOf.lookup(user);
      for (OpOperand &operand : user->getOpOperands()) {
        Value value = operand.get();
        Operation *def = value.getDefiningOp();
        // Function arguments (the batch) are fed to every stage; a gradient
        // names its own stage's parameter.
        if (!def || (isa<GradientOp>(user) && operand.getOperandNumber() == 0))
          continue;
        int64_t producer = stageOf.lookup(def);
        if (producer == consumer)
          continue;
        // Looked up, not referenced: recompute() inserts into `received`.
        Value copy = received.lookup({value, consumer});
        if (!copy)
          copy = recompute(value, consumer, builder, received);
        if (!copy && !isa<FloatType>(getElementTypeOrSelf(value.getType()))) {
          return user->emitError("a ")
                 << value.getType() << " computed on stage " << producer << " is read on stage "
                 << consumer << ", but zen.send carries floating-point tensors only";
        } else if (!copy) {
          builder.setInsertionPointAfter(def);
          auto send = builder.create<SendOp>(
              def->getLoc(), value, consumer, group, CollectiveAlgorithmAttr(), 1, ScheduleAttr(),
              IntegerAttr(), false, SyncSchemeAttr(), builder.getI64IntegerAttr(producer));
          detail::setRole(send, CollectiveRole::pipeline);
          builder.setInsertionPointAfter(send);
          auto recv = builder.create<RecvOp>(
              def->getLoc(), value.getType(), producer, group, CollectiveAlgorithmAttr(), 1,
              ScheduleAttr(), IntegerAttr(), false, SyncSchemeAttr(),
              builder.getI64IntegerAttr(consumer));
          detail::setRole(recv, CollectiveRole::pipeline);
          copy = recv.getResult();
        }
        received[{value, consumer}] = copy;
        operand.set(copy);
      }
    }
    return success();
  }

  /// `value` computed again on `consumer` when every stage can derive it
  /// itself: constants and what is computed from them (a causal mask sliced
  /// from a frozen buffer), and integer/bool values (shapes, indices) computed
  /// from those, from the batch and from the static shapes of activations
  /// (Shape/Size read no data). Null when it is not: activations are sent.
  Value recompute(Value value, int64_t consumer, OpBuilder &builder,
                  DenseMap<std::pair<Value, int64_t>, Value> &received) {
    auto def = value.getDefiningOp<ComputeOp>();
    if (!def)
      return {};
    const bool isFloat = isa<FloatType>(getElementTypeOrSelf(value.getType()));
    const bool metadataOnly = def.getOpType() == "Shape" || def.getOpType() == "Size";
    SmallVector<Value> operands;
    for (Value input : def.getInputs()) {
      auto shaped = dyn_cast<ShapedType>(input.getType());
      if (metadataOnly && shaped && shaped.hasStaticShape())
        continue;  // a static shape is known on every stage; its data is not read
      Operation *producer = input.getDefiningOp();
      if (!producer && isFloat)
        return {};  // float data from the batch: an activation
      Value copy = !producer || stageOf.lookup(producer) == consumer ? input
                                                                     : received.lookup({input, consumer});
      if (!copy)
        copy = recompute(input, consumer, builder, received);
      if (!copy)
        return {};
      operands.push_back(copy);
    }
    builder.setInsertionPointAfter(def);
    auto clone = builder.create<ComputeOp>(def.getLoc(), def->getResultTypes(), def.getOpTypeAttr(),
                                           def.getPhaseAttr(), operands, def.getFlopsAttr(),
                                           def.getBytesAttr(), def.getNodeAttr(),
                                           builder.getI64IntegerAttr(consumer));
    for (OpResult result : def->getResults())
      received[{result, consumer}] = clone->getResult(result.getResultNumber());
    return clone->getResult(cast<OpResult>(value).getResultNumber());
  }

  DenseMap<Operation *, int64_t> stageOf;
};

}  // namespace
}  // namespace zen
