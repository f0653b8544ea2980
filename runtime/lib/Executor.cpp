//===- Executor.cpp - Plan executor ------------------------------------------===//
#include "Executor.h"

#include "Compute.h"
#include "Mutation.h"
#include "zenrt/zenrt.h"

#include <algorithm>
#include <cstdio>
#include <new>
#include <set>

namespace zenrt {
namespace {

/// Buckets up to this size (64 KiB of fp32) are compressed and started by markReady itself.
constexpr size_t kInlineStartElements = 16384;
/// How often an idle progress thread still answers the other ranks' position queries.
constexpr auto kIdleAnswerPeriod = std::chrono::milliseconds(10);

std::string secondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

/// Joins what a timed-out rank learnt: the ranks behind it (`behind`, already worded) and
/// the ranks that did not answer its query within `grace`; "" when neither.
std::string waitedForText(std::string behind,
                          const std::vector<std::optional<Backend::Position>> &answers,
                          int self, std::chrono::steady_clock::duration grace) {
  const std::string silent = silentRanksText(answers, self, grace);
  if (silent.empty())
    return behind;
  return behind + (behind.empty() ? "" : ", ") + silent;
}

std::string hex(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

Executor::Executor(Plan plan, std::unique_ptr<Backend> backendIn, ExecutorOptions optionsIn)
    : thePlan(std::move(plan)), planHashValue(planHash(thePlan)), backend(std::move(backendIn)),
      options(optionsIn) {
  agreeOnPlan();
  for (size_t t = 0; t < thePlan.tensors.size(); ++t)
    tensorByName[thePlan.tensors[t].name] = t;
  tensors.resize(thePlan.tensors.size());
  buckets.resize(thePlan.buckets.size());
  for (size_t b = 0; b < thePlan.buckets.size(); ++b) {
    try {
      setUpBucket(b);
    } catch (const AllocationError &e) {
      std::string size = e.bytes == SIZE_MAX ? std::string("more than 2^64")
                                             : std::to_string(e.bytes);
      throw RuntimeError(ZENRT_ERR_INTERNAL, "rank " + std::to_string(backend->rank()) +
                                                 ": bucket " + std::to_string(b) +
                                                 ": out of memory: cannot allocate a buffer of " +
                                                 size + " bytes");
    } catch (const std::bad_alloc &) {
      throw RuntimeError(ZENRT_ERR_INTERNAL, "rank " + std::to_string(backend->rank()) +
                                                 ": bucket " + std::to_string(b) +
                                                 ": out of memory setting up its " +
                                                 std::to_string(thePlan.buckets[b].bytes) +
                                                 "-byte bucket");
    }
  }
  buildQueues();
  for (size_t b = 0; b < buckets.size(); ++b)
    everyBucket.push_back(b);
  progressThread = std::thread([this] { progressLoop(); });
}

/// Allocates bucket b's buffers and builds its program.
void Executor::setUpBucket(size_t b) {
  const Bucket &spec = thePlan.buckets[b];
  BucketRun &run = buckets[b];
  run.buffers.index = b;
  run.buffers.elements = size_t(spec.elements);
  run.buffers.errorFeedback = spec.compression.errorFeedback;
  run.comm = spec.group == BucketGroup::ExpertReplicas && !mutated(Mutation::ExpertsOverWorld)
                 ? expertBackend.get()
                 : backend.get();
  run.first = &run.comm->compute(int(spec.collectives.front().stream));
  run.last = &run.comm->compute(int(spec.collectives.back().stream));
  size_t elements = size_t(spec.elements);
  run.buffers.fusion = run.first->allocate<float>(elements);
  if (spec.compression.errorFeedback)
    run.buffers.residual = run.first->allocate<float>(elements);
  if (spec.compression.errorFeedback || options.keepSent)
    run.buffers.sent = run.first->allocate<float>(elements);
  for (size_t e = 0; e < spec.tensors.size(); ++e) {
    size_t t = tensorByName.at(spec.tensors[e].name);
    run.tensorIds.push_back(t);
    tensors[t].bucket = b;
    tensors[t].entry = e;
  }
  run.program = createProgram(spec, *run.comm);
  if (spec.collectives.back().decoupled)
    for (size_t s = 0; s < run.program->stageCount(); ++s)
      if (run.program->stageCollective(s) == spec.collectives.size() - 1) {
        run.decoupledStage = s;
        break;
      }
}

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  workReady.notify_all();
  if (progressThread.joinable())
    progressThread.join();
}

void Executor::agreeOnPlan() {
  backend->setTimeout(options.timeoutSeconds);
  std::vector<uint64_t> hashes = backend->exchange(planHashValue);
  std::vector<uint64_t> sizes = backend->exchange(uint64_t(thePlan.cluster.worldSize));
  std::string prefix = "rank " + std::to_string(backend->rank()) + ": ";
  bool same = true;
  for (uint64_t h : hashes)
    same &= h == planHashValue;
  if (!same) {
    std::string detail;
    for (size_t r = 0; r < hashes.size() && r < 16; ++r)
      detail += (r ? ", " : "") + std::string("rank ") + std::to_string(r) + " " + hex(hashes[r]) +
                " (world_size " + std::to_string(sizes[r]) + ")";
    throw RuntimeError(ZENRT_ERR_MISMATCH,
                       prefix + "the ranks were given different plans (plan hashes: " + detail +
                           "); every rank must run the same plan file");
  }
  if (thePlan.cluster.worldSize != backend->size())
    throw RuntimeError(ZENRT_ERR_MISMATCH,
                       prefix + "the plan is for world_size " +
                           std::to_string(thePlan.cluster.worldSize) + " but the job has " +
                           std::to_string(backend->size()) + " ranks");
  std::set<int> streamNumbers, expertStreams;
  for (const Bucket &bucket : thePlan.buckets)
    for (const Collective &collective : bucket.collectives) {
      streamNumbers.insert(int(collective.stream));
      if (bucket.group == BucketGroup::ExpertReplicas)
        expertStreams.insert(int(collective.stream));
    }
  backend->openStreams(std::vector<int>(streamNumbers.begin(), streamNumbers.end()));
  if (!expertStreams.empty()) {
    // Experts spread over ep consecutive ranks: rank r holds the experts of r % ep.
    expertBackend = backend->split(int(backend->rank() % expertParallelOf(thePlan)));
    expertBackend->openStreams(std::vector<int>(expertStreams.begin(), expertStreams.end()));
  }
}

void Executor::buildQueues() {
  std::map<int, size_t> queueOfStream;
  std::vector<size_t> nextCollective(thePlan.buckets.size(), 0);
  for (const Task &task : thePlan.schedule) {
    if (task.kind != TaskKind::Collective)
      continue;
    size_t b = size_t(task.bucket);
    size_t c = nextCollective[b]++;
    int stream = int(thePlan.buckets[b].collectives[c].stream);
    auto [it, inserted] = queueOfStream.emplace(stream, streams.size());
    if (inserted)
      streams.push_back(StreamQueue{stream, {}, 0, 0, 0});
    streams[it->second].ops.emplace_back(b, c);
  }
}

size_t Executor::tensorIndex(std::string_view tensor) const {
  auto it = tensorByName.find(tensor);
  if (it == tensorByName.end())
    throw RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                       "rank " + std::to_string(backend->rank()) + ": unknown gradient '" +
                           std::string(tensor) + "' (not in the plan)");
  return it->second;
}

void Executor::throwIfFailed() const {
  if (failedStatus)
    throw RuntimeError(ZENRT_ERR_ABORTED, failure);
}

void Executor::failWith(int status, const std::string &message) {
  failedStatus = status;
  failure = message;
  progressMade.notify_all();
  workReady.notify_all();
  throw RuntimeError(status, message);
}

void Executor::registerGradient(std::string_view tensor, float *data, int64_t elements) {
  std::lock_guard<std::mutex> lock(mutex);
  throwIfFailed();
  size_t t = tensorIndex(tensor);
  const std::string prefix =
      "rank " + std::to_string(backend->rank()) + ": gradient '" + std::string(tensor) + "': ";
  if (!data)
    throw RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, prefix + "null buffer");
  std::string rejected = buckets[tensors[t].bucket].first->rejectGradient(data);
  if (!rejected.empty())
    throw RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, prefix + "buffer is " + rejected);
  if (elements != thePlan.tensors[t].elements)
    throw RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                       prefix + "buffer has " + std::to_string(elements) +
                           " elements but the plan has " +
                           std::to_string(thePlan.tensors[t].elements));
  BucketState state = buckets[tensors[t].bucket].state;
  if (state != BucketState::Idle && state != BucketState::Done)
    throw RuntimeError(ZENRT_ERR_STATE, prefix + "cannot be re-registered while its bucket is "
                                                 "being communicated");
  registered += tensors[t].data == nullptr;
  tensors[t].data = data;
}

