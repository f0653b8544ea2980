//===- Pipeline.cpp - zen-plan-pipeline: what zenopt plans with ----------===//
#include "zen/Passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace zen {

void buildPlanPipeline(mlir::OpPassManager &pm, const PlanPipelineOptions &options) {
  AutotuneOptions autotune;
  autotune.cluster = options.cluster;
  autotune.nodes = options.nodes;
  autotune.dp = options.dp;
  autotune.compressor = options.compressor;
  autotune.strategy = options.strategy;
  autotune.buckets = options.buckets;
  autotune.horovodCycleTimeMs = options.horovodCycleTimeMs;
  autotune.horovodFusionThresholdMb = options.horovodFusionThresholdMb;
  pm.addPass(createAutotune(autotune));
}

void buildLargeModelPipeline(mlir::OpPassManager &pm, const LargeModelPipelineOptions &options) {
  if (options.tp > 1) {
    PartitionTensorParallelOptions partition;
    partition.tp = options.tp;
    pm.addPass(createPartitionTensorParallel(partition));
    DecomposeTensorParallelOptions decompose;
    decompose.attentionForward = options.attentionForward;
    decompose.attentionBackward = options.attentionBackward;
    decompose.mlpForward = options.mlpForward;
    decompose.mlpBackward = options.mlpBackward;
    pm.addPass(createDecomposeTensorParallel(decompose));
  }
  if (options.pp > 1 && !options.stageLayers.empty()) {
    AssignPipelineStagesOptions stages;
    stages.pp = options.pp;
    stages.stageLayers = options.stageLayers;
    pm.addPass(createAssignPipelineStages(stages));
  }
  AutotuneOptions autotune;
  autotune.cluster = options.cluster;
  autotune.nodes = options.nodes;
  autotune.compressor = options.compressor;
  pm.addPass(createAutotune(autotune));
  if (options.zero >= 2) {
    ShardZeroOptions shard;
    shard.zero = options.zero;
    pm.addPass(createShardZero(shard));
  }
}

void registerPlanPipeline() {
  mlir::PassPipelineRegistration<PlanPipelineOptions>(
      "zen-plan-pipeline",
      "Plan the gradient communication as `zenopt MODEL.onnx` does (zen-autotune with the "
      "same options)",
      buildPlanPipeline);
}

} // namespace zen
