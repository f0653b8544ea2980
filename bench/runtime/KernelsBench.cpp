// CPU compression kernels' throughput next to memcpy of the same input bytes
// (issue 7 target: within 2x of memcpy). Bytes processed = the fp32 input.
#include "zenrt/Kernels.h"

#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

namespace k = zenrt::kernels;

namespace {
constexpr size_t kElements = size_t(1) << 22;  // 16 MiB of fp32: beyond the caches

const std::vector<float> &input() {
  static const std::vector<float> data = [] {
    std::mt19937_64 generator(1);
    std::normal_distribution<float> normal;
    std::vector<float> out(kElements);
    for (float &v : out)
      v = normal(generator);
    return out;
  }();
  return data;
}

void finish(benchmark::State &state) {
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kElements * sizeof(float)));
}

void Memcpy(benchmark::State &state) {
  std::vector<float> out(kElements);
  for (auto _ : state) {
    std::memcpy(out.data(), input().data(), kElements * sizeof(float));
    benchmark::ClobberMemory();
  }
  finish(state);
}
void FloatToHalf(benchmark::State &state) {
  std::vector<uint16_t> out(kElements);
  for (auto _ : state) {
    k::floatToHalf(input().data(), out.data(), kElements);
    benchmark::ClobberMemory();
  }
  finish(state);
}
void HalfToFloat(benchmark::State &state) {
  std::vector<uint16_t> half(kElements);
  k::floatToHalf(input().data(), half.data(), kElements);
  std::vector<float> out(kElements);
  for (auto _ : state) {
    k::halfToFloat(half.data(), out.data(), kElements);
    benchmark::ClobberMemory();
  }
  finish(state);
}
void FloatToBF16(benchmark::State &state) {
  std::vector<uint16_t> out(kElements);
  for (auto _ : state) {
    k::floatToBF16(input().data(), out.data(), kElements);
    benchmark::ClobberMemory();
  }
  finish(state);
}
void QuantizeInt8(benchmark::State &state) {
  std::vector<uint8_t> out(k::int8PayloadBytes(kElements));
  for (auto _ : state) {
    k::quantizeInt8(input().data(), kElements, out.data());
    benchmark::ClobberMemory();
  }
  finish(state);
}
void DequantizeInt8(benchmark::State &state) {
  std::vector<uint8_t> payload(k::int8PayloadBytes(kElements));
  k::quantizeInt8(input().data(), kElements, payload.data());
  std::vector<float> out(kElements);
  for (auto _ : state) {
    k::dequantizeInt8(payload.data(), kElements, out.data(), false);
    benchmark::ClobberMemory();
  }
  finish(state);
}
void CompressSign(benchmark::State &state) {
  std::vector<uint8_t> out(k::signPayloadBytes(kElements));
  for (auto _ : state) {
    k::compressSign(input().data(), kElements, out.data());
    benchmark::ClobberMemory();
  }
  finish(state);
}
void DecompressSign(benchmark::State &state) {
  std::vector<uint8_t> payload(k::signPayloadBytes(kElements));
  k::compressSign(input().data(), kElements, payload.data());
  std::vector<float> out(kElements);
  for (auto _ : state) {
    k::decompressSign(payload.data(), kElements, out.data(), false);
    benchmark::ClobberMemory();
  }
  finish(state);
}
void TopK1Percent(benchmark::State &state) {
  size_t kept = k::keptCount(kElements, 0.01);
  std::vector<uint32_t> indices(kept), scratch;
  std::vector<float> values(kept);
  for (auto _ : state) {
    k::selectTopK(input().data(), kElements, kept, indices.data(), values.data(), scratch);
    benchmark::ClobberMemory();
  }
  finish(state);
}
void RandomK1Percent(benchmark::State &state) {
  size_t kept = k::keptCount(kElements, 0.01);
  std::vector<uint32_t> indices(kept);
  std::vector<uint64_t> bitmap;
  uint64_t seed = 0;
  for (auto _ : state) {
    k::randomKIndices(++seed, kElements, kept, indices.data(), bitmap);
    benchmark::ClobberMemory();
  }
  finish(state);
}
void ResidualUpdate(benchmark::State &state) {
  std::vector<float> sent(input()), out(kElements);
  for (auto _ : state) {
    k::subtract(input().data(), sent.data(), out.data(), kElements);
    benchmark::ClobberMemory();
  }
  finish(state);
}
}  // namespace

BENCHMARK(Memcpy)->Unit(benchmark::kMillisecond);
BENCHMARK(FloatToHalf)->Unit(benchmark::kMillisecond);
BENCHMARK(HalfToFloat)->Unit(benchmark::kMillisecond);
BENCHMARK(FloatToBF16)->Unit(benchmark::kMillisecond);
BENCHMARK(QuantizeInt8)->Unit(benchmark::kMillisecond);
BENCHMARK(DequantizeInt8)->Unit(benchmark::kMillisecond);
BENCHMARK(CompressSign)->Unit(benchmark::kMillisecond);
BENCHMARK(DecompressSign)->Unit(benchmark::kMillisecond);
BENCHMARK(TopK1Percent)->Unit(benchmark::kMillisecond);
BENCHMARK(RandomK1Percent)->Unit(benchmark::kMillisecond);
BENCHMARK(ResidualUpdate)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
