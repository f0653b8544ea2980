//===- Passes.cpp - the zen planning passes --------------------------------===//
//
// Every pass follows one shape: price the training function against the
// cluster, read the plan already in the IR, change the decision the pass owns,
// and materialise the plan again (IRPlan.h).
//
//===----------------------------------------------------------------------===//
#include "zen/Passes/Passes.h"
#include "zen/Passes/IRPlan.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <exception>

namespace zen {
#define GEN_PASS_DEF_INSERTGRADSYNC
#define GEN_PASS_DEF_FUSEGRADIENTS
#define GEN_PASS_DEF_PLACECOMPRESSION
#define GEN_PASS_DEF_DECOMPOSE
#define GEN_PASS_DEF_SCHEDULEOVERLAP
#define GEN_PASS_DEF_AUTOTUNE
#define GEN_PASS_DEF_PRINTTIMELINE
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;
using namespace zen::plan;

namespace zen {
namespace {

/// The cost model of a pass's `cluster` option, or nullopt after an error.
std::optional<cost::CostModel> costModelFor(Operation *op, const std::string &cluster) {
  std::optional<cost::Cluster> loaded = loadClusterOption(op, cluster);
  if (!loaded)
    return std::nullopt;
  try {
    return cost::CostModel(std::move(*loaded));
  } catch (const std::exception &error) {
    op->emitError("invalid cluster '") << cluster << "': " << error.what();
  }
  return std::nullopt;
}

/// A priced training function with the plan already in it.
struct Planned {
  std::optional<cost::CostModel> model;
  TrainingFunction training;
  PlanChoice choice;
};

/// Loads the cluster, extracts the problem and reads the existing plan, which
/// must exist (`pass` names the pass for the error message).
FailureOr<Planned> loadPlanned(ModuleOp module, const std::string &cluster, StringRef pass) {
  Planned planned;
  planned.model = costModelFor(module, cluster);
  if (!planned.model)
    return failure();
  FailureOr<TrainingFunction> training = extractTraining(module, *planned.model);
  if (failed(training))
    return failure();
  planned.training = std::move(*training);
  cost::Group group;
  FailureOr<std::optional<PlanChoice>> existing = readPlan(planned.training, group);
  if (failed(existing))
    return failure();
  if (!*existing)
    return module.emitError("gradients are not synchronised; run zen-insert-grad-sync before ")
           << pass;
  planned.training.problem.group = group;
  planned.choice = std::move(**existing);
  return planned;
}

/// A priced training function whose problem runs over the group a `dp` option names.
struct Priced {
  std::optional<cost::CostModel> model;
  TrainingFunction training;
};

FailureOr<Priced> loadPriced(ModuleOp module, const std::string &cluster, int64_t dp) {
  Priced priced;
  priced.model = costModelFor(module, cluster);
  if (!priced.model)
    return failure();
  std::optional<cost::Group> group = groupForOption(module, *priced.model, dp);
  FailureOr<TrainingFunction> training = extractTraining(module, *priced.model);
  if (!group || failed(training))
    return failure();
  priced.training = std::move(*training);
  priced.training.problem.group = *group;
  return priced;
}

std::optional<std::vector<cost::CompressionSpec>> compressorsOption(Operation *op,
                                                                    const std::string &text) {
  std::string error;
  std::optional<std::vector<cost::CompressionSpec>> specs = parseCompressors(text, error);
  if (!specs)
    op->emitError("invalid compressor option: ") << error;
  return specs;
}

/// Streams the plan uses: 2 when decoupled all-gathers have their own.
int streamsOf(const PlanChoice &choice) {
  for (const BucketChoice &bucket : choice.buckets)
    if (bucket.decomposed && bucket.gatherStream != bucket.stream)
      return 2;
  return 1;
}

/// Greedy per-bucket improvement: for each bucket, tries every edit `variants`
/// produces and keeps the one the simulator scores best.
template <typename Variants>
void improvePerBucket(const Problem &problem, PlanChoice &choice, const cost::CostModel &model,
                      Variants variants) {
  double best = evaluate(problem, choice, model).iterationUs;
  for (size_t b = 0; b < choice.buckets.size(); ++b)
    for (const BucketChoice &variant : variants(choice.buckets[b])) {
      PlanChoice candidate = choice;
      candidate.buckets[b] = variant;
      double time = evaluate(problem, candidate, model).iterationUs;
      if (time < best * (1 - 1e-9)) {
        best = time;
        choice = std::move(candidate);
      }
    }
}

struct InsertGradSyncPass : impl::InsertGradSyncBase<InsertGradSyncPass> {
  using InsertGradSyncBase::InsertGradSyncBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<Priced> priced = loadPriced(module, cluster, dp);
    if (failed(priced))
      return signalPassFailure();
    TrainingFunction &training = priced->training;
    std::string error;
    std::optional<PlanChoice> choice =
        baselineChoice("wfbp", training.problem, *priced->model, BaselineOptions{}, error);
    if (!choice) {
      module.emitError(error);
      return signalPassFailure();
    }
    choice->fused = false;
    if (failed(materializePlan(training, *choice, training.problem.group)))
      return signalPassFailure();
  }
};

struct FuseGradientsPass : impl::FuseGradientsBase<FuseGradientsPass> {
  using FuseGradientsBase::FuseGradientsBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<Planned> planned = loadPlanned(module, cluster, "zen-fuse-gradients");
    if (failed(planned))
      return signalPassFailure();
    BaselineOptions options;
    options.manualBuckets.assign(buckets.begin(), buckets.end());
    options.thresholdBytes = thresholdBytes;
    std::string error;
    std::optional<PlanChoice> choice =
        baselineChoice(strategy, planned->training.problem, *planned->model, options, error);
    if (!choice) {
      module.emitError("zen-fuse-gradients: ") << error;
      return signalPassFailure();
    }
    if (failed(materializePlan(planned->training, *choice, planned->training.problem.group)))
      return signalPassFailure();
    module->setAttr("zen.strategy", StringAttr::get(module.getContext(), strategy));
  }
};

struct PlaceCompressionPass : impl::PlaceCompressionBase<PlaceCompressionPass> {
  using PlaceCompressionBase::PlaceCompressionBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<std::vector<cost::CompressionSpec>> allowed =
        compressorsOption(module, compressor);
    if (!allowed)
      return signalPassFailure();
    if (mode != "auto" && mode != "all") {
      module.emitError("zen-place-compression: mode must be auto or all, got '") << mode << "'";
      return signalPassFailure();
    }
    FailureOr<Planned> planned = loadPlanned(module, cluster, "zen-place-compression");
    if (failed(planned))
      return signalPassFailure();
    PlanChoice &choice = planned->choice;
    auto apply = [](BucketChoice bucket, const cost::CompressionSpec &spec) {
      bucket.compression = spec;
      bucket.compression.errorFeedback = wantsErrorFeedback(spec.method);
      if (spec.method != cost::CompressionMethod::None) {
        bucket.decomposed = false;
        bucket.chunks = 1;
      }
      return bucket;
    };
    for (BucketChoice &bucket : choice.buckets)
      bucket = apply(bucket, mode == "all" && !allowed->empty() ? allowed->front()
                                                                 : cost::CompressionSpec{});
    if (mode == "auto" && !allowed->empty())
      improvePerBucket(planned->training.problem, choice, *planned->model,
                       [&](const BucketChoice &bucket) {
                         std::vector<BucketChoice> variants;
                         for (const cost::CompressionSpec &spec : *allowed)
                           for (const cost::CompressionSpec &placed : placements(spec))
                             variants.push_back(apply(bucket, placed));
                         return variants;
                       });
    if (failed(materializePlan(planned->training, choice, planned->training.problem.group)))
      return signalPassFailure();
  }
};

