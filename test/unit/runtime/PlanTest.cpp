// Plan file: round trip, determinism, and every bad-input rule with its JSON path.
#include "zenrt/Plan.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>

using zenrt::Plan;
using zenrt::PlanError;
using json = nlohmann::ordered_json;

namespace {

/// A small valid plan: three tensors, two buckets (topk with all_gather;
/// none split into reduce_scatter + decoupled all_gather), a full schedule.
Plan samplePlan() {
  Plan plan;
  plan.generator = {"zenopt", "0.1.0"};
  plan.model = {"tiny", "fnv1a:0123456789abcdef"};
  plan.cluster = {"cpu-local", 2};
  plan.strategy = "auto";
  plan.compressor = "auto";
  plan.tensors = {{"fc2.weight", 6, "f32", 0}, {"fc2.bias", 3, "f32", 1}, {"fc1.weight", 8, "f32", 2}};
  zenrt::Bucket first;
  first.id = 0;
  first.tensors = {{"fc2.weight", 0, 6}, {"fc2.bias", 6, 3}};
  first.elements = 9;
  first.bytes = 36;
  first.compression = {zenrt::CompressionMethod::TopK, 0.25, 0, true, zenrt::Device::CPU};
  first.collectives = {{zenrt::CollectiveKind::AllGather, "ring", 1, 1, 0, false, 16}};
  zenrt::Bucket second;
  second.id = 1;
  second.tensors = {{"fc1.weight", 0, 8}};
  second.elements = 8;
  second.bytes = 32;
  second.collectives = {{zenrt::CollectiveKind::ReduceScatter, "ring", 2, 1, 1, false, 32},
                        {zenrt::CollectiveKind::AllGather, "ring", 2, 2, 0, true, 16}};
  plan.buckets = {first, second};
  using zenrt::Phase;
  using zenrt::TaskKind;
  auto task = [](int64_t id, TaskKind kind, const char *name, int64_t bucket, int64_t stream,
                 double start, double duration, std::vector<int64_t> deps, Phase phase,
                 std::vector<std::string> produces) {
    zenrt::Task t;
    t.id = id;
    t.kind = kind;
    t.name = name;
    t.bucket = bucket;
    t.stream = stream;
    t.startUs = start;
    t.durationUs = duration;
    t.deps = std::move(deps);
    t.phase = phase;
    t.produces = std::move(produces);
    return t;
  };
  plan.schedule = {
      task(0, TaskKind::Compute, "forward", -1, 0, 0, 10.5, {}, Phase::Forward, {}),
      task(1, TaskKind::Compute, "fc2.backward", -1, 0, 10.5, 5, {0}, Phase::Backward,
           {"fc2.weight", "fc2.bias"}),
      task(2, TaskKind::Compress, "compress.b0", 0, 0, 15.5, 1, {1}, Phase::Backward, {}),
      task(3, TaskKind::Collective, "all_gather.b0", 0, 1, 16.5, 3.25, {2}, Phase::Backward, {}),
      task(4, TaskKind::Decompress, "decompress.b0", 0, 0, 19.75, 1, {3}, Phase::Backward, {}),
      task(5, TaskKind::Compute, "fc1.backward", -1, 0, 15.5, 7, {1}, Phase::Backward,
           {"fc1.weight"}),
      task(6, TaskKind::Collective, "reduce_scatter.b1", 1, 1, 22.5, 2, {5, 3}, Phase::Backward,
           {}),
      task(7, TaskKind::Compute, "optimizer", -1, 0, 24.5, 1, {4, 6}, Phase::Optimizer, {}),
      task(8, TaskKind::Collective, "all_gather.b1", 1, 2, 24.5, 2, {6}, Phase::NextForward, {}),
  };
  plan.schedule[5].flops = 1234567;
  plan.schedule[5].workUs = 6.5;
  plan.cluster.spec = "{\"gpus_per_node\":8,\"name\":\"x\"}";
  plan.predictions = {26.5, 23.5, 3.0, 23.5, 9.25};
  plan.baselines = {{"ddp", 30.0}, {"nooverlap", 41.0 / 3.0}};
  return plan;
}

/// Applies `edit` to the canonical JSON of the sample plan and returns the error message
/// parsePlan gives, or "" when it accepts the edited text.
std::string errorAfterEdit(const std::function<void(json &)> &edit) {
  json document = json::parse(zenrt::writePlan(samplePlan()));
  edit(document);
  try {
    zenrt::parsePlan(document.dump(2), "plan.json");
  } catch (const PlanError &e) {
    EXPECT_EQ(e.kind, zen::ErrorKind::BadInput);
    return e.what();
  }
  return "";
}

std::string errorForText(const std::string &text) {
  try {
    zenrt::parsePlan(text, "plan.json");
  } catch (const PlanError &e) {
    EXPECT_EQ(e.kind, zen::ErrorKind::BadInput);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Plan, WriteIsDeterministicAndRoundTripsExactly) {
  std::string text = zenrt::writePlan(samplePlan());
  EXPECT_EQ(text, zenrt::writePlan(samplePlan()));
  Plan parsed = zenrt::parsePlan(text, "plan.json");
  EXPECT_EQ(zenrt::writePlan(parsed), text);
  EXPECT_EQ(parsed.baselines.at("nooverlap"), 41.0 / 3.0);  // shortest round-trip formatting
  EXPECT_EQ(parsed.schedule[6].deps, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(parsed.buckets[1].collectives[1].decoupled, true);
  EXPECT_EQ(parsed.buckets[0].compression.method, zenrt::CompressionMethod::TopK);
  EXPECT_EQ(parsed.schedule[1].produces, (std::vector<std::string>{"fc2.weight", "fc2.bias"}));
  EXPECT_EQ(zenrt::planHash(parsed), zenrt::planHash(samplePlan()));
  // Key order is fixed: format_version first, baselines last.
  EXPECT_EQ(text.rfind("{\n  \"format_version\": 1,\n  \"generator\"", 0), 0u);
  EXPECT_EQ(text.back(), '\n');
}

TEST(Plan, HashDistinguishesPlans) {
  Plan other = samplePlan();
  other.buckets[1].collectives[0].chunks = 4;
  other.buckets[1].collectives[1].chunks = 4;
  EXPECT_NE(zenrt::planHash(other), zenrt::planHash(samplePlan()));
  EXPECT_EQ(zenrt::fnv1a64(""), 14695981039346656037ull);
  EXPECT_EQ(zenrt::fnv1a64("a"), 0xaf63dc4c8601ec8cull);
}

TEST(Plan, WriterRefusesNonFiniteAndInvalidPlans) {
  Plan plan = samplePlan();
  plan.predictions.iterationUs = std::numeric_limits<double>::quiet_NaN();
  try {
    zenrt::writePlan(plan);
    FAIL() << "NaN written";
  } catch (const PlanError &e) {
    EXPECT_EQ(e.kind, zen::ErrorKind::Internal);
    EXPECT_NE(std::string(e.what()).find("/predictions/iteration_us: must be a finite number"),
              std::string::npos)
        << e.what();
  }
  plan = samplePlan();
  plan.schedule[2].startUs = std::numeric_limits<double>::infinity();
  EXPECT_THROW(zenrt::writePlan(plan), PlanError);
  plan = samplePlan();
  plan.baselines["wfbp"] = -std::numeric_limits<double>::infinity();
  EXPECT_THROW(zenrt::writePlan(plan), PlanError);
  plan = samplePlan();
  plan.cluster.spec = "{not json";
  EXPECT_THROW(zenrt::writePlan(plan), PlanError);
}

TEST(Plan, FileWriteIsAtomicAndLoadRoundTrips) {
  std::string path = testing::TempDir() + "zenrt_plan_roundtrip.json";
  zenrt::writePlanFile(samplePlan(), path);
  Plan loaded = zenrt::loadPlanFile(path);
  EXPECT_EQ(zenrt::writePlan(loaded), zenrt::writePlan(samplePlan()));
  std::remove(path.c_str());
  try {
    zenrt::writePlanFile(samplePlan(), "/nonexistent-dir/plan.json");
    FAIL() << "write into a missing directory succeeded";
  } catch (const PlanError &e) {
    EXPECT_EQ(e.kind, zen::ErrorKind::Unwritable);
  }
}

TEST(Plan, MissingFileIsUnreadable) {
  try {
    zenrt::loadPlanFile("/nonexistent/plan.json");
    FAIL();
  } catch (const PlanError &e) {
    EXPECT_EQ(e.kind, zen::ErrorKind::Unreadable);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/plan.json"), std::string::npos);
  }
}

TEST(Plan, SyntaxErrorNamesFile) {
  std::string message = errorForText("{\"format_version\": 1,");
  EXPECT_EQ(message.rfind("plan.json: invalid JSON: parse error at line 1, column 22: syntax error", 0), 0u) << message;
}

TEST(Plan, RejectsWrongFormatVersion) {
  EXPECT_EQ(errorAfterEdit([](json &j) { j["format_version"] = 2; }),
            "plan.json: /format_version: unsupported format version 2 (this runtime reads 1)");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["format_version"] = "1"; }),
            "plan.json: /format_version: must be an integer");
}

