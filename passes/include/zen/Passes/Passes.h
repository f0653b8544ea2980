//===- Passes.h - zen planning passes ---------------------------*- C++ -*-===//
#ifndef ZEN_PASSES_PASSES_H
#define ZEN_PASSES_PASSES_H

#include "zen/Dialect/ZenDialect.h"
#include "zen/CostModel/Transformer.h"
#include "zen/Passes/PassOptions.h"
#include "zen/Planner/Moe.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace zen {

#define GEN_PASS_DECL
#include "zen/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zen/Passes/Passes.h.inc"

/// Options of zen-plan-pipeline: what `zenopt MODEL.onnx` plans with.
struct PlanPipelineOptions : mlir::PassPipelineOptions<PlanPipelineOptions> {
  Option<std::string> cluster{*this, "cluster",
                              llvm::cl::desc("Cluster preset or JSON file (default: the "
                                             "module's zen.cluster, else a100x64)")};
  Option<int64_t> nodes{*this, "nodes",
                        llvm::cl::desc("Node count overriding the cluster's (0 = its own)"),
                        llvm::cl::init(0)};
  Option<int64_t> dp{*this, "dp", llvm::cl::desc("Data-parallel ranks (0 = every GPU)"),
                     llvm::cl::init(0)};
  Option<std::string> compressor{*this, "compressor",
                                 llvm::cl::desc("Allowed compression methods, comma-separated")};
  Option<bool> compressGradients{
      *this, "compress-gradients",
      llvm::cl::desc("Whether zen-autotune may compress gradients with them (false: only the "
                     "MoE tokens may be compressed)"),
      llvm::cl::init(true)};
  Option<Strategy> strategy{*this, "strategy", llvm::cl::desc("auto or a baseline"),
                            llvm::cl::init(Strategy::Auto), strategyValues()};
  ListOption<int64_t> buckets{*this, "buckets",
                              llvm::cl::desc("Bucket sizes in tensors (strategy manual)")};
  Option<double> horovodCycleTimeMs{*this, "horovod-cycle-time-ms",
                                    llvm::cl::desc("Horovod baseline: cycle time in ms"),
                                    llvm::cl::init(1.0)};
  Option<int64_t> horovodFusionThresholdMb{
      *this, "horovod-fusion-threshold-mb",
      llvm::cl::desc("Horovod baseline: fusion threshold in MiB (0 = no fusion)"),
      llvm::cl::init(128)};
  Option<int64_t> ep{*this, "ep",
                     llvm::cl::desc("MoE expert-parallel ranks (0 = searched)"),
                     llvm::cl::init(0)};
  Option<double> moeImbalance{*this, "moe-imbalance",
                              llvm::cl::desc("MoE: the busiest expert's load over the mean"),
                              llvm::cl::init(1.0)};
  ListOption<std::string> sparsity{
      *this, "sparsity",
      llvm::cl::desc("Measured sparsity statistics: FILE for every row-sparse gradient, or "
                     "PARAM=FILE for one (zen-plan-sparse)")};
};

/// Adds the planning pipeline to `pm` (a module pass manager): zen-plan-sparse (the
/// row-sparse gradients' schemes), zen-autotune (the dense buckets around them), then
/// zen-plan-moe (which leaves a module without MoE layers unchanged).
void buildPlanPipeline(mlir::OpPassManager &pm, const PlanPipelineOptions &options);
/// Registers zen-plan-pipeline for zenopt-opt.
void registerPlanPipeline();

/// What `zenopt MODEL.onnx` applies to a transformer's IR once the large-model
/// search has chosen its configuration (recorded in the module's zen.parallel).
struct LargeModelPipelineOptions {
  std::string cluster;
  int64_t nodes = 0;
  std::string compressor;
  /// tp, pp, ZeRO and the decomposition; `stageLayers` the blocks per pipeline
  /// stage (empty: the placement is not represented, as for an interleaved
  /// schedule, whose chunks are not contiguous stages).
  cost::ParallelConfig config;
};

/// Adds zen-partition-tensor-parallel and zen-decompose-tensor-parallel (tp > 1), zen-assign-pipeline-stages
/// (pp > 1 with stage layers), zen-autotune (each stage's data-parallel sync,
/// compressed only under ZeRO 0 and 1) and zen-shard-zero (ZeRO 2 and 3) to `pm`.
void buildLargeModelPipeline(mlir::OpPassManager &pm, const LargeModelPipelineOptions &options);

} // namespace zen

#endif // ZEN_PASSES_PASSES_H
