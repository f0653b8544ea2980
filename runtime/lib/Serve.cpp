//===- Serve.cpp - executing serving plans on CPU ranks over MPI ----------===//
//
// zenrt/Serve.h: the Llama-style decoder, its tensor-parallel shard, the paged KV cache, the
// continuous-batching step loop and the unsharded reference. One Shard class computes both
// the engine's steps and the reference (tp = 1, every slice local); only the exchange of the
// slices' partials differs, and the partials are always added in global slice order.
//
//===----------------------------------------------------------------------===//
#include "zenrt/Serve.h"

#include "Deterministic.h"

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
#include <thread>

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

// Weights as the hybrid executor draws them (Deterministic.h).
using detail::splitMix64;
using detail::streamOf;
using detail::uniformAt;

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

/// Y[i][j] = dot(W row j, X row i) for rows i < rows, j < outs: every entry is dot() of
/// its row alone (W's row stays in cache while it meets every X row).
void project(const float *w, int64_t outs, int64_t in, const float *x, int64_t rows, int64_t ldx,
             float *y, int64_t ldy) {
  for (int64_t j = 0; j < outs; ++j)
    for (int64_t i = 0; i < rows; ++i)
      y[i * ldy + j] = dot(w + j * in, x + i * ldx, in);
}

/// Rank `rank` of `tp` in pipeline stage `stage`'s weights (layers [firstLayer, firstLayer +
/// layerCount); the embedding on the first stage, the head on the last) and KV cache pool,
/// and the stage's compute. `exchange` all-gathers `bytes` bytes per tensor-parallel rank
/// from `send` into `receive` (rank order).
class Shard {
public:
  using Exchange = std::function<void(const void *send, void *receive, size_t bytes, const char *what)>;

  Shard(const Model &model, uint64_t seed, int64_t tp, int64_t rank, int64_t firstLayer,
        int64_t layerCount, bool embeds, bool hasHead, int64_t blocks, int64_t blockTokens)
      : m(model), tp(tp), rank(rank), firstLayer(firstLayer), blocks(blocks),
        blockTokens(blockTokens) {
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
    if (embeds)
      embedding = draw("embedding", 1.0f, 0, m.vocab, 0, H, H);
    if (hasHead) {
      head = m.tiedEmbeddings ? draw("embedding", 1.0f, vocabFirst, vocabLocal, 0, H, H)
                              : draw("head", hScale, vocabFirst, vocabLocal, 0, H, H);
      finalNorm.assign(static_cast<size_t>(H), 1.0f);
    }
    layers.resize(size_t(layerCount));
    for (int64_t k = 0; k < layerCount; ++k) {
      Layer &layer = layers[size_t(k)];
      const std::string p = "layer" + std::to_string(firstLayer + k) + ".";
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
    inverseFrequency.resize(size_t(D / 2));
    for (int64_t i = 0; i < D / 2; ++i)
      inverseFrequency[size_t(i)] = std::pow(m.ropeTheta, -2.0 * double(i) / double(D));
    // The pool: [layer][block][token][local kv head][D], keys and values; untouched pages
    // are not committed.
    const size_t poolFloats = size_t(layerCount * blocks * blockTokens * kvRows);
    keys.reset(new float[poolFloats]);
    values.reset(new float[poolFloats]);
  }

  /// The rows' input tokens' embeddings into x [rows x hidden] (first stage).
  void embed(const std::vector<Row> &rows, std::vector<float> &x) const {
    const int64_t H = m.hidden;
    x.resize(rows.size() * size_t(H));
    for (size_t i = 0; i < rows.size(); ++i)
      std::memcpy(&x[i * size_t(H)], &embedding[size_t(int64_t(rows[i].token) * H)],
                  size_t(H) * sizeof(float));
  }

  /// Runs the rows (rows of one request in position order) through this stage's layers,
  /// x [rows x hidden] in place, writing their keys and values into the cache.
  void forward(const std::vector<Row> &rows, std::vector<float> &x, const Exchange &exchange) {
    const int64_t H = m.hidden, D = headDim, n = int64_t(rows.size());
    const int64_t groupWidth = groupHeads * D, width = localSlices * groupWidth, kvWidth = localSlices * D;
    std::vector<float> normed(static_cast<size_t>(n * H)), partials(static_cast<size_t>(n * localSlices * H));
    std::vector<float> gathered(static_cast<size_t>(tp * n * localSlices * H)), sum(static_cast<size_t>(H));
    std::vector<float> q(static_cast<size_t>(n * width)), k(static_cast<size_t>(n * kvWidth)),
        v(static_cast<size_t>(n * kvWidth)), attention(static_cast<size_t>(n * width)),
        gate(static_cast<size_t>(n * ffnLocal)), up(static_cast<size_t>(n * ffnLocal)), scores;

    // Adds the slices' partials of every row in global slice order into x.
    auto reduceInto = [&](const char *what) {
      exchange(partials.data(), gathered.data(), partials.size() * sizeof(float), what);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t s = 0; s < slices; ++s) {
          const int64_t r = s / localSlices, local = s % localSlices;
          const float *part = &gathered[size_t(((r * n + i) * localSlices + local) * H)];
          if (s == 0)
            std::memcpy(sum.data(), part, static_cast<size_t>(H) * sizeof(float));
          else
            for (int64_t c = 0; c < H; ++c)
              sum[size_t(c)] += part[c];
        }
        float *row = &x[size_t(i * H)];
        for (int64_t c = 0; c < H; ++c)
          row[c] += sum[size_t(c)];
      }
    };

