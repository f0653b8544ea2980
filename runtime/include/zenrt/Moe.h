//===- zenrt/Moe.h - pipelined Mixture-of-Experts layer (C++ API) ----------===//
//
// One MoE layer's forward and backward, in host memory over MPI or in CUDA device memory over
// NCCL (docs/design.md "Mixture of Experts"): every rank's dispatch buffer goes to the ranks that hold the experts (all-to-all),
// each rank runs its experts' MLPs, and the results come back (all-to-all); the backward sends
// the output gradients the same way and returns the input gradients. Split into r chunks
// along the capacity, the chunks pipeline: the next chunk's exchange is in flight while this
// one computes, and its results return while the next computes. A row's result does not
// depend on the chunk it travels in, and the weight gradients add fixed blocks of rows in one
// order, so every r gives bit-identical outputs and gradients.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_MOE_H
#define ZENRT_MOE_H

#include "zenrt/Plan.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zenrt::moe {

enum class AllToAll {
  Flat,        // one all-to-all over every rank
  Hierarchical // Tutel's 2D: among the ranks of a node, then among those of one local index
};

struct Layer {
  int64_t experts = 0; // over all ranks; each of the n ranks holds experts / n of them
  int64_t hidden = 0;
  int64_t ffn = 0;
  int64_t capacity = 0; // rows per expert each rank sends
  /// The rank's experts, one after another, row-major: fc1 [ffn x hidden], fc1Bias [ffn],
  /// fc2 [hidden x ffn], fc2Bias [hidden]. Each expert computes
  /// fc2 relu(fc1 x + fc1Bias) + fc2Bias per row; a null bias is a layer without it.
  const float *fc1 = nullptr;
  const float *fc1Bias = nullptr;
  const float *fc2 = nullptr;
  const float *fc2Bias = nullptr;
};

/// How rows travel in every all-to-all of the layer (dispatch and combine, and their
/// gradients): as fp32, or converted row by row and back to fp32 on arrival: to IEEE fp16 or
/// bf16 (round to nearest even), or to int8 with the row's scale max |x| / 127 as an fp32
/// before its values (q = x / scale rounded to nearest even).
enum class TokenFormat { None, Fp16, Bf16, Int8 };

struct Schedule {
  int64_t chunks = 1; // r: pieces of the capacity, pipelined
  AllToAll algorithm = AllToAll::Flat;
  int64_t ranksPerNode = 1;    // Hierarchical: ranks fill nodes of this many in order
  double timeoutSeconds = 300; // every wait fails after this (ZENRT_ERR_TIMEOUT)
  TokenFormat tokens = TokenFormat::None;
};

/// Where a layer's weights and buffers live, and what carries its all-to-alls.
enum class Memory {
  Host,  // host memory; MPI
  Device // the memory of this process's CUDA device (MPI_COMM_WORLD rank % devices); NCCL
};

/// The ranks a layer runs over, made collectively over `comm` (an MPI_Comm*, null:
/// MPI_COMM_WORLD; MPI must be initialised with MPI_THREAD_MULTIPLE) once for any number of
/// layers and steps (a Device communicator initialises NCCL, which takes a while); start-up
/// waits are bounded by `timeoutSeconds`. Over more than one rank, a thread answers the other
/// ranks' queries for as long as it lives, so that an exchange that times out names the ranks
/// lost, by their rank in MPI_COMM_WORLD. Throws zenrt::Error: ZENRT_ERR_BACKEND when MPI, CUDA or NCCL fail, and
/// for Device when libzenrt was built without CUDA or the rank sees no CUDA device;
/// ZENRT_ERR_TIMEOUT when a rank does not join in time.
class Communicator {
public:
  explicit Communicator(const void *comm = nullptr, Memory memory = Memory::Host,
                        double timeoutSeconds = 300);
  ~Communicator();
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  Memory memory() const;
  int rank() const;
  int size() const;
  /// This process's CUDA device (where the layer's buffers must be); -1 for Host.
  int device() const;

  struct State; // Moe.cpp
  State &state() { return *state_; }

private:
  std::unique_ptr<State> state_;
};

/// What a forward keeps for the backward on the ranks that hold the experts, in the layer's
/// memory, ordered by local expert, capacity row, source rank (so that neither depends on the
/// chunks): the rows each expert received and its hidden units after the ReLU.
struct Activations {
  Memory memory = Memory::Host;
  std::shared_ptr<float> rows;  // [experts / ranks][capacity][ranks][hidden]
  std::shared_ptr<float> units; // [experts / ranks][capacity][ranks][ffn]
  size_t rowFloats = 0, unitFloats = 0;
};

