//===- Programs.cpp - Per-bucket compression + collective programs ---------===//
#include "Programs.h"

#include "Mutation.h"

#include "zenrt/Kernels.h"
#include "zenrt/zenrt.h"

#include <algorithm>
#include <cmath>

namespace zenrt {

std::vector<Segment> splitIntoChunks(size_t total, int64_t chunks) {
  std::vector<Segment> out;
  size_t count = size_t(chunks);
  for (size_t j = 0; j < count; ++j) {
    size_t begin = total * j / count, end = total * (j + 1) / count;
    if (end > begin)
      out.push_back({begin, end - begin});
  }
  return out;
}

namespace {

size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

/// Plan collectives as the programs see them: stream and chunk count.
struct CollectiveSlot {
  int stream;
  int64_t chunks;
};

std::vector<CollectiveSlot> slotsOf(const Bucket &bucket) {
  std::vector<CollectiveSlot> slots;
  for (const Collective &c : bucket.collectives)
    slots.push_back({int(c.stream), c.chunks});
  return slots;
}

/// Reduce-scatter-shaped layout of one chunked dense collective: each chunk
/// segment is padded to size * shard elements; rank r owns block r.
struct ShardLayout {
  struct Piece {
    Segment segment;
    size_t shard;        // elements per rank block
    size_t paddedBegin;  // offset of the piece in the padded buffers
    size_t shardBegin;   // offset of this rank's shard in the shard buffer
  };
  std::vector<Piece> pieces;
  size_t paddedTotal = 0, shardTotal = 0, largestShard = 0;

  ShardLayout(size_t elements, int64_t chunks, size_t ranks) {
    for (Segment segment : splitIntoChunks(elements, chunks)) {
      size_t shard = ceilDiv(segment.length, ranks);
      pieces.push_back({segment, shard, paddedTotal, shardTotal});
      largestShard = std::max(largestShard, shard);
      paddedTotal += shard * ranks;
      shardTotal += shard;
    }
  }
};

/// All-gather of an opaque byte payload of equal size on every rank, chunked.
class ChunkedGather {
public:
  ChunkedGather(Compute &compute, size_t payloadBytes, int64_t chunks, size_t ranks)
      : compute(compute), payloadBytes(payloadBytes), ranks(ranks),
        pieces(splitIntoChunks(payloadBytes, chunks)),
        gathered(compute.allocate<uint8_t>(bufferBytes(payloadBytes, ranks))),
        assembled(compute.allocate<uint8_t>(pieces.size() > 1 ? payloadBytes : 0)) {}
  void issue(Backend &backend, const uint8_t *payload, int stream,
             std::vector<Backend::Request> &requests) {
    for (const Segment &piece : pieces)
      requests.push_back(backend.allGather(payload + piece.offset,
                                           gathered.data() + piece.offset * ranks, piece.length,
                                           Element::Byte, stream));
  }
  /// Rank r's whole payload, reassembled from the chunk regions.
  /// (Device: valid for work queued after this call, until the next call.)
  const uint8_t *payloadOf(size_t r) {
    if (pieces.size() == 1)
      return gathered.data() + r * payloadBytes;
    for (const Segment &piece : pieces)
      compute.copy(assembled.data() + piece.offset,
                   gathered.data() + piece.offset * ranks + r * piece.length, piece.length);
    return assembled.data();
  }

private:
  Compute &compute;
  size_t payloadBytes, ranks;
  std::vector<Segment> pieces;
  Buffer<uint8_t> gathered, assembled;
};

//===----------------------------------------------------------------------===//
// Dense: none, fp16, bf16
//===----------------------------------------------------------------------===//

class DenseProgram final : public BucketProgram {
public:
  DenseProgram(const Bucket &bucket, Backend &backend)
      : backend(backend), slots(slotsOf(bucket)), ranks(size_t(backend.size())),
        layout(size_t(bucket.elements), bucket.collectives[0].chunks, ranks),
        first(backend.compute(slots.front().stream)), last(backend.compute(slots.back().stream)) {
    switch (bucket.compression.method) {
    case CompressionMethod::FP16:
      element = Element::F16;
      break;
    case CompressionMethod::BF16:
      element = Element::BF16;
      break;
    default:
      element = Element::F32;
    }
    if (element != Element::F32)
      wire16 = first.allocate<uint16_t>(size_t(bucket.elements));
    // Only dense fp32 payloads decompose (zen/SyncScheme.h).
    decomposed = syncSchemeOf(bucket) == SyncScheme::ReduceScatterAllGather;
    if (decomposed) {
      padded = first.allocate<uint8_t>(layout.paddedTotal * sizeof(float));
      shards = first.allocate<uint8_t>(layout.shardTotal * sizeof(float));
    }
  }

