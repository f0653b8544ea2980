//===- Moe.cpp - Mixture-of-Experts costs and memory ----------------------===//
#include "zen/CostModel/Moe.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace zen::cost {
namespace {

/// Bytes of one activation element: 16-bit under mixed precision, as the
/// weights (bytesPerParameter), fp32 otherwise.
double activationBytes(DType dtype) {
  TrainingSetup setup;
  setup.computeDtype = dtype;
  return bytesPerParameter(setup).weights;
}

} // namespace

int64_t MoeShape::capacity() const {
  if (capacityRows > 0)
    return capacityRows;
  if (experts <= 0)
    return 0;
  double rows = std::ceil(capacityFactor * double(topK) * double(tokens) / double(experts));
  return std::max<int64_t>(1, static_cast<int64_t>(rows));
}

double MoeShape::expertParams() const {
  const double rows = double(firstGemmRows());
  return rows * double(hidden) + double(hidden) * double(ffn) +
         (biases ? rows + double(hidden) : 0.0);
}

std::string checkExpertParallel(const MoeShape &shape, int64_t ep, int64_t dp) {
  if (shape.tokens < 1 || shape.hidden < 1 || shape.ffn < 1 || shape.experts < 1)
    return "an MoE layer needs tokens, hidden, ffn and experts of at least 1";
  if (shape.topK < 1 || shape.topK > shape.experts)
    return "top-k " + std::to_string(shape.topK) + " must be between 1 and the " +
           std::to_string(shape.experts) + " experts";
  if (!(shape.capacityFactor > 0) || !std::isfinite(shape.capacityFactor))
    return "the capacity factor must be positive";
  if (ep < 1 || dp < 1)
    return "ep and dp must be at least 1";
  if (shape.experts % ep != 0)
    return "ep " + std::to_string(ep) + " does not divide the " + std::to_string(shape.experts) +
           " experts";
  if (dp % ep != 0)
    return "ep " + std::to_string(ep) + " does not divide dp " + std::to_string(dp);
  return "";
}

double busiestExpertRows(const MoeShape &shape, double imbalance) {
  if (!std::isfinite(imbalance) || imbalance < 1)
    throw zen::Error(zen::ErrorKind::BadUsage, "the MoE imbalance factor must be finite and at least 1");
  const double mean = double(shape.topK) * double(shape.tokens) / double(shape.experts);
  return std::min(double(shape.capacity()), std::ceil(imbalance * mean));
}

double dispatchBytes(const MoeShape &shape, DType dtype) {
  return double(shape.experts) * double(shape.capacity()) * double(shape.hidden) *
         activationBytes(dtype);
}

bool compressesTokens(CompressionMethod method, DType dtype) {
  switch (method) {
  case CompressionMethod::FP16:
  case CompressionMethod::BF16:
    return activationBytes(dtype) > 2;
  case CompressionMethod::Int8:
    return true;
  default:
    return false;
  }
}

double dispatchWireBytes(const MoeShape &shape, DType dtype, CompressionMethod method) {
  if (method == CompressionMethod::None)
    return dispatchBytes(shape, dtype);
  if (!compressesTokens(method, dtype))
    throw zen::Error(zen::ErrorKind::BadInput, std::string(toString(method)) +
                                " does not compress the dispatched tokens of a " +
                                toString(dtype) + " model");
  const double rows = double(shape.experts) * double(shape.capacity());
  const double hidden = double(shape.hidden);
  return method == CompressionMethod::Int8 ? rows * (hidden + 4.0) : rows * hidden * 2.0;
}

const char *toString(AllToAllAlgorithm algorithm) {
  return algorithm == AllToAllAlgorithm::Flat ? "flat" : "2d";
}

Algorithm collectiveAlgorithm(AllToAllAlgorithm algorithm, Group group) {
  return algorithm == AllToAllAlgorithm::Hierarchical &&
                 CostModel::supports(CollectiveKind::AllToAll, Algorithm::Hierarchical, group)
             ? Algorithm::Hierarchical
             : Algorithm::Direct;
}

CollectiveCost allToAllCost(const CostModel &model, double bytes, Group group,
                            AllToAllAlgorithm algorithm) {
  return model.collective(CollectiveKind::AllToAll, bytes, group,
                          collectiveAlgorithm(algorithm, group));
}

double expertForwardUs(const CostModel &model, const MoeShape &shape, double rows,
                       int64_t localExperts, DType dtype) {
  const double experts = double(localExperts), hidden = double(shape.hidden);
  return gemmUs(model, rows, double(shape.firstGemmRows()), hidden, experts, dtype) +
         gemmUs(model, rows, hidden, double(shape.ffn), experts, dtype);
}

