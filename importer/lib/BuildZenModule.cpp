//===- BuildZenModule.cpp - ModelGraph to zen IR --------------------------===//
#include "zen/Importer/ZenImporter.h"

#include "zen/Dialect/ZenDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"

namespace zen::importer {
namespace {

mlir::Type elementType(mlir::MLIRContext &context, const std::string &dtype) {
  mlir::Builder b(&context);
  if (dtype == "f32") return b.getF32Type();
  if (dtype == "f16") return b.getF16Type();
  if (dtype == "bf16") return b.getBF16Type();
  if (dtype == "f64") return b.getF64Type();
  if (dtype == "i64") return b.getI64Type();
  if (dtype == "i32") return b.getI32Type();
  if (dtype == "i16") return b.getI16Type();
  if (dtype == "i1") return b.getI1Type();
  if (dtype == "ui64") return mlir::IntegerType::get(&context, 64, mlir::IntegerType::Unsigned);
  if (dtype == "ui32") return mlir::IntegerType::get(&context, 32, mlir::IntegerType::Unsigned);
  if (dtype == "ui16") return mlir::IntegerType::get(&context, 16, mlir::IntegerType::Unsigned);
  if (dtype == "ui8") return mlir::IntegerType::get(&context, 8, mlir::IntegerType::Unsigned);
  if (dtype == "complex64") return mlir::ComplexType::get(b.getF32Type());
  if (dtype == "complex128") return mlir::ComplexType::get(b.getF64Type());
  // i8, and opaque element types (strings) as bytes.
  return b.getI8Type();
}

mlir::RankedTensorType tensorType(mlir::MLIRContext &context, const Tensor &tensor) {
  llvm::SmallVector<int64_t> shape;
  if (!tensor.rankKnown)
    shape.push_back(mlir::ShapedType::kDynamic);
  for (int64_t dim : tensor.dims)
    shape.push_back(dim < 0 ? mlir::ShapedType::kDynamic : dim);
  return mlir::RankedTensorType::get(shape, elementType(context, tensor.dtype));
}

class ModuleBuilder {
public:
  ModuleBuilder(mlir::MLIRContext &context, const ModelGraph &graph)
      : context(context), graph(graph), builder(&context),
        loc(mlir::FileLineColLoc::get(&context, graph.path, 0, 0)),
        forwardPhase(PhaseAttr::get(&context, Phase::forward)),
        backwardPhase(PhaseAttr::get(&context, Phase::backward)), workAttrs(&context) {}

  mlir::OwningOpRef<mlir::ModuleOp> build(ModuleVerification verification) {
    mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc);
    module->getOperation()->setAttr("zen.model", builder.getStringAttr(graph.modelName));
    module->getOperation()->setAttr("zen.model_hash", builder.getStringAttr(graph.modelHash));
    module->getOperation()->setAttr("zen.batch", builder.getI64IntegerAttr(graph.batch));
    module->getOperation()->setAttr("zen.batch_mode",
                                    builder.getStringAttr(batchModeName(graph.batchMode)));

    types.assign(graph.tensors.size(), mlir::Type());
    llvm::SmallVector<mlir::Type> argumentTypes;
    for (int input : graph.graphInputs)
      argumentTypes.push_back(typeOf(input));
    builder.setInsertionPointToEnd(module->getBody());
    auto function = builder.create<mlir::func::FuncOp>(
        loc, "train_step", builder.getFunctionType(argumentTypes, {}));
    mlir::Block *body = function.addEntryBlock();
    builder.setInsertionPointToEnd(body);

    values.assign(graph.tensors.size(), mlir::Value());
    for (size_t i = 0; i < graph.graphInputs.size(); ++i)
      values[graph.graphInputs[i]] = body->getArgument(i);
    for (const Parameter &param : graph.parameters)
      values[param.tensor] = builder.create<ParamOp>(loc, typeOf(param.tensor),
                                                     builder.getStringAttr(param.name));
    nodeNames.assign(graph.nodes.size(), mlir::StringAttr());
    for (size_t n = 0; n < graph.nodes.size(); ++n)
      emitForward(static_cast<int>(n));
    rowLookups.assign(graph.parameters.size(), 0);
    sharedRows.assign(graph.parameters.size(), false);
    for (const SparseGradient &sparse : graph.sparseGradients) {
      rowLookups[sparse.parameter] = sparse.lookupsPerStep(graph.batch);
      sharedRows[sparse.parameter] = sparse.sharedAcrossSamples;
    }
    gradients.resize(graph.backward.size());
    for (size_t s = 0; s < graph.backward.size(); ++s)
      emitBackward(graph.backward[s], s);
    builder.create<mlir::func::ReturnOp>(loc);

