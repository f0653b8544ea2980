//===- zenrt/Plan.h - The plan file: structs, loader, validator, writer ---===//
//
// The plan file is the contract between zenopt's codegen (which writes it with
// writePlan) and libzenrt (which reads it with parsePlan/loadPlanFile). Both
// sides use this one definition; docs/plan-format.md documents every field.
// Free of LLVM/MLIR; errors are reported with exceptions (PlanError).
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_PLAN_H
#define ZENRT_PLAN_H

#include "zen/Errors.h"
#include "zen/SparseScheme.h"
#include "zen/SyncScheme.h"
#include "zen/Vocabulary.h"

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace zenrt {

/// The only format version this library reads and writes.
inline constexpr int64_t kPlanFormatVersion = 1;

/// A plan that is malformed (BadInput), cannot be read (Unreadable) or written
/// (Unwritable), or that writePlan was asked to write invalid (Internal). The
/// message names the file (or source) and the JSON path, e.g.
/// `plan.json: /buckets/3/collectives/0/chunks: must be >= 1`.
class PlanError : public zen::Error {
public:
  using Error::Error;
};

// Compression methods, devices and collective kinds are the shared vocabulary
// (zen/Vocabulary.h), spelled in the file as its tables spell them ("fp16",
// "cpu", "all_reduce"). The format has every collective kind but send_recv.
using zen::vocab::CollectiveKind;
using zen::vocab::CompressionMethod;
using zen::vocab::SyncScheme;
using zen::vocab::Device;
using zen::vocab::toString;

/// A schedule task's kind and phase are the vocabulary's too ("compute", "next_forward").
/// A SparseSync task (`sparse_tensor` names its gradient) never runs on the executor's
/// streams: zenrt::sparse::allReduce does it.
using zen::vocab::Phase;
using zen::vocab::TaskKind;

struct Generator {
  std::string name;     // e.g. "zenopt"
  std::string version;  // e.g. "0.1.0"
};

struct ModelInfo {
  std::string name;
  std::string hash;  // identity of the model file (opaque to the runtime)
};

struct ClusterInfo {
  std::string name;
  int64_t worldSize = 1;  // ranks the plan was made for; must equal the run's size
  /// The cluster description the plan was scored on, as compact JSON with
  /// sorted keys (optional; zenopt writes it so `zenopt simulate` re-scores
  /// the plan exactly). Opaque to the runtime.
  std::string spec;
};

/// One gradient tensor. `readyOrder` is its position in the backward pass
/// (0 = first gradient produced); the values form a permutation of 0..n-1.
struct TensorInfo {
  std::string name;
  int64_t elements = 0;
  std::string dtype = "f32";  // only "f32" in format version 1
  int64_t readyOrder = 0;
  /// > 1: an expert tensor whose experts spread over this many consecutive
  /// ranks (expert parallelism); `elements` is one rank's experts.
  int64_t expertParallel = 1;
};

/// The sparsity a sparse tensor's scheme was chosen for (docs/plan-format.md
/// "sparse_tensors"); the runtime checks and reports it, the scheme does not read it.
struct SparseStatistics {
  double density = 0;         // touched rows / rows, per rank per step
  std::vector<double> gamma;  // aggregated density / density after merging 1, 2, 4, ... ranks
  double skew = 0;            // share of the touched rows in the fullest of 8 range partitions
  std::string source = "model";  // "model" (documented default) or "measured"
  /// Optional (0 / empty when absent): what the cost model also priced the scheme from, so
  /// `zenopt simulate` re-scores the plan exactly. The same share over 8 hash partitions;
  /// the share of OmniReduce's blocks holding a touched row, and its growth as `gamma`.
  double hashSkew = 0;
  double blockDensity = 0;
  std::vector<double> blockGamma;
};

/// A row-sparse gradient (an embedding table's), synchronised by zenrt::sparse::allReduce
/// with its own scheme instead of a bucket.
struct SparseTensor {
  std::string name;
  int64_t rows = 0;
  int64_t rowElements = 0;  // fp32 values per row
  zen::vocab::SparseScheme scheme = zen::vocab::SparseScheme::Dense;
  int64_t blockRows = 0;      // omnireduce only (>= 1), else 0
  double denseThreshold = 0;  // sparcml only (in (0, 1]), else 0
  SparseStatistics statistics;
  double predictedUs = 0;
};

enum class BucketGroup { DataParallel, ExpertReplicas };
const char *toString(BucketGroup group);

/// A tensor's place in its bucket's fusion buffer (in elements).
struct BucketTensor {
  std::string name;
  int64_t offset = 0;
  int64_t elements = 0;
};

/// `ratio`: kept fraction in (0, 1] for topk/randomk, exactly 1 otherwise.
/// `rank`: factor rank >= 1 for powersgd, exactly 0 otherwise.
struct Compression {
  CompressionMethod method = CompressionMethod::None;
  double ratio = 1.0;
  int64_t rank = 0;
  bool errorFeedback = false;
  Device device = Device::CPU;
};

/// One collective of a bucket. `bytes` is what one rank contributes on the wire.
struct Collective {
  CollectiveKind op = CollectiveKind::AllReduce;
  std::string algorithm = "ring";  // ring | tree | hierarchical | direct
  int64_t chunks = 1;              // pipelined pieces, >= 1
  int64_t stream = 1;              // communication stream, >= 0
  int64_t priority = 0;
  bool decoupled = false;  // all_gather completed before the next forward (waited per tensor)
  int64_t bytes = 0;
};

struct Bucket {
  int64_t id = 0;  // equals the bucket's position in Plan::buckets
  std::vector<BucketTensor> tensors;
  int64_t elements = 0;  // sum of the tensors' elements
  int64_t bytes = 0;     // uncompressed size: elements * 4
  Compression compression;
  std::vector<Collective> collectives;
  /// The ranks its collectives run over: the data-parallel group (the world),
  /// or for a bucket of expert tensors the ranks holding the same experts
  /// (every ep-th rank from rank % ep).
  BucketGroup group = BucketGroup::DataParallel;
};

/// A bucket's synchronisation scheme, which its `collectives` spell
/// (zen/SyncScheme.h); nullopt when no scheme runs that sequence (the
/// validator refuses such a plan, and one whose method the scheme cannot carry).
std::optional<SyncScheme> syncSchemeOf(const Bucket &bucket);

/// One task of the ordered schedule. Collective tasks map 1:1, in order, onto
/// their bucket's collectives. `produces` lists the gradients a backward
/// compute task makes ready (empty for other tasks).
struct Task {
  int64_t id = 0;
  TaskKind kind = TaskKind::Compute;
  std::string name;
  int64_t bucket = -1;  // -1 for compute and sparse_sync tasks
  int64_t sparseTensor = -1;  // sparse_sync tasks: index into Plan::sparseTensors
  int64_t stream = 0;
  double startUs = 0;
  double durationUs = 0;       // simulated: start to end, contention included
  double workUs = 0;           // the task's time alone (the simulator's input)
  int64_t flops = 0;           // compute tasks: FLOPs, to re-cost on another cluster
  int64_t bytes = 0;           // compute tasks: bytes read + written
  int64_t priority = 0;        // among ready tasks of one stream, lower runs first
  std::vector<int64_t> deps;  // ids of earlier tasks
  Phase phase = Phase::Backward;
  std::vector<std::string> produces;
};

struct Predictions {
  double iterationUs = 0;
  double computeUs = 0;
  double exposedCommUs = 0;
  double lowerBoundUs = 0;  // max(computeUs, commBoundUs)
  double commBoundUs = 0;   // bandwidth-optimal communication time
};

struct Plan {
  int64_t formatVersion = kPlanFormatVersion;
  Generator generator;
  ModelInfo model;
  ClusterInfo cluster;
  std::string strategy;    // auto | nooverlap | wfbp | ddp | horovod | mgwfbp | ...
  std::string compressor;  // the compression policy the planner ran with, e.g. "auto", "none"
  /// The precision fp32 forward/backward compute was priced at (mixed
  /// precision): "fp32", "tf32", "bf16" or "fp16". Optional in the file
  /// (absent = "fp32"); opaque to the runtime, which never computes.
  std::string computeDtype = "fp32";
  std::vector<TensorInfo> tensors;
  std::vector<Bucket> buckets;
  std::vector<Task> schedule;
  Predictions predictions;
  std::map<std::string, double> baselines;  // strategy name -> predicted iteration_us
  /// With compressors allowed, `baselines` are each baseline at its best (its fastest
  /// allowed compressor, or none when faster) and these the same baselines
  /// uncompressed; empty otherwise (optional in the file).
  std::map<std::string, double> baselinesUncompressed;
  /// Large-model plans (docs/plan-format.md "parallel"): the configuration
  /// (tp, pp, dp, ZeRO, ...), the memory breakdown and every stage's program,
  /// as JSON object text; empty for data-parallel plans (optional in the file).
  /// The schedule above is then the first stage's last micro-batch and its
  /// data-parallel gradient sync.
  std::string parallel;
  /// MoE plans (docs/plan-format.md "moe"): the expert-parallel degree, each
  /// MoE layer's pipelining degrees and all-to-all algorithm, and the MoE
  /// baselines, as JSON object text; empty when the model has no MoE layers
  /// (optional in the file).
  std::string moe;
  /// Serving plans (`zenopt --serve`, docs/plan-format.md "inference"): the model, the
  /// prefill and decode parallelism, the batch and KV-cache limits and the predicted
  /// latencies, as JSON object text; empty for training plans (optional in the file).
  std::string inference;
  /// Row-sparse gradients, in graph order, none of them in a bucket or in `tensors`
  /// (optional in the file: absent when empty).
  std::vector<SparseTensor> sparseTensors;
};

/// Chunks each tensor-parallel GEMM and its collective are split into, per region and
/// phase (1: not decomposed).
struct DecompositionChunks {
  int64_t attentionForward = 1, attentionBackward = 1, mlpForward = 1, mlpBackward = 1;
};

/// The decisions of a large-model plan's `parallel` section (docs/plan-format.md
/// "parallel"), as readParallelSection reads them: the one reader the plan validator, the
/// hybrid executor and zenopt's summaries and simulation share. The section's other fields
/// (predictions, memory, baselines, the model) stay in `Plan::parallel`.
struct ParallelConfiguration {
  int64_t tp = 1, pp = 1, dp = 1;
  int zero = 0;
  bool sequenceParallel = false;
  zen::vocab::Recompute recompute = zen::vocab::Recompute::None;
  int64_t microBatch = 1, microBatches = 1;
  int64_t virtualStages = 1;  // schedule "1f1b": 1; "interleaved:V": V
  DecompositionChunks chunks;
  /// One pipeline stage's predicted times per micro-batch, in microseconds.
  struct StageTimes {
    double forwardUs = 0, backwardUs = 0, tensorCommUs = 0, p2pUs = 0, zeroCommUs = 0;
  };
  std::vector<StageTimes> stageTimes;  // one per pipeline stage
  int64_t ep = 0;                  // the MoE blocks' expert parallelism; 0 without MoE blocks
  int64_t gpus() const { return tp * pp * dp; }
};

/// Reads and checks a `parallel` section's text (every rule of docs/plan-format.md
/// "parallel" but the world size, which validatePlan adds). Throws PlanError(`kind`) naming
/// `source` and the JSON path.
ParallelConfiguration readParallelSection(const std::string &section, const std::string &source,
                                          zen::ErrorKind kind = zen::ErrorKind::BadInput);

/// Parses and validates plan text. `source` names the text in messages
/// (normally the file path). Throws PlanError(BadInput) on any violation.
Plan parsePlan(const std::string &text, const std::string &source);

/// Reads and validates a plan file. Throws PlanError(Unreadable) when it cannot be
/// read, PlanError(BadInput) when it is invalid.
Plan loadPlanFile(const std::string &path);

/// Checks every semantic rule of the format (what parsePlan checks after
/// decoding). Throws PlanError(`kind`) naming `source` and the JSON path.
void validatePlan(const Plan &plan, const std::string &source,
                  zen::ErrorKind kind = zen::ErrorKind::BadInput);

/// The canonical, deterministic, pretty-printed text of a plan: fixed key
/// order, shortest round-tripping number formatting, trailing newline.
/// Validates first and throws PlanError(Internal) for an invalid plan (including
/// any NaN or infinity). parsePlan(writePlan(p)) reproduces p exactly.
std::string writePlan(const Plan &plan);

/// Writes `text` to `path` atomically (temporary file + rename), so a failure
/// never leaves a partial file. Throws PlanError(Unwritable) naming the path.
void writeFileAtomically(const std::string &path, const std::string &text);

/// Writes writePlan(plan) to `path` atomically (temporary file + rename).
/// Throws PlanError(Unwritable) when the file cannot be written.
void writePlanFile(const Plan &plan, const std::string &path);

/// FNV-1a 64-bit hash of a text.
uint64_t fnv1a64(const std::string &text);

/// The hash ranks agree on at start-up: fnv1a64(writePlan(plan)).
uint64_t planHash(const Plan &plan);

/// A plan of one bucket: `elements` fp32 gradients of one tensor "g", all-reduced on
/// stream 1 after a "backward" task, for `ranks` ranks; `generator` names its writer. The
/// executor's own overhead is measured on it against the bare all-reduce (zenopt profile,
/// bench-runtime-overhead).
Plan oneBucketPlan(int64_t elements, int ranks, const std::string &generator);

/// Bytes per element of a plan dtype (4 for "f32").
int64_t dtypeBytes(const std::string &dtype);
/// The ep of the plan's expert tensors (validatePlan gives them one), 1 without any.
int64_t expertParallelOf(const Plan &plan);

}  // namespace zenrt

#endif  // ZENRT_PLAN_H
