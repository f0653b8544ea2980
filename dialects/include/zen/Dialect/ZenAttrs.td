//===- ZenAttrs.td - zen dialect attributes ------------------*- tablegen -*-===//
#ifndef ZEN_ATTRS_TD
#define ZEN_ATTRS_TD

include "zen/Dialect/ZenBase.td"

class Zen_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Zen_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Zen_CompressionAttr : Zen_Attr<"Compression", "compression"> {
  let summary = "A compression method and its parameters";
  let description = [{
    The method applied to a gradient bucket before its collective. `topk` and
    `randomk` take the kept fraction `ratio` in (0, 1]; `powersgd` takes the
    factor `rank` (at least 1); the others take no parameter.

    ```mlir
    #zen.compression<fp16>
    #zen.compression<topk, ratio = 0.01>
    #zen.compression<powersgd, rank = 4>
    ```
  }];
  let parameters = (ins
    EnumParameter<Zen_CompressionMethod>:$method,
    DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(0.0)", "kept fraction for topk/randomk">:$ratio,
    DefaultValuedParameter<"int64_t", "0", "factor rank for powersgd">:$rank);
  let builders = [
    AttrBuilder<(ins "CompressionMethod":$method, "double":$ratio, "int64_t":$rank), [{
      return $_get($_ctxt, method, ::llvm::APFloat(ratio), rank);
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// True when the executor can synchronise the method's payload with
    /// `scheme` (the vocabulary's table, zen/SyncScheme.h).
    bool supports(::zen::SyncScheme scheme) const;
    /// The kept fraction as a double (0 for methods without a ratio).
    double getRatioValue() const { return getRatio().convertToDouble(); }

    /// True when the method discards information (error feedback applies).
    bool isLossy() const;
    /// Bytes on the wire for `elements` fp32 gradient elements.
    int64_t compressedBytes(int64_t elements, int64_t rows) const;
  }];
}

def Zen_ProcessGroupAttr : Zen_Attr<"ProcessGroup", "group"> {
  let summary = "The ranks a collective runs over";
  let description = [{
    `size` ranks spread over `nodes` nodes, the same number on each node.

    ```mlir
    #zen.group<size = 64, nodes = 8>
    ```
  }];
  let parameters = (ins "int64_t":$size, "int64_t":$nodes);
  let assemblyFormat = "`<` `size` `=` $size `,` `nodes` `=` $nodes `>`";
  let genVerifyDecl = 1;
}

def Zen_ScheduleAttr : Zen_Attr<"Schedule", "schedule"> {
  let summary = "Where and when a collective is issued";
  let description = [{
    `stream` is the communication stream (0-based), `priority` breaks ties when
    several collectives are ready (lower first), `order` is the global issue
    position of the collective within the iteration.

    ```mlir
    #zen.schedule<stream = 1, priority = 0, order = 3>
    ```
  }];
  let parameters = (ins "int64_t":$stream, "int64_t":$priority, "int64_t":$order);
  let assemblyFormat =
      "`<` `stream` `=` $stream `,` `priority` `=` $priority `,` `order` `=` $order `>`";
  let genVerifyDecl = 1;
}

def Zen_PredictionAttr : Zen_Attr<"Prediction", "prediction"> {
  let summary = "The simulator's prediction for the planned iteration";
  let description = [{
    Times in microseconds: the steady-state iteration, the compute stream's
    busy time, the communication left exposed, and the lower bound
    max(compute, cheapest way to move the gradient bytes). zen-autotune writes
    it on the module as `zen.predicted`.

    ```mlir
    module attributes {zen.predicted = #zen.prediction<iteration_us = 1.2e4 : f64,
        compute_us = 1.1e4 : f64, exposed_comm_us = 1.0e3 : f64, lower_bound_us = 1.1e4 : f64>} {}
    ```
  }];
  let parameters = (ins "::mlir::FloatAttr":$iteration_us, "::mlir::FloatAttr":$compute_us,
                        "::mlir::FloatAttr":$exposed_comm_us, "::mlir::FloatAttr":$lower_bound_us);
  let builders = [
    AttrBuilder<(ins "double":$iterationUs, "double":$computeUs, "double":$exposedCommUs,
                     "double":$lowerBoundUs), [{
      auto f64 = [&](double us) { return ::mlir::FloatAttr::get(::mlir::Float64Type::get($_ctxt), us); };
      return $_get($_ctxt, f64(iterationUs), f64(computeUs), f64(exposedCommUs), f64(lowerBoundUs));
    }]>
  ];
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

// `true` / `false` (the generic integer parser would want 1 / 0); false when omitted.
def Zen_FlagParameter : AttrParameter<"bool", "true or false"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<bool> {
    if (::mlir::succeeded($_parser.parseOptionalKeyword("true")))
      return true;
    if (::mlir::failed($_parser.parseKeyword("false")))
      return ::mlir::failure();
    return false;
  }() }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
  let defaultValue = "false";
}

