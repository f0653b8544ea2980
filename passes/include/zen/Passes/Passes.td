//===- Passes.td - zen planning passes ------------------------*- tablegen -*-===//
#ifndef ZEN_PASSES_TD
#define ZEN_PASSES_TD

include "mlir/Pass/PassBase.td"

// Every planning pass prices its decisions against a cluster: the option, when
// given, is recorded as the module's `zen.cluster`; otherwise that attribute, or
// the default preset a100x64, applies. The cost model is a cached analysis.
defvar clusterOption = Option<"cluster", "cluster", "std::string", "\"\"",
    "Cluster preset name (a100x64, a100x8, h100x256, v100x16-10gbe, cpu-local) or JSON file; "
    "default: the module's zen.cluster, else a100x64">;
defvar nodesOption = Option<"nodes", "nodes", "int64_t", "0",
    "Node count overriding the cluster's (0 = the module's zen.nodes, else the cluster's own); "
    "recorded as zen.nodes">;
defvar dpOption = Option<"dp", "dp", "int64_t", "0",
    "Data-parallel ranks (0 = every GPU of the cluster)">;
// Horovod's tensor-fusion settings, as horovodrun spells them (--cycle-time-ms,
// --fusion-threshold-mb); the defaults are Horovod's since v0.21.0.
defvar horovodCycleOption = Option<"horovodCycleTimeMs", "horovod-cycle-time-ms", "double", "1.0",
    "Horovod baseline: cycle time in ms (5 before Horovod v0.21.0)">;
defvar horovodFusionOption = Option<"horovodFusionThresholdMb", "horovod-fusion-threshold-mb",
    "int64_t", "128", "Horovod baseline: fusion threshold in MiB, 0 = no fusion (64 before v0.21.0)">;

def InsertGradSync : Pass<"zen-insert-grad-sync", "mlir::ModuleOp"> {
  let summary = "Synchronise every gradient with an all-reduce (data parallelism)";
  let description = [{
    Inserts one `zen.all_reduce avg` per `zen.gradient` over a process group of
    `dp` ranks, and an optimizer step (`zen.compute "SGD" optimizer`) per
    parameter that consumes the synchronised gradient. Existing
    synchronisation is replaced.
  }];
  let options = [clusterOption, nodesOption, dpOption];
  let dependentDialects = ["::zen::ZenDialect"];
}

def FuseGradients : Pass<"zen-fuse-gradients", "mlir::ModuleOp"> {
  let summary = "Fuse gradient all-reduces into buckets (zen.pack -> collective -> zen.unpack)";
  let description = [{
    Groups consecutive gradients (in ready order) into buckets with a baseline
    rule: `wfbp` (one per tensor), `ddp` (25 MiB, first bucket 1 MiB),
    `horovod` (every cycle, fuse the ready tensors into buffers of at most the
    fusion threshold), `mgwfbp` (merge while the wait is shorter than
    the start-up time), `threshold` (close at `threshold-bytes`), `manual`
    (`buckets` sizes in tensors) or `nooverlap` (per tensor, after backward).
    Needs synchronised gradients (zen-insert-grad-sync). Ops of bucket N carry
    `bucket = N`.
  }];
  let options = [
    clusterOption, nodesOption,
    Option<"strategy", "strategy", "::zen::Strategy", "::zen::Strategy::Ddp",
           "Bucketing rule", [{::zen::bucketingRuleValues()}]>,
    Option<"thresholdBytes", "threshold-bytes", "int64_t", "26214400",
           "Bucket size at which `threshold` closes a bucket">,
    ListOption<"buckets", "buckets", "int64_t",
               "Bucket sizes in tensors, in gradient-ready order (strategy manual)">,
    horovodCycleOption, horovodFusionOption
  ];
  let dependentDialects = ["::zen::ZenDialect"];
}

