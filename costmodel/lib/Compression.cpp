//===- Compression.cpp - compression kernel costs and wire sizes ----------===//
//
// GPU kernels are memory-bound: each is priced as the HBM bytes it moves at
// the achievable bandwidth plus a launch. Random gathers and scatters touch a
// whole 32-byte DRAM sector per element. CPU offload copies the fp32 input to
// the host before encoding and the fp32 result back after decoding, over PCIe,
// and runs at the CPU kernels' (profiled or configured) throughput.
//
// PowerSGD is priced as the runtime executes it (runtime/lib/Programs.cpp):
// encode copies the bucket into its matrix M and forms P = M Q; between the
// all-reduce of P and that of Q it orthogonalises P and forms Q = M^T P.
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/CostModel.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace zen::cost {
namespace {

constexpr double kFloatBytes = 4;
constexpr double kSparseEntryBytes = 8;        // fp32 value + int32 index
constexpr double kRandomAccessBytes = 32;      // one DRAM sector per scattered element
constexpr double kInt8ChunkElements = 1024;    // one fp32 scale per chunk
constexpr double kGpuKernelLaunchUs = 4;       // launch + tail of a small CUDA kernel

int64_t keptElements(const CompressionSpec &spec, int64_t elements) {
  double ratio = std::clamp(spec.ratio, 0.0, 1.0);
  int64_t kept = static_cast<int64_t>(std::ceil(ratio * static_cast<double>(elements)));
  return std::clamp<int64_t>(kept, elements > 0 ? 1 : 0, elements);
}

/// The bucket viewed as a near-square rows x cols matrix (PowerSGD's view).
void matrixShape(int64_t elements, int64_t &rows, int64_t &cols) {
  rows = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(elements)))));
  cols = std::max<int64_t>(1, (elements + rows - 1) / rows);
}

int64_t powerRank(const CompressionSpec &spec, int64_t rows, int64_t cols) {
  return std::clamp<int64_t>(spec.rank, 1, std::min(rows, cols));
}

/// HBM traffic and kernel launches of a GPU kernel sequence.
struct KernelWork {
  double bytes = 0;
  double flops = 0;
  int launches = 0;
};

} // namespace

double CostModel::wireBytes(const CompressionSpec &spec, int64_t elements) {
  double e = static_cast<double>(std::max<int64_t>(elements, 0));
  switch (spec.method) {
  case CompressionMethod::None:
    return kFloatBytes * e;
  case CompressionMethod::FP16:
  case CompressionMethod::BF16:
    return 2 * e;
  case CompressionMethod::Int8:
    return e + std::ceil(e / kInt8ChunkElements) * kFloatBytes;
  case CompressionMethod::TopK:
    return kSparseEntryBytes * static_cast<double>(keptElements(spec, elements));
  case CompressionMethod::RandomK:  // values only: every rank draws the same indices
    return kFloatBytes * static_cast<double>(keptElements(spec, elements));
  case CompressionMethod::Sign:
    return std::ceil(e / 8) + kFloatBytes;  // one bit per element + the mean magnitude
  case CompressionMethod::PowerSGD: {
    int64_t rows, cols;
    matrixShape(elements, rows, cols);
    return static_cast<double>(powerRank(spec, rows, cols) * (rows + cols)) * kFloatBytes;
  }
  }
  return kFloatBytes * e;
}

double CostModel::wireBytesLowerBound(const CompressionSpec &spec, double elements) {
  double e = std::max(elements, 0.0);
  switch (spec.method) {
  case CompressionMethod::None:
    return kFloatBytes * e;
  case CompressionMethod::FP16:
  case CompressionMethod::BF16:
    return 2 * e;
  case CompressionMethod::Int8:
    // Each bucket also sends a scale per started chunk.
    return e * (1 + kFloatBytes / kInt8ChunkElements);
  case CompressionMethod::TopK:
    return kSparseEntryBytes * std::clamp(spec.ratio, 0.0, 1.0) * e;
  case CompressionMethod::RandomK:
    return kFloatBytes * std::clamp(spec.ratio, 0.0, 1.0) * e;
  case CompressionMethod::Sign:
    return e / 8;
  case CompressionMethod::PowerSGD: {
    // A bucket sends r' (rows + cols) floats with rows x cols >= e and
    // r' = min(r, rows, cols): at least 2 r sqrt(e) when r' = r, else at least
    // rows x cols >= e. min(e, 2 r sqrt(e)) is concave, so splitting never
    // sends less than one bucket of all the elements would.
    double rank = static_cast<double>(std::max<int64_t>(spec.rank, 1));
    return kFloatBytes * std::min(e, 2 * rank * std::sqrt(e));
  }
  }
  return kFloatBytes * e;
}