struct DecomposePass : impl::DecomposeBase<DecomposePass> {
  using DecomposeBase::DecomposeBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (split != "none" && split != "all" && split != "auto") {
      module.emitError("zen-decompose: split must be none, all or auto, got '") << split << "'";
      return signalPassFailure();
    }
    if (chunks < 0 || chunks > 1024) {
      module.emitError("zen-decompose: chunks must be in [0, 1024], got ") << static_cast<int64_t>(chunks);
      return signalPassFailure();
    }
    FailureOr<Planned> planned = loadPlanned(module, cluster, "zen-decompose");
    if (failed(planned))
      return signalPassFailure();
    PlanChoice &choice = planned->choice;
    const Problem &problem = planned->training.problem;
    const int streams = streamsOf(choice);
    auto setChunks = [&](PlanChoice &plan) {
      if (chunks == 0) {
        chooseChunks(problem, plan, *planned->model);
        return;
      }
      for (BucketChoice &bucket : plan.buckets)
        bucket.chunks = chunks;
    };
    for (BucketChoice &bucket : choice.buckets)
      bucket.decomposed =
          split == "all" && bucket.compression.method == cost::CompressionMethod::None;
    assignSchedule(choice, streams);
    setChunks(choice);
    if (split == "auto")
      improvePerBucket(problem, choice, *planned->model, [&](const BucketChoice &bucket) {
        std::vector<BucketChoice> variants;
        if (bucket.compression.method == cost::CompressionMethod::None) {
          BucketChoice flipped = bucket;
          flipped.decomposed = !bucket.decomposed;
          variants.push_back(flipped);
        }
        return variants;
      });
    if (failed(materializePlan(planned->training, choice, problem.group)))
      return signalPassFailure();
  }
};

