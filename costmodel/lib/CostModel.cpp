//===- CostModel.cpp - collective and compute costs -----------------------===//
//
// Collectives follow NCCL's own tuning model (src/graph/tuning.cc,
// ncclTopoTuneModel and ncclTopoGetAlgoTime, NCCL 2.30.7; the constants used
// here are unchanged since 2.23): for every algorithm and protocol
//
//   time = latency + bytes / algorithm bandwidth,
//   latency = base + per-hop latencies (by link kind, algorithm and protocol),
//   algorithm bandwidth = bus bandwidth x protocol efficiency, converted to the
//                         algorithm's bytes (ring: n / nsteps, tree: 1/2),
//
// and the tuner runs the cheapest pair. Every term is additive, so a
// collective's time strictly increases with its size. Our deviations:
//
//  - Hierarchical (2D) reduce-scatter / all-gather / all-reduce is modelled
//    although NCCL lacks it (Horovod/BytePS-style planners use it, and it wins
//    on few-NIC nodes): its intra- and inter-node phases are each priced as
//    above and added.
//  - All-to-all and send/recv (NCCL's p2p path, which its tuner does not price)
//    are our own latency + bytes / rate estimates with the same constants; the
//    2D all-to-all (Tutel's 2DH) is an intra-node and an inter-node all-to-all
//    with two layout swaps through HBM.
//  - Every phase also records how busy it keeps each link level (a rank's
//    links inside the node, the node's NICs), so the simulator can share the
//    levels apart among concurrent collectives.
//  - NCCL's size-bucketed corrections are left out: the tree's medium-size
//    bandwidth factors and the ring's 1.4x "plateau" latency step (they make
//    time non-monotone in size or depend on the channel count), and the
//    per-channel LL128 / tree bandwidth caps (the cluster file does not give
//    NCCL's channel count). The LL bandwidth cap is kept across nodes, where it
//    depends only on the node count.
//  - MPI over shared memory (`shm`) has one protocol, no base latency and the
//    file's per-hop latencies as they are.
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/CostModel.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace zen::cost {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr int kNumProtocols = 3;
constexpr Protocol kProtocols[kNumProtocols] = {Protocol::LL, Protocol::LL128, Protocol::Simple};
constexpr int kLL = 0, kLL128 = 1, kSimple = 2;

/// NCCL's hardware classes of the hop latency table.
enum Fabric { kNVLink, kPCIe, kNetwork };
/// Rows of NCCL's latency tables.
enum Pattern { kRing, kTree };

// ncclTunerConstantsDefaults (NCCL 2.30.7), microseconds, {LL, LL128, Simple}.
constexpr double kBaseLatencyUs[2][kNumProtocols] = {{6.6, 14.0, 8.4},   // ring
                                                     {6.8, 14.0, 8.4}};  // tree
constexpr double kHopLatencyUs[3][2][kNumProtocols] = {
    {{0.6, 1.9, 3.4}, {0.6, 1.25, 4.0}},   // NVLink: ring, tree
    {{1.0, 2.5, 5.7}, {1.0, 1.9, 4.0}},    // PCIe
    {{2.7, 4.0, 14.0}, {5.0, 8.5, 14.0}},  // network
};
// A ring crossing nodes still posts every step to the network proxy: each
// intra-node step costs at least this (x86 Intel and default; three times for
// Simple).
constexpr double kNetPostOverheadUs = 1.0;
constexpr double kSimpleNetPostFactor = 3.0;
// Bus-bandwidth refinements ("various model refinements" in ncclTopoTuneModel).
constexpr double kRingLLFraction = 0.5;      // 8-byte lines with a 4-byte flag
constexpr double kLL128Fraction = 0.92;      // 120 of every 128 bytes
constexpr double kTreeFraction = 0.92;       // all-reduce trees
constexpr double kTreeLLDivisor = 3.8;
constexpr double kTreeLL128FractionOneNode = 7.0 / 9.0;
constexpr double kTreeLL128FractionNodes = 120.0 / 128.0;
// llMaxBws across nodes (its Intel row; AMD's 22.5 / 19.0 are close): LL's bus
// bandwidth never exceeds this, GB/s.
constexpr double kLLMaxGBpsTwoNodes = 39.0;
constexpr double kLLMaxGBpsMoreNodes = 20.4;

/// One algorithm with one protocol: time = latencyUs + usPerByte x bytes.
struct Line {
  double latencyUs = kInfinity;
  double usPerByte = 0;
  Protocol protocol = Protocol::Simple;

  double at(double bytes) const { return latencyUs + usPerByte * bytes; }
};

/// One phase of an algorithm and the ways to run it (a protocol each; for the
/// 2D all-reduce's inter-node phase, ring or tree too). The tuner runs the
/// cheapest for the size.
class Phase {
public:
  void add(const Line &line) { lines_[count_++] = line; }
  /// The fraction of the phase's transfer time each link level is busy: 1 for
  /// the bottleneck, less for a faster level, 0 for one it does not use.
  void setLinkShares(double intra, double inter) {
    intraShare_ = intra;
    interShare_ = inter;
  }
  double intraShare() const { return intraShare_; }
  double interShare() const { return interShare_; }
  const Line &cheapestAt(double bytes) const {
    const Line *best = &lines_[0];
    for (int i = 1; i < count_; ++i)
      if (lines_[i].at(bytes) < best->at(bytes))
        best = &lines_[i];
    return *best;
  }
  double minUsPerByte() const {
    double least = kInfinity;
    for (int i = 0; i < count_; ++i)
      least = std::min(least, lines_[i].usPerByte);
    return least;
  }
  /// The phase moves only `fraction` of the collective's buffer.
  void moveFractionOfBuffer(double fraction) {
    for (int i = 0; i < count_; ++i)
      lines_[i].usPerByte *= fraction;
  }

private:
  std::array<Line, 2 * kNumProtocols> lines_;
  int count_ = 0;
  double intraShare_ = 0, interShare_ = 0;
};

struct Estimate {
  double latencyUs = 0;
  double bandwidthUs = 0;
  Protocol protocol = Protocol::Simple;
  double intraNodeUs = 0;
  double interNodeUs = 0;
};

/// An algorithm as consecutive phases (one, or up to three for a 2D one),
/// each run with its own cheapest option; the last phase names the protocol.
class PhasedAlgorithm {
public:
  Phase &addPhase() { return phases_[count_++]; }
  bool empty() const { return count_ == 0; }
  Estimate at(double bytes) const {
    Estimate total;
    for (int i = 0; i < count_; ++i) {
      const Line &line = phases_[i].cheapestAt(bytes);
      const double transferUs = line.usPerByte * bytes;
      total.latencyUs += line.latencyUs;
      total.bandwidthUs += transferUs;
      total.intraNodeUs += transferUs * phases_[i].intraShare();
      total.interNodeUs += transferUs * phases_[i].interShare();
      total.protocol = line.protocol;
    }
    if (count_ > 1) {
      // Phases run one after another, and which of them meets another
      // collective's transfer is not modelled: hold every level used, all along.
      total.intraNodeUs = total.intraNodeUs > 0 ? total.bandwidthUs : 0;
      total.interNodeUs = total.interNodeUs > 0 ? total.bandwidthUs : 0;
    }
    return total;
  }
  /// No way to run it moves a byte for less (latencies only add), alone or
  /// sharing its bottleneck (every level it uses, for a phased one) with others.
  double minUsPerByte() const {
    double total = 0;
    for (int i = 0; i < count_; ++i)
      total += phases_[i].minUsPerByte();
    return total;
  }

private:
  std::array<Phase, 3> phases_;
  int count_ = 0;
};

/// The placement and link rates one algorithm phase sees.
struct Topology {
  int64_t ranks = 1;         // n
  int64_t nodes = 1;         // N
  int64_t ranksPerNode = 1;  // g
  double intraGBps = 0;      // per rank, achievable
  double nodeGBps = 0;       // per node across the network, achievable
  bool mpi = false;          // MPI over shared memory, not NCCL
  Fabric intraFabric = kNVLink;
  double intraLatencyUs = 0;  // the file's LL per-hop latencies
  double interLatencyUs = 0;
  double hbmGBps = 0;         // achievable, for layout swaps

  /// Ring bottleneck: a rank's own link inside a node, the node's NICs across.
  double busGBps() const {
    double rate = kInfinity;
    if (ranksPerNode > 1)
      rate = std::min(rate, intraGBps);
    if (nodes > 1)
      rate = std::min(rate, nodeGBps);
    return rate;
  }

  /// A ring or tree phase keeps its bottleneck busy all along and a faster
  /// level for the ratio of the rates.
  double intraShare() const { return ranksPerNode > 1 ? busGBps() / intraGBps : 0; }
  double interShare() const { return nodes > 1 ? busGBps() / nodeGBps : 0; }

  double llCapGBps() const {
    return nodes == 2 ? kLLMaxGBpsTwoNodes : nodes > 2 ? kLLMaxGBpsMoreNodes : kInfinity;
  }

  /// The protocols the fabric has: NCCL's three on GPUs, one for MPI.
  int firstProtocol() const { return mpi ? kSimple : kLL; }

  /// Per-hop latency: the file's LL latency scaled by NCCL's ratio for this
  /// pattern and protocol.
  double hopUs(bool interNode, Pattern pattern, int protocol) const {
    if (mpi)
      return interNode ? interLatencyUs : intraLatencyUs;
    Fabric fabric = interNode ? kNetwork : intraFabric;
    // With one rank per node every network hop is exposed: NCCL prices it at the tree's.
    Pattern row = interNode && ranksPerNode == 1 ? kTree : pattern;
    double scale = kHopLatencyUs[fabric][row][protocol] / kHopLatencyUs[fabric][kRing][kLL];
    return (interNode ? interLatencyUs : intraLatencyUs) * scale;
  }

  double baseUs(Pattern pattern, int protocol) const {
    return mpi ? 0.0 : kBaseLatencyUs[pattern][protocol];
  }

  /// Fraction of a link's rate a protocol moves as payload.
  double payloadFraction(int protocol) const {
    if (mpi || protocol == kSimple)
      return 1.0;
    return protocol == kLL ? kRingLLFraction : kLL128Fraction;
  }
};

/// Ring over `steps` steps of which `interSteps` cross nodes; every rank moves
/// `wireFactor` x bytes through the ring's bottleneck (nccl-tests' bus factor,
/// which is NCCL's busBw x n / nsteps conversion).
void addRing(Phase &phase, const Topology &topo, int64_t steps, int64_t interSteps,
             double wireFactor) {
  for (int p = topo.firstProtocol(); p < kNumProtocols; ++p) {
    double intraHop = topo.hopUs(false, kRing, p);
    if (!topo.mpi && topo.nodes > 1)
      intraHop = std::max(intraHop, kNetPostOverheadUs * (p == kSimple ? kSimpleNetPostFactor : 1));
    double interHop = topo.hopUs(true, kRing, p);
    double busGBps = topo.busGBps() * topo.payloadFraction(p);
    if (!topo.mpi && p == kLL)
      busGBps = std::min(busGBps, topo.llCapGBps());
    phase.add({topo.baseUs(kRing, p) + static_cast<double>(steps - interSteps) * intraHop +
                   static_cast<double>(interSteps) * interHop,
               wireFactor / (busGBps * 1e3), kProtocols[p]});
  }
  phase.setLinkShares(topo.intraShare(), topo.interShare());
}

/// NCCL's double binary tree all-reduce: a chain inside each node, a tree of
/// depth log2(N) across nodes, up and back down; algorithm bandwidth is half the
/// bus bandwidth.
void addTreeAllReduce(Phase &phase, const Topology &topo) {
  double depth = std::floor(std::log2(static_cast<double>(topo.nodes)));
  for (int p = topo.firstProtocol(); p < kNumProtocols; ++p) {
    double latency = topo.baseUs(kTree, p) +
                     2.0 * (static_cast<double>(topo.ranksPerNode - 1) * topo.hopUs(false, kTree, p) +
                            depth * topo.hopUs(true, kTree, p));
    double busGBps = topo.busGBps() * kTreeFraction;
    if (p == kLL)
      busGBps = std::min(busGBps / kTreeLLDivisor, topo.llCapGBps());
    else if (p == kLL128)
      busGBps *= topo.nodes == 1 ? kTreeLL128FractionOneNode : kTreeLL128FractionNodes;
    phase.add({latency, 2.0 / (busGBps * 1e3), kProtocols[p]});
  }
  phase.setLinkShares(topo.intraShare(), topo.interShare());
}

/// All-to-all as grouped send/recv: intra-node peers over the rank's own link,
/// remote peers over its share of the node's NICs, both at once.
void addDirectAllToAll(Phase &phase, const Topology &topo) {
  double n = static_cast<double>(topo.ranks);
  double localPeers = static_cast<double>(topo.ranksPerNode - 1);
  double remotePeers = n - 1 - localPeers;
  double localUsPerByte = localPeers > 0 ? localPeers / n / (topo.intraGBps * 1e3) : 0;
  double nicShareGBps = topo.nodeGBps / static_cast<double>(topo.ranksPerNode);
  double remoteUsPerByte = remotePeers > 0 ? remotePeers / n / (nicShareGBps * 1e3) : 0;
  bool remote = remotePeers > 0;
  for (int p = topo.firstProtocol(); p < kNumProtocols; ++p) {
    // Each peer adds a send/recv pair to the grouped launch: one LL hop apiece.
    double issue = (n - 1) * topo.hopUs(false, kRing, topo.firstProtocol());
    phase.add({topo.baseUs(kRing, p) + topo.hopUs(remote, kRing, p) + issue,
               std::max(localUsPerByte, remoteUsPerByte) / topo.payloadFraction(p), kProtocols[p]});
  }
  const double slower = std::max(localUsPerByte, remoteUsPerByte);
  if (slower > 0)
    phase.setLinkShares(localUsPerByte / slower, remoteUsPerByte / slower);
}

void addDirectSendRecv(Phase &phase, const Topology &topo) {
  bool remote = topo.nodes > 1;
  // One peer: a single NIC across nodes, the rank's own link inside one.
  double rateGBps =
      remote ? topo.nodeGBps / static_cast<double>(topo.ranksPerNode) : topo.intraGBps;
  for (int p = topo.firstProtocol(); p < kNumProtocols; ++p)
    phase.add({topo.baseUs(kRing, p) + topo.hopUs(remote, kRing, p),
               1.0 / (rateGBps * topo.payloadFraction(p) * 1e3), kProtocols[p]});
  phase.setLinkShares(remote ? 0 : 1, remote ? 1 : 0);
}

void addFlat(Phase &phase, CollectiveKind kind, Algorithm algorithm, const Topology &topo) {
  int64_t n = topo.ranks, nodes = topo.nodes;
  double fraction = static_cast<double>(n - 1) / static_cast<double>(n);
  switch (kind) {
  case CollectiveKind::AllReduce:
    if (algorithm == Algorithm::Tree)
      addTreeAllReduce(phase, topo);
    else
      addRing(phase, topo, 2 * (n - 1), 2 * (nodes - 1), 2 * fraction);
    return;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllGather:
    addRing(phase, topo, n - 1, nodes - 1, fraction);
    return;
  case CollectiveKind::Broadcast:
    // A pipelined chain: every byte crosses each link once.
    addRing(phase, topo, n - 1, nodes - 1, 1.0);
    return;
  case CollectiveKind::AllToAll:
    addDirectAllToAll(phase, topo);
    return;
  case CollectiveKind::SendRecv:
    addDirectSendRecv(phase, topo);
    return;
  }
}

/// 2D: intra-node phases on the full buffer, and the inter-node phase among
/// the `ranksPerNode` parallel groups of node peers on a 1/g shard each,
/// sharing the node's NICs. All-reduce = intra reduce-scatter + inter
/// all-reduce (ring or tree) + intra all-gather; reduce-scatter and all-gather
/// keep their own kind in both phases. All-to-all (Tutel's 2DH): the whole
/// buffer among the g ranks of a node, then among the N ranks of the same
/// local index (one per node; a rank drives one NIC, so with fewer NICs than g
/// the groups share them), g - 1 + N - 1 peers instead of n - 1, and two
/// layout swaps between them, each a read and a write of the buffer in HBM.
void addHierarchical(PhasedAlgorithm &algorithm, CollectiveKind kind, const Topology &topo) {
  Topology intra = topo;
  intra.ranks = topo.ranksPerNode;
  intra.nodes = 1;
  Topology inter = topo;
  inter.ranks = topo.nodes;
  inter.ranksPerNode = 1;
  inter.nodeGBps = topo.nodeGBps / static_cast<double>(topo.ranksPerNode);

  if (kind == CollectiveKind::AllToAll) {
    addDirectAllToAll(algorithm.addPhase(), intra);
    algorithm.addPhase().add({0, 4.0 / (topo.hbmGBps * 1e3), Protocol::Simple});
    addDirectAllToAll(algorithm.addPhase(), inter);
    return;
  }
  if (kind == CollectiveKind::AllReduce) {
    addFlat(algorithm.addPhase(), CollectiveKind::ReduceScatter, Algorithm::Ring, intra);
    addFlat(algorithm.addPhase(), CollectiveKind::AllGather, Algorithm::Ring, intra);
  } else {
    addFlat(algorithm.addPhase(), kind, Algorithm::Ring, intra);
  }
  Phase &across = algorithm.addPhase();
  addFlat(across, kind, Algorithm::Ring, inter);
  if (kind == CollectiveKind::AllReduce)
    addFlat(across, kind, Algorithm::Tree, inter);
  across.moveFractionOfBuffer(1.0 / static_cast<double>(topo.ranksPerNode));
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
  group.perNode = std::max<int64_t>(group.perNode, 1);
  return group;
}

Topology topologyOf(const Cluster &cluster, Group group) {
  Topology topo;
  topo.ranks = group.ranks;
  topo.nodes = group.nodes;
  topo.ranksPerNode = (group.ranks + group.nodes - 1) / group.nodes;
  topo.intraGBps = cluster.intraNode.bandwidthGBps * cluster.intraNode.efficiency;
  // With fewer ranks than NICs on a node, each rank drives its own NIC only; groups
  // synchronising at once on a node split its NICs.
  const double activeNics =
      std::min(static_cast<double>(std::min(cluster.nicsPerNode, topo.ranksPerNode)),
               static_cast<double>(cluster.nicsPerNode) / static_cast<double>(group.perNode));
  topo.nodeGBps = activeNics * cluster.interNode.bandwidthGBps * cluster.interNode.efficiency;
  topo.mpi = cluster.intraNode.kind == "shm";
  topo.intraFabric = cluster.intraNode.kind == "nvlink" ? kNVLink : kPCIe;
  topo.intraLatencyUs = cluster.intraNode.latencyUs;
  topo.interLatencyUs = cluster.interNode.latencyUs;
  topo.hbmGBps = cluster.gpu.hbmBandwidthGBps * cluster.gpu.memoryEfficiency;
  return topo;
}

/// The phases of `algorithm` for `kind` over `group` (empty when unsupported).
PhasedAlgorithm phasesOf(const Cluster &cluster, CollectiveKind kind, Algorithm algorithm,
                         Group group) {
  PhasedAlgorithm phased;
  if (!CostModel::supports(kind, algorithm, group))
    return phased;
  Topology topo = topologyOf(cluster, group);
  if (algorithm == Algorithm::Hierarchical)
    addHierarchical(phased, kind, topo);
  else
    addFlat(phased.addPhase(), kind, algorithm, topo);
  return phased;
}

CollectiveCost finish(CollectiveKind kind, double bytes, Group group, Algorithm algorithm,
                      const Estimate &estimate, bool profiled) {
  CollectiveCost cost;
  cost.timeUs = estimate.latencyUs + estimate.bandwidthUs;
  cost.algorithm = algorithm;
  cost.protocol = estimate.protocol;
  cost.latencyUs = estimate.latencyUs;
  cost.bandwidthUs = estimate.bandwidthUs;
  cost.intraNodeUs = estimate.intraNodeUs;
  cost.interNodeUs = estimate.interNodeUs;
  cost.profiled = profiled;
  if (cost.timeUs > 0 && std::isfinite(cost.timeUs)) {
    cost.algBandwidthGBps = bytes / cost.timeUs / 1e3;
    cost.busBandwidthGBps = cost.algBandwidthGBps * busFactor(kind, group.ranks);
  }
  return cost;
}

bool hasProfile(const Cluster &cluster, CollectiveKind kind, int64_t ranks) {
  for (const ProfiledCollective &fit : cluster.profiled)
    if (fit.kind == kind && fit.ranks == ranks)
      return true;
  return false;
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

constexpr Algorithm kAlgorithms[] = {Algorithm::Ring, Algorithm::Tree, Algorithm::Hierarchical,
                                     Algorithm::Direct};

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
            kind == CollectiveKind::AllGather || kind == CollectiveKind::AllToAll) &&
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
    return finish(kind, bytes, group, algorithm, Estimate{}, false);

  if (const ProfiledCollective *fit = findProfile(cluster_, kind, group.ranks, bytes)) {
    Estimate measured;
    measured.latencyUs = fit->alphaUs;
    measured.bandwidthUs = fit->betaUsPerByte * bytes;
    // A fit does not say which level limits it: it is charged to both it uses.
    const int64_t ranksPerNode = (group.ranks + group.nodes - 1) / group.nodes;
    measured.intraNodeUs = ranksPerNode > 1 ? measured.bandwidthUs : 0;
    measured.interNodeUs = group.nodes > 1 ? measured.bandwidthUs : 0;
    return finish(kind, bytes, group, algorithm, measured, true);
  }
  return finish(kind, bytes, group, algorithm,
                phasesOf(cluster_, kind, algorithm, group).at(bytes), false);
}