  bool compress(BucketBuffers &b) override {
    if (element == Element::F32) {
      if (!b.sent.empty())
        first.copy(b.sent.data(), b.fusion.data(), b.elements * sizeof(float));
    } else {
      encode(first, b.fusion.data(), wire16.data(), b.elements);
      if (!b.sent.empty())
        decode(first, wire16.data(), b.sent.data(), b.elements);
    }
    return true;
  }

  size_t stageCount() const override { return decomposed ? 2 : 1; }
  size_t stageCollective(size_t stage) const override { return stage; }

  void issue(size_t stage, BucketBuffers &b, std::vector<Backend::Request> &requests) override {
    size_t width = elementBytes(element);
    uint8_t *wire = element == Element::F32 ? reinterpret_cast<uint8_t *>(b.fusion.data())
                                            : reinterpret_cast<uint8_t *>(wire16.data());
    int stream = slots[stage].stream;
    if (!decomposed) {
      for (const ShardLayout::Piece &piece : layout.pieces)
        requests.push_back(backend.allReduce(wire + piece.segment.offset * width,
                                             piece.segment.length, element, stream));
      return;
    }
    if (stage == 0) {
      // Pad each segment to ranks * shard and start the reduce-scatter.
      for (const ShardLayout::Piece &piece : layout.pieces) {
        uint8_t *pad = padded.data() + piece.paddedBegin * width;
        first.copy(pad, wire + piece.segment.offset * width, piece.segment.length * width);
        first.zero(pad + piece.segment.length * width,
                   (piece.shard * ranks - piece.segment.length) * width);
        requests.push_back(backend.reduceScatter(pad, shards.data() + piece.shardBegin * width,
                                                 piece.shard, element, stream));
      }
      return;
    }
    // Stage 1 (on its stream, stage 0 has completed): average this rank's
    // shards, then all-gather them into the padded buffer.
    for (const ShardLayout::Piece &piece : layout.pieces) {
      uint8_t *shard = shards.data() + piece.shardBegin * width;
      last.scale(reinterpret_cast<float *>(shard), piece.shard, 1.0f / float(ranks));
      requests.push_back(backend.allGather(shard, padded.data() + piece.paddedBegin * width,
                                           piece.shard, element, stream));
    }
  }

  void finish(BucketBuffers &b) override {
    if (!decomposed) {
      if (element != Element::F32)
        decode(last, wire16.data(), b.fusion.data(), b.elements);
      last.scale(b.fusion.data(), b.elements, 1.0f / float(ranks));
      return;
    }
    for (const ShardLayout::Piece &piece : layout.pieces)
      last.copy(b.fusion.data() + piece.segment.offset,
                padded.data() + piece.paddedBegin * sizeof(float), piece.segment.length * 4);
  }

private:

