//===- Moe.h - Mixture-of-Experts costs and memory --------------*- C++ -*-===//
//
// The MoE side of the cost model (docs/design.md "Mixture of Experts",
// costmodel/README.md "MoE costs"): the all-to-alls of dispatch and combine
// priced per link level, flat or 2D-hierarchical; the experts' GEMMs as a
// function of the rows they get (a pipelined chunk runs below peak); the token
// imbalance; the memory of expert weights under expert parallelism and of the
// dispatch buffers. Pure C++: no IR.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_MOE_H
#define ZEN_COSTMODEL_MOE_H

#include "zen/CostModel/MoeShape.h"
#include "zen/CostModel/Transformer.h"
#include "zen/Errors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zen::cost {

/// "" when experts spread over `ep` ranks of a data-parallel group of `dp`: ep
/// divides both the experts and dp, and the shape is complete; else the reason.
std::string checkExpertParallel(const MoeShape &shape, int64_t ep, int64_t dp);

/// Rows the busiest expert computes per source rank when it gets `imbalance`
/// times the mean load topK x tokens / experts, at most its capacity (tokens
/// past it are dropped). The experts compute the rows they get (Tutel's
/// adaptive capacity, MegaBlocks), so the busiest one sets the layer's time.
/// Throws zen::Error (BadUsage) unless imbalance is finite and at least 1.
double busiestExpertRows(const MoeShape &shape, double imbalance);

/// Bytes one rank sends in one all-to-all of a layer: a capacity-padded buffer
/// per expert, [experts, capacity, hidden], at `dtype`'s activation width.
double dispatchBytes(const MoeShape &shape, DType dtype);

/// Whether compressing the dispatched tokens with `method` shrinks the
/// all-to-alls of a model computing at `dtype`: fp16 and bf16 halve fp32
/// activations, int8 shrinks 32- and 16-bit ones; no other method suits
/// activations (ScheMoE compresses them so).
bool compressesTokens(CompressionMethod method, DType dtype);

/// dispatchBytes with the tokens compressed by `method` (None: dispatchBytes):
/// 2 bytes per element for fp16 and bf16, one for int8 plus an fp32 scale per
/// row (each row is quantised on its own, so a row's encoding does not depend
/// on the piece it travels in). `method` must be None or compressesTokens.
double dispatchWireBytes(const MoeShape &shape, DType dtype, CompressionMethod method);

/// The CostModel algorithm that runs `algorithm` over `group`: Direct for
/// flat, Hierarchical for 2D (CostModel prices Tutel's 2DH all-to-all so),
/// and Direct for 2D on a group inside one node or with one rank per node,
/// which has nothing to split.
Algorithm collectiveAlgorithm(AllToAllAlgorithm algorithm, Group group);

/// An all-to-all of `bytes` (one rank's send buffer) over `group` run by
/// `algorithm` (collectiveAlgorithm). Flat: NCCL's grouped send/recv as
/// CostModel::collective prices it — the intra-node share over each rank's link
/// and the off-node share over its share of the node's NICs, concurrently, one
/// issue latency per peer. 2D: CostModel's hierarchical all-to-all.
CollectiveCost allToAllCost(const CostModel &model, double bytes, Group group,
                            AllToAllAlgorithm algorithm);

/// Forward time of `localExperts` experts on `rows` rows each: per expert
/// [rows x hidden] x [hidden x fc1Rows] and [rows x ffn] x [ffn x hidden] by
/// gemmUs, batched over the experts. A pipelined chunk of rows / r rows pays
/// tile and wave quantisation on its own, so small chunks run below peak.
double expertForwardUs(const CostModel &model, const MoeShape &shape, double rows,
                       int64_t localExperts, DType dtype);
/// Backward: each forward GEMM's input gradient (same shape) and weight
/// gradient ([in x rows] x [rows x out], whose inner dimension is the rows).
double expertBackwardUs(const CostModel &model, const MoeShape &shape, double rows,
                        int64_t localExperts, DType dtype);

/// Where a layer's ep ranks sit in a data-parallel group `dp` (equal ranks per
/// node): ep consecutive ranks, inside one node when ep divides a node's ranks,
/// else over whole nodes. "" when ep can be placed so, else the reason.
std::string checkExpertPlacement(int64_t ep, Group dp);
/// The ep ranks of one all-to-all (checkExpertPlacement must pass).
Group expertGroup(int64_t ep, Group dp);
/// The dp / ep ranks holding the same experts (every ep-th rank), over which
/// the experts' gradients synchronise.
Group expertReplicaGroup(int64_t ep, Group dp);

/// One phase of one MoE layer cut into pieces along the capacity: per piece a
/// dispatch all-to-all, the experts' compute and a combine all-to-all (in
/// backward, of their gradients, in the same order).
struct MoePieces {
  int64_t chunks = 1;
  /// A piece's experts on the rank (the busiest expert paces them), with the
  /// token compression's encode and decode kernels.
  double computeUs = 0;
  /// One all-to-all of a piece: what a rank sends, over which ranks, how.
  double bytes = 0;
  Group group;
  Algorithm algorithm = Algorithm::Direct;
  CollectiveCost allToAll; // alone
};