    for (int64_t l = 0; l < int64_t(layers.size()); ++l) {
      const Layer &layer = layers[size_t(l)];
      for (int64_t i = 0; i < n; ++i)
        rmsNorm(&x[size_t(i * H)], layer.attentionNorm.data(), H, m.normEpsilon, &normed[size_t(i * H)]);
      project(layer.wq.data(), width, H, normed.data(), n, H, q.data(), width);
      project(layer.wk.data(), kvWidth, H, normed.data(), n, H, k.data(), kvWidth);
      project(layer.wv.data(), kvWidth, H, normed.data(), n, H, v.data(), kvWidth);
      // Every row's keys and values into the cache, rotated, before any row attends: a row
      // reads only positions up to its own, written by now.
      for (int64_t i = 0; i < n; ++i) {
        const Row &row = rows[size_t(i)];
        for (int64_t g = 0; g < localSlices; ++g)
          rotate(&k[size_t(i * kvWidth + g * D)], row.position);
        const size_t at = cacheAt(l, row, row.position);
        std::memcpy(&keys[at], &k[size_t(i * kvWidth)], size_t(kvWidth) * sizeof(float));
        std::memcpy(&values[at], &v[size_t(i * kvWidth)], size_t(kvWidth) * sizeof(float));
      }
      // Causal attention of each local query head over positions 0..position.
      const float scale = 1.0f / std::sqrt(float(D));
      for (int64_t i = 0; i < n; ++i) {
        const Row &row = rows[size_t(i)];
        scores.resize(size_t(row.position + 1));
        for (int64_t h = 0; h < localSlices * groupHeads; ++h) {
          float *qh = &q[size_t(i * width + h * D)];
          rotate(qh, row.position);
          const int64_t g = h / groupHeads;
          float best = -INFINITY;
          for (int64_t t = 0; t <= row.position; ++t) {
            scores[size_t(t)] = dot(qh, &keys[cacheAt(l, row, t) + size_t(g * D)], D) * scale;
            best = std::max(best, scores[size_t(t)]);
          }
          float total = 0;
          for (int64_t t = 0; t <= row.position; ++t) {
            scores[size_t(t)] = std::exp(scores[size_t(t)] - best);
            total += scores[size_t(t)];
          }
          float *out = &attention[size_t(i * width + h * D)];
          std::fill(out, out + D, 0.0f);
          for (int64_t t = 0; t <= row.position; ++t) {
            const float weight = scores[size_t(t)] / total;
            const float *vt = &values[cacheAt(l, row, t) + size_t(g * D)];
            for (int64_t d = 0; d < D; ++d)
              out[d] += weight * vt[d];
          }
        }
      }
      // One partial of the out-projection per local kv-head group.
      for (int64_t g = 0; g < localSlices; ++g)
        for (int64_t c = 0; c < H; ++c) {
          const float *w = &layer.wo[size_t(c * width + g * groupWidth)];
          for (int64_t i = 0; i < n; ++i)
            partials[size_t((i * localSlices + g) * H + c)] =
                dot(w, &attention[size_t(i * width + g * groupWidth)], groupWidth);
        }
      reduceInto("attention out-projection");

      for (int64_t i = 0; i < n; ++i)
        rmsNorm(&x[size_t(i * H)], layer.mlpNorm.data(), H, m.normEpsilon, &normed[size_t(i * H)]);
      project(layer.w1.data(), ffnLocal, H, normed.data(), n, H, gate.data(), ffnLocal);
      project(layer.w3.data(), ffnLocal, H, normed.data(), n, H, up.data(), ffnLocal);
      for (size_t j = 0; j < gate.size(); ++j)
        gate[j] = silu(gate[j]) * up[j];
      // One partial of the down-projection per local ffn slice.
      for (int64_t s = 0; s < localSlices; ++s) {
        const int64_t first = sliceStart(m.ffn, slices, firstSlice + s) - ffnFirst;
        const int64_t count = sliceStart(m.ffn, slices, firstSlice + s + 1) - ffnFirst - first;
        for (int64_t c = 0; c < H; ++c) {
          const float *w = &layer.w2[size_t(c * ffnLocal + first)];
          for (int64_t i = 0; i < n; ++i)
            partials[size_t((i * localSlices + s) * H + c)] =
                dot(w, &gate[size_t(i * ffnLocal + first)], count);
        }
      }
      reduceInto("MLP down-projection");
    }
  }

  /// The head (last stage): this rank's best logit of its vocabulary rows for every row with
  /// wantToken, then the best over the tensor-parallel ranks: the next tokens, in row order.
  std::vector<Best> next(const std::vector<Row> &rows, const std::vector<float> &x,
                         const Exchange &exchange) const {
    const int64_t H = m.hidden;
    std::vector<float> normed(static_cast<size_t>(H));
    std::vector<Best> local, all;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!rows[i].wantToken)
        continue;
      rmsNorm(&x[i * size_t(H)], finalNorm.data(), H, m.normEpsilon, normed.data());
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
    std::vector<Best> tokens(local.size());
    for (size_t k = 0; k < local.size(); ++k) {
      Best best = all[k];
      for (int64_t r = 1; r < tp; ++r)
        if (better(all[size_t(r) * local.size() + k], best))
          best = all[size_t(r) * local.size() + k];
      tokens[k] = best;
    }
    return tokens;
  }

