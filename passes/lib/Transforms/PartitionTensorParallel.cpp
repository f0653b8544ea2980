//===- PartitionTensorParallel.cpp - Megatron-style tensor parallelism ----===//
//
// Splits each recognised transformer block over `tp` ranks: QKV and the first
// MLP GEMM column-parallel, the attention output and the second MLP GEMM
// row-parallel, the attention heads between them divided among the ranks.
// Parameters (and their gradients) take one rank's shard as their type, so
// the gradient planner prices per-rank bytes; the divided GEMMs and
// attention ops carry per-rank flops and bytes. Activations keep their
// logical types, except at the sequence-parallel collectives, whose sharded
// side is typed as the shard. docs/design.md "Partitioning passes".
//
//===----------------------------------------------------------------------===//
#include "../Partitioning.h"
#include "zen/Passes/Passes.h"
#include "zen/Analysis/Transformer.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace zen {
#define GEN_PASS_DEF_PARTITIONTENSORPARALLEL
#include "zen/Passes/Passes.h.inc"
}  // namespace zen

using namespace mlir;

namespace zen {
namespace {

class TensorParallelRewriter {
public:
  TensorParallelRewriter(TransformerStructure &structure, int64_t degree, bool sequence)
      : structure(structure), degree(degree), sequence(sequence),
        context(structure.func.getContext()), builder(context),
        group(ProcessGroupAttr::get(context, degree, 1)),
        backward(detail::backwardOpsByNode(structure.func)) {
    for (Operation &op : structure.func.getBody().front()) {
      position[&op] = inOrder.size();
      inOrder.push_back(&op);
    }
    // Found before any retyping: the match compares the input gradient's type
    // with the GEMM input's, which sequence parallelism changes.
    for (TransformerBlock &block : structure.blocks) {
      for (WeightGemm *gemm : columnGemms(block))
        gradOps[gemm->op] = findGradient(gemm->op);
      for (WeightGemm *gemm : rowGemms(block))
        gradOps[gemm->op] = findGradient(gemm->op);
    }
  }

  LogicalResult run() {
    for (TransformerBlock &block : structure.blocks) {
      for (WeightGemm *gemm : columnGemms(block))
        if (failed(columnParallel(*gemm)))
          return failure();
      for (WeightGemm *gemm : rowGemms(block))
        if (failed(rowParallel(*gemm)))
          return failure();
      // Every head (and key/value group) lives on one rank: the attention
      // cores between the projections and the output run on heads / tp heads.
      divideBetween(block.qkv.front(), block.attentionOut);
      if (!block.crossQkv.empty())
        divideBetween(block.crossQkv.front(), block.crossOut);
    }
    return success();
  }

private:
  /// Column-parallel: Q/K/V projections (K and V split by key/value group,
  /// which the configuration checks divide by tp), the MLP's first GEMM or its
  /// gate and up; row-parallel: the attention outputs and the down GEMM.
  static SmallVector<WeightGemm *> columnGemms(TransformerBlock &block) {
    SmallVector<WeightGemm *> gemms;
    for (WeightGemm &gemm : block.qkv)
      gemms.push_back(&gemm);
    for (WeightGemm &gemm : block.crossQkv)
      gemms.push_back(&gemm);
    for (WeightGemm &gemm : block.mlpIn)
      gemms.push_back(&gemm);
    return gemms;
  }
  static SmallVector<WeightGemm *> rowGemms(TransformerBlock &block) {
    SmallVector<WeightGemm *> gemms{&block.attentionOut};
    if (!block.crossQkv.empty())
      gemms.push_back(&block.crossOut);
    gemms.push_back(&block.mlpOut);
    return gemms;
  }

  void divideBetween(const WeightGemm &first, const WeightGemm &last) {
    const size_t from = position.lookup(first.op), to = position.lookup(last.op);
    for (size_t at = from + 1; at < to; ++at)
      if (auto compute = dyn_cast<ComputeOp>(inOrder[at]); compute && compute.getPhase() == Phase::forward)
        divideNode(compute);
  }

