//===- CostModel.h - collective, compute and compression costs --*- C++ -*-===//
//
// A pure analysis over a Cluster: it scores decisions, it never rewrites IR.
// All times are in microseconds, sizes in bytes.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_COSTMODEL_H
#define ZEN_COSTMODEL_COSTMODEL_H

#include "zen/CostModel/Cluster.h"
#include "zen/SyncScheme.h"

#include <optional>
#include <string>
#include <vector>

namespace zen::cost {

/// NCCL's wire protocols; the MPI shared-memory fabric reports Simple.
enum class Protocol { LL, LL128, Simple };
const char *toString(Protocol protocol);  // "ll", "ll128", "simple"

/// Ranks of a process group, spread evenly over `nodes` nodes. `perNode` groups like it run
/// the same collective at once on each of its nodes and share the node's NICs (the
/// data-parallel groups of the tensor-parallel ranks, which all synchronise together).
struct Group {
  int64_t ranks = 1;
  int64_t nodes = 1;
  int64_t perNode = 1;
};

struct CollectiveCost {
  double timeUs = 0;
  Algorithm algorithm = Algorithm::Ring;
  double algBandwidthGBps = 0;   // bytes / time
  double busBandwidthGBps = 0;   // nccl-tests convention
  Protocol protocol = Protocol::Simple;
  /// timeUs = latencyUs + bandwidthUs. bandwidthUs is the wire-transfer part
  /// that concurrent collectives share (the simulator slows only this part);
  /// latencyUs is the rest: start-up and per-hop latencies, and for PowerSGD
  /// the work between its two all-reduces.
  double latencyUs = 0;
  double bandwidthUs = 0;
  /// How long the transfer keeps each link level busy, alone: a rank's links
  /// inside its node (NVLink, PCIe, shared memory) and the node's NICs. Each
  /// is at most bandwidthUs. A one-phase algorithm keeps its bottleneck busy
  /// all along and a faster level for the ratio of the rates; a 2D one holds
  /// every level it uses all along (its phases run one after another, and
  /// which phase meets another collective is not modelled). The simulator
  /// shares each level apart among concurrent collectives, so traffic inside a
  /// node does not slow traffic on the NICs as much as more traffic on the
  /// NICs does.
  double intraNodeUs = 0;
  double interNodeUs = 0;
  /// Priced by a profiled alpha-beta override of the cluster file.
  bool profiled = false;
};

struct CompressionCost {
  double encodeUs = 0;   // includes the device->host copy for CPU offload
  double decodeUs = 0;   // includes the host->device copy for CPU offload
  /// Work between the collectives of a two-stage exchange (PowerSGD:
  /// orthogonalise P and form Q = M^T P between all-reducing P and Q).
  double betweenUs = 0;
  double wireBytes = 0;  // payload size per rank
};

using vocab::SyncScheme;

/// What synchronising one bucket costs (CostModel::syncCost).
struct SyncCost {
  /// Encode/decode work; zero for an uncompressed bucket.
  CompressionCost compression;
  /// The scheme's first collective (PowerSGD: both of its all-reduces, with
  /// the work between them in latencyUs).
  CollectiveCost reduction;
  /// The all-gather that ends a decomposition; zero for one-step schemes.
  CollectiveCost gather;
};

struct CompressionSpec {
  CompressionMethod method = CompressionMethod::None;
  double ratio = 0;   // topk / randomk kept fraction, clamped to (0, 1]
  int64_t rank = 0;   // powersgd rank, at least 1
  Device device = Device::GPU;
  /// The spelling named the device ("@gpu"/"@cpu"): planners keep it. Without
  /// one they may place the compressor on either device.
  bool deviceFixed = false;
  /// Error feedback adds the residual to the input and updates it after encoding.
  bool errorFeedback = false;
};

/// Parses a compressor spelling: "none", "fp16", "bf16", "int8", "sign",
/// "topk:RATIO", "randomk:RATIO" (0 < RATIO <= 1), "powersgd:RANK" (RANK >= 1),
/// optionally followed by "@gpu" or "@cpu" (which sets deviceFixed). Returns nullopt and sets `error`
/// (when given) for anything else; never throws.
std::optional<CompressionSpec> parseCompressionSpec(const std::string &text,
                                                    std::string *error = nullptr);

class CostModel {
public:
  explicit CostModel(Cluster cluster);

  const Cluster &cluster() const { return cluster_; }
  /// Every GPU of the cluster.
  Group worldGroup() const;
  /// The first `ranks` GPUs, filling nodes in order.
  Group groupOf(int64_t ranks) const;

  /// Cheapest algorithm, as NCCL's tuner would pick. `bytes` follows the
  /// nccl-tests convention: the whole buffer (all_gather: the gathered output,
  /// reduce_scatter: the input, all_to_all: one rank's send buffer).
  /// A profiled override for (kind, group.ranks) replaces the analytic model.
  CollectiveCost collective(CollectiveKind kind, double bytes, Group group) const;
  /// One algorithm; timeUs is +infinity when !supports(kind, algorithm, group).
  CollectiveCost collective(CollectiveKind kind, double bytes, Group group,
                            Algorithm algorithm) const;
  /// ring: every kind but all_to_all/send_recv; tree: all_reduce; hierarchical:
  /// all_reduce/reduce_scatter/all_gather/all_to_all over >1 node with >1 rank
  /// per node; direct: all_to_all and send_recv.
  static bool supports(CollectiveKind kind, Algorithm algorithm, Group group);
  /// A collective split into `chunks` pipelined pieces: total time, with the
  /// cheapest algorithm or the given one (+infinity when it is unsupported).
  CollectiveCost chunkedCollective(CollectiveKind kind, double bytes, Group group, int64_t chunks,
                                   std::optional<Algorithm> algorithm = std::nullopt) const;

