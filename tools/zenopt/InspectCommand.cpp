//===- InspectCommand.cpp - zenopt inspect MODEL.onnx ----------------------===//
//
// Parameters, gradient tensors (in backward-ready order), FLOPs, op histogram and
// unsupported ops of a model, as a table or as one JSON object.
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "Command.h"
#include "HeadOverrides.h"

#include "zen/Codegen/ParallelPlan.h"
#include "zen/Codegen/Report.h"
#include "zen/Importer/ModelGraph.h"
#include "zen/Importer/ZenImporter.h"
#include "zen/Analysis/Transformer.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <map>

namespace {

using zen::importer::ModelGraph;

std::string shapeText(const std::vector<int64_t> &dims) {
  std::string text;
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i ? "x" : "") + std::to_string(dims[i]);
  return text.empty() ? "scalar" : text;
}

std::map<std::string, int64_t> opCounts(const ModelGraph &graph) {
  std::map<std::string, int64_t> counts;
  for (const auto &node : graph.nodes)
    ++counts[node.opType];
  return counts;
}

/// The `transformer` object of the transformer recognised in the imported IR
/// (with the --heads/--kv-heads overrides), null when none is.
nlohmann::ordered_json transformerOf(const ModelGraph &graph, const zen::cli::HeadOverrides &heads) {
  // Read, not planned: the importer's IR is verified where it is planned.
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      zen::importer::buildZenModule(context, graph, zen::importer::ModuleVerification::Deferred);
  heads.apply(*module);
  std::string whyNot;
  std::optional<zen::cost::TransformerShape> shape = zen::recognizeTransformer(*module, &whyNot);
  heads.checkTaken(shape.has_value(), graph.path, whyNot);
  return shape ? zen::codegen::transformerJson(*shape) : nullptr;
}

nlohmann::ordered_json toJson(const ModelGraph &graph, const nlohmann::ordered_json &transformer) {
  nlohmann::ordered_json json;
  json["model"] = graph.modelName;
  json["path"] = graph.path;
  json["model_hash"] = graph.modelHash;
  json["ir_version"] = graph.irVersion;
  json["opset"] = graph.opsetVersion;
  json["batch"] = graph.batch;
  json["batch_mode"] = zen::importer::batchModeName(graph.batchMode);
  json["export_batch"] = graph.exportBatch;
  json["nodes"] = graph.nodes.size();
  json["backward_steps"] = graph.backward.size();
  json["trainable_tensors"] = graph.parameters.size();
  json["trainable_elements"] = graph.trainableElements();
  json["trainable_bytes"] = graph.trainableBytes();
  json["forward_flops"] = graph.forwardFlops();
  json["backward_flops"] = graph.backwardFlops();
  json["flops_by_op_type"] = graph.flopsByOpType();
  json["op_counts"] = opCounts(graph);
  json["unsupported_ops"] = graph.unsupportedOps();
  if (!transformer.is_null())
    json["transformer"] = transformer;
  nlohmann::ordered_json gradients = nlohmann::ordered_json::array();
  for (int index : graph.parametersByReadyOrder()) {
    const auto &param = graph.parameters[index];
    gradients.push_back({{"name", param.name},
                         {"shape", graph.tensors[param.tensor].dims},
                         {"elements", param.elements},
                         {"bytes", param.bytes},
                         {"dtype", param.dtype},
                         {"ready_order", param.readyOrder}});
  }
  json["gradients"] = std::move(gradients);
  nlohmann::ordered_json constants = nlohmann::ordered_json::array();
  for (const auto &constant : graph.constants)
    constants.push_back({{"name", constant.name}, {"rule", constant.rule}});
  json["constants"] = std::move(constants);
  nlohmann::ordered_json sparse = nlohmann::ordered_json::array();
  for (const auto &table : graph.sparseGradients)
    sparse.push_back({{"name", graph.parameters[table.parameter].name},
                      {"rows", table.rows},
                      {"row_elements", table.rowElements},
                      {"lookups_per_sample", table.lookupsPerSample}});
  json["sparse_gradients"] = std::move(sparse);
  nlohmann::ordered_json dense = nlohmann::ordered_json::array();
  for (const auto &table : graph.denselyUsedTables)
    dense.push_back({{"name", graph.parameters[table.parameter].name},
                     {"dense_use", table.node},
                     {"op", table.opType}});
  json["gathered_dense_gradients"] = std::move(dense);
  return json;
}

std::string flopsText(int64_t flops) {
  return fmt::format("{:.3f} GFLOP", static_cast<double>(flops) / 1e9);
}

/// The row-sparse gradients, and the gathered tables whose gradient stays dense, with why.
void printSparseGradients(const ModelGraph &graph) {
  if (!graph.sparseGradients.empty()) {
    std::cout << fmt::format("\n{:<44} {:>10} {:>12} {:>18}\n", "row-sparse gradient", "rows",
                             "row elements", "lookups/sample");
    for (const auto &table : graph.sparseGradients)
      std::cout << fmt::format("{:<44} {:>10} {:>12} {:>18}\n",
                               graph.parameters[table.parameter].name, table.rows,
                               table.rowElements,
                               std::to_string(table.lookupsPerSample) +
                                   (table.sharedAcrossSamples ? " (shared)" : ""));
  }
  for (const auto &table : graph.denselyUsedTables)
    std::cout << fmt::format("\n{}: gathered by rows but also used densely by node '{}' ({}): "
                             "its gradient is dense",
                             graph.parameters[table.parameter].name, table.node, table.opType)
              << "\n";
}

