//===- Report.cpp - summary, Chrome trace and SVG timeline ----------------===//
#include "zen/Codegen/Report.h"

#include "zen/Codegen/SparsePlan.h"

#include "zen/Codegen/ParallelPlan.h"
#include "zen/Codegen/PlanSimulation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

using nlohmann::ordered_json;
using nlohmann::json;

namespace zen::codegen {
namespace {

/// The compression methods a plan uses, e.g. "none" or "fp16, topk:0.01".
std::string compressionUsed(const zenrt::Plan &plan) {
  std::set<std::string> used;
  for (const zenrt::Bucket &bucket : plan.buckets) {
    const zenrt::Compression &c = bucket.compression;
    std::string name = zenrt::toString(c.method);
    if (vocab::takesRatio(c.method))
      name += fmt::format(":{:g}", c.ratio);
    else if (vocab::takesRank(c.method))
      name += fmt::format(":{}", c.rank);
    if (c.method != zenrt::CompressionMethod::None && c.device == zenrt::Device::CPU)
      name += "@cpu";
    used.insert(name);
  }
  if (used.size() > 1)
    used.erase("none");
  std::string text;
  for (const std::string &name : used)
    text += (text.empty() ? "" : ", ") + name;
  return text.empty() ? "none" : text;
}

int64_t gradientBytes(const zenrt::Plan &plan) {
  int64_t bytes = 0;
  for (const zenrt::TensorInfo &tensor : plan.tensors)
    bytes += tensor.elements * zenrt::dtypeBytes(tensor.dtype);
  return bytes;
}

double ms(double us) { return us / 1000.0; }

bool onHostCpu(const zenrt::Plan &plan, const zenrt::Task &task) {
  return vocab::compresses(task.kind) &&
         task.bucket >= 0 && task.bucket < static_cast<int64_t>(plan.buckets.size()) &&
         plan.buckets[task.bucket].compression.device == zenrt::Device::CPU;
}

/// The tracks of the trace and rows of the picture: the GPU compute stream, the
/// host CPU when compression is offloaded to it, then every communication stream.
class TrackLayout {
public:
  explicit TrackLayout(const zenrt::Plan &plan) : plan_(plan) {
    int64_t streams = 0;
    for (const zenrt::Task &task : plan.schedule) {
      hostCpu_ = hostCpu_ || onHostCpu(plan, task);
      if (vocab::communicates(task.kind))
        streams = std::max(streams, task.stream + 1);
    }
    names_.push_back("compute");
    if (hostCpu_)
      names_.push_back("host cpu");
    for (int64_t s = 0; s < streams; ++s)
      names_.push_back(fmt::format("comm stream {}", s));
  }
  int64_t trackOf(const zenrt::Task &task) const {
    if (vocab::communicates(task.kind))
      return (hostCpu_ ? 2 : 1) + task.stream;
    return hostCpu_ && onHostCpu(plan_, task) ? 1 : 0;
  }
  const std::vector<std::string> &names() const { return names_; }

private:
  const zenrt::Plan &plan_;
  bool hostCpu_ = false;
  std::vector<std::string> names_;
};

struct Interval {
  double begin, end;
};

std::vector<Interval> unionOf(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval &a, const Interval &b) { return a.begin < b.begin; });
  std::vector<Interval> merged;
  for (const Interval &i : intervals) {
    if (!merged.empty() && i.begin <= merged.back().end)
      merged.back().end = std::max(merged.back().end, i.end);
    else
      merged.push_back(i);
  }
  return merged;
}

/// Stretches where communication runs and the compute stream is idle.
/// The stretches of `comm` during which `compute` is idle.
std::vector<Interval> exposedOf(const std::vector<Interval> &compute,
                                const std::vector<Interval> &comm) {
  std::vector<Interval> busy = unionOf(compute), exposed;
  for (const Interval &c : unionOf(comm)) {
    double cursor = c.begin;
    for (const Interval &b : busy) {
      if (b.end <= cursor || b.begin >= c.end)
        continue;
      if (b.begin > cursor)
        exposed.push_back({cursor, b.begin});
      cursor = std::max(cursor, b.end);
    }
    if (cursor < c.end)
      exposed.push_back({cursor, c.end});
  }
  return exposed;
}

std::vector<Interval> exposedCommunication(const zenrt::Plan &plan) {
  std::vector<Interval> compute, comm;
  for (const zenrt::Task &task : plan.schedule) {
    Interval span{task.startUs, task.startUs + task.durationUs};
    if (vocab::communicates(task.kind))
      comm.push_back(span);
    else if (!onHostCpu(plan, task))
      compute.push_back(span);
  }
  return exposedOf(compute, comm);
}

std::string escapeXml(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '&': out += "&amp;"; break;
    case '"': out += "&quot;"; break;
    default: out += c;
    }
  }
  return out;
}

const char *colorOf(vocab::TaskKind kind, vocab::Phase phase) {
  switch (kind) {
  case vocab::TaskKind::Collective: return "#e8833a";
  case vocab::TaskKind::SparseSync: return "#c0504d";
  case vocab::TaskKind::Compress:
  case vocab::TaskKind::Decompress: return "#8e6cc0";
  case vocab::TaskKind::Compute: break;
  }
  switch (phase) {
  case vocab::Phase::Forward: return "#4c86c6";
  case vocab::Phase::NextForward: return "#9bbde3";
  case vocab::Phase::Backward: return "#55a868";
  case vocab::Phase::Optimizer: return "#8c8c8c";
  }
  return "#8c8c8c";
}