void Executor::markReady(std::string_view tensor) {
  std::unique_lock<std::mutex> lock(mutex);
  throwIfFailed();
  size_t t = tensorIndex(tensor);
  if (registered < tensors.size())
    for (size_t other = 0; other < tensors.size(); ++other)
      if (!tensors[other].data)
        throw RuntimeError(ZENRT_ERR_STATE, "rank " + std::to_string(backend->rank()) +
                                                ": gradient '" + thePlan.tensors[other].name +
                                                "' is not registered (register every gradient "
                                                "before marking any ready)");
  TensorRun &tensorRun = tensors[t];
  if (tensorRun.markedIteration == iteration)
    throw RuntimeError(ZENRT_ERR_STATE, "rank " + std::to_string(backend->rank()) +
                                            ": gradient '" + std::string(tensor) +
                                            "' was already marked ready in iteration " +
                                            std::to_string(iteration));
  size_t b = tensorRun.bucket;
  BucketRun &run = buckets[b];
  if (run.state == BucketState::Idle || run.buffers.iteration != iteration) {
    // The bucket's previous iteration may still run a decoupled all-gather.
    waitFor(lock, "zenrt_mark_ready", {b}, [&](size_t) {
      return run.state == BucketState::Idle || run.state == BucketState::Done;
    });
    run.buffers.iteration = iteration;
    run.state = BucketState::Filling;
    run.marked = 0;
  }
  tensorRun.markedIteration = iteration;
  ++markedThisIteration;
  const BucketTensor &entry = thePlan.buckets[b].tensors[tensorRun.entry];
  float *destination = run.buffers.fusion.data() + entry.offset;
  const float *source = tensorRun.data;
  lock.unlock();
  run.first->copy(destination, source, size_t(entry.elements) * sizeof(float));
  lock.lock();
  if (++run.marked == run.tensorIds.size()) {
    run.state = BucketState::Complete;
    // A small bucket is compressed and started right here: cheaper than handing it to
    // the progress thread. The progress thread still polls it unless a waiter drives.
    const bool startedHere = run.buffers.elements <= kInlineStartElements;
    if (startedHere)
      driveProgress();
    // Started here with the iteration's last gradient, its caller waits next and drives
    // it: waking the progress thread cost ~7 us a step at np 2 on two cores
    // (bench-runtime-overhead). A caller that does not wait has it polled within
    // kIdleAnswerPeriod.
    const bool waiterNext = startedHere && markedThisIteration == tensors.size();
    if (drivers == 0 && !waiterNext && workPending())
      workReady.notify_all();
  }
}

