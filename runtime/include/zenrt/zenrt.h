/*===- zenrt/zenrt.h - libzenrt C API ---------------------------------------===
 *
 * Executes a zenopt plan (docs/plan-format.md) inside a training process.
 * Usage, per rank, per iteration:
 *
 *   zenrt_init_file(&rt, "plan.json", &options);          once
 *   zenrt_register(rt, "fc1.weight", grad, elements);      once per gradient
 *   ... backward: zenrt_mark_ready(rt, "fc1.weight") as each gradient is final
 *   zenrt_wait_all(rt);                                    before the optimizer step
 *   zenrt_wait(rt, "fc1.weight");                          decoupled buckets: before
 *                                                          the tensor's next forward
 *   zenrt_finalize(rt);
 *
 * After a wait the registered buffer holds the average over ranks (for a
 * `broadcast` bucket: rank 0's values). Functions return ZENRT_OK or an error
 * status; zenrt_last_error() gives the message of the calling thread's last
 * error (it names the rank, and for timeouts the bucket, operation, stream and
 * sequence number, and the ranks waited for: those that have not reached the
 * collective, and those that did not answer at all, dead or hung). Every wait,
 * the start-up agreement included, is bounded by the timeout.
 *
 * The MPI backend needs MPI initialised with MPI_THREAD_MULTIPLE (or not at
 * all: zenrt then initialises it and finalises it in zenrt_finalize).
 *
 * Frameworks that need the job before any plan, or create handles one after
 * another (zenopt.torch), call zenrt_world_init first and zenrt_world_finalize
 * last; the zenrt_world_* calls work on MPI_COMM_WORLD and host memory.
 *
 * GPU gradients (libzenrt built with CUDA): set options.memory to
 * ZENRT_MEMORY_DEVICE and register device pointers. Rank r then runs on CUDA
 * device r % devices, fusion buffers and error-feedback residuals live there,
 * compression runs as CUDA kernels and the collectives as NCCL calls, one CUDA
 * stream per plan stream (MPI only bootstraps NCCL). The work producing a
 * gradient must be complete (e.g. its stream synchronised) when it is marked
 * ready, and the buffer must not be written until its wait returns.
 *===----------------------------------------------------------------------===*/
#ifndef ZENRT_ZENRT_H
#define ZENRT_ZENRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZENRT_VERSION_MAJOR 0
#define ZENRT_VERSION_MINOR 3
#define ZENRT_VERSION_PATCH 0

typedef enum zenrt_status {
  ZENRT_OK = 0,
  ZENRT_ERR_INVALID_ARGUMENT = 1, /* null pointer, unknown tensor, size not matching the plan */
  ZENRT_ERR_PLAN = 2,             /* the plan is invalid (bad data) */
  ZENRT_ERR_IO = 3,               /* the plan file cannot be read */
  ZENRT_ERR_MISMATCH = 4,         /* ranks disagree on the plan or the world size */
  ZENRT_ERR_STATE = 5,            /* call out of order (e.g. a gradient marked twice) */
  ZENRT_ERR_TIMEOUT = 6,          /* a wait exceeded the timeout; the handle is now failed */
  ZENRT_ERR_BACKEND = 7,          /* MPI / NCCL / CUDA reported an error */
  ZENRT_ERR_ABORTED = 8,          /* the handle was aborted or failed earlier */
  ZENRT_ERR_INTERNAL = 9
} zenrt_status;

typedef struct zenrt_s *zenrt_t;

/* Where the registered gradient buffers live. */
typedef enum zenrt_memory {
  ZENRT_MEMORY_HOST = 0,  /* host memory: CPU kernels, MPI collectives */
  ZENRT_MEMORY_DEVICE = 1 /* CUDA device memory: CUDA kernels, NCCL collectives */
} zenrt_memory;

typedef struct zenrt_options {
  /* Expected rank and world size; -1 = take them from the communicator. When
   * given they must match the communicator's. */
  int rank;
  int world_size;
  /* Seconds every wait may take before it fails with ZENRT_ERR_TIMEOUT;
   * <= 0 = the environment variable ZENRT_TIMEOUT_S, else 300. */
  double timeout_s;
  /* Pointer to the MPI_Comm to run on; NULL = MPI_COMM_WORLD. */
  const void *mpi_comm;
  /* Keep each bucket's decompressed local contribution of the last iteration
   * for zenrt_debug_bucket (costs one buffer per bucket). */
  int keep_sent;
  /* A zenrt_memory (added in 0.2; fill the struct with zenrt_options_init). Device
   * memory needs libzenrt built with CUDA and a visible GPU on every rank. */
  int memory;
} zenrt_options;

/* Fills the defaults: rank = world_size = -1, timeout_s = 0, mpi_comm = NULL, keep_sent = 0,
 * memory = ZENRT_MEMORY_HOST. */