CompressionCost CostModel::compression(const CompressionSpec &spec, int64_t elements,
                                       int64_t payloads, double elementBytes) const {
  CompressionCost cost;
  cost.wireBytes = wireBytes(spec, elements);
  if (spec.method == CompressionMethod::None || elements <= 0)
    return cost;
  double e = static_cast<double>(elements);
  double p = static_cast<double>(std::max<int64_t>(payloads, 1));
  double dense = elementBytes * e;
  double kept = static_cast<double>(keptElements(spec, elements));

  KernelWork encode, between, decode;
  switch (spec.method) {
  case CompressionMethod::None:
    break;
  case CompressionMethod::FP16:
  case CompressionMethod::BF16:
    encode = {dense + 2 * e, 0, 1};
    decode = {2 * e * p + dense, 0, 1};
    break;
  case CompressionMethod::Int8:
    encode = {dense /*absmax per chunk*/ + dense + cost.wireBytes, 0, 2};
    decode = {cost.wireBytes * p + dense, 0, 1};
    break;
  case CompressionMethod::TopK:
    // Threshold by radix select (two passes) then compaction (one pass).
    encode = {3 * dense + kSparseEntryBytes * kept, 0, 3};
    decode = {dense /*zero*/ + p * kept * (kSparseEntryBytes + kRandomAccessBytes), 0, 2};
    break;
  case CompressionMethod::RandomK:
    encode = {kept * (kRandomAccessBytes + kSparseEntryBytes), 0, 1};
    decode = {dense + p * kept * (kSparseEntryBytes + kRandomAccessBytes), 0, 2};
    break;
  case CompressionMethod::Sign:
    encode = {dense /*mean |x|*/ + dense + cost.wireBytes, 0, 2};
    decode = {p * cost.wireBytes + dense, 0, 1};
    break;
  case CompressionMethod::PowerSGD: {
    int64_t rows, cols;
    matrixShape(elements, rows, cols);
    double r = static_cast<double>(powerRank(spec, rows, cols));
    double m = static_cast<double>(rows) * static_cast<double>(cols);
    double p = static_cast<double>(rows) * r * kFloatBytes;
    double q = static_cast<double>(cols) * r * kFloatBytes;
    // Copy the bucket into M, then P = M Q (one GEMM reading M and Q).
    encode = {dense + kFloatBytes * m + kFloatBytes * m + q + p, 2 * m * r, 2};
    // Gram-Schmidt over P's r columns, then Q = M^T P (reads M and P).
    between = {2 * r * p + kFloatBytes * m + p + q,
               2 * static_cast<double>(rows) * r * r + 2 * m * r, 2};
    // M ~ P Q^T.
    decode = {p + q + kFloatBytes * m, 2 * m * r, 1};
    break;
  }
  }
  if (spec.errorFeedback) {
    // Before: input += residual (read both, write). After: residual = input -
    // decode(payload) (read input and payload, write residual).
    encode.bytes += 3 * dense + dense + cost.wireBytes + dense;
    encode.launches += 2;
  }

  if (spec.device == Device::GPU) {
    auto gpuUs = [&](const KernelWork &work) {
      return computeUs(work.flops, work.bytes, DType::F32) + work.launches * kGpuKernelLaunchUs;
    };
    cost.encodeUs = gpuUs(encode);
    cost.betweenUs = gpuUs(between);
    cost.decodeUs = gpuUs(decode);
    return cost;
  }

  // CPU offload: PCIe both ways, the kernel at the CPU's throughput over the
  // bytes it reads (the profile measures exactly that quantity).
  auto profiled = cluster_.profiledCompressionGBps.find(spec.method);
  double cpuGBps = profiled != cluster_.profiledCompressionGBps.end() ? profiled->second
                                                                     : cluster_.gpu.cpuCompressGBps;
  double pcieUsPerByte = 1.0 / (cluster_.gpu.pcieBandwidthGBps * 1e3);
  double encodeRead = spec.method == CompressionMethod::PowerSGD ? encode.bytes : dense;
  double decodeRead = std::max(decode.bytes - dense, p * cost.wireBytes);
  cost.encodeUs = dense * pcieUsPerByte + encodeRead / (cpuGBps * 1e3);
  cost.betweenUs = between.bytes / (cpuGBps * 1e3);
  cost.decodeUs = decodeRead / (cpuGBps * 1e3) + dense * pcieUsPerByte;
  return cost;
}

