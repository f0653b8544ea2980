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
    The `zen` dialect describes one data-parallel training iteration: forward,
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
    "::mlir::StringAttr":$strategy,
    "::mlir::IntegerAttr":$world_size,
    "::zen::PredictionAttr":$predicted,
    "::mlir::DictionaryAttr":$baselines,
    "::mlir::DictionaryAttr":$baselines_uncompressed);
  let hasOperationAttrVerify = 1;
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

#endif // ZEN_BASE_TD
