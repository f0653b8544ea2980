//===- PlanningFuzzer.cpp - fuzz target: planning itself ------------------===//
//
// Arbitrary bytes as the inputs of a planning run, not as a file: a built-in cluster with
// some of its rates, efficiencies, latencies and sizes replaced by arbitrary doubles
// (tiny, huge, subnormal) and profiled collective fits added (as `zenopt profile` writes
// them, with fuzzed rank counts, byte ranges and coefficients), written as JSON and read
// back by parseCluster so its validation applies; then either a data-parallel problem
// (segments and up to 300 gradients of any size) planned by the autotuner and a baseline
// with a fuzzed compressor set (beside up to two row-sparse tables under the sparse planner's
// schemes), or a transformer (dense or with Mixture-of-Experts blocks:
// experts, top-k, capacity, every k-th block, a forced ep) searched by searchParallel with
// fuzzed forced degrees, batches and schedule as the command line passes them.
// The expected answers to bad input: ClusterError(BadInput) for the cluster, a
// compressor list or baseline options refused with a message, a large-model request
// refused with a reason (result.invalid) or planned with nothing that fits, and
// zen::Error(BadInput / BadUsage). Every plan must validate, every prediction must be
// finite and non-negative. Anything else (another exception, a non-finite time, a
// sanitizer report, a timeout or an allocation past the memory limit) is a bug.
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/Cluster.h"
#include "zen/CostModel/CostModel.h"
#include "zen/CostModel/Transformer.h"
#include "zen/Planner/ParallelSearch.h"
#include "zen/Planner/Planning.h"
#include "zen/Planner/Sparse.h"
#include "zen/Vocabulary.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace {
using namespace zen;

// Sizes and search work within which one input plans in about a second under the
// sanitizers, which make planning 13-20 times slower than a Release build (a 300-gradient
// problem with three compressors took 20 s, 1.5 s in Release; a 128-block encoder-decoder
// searched on 16 GPUs 23 s, 1.7 s). Bigger problems take longer, not differently: the
// planner's work is linear in the gradients and the blocks, and the work bound only ends
// each local search sooner (AutotuneOptions::localSearchWork).
constexpr int64_t kMaxGradients = 64;
constexpr int64_t kMaxLayers = 16;
constexpr double kLocalSearchWork = 1e4;

[[noreturn]] void bug(const std::string &what) {
  std::fprintf(stderr, "planning fuzz target: %s\n", what.c_str());
  std::abort();
}

void expectTime(double us, const std::string &what) {
  if (!std::isfinite(us) || us < 0)
    bug(what + " is " + std::to_string(us) + " us");
}

/// Values the cluster loader's ranges must refuse or survive: its ends, zero, negatives,
/// the smallest subnormal, the largest double.
double edgeValue(FuzzedDataProvider &bytes) {
  const double edges[] = {0.0,   -1.0,  5e-324, 1e-300, 1e-6,  0.001, 0.01, 1.0,
                          10.0,  1e5,   1e6,    1e308,  std::numeric_limits<double>::max(),
                          std::numeric_limits<double>::min(), std::numeric_limits<double>::denorm_min()};
  return edges[bytes.ConsumeIntegralInRange<size_t>(0, std::size(edges) - 1)];
}

/// `original` replaced: by an edge value, scaled by a power of two (near it, or reaching
/// the subnormals and the largest doubles), or any double.
double fuzzedDouble(FuzzedDataProvider &bytes, double original) {
  switch (bytes.ConsumeIntegralInRange(0, 3)) {
  case 0:
    return edgeValue(bytes);
  case 1:
    return std::ldexp(original, bytes.ConsumeIntegralInRange(-20, 20));
  case 2:
    return std::ldexp(original, bytes.ConsumeIntegralInRange(-1100, 1100));
  default:
    return bytes.ConsumeFloatingPoint<double>();
  }
}

