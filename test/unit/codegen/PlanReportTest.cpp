//===- PlanReportTest.cpp - plan simulation, summary, trace, picture ------===//
#include "zen/Codegen/ParallelPlan.h"
#include "zen/Codegen/PlanSimulation.h"
#include "zen/Codegen/Report.h"
#include "zen/CostModel/Cluster.h"

#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>

using namespace zen;

namespace {
/// Two gradients: backward of layer 1 produces g1, then backward of layer 0 produces g0;
/// each is all-reduced in its own bucket; the optimizer waits for both. With
/// `compressed`, bucket 0 is int8-compressed with error feedback on `device`.
zenrt::Plan twoBucketPlan(const cost::CostModel &model, bool compressed = false,
                          zenrt::Device device = zenrt::Device::GPU) {
  zenrt::Plan plan;
  plan.generator = {"zenopt", "test"};
  plan.model = {"tiny", "0"};
  plan.cluster = {model.cluster().name, 8, ""};
  plan.strategy = "wfbp";
  plan.compressor = "none";
  plan.tensors = {{"g1", 1 << 20, "f32", 0}, {"g0", 1 << 22, "f32", 1}};
  for (int64_t b = 0; b < 2; ++b) {
    zenrt::Bucket bucket;
    bucket.id = b;
    const zenrt::TensorInfo &tensor = plan.tensors[b];
    bucket.tensors = {{tensor.name, 0, tensor.elements}};
    bucket.elements = tensor.elements;
    bucket.bytes = 4 * tensor.elements;
    zenrt::Collective collective;
    collective.bytes = bucket.bytes;
    collective.stream = 0;
    bucket.collectives = {collective};
    plan.buckets.push_back(bucket);
  }
  if (compressed) {
    zenrt::Bucket &bucket = plan.buckets[0];
    bucket.compression = {zenrt::CompressionMethod::Int8, 1.0, 0, true, device};
    bucket.collectives[0].bytes = bucket.elements;
  }
  auto task = [&](zenrt::TaskKind kind, const char *name, int64_t bucket, double work,
                  std::vector<int64_t> deps, zenrt::Phase phase) {
    zenrt::Task t;
    t.id = static_cast<int64_t>(plan.schedule.size());
    t.kind = kind;
    t.name = name;
    t.bucket = bucket;
    t.workUs = work;
    t.flops = static_cast<int64_t>(work * 1e6);
    t.deps = std::move(deps);
    t.phase = phase;
    plan.schedule.push_back(t);
  };
  auto last = [&] { return static_cast<int64_t>(plan.schedule.size()) - 1; };
  task(zenrt::TaskKind::Compute, "forward", -1, 1000, {}, zenrt::Phase::Forward);
  task(zenrt::TaskKind::Compute, "backward.1", -1, 1000, {0}, zenrt::Phase::Backward);
  plan.schedule.back().produces = {"g1"};
  const int64_t backward1 = last();
  if (compressed)
    task(zenrt::TaskKind::Compress, "compress.b0", 0, 500, {backward1}, zenrt::Phase::Backward);
  task(zenrt::TaskKind::Collective, "all_reduce.b0", 0, 0, {last()}, zenrt::Phase::Backward);
  int64_t done0 = last();
  if (compressed) {
    task(zenrt::TaskKind::Decompress, "decompress.b0", 0, 200, {done0}, zenrt::Phase::Backward);
    done0 = last();
  }
  task(zenrt::TaskKind::Compute, "backward.0", -1, 3000, {backward1}, zenrt::Phase::Backward);
  plan.schedule.back().produces = {"g0"};
  const int64_t backward0 = last();
  task(zenrt::TaskKind::Collective, "all_reduce.b1", 1, 0, {backward0}, zenrt::Phase::Backward);
  task(zenrt::TaskKind::Compute, "optimizer", -1, 100, {done0, backward0, last()},
       zenrt::Phase::Optimizer);
  plan.baselines = {{"nooverlap", 1e9}};
  return plan;
}

TEST(PlanSimulation, RescoringAWrittenPlanIsExact) {
  cost::CostModel model(cost::loadCluster("a100x8"));
  zenrt::Plan plan = twoBucketPlan(model);
  cost::SimResult first = codegen::simulatePlan(plan, model);
  zenrt::Plan reread = zenrt::parsePlan(zenrt::writePlan(plan), "plan.json");
  cost::SimResult second = codegen::simulatePlan(reread, model);
  EXPECT_EQ(first.iterationUs, second.iterationUs);
  EXPECT_EQ(zenrt::writePlan(plan), zenrt::writePlan(reread));
}

TEST(PlanSimulation, PredictionsAreConsistent) {
  cost::CostModel model(cost::loadCluster("a100x8"));
  zenrt::Plan plan = twoBucketPlan(model);
  cost::SimResult result = codegen::simulatePlan(plan, model);
  const zenrt::Predictions &p = plan.predictions;
  EXPECT_GE(p.computeUs, 5100 - 1e-6);        // the compute chain alone
  EXPECT_GE(p.iterationUs, p.computeUs);
  EXPECT_NEAR(p.exposedCommUs, p.iterationUs - p.computeUs, 1e-6);
  // The bound uses compute alone, without the slowdown overlap causes.
  EXPECT_DOUBLE_EQ(result.computeAloneUs, 5100);
  EXPECT_DOUBLE_EQ(p.lowerBoundUs, std::max(5100.0, p.commBoundUs));
  // Tasks start after their dependencies end.
  for (const zenrt::Task &task : plan.schedule)
    for (int64_t dep : task.deps)
      EXPECT_GE(task.startUs + 1e-9, plan.schedule[dep].startUs + plan.schedule[dep].durationUs);
}

TEST(PlanSimulation, BoundIsForThePlansDataParallelGroup) {
  // 8 of a100x64's 64 GPUs: one node, so NVLink bounds the allreduce, not InfiniBand.
  cost::CostModel model(cost::loadCluster("a100x64"));
  zenrt::Plan plan = twoBucketPlan(model);
  ASSERT_EQ(plan.cluster.worldSize, 8);
  cost::SimResult result = codegen::simulatePlan(plan, model);
  const double bytes = 4.0 * ((1 << 20) + (1 << 22));
  EXPECT_DOUBLE_EQ(plan.predictions.commBoundUs, model.communicationBoundUs(bytes, model.groupOf(8)));
  EXPECT_NEAR(plan.predictions.commBoundUs, 2.0 * 7 / 8 * bytes / (300 * 0.7833 * 1e3), 1e-9);
  EXPECT_LT(plan.predictions.commBoundUs, model.communicationBoundUs(bytes, model.worldGroup()));
  EXPECT_DOUBLE_EQ(model.lowerBoundUs(0, bytes, model.groupOf(8)), plan.predictions.commBoundUs);
  EXPECT_DOUBLE_EQ(plan.predictions.lowerBoundUs,
                   std::max(result.computeAloneUs, plan.predictions.commBoundUs));
}

TEST(PlanSimulation, AnotherClusterRecostsComputeFromFlops) {
  cost::CostModel a100(cost::loadCluster("a100x8"));
  cost::CostModel h100(cost::loadCluster("h100x256"));
  zenrt::Plan plan = twoBucketPlan(a100);
  codegen::simulatePlan(plan, h100);
  EXPECT_EQ(plan.cluster.name, "h100x256");
  EXPECT_NE(plan.schedule[0].workUs, 1000.0);
}

TEST(PlanSimulation, CpuCompressionRunsBesideTheComputeStream) {
  cost::CostModel model(cost::loadCluster("a100x8"));
  auto find = [](const zenrt::Plan &plan, const std::string &name) -> const zenrt::Task & {
    for (const zenrt::Task &task : plan.schedule)
      if (task.name == name)
        return task;
    ADD_FAILURE() << "no task " << name;
    return plan.schedule.front();
  };
  // Offloaded, the encode runs on the CPU worker while backward.0 computes.
  zenrt::Plan offloaded = twoBucketPlan(model, true, zenrt::Device::CPU);
  for (const cost::SimTask &task : codegen::planToSimTasks(offloaded, model))
    EXPECT_EQ(task.device, vocab::compresses(task.kind) ? cost::Device::CPU : cost::Device::GPU)
        << task.name;
  cost::SimResult cpu = codegen::simulatePlan(offloaded, model);
  ASSERT_EQ(cpu.error, "");
  EXPECT_DOUBLE_EQ(find(offloaded, "compress.b0").startUs, find(offloaded, "backward.0").startUs);
  EXPECT_DOUBLE_EQ(cpu.hostCompressionUs, 700);
  EXPECT_DOUBLE_EQ(cpu.computeAloneUs, 5100);
  // On the GPU, the same encode takes the compute stream first.
  zenrt::Plan onGpu = twoBucketPlan(model, true, zenrt::Device::GPU);
  cost::SimResult gpu = codegen::simulatePlan(onGpu, model);
  EXPECT_DOUBLE_EQ(find(onGpu, "backward.0").startUs, find(onGpu, "compress.b0").startUs + 500);
  EXPECT_GT(gpu.iterationUs, cpu.iterationUs);
  // The lower bound is the model's: compression kernels on the compute stream do not raise it.
  EXPECT_GT(gpu.computeAloneUs, 5100);
  EXPECT_DOUBLE_EQ(onGpu.predictions.lowerBoundUs, std::max(5100.0, onGpu.predictions.commBoundUs));
  EXPECT_DOUBLE_EQ(onGpu.predictions.lowerBoundUs, offloaded.predictions.lowerBoundUs);
  // The bound covers the plan's own compressor: int8 sends a quarter of the dense bytes.
  zenrt::Plan dense = twoBucketPlan(model);
  codegen::simulatePlan(dense, model);
  EXPECT_LT(onGpu.predictions.commBoundUs, 0.26 * dense.predictions.commBoundUs);

  // Re-costed on another cluster as the planner prices it: on the CPU, with error feedback.
  cost::CostModel h100(cost::loadCluster("h100x256"));
  std::vector<cost::SimTask> tasks = codegen::planToSimTasks(twoBucketPlan(model, true, zenrt::Device::CPU), h100);
  cost::CompressionSpec spec;
  spec.method = cost::CompressionMethod::Int8;
  spec.device = cost::Device::CPU;
  spec.errorFeedback = true;
  cost::CompressionCost expected = h100.compression(spec, 1 << 20);
  for (const cost::SimTask &task : tasks)
    if (vocab::compresses(task.kind))
      EXPECT_DOUBLE_EQ(task.durationUs, task.name == "compress.b0" ? expected.encodeUs
                                                                  : expected.decodeUs);
}

TEST(PlanSimulation, TooSmallClusterIsRejected) {
  cost::CostModel local(cost::loadCluster("a100x8"));
  zenrt::Plan plan = twoBucketPlan(local);
  plan.cluster.worldSize = 64;
  EXPECT_THROW(codegen::planToSimTasks(plan, local), zenrt::PlanError);
}

TEST(Report, SummaryJsonHasTheContractFields) {
  cost::CostModel model(cost::loadCluster("a100x8"));
  zenrt::Plan plan = twoBucketPlan(model);
  codegen::simulatePlan(plan, model);
  nlohmann::ordered_json json = codegen::summaryJson(plan);
  for (const char *key : {"strategy", "iteration_us", "compute_us", "exposed_comm_us",
                          "lower_bound_us", "buckets", "baselines"})
    EXPECT_TRUE(json.contains(key)) << key;
  EXPECT_EQ(json["buckets"], 2);
  EXPECT_EQ(json["baselines"]["nooverlap"], 1e9);
  EXPECT_NE(codegen::summaryText(plan).find("nooverlap"), std::string::npos);
}

TEST(Report, TraceHasOneCompleteEventPerTaskOnItsTrack) {
  cost::CostModel model(cost::loadCluster("a100x8"));
  zenrt::Plan plan = twoBucketPlan(model);
  codegen::simulatePlan(plan, model);
  nlohmann::json trace = nlohmann::json::parse(codegen::chromeTrace(plan));
  int complete = 0;
  for (const auto &event : trace["traceEvents"]) {
    if (event["ph"] != "X")
      continue;
    ++complete;
    bool collective = event["cat"] == "collective";
    EXPECT_EQ(event["tid"], collective ? 1 : 0);
    if (collective) {
      EXPECT_EQ(event["args"]["op"], "all_reduce");
      EXPECT_TRUE(event["args"].contains("algorithm"));
      EXPECT_TRUE(event["args"].contains("bytes"));
    }
  }
  EXPECT_EQ(complete, static_cast<int>(plan.schedule.size()));
}

TEST(Report, OffloadedCompressionHasItsOwnHostCpuTrack) {
  cost::CostModel model(cost::loadCluster("a100x8"));
  zenrt::Plan plan = twoBucketPlan(model, true, zenrt::Device::CPU);
  codegen::simulatePlan(plan, model);
  nlohmann::json trace = nlohmann::json::parse(codegen::chromeTrace(plan));
  std::map<int, std::string> trackNames;
  for (const auto &event : trace["traceEvents"])
    if (event["ph"] == "M" && event["name"] == "thread_name")
      trackNames[event["tid"]] = event["args"]["name"];
  EXPECT_EQ(trackNames, (std::map<int, std::string>{
                            {0, "compute"}, {1, "host cpu"}, {2, "comm stream 0"}}));
  for (const auto &event : trace["traceEvents"])
    if (event["ph"] == "X")
      EXPECT_EQ(event["tid"], event["cat"] == "compress" || event["cat"] == "decompress" ? 1
                              : event["cat"] == "collective"                             ? 2
                                                                                         : 0)
          << event["name"];
  EXPECT_NE(codegen::timelineSvg(plan).find("host cpu"), std::string::npos);
  EXPECT_NE(codegen::summaryText(plan).find("int8@cpu"), std::string::npos);
}

TEST(Report, SvgShowsEveryTaskAndTheExposedCommunication) {
  cost::CostModel model(cost::loadCluster("a100x8"));
  zenrt::Plan plan = twoBucketPlan(model);
  codegen::simulatePlan(plan, model);
  std::string svg = codegen::timelineSvg(plan);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  for (const zenrt::Task &task : plan.schedule)
    EXPECT_NE(svg.find("<title>" + task.name), std::string::npos) << task.name;
  EXPECT_NE(svg.find("exposed comm"), std::string::npos);
}

TEST(Report, UnwritablePathThrowsAndLeavesNothing) {
  EXPECT_THROW(zenrt::writeFileAtomically("/nonexistent-dir/plan.json", "x"), zenrt::PlanError);
}
} // namespace