void zenrt_options_init(zenrt_options *options);

/* Loads and validates a plan, agrees on it with every rank (plan hash and world
 * size; collective over the communicator), and starts the progress thread.
 * `options` may be NULL. On error *out is NULL. */
int zenrt_init_file(zenrt_t *out, const char *plan_path, const zenrt_options *options);
int zenrt_init_text(zenrt_t *out, const char *plan_text, size_t length, const char *source_name,
                    const zenrt_options *options);

/* Registers the buffer of a gradient named in the plan, in the memory the handle
 * was initialised for (a device pointer of this rank's device is checked with
 * cudaPointerGetAttributes); `elements` must equal the plan's. Every gradient
 * must be registered before the first mark. */
int zenrt_register(zenrt_t rt, const char *tensor, float *data, int64_t elements);

/* The gradient is final for this iteration: the runtime copies it into its
 * bucket's fusion buffer; a complete bucket is compressed and communicated. */
int zenrt_mark_ready(zenrt_t rt, const char *tensor);

/* Waits until the tensor's result is in its buffer (including a decoupled all-gather). */
int zenrt_wait(zenrt_t rt, const char *tensor);

/* Waits until every bucket of this iteration is done except decoupled
 * all-gathers, then starts the next iteration. */
int zenrt_wait_all(zenrt_t rt);

/* Non-blocking: *done = 1 when zenrt_wait(tensor) (tensor NULL: zenrt_wait_all)
 * would return at once. */
int zenrt_test(zenrt_t rt, const char *tensor, int *done);

/* hold = 1: starts no further collective (nor a further piece of a chunked one) until
 * called with hold = 0; those in flight complete. For work of the application's own that
 * must have the network to itself between the plan's collectives (an MoE layer's
 * all-to-alls planned `serial`). Every rank holds at the same point of its schedule. A
 * zenrt_wait or zenrt_wait_all while held fails with ZENRT_ERR_STATE. */
int zenrt_hold_collectives(zenrt_t rt, int hold);

/* Emergency stop: fails every waiter and terminates the job with `exit_code`
 * through the backend (MPI_Abort): started collectives cannot be cancelled. */
int zenrt_abort(zenrt_t rt, int exit_code);

/* Bounds an application's own wait (e.g. polling an MPI_Ibarrier with MPI_Test) by the
 * handle's timeout: calls done(context) until it returns nonzero. On timeout it asks the
 * other ranks where they are (for at most 2 s), fails the handle and returns
 * ZENRT_ERR_TIMEOUT; the last error names `what` and the ranks that did not answer or are
 * in an earlier iteration. */
int zenrt_await(zenrt_t rt, int (*done)(void *context), void *context, const char *what);

/* Stops the progress thread and frees the handle (NULL is fine). */
int zenrt_finalize(zenrt_t rt);

/* Introspection for checks and tests: bucket count, and a bucket's buffers of
 * the last finished iteration: `sent` (decompressed local contribution; NULL
 * unless options.keep_sent) and `residual` (error feedback; NULL without it),
 * device pointers with ZENRT_MEMORY_DEVICE. */
int zenrt_bucket_count(zenrt_t rt, int *count);
int zenrt_debug_bucket(zenrt_t rt, int bucket, const float **sent, const float **residual,
                       int64_t *elements);

/* The plan hash ranks agreed on (FNV-1a 64 of the canonical plan text). */
int zenrt_plan_hash(zenrt_t rt, uint64_t *hash);

/* The job, independent of any plan (added in 0.3). */

/* Initialises MPI with MPI_THREAD_MULTIPLE unless it is initialised already, and gives this
 * process's rank and the world size of MPI_COMM_WORLD (either pointer may be NULL). Handles
 * created afterwards neither initialise nor finalise MPI, so several can live one after
 * another. Idempotent. */
int zenrt_world_init(int *rank, int *world_size);

/* Copies `bytes` bytes of host memory from rank `root` to every rank (collective). Fails
 * with ZENRT_ERR_TIMEOUT after the timeout of zenrt_options.timeout_s = 0 (ZENRT_TIMEOUT_S,
 * else 300 s). */
int zenrt_world_broadcast(void *data, size_t bytes, int root);

/* Gathers one value from every rank: all[r] = rank r's value (collective; `all` holds
 * world_size values). Lets ranks agree on a local outcome, e.g. that each one accepted its
 * input, before a step where a rank that stayed behind would leave the others waiting. */
int zenrt_world_exchange(uint64_t value, uint64_t *all);

