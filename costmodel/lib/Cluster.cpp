//===- Cluster.cpp - cluster description: JSON, validation, presets -------===//
//
// The schema is strict: every object rejects unknown fields, every number is
// checked, and each error names the file and the JSON path of the offending
// value, so a typo in a hand-written cluster file is caught at load time
// instead of silently producing a different plan.
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/Cluster.h"

#include "zen/Support/FileIO.h"
#include "zen/Support/StrictJson.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <iterator>
#include <sstream>

namespace zen::cost {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// Generated at build time from costmodel/presets/*.json: {name, text} pairs.
struct EmbeddedPreset {
  const char *name;
  const char *text;
};
const EmbeddedPreset kPresets[] = {
#include "ZenClusterPresets.inc"
};

// Input limits (costmodel/README.md): a profiled cluster file is a few KiB.
constexpr uint64_t kMaxClusterBytes = uint64_t(16) << 20;
// The plan format's largest world size: every product of ranks stays far inside int64.
constexpr int64_t kMaxWorldSize = int64_t(1) << 20;

/// A physical quantity's accepted range (costmodel/README.md "Physical ranges"):
/// wide enough for any real device, narrow enough that every time the cost
/// model predicts stays finite: 2^62 bytes over the slowest link at the lowest
/// efficiency, or 2^61 FLOPs on the slowest GPU, take less than 1e24 us.
/// `low` 0: any positive value.
struct PhysicalRange {
  double low, high;
  const char *unit;
};
// 1 GFLOP/s (below one CPU core) to 100 PFLOP/s (20x a B200's dense fp8 peak).
constexpr PhysicalRange kPeakRange{1e-3, 1e5, "TFLOP/s"};
// 1 KB/s (a 9600-baud modem; `zenopt profile` measured MPI on two busy cores at
// 0.4 MB/s) to 100 TB/s (12x HBM3e, 55x NVLink 5).
constexpr PhysicalRange kBandwidthRange{1e-6, 1e5, "GB/s"};
// Below 1% of a peak, nothing runs at the rated speed the field scales.
constexpr PhysicalRange kEfficiencyRange{0.01, 1, ""};
// One second per hop: ten times a transcontinental round trip.
constexpr PhysicalRange kLatencyRange{0, 1e6, "us"};
// 1 PB of device memory.
constexpr PhysicalRange kMemoryRange{0, 1e6, "GB"};
// Compute under a collective: published 1.1-1.4x (README "Overlap slowdown"), cpu-local 2.
constexpr PhysicalRange kSlowdownRange{1, 10, ""};
// A GEMM dimension `zenopt profile` times: 2^20 keeps every product of three inside 2^61 FLOPs.
constexpr int64_t kMaxGemmDimension = int64_t(1) << 20;
// A compute task's fixed cost: one second, as a hop's latency.
constexpr PhysicalRange kOverheadRange{0, 1e6, "us"};
// A profiled GEMM rate per rank: the peak range, in GFLOP/s.
constexpr PhysicalRange kGflopsRange{1, 1e8, "GFLOP/s"};
// A profiled all-reduce measured beside compute: at most the largest message the profile sends.
constexpr PhysicalRange kProfiledBytesRange{1, double(int64_t(1) << 40), "bytes"};
// A profiled fit's start-up (alpha) at most the latency bound; its per-byte
// time (beta) at most the slowest bandwidth's, 1000 us per byte.
constexpr PhysicalRange kAlphaRange{0, 1e6, "us"};
constexpr PhysicalRange kBetaRange{0, 1e3, "us per byte"};
// Streaming multiprocessors: B200 148, MI300X 304 compute units.
constexpr int64_t kMaxSms = 100000;

const char *const kIntraKinds[] = {"nvlink", "pcie", "shm"};
const char *const kInterKinds[] = {"infiniband", "ethernet"};

/// Walks a parsed document, checking types and ranges; every failure names
/// `source` and the JSON pointer of the value.
class SchemaReader {
public:
  explicit SchemaReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string &path, const std::string &what) const {
    throw ClusterError(ErrorKind::BadInput, source_ + ": " + (path.empty() ? "/" : path) + ": " + what);
  }

