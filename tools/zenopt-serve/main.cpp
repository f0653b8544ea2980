//===- zenopt-serve - serving a zenopt serving plan over HTTP ------------------===//
//
// `mpirun -np N zenopt-serve PLAN --port P`: every rank builds its shard (tensor-parallel
// slice of its pipeline stage's layers) of the plan's decoder (zenrt::serve::Engine, runtime/lib/Serve.cpp) and runs the engine's
// step loop; rank 0 also serves HTTP JSON with cpp-httplib:
//
//   POST /v1/completions {"prompt": [ids], "max_tokens": N} -> 200 {"tokens": [ids]}
//        400 {"error": "..."} for malformed JSON, missing or wrong-typed fields, ids outside
//        the vocabulary, prompt + max_tokens over max_sequence, max_tokens < 1
//   GET  /health   200 once every rank built its shard and agreed (503 before and while
//                  shutting down)
//   GET  /metrics  Prometheus text: requests, errors, generated tokens, TTFT/TPOT histograms
//
// SIGTERM or SIGINT on rank 0 stops taking requests, finishes those in flight and ends every
// rank with exit status 0 (the other ranks ignore them and stop with rank 0).
// `zenopt-serve PLAN --reference --prompt 1,2,3 --max-tokens 8` prints the unsharded model's
// greedy tokens as JSON, without MPI.
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "ExitCodes.h"
#include "zenrt/Plan.h"
#include "zenrt/Runtime.h"
#include "zenrt/Serve.h"

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using json = nlohmann::json;
using namespace zenrt::serve;

struct CliOptions {
  std::string planPath;
  std::string host = "127.0.0.1";
  int port = -1;
  uint64_t seed = 1;
  double timeoutSeconds = 0;
  int threads = 32;
  bool reference = false;
  std::string prompt;
  int64_t maxTokens = 16;
};

int exitCodeFor(int status) {
  switch (status) {
  case ZENRT_ERR_PLAN:
  case ZENRT_ERR_MISMATCH:
    return zen::cli::ExitDataError;
  case ZENRT_ERR_IO:
    return zen::cli::ExitNoInput;
  case ZENRT_ERR_INVALID_ARGUMENT:
    return zen::cli::ExitUsage;
  default:
    return zen::cli::ExitSoftware;
  }
}

/// A Prometheus histogram of seconds.
class Histogram {
public:
  void observe(double seconds) {
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t b = 0; b < kBounds.size(); ++b)
      if (seconds <= kBounds[b])
        ++counts[b];
    ++count;
    sum += seconds;
  }
  void write(std::ostringstream &out, const std::string &name, const std::string &help) const {
    std::lock_guard<std::mutex> lock(mutex);
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    for (size_t b = 0; b < kBounds.size(); ++b)
      out << name << "_bucket{le=\"" << kBounds[b] << "\"} " << counts[b] << "\n";
    out << name << "_bucket{le=\"+Inf\"} " << count << "\n";
    out << name << "_sum " << sum << "\n" << name << "_count " << count << "\n";
  }

private:
  static constexpr std::array<double, 13> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                     0.05,   0.1,   0.25,   0.5,   1,    2.5, 10};
  mutable std::mutex mutex;
  std::array<uint64_t, 13> counts{};
  uint64_t count = 0;
  double sum = 0;
};

struct Metrics {
  std::atomic<uint64_t> completed{0}, badRequests{0}, failed{0}, unavailable{0};
  Histogram ttft, tpot;
};

std::string errorBody(const std::string &message) { return json{{"error", message}}.dump(); }

