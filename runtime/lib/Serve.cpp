//===- Serve.cpp - executing serving plans on CPU ranks over MPI ----------===//
//
// zenrt/Serve.h: the Llama-style decoder, its tensor-parallel shard, the paged KV cache, the
// continuous-batching step loop and the unsharded reference. One Shard class computes both
// the engine's steps and the reference (tp = 1, every slice local); only the exchange of the
// slices' partials differs, and the partials are always added in global slice order.
//
//===----------------------------------------------------------------------===//
#include "zenrt/Serve.h"

#include "MpiSupport.h"
#include "zenrt/Runtime.h"
#include "zenrt/Timeout.h"
#include "zenrt/WatchedWaits.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

namespace zenrt::serve {
namespace {

using json = nlohmann::json;

[[noreturn]] void planError(const std::string &source, const std::string &path,
                            const std::string &what) {
  throw PlanError(zen::ErrorKind::BadInput, source + ": " + path + ": " + what);
}

Error invalid(const std::string &message) {
  return Error(ZENRT_ERR_INVALID_ARGUMENT, "serve: " + message);
}

//===-- deterministic weights ---------------------------------------------===//

/// SplitMix64, as the hybrid executor draws its weights: a weight is a function of (seed,
/// tensor name, element index in the unpartitioned tensor), so every partitioning draws the
/// same model.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t streamOf(uint64_t seed, const std::string &name) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (unsigned char c : name)
    hash = (hash ^ c) * 0x100000001B3ull;
  return mix(seed ^ hash);
}

/// Uniform in [-1, 1).
float uniformAt(uint64_t stream, uint64_t index) {
  return float(double(mix(stream + index) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

//===-- fixed-order arithmetic ---------------------------------------------===//

/// The one dot product of the engine and the reference: 8 strided accumulators, then a
/// fixed tree, then the tail in order. Its result depends only on a, b and n.
float dot(const float *a, const float *b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j)
      acc[j] += a[i + j] * b[i + j];
  float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i)
    sum += a[i] * b[i];
  return sum;
}

void rmsNorm(const float *x, const float *weight, int64_t n, double epsilon, float *out) {
  const float meanSquare = dot(x, x, n) / float(n);
  const float scale = 1.0f / std::sqrt(meanSquare + float(epsilon));
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] * scale * weight[i];
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

/// First index of slice s when `total` is cut into `slices` pieces.
int64_t sliceStart(int64_t total, int64_t slices, int64_t s) { return total * s / slices; }

//===-- the shard ----------------------------------------------------------===//

/// One token row of a step: the request it belongs to, its input token, its position, the
/// request's KV block table, and whether its next token is wanted.
struct Row {
  int64_t request = 0;
  int32_t token = 0;
  int64_t position = 0;
  const std::vector<int32_t> *blocks = nullptr;
  bool wantToken = false;
};

/// The best logit of a vocabulary range: the highest value, ties to the lowest id.
struct Best {
  float value;
  int32_t id;
};
bool better(const Best &a, const Best &b) { return a.value > b.value || (a.value == b.value && a.id < b.id); }

/// Rank `rank` of `tp`'s weights and KV cache pool, and the step's compute. `exchange`
/// all-gathers `bytes` bytes per rank from `send` into `receive` (rank order).
class Shard {
public:
  using Exchange = std::function<void(const void *send, void *receive, size_t bytes, const char *what)>;

  Shard(const Model &model, uint64_t seed, int64_t tp, int64_t rank, int64_t blocks,
        int64_t blockTokens)
      : m(model), tp(tp), rank(rank), blocks(blocks), blockTokens(blockTokens) {
    headDim = m.hidden / m.heads;
    groupHeads = m.heads / m.kvHeads;
    slices = m.kvHeads;
    localSlices = slices / tp;
    firstSlice = rank * localSlices;
    ffnFirst = sliceStart(m.ffn, slices, firstSlice);
    ffnLocal = sliceStart(m.ffn, slices, firstSlice + localSlices) - ffnFirst;
    vocabFirst = sliceStart(m.vocab, tp, rank);
    vocabLocal = sliceStart(m.vocab, tp, rank + 1) - vocabFirst;
    const int64_t H = m.hidden, D = headDim;
    const int64_t qRows = localSlices * groupHeads * D, kvRows = localSlices * D;

    auto draw = [&](const std::string &name, float scale, int64_t rowFirst, int64_t rows,
                    int64_t colFirst, int64_t cols, int64_t globalCols) {
      std::vector<float> out(static_cast<size_t>(rows * cols));
      const uint64_t stream = streamOf(seed, name);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          out[size_t(r * cols + c)] =
              scale * uniformAt(stream, uint64_t((rowFirst + r) * globalCols + colFirst + c));
      return out;
    };
    const float hScale = 1.0f / std::sqrt(float(H));
    embedding = draw("embedding", 1.0f, 0, m.vocab, 0, H, H);
    head = draw("head", hScale, vocabFirst, vocabLocal, 0, H, H);
    finalNorm.assign(static_cast<size_t>(H), 1.0f);
    layers.resize(static_cast<size_t>(m.layers));
    for (int64_t l = 0; l < m.layers; ++l) {
      Layer &layer = layers[size_t(l)];
      const std::string p = "layer" + std::to_string(l) + ".";
      layer.attentionNorm.assign(static_cast<size_t>(H), 1.0f);
      layer.mlpNorm.assign(static_cast<size_t>(H), 1.0f);
      // Query rows of the local groups' heads, key/value rows of the local kv heads.
      layer.wq = draw(p + "wq", hScale, firstSlice * groupHeads * D, qRows, 0, H, H);
      layer.wk = draw(p + "wk", hScale, firstSlice * D, kvRows, 0, H, H);
      layer.wv = draw(p + "wv", hScale, firstSlice * D, kvRows, 0, H, H);
      // Out-projection [H x heads*D]: the local groups' columns.
      layer.wo = draw(p + "wo", 1.0f / std::sqrt(float(m.heads * D)), 0, H,
                      firstSlice * groupHeads * D, qRows, m.heads * D);
      // SwiGLU: gate and up rows of the local ffn slices, down's matching columns.
      layer.w1 = draw(p + "w1", hScale, ffnFirst, ffnLocal, 0, H, H);
      layer.w3 = draw(p + "w3", hScale, ffnFirst, ffnLocal, 0, H, H);
      layer.w2 = draw(p + "w2", 1.0f / std::sqrt(float(m.ffn)), 0, H, ffnFirst, ffnLocal, m.ffn);
    }
    inverseFrequency.resize(static_cast<size_t>(D / 2));
    for (int64_t i = 0; i < D / 2; ++i)
      inverseFrequency[size_t(i)] = std::pow(m.ropeTheta, -2.0 * double(i) / double(D));
    // The pool: [layer][block][token][local kv head][D], keys and values; untouched pages
    // are not committed.
    const size_t poolFloats = size_t(m.layers * blocks * blockTokens * kvRows);
    keys.reset(new float[poolFloats]);
    values.reset(new float[poolFloats]);
  }

  int64_t vocabulary() const { return m.vocab; }

  /// Runs the rows (in order; rows of one request in position order) through the model and
  /// returns the next token of every row with wantToken, in row order.
  std::vector<int32_t> forward(const std::vector<Row> &rows, const Exchange &exchange) {
    const int64_t H = m.hidden, D = headDim, n = int64_t(rows.size());
    std::vector<float> x(static_cast<size_t>(n * H)), normed(static_cast<size_t>(H)), partials(static_cast<size_t>(n * localSlices * H));
    std::vector<float> gathered(static_cast<size_t>(tp * n * localSlices * H)), sum(static_cast<size_t>(H));
    for (int64_t i = 0; i < n; ++i) {
      const int32_t token = rows[size_t(i)].token;
      std::memcpy(&x[size_t(i * H)], &embedding[size_t(int64_t(token) * H)], size_t(H) * sizeof(float));
    }
    std::vector<float> q(static_cast<size_t>(localSlices * groupHeads * D)), attention(q.size()),
        hidden(static_cast<size_t>(ffnLocal)), scores;
    const size_t kvRow = size_t(localSlices * D);

    // Adds the slices' partials of every row in global slice order into x.
    auto reduceInto = [&](const char *what) {
      exchange(partials.data(), gathered.data(), partials.size() * sizeof(float), what);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t s = 0; s < slices; ++s) {
          const int64_t r = s / localSlices, local = s % localSlices;
          const float *part = &gathered[size_t(((r * n + i) * localSlices + local) * H)];
          if (s == 0)
            std::memcpy(sum.data(), part, size_t(H) * sizeof(float));
          else
            for (int64_t c = 0; c < H; ++c)
              sum[size_t(c)] += part[c];
        }
        float *row = &x[size_t(i * H)];
        for (int64_t c = 0; c < H; ++c)
          row[c] += sum[size_t(c)];
      }
    };

    for (int64_t l = 0; l < m.layers; ++l) {
      const Layer &layer = layers[size_t(l)];
      for (int64_t i = 0; i < n; ++i) {
        const Row &row = rows[size_t(i)];
        rmsNorm(&x[size_t(i * H)], layer.attentionNorm.data(), H, m.normEpsilon, normed.data());
        // This position's keys and values into the cache, rotated.
        const int64_t block = (*row.blocks)[size_t(row.position / blockTokens)];
        const size_t at = size_t(((l * blocks + block) * blockTokens + row.position % blockTokens)) * kvRow;
        for (int64_t k = 0; k < localSlices * D; ++k) {
          keys[at + size_t(k)] = dot(&layer.wk[size_t(k * H)], normed.data(), H);
          values[at + size_t(k)] = dot(&layer.wv[size_t(k * H)], normed.data(), H);
        }
        for (int64_t g = 0; g < localSlices; ++g)
          rotate(&keys[at + size_t(g * D)], row.position);
        for (int64_t k = 0; k < int64_t(q.size()); ++k)
          q[size_t(k)] = dot(&layer.wq[size_t(k * H)], normed.data(), H);
        // Causal attention of each local query head over positions 0..position.
        const float scale = 1.0f / std::sqrt(float(D));
        scores.resize(static_cast<size_t>(row.position + 1));
        for (int64_t h = 0; h < localSlices * groupHeads; ++h) {
          float *qh = &q[size_t(h * D)];
          rotate(qh, row.position);
          const int64_t g = h / groupHeads;
          float best = -INFINITY;
          for (int64_t t = 0; t <= row.position; ++t) {
            const size_t kt = cacheAt(l, row, t) + size_t(g * D);
            scores[size_t(t)] = dot(qh, &keys[kt], D) * scale;
            best = std::max(best, scores[size_t(t)]);
          }
          float total = 0;
          for (int64_t t = 0; t <= row.position; ++t) {
            scores[size_t(t)] = std::exp(scores[size_t(t)] - best);
            total += scores[size_t(t)];
          }
          float *out = &attention[size_t(h * D)];
          std::fill(out, out + D, 0.0f);
          for (int64_t t = 0; t <= row.position; ++t) {
            const float weight = scores[size_t(t)] / total;
            const float *vt = &values[cacheAt(l, row, t) + size_t(g * D)];
            for (int64_t d = 0; d < D; ++d)
              out[d] += weight * vt[d];
          }
        }
        // One partial of the out-projection per local kv-head group.
        const int64_t groupWidth = groupHeads * D, width = localSlices * groupWidth;
        for (int64_t g = 0; g < localSlices; ++g)
          for (int64_t c = 0; c < H; ++c)
            partials[size_t((i * localSlices + g) * H + c)] =
                dot(&layer.wo[size_t(c * width + g * groupWidth)], &attention[size_t(g * groupWidth)],
                    groupWidth);
      }
      reduceInto("attention out-projection");

      for (int64_t i = 0; i < n; ++i) {
        rmsNorm(&x[size_t(i * H)], layer.mlpNorm.data(), H, m.normEpsilon, normed.data());
        for (int64_t j = 0; j < ffnLocal; ++j)
          hidden[size_t(j)] = silu(dot(&layer.w1[size_t(j * H)], normed.data(), H)) *
                              dot(&layer.w3[size_t(j * H)], normed.data(), H);
        // One partial of the down-projection per local ffn slice.
        for (int64_t s = 0; s < localSlices; ++s) {
          const int64_t first = sliceStart(m.ffn, slices, firstSlice + s) - ffnFirst;
          const int64_t count = sliceStart(m.ffn, slices, firstSlice + s + 1) - ffnFirst - first;
          for (int64_t c = 0; c < H; ++c)
            partials[size_t((i * localSlices + s) * H + c)] =
                dot(&layer.w2[size_t(c * ffnLocal + first)], &hidden[size_t(first)], count);
        }
      }
      reduceInto("MLP down-projection");
    }

    // The head: each rank's best logit of its vocabulary rows, then the best over the ranks.
    std::vector<Best> local, all;
    for (int64_t i = 0; i < n; ++i) {
      if (!rows[size_t(i)].wantToken)
        continue;
      rmsNorm(&x[size_t(i * H)], finalNorm.data(), H, m.normEpsilon, normed.data());
      Best best{-INFINITY, int32_t(vocabFirst)};
      for (int64_t v = 0; v < vocabLocal; ++v) {
        const Best candidate{dot(&head[size_t(v * H)], normed.data(), H), int32_t(vocabFirst + v)};
        if (better(candidate, best))
          best = candidate;
      }
      local.push_back(best);
    }
    all.resize(local.size() * size_t(tp));
    exchange(local.data(), all.data(), local.size() * sizeof(Best), "head's argmax");
    std::vector<int32_t> next(local.size());
    for (size_t k = 0; k < local.size(); ++k) {
      Best best = all[k];
      for (int64_t r = 1; r < tp; ++r)
        if (better(all[size_t(r) * local.size() + k], best))
          best = all[size_t(r) * local.size() + k];
      next[k] = best.id;
    }
    return next;
  }

private:
  struct Layer {
    std::vector<float> attentionNorm, mlpNorm, wq, wk, wv, wo, w1, w2, w3;
  };

