// The C and C++ APIs on one rank: init errors, registration checks, call order,
// timeouts with their message, error feedback across iterations.
#include "zenrt/Plan.h"
#include "zenrt/Runtime.h"
#include "zenrt/zenrt.h"

#include "MpiTestMain.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>

namespace {

/// One rank, two buckets: {a (6), b (3)} with `method`, {c (4)} uncompressed.
zenrt::Plan onePlan(zenrt::CompressionMethod method, double ratio = 1.0) {
  using namespace zenrt;
  Plan plan;
  plan.generator = {"test", "1"};
  plan.model = {"m", ""};
  plan.cluster = {"local", 1};
  plan.strategy = "handmade";
  plan.compressor = toString(method);
  plan.tensors = {{"a", 6, "f32", 0}, {"b", 3, "f32", 1}, {"c", 4, "f32", 2}};
  Bucket first;
  first.id = 0;
  first.tensors = {{"a", 0, 6}, {"b", 6, 3}};
  first.elements = 9;
  first.bytes = 36;
  first.compression = {method, ratio, 0, method != CompressionMethod::None, Device::CPU};
  CollectiveKind op = method == CompressionMethod::TopK ? CollectiveKind::AllGather
                                                        : CollectiveKind::AllReduce;
  first.collectives = {{op, "ring", 2, 1, 0, false, 36}};
  Bucket second;
  second.id = 1;
  second.tensors = {{"c", 0, 4}};
  second.elements = 4;
  second.bytes = 16;
  second.collectives = {{CollectiveKind::AllReduce, "ring", 1, 1, 0, false, 16}};
  plan.buckets = {first, second};
  auto task = [](int64_t id, TaskKind kind, int64_t bucket, std::vector<int64_t> deps,
                 std::vector<std::string> produces) {
    Task t;
    t.id = id;
    t.kind = kind;
    t.name = "task" + std::to_string(id);
    t.bucket = bucket;
    t.stream = kind == TaskKind::Collective ? 1 : 0;
    t.durationUs = 1;
    t.deps = std::move(deps);
    t.produces = std::move(produces);
    return t;
  };
  plan.schedule = {task(0, TaskKind::Compute, -1, {}, {"a", "b", "c"}),
                   task(1, TaskKind::Collective, 0, {0}, {}),
                   task(2, TaskKind::Collective, 1, {0}, {})};
  return plan;
}

/// The timeout test's waits time out after 0.3 s; the others wait as long as a
/// loaded machine needs (their start-up agreement included: 0.3 s was seen to pass
/// there on 2 busy cores).
zenrt::Runtime::Options withTimeout(double seconds) {
  zenrt::Runtime::Options options;
  options.timeoutSeconds = seconds;
  options.keepSent = true;
  return options;
}
zenrt::Runtime::Options quick() { return withTimeout(0.3); }
zenrt::Runtime::Options patient() { return withTimeout(60); }

struct Gradients {
  std::vector<float> a = std::vector<float>(6), b = std::vector<float>(3), c = std::vector<float>(4);
  void fill(float base) {
    std::iota(a.begin(), a.end(), base);
    std::iota(b.begin(), b.end(), -base);
    std::iota(c.begin(), c.end(), 10 * base);
  }
  void registerWith(zenrt::Runtime &rt) {
    rt.registerGradient("a", a.data(), 6);
    rt.registerGradient("b", b.data(), 3);
    rt.registerGradient("c", c.data(), 4);
  }
};

int statusOf(const std::function<void()> &call, std::string *message = nullptr) {
  try {
    call();
  } catch (const zenrt::Error &e) {
    if (message)
      *message = e.what();
    return e.status;
  }
  return ZENRT_OK;
}

}  // namespace

