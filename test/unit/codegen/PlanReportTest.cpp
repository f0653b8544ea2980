//===- PlanReportTest.cpp - plan simulation, summary, trace, picture ------===//
#include "zen/Codegen/PlanSimulation.h"
#include "zen/Codegen/Report.h"
#include "zen/CostModel/Cluster.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace zen;

namespace {
/// Two gradients: backward of layer 1 produces g1, then backward of layer 0 produces g0;
/// each is all-reduced in its own bucket; the optimizer waits for both.
zenrt::Plan twoBucketPlan(const cost::CostModel &model) {
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
  task(zenrt::TaskKind::Compute, "forward", -1, 1000, {}, zenrt::Phase::Forward);
  task(zenrt::TaskKind::Compute, "backward.1", -1, 1000, {0}, zenrt::Phase::Backward);
  plan.schedule.back().produces = {"g1"};
  task(zenrt::TaskKind::Collective, "all_reduce.b0", 0, 0, {1}, zenrt::Phase::Backward);
  task(zenrt::TaskKind::Compute, "backward.0", -1, 3000, {1}, zenrt::Phase::Backward);
  plan.schedule.back().produces = {"g0"};
  task(zenrt::TaskKind::Collective, "all_reduce.b1", 1, 0, {3}, zenrt::Phase::Backward);
  task(zenrt::TaskKind::Compute, "optimizer", -1, 100, {2, 3, 4}, zenrt::Phase::Optimizer);
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

TEST(PlanSimulation, AnotherClusterRecostsComputeFromFlops) {
  cost::CostModel a100(cost::loadCluster("a100x8"));
  cost::CostModel h100(cost::loadCluster("h100x256"));
  zenrt::Plan plan = twoBucketPlan(a100);
  codegen::simulatePlan(plan, h100);
  EXPECT_EQ(plan.cluster.name, "h100x256");
  EXPECT_NE(plan.schedule[0].workUs, 1000.0);
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
  EXPECT_THROW(codegen::writeFileAtomically("/nonexistent-dir/plan.json", "x"), zenrt::PlanError);
}
} // namespace