bool Executor::mainDone(const BucketRun &run) const {
  if (run.buffers.iteration != iteration || run.state == BucketState::Idle)
    return false;
  return run.state == BucketState::Done ||
         (run.state == BucketState::Communicating && run.nextStage >= run.decoupledStage);
}

bool Executor::workPending() const {
  for (const BucketRun &run : buckets)
    if (run.stageInFlight || run.state == BucketState::Complete)
      return true;
  return false;
}

bool Executor::allDone(const BucketRun &run) const { return run.state == BucketState::Done; }

void Executor::holdCollectives(bool hold) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    throwIfFailed();
    held = hold;
  }
  workReady.notify_all();
}

void Executor::throwIfHeld(const char *call) const {
  if (held)
    throw RuntimeError(ZENRT_ERR_STATE, "rank " + std::to_string(backend->rank()) + ": " +
                                            call + " while the collectives are held "
                                            "(zenrt_hold_collectives)");
}

void Executor::wait(std::string_view tensor) {
  std::unique_lock<std::mutex> lock(mutex);
  throwIfFailed();
  throwIfHeld("zenrt_wait");
  size_t b = tensors[tensorIndex(tensor)].bucket;
  if (buckets[b].state == BucketState::Idle)
    throw RuntimeError(ZENRT_ERR_STATE, "rank " + std::to_string(backend->rank()) +
                                            ": gradient '" + std::string(tensor) +
                                            "' was never marked ready");
  waitFor(lock, "zenrt_wait", {b}, [&](size_t bucket) { return allDone(buckets[bucket]); });
}