def PlaceCompression : Pass<"zen-place-compression", "mlir::ModuleOp"> {
  let summary = "Choose per-bucket compression, device, error feedback and collective";
  let description = [{
    For each bucket picks a method from the allowed `compressor` set (or none),
    the device (gpu, or cpu offload, whose kernels run beside the compute
    stream; a method spelled with `@gpu`/`@cpu` stays there), error feedback (for every method but
    fp16/bf16), and the collective that follows: all_reduce for dense casts
    and PowerSGD factors, all_gather of the payload for topk, randomk and sign.
    `mode=all` applies the first allowed method to every bucket; `mode=auto`
    keeps a method on a bucket only where the simulator says it pays.
    With no compressor allowed (the default) training stays exact.
  }];
  let options = [
    clusterOption, nodesOption,
    Option<"compressor", "compressor", "std::string", "\"\"",
           "Allowed methods, comma-separated: fp16, bf16, int8, sign, topk:R, randomk:R, powersgd:RANK, each optionally @gpu or @cpu">,
    Option<"mode", "mode", "::zen::CompressionMode", "::zen::CompressionMode::automatic",
           "Where compression goes", [{::llvm::cl::values(
             clEnumValN(::zen::CompressionMode::automatic, "auto", "where the simulator says it pays"),
             clEnumValN(::zen::CompressionMode::all, "all", "the first allowed method on every bucket"))}]>
  ];
  let dependentDialects = ["::zen::ZenDialect"];
}

def Decompose : Pass<"zen-decompose", "mlir::ModuleOp"> {
  let summary = "Choose chunk counts and split all-reduces into reduce-scatter + all-gather";
  let description = [{
    Sets the chunk count of every collective (`chunks`, or the cost model's
    fastest when 0) and, per `split`, replaces a dense bucket all_reduce with a
    reduce_scatter overlapped with backward plus a decoupled all_gather
    overlapped with the next forward (DeAR): `none`, `all`, or `auto` (where
    the simulator says it pays).
  }];
  let options = [
    clusterOption, nodesOption,
    Option<"chunks", "chunks", "int64_t", "0", "Chunks per collective (0 = cost-model choice)">,
    Option<"split", "split", "::zen::SplitMode", "::zen::SplitMode::automatic",
           "Which all-reduces become reduce-scatter + all-gather", [{::llvm::cl::values(
             clEnumValN(::zen::SplitMode::none, "none", "keep every all-reduce"),
             clEnumValN(::zen::SplitMode::all, "all", "split every dense bucket"),
             clEnumValN(::zen::SplitMode::automatic, "auto", "where the simulator says it pays"))}]>
  ];
  let dependentDialects = ["::zen::ZenDialect"];
}

def ApplySyncPatterns : Pass<"zen-apply-sync-patterns", "mlir::ModuleOp"> {
  let summary = "Apply the gradient-synchronisation rewrite patterns";
  let description = [{
    Runs populateZenSyncPatterns (zen/Passes/Patterns.h) greedily on every
    bucket's first collective (one carrying `sync`) over a dense payload:
    `split-all-reduce` turns an all_reduce into a reduce_scatter and a
    decoupled all_gather, `chunks` sets its pipelined pieces, `compressor`
    compresses an all_reduce's payload and synchronises it by the method's
    preferred scheme. Each rewrite is local; the planner's passes decide.

    ```
    zenopt-opt --zen-apply-sync-patterns="split-all-reduce=true chunks=4" in.mlir
    ```
  }];
  let options = [
    Option<"splitAllReduce", "split-all-reduce", "bool", "false",
           "Split dense bucket all-reduces into reduce-scatter + all-gather">,
    Option<"chunks", "chunks", "int64_t", "0", "Pipelined pieces per bucket collective (0 = keep)">,
    Option<"compressor", "compressor", "std::string", "\"\"",
           "Compress bucket all-reduces: fp16, bf16, int8, sign, topk:R, randomk:R, powersgd:K">
  ];
  let dependentDialects = ["::zen::ZenDialect"];
}

def ScheduleOverlap : Pass<"zen-schedule-overlap", "mlir::ModuleOp"> {
  let summary = "Assign issue order, priority and stream to every collective";
  let description = [{
    Collectives issue in gradient-ready order on stream 0; decoupled
    all-gathers follow in the order the next forward needs them, on stream 1
    when `streams` is 2. Writes `schedule = #zen.schedule<...>`.
  }];
  let options = [
    clusterOption, nodesOption,
    Option<"streams", "streams", "int64_t", "1", "Communication streams (1 or 2)">
  ];
  let dependentDialects = ["::zen::ZenDialect"];
}