def Zen_RecomputeParameter : EnumParameter<Zen_Recompute> {
  let defaultValue = "::zen::Recompute::none";
}

def Zen_ParallelAttr : Zen_Attr<"Parallel", "parallel"> {
  let summary = "A parallel configuration: tensor, pipeline and data parallelism and their options";
  let description = [{
    `tp` tensor-parallel ranks, `pp` pipeline stages, `dp` data-parallel
    replicas; `zero` the ZeRO stage over the dp group (0-3);
    `sequence_parallel` shards the non-tensor-parallel activations along the
    sequence; `recompute` the activation recomputation (`none`, `selective`,
    `full`); `micro_batch` samples per micro-batch and `micro_batches` per
    pipeline per iteration; `virtual_stages` > 1 is interleaved 1F1B (needs
    pp > 1). A model with MoE blocks adds `ep`, the ranks of each dp group its
    experts spread over (dividing dp), and `expert_tensor_parallel`, every
    expert split over the tp ranks (needs tp > 1), and `experts`, how its MoE
    layers run (their pipelining degrees and all-to-all). The
    `*_chunks` fields are the tensor-parallel GEMM/collective decomposition
    (zen-decompose-tensor-parallel's degrees); `stage_layers` the transformer
    blocks of each pipeline stage (pp entries; omitted: as even as possible).
    Parameters at their default (1, 0, false, none, omitted) may be omitted.
    The partitioning passes read their degree from the module's
    `zen.parallel` when their option is 0 and record what they applied there.

    ```mlir
    module attributes {zen.parallel = #zen.parallel<tp = 8, pp = 2, dp = 4, zero = 1,
        sequence_parallel = true, recompute = full, micro_batch = 1, micro_batches = 16,
        virtual_stages = 1, ep = 4, expert_tensor_parallel = true,
        attention_forward_chunks = 2, mlp_backward_chunks = 4,
        stage_layers = [12, 12]>} {}
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"int64_t", "1">:$tp,
    DefaultValuedParameter<"int64_t", "1">:$pp,
    DefaultValuedParameter<"int64_t", "1">:$dp,
    DefaultValuedParameter<"int64_t", "0">:$zero,
    Zen_FlagParameter:$sequence_parallel,
    Zen_RecomputeParameter:$recompute,
    DefaultValuedParameter<"int64_t", "1">:$micro_batch,
    DefaultValuedParameter<"int64_t", "1">:$micro_batches,
    DefaultValuedParameter<"int64_t", "1">:$virtual_stages,
    DefaultValuedParameter<"int64_t", "1">:$ep,
    Zen_FlagParameter:$expert_tensor_parallel,
    DefaultValuedParameter<"int64_t", "1">:$attention_forward_chunks,
    DefaultValuedParameter<"int64_t", "1">:$attention_backward_chunks,
    DefaultValuedParameter<"int64_t", "1">:$mlp_forward_chunks,
    DefaultValuedParameter<"int64_t", "1">:$mlp_backward_chunks,
    OptionalParameter<"::mlir::DenseI64ArrayAttr">:$stage_layers,
    OptionalParameter<"::zen::MoeScheduleAttr">:$experts);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zen_MoeBlocksAttr : Zen_Attr<"MoeBlocks", "moe_blocks"> {
  let summary = "A recognised transformer's Mixture-of-Experts blocks";
  let description = [{
    `blocks` the MoE blocks' indices among the transformer's blocks
    (increasing); one layer as exported: `tokens` routed, `hidden`, the expert
    `ffn` and the first expert GEMM's rows `fc1_rows` (2 x ffn when gated),
    `experts`, `top_k`, `capacity_factor`, `biases`, the dispatch buffer's
    `capacity_rows` per expert (0: from the capacity factor); `block_params`
    an MoE block's parameters besides its experts, `expert_params` every
    expert of one layer.

    ```mlir
    #zen.moe_blocks<blocks = [1, 3], tokens = 4096, hidden = 2048, ffn = 4096,
        fc1_rows = 4096, experts = 64, top_k = 2, capacity_factor = 1.0 : f64, biases = true,
        capacity_rows = 128, block_params = 1.7e7 : f64, expert_params = 1.07e9 : f64>
    ```
  }];
  let parameters = (ins "::mlir::DenseI64ArrayAttr":$blocks, "int64_t":$tokens, "int64_t":$hidden,
                        "int64_t":$ffn, "int64_t":$fc1_rows, "int64_t":$experts, "int64_t":$top_k,
                        "::mlir::FloatAttr":$capacity_factor, Zen_FlagParameter:$biases,
                        "int64_t":$capacity_rows, "::mlir::FloatAttr":$block_params,
                        "::mlir::FloatAttr":$expert_params);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zen_TransformerAttr : Zen_Attr<"Transformer", "transformer"> {
  let summary = "The transformer the large-model search planned: its recognised shape";
  let description = [{
    What transformer recognition read from the imported IR (cost::TransformerShape),
    kept on the module as `zen.transformer` by the large-model planning, since
    the partitioned IR no longer shows it: the `family` (`gpt`, `bert`,
    `encoder-decoder`), the blocks (`layers`), `hidden`, `heads`, `kv_heads`,
    the MLP's `ffn` and kind `mlp`, `norm`, `positions`, `tied_embeddings`,
    `cross_attention_blocks` and one cross-attention's parameters, tokens per
    sample `seq`, `vocab`, the exported `model_batch`, the parameters of a
    dense block, of the embeddings and of the head, the weight GEMMs left
    `replicated` by tensor parallelism, and `moe`, its MoE blocks.

    ```mlir
    #zen.transformer<family = "gpt", layers = 12, hidden = 768, heads = 12, kv_heads = 12,
        ffn = 3072, mlp = "gelu", norm = "layernorm", positions = "learned", seq = 128,
        vocab = 50257, model_batch = 1, layer_params = 7087872.0 : f64,
        embedding_params = 39383808.0 : f64, head_params = 38598912.0 : f64,
        replicated = ["/head/MatMul"]>
    ```
  }];
  let parameters = (ins StringRefParameter<"model family">:$family, "int64_t":$layers,
                        "int64_t":$hidden, "int64_t":$heads, "int64_t":$kv_heads, "int64_t":$ffn,
                        StringRefParameter<"MLP kind">:$mlp, StringRefParameter<"norm">:$norm,
                        StringRefParameter<"position encoding">:$positions,
                        Zen_FlagParameter:$tied_embeddings,
                        DefaultValuedParameter<"int64_t", "0">:$cross_attention_blocks,
                        OptionalParameter<"::mlir::FloatAttr">:$cross_attention_params,
                        "int64_t":$seq, "int64_t":$vocab, "int64_t":$model_batch,
                        "::mlir::FloatAttr":$layer_params, "::mlir::FloatAttr":$embedding_params,
                        "::mlir::FloatAttr":$head_params,
                        OptionalParameter<"::mlir::ArrayAttr">:$replicated,
                        OptionalParameter<"::zen::MoeBlocksAttr">:$moe);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zen_BaselineAttr : Zen_Attr<"Baseline", "baseline"> {
  let summary = "One baseline a plan was compared with";
  let description = [{
    A baseline by `name` (a strategy such as `ddp`, a large-model seed such as
    `megatron`, an MoE system such as `tutel`): its predicted `iteration_us`,
    the same with uncompressed gradients (`uncompressed_us`, when compressors
    were allowed and zenopt compared like with like), or why it cannot run
    (`not_fitting`, instead of a time); the `configuration` it ran, where the
    search chose one for it. Lists of them (`zen.baselines`, and the
    `baselines` of `#zen.moe_search` and `#zen.parallel_search`) are arrays
    sorted by name, each name once.

    ```mlir
    #zen.baseline<name = "ddp", iteration_us = 58460.4 : f64>
    #zen.baseline<name = "zero3", not_fitting = "needs 92 GB per GPU">
    ```
  }];
  let parameters = (ins StringRefParameter<"name">:$name,
                        OptionalParameter<"::mlir::FloatAttr">:$iteration_us,
                        OptionalParameter<"::mlir::FloatAttr">:$uncompressed_us,
                        OptionalParameter<"::mlir::StringAttr">:$not_fitting,
                        OptionalParameter<"::mlir::StringAttr">:$configuration);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zen_MoeSearchAttr : Zen_Attr<"MoeSearch", "moe_search"> {
  let summary = "What zen-plan-moe searched besides the chosen expert parallelism";
  let description = [{
    Recorded on the module by zen-plan-moe, for the plan's `moe` section: the
    `imbalance` planned for (the busiest expert's load over the mean), the
    iteration each expert-parallel degree tried and fitting adds (`searched`,
    ep to microseconds) and the per-GPU bytes of each that does not fit
    (`not_fitting`, ep to bytes). zenopt adds the `baselines` (`#zen.baseline`,
    with their `uncompressed_us`) when it compared the plan with one of
    uncompressed gradients and reports each baseline at the faster of the two;
    the lowering then reports those.

    ```mlir
    #zen.moe_search<imbalance = 1.0 : f64, searched = {"1" = 12.5 : f64, "2" = 8.0 : f64},
        not_fitting = {}>
    ```
  }];
  let parameters = (ins "::mlir::FloatAttr":$imbalance, "::mlir::DictionaryAttr":$searched,
                        "::mlir::DictionaryAttr":$not_fitting,
                        OptionalParameter<"::mlir::ArrayAttr">:$baselines);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zen_ParallelSearchAttr : Zen_Attr<"ParallelSearch", "parallel_search"> {
  let summary = "What the large-model search planned under, and how the alternatives scored";
  let description = [{
    The training setup the module's `zen.parallel` was chosen for: the
    `global_batch` (samples per iteration), the `optimizer` (`adam`, `sgd`),
    the MoE `moe_imbalance` and the allowed gradient `compressor` list
    (zenopt's --compressor spelling; empty: none); `forced` when the command
    line fixed part of the configuration (the plan's strategy is then
    `manual`, else `auto`); the search's `configurations_scored` and its
    `baselines` (`#zen.baseline`: a predicted iteration or why it does not fit,
    and the configuration it ran).
    Lowering re-scores the chosen configuration from these and
    `zen.transformer`.

    ```mlir
    #zen.parallel_search<global_batch = 64, optimizer = "adam", moe_imbalance = 1.0 : f64,
        configurations_scored = 216,
        baselines = [#zen.baseline<name = "ddp", iteration_us = 58460.4 : f64>]>
    ```
  }];
  let parameters = (ins "int64_t":$global_batch, StringRefParameter<"optimizer">:$optimizer,
                        "::mlir::FloatAttr":$moe_imbalance,
                        StringRefParameter<"compressor list", "\"\"">:$compressor,
                        Zen_FlagParameter:$forced, "int64_t":$configurations_scored,
                        "::mlir::ArrayAttr":$baselines);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zen_SparsityAttr : Zen_Attr<"Sparsity", "sparsity"> {
  let summary = "A row-sparse gradient's sparsity statistics";
  let description = [{
    What a sparse scheme is priced from (costmodel/include/zen/CostModel/Sparse.h):
    `density` the share of rows one rank's gradient touches in a step, in (0, 1];
    `gamma` the density of 2^k ranks' gradients merged over `density` (k = 0, 1, ...
    up to the group; starts at 1, never decreases); `skew` and `hash_skew` the share
    of the non-zero rows in the fullest of 8 index-range and hash partitions, in
    [1/8, 1]; `block_density` and `block_gamma` the same for OmniReduce's blocks;
    `source` the documented Zipf `model` or `measured` from an index stream.

    ```mlir
    #zen.sparsity<density = 0.0095 : f64, gamma = [1.0 : f64, 1.9 : f64, 3.6 : f64],
        skew = 0.61 : f64, hash_skew = 0.13 : f64, block_density = 0.02 : f64,
        block_gamma = [1.0 : f64, 1.8 : f64, 3.2 : f64], source = model>
    ```
  }];
  // Arrays of f64 FloatAttr, not DenseF64ArrayAttr: they print every digit, so a printed
  // module lowers to the same plan.
  let parameters = (ins "::mlir::FloatAttr":$density, "::mlir::ArrayAttr":$gamma,
                        "::mlir::FloatAttr":$skew, "::mlir::FloatAttr":$hash_skew,
                        "::mlir::FloatAttr":$block_density,
                        "::mlir::ArrayAttr":$block_gamma,
                        EnumParameter<Zen_SparsitySource>:$source);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zen_MeasuredComputeAttr : Zen_Attr<"MeasuredCompute", "measured_compute"> {
  let summary = "A training step's compute as timed on the job's own ranks";
  let description = [{
    What zenopt's `--measured-compute FILE` read (zenopt.torch times a few steps of the
    model with hooks): `forward_us` and `backward_us` the whole passes, `optimizer_us`
    the optimizer step; `first_read_us` maps a parameter to when forward first reads it
    and `ready_us` to when backward has produced its gradient, each from the start of
    its pass; `method` how they were measured. Planning prices the compute segments
    between those points from them instead of from FLOPs.

    ```mlir
    #zen.measured_compute<forward_us = 900.0 : f64, backward_us = 1800.0 : f64,
        optimizer_us = 120.0 : f64, first_read_us = {"fc1.weight" = 0.0 : f64},
        ready_us = {"fc1.weight" = 1750.0 : f64}, method = "torch hooks, median of 3 steps">
    ```
  }];
  let parameters = (ins "::mlir::FloatAttr":$forward_us, "::mlir::FloatAttr":$backward_us,
                        "::mlir::FloatAttr":$optimizer_us, "::mlir::DictionaryAttr":$first_read_us,
                        "::mlir::DictionaryAttr":$ready_us, "::mlir::StringAttr":$method);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zen_ShardAttr : Zen_Attr<"Shard", "shard"> {
  let summary = "How tensor parallelism splits a parameter";
  let description = [{
    On a `zen.param` whose type is one rank's shard: the logical parameter is
    `parts` times larger along dimension `dim`. `column` splits a weight GEMM's
    output features (its weight and bias), `row` its input features (the bias
    of a row-parallel GEMM stays whole and carries no shard). Which tensor
    dimension holds the features depends on the layout the model was
    exported with, hence `dim`.

    ```mlir
    %w = zen.param "blocks.0.fc1.weight" {shard = #zen.shard<column, 8, dim = 0>} : tensor<384x768xf32>
    %b = zen.param "blocks.0.fc1.bias" {shard = #zen.shard<column, 8, dim = 0>} : tensor<384xf32>
    %w2 = zen.param "blocks.0.fc2.weight" {shard = #zen.shard<row, 8, dim = 1>} : tensor<768x384xf32>
    ```
  }];
  let parameters = (ins EnumParameter<Zen_ShardKind>:$kind, "int64_t":$parts, "int64_t":$dim);
  let assemblyFormat = "`<` $kind `,` $parts `,` `dim` `=` $dim `>`";
  let genVerifyDecl = 1;
}

// An enum parameter spelled as a string, so that spellings that are no bare identifier
// ("2d") print as they parse; parsing takes a string or a keyword.
class Zen_QuotedEnumParameter<EnumAttrInfo enumInfo, string default = "">
    : EnumParameter<enumInfo> {
  let parser = [{[&]() -> ::mlir::FailureOr<}] # cppType # [{> {
    auto loc = $_parser.getCurrentLocation();
    std::string spelling;
    if (::mlir::failed($_parser.parseKeywordOrString(&spelling)))
      return ::mlir::failure();
    if (auto value = ::zen::symbolizeEnum<}] # cppType # [{>(spelling))
      return *value;
    return $_parser.emitError(loc) << "invalid }] # enumInfo.summary # [{ \"" << spelling << "\"";
  }()}];
  let printer = [{ $_printer << '"' << ::zen::stringifyEnum($_self) << '"' }];
  let defaultValue = default;
}

def Zen_MoeScheduleAttr : Zen_Attr<"MoeSchedule", "moe_schedule"> {
  let summary = "How a Mixture-of-Experts layer runs under expert parallelism";
  let description = [{
    The layer's experts spread over `ep` ranks of the data-parallel group;
    dispatch -> experts -> combine run in `forward` pieces along the capacity
    in forward and `backward` pieces in backward, piece i's all-to-alls in
    flight while piece i + 1's experts compute; `all_to_all` is `"flat"` (one
    exchange among the ep ranks) or `"2d"` (Tutel's hierarchical exchange:
    inside each node, then between the ranks of one local index, then a
    layout swap). `tokens` is how the all-to-alls carry the tokens (and in
    backward their gradients): `"none"` (the default, left out when printed),
    `"fp16"`, `"bf16"` or `"int8"` (a scale per row). `gradient_sync` is how
    the all-to-alls meet the data-parallel gradient sync of other layers:
    `"concurrent"` (the default, left out when printed: a stream of their own,
    sharing each link level with the gradient collectives in flight) or
    `"serial"` (the gradient sync's stream, taking turns with it: an
    all-to-all first when both wait). zen-plan-moe writes it on every op of
    the layer.

    ```mlir
    #zen.moe_schedule<ep = 8, forward = 4, backward = 2, all_to_all = "2d">
    #zen.moe_schedule<ep = 8, forward = 2, backward = 2, all_to_all = "flat", tokens = "int8",
                      gradient_sync = "serial">
    ```
  }];
  let parameters = (ins "int64_t":$ep, "int64_t":$forward, "int64_t":$backward,
                        Zen_QuotedEnumParameter<Zen_MoeAllToAll>:$all_to_all,
                        Zen_QuotedEnumParameter<Zen_CompressionMethod, "::zen::CompressionMethod::none">:$tokens,
                        Zen_QuotedEnumParameter<Zen_MoeGradientSync, "::zen::MoeGradientSync::concurrent">:$gradient_sync);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // ZEN_ATTRS_TD
