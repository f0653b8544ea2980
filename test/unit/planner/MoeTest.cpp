//===- MoeTest.cpp - expert parallelism and MoE pipelining decisions ------===//
#include "zen/Planner/Moe.h"

#include "zen/CostModel/Cluster.h"

#include <gtest/gtest.h>

#include <stdexcept>

using namespace zen;
using namespace zen::plan;

namespace {

/// A Switch-style layer: 4096 tokens per rank, hidden 4096, 64 experts of ffn
/// 14336, top 2, capacity factor 1.25 (Mixtral's expert shape).
MoeLayer wideLayer(const std::string &name) {
  MoeLayer layer{name, {}};
  layer.shape.tokens = 4096;
  layer.shape.hidden = 4096;
  layer.shape.ffn = 14336;
  layer.shape.experts = 64;
  layer.shape.topK = 2;
  layer.shape.capacityFactor = 1.25;
  return layer;
}

cost::CostModel h100() { return cost::CostModel(cost::loadCluster("h100x256")); }

MoeRequest requestOn(const cost::CostModel &model) {
  MoeRequest request;
  request.dp = model.worldGroup();
  request.setup.computeDtype = cost::DType::BF16;
  return request;
}

} // namespace

TEST(MoePlanning, DegreesArePowersOfTwoDividingTheCapacity) {
  MoeLayer layer = wideLayer("l");
  EXPECT_EQ(moeDegrees(layer.shape), (std::vector<int64_t>{1, 2, 4, 8, 16}));
  layer.shape.capacityRows = 40;
  EXPECT_EQ(moeDegrees(layer.shape), (std::vector<int64_t>{1, 2, 4, 8}));
  layer.shape.capacityRows = 6;
  EXPECT_EQ(moeDegrees(layer.shape), (std::vector<int64_t>{1, 2}));
}

TEST(MoePlanning, WithoutExpertParallelismNothingIsAddedAndNothingIsPipelined) {
  const cost::CostModel model = h100();
  MoeRequest request = requestOn(model);
  const MoeEvaluation eval = evaluateMoe({wideLayer("a"), wideLayer("b")}, 1, model, request);
  // No all-to-all at ep 1: chunks only shrink the GEMMs, so degree 1 wins and
  // the layers cost what the data-parallel plan already prices.
  for (const MoeLayerTime &layer : eval.best.layers) {
    EXPECT_EQ(layer.choice.forward, 1);
    EXPECT_EQ(layer.choice.backward, 1);
    EXPECT_EQ(layer.choice.algorithm, cost::AllToAllAlgorithm::Flat);
  }
  EXPECT_DOUBLE_EQ(eval.extraUs(eval.best), 0.0);
  EXPECT_DOUBLE_EQ(eval.syncSavingUs, 0.0);
}

TEST(MoePlanning, ExpertParallelismOverNodesPipelinesForwardAndBackward) {
  const cost::CostModel model = h100();
  const MoeRequest request = requestOn(model);
  // 64 experts over 64 ranks: 8 nodes of 8; each all-to-all moves 64 x 640 x
  // 4096 bf16 values per rank, comparable to the experts' GEMMs.
  const MoeEvaluation eval = evaluateMoe({wideLayer("a")}, 64, model, request);
  const MoeLayerTime &best = eval.best.layers.front();
  EXPECT_GT(best.choice.forward, 1);
  EXPECT_GT(best.choice.backward, 1);
  const MoeLayerTime &nopipe = eval.baselines.at("moe-nopipe").layers.front();
  EXPECT_EQ(nopipe.choice.forward, 1);
  EXPECT_LT(best.forwardUs, nopipe.forwardUs);
  // Auto's choices include every baseline's, so it is never slower (by construction).
  for (const auto &[name, strategy] : eval.baselines)
    EXPECT_LE(eval.best.moeUs, strategy.moeUs) << name;
  // PipeMoE keeps one degree for both phases and the flat all-to-all.
  const MoeLayerTime &pipemoe = eval.baselines.at("pipemoe").layers.front();
  EXPECT_EQ(pipemoe.choice.forward, pipemoe.choice.backward);
  EXPECT_EQ(pipemoe.choice.algorithm, cost::AllToAllAlgorithm::Flat);
}