  /// Checks `value` is an object whose keys are all in `allowed`.
  void object(const json &value, const std::string &path,
              std::initializer_list<const char *> allowed) const {
    if (!value.is_object())
      fail(path, "must be an object");
    for (auto it = value.begin(); it != value.end(); ++it) {
      bool known = std::any_of(allowed.begin(), allowed.end(),
                               [&](const char *key) { return it.key() == key; });
      if (!known)
        fail(path + "/" + it.key(), "unknown field");
    }
  }

  const json *optional(const json &object, const char *key) const {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }

  const json &required(const json &object, const std::string &path, const char *key) const {
    const json *value = optional(object, key);
    if (!value)
      fail(path + "/" + key, "required field is missing");
    return *value;
  }

  double number(const json &value, const std::string &path) const {
    if (!value.is_number())
      fail(path, "must be a number");
    double number = value.get<double>();
    if (!std::isfinite(number))
      fail(path, "must be a finite number");
    return number;
  }

  double positive(const json &value, const std::string &path) const {
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0)
      fail(path, "must be a finite positive number");
    return value.get<double>();
  }

  double nonNegative(const json &value, const std::string &path) const {
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0)
      fail(path, "must be a finite non-negative number");
    return value.get<double>();
  }

  /// An achievable fraction of a peak: in (0, 1], and not below kEfficiencyRange.
  double efficiency(const json &value, const std::string &path) const {
    double number = positive(value, path);
    if (number > 1)
      fail(path, "must be in (0, 1]");
    return inRange(number, path, kEfficiencyRange);
  }

  /// A positive number within `range`.
  double within(const json &value, const std::string &path, const PhysicalRange &range) const {
    return inRange(positive(value, path), path, range);
  }

  /// A non-negative number within `range`.
  double nonNegativeWithin(const json &value, const std::string &path, const PhysicalRange &range) const {
    double number = nonNegative(value, path);
    return number == 0 ? 0 : inRange(number, path, range);
  }

  int64_t positiveInteger(const json &value, const std::string &path) const {
    if (!value.is_number_integer() || value.get<int64_t>() <= 0)
      fail(path, "must be a positive integer");
    return value.get<int64_t>();
  }

  std::string string(const json &value, const std::string &path) const {
    if (!value.is_string())
      fail(path, "must be a string");
    return value.get<std::string>();
  }

  template <size_t N>
  std::string oneOf(const json &value, const std::string &path, const char *const (&choices)[N]) const {
    std::string text = string(value, path);
    std::string list;
    for (const char *choice : choices) {
      if (text == choice)
        return text;
      list += list.empty() ? choice : std::string(", ") + choice;
    }
    fail(path, "must be one of " + list + " (got \"" + text + "\")");
  }

private:
  double inRange(double number, const std::string &path, const PhysicalRange &range) const {
    if (number >= range.low && number <= range.high)
      return number;
    const std::string unit = *range.unit ? std::string(" ") + range.unit : "";
    std::ostringstream text;
    if (range.low > 0)
      text << "must be from " << range.low << " to " << range.high << unit;
    else
      text << "must be at most " << range.high << unit;
    text << " (got " << number << "; costmodel/README.md \"Physical ranges\")";
    fail(path, text.str());
  }

  std::string source_;
};

/// Finds the JSON pointer of the value the parser rejected (nlohmann's DOM
/// parser reports an out-of-range number without saying where it was).
class ErrorPathFinder : public nlohmann::json_sax<json> {
public:
  std::string errorPath;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t &) override { return value(); }
  bool string(string_t &) override { return value(); }
  bool binary(binary_t &) override { return value(); }
  bool start_object(std::size_t) override {
    value();
    levels_.push_back({false, "", -1});
    return true;
  }
  bool key(string_t &key) override {
    levels_.back().key = key;
    return true;
  }
  bool end_object() override {
    levels_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    value();
    levels_.push_back({true, "", -1});
    return true;
  }
  bool end_array() override {
    levels_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string &, const nlohmann::detail::exception &) override {
    // The rejected value would have been the next element of an array.
    value();
    for (const Level &level : levels_)
      errorPath += "/" + (level.array ? std::to_string(level.index) : level.key);
    return false;
  }

