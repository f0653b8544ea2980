//===- zenrt/Serve.h - executing serving plans on CPU ranks ----------------===//
//
// The inference half of a plan file (`inference`, docs/plan-format.md) executed over MPI:
// a Llama-style decoder (token embedding; per layer RMSNorm, grouped-query attention with
// rotary positions, residual, RMSNorm, SwiGLU MLP, residual; final RMSNorm; the head, its
// own weights or the token embedding's when tied)
// with deterministic fp32 weights drawn from a seed, Megatron tensor parallel over the
// plan's decode.tp ranks, a paged KV cache, greedy decoding and continuous batching.
//
// Tensor parallelism. Rank r of tp holds the query heads of kv-head groups
// [r G/tp, (r+1) G/tp) (G = kv_heads) with their key/value heads and the matching columns of
// the attention's out-projection, the same share of the MLP's inner features (the ffn is
// cut into G slices, slice s = [floor(s F/G), floor((s+1) F/G))), and the vocabulary rows
// [floor(r V/tp), floor((r+1) V/tp)) of the head. Every rank keeps the whole residual stream.
//
// Bit-exactness by construction. The row-parallel outputs (out-projection, down-projection)
// are computed as one partial per slice (kv-head group, ffn slice); the partials are
// all-gathered and every rank adds them in global slice order 0, 1, ..., G-1, exactly as the
// single-rank reference does with every slice local. Every dot product is one fixed-order
// function (8 strided accumulators, then a fixed tree), every token row is computed on its
// own (no GEMM whose blocking depends on the number of rows), and the head's argmax takes
// the highest logit, ties to the lowest token id, across the ranks' vocabulary slices. So
// the tokens at tp = 1, 2, 4, ... and under any batch composition are bit-identical to
// referenceDecode().
//
// Pipeline parallelism. Ranks are placed as Megatron places them, tensor parallel innermost:
// rank = stage x tp + tp rank. Stage s holds layers [floor(s L/pp), floor((s+1) L/pp)) (the
// first stage the embedding, the last the head); each step's activations [rows x hidden]
// go from a stage's rank to the next stage's rank of the same tp rank, and the last stage's
// tp rank 0 sends the step's tokens to rank 0. A step runs the stages one after another (no
// micro-batches in flight): pp > 1 divides the weights and the KV cache, not the latency.
// The activations cross stages exactly, so pp changes no bit either.
//
// Disaggregated prefill (prefill's tp/pp other than decode's, or disaggregated: true) is
// refused by configOf: prefill and decode rows share each step on the same ranks.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_SERVE_H
#define ZENRT_SERVE_H