def Autotune : Pass<"zen-autotune", "mlir::ModuleOp"> {
  let summary = "Search fusion, compression, decomposition and schedule jointly";
  let description = [{
    Scores candidates with the timeline simulator: dynamic programming over
    bucket boundaries with per-bucket compression/decomposition choices, then
    local search; the baselines are seeds, so the result is never worse than
    any of them. With compressors allowed, each baseline applies each of them
    to every bucket in turn and keeps the fastest. `strategy` other than
    `auto` materialises that baseline.
    Records `zen.strategy`, `zen.cluster`, `zen.world_size`, `zen.predicted`
    (a `#zen.prediction`) and `zen.baselines` on the module, and with
    compressors allowed `zen.baselines_uncompressed` (the same baselines without
    compression). The chosen plan is
    applied with the same bucket rewrites the individual passes use.
  }];
  let options = [
    clusterOption, nodesOption, dpOption,
    Option<"compressor", "compressor", "std::string", "\"\"",
           "Allowed compression methods, comma-separated, each optionally @gpu or @cpu (none by default)">,
    Option<"strategy", "strategy", "::zen::Strategy", "::zen::Strategy::Auto",
           "The joint search, or a baseline to materialise", [{::zen::strategyValues()}]>,
    Option<"thresholdBytes", "threshold-bytes", "int64_t", "26214400",
           "Bucket size for strategy threshold">,
    ListOption<"buckets", "buckets", "int64_t",
               "Bucket sizes in tensors for strategy manual">,
    horovodCycleOption, horovodFusionOption
  ];
  let dependentDialects = ["::zen::ZenDialect"];
}

def PrintTimeline : Pass<"zen-print-timeline", "mlir::ModuleOp"> {
  let summary = "Print the simulated timeline of the planned iteration";
  let description = [{
    Prints one line per simulator task to stdout,
    `task <name> start <us> end <us>`, then `iteration <us>`.
  }];
  let options = [clusterOption, nodesOption];
  let dependentDialects = ["::zen::ZenDialect"];
}

def PrintTransformer : Pass<"zen-print-transformer", "mlir::ModuleOp"> {
  let summary = "Report the transformer recognised in the IR as a remark";
  let description = [{
    Runs the structural recognition (passes/lib/Analysis/Transformer.cpp) and emits a
    remark on the module: family, layers, hidden, heads (and whether read
    from the head-split Reshape or taken as hidden / 64), ffn, seq, vocab,
    batch, the parameters per block, of the embedding and of the head, and
    the weight GEMMs outside the blocks. Changes nothing; emits a warning when
    the module holds no recognisable transformer.
  }];
  let dependentDialects = ["::zen::ZenDialect"];
}

def PartitionTensorParallel : Pass<"zen-partition-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Split the recognised transformer blocks over tensor-parallel ranks (Megatron)";
  let description = [{
    Runs on the imported model, before gradient synchronisation. In each block
    the QKV and first MLP GEMMs become column-parallel (weight and bias
    sharded along the output features), the attention output and second MLP
    GEMMs row-parallel (weight sharded along the input features, bias
    replicated), and the attention heads are divided among the ranks:
    parameters carry `shard = #zen.shard<...>` and one rank's shard as their
    type (so do their gradients), and the partitioned ops per-rank flops and
    bytes. Inserts the tensor-parallel collectives (`zen.role`, no bucket):
    an all_reduce sum after each row-parallel GEMM (before its bias Add) and
    of each column-parallel GEMM's input gradient; with sequence parallelism
    a reduce_scatter / all_gather pair instead. Weight GEMMs outside the
    blocks stay replicated (a remark each, listed in `zen.tp_replicated`).
    Records tp and sequence_parallel in the module's `zen.parallel`.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", "0",
           "Tensor-parallel ranks; must divide heads, hidden and ffn (0 = the module's zen.parallel tp)">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "Shard the activations between the tensor-parallel regions along the sequence "
           "(reduce_scatter / all_gather instead of all_reduce)">
  ];
  let dependentDialects = ["::zen::ZenDialect"];
}

