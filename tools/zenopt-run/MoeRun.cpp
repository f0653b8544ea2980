//===- MoeRun.cpp - zenopt-run for plans with Mixture-of-Experts layers ---===//
#include "MoeRun.h"

#include "Collectives.h"
#include "MoeCheck.h"
#include "zenrt/Moe.h"
#include "zenrt/Runtime.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

namespace zen::run {
namespace {

using zen::cli::MoeResult;
using zen::cli::MoeWeights;
using zenrt::moe::Layer;
using zenrt::moe::PlannedLayer;

uint64_t seedOf(uint64_t base, size_t layer, uint64_t stream) {
  return base + (uint64_t(layer) + 1) * 1000003u + stream;
}

/// Which biases a layer's experts have: "fc1 and fc2", "fc1", "fc2" or "none".
const char *biasesOf(const PlannedLayer &layer) {
  return layer.fc1Bias && layer.fc2Bias ? "fc1 and fc2"
         : layer.fc1Bias                ? "fc1"
         : layer.fc2Bias                ? "fc2"
                                        : "none";
}

/// An [experts][capacity][hidden] buffer drawn from a seed.
std::vector<float> bufferOf(const Layer &shape, uint64_t seed) {
  return zen::cli::DeterministicValues(seed).take(
      size_t(shape.experts * shape.capacity * shape.hidden));
}

/// Rank `rank`'s dispatch buffer and output gradient for layer `index`.
std::vector<float> dispatchedOf(const Layer &shape, uint64_t seed, size_t index, int rank) {
  return bufferOf(shape, seedOf(seed, index, 1 + 2 * uint64_t(rank)));
}
std::vector<float> combinedGradientOf(const Layer &shape, uint64_t seed, size_t index, int rank) {
  return bufferOf(shape, seedOf(seed, index, 2 + 2 * uint64_t(rank)));
}

/// How the plan runs `layer`'s all-to-alls (the degree is set per phase).
zenrt::moe::Schedule scheduleOf(const PlannedLayer &layer, const zenrt::moe::PlannedMoe &planned,
                                double timeoutSeconds) {
  zenrt::moe::Schedule schedule;
  schedule.algorithm = layer.algorithm;
  schedule.ranksPerNode = planned.ranksPerNode;
  schedule.timeoutSeconds = timeoutSeconds;
  schedule.tokens = layer.tokens;
  return schedule;
}

zenrt::moe::Memory memoryOf(const RunnerOptions &options) {
  return options.device ? zenrt::moe::Memory::Device : zenrt::moe::Memory::Host;
}

} // namespace

/// One layer of the step: its shape with this rank's experts, its rank's inputs, the
/// schedule, and what its last step produced.
struct MoeStep::State {
  struct StepLayer {
    PlannedLayer planned;
    Layer layer;
    std::unique_ptr<MoeWeights> weights;
    std::vector<float> dispatched, combinedGradient;
    /// The weights and buffers in the communicator's memory.
    std::unique_ptr<zen::cli::StagedLayer> staged;
    zenrt::moe::Schedule schedule;
    zenrt::moe::Activations kept;
    MoeResult result;
  };
  std::unique_ptr<GroupComm> group;
  std::unique_ptr<zenrt::moe::Communicator> ranks; // over the group
  std::vector<StepLayer> layers;
  std::function<void(bool)> holdSync;