json parallelOf(const zenrt::Plan &plan) {
  return plan.parallel.empty() ? json() : json::parse(plan.parallel);
}
json moeOf(const zenrt::Plan &plan) { return plan.moe.empty() ? json() : json::parse(plan.moe); }
/// An MoE layer's token compression; plans may leave out "none".
std::string tokenCompressionOf(const json &layer) {
  return layer.value("token_compression", std::string("none"));
}
/// How an MoE layer's all-to-alls meet the gradient sync; plans may leave out "concurrent".
std::string gradientSyncOf(const json &layer) {
  return layer.value("gradient_sync", std::string("concurrent"));
}
/// The whole iteration: a large-model plan's schedule covers only the first
/// stage's last micro-batch and its data-parallel sync; an MoE plan's adds the
/// MoE layers' all-to-alls and pipelining to its schedule.
/// `parallel` and `moe` are the plan's sections, parsed once by the caller (an MoE plan's
/// holds its whole co-scheduled timeline).
double iterationUs(const zenrt::Plan &plan, const json &parallel, const json &moe) {
  if (parallel.is_object())
    return parallel["iteration_us"].get<double>();
  return moe.is_object() ? moe["iteration_us"].get<double>() : plan.predictions.iterationUs;
}

/// The whole iteration's parts (docs/plan-format.md "The --json summary"): iteration =
/// compute + exposed communication + bubble + MoE extra, for every plan.
struct IterationParts {
  double computeUs = 0, exposedCommUs = 0, bubbleUs = 0, moeExtraUs = 0, lowerBoundUs = 0;
};
IterationParts iterationParts(const zenrt::Plan &plan, const json &parallel, double iteration) {
  const zenrt::Predictions &p = plan.predictions;
  if (!parallel.is_object())
    // A data-parallel schedule: the MoE layers' co-scheduling adds to it.
    return {p.computeUs, p.exposedCommUs, 0, iteration - p.iterationUs, p.lowerBoundUs};
  IterationParts parts;
  parts.bubbleUs = parallel["bubble_us"].get<double>();
  parts.exposedCommUs = parallel["tensor_comm_us"].get<double>() +
                        parallel["pipeline_comm_us"].get<double>() +
                        parallel["data_comm_us"].get<double>();
  // Plans written before compute_us was: the rest of the iteration is compute.
  parts.computeUs = parallel.contains("compute_us")
                        ? parallel["compute_us"].get<double>()
                        : iteration - parts.exposedCommUs - parts.bubbleUs;
  parts.lowerBoundUs = parallel.value("lower_bound_us", parts.computeUs);
  return parts;
}
} // namespace

ordered_json summaryJson(const zenrt::Plan &plan, const SummaryContext &context) {
  ordered_json json;
  const nlohmann::json parallel = parallelOf(plan);
  const nlohmann::json moe = moeOf(plan);
  const double iteration = iterationUs(plan, parallel, moe);
  json["model"] = plan.model.name;
  json["cluster"] = plan.cluster.name;
  json["world_size"] = plan.cluster.worldSize;
  json["strategy"] = plan.strategy;
  const IterationParts parts = iterationParts(plan, parallel, iteration);
  json["iteration_us"] = iteration;
  json["compute_us"] = parts.computeUs;
  json["exposed_comm_us"] = parts.exposedCommUs;
  json["bubble_us"] = parts.bubbleUs;
  json["moe_extra_us"] = parts.moeExtraUs;
  json["lower_bound_us"] = parts.lowerBoundUs;
  json["comm_bound_us"] = plan.predictions.commBoundUs;
  if (parallel.is_object() || moe.is_object())
    json["data_parallel_schedule"] = {{"iteration_us", plan.predictions.iterationUs},
                                      {"compute_us", plan.predictions.computeUs},
                                      {"exposed_comm_us", plan.predictions.exposedCommUs},
                                      {"lower_bound_us", plan.predictions.lowerBoundUs}};
  json["buckets"] = static_cast<int64_t>(plan.buckets.size());
  json["gradient_tensors"] = static_cast<int64_t>(plan.tensors.size());
  json["gradient_bytes"] = gradientBytes(plan);
  json["compression"] = compressionUsed(plan);
  json["compute_dtype"] = plan.computeDtype;
  json["compute_source"] = context.computeSource;
  if (!context.transformer.is_null())
    json["transformer"] = context.transformer;
  ordered_json baselines = ordered_json::object(), speedups = ordered_json::object();
  for (const auto &[name, us] : plan.baselines) {
    baselines[name] = us;
    speedups[name] = iteration > 0 ? us / iteration : 0.0;
  }
  json["baselines"] = baselines;
  json["speedup_over"] = speedups;
  if (parallel.is_object()) {
    ordered_json config;
    for (const char *key : {"tp", "pp", "dp", "zero", "sequence_parallel", "recompute", "micro_batch",
                            "micro_batches", "schedule", "decomposition"})
      config[key] = parallel[key];
    for (const char *key : {"zero3_regather", "zero3_prefetch_depth"})
      if (parallel.contains(key))
        config[key] = parallel[key];
    if (parallel.contains("moe"))
      config["moe"] = parallel["moe"];
    json["parallel"] = config;
    ordered_json memory;
    for (const char *key : {"per_gpu_bytes", "capacity_bytes", "weights_bytes", "gradients_bytes",
                            "optimizer_bytes", "activations_bytes", "buffers_bytes", "reserve_bytes"})
      memory[key] = parallel["memory"][key];
    json["memory"] = memory;
    for (const char *key : {"tflops_per_gpu", "model_tflops_per_gpu", "mfu", "tensor_comm_us",
                            "pipeline_comm_us", "data_comm_us"})
      json[key] = parallel[key];
    json["baselines_not_fitting"] = parallel["baselines_not_fitting"];
    json["baseline_configurations"] = parallel.value("baseline_configurations", json::object());
  } else if (!context.memory.is_null()) {
    json["memory"] = context.memory;
  }
  if (moe.is_object()) {
    ordered_json section;
    for (const char *key : {"ep", "imbalance", "moe_us", "expert_sync_us", "sync_saving_us"})
      section[key] = moe[key];
    ordered_json layers = ordered_json::array();
    for (const nlohmann::json &layer : moe["layers"])
      layers.push_back({{"name", layer["name"]},
                        {"forward", layer["forward"]},
                        {"backward", layer["backward"]},
                        {"all_to_all", layer["all_to_all"]},
                        {"token_compression", tokenCompressionOf(layer)},
                        {"gradient_sync", gradientSyncOf(layer)}});
    section["layers"] = layers;
    section["searched"] = moe["searched"];
    section["not_fitting"] = moe.value("not_fitting", json::object());
    section["memory"] = moe["memory"];
    json["moe"] = section;
  }
  if (!plan.baselinesUncompressed.empty()) {
    ordered_json uncompressed = ordered_json::object();
    for (const auto &[name, us] : plan.baselinesUncompressed)
      uncompressed[name] = us;
    json["baselines_uncompressed"] = uncompressed;
  }
  if (!context.sparse.tensors.empty())
    json["sparse"] = sparseSummaryJson(context.sparse);
  if (!context.denseSynced.tables.empty())
    json["sparse_synchronised_dense"] = denseSyncedJson(context.denseSynced);
  return json;
}