  void encode(Compute &compute, const float *in, uint16_t *out, size_t n) const {
    if (element == Element::F16)
      compute.floatToHalf(in, out, n);
    else
      compute.floatToBF16(in, out, n);
  }
  void decode(Compute &compute, const uint16_t *in, float *out, size_t n) const {
    if (element == Element::F16)
      compute.halfToFloat(in, out, n);
    else
      compute.bf16ToFloat(in, out, n);
  }
  Backend &backend;
  std::vector<CollectiveSlot> slots;
  size_t ranks;
  ShardLayout layout;
  Compute &first, &last;  // the first and the last collective's streams
  Element element = Element::F32;
  bool decomposed = false;
  Buffer<uint16_t> wire16;
  Buffer<uint8_t> padded, shards;
};

//===----------------------------------------------------------------------===//
// int8: all-gather of quantised payloads, or a two-phase all-reduce
//===----------------------------------------------------------------------===//

class Int8Program final : public BucketProgram {
public:
  Int8Program(const Bucket &bucket, Backend &backend)
      : backend(backend), slot(slotsOf(bucket)[0]), ranks(size_t(backend.size())),
        twoPhase(syncSchemeOf(bucket) == SyncScheme::AllReduce),
        layout(size_t(bucket.elements), slot.chunks, ranks), compute(backend.compute(slot.stream)) {
    size_t n = size_t(bucket.elements);
    if (!twoPhase) {
      payload = compute.allocate<uint8_t>(kernels::int8PayloadBytes(n));
      gather = std::make_unique<ChunkedGather>(compute, payload.size(), slot.chunks, ranks);
      return;
    }
    size_t bytes = 0;
    for (const ShardLayout::Piece &piece : layout.pieces) {
      blockOffsets.push_back(bytes);
      bytes += kernels::int8PayloadBytes(piece.shard) * ranks;
    }
    sendBuffer = compute.allocate<uint8_t>(bytes);
    receiveBuffer = compute.allocate<uint8_t>(bytes);
    gatherBuffer = compute.allocate<uint8_t>(bytes);
    ownBlocks = compute.allocate<uint8_t>(bytes / ranks);
    scratch = compute.allocate<float>(layout.largestShard);
  }

  bool compress(BucketBuffers &b) override {
    if (!twoPhase) {
      compute.quantizeInt8(b.fusion.data(), b.elements, payload.data());
      if (!b.sent.empty())
        compute.dequantizeInt8(payload.data(), b.elements, b.sent.data(), false);
      return true;
    }
    for (size_t p = 0; p < layout.pieces.size(); ++p) {
      const ShardLayout::Piece &piece = layout.pieces[p];
      size_t blockBytes = kernels::int8PayloadBytes(piece.shard);
      for (size_t r = 0; r < ranks; ++r) {
        Segment part = blockOf(piece, r);
        compute.zero(scratch.data(), piece.shard * sizeof(float));
        compute.copy(scratch.data(), b.fusion.data() + part.offset, part.length * sizeof(float));
        uint8_t *block = sendBuffer.data() + blockOffsets[p] + r * blockBytes;
        compute.quantizeInt8(scratch.data(), piece.shard, block);
        if (!b.sent.empty()) {
          compute.dequantizeInt8(block, piece.shard, scratch.data(), false);
          compute.copy(b.sent.data() + part.offset, scratch.data(), part.length * sizeof(float));
        }
      }
    }
    return true;
  }

  size_t stageCount() const override { return twoPhase ? 2 : 1; }
  size_t stageCollective(size_t) const override { return 0; }

  void issue(size_t stage, BucketBuffers &, std::vector<Backend::Request> &requests) override {
    if (!twoPhase) {
      gather->issue(backend, payload.data(), slot.stream, requests);
      return;
    }
    for (size_t p = 0; p < layout.pieces.size(); ++p) {
      const ShardLayout::Piece &piece = layout.pieces[p];
      size_t blockBytes = kernels::int8PayloadBytes(piece.shard);
      if (stage == 0) {
        requests.push_back(backend.allToAll(sendBuffer.data() + blockOffsets[p],
                                            receiveBuffer.data() + blockOffsets[p], blockBytes,
                                            Element::Byte, slot.stream));
        continue;
      }
      // Sum the ranks' quantised copies of our shard, average, re-quantise, all-gather.
      compute.zero(scratch.data(), piece.shard * sizeof(float));
      for (size_t r = 0; r < ranks; ++r)
        compute.dequantizeInt8(receiveBuffer.data() + blockOffsets[p] + r * blockBytes,
                               piece.shard, scratch.data(), true);
      compute.scale(scratch.data(), piece.shard, 1.0f / float(ranks));
      uint8_t *own = ownBlocks.data() + blockOffsets[p] / ranks;
      compute.quantizeInt8(scratch.data(), piece.shard, own);
      requests.push_back(backend.allGather(own, gatherBuffer.data() + blockOffsets[p], blockBytes,
                                           Element::Byte, slot.stream));
    }
  }