/// A preset with fuzzed fields, through the JSON reader; nullopt when it refuses them.
std::optional<cost::Cluster> fuzzedCluster(FuzzedDataProvider &bytes) {
  const std::vector<std::string> presets = cost::presetNames();
  cost::Cluster cluster =
      cost::loadCluster(presets[bytes.ConsumeIntegralInRange<size_t>(0, presets.size() - 1)]);
  if (bytes.ConsumeBool())
    cluster = cost::withNodes(cluster, bytes.ConsumeIntegralInRange<int64_t>(1, 16));
  cost::GpuSpec &gpu = cluster.gpu;
  double *fields[] = {&gpu.hbmBandwidthGBps,        &gpu.computeEfficiency,
                      &gpu.gemmEfficiency,          &gpu.memoryEfficiency,
                      &gpu.pcieBandwidthGBps,       &gpu.cpuCompressGBps,
                      &gpu.memoryGB,                &cluster.intraNode.bandwidthGBps,
                      &cluster.intraNode.latencyUs, &cluster.intraNode.efficiency,
                      &cluster.interNode.bandwidthGBps, &cluster.interNode.latencyUs,
                      &cluster.interNode.efficiency,    &cluster.overlapSlowdown};
  for (int overrides = bytes.ConsumeBool() ? 0 : bytes.ConsumeIntegralInRange(1, 3); overrides > 0;
       --overrides) {
    size_t field = bytes.ConsumeIntegralInRange<size_t>(0, std::size(fields) + 1);
    if (field < std::size(fields)) {
      *fields[field] = fuzzedDouble(bytes, *fields[field]);
    } else if (field == std::size(fields) && !gpu.peakTflops.empty()) {
      auto peak = std::next(gpu.peakTflops.begin(),
                            bytes.ConsumeIntegralInRange<size_t>(0, gpu.peakTflops.size() - 1));
      peak->second = fuzzedDouble(bytes, peak->second);
    } else {
      gpu.sms = bytes.ConsumeIntegralInRange<int64_t>(-1, 200000);
    }
  }
  // Profiled fits override the formulas for their kind and rank count inside their byte
  // range (zenopt profile); the planner must price with them whatever they say.
  for (int fits = bytes.ConsumeIntegralInRange(0, 3) == 0 ? bytes.ConsumeIntegralInRange(1, 4) : 0;
       fits > 0; --fits) {
    cost::ProfiledCollective fit;
    fit.kind = zen::vocab::kCollectiveKinds[bytes.ConsumeIntegralInRange<size_t>(
                                                0, std::size(zen::vocab::kCollectiveKinds) - 1)]
                   .value;
    fit.ranks = bytes.ConsumeBool() ? cluster.worldSize()
                                    : bytes.ConsumeIntegralInRange<int64_t>(1, 1024);
    fit.minBytes = fuzzedDouble(bytes, 1024);
    fit.maxBytes = fuzzedDouble(bytes, 1 << 30);
    fit.alphaUs = fuzzedDouble(bytes, 10);
    fit.betaUsPerByte = fuzzedDouble(bytes, 1e-5);
    fit.rSquared = fuzzedDouble(bytes, 0.99);
    fit.worstRelativeError = fuzzedDouble(bytes, 0.05);
    cluster.profiled.push_back(fit);
  }
  if (!cluster.profiled.empty())
    cluster.profiledBackend = bytes.ConsumeBool() ? "mpi" : "nccl";
  try {
    return cost::parseCluster(cost::writeCluster(cluster), "fuzz.json");
  } catch (const cost::ClusterError &error) {
    if (error.kind != ErrorKind::BadInput)
      bug("parseCluster failed with error kind " + std::to_string(static_cast<int>(error.kind)));
    return std::nullopt;
  }
}

/// A count from 1 to `limit`, as likely of any bit length: small counts as often as large.
int64_t fuzzedCount(FuzzedDataProvider &bytes, int64_t limit) {
  int limitBits = 0;  // floor(log2(limit))
  while (limitBits < 62 && (int64_t{2} << limitBits) <= limit)
    ++limitBits;
  const int64_t low = int64_t{1} << bytes.ConsumeIntegralInRange(0, limitBits);
  return bytes.ConsumeIntegralInRange<int64_t>(low, std::min((low << 1) - 1, limit));
}

cost::DType fuzzedComputeDtype(FuzzedDataProvider &bytes) {
  const cost::DType dtypes[] = {cost::DType::F32, cost::DType::TF32, cost::DType::BF16,
                                cost::DType::F16};
  return dtypes[bytes.ConsumeIntegralInRange<size_t>(0, std::size(dtypes) - 1)];
}