/// Parses and checks a completions request: the prompt and max_tokens, or the message.
bool parseRequest(const std::string &body, std::vector<int32_t> &prompt, int64_t &maxTokens,
                  std::string &message) {
  const json request = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) {
    message = "the body is not valid JSON";
    return false;
  }
  if (!request.is_object()) {
    message = "the body must be a JSON object {\"prompt\": [token ids], \"max_tokens\": N}";
    return false;
  }
  auto p = request.find("prompt");
  if (p == request.end() || !p->is_array()) {
    message = "\"prompt\" must be an array of token ids";
    return false;
  }
  for (size_t i = 0; i < p->size(); ++i) {
    const json &id = (*p)[i];
    if (!id.is_number_integer()) {
      message = "\"prompt\"[" + std::to_string(i) + "] must be an integer token id (one prompt "
                "per request)";
      return false;
    }
    const int64_t value = id.is_number_unsigned() && id.get<uint64_t>() > uint64_t(INT64_MAX)
                              ? INT64_MAX
                              : id.get<int64_t>();
    if (value < INT32_MIN || value > INT32_MAX) {
      message = "\"prompt\"[" + std::to_string(i) + "] = " + id.dump() + " is outside the vocabulary";
      return false;
    }
    prompt.push_back(int32_t(value));
  }
  auto m = request.find("max_tokens");
  if (m == request.end() || !m->is_number_integer()) {
    message = "\"max_tokens\" must be an integer";
    return false;
  }
  maxTokens = m->is_number_unsigned() && m->get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX
                                                                                  : m->get<int64_t>();
  return true;
}

int reference(const CliOptions &options, const Config &config) {
  std::vector<int32_t> prompt;
  std::stringstream in(options.prompt);
  std::string item;
  while (std::getline(in, item, ',')) {
    char *end = nullptr;
    errno = 0;
    const long long value = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno == ERANGE || value < INT32_MIN || value > INT32_MAX) {
      std::fprintf(stderr, "zenopt-serve: error: --prompt: '%s' is not a token id\n", item.c_str());
      return zen::cli::ExitUsage;
    }
    prompt.push_back(int32_t(value));
  }
  const std::vector<int32_t> tokens =
      referenceDecode(config.model, options.seed, prompt, options.maxTokens);
  std::printf("%s\n", json{{"tokens", tokens}}.dump().c_str());
  return zen::cli::ExitSuccess;
}

std::atomic<bool> finished{false};

/// Waits for SIGTERM/SIGINT (blocked in every thread) until `finished`; on rank 0 the first
/// one calls `stop`.
void watchSignals(const std::function<void()> &stop) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  const timespec poll{0, 100 * 1000 * 1000};
  bool stopped = false;
  while (!finished.load()) {
    const int signal = sigtimedwait(&set, nullptr, &poll);
    if ((signal == SIGTERM || signal == SIGINT) && !stopped && stop) {
      stopped = true;
      stop();
    }
  }
}