  /// Runs `body` for `step`, holding the gradient sync around it when planned serial.
  template <typename Body> void inTurn(const StepLayer &step, Body body) {
    if (step.planned.serial)
      holdSync(true);
    body();
    if (step.planned.serial)
      holdSync(false);
  }
};

MoeStep::MoeStep(const RunnerOptions &options, const zenrt::Plan &plan, int rank,
                 std::function<void(bool)> holdSync)
    : state(std::make_unique<State>()) {
  state->holdSync = std::move(holdSync);
  const zenrt::moe::PlannedMoe planned = zenrt::moe::plannedMoe(plan, options.planPath);
  const int ep = int(planned.ep), member = rank % ep;
  state->group = std::make_unique<GroupComm>(rank / ep, member);
  state->ranks = std::make_unique<zenrt::moe::Communicator>(&state->group->comm,
                                                            memoryOf(options),
                                                            options.timeoutSeconds);
  for (size_t index = 0; index < planned.layers.size(); ++index) {
    const PlannedLayer &plannedLayer = planned.layers[index];
    if (plannedLayer.forwardTask < 0 || plannedLayer.backwardTask < 0)
      continue;
    State::StepLayer step;
    step.planned = plannedLayer;
    step.layer = plannedLayer.shape;
    // The inputs and weights runMoe draws for the layer (the same seeds).
    step.weights = std::make_unique<MoeWeights>(step.layer, seedOf(options.seed, index, 0),
                                                plannedLayer.fc1Bias, plannedLayer.fc2Bias);
    step.weights->lend(step.layer, member * (step.layer.experts / ep));
    step.dispatched = dispatchedOf(step.layer, options.seed, index, rank);
    step.combinedGradient = combinedGradientOf(step.layer, options.seed, index, rank);
    step.schedule = scheduleOf(plannedLayer, planned, options.timeoutSeconds);
    step.staged = std::make_unique<zen::cli::StagedLayer>(step.layer, *state->ranks,
                                                          step.dispatched, step.combinedGradient);
    step.result.combined.assign(step.dispatched.size(), NAN);
    step.result.dispatchedGradient.assign(step.dispatched.size(), NAN);
    state->layers.push_back(std::move(step));
  }
}

MoeStep::~MoeStep() = default;

size_t MoeStep::layerCount() const { return state->layers.size(); }

size_t MoeStep::serialCount() const {
  return size_t(std::count_if(state->layers.begin(), state->layers.end(),
                              [](const State::StepLayer &step) { return step.planned.serial; }));
}

int64_t MoeStep::layerFlops(int64_t task) const {
  int64_t flops = 0;
  for (const State::StepLayer &step : state->layers) {
    if (step.planned.forwardTask == task)
      flops += step.planned.forwardFlops;
    if (step.planned.backwardTask == task)
      flops += step.planned.backwardFlops;
  }
  return flops;
}

void MoeStep::forward(int64_t task) {
  for (State::StepLayer &step : state->layers)
    if (step.planned.forwardTask == task) {
      step.schedule.chunks = step.planned.forwardChunks;
      state->inTurn(step, [&] {
        zenrt::moe::forward(step.staged->layer, step.schedule, step.staged->dispatched(),
                            step.staged->combined(), *state->ranks, &step.kept);
      });
      step.result.combined = step.staged->combinedOnHost();
    }
}

void MoeStep::backward(
    int64_t task,
    const std::function<void(const std::string &, const std::vector<float> &)> &deliver) {
  // Backward meets the layers in reverse model order.
  for (auto step = state->layers.rbegin(); step != state->layers.rend(); ++step) {
    if (step->planned.backwardTask != task)
      continue;
    step->schedule.chunks = step->planned.backwardChunks;
    state->inTurn(*step, [&] {
      step->result.gradients = zenrt::moe::backward(
          step->staged->layer, step->schedule, step->kept, step->staged->combinedGradient(),
          step->staged->dispatchedGradient(), *state->ranks);
    });
    step->result.dispatchedGradient = step->staged->dispatchedGradientOnHost();
    // The parameters in operand order: fc1, its bias if any, fc2, its bias if any.
    const zenrt::moe::Gradients &g = step->result.gradients;
    std::vector<const std::vector<float> *> values = {&g.fc1};
    if (step->planned.fc1Bias)
      values.push_back(&g.fc1Bias);
    values.push_back(&g.fc2);
    if (step->planned.fc2Bias)
      values.push_back(&g.fc2Bias);
    for (size_t p = 0; p < values.size() && p < step->planned.parameters.size(); ++p)
      deliver(step->planned.parameters[p], *values[p]);
  }
}

std::string MoeStep::checkAgainstAlone() {
  for (State::StepLayer &step : state->layers) {
    const MoeResult alone = zen::cli::runLayer(
        step.layer, step.schedule, step.planned.forwardChunks, step.planned.backwardChunks,
        step.dispatched, step.combinedGradient, *state->ranks, [] {});
    const std::string difference = zen::cli::firstDifference(step.result, alone);
    if (!difference.empty())
      return "MoE layer " + step.planned.name + ": " + difference +
             " differs from the layer run alone";
  }
  return "";
}

int runMoe(const RunnerOptions &options, const zenrt::Plan &plan, int rank, int ranks) {
  if (plan.cluster.worldSize != ranks)
    throw zenrt::Error(ZENRT_ERR_MISMATCH, options.planPath + ": the plan was made for " +
                                               std::to_string(plan.cluster.worldSize) +
                                               " ranks but the job has " + std::to_string(ranks));
  const zenrt::moe::PlannedMoe planned = zenrt::moe::plannedMoe(plan, options.planPath);
  Aggregate aggregate(options.timeoutSeconds, rank);
  aggregate.requireSamePlan(plan);

  // Each group of ep consecutive ranks holds every expert once (docs/design.md).
  const int ep = int(planned.ep), member = rank % ep, groupFirst = rank - member;
  GroupComm group(rank / ep, member);
  zenrt::moe::Communicator comm(&group.comm, memoryOf(options), options.timeoutSeconds);
  auto barrier = [&] { aggregate.reduce(0, MPI_MAX); };

  struct LayerReport {
    std::string identity;
    double forwardUs = 0, backwardUs = 0, maxError = 0;
  };
  std::vector<LayerReport> reports;
  bool ok = true;
  for (size_t index = 0; index < planned.layers.size(); ++index) {
    const PlannedLayer &plannedLayer = planned.layers[index];
    Layer layer = plannedLayer.shape;
    const int64_t local = layer.experts / ep;
    const MoeWeights weights(layer, seedOf(options.seed, index, 0), plannedLayer.fc1Bias,
                             plannedLayer.fc2Bias);
    weights.lend(layer, member * local);
    std::vector<std::vector<float>> dispatched, combinedGradient;
    for (int s = 0; s < ep; ++s) {
      // Each rank's buffers, from seeds of its rank in the world.
      dispatched.push_back(dispatchedOf(layer, options.seed, index, groupFirst + s));
      combinedGradient.push_back(combinedGradientOf(layer, options.seed, index, groupFirst + s));
    }
    zenrt::moe::Schedule schedule = scheduleOf(plannedLayer, planned, options.timeoutSeconds);
    double forwardUs = 0, backwardUs = 0;
    auto runPlanned = [&] {
      return zen::cli::runLayer(layer, schedule, plannedLayer.forwardChunks,
                                plannedLayer.backwardChunks, dispatched[size_t(member)],
                                combinedGradient[size_t(member)], comm, barrier, &forwardUs,
                                &backwardUs);
    };
    const MoeResult checked = runPlanned();
    std::vector<double> forwardTimes{forwardUs}, backwardTimes{backwardUs};
    zenrt::moe::Schedule flat = schedule;
    flat.algorithm = zenrt::moe::AllToAll::Flat;
    const std::string difference = zen::cli::firstDifference(
        checked, zen::cli::runLayer(layer, flat, 1, 1, dispatched[size_t(member)],
                                    combinedGradient[size_t(member)], comm, barrier));
    const bool same = difference.empty();
    const double maxError = zen::cli::maxRelativeError(
        checked, zen::cli::referenceRun(layer, weights, dispatched, combinedGradient, member,
                                        schedule.tokens));
    const bool layerOk = same && maxError <= zen::cli::referenceTolerance(schedule.tokens);
    if (!layerOk)
      std::fprintf(stderr, "zenopt-run: rank %d: MoE layer %zu (%s): %s\n", rank, index,
                   plannedLayer.name.c_str(),
                   (!same ? difference + " differs from the unpipelined run's"
                          : "max error " + std::to_string(maxError) +
                                " of the largest value against the reference")
                       .c_str());
    ok &= layerOk;

    for (int i = 1; i < options.iterations; ++i) {
      runPlanned();
      forwardTimes.push_back(forwardUs);
      backwardTimes.push_back(backwardUs);
    }
    auto meanAfterWarmUp = [](const std::vector<double> &values) {
      const size_t skip = values.size() > 1 ? 1 : 0; // the checked run warms up
      double sum = 0;
      for (size_t i = skip; i < values.size(); ++i)
        sum += values[i];
      return sum / double(values.size() - skip);
    };
    LayerReport report;
    options.fault("summary");
    report.forwardUs = aggregate.reduce(meanAfterWarmUp(forwardTimes), MPI_MAX);
    report.backwardUs = aggregate.reduce(meanAfterWarmUp(backwardTimes), MPI_MAX);
    report.maxError = aggregate.reduce(maxError, MPI_MAX);
    report.identity = aggregate.reduce(same ? 0 : 1, MPI_MAX) == 0 ? "identical" : "differs";
    reports.push_back(report);
  }
  const bool allOk = aggregate.reduce(ok ? 0 : 1, MPI_MAX) == 0;

  if (rank == 0) {
    auto algorithmName = [](zenrt::moe::AllToAll a) {
      return a == zenrt::moe::AllToAll::Hierarchical ? "2d" : "flat";
    };
    if (options.json) {
      nlohmann::ordered_json out;
      out["plan"] = options.planPath;
      out["ranks"] = ranks;
      out["iterations"] = options.iterations;
      out["ep"] = planned.ep;
      out["layers"] = nlohmann::ordered_json::array();
      for (size_t l = 0; l < planned.layers.size(); ++l) {
        const PlannedLayer &p = planned.layers[l];
        out["layers"].push_back({{"name", p.name},
                                 {"experts", p.shape.experts},
                                 {"capacity", p.shape.capacity},
                                 {"hidden", p.shape.hidden},
                                 {"ffn", p.shape.ffn},
                                 {"biases", biasesOf(p)},
                                 {"forward", p.forwardChunks},
                                 {"backward", p.backwardChunks},
                                 {"all_to_all", algorithmName(p.algorithm)},
                                 {"token_compression", zen::cli::tokenFormatName(p.tokens)},
                                 {"predicted_forward_us", p.forwardUs},
                                 {"measured_forward_us", reports[l].forwardUs},
                                 {"predicted_backward_us", p.backwardUs},
                                 {"measured_backward_us", reports[l].backwardUs},
                                 {"unpipelined", reports[l].identity},
                                 {"max_error", reports[l].maxError}});
      }
      out["numerics"] = allOk ? "ok" : "failed";
      if (!options.gradientSync.is_null())
        out["gradient_sync"] = options.gradientSync;
      std::printf("%s\n", out.dump(2).c_str());
    } else {
      std::printf("plan %s: %d ranks, ep %lld (%d groups, %lld ranks per node), %d iterations, "
                  "%zu MoE layers\n",
                  options.planPath.c_str(), ranks, static_cast<long long>(planned.ep), ranks / ep,
                  static_cast<long long>(planned.ranksPerNode), options.iterations,
                  planned.layers.size());
      for (size_t l = 0; l < planned.layers.size(); ++l) {
        const PlannedLayer &p = planned.layers[l];
        std::printf("  layer %zu %s: %lld experts, capacity %lld, hidden %lld, ffn %lld, biases %s; "
                    "forward r=%lld, backward r=%lld, %s, tokens %s\n",
                    l, p.name.c_str(), static_cast<long long>(p.shape.experts),
                    static_cast<long long>(p.shape.capacity),
                    static_cast<long long>(p.shape.hidden), static_cast<long long>(p.shape.ffn),
                    biasesOf(p),
                    static_cast<long long>(p.forwardChunks),
                    static_cast<long long>(p.backwardChunks), algorithmName(p.algorithm),
                    zen::cli::tokenFormatName(p.tokens));
        std::printf("    forward  measured %10.1f us, predicted %10.1f us (on %s)\n",
                    reports[l].forwardUs, p.forwardUs, plan.cluster.name.c_str());
        std::printf("    backward measured %10.1f us, predicted %10.1f us\n", reports[l].backwardUs,
                    p.backwardUs);
        std::printf("    unpipelined run (r=1, flat)  %s\n", reports[l].identity.c_str());
        std::printf("    reference, no communication  max error %.3g of each tensor's largest "
                    "(at most %.3g)\n",
                    reports[l].maxError, zen::cli::referenceTolerance(p.tokens));
      }
      std::printf("numerics: %s\n", allOk ? "ok" : "FAILED");
    }
    std::fflush(stdout);
  }
  return allOk ? 0 : 1;
}

} // namespace zen::run
