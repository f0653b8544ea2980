//===- CostModel.cpp - collective and compute costs -----------------------===//
//
// Collectives follow NCCL's own tuning model (src/graph/tuning.cc): for every
// algorithm and protocol a latency (base + per-hop, by link kind) and a
// bandwidth (bus bandwidth scaled by the protocol's efficiency); the tuner
// picks the cheapest pair. Two deliberate differences from NCCL's additive
// `latency + bytes / bandwidth`:
//
//  - Per-hop latencies are pipelined away once a step's transfer outlasts them:
//    NCCL keeps NCCL_STEPS (8) slices in flight, so a large ring allreduce costs
//    its bandwidth term plus one hop, not plus 2(n-1) hops. Hence
//    time = base + max(hop chain, bandwidth term + one hop). This is what makes
//    nccl-tests' large-message busbw match the link rate times efficiency.
//  - Hierarchical (2D) allreduce is modelled although NCCL lacks it, because
//    Horovod/BytePS-style planners use it and it wins on few-NIC nodes.
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/CostModel.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace zen::cost {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr int kNumProtocols = 3;
constexpr Protocol kProtocols[kNumProtocols] = {Protocol::LL, Protocol::LL128, Protocol::Simple};

/// Link classes of NCCL's latency table, plus MPI over shared memory.
enum class Fabric { NVLink, PCIe, Net, Shm };

Fabric intraFabric(const LinkSpec &link) {
  if (link.kind == "nvlink")
    return Fabric::NVLink;
  if (link.kind == "shm")
    return Fabric::Shm;
  return Fabric::PCIe;
}

enum class Shape { Ring, Tree };

// NCCL 2.12+ tuning.cc, microseconds, {LL, LL128, Simple}.
constexpr double kBaseLatencyUs[2][kNumProtocols] = {{6.6, 14.0, 8.4},   // ring
                                                     {6.8, 14.0, 0.0}};  // tree
constexpr double kHopLatencyUs[3][2][kNumProtocols] = {
    {{0.6, 1.9, 3.4}, {0.6, 1.25, 4.0}},   // NVLink: ring, tree
    {{1.0, 2.5, 5.7}, {1.0, 1.9, 4.0}},    // PCIe
    {{2.7, 4.0, 14.0}, {5.0, 8.5, 14.0}},  // network
};
// Fraction of the bus bandwidth each protocol achieves (tuning.cc "model
// refinements": LL moves 8-byte words with a 4-byte flag and is further
// limited by its threads; LL128 keeps 120 of every 128 bytes).
constexpr double kRingProtocolEfficiency[kNumProtocols] = {1.0 / 4.0, 0.92, 1.0};
constexpr double kTreeEfficiency = 0.9;
constexpr double kTreeProtocolEfficiency[kNumProtocols] = {1.0 / 3.8, 0.915, 1.0};

/// The placement and link rates one algorithm phase sees.
struct Topology {
  int64_t ranks = 1;         // n
  int64_t nodes = 1;         // N
  int64_t ranksPerNode = 1;  // g
  double intraGBps = 0;      // per rank, achievable
  double nodeGBps = 0;       // per node across the network, achievable
  Fabric intra = Fabric::NVLink;
  double intraLatencyUs = 0;  // LL per-hop latency from the cluster file
  double interLatencyUs = 0;

  /// Ring bottleneck: a rank's own link inside a node, the node's NICs across.
  double ringGBps() const {
    double rate = kInfinity;
    if (ranksPerNode > 1)
      rate = std::min(rate, intraGBps);
    if (nodes > 1)
      rate = std::min(rate, nodeGBps);
    return rate;
  }

  bool mpi() const { return intra == Fabric::Shm; }

  /// Per-hop latency of `protocol` on the intra- or inter-node link: the file's
  /// LL latency scaled by NCCL's ratio for this shape and protocol.
  double hopUs(bool interNode, Shape shape, int protocol) const {
    if (mpi())
      return interNode ? interLatencyUs : intraLatencyUs;
    int fabric = interNode ? 2 : (intra == Fabric::NVLink ? 0 : 1);
    double scale = kHopLatencyUs[fabric][static_cast<int>(shape)][protocol] /
                   kHopLatencyUs[fabric][0][0];
    double hop = (interNode ? interLatencyUs : intraLatencyUs) * scale;
    // tuning.cc: LL intra-node hops are slower when the ring also crosses nodes.
    if (!interNode && nodes > 1 && protocol == 0)
      hop *= 1.8;
    return hop;
  }

  double baseUs(Shape shape, int protocol) const {
    return mpi() ? 0.0 : kBaseLatencyUs[static_cast<int>(shape)][protocol];
  }
};

struct Estimate {
  double timeUs = kInfinity;
  double latencyUs = 0;
  double bandwidthUs = 0;
  Protocol protocol = Protocol::Simple;
};

/// time = base + max(hop chain, transfer + one hop), split into the shared
/// transfer part and the rest.
Estimate pipelined(double baseUs, double chainUs, double transferUs, double lastHopUs,
                   Protocol protocol) {
  Estimate estimate;
  estimate.timeUs = baseUs + std::max(chainUs, transferUs + lastHopUs);
  estimate.bandwidthUs = transferUs;
  estimate.latencyUs = estimate.timeUs - transferUs;
  estimate.protocol = protocol;
  return estimate;
}

/// Only the protocols the fabric has: NCCL's three on GPUs, one for MPI.
template <typename F> Estimate cheapestProtocol(const Topology &topo, F &&priceProtocol) {
  Estimate best;
  for (int p = topo.mpi() ? 2 : 0; p < kNumProtocols; ++p) {
    Estimate candidate = priceProtocol(p);
    if (candidate.timeUs < best.timeUs)
      best = candidate;
  }
  return best;
}

/// Ring over `steps` steps of which `interSteps` cross nodes, moving
/// `wireFactor * bytes` through the ring's bottleneck.
Estimate ring(const Topology &topo, double bytes, int64_t steps, int64_t interSteps,
              double wireFactor) {
  return cheapestProtocol(topo, [&](int p) {
    double intraHop = topo.hopUs(false, Shape::Ring, p);
    double interHop = topo.hopUs(true, Shape::Ring, p);
    double chain = (steps - interSteps) * intraHop + interSteps * interHop;
    double efficiency = topo.mpi() ? 1.0 : kRingProtocolEfficiency[p];
    double transfer = wireFactor * bytes / (topo.ringGBps() * efficiency * 1e3);
    return pipelined(topo.baseUs(Shape::Ring, p), chain, transfer,
                     interSteps > 0 ? interHop : intraHop, kProtocols[p]);
  });
}

/// NCCL's double binary tree: a chain inside each node, a tree across nodes;
/// every byte goes up and comes back down (algbw = busbw / 2).
Estimate treeAllReduce(const Topology &topo, double bytes) {
  int64_t depth = static_cast<int64_t>(std::floor(std::log2(static_cast<double>(topo.nodes))));
  return cheapestProtocol(topo, [&](int p) {
    double intraHop = topo.hopUs(false, Shape::Tree, p);
    double interHop = topo.hopUs(true, Shape::Tree, p);
    double chain = 2.0 * ((topo.ranksPerNode - 1) * intraHop + depth * interHop);
    double efficiency = kTreeEfficiency * (topo.mpi() ? 1.0 : kTreeProtocolEfficiency[p]);
    double transfer = 2.0 * bytes / (topo.ringGBps() * efficiency * 1e3);
    return pipelined(topo.baseUs(Shape::Tree, p), chain, transfer,
                     topo.nodes > 1 ? interHop : intraHop, kProtocols[p]);
  });
}

/// All-to-all as grouped send/recv: intra-node peers over the rank's own link,
/// remote peers over its share of the node's NICs, both at once.
Estimate directAllToAll(const Topology &topo, double bytes) {
  double n = static_cast<double>(topo.ranks);
  double localPeers = static_cast<double>(topo.ranksPerNode - 1);
  double remotePeers = n - 1 - localPeers;
  double localUs = localPeers > 0 ? localPeers / n * bytes / (topo.intraGBps * 1e3) : 0;
  double nicShareGBps = topo.nodeGBps / static_cast<double>(topo.ranksPerNode);
  double remoteUs = remotePeers > 0 ? remotePeers / n * bytes / (nicShareGBps * 1e3) : 0;
  return cheapestProtocol(topo, [&](int p) {
    bool remote = remotePeers > 0;
    double hop = topo.hopUs(remote, Shape::Ring, p);
    // Each peer adds a send/recv pair to the grouped launch: one LL hop apiece.
    double issue = (n - 1) * topo.hopUs(false, Shape::Ring, 0);
    double efficiency = topo.mpi() ? 1.0 : kRingProtocolEfficiency[p];
    double transfer = std::max(localUs, remoteUs) / efficiency;
    return pipelined(topo.baseUs(Shape::Ring, p), hop + issue, transfer, hop, kProtocols[p]);
  });
}

Estimate directSendRecv(const Topology &topo, double bytes) {
  bool remote = topo.nodes > 1;
  // One peer: a single NIC across nodes, the rank's own link inside one.
  double rateGBps = remote ? topo.nodeGBps / static_cast<double>(topo.ranksPerNode) : topo.intraGBps;
  return cheapestProtocol(topo, [&](int p) {
    double hop = topo.hopUs(remote, Shape::Ring, p);
    double efficiency = topo.mpi() ? 1.0 : kRingProtocolEfficiency[p];
    return pipelined(topo.baseUs(Shape::Ring, p), hop, bytes / (rateGBps * efficiency * 1e3), hop,
                     kProtocols[p]);
  });
}

Estimate flat(CollectiveKind kind, Algorithm algorithm, const Topology &topo, double bytes) {
  int64_t n = topo.ranks, nodes = topo.nodes;
  double fraction = static_cast<double>(n - 1) / static_cast<double>(n);
  switch (kind) {
  case CollectiveKind::AllReduce:
    if (algorithm == Algorithm::Tree)
      return treeAllReduce(topo, bytes);
    return ring(topo, bytes, 2 * (n - 1), 2 * (nodes - 1), 2 * fraction);
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllGather:
    return ring(topo, bytes, n - 1, nodes - 1, fraction);
  case CollectiveKind::Broadcast:
    // A pipelined chain: every byte crosses each link once.
    return ring(topo, bytes, n - 1, nodes - 1, 1.0);
  case CollectiveKind::AllToAll:
    return directAllToAll(topo, bytes);
  case CollectiveKind::SendRecv:
    return directSendRecv(topo, bytes);
  }
  return {};
}

Estimate sum(const Estimate &a, const Estimate &b) {
  Estimate total;
  total.timeUs = a.timeUs + b.timeUs;
  total.latencyUs = a.latencyUs + b.latencyUs;
  total.bandwidthUs = a.bandwidthUs + b.bandwidthUs;
  total.protocol = b.protocol;
  return total;
}

/// 2D: an intra-node phase on the full buffer, the inter-node phase among the
/// `ranksPerNode` parallel groups of node peers on a 1/g shard each, sharing
/// the node's NICs. Allreduce = intra reduce-scatter + inter allreduce + intra
/// all-gather; reduce-scatter and all-gather drop the last or first phase.
Estimate hierarchical(CollectiveKind kind, const Topology &topo, double bytes) {
  Topology intra = topo;
  intra.ranks = topo.ranksPerNode;
  intra.nodes = 1;
  Topology inter = topo;
  inter.ranks = topo.nodes;
  inter.ranksPerNode = 1;
  inter.nodeGBps = topo.nodeGBps / static_cast<double>(topo.ranksPerNode);
  double shard = bytes / static_cast<double>(topo.ranksPerNode);
  auto interPhase = [&](CollectiveKind phaseKind) {
    Estimate best = flat(phaseKind, Algorithm::Ring, inter, shard);
    if (phaseKind == CollectiveKind::AllReduce) {
      Estimate tree = flat(phaseKind, Algorithm::Tree, inter, shard);
      if (tree.timeUs < best.timeUs)
        best = tree;
    }
    return best;
  };
  switch (kind) {
  case CollectiveKind::AllReduce:
    return sum(sum(flat(CollectiveKind::ReduceScatter, Algorithm::Ring, intra, bytes),
                   flat(CollectiveKind::AllGather, Algorithm::Ring, intra, bytes)),
               interPhase(CollectiveKind::AllReduce));
  case CollectiveKind::ReduceScatter:
    return sum(flat(CollectiveKind::ReduceScatter, Algorithm::Ring, intra, bytes),
               interPhase(CollectiveKind::ReduceScatter));
  case CollectiveKind::AllGather:
    return sum(flat(CollectiveKind::AllGather, Algorithm::Ring, intra, bytes),
               interPhase(CollectiveKind::AllGather));
  default:
    return {};
  }
}

double busFactor(CollectiveKind kind, int64_t ranks) {
  double n = static_cast<double>(ranks);
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2.0 * (n - 1) / n;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllGather:
  case CollectiveKind::AllToAll:
    return (n - 1) / n;
  default:
    return 1.0;
  }
}