namespace {
/// "memory per GPU" of a summary: `where` follows the capacity (" (stage N)" or "").
std::string memoryLine(const json &memory, const std::string &where) {
  auto gb = [&](const char *key) { return memory[key].get<double>() / 1e9; };
  return fmt::format("  memory per GPU        {:.1f} GB of {:.1f} GB{}: weights {:.1f}, "
                     "gradients {:.1f}, optimizer {:.1f}, activations {:.1f}, buffers {:.1f}, "
                     "reserve {:.1f}\n",
                     gb("per_gpu_bytes"), gb("capacity_bytes"), where, gb("weights_bytes"),
                     gb("gradients_bytes"), gb("optimizer_bytes"), gb("activations_bytes"),
                     gb("buffers_bytes"), gb("reserve_bytes"));
}

std::string parallelText(const zenrt::Plan &plan, const json &parallel) {
  std::string out;
  const json &memory = parallel["memory"];
  const cost::ParallelConfig config = parallelConfigOf(plan);
  std::string zero = std::to_string(config.zero);
  if (parallel.contains("zero3_regather"))
    zero += fmt::format(" (gathered {}, prefetch depth {})", parallel["zero3_regather"].get<std::string>(),
                        parallel["zero3_prefetch_depth"].get<int64_t>());
  out += fmt::format("  configuration         tp {} x pp {} x dp {}, ZeRO {}, sequence parallel {}, "
                     "recompute {}, {} micro-batches of {}, {}\n",
                     config.tp, config.pp, config.dp, zero, config.sequenceParallel ? "on" : "off",
                     vocab::toString(config.recompute), config.microBatches, config.microBatch,
                     config.schedule());
  out += memoryLine(memory, fmt::format(" (stage {})", memory["stage"].get<int64_t>()));
  const cost::Decomposition &chunks = config.decomposition;
  out += fmt::format("  TP decomposition      attention {} forward, {} backward; MLP {} forward, {} backward "
                     "(chunks per GEMM and its collective)\n",
                     chunks.attentionForward, chunks.attentionBackward, chunks.mlpForward,
                     chunks.mlpBackward);
  if (parallel.contains("moe")) {
    const json &moe = parallel["moe"];
    const int64_t shards = moe.value("expert_tensor_parallel", int64_t{1});
    out += fmt::format("  MoE blocks            {} ({} experts, top-{}): ep {}, degree {} forward, {} backward, "
                       "{} all-to-all{} ({} tokens per rank and micro-batch, capacity {}{})\n",
                       moe["blocks"].size(), moe["experts"].get<int64_t>(), moe["top_k"].get<int64_t>(),
                       moe["ep"].get<int64_t>(), moe["forward"].get<int64_t>(),
                       moe["backward"].get<int64_t>(), moe["all_to_all"].get<std::string>(),
                       moe.value("token_compression", std::string("none")) == "none"
                           ? std::string()
                           : ", tokens " + moe["token_compression"].get<std::string>(),
                       moe["tokens"].get<int64_t>(), moe["capacity"].get<int64_t>(),
                       shards > 1 ? fmt::format("; every expert split over {} tensor-parallel ranks", shards) : "");
  }
  const IterationParts parts = iterationParts(plan, parallel, parallel["iteration_us"].get<double>());
  out += fmt::format("  predicted iteration   {:10.3f} ms   (plan is {:.3f}x the bound)\n",
                     parallel["iteration_us"].get<double>() / 1e3,
                     parts.lowerBoundUs > 0 ? parallel["iteration_us"].get<double>() / parts.lowerBoundUs : 0.0);
  out += fmt::format("  compute               {:10.3f} ms\n", parts.computeUs / 1e3);
  out += fmt::format("  pipeline bubble       {:10.3f} ms\n", parallel["bubble_us"].get<double>() / 1e3);
  out += fmt::format("  exposed TP comm       {:10.3f} ms\n", parallel["tensor_comm_us"].get<double>() / 1e3);
  out += fmt::format("  exposed PP comm       {:10.3f} ms\n", parallel["pipeline_comm_us"].get<double>() / 1e3);
  out += fmt::format("  exposed DP/ZeRO comm  {:10.3f} ms\n", parallel["data_comm_us"].get<double>() / 1e3);
  out += fmt::format("  lower bound           {:10.3f} ms\n", parts.lowerBoundUs / 1e3);
  out += fmt::format("  throughput            {:.1f} TFLOP/s per GPU ({:.1f} model TFLOP/s, MFU {:.1f}%)\n",
                     parallel["tflops_per_gpu"].get<double>(), parallel["model_tflops_per_gpu"].get<double>(),
                     100 * parallel["mfu"].get<double>());
  for (const auto &[name, why] : parallel["baselines_not_fitting"].items())
    out += fmt::format("  {:<21} {}\n", name, why.get<std::string>());
  if (!parallel["replicated"].empty())
    out += fmt::format("  replicated GEMMs      {}\n",
                       fmt::join(parallel["replicated"].get<std::vector<std::string>>(), ", "));
  out += "  first stage's last micro-batch and its data-parallel sync:\n";
  return out;
}

std::string moeText(const json &moe) {
  std::string out;
  out += fmt::format("  experts               ep {} (experts over {} ranks of the data-parallel "
                     "group), imbalance {:g}\n",
                     moe["ep"].get<int64_t>(), moe["ep"].get<int64_t>(),
                     moe["imbalance"].get<double>());
  for (const json &layer : moe["layers"]) {
    const std::string tokens = tokenCompressionOf(layer);
    const bool serial = gradientSyncOf(layer) == "serial";
    out += fmt::format("  {:<21} degree {} forward, {} backward, {} all-to-all{}{} ({:.3f} + {:.3f} "
                       "ms)\n",
                       layer["name"].get<std::string>(), layer["forward"].get<int64_t>(),
                       layer["backward"].get<int64_t>(), layer["all_to_all"].get<std::string>(),
                       tokens == "none" ? "" : ", tokens " + tokens,
                       serial ? ", taking turns with the gradient sync" : "",
                       layer["forward_us"].get<double>() / 1e3,
                       layer["backward_us"].get<double>() / 1e3);
  }
  const json &memory = moe["memory"];
  out += fmt::format("  expert memory         weights {:.1f} MB, gradients {:.1f} MB, optimizer "
                     "{:.1f} MB, activations {:.1f} MB, dispatch buffers {:.1f} MB per GPU\n",
                     memory["weights_bytes"].get<double>() / 1e6,
                     memory["gradients_bytes"].get<double>() / 1e6,
                     memory["optimizer_bytes"].get<double>() / 1e6,
                     memory["activations_bytes"].get<double>() / 1e6,
                     memory["buffers_bytes"].get<double>() / 1e6);
  if (memory.contains("per_gpu_bytes"))
    out += fmt::format("  memory per GPU        {:.1f} GB{} (experts, the other parameters' "
                       "weights, gradients and optimizer state, {}, reserve)\n",
                       memory["per_gpu_bytes"].get<double>() / 1e9,
                       memory["capacity_bytes"].get<double>() > 0
                           ? fmt::format(" of {:.1f} GB", memory["capacity_bytes"].get<double>() / 1e9)
                           : std::string(),
                       memory.contains("other_activations_bytes")
                           ? fmt::format("the other activations {:.1f} GB",
                                         memory["other_activations_bytes"].get<double>() / 1e9)
                           : std::string("not the other activations"));
  const json notFitting = moe.value("not_fitting", json::object());
  for (const auto &[ep, bytes] : notFitting.items())
    out += fmt::format("  ep {:<18} does not fit: {:.1f} GB per GPU\n", ep,
                       bytes.get<double>() / 1e9);
  out += fmt::format("  MoE layers            {:10.3f} ms (expert gradient sync {:.3f} ms over "
                     "dp / ep ranks)\n",
                     moe["moe_us"].get<double>() / 1e3, moe["expert_sync_us"].get<double>() / 1e3);
  out += fmt::format("  predicted iteration   {:10.3f} ms with the MoE layers co-scheduled "
                     "with the gradient sync\n",
                     moe["iteration_us"].get<double>() / 1e3);
  return out;
}
} // namespace