#include "zenrt/Plan.h"

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace zenrt::serve {

/// The decoder's shape (a Llama-style causal decoder: SwiGLU MLP, RMSNorm, rotary positions).
struct Model {
  int64_t layers = 1, hidden = 8, heads = 1, kvHeads = 1, ffn = 8, vocab = 16;
  bool tiedEmbeddings = false;  // the head is the token embedding (else its own weights)
  double ropeTheta = 10000.0;
  double normEpsilon = 1e-5;
};

struct Config {
  Model model;
  int64_t tp = 1, pp = 1;
  int64_t maxBatch = 1;       // most requests in one step (prefill and decode together)
  int64_t maxSequence = 64;   // prompt + generated tokens of one request, at most
  int64_t kvBlockTokens = 16; // paged KV cache: tokens per block
  /// Blocks the cache holds (every layer has this many). The engine allocates at most the
  /// max_batch x ceil(max_sequence / kv_block_tokens) blocks its requests can hold at once.
  int64_t kvCacheBlocks = 4;
};

/// The executable configuration of a serving plan. Throws PlanError(BadInput)
/// "SOURCE: /inference/...: message" for a plan that is not a serving plan or that the
/// engine cannot run: a family other than a causal decoder (gpt, as zenopt writes it, or
/// llama), mlp other than swiglu, norm other than rmsnorm, positions other than rotary, MoE
/// blocks (moe_blocks > 0), disaggregated: true, a shape that does not split (heads by kv_heads,
/// hidden by heads, an odd head dimension, tp not dividing kv_heads), prefill parallelism
/// other than decode's (/inference/prefill), pp over the layers (/inference/decode/pp), limits below 1,
/// a KV cache smaller than one max_sequence request, or cluster.world_size other than tp x pp.
Config configOf(const Plan &plan, const std::string &source);

/// The greedy decode of `prompt` by the unsharded model on this thread (no MPI): the
/// `maxNewTokens` generated token ids; `logits` (may be null) receives each one's logit. The
/// numerics reference of Engine. Throws zenrt::Error (ZENRT_ERR_INVALID_ARGUMENT) for an
/// empty prompt, ids outside the vocabulary or maxNewTokens < 1.
std::vector<int32_t> referenceDecode(const Model &model, uint64_t seed,
                                     const std::vector<int32_t> &prompt, int64_t maxNewTokens,
                                     std::vector<float> *logits = nullptr);

struct Options {
  uint64_t seed = 1;             // the weights
  double timeoutSeconds = 0;     // every wait on a peer; <= 0: ZENRT_TIMEOUT_S, else 300
  double idleHeartbeatSeconds = 0.5; // rank 0 sends an empty step this often when idle
};

/// A finished request: the generated ids, the time from submit() to the first token and
/// the mean time between later tokens (0 for a single token), in microseconds. `logits`
/// holds each token's logit (the highest): the bit-exactness check of the whole model.
struct Result {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  double ttftUs = 0;
  double tpotUs = 0;
};

/// The serving engine. Constructed collectively on every rank of `comm` (an MPI_Comm*,
/// null: MPI_COMM_WORLD; MPI initialised with MPI_THREAD_MULTIPLE), whose size must be
/// tp x pp (tp dividing kv_heads, pp at most the layers; ZENRT_ERR_MISMATCH otherwise, and when ranks were given different configurations
/// or seeds). Every rank calls run(); rank 0 takes requests (submit, from any thread) and
/// schedules each step: it admits queued requests first come first served while fewer than
/// max_batch are running and the KV cache has the blocks for their prompt + max new tokens,
/// then broadcasts the step (the admitted requests' block tables, one row per prompt token of
/// each admitted request and one row per running request's last token, the finished requests'
/// ids), and every rank computes it. A request's KV blocks are freed when it finishes, and
/// its future then holds its Result. When idle, rank 0 sends an empty step every
/// idleHeartbeatSeconds so that the other ranks' bounded waits do not expire.
class Engine {
public:
  Engine(const Config &config, const Options &options, const void *comm = nullptr);
  ~Engine();
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  /// Rank 0 only (ZENRT_ERR_STATE elsewhere, after shutdown() or after run() failed).
  /// Throws zenrt::Error(ZENRT_ERR_INVALID_ARGUMENT) for an empty prompt, an id outside the
  /// vocabulary, maxNewTokens < 1 or prompt + maxNewTokens over max_sequence. `onToken` (may
  /// be empty) is called on the thread running run() with each generated id as it is
  /// produced. The future throws the zenrt::Error that stopped run(), if any.
  std::future<Result> submit(std::vector<int32_t> prompt, int64_t maxNewTokens,
                             std::function<void(int32_t)> onToken = {});

  /// The step loop, on every rank. Returns once shutdown() was called on rank 0 and every
  /// submitted request finished. Throws zenrt::Error (ZENRT_ERR_TIMEOUT naming the step and
  /// the ranks that stopped answering, ZENRT_ERR_BACKEND); rank 0 then fails every pending
  /// request with it.
  void run();

  /// Rank 0: take no more requests; run() returns when those submitted are finished.
  void shutdown();

  int rank() const;
  int size() const;
  const Config &config() const;

  struct Stats {
    int64_t steps = 0, rows = 0, requests = 0, generatedTokens = 0;
    int64_t waiting = 0, running = 0, freeBlocks = 0;
  };
  /// Rank 0's counters (any thread).
  Stats stats() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace zenrt::serve

#endif // ZENRT_SERVE_H