Group normalized(Group group) {
  group.ranks = std::max<int64_t>(group.ranks, 1);
  group.nodes = std::clamp<int64_t>(group.nodes, 1, group.ranks);
  return group;
}

CollectiveCost finish(CollectiveKind kind, double bytes, Group group, Algorithm algorithm,
                      const Estimate &estimate, bool profiled) {
  CollectiveCost cost;
  cost.timeUs = estimate.timeUs;
  cost.algorithm = algorithm;
  cost.protocol = estimate.protocol;
  cost.latencyUs = estimate.latencyUs;
  cost.bandwidthUs = estimate.bandwidthUs;
  cost.profiled = profiled;
  if (cost.timeUs > 0 && std::isfinite(cost.timeUs)) {
    cost.algBandwidthGBps = bytes / cost.timeUs / 1e3;
    cost.busBandwidthGBps = cost.algBandwidthGBps * busFactor(kind, group.ranks);
  }
  return cost;
}

Topology topologyOf(const Cluster &cluster, Group group) {
  Topology topo;
  topo.ranks = group.ranks;
  topo.nodes = group.nodes;
  topo.ranksPerNode = (group.ranks + group.nodes - 1) / group.nodes;
  topo.intraGBps = cluster.intraNode.bandwidthGBps * cluster.intraNode.efficiency;
  // With fewer ranks than NICs on a node, each rank drives its own NIC only.
  int64_t activeNics = std::min(cluster.nicsPerNode, topo.ranksPerNode);
  topo.nodeGBps = static_cast<double>(activeNics) * cluster.interNode.bandwidthGBps *
                  cluster.interNode.efficiency;
  topo.intra = intraFabric(cluster.intraNode);
  topo.intraLatencyUs = cluster.intraNode.latencyUs;
  topo.interLatencyUs = cluster.interNode.latencyUs;
  return topo;
}