std::string transformerText(const ordered_json &t) {
  const int64_t heads = t["heads"].get<int64_t>(), kvHeads = t["kv_heads"].get<int64_t>();
  const int64_t moeBlocks = t["moe_blocks"].get<int64_t>();
  const int64_t crossBlocks = t.value("cross_attention_blocks", int64_t{0});
  const std::string positions = t["positions"].get<std::string>();
  return fmt::format("{} {} blocks{}{}, hidden {}, {} heads{}, ffn {} {}, {}, {}{}, vocab {}, "
                     "seq {}",
                     t["blocks"].get<int64_t>(), t["family"].get<std::string>(),
                     moeBlocks ? fmt::format(" ({} MoE)", moeBlocks) : "",
                     crossBlocks ? fmt::format(" ({} with cross-attention)", crossBlocks) : "",
                     t["hidden"].get<int64_t>(), heads,
                     kvHeads != heads ? fmt::format(" ({} key/value)", kvHeads) : "",
                     t["ffn"].get<int64_t>(), t["mlp"].get<std::string>(), t["norm"].get<std::string>(),
                     positions == "none" ? "no position embeddings" : positions + " positions",
                     t["tied_embeddings"].get<bool>() ? ", tied embeddings" : "",
                     t["vocab"].get<int64_t>(), t["seq"].get<int64_t>());
}