TEST(Plan, RejectsMissingField) {
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][1]["collectives"][0].erase("chunks"); }),
            "plan.json: /buckets/1/collectives/0/chunks: missing field");
  EXPECT_EQ(errorAfterEdit([](json &j) { j.erase("predictions"); }),
            "plan.json: /predictions: missing field");
}

TEST(Plan, RejectsUnknownField) {
  EXPECT_EQ(errorAfterEdit([](json &j) { j["schedule"][3]["colour"] = "red"; }),
            "plan.json: /schedule/3/colour: unknown field");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["extra"] = 1; }), "plan.json: /extra: unknown field");
}

TEST(Plan, RejectsDuplicateKeys) {
  std::string text = zenrt::writePlan(samplePlan());
  // Duplicate "chunks" inside /buckets/1/collectives/0.
  std::string needle = "\"chunks\": 2,";
  size_t at = text.find(needle);
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "\"chunks\": 3, ");
  EXPECT_EQ(errorForText(text), "plan.json: /buckets/1/collectives/0/chunks: duplicate key");
  // Top-level duplicate.
  std::string top = zenrt::writePlan(samplePlan());
  top.insert(2, "\"strategy\": \"ddp\", ");
  EXPECT_EQ(errorForText(top), "plan.json: /strategy: duplicate key");
}