  size_t cacheAt(int64_t layer, const Row &row, int64_t position) const {
    const int64_t block = (*row.blocks)[size_t(position / blockTokens)];
    return size_t((layer * blocks + block) * blockTokens + position % blockTokens) *
           size_t(localSlices * headDim);
  }

  /// Rotary positions: pairs (i, i + D/2) turned by position x theta^(-2i/D).
  void rotate(float *v, int64_t position) const {
    const int64_t half = headDim / 2;
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(position) * inverseFrequency[size_t(i)];
      const float c = float(std::cos(angle)), s = float(std::sin(angle));
      const float a = v[i], b = v[i + half];
      v[i] = a * c - b * s;
      v[i + half] = a * s + b * c;
    }
  }

  Model m;
  int64_t tp, rank, blocks, blockTokens;
  int64_t headDim = 1, groupHeads = 1, slices = 1, localSlices = 1, firstSlice = 0;
  int64_t ffnFirst = 0, ffnLocal = 0, vocabFirst = 0, vocabLocal = 0;
  std::vector<float> embedding, head, finalNorm;
  std::vector<Layer> layers;
  std::vector<double> inverseFrequency;
  std::unique_ptr<float[]> keys, values;
};

void checkModel(const Model &m) {
  if (m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.kvHeads < 1 || m.ffn < 1 || m.vocab < 1)
    throw invalid("every model dimension must be at least 1");
  if (m.heads % m.kvHeads != 0 || m.hidden % m.heads != 0 || (m.hidden / m.heads) % 2 != 0)
    throw invalid("the heads must split into kv-head groups and the hidden size into heads of "
                  "even dimension");
  if (m.vocab > int64_t(INT32_MAX) || m.ffn < m.kvHeads)
    throw invalid("the vocabulary must fit int32 ids and the ffn must have a feature per kv head");
}