def DecomposeTensorParallel : Pass<"zen-decompose-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Pipeline each tensor-parallel GEMM with its collective in chunks along the tokens";
  let description = [{
    Runs after zen-partition-tensor-parallel. Each tensor-parallel collective
    (`zen.role` tensor_parallel or sequence_parallel) pairs with the GEMM next
    to it: the row-parallel GEMM whose output it reduces, the column-parallel
    input gradient it reduces backward, and with sequence parallelism the
    GEMM that reads what it gathers. With k chunks for that GEMM's region
    (attention: QKV and output projection; MLP: both GEMMs) and phase, the
    collective gets `chunks = k` and the GEMM `zen.tp_chunks = k`: chunk i's
    collective runs while chunk i + 1's GEMM computes (Flux, PyTorch async-TP).
    k must divide the tokens of the GEMM's result (the verifier checks it).
    Example: `--zen-decompose-tensor-parallel="mlp-forward=4 mlp-backward=2"`.
  }];
  let options = [
    Option<"attentionForward", "attention-forward", "int64_t", "1",
           "Chunks for the attention GEMMs' collectives in forward (1 = not decomposed)">,
    Option<"attentionBackward", "attention-backward", "int64_t", "1",
           "Chunks for the attention GEMMs' collectives in backward">,
    Option<"mlpForward", "mlp-forward", "int64_t", "1",
           "Chunks for the MLP GEMMs' collectives in forward">,
    Option<"mlpBackward", "mlp-backward", "int64_t", "1",
           "Chunks for the MLP GEMMs' collectives in backward">
  ];
  let dependentDialects = ["::zen::ZenDialect"];
}

