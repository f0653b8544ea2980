//===- ServingTest.cpp - inference serving costs ---------------------------===//
#include "zen/CostModel/Serving.h"

#include <gtest/gtest.h>

#include <cmath>

namespace zen::cost {
namespace {

/// Llama-2-70B's shape (80 blocks, hidden 8192, 64 heads, 8 key/value heads, SwiGLU 28672).
TransformerShape llama70b() {
  TransformerShape shape;
  shape.family = "gpt";
  shape.layers = 80;
  shape.hidden = 8192;
  shape.heads = 64;
  shape.kvHeads = 8;
  shape.ffn = 28672;
  shape.mlp = "swiglu";
  shape.norm = "rmsnorm";
  shape.positions = "rotary";
  shape.seq = 4096;
  shape.vocab = 32000;
  const double h = 8192, kvWidth = 8 * 128;
  shape.layerParams = h * h * 2 + 2 * h * kvWidth + 3 * h * 28672 + 2 * h;
  shape.embeddingParams = 32000 * h;
  shape.headParams = 32000 * h + h;
  return shape;
}

CostModel node(const char *preset) { return CostModel(withNodes(loadCluster(preset), 1)); }

TEST(ServingAllReduce, PeerMemoryWinsSmallMessagesAndNcclLargeOnes) {
  const CostModel model = node("a100x8");
  const AllReduceChoice small = tensorParallelAllReduce(model, 512, 8, AllReducePolicy::Best);
  EXPECT_EQ(small.kernel, AllReduceKernel::OneShot);
  EXPECT_LT(small.oneShotUs, small.ncclUs);
  const AllReduceChoice large = tensorParallelAllReduce(model, 64e6, 8, AllReducePolicy::Best);
  EXPECT_EQ(large.kernel, AllReduceKernel::Nccl);  // past the 8 MiB peer buffer
  EXPECT_TRUE(std::isinf(large.oneShotUs));
  // Between them two-shot reads 2/8 of what one-shot reads.
  const AllReduceChoice medium = tensorParallelAllReduce(model, 4e6, 8, AllReducePolicy::Best);
  EXPECT_EQ(medium.kernel, AllReduceKernel::TwoShot);
  EXPECT_LT(medium.twoShotUs, medium.oneShotUs);
}

TEST(ServingAllReduce, VllmRulesAndNcclOnly) {
  const CostModel model = node("a100x8");
  auto vllm = [&](double bytes, int64_t tp) {
    return tensorParallelAllReduce(model, bytes, tp, AllReducePolicy::Vllm).kernel;
  };
  EXPECT_EQ(vllm(200e3, 8), AllReduceKernel::OneShot);   // below 256 KiB on 8
  EXPECT_EQ(vllm(300e3, 8), AllReduceKernel::TwoShot);
  EXPECT_EQ(vllm(300e3, 4), AllReduceKernel::OneShot);   // below 512 KiB on up to 4
  EXPECT_EQ(vllm(4e6, 2), AllReduceKernel::OneShot);     // always one-shot on 2
  EXPECT_EQ(vllm(9e6, 8), AllReduceKernel::Nccl);        // 8 MiB and above
  const AllReduceChoice nccl = tensorParallelAllReduce(model, 512, 8, AllReducePolicy::NcclOnly);
  EXPECT_EQ(nccl.kernel, AllReduceKernel::Nccl);
  EXPECT_EQ(nccl.us, nccl.ncclUs);
  // Without NVLink (MPI over shared memory) only NCCL's path prices.
  const CostModel cpu(loadCluster("cpu-local"));
  const AllReduceChoice shm = tensorParallelAllReduce(cpu, 512, 2, AllReducePolicy::Best);
  EXPECT_EQ(shm.kernel, AllReduceKernel::Nccl);
  EXPECT_TRUE(std::isinf(shm.oneShotUs));
}

TEST(ServingDecode, OneRequestReadsTheWeightsOnce) {
  const CostModel model = node("a100x8");
  const TransformerShape shape = llama70b();
  ServingWorkload workload;
  const PhaseTime step = decodeStepTime(shape, {8, 1}, 1, 1024, workload, model, AllReducePolicy::Best);
  // Memory-bound: the rank's bf16 weights (but the embedding, of which a step reads one row
  // a token) through HBM at the preset's achievable bandwidth.
  const GpuSpec &gpu = model.cluster().gpu;
  const double weights = (shape.totalParams() - shape.embeddingParams) / 8 * 2;
  const double hbmUs = weights / (gpu.hbmBandwidthGBps * gpu.memoryEfficiency * 1e3);
  EXPECT_GT(step.computeUs, 0.99 * hbmUs);
  EXPECT_LT(step.computeUs, 1.25 * hbmUs);
  EXPECT_GT(step.allReduceUs, 0);
  // A larger batch or a longer cache costs more, far less than proportionally.
  const PhaseTime batch64 = decodeStepTime(shape, {8, 1}, 64, 1024, workload, model, AllReducePolicy::Best);
  EXPECT_GT(batch64.totalUs(), step.totalUs());
  EXPECT_LT(batch64.totalUs(), 8 * step.totalUs());
  EXPECT_GT(decodeStepTime(shape, {8, 1}, 64, 4096, workload, model, AllReducePolicy::Best).computeUs,
            batch64.computeUs);
}

TEST(ServingPrefill, ChunksOnlyWithTensorParallelism) {
  const CostModel model = node("a100x8");
  ServingWorkload workload;
  workload.promptTokens = 2048;
  EXPECT_EQ(prefillTime(llama70b(), {1, 1}, workload, model, AllReducePolicy::Best).chunks, 1);
  const PhaseTime tp8 = prefillTime(llama70b(), {8, 1}, workload, model, AllReducePolicy::Best);
  const PhaseTime tp8Nccl = prefillTime(llama70b(), {8, 1}, workload, model, AllReducePolicy::NcclOnly);
  EXPECT_GT(tp8.chunks, 1);  // 32 MiB all-reduces hide behind the next chunk's GEMMs
  EXPECT_LE(tp8.totalUs(), tp8Nccl.totalUs());
  // Compute-bound: 2 x parameters x tokens FLOPs over the 8 GPUs, within the GEMM efficiency.
  const double flops = 2.0 * llama70b().totalParams() * 2048 / 8;
  const double peakUs = flops / (model.cluster().gpu.peakTflops.at(DType::BF16) * 1e6);
  EXPECT_GT(tp8.computeUs, peakUs);
  EXPECT_LT(tp8.computeUs, 2 * peakUs);
}

TEST(ServingMemory, KvCacheTakesWhatIsLeft) {
  const CostModel model = node("a100x8");
  const TransformerShape shape = llama70b();
  ServingWorkload workload;
  const KvCachePlan tp8 = kvCachePlan(shape, {8, 1}, workload, model);
  EXPECT_NEAR(tp8.memory.usedBytes(), 0.9 * 80e9, tp8.kvBlockBytes);
  // One block: 16 tokens x 80 blocks x K and V x one key/value head of 128 x 2 bytes.
  EXPECT_DOUBLE_EQ(tp8.kvBlockBytes, 16.0 * 80 * 2 * 1 * 128 * 2);
  EXPECT_EQ(tp8.blocksPerRequest, (1024 + 256 + 15) / 16);
  EXPECT_EQ(tp8.maxBatchByMemory, tp8.kvBlocks / tp8.blocksPerRequest);
  // An fp8 cache holds twice the blocks; tp 2 holds the weights in 69 GB and little cache.
  workload.kvElementBytes = 1;
  EXPECT_NEAR(double(kvCachePlan(shape, {8, 1}, workload, model).kvBlocks), 2.0 * double(tp8.kvBlocks), 2);
  EXPECT_LT(kvCachePlan(shape, {2, 1}, workload, model).kvBlocks, tp8.kvBlocks / 4);
  // tp 1 cannot hold 138 GB of weights.
  EXPECT_EQ(kvCachePlan(shape, {1, 1}, workload, model).kvBlocks, 0);
}

TEST(ServingParallel, ChecksNamesWhatCannotRun) {
  const Cluster cluster = withNodes(loadCluster("a100x8"), 1);
  EXPECT_EQ(checkServingParallel(llama70b(), {8, 1}, cluster), "");
  EXPECT_EQ(checkServingParallel(llama70b(), {3, 1}, cluster), "tp 3 does not divide the 64 heads");
  EXPECT_EQ(checkServingParallel(llama70b(), {16, 1}, cluster), "tp 16 spans more than a node's 8 GPUs");
  EXPECT_EQ(checkServingParallel(llama70b(), {8, 2}, cluster), "tp x pp 16 exceeds the cluster's 8 GPUs");
  EXPECT_EQ(kvElementBytes("fp8"), 1.0);
  EXPECT_FALSE(kvElementBytes("fp4"));
}

} // namespace
} // namespace zen::cost
