//===- PlanCommand.cpp - zenopt MODEL.onnx (the default command) -----------===//
//
// Imports the model, plans its communication on a cluster (zen-autotune or a
// baseline strategy), lowers the result to a plan file, and reports it.
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "ClusterOption.h"
#include "Command.h"
#include "FastAllocator.h"
#include "Diagnostics.h"
#include "HeadOverrides.h"
#include "MeasuredCompute.h"

#include "zen/Codegen/ParallelPlan.h"
#include "zen/Codegen/PlanEmitter.h"
#include "zen/Codegen/PlanSimulation.h"
#include "zen/Codegen/Report.h"
#include "zen/Codegen/ServingPlan.h"
#include "zen/Codegen/SparsePlan.h"
#include "zen/CostModel/Sparse.h"
#include "zen/CostModel/Cluster.h"
#include "zen/Dialect/ZenDialect.h"
#include "zen/Importer/ZenImporter.h"
#include "zen/Analysis/IRPlan.h"
#include "zen/Passes/LargeModel.h"
#include "zen/Passes/Moe.h"
#include "zen/Passes/Passes.h"
#include "zen/Analysis/Transformer.h"
#include "zen/Planner/ParallelSearch.h"
#include "zen/Planner/Planning.h"
#include "zen/Planner/Serving.h"
#include "zen/Support/FileIO.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <limits>
#include <mutex>
#include <numeric>
#include <thread>
#include <unistd.h>

namespace zen::cli {
namespace {

struct PlanOptions {
  std::string model;
  std::string cluster = cost::defaultPresetName();
  int64_t nodes = 0;  // 0: the cluster's own
  int64_t batch = 0;
  std::vector<std::string> frozen;
  int64_t dp = 0;
  std::string strategy = "auto";
  std::vector<int64_t> buckets;
  double horovodCycleTimeMs = 1.0;
  int64_t horovodFusionThresholdMb = 128;
  std::string compressor;
  std::string precision = "fp32";
  bool precisionGiven = false;  // --precision was on the command line (serving defaults to bf16)
  /// --grad-accumulation-dtype: fp32, bf16 or fp16; empty: the frameworks' default.
  std::string gradAccumulationDtype;
  std::string output;
  std::string trace;
  std::string timelineSvg;
  std::string emit = "summary";
  bool json = false;
  bool quiet = false;
  // Large models (docs/design.md "Large models"): left out = searched.
  int64_t globalBatch = 0;
  int64_t microBatch = 0;
  int64_t tp = 0;
  int64_t pp = 0;
  int zero = -1;
  std::string recompute;
  bool sequenceParallel = false;
  bool noSequenceParallel = false;
  std::string schedule;
  std::string optimizer;
  int64_t tpChunks = 0;
  /// --attention: flash or unfused; empty: flash.
  std::string attention;
  /// --zero3-regather, --zero3-prefetch-depth: empty / 0 = the framework defaults.
  std::string zero3Regather;
  int64_t zero3PrefetchDepth = 0;
  // Mixture of Experts (docs/design.md "Mixture of Experts"): 0 = searched / not given.
  int64_t ep = 0;
  double moeImbalance = 0;
  /// Measured sparsity statistics (zenopt sparsity -o): FILE for every row-sparse gradient,
  /// PARAM=FILE for one.
  std::vector<std::string> sparsity;
  /// The step's compute as the job timed it (zenopt.torch writes it): FILE, or empty.
  std::string measuredCompute;
  HeadOverrides heads;
  // Inference serving (docs/design.md "Inference serving"): 0 / empty = the defaults.
  bool serve = false;
  int64_t promptTokens = 0;
  int64_t outputTokens = 0;
  double ttftMs = 0;
  double tpotMs = 0;
  int64_t maxBatch = 0;
  bool colocated = false;
  std::string kvDtype;

  bool servingFlags() const {
    return promptTokens || outputTokens || ttftMs > 0 || tpotMs > 0 || maxBatch || colocated ||
           !kvDtype.empty();
  }
  bool largeModelFlags() const {
    return globalBatch || microBatch || tp || pp || zero >= 0 || !recompute.empty() ||
           sequenceParallel || noSequenceParallel || !schedule.empty() || !optimizer.empty() ||
           tpChunks || !zero3Regather.empty() || zero3PrefetchDepth;
  }
};

/// Shows "planning ... N s" on stderr while planning runs longer than about a
/// second, only when stderr is a terminal; clears the line when done.
class ProgressLine {
public:
  ProgressLine(std::string what, bool enabled) : what_(std::move(what)) {
    if (enabled && ::isatty(STDERR_FILENO))
      thread_ = std::thread([this] { run(); });
  }
  ~ProgressLine() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable())
      thread_.join();
  }

private:
  void run() {
    auto start = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    bool shown = false;
    while (!wake_.wait_for(lock, std::chrono::milliseconds(shown ? 500 : 1000),
                           [this] { return done_; })) {
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cerr << "\rzenopt: " << what_ << " ... " << static_cast<int>(seconds) << " s" << std::flush;
      shown = true;
    }
    if (shown)
      std::cerr << "\r\033[K" << std::flush;
  }

  std::string what_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
};

/// Verifies the imported module on a second thread while planning reads it. Planning
/// reads the IR until its first rewrite, which waits for the verification
/// (plan::applyPlan through ZenDialect::awaitVerification); so does every other path
/// that rewrites or reports (requireVerified), and the destructor (the thread reads the
/// module).
/// Meanwhile the context uniques with locks; once the verification is awaited, without.
class BackgroundVerification {
public:
  BackgroundVerification(mlir::ModuleOp module, const std::string &modelPath,
                         const DiagnosticCollector &diagnostics)
      : context(*module.getContext()), dialect(*context.getLoadedDialect<ZenDialect>()),
        modelPath(modelPath), diagnostics(diagnostics) {
    // Reads compute the operation order lazily: once, here, not on two threads.
    module->walk([](mlir::Block *block) { block->recomputeOpOrder(); });
    context.enableMultithreading();
    verified = std::async(std::launch::async, [module] {
                 return mlir::succeeded(mlir::verify(module));
               }).share();
    // The first rewrite waits for the verification; from then on this thread alone
    // touches the context.
    dialect.setPendingVerification(verified, [&context = context] {
      context.disableMultithreading();
    });
  }
  ~BackgroundVerification() { verified.wait(); }
  BackgroundVerification(const BackgroundVerification &) = delete;
  BackgroundVerification &operator=(const BackgroundVerification &) = delete;

  /// Waits for the verification and throws its error if it failed; the context uniques
  /// without locks again.
  void requireVerified() {
    const bool ok = verified.get();
    dialect.awaitVerification(); // runs the constructor's disableMultithreading, if no pass did
    if (!ok)
      throw CommandError(ExitSoftware, modelPath + ": the imported IR failed to verify: " +
                                           diagnostics.messages());
  }

private:
  mlir::MLIRContext &context;
  ZenDialect &dialect;
  const std::string &modelPath;
  const DiagnosticCollector &diagnostics;
  std::shared_future<bool> verified;
};