/// The profiled fit for (kind, ranks) whose size range holds `bytes`, else
/// the nearest range (a fit extrapolates better than switching models).
const ProfiledCollective *findProfile(const Cluster &cluster, CollectiveKind kind, int64_t ranks,
                                      double bytes) {
  const ProfiledCollective *nearest = nullptr;
  double nearestDistance = kInfinity;
  for (const ProfiledCollective &fit : cluster.profiled) {
    if (fit.kind != kind || fit.ranks != ranks)
      continue;
    if (bytes >= fit.minBytes && bytes <= fit.maxBytes)
      return &fit;
    double distance = bytes < fit.minBytes ? std::log(fit.minBytes / std::max(bytes, 1.0))
                                           : std::log(bytes / fit.maxBytes);
    if (distance < nearestDistance) {
      nearestDistance = distance;
      nearest = &fit;
    }
  }
  return nearest;
}

} // namespace

const char *toString(Protocol protocol) {
  switch (protocol) {
  case Protocol::LL: return "ll";
  case Protocol::LL128: return "ll128";
  case Protocol::Simple: return "simple";
  }
  return "simple";
}

CostModel::CostModel(Cluster cluster) : cluster_(std::move(cluster)) {}

Group CostModel::worldGroup() const { return {cluster_.worldSize(), cluster_.nodes}; }