    if (verification == ModuleVerification::Verify && mlir::failed(mlir::verify(*module)))
      return nullptr;
    return module;
  }

private:
  /// A tensor's type is asked for by its producer, its consumers' gradients and its
  /// parameter: built and uniqued once.
  mlir::Type typeOf(int tensor) {
    mlir::Type &type = types[tensor];
    if (!type)
      type = tensorType(context, graph.tensors[tensor]);
    return type;
  }

  /// A handful of op types name every compute op: each is uniqued once.
  mlir::StringAttr opTypeAttr(llvm::StringRef opType) {
    mlir::StringAttr &attr = opTypes[opType];
    if (!attr)
      attr = builder.getStringAttr(opType);
    return attr;
  }

  /// A node's name labels its forward op and its gradient step: uniqued once.
  mlir::StringAttr nodeNameAttr(int node) {
    mlir::StringAttr &attr = nodeNames[node];
    if (!attr && !graph.nodes[node].name.empty())
      attr = builder.getStringAttr(graph.nodes[node].name);
    return attr;
  }

  /// Sets the properties directly: the generic builder's attribute list would be
  /// sorted into a uniqued dictionary per op only to be converted back.
  ComputeOp createCompute(llvm::StringRef opType, PhaseAttr phase, mlir::ValueRange operands,
                          mlir::TypeRange results, int64_t flops, int64_t bytes,
                          mlir::StringAttr node) {
    return builder.create<ComputeOp>(loc, results, opTypeAttr(opType), phase, operands,
                                     workAttrs.get(flops), workAttrs.get(bytes), node,
                                     mlir::IntegerAttr());
  }

  void emitForward(int nodeIndex) {
    const Node &node = graph.nodes[nodeIndex];
    if (node.moe && hasMoeOperands(node))
      return emitMoe(node, *node.moe);
    llvm::SmallVector<mlir::Value> operands;
    for (int input : node.inputs)
      if (input >= 0 && values[input])
        operands.push_back(values[input]);
    llvm::SmallVector<mlir::Type> results;
    for (int output : node.outputs)
      if (output >= 0)
        results.push_back(typeOf(output));
    ComputeOp op = createCompute(node.opType, forwardPhase, operands, results, node.flops,
                                 node.bytes, nodeNameAttr(nodeIndex));
    unsigned result = 0;
    for (int output : node.outputs)
      if (output >= 0)
        values[output] = op->getResult(result++);
  }

  /// The MoE ops need the input, the logits and every weight as values; a frozen
  /// initializer is none (it stays out of the IR), and such a layer stays one zen.compute.
  bool hasMoeOperands(const Node &node) const {
    for (size_t i : {0, 1, 2, 4})
      if (i >= node.inputs.size() || node.inputs[i] < 0 || !values[node.inputs[i]])
        return false;
    for (size_t i : {3, 5, 6, 7})
      if (i < node.inputs.size() && node.inputs[i] >= 0 && !values[node.inputs[i]])
        return false;
    return node.outputs.size() == 1 && node.outputs[0] >= 0;
  }

