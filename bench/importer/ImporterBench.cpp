//===- ImporterBench.cpp - import time of the shared models ---------------===//
//
// Target: importing gpt2_small (~1500 nodes) takes well under 100 ms. Measures the full
// import (read, parse, checks, strict shape inference, costs, backward derivation) and,
// separately, building the zen IR from the ModelGraph.
//
//===----------------------------------------------------------------------===//
#include "zen/Importer/ModelGraph.h"
#include "zen/Importer/ZenImporter.h"

#include <benchmark/benchmark.h>

#include <string>

namespace {

std::string modelPath(const std::string &name) {
  return std::string(ZEN_SOURCE_DIR) + "/examples/models/" + name + ".onnx";
}

void BM_ImportModel(benchmark::State &state, const std::string &name) {
  const std::string path = modelPath(name);
  size_t nodes = 0;
  for (auto _ : state) {
    zen::importer::ModelGraph graph = zen::importer::importModel(path);
    nodes = graph.nodes.size();
    benchmark::DoNotOptimize(graph);
  }
  state.counters["nodes"] = static_cast<double>(nodes);
}

void BM_BuildZenModule(benchmark::State &state, const std::string &name) {
  zen::importer::ModelGraph graph = zen::importer::importModel(modelPath(name));
  for (auto _ : state) {
    mlir::MLIRContext context;
    auto module = zen::importer::buildZenModule(context, graph);
    if (!module)
      state.SkipWithError("the IR failed to verify");
    benchmark::DoNotOptimize(module);
  }
}

BENCHMARK_CAPTURE(BM_ImportModel, gpt2_small, std::string("gpt2_small"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ImportModel, bert_base_encoder, std::string("bert_base_encoder"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ImportModel, resnet50, std::string("resnet50"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ImportModel, vgg16, std::string("vgg16"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildZenModule, gpt2_small, std::string("gpt2_small"))->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
