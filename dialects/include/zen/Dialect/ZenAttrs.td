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
    /// True when the compressed payload can be summed by an all-reduce
    /// (dense casts and PowerSGD factors); sparse and sign payloads are gathered.
    bool isAllReducible() const;
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

#endif // ZEN_ATTRS_TD