private:
  struct Level {
    bool array;
    std::string key;
    long index;
  };
  bool value() {
    if (!levels_.empty() && levels_.back().array)
      ++levels_.back().index;
    return true;
  }
  std::vector<Level> levels_;
};

GpuSpec readGpu(const SchemaReader &reader, const json &value, const std::string &path) {
  reader.object(value, path,
                {"name", "peak_tflops", "hbm_bandwidth_gbps", "memory_gb", "sms", "efficiencies",
                 "pcie_bandwidth_gbps", "cpu_compress_gbps"});
  GpuSpec gpu;
  gpu.name = reader.string(reader.required(value, path, "name"), path + "/name");
  const std::string peakPath = path + "/peak_tflops";
  const json &peak = reader.required(value, path, "peak_tflops");
  reader.object(peak, peakPath, {"fp32", "tf32", "fp16", "bf16", "int8"});
  reader.required(peak, peakPath, "fp32");
  for (auto it = peak.begin(); it != peak.end(); ++it)
    gpu.peakTflops[*parseDType(it.key())] = reader.within(*it, peakPath + "/" + it.key(), kPeakRange);
  gpu.hbmBandwidthGBps = reader.within(reader.required(value, path, "hbm_bandwidth_gbps"),
                                       path + "/hbm_bandwidth_gbps", kBandwidthRange);
  if (const json *memory = reader.optional(value, "memory_gb"))
    gpu.memoryGB = reader.within(*memory, path + "/memory_gb", kMemoryRange);
  if (const json *sms = reader.optional(value, "sms")) {
    gpu.sms = reader.positiveInteger(*sms, path + "/sms");
    if (gpu.sms > kMaxSms)
      reader.fail(path + "/sms", "must be at most " + std::to_string(kMaxSms));
  }
  if (const json *efficiencies = reader.optional(value, "efficiencies")) {
    const std::string effPath = path + "/efficiencies";
    reader.object(*efficiencies, effPath, {"compute", "gemm", "memory"});
    if (const json *compute = reader.optional(*efficiencies, "compute"))
      gpu.computeEfficiency = reader.efficiency(*compute, effPath + "/compute");
    if (const json *gemm = reader.optional(*efficiencies, "gemm"))
      gpu.gemmEfficiency = reader.efficiency(*gemm, effPath + "/gemm");
    if (const json *memory = reader.optional(*efficiencies, "memory"))
      gpu.memoryEfficiency = reader.efficiency(*memory, effPath + "/memory");
  }
  if (const json *pcie = reader.optional(value, "pcie_bandwidth_gbps"))
    gpu.pcieBandwidthGBps = reader.within(*pcie, path + "/pcie_bandwidth_gbps", kBandwidthRange);
  if (const json *cpu = reader.optional(value, "cpu_compress_gbps"))
    gpu.cpuCompressGBps = reader.within(*cpu, path + "/cpu_compress_gbps", kBandwidthRange);
  return gpu;
}

template <size_t N>
LinkSpec readLink(const SchemaReader &reader, const json &value, const std::string &path,
                  const char *const (&kinds)[N], bool withNics, int64_t *nicsPerNode) {
  if (withNics)
    reader.object(value, path,
                  {"kind", "nics_per_node", "bandwidth_gbps", "latency_us", "efficiency"});
  else
    reader.object(value, path, {"kind", "bandwidth_gbps", "latency_us", "efficiency"});
  LinkSpec link;
  link.kind = reader.oneOf(reader.required(value, path, "kind"), path + "/kind", kinds);
  if (withNics)
    *nicsPerNode = reader.positiveInteger(reader.required(value, path, "nics_per_node"),
                                          path + "/nics_per_node");
  link.bandwidthGBps = reader.within(reader.required(value, path, "bandwidth_gbps"),
                                     path + "/bandwidth_gbps", kBandwidthRange);
  link.latencyUs =
      reader.within(reader.required(value, path, "latency_us"), path + "/latency_us", kLatencyRange);
  if (const json *efficiency = reader.optional(value, "efficiency"))
    link.efficiency = reader.efficiency(*efficiency, path + "/efficiency");
  return link;
}