/// The pipelining degrees tried for a layer: those of 1, 2, 4, 8, 16 that
/// divide its capacity (libzenrt cuts it into equal pieces).
std::vector<int64_t> moeDegrees(const MoeShape &shape);

/// One phase (forward, or backward with `backward`) of one MoE layer on a rank
/// of a dp group `dp` with experts over `ep` ranks, in `chunks` pieces along the
/// capacity. A piece's dispatch and combine all-to-alls (dispatchBytes / chunks
/// each, over expertGroup, by collectiveAlgorithm); its experts compute
/// ep x busiestExpertRows / chunks rows each on the experts / ep local experts
/// (the busiest expert paces the layer). At ep 1 there is no all-to-all. With
/// `tokens` compression each all-to-all moves dispatchWireBytes / chunks, and
/// the compute stage also encodes what a piece sends and decodes what it
/// receives, in dispatch and in combine (CostModel::compression's kernels over
/// the activations' width). Throws zen::Error (BadInput) when the degree does
/// not divide the capacity (libzenrt's pieces are equal), `tokens` compresses
/// nothing at `dtype`, or checkExpertParallel, checkExpertPlacement or
/// busiestExpertRows fails.
///
/// `expertShards` > 1 ranks split every expert's ffn (Megatron-Core's expert
/// tensor parallelism, each of them routing its own share of the tokens): a
/// piece's experts then run on the rows every shard received, all-gathered
/// over `shardGroup` before and reduce-scattered after (backward: the duals),
/// each GEMM on ffn / expertShards (`shape` is one shard's: tokens its own,
/// ffn and fc1Rows whole).
MoePieces moePhasePieces(const CostModel &model, const MoeShape &shape, int64_t ep, Group dp,
                         int64_t chunks, AllToAllAlgorithm algorithm, bool backward,
                         double imbalance, DType dtype,
                         CompressionMethod tokens = CompressionMethod::None,
                         Group shardGroup = Group{1, 1});

/// moePhasePieces' phase alone: a piece's dispatch and combine share the
/// network, forming the communication stage, and the pieces pipeline by
/// chunkPipelineUs. Throws as moePhasePieces.
double moePhaseUs(const CostModel &model, const MoeShape &shape, int64_t ep, Group dp,
                  int64_t chunks, AllToAllAlgorithm algorithm, bool backward, double imbalance,
                  DType dtype, CompressionMethod tokens = CompressionMethod::None,
                  Group shardGroup = Group{1, 1});

/// One layer's fastest phases alone: a degree per phase and the algorithm and
/// token compression they share, with each phase's time (moePhaseUs).
struct MoePhasesChoice {
  MoeLayerChoice choice;
  double forwardUs = 0;
  double backwardUs = 0;
};

/// Under each all-to-all algorithm and token compression (none, then those of
/// `compressions` that compressesTokens at `dtype`, only with ep > 1), each
/// phase's fastest degree of moeDegrees (the smaller on ties); the pair with
/// the least sum (flat and uncompressed on ties). Throws as moePhasePieces.
MoePhasesChoice fastestMoePhases(const CostModel &model, const MoeShape &shape, int64_t ep,
                                 Group dp, double imbalance, DType dtype,
                                 const std::vector<CompressionMethod> &compressions,
                                 Group shardGroup = Group{1, 1});

/// One GPU's memory for a model's MoE layers, in MemoryBreakdown's categories.
struct MoeMemory {
  double weightsBytes = 0;     // expert weights: experts / ep per layer, ZeRO 3 shards them
  double gradientsBytes = 0;   // their gradients (ZeRO 2 and 3 shard them)
  double optimizerBytes = 0;   // their optimizer state (ZeRO 1 to 3 shard it)
  double activationsBytes = 0; // kept for backward, every micro-batch in flight
  double buffersBytes = 0;     // dispatch and combine send/receive buffers of one layer
};

/// The MoE layers' memory on one rank. Expert e lives on the ranks of the dp
/// group that hold its shard of experts: dp / ep replicas, over which ZeRO
/// shards its state (bytesPerParameter per parameter). Activations per layer
/// and micro-batch: the routing probabilities [tokens, experts] and, for the
/// experts x capacity rows a rank receives, the dispatched input, the first
/// GEMM's output, the activation's output and the experts' output. Buffers: a
/// send and a receive buffer of dispatchBytes (combine reuses them).
/// Throws zen::Error (BadInput) when checkExpertParallel fails, a count is
/// negative, zero is outside 0-3 or fewer than one micro-batch is in flight.
MoeMemory moeMemoryPerGpu(const MoeShape &shape, int64_t moeLayers, int64_t ep, int64_t dp,
                          int zero, double microBatchesInFlight, const TrainingSetup &setup);

/// One expert split over `shards` ranks along its ffn (expert tensor
/// parallelism): its weights' ffn and fc1 rows divided (they must divide),
/// the output bias whole on every shard.
MoeShape expertShard(const MoeShape &shape, int64_t shards);

/// `base` (memoryPerGpu of the model without its experts) with `moe` added.
MemoryBreakdown withMoeMemory(MemoryBreakdown base, const MoeMemory &moe);

} // namespace zen::cost

#endif // ZEN_COSTMODEL_MOE_H