TEST(MoePlanning, TheTwoDimensionalAllToAllWinsWhenPeersAreMany) {
  const cost::CostModel model = h100();
  const MoeRequest request = requestOn(model);
  // 256 ranks of 32 nodes, small messages per peer: 255 issue latencies flat
  // against 7 + 31 in two phases.
  MoeLayer layer = wideLayer("a");
  layer.shape.experts = 256;
  layer.shape.tokens = 512;
  const MoeEvaluation eval = evaluateMoe({layer}, 256, model, request);
  EXPECT_EQ(eval.best.layers.front().choice.algorithm, cost::AllToAllAlgorithm::Hierarchical);
  EXPECT_LT(eval.best.moeUs, eval.baselines.at("moe-nopipe").moeUs);
}

/// The layers' expert gradients (fp32) and one dense gradient after a backward
/// of `backwardUs` over `dp`: each in a bucket of its own, or all in one.
GradientSync syncOf(const std::vector<MoeLayer> &layers, cost::Group dp, double backwardUs,
                    bool oneBucket) {
  GradientSync sync;
  sync.plan.strategy = "test";
  sync.problem.group = dp;
  sync.problem.forward = {{"fwd", backwardUs / 2}};
  sync.problem.backward = {{"bwd", backwardUs}};
  auto add = [&](const std::string &name, double elements, bool expert) {
    GradientTensor gradient;
    gradient.name = name;
    gradient.elements = int64_t(elements);
    gradient.bytes = 4 * gradient.elements;
    gradient.readyAfterSegment = 0;
    sync.problem.gradients.push_back(gradient);
    sync.expert.push_back(expert);
  };
  for (const MoeLayer &layer : layers)
    add(layer.name + ".experts", double(layer.shape.experts) * layer.shape.expertParams(), true);
  add("dense", 1e8, false);
  // One forward and one backward segment, no MoE compute of their own to
  // replace: every layer's pieces start the forward and end the backward.
  sync.sites.assign(layers.size(), MoeLayerSite{0, 0, 0, 0});
  const int gradients = int(sync.problem.gradients.size());
  for (int g = 0; g < gradients; g += oneBucket ? gradients : 1) {
    BucketChoice bucket;
    bucket.begin = g;
    bucket.end = oneBucket ? gradients : g + 1;
    sync.plan.buckets.push_back(bucket);
  }
  return sync;
}

TEST(MoePlanning, ExpertGradientsSynchroniseOverTheirReplicasInTheSchedule) {
  const cost::CostModel model = h100();
  const std::vector<MoeLayer> layers = {wideLayer("a"), wideLayer("b")};
  for (bool oneBucket : {false, true}) {
    const GradientSync sync = syncOf(layers, model.worldGroup(), 1000, oneBucket);
    // ep 1 is the schedule as planned.
    EXPECT_DOUBLE_EQ(expertParallelSyncUs(sync, 1, model.worldGroup(), model),
                     evaluate(sync.problem, sync.plan, model).iterationUs);
    // Over whole nodes each rank syncs 1/ep of the experts over 256/ep ranks.
    const double ep1 = expertParallelSyncUs(sync, 1, model.worldGroup(), model);
    const double ep64 = expertParallelSyncUs(sync, 64, model.worldGroup(), model);
    EXPECT_LT(ep64, ep1 / 4) << oneBucket;
    // Only the dense gradient left over the dp group: nothing faster than its all-reduce.
    EXPECT_GT(ep64, model.collective(cost::CollectiveKind::AllReduce, 4e8, model.worldGroup())
                        .timeUs);
  }
}