CollectiveCost CostModel::collective(CollectiveKind kind, double bytes, Group group) const {
  CollectiveCost best;
  best.timeUs = kInfinity;
  for (Algorithm algorithm : kAlgorithms) {
    if (!supports(kind, algorithm, group))
      continue;
    CollectiveCost candidate = collective(kind, bytes, group, algorithm);
    if (candidate.timeUs < best.timeUs)
      best = candidate;
  }
  return best;
}

CollectiveCost CostModel::chunkedCollective(CollectiveKind kind, double bytes, Group group,
                                            int64_t chunks,
                                            std::optional<Algorithm> algorithm) const {
  chunks = std::max<int64_t>(chunks, 1);
  const double pieceBytes = bytes / static_cast<double>(chunks);
  CollectiveCost piece = algorithm ? collective(kind, pieceBytes, group, *algorithm)
                                   : collective(kind, pieceBytes, group);
  if (chunks == 1 || !std::isfinite(piece.timeUs))
    return piece;
  double count = static_cast<double>(chunks);
  Estimate total{piece.latencyUs * count, piece.bandwidthUs * count, piece.protocol,
                 piece.intraNodeUs * count, piece.interNodeUs * count};
  return finish(kind, bytes, normalized(group), piece.algorithm, total, piece.profiled);
}

