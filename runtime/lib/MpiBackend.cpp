//===- MpiBackend.cpp - Non-blocking MPI collectives -------------------------===//
#include "Backend.h"

#include "Compute.h"
#include "zenrt/Kernels.h"
#include "zenrt/zenrt.h"

#include <mpi.h>

#include <malloc.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace zenrt {

size_t elementBytes(Element element) {
  switch (element) {
  case Element::F32:
    return 4;
  case Element::F16:
  case Element::BF16:
    return 2;
  case Element::Byte:
    return 1;
  }
  return 1;
}

namespace {

using Clock = std::chrono::steady_clock;

// Tags on the control communicator, a duplicate of the base one: nothing the application
// sends on its own communicator can match them.
constexpr int kExchangeTag = 1, kQueryTag = 2, kReplyTag = 3;
// A position has one word per stream queue plus the iteration; streams are numbered
// 0..255 (docs/plan-format.md), so this holds any.
constexpr int kMaxPositionWords = 258;

std::string secondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

std::string rankList(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

}  // namespace

std::string silentRanksText(const std::vector<std::optional<Backend::Position>> &answers, int self,
                            Clock::duration grace, const std::vector<int> &names) {
  std::vector<int> silent;
  for (size_t r = 0; r < answers.size(); ++r)
    if (int(r) != self && !answers[r])
      silent.push_back(names.empty() ? int(r) : names[r]);
  if (silent.empty())
    return "";
  return rankList(silent) + " (no answer within " +
         secondsText(std::chrono::duration<double>(grace).count()) + " s: dead or hung)";
}

namespace {

void halfSumOp(void *in, void *inout, int *count, MPI_Datatype *) {
  kernels::halfSum(static_cast<const uint16_t *>(in), static_cast<uint16_t *>(inout),
                   size_t(*count));
}
void bf16SumOp(void *in, void *inout, int *count, MPI_Datatype *) {
  kernels::bf16Sum(static_cast<const uint16_t *>(in), static_cast<uint16_t *>(inout),
                   size_t(*count));
}

/// Open MPI's non-blocking collectives allocate a message-sized scratch buffer per call and
/// free it at completion. glibc hands such memory back to the kernel (its trim threshold), so
/// the next call page-faults it in again: a plan's 1.2 + 5.9 MB all-reduces at np 2 took a
/// mean 13-16 ms per iteration here instead of 5 ms. Freed memory stays mapped for reuse
/// unless the user tuned glibc's malloc through its environment (under another allocator,
/// e.g. mimalloc, mallopt changes nothing).
void retainFreedMemory() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("MALLOC_TRIM_THRESHOLD_") || std::getenv("MALLOC_MMAP_THRESHOLD_") ||
        std::getenv("GLIBC_TUNABLES"))
      return;
    // Both: setting either one alone turns off glibc's adaptation of the other.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest on 64-bit
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  });
}