// A bucket holding expert gradients and others becomes two in its place, with its settings:
// the others over the dp group, then one rank's experts / ep of the experts' over the
// dp / ep replicas; the gradients keep their ready order inside each. At ep 1 nothing
// changes.
TEST(MoePlanning, ExpertParallelSyncSplitsBucketsByGroup) {
  const cost::CostModel model = h100();
  MoeLayer layer = wideLayer("a");
  GradientSync sync = syncOf({layer}, model.worldGroup(), 1000, /*oneBucket=*/true);
  // One bucket of dense0, the experts and dense, in ready order.
  GradientTensor first = sync.problem.gradients.back();
  first.name = "dense0";
  sync.problem.gradients.insert(sync.problem.gradients.begin(), first);
  sync.expert.insert(sync.expert.begin(), false);
  sync.plan.buckets = {BucketChoice{0, 3}};
  sync.plan.buckets[0].chunks = 4;
  sync.plan.buckets[0].scheme = vocab::SyncScheme::ReduceScatterAllGather;
  const int64_t expertElements = sync.problem.gradients[1].elements;

  const ExpertParallelSync same = expertParallelSync(sync, 1, model.worldGroup());
  EXPECT_EQ(same.plan.buckets.size(), 1u);
  EXPECT_FALSE(same.plan.buckets[0].expertReplicas);
  EXPECT_EQ(same.problem.gradients[1].elements, expertElements);

  const ExpertParallelSync split = expertParallelSync(sync, 8, model.worldGroup());
  ASSERT_EQ(split.plan.buckets.size(), 2u);
  const BucketChoice &dense = split.plan.buckets[0], &experts = split.plan.buckets[1];
  EXPECT_EQ(dense.begin, 0);
  EXPECT_EQ(dense.end, 2);
  EXPECT_FALSE(dense.expertReplicas);
  EXPECT_EQ(experts.begin, 2);
  EXPECT_EQ(experts.end, 3);
  EXPECT_TRUE(experts.expertReplicas);
  for (const BucketChoice *bucket : {&dense, &experts}) {
    EXPECT_EQ(bucket->chunks, 4);
    EXPECT_TRUE(bucket->decomposed());
  }
  const std::vector<GradientTensor> &gradients = split.problem.gradients;
  EXPECT_EQ(gradients[0].name, "dense0");
  EXPECT_EQ(gradients[1].name, "dense");
  EXPECT_EQ(gradients[2].name, "a.experts");
  EXPECT_EQ(gradients[0].readyOrder, 0);
  EXPECT_EQ(gradients[1].readyOrder, 2);
  EXPECT_EQ(gradients[2].readyOrder, 1);
  EXPECT_EQ(gradients[2].elements, expertElements / 8);
  EXPECT_EQ(gradients[2].bytes, 4 * (expertElements / 8));
  EXPECT_EQ(gradients[2].expertParallel, 8);
  EXPECT_EQ(gradients[1].expertParallel, 1);
  // 256 ranks over 32 nodes: the ranks of one expert slot are every 8th, one per node.
  EXPECT_EQ(split.problem.expertReplicas.ranks, 32);
  EXPECT_EQ(split.problem.expertReplicas.nodes, 32);

  // The simulator runs the experts' collectives over the replicas, the others over dp.
  const std::vector<cost::SimTask> tasks = buildSimTasks(split.problem, split.plan, model);
  int replicaCollectives = 0;
  for (const cost::SimTask &task : tasks)
    if (task.kind == cost::TaskKind::Collective) {
      const cost::Group expected = task.bucket == 1 ? split.problem.expertReplicas
                                                    : model.worldGroup();
      EXPECT_EQ(task.group.ranks, expected.ranks) << task.name;
      replicaCollectives += task.bucket == 1;
    }
  EXPECT_EQ(replicaCollectives, 2); // reduce-scatter and all-gather
  EXPECT_DOUBLE_EQ(expertParallelSyncUs(sync, 8, model.worldGroup(), model),
                   evaluate(split.problem, split.plan, model).iterationUs);

  // An expert tensor that does not divide by ep is a planner bug, not a plan.
  sync.problem.gradients[1].elements += 1;
  EXPECT_THROW(expertParallelSync(sync, 8, model.worldGroup()), std::logic_error);
}

/// The index of the task named `name`, or -1.
int taskNamed(const std::vector<cost::SimTask> &tasks, const std::string &name) {
  for (size_t t = 0; t < tasks.size(); ++t)
    if (tasks[t].name == name)
      return int(t);
  return -1;
}