  /// An MoE layer as zen.moe_dispatch -> zen.moe_experts -> zen.moe_combine. The node's
  /// FLOPs (batch scale applied) are split in the proportions of the parts; bytes count what
  /// each part reads and writes, the dispatch buffers included.
  void emitMoe(const Node &node, const MoeLayer &layer) {
    auto operand = [&](size_t i) {
      return i < node.inputs.size() && node.inputs[i] >= 0 ? values[node.inputs[i]] : mlir::Value();
    };
    auto bytesOf = [&](size_t i) {
      return i < node.inputs.size() && node.inputs[i] >= 0 ? graph.tensors[node.inputs[i]].bytes
                                                           : int64_t{0};
    };
    const double scale = graph.batchMode == BatchMode::Scaled
                             ? static_cast<double>(graph.batch) / graph.exportBatch
                             : 1.0;
    mlir::Value input = operand(0);
    mlir::Type element = mlir::cast<mlir::RankedTensorType>(input.getType()).getElementType();
    auto dispatchedType =
        mlir::RankedTensorType::get({layer.experts, layer.capacity, layer.hidden}, element);
    auto gatesType = mlir::RankedTensorType::get({layer.tokens, layer.topK}, element);
    const double elementBytes = (element.getIntOrFloatBitWidth() + 7) / 8;
    auto activationBytes = [&](mlir::RankedTensorType type) {
      return static_cast<int64_t>(type.getNumElements() * elementBytes * scale + 0.5);
    };
    const int64_t dispatchedBytes = activationBytes(dispatchedType);
    const int64_t gatesBytes = activationBytes(gatesType);
    const int64_t output = graph.tensors[node.outputs[0]].bytes;

    const double parts[] = {static_cast<double>(layer.dispatchFlops()),
                            static_cast<double>(layer.expertFlops()),
                            static_cast<double>(layer.combineFlops())};
    const double total = parts[0] + parts[1] + parts[2];
    auto share = [&](int part) {
      return total > 0 ? static_cast<int64_t>(static_cast<double>(node.flops) * parts[part] / total)
                       : int64_t{0};
    };
    const int64_t dispatchFlops = share(0), combineFlops = share(2);
    const int64_t expertFlops = node.flops - dispatchFlops - combineFlops;

    auto i64 = [&](int64_t value) { return workAttrs.get(value); };
    mlir::StringAttr name = builder.getStringAttr(node.name);
    auto dispatch = builder.create<MoeDispatchOp>(
        loc, dispatchedType, gatesType, input, operand(1), i64(layer.topK), i64(dispatchFlops),
        i64(bytesOf(0) + bytesOf(1) + dispatchedBytes + gatesBytes), name,
        /*schedule=*/nullptr);
    // describeMoe admits only the enum's spellings.
    MoeActivation activation =
        symbolizeMoeActivation(layer.activation).value_or(MoeActivation::identity);
    auto experts = builder.create<MoeExpertsOp>(
        loc, dispatchedType, MoeActivationAttr::get(&context, activation), dispatch.getDispatched(),
        operand(2), operand(3), operand(4), operand(5), operand(6), operand(7), i64(expertFlops),
        i64(2 * dispatchedBytes + bytesOf(2) + bytesOf(3) + bytesOf(4) + bytesOf(5) + bytesOf(6) +
            bytesOf(7)),
        name,
        /*schedule=*/nullptr);
    auto combine = builder.create<MoeCombineOp>(loc, typeOf(node.outputs[0]), experts.getResult(),
                                                dispatch.getGates(), i64(combineFlops),
                                                i64(dispatchedBytes + gatesBytes + output), name,
                                                /*schedule=*/nullptr);
    values[node.outputs[0]] = combine.getResult();
  }

  void emitBackward(const BackwardStep &step, size_t index) {
    llvm::SmallVector<mlir::Value> operands;
    for (const GradValue &grad : step.incomingGrads)
      operands.push_back(gradients[grad.step][grad.result]);
    for (int saved : step.savedTensors)
      if (values[saved])
        operands.push_back(values[saved]);
    llvm::SmallVector<mlir::Type> results;
    for (int tensor : step.gradTensors)
      results.push_back(typeOf(tensor));
    mlir::StringAttr node;
    if (step.kind == BackwardStep::Kind::NodeGradient)
      node = nodeNameAttr(step.node);
    else if (step.kind == BackwardStep::Kind::Accumulate &&
             !graph.tensors[step.gradTensors.front()].name.empty())
      node = builder.getStringAttr(graph.tensors[step.gradTensors.front()].name);
    ComputeOp op =
        createCompute(step.opType, backwardPhase, operands, results, step.flops, step.bytes, node);
    gradients[index].assign(op->result_begin(), op->result_end());
    for (int param : step.completedParameters) {
      const Parameter &parameter = graph.parameters[param];
      mlir::Value gradient = gradients[parameter.gradient.step][parameter.gradient.result];
      auto op = builder.create<GradientOp>(loc, gradient.getType(), values[parameter.tensor],
                                           gradient, builder.getI64IntegerAttr(parameter.readyOrder));
      if (rowLookups[param] > 0)
        op.setRowLookupsAttr(builder.getI64IntegerAttr(rowLookups[param]));
      if (sharedRows[param])
        op.setSharedRows(true);
    }
  }

  mlir::MLIRContext &context;
  const ModelGraph &graph;
  mlir::OpBuilder builder;
  mlir::Location loc;
  PhaseAttr forwardPhase, backwardPhase; // every compute op carries one of the two
  /// Per parameter: rows a rank's step looks up when its gradient is row-sparse, else 0.
  std::vector<int64_t> rowLookups;
  /// Per parameter: every sample looks up the same rows (position ids).
  std::vector<bool> sharedRows;
  I64AttrCache workAttrs;                 // FLOP and byte counts
  std::vector<mlir::Type> types;
  llvm::StringMap<mlir::StringAttr> opTypes;
  std::vector<mlir::StringAttr> nodeNames; // by node index, built on first use
  std::vector<mlir::Value> values;
  std::vector<std::vector<mlir::Value>> gradients;
};

} // namespace

mlir::OwningOpRef<mlir::ModuleOp> buildZenModule(mlir::MLIRContext &context,
                                                 const ModelGraph &graph,
                                                 ModuleVerification verification) {
  context.loadDialect<ZenDialect, mlir::func::FuncDialect>();
  return ModuleBuilder(context, graph).build(verification);
}

} // namespace zen::importer