private:
  struct Layer {
    std::vector<float> attentionNorm, mlpNorm, wq, wk, wv, wo, w1, w2, w3;
  };

  /// A position's keys (or values) of this stage's `layer`-th layer in the pool.
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
  int64_t tp, rank, firstLayer, blocks, blockTokens;
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
  if (maxNewTokens > (int64_t(1) << 30) || prompt.size() > (size_t(1) << 30))
    throw invalid("a prompt or max new tokens over 2^30 tokens");
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
  {
    const json &family = node(model, mp, "family");
    if (!family.is_string() || (family != "gpt" && family != "llama"))
      planError(source, mp + "/family",
                family.dump() + ": the serving engine runs causal decoders only (gpt or llama)");
  }
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
  if (auto tied = model.find("tied_embeddings"); tied != model.end()) {
    if (!tied->is_boolean())
      planError(source, mp + "/tied_embeddings", "must be true or false");
    m.tiedEmbeddings = tied->get<bool>();
  }
  if (auto moe = model.find("moe_blocks"); moe != model.end() && !(moe->is_number_integer() && *moe == 0))
    planError(source, mp + "/moe_blocks",
              moe->dump() + ": the serving engine runs dense decoders only (no MoE blocks)");
  if (auto split = root.find("disaggregated"); split != root.end() && !(split->is_boolean() && *split == false))
    planError(source, in + "/disaggregated",
              split->dump() + ": disaggregated prefill is not executed by the serving engine");

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
  if (config.pp > m.layers)
    planError(source, in + "/decode/pp",
              "is " + std::to_string(config.pp) + ": more pipeline stages than the " +
                  std::to_string(m.layers) + " layers");
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
                                     const std::vector<int32_t> &prompt, int64_t maxNewTokens,
                                     std::vector<float> *logits) {
  checkModel(model);
  checkPrompt(model, prompt, maxNewTokens);
  const int64_t blockTokens = 16, total = int64_t(prompt.size()) + maxNewTokens;
  const int64_t blocks = blocksFor(total, blockTokens);
  Shard shard(model, seed, 1, 0, 0, model.layers, true, true, blocks, blockTokens);
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
  std::vector<float> x;
  while (true) {
    shard.embed(rows, x);
    shard.forward(rows, x, local);
    const Best best = shard.next(rows, x, local).at(0);
    const int32_t next = best.id;
    generated.push_back(next);
    if (logits)
      logits->push_back(best.value);
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
  // Ranks: tensor parallel innermost (rank = stage x tp + tpRank); tpComm joins a stage's.
  int64_t stage = 0, tpRank = 0;
  int64_t poolBlocks = 0;  // blocks allocated (ids 0 .. poolBlocks - 1)
  MPI_Comm tpComm = MPI_COMM_NULL;

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

  /// `idle`: the wait may last while the server has no work (the next step's message):
  /// after 2 ms of polling it sleeps 200 us between polls instead of spinning a core.
  void wait(MPI_Request &request, const std::string &what, bool idle = false) {
    const auto start = Clock::now();
    auto done = [&] {
      int finished = 0;
      detail::checkMpi(MPI_Test(&request, &finished, MPI_STATUS_IGNORE), "MPI_Test");
      if (!finished && idle && Clock::now() - start > std::chrono::milliseconds(2))
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      return finished != 0;
    };
    auto describe = [&] { return "serving step " + std::to_string(step) + ": " + what; };
    if (waits)
      waits->await(done, describe);
    else
      detail::waitWatched(done, timeout, rank, describe, nullptr);
  }

  void exchange(const void *send, void *receive, size_t bytes, const char *what) {
    exchangeOver(comm, size, send, receive, bytes, what);
  }

  void exchangeOver(MPI_Comm over, int ranks, const void *send, void *receive, size_t bytes,
                    const char *what) {
    if (ranks == 1) {
      if (bytes)
        std::memcpy(receive, send, bytes);
      return;
    }
    if (bytes > size_t(INT32_MAX))
      throw Error(ZENRT_ERR_INVALID_ARGUMENT, "serve: a step's exchange exceeds 2^31 bytes");
    MPI_Request request = MPI_REQUEST_NULL;
    detail::checkMpi(MPI_Iallgather(send, int(bytes), MPI_BYTE, receive, int(bytes), MPI_BYTE, over,
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
    wait(request, "step broadcast", /*idle=*/true);
    message.resize(static_cast<size_t>(length));
    if (length > int64_t(INT32_MAX))
      throw Error(ZENRT_ERR_INTERNAL, "serve: a step message exceeds 2^31 words");
    detail::checkMpi(MPI_Ibcast(message.data(), int(length), MPI_INT64_T, 0, comm, &request),
                     "MPI_Ibcast");
    wait(request, "step broadcast");
  }

  /// Applies a step message on any rank and computes it; the next tokens of the rows that
  /// want one.
  std::vector<Best> compute(const std::vector<int64_t> &message, bool &stop) {
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
    const Shard::Exchange overStage = [this](const void *send, void *receive, size_t bytes,
                                             const char *what) {
      exchangeOver(tpComm, int(config.tp), send, receive, bytes, what);
    };
    // Pipeline stages: the activations [rows x hidden] come from the previous stage's rank
    // of the same tensor-parallel rank and go to the next's; the last stage's tp rank 0
    // sends the tokens to rank 0.
    const int64_t H = config.model.hidden, pp = config.pp;
    std::vector<float> x;
    if (stage == 0) {
      shard->embed(rows, x);
    } else {
      x.resize(rows.size() * size_t(H));
      receive(x.data(), x.size() * sizeof(float), int(rank - config.tp), "activations from stage " + std::to_string(stage - 1));
    }
    shard->forward(rows, x, overStage);
    if (stage + 1 < pp) {
      sendTo(x.data(), x.size() * sizeof(float), int(rank + config.tp), "activations to stage " + std::to_string(stage + 1));
      if (rank != 0)
        return {};
      size_t wanted = 0;
      for (const Row &row : rows)
        wanted += row.wantToken ? 1 : 0;
      std::vector<Best> tokens(wanted);
      receive(tokens.data(), wanted * sizeof(Best), int((pp - 1) * config.tp), "tokens from the last stage");
      return tokens;
    }
    std::vector<Best> tokens = shard->next(rows, x, overStage);
    if (pp > 1 && tpRank == 0)
      sendTo(tokens.data(), tokens.size() * sizeof(Best), 0, "tokens to rank 0");
    return tokens;
  }

  void sendTo(const void *data, size_t bytes, int peer, const std::string &what) {
    if (bytes > size_t(INT32_MAX))
      throw Error(ZENRT_ERR_INVALID_ARGUMENT, "serve: a step's message exceeds 2^31 bytes");
    MPI_Request request = MPI_REQUEST_NULL;
    detail::checkMpi(MPI_Isend(data, int(bytes), MPI_BYTE, peer, 1, comm, &request), "MPI_Isend");
    wait(request, what);
  }

  void receive(void *data, size_t bytes, int peer, const std::string &what) {
    if (bytes > size_t(INT32_MAX))
      throw Error(ZENRT_ERR_INVALID_ARGUMENT, "serve: a step's message exceeds 2^31 bytes");
    MPI_Request request = MPI_REQUEST_NULL;
    detail::checkMpi(MPI_Irecv(data, int(bytes), MPI_BYTE, peer, 1, comm, &request), "MPI_Irecv");
    wait(request, what);
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
      const std::vector<Best> tokens = compute(message, ignored);
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
          request.result.tokens.push_back(tokens.at(k).id);
          request.result.logits.push_back(tokens.at(k).value);
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
  if (config.tp < 1 || config.pp < 1 || config.model.kvHeads % config.tp != 0 ||
      config.pp > config.model.layers)
    throw invalid("tp must divide the kv heads and pp must be from 1 to the layers");
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
                            uint64_t(m.tiedEmbeddings),
                            uint64_t(config.tp), uint64_t(config.pp), uint64_t(config.maxBatch),
                            uint64_t(config.maxSequence), uint64_t(config.kvBlockTokens),
                            uint64_t(config.kvCacheBlocks), options.seed};
  uint64_t hash = 0xCBF29CE484222325ull;
  for (uint64_t word : words)
    hash = splitMix64(hash ^ word);
  std::vector<uint64_t> hashes(static_cast<size_t>(e.size));
  e.exchange(&hash, hashes.data(), sizeof hash, "configuration agreement");
  for (int r = 0; r < e.size; ++r)
    if (hashes[size_t(r)] != hash)
      throw Error(ZENRT_ERR_MISMATCH, "serve: rank " + std::to_string(e.rank) + " and rank " +
                                          std::to_string(r) +
                                          " were given different models, limits or seeds");
  // No more than max_batch requests of max_sequence tokens hold blocks at once: the pool
  // holds those (the plan's kv_cache_blocks is what a GPU's memory holds, often far more).
  e.poolBlocks = std::min(config.kvCacheBlocks,
                          config.maxBatch * blocksFor(config.maxSequence, config.kvBlockTokens));
  e.stage = e.rank / config.tp;
  e.tpRank = e.rank % config.tp;
  detail::checkMpi(MPI_Comm_split(e.comm, int(e.stage), int(e.tpRank), &e.tpComm), "MPI_Comm_split");
  const int64_t firstLayer = m.layers * e.stage / config.pp,
                layerCount = m.layers * (e.stage + 1) / config.pp - firstLayer;
  e.shard = std::make_unique<Shard>(m, options.seed, config.tp, e.tpRank, firstLayer, layerCount,
                                    e.stage == 0, e.stage + 1 == config.pp, e.poolBlocks,
                                    config.kvBlockTokens);
  for (int64_t b = 0; b < e.poolBlocks; ++b)
    e.freeBlocks.push_back(int32_t(b));
  e.stats.freeBlocks = config.kvCacheBlocks;
}

Engine::~Engine() {
  if (impl && impl->comm != MPI_COMM_NULL) {
    impl->waits.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      if (impl->tpComm != MPI_COMM_NULL)
        MPI_Comm_free(&impl->tpComm);
      MPI_Comm_free(&impl->comm);
    }
  }
}

std::future<Result> Engine::submit(std::vector<int32_t> prompt, int64_t maxNewTokens,
                                   std::function<void(int32_t)> onToken) {
  Impl &e = *impl;
  if (e.rank != 0)
    throw Error(ZENRT_ERR_STATE, "serve: requests are submitted on rank 0 only");
  checkPrompt(e.config.model, prompt, maxNewTokens);
  const int64_t total = int64_t(prompt.size()) + std::min(maxNewTokens, e.config.maxSequence);
  if (maxNewTokens > e.config.maxSequence || total > e.config.maxSequence)
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
  stats.freeBlocks = int64_t(impl->freeBlocks.size()) + impl->config.kvCacheBlocks - impl->poolBlocks;
  return stats;
}

} // namespace zenrt::serve