// A layer's phases enter the schedule as pieces: dispatch, experts, combine
// per piece; forward pieces run before the forward segment the experts start,
// backward pieces end the segment that completes their gradients, and what
// waited for that segment waits for the combines.
TEST(MoePlanning, ScheduleRunsEachLayerInPiecesAroundItsExperts) {
  const cost::CostModel model = h100();
  const std::vector<MoeLayer> layers = {wideLayer("a")};
  MoeRequest request = requestOn(model);
  const GradientSync sync = syncOf(layers, model.worldGroup(), 1000, false);
  MoeLayerTime layer;
  layer.choice.forward = 2;
  layer.choice.backward = 4;
  const int64_t ep = 8;
  const std::vector<cost::SimTask> tasks =
      moeScheduleTasks(sync, layers, {layer}, ep, request, model);
  // One bucket per gradient: the experts' bucket moves to their replicas whole.
  EXPECT_EQ(tasks.size(), buildSimTasks(sync.problem, sync.plan, model).size() + 3 * (2 + 4));

  const int forward = 0, backward = 1;
  std::vector<int> forwardCombines, backwardCombines;
  for (int64_t i = 0; i < 4; ++i) {
    const std::string piece = std::to_string(i);
    for (const char *phase : {"fwd", "bwd"}) {
      if (phase == std::string("fwd") && i >= 2) {
        EXPECT_EQ(taskNamed(tasks, "moe.a.fwd.dispatch" + piece), -1);
        continue;
      }
      const std::string prefix = std::string("moe.a.") + phase + ".";
      const int dispatch = taskNamed(tasks, prefix + "dispatch" + piece);
      const int experts = taskNamed(tasks, prefix + "experts" + piece);
      const int combine = taskNamed(tasks, prefix + "combine" + piece);
      ASSERT_GE(dispatch, 0);
      ASSERT_GE(experts, 0);
      ASSERT_GE(combine, 0);
      for (int a2a : {dispatch, combine}) {
        EXPECT_EQ(tasks[a2a].collective, cost::CollectiveKind::AllToAll);
        EXPECT_EQ(tasks[a2a].group.ranks, ep);
        EXPECT_EQ(tasks[a2a].group.nodes, 1);
        EXPECT_DOUBLE_EQ(tasks[a2a].bytes,
                         cost::dispatchBytes(layers[0].shape, cost::DType::BF16) /
                             (phase == std::string("fwd") ? 2 : 4));
        EXPECT_EQ(tasks[a2a].stream, 1); // beside the gradient sync's stream 0
      }
      EXPECT_EQ(tasks[experts].deps, std::vector<int>{dispatch});
      EXPECT_EQ(tasks[combine].deps, std::vector<int>{experts});
      (phase == std::string("fwd") ? forwardCombines : backwardCombines).push_back(combine);
      EXPECT_EQ(tasks[dispatch].deps,
                phase == std::string("fwd") ? std::vector<int>{} : std::vector<int>{backward});
    }
  }
  EXPECT_EQ(tasks[forward].deps, forwardCombines);
  const int expertSync = taskNamed(tasks, "all_reduce.b0");
  ASSERT_GE(expertSync, 0);
  EXPECT_EQ(tasks[expertSync].deps, backwardCombines);
  EXPECT_EQ(tasks[expertSync].group.ranks, model.worldGroup().ranks / ep);

  // Serial: on the gradient sync's stream, ahead of its collectives.
  layer.choice.sync = cost::GradientSyncMode::Serial;
  const std::vector<cost::SimTask> serial =
      moeScheduleTasks(sync, layers, {layer}, ep, request, model);
  const cost::SimTask &dispatch = serial[size_t(taskNamed(serial, "moe.a.bwd.dispatch0"))];
  EXPECT_EQ(dispatch.stream, 0);
  EXPECT_LT(dispatch.priority, serial[size_t(expertSync)].priority);
}

// auto's co-scheduled iteration is its choices' simulated schedule, and no
// baseline's is faster (true by construction: auto takes the fastest of its
// own choices and the baselines'); extraUs counts from the schedule as it is.
TEST(MoePlanning, CoScheduledIterationsAreTheSimulatedSchedules) {
  const cost::CostModel model = h100();
  const std::vector<MoeLayer> layers = {wideLayer("a"), wideLayer("b")};
  MoeRequest request = requestOn(model);
  request.sync = syncOf(layers, model.worldGroup(), 1000, false);
  for (int64_t ep : {8, 64}) {
    const MoeEvaluation eval = evaluateMoe(layers, ep, model, request);
    EXPECT_TRUE(eval.scheduled);
    EXPECT_DOUBLE_EQ(eval.scheduleUs, evaluate(request.sync->problem, request.sync->plan, model).iterationUs);
    EXPECT_DOUBLE_EQ(eval.best.iterationUs,
                     moeScheduleUs(*request.sync, layers, eval.best.layers, ep, request, model));
    EXPECT_DOUBLE_EQ(eval.extraUs(eval.best), eval.best.iterationUs - eval.scheduleUs);
    for (const auto &[name, baseline] : eval.baselines) {
      EXPECT_DOUBLE_EQ(baseline.iterationUs,
                       moeScheduleUs(*request.sync, layers, baseline.layers, ep, request, model))
          << name;
      EXPECT_LE(eval.best.iterationUs, baseline.iterationUs) << name;
      for (const MoeLayerTime &layer : baseline.layers)
        EXPECT_EQ(layer.choice.sync, cost::GradientSyncMode::Concurrent) << name;
    }
  }
}