void checkPrompt(const Model &m, const std::vector<int32_t> &prompt, int64_t maxNewTokens) {
  if (prompt.empty())
    throw invalid("the prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || int64_t(prompt[i]) >= m.vocab)
      throw invalid("prompt token " + std::to_string(i) + " is " + std::to_string(prompt[i]) +
                    ", outside the vocabulary [0, " + std::to_string(m.vocab) + ")");
  if (maxNewTokens < 1)
    throw invalid("max new tokens is " + std::to_string(maxNewTokens) + ", must be at least 1");
}

int64_t blocksFor(int64_t tokens, int64_t blockTokens) {
  return (tokens + blockTokens - 1) / blockTokens;
}

} // namespace

//===-- configOf ------------------------------------------------------------===//

Config configOf(const Plan &plan, const std::string &source) {
  if (plan.inference.empty())
    planError(source, "/inference", "missing: not a serving plan (zenopt --serve writes one)");
  const json root = json::parse(plan.inference);
  auto node = [&](const json &object, const std::string &path, const char *key) -> const json & {
    auto it = object.find(key);
    if (it == object.end())
      planError(source, path + "/" + key, "missing field");
    return *it;
  };
  auto integer = [&](const json &object, const std::string &path, const char *key, int64_t least) {
    const json &value = node(object, path, key);
    if (!value.is_number_integer())
      planError(source, path + "/" + key, "must be an integer");
    const int64_t v = value.get<int64_t>();
    if (v < least)
      planError(source, path + "/" + key, "must be >= " + std::to_string(least) + ", is " + std::to_string(v));
    return v;
  };
  auto object = [&](const json &parent, const std::string &path, const char *key) -> const json & {
    const json &value = node(parent, path, key);
    if (!value.is_object())
      planError(source, path + "/" + key, "must be an object");
    return value;
  };
  auto spelling = [&](const json &parent, const std::string &path, const char *key,
                      const char *wanted, const char *what) {
    const json &value = node(parent, path, key);
    if (!value.is_string())
      planError(source, path + "/" + key, "must be a string");
    if (value.get<std::string>() != wanted)
      planError(source, path + "/" + key,
                "'" + value.get<std::string>() + "': the serving engine runs " + what + " only");
  };

  Config config;
  const std::string in = "/inference", mp = in + "/model";
  const json &model = object(root, in, "model");
  spelling(model, mp, "family", "llama", "the llama family");
  spelling(model, mp, "mlp", "swiglu", "a SwiGLU MLP (swiglu)");
  spelling(model, mp, "norm", "rmsnorm", "RMSNorm (rmsnorm)");
  spelling(model, mp, "positions", "rotary", "rotary positions (rotary)");
  Model &m = config.model;
  m.layers = integer(model, mp, "layers", 1);
  m.hidden = integer(model, mp, "hidden", 1);
  m.heads = integer(model, mp, "heads", 1);
  m.kvHeads = integer(model, mp, "kv_heads", 1);
  m.ffn = integer(model, mp, "ffn", 1);
  m.vocab = integer(model, mp, "vocab", 2);
  if (m.vocab > int64_t(INT32_MAX))
    planError(source, mp + "/vocab", "must fit 32-bit token ids");
  if (m.heads % m.kvHeads != 0)
    planError(source, mp + "/kv_heads", std::to_string(m.kvHeads) + " do not divide the " +
                                            std::to_string(m.heads) + " heads");
  if (m.hidden % m.heads != 0 || (m.hidden / m.heads) % 2 != 0)
    planError(source, mp + "/heads", std::to_string(m.heads) + " heads do not split hidden " +
                                         std::to_string(m.hidden) +
                                         " into heads of even dimension (rotary positions)");
  if (m.ffn < m.kvHeads)
    planError(source, mp + "/ffn", "must be at least kv_heads (" + std::to_string(m.kvHeads) + ")");

  const json &decode = object(root, in, "decode");
  const json &prefill = object(root, in, "prefill");
  config.tp = integer(decode, in + "/decode", "tp", 1);
  config.pp = integer(decode, in + "/decode", "pp", 1);
  const int64_t prefillTp = integer(prefill, in + "/prefill", "tp", 1),
                prefillPp = integer(prefill, in + "/prefill", "pp", 1);
  if (prefillTp != config.tp || prefillPp != config.pp)
    planError(source, in + "/prefill",
              "tp " + std::to_string(prefillTp) + " x pp " + std::to_string(prefillPp) +
                  " differs from decode's tp " + std::to_string(config.tp) + " x pp " +
                  std::to_string(config.pp) +
                  ": disaggregated prefill is not executed by the serving engine");
  if (config.pp != 1)
    planError(source, in + "/decode/pp",
              "is " + std::to_string(config.pp) +
                  ": the serving engine runs tensor parallelism only (pp = 1)");
  if (m.kvHeads % config.tp != 0)
    planError(source, in + "/decode/tp",
              std::to_string(config.tp) + " does not divide the " + std::to_string(m.kvHeads) +
                  " kv heads (each rank holds whole kv-head groups)");
  config.maxBatch = integer(root, in, "max_batch", 1);
  config.maxSequence = integer(root, in, "max_sequence", 2);
  config.kvBlockTokens = integer(root, in, "kv_block_tokens", 1);
  config.kvCacheBlocks = integer(root, in, "kv_cache_blocks", 1);
  if (config.kvCacheBlocks < blocksFor(config.maxSequence, config.kvBlockTokens))
    planError(source, in + "/kv_cache_blocks",
              std::to_string(config.kvCacheBlocks) + " blocks of " +
                  std::to_string(config.kvBlockTokens) + " tokens do not hold one request of " +
                  std::to_string(config.maxSequence) + " tokens (max_sequence)");
  if (plan.cluster.worldSize != config.tp * config.pp)
    planError(source, "/cluster/world_size",
              std::to_string(plan.cluster.worldSize) + " ranks, but decode runs on tp " +
                  std::to_string(config.tp) + " x pp " + std::to_string(config.pp));
  return config;
}

