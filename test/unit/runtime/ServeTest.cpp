//===- ServeTest.cpp - the serving engine against the unsharded reference --------------===//
//
// Run under mpirun at np 1, 2 and 4 (test/unit/runtime/CMakeLists.txt): the engine runs at
// tp = the world size, and every answer must equal referenceDecode() bit for bit, whatever
// the batch it was decoded in (requests of different lengths submitted at different times,
// more of them than max_batch, and more than the KV cache holds at once).
//
//===----------------------------------------------------------------------===//
#include "MpiTestMain.h"
#include "zenrt/Plan.h"
#include "zenrt/Runtime.h"
#include "zenrt/Serve.h"
#include "zenrt/zenrt.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace zenrt::serve;

int worldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}
int worldSize() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

/// kv_heads 4 (every tp of the test divides it), an ffn that does not cut evenly into the 4
/// slices, a vocabulary that does not split evenly over the ranks.
Config smallConfig() {
  Config config;
  config.model.layers = 2;
  config.model.hidden = 64;
  config.model.heads = 8;
  config.model.kvHeads = 4;
  config.model.ffn = 102;
  config.model.vocab = 97;
  config.tp = worldSize();
  config.maxBatch = 3;
  config.maxSequence = 48;
  config.kvBlockTokens = 8;
  config.kvCacheBlocks = 14;  // two requests of max_sequence at most
  return config;
}

struct Case {
  std::vector<int32_t> prompt;
  int64_t maxNew;
  int delayMs;  // after the previous submission
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int k = 0; k < 9; ++k) {
    Case c;
    const int length = 1 + (k * 7) % 19;
    for (int i = 0; i < length; ++i)
      c.prompt.push_back(int32_t((k * 31 + i * 13 + 5) % 97));
    c.maxNew = 1 + (k * 5) % 17;
    c.delayMs = (k % 3) * 15;
    out.push_back(c);
  }
  return out;
}

/// Every rank runs the engine; rank 0 submits `cases` from a thread (with their delays) and
/// checks every answer and streamed token against the reference.
void serveAndCheck(const Config &config, const std::vector<Case> &all, bool burst) {
  Options options;
  options.seed = 7;
  options.timeoutSeconds = 60;
  Engine engine(config, options);
  std::thread client;
  std::vector<std::vector<int32_t>> streamed(all.size());
  std::mutex streamedMutex;
  std::vector<Result> results(all.size());
  std::string failure;
  if (engine.rank() == 0) {
    client = std::thread([&] {
      try {
        std::vector<std::future<Result>> futures;
        for (size_t k = 0; k < all.size(); ++k) {
          if (!burst)
            std::this_thread::sleep_for(std::chrono::milliseconds(all[k].delayMs));
          futures.push_back(engine.submit(all[k].prompt, all[k].maxNew, [&, k](int32_t token) {
            std::lock_guard<std::mutex> lock(streamedMutex);
            streamed[k].push_back(token);
          }));
        }
        for (size_t k = 0; k < all.size(); ++k)
          results[k] = futures[k].get();
      } catch (const std::exception &e) {
        failure = e.what();
      }
      engine.shutdown();
    });
  }
  engine.run();
  if (engine.rank() != 0)
    return;
  client.join();
  ASSERT_EQ(failure, "");
  std::set<std::vector<int32_t>> distinct;
  for (size_t k = 0; k < all.size(); ++k) {
    std::vector<float> logits;
    const std::vector<int32_t> expected =
        referenceDecode(config.model, options.seed, all[k].prompt, all[k].maxNew, &logits);
    EXPECT_EQ(results[k].tokens, expected) << "request " << k << " at tp " << config.tp << " pp " << config.pp;
    // Bit for bit: the winning logits are equal floats, not merely the same argmax.
    ASSERT_EQ(results[k].logits.size(), logits.size());
    for (size_t t = 0; t < logits.size(); ++t)
      EXPECT_EQ(std::memcmp(&results[k].logits[t], &logits[t], sizeof(float)), 0)
          << "request " << k << " token " << t << ": " << results[k].logits[t] << " vs " << logits[t]
          << " at tp " << config.tp << " pp " << config.pp;
    EXPECT_EQ(streamed[k], expected) << "request " << k << " streamed";
    EXPECT_GE(results[k].ttftUs, 0.0);
    EXPECT_GE(results[k].tpotUs, 0.0);
    distinct.insert(expected);
  }
  // The model is not degenerate: different prompts give different answers.
  EXPECT_GE(distinct.size(), all.size() / 2);
  const Engine::Stats stats = engine.stats();
  EXPECT_EQ(stats.requests, int64_t(all.size()));
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(stats.waiting, 0);
  EXPECT_EQ(stats.freeBlocks, config.kvCacheBlocks);
  int64_t generated = 0;
  for (const Case &c : all)
    generated += c.maxNew;
  EXPECT_EQ(stats.generatedTokens, generated);
}