double expertBackwardUs(const CostModel &model, const MoeShape &shape, double rows,
                        int64_t localExperts, DType dtype) {
  const double experts = double(localExperts), hidden = double(shape.hidden);
  const double fc1 = double(shape.firstGemmRows()), ffn = double(shape.ffn);
  // Input gradients: [rows x out] x [out x in]; weight gradients: [in x rows] x
  // [rows x out].
  return gemmUs(model, rows, hidden, fc1, experts, dtype) +
         gemmUs(model, hidden, fc1, rows, experts, dtype) +
         gemmUs(model, rows, ffn, hidden, experts, dtype) +
         gemmUs(model, ffn, hidden, rows, experts, dtype);
}

std::string checkExpertPlacement(int64_t ep, Group dp) {
  const int64_t perNode = dp.ranks / std::max<int64_t>(dp.nodes, 1);
  if (ep < 1 || dp.ranks % ep != 0)
    return "ep " + std::to_string(ep) + " does not divide dp " + std::to_string(dp.ranks);
  if (ep <= perNode ? perNode % ep != 0 : ep % perNode != 0)
    return "ep " + std::to_string(ep) + " neither divides nor is a multiple of the " +
           std::to_string(perNode) + " data-parallel ranks per node";
  return "";
}

Group expertGroup(int64_t ep, Group dp) {
  const int64_t perNode = dp.ranks / std::max<int64_t>(dp.nodes, 1);
  return Group{ep, ep <= perNode ? 1 : ep / perNode};
}

Group expertReplicaGroup(int64_t ep, Group dp) {
  const int64_t replicas = dp.ranks / ep;
  return Group{replicas, std::min(dp.nodes, replicas)};
}

const char *toString(GradientSyncMode mode) {
  return mode == GradientSyncMode::Concurrent ? "concurrent" : "serial";
}

std::vector<int64_t> moeDegrees(const MoeShape &shape) {
  std::vector<int64_t> degrees;
  for (int64_t r = 1; r <= 16 && r <= shape.capacity(); r *= 2)
    if (shape.capacity() % r == 0)
      degrees.push_back(r);
  return degrees;
}

MoeShape expertShard(const MoeShape &shape, int64_t shards) {
  MoeShape shard = shape;
  shard.ffn = shape.ffn / shards;
  shard.fc1Rows = shape.firstGemmRows() / shards;
  return shard;
}

MoePieces moePhasePieces(const CostModel &model, const MoeShape &shape, int64_t ep, Group dp,
                         int64_t chunks, AllToAllAlgorithm algorithm, bool backward,
                         double imbalance, DType dtype, CompressionMethod tokens,
                         Group shardGroup) {
  std::string problem = checkExpertParallel(shape, ep, dp.ranks);
  if (problem.empty())
    problem = checkExpertPlacement(ep, dp);
  // libzenrt cuts the capacity into equal pieces.
  if (problem.empty() && (chunks < 1 || shape.capacity() % chunks != 0))
    problem = "the pipelining degree " + std::to_string(chunks) + " must divide the " +
              std::to_string(shape.capacity()) + " capacity rows";
  if (!problem.empty())
    throw zen::Error(zen::ErrorKind::BadInput, problem);
  MoePieces pieces;
  pieces.chunks = chunks;
  const int64_t shards = std::max<int64_t>(1, shardGroup.ranks);
  const double rows = double(ep * shards) * busiestExpertRows(shape, imbalance) / double(chunks);
  const int64_t localExperts = shape.experts / ep;
  const MoeShape shard = expertShard(shape, shards);
  pieces.computeUs = backward ? expertBackwardUs(model, shard, rows, localExperts, dtype)
                              : expertForwardUs(model, shard, rows, localExperts, dtype);
  pieces.bytes = dispatchWireBytes(shape, dtype, tokens) / double(chunks);
  if (shards > 1) {
    // The shards' received rows gathered before the experts, their partial
    // outputs reduce-scattered after (in backward the same two, dual).
    const double gathered = double(shards) * dispatchBytes(shape, dtype) / double(chunks);
    pieces.computeUs += model.collective(CollectiveKind::AllGather, gathered, shardGroup).timeUs +
                        model.collective(CollectiveKind::ReduceScatter, gathered, shardGroup).timeUs;
  }
  pieces.group = expertGroup(ep, dp);
  pieces.algorithm = collectiveAlgorithm(algorithm, pieces.group);
  pieces.allToAll =
      model.collective(CollectiveKind::AllToAll, pieces.bytes, pieces.group, pieces.algorithm);
  if (tokens != CompressionMethod::None && ep > 1) {
    // A piece's send buffer and the buffer it receives are the same size.
    const double elements =
        double(shape.experts) * double(shape.capacity() / chunks) * double(shape.hidden);
    CompressionSpec spec;
    spec.method = tokens;
    const CompressionCost codec =
        model.compression(spec, static_cast<int64_t>(elements), 1, activationBytes(dtype));
    pieces.computeUs += 2 * (codec.encodeUs + codec.decodeUs);
  }
  return pieces;
}

