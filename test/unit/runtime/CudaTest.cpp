// CUDA kernels against the CPU kernels (same payloads, same rounding), the
// NCCL backend's five collectives on the ranks of this job, the executor and the
// MoE layer on device buffers against the host path. Skips without a GPU.
#include "Backend.h"
#include "zenrt/CudaKernels.h"
#include "zenrt/Kernels.h"
#include "zenrt/Moe.h"
#include "zenrt/Plan.h"
#include "zenrt/Runtime.h"

#include <cuda_runtime.h>
#include "MpiTestMain.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

namespace k = zenrt::kernels;
namespace cu = zenrt::cuda;

namespace {

/// Skips without a GPU; else makes the device libzenrt runs this rank on current, where the
/// tests' own buffers go.
#define REQUIRE_GPU()                                                                      \
  do {                                                                                     \
    if (cu::deviceCount() == 0)                                                            \
      GTEST_SKIP() << "no CUDA device";                                                    \
    ASSERT_EQ(cudaSetDevice(zenrt::processDevice()), cudaSuccess);                         \
  } while (0)

template <typename T> struct Device {
  explicit Device(size_t n) : n(n) { EXPECT_EQ(cudaMalloc(&data, n * sizeof(T) + 1), cudaSuccess); }
  explicit Device(const std::vector<T> &host) : Device(host.size()) { upload(host); }
  ~Device() { cudaFree(data); }
  void upload(const std::vector<T> &host) {
    EXPECT_EQ(cudaMemcpy(data, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> host(n);
    EXPECT_EQ(cudaMemcpy(host.data(), data, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  T *data = nullptr;
  size_t n;
};

std::vector<float> randomVector(size_t n, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> out(n);
  for (float &v : out)
    v = normal(generator);
  return out;
}

}  // namespace

TEST(Cuda, CastsMatchTheCpuBitForBit) {
  REQUIRE_GPU();
  std::vector<float> x = randomVector(100003, 1);
  x[0] = 65520.0f;
  x[1] = 1e-8f;
  Device<float> dx(x);
  Device<uint16_t> half(x.size()), bf(x.size());
  cu::floatToHalf(dx.data, half.data, x.size(), nullptr);
  cu::floatToBF16(dx.data, bf.data, x.size(), nullptr);
  std::vector<uint16_t> cpuHalf(x.size()), cpuBf(x.size());
  k::floatToHalf(x.data(), cpuHalf.data(), x.size());
  k::floatToBF16(x.data(), cpuBf.data(), x.size());
  EXPECT_EQ(half.download(), cpuHalf);
  EXPECT_EQ(bf.download(), cpuBf);
  Device<float> back(x.size());
  cu::halfToFloat(half.data, back.data, x.size(), nullptr);
  std::vector<float> cpuBack(x.size());
  k::halfToFloat(cpuHalf.data(), cpuBack.data(), x.size());
  EXPECT_EQ(back.download(), cpuBack);
}

TEST(Cuda, Int8MatchesTheCpuBitForBit) {
  REQUIRE_GPU();
  std::vector<float> x = randomVector(3 * k::kInt8Block + 5, 2);
  Device<float> dx(x);
  Device<uint8_t> payload(k::int8PayloadBytes(x.size()));
  cu::quantizeInt8(dx.data, x.size(), payload.data, nullptr);
  std::vector<uint8_t> cpu(k::int8PayloadBytes(x.size()));
  k::quantizeInt8(x.data(), x.size(), cpu.data());
  EXPECT_EQ(payload.download(), cpu);
  Device<float> out(x.size());
  cu::dequantizeInt8(payload.data, x.size(), out.data, false, nullptr);
  std::vector<float> cpuOut(x.size());
  k::dequantizeInt8(cpu.data(), x.size(), cpuOut.data(), false);
  EXPECT_EQ(out.download(), cpuOut);
}

TEST(Cuda, SignMatchesTheCpu) {
  REQUIRE_GPU();
  std::vector<float> x = randomVector(1001, 3);
  Device<float> dx(x);
  Device<uint8_t> payload(k::signPayloadBytes(x.size()));
  cu::compressSign(dx.data, x.size(), payload.data, nullptr);
  std::vector<uint8_t> cpu(k::signPayloadBytes(x.size()));
  k::compressSign(x.data(), x.size(), cpu.data());
  std::vector<uint8_t> gpu = payload.download();
  EXPECT_TRUE(std::equal(cpu.begin(), cpu.end() - 4, gpu.begin()));  // the bits
  float cpuScale, gpuScale;
  std::memcpy(&cpuScale, cpu.data() + cpu.size() - 4, 4);
  std::memcpy(&gpuScale, gpu.data() + gpu.size() - 4, 4);
  EXPECT_NEAR(gpuScale, cpuScale, 1e-6f * cpuScale);  // summation order differs
}

TEST(Cuda, TopKSelectsTheSameSetAsTheCpu) {
  REQUIRE_GPU();
  std::vector<float> x = randomVector(50000, 4);
  x[10] = x[20] = x[30] = 100.0f;  // ties at the top
  // Large, with ties at the threshold: the CPU's sampled candidate path.
  std::vector<float> coarse = randomVector(1 << 20, 5);
  for (float &v : coarse)
    v = std::round(v * 4.0f) / 4.0f;
  struct Case {
    const std::vector<float> *input;
    size_t kept;
  };
  for (Case c : {Case{&x, 1}, Case{&x, 2}, Case{&x, 500}, Case{&x, 50000}, Case{&coarse, 10486},
                 Case{&coarse, 1}}) {
    const std::vector<float> &input = *c.input;
    Device<float> dx(input);
    Device<uint32_t> indices(c.kept);
    Device<float> values(c.kept);
    cu::selectTopK(dx.data, input.size(), c.kept, indices.data, values.data, nullptr);
    std::vector<uint32_t> cpuIndices(c.kept), scratch;
    std::vector<float> cpuValues(c.kept);
    k::selectTopK(input.data(), input.size(), c.kept, cpuIndices.data(), cpuValues.data(),
                  scratch);
    EXPECT_EQ(indices.download(), cpuIndices) << input.size() << " " << c.kept;
    EXPECT_EQ(values.download(), cpuValues) << input.size() << " " << c.kept;
  }
}

TEST(Cuda, PowerSgdFactorsAreOrthonormal) {
  REQUIRE_GPU();
  size_t rows = 64, cols = 48, rank = 4;
  Device<float> m(randomVector(rows * cols, 5)), q(randomVector(cols * rank, 6)), p(rows * rank);
  cu::powerSgdMultiply(m.data, rows, cols, q.data, p.data, rank, false, nullptr);
  cu::orthonormalise(p.data, rows, rank, nullptr);
  std::vector<float> host = p.download();
  for (size_t a = 0; a < rank; ++a)
    for (size_t b = 0; b < rank; ++b) {
      double dot = 0;
      for (size_t i = 0; i < rows; ++i)
        dot += double(host[a * rows + i]) * host[b * rows + i];
      EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-4);
    }
}

TEST(Nccl, FiveCollectivesOnTheJobsRanks) {
  REQUIRE_GPU();
  auto backend = zenrt::createNcclBackend(nullptr, zenrt::createMpiBackend(nullptr));
  backend->openStreams({1});
  size_t ranks = size_t(backend->size()), count = 1000;
  float me = float(backend->rank() + 1), total = float(ranks * (ranks + 1) / 2);
  auto finish = [&](zenrt::Backend::Request request) {
    while (!backend->test(request)) {
    }
  };
  Device<float> data(std::vector<float>(count * ranks, me)), shard(count), gathered(count * ranks);
  finish(backend->allReduce(data.data, count * ranks, zenrt::Element::F32, 1));
  for (float v : data.download())
    EXPECT_EQ(v, total);
  data.upload(std::vector<float>(count * ranks, me));
  finish(backend->reduceScatter(data.data, shard.data, count, zenrt::Element::F32, 1));
  for (float v : shard.download())
    EXPECT_EQ(v, total);
  finish(backend->allGather(shard.data, gathered.data, count, zenrt::Element::F32, 1));
  for (float v : gathered.download())
    EXPECT_EQ(v, total);
  data.upload(std::vector<float>(count * ranks, me));
  finish(backend->allToAll(data.data, gathered.data, count, zenrt::Element::F32, 1));
  std::vector<float> received = gathered.download();
  for (size_t r = 0; r < ranks; ++r)
    EXPECT_EQ(received[r * count], float(r + 1));
  finish(backend->broadcast(data.data, count, zenrt::Element::F32, 0, 1));
  EXPECT_EQ(data.download()[0], 1.0f);
}

//===----------------------------------------------------------------------===//
// The executor on device buffers (NCCL, CUDA kernels) against the host path
//===----------------------------------------------------------------------===//

namespace {

struct PlanCase {
  zenrt::CompressionMethod method;
  std::vector<zenrt::CollectiveKind> ops;
  bool decoupled = false;
};

/// Three buckets of awkward sizes (padding, a 1-element tensor, chunked, two streams;
/// stream 3 for a decoupled all-gather), every bucket with `c`'s method and collectives,
/// for the job's world size. The schedule mirrors test/Runtime/Inputs/make_plan.py.
zenrt::Plan devicePlan(const PlanCase &c, int ranks) {
  using namespace zenrt;
  const std::vector<std::pair<std::string, int64_t>> gradients = {
      {"layer4.weight", 3000}, {"layer4.bias", 517}, {"layer3.weight", 2048},
      {"layer2.bias", 1},      {"layer1.weight", 4099}};
  const std::vector<std::vector<size_t>> members = {{0, 1}, {2, 3}, {4}};
  const int64_t chunks[] = {1, 3, 2}, streams[] = {1, 2, 1};
  bool sparse = c.method == CompressionMethod::TopK || c.method == CompressionMethod::RandomK;
  Plan plan;
  plan.generator = {"CudaTest", "1"};
  plan.model = {"handmade", ""};
  plan.cluster = {"local", ranks};
  plan.strategy = "handmade";
  plan.compressor = toString(c.method);
  for (size_t t = 0; t < gradients.size(); ++t)
    plan.tensors.push_back({gradients[t].first, gradients[t].second, "f32", int64_t(t)});
  for (size_t b = 0; b < members.size(); ++b) {
    Bucket bucket;
    bucket.id = int64_t(b);
    for (size_t t : members[b]) {
      bucket.tensors.push_back({gradients[t].first, bucket.elements, gradients[t].second});
      bucket.elements += gradients[t].second;
    }
    bucket.bytes = bucket.elements * 4;
    bucket.compression = {c.method, sparse ? 0.1 : 1.0,
                          c.method == CompressionMethod::PowerSGD ? 2 : 0,
                          c.method != CompressionMethod::None, zenrt::Device::GPU};
    for (size_t k = 0; k < c.ops.size(); ++k) {
      bool decoupled = c.decoupled && k + 1 == c.ops.size();
      bucket.collectives.push_back({c.ops[k], "ring", chunks[b], decoupled ? 3 : streams[b],
                                    int64_t(b), decoupled, bucket.bytes});
    }
    plan.buckets.push_back(bucket);
  }
  double clock = 0;
  auto task = [&](TaskKind kind, const std::string &name, int64_t bucket, int64_t stream,
                  double duration, std::vector<int64_t> deps, Phase phase,
                  std::vector<std::string> produces = {}) {
    Task t;
    t.id = int64_t(plan.schedule.size());
    t.kind = kind;
    t.name = name;
    t.bucket = bucket;
    t.stream = stream;
    t.startUs = clock;
    t.durationUs = duration;
    t.deps = std::move(deps);
    t.phase = phase;
    t.produces = std::move(produces);
    if (kind == TaskKind::Compute)
      clock += duration;
    plan.schedule.push_back(t);
    return t.id;
  };
  int64_t previous = task(TaskKind::Compute, "forward", -1, 0, 25, {}, Phase::Forward);
  std::vector<std::pair<int64_t, int64_t>> deferred;  // (bucket, dependency)
  for (size_t b = 0; b < members.size(); ++b) {
    for (size_t t : members[b])
      previous = task(TaskKind::Compute, gradients[t].first + ".backward", -1, 0, 25, {previous},
                      Phase::Backward, {gradients[t].first});
    int64_t dep = previous;
    if (c.method != CompressionMethod::None)
      dep = task(TaskKind::Compress, "compress.b" + std::to_string(b), int64_t(b), 0, 1, {dep},
                 Phase::Backward);
    for (const Collective &collective : plan.buckets[b].collectives) {
      if (collective.decoupled) {
        deferred.emplace_back(int64_t(b), dep);
        continue;
      }
      dep = task(TaskKind::Collective, toString(collective.op) + std::string(".b") +
                                           std::to_string(b),
                 int64_t(b), collective.stream, 10, {dep}, Phase::Backward);
    }
    if (c.method != CompressionMethod::None)
      task(TaskKind::Decompress, "decompress.b" + std::to_string(b), int64_t(b), 0, 1, {dep},
           Phase::Backward);
  }
  int64_t optimizer =
      task(TaskKind::Compute, "optimizer", -1, 0, 25, {previous}, Phase::Optimizer);
  for (auto [b, dep] : deferred)
    task(TaskKind::Collective, "all_gather.b" + std::to_string(b), b, 3, 10, {dep, optimizer},
         Phase::NextForward);
  plan.predictions = {clock + 20, clock, 20, clock, 30};
  plan.baselines = {{"nooverlap", clock + 30}};
  return plan;
}

/// Per iteration: the gradients after the waits, and each bucket's residual.
struct RunResult {
  std::vector<std::vector<std::vector<float>>> gradients, residuals;
};

/// Runs `iterations` of the plan with gradients seeded by rank and iteration, on host
/// buffers or on device buffers.
RunResult runPlan(const zenrt::Plan &plan, bool device, int iterations) {
  zenrt::Runtime::Options options;
  options.timeoutSeconds = 60;
  options.deviceMemory = device;
  zenrt::Runtime runtime = zenrt::Runtime::fromText(zenrt::writePlan(plan), "device-plan", options);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Registered storage never moves: sized once, refilled in place.
  std::vector<std::vector<float>> host;
  host.reserve(plan.tensors.size());
  std::vector<std::unique_ptr<Device<float>>> onDevice;
  for (const zenrt::TensorInfo &tensor : plan.tensors) {
    host.emplace_back(size_t(tensor.elements));
    if (device)
      onDevice.push_back(std::make_unique<Device<float>>(size_t(tensor.elements)));
    runtime.registerGradient(tensor.name, device ? onDevice.back()->data : host.back().data(),
                             tensor.elements);
  }
  RunResult result;
  for (int iteration = 0; iteration < iterations; ++iteration) {
    for (size_t t = 0; t < host.size(); ++t) {
      std::vector<float> values =
          randomVector(host[t].size(), 1000 * uint64_t(rank) + 10 * uint64_t(iteration) + t);
      std::copy(values.begin(), values.end(), host[t].begin());
      if (device)
        onDevice[t]->upload(host[t]);
      runtime.markReady(plan.tensors[t].name);
    }
    runtime.waitAll();
    for (const zenrt::TensorInfo &tensor : plan.tensors)
      runtime.wait(tensor.name);  // decoupled all-gathers
    result.gradients.emplace_back();
    for (size_t t = 0; t < host.size(); ++t)
      result.gradients.back().push_back(device ? onDevice[t]->download() : host[t]);
    result.residuals.emplace_back();
    for (int b = 0; b < runtime.bucketCount(); ++b) {
      zenrt::Runtime::BucketView view = runtime.debugBucket(b);
      std::vector<float> residual(view.residual ? size_t(view.elements) : 0);
      if (view.residual && device)
        EXPECT_EQ(cudaMemcpy(residual.data(), view.residual, residual.size() * 4,
                             cudaMemcpyDeviceToHost),
                  cudaSuccess);
      else if (view.residual)
        std::copy(view.residual, view.residual + view.elements, residual.begin());
      result.residuals.back().push_back(residual);
    }
  }
  return result;
}

/// |device - host| within `relative` of the largest host magnitude of the tensor.
void expectClose(const std::vector<float> &device, const std::vector<float> &host,
                 double relative, const std::string &what) {
  ASSERT_EQ(device.size(), host.size()) << what;
  double largest = 0, worst = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    largest = std::max(largest, double(std::fabs(host[i])));
    worst = std::max(worst, double(std::fabs(device[i] - host[i])));
  }
  EXPECT_LE(worst, relative * std::max(largest, 1e-6)) << what;
}

}  // namespace

TEST(DeviceExecutor, EveryMethodMatchesTheHostPath) {
  REQUIRE_GPU();
  using zenrt::CollectiveKind;
  using zenrt::CompressionMethod;
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const std::vector<CollectiveKind> allReduce = {CollectiveKind::AllReduce},
                                  rsAg = {CollectiveKind::ReduceScatter, CollectiveKind::AllGather},
                                  a2aAg = {CollectiveKind::AllToAll, CollectiveKind::AllGather},
                                  allGather = {CollectiveKind::AllGather},
                                  broadcast = {CollectiveKind::Broadcast};
  const std::vector<PlanCase> cases = {
      {CompressionMethod::None, allReduce},     {CompressionMethod::None, rsAg},
      {CompressionMethod::None, a2aAg},         {CompressionMethod::None, broadcast},
      {CompressionMethod::None, rsAg, true},    {CompressionMethod::FP16, allReduce},
      {CompressionMethod::FP16, rsAg},          {CompressionMethod::BF16, rsAg},
      {CompressionMethod::Int8, allGather},     {CompressionMethod::Int8, allReduce},
      {CompressionMethod::TopK, allGather},     {CompressionMethod::RandomK, allGather},
      {CompressionMethod::RandomK, allReduce},  {CompressionMethod::Sign, allGather},
      {CompressionMethod::PowerSGD, allReduce}};
  for (const PlanCase &c : cases) {
    zenrt::Plan plan = devicePlan(c, ranks);
    std::string name = std::string(zenrt::toString(c.method)) + " " +
                       zenrt::toString(c.ops.front()) + (c.decoupled ? " decoupled" : "");
    // Kernels agree to float rounding, but NCCL and MPI sum ranks in other orders (in
    // 16 bits for fp16/bf16: a few units of their last place); PowerSGD orthonormalises
    // differently (Householder on the CPU, Gram-Schmidt on the GPU: the same span).
    double relative = 1e-5;
    if (c.method == CompressionMethod::FP16)
      relative = 4e-3;
    else if (c.method == CompressionMethod::BF16)
      relative = 3e-2;
    else if (c.method == CompressionMethod::PowerSGD)
      relative = 1e-3;
    RunResult host = runPlan(plan, false, 3), device = runPlan(plan, true, 3);
    for (size_t i = 0; i < host.gradients.size(); ++i) {
      for (size_t t = 0; t < host.gradients[i].size(); ++t)
        expectClose(device.gradients[i][t], host.gradients[i][t], relative,
                    name + ", iteration " + std::to_string(i) + ", " + plan.tensors[t].name);
      for (size_t b = 0; b < host.residuals[i].size(); ++b)
        expectClose(device.residuals[i][b], host.residuals[i][b], relative,
                    name + ", iteration " + std::to_string(i) + ", residual of bucket " +
                        std::to_string(b));
    }
  }
}

TEST(DeviceExecutor, RejectsHostBuffersAndUnknownMemory) {
  REQUIRE_GPU();
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  zenrt::Plan plan = devicePlan({zenrt::CompressionMethod::None, {zenrt::CollectiveKind::AllReduce}},
                                ranks);
  zenrt::Runtime::Options options;
  options.deviceMemory = true;
  zenrt::Runtime runtime = zenrt::Runtime::fromText(zenrt::writePlan(plan), "p.json", options);
  std::vector<float> hostBuffer(3000);
  try {
    runtime.registerGradient("layer4.weight", hostBuffer.data(), 3000);
    ADD_FAILURE() << "a host buffer was accepted as a device gradient";
  } catch (const zenrt::Error &e) {
    EXPECT_EQ(e.status, ZENRT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("layer4.weight"), std::string::npos) << e.what();
  }
  zenrt_options raw;
  zenrt_options_init(&raw);
  raw.memory = 7;
  zenrt_t handle = nullptr;
  std::string text = zenrt::writePlan(plan);
  EXPECT_EQ(zenrt_init_text(&handle, text.data(), text.size(), "p.json", &raw),
            ZENRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(handle, nullptr);
}

//===----------------------------------------------------------------------===//
// The MoE layer on device buffers (NCCL all-to-alls, MoeKernels.cu)
//===----------------------------------------------------------------------===//

namespace {

namespace moe = zenrt::moe;

/// One rank's forward and backward of a layer: output, input gradient, expert gradients.
struct MoeRun {
  std::vector<float> combined, dispatchedGradient;
  moe::Gradients gradients;
};

/// Runs the layer in `ranks`' memory: the weights, inputs and outputs are copied there and
/// back for a device communicator.
MoeRun runMoe(moe::Communicator &ranks, moe::Layer layer, const moe::Schedule &schedule,
              const std::vector<float> &fc1, const std::vector<float> &fc1Bias,
              const std::vector<float> &fc2, const std::vector<float> &fc2Bias,
              const std::vector<float> &dispatched, const std::vector<float> &combinedGradient) {
  MoeRun out;
  moe::Activations kept;
  if (ranks.memory() == moe::Memory::Host) {
    layer.fc1 = fc1.data(), layer.fc1Bias = fc1Bias.data();
    layer.fc2 = fc2.data(), layer.fc2Bias = fc2Bias.data();
    out.combined.resize(dispatched.size());
    out.dispatchedGradient.resize(dispatched.size());
    moe::forward(layer, schedule, dispatched.data(), out.combined.data(), ranks, &kept);
    out.gradients = moe::backward(layer, schedule, kept, combinedGradient.data(),
                                  out.dispatchedGradient.data(), ranks);
    return out;
  }
  Device<float> w1(fc1), b1(fc1Bias), w2(fc2), b2(fc2Bias), x(dispatched),
      dy(combinedGradient), y(dispatched.size()), dx(dispatched.size());
  layer.fc1 = w1.data, layer.fc1Bias = b1.data, layer.fc2 = w2.data, layer.fc2Bias = b2.data;
  moe::forward(layer, schedule, x.data, y.data, ranks, &kept);
  out.gradients = moe::backward(layer, schedule, kept, dy.data, dx.data, ranks);
  out.combined = y.download();
  out.dispatchedGradient = dx.download();
  return out;
}

/// The largest |a - b| over the largest |b|.
double relativeDifference(const std::vector<float> &a, const std::vector<float> &b) {
  double most = 1e-30, difference = 0;
  for (size_t i = 0; i < b.size() && i < a.size(); ++i) {
    most = std::max(most, double(std::abs(b[i])));
    difference = std::max(difference, double(std::abs(a[i] - b[i])));
  }
  return a.size() == b.size() ? difference / most : INFINITY;
}

} // namespace

TEST(DeviceMoe, EveryDegreeGivesTheSameBitsAndMatchesTheHostLayer) {
  REQUIRE_GPU();
  moe::Communicator device(nullptr, moe::Memory::Device, 60), host(nullptr, moe::Memory::Host, 60);
  ASSERT_GE(device.device(), 0);
  const int ranks = device.size(), rank = device.rank();
  // Sizes off the kernels' 16-wide tiles; the capacity splits into 1, 2, 4 and 8 chunks.
  moe::Layer layer;
  layer.experts = 2 * ranks, layer.hidden = 24, layer.ffn = 40, layer.capacity = 8;
  const size_t local = size_t(layer.experts / ranks), h = 24, f = 40;
  const std::vector<float> fc1 = randomVector(local * f * h, 10 + rank),
                           fc1Bias = randomVector(local * f, 20 + rank),
                           fc2 = randomVector(local * h * f, 30 + rank),
                           fc2Bias = randomVector(local * h, 40 + rank);
  const size_t floats = size_t(layer.experts * layer.capacity) * h;
  const std::vector<float> dispatched = randomVector(floats, 50 + rank),
                           combinedGradient = randomVector(floats, 60 + rank);
  for (moe::TokenFormat tokens : {moe::TokenFormat::None, moe::TokenFormat::Int8,
                                  moe::TokenFormat::Fp16, moe::TokenFormat::Bf16}) {
    moe::Schedule schedule;
    schedule.tokens = tokens;
    schedule.timeoutSeconds = 60;
    const MoeRun unpipelined = runMoe(device, layer, schedule, fc1, fc1Bias, fc2, fc2Bias,
                                      dispatched, combinedGradient);
    if (tokens == moe::TokenFormat::None) {
      // The host layer adds in Eigen's blocked order: equal up to fp32 rounding.
      const MoeRun onHost = runMoe(host, layer, schedule, fc1, fc1Bias, fc2, fc2Bias,
                                   dispatched, combinedGradient);
      EXPECT_LT(relativeDifference(unpipelined.combined, onHost.combined), 1e-5);
      EXPECT_LT(relativeDifference(unpipelined.dispatchedGradient, onHost.dispatchedGradient),
                1e-5);
      EXPECT_LT(relativeDifference(unpipelined.gradients.fc1, onHost.gradients.fc1), 1e-5);
      EXPECT_LT(relativeDifference(unpipelined.gradients.fc1Bias, onHost.gradients.fc1Bias),
                1e-5);
      EXPECT_LT(relativeDifference(unpipelined.gradients.fc2, onHost.gradients.fc2), 1e-5);
      EXPECT_LT(relativeDifference(unpipelined.gradients.fc2Bias, onHost.gradients.fc2Bias),
                1e-5);
    }
    for (moe::AllToAll algorithm : {moe::AllToAll::Flat, moe::AllToAll::Hierarchical})
      for (int64_t chunks : {1, 2, 4, 8}) {
        schedule.algorithm = algorithm;
        schedule.ranksPerNode = 1;
        schedule.chunks = chunks;
        const MoeRun pipelined = runMoe(device, layer, schedule, fc1, fc1Bias, fc2, fc2Bias,
                                        dispatched, combinedGradient);
        const std::string what = "tokens " + std::to_string(int(tokens)) + ", r " +
                                 std::to_string(chunks) + ", algorithm " +
                                 std::to_string(int(algorithm));
        EXPECT_EQ(pipelined.combined, unpipelined.combined) << what;
        EXPECT_EQ(pipelined.dispatchedGradient, unpipelined.dispatchedGradient) << what;
        EXPECT_EQ(pipelined.gradients.fc1, unpipelined.gradients.fc1) << what;
        EXPECT_EQ(pipelined.gradients.fc1Bias, unpipelined.gradients.fc1Bias) << what;
        EXPECT_EQ(pipelined.gradients.fc2, unpipelined.gradients.fc2) << what;
        EXPECT_EQ(pipelined.gradients.fc2Bias, unpipelined.gradients.fc2Bias) << what;
      }
  }
}

TEST(DeviceMoe, RefusesHostBuffersByName) {
  REQUIRE_GPU();
  moe::Communicator device(nullptr, moe::Memory::Device, 60);
  moe::Layer layer;
  layer.experts = device.size(), layer.hidden = 4, layer.ffn = 4, layer.capacity = 2;
  Device<float> fc1(16), fc2(16), output(size_t(layer.experts) * 8);
  layer.fc1 = fc1.data, layer.fc2 = fc2.data;
  const std::vector<float> onHost(size_t(layer.experts) * 8, 1.0f);
  try {
    moe::forward(layer, moe::Schedule{}, onHost.data(), output.data, device);
    ADD_FAILURE() << "a host input was accepted by a device MoE layer";
  } catch (const zenrt::Error &e) {
    EXPECT_EQ(e.status, ZENRT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("the input: host memory"), std::string::npos)
        << e.what();
  }
}

TEST(DeviceMoe, RefusedWhereThereIsNoDevice) {
  if (cu::deviceCount() > 0)
    GTEST_SKIP() << "this machine has a CUDA device";
  try {
    moe::Communicator device(nullptr, moe::Memory::Device, 60);
    ADD_FAILURE() << "a device MoE communicator was made without a CUDA device";
  } catch (const zenrt::Error &e) {
    EXPECT_EQ(e.status, ZENRT_ERR_BACKEND);
    EXPECT_NE(std::string(e.what()).find("sees no CUDA device"), std::string::npos) << e.what();
  }
}

int main(int argc, char **argv) { return runMpiTests(argc, argv); }