  /// Roofline: max(flops / achievable peak, bytes / achievable HBM bandwidth). With a
  /// profiled compute section (`zenopt profile`, host ranks): the kernel overhead + flops at
  /// the GEMM rate measured for their size + bytes at the measured copy rate (fp32 timed;
  /// `dtype` does not change it).
  double computeUs(double flops, double bytes, DType dtype = DType::F32) const;

  /// Encode/decode cost and wire size of compressing `elements` fp32 values.
  /// `payloads` is how many compressed payloads one decode consumes: 1 after an
  /// allreduce, the group size after an all-gather of sparse or sign payloads.
  /// `elementBytes` is the width of the uncompressed values the kernels read
  /// and write (2 for 16-bit activations); the wire size stays wireBytes'.
  CompressionCost compression(const CompressionSpec &spec, int64_t elements,
                              int64_t payloads = 1, double elementBytes = 4) const;
  /// Bytes one rank sends for `elements` fp32 values under `spec`.
  static double wireBytes(const CompressionSpec &spec, int64_t elements);
  /// A lower bound on the bytes one rank sends for `elements` fp32 values under
  /// `spec` however they are split into buckets: the sum of wireBytes over any
  /// partition is at least this. It is linear or concave in `elements` and 0 at
  /// 0, so it also bounds plans that compress only some buckets.
  static double wireBytesLowerBound(const CompressionSpec &spec, double elements);
  /// The one price of a synchronisation scheme (zen/SyncScheme.h): a bucket of
  /// `elements` gradients (`bytes` of them uncompressed; fp32 when compressed)
  /// under `spec` and `scheme` over `group`, each collective in `chunks`
  /// pieces. An all-reduce carries the payload; SyncScheme::AllGather lands
  /// every rank's payload everywhere, and decoding works through all of them;
  /// PowerSGD runs as the runtime does (runtime/lib/Programs.cpp): all-reduce
  /// P (rows x r), orthogonalise P and form Q = M^T P, all-reduce Q (cols x r).
  /// The method must support the scheme (vocab::supports).
  SyncCost syncCost(const CompressionSpec &spec, SyncScheme scheme, int64_t elements,
                    double bytes, Group group, int64_t chunks = 1) const;

  /// The runtime's own work for a bucket of `elements` fp32 gradients synchronised over
  /// `group` (fusion copies, averaging, the hand-over to its progress thread) as `zenopt
  /// profile` measured it; 0 without a profile or on one rank. Local work: the simulator
  /// adds it to the bucket's first collective's latency part (SimTask::executorUs).
  double executorOverheadUs(int64_t elements, Group group) const;

  /// Compute runs this many times slower while a collective is in flight: the profiled
  /// interference where `zenopt profile` measured it, else the cluster's overlap_slowdown.
  double overlapSlowdown() const {
    return cluster_.profiledInterference ? cluster_.profiledInterference->computeSlowdown
                                         : cluster_.overlapSlowdown;
  }
  /// A collective's bandwidth part runs this many times slower while compute runs: the
  /// profiled interference, else 1 (NCCL's channels keep their SMs).
  double collectiveSlowdown() const {
    return cluster_.profiledInterference ? cluster_.profiledInterference->collectiveSlowdown : 1.0;
  }

  /// The least per-byte cost of `kind` over `group` under any algorithm,
  /// protocol or profiled size range: every such collective of b bytes, and
  /// every split of it into pieces, takes at least b times this, and so do any
  /// such collectives sharing the links (each holds the bottleneck level of
  /// its algorithm over `group`, or for a 2D one every level, all along).
  double cheapestUsPerByte(CollectiveKind kind, Group group) const;
  /// The least communication time of any plan that synchronises
  /// `gradientBytes` of fp32 gradients over `group`, uncompressed or with any of
  /// `compressors` on any buckets: the fewest bytes such a plan sends
  /// (wireBytesLowerBound) times cheapestUsPerByte of the collective that
  /// carries them (all-reduce, reduce-scatter + all-gather, or the all-gather of
  /// sparse payloads). Latencies, chunking and concurrency only add to it: the
  /// simulator shares bandwidth among concurrent collectives.
  double communicationBoundUs(double gradientBytes, Group group,
                              const std::vector<CompressionSpec> &compressors = {}) const;
  /// An iteration's lower bound, which the planner and a plan's predictions
  /// report: max(`computeUs`, communicationBoundUs). No plan with at most these
  /// compressors (any bucketing, chunking, algorithm or schedule) is predicted
  /// faster.
  double lowerBoundUs(double computeUs, double gradientBytes, Group group,
                      const std::vector<CompressionSpec> &compressors = {}) const;

private:
  Cluster cluster_;
};

} // namespace zen::cost

#endif // ZEN_COSTMODEL_COSTMODEL_H