  /// Output features split: the weight and bias shard along their output
  /// dimension; backward, the input gradient is summed over the ranks.
  LogicalResult columnParallel(WeightGemm gemm) {
    shardParam(gemm.weight, ShardKind::column, gemm.outDim, gemm.weightTranspose);
    if (gemm.bias)
      shardParam(gemm.bias, ShardKind::column, 0, nullptr);
    divideGemm(gemm, /*withBias=*/true);
    ComputeOp grad = gradOps.lookup(gemm.op);
    if (sequence && failed(gatherInput(gemm, grad)))
      return failure();
    if (!grad)
      return success();  // nothing upstream needs the input's gradient
    Value inputGrad = grad->getResult(0);
    builder.setInsertionPointAfter(grad);
    if (sequence) {
      // The dual of the forward all-gather: each rank keeps its sequence shard.
      auto type = cast<RankedTensorType>(inputGrad.getType());
      FailureOr<int64_t> dim = sequenceDim(type, gemm.op);
      if (failed(dim))
        return failure();
      auto scatter = builder.create<ReduceScatterOp>(
          grad.getLoc(), detail::shardedType(type, *dim, degree), ReductionKind::sum, inputGrad,
          group, CollectiveAlgorithmAttr(), 1, ScheduleAttr(), IntegerAttr(), false, SyncSchemeAttr());
      replaceAfter(inputGrad, scatter, CollectiveRole::sequence_parallel);
    } else {
      auto reduce = builder.create<AllReduceOp>(
          grad.getLoc(), inputGrad.getType(), ReductionKind::sum, inputGrad, group,
          CollectiveAlgorithmAttr(), 1, ScheduleAttr(), IntegerAttr(), false, SyncSchemeAttr());
      replaceAfter(inputGrad, reduce, CollectiveRole::tensor_parallel);
    }
    return success();
  }

  /// Input features split: the weight shards along its input dimension and the
  /// partial outputs are summed. The sum comes right after the GEMM, before a
  /// following bias Add, so that the (replicated) bias is added once; a Gemm's
  /// fused bias is inside the partial outputs (each rank adding bias / tp).
  LogicalResult rowParallel(WeightGemm gemm) {
    shardParam(gemm.weight, ShardKind::row, gemm.inDim, gemm.weightTranspose);
    divideGemm(gemm, /*withBias=*/false);
    Value output = gemm.op->getResult(0);
    builder.setInsertionPointAfter(gemm.op);
    if (!sequence) {
      auto reduce = builder.create<AllReduceOp>(
          gemm.op.getLoc(), output.getType(), ReductionKind::sum, output, group,
          CollectiveAlgorithmAttr(), 1, ScheduleAttr(), IntegerAttr(), false, SyncSchemeAttr());
      replaceAfter(output, reduce, CollectiveRole::tensor_parallel);
      return success();
    }
    auto type = cast<RankedTensorType>(output.getType());
    FailureOr<int64_t> dim = sequenceDim(type, gemm.op);
    if (failed(dim))
      return failure();
    auto scatter = builder.create<ReduceScatterOp>(
        gemm.op.getLoc(), detail::shardedType(type, *dim, degree), ReductionKind::sum, output,
        group, CollectiveAlgorithmAttr(), 1, ScheduleAttr(), IntegerAttr(), false, SyncSchemeAttr());
    replaceAfter(output, scatter, CollectiveRole::sequence_parallel);
    // Backward, the output gradient arrives as a sequence shard and is gathered.
    ComputeOp grad = gradOps.lookup(gemm.op);
    if (!grad || grad.getInputs().empty())
      return success();
    Value outputGrad = grad.getInputs()[0];
    outputGrad.setType(
        detail::shardedType(cast<RankedTensorType>(outputGrad.getType()), *dim, degree));
    builder.setInsertionPoint(grad);
    auto gather = builder.create<AllGatherOp>(grad.getLoc(), type, outputGrad, false, group,
                                              CollectiveAlgorithmAttr(), 1, ScheduleAttr(),
                                              IntegerAttr(), false, SyncSchemeAttr());
    detail::setRole(gather, CollectiveRole::sequence_parallel);
    grad->setOperand(0, gather.getResult());
    return success();
  }