int serve(const CliOptions &options, const Config &config, int rank) {
  Options engineOptions;
  engineOptions.seed = options.seed;
  engineOptions.timeoutSeconds = options.timeoutSeconds;
  Metrics metrics;
  std::atomic<bool> ready{false};
  std::atomic<Engine *> enginePointer{nullptr};
  httplib::Server server;
  std::thread listener;
  int port = options.port;

  if (rank == 0) {
    const int threads = options.threads;
    server.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
    server.set_payload_max_length(size_t(64) << 20);
    server.Get("/health", [&](const httplib::Request &, httplib::Response &response) {
      const bool up = ready.load();
      response.status = up ? 200 : 503;
      response.set_content(json{{"status", up ? "ready" : "starting"}}.dump(), "application/json");
    });
    server.Get("/metrics", [&](const httplib::Request &, httplib::Response &response) {
      std::ostringstream out;
      Engine::Stats stats;
      if (Engine *engine = enginePointer.load())
        stats = engine->stats();
      auto counter = [&](const char *name, const char *help, uint64_t value, const char *type = "counter") {
        out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
            << name << " " << value << "\n";
      };
      counter("zenopt_serve_requests_total", "Completion requests answered with tokens.",
              metrics.completed.load());
      counter("zenopt_serve_bad_requests_total", "Completion requests refused with HTTP 400.",
              metrics.badRequests.load());
      counter("zenopt_serve_failed_requests_total", "Completion requests failed by the engine (HTTP 500).",
              metrics.failed.load());
      counter("zenopt_serve_unavailable_total", "Completion requests refused with HTTP 503.",
              metrics.unavailable.load());
      counter("zenopt_serve_generated_tokens_total", "Tokens generated.",
              uint64_t(stats.generatedTokens));
      counter("zenopt_serve_steps_total", "Engine steps computed.", uint64_t(stats.steps));
      counter("zenopt_serve_running_requests", "Requests in the running batch.",
              uint64_t(stats.running), "gauge");
      counter("zenopt_serve_waiting_requests", "Requests queued for admission.",
              uint64_t(stats.waiting), "gauge");
      counter("zenopt_serve_kv_free_blocks", "Free blocks of the paged KV cache.",
              uint64_t(stats.freeBlocks), "gauge");
      metrics.ttft.write(out, "zenopt_serve_ttft_seconds", "Time to first token.");
      metrics.tpot.write(out, "zenopt_serve_tpot_seconds", "Time per output token after the first.");
      response.set_content(out.str(), "text/plain; version=0.0.4");
    });
    server.Post("/v1/completions", [&](const httplib::Request &request, httplib::Response &response) {
      auto refuse = [&](int status, const std::string &message) {
        response.status = status;
        response.set_content(errorBody(message), "application/json");
      };
      Engine *engine = enginePointer.load();
      if (!ready.load() || !engine) {
        ++metrics.unavailable;
        return refuse(503, "the engine is not ready");
      }
      std::vector<int32_t> prompt;
      int64_t maxTokens = 0;
      std::string message;
      if (!parseRequest(request.body, prompt, maxTokens, message)) {
        ++metrics.badRequests;
        return refuse(400, message);
      }
      std::future<Result> future;
      try {
        future = engine->submit(std::move(prompt), maxTokens);
      } catch (const zenrt::Error &e) {
        if (e.status == ZENRT_ERR_INVALID_ARGUMENT) {
          ++metrics.badRequests;
          return refuse(400, e.what());
        }
        ++metrics.unavailable;
        return refuse(503, e.what());
      }
      try {
        Result result = future.get();
        metrics.ttft.observe(result.ttftUs * 1e-6);
        if (result.tokens.size() > 1)
          metrics.tpot.observe(result.tpotUs * 1e-6);
        ++metrics.completed;
        response.set_content(json{{"tokens", result.tokens}}.dump(), "application/json");
      } catch (const std::exception &e) {
        ++metrics.failed;
        refuse(500, e.what());
      }
    });
    server.set_error_handler([](const httplib::Request &, httplib::Response &response) {
      if (response.body.empty())
        response.set_content(errorBody("no such endpoint or method (POST /v1/completions, GET "
                                       "/health, GET /metrics)"),
                             "application/json");
    });
    bool bound = false;
    if (port == 0) {
      port = server.bind_to_any_port(options.host);
      bound = port > 0;
    } else {
      bound = server.bind_to_port(options.host, port);
    }
    if (!bound) {
      std::fprintf(stderr, "zenopt-serve: error: cannot listen on %s:%d\n", options.host.c_str(),
                   options.port);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, zen::cli::ExitSoftware);
    }
    listener = std::thread([&] { server.listen_after_bind(); });
    // stop() only ends a server that is running.
    for (int waited = 0; !server.is_running() && waited < 10000; ++waited)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  // The engine is collective: after it, every rank holds its shard and agreed on the model.
  std::unique_ptr<Engine> engine;
  try {
    engine = std::make_unique<Engine>(config, engineOptions);
  } catch (...) {
    if (rank == 0) {
      server.stop();
      listener.join();
    }
    throw;
  }
  std::thread signals([&] {
    watchSignals(rank == 0 ? std::function<void()>([&] {
      ready = false;
      engine->shutdown();
      server.stop();
    })
                           : std::function<void()>());
  });
  if (rank == 0) {
    enginePointer = engine.get();
    ready = true;
    std::printf("zenopt-serve: serving %s on http://%s:%d (tp %lld x pp %lld, pid %ld)\n",
                options.planPath.c_str(), options.host.c_str(), port, (long long)config.tp,
                (long long)config.pp, long(getpid()));
    std::fflush(stdout);
  }
  int code = zen::cli::ExitSuccess;
  try {
    engine->run();
  } catch (...) {
    finished = true;
    signals.join();
    if (rank == 0) {
      ready = false;
      server.stop();
      listener.join();
    }
    throw;
  }
  finished = true;
  signals.join();
  if (rank == 0) {
    server.stop();
    listener.join();
    std::printf("zenopt-serve: stopped after %llu requests\n",
                (unsigned long long)metrics.completed.load());
    std::fflush(stdout);
  }
  return code;
}

} // namespace