void Executor::waitAll() {
  std::unique_lock<std::mutex> lock(mutex);
  throwIfFailed();
  throwIfHeld("zenrt_wait_all");
  waitFor(lock, "zenrt_wait_all", everyBucket,
          [&](size_t bucket) { return mainDone(buckets[bucket]); });
  ++iteration;
  markedThisIteration = 0;
}

bool Executor::test(std::optional<std::string_view> tensor) {
  std::lock_guard<std::mutex> lock(mutex);
  throwIfFailed();
  // A test progresses what is in flight, as MPI_Test does: the progress thread may not
  // have been woken for the iteration's last bucket (markReady).
  if (drivers == 0)
    driveProgress();
  if (tensor)
    return allDone(buckets[tensors[tensorIndex(*tensor)].bucket]);
  for (const BucketRun &run : buckets)
    if (!mainDone(run))
      return false;
  return true;
}

void Executor::abort(int exitCode) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    failedStatus = ZENRT_ERR_ABORTED;
    failure = "rank " + std::to_string(backend->rank()) + ": aborted";
  }
  progressMade.notify_all();
  backend->abortJob(exitCode);
  std::abort();  // abortJob does not return
}

template <typename Ready>
void Executor::waitFor(std::unique_lock<std::mutex> &lock, const char *call,
                       const std::vector<size_t> &bucketList, Ready ready) {
  auto now = std::chrono::steady_clock::now();
  auto deadline = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(options.timeoutSeconds));
  auto firstWaiting = [&]() -> size_t {
    for (size_t b : bucketList)
      if (!ready(b))
        return b;
    return SIZE_MAX;
  };
  if (firstWaiting() == SIZE_MAX)
    return throwIfFailed();
  // Drive progress on this thread (compress, start, test, finish) while the caller waits: it
  // has nothing else to do, a short collective completes without waking the progress thread,
  // and Open MPI moves a collective only inside its calls, where the progress thread backs
  // off to sleeps during a long one (a 25 MB gradient sync at np 2 took 30-40 ms that way
  // instead of 4-7). Until the peers are asked where they are; then block.
  const auto driveUntil = std::min(deadline, now + peerQueryStart(options.timeoutSeconds));
  ++drivers;
  bool done = false;
  try {
    for (;;) {
      throwIfFailed();
      driveProgress();
      if ((done = firstWaiting() == SIZE_MAX) || std::chrono::steady_clock::now() >= driveUntil)
        break;
      lock.unlock();
      std::this_thread::yield();  // an oversubscribed machine's other ranks get the core
      lock.lock();
    }
  } catch (...) {
    --drivers;
    throw;
  }
  // The progress thread takes over what is still in flight (e.g. a decoupled all-gather).
  if (--drivers == 0 && workPending())
    workReady.notify_all();
  if (done)
    return throwIfFailed();
  // The other ranks are asked where they are in the wait's last grace, so that a timeout
  // is reported at the deadline with what they said.
  const auto askAt = now + peerQueryStart(options.timeoutSeconds);
  std::optional<PeerAnswers> answers;
  for (size_t waiting = firstWaiting(); waiting != SIZE_MAX; waiting = firstWaiting()) {
    throwIfFailed();
    const auto current = std::chrono::steady_clock::now();
    const bool inFlight = buckets[waiting].stageInFlight;
    if (current >= deadline) {
      std::string message = "rank " + std::to_string(backend->rank()) + ": timeout after " +
                            secondsText(options.timeoutSeconds) + " s in " + call +
                            " (iteration " + std::to_string(iteration) + "): " + describe(waiting);
      if (inFlight) {
        if (!answers)  // in flight only since the query's time
          answers = askPeers(lock);
        message += ": " + waitedFor(waiting, *answers);
      }
      failWith(ZENRT_ERR_TIMEOUT, message);
    }
    if (inFlight && !answers && current >= askAt) {
      answers = askPeers(lock);
      continue;
    }
    progressMade.wait_until(lock, inFlight && !answers ? askAt : deadline);
  }
  throwIfFailed();
}