/// `--strategy`'s choices, in zen/Strategy.h's order.
std::vector<std::string> commandLineStrategies() {
  std::vector<std::string> spellings;
  for (const vocab::StrategyTraits &traits : vocab::kStrategies)
    if (traits.onCommandLine)
      spellings.push_back(traits.spelling);
  return spellings;
}

/// --serve plans decoding: the training options have no meaning there, and the serving
/// options none without it.
void checkServingCommandLine(const PlanOptions &options) {
  if (!options.serve) {
    if (options.servingFlags())
      throw CommandError(ExitUsage, "--prompt-tokens, --output-tokens, --ttft-ms, --tpot-ms, "
                                    "--max-batch, --colocated and --kv-dtype need --serve");
    return;
  }
  const std::vector<std::pair<bool, const char *>> training = {
      {options.globalBatch || options.microBatch, "--global-batch/--micro-batch"},
      {options.zero >= 0, "--zero"},
      {!options.recompute.empty(), "--recompute"},
      {options.sequenceParallel || options.noSequenceParallel, "--sequence-parallel"},
      {!options.schedule.empty(), "--schedule"},
      {!options.optimizer.empty(), "--optimizer"},
      {options.tpChunks > 0, "--tp-chunks"},
      {!options.zero3Regather.empty() || options.zero3PrefetchDepth, "--zero3-regather/--zero3-prefetch-depth"},
      {options.dp > 0, "--dp"},
      {options.batch > 0, "--batch"},
      {options.strategy != "auto" || !options.buckets.empty(), "--strategy/--buckets"},
      {!options.compressor.empty(), "--compressor"},
      {!options.gradAccumulationDtype.empty(), "--grad-accumulation-dtype"},
      {!options.attention.empty(), "--attention"},
      {options.ep > 0 || options.moeImbalance > 0, "--ep/--moe-imbalance"},
      {!options.sparsity.empty(), "--sparsity"},
      {!options.measuredCompute.empty(), "--measured-compute"},
      {!options.frozen.empty(), "--frozen"},
      {!options.trace.empty() || !options.timelineSvg.empty(), "--trace/--timeline-svg"},
      {options.emit == "mlir", "--emit mlir"}};
  for (const auto &[given, flag] : training)
    if (given)
      throw CommandError(ExitUsage, std::string(flag) + " plans training; --serve plans inference");
  if (options.precision == "tf32")
    throw CommandError(ExitUsage, "--serve --precision tf32: serving runs fp32, bf16 or fp16 weights");
}

void checkCommandLine(const PlanOptions &options) {
  checkServingCommandLine(options);
  // 16-bit gradients are the compute precision's own: mixed precision's 16-bit format.
  if (!options.gradAccumulationDtype.empty() && options.gradAccumulationDtype != "fp32" &&
      options.gradAccumulationDtype != options.precision)
    throw CommandError(ExitUsage, "--grad-accumulation-dtype " + options.gradAccumulationDtype +
                                      ": 16-bit gradients need --precision " +
                                      options.gradAccumulationDtype + " (got " + options.precision +
                                      "); fp32 works with every precision");
  std::string error;
  if (!plan::parseCompressors(options.compressor, error))
    throw CommandError(ExitUsage, "--compressor: " + error);
  if (!options.schedule.empty() && !cost::parseSchedule(options.schedule))
    throw CommandError(ExitUsage, "--schedule " + options.schedule + ": expected 1f1b or interleaved:V (V >= 2)");
  if (!options.measuredCompute.empty() && options.largeModelFlags())
    throw CommandError(ExitUsage, "--measured-compute prices data-parallel plans: it cannot go with "
                                  "--tp/--pp/--zero/--global-batch and the other large-model options");
  if (options.strategy == "manual" && options.buckets.empty())
    throw CommandError(ExitUsage, "--strategy manual needs --buckets (bucket sizes in tensors)");
  if (options.strategy != "manual" && !options.buckets.empty())
    throw CommandError(ExitUsage, "--buckets needs --strategy manual");
}

/// --buckets against the gradients that go into buckets: every gradient but the row-sparse
/// ones zen-plan-sparse synchronises on their own (none in a model with MoE layers).
void checkManualBuckets(const PlanOptions &options, mlir::ModuleOp module, bool moe) {
  if (options.buckets.empty())
    return;
  int64_t gradients = 0, sparse = 0;
  module.walk([&](GradientOp gradient) {
    ++gradients;
    sparse += !moe && plan::plansSparse(gradient);
  });
  const int64_t total = std::accumulate(options.buckets.begin(), options.buckets.end(), int64_t{0});
  if (total != gradients - sparse)
    throw CommandError(ExitUsage,
                       fmt::format("--buckets: the sizes add up to {} tensors but {} has {} gradient "
                                   "tensors in buckets{}",
                                   total, options.model, gradients - sparse,
                                   sparse ? fmt::format(" ({} row-sparse more synchronised on their own)",
                                                        sparse)
                                          : ""));
}

/// Reads --sparsity before planning, by parameter ("" for every table): every file reads as
/// statistics (65 naming the file and field, 66 when missing), every PARAM names a row-sparse
/// gradient of the model, and the model has one (2 otherwise).
std::map<std::string, cost::SparsityStatistics> checkedSparsityOption(const PlanOptions &options,
                                                                      const importer::ModelGraph &graph) {
  if (options.sparsity.empty())
    return {};
  std::vector<std::string> tables;
  for (const importer::SparseGradient &sparse : graph.sparseGradients)
    tables.push_back(graph.parameters[sparse.parameter].name);
  if (tables.empty())
    throw CommandError(ExitUsage, "--sparsity: " + options.model +
                                      " has no row-sparse gradient (zenopt inspect lists them)");
  for (const std::string &entry : options.sparsity) {
    const size_t equals = entry.find('=');
    if (equals != std::string::npos &&
        std::find(tables.begin(), tables.end(), entry.substr(0, equals)) == tables.end())
      throw CommandError(ExitUsage, fmt::format("--sparsity {}: '{}' is not a row-sparse gradient of "
                                                "{} (it has: {})",
                                                entry, entry.substr(0, equals), options.model,
                                                fmt::join(tables, ", ")));
  }
  try {
    return cost::readSparsityStatistics(options.sparsity);
  } catch (const zen::Error &error) {
    throw CommandError(exitCodeOf(error.kind), "--sparsity: " + std::string(error.what()));
  }
}