//===-- the reference --------------------------------------------------------===//

std::vector<int32_t> referenceDecode(const Model &model, uint64_t seed,
                                     const std::vector<int32_t> &prompt, int64_t maxNewTokens) {
  checkModel(model);
  checkPrompt(model, prompt, maxNewTokens);
  const int64_t blockTokens = 16, total = int64_t(prompt.size()) + maxNewTokens;
  const int64_t blocks = blocksFor(total, blockTokens);
  Shard shard(model, seed, 1, 0, blocks, blockTokens);
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b)
    table[size_t(b)] = int32_t(b);
  auto local = [](const void *send, void *receive, size_t bytes, const char *) {
    if (bytes)
      std::memcpy(receive, send, bytes);
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < prompt.size(); ++i)
    rows.push_back(Row{0, prompt[i], int64_t(i), &table, i + 1 == prompt.size()});
  std::vector<int32_t> generated;
  int64_t position = int64_t(prompt.size());
  while (true) {
    const int32_t next = shard.forward(rows, local).at(0);
    generated.push_back(next);
    if (int64_t(generated.size()) == maxNewTokens)
      return generated;
    rows = {Row{0, next, position++, &table, true}};
  }
}

//===-- the engine -------------------------------------------------------------===//

namespace {

using Clock = std::chrono::steady_clock;

struct Request {
  int64_t id = 0;
  std::vector<int32_t> prompt;
  int64_t maxNew = 0;
  std::function<void(int32_t)> onToken;
  std::promise<Result> promise;
  Clock::time_point submitted, first, last;
  std::vector<int32_t> blocks;
  Result result;
  bool prefilled = false;
};

/// Step message (int64 words): [stop, admitted count, (id, block count, blocks...)...,
/// freed count, ids..., row count, (id, token, position, wantToken)...].
enum : int64_t { kRun = 0, kStop = 1 };

} // namespace

