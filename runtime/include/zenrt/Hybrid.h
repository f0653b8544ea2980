//===- zenrt/Hybrid.h - executing tp x pp x dp plans on CPU ranks ---------===//
//
// The large-model half of a plan file (`parallel`, docs/plan-format.md) executed over MPI
// (docs/design.md "Executing hybrid plans"): every rank runs its pipeline stage's program
// (Megatron's 1F1B or interleaved order of F<m>/B<m> steps) on a GPT decoder of the plan's
// shape with real CPU compute (Eigen GEMMs of each step's shapes, causal attention, GELU,
// cross-entropy), tensor-parallel collectives split into the plan's decomposition degree
// per region and phase, activations and gradients sent between stages, then each stage's
// data-parallel gradient sync (all-reduce, or ZeRO's reduce-scatter + all-gather; ZeRO-3
// also gathers each layer's weights before its use) and the plan's optimizer step.
//
// Every reduction adds the ranks' partials in rank order and no GEMM's row depends on its
// neighbours, so the decomposition degree changes no bit of the result.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_HYBRID_H
#define ZENRT_HYBRID_H

#include "zenrt/Plan.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace zenrt::hybrid {

struct ModelShape {
  int64_t layers = 1, hidden = 1, heads = 1, ffn = 1, seq = 1, vocab = 1;
};

/// Chunks each tensor-parallel region's GEMMs and collectives split into along the tokens.
using Chunks = DecompositionChunks;

/// One step of a stage's program: forward or backward of a micro-batch on one of the
/// stage's model chunks (always 0 under 1F1B).
struct Step {
  bool forward = true;
  int64_t microBatch = 0;
  int64_t chunk = 0;
};

struct StageLayout {
  int64_t firstLayer = 0, layers = 0;  // 1F1B; interleaved stages hold every pp-th chunk
  bool embedding = false, head = false;
  std::vector<Step> program;
};

/// The plan's configuration (zenrt::readParallelSection) with what only this executor
/// reads: the model, the optimizer and each stage's layers and program.
struct Config : ParallelConfiguration {
  ModelShape model;
  bool adam = true;  // else SGD
  std::vector<StageLayout> stages;
};

/// The executable configuration of a large-model plan. Throws PlanError(BadInput) naming
/// `source` and the field for anything the executor cannot run (a program that is not a
/// schedule of every micro-batch, layers that do not split, chunks that do not divide).
Config configOf(const Plan &plan, const std::string &source);

/// The same model, data and optimizer on one rank: no partitioning, every data-parallel
/// rank's micro-batches in order, forward then backward each. The numerics reference.
Config unpartitioned(const Config &config);

struct Options {
  uint64_t seed = 1;            // weights and tokens
  double timeoutSeconds = 300;  // every wait fails after this (ZENRT_ERR_TIMEOUT)
  double learningRate = 1e-3;
  /// Called when every rank has passed a step's opening barrier, before the stage's
  /// program runs (zenopt-run's fault injection loses a rank there, in the middle of a
  /// step); may be empty.
  std::function<void()> programStarts;
};

struct StepResult {
  double loss = 0;          // mean cross-entropy over the global batch (every rank)
  double elapsedUs = 0;     // this rank's time for the step
  int64_t messagesChecked = 0;  // pipeline messages received and found intact
};

/// One rank's part of the run. Collective over `comm` (an MPI_Comm*, null: MPI_COMM_WORLD;
/// MPI must be initialised with MPI_THREAD_MULTIPLE: over more than one rank a thread answers
/// the other ranks' queries, so that a wait that times out names the ranks lost, by their
/// rank in MPI_COMM_WORLD); its size must be tp x pp x dp. Ranks are placed as Megatron
/// places them: tensor parallel innermost, then data parallel, then pipeline stages.
/// Throws zenrt::Error (ZENRT_ERR_MISMATCH for a wrong world size, ZENRT_ERR_TIMEOUT,
/// ZENRT_ERR_BACKEND, ZENRT_ERR_INTERNAL for a damaged pipeline message).
class Executor {
public:
  Executor(const Config &config, const Options &options, const void *comm = nullptr);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// One training iteration: the stage's program, the data-parallel sync, the optimizer.
  StepResult step();

  /// Every element this rank holds of the last step's synchronised gradients (its stage's
  /// tensors, its tensor-parallel slice; under ZeRO its data-parallel shard): the tensor's
  /// name ("layer3.w1", "embedding", ...), the element's index in the unpartitioned tensor.
  void forEachGradient(const std::function<void(const std::string &, int64_t, float)> &visit) const;
  /// The same for the weights after the optimizer step (ZeRO-3: the held shard).
  void forEachWeight(const std::function<void(const std::string &, int64_t, float)> &visit) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace zenrt::hybrid

#endif // ZENRT_HYBRID_H