TEST(Plan, RejectsNonFiniteNumbers) {
  // JSON has no NaN token; an overflowing literal is how infinity sneaks in.
  std::string text = zenrt::writePlan(samplePlan());
  std::string needle = "\"iteration_us\": 26.5";
  size_t at = text.find(needle);
  ASSERT_NE(at, std::string::npos);
  std::string overflow = text;
  overflow.replace(at, needle.size(), "\"iteration_us\": 1e999");
  EXPECT_EQ(errorForText(overflow), "plan.json: /predictions/iteration_us: invalid JSON: number "
                                    "overflow parsing '1e999'");
  std::string nan = text;
  nan.replace(at, needle.size(), "\"iteration_us\": NaN");
  EXPECT_EQ(errorForText(nan).rfind("plan.json: /predictions/iteration_us: invalid JSON: ", 0), 0u)
      << errorForText(nan);
  EXPECT_EQ(errorAfterEdit([](json &j) { j["predictions"]["compute_us"] = -1.0; }),
            "plan.json: /predictions/compute_us: must be >= 0");
}

TEST(Plan, RejectsUnknownTensorInBucket) {
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][1]["tensors"][0]["name"] = "fc9.weight"; }),
            "plan.json: /buckets/1/tensors/0/name: unknown tensor 'fc9.weight'");
}