std::string summaryText(const zenrt::Plan &plan, const SummaryContext &context) {
  const zenrt::Predictions &p = plan.predictions;
  const json parallel = parallelOf(plan);
  std::string out;
  out += fmt::format("zenopt plan for {} on {} ({} ranks), strategy {}\n", plan.model.name,
                     plan.cluster.name, plan.cluster.worldSize, plan.strategy);
  if (!context.transformer.is_null())
    out += "  transformer           " + transformerText(context.transformer) + "\n";
  if (parallel.is_object())
    out += parallelText(plan, parallel);
  const json moe = moeOf(plan);
  if (moe.is_object())
    out += moeText(moe);  // with the whole memory per GPU
  else if (!context.memory.is_null())
    out += memoryLine(context.memory, "");
  const auto expertBuckets = std::count_if(
      plan.buckets.begin(), plan.buckets.end(),
      [](const zenrt::Bucket &b) { return b.group == zenrt::BucketGroup::ExpertReplicas; });
  out += fmt::format("  gradients             {} tensors, {:.1f} MB in {} buckets{}\n",
                     plan.tensors.size(), gradientBytes(plan) / 1e6, plan.buckets.size(),
                     expertBuckets ? fmt::format(" ({} of the experts' over their replicas)",
                                                 expertBuckets)
                                   : "");
  if (!plan.sparseTensors.empty()) {
    double denseBytes = 0;
    for (const zenrt::SparseTensor &table : plan.sparseTensors)
      denseBytes += 4.0 * double(table.rows) * double(table.rowElements);
    out += fmt::format("  row-sparse gradients  {} table{}, {:.1f} MB dense, each synchronised by "
                       "its sparse scheme\n",
                       plan.sparseTensors.size(), plan.sparseTensors.size() == 1 ? "" : "s",
                       denseBytes / 1e6);
  }
  if (const std::vector<plan::SparseDecision> &dense = context.denseSynced.tables; !dense.empty()) {
    std::vector<std::string> names;
    for (const plan::SparseDecision &table : dense)
      names.push_back(table.name);
    out += fmt::format("  dense row-sparse      {} table{} ({}), synchronised dense (below)\n",
                       dense.size(), dense.size() == 1 ? "" : "s", fmt::join(names, ", "));
  }
  out += fmt::format("  compression           {}\n", compressionUsed(plan));
  if (plan.computeDtype != "fp32")
    out += fmt::format("  compute precision     {} (gradients fp32 on the wire)\n", plan.computeDtype);
  if (context.computeSource != "cost model")
    out += fmt::format("  compute priced from   {}\n", context.computeSource);
  const double whole = iterationUs(plan, parallel, moe);
  if (parallel.is_object() || moe.is_object()) {
    // The whole iteration was printed above; this is the part the schedule covers.
    out += fmt::format("  data-parallel schedule {:9.3f} ms: compute {:.3f} ms, exposed communication "
                       "{:.3f} ms, lower bound {:.3f} ms\n",
                       ms(p.iterationUs), ms(p.computeUs), ms(p.exposedCommUs), ms(p.lowerBoundUs));
  } else {
    out += fmt::format("  predicted iteration   {:10.3f} ms\n", ms(p.iterationUs));
    out += fmt::format("  compute               {:10.3f} ms\n", ms(p.computeUs));
    out += fmt::format("  exposed communication {:10.3f} ms\n", ms(p.exposedCommUs));
    out += fmt::format("  lower bound           {:10.3f} ms   (plan is {:.3f}x the bound)\n",
                       ms(p.lowerBoundUs), p.lowerBoundUs > 0 ? p.iterationUs / p.lowerBoundUs : 0.0);
  }
  auto speedup = [&](double us) { return whole > 0 ? us / whole : 0.0; };
  const bool compressed = !plan.baselinesUncompressed.empty();
  if (!plan.baselines.empty()) {
    // Like with like: with compressors allowed, each baseline gets its best one; the
    // uncompressed times follow for reference.
    out += compressed ? "\n  baselines at their best: the fastest allowed compressor, or none "
                      "(uncompressed alongside)\n"
                      : "\n";
    size_t width = 12;
    for (const auto &entry : plan.baselines)
      width = std::max(width, entry.first.size());
    out += fmt::format("  {:<{}} {:>14} {:>18}", "baseline", width, "iteration (ms)",
                       fmt::format("{} speedup", plan.strategy));
    out += compressed ? fmt::format(" {:>18} {:>18}\n", "uncompressed (ms)",
                                    fmt::format("{} speedup", plan.strategy))
                      : "\n";
    for (const auto &[name, us] : plan.baselines) {
      out += fmt::format("  {:<{}} {:>14.3f} {:>17.3f}x", name, width, ms(us), speedup(us));
      auto plain = plan.baselinesUncompressed.find(name);
      out += plain != plan.baselinesUncompressed.end()
                 ? fmt::format(" {:>18.3f} {:>17.3f}x\n", ms(plain->second), speedup(plain->second))
                 : "\n";
    }
    if (parallel.is_object() && parallel.contains("baseline_configurations"))
      for (const auto &[name, seed] : parallel["baseline_configurations"].items())
        out += fmt::format("  {:<{}} {} ({})\n", name, width, seed["configuration"].get<std::string>(),
                           seed["rule"].get<std::string>());
    if (plan.strategy == "auto")
      out += "  (the baselines seed auto's search: auto is never slower than them by construction)\n";
  }
  if (!context.sparse.tensors.empty())
    out += "\n" + sparseSummaryText(context.sparse);
  if (!context.denseSynced.tables.empty())
    out += "\n" + denseSyncedText(context.denseSynced);
  return out;
}