Group CostModel::groupOf(int64_t ranks) const {
  ranks = std::max<int64_t>(ranks, 1);
  int64_t nodes = (ranks + cluster_.gpusPerNode - 1) / cluster_.gpusPerNode;
  return {ranks, std::min(nodes, std::max<int64_t>(cluster_.nodes, 1))};
}

bool CostModel::supports(CollectiveKind kind, Algorithm algorithm, Group group) {
  group = normalized(group);
  int64_t ranksPerNode = (group.ranks + group.nodes - 1) / group.nodes;
  switch (algorithm) {
  case Algorithm::Ring:
    return kind != CollectiveKind::AllToAll && kind != CollectiveKind::SendRecv;
  case Algorithm::Tree:
    return kind == CollectiveKind::AllReduce;
  case Algorithm::Hierarchical:
    return (kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter ||
            kind == CollectiveKind::AllGather) &&
           group.nodes > 1 && ranksPerNode > 1;
  case Algorithm::Direct:
    return kind == CollectiveKind::AllToAll || kind == CollectiveKind::SendRecv;
  }
  return false;
}

CollectiveCost CostModel::collective(CollectiveKind kind, double bytes, Group group,
                                     Algorithm algorithm) const {
  group = normalized(group);
  if (!supports(kind, algorithm, group)) {
    CollectiveCost unsupported;
    unsupported.algorithm = algorithm;
    unsupported.timeUs = kInfinity;
    return unsupported;
  }
  bytes = std::max(bytes, 0.0);
  if (group.ranks == 1 || bytes == 0)
    return finish(kind, bytes, group, algorithm, Estimate{0, 0, 0, Protocol::Simple}, false);

  if (const ProfiledCollective *fit = findProfile(cluster_, kind, group.ranks, bytes)) {
    Estimate measured;
    measured.bandwidthUs = fit->betaUsPerByte * bytes;
    measured.latencyUs = fit->alphaUs;
    measured.timeUs = measured.latencyUs + measured.bandwidthUs;
    return finish(kind, bytes, group, algorithm, measured, true);
  }

  Topology topo = topologyOf(cluster_, group);
  Estimate estimate = algorithm == Algorithm::Hierarchical ? hierarchical(kind, topo, bytes)
                                                           : flat(kind, algorithm, topo, bytes);
  return finish(kind, bytes, group, algorithm, estimate, false);
}

