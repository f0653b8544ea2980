//===- MoeShape.h - an MoE layer's shape and how it runs ---------*- C++ -*-===//
//
// The vocabulary the MoE costs (Moe.h) and the large-model configurations
// (Transformer.h, whose MoE blocks they describe) share: one MoE layer's shape
// and the decisions for running it. Pure C++: no IR.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_MOESHAPE_H
#define ZEN_COSTMODEL_MOESHAPE_H

#include "zen/CostModel/CostModel.h"

#include <cstdint>

namespace zen::cost {

/// One MoE layer as one rank runs it per micro-batch.
struct MoeShape {
  int64_t tokens = 0; // tokens the rank routes (micro-batch x sequence)
  int64_t hidden = 0;
  int64_t ffn = 0;     // inter size of an expert
  int64_t fc1Rows = 0; // rows of the first expert GEMM's weight: ffn, or 2 x ffn for SwiGLU
  int64_t experts = 0;
  int64_t topK = 1;
  double capacityFactor = 1.0;
  bool biases = true;
  /// The dispatch buffer's rows per expert when the model fixes them (an
  /// imported layer's buffer); 0: derived from the capacity factor.
  int64_t capacityRows = 0;

  /// Rows an expert's dispatch buffer holds per source rank: capacityRows when
  /// set, else ceil(capacityFactor x topK x tokens / experts), at least 1
  /// (GShard, Switch).
  int64_t capacity() const;
  /// Parameters of one expert: both weights and, with `biases`, both biases.
  double expertParams() const;
  /// Rows of the first expert GEMM's weight: fc1Rows when set, else ffn.
  int64_t firstGemmRows() const { return fc1Rows > 0 ? fc1Rows : ffn; }
};

enum class AllToAllAlgorithm { Flat, Hierarchical };
const char *toString(AllToAllAlgorithm algorithm); // "flat", "2d"

/// How a layer's all-to-alls meet the data-parallel gradient sync of other
/// layers: concurrent (their own stream, sharing each link level with the
/// gradient collectives in flight) or serial (one stream with the gradient
/// sync, taking turns: an all-to-all first when both wait, but a running
/// gradient collective is not interrupted).
enum class GradientSyncMode { Concurrent, Serial };
const char *toString(GradientSyncMode mode); // "concurrent", "serial"

/// How one MoE layer runs: the pipelining degree of dispatch -> experts ->
/// combine in forward and in backward, the all-to-all algorithm, the
/// compression of the tokens (and in backward their gradients) on the wire,
/// and how its all-to-alls meet the gradient sync (which the phase times
/// below do not depend on; the simulated schedule does).
struct MoeLayerChoice {
  int64_t forward = 1;
  int64_t backward = 1;
  AllToAllAlgorithm algorithm = AllToAllAlgorithm::Flat;
  CompressionMethod tokens = CompressionMethod::None;
  GradientSyncMode sync = GradientSyncMode::Concurrent;
};

} // namespace zen::cost

#endif // ZEN_COSTMODEL_MOESHAPE_H