int main(int argc, char **argv) {
  CliOptions options;
  CLI::App app{
      "Serve a zenopt serving plan (zenopt --serve) under mpirun: every rank runs its "
      "tensor-parallel shard of the plan's Llama-style decoder (weights drawn from --seed), "
      "rank 0 answers HTTP: POST /v1/completions {\"prompt\": [ids], \"max_tokens\": N} -> "
      "{\"tokens\": [ids]}, GET /health, GET /metrics (Prometheus). SIGTERM or SIGINT on rank 0 "
      "finishes the requests in flight and stops every rank.\nExit codes: 0 ok, 2 bad command "
      "line, 65 bad plan or ranks disagree, 66 plan unreadable, 70 timeout or internal error."};
  app.add_option("plan", options.planPath, "Serving plan file (plan.json with `inference`)")->required();
  app.add_option("--port", options.port, "TCP port rank 0 listens on (0: any free port, printed)")
      ->check(zen::cli::wholeNumber(0, 65535));
  app.add_option("--host", options.host, "Address rank 0 listens on (default 127.0.0.1)");
  app.add_option("--seed", options.seed, "Seed of the model's weights (default 1)");
  app.add_option("--timeout", options.timeoutSeconds,
                 "Seconds any wait on another rank may take (default: ZENRT_TIMEOUT_S or 300)")
      ->check(zen::cli::realNumber(0, 1e6, /*exclusiveLow=*/true));
  app.add_option("--http-threads", options.threads, "Threads answering HTTP requests (default 32)")
      ->check(zen::cli::wholeNumber(1, 1024));
  app.add_flag("--reference", options.reference,
               "Print the unsharded model's greedy tokens for --prompt as JSON (no MPI, no server)");
  app.add_option("--prompt", options.prompt, "--reference: the prompt's token ids, e.g. 1,2,3");
  app.add_option("--max-tokens", options.maxTokens, "--reference: tokens to generate (default 16)")
      ->check(zen::cli::wholeNumber(1));
  try {
    app.parse(argc, argv);
    if (options.reference && options.prompt.empty())
      throw CLI::ValidationError("--reference", "needs --prompt");
    if (!options.reference && options.port < 0)
      throw CLI::ValidationError("--port", "is required to serve");
    if (!options.reference && (app.count("--prompt") || app.count("--max-tokens")))
      throw CLI::ValidationError("--prompt/--max-tokens", "only with --reference");
  } catch (const CLI::ParseError &e) {
    if (e.get_exit_code() == 0)  // --help
      return app.exit(e);
    std::fprintf(stderr, "zenopt-serve: error: %s\nRun with --help for more information.\n", e.what());
    return zen::cli::ExitUsage;
  }

  if (options.reference) {
    try {
      const zenrt::Plan plan = zenrt::loadPlanFile(options.planPath);
      return reference(options, configOf(plan, options.planPath));
    } catch (const zenrt::PlanError &e) {
      std::fprintf(stderr, "zenopt-serve: %s\n", e.what());
      return zen::cli::exitCodeOf(e.kind);
    } catch (const zenrt::Error &e) {
      std::fprintf(stderr, "zenopt-serve: error: %s\n", e.what());
      return exitCodeFor(e.status);
    }
  }

  // SIGTERM and SIGINT go to the signal thread only (threads inherit the mask).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is the server's business only

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = 0;
  try {
    const zenrt::Plan plan = zenrt::loadPlanFile(options.planPath);
    code = serve(options, configOf(plan, options.planPath), rank);
  } catch (const zenrt::PlanError &e) {
    // Every rank reads the same file, so every rank reports and exits alike.
    if (rank == 0)
      std::fprintf(stderr, "zenopt-serve: %s\n", e.what());
    code = zen::cli::exitCodeOf(e.kind);
  } catch (const zenrt::Error &e) {
    std::fprintf(stderr, "zenopt-serve: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    code = exitCodeFor(e.status);
    if (e.status != ZENRT_ERR_MISMATCH && e.status != ZENRT_ERR_INVALID_ARGUMENT) {
      // The other ranks may be waiting for this one: end the job.
      std::this_thread::sleep_for(std::chrono::seconds(1));
      MPI_Abort(MPI_COMM_WORLD, code);
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "zenopt-serve: rank %d: internal error: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, zen::cli::ExitSoftware);
  }
  MPI_Finalize();
  return code;
}
