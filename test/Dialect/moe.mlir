// RUN: zenopt-opt %s | FileCheck %s
// Round trip of the MoE ops, printed and generic forms.
// RUN: zenopt-opt %s | zenopt-opt | FileCheck %s
// RUN: zenopt-opt -mlir-print-op-generic %s | zenopt-opt | FileCheck %s

// CHECK-LABEL: func.func @moe_layer
// CHECK-SAME: (%[[X:.*]]: tensor<16x8xf32>, %[[R:.*]]: tensor<16x4xf32>)
func.func @moe_layer(%x: tensor<16x8xf32>, %r: tensor<16x4xf32>) -> tensor<16x8xf32> {
  // CHECK: %[[W1:.*]] = zen.param "moe.fc1.weight" : tensor<4x32x8xf32>
  %w1 = zen.param "moe.fc1.weight" : tensor<4x32x8xf32>
  // CHECK: %[[B1:.*]] = zen.param "moe.fc1.bias" : tensor<4x32xf32>
  %b1 = zen.param "moe.fc1.bias" : tensor<4x32xf32>
  // CHECK: %[[W2:.*]] = zen.param "moe.fc2.weight" : tensor<4x8x32xf32>
  %w2 = zen.param "moe.fc2.weight" : tensor<4x8x32xf32>
  // CHECK: %[[D:.*]], %[[G:.*]] = zen.moe_dispatch %[[X]], %[[R]] top 2 {bytes = 1792 : i64, flops = 448 : i64, node = "moe"} : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x2xf32>
  %d, %g = zen.moe_dispatch %x, %r top 2 {flops = 448 : i64, bytes = 1792 : i64, node = "moe"}
      : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x2xf32>
  // The second bias is optional.
  // CHECK: %[[E:.*]] = zen.moe_experts gelu %[[D]], %[[W1]] bias %[[B1]], %[[W2]] {bytes = 20480 : i64, flops = 66560 : i64} : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x32xf32>, tensor<4x8x32xf32>) -> tensor<4x8x8xf32>
  %e = zen.moe_experts gelu %d, %w1 bias %b1, %w2 {flops = 66560 : i64, bytes = 20480 : i64}
      : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x32xf32>, tensor<4x8x32xf32>) -> tensor<4x8x8xf32>
  // CHECK: %[[Y:.*]] = zen.moe_combine %[[E]], %[[G]] {bytes = 1664 : i64, flops = 512 : i64} : tensor<4x8x8xf32>, tensor<16x2xf32> -> tensor<16x8xf32>
  %y = zen.moe_combine %e, %g {flops = 512 : i64, bytes = 1664 : i64}
      : tensor<4x8x8xf32>, tensor<16x2xf32> -> tensor<16x8xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<16x8xf32>
}

// SwiGLU's first weight holds two ffn-sized halves; a 3-D input keeps its shape through
// the layer.
// CHECK-LABEL: func.func @swiglu_3d
func.func @swiglu_3d(%x: tensor<2x8x8xf32>, %r: tensor<16x4xf32>, %w1: tensor<4x64x8xf32>,
                     %w2: tensor<4x8x32xf32>) -> tensor<2x8x8xf32> {
  // CHECK: zen.moe_dispatch {{.*}} top 1 {{.*}} : tensor<2x8x8xf32>, tensor<16x4xf32> -> tensor<4x4x8xf32>, tensor<16x1xf32>
  %d, %g = zen.moe_dispatch %x, %r top 1 {flops = 0 : i64, bytes = 0 : i64}
      : tensor<2x8x8xf32>, tensor<16x4xf32> -> tensor<4x4x8xf32>, tensor<16x1xf32>
  // CHECK: zen.moe_experts swiglu
  %e = zen.moe_experts swiglu %d, %w1, %w2 {flops = 0 : i64, bytes = 0 : i64}
      : (tensor<4x4x8xf32>, tensor<4x64x8xf32>, tensor<4x8x32xf32>) -> tensor<4x4x8xf32>
  // CHECK: zen.moe_combine {{.*}} -> tensor<2x8x8xf32>
  %y = zen.moe_combine %e, %g {flops = 0 : i64, bytes = 0 : i64}
      : tensor<4x4x8xf32>, tensor<16x1xf32> -> tensor<2x8x8xf32>
  return %y : tensor<2x8x8xf32>
}

