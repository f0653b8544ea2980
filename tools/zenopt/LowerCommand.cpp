//===- LowerCommand.cpp - `zenopt lower MODULE.mlir` ----------------------===//
//
// Lowers a planned zen module (zenopt --emit mlir, or zenopt-opt's output) to
// its plan file, by the same lowering `zenopt MODEL.onnx -o` runs: the IR is
// the whole input, so a plan written this way is byte-identical to zenopt's.
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "ClusterOption.h"
#include "Command.h"
#include "Diagnostics.h"

#include "zen/Codegen/PlanEmitter.h"
#include "zen/CostModel/Cluster.h"
#include "zen/Dialect/ZenDialect.h"
#include "zen/Support/FileIO.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>

namespace zen::cli {
namespace {

/// The largest module read: 64 times the IR of a 100 000-tensor model.
constexpr uint64_t kMaxModuleBytes = uint64_t{1} << 30;

struct LowerOptions {
  std::string input;
  std::string output;
  std::string cluster;  // empty: the module's zen.cluster
  int64_t nodes = 0;    // 0: the module's zen.nodes, else the cluster's own
};

std::string moduleString(mlir::ModuleOp module, llvm::StringRef name) {
  if (auto attr = module->getAttrOfType<mlir::StringAttr>(name))
    return attr.str();
  return "";
}

int runLower(const LowerOptions &options) {
  zen::io::requireDistinctOutputs({{"-o", options.output}, {"standard output", "/dev/stdout"}});
  const std::string text = zen::io::readBounded(options.input, kMaxModuleBytes, "MLIR module");

  mlir::DialectRegistry registry;
  registry.insert<ZenDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry);
  std::string parseErrors;
  llvm::raw_string_ostream parseStream(parseErrors);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, options.input), llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module;
  {
    mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, parseStream);
    module = mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  }
  if (!module)
    throw CommandError(ExitDataError, options.input + ": not a valid zen module:\n" + parseErrors);

  const std::string clusterName =
      options.cluster.empty() ? moduleString(*module, ZenDialect::ClusterAttrHelper::getNameStr())
                              : options.cluster;
  if (clusterName.empty())
    throw CommandError(ExitUsage, options.input + ": the module names no cluster (zen.cluster); "
                                                  "give --cluster");
  int64_t nodes = options.nodes;
  if (nodes == 0)
    if (auto recorded = (*module)->getAttrOfType<mlir::IntegerAttr>(ZenDialect::NodesAttrHelper::getNameStr()))
      nodes = recorded.getInt();
  cost::CostModel model(loadClusterOption(clusterName, nodes));

  DiagnosticCollector diagnostics(context);
  mlir::FailureOr<zenrt::Plan> plan = codegen::emitModulePlan(*module, model);
  if (mlir::failed(plan))
    throw CommandError(ExitDataError, options.input + ": " + diagnostics.messages());

  const std::string planText = zenrt::writePlan(*plan);
  if (options.output.empty()) {
    std::cout << planText;
  } else {
    zen::io::OutputFiles outputs;
    outputs.add(options.output, planText);
    outputs.commit();
  }
  return ExitSuccess;
}

CommandRegistration registration(
    "lower", "Lower a planned zen module (zenopt --emit mlir) to its plan file", [](CLI::App &app) {
      auto options = std::make_shared<LowerOptions>();
      app.add_option("module", options->input, "MLIR file written by zenopt --emit mlir")->required();
      app.add_option("-o,--output", options->output, "Write the plan file here (default: standard output)");
      app.add_option("--cluster", options->cluster,
                     "Cluster preset name or JSON file (default: the module's zen.cluster)");
      app.add_option("--nodes", options->nodes, "Node count, overriding the module's and the cluster's")
          ->check(wholeNumber(1));
      return [options] {
        try {
          return runLower(*options);
        } catch (const zen::io::FileError &error) {
          return reportError(error.what(), exitCodeOf(error.kind));
        } catch (const zenrt::PlanError &error) {
          return reportError(error.what(), exitCodeOf(error.kind));
        }
      };
    });

} // namespace
} // namespace zen::cli
