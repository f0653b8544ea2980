//===- MoeRun.h - zenopt-run for plans with Mixture-of-Experts layers -*- C++ -*-===//
//
// A plan with `moe` runs each of its MoE layers through libzenrt (zenrt/Moe.h): forward and
// backward on deterministic inputs and weights of the layer's shape, the experts spread over
// each group of ep consecutive ranks, with the plan's degrees and all-to-all algorithm; with
// --device in CUDA device memory over NCCL (one zenrt::moe::Communicator per group). The
// first run is checked against the same layer unpipelined (r = 1, flat: bit for bit) and
// against a reference computed on each rank alone, with no communication (within fp32
// rounding); the rest are timed next to the plan's forward_us and backward_us.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_ZENOPT_RUN_MOERUN_H
#define ZEN_TOOLS_ZENOPT_RUN_MOERUN_H

#include "Agreement.h"
#include "zenrt/Plan.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace zen::run {

/// An MoE plan's layers inside its training step: the data-parallel runner (main.cpp) calls
/// forward and backward at the schedule's compute tasks where the plan's experts run
/// (`moe.layers[].forward_task` / `backward_task`), so each layer's all-to-alls run beside
/// the gradient sync the runtime drives, and the layer's expert gradients become its expert
/// tensors' gradients. Inputs and weights as runMoe draws them. Layers of plans without
/// tasks (written before them) do not run in the step. A layer planned `serial` holds the
/// gradient sync's collectives (`holdSync(true)`, then false) while it runs: none starts
/// meanwhile. Construction is collective (it splits MPI_COMM_WORLD into the ep groups).
class MoeStep {
public:
  MoeStep(const RunnerOptions &options, const zenrt::Plan &plan, int rank,
          std::function<void(bool)> holdSync);
  ~MoeStep();
  MoeStep(const MoeStep &) = delete;
  MoeStep &operator=(const MoeStep &) = delete;

  /// How many layers run in the step, and how many of them hold the sync.
  size_t layerCount() const;
  size_t serialCount() const;
  /// The FLOPs of schedule task `task` that the layers run themselves.
  int64_t layerFlops(int64_t task) const;
  /// The forward of every layer whose experts start task `task`.
  void forward(int64_t task);
  /// The backward of every layer whose experts end task `task`; each expert gradient goes
  /// to `deliver(tensor name, values)` (one rank's experts, the plan tensor's layout).
  void backward(int64_t task,
                const std::function<void(const std::string &, const std::vector<float> &)> &deliver);
  /// Each layer's last step against the same layer run alone with the plan's degrees, on the
  /// same inputs: "" when every output and gradient is bit-identical, else the first
  /// difference. Collective.
  std::string checkAgainstAlone();

private:
  struct State;
  std::unique_ptr<State> state;
};

/// Runs and checks the plan's MoE layers on this rank; returns the exit status (0 ok,
/// 1 numerics failed). Throws zenrt::PlanError for a `moe` section the runtime cannot run and
/// zenrt::Error (ZENRT_ERR_MISMATCH) for a plan made for another number of ranks.
int runMoe(const RunnerOptions &options, const zenrt::Plan &plan, int rank, int ranks);

} // namespace zen::run

#endif // ZEN_TOOLS_ZENOPT_RUN_MOERUN_H
