// zen-assign-pipeline-stages on the toy two-block transformer.
// RUN: zenopt-opt %S/Inputs/toy-transformer.mlir --zen-assign-pipeline-stages=pp=2 --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s
// RUN: zenopt-opt %S/Inputs/toy-transformer.mlir --zen-assign-pipeline-stages=pp=2 --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// One stage: no transfer; stage-layers given explicitly; pp from zen.parallel.
// RUN: zenopt-opt %S/Inputs/toy-transformer.mlir --zen-assign-pipeline-stages="pp=1 stage-layers=2" --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=ONE
// RUN: sed -e 's/^module {/module attributes {zen.parallel = #zen.parallel<tp = 2, pp = 2>} {/' %S/Inputs/toy-transformer.mlir | zenopt-opt --zen-assign-pipeline-stages="stage-layers=1,1" --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// Metadata read on a later stage is recomputed there, not sent: a Shape of block 0's activation
// (a static shape: no data read) feeding block 1's Reshape, and a mask computed from constants.
// RUN: sed -e 's|^\(    %%b0_heads = .*\)$|\1\n    %%shape = zen.compute "Shape" forward(%%b0_qkvb) {node = "b0.attn/Shape", flops = 0 : i64, bytes = 16 : i64} : (tensor<4x24xf32>) -> tensor<2xi64>\n    %%ones = zen.compute "Constant" forward() {node = "ones", flops = 0 : i64, bytes = 4 : i64} : () -> tensor<f32>\n    %%mask = zen.compute "Expand" forward(%%ones, %%shape) {node = "mask", flops = 0 : i64, bytes = 96 : i64} : (tensor<f32>, tensor<2xi64>) -> tensor<4x24xf32>|' -e 's|zen.compute "Reshape" forward(%%b1_qkvb) {\(.*\)} : (tensor<4x24xf32>)|zen.compute "Reshape" forward(%%b1_qkvb, %%shape, %%mask) {\1} : (tensor<4x24xf32>, tensor<2xi64>, tensor<4x24xf32>)|' %S/Inputs/toy-transformer.mlir | zenopt-opt --zen-assign-pipeline-stages=pp=2 --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=RECOMPUTE
// RECOMPUTE-LABEL: func.func @train_step
// RECOMPUTE: %[[SHAPE0:.*]] = zen.compute "Shape" forward(%{{.*}}) {{.*}}stage = 0
// RECOMPUTE: %[[SHAPE1:.*]] = zen.compute "Shape" forward() {{.*}}stage = 1
// RECOMPUTE: %[[ONES1:.*]] = zen.compute "Constant" forward() {{.*}}stage = 1
// RECOMPUTE: %[[MASK1:.*]] = zen.compute "Expand" forward(%[[ONES1]], %[[SHAPE1]]) {{.*}}stage = 1
// RECOMPUTE: zen.compute "Reshape" forward(%{{.*}}, %[[SHAPE1]], %[[MASK1]]) {{.*}}stage = 1
// RECOMPUTE-NOT: zen.send %[[SHAPE0]]

// After tensor parallelism, then planned: the planner ignores the role-marked transfers.
// RUN: zenopt-opt %S/Inputs/toy-transformer.mlir --zen-partition-tensor-parallel=tp=2 --zen-assign-pipeline-stages=pp=2 --zen-autotune=dp=2 --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=COMBINED

// REMARK: remark: pipeline stages: stage 0: blocks 0-0; stage 1: blocks 1-1