CollectiveKind readCollectiveKind(const SchemaReader &reader, const json &value,
                                  const std::string &path) {
  std::string name = reader.string(value, path);
  std::optional<CollectiveKind> kind = parseCollectiveKind(name);
  if (!kind) {
    std::string expected;
    const size_t count = std::size(vocab::kCollectiveKinds);
    for (size_t i = 0; i < count; ++i)
      expected += std::string(i == 0 ? "" : i + 1 == count ? " or " : ", ") +
                  vocab::kCollectiveKinds[i].spelling;
    reader.fail(path, "unknown collective \"" + name + "\" (expected " + expected + ")");
  }
  return *kind;
}

void readProfiledCompute(const SchemaReader &reader, const json &value, const std::string &path,
                         ProfiledCompute &compute) {
  reader.object(value, path, {"gemm", "memory_gbps", "kernel_overhead_us", "method"});
  const std::string listPath = path + "/gemm";
  const json &gemms = reader.required(value, path, "gemm");
  if (!gemms.is_array() || gemms.empty())
    reader.fail(listPath, "must be a non-empty array");
  for (size_t i = 0; i < gemms.size(); ++i) {
    const std::string at = listPath + "/" + std::to_string(i);
    const json &entry = gemms[i];
    reader.object(entry, at, {"m", "n", "k", "gflops"});
    ProfiledGemm gemm;
    int64_t *dimensions[] = {&gemm.m, &gemm.n, &gemm.k};
    const char *names[] = {"m", "n", "k"};
    for (int d = 0; d < 3; ++d) {
      *dimensions[d] = reader.positiveInteger(reader.required(entry, at, names[d]), at + "/" + names[d]);
      if (*dimensions[d] > kMaxGemmDimension)
        reader.fail(at + "/" + names[d], "must be at most " + std::to_string(kMaxGemmDimension));
    }
    gemm.gflops = reader.within(reader.required(entry, at, "gflops"), at + "/gflops", kGflopsRange);
    compute.gemms.push_back(gemm);
  }
  compute.memoryGBps = reader.within(reader.required(value, path, "memory_gbps"),
                                     path + "/memory_gbps", kBandwidthRange);
  compute.kernelOverheadUs = reader.nonNegativeWithin(
      reader.required(value, path, "kernel_overhead_us"), path + "/kernel_overhead_us", kOverheadRange);
  compute.method = reader.string(reader.required(value, path, "method"), path + "/method");
}

void readProfiledInterference(const SchemaReader &reader, const json &value,
                              const std::string &path, ProfiledInterference &interference) {
  reader.object(value, path, {"compute_slowdown", "collective_slowdown", "collective_bytes", "method"});
  interference.computeSlowdown = reader.within(reader.required(value, path, "compute_slowdown"),
                                               path + "/compute_slowdown", kSlowdownRange);
  interference.collectiveSlowdown = reader.within(
      reader.required(value, path, "collective_slowdown"), path + "/collective_slowdown", kSlowdownRange);
  interference.collectiveBytes = reader.within(reader.required(value, path, "collective_bytes"),
                                               path + "/collective_bytes", kProfiledBytesRange);
  interference.method = reader.string(reader.required(value, path, "method"), path + "/method");
}

void readProfiledExecutor(const SchemaReader &reader, const json &value, const std::string &path,
                          ProfiledExecutor &executor) {
  reader.object(value, path, {"alpha_us", "beta_us_per_byte", "method"});
  executor.alphaUs =
      reader.nonNegativeWithin(reader.required(value, path, "alpha_us"), path + "/alpha_us", kAlphaRange);
  executor.betaUsPerByte = reader.nonNegativeWithin(reader.required(value, path, "beta_us_per_byte"),
                                                    path + "/beta_us_per_byte", kBetaRange);
  executor.method = reader.string(reader.required(value, path, "method"), path + "/method");
}

