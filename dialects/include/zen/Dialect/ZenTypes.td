//===- ZenTypes.td - zen dialect types -----------------------*- tablegen -*-===//
#ifndef ZEN_TYPES_TD
#define ZEN_TYPES_TD

include "zen/Dialect/ZenAttrs.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

def Zen_CompressedType : TypeDef<Zen_Dialect, "Compressed"> {
  let mnemonic = "compressed";
  let summary = "The wire payload of a compressed dense tensor";
  let description = [{
    The payload that `zen.compress` produces from `original` with `method`.
    Collectives carry it unchanged in type; `zen.decompress` turns it back into
    `original`.

    ```mlir
    !zen.compressed<tensor<1024xf32>, #zen.compression<topk, ratio = 0.01>>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$original,
                        "::zen::CompressionAttr":$method);
  let assemblyFormat = "`<` $original `,` qualified($method) `>`";
  let genVerifyDecl = 1;
}

// RankedTensorOf reads the element type through the ShapedType interface, a lookup per
// operand and result (3% of importing a 10 000-tensor model end to end); these read it
// from the tensor type. Same checks, same messages.
def Zen_Tensor : Type<And<[IsRankedTensorTypePred,
    CPred<"::llvm::isa<::mlir::FloatType>("
          "::llvm::cast<::mlir::RankedTensorType>($_self).getElementType())">]>,
    "ranked tensor of floating-point values", "::mlir::RankedTensorType">;
def Zen_AnyRankedTensor : Type<IsRankedTensorTypePred, "ranked tensor of any type values",
                               "::mlir::RankedTensorType">;
def Zen_Payload : AnyTypeOf<[Zen_Tensor, Zen_CompressedType]>;

#endif // ZEN_TYPES_TD