  /// Sequence parallelism: the column-parallel GEMM's input is a sequence shard
  /// (so typed) and is gathered before the GEMM; its backward op reads the
  /// gathered activation too. One gather serves the GEMMs sharing an input.
  LogicalResult gatherInput(WeightGemm gemm, ComputeOp grad) {
    Value input = gemm.op.getInputs()[0];
    Value gathered = gatheredInputs.lookup(input);
    if (!gathered) {
      // The shard is typed where it is produced, which a function argument is not.
      if (isa<BlockArgument>(input))
        return gemm.op.emitError("sequence parallelism: the input of ")
               << gemm.nodeName() << " is a function argument, not a sequence shard";
      auto type = cast<RankedTensorType>(input.getType());
      FailureOr<int64_t> dim = sequenceDim(type, gemm.op);
      if (failed(dim))
        return failure();
      input.setType(detail::shardedType(type, *dim, degree));
      builder.setInsertionPoint(gemm.op);
      auto gather = builder.create<AllGatherOp>(gemm.op.getLoc(), type, input, false, group,
                                                CollectiveAlgorithmAttr(), 1, ScheduleAttr(),
                                                IntegerAttr(), false, SyncSchemeAttr());
      detail::setRole(gather, CollectiveRole::sequence_parallel);
      gathered = gather.getResult();
      gatheredInputs[input] = gathered;
    }
    gemm.op->replaceUsesOfWith(input, gathered);
    if (grad)
      grad->replaceUsesOfWith(input, gathered);
    return success();
  }

  /// Sets `param`'s type to its shard along `dim`, with its gradient, the
  /// backward result producing that gradient and a forward weight Transpose.
  void shardParam(ParamOp param, ShardKind kind, int64_t dim, ComputeOp transpose) {
    RankedTensorType full = param.getType();
    RankedTensorType shard = detail::shardedType(full, dim, degree);
    param.setShardAttr(ShardAttr::get(context, kind, degree, dim));
    param.getResult().setType(shard);
    RankedTensorType transposedShard;
    if (transpose) {
      transposedShard =
          RankedTensorType::get({shard.getDimSize(1), shard.getDimSize(0)}, shard.getElementType());
      transpose->getResult(0).setType(transposedShard);
    }
    for (Operation *user : param->getUsers()) {
      auto gradient = dyn_cast<GradientOp>(user);
      if (!gradient || gradient.getParam() != param.getResult())
        continue;
      gradient.getResult().setType(shard);
      Value value = gradient.getValue();
      value.setType(shard);
      // Through a transposed weight, the GEMM's gradient of the Transpose's
      // output reaches the parameter through the Transpose's backward op.
      auto transposeGrad = value.getDefiningOp<ComputeOp>();
      if (transpose && transposeGrad && transposeGrad.getNode() == transpose.getNode() &&
          transposeGrad.getInputs().size() == 1)
        transposeGrad.getInputs()[0].setType(transposedShard);
    }
  }

  void divideGemm(WeightGemm gemm, bool withBias) {
    divideNode(gemm.op);
    if (gemm.weightTranspose)
      divideNode(gemm.weightTranspose);
    if (withBias && gemm.biasAdd)
      divideNode(gemm.biasAdd);
  }

  /// Divides the work of a forward op and of its backward ops by tp, once.
  void divideNode(ComputeOp forward) {
    SmallVector<ComputeOp, 3> ops{forward};
    if (std::optional<StringRef> node = forward.getNode())
      llvm::append_range(ops, backward.lookup(*node));
    for (ComputeOp op : ops) {
      if (!divided.insert(op).second)
        continue;
      op.setFlopsAttr(builder.getI64IntegerAttr(op.getFlopsAttr().getInt() / degree));
      op.setBytesAttr(builder.getI64IntegerAttr(op.getBytesAttr().getInt() / degree));
    }
  }

  /// The backward op of a forward GEMM (`<op_type>Grad` of its node), or null.
  ComputeOp findGradient(ComputeOp forward) {
    std::optional<StringRef> node = forward.getNode();
    if (!node)
      return nullptr;
    std::string gradType = (forward.getOpType() + "Grad").str();
    for (ComputeOp op : backward.lookup(*node))
      if (op.getOpType() == gradType && op->getNumResults() &&
          op->getResult(0).getType() == forward.getInputs()[0].getType())
        return op;
    return nullptr;
  }