/// A --compressor list in the planner's spellings, with fuzzed ratios, ranks and devices;
/// nullopt when parseCompressors refuses it.
std::optional<std::vector<cost::CompressionSpec>> fuzzedCompressors(FuzzedDataProvider &bytes) {
  const char *methods[] = {"none", "fp16", "bf16", "int8", "topk:", "randomk:", "sign", "powersgd:"};
  std::string text;
  for (int count = bytes.ConsumeIntegralInRange(0, 2); count > 0; --count) {
    std::string method = methods[bytes.ConsumeIntegralInRange<size_t>(0, std::size(methods) - 1)];
    if (method == "topk:" || method == "randomk:")
      method += std::to_string(bytes.ConsumeBool() ? bytes.ConsumeProbability<double>()
                                                   : edgeValue(bytes));
    else if (method == "powersgd:")
      method += std::to_string(bytes.ConsumeIntegralInRange<int64_t>(-1, 1 << 20));
    const char *devices[] = {"", "@gpu", "@cpu"};
    method += devices[bytes.ConsumeIntegralInRange<size_t>(0, 2)];
    text += (text.empty() ? "" : ",") + method;
  }
  std::string error;
  return plan::parseCompressors(text, error);
}

/// A data-parallel problem as the passes extract one: segments priced by the cluster,
/// gradients in ready order, each ready after a backward segment and first read by a
/// forward one.
plan::Problem fuzzedProblem(FuzzedDataProvider &bytes, const cost::CostModel &model) {
  plan::Problem problem;
  problem.computeDtype = fuzzedComputeDtype(bytes);
  problem.group = model.groupOf(
      bytes.ConsumeIntegralInRange<int64_t>(1, model.cluster().worldSize()));
  const int gradients = static_cast<int>(fuzzedCount(bytes, kMaxGradients));
  auto segments = [&](std::vector<plan::ComputeSegment> &into, char prefix) {
    for (int count = bytes.ConsumeIntegralInRange(1, gradients + 1), s = 0; s < count; ++s) {
      plan::ComputeSegment segment;
      segment.name = prefix + std::to_string(s);
      segment.flops = bytes.ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 50);
      segment.bytes = bytes.ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 40);
      segment.durationUs = model.computeUs(static_cast<double>(segment.flops),
                                           static_cast<double>(segment.bytes), problem.computeDtype);
      into.push_back(segment);
    }
  };
  segments(problem.forward, 'f');
  segments(problem.backward, 'b');
  int ready = -1;
  for (int g = 0; g < gradients; ++g) {
    plan::GradientTensor gradient;
    gradient.name = "p" + std::to_string(g);
    gradient.elements = fuzzedCount(bytes, int64_t{1} << 36);
    const int64_t elementBytes = bytes.ConsumeBool() ? 4 : 2;
    gradient.bytes = gradient.elements * elementBytes;
    ready = std::min<int>(ready + bytes.ConsumeIntegralInRange(0, 2),
                          static_cast<int>(problem.backward.size()) - 1);
    gradient.readyAfterSegment = ready;
    gradient.forwardSegment =
        bytes.ConsumeIntegralInRange(0, static_cast<int>(problem.forward.size()) - 1);
    gradient.optimizerUs = model.computeUs(
        static_cast<double>(plan::optimizerFlops(gradient.elements)),
        static_cast<double>(plan::optimizerBytes(gradient.elements, elementBytes)));
    problem.gradients.push_back(gradient);
  }
  // Row-sparse tables (embeddings), each with the scheme the sparse planner chooses for it,
  // synchronised on their own from a backward segment.
  std::vector<plan::SparseTensorRequest> tables;
  for (int64_t t = 0, count = bytes.ConsumeIntegralInRange(0, 2); t < count; ++t) {
    plan::SparseTensorRequest table;
    table.name = "e" + std::to_string(t);
    table.table = {fuzzedCount(bytes, int64_t{1} << 30), fuzzedCount(bytes, int64_t{1} << 12)};
    table.lookupsPerStep = fuzzedCount(bytes, int64_t{1} << 30);
    table.sharedRows = bytes.ConsumeBool();
    tables.push_back(table);
  }
  const plan::SparsePlan sparse = plan::planSparseTensors(tables, model, problem.group);
  for (const plan::SparseDecision &decision : sparse.tensors) {
    plan::SparseGradientTask task;
    task.name = decision.name;
    task.readyAfterSegment =
        bytes.ConsumeIntegralInRange(-1, static_cast<int>(problem.backward.size()) - 1);
    task.sync = std::make_shared<const cost::SparseSync>(
        cost::SparseSync{decision.chosen().scheme, decision.table, decision.statistics});
    problem.sparse.push_back(task);
  }
  return problem;
}

