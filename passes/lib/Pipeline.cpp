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

void registerPlanPipeline() {
  mlir::PassPipelineRegistration<PlanPipelineOptions>(
      "zen-plan-pipeline",
      "Plan the gradient communication as `zenopt MODEL.onnx` does (zen-autotune with the "
      "same options)",
      buildPlanPipeline);
}

} // namespace zen
