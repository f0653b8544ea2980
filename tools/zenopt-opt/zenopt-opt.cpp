//===- zenopt-opt.cpp - mlir-opt style driver for the zen dialect ----------===//
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

#include "zen/Dialect/ZenDialect.h"
#ifdef ZEN_HAVE_PASSES
#include "zen/Passes/Passes.h"
#endif

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
#ifdef ZEN_HAVE_PASSES
  zen::registerZenPasses();
  zen::registerPlanPipeline();
#endif
  mlir::DialectRegistry registry;
  registry.insert<zen::ZenDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "zenopt-opt: zen dialect optimizer driver\n", registry));
}