struct ScheduleOverlapPass : impl::ScheduleOverlapBase<ScheduleOverlapPass> {
  using ScheduleOverlapBase::ScheduleOverlapBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (streams != 1 && streams != 2) {
      module.emitError("zen-schedule-overlap: streams must be 1 or 2, got ") << static_cast<int64_t>(streams);
      return signalPassFailure();
    }
    FailureOr<Planned> planned = loadPlanned(module, cluster, "zen-schedule-overlap");
    if (failed(planned))
      return signalPassFailure();
    assignSchedule(planned->choice, static_cast<int>(streams));
    if (failed(materializePlan(planned->training, planned->choice,
                               planned->training.problem.group)))
      return signalPassFailure();
  }
};

DictionaryAttr timesAttr(Builder &builder, const std::map<std::string, double> &times) {
  SmallVector<NamedAttribute> entries;
  for (const auto &[name, us] : times)
    entries.push_back(builder.getNamedAttr(name, builder.getF64FloatAttr(us)));
  return builder.getDictionaryAttr(entries);
}

struct AutotunePass : impl::AutotuneBase<AutotunePass> {
  using AutotuneBase::AutotuneBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<std::vector<cost::CompressionSpec>> allowed =
        compressorsOption(module, compressor);
    if (!allowed)
      return signalPassFailure();
    FailureOr<Priced> priced = loadPriced(module, cluster, dp);
    if (failed(priced))
      return signalPassFailure();
    const cost::CostModel &model = *priced->model;
    TrainingFunction &training = priced->training;
    Problem &problem = training.problem;

    plan::AutotuneOptions options;
    options.compressors = *allowed;
    options.baseline.manualBuckets.assign(buckets.begin(), buckets.end());
    options.baseline.thresholdBytes = thresholdBytes;

    PlanChoice choice;
    Evaluation evaluation;
    std::map<std::string, double> baselineUs;
    if (strategy == "auto") {
      AutotuneResult result = autotune(problem, model, options);
      choice = std::move(result.best);
      evaluation = std::move(result.bestEval);
      baselineUs = std::move(result.baselineUs);
    } else {
      // A baseline with compressors allowed: the best of them, as the report compares.
      std::string error;
      std::optional<BaselineResult> baseline =
          bestBaseline(strategy, problem, model, options.baseline, *allowed, error);
      if (!baseline) {
        module.emitError("zen-autotune: ") << error;
        return signalPassFailure();
      }
      choice = std::move(baseline->choice);
      evaluation = std::move(baseline->evaluation);
      for (const std::string &name : baselineNames())
        baselineUs[name] =
            bestBaseline(name, problem, model, options.baseline, *allowed, error)
                ->evaluation.iterationUs;
    }
    if (failed(materializePlan(training, choice, problem.group)))
      return signalPassFailure();

    Builder builder(module.getContext());
    module->setAttr("zen.strategy", builder.getStringAttr(choice.strategy));
    module->setAttr("zen.cluster", builder.getStringAttr(model.cluster().name));
    module->setAttr("zen.world_size", builder.getI64IntegerAttr(problem.group.ranks));
    module->setAttr("zen.predicted",
                    timesAttr(builder, {{"iteration_us", evaluation.iterationUs},
                                        {"compute_us", evaluation.computeUs},
                                        {"exposed_comm_us", evaluation.exposedCommUs},
                                        {"lower_bound_us", lowerBoundUs(problem, model)}}));
    module->setAttr("zen.baselines", timesAttr(builder, baselineUs));
  }
};

struct PrintTimelinePass : impl::PrintTimelineBase<PrintTimelinePass> {
  using PrintTimelineBase::PrintTimelineBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<cost::CostModel> model = costModelFor(module, cluster);
    if (!model)
      return signalPassFailure();
    FailureOr<TrainingFunction> training = extractTraining(module, *model);
    if (failed(training))
      return signalPassFailure();
    cost::Group group = model->worldGroup();
    FailureOr<std::optional<PlanChoice>> existing = readPlan(*training, group);
    if (failed(existing))
      return signalPassFailure();
    training->problem.group = group;
    // Without synchronisation only the compute is on the timeline.
    PlanChoice choice = existing->value_or(PlanChoice{});
    std::vector<cost::SimTask> tasks = buildSimTasks(training->problem, choice, *model);
    cost::SimResult result = cost::simulate(*model, tasks);
    llvm::raw_ostream &out = llvm::outs();
    for (size_t t = 0; t < tasks.size(); ++t)
      out << "task " << tasks[t].name << " start " << llvm::format("%.3f", result.startUs[t])
          << " end " << llvm::format("%.3f", result.endUs[t]) << "\n";
    out << "iteration " << llvm::format("%.3f", result.iterationUs) << " compute "
        << llvm::format("%.3f", result.computeUs) << " exposed_comm "
        << llvm::format("%.3f", result.exposedCommUs) << "\n";
    markAllAnalysesPreserved();
  }
};

} // namespace
} // namespace zen
