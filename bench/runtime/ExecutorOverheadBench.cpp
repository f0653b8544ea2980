// The executor's overhead per collective over a bare non-blocking MPI call of the
// same size. Run under mpirun (every rank runs the same fixed iteration counts;
// rank 0 reports):
//   mpirun -np 2 bench-runtime-overhead
// Bare: MPI_Iallreduce in place + MPI_Test polling (with yield) on the caller's thread.
// Runtime: a one-tensor, one-bucket plan: zenrt mark_ready + wait_all (fusion
// copy in, all-reduce started inside mark_ready for a small bucket or by the
// progress thread, completed by the waiter driving progress or the progress
// thread, average, copy back).
#include "zenrt/Plan.h"
#include "zenrt/Runtime.h"

#include <benchmark/benchmark.h>
#include <mpi.h>

#include <thread>
#include <vector>

namespace {

/// Ranks other than 0 run the same benchmarks silently.
class QuietReporter : public benchmark::BenchmarkReporter {
public:
  bool ReportContext(const Context &) override { return true; }
  void ReportRuns(const std::vector<Run> &) override {}
};

void BareMpiAllReduce(benchmark::State &state) {
  std::vector<float> data(size_t(state.range(0)), 1.0f);
  for (auto _ : state) {
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, data.data(), int(data.size()), MPI_FLOAT, MPI_SUM,
                   MPI_COMM_WORLD, &request);
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    while (!done) {
      std::this_thread::yield();  // the executor's polling policy, for a like-for-like count
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0) * 4);
}

void RuntimeAllReduce(benchmark::State &state) {
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<float> data(size_t(state.range(0)), 1.0f);
  zenrt::Runtime runtime = zenrt::Runtime::fromText(
      zenrt::writePlan(zenrt::oneBucketPlan(state.range(0), ranks, "bench")), "overhead-plan");
  runtime.registerGradient("g", data.data(), state.range(0));
  for (auto _ : state) {
    runtime.markReady("g");
    runtime.waitAll();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0) * 4);
}

}  // namespace

// Fixed iteration counts: every rank must call the same collectives.
BENCHMARK(BareMpiAllReduce)->Arg(1)->Arg(1024)->Arg(262144)->Iterations(2000)->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(RuntimeAllReduce)->Arg(1)->Arg(1024)->Arg(262144)->Iterations(2000)->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  benchmark::Initialize(&argc, argv);
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    QuietReporter quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  MPI_Finalize();
  return 0;
}
