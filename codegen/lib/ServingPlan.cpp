//===- ServingPlan.cpp - serving plans and their summary ------------------===//
#include "zen/Codegen/ServingPlan.h"

#include "zen/CostModel/Cluster.h"

#include <fmt/format.h>

#include <cmath>

namespace zen::codegen {
namespace {

using nlohmann::ordered_json;

ordered_json allReduceJson(const cost::AllReduceChoice &choice, int64_t tp) {
  ordered_json out = {{"bytes", choice.bytes}};
  if (tp <= 1) {
    out["kernel"] = "none";
    out["us"] = 0.0;
    return out;
  }
  out["kernel"] = cost::toString(choice.kernel);
  out["us"] = choice.us;
  out["nccl_us"] = choice.ncclUs;
  out["nccl_algorithm"] = choice.ncclAlgorithm;
  out["nccl_protocol"] = choice.ncclProtocol;
  // Peer-memory kernels need one NVLink node: left out where they cannot run.
  if (std::isfinite(choice.oneShotUs))
    out["one_shot_us"] = choice.oneShotUs;
  if (std::isfinite(choice.twoShotUs))
    out["two_shot_us"] = choice.twoShotUs;
  return out;
}

ordered_json candidateJson(const plan::ServingCandidate &c) {
  return {{"prefill", {{"tp", c.prefill.tp}, {"pp", c.prefill.pp}}},
          {"decode", {{"tp", c.decode.tp}, {"pp", c.decode.pp}}},
          {"disaggregated", c.disaggregated},
          {"max_batch", c.batch},
          {"ttft_us", c.ttftUs},
          {"tpot_us", c.tpotUs},
          {"tokens_per_s_per_gpu", c.tokensPerSPerGpu},
          {"meets_targets", c.meetsTargets}};
}

std::string megabytes(double bytes) { return fmt::format("{:.1f}", bytes / 1e6); }
std::string gigabytes(double bytes) { return fmt::format("{:.1f}", bytes / 1e9); }

std::string instanceText(const ordered_json &c) {
  auto shape = [](const ordered_json &p) {
    return fmt::format("tp {} x pp {}", p["tp"].get<int64_t>(), p["pp"].get<int64_t>());
  };
  if (c["disaggregated"].get<bool>())
    return "prefill " + shape(c["prefill"]) + ", decode " + shape(c["decode"]);
  return shape(c["decode"]);
}

std::string allReduceText(const ordered_json &a) {
  if (a["kernel"] == "none")
    return "none (tp 1)";
  std::string text = fmt::format("{} KB: {} {:.1f} us (NCCL {}/{} {:.1f} us", 
                                 fmt::format("{:.0f}", a["bytes"].get<double>() / 1e3),
                                 a["kernel"].get<std::string>(), a["us"].get<double>(),
                                 a["nccl_algorithm"].get<std::string>(),
                                 a["nccl_protocol"].get<std::string>(), a["nccl_us"].get<double>());
  if (a.contains("one_shot_us"))
    text += fmt::format(", one-shot {:.1f} us, two-shot {:.1f} us", a["one_shot_us"].get<double>(),
                        a["two_shot_us"].get<double>());
  return text + ")";
}

} // namespace

ordered_json inferenceJson(const plan::ServingDecision &decision, const cost::TransformerShape &shape,
                           const cost::ServingWorkload &workload, const ServingSettings &settings) {
  const plan::ServingCandidate &c = decision.chosen;
  ordered_json out;
  out["model"] = {{"family", shape.family},     {"layers", shape.layers}, {"hidden", shape.hidden},
                  {"heads", shape.heads},       {"kv_heads", shape.keyValueHeads()},
                  {"ffn", shape.ffn},           {"vocab", shape.vocab},   {"mlp", shape.mlp},
                  {"norm", shape.norm},         {"positions", shape.positions},
                  {"tied_embeddings", shape.tiedEmbeddings}, {"parameters", shape.totalParams()}};
  if (shape.moe) {
    // Every expert split over the tp ranks (cost::mlpUs).
    out["model"]["moe_blocks"] = shape.moeBlocks();
    out["model"]["experts"] = shape.moe->layer.experts;
    out["model"]["top_k"] = shape.moe->layer.topK;
    out["model"]["expert_ffn"] = shape.moe->layer.ffn;
  }
  out["prompt_tokens"] = workload.promptTokens;
  out["output_tokens"] = workload.outputTokens;
  out["precision"] = settings.precision;
  out["kv_dtype"] = settings.kvDtype;
  out["targets"] = {{"ttft_us", workload.ttftTargetUs}, {"tpot_us", workload.tpotTargetUs}};
  out["meets_targets"] = c.meetsTargets;
  out["disaggregated"] = c.disaggregated;
  out["prefill"] = {{"tp", c.prefill.tp}, {"pp", c.prefill.pp}, {"chunks", c.prefillPhase.chunks}};
  out["decode"] = {{"tp", c.decode.tp}, {"pp", c.decode.pp}};
  out["gpus_per_instance"] = c.gpus();
  out["max_batch"] = c.batch;
  out["max_sequence"] = workload.promptTokens + workload.outputTokens;
  out["kv_block_tokens"] = cost::kKvBlockTokens;
  out["kv_cache_blocks"] = c.kv.kvBlocks;
  out["kv_cache_bytes"] = c.kv.memory.kvCacheBytes;
  out["ttft_us"] = c.ttftUs;
  out["tpot_us"] = c.tpotUs;
  out["decode_step_us"] = c.decodePhase.totalUs();
  out["prefill_us"] = c.prefillPhase.totalUs();
  out["kv_transfer_us"] = c.kvTransferUs;
  out["tokens_per_s_per_gpu"] = c.tokensPerSPerGpu;
  out["allreduce"] = {{"prefill", allReduceJson(c.prefillPhase.allReduce, c.prefill.tp)},
                      {"decode", allReduceJson(c.decodePhase.allReduce, c.decode.tp)}};
  const cost::ServingMemory &m = c.kv.memory;
  out["memory"] = {{"per_gpu_bytes", m.usedBytes()},         {"capacity_bytes", m.capacityBytes},
                   {"weights_bytes", m.weightsBytes},        {"kv_cache_bytes", m.kvCacheBytes},
                   {"activations_bytes", m.activationsBytes}, {"buffers_bytes", m.buffersBytes},
                   {"reserve_bytes", m.reserveBytes}};
  ordered_json baselines = ordered_json::object();
  for (const auto &[name, baseline] : decision.baselines) {
    ordered_json b = candidateJson(baseline);
    b["rule"] = decision.baselineRules.at(name);
    baselines[name] = std::move(b);
  }
  out["baselines"] = std::move(baselines);
  if (!decision.baselinesNotRunning.empty())
    out["baselines_not_running"] = decision.baselinesNotRunning;
  out["configurations_scored"] = decision.configurationsScored;
  return out;
}

zenrt::Plan servingPlan(const plan::ServingDecision &decision, const ordered_json &inference,
                        const cost::CostModel &model, const std::string &modelName,
                        const std::string &modelHash) {
  const plan::ServingCandidate &c = decision.chosen;
  zenrt::Plan out;
  out.generator = {"zenopt", "0.1.0"};
  out.model = {modelName, modelHash};
  out.cluster.name = model.cluster().name;
  out.cluster.worldSize = c.gpus();
  out.cluster.spec = nlohmann::json::parse(cost::writeCluster(model.cluster())).dump();
  out.strategy = "serve";
  out.compressor = "none";
  out.computeDtype = inference["precision"].get<std::string>();
  // One decode step is the serving plan's iteration.
  out.predictions.iterationUs = c.tpotUs;
  out.predictions.computeUs = c.decodePhase.computeUs;
  out.predictions.exposedCommUs = c.decodePhase.allReduceUs + c.decodePhase.p2pUs;
  out.predictions.lowerBoundUs = c.decodePhase.computeUs;
  out.predictions.commBoundUs = c.decodePhase.allReduceUs + c.decodePhase.p2pUs;
  out.inference = inference.dump();
  return out;
}

ordered_json servingSummaryJson(const zenrt::Plan &plan, const ordered_json &inference) {
  ordered_json out = {{"model", plan.model.name},
                      {"cluster", plan.cluster.name},
                      {"world_size", plan.cluster.worldSize},
                      {"strategy", plan.strategy},
                      {"inference", inference},
                      {"baselines", inference["baselines"]}};
  ordered_json speedup = ordered_json::object();
  const double ours = inference["tokens_per_s_per_gpu"].get<double>();
  for (const auto &[name, b] : inference["baselines"].items())
    if (b["tokens_per_s_per_gpu"].get<double>() > 0)
      speedup[name] = ours / b["tokens_per_s_per_gpu"].get<double>();
  out["speedup_over"] = std::move(speedup);
  return out;
}

std::string servingSummaryText(const zenrt::Plan &plan, const ordered_json &inference) {
  const ordered_json &i = inference;
  const ordered_json &model = i["model"];
  std::string out = fmt::format(
      "zenopt serving plan for {} on {}: {}-token prompts, {} output tokens, {} weights, {} KV cache\n",
      plan.model.name, plan.cluster.name, i["prompt_tokens"].get<int64_t>(),
      i["output_tokens"].get<int64_t>(), i["precision"].get<std::string>(), i["kv_dtype"].get<std::string>());
  const std::string experts =
      model.contains("experts")
          ? fmt::format(", {} MoE blocks of {} experts (top {}, ffn {}) split over tp",
                        model["moe_blocks"].get<int64_t>(), model["experts"].get<int64_t>(),
                        model["top_k"].get<int64_t>(), model["expert_ffn"].get<int64_t>())
          : "";
  out += fmt::format("  transformer        {} blocks, hidden {}, {} heads ({} key/value), ffn {} {}{}, vocab {}\n",
                     model["layers"].get<int64_t>(), model["hidden"].get<int64_t>(),
                     model["heads"].get<int64_t>(), model["kv_heads"].get<int64_t>(),
                     model["ffn"].get<int64_t>(), model["mlp"].get<std::string>(), experts,
                     model["vocab"].get<int64_t>());
  auto target = [](double us) { return us > 0 ? fmt::format("{:.1f} ms", us / 1e3) : std::string("none"); };
  out += fmt::format("  targets            TTFT {}, TPOT {}: {}\n", target(i["targets"]["ttft_us"].get<double>()),
                     target(i["targets"]["tpot_us"].get<double>()),
                     i["meets_targets"].get<bool>() ? "met" : "NOT met by any configuration (the lowest TPOT shown)");
  out += fmt::format("  configuration      {}{}, {} GPUs an instance, batch up to {}\n", instanceText(i),
                     i["disaggregated"].get<bool>() ? " (disaggregated)" : " (prefill and decode colocated)",
                     i["gpus_per_instance"].get<int64_t>(), i["max_batch"].get<int64_t>());
  out += fmt::format("  predicted TTFT     {:10.3f} ms (prefill {:.3f} ms in {} chunk(s), KV hand-off {:.3f} ms)\n",
                     i["ttft_us"].get<double>() / 1e3, i["prefill_us"].get<double>() / 1e3,
                     i["prefill"]["chunks"].get<int64_t>(), i["kv_transfer_us"].get<double>() / 1e3);
  out += fmt::format("  predicted TPOT     {:10.3f} ms (decode step {:.3f} ms)\n", i["tpot_us"].get<double>() / 1e3,
                     i["decode_step_us"].get<double>() / 1e3);
  out += fmt::format("  throughput         {:.1f} tokens/s per GPU\n", i["tokens_per_s_per_gpu"].get<double>());
  const ordered_json &m = i["memory"];
  out += fmt::format("  memory per GPU     {} GB of {} GB: weights {}, KV cache {} ({} blocks of {} tokens), "
                     "activations {}, buffers {}, reserve {}\n",
                     gigabytes(m["per_gpu_bytes"].get<double>()), gigabytes(m["capacity_bytes"].get<double>()),
                     gigabytes(m["weights_bytes"].get<double>()), gigabytes(m["kv_cache_bytes"].get<double>()),
                     i["kv_cache_blocks"].get<int64_t>(), i["kv_block_tokens"].get<int64_t>(),
                     gigabytes(m["activations_bytes"].get<double>()), megabytes(m["buffers_bytes"].get<double>()) + " MB",
                     gigabytes(m["reserve_bytes"].get<double>()));
  out += "  all-reduce prefill " + allReduceText(i["allreduce"]["prefill"]) + "\n";
  out += "  all-reduce decode  " + allReduceText(i["allreduce"]["decode"]) + "\n";
  out += fmt::format("\n  {:<14}{:>16}{:>12}{:>12}  {:<50}  {}\n", "baseline", "tokens/s/GPU", "TTFT (ms)",
                     "TPOT (ms)", "configuration", "zenopt speedup");
  const double ours = i["tokens_per_s_per_gpu"].get<double>();
  for (const auto &[name, b] : i["baselines"].items()) {
    const double theirs = b["tokens_per_s_per_gpu"].get<double>();
    out += fmt::format("  {:<14}{:>16.1f}{:>12.3f}{:>12.3f}  {:<50}  {}\n", name, theirs,
                       b["ttft_us"].get<double>() / 1e3, b["tpot_us"].get<double>() / 1e3,
                       instanceText(b) + fmt::format(", batch {}", b["max_batch"].get<int64_t>()),
                       theirs > 0 ? fmt::format("{:.3f}x", ours / theirs) : std::string("-"));
  }
  for (const auto &[name, b] : i["baselines"].items())
    out += fmt::format("  {:<14}{}\n", name, b["rule"].get<std::string>());
  if (i.contains("baselines_not_running"))
    for (const auto &[name, why] : i["baselines_not_running"].items())
      out += fmt::format("  {:<14}does not run: {}\n", name, why.get<std::string>());
  return out;
}

} // namespace zen::codegen
