//===- CostModel.h - collective, compute and compression costs --*- C++ -*-===//
//
// A pure analysis over a Cluster: it scores decisions, it never rewrites IR.
// All times are in microseconds, sizes in bytes.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_COSTMODEL_H
#define ZEN_COSTMODEL_COSTMODEL_H

#include "zen/CostModel/Cluster.h"

namespace zen::cost {

/// Ranks of a process group, spread evenly over `nodes` nodes.
struct Group {
  int64_t ranks = 1;
  int64_t nodes = 1;
};

struct CollectiveCost {
  double timeUs = 0;
  Algorithm algorithm = Algorithm::Ring;
  double algBandwidthGBps = 0;   // bytes / time
  double busBandwidthGBps = 0;   // nccl-tests convention
};

struct CompressionCost {
  double encodeUs = 0;   // includes the device->host copy for CPU offload
  double decodeUs = 0;   // includes the host->device copy for CPU offload
  double wireBytes = 0;  // payload size per rank
};

struct CompressionSpec {
  CompressionMethod method = CompressionMethod::None;
  double ratio = 0;   // topk / randomk kept fraction
  int64_t rank = 0;   // powersgd rank
  Device device = Device::GPU;
};

class CostModel {
public:
  explicit CostModel(Cluster cluster);

  const Cluster &cluster() const { return cluster_; }
  /// Every GPU of the cluster.
  Group worldGroup() const;
  /// The first `ranks` GPUs, filling nodes in order.
  Group groupOf(int64_t ranks) const;

  /// Cheapest algorithm, as NCCL's tuner would pick.
  CollectiveCost collective(CollectiveKind kind, double bytes, Group group) const;
  CollectiveCost collective(CollectiveKind kind, double bytes, Group group,
                            Algorithm algorithm) const;
  /// A collective split into `chunks` pipelined pieces: total time.
  CollectiveCost chunkedCollective(CollectiveKind kind, double bytes, Group group,
                                   int64_t chunks) const;

  /// Roofline: max(flops / achievable peak, bytes / achievable HBM bandwidth).
  double computeUs(double flops, double bytes, DType dtype = DType::F32) const;

  /// Encode/decode cost and wire size of compressing `elements` fp32 values.
  CompressionCost compression(const CompressionSpec &spec, int64_t elements) const;

  /// Compute runs this many times slower while a collective is in flight.
  double overlapSlowdown() const { return cluster_.overlapSlowdown; }

  /// Bandwidth-optimal allreduce time of `bytes` over the world (the lower
  /// bound's communication term): 2(n-1)/n * bytes / bottleneck bandwidth.
  double bandwidthOptimalAllReduceUs(double bytes) const;

private:
  Cluster cluster_;
};

} // namespace zen::cost

#endif // ZEN_COSTMODEL_COSTMODEL_H