void readProfiled(const SchemaReader &reader, const json &value, const std::string &path,
                  Cluster &cluster) {
  reader.object(value, path,
                {"backend", "collectives", "validation", "compression_gbps", "compute", "interference",
                 "executor"});
  if (const json *backend = reader.optional(value, "backend")) {
    const char *const backends[] = {"mpi", "nccl"};
    cluster.profiledBackend = reader.oneOf(*backend, path + "/backend", backends);
  }
  if (const json *collectives = reader.optional(value, "collectives")) {
    const std::string listPath = path + "/collectives";
    if (!collectives->is_array())
      reader.fail(listPath, "must be an array");
    for (size_t i = 0; i < collectives->size(); ++i) {
      const json &entry = (*collectives)[i];
      const std::string at = listPath + "/" + std::to_string(i);
      reader.object(entry, at,
                    {"op", "ranks", "min_bytes", "max_bytes", "alpha_us", "beta_us_per_byte",
                     "r_squared", "worst_relative_error"});
      ProfiledCollective fit;
      fit.kind = readCollectiveKind(reader, reader.required(entry, at, "op"), at + "/op");
      fit.ranks = reader.positiveInteger(reader.required(entry, at, "ranks"), at + "/ranks");
      fit.minBytes = reader.positive(reader.required(entry, at, "min_bytes"), at + "/min_bytes");
      fit.maxBytes = reader.positive(reader.required(entry, at, "max_bytes"), at + "/max_bytes");
      if (fit.maxBytes < fit.minBytes)
        reader.fail(at + "/max_bytes", "must not be less than min_bytes");
      // A least-squares fit may legitimately put either term at zero.
      fit.alphaUs =
          reader.nonNegativeWithin(reader.required(entry, at, "alpha_us"), at + "/alpha_us", kAlphaRange);
      fit.betaUsPerByte = reader.nonNegativeWithin(reader.required(entry, at, "beta_us_per_byte"),
                                                   at + "/beta_us_per_byte", kBetaRange);
      if (fit.alphaUs == 0 && fit.betaUsPerByte == 0)
        reader.fail(at, "alpha_us and beta_us_per_byte cannot both be zero");
      // R^2 is negative for a fit worse than the mean: allowed, but never above 1.
      fit.rSquared = reader.number(reader.required(entry, at, "r_squared"), at + "/r_squared");
      if (fit.rSquared > 1)
        reader.fail(at + "/r_squared", "must not exceed 1");
      fit.worstRelativeError = reader.nonNegative(reader.required(entry, at, "worst_relative_error"),
                                                  at + "/worst_relative_error");
      cluster.profiled.push_back(fit);
    }
  }
  if (const json *validation = reader.optional(value, "validation")) {
    const std::string listPath = path + "/validation";
    if (!validation->is_array())
      reader.fail(listPath, "must be an array");
    for (size_t i = 0; i < validation->size(); ++i) {
      const json &entry = (*validation)[i];
      const std::string at = listPath + "/" + std::to_string(i);
      reader.object(entry, at,
                    {"op", "ranks", "points", "median_relative_error", "worst_relative_error"});
      ProfiledValidation check;
      check.kind = readCollectiveKind(reader, reader.required(entry, at, "op"), at + "/op");
      check.ranks = reader.positiveInteger(reader.required(entry, at, "ranks"), at + "/ranks");
      check.points = reader.positiveInteger(reader.required(entry, at, "points"), at + "/points");
      check.medianRelativeError = reader.nonNegative(
          reader.required(entry, at, "median_relative_error"), at + "/median_relative_error");
      check.worstRelativeError = reader.nonNegative(
          reader.required(entry, at, "worst_relative_error"), at + "/worst_relative_error");
      cluster.validation.push_back(check);
    }
  }
  if (const json *compression = reader.optional(value, "compression_gbps")) {
    const std::string mapPath = path + "/compression_gbps";
    if (!compression->is_object())
      reader.fail(mapPath, "must be an object");
    for (auto it = compression->begin(); it != compression->end(); ++it) {
      std::optional<CompressionMethod> method = parseCompressionMethod(it.key());
      if (!method || *method == CompressionMethod::None)
        reader.fail(mapPath + "/" + it.key(), "unknown field (not a compression method)");
      cluster.profiledCompressionGBps[*method] = reader.within(*it, mapPath + "/" + it.key(), kBandwidthRange);
    }
  }
  if (const json *compute = reader.optional(value, "compute"))
    readProfiledCompute(reader, *compute, path + "/compute", cluster.profiledCompute);
  if (const json *executor = reader.optional(value, "executor")) {
    cluster.profiledExecutor.emplace();
    readProfiledExecutor(reader, *executor, path + "/executor", *cluster.profiledExecutor);
  }
  if (const json *interference = reader.optional(value, "interference")) {
    cluster.profiledInterference.emplace();
    readProfiledInterference(reader, *interference, path + "/interference",
                             *cluster.profiledInterference);
  }
}