// Gated experts kept as three weights (fc3 the linear half), in ONNX Runtime's current
// [experts, out, in] layout and in its earlier releases' [experts, in, out] one, biases on
// fc1 and fc3.
// CHECK-LABEL: func.func @gated_layouts
func.func @gated_layouts(%d: tensor<4x8x8xf32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x8x32xf32>,
                         %w3: tensor<4x32x8xf32>, %b3: tensor<4x32xf32>, %v1: tensor<4x8x32xf32>,
                         %b1: tensor<4x32xf32>, %v2: tensor<4x32x8xf32>, %v3: tensor<4x8x32xf32>)
    -> (tensor<4x8x8xf32>, tensor<4x8x8xf32>) {
  // CHECK: zen.moe_experts silu %{{.*}}, %{{.*}}, %{{.*}}, fc3 %{{.*}} fc3_bias %{{.*}} {bytes = 0 : i64, flops = 0 : i64} : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>, tensor<4x32x8xf32>, tensor<4x32xf32>) -> tensor<4x8x8xf32>
  %e = zen.moe_experts silu %d, %w1, %w2, fc3 %w3 fc3_bias %b3 {flops = 0 : i64, bytes = 0 : i64}
      : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>, tensor<4x32x8xf32>, tensor<4x32xf32>) -> tensor<4x8x8xf32>
  // CHECK: zen.moe_experts swiglu %{{.*}}, %{{.*}} bias %{{.*}}, %{{.*}}, fc3 %{{.*}} {bytes = 0 : i64, flops = 0 : i64} : (tensor<4x8x8xf32>, tensor<4x8x32xf32>, tensor<4x32xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>) -> tensor<4x8x8xf32>
  %f = zen.moe_experts swiglu %d, %v1 bias %b1, %v2, fc3 %v3 {flops = 0 : i64, bytes = 0 : i64}
      : (tensor<4x8x8xf32>, tensor<4x8x32xf32>, tensor<4x32xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>) -> tensor<4x8x8xf32>
  return %e, %f : tensor<4x8x8xf32>, tensor<4x8x8xf32>
}

// A planned layer: every op carries the layer's #zen.moe_schedule.
// CHECK-LABEL: func.func @planned
// CHECK-SAME: (%[[X:.*]]: tensor<16x8xf32>, %[[R:.*]]: tensor<16x4xf32>, %[[W1:.*]]: tensor<4x32x8xf32>, %[[W2:.*]]: tensor<4x8x32xf32>)
func.func @planned(%x: tensor<16x8xf32>, %r: tensor<16x4xf32>, %w1: tensor<4x32x8xf32>,
                   %w2: tensor<4x8x32xf32>) -> tensor<16x8xf32> {
  // CHECK: %[[D:.*]], %[[G:.*]] = zen.moe_dispatch %[[X]], %[[R]] top 2 {{.*}}schedule = #zen.moe_schedule<ep = 2, forward = 4, backward = 2, all_to_all = "2d">}
  %d, %g = zen.moe_dispatch %x, %r top 2 {flops = 0 : i64, bytes = 0 : i64, schedule = #zen.moe_schedule<ep = 2, forward = 4, backward = 2, all_to_all = "2d">}
      : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x2xf32>
  // CHECK: %[[E:.*]] = zen.moe_experts relu %[[D]], %[[W1]], %[[W2]] {{.*}}schedule = #zen.moe_schedule<ep = 2, forward = 4, backward = 2, all_to_all = "2d">}
  %e = zen.moe_experts relu %d, %w1, %w2 {flops = 0 : i64, bytes = 0 : i64, schedule = #zen.moe_schedule<ep = 2, forward = 4, backward = 2, all_to_all = "2d">}
      : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>) -> tensor<4x8x8xf32>
  // CHECK: zen.moe_combine %[[E]], %[[G]] {{.*}}schedule = #zen.moe_schedule<ep = 2, forward = 4, backward = 2, all_to_all = "2d">}
  %y = zen.moe_combine %e, %g {flops = 0 : i64, bytes = 0 : i64, schedule = #zen.moe_schedule<ep = 2, forward = 4, backward = 2, all_to_all = "2d">}
      : tensor<4x8x8xf32>, tensor<16x2xf32> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// The tokens' compression and the gradient sync mode round-trip; "none" and
// "concurrent", the defaults, are left out.
// CHECK-LABEL: func.func @compressed
// CHECK-SAME: (%[[X:.*]]: tensor<16x8xf32>, %[[R:.*]]: tensor<16x4xf32>)
func.func @compressed(%x: tensor<16x8xf32>, %r: tensor<16x4xf32>) -> tensor<4x8x8xf32> {
  // CHECK: %[[D:.*]], %{{.*}} = zen.moe_dispatch %[[X]], %[[R]] top 2 {{.*}}schedule = #zen.moe_schedule<ep = 2, forward = 4, backward = 2, all_to_all = "flat", tokens = "int8">}
  %d, %g = zen.moe_dispatch %x, %r top 2 {flops = 0 : i64, bytes = 0 : i64, schedule = #zen.moe_schedule<ep = 2, forward = 4, backward = 2, all_to_all = "flat", tokens = "int8">}
      : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x2xf32>
  // CHECK: zen.moe_dispatch %[[X]], %[[R]] top 2 {{.*}}schedule = #zen.moe_schedule<ep = 2, forward = 1, backward = 1, all_to_all = "2d">}
  %d2, %g2 = zen.moe_dispatch %x, %r top 2 {flops = 0 : i64, bytes = 0 : i64, schedule = #zen.moe_schedule<ep = 2, forward = 1, backward = 1, all_to_all = "2d", tokens = "none", gradient_sync = "concurrent">}
      : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x2xf32>
  // CHECK: zen.moe_dispatch %[[X]], %[[R]] top 2 {{.*}}schedule = #zen.moe_schedule<ep = 2, forward = 2, backward = 2, all_to_all = "flat", gradient_sync = "serial">}
  %d3, %g3 = zen.moe_dispatch %x, %r top 2 {flops = 0 : i64, bytes = 0 : i64, schedule = #zen.moe_schedule<ep = 2, forward = 2, backward = 2, all_to_all = "flat", gradient_sync = "serial">}
      : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x2xf32>
  // CHECK: return %[[D]]
  return %d : tensor<4x8x8xf32>
}