void expectValidPlan(const plan::Problem &problem, const plan::PlanChoice &choice,
                     const plan::Evaluation &evaluation, const std::string &what) {
  if (std::string why = plan::validateChoice(problem, choice); !why.empty())
    bug(what + " does not validate: " + why);
  if (!evaluation.sim.error.empty())
    bug(what + " cannot be simulated: " + evaluation.sim.error);
  expectTime(evaluation.iterationUs, what + "'s iteration");
  expectTime(evaluation.exposedCommUs, what + "'s exposed communication");
}

void planDataParallel(FuzzedDataProvider &bytes, const cost::CostModel &model) {
  std::optional<std::vector<cost::CompressionSpec>> compressors = fuzzedCompressors(bytes);
  if (!compressors)
    return;
  plan::Problem problem = fuzzedProblem(bytes, model);
  plan::AutotuneOptions options;
  options.compressors = *compressors;
  options.allowDecomposition = bytes.ConsumeBool();
  options.localSearchWork = kLocalSearchWork;
  options.baseline.horovodCycleUs = bytes.ConsumeBool() ? edgeValue(bytes) : 1000;
  options.baseline.horovodFusionBytes = bytes.ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 40);
  options.baseline.thresholdBytes = bytes.ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 40);
  if (!plan::checkBaselineOptions(options.baseline).empty())
    return;

  std::vector<std::string> strategies = plan::baselineNames();
  strategies.push_back("threshold");
  const std::string strategy =
      strategies[bytes.ConsumeIntegralInRange<size_t>(0, strategies.size() - 1)];
  std::string error;
  std::optional<plan::BaselineResult> baseline =
      plan::bestBaseline(strategy, problem, model, options.baseline, *compressors, error);
  if (!baseline)
    bug("baseline " + strategy + " failed: " + error);
  expectValidPlan(problem, baseline->choice, baseline->evaluation, "baseline " + strategy);

  plan::AutotuneResult result = plan::autotune(problem, model, options);
  expectValidPlan(problem, result.best, result.bestEval, "the autotuned plan");
  for (const auto *times : {&result.baselineUs, &result.baselineUncompressedUs})
    for (const auto &[name, us] : *times)
      expectTime(us, "baseline " + name);
  expectTime(result.lowerBoundUs, "the lower bound");
}