TEST(Serve, StaggeredRequestsEqualTheReference) {
  serveAndCheck(smallConfig(), cases(), /*burst=*/false);
}

TEST(Serve, QueuedBeyondMaxBatchEqualTheReference) {
  Config config = smallConfig();
  config.maxBatch = 2;
  serveAndCheck(config, cases(), /*burst=*/true);
}

TEST(Serve, OneRequestAtATimeEqualsTheReference) {
  Config config = smallConfig();
  config.maxBatch = 1;
  config.kvCacheBlocks = 6;
  std::vector<Case> all = cases();
  all.resize(4);
  serveAndCheck(config, all, /*burst=*/true);
}

/// Pipeline stages: every split of the world into tp x pp (4 layers, so pp 4 has a layer per
/// stage) gives the reference's answers.
TEST(Serve, PipelineStagesEqualTheReference) {
  for (int pp = 2; pp <= worldSize(); pp *= 2) {
    Config config = smallConfig();
    config.model.layers = 4;
    config.pp = pp;
    config.tp = worldSize() / pp;
    std::vector<Case> all = cases();
    all.resize(6);
    serveAndCheck(config, all, /*burst=*/pp == 2);
  }
}

TEST(Serve, TiedEmbeddingsEqualTheReference) {
  Config config = smallConfig();
  config.model.tiedEmbeddings = true;
  std::vector<Case> all = cases();
  all.resize(5);
  serveAndCheck(config, all, /*burst=*/true);
  const std::vector<int32_t> prompt{1, 2, 3};
  Model untied = config.model;
  untied.tiedEmbeddings = false;
  EXPECT_NE(referenceDecode(config.model, 7, prompt, 12), referenceDecode(untied, 7, prompt, 12));
}

/// A plan's kv_cache_blocks is what a GPU's memory holds (hundreds of thousands of blocks):
/// the engine allocates the blocks max_batch requests can use and reports the rest free.
TEST(Serve, HugeCacheAllocatesWhatTheBatchUses) {
  Config config = smallConfig();
  config.kvCacheBlocks = int64_t(1) << 30;  // 1.5 TiB of keys and values per layer if allocated
  std::vector<Case> all = cases();
  all.resize(4);
  serveAndCheck(config, all, /*burst=*/true);
}

TEST(Serve, ReferenceIsDeterministicAndSeeded) {
  const Model model = smallConfig().model;
  const std::vector<int32_t> prompt{1, 2, 3, 4};
  EXPECT_EQ(referenceDecode(model, 3, prompt, 12), referenceDecode(model, 3, prompt, 12));
  EXPECT_NE(referenceDecode(model, 3, prompt, 12), referenceDecode(model, 4, prompt, 12));
  // A longer decode extends a shorter one.
  const auto shorter = referenceDecode(model, 3, prompt, 5), longer = referenceDecode(model, 3, prompt, 12);
  EXPECT_EQ(shorter, std::vector<int32_t>(longer.begin(), longer.begin() + 5));
}

int statusOf(const std::function<void()> &body) {
  try {
    body();
  } catch (const zenrt::Error &e) {
    return e.status;
  }
  return ZENRT_OK;
}