std::string Executor::describe(size_t b) const {
  const BucketRun &run = buckets[b];
  const Bucket &spec = thePlan.buckets[b];
  std::string text = "bucket " + std::to_string(b) + " ";
  if (run.state == BucketState::Idle || run.state == BucketState::Filling ||
      run.buffers.iteration != iteration) {
    std::string missing;
    size_t count = 0;
    for (size_t t : run.tensorIds)
      if (tensors[t].markedIteration != iteration && count++ < 4)
        missing += (missing.empty() ? "" : ", ") + thePlan.tensors[t].name;
    return text + "is waiting for " + std::to_string(count) + " of " +
           std::to_string(run.tensorIds.size()) + " gradients to be marked ready (" + missing +
           (count > 4 ? ", ..." : "") + ")";
  }
  if (run.state == BucketState::Complete)
    return text + "is waiting to be compressed";
  if (run.state == BucketState::Done)
    return text + "is done";
  size_t c = run.program->stageCollective(run.nextStage);
  const Collective &collective = spec.collectives[c];
  std::string op = std::string(toString(collective.op)) + " (collective " + std::to_string(c) +
                   ", " + std::to_string(collective.chunks) + " chunks) on stream " +
                   std::to_string(collective.stream);
  if (run.stageInFlight)
    return text + op + ", sequence " + std::to_string(run.sequence) + ", did not complete";
  for (const StreamQueue &queue : streams) {
    if (queue.stream != int(collective.stream) || queue.ops.empty())
      continue;
    auto [headBucket, headCollective] = queue.ops[queue.cursor];
    return text + op + " is queued behind bucket " + std::to_string(headBucket) + "'s " +
           toString(thePlan.buckets[headBucket].collectives[headCollective].op) + " (sequence " +
           std::to_string(queue.issued + 1) + " on that stream)";
  }
  return text + op + " is queued";
}

Backend::Position Executor::position() const {
  Backend::Position words{uint64_t(iteration)};
  for (const StreamQueue &queue : streams)
    words.push_back(queue.issued);
  return words;
}

Executor::PeerAnswers Executor::askPeers(std::unique_lock<std::mutex> &lock) {
  const Backend::Position own = position();
  const auto grace = peerQueryGrace(options.timeoutSeconds);
  lock.unlock();
  PeerAnswers answers = backend->askPeers(own, std::chrono::steady_clock::now() + grace);
  lock.lock();
  return answers;
}

