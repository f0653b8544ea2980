//===- PlanCommand.cpp - zenopt MODEL.onnx (the default command) -----------===//
#include "Command.h"

#include "zen/Importer/ZenImporter.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>

namespace {

zen::cli::CommandRegistration planCommand(
    "", "Plan the communication of MODEL.onnx",
    [](CLI::App &app) -> std::function<int()> {
      auto model = std::make_shared<std::string>();
      auto batch = std::make_shared<int64_t>(0);
      auto emit = std::make_shared<std::string>("mlir");
      app.add_option("model", *model, "ONNX model (.onnx, or .onnxtxt text syntax)");
      app.add_option("--batch", *batch, "samples per GPU (default: the model's own)")
          ->check(CLI::PositiveNumber);
      app.add_option("--emit", *emit, "what to print: mlir (the imported zen IR)")
          ->check(CLI::IsMember({"mlir"}))
          ->capture_default_str();
      return [model, batch, emit]() {
        if (model->empty())
          throw zen::cli::CommandError(zen::cli::ExitUsage,
                                       "no model given; run zenopt --help for usage");
        zen::importer::ImportOptions options;
        if (*batch > 0)
          options.batch = *batch;
        zen::importer::ModelGraph graph;
        try {
          graph = zen::importer::importModel(*model, options);
        } catch (const zen::importer::ImportError &error) {
          throw zen::cli::CommandError(error.exitCode, error.what());
        }
        for (const std::string &warning : graph.warnings)
          std::cerr << "zenopt: " << warning << "\n";
        mlir::MLIRContext context;
        mlir::OwningOpRef<mlir::ModuleOp> module = zen::importer::buildZenModule(context, graph);
        if (!module)
          throw zen::cli::CommandError(zen::cli::ExitSoftware,
                                       *model + ": the imported IR failed to verify");
        module->print(llvm::outs());
        llvm::outs() << "\n";
        llvm::outs().flush();
        return static_cast<int>(zen::cli::ExitSuccess);
      };
    });

} // namespace
