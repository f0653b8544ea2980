//===- ZenImporter.h - ModelGraph to zen IR ---------------------*- C++ -*-===//
//
// The ZenImporter library: turns a ModelGraph (ModelGraph.h) into a module holding
// func.func @train_step with every parameter (zen.param), the forward and backward
// compute (zen.compute) and every parameter's gradient (zen.gradient, in ready order).
// No exception crosses this code: import errors are thrown by importModel before it.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_IMPORTER_ZENIMPORTER_H
#define ZEN_IMPORTER_ZENIMPORTER_H

#include "zen/Importer/ModelGraph.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace zen::importer {

/// Builds and verifies the module. Loads the zen and func dialects into `context`.
/// Returns null (after emitting the diagnostics to the context) if verification fails.
///
/// IR contract (passes rely on it):
///   module attributes {zen.model, zen.model_hash, zen.batch : i64, zen.batch_mode}
///   func.func @train_step(<graph inputs>) {
///     zen.param for each trainable parameter, in initializer order
///     zen.compute "<Op>" forward, one per ONNX node, in topological order
///     zen.compute "<Op>Grad" backward (and "LossGrad" first, "GradAccumulate" where a
///       parameter's gradient is summed), in backward order; results are the gradients of
///       the node's inputs that need one (parameter gradients have the parameter's type)
///     zen.gradient right after the step completing it; IR order == ready_order
///   }
/// Verify: the module is verified before it is returned (null if it fails). Deferred: the
/// caller verifies it (zenopt does, on another thread, beside planning).
enum class ModuleVerification { Verify, Deferred };

mlir::OwningOpRef<mlir::ModuleOp>
buildZenModule(mlir::MLIRContext &context, const ModelGraph &graph,
               ModuleVerification verification = ModuleVerification::Verify);

} // namespace zen::importer

#endif // ZEN_IMPORTER_ZENIMPORTER_H