CollectiveCost CostModel::collective(CollectiveKind kind, double bytes, Group group) const {
  CollectiveCost best;
  best.timeUs = kInfinity;
  for (Algorithm algorithm :
       {Algorithm::Ring, Algorithm::Tree, Algorithm::Hierarchical, Algorithm::Direct}) {
    if (!supports(kind, algorithm, group))
      continue;
    CollectiveCost candidate = collective(kind, bytes, group, algorithm);
    if (candidate.timeUs < best.timeUs)
      best = candidate;
  }
  return best;
}

CollectiveCost CostModel::chunkedCollective(CollectiveKind kind, double bytes, Group group,
                                            int64_t chunks) const {
  chunks = std::max<int64_t>(chunks, 1);
  CollectiveCost piece = collective(kind, bytes / static_cast<double>(chunks), group);
  if (chunks == 1)
    return piece;
  double count = static_cast<double>(chunks);
  Estimate total{piece.timeUs * count, piece.latencyUs * count, piece.bandwidthUs * count,
                 piece.protocol};
  return finish(kind, bytes, normalized(group), piece.algorithm, total, piece.profiled);
}

double CostModel::computeUs(double flops, double bytes, DType dtype) const {
  const GpuSpec &gpu = cluster_.gpu;
  auto peak = gpu.peakTflops.find(dtype);
  // Without native support for a dtype the GPU computes it at the fp32 rate.
  if (peak == gpu.peakTflops.end())
    peak = gpu.peakTflops.find(DType::F32);
  double peakTflops = peak == gpu.peakTflops.end() ? 1.0 : peak->second;
  double flopUs = std::max(flops, 0.0) / (peakTflops * gpu.computeEfficiency * 1e6);
  double memoryUs = std::max(bytes, 0.0) / (gpu.hbmBandwidthGBps * gpu.memoryEfficiency * 1e3);
  return std::max(flopUs, memoryUs);
}

double CostModel::bandwidthOptimalAllReduceUs(double bytes, Group group) const {
  if (group.ranks <= 1 || bytes <= 0)
    return 0;
  // A profile measured the real bandwidth term: use its large-message slope.
  const ProfiledCollective *largest = nullptr;
  for (const ProfiledCollective &fit : cluster_.profiled)
    if (fit.kind == CollectiveKind::AllReduce && fit.ranks == group.ranks &&
        (!largest || fit.maxBytes > largest->maxBytes))
      largest = &fit;
  if (largest && largest->betaUsPerByte > 0)
    return largest->betaUsPerByte * bytes;
  double n = static_cast<double>(group.ranks);
  return 2.0 * (n - 1) / n * bytes / (topologyOf(cluster_, group).ringGBps() * 1e3);
}

double CostModel::bandwidthOptimalAllReduceUs(double bytes) const {
  return bandwidthOptimalAllReduceUs(bytes, worldGroup());
}

double CostModel::lowerBoundUs(double computeUs, double gradientBytes, Group group) const {
  return std::max(computeUs, bandwidthOptimalAllReduceUs(gradientBytes, group));
}

} // namespace zen::cost