TEST(RuntimeApi, VersionAndErrorStrings) {
  EXPECT_STREQ(zenrt_version(), "0.3.0");
  EXPECT_STREQ(zenrt_error_string(ZENRT_ERR_TIMEOUT), "timeout");
  EXPECT_STREQ(zenrt_error_string(12345), "unknown status");
  zenrt_options options;
  zenrt_options_init(&options);
  EXPECT_EQ(options.rank, -1);
  EXPECT_EQ(zenrt_init_file(nullptr, "x", nullptr), ZENRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(zenrt_finalize(nullptr), ZENRT_OK);
}

TEST(RuntimeApi, WorldCallsWorkWithoutAPlanAndOutliveNoHandle) {
  int rank = -1, size = -1;
  ASSERT_EQ(zenrt_world_init(&rank, &size), ZENRT_OK);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(size, 1);
  ASSERT_EQ(zenrt_world_init(nullptr, nullptr), ZENRT_OK);  // idempotent

  char text[] = "plan text";
  EXPECT_EQ(zenrt_world_broadcast(text, sizeof(text), 0), ZENRT_OK);
  EXPECT_STREQ(text, "plan text");
  EXPECT_EQ(zenrt_world_broadcast(text, sizeof(text), 1), ZENRT_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(zenrt_last_error(), "rank 0: zenrt_world_broadcast: root 1 is not a rank of 1");
  uint64_t all[1] = {0};
  EXPECT_EQ(zenrt_world_exchange(42, all), ZENRT_OK);
  EXPECT_EQ(all[0], 42u);

  // A handle keeps MPI alive: the world cannot end under it.
  zenrt::Runtime runtime = zenrt::Runtime::fromText(
      zenrt::writePlan(onePlan(zenrt::CompressionMethod::None)), "p.json", patient());
  EXPECT_EQ(zenrt_world_finalize(), ZENRT_ERR_STATE);
  EXPECT_STREQ(zenrt_last_error(),
               "zenrt_world_finalize: 1 handle(s) still open: zenrt_finalize them first");
  runtime = zenrt::Runtime::fromText(zenrt::writePlan(onePlan(zenrt::CompressionMethod::None)),
                                     "q.json", patient());  // one after another
  { zenrt::Runtime last = std::move(runtime); }
  EXPECT_EQ(zenrt_world_finalize(), ZENRT_OK);
  EXPECT_EQ(zenrt_world_exchange(1, all), ZENRT_ERR_STATE);
  EXPECT_STREQ(zenrt_last_error(),
               "zenrt_world_exchange: call zenrt_world_init first (the world was finalised)");
  EXPECT_EQ(zenrt_world_init(&rank, &size), ZENRT_ERR_STATE);
}

TEST(RuntimeApi, InitRejectsBadAndMissingPlans) {
  zenrt_t rt = nullptr;
  EXPECT_EQ(zenrt_init_file(&rt, "/nonexistent/plan.json", nullptr), ZENRT_ERR_IO);
  EXPECT_EQ(rt, nullptr);
  EXPECT_STREQ(zenrt_last_error(),
               "rank 0: /nonexistent/plan.json: cannot open plan file (No such file or directory)");
  std::string text = zenrt::writePlan(onePlan(zenrt::CompressionMethod::None));
  text.replace(text.find("\"chunks\": 2"), 11, "\"chunks\": 0");
  EXPECT_EQ(zenrt_init_text(&rt, text.data(), text.size(), "p.json", nullptr), ZENRT_ERR_PLAN);
  EXPECT_STREQ(zenrt_last_error(), "rank 0: p.json: /buckets/0/collectives/0/chunks: must be >= 1");
  zenrt::Plan wrongSize = onePlan(zenrt::CompressionMethod::None);
  wrongSize.cluster.worldSize = 2;
  std::string message;
  EXPECT_EQ(statusOf([&] { zenrt::Runtime::fromText(zenrt::writePlan(wrongSize), "p.json"); },
                     &message),
            ZENRT_ERR_MISMATCH);
  EXPECT_EQ(message, "rank 0: the plan is for world_size 2 but the job has 1 ranks");
  zenrt::Runtime::Options options;
  options.worldSize = 3;
  EXPECT_EQ(statusOf([&] {
              zenrt::Runtime::fromText(zenrt::writePlan(onePlan(zenrt::CompressionMethod::None)),
                                       "p.json", options);
            }),
            ZENRT_ERR_INVALID_ARGUMENT);
}

TEST(RuntimeApi, AnUnusableTimeoutVariableIsRefusedAtInit) {
  const std::string text = zenrt::writePlan(onePlan(zenrt::CompressionMethod::None));
  zenrt_t rt = nullptr;
  ::setenv("ZENRT_TIMEOUT_S", "soon", 1);
  EXPECT_EQ(zenrt_init_text(&rt, text.data(), text.size(), "p.json", nullptr),
            ZENRT_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(zenrt_last_error(), "ZENRT_TIMEOUT_S='soon' is not a positive number of seconds");
  EXPECT_EQ(rt, nullptr);
  // An explicit timeout takes precedence over the variable.
  zenrt_options options;
  zenrt_options_init(&options);
  options.timeout_s = 5;
  EXPECT_EQ(zenrt_init_text(&rt, text.data(), text.size(), "p.json", &options), ZENRT_OK);
  zenrt_finalize(rt);
  ::unsetenv("ZENRT_TIMEOUT_S");
}

TEST(RuntimeApi, MemoryKindIsCheckedBeforeTheRanksStart) {
  std::string text = zenrt::writePlan(onePlan(zenrt::CompressionMethod::None));
  zenrt_options options;
  zenrt_options_init(&options);
  EXPECT_EQ(options.memory, ZENRT_MEMORY_HOST);
  options.memory = 7;
  zenrt_t rt = nullptr;
  EXPECT_EQ(zenrt_init_text(&rt, text.data(), text.size(), "p.json", &options),
            ZENRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rt, nullptr);
  EXPECT_STREQ(zenrt_last_error(),
               "rank 0: options.memory is 7 (expected ZENRT_MEMORY_HOST or ZENRT_MEMORY_DEVICE)");
  // Device memory works with CUDA and a GPU (DeviceExecutor tests), else fails clearly.
  options.memory = ZENRT_MEMORY_DEVICE;
  int status = zenrt_init_text(&rt, text.data(), text.size(), "p.json", &options);
  if (status == ZENRT_OK) {
    zenrt_finalize(rt);
    return;
  }
  EXPECT_EQ(rt, nullptr);
#ifdef ZENRT_HAVE_CUDA
  EXPECT_EQ(status, ZENRT_ERR_BACKEND);
  EXPECT_STREQ(zenrt_last_error(), "rank 0: ZENRT_MEMORY_DEVICE but no CUDA device is visible");
#else
  EXPECT_EQ(status, ZENRT_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(zenrt_last_error(),
               "rank 0: ZENRT_MEMORY_DEVICE but libzenrt was built without CUDA");
#endif
}

TEST(RuntimeApi, RegistrationChecksNamesAndSizes) {
  zenrt::Plan plan = onePlan(zenrt::CompressionMethod::None);
  zenrt::Runtime rt = zenrt::Runtime::fromText(zenrt::writePlan(plan), "p.json", patient());
  EXPECT_EQ(rt.planHash(), zenrt::planHash(plan));
  EXPECT_EQ(rt.bucketCount(), 2);
  std::vector<float> buffer(6);
  std::string message;
  EXPECT_EQ(statusOf([&] { rt.registerGradient("zz", buffer.data(), 6); }, &message),
            ZENRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(message, "rank 0: unknown gradient 'zz' (not in the plan)");
  EXPECT_EQ(statusOf([&] { rt.registerGradient("a", buffer.data(), 5); }, &message),
            ZENRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(message, "rank 0: gradient 'a': buffer has 5 elements but the plan has 6");
  EXPECT_EQ(statusOf([&] { rt.registerGradient("a", nullptr, 6); }), ZENRT_ERR_INVALID_ARGUMENT);
  rt.registerGradient("a", buffer.data(), 6);
  EXPECT_EQ(statusOf([&] { rt.markReady("a"); }, &message), ZENRT_ERR_STATE);
  EXPECT_EQ(message, "rank 0: gradient 'b' is not registered (register every gradient before "
                     "marking any ready)");
}

TEST(RuntimeApi, OneRankIterationsAverageToTheInputAndCheckCallOrder) {
  zenrt::Runtime rt = zenrt::Runtime::fromText(
      zenrt::writePlan(onePlan(zenrt::CompressionMethod::None)), "p.json", patient());
  Gradients g;
  g.registerWith(rt);
  std::string message;
  EXPECT_EQ(statusOf([&] { rt.wait("a"); }, &message), ZENRT_ERR_STATE);
  EXPECT_EQ(message, "rank 0: gradient 'a' was never marked ready");
  for (int iteration = 0; iteration < 3; ++iteration) {
    g.fill(float(iteration));
    Gradients expected = g;
    rt.markReady("c");
    rt.markReady("a");
    EXPECT_EQ(statusOf([&] { rt.markReady("a"); }, &message), ZENRT_ERR_STATE);
    EXPECT_EQ(message, "rank 0: gradient 'a' was already marked ready in iteration " +
                           std::to_string(iteration));
    rt.markReady("b");
    rt.waitAll();
    EXPECT_TRUE(rt.test("a"));
    EXPECT_EQ(g.a, expected.a);
    EXPECT_EQ(g.b, expected.b);
    EXPECT_EQ(g.c, expected.c);
  }
}

TEST(RuntimeApi, HeldCollectivesStartOnlyWhenReleased) {
  zenrt::Runtime rt = zenrt::Runtime::fromText(
      zenrt::writePlan(onePlan(zenrt::CompressionMethod::None)), "p.json", patient());
  Gradients g;
  g.registerWith(rt);
  g.fill(2);
  const Gradients expected = g;
  rt.holdCollectives(true);
  rt.markReady("a");
  rt.markReady("b");
  rt.markReady("c");
  // Every gradient is ready, but no collective may start: on one rank nothing else delays them.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(rt.testAll());
  std::string message;
  EXPECT_EQ(statusOf([&] { rt.waitAll(); }, &message), ZENRT_ERR_STATE);
  EXPECT_EQ(message, "rank 0: zenrt_wait_all while the collectives are held "
                     "(zenrt_hold_collectives)");
  EXPECT_FALSE(rt.test("a"));
  EXPECT_EQ(statusOf([&] { rt.wait("a"); }, &message), ZENRT_ERR_STATE);
  EXPECT_EQ(message, "rank 0: zenrt_wait while the collectives are held "
                     "(zenrt_hold_collectives)");
  rt.holdCollectives(false);
  rt.waitAll();
  EXPECT_EQ(g.a, expected.a);
  EXPECT_EQ(g.c, expected.c);
}

TEST(RuntimeApi, WaitTimesOutNamingTheMissingGradientThenFailsFast) {
  zenrt::Runtime rt = zenrt::Runtime::fromText(
      zenrt::writePlan(onePlan(zenrt::CompressionMethod::None)), "p.json", quick());
  Gradients g;
  g.registerWith(rt);
  rt.markReady("a");
  rt.markReady("b");
  EXPECT_FALSE(rt.testAll());
  std::string message;
  EXPECT_EQ(statusOf([&] { rt.waitAll(); }, &message), ZENRT_ERR_TIMEOUT);
  EXPECT_EQ(message, "rank 0: timeout after 0.3 s in zenrt_wait_all (iteration 0): bucket 1 is "
                     "waiting for 1 of 1 gradients to be marked ready (c)");
  EXPECT_EQ(statusOf([&] { rt.markReady("c"); }, &message), ZENRT_ERR_ABORTED);
  EXPECT_EQ(message.rfind("rank 0: timeout after 0.3 s", 0), 0u);
}

TEST(RuntimeApi, TopKErrorFeedbackCarriesTheResidualAcrossIterations) {
  zenrt::Runtime rt = zenrt::Runtime::fromText(
      zenrt::writePlan(onePlan(zenrt::CompressionMethod::TopK, 2.0 / 9.0)), "p.json", patient());
  Gradients g;
  g.registerWith(rt);
  std::vector<float> residual(9, 0.0f);
  for (int iteration = 0; iteration < 4; ++iteration) {
    g.fill(float(iteration) * 0.5f - 1.0f);
    std::vector<float> input(g.a);
    input.insert(input.end(), g.b.begin(), g.b.end());
    rt.markReady("a");
    rt.markReady("b");
    rt.markReady("c");
    rt.waitAll();
    auto view = rt.debugBucket(0);
    ASSERT_EQ(view.elements, 9);
    ASSERT_NE(view.residual, nullptr);
    size_t nonzero = 0;
    for (size_t i = 0; i < 9; ++i) {
      EXPECT_FLOAT_EQ(view.sent[i] + view.residual[i], input[i] + residual[i]) << i;
      nonzero += view.sent[i] != 0;
      float result = i < 6 ? g.a[i] : g.b[i - 6];
      EXPECT_EQ(result, view.sent[i]);  // one rank: the average is what was sent
    }
    EXPECT_EQ(nonzero, 2u);
    residual.assign(view.residual, view.residual + 9);
  }
}

int main(int argc, char **argv) { return runMpiTests(argc, argv); }