/// The model's row-sparse gradients that `plan` leaves in its buckets (none of its
/// sparse_tensors), `samplesPerRank` samples a data-parallel rank's step, priced from their
/// --sparsity statistics where given; `why` as codegen::denseSyncedTables takes it.
codegen::DenseSyncedTables denseSyncedTablesOf(const importer::ModelGraph &graph, const zenrt::Plan &plan,
                                               const cost::CostModel &model, int64_t samplesPerRank,
                                               const std::map<std::string, cost::SparsityStatistics> &measured,
                                               const std::string &why) {
  std::vector<plan::SparseTensorRequest> requests;
  for (const importer::SparseGradient &sparse : graph.sparseGradients) {
    const std::string &name = graph.parameters[sparse.parameter].name;
    if (std::any_of(plan.sparseTensors.begin(), plan.sparseTensors.end(),
                    [&](const zenrt::SparseTensor &tensor) { return tensor.name == name; }))
      continue;
    plan::SparseTensorRequest request;
    request.name = name;
    request.table = {sparse.rows, sparse.rowElements};
    request.lookupsPerStep = sparse.lookupsPerStep(samplesPerRank);
    request.sharedRows = sparse.sharedAcrossSamples;
    request.measured = cost::statisticsFor(measured, name);
    requests.push_back(std::move(request));
  }
  try {
    return codegen::denseSyncedTables(requests, plan, model, why);
  } catch (const zen::Error &problem) {
    throw CommandError(exitCodeOf(problem.kind), graph.path + ": " + problem.what());
  }
}

/// Writes the requested files (all or none) and prints what --emit asks for.
int report(const PlanOptions &options, const zenrt::Plan &plan, mlir::ModuleOp module,
           const codegen::SummaryContext &context) {
  // All outputs or none: one that cannot be written leaves no other behind.
  try {
    zen::io::OutputFiles outputs;
    if (!options.output.empty())
      outputs.add(options.output, zenrt::writePlan(plan));
    if (!options.trace.empty())
      outputs.add(options.trace, codegen::chromeTrace(plan));
    if (!options.timelineSvg.empty())
      outputs.add(options.timelineSvg, codegen::timelineSvg(plan));
    outputs.commit();
  } catch (const zen::io::FileError &error) {
    throw CommandError(exitCodeOf(error.kind), error.what());
  } catch (const zenrt::PlanError &error) {
    throw CommandError(exitCodeOf(error.kind), options.model + ": " + error.what());
  }

  if (options.emit == "mlir") {
    module.print(llvm::outs());
    llvm::outs() << "\n";
    llvm::outs().flush();
  } else if (options.emit == "plan") {
    std::cout << zenrt::writePlan(plan);
  } else if (options.json) {
    std::cout << codegen::summaryJson(plan, context).dump() << "\n";
  } else {
    std::cout << codegen::summaryText(plan, context);
  }
  return ExitSuccess;
}

/// `zenopt --serve`: the serving search (zen::plan::planServing) on the recognised decoder,
/// reported like a training plan (-o, --emit plan, --json, the text summary).
int reportServing(const PlanOptions &options, mlir::ModuleOp module,
                  const std::optional<cost::TransformerShape> &shape, const std::string &whyNot,
                  const cost::CostModel &model) {
  if (!shape)
    throw CommandError(ExitDataError, options.model + ": --serve needs a decoder the transformer "
                                                      "pass recognises: " + whyNot);
  if (shape->family != "gpt")
    throw CommandError(ExitDataError, options.model + ": --serve plans decoding, and the model is a " +
                                          shape->family + " (a causal decoder is needed)");
  const std::string precision = options.precisionGiven ? options.precision : "bf16";
  plan::ServingRequest request;
  cost::ServingWorkload &workload = request.workload;
  workload.promptTokens = options.promptTokens > 0 ? options.promptTokens : 1024;
  workload.outputTokens = options.outputTokens > 0 ? options.outputTokens : 256;
  workload.weightDtype = *cost::parseDType(precision);
  const std::string kvDtype = options.kvDtype.empty() ? precision : options.kvDtype;
  workload.kvElementBytes = *cost::kvElementBytes(kvDtype);  // checked by CLI11
  workload.ttftTargetUs = options.ttftMs * 1e3;
  workload.tpotTargetUs = options.tpotMs * 1e3;
  if (options.tp) request.tp = options.tp;
  if (options.pp) request.pp = options.pp;
  if (options.maxBatch) request.maxBatch = options.maxBatch;
  request.colocatedOnly = options.colocated;
  plan::ServingDecision decision;
  try {
    decision = plan::planServing(*shape, model, request);
  } catch (const zen::Error &problem) {
    throw CommandError(exitCodeOf(problem.kind), options.model + ": " + problem.what());
  }
  const nlohmann::ordered_json inference =
      codegen::inferenceJson(decision, *shape, workload, {precision, kvDtype});
  auto text = [&](const char *name, const char *fallback) {
    auto attr = module->getAttrOfType<mlir::StringAttr>(name);
    return attr ? attr.getValue().str() : std::string(fallback);
  };
  const zenrt::Plan plan =
      codegen::servingPlan(decision, inference, model, text("zen.model", "model"), text("zen.model_hash", ""));
  try {
    zen::io::OutputFiles outputs;
    if (!options.output.empty())
      outputs.add(options.output, zenrt::writePlan(plan));
    outputs.commit();
  } catch (const zen::io::FileError &error) {
    throw CommandError(exitCodeOf(error.kind), error.what());
  } catch (const zenrt::PlanError &error) {
    throw CommandError(exitCodeOf(error.kind), options.model + ": " + error.what());
  }
  if (options.emit == "plan")
    std::cout << zenrt::writePlan(plan);
  else if (options.json)
    std::cout << codegen::servingSummaryJson(plan, inference).dump() << "\n";
  else
    std::cout << codegen::servingSummaryText(plan, inference);
  return ExitSuccess;
}

double moeImbalanceOf(const PlanOptions &options) {
  return options.moeImbalance > 0 ? options.moeImbalance : 1.0;
}

/// The MoE layers' ops carry the configuration's ep, degrees and algorithm
/// where the degrees divide the layer's capacity as the IR has it (the
/// exported batch; the configuration's micro-batch may route other tokens).
void recordMoeSchedule(mlir::ModuleOp module, const cost::ParallelConfig &config) {
  std::string error;
  std::optional<std::vector<MoeLayerOps>> layers = collectMoeLayers(module, error);
  if (!layers)
    return;
  const cost::MoeLayerChoice &choice = config.experts;
  const MoeScheduleAttr schedule = moeScheduleAttr(module.getContext(), config.ep, choice);
  for (MoeLayerOps &ops : *layers) {
    const int64_t capacity = ops.layer.shape.capacity();
    if (capacity % choice.forward != 0 || capacity % choice.backward != 0)
      continue;
    for (mlir::Operation *op : {ops.dispatch.getOperation(), ops.experts.getOperation(),
                                ops.combine.getOperation()})
      op->setAttr("schedule", schedule);
  }
}

