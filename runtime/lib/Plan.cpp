//===- Plan.cpp - Plan file parsing, validation and canonical writing -----===//
#include "zenrt/Plan.h"

#include "zen/Support/FileIO.h"
#include "zen/Support/StrictJson.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

namespace zenrt {
namespace {

namespace io = zen::io;
using zen::escapeJsonPointerToken;
using zen::StrictJsonParse;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// Limits that keep every sum and product of the format inside int64.
constexpr int64_t kMaxElements = int64_t(1) << 46;
constexpr int64_t kMaxChunks = 1 << 16;
constexpr int64_t kMaxStream = 255;
constexpr int64_t kMaxWorldSize = 1 << 20;
// Steps of one pipeline schedule the summaries simulate (micro-batches x stages x chunks):
// zenopt writes at most 2^18 (cost::kMaxPipelineSteps, ~144 bytes a step per simulation);
// 2^22 cost `zenopt simulate` ~0.6 GB.
constexpr int64_t kMaxPipelineSteps = int64_t{1} << 18;
// Input limits (docs/plan-format.md): far above any plan zenopt writes (a 10 000-tensor
// model's plan is a few MiB, nested 6 deep), low enough that parsing stays cheap.
constexpr uint64_t kMaxPlanBytes = uint64_t(256) << 20;

/// How the file spells each enum: the shared vocabulary's tables
/// (zen/Vocabulary.h) and, for the format's own enums, these.
template <typename Enum> struct Spelling {
  Enum value;
  const char *spelling;
};
constexpr Spelling<BucketGroup> kBucketGroups[] = {
    {BucketGroup::DataParallel, "data_parallel"}, {BucketGroup::ExpertReplicas, "expert_replicas"}};

template <typename Enum> struct SpellingTable;
#define ZENRT_SPELLING_TABLE(Enum, Table)                                                \
  template <> struct SpellingTable<Enum> {                                               \
    static constexpr const auto &entries = Table;                                        \
  };
ZENRT_SPELLING_TABLE(CompressionMethod, zen::vocab::kCompressionMethods)
ZENRT_SPELLING_TABLE(Device, zen::vocab::kDevices)
ZENRT_SPELLING_TABLE(CollectiveKind, zen::vocab::kCollectiveKinds)
ZENRT_SPELLING_TABLE(TaskKind, zen::vocab::kTaskKinds)
ZENRT_SPELLING_TABLE(Phase, zen::vocab::kPhases)
ZENRT_SPELLING_TABLE(BucketGroup, kBucketGroups)
#undef ZENRT_SPELLING_TABLE

/// Values the format has: all but the point-to-point send_recv, which no plan
/// collective uses (docs/plan-format.md, "Buckets").
template <typename Enum> constexpr bool inFormat(Enum) { return true; }
constexpr bool inFormat(CollectiveKind kind) { return kind != CollectiveKind::SendRecv; }

template <typename Enum> const char *enumName(Enum value) {
  for (const auto &entry : SpellingTable<Enum>::entries)
    if (entry.value == value)
      return entry.spelling;
  return "?";
}
template <typename Enum> std::optional<Enum> enumParse(const std::string &text) {
  for (const auto &entry : SpellingTable<Enum>::entries)
    if (inFormat(entry.value) && text == entry.spelling)
      return entry.value;
  return std::nullopt;
}
template <typename Enum> std::string enumChoices() {
  std::string out;
  for (const auto &entry : SpellingTable<Enum>::entries)
    if (inFormat(entry.value))
      out += (out.empty() ? "" : "|") + std::string(entry.spelling);
  return out;
}

[[noreturn]] void fail(const std::string &source, const std::string &path, const std::string &what,
                       zen::ErrorKind kind = zen::ErrorKind::BadInput) {
  throw PlanError(kind, source + ": " + (path.empty() ? "/" : path) + ": " + what);
}

/// A JSON value with its path; typed accessors report violations by path.
class Node {
public:
  Node(const json &value, std::string path, const std::string &source)
      : value(value), path(std::move(path)), source(source) {}

  [[noreturn]] void error(const std::string &what) const { fail(source, path, what); }