struct Engine::Impl {
  Config config;
  Options options;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  double timeout = 300;
  std::unique_ptr<WatchedWaits> waits;
  std::unique_ptr<Shard> shard;
  int64_t step = 0;

  // Rank 0's scheduler state, under `mutex`.
  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::unique_ptr<Request>> waiting;
  std::vector<std::unique_ptr<Request>> running;
  std::vector<int32_t> freeBlocks;  // ascending: the lowest ids go first
  int64_t nextId = 1;
  bool stopping = false;
  std::exception_ptr failure;
  Stats stats;

  // Every rank: the block tables of the running requests.
  std::map<int64_t, std::vector<int32_t>> tables;

  void wait(MPI_Request &request, const std::string &what) {
    auto done = [&] {
      int finished = 0;
      detail::checkMpi(MPI_Test(&request, &finished, MPI_STATUS_IGNORE), "MPI_Test");
      return finished != 0;
    };
    auto describe = [&] { return "serving step " + std::to_string(step) + ": " + what; };
    if (waits)
      waits->await(done, describe);
    else
      detail::waitWatched(done, timeout, rank, describe, nullptr);
  }

  void exchange(const void *send, void *receive, size_t bytes, const char *what) {
    if (size == 1) {
      if (bytes)
        std::memcpy(receive, send, bytes);
      return;
    }
    if (bytes > size_t(INT32_MAX))
      throw Error(ZENRT_ERR_INVALID_ARGUMENT, "serve: a step's exchange exceeds 2^31 bytes");
    MPI_Request request = MPI_REQUEST_NULL;
    detail::checkMpi(MPI_Iallgather(send, int(bytes), MPI_BYTE, receive, int(bytes), MPI_BYTE, comm,
                                    &request),
                     "MPI_Iallgather");
    wait(request, what);
  }