SyncCost CostModel::syncCost(const CompressionSpec &spec, SyncScheme scheme, int64_t elements,
                             double bytes, Group group, int64_t chunks) const {
  SyncCost cost;
  const vocab::SyncSchemeTraits &steps = vocab::traitsOf(scheme);
  const bool gathered = vocab::gathersPayloads(scheme);
  const double ranks = static_cast<double>(std::max<int64_t>(group.ranks, 1));
  double payload = bytes;
  if (spec.method != CompressionMethod::None) {
    cost.compression = compression(spec, elements, gathered ? group.ranks : 1);
    payload = cost.compression.wireBytes;
  }
  if (steps.steps == 2)
    cost.gather = chunkedCollective(steps.sequence[1], payload, group, chunks);
  if (spec.method != CompressionMethod::PowerSGD) {
    // An all-gather's size is its output: every rank's payload.
    cost.reduction =
        chunkedCollective(steps.sequence[0], gathered ? payload * ranks : payload, group, chunks);
    return cost;
  }
  int64_t rows, cols;
  matrixShape(elements, rows, cols);
  double r = static_cast<double>(powerRank(spec, rows, cols));
  CollectiveCost p = chunkedCollective(CollectiveKind::AllReduce,
                                       static_cast<double>(rows) * r * kFloatBytes, group, chunks);
  CollectiveCost q = chunkedCollective(CollectiveKind::AllReduce,
                                       static_cast<double>(cols) * r * kFloatBytes, group, chunks);
  CollectiveCost &both = cost.reduction;
  both = p;
  both.latencyUs = p.latencyUs + cost.compression.betweenUs + q.latencyUs;
  both.bandwidthUs = p.bandwidthUs + q.bandwidthUs;
  both.intraNodeUs = p.intraNodeUs + q.intraNodeUs;
  both.interNodeUs = p.interNodeUs + q.interNodeUs;
  both.timeUs = both.latencyUs + both.bandwidthUs;
  both.algBandwidthGBps = both.busBandwidthGBps = 0;
  if (both.timeUs > 0) {
    both.algBandwidthGBps = payload / both.timeUs / 1e3;
    both.busBandwidthGBps = both.algBandwidthGBps * 2 * (ranks - 1) / ranks;
  }
  return cost;
}

std::optional<CompressionSpec> parseCompressionSpec(const std::string &text, std::string *error) {
  auto fail = [&](const std::string &why) -> std::optional<CompressionSpec> {
    if (error)
      *error = "invalid compressor \"" + text + "\": " + why;
    return std::nullopt;
  };
  CompressionSpec spec;
  std::string body = text;
  size_t at = body.find('@');
  if (at != std::string::npos) {
    std::optional<Device> device = vocab::parseDevice(body.substr(at + 1));
    if (!device)
      return fail("device must be gpu or cpu");
    spec.device = *device;
    spec.deviceFixed = true;
    body = body.substr(0, at);
  }
  size_t colon = body.find(':');
  std::string name = body.substr(0, colon);
  std::optional<CompressionMethod> method = parseCompressionMethod(name);
  if (!method) {
    std::string expected;
    for (const vocab::CompressionTraits &entry : vocab::kCompressionMethods)
      expected += std::string(expected.empty() ? "" : ", ") + entry.spelling +
                  (entry.takesRatio ? ":R" : entry.takesRank ? ":K" : "");
    return fail("unknown method (expected " + expected + ")");
  }
  spec.method = *method;
  const bool sparse = vocab::takesRatio(spec.method);
  const bool lowRank = vocab::takesRank(spec.method);
  if (colon == std::string::npos) {
    if (sparse)
      return fail(name + " needs a kept ratio, e.g. " + name + ":0.01");
    if (lowRank)
      return fail("powersgd needs a rank, e.g. powersgd:4");
    return spec;
  }
  std::string parameter = body.substr(colon + 1);
  if (!sparse && !lowRank)
    return fail(name + " takes no parameter");
  const char *begin = parameter.c_str();
  char *end = nullptr;
  if (sparse) {
    double ratio = std::strtod(begin, &end);
    if (parameter.empty() || *end != '\0' || !std::isfinite(ratio) || ratio <= 0 || ratio > 1)
      return fail("ratio must be a number in (0, 1]");
    spec.ratio = ratio;
  } else {
    long long rank = std::strtoll(begin, &end, 10);
    if (parameter.empty() || *end != '\0' || rank < 1 || rank > 1 << 20)
      return fail("rank must be a positive integer");
    spec.rank = rank;
  }
  return spec;
}

} // namespace zen::cost