TEST(Plan, RejectsTensorInTwoBuckets) {
  EXPECT_EQ(errorAfterEdit([](json &j) {
              j["buckets"][1]["tensors"].push_back(
                  {{"name", "fc2.bias"}, {"offset", 8}, {"elements", 3}});
              j["buckets"][1]["elements"] = 11;
              j["buckets"][1]["bytes"] = 44;
            }),
            "plan.json: /buckets/1/tensors/1/name: tensor 'fc2.bias' is already in bucket 0");
}

TEST(Plan, RejectsTensorInNoBucket) {
  EXPECT_EQ(errorAfterEdit([](json &j) {
              j["tensors"].push_back(
                  {{"name", "extra"}, {"elements", 1}, {"dtype", "f32"}, {"ready_order", 3}});
            }),
            "plan.json: /tensors/3/name: tensor 'extra' is in no bucket");
}

TEST(Plan, RejectsZeroChunks) {
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][0]["collectives"][0]["chunks"] = 0; }),
            "plan.json: /buckets/0/collectives/0/chunks: must be >= 1");
}

TEST(Plan, RejectsInconsistentOffsetsAndSizes) {
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][0]["tensors"][1]["offset"] = 5; }),
            "plan.json: /buckets/0/tensors/1/offset: must be 6 (tensors are packed contiguously "
            "in order)");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][0]["tensors"][1]["elements"] = 4; }),
            "plan.json: /buckets/0/tensors/1/elements: must equal the tensor's elements 3");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][0]["elements"] = 10; }),
            "plan.json: /buckets/0/elements: must equal the sum of its tensors' elements 9");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][0]["bytes"] = 9; }),
            "plan.json: /buckets/0/bytes: must equal elements * 4 = 36");
}

TEST(Plan, RejectsBadDependencies) {
  EXPECT_EQ(errorAfterEdit([](json &j) { j["schedule"][2]["deps"] = {42}; }),
            "plan.json: /schedule/2/deps/0: unknown task 42 (deps must name earlier tasks, or "
            "next_forward tasks of the previous iteration)");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["schedule"][2]["deps"] = {4}; }),
            "plan.json: /schedule/2/deps/0: unknown task 4 (deps must name earlier tasks, or "
            "next_forward tasks of the previous iteration)");
  // A later task is a valid dependency only when it is a next_forward task.
  EXPECT_EQ(errorAfterEdit([](json &j) {
              j["schedule"][4]["phase"] = "next_forward";
              j["schedule"][2]["deps"] = {4};
            }),
            "");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["schedule"][6]["deps"] = {5, 5}; }),
            "plan.json: /schedule/6/deps/1: duplicate dependency 5");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["schedule"][3]["id"] = 1; }),
            "plan.json: /schedule/3/id: duplicate task id 1");
}

TEST(Plan, ComputeDtypeIsOptionalAndChecked) {
  // Written always; fp32 when a file (written before the field existed) has none.
  Plan mixed = samplePlan();
  mixed.computeDtype = "bf16";
  std::string text = zenrt::writePlan(mixed);
  EXPECT_NE(text.find("\"compressor\": \"auto\",\n  \"compute_dtype\": \"bf16\","),
            std::string::npos);
  EXPECT_EQ(zenrt::parsePlan(text, "plan.json").computeDtype, "bf16");
  EXPECT_NE(zenrt::planHash(mixed), zenrt::planHash(samplePlan()));
  EXPECT_EQ(errorAfterEdit([](json &j) { j.erase("compute_dtype"); }), "");
  json document = json::parse(zenrt::writePlan(samplePlan()));
  document.erase("compute_dtype");
  EXPECT_EQ(zenrt::parsePlan(document.dump(), "plan.json").computeDtype, "fp32");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["compute_dtype"] = "int8"; }),
            "plan.json: /compute_dtype: unknown value 'int8' (expected fp32|tf32|bf16|fp16)");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["compute_dtype"] = 16; }),
            "plan.json: /compute_dtype: must be a string");
  Plan bad = samplePlan();
  bad.computeDtype = "fp64";
  EXPECT_THROW(zenrt::writePlan(bad), PlanError);
}