  void finish(BucketBuffers &b) override {
    if (!twoPhase) {
      compute.zero(b.fusion.data(), b.elements * sizeof(float));
      for (size_t r = 0; r < ranks; ++r)
        compute.dequantizeInt8(gather->payloadOf(r), b.elements, b.fusion.data(), true);
      compute.scale(b.fusion.data(), b.elements, 1.0f / float(ranks));
      return;
    }
    for (size_t p = 0; p < layout.pieces.size(); ++p) {
      const ShardLayout::Piece &piece = layout.pieces[p];
      size_t blockBytes = kernels::int8PayloadBytes(piece.shard);
      for (size_t r = 0; r < ranks; ++r) {
        Segment part = blockOf(piece, r);
        compute.dequantizeInt8(gatherBuffer.data() + blockOffsets[p] + r * blockBytes,
                               piece.shard, scratch.data(), false);
        compute.copy(b.fusion.data() + part.offset, scratch.data(), part.length * sizeof(float));
      }
    }
  }

private:
  /// Rank r's elements of a piece (the tail block may be short or empty).
  static Segment blockOf(const ShardLayout::Piece &piece, size_t r) {
    size_t begin = std::min(piece.segment.length, r * piece.shard);
    size_t end = std::min(piece.segment.length, (r + 1) * piece.shard);
    return {piece.segment.offset + begin, end - begin};
  }

  Backend &backend;
  CollectiveSlot slot;
  size_t ranks;
  bool twoPhase;
  ShardLayout layout;
  Compute &compute;
  Buffer<uint8_t> payload;
  std::unique_ptr<ChunkedGather> gather;
  std::vector<size_t> blockOffsets;
  Buffer<uint8_t> sendBuffer, receiveBuffer, gatherBuffer, ownBlocks;
  Buffer<float> scratch;
};

//===----------------------------------------------------------------------===//
// Sparse: top-k (all-gather of index/value pairs), random-k (shared indices)
//===----------------------------------------------------------------------===//

class SparseProgram final : public BucketProgram {
public:
  SparseProgram(const Bucket &bucket, Backend &backend)
      : backend(backend), slot(slotsOf(bucket)[0]), ranks(size_t(backend.size())),
        bucketIndex(uint64_t(bucket.id)),
        random(bucket.compression.method == CompressionMethod::RandomK),
        allReduce(syncSchemeOf(bucket) == SyncScheme::AllReduce),
        kept(kernels::keptCount(size_t(bucket.elements), bucket.compression.ratio)),
        compute(backend.compute(slot.stream)) {
    if (uint64_t(bucket.elements) > uint64_t(UINT32_MAX))
      throw RuntimeError(ZENRT_ERR_PLAN, "bucket " + std::to_string(bucket.id) +
                                             ": sparse compression needs fewer than 2^32 elements");
    indices = compute.allocate<uint32_t>(kept);
    values = compute.allocate<float>(kept);
    if (random)
      randomIndices.resize(kept);
    if (!allReduce) {
      // top-k sends indices and values; random-k only values (indices are shared).
      payload = compute.allocate<uint8_t>(random ? 4 * kept : 8 * kept);
      gather = std::make_unique<ChunkedGather>(compute, payload.size(), slot.chunks, ranks);
    }
  }

  bool compress(BucketBuffers &b) override {
    if (random) {
      kernels::randomKIndices(seedFor(b.iteration), b.elements, kept, randomIndices.data(),
                              bitmap);
      compute.upload(indices.data(), randomIndices.data(), 4 * kept);
      compute.gather(b.fusion.data(), indices.data(), kept, values.data());
    } else {
      compute.selectTopK(b.fusion.data(), b.elements, kept, indices.data(), values.data());
    }
    if (!b.sent.empty()) {
      compute.zero(b.sent.data(), b.elements * sizeof(float));
      compute.scatter(values.data(), indices.data(), kept, b.sent.data(), false);
    }
    if (!allReduce) {
      size_t valueOffset = random ? 0 : 4 * kept;
      if (!random)
        compute.copy(payload.data(), indices.data(), 4 * kept);
      compute.copy(payload.data() + valueOffset, values.data(), 4 * kept);
    }
    return true;
  }

