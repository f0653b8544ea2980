// Passes reading a plan out of the IR report malformed synchronisation on the offending op.
// RUN: zenopt-opt %s -split-input-file -verify-diagnostics --zen-schedule-overlap

module {
  func.func @train_step(%x: tensor<4xf32>) {
    %w = zen.param "w" : tensor<4xf32>
    %d = zen.compute "MulGrad" backward (%x) {flops = 4 : i64, bytes = 48 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %g = zen.gradient %w, %d {ready_order = 0 : i64} : tensor<4xf32>
    // expected-error @+1 {{gradient of 'w' is used by an op the planner does not know}}
    %y = zen.compute "Mul" forward (%g, %x) {flops = 4 : i64, bytes = 48 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return
  }
}

// -----

module {
  func.func @train_step(%x: tensor<4xf32>) {
    %w = zen.param "w" : tensor<4xf32>
    %d = zen.compute "MulGrad" backward (%x) {flops = 4 : i64, bytes = 48 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %g = zen.gradient %w, %d {ready_order = 0 : i64} : tensor<4xf32>
    %b = zen.pack %g : tensor<4xf32> -> tensor<4xf32>
    %r = zen.all_reduce avg %b {group = #zen.group<size = 8, nodes = 1>} : tensor<4xf32>
    // expected-error @+1 {{malformed gradient synchronisation: expected a zen.unpack closing the bucket}}
    %s = zen.compute "SGD" optimizer (%w, %r) {flops = 12 : i64, bytes = 80 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return
  }
}