TEST(Plan, RejectsBadEnumsAndCompressionParameters) {
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][0]["compression"]["method"] = "zip"; }),
            "plan.json: /buckets/0/compression/method: unknown value 'zip' (expected "
            "none|fp16|bf16|int8|topk|randomk|sign|powersgd)");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][0]["compression"]["ratio"] = 0.0; }),
            "plan.json: /buckets/0/compression/ratio: must be in (0, 1] for topk");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][1]["compression"]["rank"] = 2; }),
            "plan.json: /buckets/1/compression/rank: must be 0 for none");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["schedule"][0]["phase"] = "sideways"; }),
            "plan.json: /schedule/0/phase: unknown value 'sideways' (expected "
            "forward|backward|optimizer|next_forward)");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][0]["collectives"][0]["algorithm"] = "x"; }),
            "plan.json: /buckets/0/collectives/0/algorithm: unknown algorithm 'x' (expected "
            "ring|tree|hierarchical|direct)");
  // The shared vocabulary has send_recv; the plan format does not.
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][0]["collectives"][0]["op"] = "send_recv"; }),
            "plan.json: /buckets/0/collectives/0/op: unknown value 'send_recv' (expected "
            "all_reduce|reduce_scatter|all_gather|all_to_all|broadcast)");
}

TEST(Plan, RejectsUnsupportedCollectiveSequences) {
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][0]["collectives"][0]["op"] = "all_reduce"; }),
            "plan.json: /buckets/0/collectives: unsupported collectives for compression 'topk' "
            "(expected [all_gather])");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][1]["collectives"][1]["chunks"] = 3; }),
            "plan.json: /buckets/1/collectives/1/chunks: must equal the first collective's "
            "chunks 2");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["buckets"][0]["collectives"][0]["decoupled"] = true; }),
            "");  // a sparse all_gather may be decoupled too
}

TEST(Plan, RejectsScheduleInconsistentWithBuckets) {
  EXPECT_EQ(errorAfterEdit([](json &j) { j["schedule"][3]["stream"] = 2; }),
            "plan.json: /schedule/3/stream: must equal the stream 1 of collective 0 of bucket 0");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["schedule"].erase(8); }),
            "plan.json: /buckets/1/collectives: has 2 collectives but the schedule has 1 "
            "collective tasks for this bucket");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["schedule"][1]["produces"] = {"fc1.weight"}; }),
            "plan.json: /schedule/5/produces/0: tensor 'fc1.weight' is produced by two tasks");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["schedule"][0]["bucket"] = 0; }),
            "plan.json: /schedule/0/bucket: must be -1 for a compute task");
}

TEST(Plan, RejectsBadTensors) {
  EXPECT_EQ(errorAfterEdit([](json &j) { j["tensors"][1]["dtype"] = "f16"; }),
            "plan.json: /tensors/1/dtype: unsupported dtype 'f16' (expected f32)");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["tensors"][1]["ready_order"] = 0; }),
            "plan.json: /tensors/1/ready_order: ready_order 0 is used by two tensors");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["tensors"][1]["elements"] = 1.5; }),
            "plan.json: /tensors/1/elements: must be an integer");
  EXPECT_EQ(errorAfterEdit([](json &j) { j["cluster"]["world_size"] = 0; }),
            "plan.json: /cluster/world_size: must be >= 1");
}

TEST(Plan, BaselineKeysAreEscapedInPaths) {
  EXPECT_EQ(errorAfterEdit([](json &j) { j["baselines"]["a/b"] = "fast"; }),
            "plan.json: /baselines/a~1b: must be a number");
}

