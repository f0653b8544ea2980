//===- BuildZenModule.cpp - ModelGraph to zen IR --------------------------===//
#include "zen/Importer/ZenImporter.h"

#include "zen/Dialect/ZenDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"

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
        backwardPhase(PhaseAttr::get(&context, Phase::backward)) {}

  mlir::OwningOpRef<mlir::ModuleOp> build() {
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
    for (const Node &node : graph.nodes)
      emitForward(node);
    gradients.resize(graph.backward.size());
    for (size_t s = 0; s < graph.backward.size(); ++s)
      emitBackward(graph.backward[s], s);
    builder.create<mlir::func::ReturnOp>(loc);

    if (mlir::failed(mlir::verify(*module)))
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

  /// Sets the properties directly: the generic builder's attribute list would be
  /// sorted into a uniqued dictionary per op only to be converted back.
  ComputeOp createCompute(llvm::StringRef opType, PhaseAttr phase, mlir::ValueRange operands,
                          mlir::TypeRange results, int64_t flops, int64_t bytes,
                          llvm::StringRef node) {
    return builder.create<ComputeOp>(
        loc, results, builder.getStringAttr(opType), phase, operands,
        builder.getI64IntegerAttr(flops), builder.getI64IntegerAttr(bytes),
        node.empty() ? mlir::StringAttr() : builder.getStringAttr(node), mlir::IntegerAttr());
  }

  void emitForward(const Node &node) {
    llvm::SmallVector<mlir::Value> operands;
    for (int input : node.inputs)
      if (input >= 0 && values[input])
        operands.push_back(values[input]);
    llvm::SmallVector<mlir::Type> results;
    for (int output : node.outputs)
      if (output >= 0)
        results.push_back(typeOf(output));
    ComputeOp op = createCompute(node.opType, forwardPhase, operands, results, node.flops,
                                 node.bytes, node.name);
    unsigned result = 0;
    for (int output : node.outputs)
      if (output >= 0)
        values[output] = op->getResult(result++);
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
    llvm::StringRef node;
    if (step.kind == BackwardStep::Kind::NodeGradient)
      node = graph.nodes[step.node].name;
    else if (step.kind == BackwardStep::Kind::Accumulate)
      node = graph.tensors[step.gradTensors.front()].name;
    ComputeOp op =
        createCompute(step.opType, backwardPhase, operands, results, step.flops, step.bytes, node);
    gradients[index].assign(op->result_begin(), op->result_end());
    for (int param : step.completedParameters) {
      const Parameter &parameter = graph.parameters[param];
      mlir::Value gradient = gradients[parameter.gradient.step][parameter.gradient.result];
      builder.create<GradientOp>(loc, gradient.getType(), values[parameter.tensor], gradient,
                                 builder.getI64IntegerAttr(parameter.readyOrder));
    }
  }

  mlir::MLIRContext &context;
  const ModelGraph &graph;
  mlir::OpBuilder builder;
  mlir::Location loc;
  PhaseAttr forwardPhase, backwardPhase; // every compute op carries one of the two
  std::vector<mlir::Type> types;
  std::vector<mlir::Value> values;
  std::vector<std::vector<mlir::Value>> gradients;
};

} // namespace

mlir::OwningOpRef<mlir::ModuleOp> buildZenModule(mlir::MLIRContext &context,
                                                 const ModelGraph &graph) {
  context.loadDialect<ZenDialect, mlir::func::FuncDialect>();
  return ModuleBuilder(context, graph).build();
}

} // namespace zen::importer