  /// An object's field; every field of the format is required.
  Node field(const char *name) const {
    requireObject();
    auto it = value.find(name);
    if (it == value.end())
      fail(source, path + "/" + name, "missing field");
    consumed.insert(name);
    return Node(*it, path + "/" + name, source);
  }
  /// An optional field: absent gives std::nullopt.
  std::optional<Node> optionalField(const char *name) const {
    requireObject();
    auto it = value.find(name);
    if (it == value.end())
      return std::nullopt;
    consumed.insert(name);
    return Node(*it, path + "/" + name, source);
  }
  /// An object kept as opaque compact JSON text (keys sorted).
  std::string asObjectText() const {
    requireObject();
    return value.dump();
  }
  /// Rejects any field of this object not read through field().
  void rejectUnknownFields() const {
    requireObject();
    for (auto it = value.begin(); it != value.end(); ++it)
      if (!consumed.count(it.key()))
        fail(source, path + "/" + escapeJsonPointerToken(it.key()), "unknown field");
  }
  /// An array's elements or an object's members, each made when the loop reaches it: a
  /// plan's longest arrays hold millions of values, and a Node with its path costs ~100 bytes.
  /// The range holds what it reads by value or points into the document, never into the
  /// Node it came from (a temporary in `for (... : n.field("x").elements())`).
  template <typename Item, typename Make> class Lazy {
  public:
    class iterator {
    public:
      iterator(const Lazy &range, json::const_iterator at, size_t index)
          : range(range), at(at), index(index) {}
      Item operator*() const { return range.make(at, index); }
      iterator &operator++() {
        ++at;
        ++index;
        return *this;
      }
      bool operator!=(const iterator &other) const { return at != other.at; }

    private:
      const Lazy &range;
      json::const_iterator at;
      size_t index;
    };
    Lazy(const json &value, Make make) : value(value), make(std::move(make)) {}
    iterator begin() const { return iterator(*this, value.cbegin(), 0); }
    iterator end() const { return iterator(*this, value.cend(), value.size()); }

  private:
    const json &value;
    Make make;
  };
  auto elements() const {
    if (!value.is_array())
      error("must be an array");
    // By value: the loop outlives a Node returned by field().
    auto make = [path = path, &source = source](json::const_iterator at, size_t index) {
      return Node(*at, path + "/" + std::to_string(index), source);
    };
    return Lazy<Node, decltype(make)>(value, make);
  }
  auto members() const {
    requireObject();
    auto make = [path = path, &source = source](json::const_iterator at, size_t) {
      return std::pair<std::string, Node>(
          at.key(), Node(at.value(), path + "/" + escapeJsonPointerToken(at.key()), source));
    };
    return Lazy<std::pair<std::string, Node>, decltype(make)>(value, make);
  }
  std::string asString() const {
    if (!value.is_string())
      error("must be a string");
    return value.get<std::string>();
  }
  bool asBool() const {
    if (!value.is_boolean())
      error("must be true or false");
    return value.get<bool>();
  }
  int64_t asInt() const {
    if (value.is_number_unsigned()) {
      if (value.get<uint64_t>() > uint64_t(INT64_MAX))
        error("integer out of range");
      return int64_t(value.get<uint64_t>());
    }
    if (!value.is_number_integer())
      error("must be an integer");
    return value.get<int64_t>();
  }
  double asNumber() const {
    if (!value.is_number())
      error("must be a number");
    double number = value.get<double>();
    if (!std::isfinite(number))
      error("must be a finite number");
    return number;
  }
  template <typename Enum> Enum asEnum() const {
    std::string text = asString();
    auto parsed = enumParse<Enum>(text);
    if (!parsed)
      error("unknown value '" + text + "' (expected " + enumChoices<Enum>() + ")");
    return *parsed;
  }

private:
  void requireObject() const {
    if (!value.is_object())
      error("must be an object");
  }
  const json &value;
  std::string path;
  const std::string &source;
  mutable std::set<std::string> consumed;
};

/// Reads an object with a fixed field list: `read` consumes fields, then any
/// other field is rejected.
template <typename Read> void readObject(const Node &node, Read read) {
  read(node);
  node.rejectUnknownFields();
}

Plan decodePlan(const Node &root) {
  Plan plan;
  readObject(root, [&](const Node &n) {
    plan.formatVersion = n.field("format_version").asInt();
    if (plan.formatVersion != kPlanFormatVersion)
      n.field("format_version")
          .error("unsupported format version " + std::to_string(plan.formatVersion) +
                 " (this runtime reads " + std::to_string(kPlanFormatVersion) + ")");
    readObject(n.field("generator"), [&](const Node &g) {
      plan.generator.name = g.field("name").asString();
      plan.generator.version = g.field("version").asString();
    });
    readObject(n.field("model"), [&](const Node &m) {
      plan.model.name = m.field("name").asString();
      plan.model.hash = m.field("hash").asString();
    });
    readObject(n.field("cluster"), [&](const Node &c) {
      plan.cluster.name = c.field("name").asString();
      plan.cluster.worldSize = c.field("world_size").asInt();
      if (auto spec = c.optionalField("spec"))
        plan.cluster.spec = spec->asObjectText();
    });
    plan.strategy = n.field("strategy").asString();
    plan.compressor = n.field("compressor").asString();
    if (auto dtype = n.optionalField("compute_dtype"))
      plan.computeDtype = dtype->asString();
    for (const Node &t : n.field("tensors").elements())
      readObject(t, [&](const Node &t) {
        TensorInfo tensor;
        tensor.name = t.field("name").asString();
        tensor.elements = t.field("elements").asInt();
        tensor.dtype = t.field("dtype").asString();
        tensor.readyOrder = t.field("ready_order").asInt();
        if (auto ep = t.optionalField("expert_parallel"))
          tensor.expertParallel = ep->asInt();
        plan.tensors.push_back(std::move(tensor));
      });
    for (const Node &b : n.field("buckets").elements())
      readObject(b, [&](const Node &b) {
        Bucket bucket;
        bucket.id = b.field("id").asInt();
        for (const Node &t : b.field("tensors").elements())
          readObject(t, [&](const Node &t) {
            BucketTensor entry;
            entry.name = t.field("name").asString();
            entry.offset = t.field("offset").asInt();
            entry.elements = t.field("elements").asInt();
            bucket.tensors.push_back(std::move(entry));
          });
        bucket.elements = b.field("elements").asInt();
        bucket.bytes = b.field("bytes").asInt();
        readObject(b.field("compression"), [&](const Node &c) {
          bucket.compression.method = c.field("method").asEnum<CompressionMethod>();
          bucket.compression.ratio = c.field("ratio").asNumber();
          bucket.compression.rank = c.field("rank").asInt();
          bucket.compression.errorFeedback = c.field("error_feedback").asBool();
          bucket.compression.device = c.field("device").asEnum<Device>();
        });
        for (const Node &c : b.field("collectives").elements())
          readObject(c, [&](const Node &c) {
            Collective collective;
            collective.op = c.field("op").asEnum<CollectiveKind>();
            collective.algorithm = c.field("algorithm").asString();
            collective.chunks = c.field("chunks").asInt();
            collective.stream = c.field("stream").asInt();
            collective.priority = c.field("priority").asInt();
            collective.decoupled = c.field("decoupled").asBool();
            collective.bytes = c.field("bytes").asInt();
            bucket.collectives.push_back(std::move(collective));
          });
        if (auto group = b.optionalField("group"))
          bucket.group = group->asEnum<BucketGroup>();
        plan.buckets.push_back(std::move(bucket));
      });
    for (const Node &t : n.field("schedule").elements())
      readObject(t, [&](const Node &t) {
        Task task;
        task.id = t.field("id").asInt();
        task.kind = t.field("kind").asEnum<TaskKind>();
        task.name = t.field("name").asString();
        task.bucket = t.field("bucket").asInt();
        if (auto sparse = t.optionalField("sparse_tensor"))
          task.sparseTensor = sparse->asInt();
        task.stream = t.field("stream").asInt();
        task.startUs = t.field("start_us").asNumber();
        task.durationUs = t.field("duration_us").asNumber();
        if (auto work = t.optionalField("work_us"))
          task.workUs = work->asNumber();
        if (auto flops = t.optionalField("flops"))
          task.flops = flops->asInt();
        if (auto bytes = t.optionalField("bytes"))
          task.bytes = bytes->asInt();
        if (auto priority = t.optionalField("priority"))
          task.priority = priority->asInt();
        for (const Node &d : t.field("deps").elements())
          task.deps.push_back(d.asInt());
        task.phase = t.field("phase").asEnum<Phase>();
        for (const Node &p : t.field("produces").elements())
          task.produces.push_back(p.asString());
        plan.schedule.push_back(std::move(task));
      });
    readObject(n.field("predictions"), [&](const Node &p) {
      plan.predictions.iterationUs = p.field("iteration_us").asNumber();
      plan.predictions.computeUs = p.field("compute_us").asNumber();
      plan.predictions.exposedCommUs = p.field("exposed_comm_us").asNumber();
      plan.predictions.lowerBoundUs = p.field("lower_bound_us").asNumber();
      plan.predictions.commBoundUs = p.field("comm_bound_us").asNumber();
    });
    for (const auto &[name, value] : n.field("baselines").members())
      plan.baselines[name] = value.asNumber();
    if (auto uncompressed = n.optionalField("baselines_uncompressed"))
      for (const auto &[name, value] : uncompressed->members())
        plan.baselinesUncompressed[name] = value.asNumber();
    if (auto parallel = n.optionalField("parallel"))
      plan.parallel = parallel->asObjectText();
    if (auto moe = n.optionalField("moe"))
      plan.moe = moe->asObjectText();
    if (auto inference = n.optionalField("inference"))
      plan.inference = inference->asObjectText();
    if (auto sparse = n.optionalField("sparse_tensors"))
      for (const Node &t : sparse->elements())
        readObject(t, [&](const Node &t) {
          SparseTensor tensor;
          tensor.name = t.field("name").asString();
          tensor.rows = t.field("rows").asInt();
          tensor.rowElements = t.field("row_elements").asInt();
          const Node scheme = t.field("scheme");
          const std::string spelling = scheme.asString();
          const auto parsed = zen::vocab::parseSparseScheme(spelling);
          if (!parsed) {
            std::string choices;
            for (const auto &traits : zen::vocab::kSparseSchemes)
              choices += (choices.empty() ? "" : "|") + std::string(traits.spelling);
            scheme.error("unknown value '" + spelling + "' (expected " + choices + ")");
          }
          tensor.scheme = *parsed;
          const auto &traits = zen::vocab::traitsOf(tensor.scheme);
          // Present exactly when the scheme takes it, so a plan never carries a parameter
          // that nothing reads.
          if (traits.takesBlockRows)
            tensor.blockRows = t.field("block_rows").asInt();
          if (traits.takesDenseThreshold)
            tensor.denseThreshold = t.field("dense_threshold").asNumber();
          readObject(t.field("statistics"), [&](const Node &s) {
            tensor.statistics.density = s.field("density").asNumber();
            for (const Node &g : s.field("gamma").elements())
              tensor.statistics.gamma.push_back(g.asNumber());
            tensor.statistics.skew = s.field("skew").asNumber();
            tensor.statistics.source = s.field("source").asString();
            if (auto hashSkew = s.optionalField("hash_skew"))
              tensor.statistics.hashSkew = hashSkew->asNumber();
            if (auto blockDensity = s.optionalField("block_density"))
              tensor.statistics.blockDensity = blockDensity->asNumber();
            if (auto blockGamma = s.optionalField("block_gamma"))
              for (const Node &g : blockGamma->elements())
                tensor.statistics.blockGamma.push_back(g.asNumber());
          });
          tensor.predictedUs = t.field("predicted_us").asNumber();
          plan.sparseTensors.push_back(std::move(tensor));
        });
  });
  return plan;
}

/// Virtual stages of "1f1b" (1) or "interleaved:V" (V >= 2, as zenopt's
/// --schedule reads it); 0 otherwise.
int64_t virtualStagesOf(const std::string &schedule) {
  if (schedule == "1f1b")
    return 1;
  const std::string prefix = "interleaved:";
  if (schedule.rfind(prefix, 0) != 0 || schedule.size() == prefix.size() ||
      schedule.size() > prefix.size() + 6)
    return 0;
  int64_t v = 0;
  for (char c : schedule.substr(prefix.size())) {
    if (c < '0' || c > '9')
      return 0;
    v = v * 10 + (c - '0');
  }
  return v >= 2 ? v : 0;
}

} // namespace

ParallelConfiguration readParallelSection(const std::string &section, const std::string &source,
                                          zen::ErrorKind kind) {
  auto error = [&](const std::string &path, const std::string &what) { fail(source, path, what, kind); };
  const json parallel = json::parse(section, nullptr, /*allow_exceptions=*/false);
  if (!parallel.is_object())
    error("/parallel", "must be a JSON object");
  auto field = [&](const json &object, const std::string &at, const char *key) -> const json & {
    if (!object.contains(key))
      error(at + "/" + key, "is missing");
    return object[key];
  };
  auto positive = [&](const char *key, int64_t most) {
    const json &value = field(parallel, "/parallel", key);
    if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > most)
      error(std::string("/parallel/") + key, "must be an integer from 1 to " + std::to_string(most));
    return value.get<int64_t>();
  };
  auto amount = [&](const json &object, const std::string &at, const char *key) {
    const json &value = field(object, at, key);
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0)
      error(at + "/" + key, "must be a finite number >= 0");
  };
  ParallelConfiguration config;
  const int64_t tp = config.tp = positive("tp", kMaxWorldSize);
  const int64_t pp = config.pp = positive("pp", kMaxWorldSize);
  const int64_t dp = config.dp = positive("dp", kMaxWorldSize);
  if (tp * pp * dp > kMaxWorldSize)
    error("/parallel", "tp x pp x dp = " + std::to_string(tp) + " x " + std::to_string(pp) + " x " +
                           std::to_string(dp) + " is more than " + std::to_string(kMaxWorldSize) +
                           " ranks");
  config.microBatch = positive("micro_batch", int64_t{1} << 40);
  const int64_t microBatches = config.microBatches = positive("micro_batches", kMaxPipelineSteps);
  const json &zero = field(parallel, "/parallel", "zero");
  if (!zero.is_number_integer() || zero.get<int64_t>() < 0 || zero.get<int64_t>() > 3)
    error("/parallel/zero", "must be 0, 1, 2 or 3");
  config.zero = zero.get<int>();
  const json &sequenceParallel = field(parallel, "/parallel", "sequence_parallel");
  if (!sequenceParallel.is_boolean())
    error("/parallel/sequence_parallel", "must be true or false");
  config.sequenceParallel = sequenceParallel.get<bool>();
  const json &recompute = field(parallel, "/parallel", "recompute");
  const auto recomputation =
      recompute.is_string() ? zen::vocab::parseRecompute(recompute.get<std::string>()) : std::nullopt;
  if (!recomputation)
    error("/parallel/recompute", "must be none, selective or full");
  config.recompute = *recomputation;
  const json &schedule = field(parallel, "/parallel", "schedule");
  const int64_t virtualStages = config.virtualStages =
      schedule.is_string() ? virtualStagesOf(schedule.get<std::string>()) : 0;
  if (virtualStages < 1)
    error("/parallel/schedule", "must be 1f1b or interleaved:V with V >= 2");
  if (virtualStages > 1 && microBatches % pp != 0)
    error("/parallel/schedule", "interleaved needs micro_batches divisible by pp");
  // The summaries simulate every step of the schedule.
  if (microBatches * pp * virtualStages > kMaxPipelineSteps)
    error("/parallel/micro_batches", "micro_batches x pp x V must be at most " +
                                         std::to_string(kMaxPipelineSteps));
  for (const char *key : {"iteration_us", "bubble_us", "tensor_comm_us", "pipeline_comm_us",
                          "data_comm_us", "tflops_per_gpu", "model_tflops_per_gpu", "mfu"})
    amount(parallel, "/parallel", key);
  if (parallel.contains("moe")) {
    // MoE blocks: experts over ep ranks of each dp group; the summaries read the rest.
    const json &moe = parallel["moe"];
    if (!moe.is_object())
      error("/parallel/moe", "must be a JSON object");
    auto integer = [&](const char *key, int64_t least, int64_t most) {
      const json &value = field(moe, "/parallel/moe", key);
      if (!value.is_number_integer() || value.get<int64_t>() < least || value.get<int64_t>() > most)
        error(std::string("/parallel/moe/") + key,
              "must be an integer from " + std::to_string(least) + " to " + std::to_string(most));
      return value.get<int64_t>();
    };
    const int64_t ep = integer("ep", 1, dp);
    if (dp % ep != 0)
      error("/parallel/moe/ep", "must divide dp " + std::to_string(dp));
    config.ep = ep;
    for (const char *key : {"experts", "top_k", "tokens", "capacity", "forward", "backward"})
      integer(key, 1, int64_t{1} << 40);
    const json &blocks = field(moe, "/parallel/moe", "blocks");
    if (!blocks.is_array())
      error("/parallel/moe/blocks", "must be an array of block indices");
    const json &algorithm = field(moe, "/parallel/moe", "all_to_all");
    if (algorithm != "flat" && algorithm != "2d")
      error("/parallel/moe/all_to_all", "must be flat or 2d");
    if (moe.contains("token_compression")) {
      static const std::set<std::string> methods = {"none", "fp16", "bf16", "int8"};
      const json &tokens = moe["token_compression"];
      if (!tokens.is_string() || !methods.count(tokens.get<std::string>()))
        error("/parallel/moe/token_compression", "must be \"none\", \"fp16\", \"bf16\" or \"int8\"");
    }
    if (moe.contains("expert_tensor_parallel")) {
      const json &shards = moe["expert_tensor_parallel"];
      if (!shards.is_number_integer() || (shards != 1 && shards != tp))
        error("/parallel/moe/expert_tensor_parallel", "must be 1 or tp " + std::to_string(tp));
    }
  }
  const json &decomposition = field(parallel, "/parallel", "decomposition");
  int64_t *chunkCounts[] = {&config.chunks.attentionForward, &config.chunks.attentionBackward,
                            &config.chunks.mlpForward, &config.chunks.mlpBackward};
  int64_t **nextCount = chunkCounts;
  for (const char *region : {"attention", "mlp"}) {
    const std::string at = std::string("/parallel/decomposition/") + region;
    const json &phases = decomposition.is_object() ? field(decomposition, "/parallel/decomposition", region)
                                                   : decomposition;
    if (!phases.is_object())
      error(at, "must be a JSON object of forward and backward chunk counts");
    for (const char *phase : {"forward", "backward"}) {
      const json &chunks = field(phases, at, phase);
      if (!chunks.is_number_integer() || chunks.get<int64_t>() < 1 || chunks.get<int64_t>() > kMaxWorldSize)
        error(at + "/" + phase, "must be an integer from 1 to " + std::to_string(kMaxWorldSize));
      **nextCount++ = chunks.get<int64_t>();
    }
  }
  const json &memory = field(parallel, "/parallel", "memory");
  if (!memory.is_object())
    error("/parallel/memory", "must be a JSON object");
  for (const char *key : {"per_gpu_bytes", "capacity_bytes", "weights_bytes", "gradients_bytes",
                          "optimizer_bytes", "activations_bytes", "buffers_bytes", "reserve_bytes", "stage"})
    amount(memory, "/parallel/memory", key);
  const json &notFitting = field(parallel, "/parallel", "baselines_not_fitting");
  if (!notFitting.is_object())
    error("/parallel/baselines_not_fitting", "must be a JSON object");
  for (const auto &[name, why] : notFitting.items())
    if (!why.is_string())
      error("/parallel/baselines_not_fitting/" + name, "must be a string");
  const json &replicated = field(parallel, "/parallel", "replicated");
  if (!replicated.is_array())
    error("/parallel/replicated", "must be an array of node names");
  for (const json &name : replicated)
    if (!name.is_string())
      error("/parallel/replicated", "must be an array of node names");
  const json &stages = field(parallel, "/parallel", "stages");
  if (!stages.is_array() || int64_t(stages.size()) != pp)
    error("/parallel/stages", "must hold one program per pipeline stage (pp)");
  for (size_t s = 0; s < stages.size(); ++s) {
    const std::string at = "/parallel/stages/" + std::to_string(s);
    if (!stages[s].is_object())
      error(at, "must be a JSON object");
    for (const char *key : {"forward_us", "backward_us", "tensor_comm_us", "p2p_us", "zero_comm_us"})
      amount(stages[s], at, key);
    config.stageTimes.push_back({stages[s]["forward_us"].get<double>(), stages[s]["backward_us"].get<double>(),
                             stages[s]["tensor_comm_us"].get<double>(), stages[s]["p2p_us"].get<double>(),
                             stages[s]["zero_comm_us"].get<double>()});
  }
  return config;
}