/* Sums a row-sparse gradient over the world (collective, added in 0.3) with `scheme`, a
 * spelling of zen/SparseScheme.h: "dense", "agsparse", "sparcml" (dense_threshold 0.25, or
 * "sparcml:<dense_threshold>"), "omnireduce" (block_rows 256, or "omnireduce:<block_rows>"),
 * "balanced", "hierarchical" (nodes: the ranks sharing memory, or ZENRT_RANKS_PER_NODE
 * consecutive ranks). indices[nnz_rows] (any order, duplicates summed
 * in their order), values[nnz_rows * row_elements], row-major; every rank passes the same
 * scheme, rows and row_elements. Writes the reduced table, dense, into
 * out[rows * row_elements]: the sum over ranks in rank order (bit-identical to adding the
 * ranks' dense gradients rank 0, 1, 2, ...; every scheme gives the same bits), +0.0f where no
 * rank touched. out_rows (may be NULL) receives the number of rows any rank touched. Every
 * wait is bounded by timeout_s (<= 0: ZENRT_TIMEOUT_S, else 300). A rank whose arguments are
 * invalid fails with ZENRT_ERR_INVALID_ARGUMENT and the others with ZENRT_ERR_MISMATCH, as
 * when ranks pass different schemes or shapes. */
int zenrt_sparse_allreduce(const char *scheme, int64_t rows, int64_t row_elements,
                           int64_t nnz_rows, const int64_t *indices, const float *values,
                           float *out, int64_t *out_rows, double timeout_s);

/* Terminates the job with `exit_code` (MPI_Abort); does not return. */
int zenrt_world_abort(int exit_code);

/* Finalises MPI when zenrt_world_init initialised it; every handle must be finalised
 * (ZENRT_ERR_STATE otherwise). Later zenrt_world_* calls fail with ZENRT_ERR_STATE. */
int zenrt_world_finalize(void);

/* Serving (added in 0.3): the engine of a serving plan (zenopt --serve; docs/design.md
 * "Executing serving plans"), a Llama-style decoder with weights drawn from `seed`,
 * tensor parallel over the plan's decode.tp ranks (the communicator's size must be tp),
 * greedy decoding, a paged KV cache and continuous batching. MPI must be initialised with
 * MPI_THREAD_MULTIPLE (e.g. by zenrt_world_init). Every rank calls zenrt_serve_run, which
 * returns after zenrt_serve_shutdown on rank 0 once every submitted request is finished;
 * rank 0 submits and waits from other threads. The answers are bit-identical to the
 * unsharded model's at every tp and batch composition. */
typedef struct zenrt_serve_s *zenrt_serve_t;

/* Called on the thread running zenrt_serve_run with each generated token of a request. */
typedef void (*zenrt_token_fn)(void *user_data, int64_t request_id, int32_t token);

/* Loads the plan (ZENRT_ERR_PLAN naming the JSON path for a plan the engine cannot run:
 * not a serving plan, pp > 1, disaggregated prefill, a model other than llama with
 * swiglu/rmsnorm/rotary), builds this rank's shard (collective over options->mpi_comm;
 * ZENRT_ERR_MISMATCH for a world size other than tp or ranks given different seeds).
 * options may be NULL; timeout_s bounds every wait on a peer. On error *out is NULL. */
int zenrt_serve_create(zenrt_serve_t *out, const char *plan_path, uint64_t seed,
                       const zenrt_options *options);

/* Rank 0: queues a request of `prompt_tokens` ids generating `max_new_tokens`.
 * ZENRT_ERR_INVALID_ARGUMENT for an empty prompt, an id outside the vocabulary,
 * max_new_tokens < 1 or prompt + max_new_tokens over the plan's max_sequence;
 * ZENRT_ERR_STATE on other ranks and after shutdown. `on_token` may be NULL. */
int zenrt_serve_submit(zenrt_serve_t engine, const int32_t *prompt, size_t prompt_tokens,
                       int64_t max_new_tokens, zenrt_token_fn on_token, void *user_data,
                       int64_t *request_id);

/* Rank 0: blocks until the request is finished and copies its generated ids into
 * tokens[capacity], *count = their number; ttft_us and tpot_us (either may be NULL) receive
 * the time from submit to the first token and the mean time per later token. A capacity
 * below the count fails with ZENRT_ERR_INVALID_ARGUMENT and keeps the result for another
 * call; after success the id is forgotten. A failed engine's error is returned. */
int zenrt_serve_wait(zenrt_serve_t engine, int64_t request_id, int32_t *tokens, size_t capacity,
                     size_t *count, double *ttft_us, double *tpot_us);

/* Every rank: the step loop (see above). */
int zenrt_serve_run(zenrt_serve_t engine);

/* Rank 0: takes no more requests; zenrt_serve_run returns when those submitted are done. */
int zenrt_serve_shutdown(zenrt_serve_t engine);

/* Frees the engine (NULL is fine); not while zenrt_serve_run runs. */
int zenrt_serve_destroy(zenrt_serve_t engine);

const char *zenrt_error_string(int status);
const char *zenrt_last_error(void);
const char *zenrt_version(void);

#ifdef __cplusplus
}
#endif

#endif /* ZENRT_ZENRT_H */
