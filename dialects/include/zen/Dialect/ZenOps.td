//===- ZenOps.td - zen dialect operations --------------------*- tablegen -*-===//
#ifndef ZEN_OPS_TD
#define ZEN_OPS_TD

include "zen/Dialect/ZenTypes.td"
include "zen/Dialect/ZenInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Zen_Op<string mnemonic, list<Trait> traits = []>
    : Op<Zen_Dialect, mnemonic, traits> {
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Parameters, compute and gradients
//===----------------------------------------------------------------------===//

def Zen_ParamOp : Zen_Op<"param", [Pure]> {
  let summary = "A trainable parameter";
  let description = [{
    Declares a trainable parameter by its name in the model. Only dims and
    dtype matter to the planner; the weight bytes are never read.

    A parameter split by tensor parallelism has one rank's shard as its type
    and says how in `shard` (a `#zen.shard`). `stage` is the pipeline stage
    that holds it (zen-assign-pipeline-stages; also on zen.compute,
    zen.gradient, zen.send and zen.recv).

    ```mlir
    %w = zen.param "fc.weight" : tensor<1000x2048xf32>
    %q = zen.param "attn.qkv.weight" {shard = #zen.shard<column, 2, dim = 0>, stage = 1 : i64} : tensor<1152x768xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<Zen_ShardAttr>:$shard,
                       OptionalAttr<I64Attr>:$stage);
  // The builder of an unpartitioned parameter (what the importer creates).
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::StringAttr":$name), [{
      build($_builder, $_state, result, name, /*shard=*/nullptr, /*stage=*/nullptr);
    }]>
  ];
  let results = (outs Zen_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Zen_ComputeOp : Zen_Op<"compute"> {
  let summary = "A forward, backward or optimizer compute step";
  let description = [{
    One model operation with its cost: `flops` (2 per multiply-accumulate) and
    `bytes` (read plus written). `op_type` is the ONNX operator type (or the
    derived backward/optimizer step), `node` the source node's name.

    ```mlir
    %y = zen.compute "Gemm" forward (%x, %w) {node = "fc", flops = 4096000 : i64, bytes = 8200000 : i64}
        : (tensor<1x2048xf32>, tensor<1000x2048xf32>) -> tensor<1x1000xf32>
    ```
  }];
  let arguments = (ins StrAttr:$op_type, Zen_PhaseAttr:$phase,
                       Variadic<Zen_AnyRankedTensor>:$inputs,
                       I64Attr:$flops, I64Attr:$bytes,
                       OptionalAttr<StrAttr>:$node, OptionalAttr<I64Attr>:$stage);
  let results = (outs Variadic<Zen_AnyRankedTensor>:$results);
  // The builder without a pipeline stage, which every pass but the stage assignment uses.
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$results, "::llvm::StringRef":$op_type, "::zen::Phase":$phase,
                   "::mlir::ValueRange":$inputs, "uint64_t":$flops, "uint64_t":$bytes,
                   "::mlir::StringAttr":$node), [{
      build($_builder, $_state, results, op_type, phase, inputs, flops, bytes, node,
            /*stage=*/nullptr);
    }]>
  ];
  let assemblyFormat =
      "$op_type $phase `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)";
}

def Zen_GradientOp : Zen_Op<"gradient", [Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "Marks a value as the complete gradient of a parameter";
  let description = [{
    `value` is the full local gradient of `param` (a `zen.param`) once the
    backward pass has produced it; `ready_order` is the position at which it
    becomes ready during backward (0 = first). The parameter has the
    gradient's type, except a ZeRO-3 shard (zen-shard-zero), whose smaller
    type is printed after the keyword `shard`: the gradient stays whole until it
    is reduce-scattered. `row_lookups` marks a row-sparse gradient (an embedding
    table whose every forward use is a row gather): one rank's step looks up that
    many rows, so at most that many rows of the gradient are non-zero;
    `shared_rows` says every sample looks up the same rows (position ids), so
    every rank touches the same ones.

    ```mlir
    %g = zen.gradient %w, %dw {ready_order = 0 : i64} : tensor<1000x2048xf32>
    %g3 = zen.gradient %w3, %dw3 {ready_order = 1 : i64} : tensor<1000x2048xf32> shard tensor<250x2048xf32>
    %e = zen.gradient %table, %dtable {ready_order = 2 : i64, row_lookups = 4096 : i64} : tensor<200000x64xf32>
    ```
  }];
  let arguments = (ins Zen_Tensor:$param, Zen_Tensor:$value, I64Attr:$ready_order,
                       OptionalAttr<I64Attr>:$stage, OptionalAttr<I64Attr>:$row_lookups,
                       UnitAttr:$shared_rows);
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$param, "::mlir::Value":$value,
                   "::mlir::IntegerAttr":$ready_order), [{
      build($_builder, $_state, result, param, value, ready_order, /*stage=*/nullptr,
            /*row_lookups=*/nullptr, /*shared_rows=*/nullptr);
    }]>
  ];
  let results = (outs Zen_Tensor:$result);
  let assemblyFormat =
      "$param `,` $value attr-dict `:` type($result) `` custom<ParamShardType>(type($param), ref(type($result)))";
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def Zen_PackOp : Zen_Op<"pack", [Pure]> {
  let summary = "Packs tensors into one flat bucket";
  let description = [{
    Concatenates the flattened inputs, in order, into a 1-D bucket of the same
    element type. The bucket may be longer than the inputs together (padding at
    the tail, e.g. to divide evenly among ranks).

    ```mlir
    %b = zen.pack %g0, %g1 : tensor<64x3xf32>, tensor<64xf32> -> tensor<256xf32>
    ```
  }];
  let arguments = (ins Variadic<Zen_Tensor>:$inputs, OptionalAttr<I64Attr>:$bucket);
  let results = (outs Zen_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result)";
}

def Zen_UnpackOp : Zen_Op<"unpack", [Pure]> {
  let summary = "Splits a flat bucket back into tensors";
  let description = [{
    The inverse of `zen.pack`: the results take consecutive slices of the
    bucket, in order; a tail beyond them is padding.

    ```mlir
    %g0, %g1 = zen.unpack %b : tensor<256xf32> -> tensor<64x3xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Zen_Tensor:$input, OptionalAttr<I64Attr>:$bucket);
  let results = (outs Variadic<Zen_Tensor>:$outputs);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($outputs)";
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// `bucket` names the gradient bucket a collective synchronises; `after_backward`
// holds it until the whole backward pass is done (the no-overlap baseline);
// `sync`, on a bucket's first collective, is the planned synchronisation scheme
// (zen/SyncScheme.h): the op must be the scheme's first step and a compressed
// payload's method must support it.
class Zen_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Zen_Op<mnemonic, !listconcat(traits, [Zen_CollectiveOpInterface])> {
  dag collectiveArgs = (ins Zen_ProcessGroupAttr:$group,
                            OptionalAttr<Zen_CollectiveAlgorithmAttr>:$algorithm,
                            DefaultValuedAttr<I64Attr, "1">:$chunks,
                            OptionalAttr<Zen_ScheduleAttr>:$schedule,
                            OptionalAttr<I64Attr>:$bucket,
                            UnitAttr:$after_backward,
                            OptionalAttr<Zen_SyncSchemeAttr>:$sync);
}

def Zen_AllReduceOp : Zen_CollectiveOp<"all_reduce", [SameOperandsAndResultType]> {
  let summary = "All-reduce over a process group";
  let description = [{
    Reduces `input` across the group; every rank gets the result. A compressed
    input must be all-reducible (fp16, bf16, int8 or PowerSGD factors).
    `chunks` splits it into pipelined pieces.

    ```mlir
    %r = zen.all_reduce avg %b {group = #zen.group<size = 64, nodes = 8>, chunks = 2 : i64}
        : tensor<1024xf32>
    ```
  }];
  let arguments = !con((ins Zen_ReductionKindAttr:$reduction, Zen_Payload:$input), collectiveArgs);
  let results = (outs Zen_Payload:$result);
  let assemblyFormat = "$reduction $input attr-dict `:` type($input)";
}

def Zen_ReduceScatterOp : Zen_CollectiveOp<"reduce_scatter"> {
  let summary = "Reduce-scatter over a process group";
  let description = [{
    Reduces a 1-D `input` across the group and leaves each rank its shard of
    ceil(n / size) elements (the input is padded at the tail). An N-D
    activation (sequence parallelism) is sharded along one dimension, which
    the group size must divide.

    ```mlir
    %s = zen.reduce_scatter avg %b {group = #zen.group<size = 8, nodes = 1>}
        : tensor<1024xf32> -> tensor<128xf32>
    ```
  }];
  let arguments = !con((ins Zen_ReductionKindAttr:$reduction, Zen_Tensor:$input), collectiveArgs);
  let results = (outs Zen_Tensor:$result);
  let assemblyFormat = "$reduction $input attr-dict `:` type($input) `->` type($result)";
}

def Zen_AllGatherOp : Zen_CollectiveOp<"all_gather"> {
  let summary = "All-gather over a process group";
  let description = [{
    Concatenates every rank's 1-D `input`; the result has size times as many
    elements. An N-D input (a sequence-parallel activation or a ZeRO-3
    parameter shard) is concatenated along one dimension. A compressed input keeps its type: the result stands for all
    ranks' payloads, which `zen.decompress` sums. `decoupled` marks an
    all-gather that may complete during the next iteration's forward pass,
    before the layer that owns it runs (DeAR).

    ```mlir
    %g = zen.all_gather %s {group = #zen.group<size = 8, nodes = 1>, decoupled}
        : tensor<128xf32> -> tensor<1024xf32>
    ```
  }];
  let arguments = !con((ins Zen_Payload:$input, UnitAttr:$decoupled), collectiveArgs);
  let results = (outs Zen_Payload:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Zen_SparseAllReduceOp : Zen_Op<"sparse_all_reduce", [SameOperandsAndResultType]> {
  let summary = "Sums a row-sparse gradient over the group under a sparse scheme";
  let description = [{
    The sum over `group` of a row-sparse gradient (a `zen.gradient` with
    `row_lookups`), moved by `scheme` (zen/SparseScheme.h: `dense`, `agsparse`,
    `sparcml`, `omnireduce`, `balanced`, `hierarchical`) as zen-plan-sparse chose it
    from `statistics`; the result is the dense sum, as an all-reduce's would be. The
    gradient is in no bucket. `gamma` covers the powers of two up to the group.

    ```mlir
    %s = zen.sparse_all_reduce %e balanced {group = #zen.group<size = 4, nodes = 2>,
        statistics = #zen.sparsity<density = 0.0095 : f64, gamma = [1.0 : f64, 1.9 : f64, 3.6 : f64],
          skew = 0.61 : f64, hash_skew = 0.13 : f64, block_density = 0.02 : f64,
          block_gamma = [1.0 : f64, 1.8 : f64, 3.2 : f64], source = model>}
        : tensor<200000x64xf32>
    ```
  }];
  let arguments = (ins Zen_Tensor:$input, Zen_SparseSchemeAttr:$scheme,
                       Zen_ProcessGroupAttr:$group, Zen_SparsityAttr:$statistics);
  let results = (outs Zen_Tensor:$result);
  let assemblyFormat = "$input `` $scheme attr-dict `:` type($input)";
}

def Zen_AllToAllOp : Zen_CollectiveOp<"all_to_all", [SameOperandsAndResultType]> {
  let summary = "All-to-all exchange over a process group";
  let description = [{
    Each rank sends the i-th of size equal slices of `input` to rank i. A dense
    input's element count must divide by the group size.

    ```mlir
    %x = zen.all_to_all %t {group = #zen.group<size = 8, nodes = 1>} : tensor<1024xf32>
    ```
  }];
  let arguments = !con((ins Zen_Payload:$input), collectiveArgs);
  let results = (outs Zen_Payload:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Zen_BroadcastOp : Zen_CollectiveOp<"broadcast", [SameOperandsAndResultType]> {
  let summary = "Broadcast from a root rank";
  let description = [{
    Every rank receives `root`'s `input`.

    ```mlir
    %w1 = zen.broadcast %w root 0 {group = #zen.group<size = 64, nodes = 8>} : tensor<1024xf32>
    ```
  }];
  let arguments = !con((ins Zen_Payload:$input, I64Attr:$root), collectiveArgs);
  let results = (outs Zen_Payload:$result);
  let assemblyFormat = "$input `root` $root attr-dict `:` type($input)";
}

def Zen_SendOp : Zen_CollectiveOp<"send"> {
  let summary = "Point-to-point send to a peer rank";
  let description = [{
    ```mlir
    zen.send %x to 1 {group = #zen.group<size = 2, nodes = 2>} : tensor<16xf32>
    ```

    Between pipeline stages, `peer` is the receiving stage within the
    pipeline group, `stage` the sending one, and `zen.role` is `pipeline`:

    ```mlir
    zen.send %x to 1 {group = #zen.group<size = 2, nodes = 1>, stage = 0 : i64,
                      zen.role = #zen.role<pipeline>} : tensor<1x128x768xf32>
    ```
  }];
  let arguments = !con((ins Zen_Payload:$input, I64Attr:$peer), collectiveArgs,
                       (ins OptionalAttr<I64Attr>:$stage));
  let assemblyFormat = "$input `to` $peer attr-dict `:` type($input)";
}

def Zen_RecvOp : Zen_CollectiveOp<"recv"> {
  let summary = "Point-to-point receive from a peer rank";
  let description = [{
    ```mlir
    %x = zen.recv from 0 {group = #zen.group<size = 2, nodes = 2>} : tensor<16xf32>
    ```

    Between pipeline stages, `peer` is the sending stage and `stage` the
    receiving one.
  }];
  let arguments = !con((ins I64Attr:$peer), collectiveArgs, (ins OptionalAttr<I64Attr>:$stage));
  let results = (outs Zen_Payload:$result);
  let assemblyFormat = "`from` $peer attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Compression
//===----------------------------------------------------------------------===//

def Zen_CompressOp : Zen_Op<"compress"> {
  let summary = "Compresses a dense tensor for the wire";
  let description = [{
    Encodes `input` with the method in the result type, on `device` (GPU, or
    CPU offload with a PCIe copy each way). With `error_feedback`, the part
    lost to compression is kept as a residual and added to the next
    iteration's input.

    ```mlir
    %c = zen.compress %b on gpu {error_feedback}
        : tensor<1024xf32> -> !zen.compressed<tensor<1024xf32>, #zen.compression<topk, ratio = 0.01>>
    ```
  }];
  let arguments = (ins Zen_Tensor:$input, Zen_DeviceAttr:$device, UnitAttr:$error_feedback,
                       OptionalAttr<Zen_ScheduleAttr>:$schedule, OptionalAttr<I64Attr>:$bucket);
  let results = (outs Zen_CompressedType:$result);
  let assemblyFormat = "$input `on` $device attr-dict `:` type($input) `->` qualified(type($result))";
}

def Zen_DecompressOp : Zen_Op<"decompress"> {
  let summary = "Decodes a compressed payload back into a dense tensor";
  let description = [{
    The inverse of `zen.compress`; after an all-gather it sums every rank's
    payload.

    ```mlir
    %d = zen.decompress %c on gpu
        : !zen.compressed<tensor<1024xf32>, #zen.compression<fp16>> -> tensor<1024xf32>
    ```
  }];
  let arguments = (ins Zen_CompressedType:$input, Zen_DeviceAttr:$device,
                       OptionalAttr<Zen_ScheduleAttr>:$schedule, OptionalAttr<I64Attr>:$bucket);
  let results = (outs Zen_Tensor:$result);
  let assemblyFormat = "$input `on` $device attr-dict `:` qualified(type($input)) `->` type($result)";
}

include "zen/Dialect/ZenMoeOps.td"

#endif // ZEN_OPS_TD