/// What a training iteration runs besides the configuration: the compute
/// precision, the optimizer, and today's data-parallel semantics for the
/// global batch (`perGpuBatch` samples on every GPU) unless --global-batch sets it.
cost::TrainingSetup trainingSetup(const PlanOptions &options, int64_t perGpuBatch, int64_t gpus) {
  cost::TrainingSetup setup;
  setup.computeDtype = *plan::parseComputeDtype(options.precision);  // CLI-checked
  if (!options.gradAccumulationDtype.empty())
    setup.gradientAccumulation = cost::parseDType(options.gradAccumulationDtype);
  if (!options.attention.empty())
    setup.attention = *cost::parseAttentionKernel(options.attention);  // CLI-checked
  if (!options.zero3Regather.empty())
    setup.zero3Regather = *cost::parseZero3Regather(options.zero3Regather);  // CLI-checked
  if (options.zero3PrefetchDepth > 0)
    setup.zero3PrefetchDepth = options.zero3PrefetchDepth;
  setup.optimizer = options.optimizer.empty() ? cost::Optimizer::Adam
                                              : *cost::parseOptimizer(options.optimizer);
  // Saturated: planLargeModel refuses a default global batch beyond the limit by name.
  if (options.globalBatch > 0)
    setup.globalBatch = options.globalBatch;
  else if (__builtin_mul_overflow(perGpuBatch, gpus, &setup.globalBatch))
    setup.globalBatch = std::numeric_limits<int64_t>::max();
  setup.moeImbalance = moeImbalanceOf(options);
  return setup;
}

/// Samples per GPU in data parallelism: --batch, else the model's own.
int64_t perGpuBatchOf(const PlanOptions &options, const importer::ModelGraph &graph,
                      const std::optional<cost::TransformerShape> &shape) {
  if (options.batch > 0)
    return options.batch;
  return shape ? std::max<int64_t>(shape->modelBatch, 1) : graph.batch;
}

/// Bytes of the forward tensors the backward reads (activations and the model's
/// inputs, not its parameters), which stay in memory from one to the other; at
/// the planned batch (the tensors' bytes carry its scale), fp32 ones at the
/// compute precision's width as the activations of mixed precision are.
double keptActivationBytes(const importer::ModelGraph &graph, const cost::TrainingSetup &setup) {
  const double fp32Scale = cost::bytesPerParameter(setup).weights / 4.0;
  std::vector<bool> kept(graph.tensors.size(), false);
  double bytes = 0;
  for (const importer::BackwardStep &step : graph.backward)
    for (int id : step.savedTensors) {
      const importer::Tensor &tensor = graph.tensors[id];
      if (tensor.isInitializer || kept[id])
        continue;
      kept[id] = true;
      bytes += double(tensor.bytes) * (tensor.dtype == "f32" ? fp32Scale : 1.0);
    }
  return bytes;
}

/// One GPU's memory when every rank of the data-parallel group (--dp, else every
/// GPU) holds the whole model: a recognised transformer's by the large-model
/// memory model (its activations per Korthikanti et al.), any other model's
/// replicated weights, gradients and optimizer state with the activations its
/// backward keeps. An MoE model's is zen-plan-moe's (planDataParallel).
cost::MemoryBreakdown dataParallelMemory(const PlanOptions &options, const importer::ModelGraph &graph,
                                         const std::optional<cost::TransformerShape> &shape,
                                         const cost::TrainingSetup &setup, const cost::CostModel &model) {
  if (shape) {
    cost::ParallelConfig ddp;
    ddp.dp = options.dp > 0 ? options.dp : model.cluster().worldSize();
    ddp.microBatch = perGpuBatchOf(options, graph, shape);
    return cost::memoryPerGpu(*shape, ddp, setup, model);
  }
  return cost::replicatedParameterMemory(double(graph.trainableElements()),
                                         keptActivationBytes(graph, setup), setup, model);
}

/// Large-model planning of a recognised transformer: the tp/pp/dp/ZeRO (and ep)
/// search under the large-model flags (zen::planParallel), its decision recorded
/// on the module and applied by the partitioning passes, the plan lowered from the IR.
zenrt::Plan planLargeModel(const PlanOptions &options, const importer::ModelGraph &graph,
                           mlir::ModuleOp module, const cost::CostModel &model,
                           const cost::TransformerShape &shape, const cost::TrainingSetup &setup,
                           const DiagnosticCollector &diagnostics, BackgroundVerification &verification) {
  const int64_t gpus = model.cluster().worldSize();
  if (setup.globalBatch > cost::kMaxGlobalBatch) {
    // Only the default (--batch or the model's batch, on every GPU) can be this large.
    const std::string perGpu = options.batch > 0 ? "--batch " + std::to_string(options.batch)
                                                 : options.model + "'s batch " +
                                                       std::to_string(perGpuBatchOf(options, graph, shape));
    throw CommandError(options.batch > 0 ? ExitUsage : ExitDataError,
                       perGpu + " on each of " + std::to_string(gpus) + " GPUs exceeds the limit of " +
                           std::to_string(cost::kMaxGlobalBatch) +
                           " samples per iteration; give a smaller --global-batch");
  }
  plan::ParallelRequest request;
  request.setup = setup;
  if (options.tp) request.tp = options.tp;
  if (options.pp) request.pp = options.pp;
  if (options.dp) request.dp = options.dp;
  if (options.microBatch) request.microBatch = options.microBatch;
  if (options.zero >= 0) request.zero = options.zero;
  if (options.sequenceParallel || options.noSequenceParallel)
    request.sequenceParallel = options.sequenceParallel;
  if (options.tpChunks) request.tpChunks = options.tpChunks;
  if (options.ep) request.ep = options.ep;
  if (!options.recompute.empty()) request.recompute = cost::parseRecompute(options.recompute);
  if (!options.schedule.empty())
    request.virtualStages = cost::parseSchedule(options.schedule);  // checked by checkCommandLine
  std::string error;
  request.gradientSync.compressors = *plan::parseCompressors(options.compressor, error);

  ParallelDecision decision;
  try {
    decision = planParallel(shape, model, request, options.compressor, options.model, options.cluster);
  } catch (const zen::Error &problem) {
    throw CommandError(exitCodeOf(problem.kind), problem.what());
  }
  // The IR carries the decision; the partitioning passes apply it (tensor-parallel
  // shards and collectives, pipeline stages with their transfers, each stage's
  // data-parallel sync, ZeRO shards) and the plan is lowered from the result.
  verification.requireVerified();
  recordParallelDecision(module, decision);
  const cost::ParallelConfig &c = decision.config;
  if (shape.moe)
    recordMoeSchedule(module, c);
  // What the IR has no form for is not partitioned; the plan is lowered from the decision.
  std::optional<TensorParallelBlocker> blocker;
  if (c.tp > 1)
    if (std::optional<TransformerStructure> structure = analyzeTransformer(module, nullptr))
      blocker = tensorParallelBlocker(*structure, c.tp);
  if (blocker) {
    if (options.emit == "mlir")
      throw CommandError(ExitDataError, options.model + ": --emit mlir: " + blocker->reason +
                                            "; the plan file (-o) has the configuration");
  } else {
    LargeModelPipelineOptions partition{options.cluster, options.nodes, options.compressor, c};
    mlir::PassManager pipeline(module.getContext());
    pipeline.enableVerifier(options.emit == "mlir");
    buildLargeModelPipeline(pipeline, partition);
    if (mlir::failed(pipeline.run(module)))
      throw CommandError(ExitSoftware, options.model + ": partitioning the IR failed: " + diagnostics.messages());
  }
  mlir::FailureOr<zenrt::Plan> plan = codegen::emitParallelPlan(module, model);
  if (mlir::failed(plan))
    throw CommandError(ExitSoftware, options.model + ": " + diagnostics.messages());
  return std::move(*plan);
}