std::string defaultName(const std::string &source) {
  std::string name = source.substr(source.find_last_of('/') + 1);
  size_t dot = name.rfind(".json");
  return dot == std::string::npos ? name : name.substr(0, dot);
}

} // namespace

const char *toString(DType dtype) {
  switch (dtype) {
  case DType::F32: return "fp32";
  case DType::F16: return "fp16";
  case DType::BF16: return "bf16";
  case DType::I8: return "int8";
  case DType::TF32: return "tf32";
  }
  return "fp32";
}

std::optional<DType> parseDType(const std::string &name) {
  if (name == "fp32" || name == "f32") return DType::F32;
  if (name == "fp16" || name == "f16") return DType::F16;
  if (name == "bf16") return DType::BF16;
  if (name == "int8" || name == "i8") return DType::I8;
  if (name == "tf32") return DType::TF32;
  return std::nullopt;
}

Cluster parseCluster(const std::string &jsonText, const std::string &source) {
  json document;
  zen::StrictJsonParse strict([&](const std::string &path, const std::string &what) {
    SchemaReader(source).fail(path, what);
  });
  try {
    // Comments are accepted so presets and hand-written files can cite their sources.
    document = strict.parse(jsonText, /*ignoreComments=*/true);
  } catch (const json::parse_error &error) {
    throw ClusterError(ErrorKind::BadInput, source + ": not valid JSON: " + error.what());
  } catch (const json::out_of_range &) {
    // A number literal beyond the range of double, e.g. 1e999.
    ErrorPathFinder finder;
    json::sax_parse(jsonText, &finder, json::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/true);
    SchemaReader(source).fail(finder.errorPath, "must be a finite number");
  }
  SchemaReader reader(source);
  reader.object(document, "",
                {"name", "nodes", "gpus_per_node", "gpu", "intra_node", "inter_node",
                 "overlap_slowdown", "profiled"});
  Cluster cluster;
  cluster.name = defaultName(source);
  if (const json *name = reader.optional(document, "name"))
    cluster.name = reader.string(*name, "/name");
  cluster.nodes = reader.positiveInteger(reader.required(document, "", "nodes"), "/nodes");
  cluster.gpusPerNode =
      reader.positiveInteger(reader.required(document, "", "gpus_per_node"), "/gpus_per_node");
  int64_t worldSize = 0;
  if (__builtin_mul_overflow(cluster.nodes, cluster.gpusPerNode, &worldSize) ||
      worldSize > kMaxWorldSize)
    reader.fail("/gpus_per_node", "nodes x gpus_per_node = " +
                                      std::to_string(cluster.nodes) + " x " +
                                      std::to_string(cluster.gpusPerNode) +
                                      " exceeds the largest world size, " +
                                      std::to_string(kMaxWorldSize) + " ranks");
  cluster.gpu = readGpu(reader, reader.required(document, "", "gpu"), "/gpu");
  cluster.intraNode = readLink(reader, reader.required(document, "", "intra_node"), "/intra_node",
                               kIntraKinds, /*withNics=*/false, nullptr);
  cluster.interNode = readLink(reader, reader.required(document, "", "inter_node"), "/inter_node",
                               kInterKinds, /*withNics=*/true, &cluster.nicsPerNode);
  if (const json *slowdown = reader.optional(document, "overlap_slowdown")) {
    cluster.overlapSlowdown = reader.positive(*slowdown, "/overlap_slowdown");
    if (cluster.overlapSlowdown < 1)
      reader.fail("/overlap_slowdown", "must be at least 1 (overlap never speeds compute up)");
    reader.within(*slowdown, "/overlap_slowdown", kSlowdownRange);
  }
  if (const json *profiled = reader.optional(document, "profiled"))
    readProfiled(reader, *profiled, "/profiled", cluster);
  return cluster;
}