// CHECK: module attributes {zen.parallel = #zen.parallel<pp = 2, stage_layers = [1, 1]>}
// CHECK-LABEL: func.func @train_step
// The embedding and block 0 on stage 0, block 1 and the head on stage 1.
// CHECK: [[WTE:%.*]] = zen.param "wte" {stage = 0 : i64}
// CHECK: zen.param "b0.fc2.bias" {stage = 0 : i64}
// CHECK-NEXT: [[LN1:%.*]] = zen.param "b1.ln" {stage = 1 : i64}
// CHECK: zen.param "head.weight" {stage = 1 : i64}
// CHECK: zen.compute "Gather" forward({{.*}}node = "embed/Gather", stage = 0 : i64}
// Forward, the residual stream after block 0 is the one value crossing.
// CHECK: [[X:%.*]] = zen.compute "Add" forward({{.*}}node = "b0.res2/Add", stage = 0 : i64}
// CHECK-NEXT: zen.send [[X]] to 1 {group = #zen.group<size = 2, nodes = 1>, stage = 0 : i64, zen.role = #zen.role<pipeline>} : tensor<4x8xf32>
// CHECK-NEXT: [[XIN:%.*]] = zen.recv from 0 {group = #zen.group<size = 2, nodes = 1>, stage = 1 : i64, zen.role = #zen.role<pipeline>} : tensor<4x8xf32>
// CHECK-NEXT: zen.compute "Mul" forward([[XIN]], [[LN1]]) {{.*}}node = "b1.ln/Mul", stage = 1 : i64}
// CHECK: zen.compute "Add" forward([[XIN]], {{.*}}node = "b1.res1/Add", stage = 1 : i64}
// CHECK: zen.compute "SoftmaxCrossEntropy" forward({{.*}}stage = 1 : i64}
// Backward ops on their forward node's stage, gradients on their parameter's.
// CHECK: zen.compute "SoftmaxCrossEntropyGrad" backward({{.*}}stage = 1 : i64}
// CHECK: zen.gradient {{.*}} {ready_order = 0 : i64, stage = 1 : i64}
// The gradients of the residual stream cross back to stage 0.
// CHECK: [[DRES:%.*]]:2 = zen.compute "AddGrad" backward({{.*}}node = "b1.res1/Add", stage = 1 : i64}
// CHECK-NEXT: zen.send [[DRES]]#0 to 0 {group = #zen.group<size = 2, nodes = 1>, stage = 1 : i64, zen.role = #zen.role<pipeline>} : tensor<4x8xf32>
// CHECK-NEXT: [[DRESIN:%.*]] = zen.recv from 1 {group = #zen.group<size = 2, nodes = 1>, stage = 0 : i64, zen.role = #zen.role<pipeline>} : tensor<4x8xf32>
// CHECK: [[DLN:%.*]]:2 = zen.compute "MulGrad" backward({{.*}}, [[XIN]], [[LN1]]) {{.*}}node = "b1.ln/Mul", stage = 1 : i64}
// CHECK-NEXT: zen.send [[DLN]]#0 to 0
// CHECK-NEXT: [[DLNIN:%.*]] = zen.recv from 1
// CHECK-NEXT: zen.gradient [[LN1]], [[DLN]]#1 {ready_order = 9 : i64, stage = 1 : i64}
// CHECK-NEXT: zen.compute "AddGrad" backward([[DRESIN]], [[DLNIN]]) {{.*}}node = "b0.res2/Add", stage = 0 : i64}
// CHECK: zen.compute "GatherGrad" backward({{.*}}stage = 0 : i64}
// CHECK-NEXT: zen.gradient [[WTE]], {{.*}}stage = 0 : i64}
// CHECK-NOT: zen.send

// ONE: module attributes {zen.parallel = #zen.parallel<>}
// ONE-NOT: zen.send
// ONE: zen.param "head.weight" {stage = 0 : i64}
// ONE-NOT: zen.send

// COMBINED: module attributes {{{.*}}zen.parallel = #zen.parallel<tp = 2, pp = 2, stage_layers = [1, 1]>
// COMBINED: zen.send {{.*}}zen.role = #zen.role<pipeline>
// zen-autotune then plans each stage's gradients on their own: one bucket per
// stage (numbered per stage), never a gradient of the other stage in it, and
// every optimizer step on the stage of its parameter.
// COMBINED: %[[LAST:.*]] = zen.all_reduce avg {{.*}}bucket = 0 : i64{{.*}}stage = 1 : i64, sync = #zen<sync all_reduce>} : tensor<564xf32>
// COMBINED: %[[LAST_SYNCED:.*]]:10 = zen.unpack %[[LAST]] {bucket = 0 : i64, stage = 1 : i64}
// COMBINED: %[[FIRST:.*]] = zen.all_reduce avg {{.*}}bucket = 0 : i64{{.*}}stage = 0 : i64, sync = #zen<sync all_reduce>} : tensor<564xf32>
// COMBINED: %[[FIRST_SYNCED:.*]]:10 = zen.unpack %[[FIRST]] {bucket = 0 : i64, stage = 0 : i64}
// COMBINED: zen.compute "SGD" optimizer({{.*}}, %[[FIRST_SYNCED]]#0) {{.*}}node = "sgd.b0.fc2.bias", stage = 0 : i64}
// COMBINED: zen.compute "SGD" optimizer({{.*}}) {{.*}}node = "sgd.wte", stage = 0 : i64}
// COMBINED: zen.compute "SGD" optimizer({{.*}}, %[[LAST_SYNCED]]#0) {{.*}}node = "sgd.head.weight", stage = 1 : i64}
// COMBINED-NOT: stage = 0