std::string Executor::waitedFor(size_t b, const PeerAnswers &answers) const {
  const BucketRun &run = buckets[b];
  int stream = int(thePlan.buckets[b].collectives[run.program->stageCollective(run.nextStage)].stream);
  size_t queue = 0;
  while (streams[queue].stream != stream)
    ++queue;
  std::string behind;
  for (size_t r = 0; r < answers.size(); ++r) {
    if (!answers[r])
      continue;
    const Backend::Position &at = *answers[r];
    uint64_t issued = queue + 1 < at.size() ? at[queue + 1] : 0;
    if (issued < run.sequence)
      behind += std::string(behind.empty() ? "" : ", ") + "rank " + std::to_string(r) +
                " (at sequence " + std::to_string(issued) + " on stream " +
                std::to_string(stream) + ": it has not reached this collective)";
  }
  std::string text = waitedForText(behind, answers, backend->rank(),
                                   peerQueryGrace(options.timeoutSeconds));
  return text.empty() ? "every rank has reached it; the backend did not complete it"
                      : "waiting for " + text;
}

void Executor::await(const std::function<bool()> &done, const std::string &what) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(options.timeoutSeconds));
  // As waitFor: the other ranks are asked in the wait's last grace.
  const auto askAt = start + peerQueryStart(options.timeoutSeconds);
  std::optional<PeerAnswers> answers;
  // Polled without sleeping: MPI progresses a non-blocking collective only inside MPI
  // calls, and a blocking one would spin the same way.
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      throwIfFailed();
      if (!answers && std::chrono::steady_clock::now() >= askAt)
        answers = askPeers(lock);
    }
    if (done())
      return;
    if (std::chrono::steady_clock::now() >= deadline)
      break;
    std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(mutex);
  if (!answers)  // done() itself outlasted the query's time
    answers = askPeers(lock);
  std::string behind;
  for (size_t r = 0; r < answers->size(); ++r)
    if ((*answers)[r] && !(*answers)[r]->empty() && (*(*answers)[r])[0] < uint64_t(iteration))
      behind += std::string(behind.empty() ? "" : ", ") + "rank " + std::to_string(r) +
                " (in iteration " + std::to_string((*(*answers)[r])[0]) + ")";
  std::string text = waitedForText(behind, *answers, backend->rank(),
                                   peerQueryGrace(options.timeoutSeconds));
  failWith(ZENRT_ERR_TIMEOUT,
           "rank " + std::to_string(backend->rank()) + ": timeout after " +
               secondsText(options.timeoutSeconds) + " s in " + what + " (iteration " +
               std::to_string(iteration) + "): " +
               (text.empty() ? "every rank answered and none is behind this one"
                             : "waiting for " + text));
}

bool Executor::driveProgress() {
  try {
    return progressOnce();
  } catch (const RuntimeError &e) {
    failWith(e.status, "rank " + std::to_string(backend->rank()) + ": " + e.what());
  } catch (const std::exception &e) {
    failWith(ZENRT_ERR_INTERNAL, "rank " + std::to_string(backend->rank()) + ": " + e.what());
  }
}

void Executor::progressLoop() {
  std::unique_lock<std::mutex> lock(mutex);
  unsigned idlePolls = 0;
  auto answered = std::chrono::steady_clock::now();
  while (!stopping) {
    // Whatever this rank does, it tells waiting ranks where it is (every millisecond at
    // most: this loop also polls collectives in flight).
    auto now = std::chrono::steady_clock::now();
    if (now - answered >= std::chrono::milliseconds(1)) {
      backend->answerPeers(position());
      answered = now;
    }
    if (failedStatus || drivers > 0) {
      workReady.wait_for(lock, kIdleAnswerPeriod);
      continue;
    }
    bool progressed = false;
    try {
      progressed = driveProgress();
    } catch (const RuntimeError &) {
      continue;  // recorded as the handle's failure; waiters report it
    }
    if (progressed) {
      idlePolls = 0;
      continue;
    }
    if (!workPending()) {
      workReady.wait_for(lock, kIdleAnswerPeriod);
      continue;
    }
    // Collectives in flight: poll, yielding first (lowest latency), then sleeping briefly
    // so an oversubscribed machine's other ranks get the core.
    lock.unlock();
    if (++idlePolls < 256)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    lock.lock();
  }
}