// docs/plan-format.md "sparse_tensors": optional, round-trips, and every field is checked
// with its JSON path.
// A sparse_sync task names its sparse tensor, once, and belongs to no bucket; no other task
// names one.
TEST(Plan, SparseSyncTasksAreChecked) {
  Plan sparse = samplePlan();
  zenrt::SparseTensor table;
  table.name = "embedding.weight";
  table.rows = 1000;
  table.rowElements = 8;
  table.scheme = zen::vocab::SparseScheme::Balanced;
  table.statistics = {0.01, {1.0, 1.5}, 0.5, "model"};
  sparse.sparseTensors = {table};
  zenrt::Task sync;
  sync.id = 1000;
  sync.kind = zenrt::TaskKind::SparseSync;
  sync.name = "sparse_all_reduce.embedding.weight";
  sync.sparseTensor = 0;
  sparse.schedule.push_back(sync);
  const std::string text = zenrt::writePlan(sparse);
  const Plan parsed = zenrt::parsePlan(text, "plan.json");
  EXPECT_EQ(zenrt::writePlan(parsed), text);
  EXPECT_EQ(parsed.schedule.back().kind, zenrt::TaskKind::SparseSync);
  EXPECT_EQ(parsed.schedule.back().sparseTensor, 0);

  const size_t last = parsed.schedule.size() - 1;
  auto errorOf = [&](const std::function<void(json &)> &edit) {
    json document = json::parse(text);
    edit(document["schedule"]);
    try {
      zenrt::parsePlan(document.dump(2), "plan.json");
    } catch (const PlanError &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string at = "plan.json: /schedule/" + std::to_string(last);
  EXPECT_NE(errorOf([&](json &s) { s[last]["sparse_tensor"] = 1; }).find(at + "/sparse_tensor"),
            std::string::npos);
  EXPECT_EQ(errorOf([&](json &s) { s[last]["bucket"] = 0; }),
            at + "/bucket: must be -1 for a sparse_sync task");
  EXPECT_EQ(errorOf([&](json &s) {
              json twin = s[last];
              twin["id"] = 1001;
              s.push_back(twin);
            }),
            "plan.json: /schedule/" + std::to_string(last + 1) +
                "/sparse_tensor: sparse tensor 0 has two sparse_sync tasks");
  EXPECT_EQ(errorOf([&](json &s) { s[0]["sparse_tensor"] = 0; }),
            "plan.json: /schedule/0/sparse_tensor: is only for sparse_sync tasks");
}

TEST(Plan, SparseTensorsRoundTripAndAreChecked) {
  Plan sparse = samplePlan();
  zenrt::SparseTensor table;
  table.name = "embedding.weight";
  table.rows = 200000;
  table.rowElements = 64;
  table.scheme = zen::vocab::SparseScheme::OmniReduce;
  table.blockRows = 256;
  table.statistics = {0.0113, {1.0, 1.9}, 0.61, "model"};
  table.predictedUs = 812.5;
  sparse.sparseTensors = {table};
  const std::string text = zenrt::writePlan(sparse);
  const Plan parsed = zenrt::parsePlan(text, "plan.json");
  EXPECT_EQ(zenrt::writePlan(parsed), text);
  ASSERT_EQ(parsed.sparseTensors.size(), 1u);
  EXPECT_EQ(parsed.sparseTensors[0].blockRows, 256);
  EXPECT_EQ(parsed.sparseTensors[0].statistics.gamma, (std::vector<double>{1.0, 1.9}));
  EXPECT_NE(zenrt::planHash(parsed), zenrt::planHash(samplePlan()));
  EXPECT_EQ(text.find("dense_threshold"), std::string::npos);

  auto errorOf = [&](const std::function<void(json &)> &edit) {
    json document = json::parse(text);
    edit(document["sparse_tensors"][0]);
    try {
      zenrt::parsePlan(document.dump(2), "plan.json");
    } catch (const PlanError &e) {
      EXPECT_EQ(e.kind, zen::ErrorKind::BadInput);
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string at = "plan.json: /sparse_tensors/0/";
  EXPECT_EQ(errorOf([](json &t) { t["scheme"] = "zen"; }),
            at + "scheme: unknown value 'zen' (expected "
                 "dense|agsparse|sparcml|omnireduce|balanced|hierarchical)");
  EXPECT_EQ(errorOf([](json &t) { t.erase("block_rows"); }), at + "block_rows: missing field");
  EXPECT_EQ(errorOf([](json &t) { t["scheme"] = "balanced"; }), at + "block_rows: unknown field");
  EXPECT_EQ(errorOf([](json &t) { t["block_rows"] = 0; }), at + "block_rows: must be >= 1");
  EXPECT_EQ(errorOf([](json &t) {
              t["scheme"] = "sparcml";
              t.erase("block_rows");
              t["dense_threshold"] = 1.5;
            }),
            at + "dense_threshold: must be in (0, 1]");
  EXPECT_EQ(errorOf([](json &t) { t["rows"] = 0; }), at + "rows: must be >= 1");
  EXPECT_EQ(errorOf([](json &t) { t["row_elements"] = int64_t(1) << 40; }),
            at + "row_elements: must be <= 351843720");
  EXPECT_EQ(errorOf([](json &t) { t["name"] = "fc1.weight"; }),
            at + "name: 'fc1.weight' is also a dense tensor of /tensors");
  EXPECT_EQ(errorOf([](json &t) { t["statistics"]["gamma"] = {1.0, 1.5, 1.5}; }),
            at + "statistics/gamma: must hold 1 to 2 values (1, 2, 4, ... up to 2 ranks merged)");
  EXPECT_EQ(errorOf([](json &t) { t["statistics"]["hash_skew"] = 1.5; }),
            at + "statistics/hash_skew: must be in [0, 1]");
  EXPECT_EQ(errorOf([](json &t) { t["statistics"]["block_gamma"] = {1.0, 3.0}; }),
            at + "statistics/block_gamma/1: must be in [1, 2]");
  EXPECT_EQ(errorOf([](json &t) { t["statistics"]["gamma"][1] = 2.5; }),
            at + "statistics/gamma/1: must be in [1, 2] (2 ranks merged)");
  EXPECT_EQ(errorOf([](json &t) { t["statistics"]["density"] = -0.1; }),
            at + "statistics/density: must be in [0, 1]");
  EXPECT_EQ(errorOf([](json &t) { t["statistics"]["source"] = "guess"; }),
            at + "statistics/source: unknown value 'guess' (expected model|measured)");
  EXPECT_EQ(errorOf([](json &t) { t["statistics"]["extra"] = 1; }),
            at + "statistics/extra: unknown field");
  EXPECT_EQ(errorOf([](json &t) { t["predicted_us"] = -1; }), at + "predicted_us: must be >= 0");
}

namespace {
/// A `parallel` section of tp 2 x pp 2 x dp 2, interleaved over 2 virtual stages, with MoE
/// blocks over ep 2: every field readParallelSection checks.
json parallelSection() {
  json stage = {{"forward_us", 10.0}, {"backward_us", 20.0}, {"tensor_comm_us", 3.0},
                {"p2p_us", 1.5}, {"zero_comm_us", 0.0}};
  json second = stage;
  second["forward_us"] = 11.0;
  json memory = json::object();
  for (const char *key : {"per_gpu_bytes", "capacity_bytes", "weights_bytes", "gradients_bytes",
                          "optimizer_bytes", "activations_bytes", "buffers_bytes", "reserve_bytes",
                          "stage"})
    memory[key] = 0;
  json section = {{"tp", 2}, {"pp", 2}, {"dp", 2}, {"micro_batch", 4}, {"micro_batches", 8},
                  {"zero", 1}, {"sequence_parallel", true}, {"recompute", "selective"},
                  {"schedule", "interleaved:2"}, {"memory", memory},
                  {"baselines_not_fitting", json::object()}, {"replicated", json::array()},
                  {"stages", {stage, second}}};
  for (const char *key : {"iteration_us", "bubble_us", "tensor_comm_us", "pipeline_comm_us",
                          "data_comm_us", "tflops_per_gpu", "model_tflops_per_gpu", "mfu"})
    section[key] = 1.0;
  section["decomposition"] = {{"attention", {{"forward", 2}, {"backward", 4}}},
                              {"mlp", {{"forward", 1}, {"backward", 8}}}};
  section["moe"] = {{"ep", 2},     {"experts", 8},  {"top_k", 2},   {"tokens", 64},
                    {"capacity", 16}, {"forward", 2}, {"backward", 2}, {"blocks", {1, 3}},
                    {"all_to_all", "flat"}};
  return section;
}
}  // namespace

TEST(ParallelSection, ReadsEveryDecisionOnceIntoTheTypedConfiguration) {
  const zenrt::ParallelConfiguration config =
      zenrt::readParallelSection(parallelSection().dump(), "p.json");
  EXPECT_EQ(config.tp, 2);
  EXPECT_EQ(config.pp, 2);
  EXPECT_EQ(config.dp, 2);
  EXPECT_EQ(config.gpus(), 8);
  EXPECT_EQ(config.zero, 1);
  EXPECT_TRUE(config.sequenceParallel);
  EXPECT_EQ(config.recompute, zen::vocab::Recompute::Selective);
  EXPECT_EQ(config.microBatch, 4);
  EXPECT_EQ(config.microBatches, 8);
  EXPECT_EQ(config.virtualStages, 2);
  EXPECT_EQ(config.chunks.attentionForward, 2);
  EXPECT_EQ(config.chunks.attentionBackward, 4);
  EXPECT_EQ(config.chunks.mlpForward, 1);
  EXPECT_EQ(config.chunks.mlpBackward, 8);
  EXPECT_EQ(config.ep, 2);
  ASSERT_EQ(config.stageTimes.size(), 2u);
  EXPECT_EQ(config.stageTimes[1].forwardUs, 11.0);
  EXPECT_EQ(config.stageTimes[0].backwardUs, 20.0);
  EXPECT_EQ(config.stageTimes[0].tensorCommUs, 3.0);
  EXPECT_EQ(config.stageTimes[0].p2pUs, 1.5);
  json dense = parallelSection();
  dense.erase("moe");
  dense["schedule"] = "1f1b";
  const zenrt::ParallelConfiguration plain = zenrt::readParallelSection(dense.dump(), "p.json");
  EXPECT_EQ(plain.ep, 0);
  EXPECT_EQ(plain.virtualStages, 1);
}

TEST(ParallelSection, RefusesByPathButLeavesTheWorldSizeToTheValidator) {
  auto errorOf = [](const std::function<void(json &)> &edit) {
    json section = parallelSection();
    edit(section);
    try {
      zenrt::readParallelSection(section.dump(), "p.json");
    } catch (const PlanError &e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(errorOf([](json &) {}), "accepted");
  EXPECT_EQ(errorOf([](json &s) { s["schedule"] = "interleaved:1"; }),
            "p.json: /parallel/schedule: must be 1f1b or interleaved:V with V >= 2");
  EXPECT_EQ(errorOf([](json &s) { s["recompute"] = "some"; }),
            "p.json: /parallel/recompute: must be none, selective or full");
  EXPECT_EQ(errorOf([](json &s) { s["decomposition"]["mlp"]["backward"] = 0; }),
            "p.json: /parallel/decomposition/mlp/backward: must be an integer from 1 to 1048576");
  EXPECT_EQ(errorOf([](json &s) { s["stages"].erase(1); }),
            "p.json: /parallel/stages: must hold one program per pipeline stage (pp)");
  EXPECT_EQ(errorOf([](json &s) { s["moe"]["ep"] = 3; }),
            "p.json: /parallel/moe/ep: must be an integer from 1 to 2");
  // 8 GPUs; a plan of another world size is refused by validatePlan, not by the reader.
  EXPECT_EQ(errorOf([](json &s) { s["dp"] = 4; }), "accepted");
}