TEST(MoePlanning, SearchKeepsTheFastestExpertParallelDegree) {
  const cost::CostModel model = h100();
  MoeRequest request = requestOn(model);
  const std::vector<MoeLayer> layers = {wideLayer("a"), wideLayer("b")};
  auto fastest = [](const MoePlan &plan) {
    EXPECT_EQ(plan.searched.size(), 7u); // 1, 2, ..., 64
    for (const auto &[ep, extra] : plan.searched)
      EXPECT_LE(plan.chosen.extraUs(plan.chosen.best), extra) << "ep " << ep;
    EXPECT_EQ(plan.searched.at(plan.chosen.ep), plan.chosen.extraUs(plan.chosen.best));
  };
  // The layers alone: no gradient sync to change.
  MoePlan plan = planMoe(layers, model, request);
  fastest(plan);
  EXPECT_EQ(plan.chosen.syncSavingUs, 0.0);
  const int64_t withoutSaving = plan.chosen.ep;
  // A schedule whose expert gradients' sync is exposed: experts over whole
  // nodes take their gradients' all-reduce off the NICs, which every ep inside
  // a node leaves there.
  request.sync = syncOf(layers, model.worldGroup(), 1000, false);
  plan = planMoe(layers, model, request);
  fastest(plan);
  EXPECT_GT(plan.chosen.ep, withoutSaving);
  EXPECT_GT(plan.chosen.ep, 8);
  EXPECT_DOUBLE_EQ(plan.chosen.syncSavingUs,
                   expertParallelSyncUs(*request.sync, 1, model.worldGroup(), model) -
                       expertParallelSyncUs(*request.sync, plan.chosen.ep, model.worldGroup(),
                                            model));
  EXPECT_GT(plan.chosen.syncSavingUs, 0.0);
  EXPECT_LT(plan.chosen.memory.weightsBytes,
            evaluateMoe(layers, 1, model, request).memory.weightsBytes);
}

TEST(MoePlanning, ForcedDegreeMustDivideExpertsAndDataParallelGroupAndBePlaceable) {
  const cost::CostModel model = h100();
  MoeRequest request = requestOn(model);
  const std::vector<MoeLayer> layers = {wideLayer("blocks.1.moe")};
  request.ep = 3;
  try {
    planMoe(layers, model, request);
    FAIL() << "ep 3 accepted";
  } catch (const zen::Error &error) {
    EXPECT_STREQ(error.what(), "blocks.1.moe: ep 3 does not divide the 64 experts");
    EXPECT_EQ(error.kind, zen::ErrorKind::BadInput);
  }
  request.ep = 4;
  request.dp = cost::Group{12, 2}; // 6 ranks per node: 4 neither divides nor fills them
  EXPECT_EQ(checkMoeParallel(layers, 4, request),
            "ep 4 neither divides nor is a multiple of the 6 data-parallel ranks per node");
  request.dp = model.worldGroup();
  request.ep = 16;
  EXPECT_EQ(planMoe(layers, model, request).chosen.ep, 16);
  request.imbalance = 0.5;
  try {
    planMoe(layers, model, request);
    FAIL() << "imbalance 0.5 accepted";
  } catch (const zen::Error &error) {
    EXPECT_EQ(error.kind, zen::ErrorKind::BadUsage);
  }
  EXPECT_THROW(planMoe({}, model, requestOn(model)), zen::Error);
}

TEST(MoePlanning, ImbalanceSlowsTheExperts) {
  const cost::CostModel model = h100();
  MoeRequest request = requestOn(model);
  const std::vector<MoeLayer> layers = {wideLayer("a")};
  const double even = evaluateMoe(layers, 8, model, request).best.moeUs;
  request.imbalance = 1.2;
  EXPECT_GT(evaluateMoe(layers, 8, model, request).best.moeUs, even);
}