/// The model's MoE layers, after checking --ep and --moe-imbalance against
/// them: both need MoE layers; planned in data parallelism (no large-model
/// flag), a forced ep must divide every layer's experts and the data-parallel
/// group, be placeable on its nodes and fit in memory. Without --ep, when no
/// ep fits, `notFitting` says why (the large-model search may still find a
/// configuration).
std::vector<plan::MoeLayer> checkMoeOptions(const PlanOptions &options, mlir::ModuleOp module,
                                            const cost::CostModel &model, cost::Group dp,
                                            const DiagnosticCollector &diagnostics,
                                            std::string &notFitting) {
  std::string error;
  std::optional<std::vector<MoeLayerOps>> layers = collectMoeLayers(module, error);
  if (!layers)
    throw CommandError(ExitDataError, options.model + ": " + error);
  std::vector<plan::MoeLayer> shapes;
  for (const MoeLayerOps &ops : *layers)
    shapes.push_back(ops.layer);
  const bool moeFlags = options.ep > 0 || options.moeImbalance > 0;
  if (moeFlags && shapes.empty())
    throw CommandError(ExitDataError, options.model + ": --ep and --moe-imbalance need a model "
                                                      "with Mixture-of-Experts layers; it has none");
  // The large-model search checks ep against each configuration it tries.
  if (shapes.empty() || options.largeModelFlags())
    return shapes;
  const std::optional<int64_t> ep =
      options.ep > 0 ? std::optional<int64_t>(options.ep) : std::nullopt;
  try {
    // Neither the parallelism nor the memory depends on the gradient plan,
    // which is not made yet.
    mlir::FailureOr<plan::MoeRequest> request =
        moeRequestOf(module, shapes, model, dp, ep, 1.0, {});
    if (mlir::failed(request))
      throw CommandError(ExitSoftware, options.model + ": " + diagnostics.messages());
    plan::planMoe(shapes, model, *request);
  } catch (const zen::Error &problem) {
    if (problem.kind != zen::ErrorKind::BadInput)
      throw;
    if (!ep) {
      notFitting = problem.what();
      return shapes;
    }
    throw CommandError(ExitDataError, "--ep " + std::to_string(*ep) + ": " + options.model + ": " +
                                          problem.what());
  }
  return shapes;
}

/// A data-parallel plan; for an MoE model, one GPU's memory under its ep.
struct DataParallelPlan {
  zenrt::Plan plan;
  std::optional<cost::MemoryBreakdown> moeMemory;
};

/// The plan lowered from the planned `module` (codegen::emitModulePlan); for an MoE model,
/// one GPU's memory under its ep.
DataParallelPlan lowerDataParallel(const PlanOptions &options, mlir::ModuleOp module,
                                   const cost::CostModel &model, const DiagnosticCollector &diagnostics) {
  DataParallelPlan lowered;
  mlir::FailureOr<zenrt::Plan> plan = codegen::emitModulePlan(module, model, &lowered.moeMemory);
  if (mlir::failed(plan))
    throw CommandError(ExitSoftware, options.model + ": " + diagnostics.messages());
  lowered.plan = std::move(*plan);
  return lowered;
}

/// Plans the gradient sync of `module` (zen-autotune, with the allowed
/// compressors when `compressGradients`) and its MoE layers (zen-plan-moe, with
/// the allowed compressors on their tokens either way), and lowers the result.
DataParallelPlan planDataParallel(const PlanOptions &options, const std::string &modelName,
                                  mlir::ModuleOp module, const cost::CostModel &model,
                                  const DiagnosticCollector &diagnostics,
                                  BackgroundVerification &verification, bool compressGradients) {
  PlanPipelineOptions pipelineOptions;
  // The module carries the cluster and node count (runPlan): the passes set no module
  // attribute while it may still be verified.
  pipelineOptions.dp = options.dp;
  pipelineOptions.compressor = options.compressor;
  pipelineOptions.compressGradients = compressGradients;
  // --strategy is checked against the same names on the command line.
  pipelineOptions.strategy = *vocab::parseStrategy(options.strategy);
  pipelineOptions.buckets = options.buckets;
  pipelineOptions.horovodCycleTimeMs = options.horovodCycleTimeMs;
  pipelineOptions.horovodFusionThresholdMb = options.horovodFusionThresholdMb;
  pipelineOptions.ep = options.ep;
  pipelineOptions.moeImbalance = moeImbalanceOf(options);
  pipelineOptions.sparsity = options.sparsity;
  mlir::PassManager pipeline(module.getContext());
  // The imported module was verified. zen-autotune's output is verified when it is printed
  // (--emit mlir); otherwise codegen reads it through readPlan's structural checks and the
  // plan must score as the planner predicted, so a second full-module verify (8% of planning
  // a 10 000-tensor model end to end) would check nothing the plan depends on. zenopt-opt and
  // the lit tests still verify after every pass.
  pipeline.enableVerifier(options.emit == "mlir");
  buildPlanPipeline(pipeline, pipelineOptions);
  {
    ProgressLine progress("planning " + modelName, !options.quiet);
    if (mlir::failed(pipeline.run(module)))
      throw CommandError(ExitSoftware, options.model + ": planning failed: " + diagnostics.messages());
  }
  verification.requireVerified();

  return lowerDataParallel(options, module, model, diagnostics);
}

double moeIterationUs(const zenrt::Plan &plan) {
  return nlohmann::json::parse(plan.moe)["iteration_us"].get<double>();
}

/// `plan` and `exact` (its gradients uncompressed) plan the same MoE model: in
/// both, each gradient-sync baseline becomes the faster of the two, as each is
/// reported at its best over the allowed compressors (and the uncompressed ones
/// at the faster of theirs). The MoE baselines stay on each plan's own
/// gradient schedule, as its `moe` section has them.
void compareLikeWithLike(zenrt::Plan &plan, zenrt::Plan &exact) {
  const std::vector<std::string> &moeNames = plan::moeBaselineNames();
  auto isMoe = [&](const std::string &name) {
    return std::find(moeNames.begin(), moeNames.end(), name) != moeNames.end();
  };
  // exact's baselines are uncompressed: read them before they take the minimum.
  for (auto &[name, us] : plan.baselinesUncompressed)
    us = std::min(us, exact.baselines.at(name));
  exact.baselinesUncompressed = plan.baselinesUncompressed;
  for (auto &[name, us] : plan.baselines)
    if (!isMoe(name))
      us = exact.baselines.at(name) = std::min(us, exact.baselines.at(name));
}

