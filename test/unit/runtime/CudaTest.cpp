// CUDA kernels against the CPU kernels (same payloads, same rounding), and the
// NCCL backend's five collectives on the ranks of this job. Skips without a GPU.
#include "Backend.h"
#include "zenrt/CudaKernels.h"
#include "zenrt/Kernels.h"

#include <cuda_runtime.h>
#include "MpiTestMain.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <random>

namespace k = zenrt::kernels;
namespace cu = zenrt::cuda;

namespace {

#define REQUIRE_GPU()                                                                      \
  do {                                                                                     \
    if (cu::deviceCount() == 0)                                                            \
      GTEST_SKIP() << "no CUDA device";                                                    \
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
  auto backend = zenrt::createNcclBackend(nullptr);
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

int main(int argc, char **argv) { return runMpiTests(argc, argv); }
