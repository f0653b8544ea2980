//===- ZenBase.td - zen dialect definition and enums --------*- tablegen -*-===//
#ifndef ZEN_BASE_TD
#define ZEN_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Zen_Dialect : Dialect {
  let name = "zen";
  let cppNamespace = "::zen";
  let summary = "Compute, collective and compression ops for distributed-training planning.";
  let description = [{
    The `zen` dialect describes one training iteration: forward,
    backward and optimizer compute (with FLOPs and bytes), trainable parameters
    and their gradients, the collectives that synchronise gradients, the
    compression applied to them, the fusion of gradients into buckets, and the
    schedule (stream, priority, issue order) chosen for every collective.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  // Module attributes the planning passes read and write, declared with their types
  // (ZenDialect::verifyOperationAttribute checks them).
  let discardableAttrs = (ins
    "::mlir::StringAttr":$cluster,
    "::mlir::IntegerAttr":$nodes,
    "::mlir::StringAttr":$compute_dtype,
    // The dtype gradients accumulate in, where zenopt's --grad-accumulation-dtype gave one
    // (module): "fp32", "bf16" or "fp16".
    "::mlir::StringAttr":$grad_accumulation_dtype,
    // When ZeRO-3 gathers the weights, where zenopt's --zero3-regather gave it (module):
    // "per-microbatch" or "per-step"; and how many units its gathers run ahead
    // (--zero3-prefetch-depth, module): a positive integer.
    "::mlir::StringAttr":$zero3_regather,
    // The attention kernel transformers are priced with, where zenopt's --attention gave it
    // (module): "flash" or "unfused".
    "::mlir::StringAttr":$attention,
    "::mlir::IntegerAttr":$zero3_prefetch_depth,
    "::mlir::StringAttr":$strategy,
    // The compressors zenopt planned with (--compressor's spelling), for the plan file (module).
    "::mlir::StringAttr":$compressor,
    "::mlir::IntegerAttr":$world_size,
    // Attention heads and key/value heads that transformer recognition takes
    // instead of reading them from the graph (zenopt's --heads/--kv-heads) (module).
    "::mlir::IntegerAttr":$heads,
    "::mlir::IntegerAttr":$kv_heads,
    "::zen::PredictionAttr":$predicted,
    // The baselines zen-autotune compared the plan with: #zen.baseline entries (module).
    "::mlir::ArrayAttr":$baselines,
    // The parallel configuration the partitioning passes applied (module).
    "::zen::ParallelAttr":$parallel,
    // The transformer the large-model search planned, and what it planned under (module).
    "::zen::TransformerAttr":$transformer,
    "::zen::ParallelSearchAttr":$parallel_search,
    // What zen-plan-moe searched besides its chosen ep (module).
    "::zen::MoeSearchAttr":$moe_search,
    // The step's compute as the job timed it (zenopt's --measured-compute) (module).
    "::zen::MeasuredComputeAttr":$measured_compute,
    // Weight GEMMs zen-partition-tensor-parallel left replicated, by ONNX node name (module).
    "::mlir::ArrayAttr":$tp_replicated,
    // What a collective outside gradient synchronisation is for (op).
    "::zen::CollectiveRoleAttr":$role,
    // How many blocks ahead of its use a ZeRO-3 parameter all-gather is issued (op).
    "::mlir::IntegerAttr":$prefetch,
    // Chunks along the tokens a tensor-parallel GEMM computes in, pipelined with
    // its collective (which carries `chunks` as many) (zen.compute).
    "::mlir::IntegerAttr":$tp_chunks);
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Verification of a module still running on another thread while planning reads
    /// the module (zenopt starts it after import). What rewrites the module waits for it
    /// first: awaitVerification returns its result (true when none is pending), runs
    /// `afterwards` (zenopt: the context uniques without locks again) and forgets both.
    void setPendingVerification(std::shared_future<bool> verified,
                                std::function<void()> afterwards = {});
    bool awaitVerification();

  private:
    std::shared_future<bool> pendingVerification;
    std::function<void()> afterVerification;

  public:
  }];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Zen_PhaseAttr : I32EnumAttr<"Phase", "phase of a compute op", [
    I32EnumAttrCase<"forward", 0>,
    I32EnumAttrCase<"backward", 1>,
    I32EnumAttrCase<"optimizer", 2>]> {
  let cppNamespace = "::zen";
}

def Zen_ReductionKindAttr : I32EnumAttr<"ReductionKind", "reduction of a collective", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"avg", 1>,
    I32EnumAttrCase<"max", 2>,
    I32EnumAttrCase<"min", 3>]> {
  let cppNamespace = "::zen";
}

def Zen_CompressionMethod : I32EnumAttr<"CompressionMethod", "gradient compression method", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"fp16", 1>,
    I32EnumAttrCase<"bf16", 2>,
    I32EnumAttrCase<"int8", 3>,
    I32EnumAttrCase<"topk", 4>,
    I32EnumAttrCase<"randomk", 5>,
    I32EnumAttrCase<"sign", 6>,
    I32EnumAttrCase<"powersgd", 7>]> {
  let cppNamespace = "::zen";
  let genSpecializedAttr = 0;
}