  void broadcast(std::vector<int64_t> &message) {
    if (size == 1)
      return;
    int64_t length = int64_t(message.size());
    MPI_Request request = MPI_REQUEST_NULL;
    detail::checkMpi(MPI_Ibcast(&length, 1, MPI_INT64_T, 0, comm, &request), "MPI_Ibcast");
    wait(request, "step broadcast");
    message.resize(static_cast<size_t>(length));
    if (length > int64_t(INT32_MAX))
      throw Error(ZENRT_ERR_INTERNAL, "serve: a step message exceeds 2^31 words");
    detail::checkMpi(MPI_Ibcast(message.data(), int(length), MPI_INT64_T, 0, comm, &request),
                     "MPI_Ibcast");
    wait(request, "step broadcast");
  }

  /// Applies a step message on any rank and computes it; the next tokens of the rows that
  /// want one.
  std::vector<int32_t> compute(const std::vector<int64_t> &message, bool &stop) {
    size_t at = 0;
    auto next = [&] {
      if (at >= message.size())
        throw Error(ZENRT_ERR_INTERNAL, "serve: a truncated step message");
      return message[at++];
    };
    stop = next() == kStop;
    for (int64_t admitted = next(); admitted > 0; --admitted) {
      const int64_t id = next();
      std::vector<int32_t> blocks(static_cast<size_t>(next()));
      for (auto &block : blocks)
        block = int32_t(next());
      tables[id] = std::move(blocks);
    }
    for (int64_t freed = next(); freed > 0; --freed)
      tables.erase(next());
    std::vector<Row> rows(static_cast<size_t>(next()));
    for (Row &row : rows) {
      row.request = next();
      row.token = int32_t(next());
      row.position = next();
      row.wantToken = next() != 0;
      auto table = tables.find(row.request);
      if (table == tables.end())
        throw Error(ZENRT_ERR_INTERNAL, "serve: a step row of an unknown request");
      row.blocks = &table->second;
    }
    if (rows.empty())
      return {};
    ++step;
    return shard->forward(rows, [this](const void *send, void *receive, size_t bytes,
                                       const char *what) { exchange(send, receive, bytes, what); });
  }

  void runWorker() {
    std::vector<int64_t> message;
    bool stop = false;
    while (!stop) {
      broadcast(message);
      compute(message, stop);
    }
  }