bool Executor::progressOnce() {
  bool progressed = compressComplete();
  progressed |= issueReady();
  if (testInFlight()) {
    // A completed stage may let the next one start: start it now, so that after a call no
    // startable stage is left behind (waiters stop driving on that invariant).
    issueReady();
    progressed = true;
  }
  return progressed;
}

bool Executor::compressComplete() {
  bool progressed = false;
  for (BucketRun &run : buckets) {
    if (run.state != BucketState::Complete)
      continue;
    BucketBuffers &b = run.buffers;
    if (b.errorFeedback && !mutated(Mutation::ForgetsResidual))
      run.first->add(b.residual.data(), b.fusion.data(), b.elements);
    if (run.program->compress(b) && b.errorFeedback)
      run.first->subtract(b.fusion.data(), b.sent.data(), b.residual.data(), b.elements);
    run.state = BucketState::Communicating;
    run.nextStage = 0;
    progressed = true;
  }
  return progressed;
}

bool Executor::issueReady() {
  bool progressed = false;
  if (held)
    return false;
  for (StreamQueue &queue : streams) {
    while (!queue.ops.empty()) {
      // One collective in flight per stream, as a stream means: Open MPI progresses several
      // outstanding non-blocking collectives on one communicator far slower than in turn
      // (1.2 MB + 5.9 MB all-reduces at np 2: 4.6 ms together, 2.0 ms one after the other).
      if (issuedStillInFlight(queue))
        break;
      auto [b, c] = queue.ops[queue.cursor];
      BucketRun &run = buckets[b];
      if (run.state != BucketState::Communicating || run.buffers.iteration != queue.iteration ||
          run.stageInFlight || run.nextStage >= run.program->stageCount() ||
          run.program->stageCollective(run.nextStage) != c)
        break;
      run.program->issue(run.nextStage, run.buffers, run.requests);
      run.stageInFlight = true;
      run.sequence = ++queue.issued;
      queue.lastIssued = {b, c};
      progressed = true;
      size_t following = run.nextStage + 1;
      if (following < run.program->stageCount() && run.program->stageCollective(following) == c)
        break;  // the collective's next stage starts when this one completes
      if (++queue.cursor == queue.ops.size()) {
        queue.cursor = 0;
        ++queue.iteration;
      }
    }
  }
  return progressed;
}

bool Executor::issuedStillInFlight(const StreamQueue &queue) const {
  auto [b, c] = queue.lastIssued;
  if (b == SIZE_MAX)
    return false;
  const BucketRun &run = buckets[b];
  return run.stageInFlight && run.program->stageCollective(run.nextStage) == c;
}

bool Executor::testInFlight() {
  bool completed = false;
  for (BucketRun &run : buckets) {
    if (!run.stageInFlight)
      continue;
    auto open = std::remove_if(run.requests.begin(), run.requests.end(),
                               [&](Backend::Request request) { return run.comm->test(request); });
    run.requests.erase(open, run.requests.end());
    if (!run.requests.empty())
      continue;
    run.stageInFlight = false;
    completed = true;
    if (++run.nextStage == run.program->stageCount())
      finishBucket(run);
    else if (run.nextStage == run.decoupledStage)
      progressMade.notify_all();
  }
  return completed;
}

void Executor::finishBucket(BucketRun &run) {
  run.program->finish(run.buffers);
  const Bucket &spec = thePlan.buckets[run.buffers.index];
  for (size_t e = 0; e < spec.tensors.size(); ++e)
    run.last->copy(tensors[run.tensorIds[e]].data, run.buffers.fusion.data() + spec.tensors[e].offset,
                   size_t(spec.tensors[e].elements) * sizeof(float));
  run.last->synchronize();  // device: the results are in the gradients before Done
  run.state = BucketState::Done;
  progressMade.notify_all();
}

}  // namespace zenrt
