//===- HybridRun.cpp - zenopt-run for large-model plans -------------------===//
#include "HybridRun.h"

#include "zenrt/Hybrid.h"
#include "zenrt/Runtime.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

namespace zen::run {
namespace {

using zenrt::hybrid::Config;
using zenrt::hybrid::Executor;

/// Tensors by name, indexed as the unpartitioned tensor.
using Tensors = std::map<std::string, std::vector<float>>;

/// The elements one rank holds, in the executor's order.
struct Held {
  std::vector<std::string> names;
  std::vector<size_t> nameOf;  // per element, into names
  std::vector<int64_t> indices;
  std::vector<float> values;

  template <typename Body> void forEach(Body body) const {
    for (size_t i = 0; i < values.size(); ++i)
      body(names[nameOf[i]], indices[i], values[i]);
  }
};

template <typename Visit> Held heldBy(Visit visit) {
  Held held;
  visit([&](const std::string &name, int64_t index, float value) {
    if (held.names.empty() || held.names.back() != name)
      held.names.push_back(name);
    held.nameOf.push_back(held.names.size() - 1);
    held.indices.push_back(index);
    held.values.push_back(value);
  });
  return held;
}

template <typename Visit> Tensors tensorsOf(Visit visit) {
  Tensors tensors;
  visit([&](const std::string &name, int64_t index, float value) {
    std::vector<float> &tensor = tensors[name];
    if (int64_t(tensor.size()) <= index)
      tensor.resize(size_t(index) + 1);
    tensor[size_t(index)] = value;
  });
  return tensors;
}

double largest(const std::vector<float> &values) {
  double most = 0;
  for (float v : values)
    most = std::max(most, double(std::abs(v)));
  return most;
}

std::string decompositionText(const zenrt::hybrid::Chunks &c) {
  return "attention " + std::to_string(c.attentionForward) + " forward, " +
         std::to_string(c.attentionBackward) + " backward; MLP " + std::to_string(c.mlpForward) +
         " forward, " + std::to_string(c.mlpBackward) + " backward";
}

bool decomposed(const zenrt::hybrid::Chunks &c) {
  return c.attentionForward > 1 || c.attentionBackward > 1 || c.mlpForward > 1 ||
         c.mlpBackward > 1;
}

} // namespace

int runHybrid(const RunnerOptions &options, const zenrt::Plan &plan, int rank, int ranks) {
  const Config config = zenrt::hybrid::configOf(plan, options.planPath);
  Aggregate aggregate(options.timeoutSeconds, rank);
  aggregate.requireSamePlan(plan);
  zenrt::hybrid::Options run;
  run.seed = options.seed;
  run.timeoutSeconds = options.timeoutSeconds;

  zenrt::hybrid::Options faulty = run;
  faulty.programStarts = [&options] { options.fault("collectives"); };
  Executor executor(config, faulty);
  std::vector<double> elapsed;
  const zenrt::hybrid::StepResult first = executor.step();
  elapsed.push_back(first.elapsedUs);
  const Held gradients = heldBy([&](auto v) { executor.forEachGradient(v); });
  const Held weights = heldBy([&](auto v) { executor.forEachWeight(v); });

  // The unpartitioned model, every data-parallel rank's micro-batches, on this rank alone.
  MPI_Comm self = MPI_COMM_SELF;
  double referenceLoss = 0, gradientError = 0, weightError = 0;
  {
    Executor reference(zenrt::hybrid::unpartitioned(config), run, &self);
    referenceLoss = reference.step().loss;
    const Tensors referenceGradients =
        tensorsOf([&](auto v) { reference.forEachGradient(v); });
    const Tensors referenceWeights = tensorsOf([&](auto v) { reference.forEachWeight(v); });
    std::map<std::string, double> scale;
    for (const auto &[name, values] : referenceGradients)
      scale[name] = std::max(largest(values), 1e-30);
    // Adam's first step moves every weight by about the learning rate whatever the
    // gradient's size, so weights are compared where the gradient is well above rounding.
    const double rate = run.learningRate;
    gradients.forEach([&](const std::string &name, int64_t index, float value) {
      const float expected = referenceGradients.at(name)[size_t(index)];
      gradientError = std::max(gradientError, std::abs(double(value) - expected) / scale.at(name));
    });
    weights.forEach([&](const std::string &name, int64_t index, float value) {
      const float gradient = referenceGradients.at(name)[size_t(index)];
      if (std::abs(gradient) < 1e-3 * scale.at(name))
        return;
      const double step = config.adam ? rate : rate * scale.at(name);
      weightError = std::max(weightError,
                             std::abs(double(value) - referenceWeights.at(name)[size_t(index)]) /
                                 step);
    });
  }
  const double lossError = std::abs(first.loss - referenceLoss) / std::max(referenceLoss, 1e-30);
  // Partial sums in another order: a few ulps of each tensor's largest gradient; the weights
  // within 5% of one step.
  bool ok = gradientError <= 1e-3 && weightError <= 0.05 && lossError <= 1e-4;

  std::string undecomposedVerdict = "not decomposed";
  bool identical = true;
  if (decomposed(config.chunks)) {
    Config plain = config;
    plain.chunks = zenrt::hybrid::Chunks{};
    Executor undecomposed(plain, run);
    const double plainLoss = undecomposed.step().loss;
    const Held plainGradients = heldBy([&](auto v) { undecomposed.forEachGradient(v); });
    const Held plainWeights = heldBy([&](auto v) { undecomposed.forEachWeight(v); });
    auto same = [](const Held &a, const Held &b) {
      return a.values.size() == b.values.size() &&
             std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)) == 0;
    };
    identical = std::memcmp(&plainLoss, &first.loss, sizeof plainLoss) == 0 &&
                same(plainGradients, gradients) && same(plainWeights, weights);
    ok &= identical;
  }

  for (int i = 1; i < options.iterations; ++i)
    elapsed.push_back(executor.step().elapsedUs);

  const size_t skip = elapsed.size() > 1 ? 1 : 0;  // the first step warms up
  double sum = 0;
  for (size_t i = skip; i < elapsed.size(); ++i)
    sum += elapsed[i];
  options.fault("summary");
  const double measured =
      aggregate.reduce(sum / double(elapsed.size() - skip), MPI_MAX);
  const double best = aggregate.reduce(
      *std::min_element(elapsed.begin() + std::ptrdiff_t(skip), elapsed.end()), MPI_MAX);
  const bool allOk = aggregate.reduce(ok ? 0 : 1, MPI_MAX) == 0;
  const bool allIdentical = aggregate.reduce(identical ? 0 : 1, MPI_MAX) == 0;
  gradientError = aggregate.reduce(gradientError, MPI_MAX);
  weightError = aggregate.reduce(weightError, MPI_MAX);
  const double messages = aggregate.reduce(double(first.messagesChecked), MPI_SUM);
  if (decomposed(config.chunks))
    undecomposedVerdict = allIdentical ? "identical" : "differs";

  const nlohmann::json parallel = nlohmann::json::parse(plan.parallel);
  const double predicted = parallel.at("iteration_us").get<double>();
  if (rank == 0) {
    const std::string layout = "tp " + std::to_string(config.tp) + " x pp " +
                               std::to_string(config.pp) + " x dp " + std::to_string(config.dp);
    if (options.json) {
      nlohmann::ordered_json out;
      out["plan"] = options.planPath;
      out["ranks"] = ranks;
      out["iterations"] = options.iterations;
      out["parallel"] = {{"tp", config.tp},
                         {"pp", config.pp},
                         {"dp", config.dp},
                         {"zero", config.zero},
                         {"sequence_parallel", config.sequenceParallel},
                         {"schedule", parallel.at("schedule")},
                         {"micro_batches", config.microBatches},
                         {"decomposition", parallel.at("decomposition")}};
      out["predicted_iteration_us"] = predicted;
      out["measured_iteration_us"] = measured;
      out["measured_best_iteration_us"] = best;
      out["loss"] = first.loss;
      out["reference_loss"] = referenceLoss;
      out["max_gradient_error"] = gradientError;
      out["max_weight_error"] = weightError;
      out["pipeline_messages"] = int64_t(messages);
      out["undecomposed"] = undecomposedVerdict;
      out["numerics"] = allOk ? "ok" : "failed";
      std::printf("%s\n", out.dump(2).c_str());
    } else {
      std::printf("plan %s: %d ranks, %s, ZeRO %d, sequence parallel %s, %s, %lld micro-batches "
                  "of %lld, %d iterations\n",
                  options.planPath.c_str(), ranks, layout.c_str(), config.zero,
                  config.sequenceParallel ? "on" : "off",
                  parallel.at("schedule").get<std::string>().c_str(),
                  static_cast<long long>(config.microBatches),
                  static_cast<long long>(config.microBatch), options.iterations);
      std::printf("  TP decomposition      %s\n", decompositionText(config.chunks).c_str());
      std::printf("  predicted iteration   %12.1f us (on %s)\n", predicted,
                  plan.cluster.name.c_str());
      std::printf("  measured iteration    %12.1f us (mean, slowest rank; best %.1f us)\n",
                  measured, best);
      std::printf("  loss                  %.6f (unpartitioned model %.6f)\n", first.loss,
                  referenceLoss);
      std::printf("  gradients             max error %.3g of each tensor's largest "
                  "(unpartitioned model)\n",
                  gradientError);
      std::printf("  weights after step    max error %.3g of a step\n", weightError);
      std::printf("  pipeline messages     %lld arrived intact\n",
                  static_cast<long long>(messages));
      std::printf("  undecomposed run      %s\n", undecomposedVerdict.c_str());
      std::printf("numerics: %s\n", allOk ? "ok" : "FAILED");
    }
    std::fflush(stdout);
  }
  return allOk ? 0 : 1;
}

} // namespace zen::run