namespace {
std::vector<std::string> program(int64_t stage, int64_t pp, int64_t microBatches, int64_t virtualStages) {
  std::vector<std::string> names;
  for (const cost::PipelineStep &step : cost::stageProgram(stage, pp, microBatches, virtualStages))
    names.push_back(step.name(virtualStages));
  return names;
}
} // namespace

TEST(ParallelPlan, OneFOneBWarmsUpWithTheStagesBehindThenAlternates) {
  // 4 stages, 6 micro-batches: stage 0 runs 3 forwards ahead, the last none.
  EXPECT_EQ(program(0, 4, 6, 1),
            (std::vector<std::string>{"F0", "F1", "F2", "F3", "B0", "F4", "B1", "F5", "B2", "B3", "B4", "B5"}));
  EXPECT_EQ(program(3, 4, 6, 1),
            (std::vector<std::string>{"F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3", "F4", "B4", "F5", "B5"}));
  // Fewer micro-batches than stages: all forwards, then all backwards.
  EXPECT_EQ(program(0, 4, 2, 1), (std::vector<std::string>{"F0", "F1", "B0", "B1"}));
}

TEST(ParallelPlan, InterleavedVisitsChunksInGroupsOfPipelineDepth) {
  // 2 stages, 2 chunks, 4 micro-batches (Megatron: micro-batches in groups of pp
  // per chunk; backward chunks in reverse). Stage 1 warms up (V - 1) pp = 2 steps.
  EXPECT_EQ(program(1, 2, 4, 2), (std::vector<std::string>{"F0.0", "F1.0", "F0.1", "B0.1", "F1.1", "B1.1", "F2.0", "B0.0",
                                               "F3.0", "B1.0", "F2.1", "B2.1", "F3.1", "B3.1", "B2.0", "B3.0"}));
}