TEST(Serve, SubmitRejectsBadRequests) {
  Options options;
  options.timeoutSeconds = 60;
  const Config config = smallConfig();
  Engine engine(config, options);
  if (engine.rank() == 0) {
    EXPECT_EQ(statusOf([&] { engine.submit({}, 4); }), ZENRT_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(statusOf([&] { engine.submit({1, 97}, 4); }), ZENRT_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(statusOf([&] { engine.submit({1, -1}, 4); }), ZENRT_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(statusOf([&] { engine.submit({1, 2}, 0); }), ZENRT_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(statusOf([&] { engine.submit({1, 2}, 47); }), ZENRT_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(statusOf([&] { engine.submit({1, 2}, INT64_MAX); }), ZENRT_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(statusOf([&] { engine.submit({1, 2}, INT64_MAX - 1); }), ZENRT_ERR_INVALID_ARGUMENT);
    try {
      engine.submit(std::vector<int32_t>(40, 1), 9);
      ADD_FAILURE() << "too long accepted";
    } catch (const zenrt::Error &e) {
      EXPECT_NE(std::string(e.what()).find("exceeds max_sequence 48"), std::string::npos) << e.what();
    }
    auto good = engine.submit({1, 2}, 46);  // exactly max_sequence
    engine.shutdown();
    EXPECT_EQ(statusOf([&] { engine.submit({1}, 1); }), ZENRT_ERR_STATE);
    engine.run();
    EXPECT_EQ(good.get().tokens, referenceDecode(config.model, options.seed, {1, 2}, 46));
  } else {
    EXPECT_EQ(statusOf([&] { engine.submit({1}, 1); }), ZENRT_ERR_STATE);
    engine.run();
  }
}

TEST(Serve, WrongWorldSizeIsAMismatch) {
  Config config = smallConfig();
  config.tp = worldSize() == 4 ? 2 : 4;
  EXPECT_EQ(statusOf([&] { Engine engine(config, Options()); }), ZENRT_ERR_MISMATCH);
}

//===-- configOf ------------------------------------------------------------===//

std::string planText(const std::string &inference, int64_t worldSize = 2) {
  return R"({"format_version": 1, "generator": {"name": "test", "version": "1"},
    "model": {"name": "llama", "hash": ""},
    "cluster": {"name": "cpu-local", "world_size": )" +
         std::to_string(worldSize) + R"(},
    "strategy": "serve", "compressor": "none", "tensors": [], "buckets": [], "schedule": [],
    "predictions": {"iteration_us": 0, "compute_us": 0, "exposed_comm_us": 0,
                    "lower_bound_us": 0, "comm_bound_us": 0},
    "baselines": {}, "inference": )" +
         inference + "}";
}

std::string inferenceText(const std::string &replace = "", const std::string &with = "") {
  std::string text = R"({"model": {"family": "llama", "layers": 2, "hidden": 64, "heads": 4,
    "kv_heads": 2, "ffn": 128, "vocab": 97, "mlp": "swiglu", "norm": "rmsnorm",
    "positions": "rotary"}, "prefill": {"tp": 2, "pp": 1}, "decode": {"tp": 2, "pp": 1},
    "max_batch": 4, "max_sequence": 64, "kv_block_tokens": 16, "kv_cache_blocks": 32,
    "ttft_us": 100.5})";
  if (!replace.empty()) {
    const size_t at = text.find(replace);
    EXPECT_NE(at, std::string::npos) << replace;
    text.replace(at, replace.size(), with);
  }
  return text;
}

std::string configError(const std::string &inference, int64_t worldSize = 2) {
  try {
    configOf(zenrt::parsePlan(planText(inference, worldSize), "p.json"), "p.json");
  } catch (const zenrt::PlanError &e) {
    EXPECT_EQ(e.kind, zen::ErrorKind::BadInput);
    return e.what();
  }
  return "";
}

TEST(ServeConfig, ReadsTheInferenceSection) {
  const Config config = configOf(zenrt::parsePlan(planText(inferenceText()), "p.json"), "p.json");
  EXPECT_EQ(config.model.layers, 2);
  EXPECT_EQ(config.model.hidden, 64);
  EXPECT_EQ(config.model.heads, 4);
  EXPECT_EQ(config.model.kvHeads, 2);
  EXPECT_EQ(config.model.ffn, 128);
  EXPECT_EQ(config.model.vocab, 97);
  EXPECT_EQ(config.tp, 2);
  EXPECT_EQ(config.pp, 1);
  EXPECT_EQ(config.maxBatch, 4);
  EXPECT_EQ(config.maxSequence, 64);
  EXPECT_EQ(config.kvBlockTokens, 16);
  EXPECT_EQ(config.kvCacheBlocks, 32);
  const Config staged = configOf(
      zenrt::parsePlan(planText(inferenceText(R"("prefill": {"tp": 2, "pp": 1}, "decode": {"tp": 2, "pp": 1})",
                                              R"("prefill": {"tp": 1, "pp": 2}, "decode": {"tp": 1, "pp": 2})")),
                       "p.json"),
      "p.json");
  EXPECT_EQ(staged.tp, 1);
  EXPECT_EQ(staged.pp, 2);
  // As zenopt --serve writes a causal decoder: family gpt, tied embeddings, no MoE blocks,
  // colocated prefill.
  const Config written = configOf(
      zenrt::parsePlan(planText(inferenceText(R"("family": "llama")",
                                              R"("family": "gpt", "tied_embeddings": true, "moe_blocks": 0, "parameters": 123)")),
                       "p.json"),
      "p.json");
  EXPECT_TRUE(written.model.tiedEmbeddings);
  EXPECT_FALSE(config.model.tiedEmbeddings);
}

TEST(ServeConfig, ErrorsNameTheField) {
  auto has = [](const std::string &message, const std::string &part) {
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  has(configError(inferenceText(R"("mlp": "swiglu")", R"("mlp": "gelu")")),
      "p.json: /inference/model/mlp: 'gelu'");
  has(configError(inferenceText(R"("norm": "rmsnorm")", R"("norm": "layernorm")")),
      "p.json: /inference/model/norm: ");
  has(configError(inferenceText(R"("positions": "rotary")", R"("positions": "learned")")),
      "p.json: /inference/model/positions: ");
  has(configError(inferenceText(R"("family": "llama")", R"("family": "bert")")),
      "p.json: /inference/model/family: \"bert\": the serving engine runs causal decoders only");
  has(configError(inferenceText(R"("family": "llama")", R"("family": "llama", "moe_blocks": 2)")),
      "p.json: /inference/model/moe_blocks: 2: the serving engine runs dense decoders only");
  has(configError(inferenceText(R"("max_batch": 4,)", R"("max_batch": 4, "disaggregated": true,)")),
      "p.json: /inference/disaggregated: true: disaggregated prefill is not executed");
  has(configError(inferenceText(R"("family": "llama")", R"("family": "llama", "tied_embeddings": 1)")),
      "p.json: /inference/model/tied_embeddings: must be true or false");
  has(configError(inferenceText(R"("prefill": {"tp": 2, "pp": 1})", R"("prefill": {"tp": 1, "pp": 1})")),
      "p.json: /inference/prefill: tp 1 x pp 1 differs from decode's tp 2 x pp 1");
  has(configError(inferenceText(R"("prefill": {"tp": 2, "pp": 1}, "decode": {"tp": 2, "pp": 1})",
                                R"("prefill": {"tp": 1, "pp": 3}, "decode": {"tp": 1, "pp": 3})"), 3),
      "p.json: /inference/decode/pp: is 3: more pipeline stages than the 2 layers");
  has(configError(inferenceText(R"("prefill": {"tp": 2, "pp": 1}, "decode": {"tp": 2, "pp": 1})",
                                R"("prefill": {"tp": 4, "pp": 1}, "decode": {"tp": 4, "pp": 1})"), 4),
      "p.json: /inference/decode/tp: 4 does not divide the 2 kv heads");
  has(configError(inferenceText(R"("kv_heads": 2)", R"("kv_heads": 3)")),
      "p.json: /inference/model/kv_heads: 3 do not divide the 4 heads");
  has(configError(inferenceText(R"("layers": 2)", R"("layers": "2")")),
      "p.json: /inference/model/layers: must be an integer");
  has(configError(inferenceText(R"("max_batch": 4,)", "")), "p.json: /inference/max_batch: missing field");
  has(configError(inferenceText(R"("kv_cache_blocks": 32)", R"("kv_cache_blocks": 3)")),
      "p.json: /inference/kv_cache_blocks: 3 blocks of 16 tokens do not hold one request of 64");
  has(configError(inferenceText(), 4), "p.json: /cluster/world_size: 4 ranks, but decode runs on tp 2");
  // A training plan has no inference section.
  try {
    zenrt::Plan plan = zenrt::parsePlan(planText(inferenceText()), "p.json");
    plan.inference.clear();
    configOf(plan, "t.json");
    ADD_FAILURE() << "a plan without inference accepted";
  } catch (const zenrt::PlanError &e) {
    has(e.what(), "t.json: /inference: missing");
  }
}

//===-- the C API -----------------------------------------------------------===//

void onToken(void *user, int64_t id, int32_t token) {
  auto *seen = static_cast<std::vector<std::pair<int64_t, int32_t>> *>(user);
  seen->emplace_back(id, token);  // the run thread only: no lock needed
}

TEST(ServeCApi, ServesAPlanFile) {
  const int size = worldSize();
  std::string inference = inferenceText(R"("heads": 4,
    "kv_heads": 2)", R"("heads": 8,
    "kv_heads": 4)");
  const std::string tp = std::to_string(size);
  for (const char *phase : {"prefill", "decode"}) {
    const std::string from = std::string("\"") + phase + "\": {\"tp\": 2", to = std::string("\"") + phase + "\": {\"tp\": " + tp;
    inference.replace(inference.find(from), from.size(), to);
  }
  const std::string path = ::testing::TempDir() + "serve-capi-" + std::to_string(worldRank()) + ".json";
  {
    std::ofstream(path) << planText(inference, size);
  }
  zenrt_serve_t engine = nullptr;
  zenrt_options options;
  zenrt_options_init(&options);
  options.timeout_s = 60;
  ASSERT_EQ(zenrt_serve_create(&engine, path.c_str(), 11, &options), ZENRT_OK) << zenrt_last_error();
  std::vector<std::pair<int64_t, int32_t>> seen;
  if (worldRank() == 0) {
    const std::vector<int32_t> prompts[] = {{5, 6, 7}, {90, 1}, {3}};
    std::thread client([&] {
      int64_t ids[3];
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(zenrt_serve_submit(engine, prompts[k].data(), prompts[k].size(), 4 + k, onToken,
                                     &seen, &ids[k]),
                  ZENRT_OK)
            << zenrt_last_error();
      int64_t bad = 0;
      EXPECT_EQ(zenrt_serve_submit(engine, prompts[0].data(), 3, 62, nullptr, nullptr, &bad),
                ZENRT_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(zenrt_last_error()).find("exceeds max_sequence 64"), std::string::npos);
      for (int k = 0; k < 3; ++k) {
        int32_t tokens[8];
        size_t count = 0;
        double ttft = -1, tpot = -1;
        EXPECT_EQ(zenrt_serve_wait(engine, ids[k], tokens, 2, &count, &ttft, &tpot),
                  ZENRT_ERR_INVALID_ARGUMENT);  // too small: kept
        ASSERT_EQ(zenrt_serve_wait(engine, ids[k], tokens, 8, &count, &ttft, &tpot), ZENRT_OK)
            << zenrt_last_error();
        const zenrt::Plan plan = zenrt::loadPlanFile(path);
        EXPECT_EQ(std::vector<int32_t>(tokens, tokens + count),
                  referenceDecode(configOf(plan, path).model, 11, prompts[k], 4 + k));
        EXPECT_GE(ttft, 0.0);
        EXPECT_EQ(zenrt_serve_wait(engine, ids[k], tokens, 8, &count, nullptr, nullptr),
                  ZENRT_ERR_INVALID_ARGUMENT);  // forgotten
      }
      EXPECT_EQ(zenrt_serve_shutdown(engine), ZENRT_OK);
    });
    EXPECT_EQ(zenrt_serve_run(engine), ZENRT_OK) << zenrt_last_error();
    client.join();
    EXPECT_EQ(seen.size(), size_t(4 + 5 + 6));
  } else {
    int64_t id = 0;
    const int32_t one = 1;
    EXPECT_EQ(zenrt_serve_submit(engine, &one, 1, 1, nullptr, nullptr, &id), ZENRT_ERR_STATE);
    EXPECT_EQ(zenrt_serve_run(engine), ZENRT_OK) << zenrt_last_error();
  }
  EXPECT_EQ(zenrt_serve_destroy(engine), ZENRT_OK);
  std::remove(path.c_str());
}

TEST(ServeCApi, RefusesATrainingPlan) {
  const std::string path = ::testing::TempDir() + "serve-training-" + std::to_string(worldRank()) + ".json";
  {
    std::ofstream(path) << planText("{}", worldSize());
  }
  zenrt_serve_t engine = reinterpret_cast<zenrt_serve_t>(uintptr_t(1));  // overwritten
  EXPECT_EQ(zenrt_serve_create(&engine, path.c_str(), 1, nullptr), ZENRT_ERR_PLAN);
  EXPECT_EQ(engine, nullptr);
  EXPECT_NE(std::string(zenrt_last_error()).find("/inference/model: missing field"), std::string::npos)
      << zenrt_last_error();
  std::remove(path.c_str());
}

} // namespace

int main(int argc, char **argv) { return runMpiTests(argc, argv); }
