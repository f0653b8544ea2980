//===- zen/Vocabulary.h - Enums shared by planner, cost model and runtime -*- C++ -*-===//
//
// The one definition of the compression methods, devices and collective kinds,
// (which collectives carry which method: zen/SyncScheme.h),
// each with one constexpr traits table: the spelling used in plan files, cluster
// files and on the command line, and the properties every component asks of a
// value. The cost model (zen::cost), the planner (zen::plan), codegen and the
// runtime (zenrt) all use these types, so nothing converts between them.
//
// Header-only and free of LLVM and of exceptions: the runtime uses it and
// depends on nothing else of zenopt.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_VOCABULARY_H
#define ZEN_VOCABULARY_H

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zen::vocab {

enum class CompressionMethod { None, FP16, BF16, Int8, TopK, RandomK, Sign, PowerSGD };
enum class Device { GPU, CPU };
enum class CollectiveKind { AllReduce, ReduceScatter, AllGather, AllToAll, Broadcast, SendRecv };
/// What a task does: the simulator's tasks, the plan's schedule and its MoE timeline.
/// SparseSync: one row-sparse gradient's synchronisation under its own scheme.
enum class TaskKind { Compute, Compress, Collective, Decompress, SparseSync };
/// When a task runs in the iteration. Gradient sync (compressions, collectives) takes
/// Backward; an MoE layer's dispatch/combine all-to-alls take the pass they serve.
/// NextForward: a decoupled bucket's tail (its gather and update), overlapping the next
/// iteration's forward; the simulator keeps the task's own phase and a next-iteration flag.
enum class Phase { Forward, Backward, Optimizer, NextForward };
/// How a collective moves its bytes (NCCL's ring and tree; hierarchical: inside each node,
/// then across; direct: every pair at once, as all-to-all and point-to-point do).
enum class Algorithm { Ring, Tree, Hierarchical, Direct };
/// Activation recomputation in the backward (Korthikanti et al.): none, the attention's
/// core only (selective), or each block's whole forward (full).
enum class Recompute { None, Selective, Full };
/// The attention kernel (--attention). Flash: FlashAttention (Dao et al. 2022, 2023), what
/// Megatron-Core (Transformer Engine), PyTorch's scaled_dot_product_attention, DeepSpeed and
/// llm-foundry run by default: the scores stay in on-chip memory, nothing of them is kept for
/// backward, which recomputes them. Unfused: the scores, softmax and dropout written to and
/// read from memory and kept for backward (Megatron-LM before FlashAttention, SC21; Korthikanti
/// et al. 2022's 5 a s / h bytes per token).
enum class AttentionKernel { Flash, Unfused };
/// When ZeRO-3 gathers the weights under gradient accumulation (--zero3-regather).
/// PerMicroBatch is DeepSpeed ZeRO-3 and FSDP's FULL_SHARD: every micro-batch gathers each
/// unit's weights before its forward and again before its backward, and reduce-scatters its
/// gradients after the backward. PerStep is FSDP2 with resharding after backward and gradient
/// sync switched off until the last micro-batch: the weights are gathered once, stay whole
/// through every micro-batch, and the gradients accumulate whole until the last backward
/// reduce-scatters them once (ZeRO-1's memory for weights and gradients).
enum class Zero3Regather { PerMicroBatch, PerStep };

struct CompressionTraits {
  CompressionMethod value;
  const char *spelling;
  /// The decoded gradient differs from the input.
  bool lossy;
  /// The planner enables error feedback: the method's error is not negligible
  /// (fp16/bf16 rounding is; the plan format still allows feedback for them).
  bool wantsErrorFeedback;
  bool takesRatio;  // a kept fraction in (0, 1] ("topk:0.01")
  bool takesRank;   // a factor rank >= 1 ("powersgd:4")
};

struct DeviceTraits {
  Device value;
  const char *spelling;
};

struct CollectiveTraits {
  CollectiveKind value;
  const char *spelling;
};

struct TaskKindTraits {
  TaskKind value;
  const char *spelling;
  bool communicates;  // a collective or a sparse synchronisation: runs on a communication stream
  bool compresses;    // an encode or decode of a bucket's gradients
};

struct PhaseTraits {
  Phase value;
  const char *spelling;
};

struct AlgorithmTraits {
  Algorithm value;
  const char *spelling;
};

struct RecomputeTraits {
  Recompute value;
  const char *spelling;
};

struct AttentionKernelTraits {
  AttentionKernel value;
  const char *spelling;
};

struct Zero3RegatherTraits {
  Zero3Regather value;
  const char *spelling;
};

/// Indexed by the enum value (checked below).
inline constexpr CompressionTraits kCompressionMethods[] = {
    // value                       spelling    lossy  EF     ratio  rank
    {CompressionMethod::None,     "none",     false, false, false, false},
    {CompressionMethod::FP16,     "fp16",     true,  false, false, false},
    {CompressionMethod::BF16,     "bf16",     true,  false, false, false},
    {CompressionMethod::Int8,     "int8",     true,  true,  false, false},
    {CompressionMethod::TopK,     "topk",     true,  true,  true,  false},
    {CompressionMethod::RandomK,  "randomk",  true,  true,  true,  false},
    {CompressionMethod::Sign,     "sign",     true,  true,  false, false},
    {CompressionMethod::PowerSGD, "powersgd", true,  true,  false, true},
};

inline constexpr DeviceTraits kDevices[] = {
    {Device::GPU, "gpu"},
    {Device::CPU, "cpu"},
};

inline constexpr CollectiveTraits kCollectiveKinds[] = {
    {CollectiveKind::AllReduce, "all_reduce"},
    {CollectiveKind::ReduceScatter, "reduce_scatter"},
    {CollectiveKind::AllGather, "all_gather"},
    {CollectiveKind::AllToAll, "all_to_all"},
    {CollectiveKind::Broadcast, "broadcast"},
    {CollectiveKind::SendRecv, "send_recv"},
};

inline constexpr TaskKindTraits kTaskKinds[] = {
    // value                  spelling       communicates compresses
    {TaskKind::Compute,     "compute",     false,       false},
    {TaskKind::Compress,    "compress",    false,       true},
    {TaskKind::Collective,  "collective",  true,        false},
    {TaskKind::Decompress,  "decompress",  false,       true},
    {TaskKind::SparseSync,  "sparse_sync", true,        false},
};

inline constexpr PhaseTraits kPhases[] = {
    {Phase::Forward, "forward"},
    {Phase::Backward, "backward"},
    {Phase::Optimizer, "optimizer"},
    {Phase::NextForward, "next_forward"},
};

inline constexpr AlgorithmTraits kAlgorithms[] = {
    {Algorithm::Ring, "ring"},
    {Algorithm::Tree, "tree"},
    {Algorithm::Hierarchical, "hierarchical"},
    {Algorithm::Direct, "direct"},
};

inline constexpr RecomputeTraits kRecomputes[] = {
    {Recompute::None, "none"},
    {Recompute::Selective, "selective"},
    {Recompute::Full, "full"},
};

inline constexpr AttentionKernelTraits kAttentionKernels[] = {
    {AttentionKernel::Flash, "flash"},
    {AttentionKernel::Unfused, "unfused"},
};

inline constexpr Zero3RegatherTraits kZero3Regathers[] = {
    {Zero3Regather::PerMicroBatch, "per-microbatch"},
    {Zero3Regather::PerStep, "per-step"},
};

namespace detail {
template <typename Traits, size_t N> constexpr bool indexedByValue(const Traits (&table)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (static_cast<size_t>(table[i].value) != i)
      return false;
  return true;
}

template <typename Traits, size_t N>
std::optional<decltype(Traits::value)> parse(const Traits (&table)[N], std::string_view text) {
  for (const Traits &entry : table)
    if (text == entry.spelling)
      return entry.value;
  return std::nullopt;
}
} // namespace detail

static_assert(detail::indexedByValue(kCompressionMethods), "kCompressionMethods out of order");
static_assert(detail::indexedByValue(kDevices), "kDevices out of order");
static_assert(detail::indexedByValue(kCollectiveKinds), "kCollectiveKinds out of order");
static_assert(detail::indexedByValue(kTaskKinds), "kTaskKinds out of order");
static_assert(detail::indexedByValue(kPhases), "kPhases out of order");
static_assert(detail::indexedByValue(kAlgorithms), "kAlgorithms out of order");
static_assert(detail::indexedByValue(kRecomputes), "kRecomputes out of order");
static_assert(detail::indexedByValue(kAttentionKernels), "kAttentionKernels out of order");
static_assert(detail::indexedByValue(kZero3Regathers), "kZero3Regathers out of order");

constexpr const CompressionTraits &traitsOf(CompressionMethod method) {
  return kCompressionMethods[static_cast<size_t>(method)];
}
constexpr bool isLossy(CompressionMethod method) { return traitsOf(method).lossy; }
constexpr bool wantsErrorFeedback(CompressionMethod method) {
  return traitsOf(method).wantsErrorFeedback;
}
constexpr bool takesRatio(CompressionMethod method) { return traitsOf(method).takesRatio; }
constexpr bool takesRank(CompressionMethod method) { return traitsOf(method).takesRank; }

constexpr const char *toString(CompressionMethod method) { return traitsOf(method).spelling; }
constexpr const char *toString(Device device) {
  return kDevices[static_cast<size_t>(device)].spelling;
}
constexpr const char *toString(CollectiveKind kind) {
  return kCollectiveKinds[static_cast<size_t>(kind)].spelling;
}
constexpr const TaskKindTraits &traitsOf(TaskKind kind) {
  return kTaskKinds[static_cast<size_t>(kind)];
}
constexpr bool communicates(TaskKind kind) { return traitsOf(kind).communicates; }
constexpr bool compresses(TaskKind kind) { return traitsOf(kind).compresses; }
constexpr const char *toString(TaskKind kind) { return traitsOf(kind).spelling; }
constexpr const char *toString(Phase phase) { return kPhases[static_cast<size_t>(phase)].spelling; }
constexpr const char *toString(Algorithm algorithm) {
  return kAlgorithms[static_cast<size_t>(algorithm)].spelling;
}
constexpr const char *toString(Recompute recompute) {
  return kRecomputes[static_cast<size_t>(recompute)].spelling;
}
constexpr const char *toString(AttentionKernel attention) {
  return kAttentionKernels[static_cast<size_t>(attention)].spelling;
}
constexpr const char *toString(Zero3Regather regather) {
  return kZero3Regathers[static_cast<size_t>(regather)].spelling;
}

/// A table's spellings in its order (a command line's choices).
template <typename Traits, size_t N>
std::vector<std::string> spellingsOf(const Traits (&table)[N]) {
  std::vector<std::string> spellings;
  for (const Traits &entry : table)
    spellings.push_back(entry.spelling);
  return spellings;
}

inline std::optional<CompressionMethod> parseCompressionMethod(std::string_view text) {
  return detail::parse(kCompressionMethods, text);
}
inline std::optional<Device> parseDevice(std::string_view text) {
  return detail::parse(kDevices, text);
}
inline std::optional<CollectiveKind> parseCollectiveKind(std::string_view text) {
  return detail::parse(kCollectiveKinds, text);
}
inline std::optional<TaskKind> parseTaskKind(std::string_view text) {
  return detail::parse(kTaskKinds, text);
}
inline std::optional<Phase> parsePhase(std::string_view text) {
  return detail::parse(kPhases, text);
}
inline std::optional<Algorithm> parseAlgorithm(std::string_view text) {
  return detail::parse(kAlgorithms, text);
}
inline std::optional<Recompute> parseRecompute(std::string_view text) {
  return detail::parse(kRecomputes, text);
}
inline std::optional<AttentionKernel> parseAttentionKernel(std::string_view text) {
  return detail::parse(kAttentionKernels, text);
}
inline std::optional<Zero3Regather> parseZero3Regather(std::string_view text) {
  return detail::parse(kZero3Regathers, text);
}

} // namespace zen::vocab

#endif // ZEN_VOCABULARY_H