Cluster withNodes(Cluster cluster, int64_t nodes) {
  int64_t worldSize = 0;
  if (nodes < 1 || __builtin_mul_overflow(nodes, cluster.gpusPerNode, &worldSize) ||
      worldSize > kMaxWorldSize)
    throw ClusterError(ErrorKind::BadUsage,
                       "--nodes " + std::to_string(nodes) + ": cluster '" + cluster.name +
                           "' has " + std::to_string(cluster.gpusPerNode) +
                           " GPUs per node; nodes must be at least 1 and nodes x GPUs at most " +
                           std::to_string(kMaxWorldSize));
  cluster.nodes = nodes;
  return cluster;
}

Cluster loadCluster(const std::string &nameOrPath) {
  for (const EmbeddedPreset &preset : kPresets)
    if (nameOrPath == preset.name)
      return parseCluster(preset.text, std::string("preset ") + preset.name);
  std::string text;
  try {
    text = zen::io::readBounded(nameOrPath, kMaxClusterBytes, "cluster file");
  } catch (const zen::io::FileError &error) {
    std::string message = error.what();
    if (error.kind == ErrorKind::Unreadable) {
      std::string presets;
      for (const std::string &name : presetNames())
        presets += (presets.empty() ? "" : ", ") + name;
      message += "; built-in presets are " + presets;
    }
    throw ClusterError(error.kind, message);
  }
  return parseCluster(text, nameOrPath);
}