  size_t stageCount() const override { return 1; }
  size_t stageCollective(size_t) const override { return 0; }

  void issue(size_t, BucketBuffers &, std::vector<Backend::Request> &requests) override {
    if (!allReduce) {
      gather->issue(backend, payload.data(), slot.stream, requests);
      return;
    }
    for (const Segment &piece : splitIntoChunks(kept, slot.chunks))
      requests.push_back(
          backend.allReduce(values.data() + piece.offset, piece.length, Element::F32, slot.stream));
  }

  void finish(BucketBuffers &b) override {
    compute.zero(b.fusion.data(), b.elements * sizeof(float));
    if (allReduce) {
      compute.scatter(values.data(), indices.data(), kept, b.fusion.data(), false);
    } else {
      for (size_t r = 0; r < ranks; ++r) {
        const uint8_t *data = gather->payloadOf(r);
        const float *rankValues = reinterpret_cast<const float *>(data + (random ? 0 : 4 * kept));
        const uint32_t *rankIndices =
            random ? indices.data() : reinterpret_cast<const uint32_t *>(data);
        compute.scatter(rankValues, rankIndices, kept, b.fusion.data(), true);
      }
    }
    compute.scale(b.fusion.data(), b.elements, 1.0f / float(ranks));
  }

private:
  /// Same on every rank for a bucket and iteration.
  uint64_t seedFor(int64_t iteration) const {
    return (bucketIndex << 40) ^ uint64_t(iteration) ^ 0x7a656e72742d726bull;
  }

  Backend &backend;
  CollectiveSlot slot;
  size_t ranks;
  uint64_t bucketIndex;
  bool random, allReduce;
  size_t kept;
  Compute &compute;
  Buffer<uint32_t> indices;
  Buffer<float> values;
  std::vector<uint32_t> randomIndices;  // host: generated here, then uploaded
  std::vector<uint64_t> bitmap;
  Buffer<uint8_t> payload;
  std::unique_ptr<ChunkedGather> gather;
};

//===----------------------------------------------------------------------===//
// Sign with scale (EF-SignSGD): all-gather of packed signs
//===----------------------------------------------------------------------===//

class SignProgram final : public BucketProgram {
public:
  SignProgram(const Bucket &bucket, Backend &backend)
      : backend(backend), slot(slotsOf(bucket)[0]), ranks(size_t(backend.size())),
        compute(backend.compute(slot.stream)),
        payload(compute.allocate<uint8_t>(kernels::signPayloadBytes(size_t(bucket.elements)))),
        gather(compute, payload.size(), slot.chunks, ranks) {}