namespace {


//===----------------------------------------------------------------------===//
// Semantic validation (shared by parsePlan and writePlan)
//===----------------------------------------------------------------------===//

class Validator {
public:
  Validator(const Plan &plan, const std::string &source, zen::ErrorKind kind)
      : plan(plan), source(source), kind(kind) {}

  void run() {
    if (plan.formatVersion != kPlanFormatVersion)
      error("/format_version", "unsupported format version " + std::to_string(plan.formatVersion));
    nonEmpty("/generator/name", plan.generator.name);
    nonEmpty("/generator/version", plan.generator.version);
    nonEmpty("/model/name", plan.model.name);
    inRange("/cluster/world_size", plan.cluster.worldSize, 1, kMaxWorldSize);
    nonEmpty("/cluster/name", plan.cluster.name);
    if (!plan.cluster.spec.empty()) {
      json spec = json::parse(plan.cluster.spec, nullptr, /*allow_exceptions=*/false);
      if (!spec.is_object())
        error("/cluster/spec", "must be a JSON object");
    }
    if (!plan.parallel.empty())
      checkParallel();
    if (!plan.moe.empty())
      checkMoe();
    if (!plan.inference.empty())
      checkInference();
    nonEmpty("/strategy", plan.strategy);
    nonEmpty("/compressor", plan.compressor);
    static const std::set<std::string> computeDtypes = {"fp32", "tf32", "bf16", "fp16"};
    if (!computeDtypes.count(plan.computeDtype))
      error("/compute_dtype",
            "unknown value '" + plan.computeDtype + "' (expected fp32|tf32|bf16|fp16)");
    checkTensors();
    checkSparseTensors();
    checkBuckets();
    checkSchedule();
    if (!plan.moe.empty())
      checkMoeTasks();
    checkPredictions();
  }

private:
  [[noreturn]] void error(const std::string &path, const std::string &what) const {
    fail(source, path, what, kind);
  }
  void nonEmpty(const std::string &path, const std::string &text) const {
    if (text.empty())
      error(path, "must not be empty");
  }
  void inRange(const std::string &path, int64_t value, int64_t low, int64_t high) const {
    if (value < low)
      error(path, "must be >= " + std::to_string(low));
    if (value > high)
      error(path, "must be <= " + std::to_string(high));
  }
  void nonNegativeFinite(const std::string &path, double value) const {
    if (!std::isfinite(value))
      error(path, "must be a finite number");
    if (value < 0)
      error(path, "must be >= 0");
  }

