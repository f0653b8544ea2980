//===- ZenMoeOps.td - Mixture-of-Experts operations ----------*- tablegen -*-===//
//
// A Mixture-of-Experts layer is three forward ops: zen.moe_dispatch routes
// every token to its top-k experts and packs each expert's tokens into a
// buffer of `capacity` rows; zen.moe_experts runs every expert's two-layer
// MLP on its buffer; zen.moe_combine sums each token's expert outputs weighted
// by its gates. Under expert parallelism the dispatched and expert-output
// buffers are what the two all-to-alls move. Included from ZenOps.td.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_MOE_OPS_TD
#define ZEN_MOE_OPS_TD

def Zen_MoeActivationAttr : I32EnumAttr<"MoeActivation", "activation inside each expert", [
    I32EnumAttrCase<"relu", 0>,
    I32EnumAttrCase<"gelu", 1>,
    I32EnumAttrCase<"silu", 2>,
    I32EnumAttrCase<"swiglu", 3>,
    I32EnumAttrCase<"identity", 4>]> {
  let cppNamespace = "::zen";
}

// What every MoE op carries besides its operands: its forward cost, the ONNX
// node of the layer and, once planned, the layer's schedule (its degrees must
// divide the capacity rows into equal pieces, and ep must divide the experts).
class Zen_MoeOp<string mnemonic, list<Trait> traits = []>
    : Zen_Op<mnemonic, !listconcat(traits, [Zen_MoeOpInterface])> {
  dag moeArgs = (ins I64Attr:$flops, I64Attr:$bytes, OptionalAttr<StrAttr>:$node,
                     OptionalAttr<Zen_MoeScheduleAttr>:$schedule);
}

def Zen_MoeDispatchOp : Zen_MoeOp<"moe_dispatch"> {
  let summary = "Routes tokens to their top-k experts (MoE dispatch)";
  let description = [{
    `router` holds each token's logits over the experts. Every token goes to
    the `k` experts with the largest softmax probability; each expert's tokens
    fill its rows of `dispatched` (`[experts, capacity, hidden]`) in token
    order, and tokens beyond an expert's capacity are dropped. `gates` holds
    each token's k routing weights, which zen.moe_combine applies. `input` is
    `[tokens, hidden]` or `[batch, sequence, hidden]`.

    ```mlir
    %d, %g = zen.moe_dispatch %x, %logits top 2 {flops = 5120 : i64, bytes = 90112 : i64, node = "blocks.1.moe"}
        : tensor<128x64xf32>, tensor<128x8xf32> -> tensor<8x40x64xf32>, tensor<128x2xf32>
    ```
  }];
  let arguments = !con((ins Zen_Tensor:$input, Zen_Tensor:$router, I64Attr:$k), moeArgs);
  let results = (outs Zen_Tensor:$dispatched, Zen_Tensor:$gates);
  let assemblyFormat = [{
    $input `,` $router `top` $k attr-dict `:` type($input) `,` type($router) `->`
    type($dispatched) `,` type($gates)
  }];
}

def Zen_MoeExpertsOp : Zen_MoeOp<"moe_experts", [AttrSizedOperandSegments]> {
  let summary = "Every expert's MLP on its dispatched tokens (MoE expert compute)";
  let description = [{
    For each expert e: `act(dispatched[e] x fc1_weight[e]^T + fc1_bias[e])
    x fc2_weight[e]^T + fc2_bias[e]`; gated experts kept as three weights
    (SwiGLU as Mixtral's w1, w3, w2) multiply the activated first GEMM by a
    linear one, `fc3_weight`: `(act(dispatched[e] x fc1_weight[e]^T +
    fc1_bias[e]) * (dispatched[e] x fc3_weight[e]^T + fc3_bias[e])) x
    fc2_weight[e]^T + fc2_bias[e]`. The weights follow ONNX Runtime's
    com.microsoft MoE layouts. The current one is `[out, in]` per expert:
    `fc1_weight` is `[experts, rows, hidden]` with rows = ffn (2 x ffn for
    `swiglu` without `fc3_weight`, the gate and linear halves fused),
    `fc2_weight` is `[experts, hidden, ffn]`, `fc3_weight` `[experts, ffn,
    hidden]`. Earlier releases keep every weight `[in, out]`: `[experts, hidden,
    rows]`, `[experts, ffn, hidden]`, `[experts, hidden, ffn]`; the verifier
    takes whichever layout all the weights fit. The biases are optional. The
    result has the type of `dispatched`.

    ```mlir
    %e = zen.moe_experts gelu %d, %w1 bias %b1, %w2 bias %b2 {flops = 20971520 : i64, bytes = 1409024 : i64}
        : (tensor<8x40x64xf32>, tensor<8x256x64xf32>, tensor<8x256xf32>, tensor<8x64x256xf32>,
           tensor<8x64xf32>) -> tensor<8x40x64xf32>
    %s = zen.moe_experts silu %d, %w1, %w2, fc3 %w3 {flops = 31457280 : i64, bytes = 1736704 : i64}
        : (tensor<8x40x64xf32>, tensor<8x256x64xf32>, tensor<8x64x256xf32>,
           tensor<8x256x64xf32>) -> tensor<8x40x64xf32>
    ```
  }];
  let arguments = !con((ins Zen_MoeActivationAttr:$activation, Zen_Tensor:$dispatched,
                            Zen_Tensor:$fc1_weight, Optional<Zen_Tensor>:$fc1_bias,
                            Zen_Tensor:$fc2_weight, Optional<Zen_Tensor>:$fc2_bias,
                            Optional<Zen_Tensor>:$fc3_weight, Optional<Zen_Tensor>:$fc3_bias),
                       moeArgs);
  let results = (outs Zen_Tensor:$result);
  let assemblyFormat = [{
    $activation $dispatched `,` $fc1_weight (`bias` $fc1_bias^)? `,` $fc2_weight
    (`bias` $fc2_bias^)? (`,` `fc3` $fc3_weight^)? (`fc3_bias` $fc3_bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Zen_MoeCombineOp : Zen_MoeOp<"moe_combine"> {
  let summary = "Sums each token's expert outputs by its gates (MoE combine)";
  let description = [{
    The inverse of zen.moe_dispatch: every token's rows of `expert_output`
    (`[experts, capacity, hidden]`), weighted by its `gates` (`[tokens, k]`),
    summed into the token's row of the result (`[tokens, hidden]` or the
    dispatch input's `[batch, sequence, hidden]`). A dropped token gets zero.

    ```mlir
    %y = zen.moe_combine %e, %g {flops = 32768 : i64, bytes = 115712 : i64}
        : tensor<8x40x64xf32>, tensor<128x2xf32> -> tensor<128x64xf32>
    ```
  }];
  let arguments = !con((ins Zen_Tensor:$expert_output, Zen_Tensor:$gates), moeArgs);
  let results = (outs Zen_Tensor:$result);
  let assemblyFormat = [{
    $expert_output `,` $gates attr-dict `:` type($expert_output) `,` type($gates) `->`
    type($result)
  }];
}

#endif // ZEN_MOE_OPS_TD