/// Records on `module`'s zen.moe_search the gradient-sync baselines of `plan` as
/// compareLikeWithLike left them (the MoE baselines are the lowering's own).
void recordComparedBaselines(mlir::ModuleOp module, const zenrt::Plan &plan) {
  const std::vector<std::string> &moeNames = plan::moeBaselineNames();
  BaselineTable compared;
  for (const auto &[name, us] : plan.baselines)
    if (std::find(moeNames.begin(), moeNames.end(), name) == moeNames.end())
      compared.iterationUs[name] = us;
  compared.uncompressedUs = plan.baselinesUncompressed;
  auto search = module->getAttrOfType<MoeSearchAttr>(ZenDialect::MoeSearchAttrHelper::getNameStr());
  module->setAttr(ZenDialect::MoeSearchAttrHelper::getNameStr(),
                  MoeSearchAttr::get(module.getContext(), search.getImbalance(), search.getSearched(),
                                     search.getNotFitting(),
                                     baselinesAttr(module.getContext(), compared)));
}

/// Ends the process once the plan is reported (its files committed): the model graph, the IR
/// and its context, and the static objects (ONNX's registry of every opset's schemas among
/// them) are left to the operating system instead of being freed object by object, as clang's
/// -disable-free does (the static objects were 3% of planning GPT-2 small; the IR and the graph
/// 3% of a 10 000-tensor model).
[[noreturn]] void exitAfterReport(int status) {
  std::cout.flush();
  llvm::outs().flush();
  std::fflush(nullptr);
  std::_Exit(status);
}