  /// Rank 0: admits, builds and broadcasts each step, computes it and delivers the tokens.
  void runScheduler() {
    std::vector<int64_t> freed;  // finished last step: the other ranks drop their tables
    while (true) {
      std::vector<int64_t> message{kRun, 0};
      std::vector<Request *> admitted;
      bool stop = false;
      int64_t stepRows = 0;
      {
        std::unique_lock<std::mutex> lock(mutex);
        auto admit = [&] {
          while (!waiting.empty() && int64_t(running.size()) < config.maxBatch) {
            Request &request = *waiting.front();
            const int64_t need = blocksFor(int64_t(request.prompt.size()) + request.maxNew,
                                           config.kvBlockTokens);
            if (need > int64_t(freeBlocks.size()))
              break;  // first come, first served: later requests wait behind it
            request.blocks.assign(freeBlocks.begin(), freeBlocks.begin() + need);
            freeBlocks.erase(freeBlocks.begin(), freeBlocks.begin() + need);
            admitted.push_back(&request);
            running.push_back(std::move(waiting.front()));
            waiting.pop_front();
          }
        };
        admit();
        if (running.empty()) {
          if (stopping)
            stop = true;
          else {
            wake.wait_for(lock, std::chrono::duration<double>(options.idleHeartbeatSeconds),
                          [&] { return stopping || !waiting.empty(); });
            admit();
            if (running.empty() && stopping)
              stop = true;
          }
        }
        if (stop)
          message[0] = kStop;
        message[1] = int64_t(admitted.size());
        for (Request *request : admitted) {
          message.push_back(request->id);
          message.push_back(int64_t(request->blocks.size()));
          message.insert(message.end(), request->blocks.begin(), request->blocks.end());
        }
        message.push_back(int64_t(freed.size()));
        message.insert(message.end(), freed.begin(), freed.end());
        freed.clear();
        // Rows: every prompt token of the newly admitted, the last token of the others.
        std::vector<int64_t> rows;
        int64_t count = 0;
        for (auto &request : running) {
          if (!request->prefilled) {
            const int64_t n = int64_t(request->prompt.size());
            for (int64_t i = 0; i < n; ++i)
              rows.insert(rows.end(), {request->id, request->prompt[size_t(i)], i, i + 1 == n});
            count += n;
          } else {
            const int64_t position =
                int64_t(request->prompt.size() + request->result.tokens.size()) - 1;
            rows.insert(rows.end(), {request->id, request->result.tokens.back(), position, 1});
            ++count;
          }
        }
        message.push_back(count);
        stepRows = count;
        message.insert(message.end(), rows.begin(), rows.end());
      }
      broadcast(message);
      bool ignored = false;
      const std::vector<int32_t> tokens = compute(message, ignored);
      if (stop)
        return;
      if (tokens.empty())
        continue;
      const auto now = Clock::now();
      // running's order is the rows' order, and it changes only on this thread.
      std::vector<Request *> stepRequests;
      std::vector<std::unique_ptr<Request>> finished;
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++stats.steps;
        stats.rows += stepRows;
        for (size_t k = 0; k < running.size(); ++k) {
          Request &request = *running[k];
          stepRequests.push_back(&request);
          request.prefilled = true;
          request.result.tokens.push_back(tokens.at(k));
          if (request.result.tokens.size() == 1)
            request.first = now;
          request.last = now;
          ++stats.generatedTokens;
        }
        for (size_t k = 0; k < running.size();) {
          Request &request = *running[k];
          if (int64_t(request.result.tokens.size()) == request.maxNew) {
            freeBlocks.insert(freeBlocks.end(), request.blocks.begin(), request.blocks.end());
            freed.push_back(request.id);
            finished.push_back(std::move(running[k]));
            running.erase(running.begin() + std::ptrdiff_t(k));
          } else {
            ++k;
          }
        }
        std::sort(freeBlocks.begin(), freeBlocks.end());
      }
      // Callbacks and results outside the lock, in the step's order (a callback that
      // throws loses its own notification only).
      for (Request *request : stepRequests)
        if (request->onToken) {
          try {
            request->onToken(request->result.tokens.back());
          } catch (...) {
          }
        }
      for (auto &request : finished) {
        Result &result = request->result;
        using Us = std::chrono::duration<double, std::micro>;
        result.ttftUs = Us(request->first - request->submitted).count();
        result.tpotUs = result.tokens.size() > 1
                            ? Us(request->last - request->first).count() / double(result.tokens.size() - 1)
                            : 0.0;
        request->promise.set_value(std::move(result));
      }
    }
  }

  void failPending(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mutex);
    failure = error;
    for (auto &request : running)
      request->promise.set_exception(error);
    for (auto &request : waiting)
      request->promise.set_exception(error);
    running.clear();
    waiting.clear();
  }
};

