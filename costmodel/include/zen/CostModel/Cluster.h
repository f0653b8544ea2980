//===- Cluster.h - cluster description --------------------------*- C++ -*-===//
//
// A cluster description (docs/design.md, costmodel/README.md): nodes, GPUs, links,
// and optional profiled overrides written by `zenopt profile`. Loaded from JSON
// (a file or a built-in preset embedded in the binary) and fully validated.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_CLUSTER_H
#define ZEN_COSTMODEL_CLUSTER_H

#include "zen/Vocabulary.h"

#include <cstdint>
#include <map>
#include "zen/Errors.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace zen::cost {

/// A bad (BadInput: the message names the file and the JSON path) or
/// unreadable (Unreadable) cluster description, or an unwritable cluster file.
struct ClusterError : Error {
  using Error::Error;
};

/// TF32: fp32 data through the tensor cores at reduced mantissa (Ampere and later).
enum class DType { F32, F16, BF16, I8, TF32 };
const char *toString(DType dtype);  // "fp32", "fp16", "bf16", "int8", "tf32" (cluster JSON keys)
/// Accepts the cluster spellings and the dialect's ("f32", "f16", "bf16", "i8").
std::optional<DType> parseDType(const std::string &name);

// The shared vocabulary (zen/Vocabulary.h), spelled and parsed by its tables.
using vocab::CollectiveKind;
using vocab::CompressionMethod;
using vocab::Device;
using vocab::parseCollectiveKind;
using vocab::parseCompressionMethod;
using vocab::toString;
using vocab::Algorithm;

struct LinkSpec {
  std::string kind;          // intra: "nvlink", "pcie", "shm"; inter: "infiniband", "ethernet"
  double bandwidthGBps = 0;  // per direction, per GPU (intra) or per NIC (inter)
  /// Per-hop latency of the lowest-latency protocol (NCCL LL); the LL128 and
  /// Simple protocols' per-hop latencies scale by NCCL's ratios for the kind.
  double latencyUs = 0;
  double efficiency = 1.0;   // achievable fraction of bandwidth
};

struct GpuSpec {
  std::string name;
  std::map<DType, double> peakTflops;  // dense peak per dtype
  double hbmBandwidthGBps = 0;
  double computeEfficiency = 0.6;      // achievable fraction of peak FLOP/s, whole-model average
  /// Achievable fraction of peak FLOP/s of one large GEMM (cuBLAS, every SM
  /// busy); smaller and skinny GEMMs lose more to wave quantisation over `sms`.
  /// 0: not given, computeEfficiency applies.
  double gemmEfficiency = 0;
  int64_t sms = 0;                     // streaming multiprocessors; 0: not given
  double memoryEfficiency = 0.8;       // achievable fraction of HBM bandwidth
  double pcieBandwidthGBps = 25;       // host <-> device, for CPU offload
  double cpuCompressGBps = 10;         // CPU compression kernel throughput (input bytes)
  double memoryGB = 0;                 // device memory per GPU (1e9 bytes); 0: not given
};

/// A profiled alpha-beta override: time(bytes) = alphaUs + bytes * betaUsPerByte
/// for `kind` on `ranks` ranks in [minBytes, maxBytes].
struct ProfiledCollective {
  CollectiveKind kind;
  int64_t ranks = 0;
  double minBytes = 0, maxBytes = 0;
  double alphaUs = 0, betaUsPerByte = 0;
  double rSquared = 0, worstRelativeError = 0;
};

/// How well the profiled fits predicted sizes that were not used to fit them.
struct ProfiledValidation {
  CollectiveKind kind;
  int64_t ranks = 0;
  int64_t points = 0;
  double medianRelativeError = 0, worstRelativeError = 0;
};