int runPlan(const PlanOptions &options) {
  if (options.model.empty())
    throw CommandError(ExitUsage, "no model given; run zenopt --help for usage");
  options.heads.check();
  // Before planning: two outputs in one file would leave only the last one written.
  try {
    zen::io::requireDistinctOutputs({{"-o", options.output},
                                     {"--trace", options.trace},
                                     {"--timeline-svg", options.timelineSvg},
                                     {"standard output (--emit " + options.emit + ")", "/dev/stdout"}});
  } catch (const zen::io::FileError &error) {
    throw CommandError(exitCodeOf(error.kind), error.what());
  }

  importer::ImportOptions importOptions;
  if (options.batch > 0)
    importOptions.batch = options.batch;
  importOptions.frozen.insert(options.frozen.begin(), options.frozen.end());
  importOptions.parsed = [](uint64_t graphBytes) {
    // Planning peaks at ~32 bytes of memory per byte of graph (a 100 000-tensor MLP: 740 MB
    // for 23.6 MB; GPT-3's shapes: 36 MB for 0.87 MB).
    tools::prefaultHeap(32 * graphBytes);
  };
  importer::ModelGraph graph;
  try {
    graph = importer::importModel(options.model, importOptions);
  } catch (const importer::ImportError &error) {
    throw CommandError(exitCodeOf(error.kind), error.what());
  }
  for (const std::string &warning : graph.warnings)
    if (!options.quiet)
      std::cerr << "zenopt: " << warning << "\n";  // each names its file and says "warning"
  if (graph.parameters.empty())
    throw CommandError(ExitDataError, options.model +
                                          ": no trainable parameters (no float initializer "
                                          "reaches a graph output): no gradients to plan");
  checkCommandLine(options);
  const std::map<std::string, cost::SparsityStatistics> measuredSparsity =
      checkedSparsityOption(options, graph);

  cost::Cluster cluster = loadClusterOption(options.cluster, options.nodes);
  if (options.dp > cluster.worldSize())
    throw CommandError(ExitUsage, "--dp " + std::to_string(options.dp) + ": cluster '" +
                                      cluster.name + "' has only " +
                                      std::to_string(cluster.worldSize()) + " GPUs");
  cost::CostModel model(cluster);
  const cost::Group dpGroup = model.groupOf(options.dp > 0 ? options.dp : cluster.worldSize());

  // The IR is built and rewritten on one thread (one function, no parallel pass); without
  // threading MLIR uniques every attribute and type without locks and thread-local caches
  // (BackgroundVerification turns threading on while it verifies beside the search). The
  // constructor's Threading::DISABLED leaves the uniquers in threaded mode. The dialects the
  // passes depend on are registered up front: a pass manager run then changes nothing in
  // the context's registry while the verification reads the module.
  mlir::DialectRegistry registry;
  registry.insert<ZenDialect, mlir::func::FuncDialect>();
  auto owningContext =
      std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  mlir::MLIRContext &context = *owningContext;
  context.disableMultithreading();
  DiagnosticCollector diagnostics(context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      importer::buildZenModule(context, graph, importer::ModuleVerification::Deferred);
  // Mixed precision: every pass and codegen price fp32 compute at this precision.
  if (options.precision != "fp32")
    ZenDialect::ComputeDtypeAttrHelper(&context)
        .setAttr(*module, mlir::StringAttr::get(&context, options.precision));
  if (!options.gradAccumulationDtype.empty())
    ZenDialect::GradAccumulationDtypeAttrHelper(&context)
        .setAttr(*module, mlir::StringAttr::get(&context, options.gradAccumulationDtype));
  if (!options.attention.empty())
    ZenDialect::AttentionAttrHelper(&context).setAttr(*module,
                                                      mlir::StringAttr::get(&context, options.attention));
  if (!options.zero3Regather.empty())
    ZenDialect::Zero3RegatherAttrHelper(&context)
        .setAttr(*module, mlir::StringAttr::get(&context, options.zero3Regather));
  if (options.zero3PrefetchDepth > 0)
    ZenDialect::Zero3PrefetchDepthAttrHelper(&context)
        .setAttr(*module, mlir::IntegerAttr::get(mlir::IntegerType::get(&context, 64),
                                                 options.zero3PrefetchDepth));
  // Set before the verification starts, not by the passes while it runs.
  ZenDialect::ClusterAttrHelper(&context).setAttr(*module,
                                                  mlir::StringAttr::get(&context, options.cluster));
  if (!options.compressor.empty())
    ZenDialect::CompressorAttrHelper(&context)
        .setAttr(*module, mlir::StringAttr::get(&context, options.compressor));
  if (options.nodes > 0)
    ZenDialect::NodesAttrHelper(&context).setAttr(
        *module, mlir::IntegerAttr::get(mlir::IntegerType::get(&context, 64), options.nodes));
  options.heads.apply(*module);
  if (!options.measuredCompute.empty())
    ZenDialect::MeasuredComputeAttrHelper(&context)
        .setAttr(*module, readMeasuredCompute(context, options.measuredCompute, graph));
  BackgroundVerification verification(*module, options.model, diagnostics);
  try {
    std::string whyNot;
    const std::optional<cost::TransformerShape> shape = recognizeTransformer(*module, &whyNot);
    options.heads.checkTaken(shape.has_value(), options.model, whyNot);
    if (options.serve)
      exitAfterReport(reportServing(options, *module, shape, whyNot, model));
    codegen::SummaryContext summary;
    if (auto measured = ZenDialect::MeasuredComputeAttrHelper(&context).getAttr(*module))
      summary.computeSource = "measured: " + measured.getMethod().str();
    if (shape)
      summary.transformer = codegen::transformerJson(*shape);
    const cost::TrainingSetup setup =
        trainingSetup(options, perGpuBatchOf(options, graph, shape), cluster.worldSize());
    std::string moeNotFitting;
    std::vector<zen::plan::MoeLayer> moeLayers =
        checkMoeOptions(options, *module, model, dpGroup, diagnostics, moeNotFitting);
    checkManualBuckets(options, *module, !moeLayers.empty());
    // Every path checks memory: the large-model search its configurations,
    // zen-plan-moe every ep, and here data parallelism without MoE layers.
    std::optional<cost::MemoryBreakdown> denseMemory;
    if (!options.largeModelFlags() && moeLayers.empty())
      denseMemory = dataParallelMemory(options, graph, shape, setup, model);
    const bool denseNotFitting = denseMemory && !denseMemory->fits();
    if (options.largeModelFlags() || denseNotFitting || !moeNotFitting.empty()) {
      if (!shape && options.largeModelFlags())
        throw CommandError(ExitDataError, options.model + ": --tp/--pp/--zero/--global-batch and the other "
                                          "large-model options need a transformer: " + whyNot);
      if (!shape && !moeNotFitting.empty())
        throw CommandError(ExitDataError, options.model + ": " + moeNotFitting);
      if (!shape)
        throw CommandError(ExitDataError,
                           fmt::format("{}: does not fit in data parallelism on {} GPUs of '{}': {}; "
                                       "only a transformer can be partitioned, and none was "
                                       "recognised: {}",
                                       options.model, options.dp > 0 ? options.dp : cluster.worldSize(),
                                       cluster.name, memoryText(*denseMemory), whyNot));
      if (!options.quiet && !options.measuredCompute.empty())
        std::cerr << "zenopt: warning: --measured-compute prices data-parallel plans; the "
                     "large-model search prices the compute from the cost model\n";
      summary.computeSource = "cost model";
      if (!options.quiet && denseNotFitting)
        std::cerr << "zenopt: warning: data parallelism alone does not fit: "
                  << memoryText(*denseMemory) << "; searching tensor, pipeline and ZeRO configurations\n";
      if (!options.quiet && !moeNotFitting.empty())
        std::cerr << "zenopt: warning: data parallelism with expert parallelism does not fit: "
                  << moeNotFitting << "; searching tensor, pipeline, expert and ZeRO configurations\n";
      zenrt::Plan plan = planLargeModel(options, graph, *module, model, *shape, setup, diagnostics,
                                        verification);
      summary.denseSynced = denseSyncedTablesOf(
          graph, plan, model, setup.globalBatch / codegen::dataParallelGroup(plan, model).ranks,
          measuredSparsity,
          "a tp/pp/ZeRO plan synchronises every gradient dense over its data-parallel group "
          "(sparse schemes are planned in data-parallel plans only)");
      exitAfterReport(report(options, plan, *module, summary));
    }

    // zen-autotune plans the gradients before zen-plan-moe chooses ep, so it cannot
    // know that syncing the experts over their replicas removes exposed
    // communication that compressing them would also remove at the price of
    // kernels. With compressors allowed, an MoE model is planned both ways.
    mlir::OwningOpRef<mlir::ModuleOp> exactGradients;
    if (!moeLayers.empty() && !options.compressor.empty() && options.strategy == "auto")
      exactGradients = module->clone();
    DataParallelPlan planned = planDataParallel(options, graph.modelName, *module, model, diagnostics,
                                                verification, /*compressGradients=*/true);
    if (exactGradients) {
      DataParallelPlan exact = planDataParallel(options, graph.modelName, *exactGradients, model,
                                                diagnostics, verification, /*compressGradients=*/false);
      const bool exactWins = moeIterationUs(exact.plan) < moeIterationUs(planned.plan);
      compareLikeWithLike(planned.plan, exact.plan);
      if (exactWins) {
        planned = std::move(exact);
        module = std::move(exactGradients);
      }
      // The IR records the baselines as compared; the plan is lowered from it again.
      recordComparedBaselines(*module, planned.plan);
      planned = lowerDataParallel(options, *module, model, diagnostics);
    }
    summary.memory = codegen::memoryJson(planned.moeMemory ? *planned.moeMemory : *denseMemory);
    summary.sparse = codegen::sparseDecisionsOf(planned.plan, model);
    summary.denseSynced = denseSyncedTablesOf(
        graph, planned.plan, model, graph.batch, measuredSparsity,
        moeLayers.empty() ? "zen-plan-sparse plans only tables whose gradient is static f32"
                          : "a model with MoE layers synchronises every gradient in its buckets "
                            "(zen-plan-sparse does not plan it)");
    exitAfterReport(report(options, planned.plan, *module, summary));
  } catch (const CommandError &) {
    // An unverified module's error comes first, as when the module was verified first.
    verification.requireVerified();
    throw;
  }
}

CommandRegistration registration(
    "", "Plan the communication of MODEL.onnx", [](CLI::App &app) {
      auto options = std::make_shared<PlanOptions>();
      app.add_option("model", options->model, "ONNX model (.onnx, or .onnxtxt text syntax)");
      app.add_option("--cluster", options->cluster,
                     "Cluster preset (a100x64, a100x8, h100x256, v100x16-10gbe, cpu-local) or JSON file")
          ->capture_default_str();
      app.add_option("--nodes", options->nodes,
                     "Node count, overriding the cluster's (preset or file)")
          ->check(wholeNumber(1));
      app.add_option("--batch", options->batch, "Samples per GPU (default: the model's own)")
          ->check(wholeNumber(1));
      app.add_option("--frozen", options->frozen,
                     "Initializers that are not trained (buffers, frozen weights), "
                     "comma-separated: no gradient is planned for them")
          ->delimiter(',');
      app.add_option("--measured-compute", options->measuredCompute,
                     "The step's compute as the job timed it (JSON that zenopt.torch writes: "
                     "forward, backward, optimizer and per-parameter times): priced from it "
                     "instead of from FLOPs (data-parallel plans)");
      app.add_option("--dp", options->dp, "Data-parallel ranks (default: every GPU of the cluster; large-model planning: searched, tp x pp x dp = GPUs)")
          ->check(wholeNumber(1));
      app.add_option("--strategy", options->strategy,
                     "auto, or a baseline: nooverlap, wfbp, ddp, horovod, mgwfbp, manual")
          ->check(CLI::IsMember(commandLineStrategies()))
          ->capture_default_str();
      app.add_option("--buckets", options->buckets,
                     "With --strategy manual: bucket sizes in tensors, in gradient-ready order (3,5,2)")
          ->delimiter(',')
          ->check(wholeNumber(1));
      // Horovod's own spellings (horovodrun --cycle-time-ms, --fusion-threshold-mb).
      app.add_option("--horovod-cycle-time-ms", options->horovodCycleTimeMs,
                     "Horovod baseline: cycle time in ms (5 before Horovod v0.21.0)")
          ->check(realNumber(0, 60e3, /*exclusiveLow=*/true))
          ->capture_default_str();
      app.add_option("--horovod-fusion-threshold-mb", options->horovodFusionThresholdMb,
                     "Horovod baseline: fusion threshold in MiB, 0 = no fusion (64 before v0.21.0)")
          ->check(wholeNumber(0, int64_t{1} << 40))
          ->capture_default_str();
      app.add_option("--compressor", options->compressor,
                     "Allowed compression, comma-separated: fp16, bf16, int8, topk:R, randomk:R, "
                     "sign, powersgd:RANK (default: none, training stays exact)");
      CLI::Option *precision = app.add_option("--precision", options->precision,
                     "Compute precision of fp32 models' forward and backward (mixed precision, "
                     "AMP): fp32, tf32, bf16, fp16; gradients stay fp32 on the wire")
          ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}))
          ->capture_default_str();
      app.add_option("--grad-accumulation-dtype", options->gradAccumulationDtype,
                     "Dtype gradients accumulate and reduce in, for memory: fp32, bf16, fp16 (default: "
                     "fp32, and fp16 under --precision fp16, as Megatron-LM and DeepSpeed do)")
          ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
      app.add_option("--attention", options->attention,
                     "Attention kernel transformers are priced with: flash (FlashAttention, the "
                     "frameworks' default; nothing of the scores kept) or unfused (scores, softmax "
                     "and dropout through memory and kept, as Megatron-LM before FlashAttention)")
          ->check(CLI::IsMember(vocab::spellingsOf(vocab::kAttentionKernels)));
      app.add_option("-o,--output", options->output, "Write the plan file here");
      app.add_option("--trace", options->trace, "Write a Chrome/Perfetto trace of one iteration");
      app.add_option("--timeline-svg", options->timelineSvg, "Write an SVG timeline picture");
      app.add_option("--emit", options->emit,
                     "What to print: summary (default), plan (the plan JSON) or mlir (the planned zen IR)")
          ->check(CLI::IsMember({"summary", "plan", "mlir"}))
          ->capture_default_str();
      app.add_flag("--json", options->json, "Print the summary as one JSON object (times in us)");
      app.add_option("--global-batch", options->globalBatch,
                     "Samples per iteration over all data-parallel ranks (default: --batch x GPUs)")
          ->check(wholeNumber(1, cost::kMaxGlobalBatch));
      app.add_option("--micro-batch", options->microBatch, "Samples per micro-batch (default: searched)")
          ->check(wholeNumber(1, cost::kMaxGlobalBatch));
      app.add_option("--tp", options->tp, "Tensor-parallel ranks (default: searched)")->check(wholeNumber(1));
      app.add_option("--pp", options->pp, "Pipeline stages (default: searched)")->check(wholeNumber(1));
      app.add_option("--zero", options->zero, "ZeRO stage over the data-parallel group: 0, 1, 2, 3 (default: searched)")
          ->check(wholeNumber(0, 3));
      app.add_option("--zero3-regather", options->zero3Regather,
                     "When ZeRO-3 gathers the weights under gradient accumulation: per-microbatch "
                     "(DeepSpeed ZeRO-3, FSDP FULL_SHARD; default) or per-step (FSDP2 without "
                     "resharding or gradient sync until the last micro-batch)")
          ->check(CLI::IsMember(vocab::spellingsOf(vocab::kZero3Regathers)));
      app.add_option("--zero3-prefetch-depth", options->zero3PrefetchDepth,
                     "Units whose ZeRO-3 gather runs ahead of the one computing (default 1, FSDP's "
                     "forward and backward prefetch)")
          ->check(wholeNumber(1, 1 << 20));
      app.add_option("--recompute", options->recompute,
                     "Activation recomputation: none, selective, full (default: searched)")
          ->check(CLI::IsMember(vocab::spellingsOf(vocab::kRecomputes)));
      CLI::Option *sequenceParallel =
          app.add_flag("--sequence-parallel", options->sequenceParallel,
                       "Megatron sequence parallelism in the tensor-parallel regions (default: searched)");
      app.add_flag("--no-sequence-parallel", options->noSequenceParallel,
                   "No sequence parallelism (default: searched)")
          ->excludes(sequenceParallel);
      app.add_option("--schedule", options->schedule,
                     "Pipeline schedule: 1f1b or interleaved:V (default: searched)");
      app.add_option("--tp-chunks", options->tpChunks,
                     "Chunks every tensor-parallel GEMM and its collective are split into, the same "
                     "for every layer and phase (default: chosen per region and phase)")
          ->check(wholeNumber(1, 1 << 20));
      app.add_option("--optimizer", options->optimizer, "Optimizer whose state is kept: adam, sgd (default adam)")
          ->check(CLI::IsMember({"adam", "sgd"}));
      app.add_option("--ep", options->ep,
                     "MoE models: experts spread over this many ranks of the data-parallel group; "
                     "must divide the experts and the dp size (default: searched)")
          ->check(wholeNumber(1));
      app.add_option("--moe-imbalance", options->moeImbalance,
                     "MoE models: the busiest expert gets X times the mean load (X >= 1, default 1)")
          ->check(realNumber(1, 1e6));
      app.add_option("--sparsity", options->sparsity,
                     "Measured sparsity statistics of row-sparse gradients (zenopt sparsity -o): "
                     "FILE for every one, or PARAM=FILE, comma-separated (default: the Zipf model)")
          ->delimiter(',');
      options->heads.addOptions(app);
      app.add_flag("--serve", options->serve,
                   "Plan inference serving of a decoder instead of training: tp and pp of prefill "
                   "and decode, the batch under the KV cache and the latency targets, each "
                   "all-reduce's kernel (docs/design.md \"Inference serving\")");
      app.add_option("--prompt-tokens", options->promptTokens, "--serve: tokens of a request's prompt (default 1024)")
          ->check(wholeNumber(1, 1 << 20));
      app.add_option("--output-tokens", options->outputTokens, "--serve: tokens generated a request (default 256)")
          ->check(wholeNumber(1, 1 << 20));
      app.add_option("--ttft-ms", options->ttftMs, "--serve: time-to-first-token target in ms (default: none)")
          ->check(realNumber(1e-3, 1e9));
      app.add_option("--tpot-ms", options->tpotMs, "--serve: time-per-output-token target in ms (default: none)")
          ->check(realNumber(1e-3, 1e9));
      app.add_option("--max-batch", options->maxBatch,
                     "--serve: requests decoded together at most (vLLM's max_num_seqs; default 256)")
          ->check(wholeNumber(1, 1 << 16));
      app.add_flag("--colocated", options->colocated,
                   "--serve: prefill and decode on the same GPUs (no disaggregated plans; what "
                   "zenopt-serve executes)");
      app.add_option("--kv-dtype", options->kvDtype,
                     "--serve: KV-cache element type: fp32, bf16, fp16, fp8, int8 (default: --precision's, "
                     "bf16 when serving)")
          ->check(CLI::IsMember({"fp32", "bf16", "fp16", "fp8", "int8"}));
      app.add_flag("-q,--quiet", options->quiet, "No progress line or warnings on stderr");
      return [options, precision] {
        options->precisionGiven = precision->count() > 0;
        return runPlan(*options);
      };
    });
} // namespace
} // namespace zen::cli
