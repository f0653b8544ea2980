//===- Pipeline.cpp - zen-plan-pipeline: what zenopt plans with ----------===//
#include "zen/Passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace zen {

void buildPlanPipeline(mlir::OpPassManager &pm, const PlanPipelineOptions &options) {
  PlanSparseOptions sparse;
  sparse.cluster = options.cluster;
  sparse.nodes = options.nodes;
  sparse.dp = options.dp;
  sparse.statistics = options.sparsity;
  sparse.denseInBuckets = options.buckets.empty();
  pm.addPass(createPlanSparse(sparse));
  AutotuneOptions autotune;
  autotune.cluster = options.cluster;
  autotune.nodes = options.nodes;
  autotune.dp = options.dp;
  if (options.compressGradients)
    autotune.compressor = options.compressor;
  autotune.strategy = options.strategy;
  autotune.buckets = options.buckets;
  autotune.horovodCycleTimeMs = options.horovodCycleTimeMs;
  autotune.horovodFusionThresholdMb = options.horovodFusionThresholdMb;
  pm.addPass(createAutotune(autotune));
  PlanMoeOptions moe;
  moe.cluster = options.cluster;
  moe.nodes = options.nodes;
  moe.dp = options.dp;
  moe.ep = options.ep;
  moe.imbalance = options.moeImbalance;
  moe.compressor = options.compressor;
  pm.addPass(createPlanMoe(moe));
}

void buildLargeModelPipeline(mlir::OpPassManager &pm, const LargeModelPipelineOptions &options) {
  const cost::ParallelConfig &config = options.config;
  if (config.tp > 1) {
    PartitionTensorParallelOptions partition;
    partition.tp = config.tp;
    pm.addPass(createPartitionTensorParallel(partition));
    const cost::Decomposition &chunks = config.decomposition;
    pm.addPass(createDecomposeTensorParallel({chunks.attentionForward, chunks.attentionBackward,
                                              chunks.mlpForward, chunks.mlpBackward}));
  }
  if (config.pp > 1 && !config.stageLayers.empty())
    pm.addPass(createAssignPipelineStages({config.pp, config.stageLayers}));
  AutotuneOptions autotune;
  autotune.cluster = options.cluster;
  autotune.nodes = options.nodes;
  // ZeRO 2/3 reduce-scatter dense gradients (zen-shard-zero), as the search priced them.
  if (config.zero < 2)
    autotune.compressor = options.compressor;
  pm.addPass(createAutotune(autotune));
  if (config.zero >= 2)
    pm.addPass(createShardZero({config.zero, /*dp=*/0}));
}

void registerPlanPipeline() {
  mlir::PassPipelineRegistration<PlanPipelineOptions>(
      "zen-plan-pipeline",
      "Plan the gradient communication as `zenopt MODEL.onnx` does (zen-autotune with the "
      "same options)",
      buildPlanPipeline);
}

} // namespace zen