Engine::Engine(const Config &config, const Options &options, const void *comm)
    : impl(std::make_unique<Impl>()) {
  Impl &e = *impl;
  e.config = config;
  e.options = options;
  checkModel(config.model);
  if (config.tp < 1 || config.pp != 1 || config.model.kvHeads % config.tp != 0)
    throw invalid("tp must divide the kv heads and pp must be 1");
  if (config.maxBatch < 1 || config.maxSequence < 2 || config.kvBlockTokens < 1 ||
      config.kvCacheBlocks < blocksFor(config.maxSequence, config.kvBlockTokens))
    throw invalid("max_batch, max_sequence, kv_block_tokens must be positive and the KV cache "
                  "must hold a request of max_sequence tokens");
  if (config.kvCacheBlocks > int64_t(INT32_MAX))
    throw invalid("too many KV cache blocks");
  if (!(options.idleHeartbeatSeconds > 0))
    throw invalid("the idle heartbeat must be positive");
  std::string error;
  e.timeout = resolveTimeoutSeconds(options.timeoutSeconds, error);
  if (!error.empty())
    throw invalid(error);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    throw Error(ZENRT_ERR_STATE, "serve: MPI is not initialised");
  const MPI_Comm base = comm ? *static_cast<const MPI_Comm *>(comm) : MPI_COMM_WORLD;
  detail::checkMpi(MPI_Comm_dup(base, &e.comm), "MPI_Comm_dup");
  detail::checkMpi(MPI_Comm_rank(e.comm, &e.rank), "MPI_Comm_rank");
  detail::checkMpi(MPI_Comm_size(e.comm, &e.size), "MPI_Comm_size");
  if (e.size != config.tp * config.pp) {
    MPI_Comm_free(&e.comm);
    throw Error(ZENRT_ERR_MISMATCH, "serve: rank " + std::to_string(e.rank) + ": the plan runs on tp " +
                                        std::to_string(config.tp) + " x pp " +
                                        std::to_string(config.pp) + " ranks, the job has " +
                                        std::to_string(e.size));
  }
  if (e.size > 1)
    e.waits = std::make_unique<WatchedWaits>(&e.comm, e.timeout);
  // Every rank must run the same model with the same weights.
  const Model &m = config.model;
  const uint64_t words[] = {uint64_t(m.layers), uint64_t(m.hidden), uint64_t(m.heads),
                            uint64_t(m.kvHeads), uint64_t(m.ffn), uint64_t(m.vocab),
                            uint64_t(config.tp), uint64_t(config.maxBatch),
                            uint64_t(config.maxSequence), uint64_t(config.kvBlockTokens),
                            uint64_t(config.kvCacheBlocks), options.seed};
  uint64_t hash = 0xCBF29CE484222325ull;
  for (uint64_t word : words)
    hash = mix(hash ^ word);
  std::vector<uint64_t> hashes(static_cast<size_t>(e.size));
  e.exchange(&hash, hashes.data(), sizeof hash, "configuration agreement");
  for (int r = 0; r < e.size; ++r)
    if (hashes[size_t(r)] != hash)
      throw Error(ZENRT_ERR_MISMATCH, "serve: rank " + std::to_string(e.rank) + " and rank " +
                                          std::to_string(r) +
                                          " were given different models, limits or seeds");
  e.shard = std::make_unique<Shard>(m, options.seed, config.tp, e.rank, config.kvCacheBlocks,
                                    config.kvBlockTokens);
  for (int64_t b = 0; b < config.kvCacheBlocks; ++b)
    e.freeBlocks.push_back(int32_t(b));
  e.stats.freeBlocks = config.kvCacheBlocks;
}

Engine::~Engine() {
  if (impl && impl->comm != MPI_COMM_NULL) {
    impl->waits.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      MPI_Comm_free(&impl->comm);
  }
}

std::future<Result> Engine::submit(std::vector<int32_t> prompt, int64_t maxNewTokens,
                                   std::function<void(int32_t)> onToken) {
  Impl &e = *impl;
  if (e.rank != 0)
    throw Error(ZENRT_ERR_STATE, "serve: requests are submitted on rank 0 only");
  checkPrompt(e.config.model, prompt, maxNewTokens);
  const int64_t total = int64_t(prompt.size()) + maxNewTokens;
  if (total > e.config.maxSequence)
    throw invalid("prompt (" + std::to_string(prompt.size()) + " tokens) + max new tokens (" +
                  std::to_string(maxNewTokens) + ") = " + std::to_string(total) +
                  " exceeds max_sequence " + std::to_string(e.config.maxSequence));
  auto request = std::make_unique<Request>();
  request->prompt = std::move(prompt);
  request->maxNew = maxNewTokens;
  request->onToken = std::move(onToken);
  request->submitted = Clock::now();
  std::future<Result> future = request->promise.get_future();
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    if (e.failure)
      throw Error(ZENRT_ERR_STATE, "serve: the engine failed; it takes no more requests");
    if (e.stopping)
      throw Error(ZENRT_ERR_STATE, "serve: the engine is shutting down");
    request->id = e.nextId++;
    ++e.stats.requests;
    e.waiting.push_back(std::move(request));
  }
  e.wake.notify_all();
  return future;
}

void Engine::run() {
  Impl &e = *impl;
  if (e.rank != 0) {
    e.runWorker();
    return;
  }
  try {
    e.runScheduler();
  } catch (...) {
    e.failPending(std::current_exception());
    throw;
  }
}

void Engine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    impl->stopping = true;
  }
  impl->wake.notify_all();
}

int Engine::rank() const { return impl->rank; }
int Engine::size() const { return impl->size; }
const Config &Engine::config() const { return impl->config; }

Engine::Stats Engine::stats() const {
  std::lock_guard<std::mutex> lock(impl->mutex);
  Stats stats = impl->stats;
  stats.waiting = int64_t(impl->waiting.size());
  stats.running = int64_t(impl->running.size());
  stats.freeBlocks = int64_t(impl->freeBlocks.size());
  return stats;
}

} // namespace zenrt::serve