/// A transformer as the recognition reads one: heads dividing the hidden size, key/value
/// heads dividing the heads, parameters from Megatron's formulas.
cost::TransformerShape fuzzedTransformer(FuzzedDataProvider &bytes) {
  cost::TransformerShape shape;
  const char *families[] = {"gpt", "bert", "encoder-decoder"};
  shape.family = families[bytes.ConsumeIntegralInRange(0, 2)];
  shape.layers = fuzzedCount(bytes, kMaxLayers);
  shape.heads = fuzzedCount(bytes, 128);
  shape.hidden = shape.heads * fuzzedCount(bytes, 256);
  shape.kvHeads = shape.heads / bytes.ConsumeIntegralInRange<int64_t>(1, shape.heads);
  while (shape.heads % shape.kvHeads != 0)
    --shape.kvHeads;
  const char *mlps[] = {"gelu", "relu", "swiglu", "geglu"};
  shape.mlp = mlps[bytes.ConsumeIntegralInRange(0, 3)];
  shape.ffn = bytes.ConsumeBool() ? shape.hidden * bytes.ConsumeIntegralInRange<int64_t>(1, 8)
                                  : fuzzedCount(bytes, 1 << 17);
  shape.norm = bytes.ConsumeBool() ? "layernorm" : "rmsnorm";
  const char *positions[] = {"learned", "rotary", "none"};
  shape.positions = positions[bytes.ConsumeIntegralInRange(0, 2)];
  shape.tiedEmbeddings = bytes.ConsumeBool();
  shape.seq = fuzzedCount(bytes, 1 << 17);
  shape.vocab = bytes.ConsumeBool() ? 0 : fuzzedCount(bytes, 1 << 20);
  shape.modelBatch = fuzzedCount(bytes, 64);
  const double h = static_cast<double>(shape.hidden), f = static_cast<double>(shape.ffn);
  const double attention = 2 * h * h + 2 * h * h * shape.keyValueHeads() / shape.heads;
  shape.layerParams = attention + (shape.gatedMlp() ? 3 : 2) * h * f + 4 * h;
  if (shape.family == "encoder-decoder") {
    shape.crossAttentionBlocks = bytes.ConsumeIntegralInRange<int64_t>(0, shape.layers);
    shape.crossAttentionParams = attention + 2 * h;
  }
  shape.embeddingParams = static_cast<double>(shape.vocab) * h +
                          (shape.positions == "learned" ? static_cast<double>(shape.seq) * h : 0);
  shape.headParams = 2 * h + (shape.tiedEmbeddings ? 0 : static_cast<double>(shape.vocab) * h);
  if (bytes.ConsumeIntegralInRange(0, 2) == 0) {
    // Mixture-of-Experts blocks every k-th block, as the recognition reads them.
    cost::MoeBlocks moe;
    const int64_t every = bytes.ConsumeIntegralInRange<int64_t>(1, 4);
    for (int64_t block = every - 1; block < shape.layers; block += every)
      moe.blocks.push_back(block);
    if (moe.blocks.empty())
      moe.blocks.push_back(0);
    cost::MoeShape &layer = moe.layer;
    layer.tokens = shape.modelBatch * shape.seq;
    layer.hidden = shape.hidden;
    layer.ffn = fuzzedCount(bytes, 1 << 16);
    layer.fc1Rows = shape.gatedMlp() ? 2 * layer.ffn : layer.ffn;
    layer.experts = fuzzedCount(bytes, 512);
    layer.topK = bytes.ConsumeIntegralInRange<int64_t>(1, std::min<int64_t>(layer.experts, 8));
    // The recognition reads factor 1 (the cost model's imbalance prices the busiest
    // expert), or the rows a fused pattern fixes: no arbitrary factor reaches planning.
    layer.capacityFactor = 1.0;
    layer.biases = bytes.ConsumeBool();
    layer.capacityRows = bytes.ConsumeBool() ? 0 : fuzzedCount(bytes, int64_t{1} << 24);
    moe.expertParams = layer.expertParams();
    moe.blockParams = attention + 4 * h + h * static_cast<double>(layer.experts);  // router
    shape.moe = moe;
  }
  return shape;
}

/// A degree as the command line takes it (at least 1): a small power of two, small, or any
/// up to `limit`.
int64_t fuzzedDegree(FuzzedDataProvider &bytes, int64_t limit) {
  switch (bytes.ConsumeIntegralInRange(0, 2)) {
  case 0:
    return int64_t{1} << bytes.ConsumeIntegralInRange(0, 6);
  case 1:
    return bytes.ConsumeIntegralInRange<int64_t>(1, 64);
  default:
    return bytes.ConsumeIntegralInRange<int64_t>(1, limit);
  }
}

/// Whether the request fixes a field (the command line gives it): rarely, so that most
/// requests leave something to search.
bool forces(FuzzedDataProvider &bytes) { return bytes.ConsumeIntegralInRange(0, 3) == 0; }

void expectFinite(const plan::ParallelEvaluation &eval, const std::string &what) {
  expectTime(eval.iterationUs, what + "'s iteration");
  expectTime(eval.pipeline.totalUs, what + "'s pipeline");
  expectTime(eval.dataCommUs, what + "'s data-parallel communication");
  expectTime(eval.tensorCommUs, what + "'s tensor-parallel communication");
  expectTime(eval.optimizerUs, what + "'s optimizer step");
  if (!std::isfinite(eval.memory.perGpuBytes()) || !std::isfinite(eval.mfu) ||
      !std::isfinite(eval.tflopsPerGpu))
    bug(what + " predicts " + std::to_string(eval.memory.perGpuBytes()) + " bytes per GPU, " +
        std::to_string(eval.tflopsPerGpu) + " TFLOP/s, MFU " + std::to_string(eval.mfu));
}