TEST(MoePlanning, TutelKeepsOneChoiceForTheWholeModel) {
  const cost::CostModel model = h100();
  const MoeRequest request = requestOn(model);
  // Two layers of different shapes: auto may pick apart, tutel may not.
  MoeLayer small = wideLayer("small");
  small.shape.tokens = 512;
  const MoeEvaluation eval = evaluateMoe({wideLayer("wide"), small}, 64, model, request);
  const MoeStrategy &tutel = eval.baselines.at("tutel");
  const cost::MoeLayerChoice &first = tutel.layers.front().choice;
  for (const MoeLayerTime &layer : tutel.layers) {
    EXPECT_EQ(layer.choice.forward, first.forward);
    EXPECT_EQ(layer.choice.backward, first.forward);
    EXPECT_EQ(layer.choice.algorithm, first.algorithm);
  }
  // The best of its candidates (the degrees dividing both capacities, 640 and
  // 20): none of them is faster.
  for (int64_t r : {1, 2, 4})
    for (cost::AllToAllAlgorithm algorithm :
         {cost::AllToAllAlgorithm::Flat, cost::AllToAllAlgorithm::Hierarchical}) {
      double us = 0;
      for (const MoeLayer &layer : {wideLayer("wide"), small})
        for (bool backward : {false, true})
          us += cost::moePhaseUs(model, layer.shape, 64, request.dp, r, algorithm, backward, 1.0,
                                 cost::DType::BF16);
      EXPECT_LE(tutel.moeUs, us * (1 + 1e-12)) << "r " << r;
    }
  // auto chooses per layer and phase, so it differs from tutel's one choice here.
  const MoeLayerTime &wide = eval.best.layers[0], &narrow = eval.best.layers[1];
  EXPECT_TRUE(wide.choice.forward != narrow.choice.forward ||
              wide.choice.backward != narrow.choice.backward ||
              wide.choice.algorithm != narrow.choice.algorithm ||
              wide.choice.forward != wide.choice.backward);
  EXPECT_LT(eval.best.moeUs, tutel.moeUs);
}

TEST(MoePlanning, TokensAreCompressedOnlyWhenAllowedAndWhereItPays) {
  const cost::CostModel model = h100();
  MoeRequest request = requestOn(model);
  const std::vector<MoeLayer> layers = {wideLayer("a")};
  auto tokensAt = [&](int64_t ep) {
    return evaluateMoe(layers, ep, model, request).best.layers.front().choice.tokens;
  };
  // Not allowed: never.
  EXPECT_EQ(tokensAt(64), cost::CompressionMethod::None);
  // fp16 cannot shrink bf16 activations; int8 halves what crosses the NICs.
  request.compressors = {cost::CompressionMethod::FP16, cost::CompressionMethod::Int8};
  EXPECT_EQ(tokensAt(64), cost::CompressionMethod::Int8);
  const MoeEvaluation eval = evaluateMoe(layers, 64, model, request);
  for (const auto &[name, strategy] : eval.baselines)
    EXPECT_EQ(strategy.layers.front().choice.tokens, cost::CompressionMethod::None) << name;
  // Inside a node (NVLink) the encode and decode kernels cost more than the
  // bytes they save; with no all-to-all there is nothing to compress.
  EXPECT_EQ(tokensAt(8), cost::CompressionMethod::None);
  EXPECT_EQ(tokensAt(1), cost::CompressionMethod::None);
  request.compressors = {cost::CompressionMethod::FP16};
  EXPECT_EQ(tokensAt(64), cost::CompressionMethod::None);
}

