// The compute priced from the job's own timing (zen.measured_compute, zenopt
// --measured-compute): forward segments start where their parameter is first read,
// backward segments end where their gradient is ready, at the measured times.
// RUN: zenopt-opt %s -split-input-file --zen-print-timeline -o /dev/null | FileCheck %s

// Every point measured: forward 900 us, fc2 first read at 500, fc3 at 850; backward
// 1800 us, fc3's gradient ready at 100, fc2's at 1000 (relu1 and fc1 take the rest).
// CHECK-LABEL: task fwd.fc1 start 0.000 end 500.000
// CHECK-NEXT: task fwd.fc2 start 500.000 end 850.000
// CHECK-NEXT: task fwd.fc3 start 850.000 end 900.000
// CHECK-NEXT: task bwd.fc3 start 900.000 end 1000.000
// CHECK-NEXT: task bwd.fc2 start 1000.000 end 1900.000
// CHECK-NEXT: task bwd.relu1 start 1900.000 end 2700.000
// CHECK-NEXT: iteration 2700.000 compute 2700.000
module attributes {zen.measured_compute = #zen.measured_compute<forward_us = 900.0 : f64, backward_us = 1800.0 : f64, optimizer_us = 0.0 : f64, first_read_us = {"fc1.weight" = 0.0 : f64, "fc2.weight" = 500.0 : f64, "fc3.weight" = 850.0 : f64}, ready_us = {"fc1.weight" = 1800.0 : f64, "fc2.weight" = 1000.0 : f64, "fc3.weight" = 100.0 : f64}, method = "hand-written">} {
  func.func @train_step(%arg0: tensor<8x1024xf32>) {
    %w0 = zen.param "fc1.weight" : tensor<1024x1024xf32>
    %w1 = zen.param "fc2.weight" : tensor<1024x1024xf32>
    %w2 = zen.param "fc3.weight" : tensor<1024x16xf32>
    %h0 = zen.compute "MatMul" forward (%arg0, %w0) {node = "fc1", flops = 16777216 : i64, bytes = 4227072 : i64} : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %a0 = zen.compute "Relu" forward (%h0) {node = "relu1", flops = 8192 : i64, bytes = 65536 : i64} : (tensor<8x1024xf32>) -> tensor<8x1024xf32>
    %h1 = zen.compute "MatMul" forward (%a0, %w1) {node = "fc2", flops = 16777216 : i64, bytes = 4227072 : i64} : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %o = zen.compute "MatMul" forward (%h1, %w2) {node = "fc3", flops = 262144 : i64, bytes = 98816 : i64} : (tensor<8x1024xf32>, tensor<1024x16xf32>) -> tensor<8x16xf32>
    %d2:2 = zen.compute "MatMulGrad" backward (%o, %h1, %w2) {node = "fc3", flops = 524288 : i64, bytes = 197632 : i64} : (tensor<8x16xf32>, tensor<8x1024xf32>, tensor<1024x16xf32>) -> (tensor<8x1024xf32>, tensor<1024x16xf32>)
    %g2 = zen.gradient %w2, %d2#1 {ready_order = 0 : i64} : tensor<1024x16xf32>
    %d1:2 = zen.compute "MatMulGrad" backward (%d2#0, %a0, %w1) {node = "fc2", flops = 33554432 : i64, bytes = 8454144 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024x1024xf32>) -> (tensor<8x1024xf32>, tensor<1024x1024xf32>)
    %g1 = zen.gradient %w1, %d1#1 {ready_order = 1 : i64} : tensor<1024x1024xf32>
    %r = zen.compute "ReluGrad" backward (%d1#0, %h0) {node = "relu1", flops = 8192 : i64, bytes = 98304 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>) -> tensor<8x1024xf32>
    %d0:2 = zen.compute "MatMulGrad" backward (%r, %arg0, %w0) {node = "fc1", flops = 33554432 : i64, bytes = 8454144 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024x1024xf32>) -> (tensor<8x1024xf32>, tensor<1024x1024xf32>)
    %g0 = zen.gradient %w0, %d0#1 {ready_order = 2 : i64} : tensor<1024x1024xf32>
    return
  }
}

// -----

// Unmeasured points: the forward is split as the IR prices it (fc1 2.632, fc2 2.591,
// fc3 0.061 of 5.284); after fc3's gradient the rest of backward goes to fc2 and relu1
// in proportion to their IR prices (5.182 : 5.244).
// CHECK-LABEL: task fwd.fc1 start 0.000 end 448.
// CHECK-NEXT: task fwd.fc2 start 448.{{[0-9]+}} end 889.
// CHECK-NEXT: task fwd.fc3 start 889.{{[0-9]+}} end 900.000
// CHECK-NEXT: task bwd.fc3 start 900.000 end 1000.000
// CHECK-NEXT: task bwd.fc2 start 1000.000 end 1845.
// CHECK-NEXT: task bwd.relu1 start 1845.{{[0-9]+}} end 2700.000
// CHECK-NEXT: iteration 2700.000
module attributes {zen.measured_compute = #zen.measured_compute<forward_us = 900.0 : f64, backward_us = 1800.0 : f64, optimizer_us = 0.0 : f64, first_read_us = {}, ready_us = {"fc3.weight" = 100.0 : f64}, method = "hand-written">} {
  func.func @train_step(%arg0: tensor<8x1024xf32>) {
    %w0 = zen.param "fc1.weight" : tensor<1024x1024xf32>
    %w1 = zen.param "fc2.weight" : tensor<1024x1024xf32>
    %w2 = zen.param "fc3.weight" : tensor<1024x16xf32>
    %h0 = zen.compute "MatMul" forward (%arg0, %w0) {node = "fc1", flops = 16777216 : i64, bytes = 4227072 : i64} : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %a0 = zen.compute "Relu" forward (%h0) {node = "relu1", flops = 8192 : i64, bytes = 65536 : i64} : (tensor<8x1024xf32>) -> tensor<8x1024xf32>
    %h1 = zen.compute "MatMul" forward (%a0, %w1) {node = "fc2", flops = 16777216 : i64, bytes = 4227072 : i64} : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %o = zen.compute "MatMul" forward (%h1, %w2) {node = "fc3", flops = 262144 : i64, bytes = 98816 : i64} : (tensor<8x1024xf32>, tensor<1024x16xf32>) -> tensor<8x16xf32>
    %d2:2 = zen.compute "MatMulGrad" backward (%o, %h1, %w2) {node = "fc3", flops = 524288 : i64, bytes = 197632 : i64} : (tensor<8x16xf32>, tensor<8x1024xf32>, tensor<1024x16xf32>) -> (tensor<8x1024xf32>, tensor<1024x16xf32>)
    %g2 = zen.gradient %w2, %d2#1 {ready_order = 0 : i64} : tensor<1024x16xf32>
    %d1:2 = zen.compute "MatMulGrad" backward (%d2#0, %a0, %w1) {node = "fc2", flops = 33554432 : i64, bytes = 8454144 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024x1024xf32>) -> (tensor<8x1024xf32>, tensor<1024x1024xf32>)
    %g1 = zen.gradient %w1, %d1#1 {ready_order = 1 : i64} : tensor<1024x1024xf32>
    %r = zen.compute "ReluGrad" backward (%d1#0, %h0) {node = "relu1", flops = 8192 : i64, bytes = 98304 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>) -> tensor<8x1024xf32>
    %d0:2 = zen.compute "MatMulGrad" backward (%r, %arg0, %w0) {node = "fc1", flops = 33554432 : i64, bytes = 8454144 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024x1024xf32>) -> (tensor<8x1024xf32>, tensor<1024x1024xf32>)
    %g0 = zen.gradient %w0, %d0#1 {ready_order = 2 : i64} : tensor<1024x1024xf32>
    return
  }
}

// -----

// Points out of order (fc2's gradient measured before fc3's, fc3 first read before fc2)
// are held at the latest point before them: those segments take no time.
// CHECK-LABEL: task fwd.fc1 start 0.000 end 500.000
// CHECK-NEXT: task fwd.fc2 start 500.000 end 500.000
// CHECK-NEXT: task fwd.fc3 start 500.000 end 900.000
// CHECK-NEXT: task bwd.fc3 start 900.000 end 1000.000
// CHECK-NEXT: task bwd.fc2 start 1000.000 end 1000.000
// CHECK-NEXT: task bwd.relu1 start 1000.000 end 2700.000
module attributes {zen.measured_compute = #zen.measured_compute<forward_us = 900.0 : f64, backward_us = 1800.0 : f64, optimizer_us = 0.0 : f64, first_read_us = {"fc2.weight" = 500.0 : f64, "fc3.weight" = 400.0 : f64}, ready_us = {"fc2.weight" = 50.0 : f64, "fc3.weight" = 100.0 : f64}, method = "hand-written">} {
  func.func @train_step(%arg0: tensor<8x1024xf32>) {
    %w0 = zen.param "fc1.weight" : tensor<1024x1024xf32>
    %w1 = zen.param "fc2.weight" : tensor<1024x1024xf32>
    %w2 = zen.param "fc3.weight" : tensor<1024x16xf32>
    %h0 = zen.compute "MatMul" forward (%arg0, %w0) {node = "fc1", flops = 16777216 : i64, bytes = 4227072 : i64} : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %a0 = zen.compute "Relu" forward (%h0) {node = "relu1", flops = 8192 : i64, bytes = 65536 : i64} : (tensor<8x1024xf32>) -> tensor<8x1024xf32>
    %h1 = zen.compute "MatMul" forward (%a0, %w1) {node = "fc2", flops = 16777216 : i64, bytes = 4227072 : i64} : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %o = zen.compute "MatMul" forward (%h1, %w2) {node = "fc3", flops = 262144 : i64, bytes = 98816 : i64} : (tensor<8x1024xf32>, tensor<1024x16xf32>) -> tensor<8x16xf32>
    %d2:2 = zen.compute "MatMulGrad" backward (%o, %h1, %w2) {node = "fc3", flops = 524288 : i64, bytes = 197632 : i64} : (tensor<8x16xf32>, tensor<8x1024xf32>, tensor<1024x16xf32>) -> (tensor<8x1024xf32>, tensor<1024x16xf32>)
    %g2 = zen.gradient %w2, %d2#1 {ready_order = 0 : i64} : tensor<1024x16xf32>
    %d1:2 = zen.compute "MatMulGrad" backward (%d2#0, %a0, %w1) {node = "fc2", flops = 33554432 : i64, bytes = 8454144 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024x1024xf32>) -> (tensor<8x1024xf32>, tensor<1024x1024xf32>)
    %g1 = zen.gradient %w1, %d1#1 {ready_order = 1 : i64} : tensor<1024x1024xf32>
    %r = zen.compute "ReluGrad" backward (%d1#0, %h0) {node = "relu1", flops = 8192 : i64, bytes = 98304 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>) -> tensor<8x1024xf32>
    %d0:2 = zen.compute "MatMulGrad" backward (%r, %arg0, %w0) {node = "fc1", flops = 33554432 : i64, bytes = 8454144 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024x1024xf32>) -> (tensor<8x1024xf32>, tensor<1024x1024xf32>)
    %g0 = zen.gradient %w0, %d0#1 {ready_order = 2 : i64} : tensor<1024x1024xf32>
    return
  }
}