  /// The sequence dimension of an activation: the first one of the model's
  /// sequence length ([batch, seq, hidden] or [seq, batch, hidden]), else the
  /// tokens of a [tokens, hidden] activation.
  FailureOr<int64_t> sequenceDim(RankedTensorType type, ComputeOp at) {
    const int64_t seq = structure.shape.seq;
    int64_t dim = -1;
    for (int64_t d = 0; d + 1 < type.getRank() && dim < 0; ++d)
      if (type.getDimSize(d) == seq)
        dim = d;
    if (dim < 0 && type.getRank() == 2 && type.getDimSize(0) % seq == 0)
      dim = 0;
    if (dim < 0 || type.getDimSize(dim) % degree != 0)
      return at.emitError("sequence parallelism: tp = ")
             << degree << " does not divide the sequence dimension of " << type << " (seq " << seq
             << ")";
    return dim;
  }

  /// Marks `collective` and makes every other use of `value` read its result.
  void replaceAfter(Value value, Operation *collective, CollectiveRole role) {
    detail::setRole(collective, role);
    value.replaceAllUsesExcept(collective->getResult(0), collective);
  }

  TransformerStructure &structure;
  const int64_t degree;
  const bool sequence;
  MLIRContext *context;
  OpBuilder builder;
  ProcessGroupAttr group;
  llvm::StringMap<SmallVector<ComputeOp, 2>> backward;
  /// The function's ops as imported, and each one's index among them.
  DenseMap<Operation *, size_t> position;
  std::vector<Operation *> inOrder;
  llvm::SmallPtrSet<Operation *, 32> divided;
  DenseMap<Value, Value> gatheredInputs;
  DenseMap<Operation *, ComputeOp> gradOps;  // forward weight GEMM -> its backward op
};

struct PartitionTensorParallelPass
    : impl::PartitionTensorParallelBase<PartitionTensorParallelPass> {
  using PartitionTensorParallelBase::PartitionTensorParallelBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (detail::hasGradientSync(module)) {
      module.emitError("zen-partition-tensor-parallel rewrites the model before gradient "
                       "synchronisation: run it before zen-autotune / zen-insert-grad-sync");
      return signalPassFailure();
    }
    ParallelAttr recorded = detail::parallelOf(module);
    const int64_t degree = tp ? tp : recorded.getTp();
    const bool sequence = sequenceParallel || recorded.getSequenceParallel();
    if (degree < 1) {
      module.emitError("tp must be at least 1, got ") << degree;
      return signalPassFailure();
    }
    std::string whyNot;
    std::optional<TransformerStructure> structure = analyzeTransformer(module, &whyNot);
    if (!structure) {
      module.emitError("tensor parallelism needs a recognised transformer: ") << whyNot;
      return signalPassFailure();
    }
    const cost::TransformerShape &shape = structure->shape;
    for (auto [name, size] :
         {std::pair{"heads", shape.heads}, {"key/value heads", shape.keyValueHeads()},
          {"hidden", shape.hidden}, {"ffn", shape.ffn}})
      if (size % degree != 0) {
        module.emitError("tp = ") << degree << " does not divide " << name << " (" << size << ")";
        return signalPassFailure();
      }
    if (degree > 1)
      if (std::optional<TensorParallelBlocker> blocker = tensorParallelBlocker(*structure, degree)) {
        blocker->op->emitError(blocker->reason);
        return signalPassFailure();
      }
    if (degree > 1 && failed(TensorParallelRewriter(*structure, degree, sequence).run()))
      return signalPassFailure();

    SmallVector<Attribute> replicated;
    for (const WeightGemm &gemm : structure->replicated) {
      gemm.op->emitRemark("weight GEMM '")
          << gemm.nodeName() << "' stays replicated: it is outside the transformer blocks";
      replicated.push_back(StringAttr::get(module.getContext(), gemm.nodeName()));
    }
    module->setAttr(ZenDialect::TpReplicatedAttrHelper::getNameStr(),
                    ArrayAttr::get(module.getContext(), replicated));
    detail::recordParallel(module, [&](cost::ParallelConfig &config) {
      config.tp = degree;
      config.sequenceParallel = sequence;
    });
  }
};

}  // namespace
}  // namespace zen