class MpiBackend final : public Backend {
public:
  explicit MpiBackend(const void *comm) {
    retainFreedMemory();
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
      ownsMpi = true;
    }
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
      throw RuntimeError(ZENRT_ERR_BACKEND,
                         "MPI was initialised without MPI_THREAD_MULTIPLE (the runtime's "
                         "progress thread needs it): use MPI_Init_thread");
    base = comm ? *static_cast<const MPI_Comm *>(comm) : MPI_COMM_WORLD;
    MPI_Comm_rank(base, &myRank);
    MPI_Comm_size(base, &mySize);
    check(MPI_Op_create(&halfSumOp, 1, &halfSum), "MPI_Op_create");
    check(MPI_Op_create(&bf16SumOp, 1, &bf16Sum), "MPI_Op_create");
  }
  void openStreams(const std::vector<int> &streams) override {
    for (int stream : streams)
      comms[stream] = duplicateBounded("opening stream " + std::to_string(stream));
  }
  void setTimeout(double seconds) override { timeoutSeconds = seconds; }
  std::unique_ptr<Backend> split(int color) override {
    // Every rank joins the bounded duplicate first, so the split itself does not wait.
    MPI_Comm joined = duplicateBounded("splitting the ranks into groups");
    MPI_Comm part = MPI_COMM_NULL;
    const int code = MPI_Comm_split(joined, color, myRank, &part);
    MPI_Comm_free(&joined);
    check(code, "MPI_Comm_split");
    MPI_Comm_set_errhandler(part, MPI_ERRORS_RETURN);
    auto group = std::make_unique<MpiBackend>(&part);
    group->ownsBase = true;
    group->setTimeout(timeoutSeconds);
    return group;
  }
  ~MpiBackend() override {
    std::lock_guard<std::mutex> lock(mutex);
    if (queryRequest != MPI_REQUEST_NULL) {
      MPI_Cancel(&queryRequest);
      MPI_Wait(&queryRequest, MPI_STATUS_IGNORE);
    }
    pruneReplies();
    // Requests still pending (after a timeout) cannot be cancelled; leave their
    // communicators alone and let MPI_Finalize / process exit reclaim them.
    bool quiet = pending.empty() && replies.empty() && abandoned.empty();
    if (quiet) {
      for (auto &[stream, comm] : comms)
        MPI_Comm_free(&comm);
      if (control != MPI_COMM_NULL)
        MPI_Comm_free(&control);
      if (ownsBase)
        MPI_Comm_free(&base);
    }
    MPI_Op_free(&halfSum);
    MPI_Op_free(&bf16Sum);
    if (ownsMpi && quiet)
      MPI_Finalize();
  }

  int rank() const override { return myRank; }
  int size() const override { return mySize; }
  Compute &compute(int) override { return *host; }

  Request allReduce(void *data, size_t count, Element element, int stream) override {
    return start("MPI_Iallreduce", [&](MPI_Request *r) {
      return MPI_Iallreduce(MPI_IN_PLACE, data, toInt(count), type(element), op(element),
                            comm(stream), r);
    });
  }
  Request reduceScatter(const void *send, void *recv, size_t count, Element element,
                        int stream) override {
    return start("MPI_Ireduce_scatter_block", [&](MPI_Request *r) {
      return MPI_Ireduce_scatter_block(send, recv, toInt(count), type(element), op(element),
                                       comm(stream), r);
    });
  }
  Request allGather(const void *send, void *recv, size_t count, Element element,
                    int stream) override {
    return start("MPI_Iallgather", [&](MPI_Request *r) {
      return MPI_Iallgather(send, toInt(count), type(element), recv, toInt(count), type(element),
                            comm(stream), r);
    });
  }
  Request allToAll(const void *send, void *recv, size_t count, Element element,
                   int stream) override {
    return start("MPI_Ialltoall", [&](MPI_Request *r) {
      return MPI_Ialltoall(send, toInt(count), type(element), recv, toInt(count), type(element),
                           comm(stream), r);
    });
  }
  Request broadcast(void *data, size_t count, Element element, int root, int stream) override {
    return start("MPI_Ibcast", [&](MPI_Request *r) {
      return MPI_Ibcast(data, toInt(count), type(element), root, comm(stream), r);
    });
  }
  bool test(Request request) override {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = std::find_if(pending.begin(), pending.end(),
                           [&](const auto &entry) { return entry.first == request; });
    if (it == pending.end())
      return true;
    int done = 0;
    check(MPI_Test(&it->second, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) {
      *it = pending.back();
      pending.pop_back();
    }
    return done != 0;
  }
  std::vector<uint64_t> exchange(uint64_t value) override {
    std::unique_lock<std::mutex> lock(mutex);
    if (control == MPI_COMM_NULL) {
      lock.unlock();
      MPI_Comm channel = duplicateBounded("the start-up agreement");
      lock.lock();
      control = channel;
    }
    // Point to point, not MPI_Allgather: a rank that sends nothing can be named.
    auto round = std::make_unique<Round>(mySize, 1);
    round->token = value;
    for (int r = 0; r < mySize; ++r) {
      if (r == myRank)
        continue;
      check(MPI_Irecv(&round->words[size_t(r)][0], 1, MPI_UINT64_T, r, kExchangeTag, control,
                      &round->receives[size_t(r)]),
            "MPI_Irecv");
      check(MPI_Isend(&round->token, 1, MPI_UINT64_T, r, kExchangeTag, control,
                      &round->sends[size_t(r)]),
            "MPI_Isend");
    }
    bool complete = pollUntil(lock, deadline(), [&] { return round->testAll(); });
    if (!complete) {
      std::vector<int> silent = round->unanswered();
      abandoned.push_back(std::move(round));  // MPI may still write its buffers
      throw RuntimeError(ZENRT_ERR_TIMEOUT,
                         "rank " + std::to_string(myRank) + ": timeout after " +
                             secondsText(timeoutSeconds) +
                             " s in the start-up agreement: no word with " + rankList(silent) +
                             " (dead, stalled or not started)");
    }
    std::vector<uint64_t> all(static_cast<size_t>(mySize));
    for (int r = 0; r < mySize; ++r)
      all[size_t(r)] = r == myRank ? value : round->words[size_t(r)][0];
    return all;
  }
  void answerPeers(const Position &own) override {
    std::lock_guard<std::mutex> lock(mutex);
    lastPosition = own;
    answerLocked();
  }
  std::vector<std::optional<Position>> askPeers(const Position &own,
                                                Clock::time_point until) override {
    std::unique_lock<std::mutex> lock(mutex);
    lastPosition = own;
    std::vector<std::optional<Position>> answers(static_cast<size_t>(mySize));
    if (control == MPI_COMM_NULL)
      return answers;
    auto round = std::make_unique<Round>(mySize, kMaxPositionWords);
    round->token = uint64_t(myRank);
    for (int r = 0; r < mySize; ++r) {
      if (r == myRank)
        continue;
      // A failed call (a peer known dead) leaves the request null: no answer from it.
      MPI_Irecv(round->words[size_t(r)].data(), kMaxPositionWords, MPI_UINT64_T, r, kReplyTag,
                control, &round->receives[size_t(r)]);
      MPI_Isend(&round->token, 1, MPI_UINT64_T, r, kQueryTag, control, &round->sends[size_t(r)]);
    }
    pollUntil(lock, until, [&] { return round->testAll(); });
    for (int r = 0; r < mySize; ++r)
      if (r != myRank && round->answered(r))
        answers[size_t(r)] = Position(round->words[size_t(r)].begin(),
                                      round->words[size_t(r)].begin() + round->counts[size_t(r)]);
    if (!round->unanswered().empty())
      abandoned.push_back(std::move(round));  // MPI may still use its buffers
    return answers;
  }
  [[noreturn]] void abortJob(int exitCode) override {
    MPI_Abort(base, exitCode);
    std::abort();  // MPI_Abort does not return; never continue if it did
  }

private:
  /// One exchange or query round: a receive from and a send to every other rank, with
  /// buffers that stay valid as long as MPI may use them.
  struct Round {
    Round(int ranks, int words)
        : words(size_t(ranks), std::vector<uint64_t>(size_t(words))),
          counts(size_t(ranks), -1), receives(size_t(ranks), MPI_REQUEST_NULL),
          sends(size_t(ranks), MPI_REQUEST_NULL) {}
    /// Tests every open request; true once every receive and send completed (MPI is then
    /// done with the buffers).
    bool testAll() {
      bool all = true;
      for (size_t r = 0; r < receives.size(); ++r) {
        if (sends[r] != MPI_REQUEST_NULL) {
          int done = 0;
          if (MPI_Test(&sends[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            sends[r] = MPI_REQUEST_NULL;  // an error: nothing more will happen
          else if (!done)
            all = false;
        }
        if (receives[r] == MPI_REQUEST_NULL)
          continue;
        int done = 0;
        MPI_Status status;
        if (MPI_Test(&receives[r], &done, &status) != MPI_SUCCESS) {
          receives[r] = MPI_REQUEST_NULL;  // counts[r] stays -1: no answer
          continue;
        }
        if (done)
          MPI_Get_count(&status, MPI_UINT64_T, &counts[r]);
        else
          all = false;
      }
      return all;
    }
    bool answered(int r) const { return counts[size_t(r)] >= 0; }
    /// The ranks whose message, to or from this one, has not gone through.
    std::vector<int> unanswered() const {
      std::vector<int> ranks;
      for (size_t r = 0; r < receives.size(); ++r)
        if (receives[r] != MPI_REQUEST_NULL || sends[r] != MPI_REQUEST_NULL)
          ranks.push_back(int(r));
      return ranks;
    }
    std::vector<std::vector<uint64_t>> words;
    std::vector<int> counts;
    std::vector<MPI_Request> receives, sends;
    uint64_t token = 0;
  };
  /// A reply to a position query, kept until MPI is done with its buffer.
  struct Reply {
    Position words;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  Clock::time_point deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(timeoutSeconds));
  }

  /// Polls `done` (mutex held through `lock`) until it returns true or `until` passes,
  /// answering position queries meanwhile so that waiting ranks can tell this one is alive.
  bool pollUntil(std::unique_lock<std::mutex> &lock, Clock::time_point until,
                 const std::function<bool()> &done) {
    for (unsigned polls = 0;; ++polls) {
      if (done())
        return true;
      answerLocked();
      if (Clock::now() >= until)
        return false;
      lock.unlock();
      if (polls < 256)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      lock.lock();
    }
  }

  /// A duplicate of the base communicator, bounded by the timeout; errors come back as
  /// codes (a dead peer must not abort this rank before it can report).
  MPI_Comm duplicateBounded(const std::string &what) {
    std::unique_lock<std::mutex> lock(mutex);
    MPI_Comm duplicate = MPI_COMM_NULL;
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Comm_idup(base, &duplicate, &request), "MPI_Comm_idup");
    bool complete = pollUntil(lock, deadline(), [&] {
      int finished = 0;
      check(MPI_Test(&request, &finished, MPI_STATUS_IGNORE), "MPI_Test");
      return finished != 0;
    });
    if (!complete) {
      std::string silent;
      if (control != MPI_COMM_NULL) {
        lock.unlock();
        auto answers = askPeers(lastPosition, Clock::now() + peerQueryGrace(timeoutSeconds));
        lock.lock();
        std::vector<int> ranks;
        for (int r = 0; r < mySize; ++r)
          if (r != myRank && !answers[size_t(r)])
            ranks.push_back(r);
        if (!ranks.empty())
          silent = ": no answer from " + rankList(ranks) + " (dead or stalled)";
      }
      throw RuntimeError(ZENRT_ERR_TIMEOUT,
                         "rank " + std::to_string(myRank) + ": timeout after " +
                             secondsText(timeoutSeconds) + " s in " + what +
                             " (MPI_Comm_idup): not every rank joined" + silent);
    }
    MPI_Comm_set_errhandler(duplicate, MPI_ERRORS_RETURN);
    return duplicate;
  }

  /// Answers the queries received so far with lastPosition (mutex held).
  void answerLocked() {
    pruneReplies();
    if (control == MPI_COMM_NULL)
      return;
    for (;;) {
      if (queryRequest == MPI_REQUEST_NULL &&
          MPI_Irecv(&queryToken, 1, MPI_UINT64_T, MPI_ANY_SOURCE, kQueryTag, control,
                    &queryRequest) != MPI_SUCCESS)
        return;
      int done = 0;
      MPI_Status status;
      if (MPI_Test(&queryRequest, &done, &status) != MPI_SUCCESS || !done)
        return;
      replies.push_back({lastPosition, MPI_REQUEST_NULL});
      Reply &reply = replies.back();
      MPI_Isend(reply.words.data(), int(reply.words.size()), MPI_UINT64_T, status.MPI_SOURCE,
                kReplyTag, control, &reply.request);
    }
  }
  void pruneReplies() {
    replies.remove_if([](Reply &reply) {
      int done = 0;
      return reply.request == MPI_REQUEST_NULL ||
             MPI_Test(&reply.request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done;
    });
  }

  template <typename Start> Request start(const char *what, Start startCall) {
    std::lock_guard<std::mutex> lock(mutex);
    MPI_Request request;
    check(startCall(&request), what);
    Request id = nextRequest++;
    pending.emplace_back(id, request);
    return id;
  }
  static int toInt(size_t count) {
    if (count > size_t(INT_MAX))
      throw RuntimeError(ZENRT_ERR_BACKEND, "collective of " + std::to_string(count) +
                                                " elements exceeds MPI's int count");
    return int(count);
  }
  static MPI_Datatype type(Element element) {
    switch (element) {
    case Element::F32:
      return MPI_FLOAT;
    case Element::F16:
    case Element::BF16:
      return MPI_UINT16_T;
    case Element::Byte:
      return MPI_BYTE;
    }
    return MPI_BYTE;
  }
  MPI_Op op(Element element) const {
    switch (element) {
    case Element::F16:
      return halfSum;
    case Element::BF16:
      return bf16Sum;
    default:
      return MPI_SUM;
    }
  }
  MPI_Comm comm(int stream) const {
    auto it = comms.find(stream);
    if (it == comms.end())
      throw RuntimeError(ZENRT_ERR_INTERNAL, "no communicator for stream " +
                                                 std::to_string(stream));
    return it->second;
  }
  void check(int code, const char *what) const {
    if (code == MPI_SUCCESS)
      return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw RuntimeError(ZENRT_ERR_BACKEND, std::string(what) + " failed: " +
                                              std::string(text, size_t(length)));
  }

  std::unique_ptr<Compute> host = createHostCompute();
  bool ownsMpi = false;
  bool ownsBase = false;  // a split's group communicator
  MPI_Comm base = MPI_COMM_NULL;
  int myRank = 0, mySize = 1;
  MPI_Op halfSum = MPI_OP_NULL, bf16Sum = MPI_OP_NULL;
  std::map<int, MPI_Comm> comms;
  double timeoutSeconds = 300;
  MPI_Comm control = MPI_COMM_NULL;  // start-up exchanges and position queries
  MPI_Request queryRequest = MPI_REQUEST_NULL;
  uint64_t queryToken = 0;
  Position lastPosition;
  std::list<Reply> replies;
  std::list<std::unique_ptr<Round>> abandoned;  // rounds a timeout left open
  std::mutex mutex;
  // Few at a time (a stage's pieces per stream): a vector keeps its storage across calls,
  // where a hash map allocated a node per collective.
  std::vector<std::pair<Request, MPI_Request>> pending;
  Request nextRequest = 1;
};

}  // namespace

std::unique_ptr<Backend> createMpiBackend(const void *comm) {
  return std::make_unique<MpiBackend>(comm);
}

}  // namespace zenrt