def Zen_DeviceAttr : I32EnumAttr<"Device", "where a compression kernel runs", [
    I32EnumAttrCase<"gpu", 0>,
    I32EnumAttrCase<"cpu", 1>]> {
  let cppNamespace = "::zen";
}

def Zen_CollectiveAlgorithm : I32EnumAttr<"CollectiveAlgorithm", "collective algorithm", [
    I32EnumAttrCase<"ring", 0>,
    I32EnumAttrCase<"tree", 1>,
    I32EnumAttrCase<"hierarchical", 2>,
    I32EnumAttrCase<"direct", 3>]> {
  let cppNamespace = "::zen";
  let genSpecializedAttr = 0;
}
def Zen_CollectiveAlgorithmAttr : EnumAttr<Zen_Dialect, Zen_CollectiveAlgorithm, "algorithm">;

// The vocabulary's SyncScheme (vocabulary/include/zen/SyncScheme.h) under MLIR
// spellings: which collective sequence synchronises a gradient bucket.
def Zen_SyncScheme : I32EnumAttr<"SyncScheme", "how a gradient bucket crosses the group", [
    I32EnumAttrCase<"all_reduce", 0>,
    I32EnumAttrCase<"reduce_scatter_all_gather", 1>,
    I32EnumAttrCase<"all_gather", 2>]> {
  let cppNamespace = "::zen";
  let genSpecializedAttr = 0;
}
def Zen_SyncSchemeAttr : EnumAttr<Zen_Dialect, Zen_SyncScheme, "sync">;

// The vocabulary's SparseScheme (vocabulary/include/zen/SparseScheme.h) under the same
// spellings: which scheme synchronises a row-sparse gradient (zen.sparse_all_reduce).
def Zen_SparseScheme : I32EnumAttr<"SparseScheme", "how a row-sparse gradient crosses the group", [
    I32EnumAttrCase<"dense", 0>,
    I32EnumAttrCase<"agsparse", 1>,
    I32EnumAttrCase<"sparcml", 2>,
    I32EnumAttrCase<"omnireduce", 3>,
    I32EnumAttrCase<"balanced", 4>,
    I32EnumAttrCase<"hierarchical", 5>]> {
  let cppNamespace = "::zen";
  let genSpecializedAttr = 0;
}
def Zen_SparseSchemeAttr : EnumAttr<Zen_Dialect, Zen_SparseScheme, "sparse_scheme">;

// Where a row-sparse gradient's statistics come from (#zen.sparsity): the documented Zipf
// model, or an index stream `zenopt sparsity` measured.
def Zen_SparsitySource : I32EnumAttr<"SparsitySource", "origin of sparsity statistics", [
    I32EnumAttrCase<"model", 0>,
    I32EnumAttrCase<"measured", 1>]> {
  let cppNamespace = "::zen";
  let genSpecializedAttr = 0;
}

// How an MoE layer's all-to-alls run (#zen.moe_schedule): one exchange among the ep
// ranks, or Tutel's hierarchical one (spelled "2d", as the plan file does).
def Zen_MoeAllToAll : I32EnumAttr<"MoeAllToAll", "MoE all-to-all", [
    I32EnumAttrCase<"flat", 0>,
    I32EnumAttrCase<"hierarchical", 1, "2d">]> {
  let cppNamespace = "::zen";
  let genSpecializedAttr = 0;
}

// How an MoE layer's all-to-alls meet the data-parallel gradient sync (#zen.moe_schedule).
def Zen_MoeGradientSync : I32EnumAttr<"MoeGradientSync", "MoE gradient sync mode", [
    I32EnumAttrCase<"concurrent", 0>,
    I32EnumAttrCase<"serial", 1>]> {
  let cppNamespace = "::zen";
  let genSpecializedAttr = 0;
}

def Zen_Recompute : I32EnumAttr<"Recompute", "activation recomputation", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"selective", 1>,
    I32EnumAttrCase<"full", 2>]> {
  let cppNamespace = "::zen";
  let genSpecializedAttr = 0;
}

def Zen_ShardKind : I32EnumAttr<"ShardKind", "how tensor parallelism splits a weight", [
    I32EnumAttrCase<"column", 0>,
    I32EnumAttrCase<"row", 1>]> {
  let cppNamespace = "::zen";
  let genSpecializedAttr = 0;
}

// Collectives that move activations or parameters rather than gradient buckets:
// they never carry `bucket`, and the gradient planner leaves them alone.
def Zen_CollectiveRole : I32EnumAttr<"CollectiveRole", "purpose of a non-bucket collective", [
    I32EnumAttrCase<"tensor_parallel", 0>,
    I32EnumAttrCase<"sequence_parallel", 1>,
    I32EnumAttrCase<"pipeline", 2>,
    I32EnumAttrCase<"zero", 3>]> {
  let cppNamespace = "::zen";
  let genSpecializedAttr = 0;
}
def Zen_CollectiveRoleAttr : EnumAttr<Zen_Dialect, Zen_CollectiveRole, "role"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // ZEN_BASE_TD