std::string writeCluster(const Cluster &cluster) {
  ordered_json document;
  document["name"] = cluster.name;
  document["nodes"] = cluster.nodes;
  document["gpus_per_node"] = cluster.gpusPerNode;
  ordered_json gpu;
  gpu["name"] = cluster.gpu.name;
  ordered_json peak = ordered_json::object();
  for (const auto &[dtype, tflops] : cluster.gpu.peakTflops)
    peak[toString(dtype)] = tflops;
  gpu["peak_tflops"] = peak;
  gpu["hbm_bandwidth_gbps"] = cluster.gpu.hbmBandwidthGBps;
  if (cluster.gpu.memoryGB > 0)
    gpu["memory_gb"] = cluster.gpu.memoryGB;
  if (cluster.gpu.sms > 0)
    gpu["sms"] = cluster.gpu.sms;
  gpu["efficiencies"] = {{"compute", cluster.gpu.computeEfficiency}};
  if (cluster.gpu.gemmEfficiency > 0)
    gpu["efficiencies"]["gemm"] = cluster.gpu.gemmEfficiency;
  gpu["efficiencies"]["memory"] = cluster.gpu.memoryEfficiency;
  gpu["pcie_bandwidth_gbps"] = cluster.gpu.pcieBandwidthGBps;
  gpu["cpu_compress_gbps"] = cluster.gpu.cpuCompressGBps;
  document["gpu"] = gpu;
  document["intra_node"] = {{"kind", cluster.intraNode.kind},
                            {"bandwidth_gbps", cluster.intraNode.bandwidthGBps},
                            {"latency_us", cluster.intraNode.latencyUs},
                            {"efficiency", cluster.intraNode.efficiency}};
  document["inter_node"] = {{"kind", cluster.interNode.kind},
                            {"nics_per_node", cluster.nicsPerNode},
                            {"bandwidth_gbps", cluster.interNode.bandwidthGBps},
                            {"latency_us", cluster.interNode.latencyUs},
                            {"efficiency", cluster.interNode.efficiency}};
  document["overlap_slowdown"] = cluster.overlapSlowdown;
  bool hasProfile = !cluster.profiledBackend.empty() || !cluster.profiled.empty() ||
                    !cluster.validation.empty() || !cluster.profiledCompressionGBps.empty() ||
                    cluster.profiledCompute.measured() || cluster.profiledInterference ||
                    cluster.profiledExecutor;
  if (hasProfile) {
    ordered_json profiled;
    if (!cluster.profiledBackend.empty())
      profiled["backend"] = cluster.profiledBackend;
    ordered_json collectives = ordered_json::array();
    for (const ProfiledCollective &fit : cluster.profiled)
      collectives.push_back({{"op", toString(fit.kind)},
                             {"ranks", fit.ranks},
                             {"min_bytes", fit.minBytes},
                             {"max_bytes", fit.maxBytes},
                             {"alpha_us", fit.alphaUs},
                             {"beta_us_per_byte", fit.betaUsPerByte},
                             {"r_squared", fit.rSquared},
                             {"worst_relative_error", fit.worstRelativeError}});
    profiled["collectives"] = collectives;
    ordered_json validation = ordered_json::array();
    for (const ProfiledValidation &check : cluster.validation)
      validation.push_back({{"op", toString(check.kind)},
                            {"ranks", check.ranks},
                            {"points", check.points},
                            {"median_relative_error", check.medianRelativeError},
                            {"worst_relative_error", check.worstRelativeError}});
    profiled["validation"] = validation;
    ordered_json compression = ordered_json::object();
    for (const auto &[method, gbps] : cluster.profiledCompressionGBps)
      compression[toString(method)] = gbps;
    profiled["compression_gbps"] = compression;
    if (const ProfiledCompute &compute = cluster.profiledCompute; compute.measured()) {
      ordered_json gemms = ordered_json::array();
      for (const ProfiledGemm &gemm : compute.gemms)
        gemms.push_back({{"m", gemm.m}, {"n", gemm.n}, {"k", gemm.k}, {"gflops", gemm.gflops}});
      profiled["compute"] = {{"gemm", gemms},
                             {"memory_gbps", compute.memoryGBps},
                             {"kernel_overhead_us", compute.kernelOverheadUs},
                             {"method", compute.method}};
    }
    if (const auto &executor = cluster.profiledExecutor)
      profiled["executor"] = {{"alpha_us", executor->alphaUs},
                              {"beta_us_per_byte", executor->betaUsPerByte},
                              {"method", executor->method}};
    if (const auto &interference = cluster.profiledInterference)
      profiled["interference"] = {{"compute_slowdown", interference->computeSlowdown},
                                  {"collective_slowdown", interference->collectiveSlowdown},
                                  {"collective_bytes", interference->collectiveBytes},
                                  {"method", interference->method}};
    document["profiled"] = profiled;
  }
  return document.dump(2) + "\n";
}

void writeClusterFile(const Cluster &cluster, const std::string &path) {
  try {
    zen::io::writeFile(path, writeCluster(cluster));
  } catch (const zen::io::FileError &error) {
    throw ClusterError(error.kind, error.what());
  }
}

std::vector<std::string> presetNames() {
  std::vector<std::string> names;
  for (const EmbeddedPreset &preset : kPresets)
    names.push_back(preset.name);
  return names;
}

const char *defaultPresetName() { return "a100x64"; }

double ProfiledCompute::gemmGflops(double flops) const {
  if (gemms.empty())
    return 0;
  std::vector<std::pair<double, double>> points;  // (log FLOPs, GFLOP/s), by FLOPs
  for (const ProfiledGemm &gemm : gemms)
    points.emplace_back(std::log(gemm.flops()), gemm.gflops);
  std::sort(points.begin(), points.end());
  const double x = std::log(std::max(flops, 1.0));
  if (x <= points.front().first)
    return points.front().second;
  for (size_t i = 1; i < points.size(); ++i) {
    auto [x0, y0] = points[i - 1];
    auto [x1, y1] = points[i];
    if (x <= x1)
      return x1 == x0 ? 0.5 * (y0 + y1) : y0 + (y1 - y0) * (x - x0) / (x1 - x0);
  }
  return points.back().second;
}

} // namespace zen::cost