TEST(MoePlanning, ExpertParallelDegreesThatDoNotFitInMemoryAreNotChosen) {
  const cost::CostModel model = h100(); // 80 GB per GPU
  MoeRequest request = requestOn(model);
  request.dense = cost::replicatedParameterMemory(0, 0, request.setup, model);
  // 64 experts of 117M parameters at 18 bytes each (bf16 with Adam, fp32 gradients): 135 GB
  // on one rank.
  const std::vector<MoeLayer> layers = {wideLayer("a")};
  const MoePlan plan = planMoe(layers, model, request);
  ASSERT_EQ(plan.notFitting.count(1), 1u);
  EXPECT_GT(plan.notFitting.at(1), 80e9);
  EXPECT_EQ(plan.searched.count(1), 0u);
  EXPECT_EQ(plan.searched.count(2), 1u);
  EXPECT_GE(plan.chosen.ep, 2);
  EXPECT_TRUE(moeModelMemory(plan.chosen, request).fits());
  // The whole model counts: the other parameters' state and the reserve, which includes the
  // allocator's share of the experts' activations and buffers.
  const cost::MemoryBreakdown whole = moeModelMemory(plan.chosen, request);
  EXPECT_DOUBLE_EQ(whole.reserveBytes,
                   cost::reserveBytes(whole.capacityBytes, plan.chosen.memory.activationsBytes +
                                                               plan.chosen.memory.buffersBytes));
  EXPECT_DOUBLE_EQ(whole.perGpuBytes(),
                   whole.reserveBytes + plan.chosen.memory.weightsBytes +
                       plan.chosen.memory.gradientsBytes + plan.chosen.memory.optimizerBytes +
                       plan.chosen.memory.activationsBytes + plan.chosen.memory.buffersBytes);

  request.ep = 1;
  try {
    planMoe(layers, model, request);
    FAIL() << "ep 1 does not fit";
  } catch (const zen::Error &error) {
    EXPECT_NE(std::string(error.what()).find("ep 1 needs"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("of 80.0 GB"), std::string::npos) << error.what();
  }
  // 10 billion other parameters at 18 bytes fit under no ep.
  request.ep.reset();
  request.dense = cost::replicatedParameterMemory(1e10, 0, request.setup, model);
  try {
    planMoe(layers, model, request);
    FAIL() << "nothing fits";
  } catch (const zen::Error &error) {
    EXPECT_NE(std::string(error.what()).find("no expert-parallel degree fits in memory"),
              std::string::npos)
        << error.what();
  }
}
/// One MoE layer (8 experts, 4096 tokens) whose backward ends the second of two
/// 100 us backward segments; two dense gradients of `dense` elements each,
/// ready after the first, in buckets of their own: their all-reduces run
/// while the layer's backward pieces do.
GradientSync syncBesideLayer(const MoeLayer &layer, cost::Group dp, double dense) {
  GradientSync sync;
  sync.plan.strategy = "test";
  sync.problem.group = dp;
  sync.problem.forward = {{"fwd", 1000}};
  sync.problem.backward = {{"b0", 100}, {"b1", 100}};
  auto add = [&](const std::string &name, double elements, bool expert, int ready) {
    GradientTensor gradient;
    gradient.name = name;
    gradient.elements = int64_t(elements);
    gradient.bytes = 4 * gradient.elements;
    gradient.readyAfterSegment = ready;
    sync.problem.gradients.push_back(gradient);
    sync.expert.push_back(expert);
  };
  add("dense1", dense, false, 0);
  add("dense2", dense, false, 0);
  add(layer.name + ".experts", double(layer.shape.experts) * layer.shape.expertParams(), true, 1);
  sync.sites = {MoeLayerSite{0, 1, 0, 0}};
  for (int g = 0; g < 3; ++g) {
    BucketChoice bucket;
    bucket.begin = g;
    bucket.end = g + 1;
    sync.plan.buckets.push_back(bucket);
  }
  return sync;
}

// The phases alone pick a layer's degrees as if the links and the compute
// stream were its own. When 8 GB of dense gradients are all-reduced while the
// layer's backward runs (their sync is then the critical path, sharing NVLink
// with the all-to-alls and slowing the experts' compute), the co-scheduled
// iteration is faster with one backward piece than with the eight the phase
// alone prefers. With a small sync the phase's own choice stands.
TEST(MoePlanning, CoSchedulingRevisitsDegreesWhereTheSyncCompetes) {
  const cost::CostModel model = h100();
  MoeLayer layer = wideLayer("a");
  layer.shape.tokens = 4096;
  layer.shape.experts = 8;
  MoeRequest request = requestOn(model);
  const int64_t ep = 8;
  MoeRequest alone = request;
  const MoeLayerTime phases = evaluateMoe({layer}, ep, model, alone).best.layers[0];
  EXPECT_EQ(phases.choice.backward, 8);

  request.sync = syncBesideLayer(layer, model.worldGroup(), 1e7);
  MoeEvaluation small = evaluateMoe({layer}, ep, model, request);
  EXPECT_EQ(small.best.layers[0].choice.backward, phases.choice.backward);

  request.sync = syncBesideLayer(layer, model.worldGroup(), 1e9);
  MoeEvaluation large = evaluateMoe({layer}, ep, model, request);
  EXPECT_EQ(large.best.layers[0].choice.backward, 1);
  EXPECT_LT(large.best.iterationUs * (1 + 1e-4),
            moeScheduleUs(*request.sync, {layer}, {phases}, ep, request, model));
}