  bool compress(BucketBuffers &b) override {
    compute.compressSign(b.fusion.data(), b.elements, payload.data());
    if (!b.sent.empty())
      compute.decompressSign(payload.data(), b.elements, b.sent.data(), false);
    return true;
  }
  size_t stageCount() const override { return 1; }
  size_t stageCollective(size_t) const override { return 0; }
  void issue(size_t, BucketBuffers &, std::vector<Backend::Request> &requests) override {
    gather.issue(backend, payload.data(), slot.stream, requests);
  }
  void finish(BucketBuffers &b) override {
    compute.zero(b.fusion.data(), b.elements * sizeof(float));
    for (size_t r = 0; r < ranks; ++r)
      compute.decompressSign(gather.payloadOf(r), b.elements, b.fusion.data(), true);
    compute.scale(b.fusion.data(), b.elements, 1.0f / float(ranks));
  }

private:
  Backend &backend;
  CollectiveSlot slot;
  size_t ranks;
  Compute &compute;
  Buffer<uint8_t> payload;
  ChunkedGather gather;
};

//===----------------------------------------------------------------------===//
// PowerSGD rank r: P = M Q, all-reduce P, orthogonalise, Q = M^T P, all-reduce Q
//===----------------------------------------------------------------------===//

class PowerSgdProgram final : public BucketProgram {
public:
  PowerSgdProgram(const Bucket &bucket, Backend &backend)
      : backend(backend), slot(slotsOf(bucket)[0]), ranks(size_t(backend.size())),
        compute(backend.compute(slot.stream)) {
    size_t n = size_t(bucket.elements);
    rows = size_t(std::ceil(std::sqrt(double(n))));
    cols = ceilDiv(n, rows);
    rank = std::min<size_t>({size_t(bucket.compression.rank), rows, cols});
    if (mutated(Mutation::PowerSgdLosesRank) && rank >= 2)
      --rank;
    matrix = compute.allocate<float>(rows * cols);  // the tail past n stays zero
    approximation = compute.allocate<float>(rows * cols);
    p = compute.allocate<float>(rows * rank);
    q = compute.allocate<float>(cols * rank);
    // Q starts as the same pseudo-random normal matrix on every rank, then warm-starts.
    std::vector<float> start(cols * rank);
    uint64_t state = 0x51ed270b27e3f1a5ull ^ uint64_t(bucket.id);
    auto uniform = [&state] {
      uint64_t z = (state += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      return (double((z ^ (z >> 31)) >> 11) + 0.5) / 9007199254740992.0;
    };
    for (float &value : start)
      value = float(std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()));
    compute.upload(q.data(), start.data(), start.size() * sizeof(float));
  }

  bool compress(BucketBuffers &b) override {
    compute.copy(matrix.data(), b.fusion.data(), b.elements * sizeof(float));  // column-major
    compute.multiply(matrix.data(), rows, cols, q.data(), p.data(), rank, false);
    return false;
  }
  size_t stageCount() const override { return 2; }
  size_t stageCollective(size_t) const override { return 0; }

  void issue(size_t stage, BucketBuffers &, std::vector<Backend::Request> &requests) override {
    float *data = p.data();
    size_t count = p.size();
    if (stage == 1) {
      compute.orthonormalise(p.data(), rows, rank);
      compute.multiply(matrix.data(), rows, cols, p.data(), q.data(), rank, true);
      data = q.data();
      count = q.size();
    }
    for (const Segment &piece : splitIntoChunks(count, slot.chunks))
      requests.push_back(
          backend.allReduce(data + piece.offset, piece.length, Element::F32, slot.stream));
  }

  void finish(BucketBuffers &b) override {
    compute.scale(q.data(), q.size(), 1.0f / float(ranks));
    compute.outerProduct(p.data(), q.data(), rows, cols, rank, approximation.data());
    if (mutated(Mutation::PowerSgdZeros))
      compute.zero(approximation.data(), approximation.size() * sizeof(float));
    const float *approx = approximation.data();
    if (b.errorFeedback)
      compute.subtract(b.fusion.data(), approx, b.residual.data(), b.elements);
    if (!b.sent.empty())
      compute.copy(b.sent.data(), approx, b.elements * sizeof(float));
    compute.copy(b.fusion.data(), approx, b.elements * sizeof(float));
  }

private:
  Backend &backend;
  CollectiveSlot slot;
  size_t ranks, rows = 0, cols = 0, rank = 0;
  Compute &compute;
  Buffer<float> matrix, approximation, p, q;
};

}  // namespace

std::unique_ptr<BucketProgram> createProgram(const Bucket &bucket, Backend &backend) {
  switch (bucket.compression.method) {
  case CompressionMethod::None:
  case CompressionMethod::FP16:
  case CompressionMethod::BF16:
    return std::make_unique<DenseProgram>(bucket, backend);
  case CompressionMethod::Int8:
    return std::make_unique<Int8Program>(bucket, backend);
  case CompressionMethod::TopK:
  case CompressionMethod::RandomK:
    return std::make_unique<SparseProgram>(bucket, backend);
  case CompressionMethod::Sign:
    return std::make_unique<SignProgram>(bucket, backend);
  case CompressionMethod::PowerSGD:
    return std::make_unique<PowerSgdProgram>(bucket, backend);
  }
  throw RuntimeError(ZENRT_ERR_INTERNAL, "unknown compression method");
}

}  // namespace zenrt