namespace {

/// One bar of the trace and the picture: a task of the plan's schedule, or a
/// pipeline step of a large-model plan.
struct Bar {
  int64_t row = 0;
  std::string name, category, color;
  double startUs = 0, durationUs = 0;
  const zenrt::Task *task = nullptr;  // schedule tasks only
  std::optional<cost::TimedStep> step;  // pipeline steps only
  int64_t stage = 0;
  json moe;  // MoE layer phases only: degree, all-to-all, ep
};

/// One bar per MoE layer and phase on `row`, with the degree and all-to-all
/// the plan chose (docs/plan-format.md "moe"): forward from the start of the
/// layer's forward task, backward ending with its backward task (the layer's
/// forward_task and backward_task). A layer without them (plans before them) gets none.
void addMoeBars(const zenrt::Plan &plan, const json &moe, int64_t row, std::vector<Bar> &bars) {
  for (const json &layer : moe["layers"]) {
    const std::string name = layer["name"].get<std::string>();
    if (!layer.contains("forward_task") || !layer.contains("backward_task"))
      continue;
    auto taskWithId = [&](const json &id) {
      return &*std::find_if(plan.schedule.begin(), plan.schedule.end(),
                            [&](const zenrt::Task &task) { return task.id == id.get<int64_t>(); });
    };
    // The plan's validator found both among the schedule's compute tasks.
    const zenrt::Task *forward = taskWithId(layer["forward_task"]);
    const zenrt::Task *backward = taskWithId(layer["backward_task"]);
    for (const char *phase : {"forward", "backward"}) {
      const zenrt::Task *task = phase == std::string("forward") ? forward : backward;
      Bar bar;
      bar.row = row;
      bar.name = std::string("moe.") + (task == forward ? "fwd." : "bwd.") + name;
      bar.category = "moe";
      bar.color = "#c44e52";
      bar.durationUs = layer[std::string(phase) + "_us"].get<double>();
      bar.startUs = task == forward ? task->startUs
                                    : std::max(0.0, task->startUs + task->durationUs - bar.durationUs);
      bar.moe = {{"degree", layer[phase]},
                 {"all_to_all", layer["all_to_all"]},
                 {"token_compression", tokenCompressionOf(layer)},
                 {"gradient_sync", gradientSyncOf(layer)},
                 {"ep", moe["ep"]}};
      bars.push_back(bar);
    }
  }
}

/// An MoE plan's co-scheduled iteration (the moe section's timeline): its tasks
/// on the compute, host, gradient-sync and MoE all-to-all tracks as the
/// simulator ran them; the MoE layers' pieces (the entries with a moe_layer) in
/// category "moe" with their layer's decisions; the gradient sync's tasks with
/// their bucket's schedule task. Names are shown, never read.
void addCoScheduledBars(const zenrt::Plan &plan, const json &moe, std::vector<std::string> &rows,
                        std::vector<Bar> &bars, std::vector<Interval> &exposed) {
  // Tracks in a fixed order: compute, host cpu, gradient-sync streams by number, the
  // stream only MoE all-to-alls use; an entry's track name is only shown.
  // The plan validator checked every entry's kind, phase, device and stream.
  auto kindOf = [](const json &task) { return *vocab::parseTaskKind(task["kind"].get<std::string>()); };
  std::set<int64_t> gradientStreams;
  for (const json &task : moe["timeline"])
    if (vocab::communicates(kindOf(task)) && !task.contains("moe_layer"))
      gradientStreams.insert(task["stream"].get<int64_t>());
  auto rank = [&](const json &task) -> std::pair<int, int64_t> {
    if (vocab::communicates(kindOf(task))) {
      const int64_t stream = task["stream"].get<int64_t>();
      return gradientStreams.count(stream) ? std::pair<int, int64_t>{2, stream}
                                           : std::pair<int, int64_t>{3, 0};
    }
    return {vocab::compresses(kindOf(task)) && task["device"] == "cpu" ? 1 : 0, 0};
  };
  std::map<std::pair<int, int64_t>, std::string> tracks;
  for (const json &task : moe["timeline"])
    tracks.emplace(rank(task), task["track"].get<std::string>());
  const int64_t firstRow = int64_t(rows.size());
  std::map<std::pair<int, int64_t>, int64_t> rowOf;
  for (const auto &[key, track] : tracks) {
    rowOf[key] = firstRow + int64_t(rowOf.size());
    rows.push_back(track);
  }
  std::vector<Interval> compute, comm;
  for (const json &task : moe["timeline"]) {
    Bar bar;
    bar.name = task["name"].get<std::string>();
    const vocab::TaskKind kind = kindOf(task);
    const vocab::Phase phase = *vocab::parsePhase(task["phase"].get<std::string>());
    bar.row = rowOf.at(rank(task));
    bar.startUs = task["start_us"].get<double>();
    bar.durationUs = task["duration_us"].get<double>();
    bar.category = vocab::toString(kind);
    bar.color = colorOf(kind, phase);
    if (task.contains("schedule_task")) {
      const zenrt::Task &scheduled = plan.schedule[task["schedule_task"].get<size_t>()];
      if (scheduled.bucket >= 0)
        bar.task = &scheduled;
    }
    if (task.contains("moe_layer")) {
      const json &layer = moe["layers"][task["moe_layer"].get<size_t>()];
      const bool forward = phase == vocab::Phase::Forward;
      bar.category = "moe";
      bar.color = vocab::communicates(kind) ? "#c44e52" : "#dd8452";
      bar.moe = {{"layer", layer["name"]},
                 {"phase", forward ? "forward" : "backward"},
                 {"degree", layer[forward ? "forward" : "backward"]},
                 {"all_to_all", layer["all_to_all"]},
                 {"token_compression", tokenCompressionOf(layer)},
                 {"gradient_sync", gradientSyncOf(layer)},
                 {"ep", moe["ep"]}};
    }
    (vocab::communicates(kind) ? comm : compute)
        .push_back({bar.startUs, bar.startUs + bar.durationUs});
    bars.push_back(bar);
  }
  exposed = exposedOf(compute, comm);
}

/// What the trace and the picture show. A data-parallel plan: its schedule on
/// the compute, host and communication rows. A large-model plan: one row per
/// pipeline stage with every micro-batch's forward and backward steps (the
/// simulated schedule, docs/design.md "Large models"), then the first stage's
/// last backward, data-parallel sync and optimizer step from the plan's
/// schedule, placed where that backward runs in the pipeline. An MoE plan with
/// a co-scheduled timeline: that iteration instead of the schedule's.
struct Timeline {
  std::vector<std::string> rows;
  std::vector<Bar> bars;
  double iterationUs = 0;
  std::vector<Interval> exposed;
};

Timeline timelineOf(const zenrt::Plan &plan) {
  Timeline timeline;
  const json parallel = parallelOf(plan);
  double offset = 0;
  if (parallel.is_object()) {
    cost::PipelineSchedule pipeline = pipelineScheduleOf(plan);
    const int64_t virtualStages = parallelConfigOf(plan).virtualStages;
    for (size_t s = 0; s < pipeline.stages.size(); ++s) {
      timeline.rows.push_back(fmt::format("stage {}", s));
      for (const cost::TimedStep &timed : pipeline.stages[s]) {
        Bar bar;
        bar.row = int64_t(s);
        bar.name = timed.step.name(virtualStages);
        bar.category = timed.step.backward ? "backward" : "forward";
        bar.color = timed.step.backward ? "#55a868" : "#4c86c6";
        bar.startUs = timed.startUs;
        bar.durationUs = timed.durationUs;
        bar.step = timed;
        bar.stage = int64_t(s);
        timeline.bars.push_back(bar);
      }
    }
    // Align the plan's last backward with the first stage's last backward step.
    double lastBackward = 0, firstBackwardTask = 0;
    for (const cost::TimedStep &timed : pipeline.stages.front())
      if (timed.step.backward)
        lastBackward = timed.startUs;
    bool found = false;
    for (const zenrt::Task &task : plan.schedule)
      if (task.phase == zenrt::Phase::Backward && (!found || task.startUs < firstBackwardTask)) {
        firstBackwardTask = task.startUs;
        found = true;
      }
    offset = lastBackward - firstBackwardTask;
  }
  const json moe = moeOf(plan);
  if (moe.is_object() && moe.contains("timeline") && !parallel.is_object()) {
    addCoScheduledBars(plan, moe, timeline.rows, timeline.bars, timeline.exposed);
    timeline.iterationUs = iterationUs(plan, parallel, moe);
    return timeline;
  }
  TrackLayout layout(plan);
  const int64_t firstTaskRow = int64_t(timeline.rows.size());
  for (const std::string &name : layout.names())
    timeline.rows.push_back(parallel.is_object() ? "stage 0 " + name : name);
  for (const zenrt::Task &task : plan.schedule) {
    // A pipeline's forwards are the stage rows'.
    if (parallel.is_object() &&
        (task.phase == zenrt::Phase::Forward || task.phase == zenrt::Phase::NextForward))
      continue;
    Bar bar;
    bar.row = firstTaskRow + layout.trackOf(task);
    bar.name = task.name;
    bar.category = zenrt::toString(task.kind);
    bar.color = colorOf(task.kind, task.phase);
    bar.startUs = task.startUs + offset;
    bar.durationUs = task.durationUs;
    bar.task = &task;
    timeline.bars.push_back(bar);
  }
  if (moe.is_object() && !parallel.is_object()) {
    timeline.rows.push_back(fmt::format("MoE layers (ep {})", moe["ep"].get<int64_t>()));
    addMoeBars(plan, moe, int64_t(timeline.rows.size()) - 1, timeline.bars);
  }
  timeline.iterationUs = iterationUs(plan, parallel, moe);
  for (const Interval &span : exposedCommunication(plan))
    timeline.exposed.push_back({span.begin + offset, span.end + offset});
  return timeline;
}

} // namespace