  /// The shared reader's checks, then the configuration against the plan's world size.
  void checkParallel() {
    const ParallelConfiguration config = readParallelSection(plan.parallel, source, kind);
    if (config.gpus() != plan.cluster.worldSize)
      error("/parallel", "tp x pp x dp = " + std::to_string(config.tp) + " x " +
                             std::to_string(config.pp) + " x " + std::to_string(config.dp) +
                             " is not the world size " + std::to_string(plan.cluster.worldSize));
    parallelEp = config.ep;
  }

  /// The MoE decisions the runtime would run each layer with and every field
  /// the summaries read: one ep dividing every layer's experts, degrees from 1
  /// to the layer's capacity, a known all-to-all, each baseline's layers.
  /// The serving section's shape only: zenrt::serve::configOf checks what the engine runs.
  void checkInference() {
    const json inference = json::parse(plan.inference, nullptr, /*allow_exceptions=*/false);
    if (!inference.is_object())
      error("/inference", "must be a JSON object");
  }

  void checkMoe() {
    const json moe = json::parse(plan.moe, nullptr, /*allow_exceptions=*/false);
    if (!moe.is_object())
      error("/moe", "must be a JSON object");
    static const std::set<std::string> keys = {
        "ep",     "imbalance",  "iteration_us", "moe_us",   "local_us", "schedule_us",
        "expert_sync_us", "sync_saving_us", "layers", "baselines", "searched", "not_fitting",
        "memory", "timeline"};
    for (const auto &[key, value] : moe.items())
      if (!keys.count(key))
        error("/moe/" + key, "unknown field");
    auto field = [&](const json &object, const std::string &at, const char *key) -> const json & {
      if (!object.is_object())
        error(at, "must be a JSON object");
      if (!object.contains(key))
        error(at + "/" + key, "is missing");
      return object[key];
    };
    auto integer = [&](const json &object, const std::string &at, const char *key, int64_t most) {
      const json &value = field(object, at, key);
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > most)
        error(at + "/" + key, "must be an integer from 1 to " + std::to_string(most));
      return value.get<int64_t>();
    };
    auto amount = [&](const json &object, const std::string &at, const char *key) {
      const json &value = field(object, at, key);
      if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0)
        error(at + "/" + key, "must be a finite number >= 0");
    };
    const int64_t ep = integer(moe, "/moe", "ep", plan.cluster.worldSize);
    const json &imbalance = field(moe, "/moe", "imbalance");
    if (!imbalance.is_number() || !std::isfinite(imbalance.get<double>()) ||
        imbalance.get<double>() < 1)
      error("/moe/imbalance", "must be a finite number >= 1");
    for (const char *key : {"iteration_us", "moe_us", "local_us", "expert_sync_us"})
      amount(moe, "/moe", key);
    if (moe.contains("schedule_us")) // optional: plans before co-scheduling
      amount(moe, "/moe", "schedule_us");
    // Splitting buckets by process group can cost more than it saves.
    if (const json &saving = field(moe, "/moe", "sync_saving_us");
        !saving.is_number() || !std::isfinite(saving.get<double>()))
      error("/moe/sync_saving_us", "must be a finite number");
    const json &layers = field(moe, "/moe", "layers");
    if (!layers.is_array() || layers.empty())
      error("/moe/layers", "must be a non-empty array of MoE layers");
    // A layer's decisions: its degrees split the capacity rows into equal pieces.
    auto checkChoice = [&](const json &layer, const std::string &at, int64_t capacity) {
      for (const char *phase : {"forward", "backward"})
        if (capacity % integer(layer, at, phase, capacity) != 0)
          error(at + "/" + phase, "must divide the capacity " + std::to_string(capacity));
      const json &algorithm = field(layer, at, "all_to_all");
      if (algorithm != "flat" && algorithm != "2d")
        error(at + "/all_to_all", "must be \"flat\" or \"2d\"");
      // Optional: how the layer's all-to-alls send the rows (absent: fp32).
      if (layer.contains("token_compression")) {
        const json &tokens = layer["token_compression"];
        if (tokens != "none" && tokens != "fp16" && tokens != "bf16" && tokens != "int8")
          error(at + "/token_compression", "must be \"none\", \"fp16\", \"bf16\" or \"int8\"");
      }
      // Optional: how the all-to-alls meet the gradient sync (absent: concurrent).
      if (layer.contains("gradient_sync") && layer["gradient_sync"] != "concurrent" &&
          layer["gradient_sync"] != "serial")
        error(at + "/gradient_sync", "must be \"concurrent\" or \"serial\"");
      for (const char *key : {"forward_us", "backward_us"})
        amount(layer, at, key);
    };
    std::vector<int64_t> capacities;
    for (size_t l = 0; l < layers.size(); ++l) {
      const std::string at = "/moe/layers/" + std::to_string(l);
      const json &name = field(layers[l], at, "name");
      if (!name.is_string() || name.get<std::string>().empty())
        error(at + "/name", "must be a non-empty string");
      const json &parameters = field(layers[l], at, "parameters");
      if (!parameters.is_array() ||
          !std::all_of(parameters.begin(), parameters.end(), [](const json &parameter) {
            return parameter.is_string() && !parameter.get<std::string>().empty();
          }))
        error(at + "/parameters", "must be an array of parameter names");
      const int64_t experts = integer(layers[l], at, "experts", int64_t{1} << 40);
      if (experts % ep != 0)
        error(at + "/experts", "ep " + std::to_string(ep) + " does not divide the " +
                                   std::to_string(experts) + " experts");
      capacities.push_back(integer(layers[l], at, "capacity", int64_t{1} << 40));
      // Optional together (plans before them derive the sizes from the parameters).
      if (layers[l].contains("hidden") || layers[l].contains("ffn"))
        for (const char *key : {"hidden", "ffn"})
          integer(layers[l], at, key, int64_t{1} << 40);
      checkChoice(layers[l], at, capacities.back());
    }
    const json &baselines = field(moe, "/moe", "baselines");
    for (const char *name : {"moe-nopipe", "tutel", "pipemoe"}) {
      const std::string at = std::string("/moe/baselines/") + name;
      const json &baseline = field(baselines, "/moe/baselines", name);
      for (const char *key : {"iteration_us", "moe_us"})
        amount(baseline, at, key);
      const json &chosen = field(baseline, at, "layers");
      if (!chosen.is_array() || chosen.size() != layers.size())
        error(at + "/layers", "must hold one choice per MoE layer");
      for (size_t l = 0; l < chosen.size(); ++l)
        checkChoice(chosen[l], at + "/layers/" + std::to_string(l), capacities[l]);
    }
    const json &searched = field(moe, "/moe", "searched");
    if (!searched.is_object() || searched.empty())
      error("/moe/searched", "must map every ep tried to its iteration_us");
    for (const auto &[key, us] : searched.items())
      if (!us.is_number() || !std::isfinite(us.get<double>()) || us.get<double>() < 0)
        error("/moe/searched/" + key, "must be a finite number >= 0");
    // Optional: the co-scheduled iteration's tasks, for the trace.
    if (moe.contains("timeline")) {
      const json &timeline = moe["timeline"];
      if (!timeline.is_array())
        error("/moe/timeline", "must be an array of tasks");
      for (size_t t = 0; t < timeline.size(); ++t) {
        const std::string at = "/moe/timeline/" + std::to_string(t);
        for (const char *key : {"name", "track"})
          if (const json &text = field(timeline[t], at, key);
              !text.is_string() || text.get<std::string>().empty())
            error(at + "/" + key, "must be a non-empty string");
        // The schedule's spellings (zen/Vocabulary.h).
        const json &kindText = field(timeline[t], at, "kind");
        const std::optional<TaskKind> kind =
            kindText.is_string() ? enumParse<TaskKind>(kindText.get<std::string>()) : std::nullopt;
        if (!kind)
          error(at + "/kind", "must be one of " + enumChoices<TaskKind>());
        const json &phase = field(timeline[t], at, "phase");
        if (!phase.is_string() || !enumParse<Phase>(phase.get<std::string>()))
          error(at + "/phase", "must be one of " + enumChoices<Phase>());
        // Each task is an MoE layer's piece or one of the plan's schedule tasks.
        if (timeline[t].contains("moe_layer") == timeline[t].contains("schedule_task"))
          error(at, "must have one of moe_layer and schedule_task");
        if (timeline[t].contains("moe_layer")) {
          const json &layer = timeline[t]["moe_layer"];
          if (!layer.is_number_integer() || layer.get<int64_t>() < 0 ||
              layer.get<int64_t>() >= int64_t(layers.size()))
            error(at + "/moe_layer", "must index the moe layers (0 to " +
                                         std::to_string(layers.size() - 1) + ")");
        } else {
          const json &task = timeline[t]["schedule_task"];
          if (!task.is_number_integer() || task.get<int64_t>() < 0 ||
              task.get<int64_t>() >= int64_t(plan.schedule.size()))
            error(at + "/schedule_task", "must index the schedule (0 to " +
                                             std::to_string(plan.schedule.size()) + " - 1)");
        }
        if (timeline[t].contains("device") != zen::vocab::compresses(*kind))
          error(at + "/device", "compressions and decompressions, and only they, have a device");
        if (zen::vocab::compresses(*kind) && timeline[t]["device"] != "gpu" &&
            timeline[t]["device"] != "cpu")
          error(at + "/device", "must be \"gpu\" or \"cpu\"");
        if (timeline[t].contains("stream") != zen::vocab::communicates(*kind))
          error(at + "/stream", "collectives, and only they, have a stream");
        if (zen::vocab::communicates(*kind)) {
          const json &stream = timeline[t]["stream"];
          if (!stream.is_number_integer() || stream.get<int64_t>() < 0)
            error(at + "/stream", "must be an integer >= 0");
        }
        for (const char *key : {"start_us", "duration_us"})
          amount(timeline[t], at, key);
      }
    }
    if (moe.contains("not_fitting")) {
      const json &notFitting = moe["not_fitting"];
      if (!notFitting.is_object())
        error("/moe/not_fitting", "must map every ep that does not fit to its bytes per GPU");
      for (const auto &[key, bytes] : notFitting.items())
        amount(notFitting, "/moe/not_fitting", key.c_str());
    }
    const json &memory = field(moe, "/moe", "memory");
    for (const char *key : {"weights_bytes", "gradients_bytes", "optimizer_bytes",
                            "activations_bytes", "buffers_bytes"})
      amount(memory, "/moe/memory", key);
    // Plans written before the whole-model memory check have only the experts', those
    // before the other activations were counted no other_activations_bytes.
    for (const char *key : {"other_parameters_bytes", "other_activations_bytes", "reserve_bytes",
                            "per_gpu_bytes", "capacity_bytes"})
      if (memory.contains(key))
        amount(memory, "/moe/memory", key);
  }

  /// docs/plan-format.md "sparse_tensors": a table of at most kMaxElements, a scheme's
  /// parameter exactly when it takes one, statistics in their ranges (gamma: one per power
  /// of two up to the world size, each between 1 and the ranks merged).
  void checkSparseTensors() {
    std::set<std::string> names;
    for (size_t i = 0; i < plan.sparseTensors.size(); ++i) {
      const SparseTensor &tensor = plan.sparseTensors[i];
      const std::string path = "/sparse_tensors/" + std::to_string(i);
      nonEmpty(path + "/name", tensor.name);
      if (!names.insert(tensor.name).second)
        error(path + "/name", "duplicate sparse tensor '" + tensor.name + "'");
      if (tensorIndex.count(tensor.name))
        error(path + "/name", "'" + tensor.name + "' is also a dense tensor of /tensors");
      inRange(path + "/rows", tensor.rows, 1, kMaxElements);
      inRange(path + "/row_elements", tensor.rowElements, 1, kMaxElements / tensor.rows);
      const auto &traits = zen::vocab::traitsOf(tensor.scheme);
      if (traits.takesBlockRows)
        inRange(path + "/block_rows", tensor.blockRows, 1, tensor.rows);
      else if (tensor.blockRows != 0)
        error(path + "/block_rows", std::string("is only for omnireduce, not ") +
                                        traits.spelling);
      if (traits.takesDenseThreshold) {
        if (!(tensor.denseThreshold > 0 && tensor.denseThreshold <= 1))
          error(path + "/dense_threshold", "must be in (0, 1]");
      } else if (tensor.denseThreshold != 0) {
        error(path + "/dense_threshold", std::string("is only for sparcml, not ") +
                                             traits.spelling);
      }
      const SparseStatistics &stats = tensor.statistics;
      if (!(stats.density >= 0 && stats.density <= 1))
        error(path + "/statistics/density", "must be in [0, 1]");
      size_t powers = 1;
      while ((int64_t(1) << powers) <= plan.cluster.worldSize)
        ++powers;
      // Up to the world size: a data-parallel group may be smaller.
      if (stats.gamma.empty() || stats.gamma.size() > powers)
        error(path + "/statistics/gamma",
              "must hold 1 to " + std::to_string(powers) + " values (1, 2, 4, ... up to " +
                  std::to_string(plan.cluster.worldSize) + " ranks merged)");
      for (size_t k = 0; k < stats.gamma.size(); ++k)
        if (!(stats.gamma[k] >= 1 && stats.gamma[k] <= double(int64_t(1) << k)))
          error(path + "/statistics/gamma/" + std::to_string(k),
                "must be in [1, " + std::to_string(int64_t(1) << k) + "] (" +
                    std::to_string(int64_t(1) << k) + " ranks merged)");
      if (!(stats.skew >= 0 && stats.skew <= 1))
        error(path + "/statistics/skew", "must be in [0, 1]");
      if (!(stats.hashSkew >= 0 && stats.hashSkew <= 1))
        error(path + "/statistics/hash_skew", "must be in [0, 1]");
      if (!(stats.blockDensity >= 0 && stats.blockDensity <= 1))
        error(path + "/statistics/block_density", "must be in [0, 1]");
      if (stats.blockGamma.size() > powers)
        error(path + "/statistics/block_gamma",
              "must hold at most " + std::to_string(powers) + " values");
      for (size_t k = 0; k < stats.blockGamma.size(); ++k)
        if (!(stats.blockGamma[k] >= 1 && stats.blockGamma[k] <= double(int64_t(1) << k)))
          error(path + "/statistics/block_gamma/" + std::to_string(k),
                "must be in [1, " + std::to_string(int64_t(1) << k) + "]");
      if (stats.source != "model" && stats.source != "measured")
        error(path + "/statistics/source",
              "unknown value '" + stats.source + "' (expected model|measured)");
      nonNegativeFinite(path + "/predicted_us", tensor.predictedUs);
    }
  }

  void checkTensors() {
    std::vector<bool> orderSeen(plan.tensors.size(), false);
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      const TensorInfo &tensor = plan.tensors[i];
      std::string path = "/tensors/" + std::to_string(i);
      nonEmpty(path + "/name", tensor.name);
      if (!tensorIndex.emplace(tensor.name, i).second)
        error(path + "/name", "duplicate tensor '" + tensor.name + "'");
      inRange(path + "/elements", tensor.elements, 1, kMaxElements);
      if (tensor.dtype != "f32")
        error(path + "/dtype", "unsupported dtype '" + tensor.dtype + "' (expected f32)");
      inRange(path + "/ready_order", tensor.readyOrder, 0, int64_t(plan.tensors.size()) - 1);
      if (orderSeen[size_t(tensor.readyOrder)])
        error(path + "/ready_order", "ready_order " + std::to_string(tensor.readyOrder) +
                                         " is used by two tensors");
      orderSeen[size_t(tensor.readyOrder)] = true;
      checkExpertParallel(path + "/expert_parallel", tensor.expertParallel);
    }
  }

  /// One ep for every expert tensor: the MoE section's, dividing the world
  /// (consecutive ranks hold every expert once); not with `parallel`.
  void checkExpertParallel(const std::string &path, int64_t ep) {
    if (ep == 1)
      return;
    inRange(path, ep, 2, plan.cluster.worldSize);
    if (plan.cluster.worldSize % ep != 0)
      error(path, "must divide the world size " + std::to_string(plan.cluster.worldSize));
    if (!plan.parallel.empty()) {
      if (parallelEp == 0)
        error(path, "an expert tensor needs the `parallel` section's MoE blocks (/parallel/moe)");
      if (ep != parallelEp)
        error(path, "must equal /parallel/moe/ep " + std::to_string(parallelEp));
      return;
    }
    if (plan.moe.empty())
      error(path, "an expert tensor needs the plan's `moe` section");
    if (!moeEp)
      moeEp = json::parse(plan.moe)["ep"].get<int64_t>();
    if (ep != *moeEp)
      error(path, "must equal /moe/ep " + std::to_string(*moeEp));
  }

  void checkBuckets() {
    std::vector<int64_t> bucketOfTensor(plan.tensors.size(), -1);
    for (size_t b = 0; b < plan.buckets.size(); ++b) {
      const Bucket &bucket = plan.buckets[b];
      std::string path = "/buckets/" + std::to_string(b);
      if (bucket.id != int64_t(b))
        error(path + "/id", "must equal the bucket's position " + std::to_string(b));
      if (bucket.tensors.empty())
        error(path + "/tensors", "must not be empty");
      int64_t offset = 0;
      for (size_t t = 0; t < bucket.tensors.size(); ++t) {
        const BucketTensor &entry = bucket.tensors[t];
        std::string tpath = path + "/tensors/" + std::to_string(t);
        auto it = tensorIndex.find(entry.name);
        if (it == tensorIndex.end())
          error(tpath + "/name", "unknown tensor '" + entry.name + "'");
        if (bucketOfTensor[it->second] >= 0)
          error(tpath + "/name", "tensor '" + entry.name + "' is already in bucket " +
                                     std::to_string(bucketOfTensor[it->second]));
        bucketOfTensor[it->second] = int64_t(b);
        if (entry.offset != offset)
          error(tpath + "/offset", "must be " + std::to_string(offset) +
                                       " (tensors are packed contiguously in order)");
        if (entry.elements != plan.tensors[it->second].elements)
          error(tpath + "/elements", "must equal the tensor's elements " +
                                         std::to_string(plan.tensors[it->second].elements));
        const bool expert = plan.tensors[it->second].expertParallel > 1;
        if (expert != (bucket.group == BucketGroup::ExpertReplicas))
          error(tpath + "/name", expert ? "expert tensor '" + entry.name +
                                              "' must be in an expert_replicas bucket"
                                        : "tensor '" + entry.name +
                                              "' is not an expert tensor (expert_parallel) "
                                              "but its bucket's group is expert_replicas");
        offset += entry.elements;  // both <= kMaxElements: no overflow
        if (offset > kMaxElements)
          error(path + "/elements", "the bucket's tensors add up to more than " +
                                        std::to_string(kMaxElements) + " elements");
      }
      if (bucket.elements != offset)
        error(path + "/elements", "must equal the sum of its tensors' elements " +
                                      std::to_string(offset));
      if (bucket.bytes != offset * 4)
        error(path + "/bytes", "must equal elements * 4 = " + std::to_string(offset * 4));
      checkCompression(path + "/compression", bucket.compression);
      checkCollectives(path, bucket);
    }
    for (size_t i = 0; i < plan.tensors.size(); ++i)
      if (bucketOfTensor[i] < 0)
        error("/tensors/" + std::to_string(i) + "/name",
              "tensor '" + plan.tensors[i].name + "' is in no bucket");
  }

  void checkCompression(const std::string &path, const Compression &c) const {
    const bool takesRatio = zen::vocab::takesRatio(c.method);
    if (!std::isfinite(c.ratio))
      error(path + "/ratio", "must be a finite number");
    if (takesRatio && !(c.ratio > 0 && c.ratio <= 1))
      error(path + "/ratio", "must be in (0, 1] for " + std::string(toString(c.method)));
    if (!takesRatio && c.ratio != 1)
      error(path + "/ratio", "must be 1 for " + std::string(toString(c.method)));
    if (zen::vocab::takesRank(c.method))
      inRange(path + "/rank", c.rank, 1, 1 << 16);
    else if (c.rank != 0)
      error(path + "/rank", "must be 0 for " + std::string(toString(c.method)));
    if (c.method == CompressionMethod::None && c.errorFeedback)
      error(path + "/error_feedback", "must be false for none");
  }

  void checkCollectives(const std::string &path, const Bucket &bucket) const {
    for (size_t c = 0; c < bucket.collectives.size(); ++c) {
      const Collective &collective = bucket.collectives[c];
      std::string cpath = path + "/collectives/" + std::to_string(c);
      if (!zen::vocab::parseAlgorithm(collective.algorithm))
        error(cpath + "/algorithm", "unknown algorithm '" + collective.algorithm +
                                        "' (expected ring|tree|hierarchical|direct)");
      inRange(cpath + "/chunks", collective.chunks, 1, kMaxChunks);
      inRange(cpath + "/stream", collective.stream, 0, kMaxStream);
      inRange(cpath + "/bytes", collective.bytes, 1, kMaxElements * 8);
      if (collective.decoupled &&
          (collective.op != CollectiveKind::AllGather || c + 1 != bucket.collectives.size()))
        error(cpath + "/decoupled", "only the bucket's last collective, an all_gather, "
                                    "may be decoupled");
    }
    const CompressionMethod method = bucket.compression.method;
    const std::optional<SyncScheme> scheme = syncSchemeOf(bucket);
    if (!scheme || !zen::vocab::supports(method, *scheme)) {
      std::string expected;
      for (const zen::vocab::SyncSchemeTraits &allowed : zen::vocab::kSyncSchemes) {
        if (!zen::vocab::supports(method, allowed.value))
          continue;
        expected += expected.empty() ? "[" : " or [";
        for (int i = 0; i < allowed.steps; ++i)
          expected += (i ? ", " : "") + std::string(toString(allowed.sequence[i]));
        expected += "]";
      }
      error(path + "/collectives", "unsupported collectives for compression '" +
                                       std::string(toString(bucket.compression.method)) +
                                       "' (expected " + expected + ")");
    }
    if (bucket.collectives.size() == 2 && bucket.collectives[0].chunks != bucket.collectives[1].chunks)
      error(path + "/collectives/1/chunks", "must equal the first collective's chunks " +
                                                std::to_string(bucket.collectives[0].chunks));
  }

  /// Where each MoE layer's experts run in the schedule (optional: plans before them): a
  /// forward and a backward compute task, and at most the FLOPs those tasks count.
  void checkMoeTasks() const {
    const json layers = json::parse(plan.moe)["layers"];
    for (size_t l = 0; l < layers.size(); ++l) {
      const std::string at = "/moe/layers/" + std::to_string(l);
      const json &layer = layers[l];
      const bool any = layer.contains("forward_task") || layer.contains("backward_task") ||
                       layer.contains("forward_flops") || layer.contains("backward_flops");
      if (!any)
        continue;
      for (const auto &[phase, wanted] :
           {std::pair<const char *, Phase>{"forward", Phase::Forward}, {"backward", Phase::Backward}}) {
        const std::string taskKey = std::string(phase) + "_task";
        const std::string flopsKey = std::string(phase) + "_flops";
        for (const std::string &key : {taskKey, flopsKey})
          if (!layer.contains(key) || !layer[key].is_number_integer() || layer[key].get<int64_t>() < 0)
            error(at + "/" + key, "must be an integer >= 0 (the task and FLOPs come together)");
        const int64_t id = layer[taskKey].get<int64_t>();
        const auto task = std::find_if(plan.schedule.begin(), plan.schedule.end(),
                                       [&](const Task &t) { return t.id == id; });
        if (task == plan.schedule.end() || task->kind != TaskKind::Compute ||
            task->phase != wanted)
          error(at + "/" + taskKey, "task " + std::to_string(id) + " is not a " + phase +
                                        " compute task of the schedule");
        if (layer[flopsKey].get<int64_t>() > task->flops)
          error(at + "/" + flopsKey, "more than task " + std::to_string(id) + "'s " +
                                         std::to_string(task->flops) + " FLOPs");
      }
    }
  }

  void checkSchedule() const {
    // Ids of next_forward tasks: a task may depend on one listed later, which then
    // means that task's instance from the previous iteration (decoupled all-gathers
    // and their optimizer steps complete during the next forward).
    std::map<int64_t, size_t> nextForward;
    for (size_t i = 0; i < plan.schedule.size(); ++i)
      if (plan.schedule[i].phase == Phase::NextForward)
        nextForward.emplace(plan.schedule[i].id, i);
    std::map<int64_t, size_t> position;
    std::vector<size_t> collectiveTasksSeen(plan.buckets.size(), 0);
    std::set<int64_t> sparseSynced;
    std::vector<int> compressTasks(plan.buckets.size(), 0), decompressTasks(plan.buckets.size(), 0);
    std::set<std::string> produced;
    for (size_t i = 0; i < plan.schedule.size(); ++i) {
      const Task &task = plan.schedule[i];
      std::string path = "/schedule/" + std::to_string(i);
      inRange(path + "/id", task.id, 0, INT64_MAX);
      nonEmpty(path + "/name", task.name);
      inRange(path + "/stream", task.stream, 0, kMaxStream);
      nonNegativeFinite(path + "/start_us", task.startUs);
      nonNegativeFinite(path + "/duration_us", task.durationUs);
      nonNegativeFinite(path + "/work_us", task.workUs);
      inRange(path + "/flops", task.flops, 0, INT64_MAX);
      inRange(path + "/bytes", task.bytes, 0, INT64_MAX);
      std::set<int64_t> deps;
      for (size_t d = 0; d < task.deps.size(); ++d) {
        std::string dpath = path + "/deps/" + std::to_string(d);
        bool previousIteration = task.phase != Phase::NextForward &&
                                 nextForward.count(task.deps[d]) && !position.count(task.deps[d]);
        if (!position.count(task.deps[d]) && !previousIteration)
          error(dpath, "unknown task " + std::to_string(task.deps[d]) +
                           " (deps must name earlier tasks, or next_forward tasks of the "
                           "previous iteration)");
        if (!deps.insert(task.deps[d]).second)
          error(dpath, "duplicate dependency " + std::to_string(task.deps[d]));
      }
      if (!position.emplace(task.id, i).second)
        error(path + "/id", "duplicate task id " + std::to_string(task.id));
      if (!task.produces.empty() && task.kind != TaskKind::Compute)
        error(path + "/produces", "only compute tasks produce gradients");
      for (size_t p = 0; p < task.produces.size(); ++p) {
        std::string ppath = path + "/produces/" + std::to_string(p);
        if (!tensorIndex.count(task.produces[p]))
          error(ppath, "unknown tensor '" + task.produces[p] + "'");
        if (!produced.insert(task.produces[p]).second)
          error(ppath, "tensor '" + task.produces[p] + "' is produced by two tasks");
      }
      if (task.kind != TaskKind::SparseSync && task.sparseTensor != -1)
        error(path + "/sparse_tensor", "is only for sparse_sync tasks");
      if (task.kind == TaskKind::Compute) {
        if (task.bucket != -1)
          error(path + "/bucket", "must be -1 for a compute task");
        continue;
      }
      if (task.kind == TaskKind::SparseSync) {
        if (task.bucket != -1)
          error(path + "/bucket", "must be -1 for a sparse_sync task");
        inRange(path + "/sparse_tensor", task.sparseTensor, 0,
                int64_t(plan.sparseTensors.size()) - 1);
        if (!sparseSynced.insert(task.sparseTensor).second)
          error(path + "/sparse_tensor",
                "sparse tensor " + std::to_string(task.sparseTensor) + " has two sparse_sync tasks");
        continue;
      }
      inRange(path + "/bucket", task.bucket, 0, int64_t(plan.buckets.size()) - 1);
      const Bucket &bucket = plan.buckets[size_t(task.bucket)];
      if (task.kind == TaskKind::Collective) {
        size_t &seen = collectiveTasksSeen[size_t(task.bucket)];
        if (seen >= bucket.collectives.size())
          error(path, "bucket " + std::to_string(task.bucket) + " has only " +
                          std::to_string(bucket.collectives.size()) + " collectives");
        if (task.stream != bucket.collectives[seen].stream)
          error(path + "/stream", "must equal the stream " +
                                      std::to_string(bucket.collectives[seen].stream) +
                                      " of collective " + std::to_string(seen) + " of bucket " +
                                      std::to_string(task.bucket));
        ++seen;
        continue;
      }
      if (bucket.compression.method == CompressionMethod::None)
        error(path + "/kind", "bucket " + std::to_string(task.bucket) + " is not compressed");
      int &count = task.kind == TaskKind::Compress ? compressTasks[size_t(task.bucket)]
                                                   : decompressTasks[size_t(task.bucket)];
      if (++count > 1)
        error(path + "/kind", "second " + std::string(toString(task.kind)) + " task for bucket " +
                                  std::to_string(task.bucket));
    }
    for (size_t b = 0; b < plan.buckets.size(); ++b)
      if (collectiveTasksSeen[b] != plan.buckets[b].collectives.size())
        error("/buckets/" + std::to_string(b) + "/collectives",
              "has " + std::to_string(plan.buckets[b].collectives.size()) +
                  " collectives but the schedule has " + std::to_string(collectiveTasksSeen[b]) +
                  " collective tasks for this bucket");
  }

  void checkPredictions() const {
    const Predictions &p = plan.predictions;
    nonNegativeFinite("/predictions/iteration_us", p.iterationUs);
    nonNegativeFinite("/predictions/compute_us", p.computeUs);
    nonNegativeFinite("/predictions/exposed_comm_us", p.exposedCommUs);
    nonNegativeFinite("/predictions/lower_bound_us", p.lowerBoundUs);
    nonNegativeFinite("/predictions/comm_bound_us", p.commBoundUs);
    checkTimes("/baselines/", plan.baselines);
    checkTimes("/baselines_uncompressed/", plan.baselinesUncompressed);
  }

  void checkTimes(const std::string &prefix, const std::map<std::string, double> &times) const {
    for (const auto &[name, us] : times) {
      std::string path = prefix + escapeJsonPointerToken(name);
      nonEmpty(path, name);
      nonNegativeFinite(path, us);
    }
  }

  const Plan &plan;
  const std::string &source;
  zen::ErrorKind kind;
  std::map<std::string, size_t> tensorIndex;
  std::optional<int64_t> moeEp;  // /moe/ep, read once for the expert tensors
  int64_t parallelEp = 0;         // /parallel/moe/ep (0 without MoE blocks)
};