/// The gradients of the rank's experts, laid out as Layer's weights (a bias the layer does
/// not have: empty), in host memory (a Device layer's are copied there when backward returns).
struct Gradients {
  std::vector<float> fc1, fc1Bias, fc2, fc2Bias;
};

/// Runs the layer: `dispatched` and `combined` are [experts][capacity][hidden] (row e, c of
/// `combined` is expert e's output for row c of `dispatched`), and they and the layer's weights
/// are in the communicator's memory. Collective over `ranks`; complete on return. With `kept`,
/// stores what `backward` needs there. Throws zenrt::Error: ZENRT_ERR_INVALID_ARGUMENT for a
/// shape or schedule that does not fit (null weights, the ranks not dividing the experts, r not
/// dividing the capacity, ranksPerNode not dividing the ranks, a buffer or weight in other
/// memory than the communicator's), ZENRT_ERR_TIMEOUT naming the
/// rank, the exchange and the chunk for a wait that exceeded the timeout and the ranks that
/// did not answer (dead or hung), ZENRT_ERR_BACKEND
/// for an MPI, NCCL or CUDA error.
void forward(const Layer &layer, const Schedule &schedule, const float *dispatched, float *combined,
             Communicator &ranks, Activations *kept = nullptr);

/// The layer's backward from the gradient of `combined` ([experts][capacity][hidden]):
/// writes the gradient of `dispatched` (same shape) and returns the gradients of the rank's
/// experts, summed over every rank's rows. `kept` is what the forward of the same layer, over
/// the same ranks, stored (any schedule: the degrees of forward and backward may differ).
/// Collective over `ranks`; throws as `forward` does (ZENRT_ERR_INVALID_ARGUMENT also for
/// activations of another shape or memory).
Gradients backward(const Layer &layer, const Schedule &schedule, const Activations &kept,
                   const float *combinedGradient, float *dispatchedGradient, Communicator &ranks);

/// The same in host memory over `comm` (an MPI_Comm*, null: MPI_COMM_WORLD), with a
/// communicator made for the call.
void forward(const Layer &layer, const Schedule &schedule, const float *dispatched, float *combined,
             const void *comm = nullptr, Activations *kept = nullptr);
Gradients backward(const Layer &layer, const Schedule &schedule, const Activations &kept,
                   const float *combinedGradient, float *dispatchedGradient,
                   const void *comm = nullptr);

/// One MoE layer of a plan's `moe` section as the runtime executes it.
struct PlannedLayer {
  std::string name;
  Layer shape; // experts, hidden, ffn, capacity; no weights
  int64_t forwardChunks = 1, backwardChunks = 1;
  AllToAll algorithm = AllToAll::Flat;
  TokenFormat tokens = TokenFormat::None; // `token_compression`
  double forwardUs = 0, backwardUs = 0;   // predicted
  bool fc1Bias = true, fc2Bias = true;    // the experts have them
  /// `gradient_sync` "serial": the all-to-alls take turns with the gradient sync.
  bool serial = false;
  /// fc1, its bias if any, fc2, its bias if any: the plan's tensors of the experts.
  std::vector<std::string> parameters;
  /// The schedule's compute tasks (ids) the experts' forward and backward run in, and the
  /// FLOPs those tasks count for them; -1 and 0 in plans written before them.
  int64_t forwardTask = -1, backwardTask = -1;
  int64_t forwardFlops = 0, backwardFlops = 0;
};

/// A plan's `moe` section: experts spread over `ep` consecutive ranks (each group of ep ranks
/// holds every expert once), `ranksPerNode` of a group on each node.
struct PlannedMoe {
  int64_t ep = 1;
  int64_t ranksPerNode = 1;
  std::vector<PlannedLayer> layers;
};

/// Reads a validated plan's `moe` section. A layer's hidden and inter sizes are its `hidden`
/// and `ffn` (plans before them: derived from four `parameters`); its `parameters`, the plan
/// tensors of its experts' fc1, optional fc1 bias, fc2 and optional fc2 bias, in that order,
/// say which biases it has; the nodes come from the cluster spec's `gpus_per_node` (none: one
/// node). Throws PlanError(BadInput) naming `source` and the JSON path: no `moe`, parameters
/// that are not those tensors, an ep group that straddles nodes.
PlannedMoe plannedMoe(const Plan &plan, const std::string &source);

} // namespace zenrt::moe

#endif // ZENRT_MOE_H
