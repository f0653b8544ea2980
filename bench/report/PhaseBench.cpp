//===- PhaseBench.cpp - wall time of each phase of `zenopt MODEL.onnx` ----===//
//
//   zen-phase-bench [--cluster NAME|FILE] [--compressor LIST] MODEL.onnx...
//                   [--benchmark_* flags]
//
// For every model, times the phases the default zenopt command runs, in process,
// so process start-up and the loading of shared libraries are not counted:
//   Import/<model>   read + parse + shape inference + costs + backward (importModel)
//   BuildIR/<model>  ModelGraph -> verified zen module (buildZenModule; zenopt verifies
//                    it on a second thread while zen-autotune searches)
//   Plan/<model>     the zen-autotune pass on a freshly built module
//   Codegen/<model>  planned module -> plan (emitPlan)
//   WritePlan/<model> plan -> plan JSON text (writePlan; zenopt does it for -o only)
// As zenopt runs them: contexts without threading, no verifier after the pass.
// The label of Plan/<model> carries the gradient tensor count, so a driver can
// fit planning time against tensors. bench/run uses it for RESULTS.md.
//
//===----------------------------------------------------------------------===//
#include "ExitCodes.h"
#include "zen/Codegen/PlanEmitter.h"
#include "zen/CostModel/Cluster.h"
#include "zen/Importer/ModelGraph.h"
#include "zen/Importer/ZenImporter.h"
#include "zen/Passes/Passes.h"
#include "zenrt/Plan.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

struct Settings {
  std::string cluster = zen::cost::defaultPresetName();
  std::string compressor;
};

/// One model, imported once up front; every phase benchmark starts from its own copy.
struct ModelCase {
  std::string path;
  zen::importer::ModelGraph graph;
};

std::string stem(const std::string &path) {
  size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = name.rfind(".onnx");
  return dot == std::string::npos ? name : name.substr(0, dot);
}

/// SkipWithError takes a C string; keep each message alive until the reports are written.
void skipWithError(benchmark::State &state, std::string message) {
  static std::vector<std::unique_ptr<std::string>> messages;
  messages.push_back(std::make_unique<std::string>(std::move(message)));
  state.SkipWithError(messages.back()->c_str());
}

/// Runs zen-autotune on `module`; false (with the reason in `state`) on failure.
bool plan(mlir::MLIRContext &context, mlir::ModuleOp module, const Settings &settings,
          benchmark::State &state) {
  zen::AutotuneOptions options;
  options.cluster = settings.cluster;
  options.compressor = settings.compressor;
  mlir::PassManager pipeline(&context);
  pipeline.enableVerifier(false);
  pipeline.addPass(zen::createAutotune(options));
  if (mlir::failed(pipeline.run(module))) {
    state.SkipWithError("zen-autotune failed");
    return false;
  }
  return true;
}

/// The plan of the planned `module`; none (with the reason in `state`) on failure.
std::optional<zenrt::Plan> emit(mlir::ModuleOp module, const zen::cost::CostModel &costModel,
                                const Settings &settings, benchmark::State &state) {
  mlir::FailureOr<zenrt::Plan> planned =
      zen::codegen::emitPlan(module, costModel, settings.compressor);
  if (mlir::failed(planned)) {
    state.SkipWithError("emitPlan failed");
    return std::nullopt;
  }
  return std::move(*planned);
}

void registerModel(const std::shared_ptr<const ModelCase> &model, const Settings &settings,
                   const std::shared_ptr<const zen::cost::CostModel> &costModel) {
  const std::string name = stem(model->path);

  benchmark::RegisterBenchmark(("Import/" + name).c_str(), [model](benchmark::State &state) {
    for (auto _ : state)
      benchmark::DoNotOptimize(zen::importer::importModel(model->path));
  })->Unit(benchmark::kMillisecond)->UseRealTime();

  benchmark::RegisterBenchmark(("BuildIR/" + name).c_str(), [model](benchmark::State &state) {
    for (auto _ : state) {
      mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
      auto module = zen::importer::buildZenModule(context, model->graph);
      if (!module)
        state.SkipWithError("the imported IR failed to verify");
      benchmark::DoNotOptimize(module);
    }
  })->Unit(benchmark::kMillisecond)->UseRealTime();

  benchmark::RegisterBenchmark(("Plan/" + name).c_str(), [model, settings](benchmark::State &state) {
    for (auto _ : state) {
      state.PauseTiming();
      auto context =
          std::make_unique<mlir::MLIRContext>(mlir::MLIRContext::Threading::DISABLED);
      auto module = zen::importer::buildZenModule(*context, model->graph);
      state.ResumeTiming();
      bool planned = module && plan(*context, *module, settings, state);
      // Tearing the module down is not planning (zenopt does it once, at exit).
      state.PauseTiming();
      module = nullptr;
      context.reset();
      state.ResumeTiming();
      if (!planned)
        break;
    }
    state.SetLabel("tensors=" + std::to_string(model->graph.parameters.size()));
  })->Unit(benchmark::kMillisecond)->UseRealTime();

  benchmark::RegisterBenchmark(
      ("Codegen/" + name).c_str(), [model, settings, costModel](benchmark::State &state) {
        mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
        auto module = zen::importer::buildZenModule(context, model->graph);
        if (!module || !plan(context, *module, settings, state))
          return;
        for (auto _ : state)
          if (!emit(*module, *costModel, settings, state))
            break;
      })->Unit(benchmark::kMillisecond)->UseRealTime();

  benchmark::RegisterBenchmark(
      ("WritePlan/" + name).c_str(), [model, settings, costModel](benchmark::State &state) {
        mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
        auto module = zen::importer::buildZenModule(context, model->graph);
        std::optional<zenrt::Plan> planned;
        if (!module || !plan(context, *module, settings, state) ||
            !(planned = emit(*module, *costModel, settings, state)))
          return;
        for (auto _ : state) {
          try {
            benchmark::DoNotOptimize(zenrt::writePlan(*planned));
          } catch (const zenrt::PlanError &error) {
            skipWithError(state, std::string("writePlan: ") + error.what());
            break;
          }
        }
      })->Unit(benchmark::kMillisecond)->UseRealTime();
}

int usage(const char *program) {
  std::fprintf(stderr,
               "usage: %s [--cluster NAME|FILE] [--compressor LIST] MODEL.onnx... "
               "[--benchmark_* flags]\n",
               program);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);  // removes the --benchmark_* flags it knows
  Settings settings;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "--cluster" || arg == "--compressor") && i + 1 < argc)
      (arg == "--cluster" ? settings.cluster : settings.compressor) = argv[++i];
    else if (arg.empty() || arg[0] == '-')
      return usage(argv[0]);
    else
      paths.push_back(arg);
  }
  if (paths.empty())
    return usage(argv[0]);

  std::shared_ptr<const zen::cost::CostModel> costModel;
  try {
    costModel = std::make_shared<zen::cost::CostModel>(zen::cost::loadCluster(settings.cluster));
  } catch (const zen::cost::ClusterError &error) {
    std::fprintf(stderr, "zen-phase-bench: %s\n", error.what());
    return zen::cli::exitCodeOf(error.kind);
  }
  for (const std::string &path : paths) {
    auto model = std::make_shared<ModelCase>();
    model->path = path;
    try {
      model->graph = zen::importer::importModel(path);
    } catch (const zen::importer::ImportError &error) {
      std::fprintf(stderr, "zen-phase-bench: %s\n", error.what());
      return zen::cli::exitCodeOf(error.kind);
    }
    registerModel(model, settings, costModel);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