def AssignPipelineStages : Pass<"zen-assign-pipeline-stages", "mlir::ModuleOp"> {
  let summary = "Assign the recognised transformer's blocks to pipeline stages";
  let description = [{
    Runs on the imported model, before gradient synchronisation. Splits the
    blocks into `pp` contiguous stages: `stage-layers` blocks each, or
    balanced by forward plus backward FLOPs (the embedding and the ops before
    the first block on stage 0, the head and loss on the last). Sets `stage`
    on every param, compute and gradient op (backward ops on their forward
    node's stage; ops without one follow their operands) and inserts a
    `zen.send` / `zen.recv` pair (`zen.role = #zen.role<pipeline>`, the peer
    stage as `peer`) for every value read on another stage than the one
    producing it: activations forward, their gradients backward. Reports the
    blocks per stage as a remark and records pp in `zen.parallel`.
  }];
  let options = [
    Option<"pp", "pp", "int64_t", "0",
           "Pipeline stages, at most the number of blocks (0 = the module's zen.parallel pp)">,
    ListOption<"stageLayers", "stage-layers", "int64_t",
               "Blocks per stage, one entry per stage, adding up to the blocks "
               "(default: balanced by FLOPs)">
  ];
  let dependentDialects = ["::zen::ZenDialect"];
}

def PlanSparse : Pass<"zen-plan-sparse", "mlir::ModuleOp"> {
  let summary = "Choose each row-sparse gradient's sparse synchronisation scheme";
  let description = [{
    Every `zen.gradient` with `row_lookups` (an embedding table whose every
    forward use is a row gather) is synchronised by a `zen.sparse_all_reduce`
    over the data-parallel group under the cheapest scheme the cost model prices
    for it (plan::planSparseTensors: dense, agsparse, sparcml, omnireduce,
    balanced, hierarchical), from its sparsity statistics: a file `zenopt
    sparsity` measured (`statistics`: FILE for every table, or PARAM=FILE for
    one), else the documented Zipf model for its lookups. The op records the
    scheme and the statistics; the gradient leaves the dense buckets, and
    zen-autotune plans the rest around its task on the same timeline. When dense
    is the cheapest, the table stays a gradient of the dense buckets (their
    all-reduce is dense's, fused and overlapped), unless `dense-in-buckets` is
    off (manual buckets, which cover every gradient but the tables). An
    existing sparse synchronisation is planned again. A module with MoE layers
    keeps its tables dense (zen-plan-moe prices the gradients without them).
    Example: `--zen-plan-sparse="dp=64 statistics=wte=wte.json"`.
  }];
  let options = [
    clusterOption, nodesOption, dpOption,
    ListOption<"statistics", "statistics", "std::string",
               "Measured statistics files (zenopt sparsity -o): FILE for every row-sparse "
               "gradient, or PARAM=FILE for one">,
    Option<"denseInBuckets", "dense-in-buckets", "bool", /*default=*/"true",
           "A table whose cheapest scheme is dense stays in the dense buckets">
  ];
  let dependentDialects = ["::zen::ZenDialect"];
}

def PlanMoe : Pass<"zen-plan-moe", "mlir::ModuleOp"> {
  let summary = "Choose expert parallelism, pipelining degrees and all-to-all per MoE layer";
  let description = [{
    Plans the module's Mixture-of-Experts layers (zen.moe_dispatch ->
    zen.moe_experts -> zen.moe_combine) over the data-parallel group: the
    expert-parallel degree `ep` (searched over the divisors of the experts
    that divide dp when 0), and per layer the pipelining degree of forward
    and of backward and the all-to-all algorithm, priced by the cost model
    (plan::planMoe, docs/design.md "Mixture of Experts"). Writes a
    `#zen.moe_schedule` as `schedule` on the layer's three ops. Runs after
    zen-autotune: its buckets, simulated again with the experts' gradients
    synchronised over their dp / ep replicas, price what each ep saves
    (without a gradient sync in the module, nothing). Of the allowed
    `compressor` methods, those that shrink the model's activations (fp16 and
    bf16 for fp32 compute, int8) are tried on each layer's dispatched tokens
    and their gradients, and the schedule's `tokens` names the one chosen.
    The module records what else the search found (`zen.moe_search`: the
    imbalance, every ep tried and its time or memory) for the plan's `moe`
    section. A module without MoE ops is left unchanged. Example:
    `--zen-plan-moe="ep=8 imbalance=1.2 compressor=int8"`.
  }];
  let options = [
    clusterOption, nodesOption, dpOption,
    Option<"ep", "ep", "int64_t", "0",
           "Expert-parallel ranks; must divide the experts and dp (0 = searched)">,
    Option<"imbalance", "imbalance", "double", "1.0",
           "The busiest expert's load as a multiple of the mean (at least 1)">,
    Option<"compressor", "compressor", "std::string", "\"\"",
           "Allowed compression methods, comma-separated (as zen-autotune's); fp16, bf16 and "
           "int8 may compress the dispatched tokens">
  ];
  let dependentDialects = ["::zen::ZenDialect"];
}

def ShardZero : Pass<"zen-shard-zero", "mlir::ModuleOp"> {
  let summary = "Shard gradients and parameters over the data-parallel group (ZeRO)";
  let description = [{
    Runs after gradient synchronisation (zen-autotune or
    zen-insert-grad-sync). Stage 1 records the stage in `zen.parallel` only.
    From stage 2 each bucket's all-reduce (or reduce-scatter + all-gather)
    becomes a reduce-scatter: the pack lays the bucket out rank by rank, the
    unpack yields each member's 1-D shard of ceil(n / dp) elements, and the
    optimizer step updates that shard (a dp-th of its work). Stage 3 also
    gives every trained parameter its shard along its first dimension that dp
    divides as its type, and all-gathers it (`zen.role = #zen.role<zero>`,
    `zen.prefetch = 1`) before its first forward and its first backward use.
    Records zero and dp in `zen.parallel`.
  }];
  let options = [
    Option<"zero", "zero", "int64_t", "0",
           "ZeRO stage 1-3 (0 = the module's zen.parallel zero)">,
    Option<"dp", "dp", "int64_t", "0",
           "Data-parallel ranks; must be the gradient synchronisation's group (0 = the module's "
           "zen.parallel dp when above 1, else that group)">
  ];
  let dependentDialects = ["::zen::ZenDialect"];
}

// zen-plan-pipeline (passes/lib/Pipeline.cpp) runs zen-autotune with these
// options; `zenopt MODEL.onnx` builds the same pipeline.

#endif // ZEN_PASSES_TD