double CostModel::executorOverheadUs(int64_t elements, Group group) const {
  const auto &executor = cluster_.profiledExecutor;
  if (!executor || group.ranks <= 1 || elements <= 0)
    return 0;
  return executor->alphaUs + executor->betaUsPerByte * 4.0 * static_cast<double>(elements);
}

double CostModel::computeUs(double flops, double bytes, DType dtype) const {
  // Measured compute: the task's GEMM at the rate timed for its size, then its memory
  // traffic at the measured copy rate, plus the fixed cost of a kernel. The profile timed
  // them as separate kernels on the same cores, so they add (a roofline's max assumes one
  // kernel overlapping both).
  if (const ProfiledCompute &measured = cluster_.profiledCompute; measured.measured()) {
    flops = std::max(flops, 0.0);
    bytes = std::max(bytes, 0.0);
    if (flops == 0 && bytes == 0)
      return 0;
    double gemmUs = flops > 0 ? flops / (measured.gemmGflops(flops) * 1e3) : 0;
    return measured.kernelOverheadUs + gemmUs + bytes / (measured.memoryGBps * 1e3);
  }
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

double CostModel::cheapestUsPerByte(CollectiveKind kind, Group group) const {
  group = normalized(group);
  if (group.ranks == 1)
    return 0;
  double least = kInfinity;
  // A profile replaces the analytic model for its (kind, ranks) at every size:
  // any of its fitted ranges may price a piece.
  if (hasProfile(cluster_, kind, group.ranks)) {
    for (const ProfiledCollective &fit : cluster_.profiled)
      if (fit.kind == kind && fit.ranks == group.ranks)
        least = std::min(least, fit.betaUsPerByte);
    return least;
  }
  for (Algorithm algorithm : kAlgorithms) {
    PhasedAlgorithm phased = phasesOf(cluster_, kind, algorithm, group);
    if (!phased.empty())
      least = std::min(least, phased.minUsPerByte());
  }
  return least;
}

double CostModel::communicationBoundUs(double gradientBytes, Group group,
                                       const std::vector<CompressionSpec> &compressors) const {
  group = normalized(group);
  if (group.ranks <= 1 || gradientBytes <= 0)
    return 0;
  const double allReduce = cheapestUsPerByte(CollectiveKind::AllReduce, group);
  const double allGather = cheapestUsPerByte(CollectiveKind::AllGather, group);
  // Dense gradients: one all-reduce, or a reduce-scatter and an all-gather (decomposed).
  double bound = gradientBytes * std::min(allReduce, cheapestUsPerByte(CollectiveKind::ReduceScatter,
                                                                      group) + allGather);
  const double elements = gradientBytes / 4;
  for (const CompressionSpec &spec : compressors) {
    double wire = wireBytesLowerBound(spec, elements);
    // Gathered payloads: every rank receives every rank's.
    if (vocab::supports(spec.method, SyncScheme::AllReduce))
      bound = std::min(bound, wire * allReduce);
    if (vocab::supports(spec.method, SyncScheme::AllGather))
      bound = std::min(bound, wire * static_cast<double>(group.ranks) * allGather);
  }
  return bound;
}

double CostModel::lowerBoundUs(double computeUs, double gradientBytes, Group group,
                               const std::vector<CompressionSpec> &compressors) const {
  return std::max(computeUs, communicationBoundUs(gradientBytes, group, compressors));
}

} // namespace zen::cost