//===----------------------------------------------------------------------===//
// Canonical writer
//===----------------------------------------------------------------------===//

/// An empty object with room for `members`. Growing an ordered_json object copies its members
/// (their keys are const, so they cannot move): the arrays of a 10 000-tensor plan are
/// megabytes, and copying them was most of writing it.
ordered_json objectWithRoom(size_t members) {
  ordered_json object = ordered_json::object();
  object.get_ref<ordered_json::object_t &>().reserve(members);
  return object;
}

ordered_json encodePlan(const Plan &plan) {
  ordered_json root = objectWithRoom(16);
  root["format_version"] = plan.formatVersion;
  root["generator"] = {{"name", plan.generator.name}, {"version", plan.generator.version}};
  root["model"] = {{"name", plan.model.name}, {"hash", plan.model.hash}};
  root["cluster"] = {{"name", plan.cluster.name}, {"world_size", plan.cluster.worldSize}};
  if (!plan.cluster.spec.empty())
    root["cluster"]["spec"] = json::parse(plan.cluster.spec);
  root["strategy"] = plan.strategy;
  root["compressor"] = plan.compressor;
  root["compute_dtype"] = plan.computeDtype;
  root["tensors"] = ordered_json::array();
  for (const TensorInfo &t : plan.tensors) {
    ordered_json tensor = {{"name", t.name},
                           {"elements", t.elements},
                           {"dtype", t.dtype},
                           {"ready_order", t.readyOrder}};
    if (t.expertParallel != 1)
      tensor["expert_parallel"] = t.expertParallel;
    root["tensors"].push_back(std::move(tensor));
  }
  root["buckets"] = ordered_json::array();
  for (const Bucket &b : plan.buckets) {
    ordered_json bucket = objectWithRoom(7);
    bucket["id"] = b.id;
    bucket["tensors"] = ordered_json::array();
    for (const BucketTensor &t : b.tensors)
      bucket["tensors"].push_back(
          {{"name", t.name}, {"offset", t.offset}, {"elements", t.elements}});
    bucket["elements"] = b.elements;
    bucket["bytes"] = b.bytes;
    bucket["compression"] = {{"method", toString(b.compression.method)},
                             {"ratio", b.compression.ratio},
                             {"rank", b.compression.rank},
                             {"error_feedback", b.compression.errorFeedback},
                             {"device", toString(b.compression.device)}};
    bucket["collectives"] = ordered_json::array();
    for (const Collective &c : b.collectives)
      bucket["collectives"].push_back({{"op", toString(c.op)},
                                       {"algorithm", c.algorithm},
                                       {"chunks", c.chunks},
                                       {"stream", c.stream},
                                       {"priority", c.priority},
                                       {"decoupled", c.decoupled},
                                       {"bytes", c.bytes}});
    if (b.group != BucketGroup::DataParallel)
      bucket["group"] = toString(b.group);
    root["buckets"].push_back(std::move(bucket));
  }
  root["schedule"] = ordered_json::array();
  for (const Task &t : plan.schedule) {
    ordered_json task = objectWithRoom(14);
    task["id"] = t.id;
    task["kind"] = toString(t.kind);
    task["name"] = t.name;
    task["bucket"] = t.bucket;
    if (t.kind == TaskKind::SparseSync)
      task["sparse_tensor"] = t.sparseTensor;
    task["stream"] = t.stream;
    task["start_us"] = t.startUs;
    task["duration_us"] = t.durationUs;
    task["work_us"] = t.workUs;
    task["flops"] = t.flops;
    task["bytes"] = t.bytes;
    task["priority"] = t.priority;
    task["deps"] = t.deps;
    task["phase"] = toString(t.phase);
    task["produces"] = t.produces;
    root["schedule"].push_back(std::move(task));
  }
  root["predictions"] = {{"iteration_us", plan.predictions.iterationUs},
                         {"compute_us", plan.predictions.computeUs},
                         {"exposed_comm_us", plan.predictions.exposedCommUs},
                         {"lower_bound_us", plan.predictions.lowerBoundUs},
                         {"comm_bound_us", plan.predictions.commBoundUs}};
  root["baselines"] = ordered_json::object();
  for (const auto &[name, us] : plan.baselines)  // std::map: sorted by name
    root["baselines"][name] = us;
  if (!plan.baselinesUncompressed.empty()) {
    root["baselines_uncompressed"] = ordered_json::object();
    for (const auto &[name, us] : plan.baselinesUncompressed)
      root["baselines_uncompressed"][name] = us;
  }
  if (!plan.parallel.empty())
    root["parallel"] = json::parse(plan.parallel);
  if (!plan.moe.empty())
    root["moe"] = json::parse(plan.moe);
  if (!plan.inference.empty())
    root["inference"] = json::parse(plan.inference);
  if (!plan.sparseTensors.empty()) {
    root["sparse_tensors"] = ordered_json::array();
    for (const SparseTensor &t : plan.sparseTensors) {
      ordered_json tensor = {{"name", t.name},
                             {"rows", t.rows},
                             {"row_elements", t.rowElements},
                             {"scheme", zen::vocab::toString(t.scheme)}};
      if (zen::vocab::traitsOf(t.scheme).takesBlockRows)
        tensor["block_rows"] = t.blockRows;
      if (zen::vocab::traitsOf(t.scheme).takesDenseThreshold)
        tensor["dense_threshold"] = t.denseThreshold;
      tensor["statistics"] = {{"density", t.statistics.density},
                              {"gamma", t.statistics.gamma},
                              {"skew", t.statistics.skew},
                              {"source", t.statistics.source}};
      if (t.statistics.hashSkew > 0)
        tensor["statistics"]["hash_skew"] = t.statistics.hashSkew;
      if (t.statistics.blockDensity > 0)
        tensor["statistics"]["block_density"] = t.statistics.blockDensity;
      if (!t.statistics.blockGamma.empty())
        tensor["statistics"]["block_gamma"] = t.statistics.blockGamma;
      tensor["predicted_us"] = t.predictedUs;
      root["sparse_tensors"].push_back(std::move(tensor));
    }
  }
  return root;
}

}  // namespace