std::string chromeTrace(const zenrt::Plan &plan) {
  ordered_json events = ordered_json::array();
  Timeline timeline = timelineOf(plan);
  const json parallel = parallelOf(plan);
  ordered_json process{{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0}};
  process["args"] = {{"name", fmt::format("{} on {}", plan.model.name, plan.cluster.name)}};
  events.push_back(process);
  for (size_t track = 0; track < timeline.rows.size(); ++track) {
    ordered_json name{{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", track}};
    name["args"] = {{"name", timeline.rows[track]}};
    events.push_back(name);
  }
  for (const Bar &bar : timeline.bars) {
    ordered_json event{{"name", bar.name}, {"cat", bar.category}, {"ph", "X"},
                       {"ts", bar.startUs}, {"dur", bar.durationUs}, {"pid", 0},
                       {"tid", bar.row}};
    ordered_json args;
    if (!bar.moe.is_null())
      for (const auto &[key, value] : bar.moe.items())
        args[key] = value;
    if (bar.step) {
      args["stage"] = bar.stage;
      args["micro_batch"] = bar.step->step.microBatch;
      args["chunk"] = bar.step->step.chunk;
      // The decomposition degree every block of this step runs its TP regions in.
      const char *phase = bar.step->step.backward ? "backward" : "forward";
      args["tp_chunks"] = {{"attention", parallel["decomposition"]["attention"][phase]},
                           {"mlp", parallel["decomposition"]["mlp"][phase]}};
    }
    if (const zenrt::Task *task = bar.task) {
      args["phase"] = zenrt::toString(task->phase);
      if (task->bucket >= 0 && task->bucket < static_cast<int64_t>(plan.buckets.size())) {
        const zenrt::Bucket &bucket = plan.buckets[task->bucket];
        args["bucket"] = task->bucket;
        args["tensors"] = static_cast<int64_t>(bucket.tensors.size());
        args["bytes"] = bucket.bytes;
        args["compression"] = zenrt::toString(bucket.compression.method);
        if (bucket.group != zenrt::BucketGroup::DataParallel)
          args["group"] = zenrt::toString(bucket.group);
        size_t index = 0;
        for (const zenrt::Task &other : plan.schedule) {
          if (&other == task)
            break;
          if (other.bucket == task->bucket && other.kind == zenrt::TaskKind::Collective)
            ++index;
        }
        if (task->kind == zenrt::TaskKind::Collective && index < bucket.collectives.size()) {
          const zenrt::Collective &c = bucket.collectives[index];
          args["op"] = zenrt::toString(c.op);
          args["algorithm"] = c.algorithm;
          args["chunks"] = c.chunks;
          args["wire_bytes"] = c.bytes;
        }
      }
    }
    event["args"] = args;
    events.push_back(event);
  }
  ordered_json trace{{"displayTimeUnit", "ms"}, {"traceEvents", events}};
  return trace.dump(1) + "\n";
}

std::string timelineSvg(const zenrt::Plan &plan) {
  const double width = 1200, left = 150, right = 30, rowHeight = 34, top = 56;
  const Timeline timeline = timelineOf(plan);
  double end = timeline.iterationUs;
  for (const Bar &bar : timeline.bars)
    end = std::max(end, bar.startUs + bar.durationUs);
  end = std::max(end, 1.0);
  std::vector<std::string> labels = timeline.rows;
  labels.push_back("exposed comm");
  const int64_t rows = static_cast<int64_t>(labels.size());
  const double height = top + rows * rowHeight + 60;
  auto x = [&](double us) { return left + (width - left - right) * us / end; };
  auto rowY = [&](int64_t row) { return top + row * rowHeight; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n",
      width, height);
  svg += fmt::format("<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{} on {} "
                     "({} ranks), strategy {}: {:.2f} ms per iteration</text>\n",
                     escapeXml(plan.model.name), escapeXml(plan.cluster.name),
                     plan.cluster.worldSize, escapeXml(plan.strategy), ms(timeline.iterationUs));
  if (!plan.parallel.empty()) {
    const cost::ParallelConfig config = parallelConfigOf(plan);
    svg += fmt::format("<text x=\"10\" y=\"40\" fill=\"#555\">tp {} x pp {} x dp {}, ZeRO {}, "
                       "{} micro-batches, {}: pipeline bubble {:.2f} ms; TP chunks attention {}/{}, "
                       "MLP {}/{} (forward/backward); the first stage's data-parallel sync after "
                       "its last backward</text>\n",
                       config.tp, config.pp, config.dp, config.zero, config.microBatches,
                       escapeXml(config.schedule()), ms(parallelOf(plan)["bubble_us"].get<double>()),
                       config.decomposition.attentionForward, config.decomposition.attentionBackward,
                       config.decomposition.mlpForward, config.decomposition.mlpBackward);
  }
  else
    svg += fmt::format("<text x=\"10\" y=\"40\" fill=\"#555\">compute {:.2f} ms, exposed "
                       "communication {:.2f} ms, lower bound {:.2f} ms</text>\n",
                       ms(plan.predictions.computeUs), ms(plan.predictions.exposedCommUs),
                       ms(plan.predictions.lowerBoundUs));
  for (size_t row = 0; row < labels.size(); ++row) {
    svg += fmt::format("<text x=\"10\" y=\"{:.1f}\">{}</text>\n", rowY(row) + rowHeight * 0.6,
                       labels[row]);
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                       "fill=\"#f4f4f4\"/>\n",
                       left, rowY(row) + 3, width - left - right, rowHeight - 6);
  }
  for (const Bar &bar : timeline.bars) {
    double x0 = x(bar.startUs), w = std::max(0.5, x(bar.startUs + bar.durationUs) - x0);
    svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" "
                       "fill=\"{}\" stroke=\"white\" stroke-width=\"0.3\"><title>{} ({:.1f} us)"
                       "</title></rect>\n",
                       x0, rowY(bar.row) + 5, w, rowHeight - 10, bar.color, escapeXml(bar.name),
                       bar.durationUs);
  }
  for (const Interval &span : timeline.exposed)
    svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" "
                       "fill=\"#d62728\"/>\n",
                       x(span.begin), rowY(rows - 1) + 5,
                       std::max(0.5, x(span.end) - x(span.begin)), rowHeight - 10);
  // Time axis with about ten ticks at round values.
  double axisY = rowY(rows) + 8;
  double step = std::pow(10.0, std::floor(std::log10(end / 10.0)));
  for (double factor : {1.0, 2.0, 5.0, 10.0})
    if (end / (step * factor) <= 12) {
      step *= factor;
      break;
    }
  svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                     "stroke=\"#333\"/>\n",
                     left, axisY, width - right, axisY);
  for (double t = 0; t <= end + 1e-9; t += step)
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
                       "stroke=\"#333\"/><text x=\"{0:.1f}\" y=\"{3:.1f}\" "
                       "text-anchor=\"middle\">{4:g} ms</text>\n",
                       x(t), axisY, axisY + 5, axisY + 18, ms(t));
  // Legend.
  double legendY = axisY + 34, legendX = left;
  std::vector<std::pair<const char *, const char *>> legend = {
      {"forward", "#4c86c6"},     {"backward", "#55a868"},   {"optimizer", "#8c8c8c"},
      {"next forward", "#9bbde3"}, {"collective", "#e8833a"}, {"compression", "#8e6cc0"},
      {"exposed communication", "#d62728"}};
  if (const json moe = moeOf(plan); moe.is_object() && moe.contains("timeline") &&
                                     plan.parallel.empty()) {
    legend.push_back({"MoE all-to-all", "#c44e52"});
    legend.push_back({"MoE experts", "#dd8452"});
  } else if (!plan.moe.empty() && plan.parallel.empty()) {
    legend.push_back({"MoE layer (all-to-alls and experts)", "#c44e52"});
  }
  for (auto [name, color] : legend) {
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" "
                       "fill=\"{}\"/><text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                       legendX, legendY - 10, color, legendX + 16, legendY, name);
    legendX += 40 + 7.0 * std::strlen(name);
  }
  svg += "</svg>\n";
  return svg;
}

} // namespace zen::codegen