void printTable(const ModelGraph &graph, const nlohmann::ordered_json &transformer) {
  std::cout << fmt::format("model      {} ({}, fnv1a64 {})\n", graph.modelName, graph.path,
                           graph.modelHash)
            << fmt::format("onnx       IR {}, opset {}\n", graph.irVersion, graph.opsetVersion)
            << fmt::format("batch      {} ({})\n", graph.batch,
                           zen::importer::batchModeName(graph.batchMode))
            << fmt::format("nodes      {} forward, {} backward steps\n", graph.nodes.size(),
                           graph.backward.size())
            << fmt::format("trainable  {} tensors, {} elements, {} bytes\n",
                           graph.parameters.size(), graph.trainableElements(),
                           graph.trainableBytes())
            << fmt::format("FLOPs      forward {}, backward {}\n", flopsText(graph.forwardFlops()),
                           flopsText(graph.backwardFlops()));
  if (!transformer.is_null())
    std::cout << "transformer " << zen::codegen::transformerText(transformer) << "\n";
  std::vector<std::string> unsupported = graph.unsupportedOps();
  std::cout << "unsupported " << (unsupported.empty() ? "none" : fmt::format("{}", fmt::join(unsupported, ", ")))
            << "\n\n";
  std::cout << fmt::format("{:<24} {:>7} {:>20}\n", "op type", "nodes", "forward FLOPs");
  auto counts = opCounts(graph);
  for (const auto &[op, flops] : graph.flopsByOpType())
    std::cout << fmt::format("{:<24} {:>7} {:>20}\n", op, counts[op], flops);
  std::cout << fmt::format("\n{:>5} {:<44} {:<18} {:>12} {:<5}\n", "ready", "gradient", "shape",
                           "elements", "dtype");
  for (int index : graph.parametersByReadyOrder()) {
    const auto &param = graph.parameters[index];
    std::cout << fmt::format("{:>5} {:<44} {:<18} {:>12} {:<5}\n", param.readyOrder, param.name,
                             shapeText(graph.tensors[param.tensor].dims), param.elements,
                             param.dtype);
  }
  printSparseGradients(graph);
  if (graph.constants.empty())
    return;
  std::cout << fmt::format("\n{:<50} {:<18} {}\n", "constant", "shape", "rule");
  for (const auto &constant : graph.constants)
    std::cout << fmt::format("{:<50} {:<18} {}\n", constant.name,
                             shapeText(graph.tensors[constant.tensor].dims), constant.rule);
}

int printImportedIr(const ModelGraph &graph) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = zen::importer::buildZenModule(context, graph);
  if (!module)
    throw zen::cli::CommandError(zen::cli::ExitSoftware,
                                 graph.path + ": the imported IR failed to verify");
  module->print(llvm::outs());
  llvm::outs() << "\n";
  llvm::outs().flush();
  return zen::cli::ExitSuccess;
}

zen::cli::CommandRegistration inspectCommand(
    "inspect", "Parameters, gradients, FLOPs and op histogram of an ONNX model",
    [](CLI::App &app) -> std::function<int()> {
      auto model = std::make_shared<std::string>();
      auto batch = std::make_shared<int64_t>(0);
      auto frozen = std::make_shared<std::vector<std::string>>();
      auto json = std::make_shared<bool>(false);
      auto mlir = std::make_shared<bool>(false);
      auto heads = std::make_shared<zen::cli::HeadOverrides>();
      app.add_option("model", *model, "ONNX model (.onnx, or .onnxtxt text syntax)")->required();
      app.add_option("--batch", *batch, "samples per GPU (default: the model's own)")
          ->check(zen::cli::wholeNumber(1));
      app.add_option("--frozen", *frozen,
                     "initializers that are not trained (buffers, frozen weights), comma-separated")
          ->delimiter(',');
      CLI::Option *jsonFlag = app.add_flag("--json", *json, "print one JSON object");
      app.add_flag("--mlir", *mlir, "print the imported zen IR (before any planning)")
          ->excludes(jsonFlag);
      heads->addOptions(app);
      return [model, batch, frozen, json, mlir, heads]() {
        heads->check();
        zen::importer::ImportOptions options;
        if (*batch > 0)
          options.batch = *batch;
        options.frozen.insert(frozen->begin(), frozen->end());
        ModelGraph graph;
        try {
          graph = zen::importer::importModel(*model, options);
        } catch (const zen::importer::ImportError &error) {
          throw zen::cli::CommandError(zen::cli::exitCodeOf(error.kind), error.what());
        }
        for (const std::string &warning : graph.warnings)
          std::cerr << "zenopt: " << warning << "\n";
        if (*mlir)
          return printImportedIr(graph);
        const nlohmann::ordered_json transformer = transformerOf(graph, *heads);
        if (*json)
          std::cout << toJson(graph, transformer).dump(2) << "\n";
        else
          printTable(graph, transformer);
        return static_cast<int>(zen::cli::ExitSuccess);
      };
    });

} // namespace
