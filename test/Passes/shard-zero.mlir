// zen-shard-zero on the toy two-block transformer, planned over dp = 2 ranks (one bucket).
// RUN: zenopt-opt %S/Inputs/toy-transformer.mlir --zen-autotune=dp=2 --zen-shard-zero=zero=2 | FileCheck %s --check-prefix=ZERO2
// RUN: zenopt-opt %S/Inputs/toy-transformer.mlir --zen-autotune=dp=2 --zen-shard-zero=zero=3 | FileCheck %s --check-prefix=ZERO3
// RUN: zenopt-opt %S/Inputs/toy-transformer.mlir --zen-autotune=dp=2 --zen-shard-zero=zero=1 | FileCheck %s --check-prefix=ZERO1
// The stage from zen.parallel; a decomposed bucket loses its all-gather.
// RUN: sed -e 's/^module {/module attributes {zen.parallel = #zen.parallel<zero = 2>} {/' %S/Inputs/toy-transformer.mlir | zenopt-opt --zen-insert-grad-sync=dp=2 --zen-fuse-gradients=strategy=ddp --zen-decompose=split=all --zen-shard-zero | FileCheck %s --check-prefix=DECOMPOSED
// The planner reads the sharded buckets back.
// RUN: zenopt-opt %S/Inputs/toy-transformer.mlir --zen-autotune=dp=2 --zen-shard-zero=zero=3 --zen-print-timeline -o /dev/null | FileCheck %s --check-prefix=TIMELINE

// ZERO2: zen.parallel = #zen.parallel<dp = 2, zero = 2>
// ZERO2-LABEL: func.func @train_step
// ZERO2: [[W:%.*]] = zen.param "b0.qkv.weight" : tensor<8x24xf32>
// ZERO2: [[G:%.*]] = zen.gradient [[W]], {{.*}} : tensor<8x24xf32>
// The bucket is laid out rank by rank: 2 x the members' shards (976 of 1952 elements).
// ZERO2: [[PACK:%.*]] = zen.pack {{.*}}[[G]]{{.*}} {bucket = 0 : i64} : {{.*}} -> tensor<1952xf32>
// ZERO2-NEXT: [[SHARD:%.*]] = zen.reduce_scatter avg [[PACK]] {bucket = 0 : i64, group = #zen.group<size = 2, nodes = 1>, schedule = #zen.schedule<stream = 0, priority = 0, order = 0>, sync = #zen<sync reduce_scatter_all_gather>} : tensor<1952xf32> -> tensor<976xf32>
// ZERO2-NEXT: [[PARTS:%.*]]:20 = zen.unpack [[SHARD]] {bucket = 0 : i64} : tensor<976xf32> -> tensor<64xf32>, tensor<4xf32>,
// ZERO2-NOT: zen.all_reduce
// The optimizer step updates the rank's shard: half the work.
// ZERO2: zen.compute "SGD" optimizer([[W]], [[PARTS]]#17) {bytes = 1920 : i64, flops = 288 : i64, node = "sgd.b0.qkv.weight"} : (tensor<8x24xf32>, tensor<96xf32>) -> tensor<96xf32>

// ZERO3: zen.parallel = #zen.parallel<dp = 2, zero = 3>
// ZERO3-LABEL: func.func @train_step
// ZERO3: [[W:%.*]] = zen.param "b0.qkv.weight" : tensor<4x24xf32>
// ZERO3: [[FULL:%.*]] = zen.all_gather [[W]] {group = #zen.group<size = 2, nodes = 1>, zen.prefetch = 1 : i64, zen.role = #zen.role<zero>} : tensor<4x24xf32> -> tensor<8x24xf32>
// ZERO3-NEXT: zen.compute "MatMul" forward({{.*}}, [[FULL]]) {{.*}}node = "b0.qkv/MatMul"
// ZERO3: [[BFULL:%.*]] = zen.all_gather [[W]] {group = #zen.group<size = 2, nodes = 1>, zen.prefetch = 1 : i64, zen.role = #zen.role<zero>} : tensor<4x24xf32> -> tensor<8x24xf32>
// ZERO3-NEXT: [[DW:%.*]]:2 = zen.compute "MatMulGrad" backward({{.*}}, [[BFULL]]) {{.*}}node = "b0.qkv/MatMul"
// The gradient stays whole until it is reduce-scattered.
// ZERO3-NEXT: zen.gradient [[W]], [[DW]]#1 {ready_order = 17 : i64} : tensor<8x24xf32> shard tensor<4x24xf32>
// ZERO3: zen.reduce_scatter avg {{.*}} : tensor<1952xf32> -> tensor<976xf32>
// ZERO3: zen.compute "SGD" optimizer([[W]], {{.*}}) {{.*}} : (tensor<4x24xf32>, tensor<96xf32>) -> tensor<96xf32>

// ZERO1: zen.parallel = #zen.parallel<dp = 2, zero = 1>
// ZERO1: zen.param "b0.qkv.weight" : tensor<8x24xf32>
// ZERO1: zen.all_reduce avg {{.*}} : tensor<1952xf32>
// ZERO1-NOT: zen.reduce_scatter

// DECOMPOSED: zen.parallel = #zen.parallel<dp = 2, zero = 2>
// DECOMPOSED: [[SHARD:%.*]] = zen.reduce_scatter avg {{.*}} : tensor<1952xf32> -> tensor<976xf32>
// DECOMPOSED-NEXT: zen.unpack [[SHARD]] {bucket = 0 : i64} : tensor<976xf32> ->
// DECOMPOSED-NOT: zen.all_gather

// TIMELINE: task fwd.b0.qkv/MatMul
// TIMELINE: task reduce_scatter.b0
// TIMELINE: iteration
