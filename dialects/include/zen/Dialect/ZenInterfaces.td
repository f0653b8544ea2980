//===- ZenInterfaces.td - zen op interfaces -------------------*- tablegen -*-===//
#ifndef ZEN_INTERFACES_TD
#define ZEN_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Zen_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::zen";
  let description = [{
    What every collective shares and what the planning passes read and edit
    without caring which collective it is: the process group, the payload it
    moves, the chunk count, the schedule (stream, priority, issue order) and the
    gradient bucket it belongs to.
  }];
  let methods = [
    InterfaceMethod<"The ranks the collective runs over.", "::zen::ProcessGroupAttr",
      "getProcessGroup", (ins), [{}], [{ return $_op.getGroup(); }]>,
    InterfaceMethod<"Bytes of one rank's payload (compressed payloads at their wire size).",
      "int64_t", "getPayloadBytes", (ins), [{}],
      [{ return ::zen::payloadBytes($_op.getOperation()); }]>,
    InterfaceMethod<"Pipelined pieces the collective is split into.", "int64_t",
      "getChunkCount", (ins), [{}], [{ return $_op.getChunksAttr().getInt(); }]>,
    InterfaceMethod<"Sets the chunk count.", "void", "setChunkCount", (ins "int64_t":$chunks),
      [{}], [{
        $_op.setChunksAttr(::mlir::IntegerAttr::get(
            ::mlir::IntegerType::get($_op.getContext(), 64), chunks));
      }]>,
    InterfaceMethod<"Stream, priority and issue order; null before scheduling.",
      "::zen::ScheduleAttr", "getScheduleOrNull", (ins), [{}],
      [{ return $_op.getScheduleAttr(); }]>,
    InterfaceMethod<"Sets the schedule.", "void", "setSchedule", (ins "::zen::ScheduleAttr":$schedule),
      [{}], [{ $_op.setScheduleAttr(schedule); }]>,
    InterfaceMethod<"The gradient bucket the collective synchronises, if any.",
      "std::optional<int64_t>", "getBucketId", (ins), [{}], [{
        if (auto bucket = $_op.getBucketAttr())
          return bucket.getInt();
        return std::nullopt;
      }]>,
    InterfaceMethod<"Sets the gradient bucket.", "void", "setBucketId", (ins "int64_t":$bucket),
      [{}], [{
        $_op.setBucketAttr(::mlir::IntegerAttr::get(
            ::mlir::IntegerType::get($_op.getContext(), 64), bucket));
      }]>
  ];
}

def Zen_MoeOpInterface : OpInterface<"MoeOpInterface"> {
  let cppNamespace = "::zen";
  let description = [{
    An op of a Mixture-of-Experts layer (zen.moe_dispatch, zen.moe_experts,
    zen.moe_combine): forward work with its cost, read by the planner like a
    forward `zen.compute`.
  }];
  let methods = [
    InterfaceMethod<"FLOPs of the op (2 per multiply-accumulate).", "int64_t",
      "getWorkFlops", (ins), [{}], [{ return $_op.getFlopsAttr().getInt(); }]>,
    InterfaceMethod<"Bytes the op reads and writes.", "int64_t",
      "getWorkBytes", (ins), [{}], [{ return $_op.getBytesAttr().getInt(); }]>,
    InterfaceMethod<"The ONNX node the layer came from, if named.", "std::optional<::llvm::StringRef>",
      "getNodeName", (ins), [{}], [{ return $_op.getNode(); }]>
  ];
}

#endif // ZEN_INTERFACES_TD