double moePhaseUs(const CostModel &model, const MoeShape &shape, int64_t ep, Group dp,
                  int64_t chunks, AllToAllAlgorithm algorithm, bool backward, double imbalance,
                  DType dtype, CompressionMethod tokens, Group shardGroup) {
  const MoePieces pieces = moePhasePieces(model, shape, ep, dp, chunks, algorithm, backward,
                                          imbalance, dtype, tokens, shardGroup);
  return chunkPipelineUs(pieces.computeUs, 2 * pieces.allToAll.timeUs, chunks,
                         model.overlapSlowdown());
}

MoePhasesChoice fastestMoePhases(const CostModel &model, const MoeShape &shape, int64_t ep,
                                 Group dp, double imbalance, DType dtype,
                                 const std::vector<CompressionMethod> &compressions,
                                 Group shardGroup) {
  auto fastest = [&](AllToAllAlgorithm algorithm, CompressionMethod tokens, bool backward) {
    std::pair<int64_t, double> chosen{1, 0};
    for (int64_t chunks : moeDegrees(shape)) {
      const double us = moePhaseUs(model, shape, ep, dp, chunks, algorithm, backward, imbalance,
                                   dtype, tokens, shardGroup);
      // Strictly faster: ties keep the smaller degree.
      if (chunks == 1 || us < chosen.second)
        chosen = {chunks, us};
    }
    return chosen;
  };
  // Compressing the tokens shrinks the all-to-alls only (ep > 1), at the price of its kernels.
  std::vector<CompressionMethod> tokenChoices = {CompressionMethod::None};
  for (CompressionMethod method : compressions)
    if (ep > 1 && compressesTokens(method, dtype) &&
        std::find(tokenChoices.begin(), tokenChoices.end(), method) == tokenChoices.end())
      tokenChoices.push_back(method);
  std::optional<MoePhasesChoice> best;
  for (CompressionMethod tokens : tokenChoices)
    for (AllToAllAlgorithm algorithm : {AllToAllAlgorithm::Flat, AllToAllAlgorithm::Hierarchical}) {
      auto [forward, forwardUs] = fastest(algorithm, tokens, false);
      auto [backward, backwardUs] = fastest(algorithm, tokens, true);
      // Strictly faster: ties keep no compression and the flat all-to-all.
      if (!best || forwardUs + backwardUs < best->forwardUs + best->backwardUs)
        best = MoePhasesChoice{{forward, backward, algorithm, tokens}, forwardUs, backwardUs};
    }
  return *best;
}

MoeMemory moeMemoryPerGpu(const MoeShape &shape, int64_t moeLayers, int64_t ep, int64_t dp,
                          int zero, double microBatchesInFlight, const TrainingSetup &setup) {
  if (std::string problem = checkExpertParallel(shape, ep, dp); !problem.empty())
    throw zen::Error(zen::ErrorKind::BadInput, problem);
  if (moeLayers < 0 || zero < 0 || zero > 3 || !(microBatchesInFlight >= 1))
    throw zen::Error(zen::ErrorKind::BadInput, "MoE memory needs layers >= 0, a ZeRO stage "
                                "0-3 and at least one micro-batch in flight");
  const BytesPerParameter perParam = bytesPerParameter(setup);
  const double params = double(moeLayers) * double(shape.experts / ep) * shape.expertParams();
  // ZeRO shards over the ranks that hold the same experts.
  const double replicas = double(dp / ep);
  MoeMemory memory;
  memory.weightsBytes = params * perParam.weights / (zero >= 3 ? replicas : 1.0);
  memory.gradientsBytes = params * perParam.gradients / (zero >= 2 ? replicas : 1.0);
  memory.optimizerBytes = params * perParam.optimizer / (zero >= 1 ? replicas : 1.0);

  const double elementBytes = activationBytes(setup.computeDtype);
  // A rank receives capacity rows from each of the ep ranks for each of its
  // experts / ep experts: experts x capacity rows.
  const double rows = double(shape.experts) * double(shape.capacity());
  const double perLayer =
      double(shape.tokens) * double(shape.experts) +
      rows * (2.0 * double(shape.hidden) + double(shape.firstGemmRows()) + double(shape.ffn));
  memory.activationsBytes = perLayer * elementBytes * double(moeLayers) * microBatchesInFlight;
  memory.buffersBytes = moeLayers > 0 ? 2.0 * dispatchBytes(shape, setup.computeDtype) : 0.0;
  return memory;
}

MemoryBreakdown withMoeMemory(MemoryBreakdown base, const MoeMemory &moe) {
  base.weightsBytes += moe.weightsBytes;
  base.gradientsBytes += moe.gradientsBytes;
  base.optimizerBytes += moe.optimizerBytes;
  base.activationsBytes += moe.activationsBytes;
  base.buffersBytes += moe.buffersBytes;
  base.reserveBytes = reserveBytes(base.capacityBytes, base.activationsBytes + base.buffersBytes);
  return base;
}

} // namespace zen::cost