const char *toString(BucketGroup v) { return enumName(v); }

int64_t dtypeBytes(const std::string &dtype) { return dtype == "f32" ? 4 : 0; }

int64_t expertParallelOf(const Plan &plan) {
  int64_t ep = 1;
  for (const TensorInfo &tensor : plan.tensors)
    ep = std::max(ep, tensor.expertParallel);
  return ep;
}

std::optional<SyncScheme> syncSchemeOf(const Bucket &bucket) {
  CollectiveKind sequence[2];
  if (bucket.collectives.empty() || bucket.collectives.size() > 2)
    return std::nullopt;
  for (size_t c = 0; c < bucket.collectives.size(); ++c)
    sequence[c] = bucket.collectives[c].op;
  return zen::vocab::schemeOfSequence(sequence, bucket.collectives.size());
}

Plan parsePlan(const std::string &text, const std::string &source) {
  json document;
  StrictJsonParse detector(
      [&](const std::string &path, const std::string &what) { fail(source, path, what); });
  try {
    document = detector.parse(text, /*ignoreComments=*/false);
  } catch (const json::exception &e) {
    // Syntax errors and number overflow (1e999); strip nlohmann's "[json.exception...] " prefix.
    std::string what = e.what();
    auto pos = what.find("] ");
    std::string path = detector.currentPath();
    throw PlanError(zen::ErrorKind::BadInput,
                    source + ": " + (path.empty() ? "" : path + ": ") + "invalid JSON: " +
                        (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
  Plan plan = decodePlan(Node(document, "", source));
  validatePlan(plan, source);
  return plan;
}

Plan loadPlanFile(const std::string &path) {
  std::string text;
  try {
    text = io::readBounded(path, kMaxPlanBytes, "plan file");
  } catch (const io::FileError &error) {
    throw PlanError(error.kind, error.what());
  }
  return parsePlan(text, path);
}

void validatePlan(const Plan &plan, const std::string &source, zen::ErrorKind kind) {
  Validator(plan, source, kind).run();
}

namespace {
/// Values (scalars, objects and arrays) in `document`, as the plan reader counts them.
size_t jsonValueCount(const ordered_json &document) {
  size_t values = 1;
  if (document.is_structured())
    for (const ordered_json &child : document)
      values += jsonValueCount(child);
  return values;
}
} // namespace

Plan oneBucketPlan(int64_t elements, int ranks, const std::string &generator) {
  Plan plan;
  plan.generator = {generator, "1"};
  plan.model = {"one-bucket", ""};
  plan.cluster.name = "local";
  plan.cluster.worldSize = ranks;
  plan.strategy = "one-bucket";
  plan.compressor = "none";
  plan.tensors = {{"g", elements, "f32", 0}};
  Bucket bucket;
  bucket.tensors = {{"g", 0, elements}};
  bucket.elements = elements;
  bucket.bytes = elements * 4;
  bucket.collectives = {{CollectiveKind::AllReduce, "ring", 1, 1, 0, false, elements * 4}};
  plan.buckets = {bucket};
  Task backward;
  backward.name = "backward";
  backward.produces = {"g"};
  Task allReduce;
  allReduce.id = 1;
  allReduce.kind = TaskKind::Collective;
  allReduce.name = "all_reduce";
  allReduce.bucket = 0;
  allReduce.stream = 1;
  allReduce.deps = {0};
  plan.schedule = {backward, allReduce};
  return plan;
}

std::string writePlan(const Plan &plan) {
  validatePlan(plan, "plan being written", zen::ErrorKind::Internal);
  const ordered_json document = encodePlan(plan);
  // A plan the reader would refuse is not written: the model is too large to run from one file.
  if (const size_t values = jsonValueCount(document); values > zen::kMaxJsonValues)
    throw PlanError(zen::ErrorKind::BadInput,
                    "the plan of '" + plan.model.name + "' has " + std::to_string(values) +
                        " JSON values, more than the " + std::to_string(zen::kMaxJsonValues) +
                        " a plan file may hold (" + std::to_string(plan.tensors.size()) +
                        " tensors); plan fewer, larger tensors");
  return document.dump(2) + "\n";
}

void writeFileAtomically(const std::string &path, const std::string &text) {
  try {
    io::writeFile(path, text);
  } catch (const io::FileError &error) {
    throw PlanError(error.kind, error.what());
  }
}

void writePlanFile(const Plan &plan, const std::string &path) {
  writeFileAtomically(path, writePlan(plan));
}

uint64_t fnv1a64(const std::string &text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

uint64_t planHash(const Plan &plan) { return fnv1a64(writePlan(plan)); }

}  // namespace zenrt