void planLargeModel(FuzzedDataProvider &bytes, const cost::CostModel &model) {
  const cost::TransformerShape shape = fuzzedTransformer(bytes);
  constexpr int64_t anyPositive = std::numeric_limits<int64_t>::max();
  plan::ParallelRequest request;
  switch (bytes.ConsumeIntegralInRange(0, 3)) {
  case 0:
  case 1:
    request.setup.globalBatch = fuzzedCount(bytes, 4096);
    break;
  case 2:
    request.setup.globalBatch = bytes.ConsumeIntegralInRange<int64_t>(cost::kMaxGlobalBatch - 1,
                                                                      cost::kMaxGlobalBatch + 1);
    break;
  default:
    request.setup.globalBatch = bytes.ConsumeIntegral<int64_t>();
  }
  request.setup.optimizer = bytes.ConsumeBool() ? cost::Optimizer::Adam : cost::Optimizer::SGD;
  request.setup.computeDtype = fuzzedComputeDtype(bytes);
  if (forces(bytes)) request.tp = fuzzedDegree(bytes, anyPositive);
  if (forces(bytes)) request.pp = fuzzedDegree(bytes, anyPositive);
  if (forces(bytes)) request.dp = fuzzedDegree(bytes, anyPositive);
  if (forces(bytes)) request.microBatch = fuzzedDegree(bytes, cost::kMaxGlobalBatch);
  if (forces(bytes)) request.virtualStages = fuzzedDegree(bytes, 999999);  // --schedule's digits
  if (forces(bytes)) request.tpChunks = fuzzedDegree(bytes, 1 << 20);
  if (forces(bytes)) request.zero = bytes.ConsumeIntegralInRange(0, 3);
  if (shape.moe && forces(bytes)) request.ep = fuzzedDegree(bytes, anyPositive);
  if (forces(bytes)) request.sequenceParallel = bytes.ConsumeBool();
  if (forces(bytes)) {
    const cost::Recompute recomputes[] = {cost::Recompute::None, cost::Recompute::Selective,
                                          cost::Recompute::Full};
    request.recompute = recomputes[bytes.ConsumeIntegralInRange(0, 2)];
  }
  std::optional<std::vector<cost::CompressionSpec>> compressors = fuzzedCompressors(bytes);
  if (!compressors)
    return;
  request.gradientSync.compressors = *compressors;
  request.gradientSync.localSearchWork = kLocalSearchWork;

  plan::ParallelResult result;
  try {
    result = plan::searchParallel(shape, model, request);
  } catch (const Error &error) {
    if (error.kind != ErrorKind::BadInput && error.kind != ErrorKind::BadUsage)
      bug(std::string("searchParallel failed with error kind ") +
          std::to_string(static_cast<int>(error.kind)) + ": " + error.what());
    return;
  }
  if (!result.invalid.empty())
    return;
  if (result.best) {
    const int64_t gpus = model.cluster().worldSize();
    if (std::string why = cost::checkConfig(shape, result.best->config, request.setup, gpus);
        !why.empty())
      bug("the chosen configuration cannot run: " + why);
    if (result.best->config.gpus() != gpus)
      bug("the chosen configuration uses " + std::to_string(result.best->config.gpus()) +
          " of the " + std::to_string(gpus) + " GPUs");
    expectFinite(*result.best, "the chosen configuration");
  }
  for (const auto &[name, eval] : result.baselines)
    expectFinite(eval, "baseline " + name);
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider bytes(data, size);
  const bool largeModel = bytes.ConsumeBool();
  std::optional<cost::Cluster> cluster = fuzzedCluster(bytes);
  if (!cluster)
    return 0;
  const cost::CostModel model(*cluster);
  try {
    if (largeModel)
      planLargeModel(bytes, model);
    else
      planDataParallel(bytes, model);
  } catch (const std::exception &error) {
    bug(std::string("planning threw: ") + error.what());
  }
  return 0;
}