/// One GEMM shape `zenopt profile` timed: C(m x n) = A(m x k) B(k x n), fp32, on every rank
/// at once (ranks sharing cores share them here too).
struct ProfiledGemm {
  int64_t m = 0, n = 0, k = 0;
  double gflops = 0;  // per rank
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

/// Compute as `zenopt profile` measured it on every rank at once. Present only in a profiled
/// file: it then prices compute tasks instead of the peak and efficiencies (CostModel::computeUs).
struct ProfiledCompute {
  std::vector<ProfiledGemm> gemms;
  double memoryGBps = 0;        // a copy's bytes read plus written, per second, per rank
  double kernelOverheadUs = 0;  // a task's fixed cost: the smallest GEMM's time
  std::string method;           // how it was measured (written by the profiler)

  bool measured() const { return !gemms.empty(); }
  /// GFLOP/s of a GEMM of `flops`: interpolated in log(FLOPs) between the timed shapes,
  /// the nearest one's outside them.
  double gemmGflops(double flops) const;
};

/// Compute and a collective running at once, as `zenopt profile` measured them through the
/// runtime (its progress thread drives the collective while the caller computes).
struct ProfiledInterference {
  double computeSlowdown = 1;     // compute's time while a collective runs / alone
  double collectiveSlowdown = 1;  // a collective's time while compute runs / alone
  double collectiveBytes = 0;     // the all-reduce measured
  std::string method;
};

/// What the runtime's executor adds to each bucket beyond its collectives (fusion copies,
/// averaging, the hand-over to its progress thread), as `zenopt profile` measured it.
struct ProfiledExecutor {
  double alphaUs = 0, betaUsPerByte = 0;  // per bucket, per byte of its fp32 gradients
  std::string method;
};

struct Cluster {
  std::string name;
  int64_t nodes = 1;
  int64_t gpusPerNode = 1;
  GpuSpec gpu;
  LinkSpec intraNode;        // between GPUs of one node
  LinkSpec interNode;        // per NIC
  int64_t nicsPerNode = 1;
  /// Compute time multiplier while a collective runs: NCCL kernels occupy SMs
  /// and HBM bandwidth. Published GEMM-under-collective measurements (e.g. ACE,
  /// ISCA'21; T3, ASPLOS'24) report roughly 1.1-1.4x; presets use 1.15 for NVLink
  /// GPUs (see costmodel/README.md). Must be >= 1.
  double overlapSlowdown = 1.1;
  std::vector<ProfiledCollective> profiled;
  std::map<CompressionMethod, double> profiledCompressionGBps;  // measured CPU kernel throughput
  std::string profiledBackend;                   // "mpi" or "nccl" when profiled
  std::vector<ProfiledValidation> validation;    // written by `zenopt profile`
  ProfiledCompute profiledCompute;               // written by `zenopt profile` (host backend)
  std::optional<ProfiledInterference> profiledInterference;
  std::optional<ProfiledExecutor> profiledExecutor;

  int64_t worldSize() const { return nodes * gpusPerNode; }
};

/// Loads `nameOrPath`: a built-in preset name (a100x64, a100x8, h100x256,
/// v100x16-10gbe, cpu-local) or a JSON file (a preset name wins over a file of
/// the same name). Throws ClusterError.
Cluster loadCluster(const std::string &nameOrPath);
/// Parses JSON text; `source` names the file in error messages.
Cluster parseCluster(const std::string &jsonText, const std::string &source);
/// `cluster` resized to `nodes` nodes (`--nodes`): the GPUs, links and per-node
/// layout stay; profiled fits stay keyed by their rank counts. Throws
/// ClusterError(BadUsage) unless nodes >= 1 and the world stays within the
/// largest world size parseCluster accepts.
Cluster withNodes(Cluster cluster, int64_t nodes);
/// Serialises a cluster (used by `zenopt profile`); parseCluster reads it back.
std::string writeCluster(const Cluster &cluster);
/// Writes writeCluster(cluster) to `path` atomically (temporary file + rename).
/// Throws ClusterError(Unwritable) when the file cannot be written.
void writeClusterFile(const Cluster &cluster, const std::string &path);
std::vector<std::string> presetNames();
/// The default preset name ("a100x64").
const char *defaultPresetName();

} // namespace zen::cost

#endif // ZEN_COSTMODEL_CLUSTER_H
