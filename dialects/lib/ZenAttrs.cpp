//===- ZenAttrs.cpp - zen attributes and types ----------------------------===//
#include "zen/Dialect/ZenDialect.h"

#include "mlir/IR/DialectImplementation.h"

#include <cmath>
#include <set>

using namespace mlir;
using namespace zen;

//===----------------------------------------------------------------------===//
// CompressionAttr
//===----------------------------------------------------------------------===//

static bool takesRatio(CompressionMethod method) {
  return vocab::takesRatio(toVocabulary(method));
}

Attribute CompressionAttr::parse(AsmParser &parser, Type) {
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<CompressionMethod> method = symbolizeCompressionMethod(keyword);
  if (!method) {
    parser.emitError(parser.getCurrentLocation(), "unknown compression method '") << keyword << "'";
    return {};
  }
  double ratio = 0.0;
  int64_t rank = 0;
  while (succeeded(parser.parseOptionalComma())) {
    StringRef name;
    if (parser.parseKeyword(&name) || parser.parseEqual())
      return {};
    if (name == "ratio") {
      if (parser.parseFloat(ratio))
        return {};
    } else if (name == "rank") {
      if (parser.parseInteger(rank))
        return {};
    } else {
      parser.emitError(parser.getCurrentLocation(), "unknown compression parameter '") << name << "'";
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    parser.getContext(), *method, APFloat(ratio), rank);
}

void CompressionAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyCompressionMethod(getMethod());
  if (takesRatio(getMethod()))
    printer << ", ratio = " << getRatioValue();
  if (getMethod() == CompressionMethod::powersgd)
    printer << ", rank = " << getRank();
  printer << ">";
}

LogicalResult CompressionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      CompressionMethod method, APFloat ratioValue,
                                      int64_t rank) {
  double ratio = ratioValue.convertToDouble();
  if (takesRatio(method)) {
    if (!std::isfinite(ratio) || ratio <= 0.0 || ratio > 1.0)
      return emitError() << "compression ratio must be in (0, 1], got " << ratio;
  } else if (ratio != 0.0) {
    return emitError() << "compression method '" << stringifyCompressionMethod(method)
                       << "' takes no ratio";
  }
  if (vocab::takesRank(toVocabulary(method))) {
    if (rank < 1)
      return emitError() << "powersgd rank must be at least 1, got " << rank;
  } else if (rank != 0) {
    return emitError() << "compression method '" << stringifyCompressionMethod(method)
                       << "' takes no rank";
  }
  return success();
}

bool CompressionAttr::supports(SyncScheme scheme) const {
  return vocab::supports(toVocabulary(getMethod()), toVocabulary(scheme));
}

bool CompressionAttr::isLossy() const { return vocab::isLossy(toVocabulary(getMethod())); }

int64_t CompressionAttr::compressedBytes(int64_t elements, int64_t rows) const {
  switch (getMethod()) {
  case CompressionMethod::none:
    return 4 * elements;
  case CompressionMethod::fp16:
  case CompressionMethod::bf16:
    return 2 * elements;
  case CompressionMethod::int8:
    // One fp32 scale per 1024-element chunk.
    return elements + 4 * ((elements + 1023) / 1024);
  case CompressionMethod::topk:
  case CompressionMethod::randomk: {
    int64_t kept = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(getRatioValue() * elements)));
    return 8 * kept; // fp32 value + int32 index
  }
  case CompressionMethod::sign:
    return (elements + 7) / 8 + 4; // one bit per element + fp32 scale
  case CompressionMethod::powersgd: {
    int64_t cols = (elements + rows - 1) / rows;
    return 4 * getRank() * (rows + cols);
  }
  }
  return 4 * elements;
}

//===----------------------------------------------------------------------===//
// ProcessGroupAttr, ScheduleAttr
//===----------------------------------------------------------------------===//

/// A growth curve: f64 values, 1 at one rank, never decreasing, finite.
static LogicalResult verifyGrowth(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                                  ArrayAttr growth, bool required) {
  if (growth.empty())
    return required ? (emitError() << name << " must not be empty") : success();
  double previous = 1.0;
  for (size_t k = 0; k < growth.size(); ++k) {
    auto value = dyn_cast<FloatAttr>(growth[k]);
    if (!value || !value.getType().isF64())
      return emitError() << name << "[" << k << "] must be an f64, got " << growth[k];
    const double v = value.getValueAsDouble();
    if (k == 0 && v != 1.0)
      return emitError() << name << " must start at 1 (one rank), got " << v;
    if (!std::isfinite(v) || v < previous)
      return emitError() << name << "[" << k << "] = " << v << " decreases or is not finite";
    previous = v;
  }
  return success();
}

LogicalResult SparsityAttr::verify(function_ref<InFlightDiagnostic()> emitError, FloatAttr density,
                                   ArrayAttr gamma, FloatAttr skew, FloatAttr hashSkew,
                                   FloatAttr blockDensity, ArrayAttr blockGamma,
                                   SparsitySource) {
  const double d = density.getValueAsDouble();
  if (!(d > 0 && d <= 1))
    return emitError() << "sparsity density must be in (0, 1], got " << d;
  // Shares of the fullest of 8 partitions: 1/8 when even, 1 when all fall in one.
  for (auto [name, share] : {std::pair<StringRef, FloatAttr>{"skew", skew}, {"hash_skew", hashSkew}}) {
    const double value = share.getValueAsDouble();
    if (!(value >= 0.125 - 1e-12 && value <= 1))
      return emitError() << "sparsity " << name << " must be in [1/8, 1], got " << value;
  }
  const double block = blockDensity.getValueAsDouble();
  if (!(block >= 0 && block <= 1))
    return emitError() << "sparsity block_density must be in [0, 1], got " << block;
  if (failed(verifyGrowth(emitError, "sparsity gamma", gamma, /*required=*/true)))
    return failure();
  return verifyGrowth(emitError, "sparsity block_gamma", blockGamma, /*required=*/false);
}

LogicalResult MeasuredComputeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                          FloatAttr forwardUs, FloatAttr backwardUs,
                                          FloatAttr optimizerUs, DictionaryAttr firstReadUs,
                                          DictionaryAttr readyUs, StringAttr) {
  for (auto [name, time] : {std::pair<StringRef, FloatAttr>{"forward_us", forwardUs},
                            {"backward_us", backwardUs},
                            {"optimizer_us", optimizerUs}})
    if (!(time.getValueAsDouble() >= 0 && std::isfinite(time.getValueAsDouble())))
      return emitError() << "measured_compute " << name << " must be a finite time >= 0, got "
                         << time.getValueAsDouble();
  // Points in a pass lie inside it.
  for (auto [name, points, passUs] :
       {std::tuple<StringRef, DictionaryAttr, double>{"first_read_us", firstReadUs,
                                                      forwardUs.getValueAsDouble()},
        {"ready_us", readyUs, backwardUs.getValueAsDouble()}})
    for (NamedAttribute point : points) {
      auto time = llvm::dyn_cast<FloatAttr>(point.getValue());
      if (!time || !(time.getValueAsDouble() >= 0 && time.getValueAsDouble() <= passUs))
        return emitError() << "measured_compute " << name << " '" << point.getName().getValue()
                           << "' must be a time in [0, " << passUs << "], got " << point.getValue();
    }
  return success();
}

LogicalResult ProcessGroupAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                       int64_t size, int64_t nodes) {
  if (size < 1)
    return emitError() << "process group size must be at least 1, got " << size;
  if (nodes < 1 || size % nodes != 0)
    return emitError() << "process group of " << size
                       << " ranks cannot spread evenly over " << nodes << " nodes";
  return success();
}

LogicalResult ScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t stream, int64_t priority, int64_t order) {
  if (stream < 0)
    return emitError() << "schedule stream must be non-negative, got " << stream;
  if (order < 0)
    return emitError() << "schedule order must be non-negative, got " << order;
  return success();
}

//===----------------------------------------------------------------------===//
// CompressedType
//===----------------------------------------------------------------------===//

LogicalResult CompressedType::verify(function_ref<InFlightDiagnostic()> emitError,
                                     RankedTensorType original, CompressionAttr method) {
  if (!original.hasStaticShape())
    return emitError() << "compressed tensor must have a static shape";
  if (!mlir::isa<FloatType>(original.getElementType()))
    return emitError() << "only floating-point tensors can be compressed";
  if (method.getMethod() == CompressionMethod::none)
    return emitError() << "compression method 'none' has no compressed form";
  return success();
}

//===----------------------------------------------------------------------===//
// PredictionAttr
//===----------------------------------------------------------------------===//

LogicalResult PredictionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                     FloatAttr iterationUs, FloatAttr computeUs,
                                     FloatAttr exposedCommUs, FloatAttr lowerBoundUs) {
  for (auto [name, time] : {std::pair{"iteration_us", iterationUs}, {"compute_us", computeUs},
                            {"exposed_comm_us", exposedCommUs}, {"lower_bound_us", lowerBoundUs}}) {
    double value = time.getValueAsDouble();
    if (!time.getType().isF64() || !std::isfinite(value) || value < 0)
      return emitError() << "prediction " << name
                         << " must be a finite, non-negative f64, got " << time;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ParallelAttr, ShardAttr
//===----------------------------------------------------------------------===//

LogicalResult ParallelAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t tp,
                                   int64_t pp, int64_t dp, int64_t zero, bool,
                                   Recompute, int64_t microBatch, int64_t microBatches,
                                   int64_t virtualStages, int64_t ep, bool expertTensorParallel,
                                   int64_t attentionForwardChunks, int64_t attentionBackwardChunks,
                                   int64_t mlpForwardChunks, int64_t mlpBackwardChunks,
                                   DenseI64ArrayAttr stageLayers, MoeScheduleAttr experts) {
  for (auto [name, degree] :
       {std::pair{"tp", tp}, {"pp", pp}, {"dp", dp}, {"micro_batch", microBatch},
        {"micro_batches", microBatches}, {"virtual_stages", virtualStages}, {"ep", ep},
        {"attention_forward_chunks", attentionForwardChunks},
        {"attention_backward_chunks", attentionBackwardChunks},
        {"mlp_forward_chunks", mlpForwardChunks}, {"mlp_backward_chunks", mlpBackwardChunks}})
    if (degree < 1)
      return emitError() << "parallel " << name << " must be at least 1, got " << degree;
  if (stageLayers) {
    if (int64_t(stageLayers.size()) != pp)
      return emitError() << "parallel stage_layers has " << stageLayers.size()
                         << " entries for pp = " << pp;
    for (int64_t layers : stageLayers.asArrayRef())
      if (layers < 1)
        return emitError() << "parallel stage_layers must be at least 1 each, got " << layers;
  }
  if (experts && experts.getEp() != ep)
    return emitError() << "parallel experts run over ep = " << experts.getEp()
                       << " ranks but the configuration's ep is " << ep;
  if (zero < 0 || zero > 3)
    return emitError() << "parallel zero stage must be 0, 1, 2 or 3, got " << zero;
  if (virtualStages > 1 && pp == 1)
    return emitError() << "parallel virtual_stages = " << virtualStages
                       << " needs pipeline stages (pp > 1)";
  if (dp % ep != 0)
    return emitError() << "parallel ep = " << ep << " must divide dp = " << dp;
  if (expertTensorParallel && tp == 1)
    return emitError() << "parallel expert_tensor_parallel needs tensor parallelism (tp > 1)";
  return success();
}

LogicalResult MoeBlocksAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    DenseI64ArrayAttr blocks, int64_t tokens, int64_t hidden,
                                    int64_t ffn, int64_t fc1Rows, int64_t experts, int64_t topK,
                                    FloatAttr capacityFactor, bool, int64_t capacityRows,
                                    FloatAttr blockParams, FloatAttr expertParams) {
  if (blocks.empty())
    return emitError() << "moe_blocks needs at least one block";
  for (auto [name, value] : {std::pair{"tokens", tokens}, {"hidden", hidden}, {"ffn", ffn},
                             {"fc1_rows", fc1Rows}, {"experts", experts}, {"top_k", topK}})
    if (value < 1)
      return emitError() << "moe_blocks " << name << " must be at least 1, got " << value;
  if (topK > experts)
    return emitError() << "moe_blocks top_k = " << topK << " exceeds the " << experts << " experts";
  if (capacityRows < 0)
    return emitError() << "moe_blocks capacity_rows must be non-negative, got " << capacityRows;
  for (auto [name, value] : {std::pair{"capacity_factor", capacityFactor},
                             {"block_params", blockParams}, {"expert_params", expertParams}})
    if (!(value.getValueAsDouble() >= 0) || !std::isfinite(value.getValueAsDouble()))
      return emitError() << "moe_blocks " << name << " must be finite and non-negative";
  return success();
}

LogicalResult TransformerAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef family,
                                      int64_t layers, int64_t hidden, int64_t heads, int64_t kvHeads,
                                      int64_t ffn, StringRef, StringRef, StringRef, bool,
                                      int64_t crossAttentionBlocks, FloatAttr crossAttentionParams,
                                      int64_t seq, int64_t vocab, int64_t modelBatch,
                                      FloatAttr layerParams, FloatAttr embeddingParams,
                                      FloatAttr headParams, ArrayAttr replicated, MoeBlocksAttr moe) {
  if (family.empty())
    return emitError() << "transformer family must not be empty";
  for (auto [name, value] : {std::pair{"layers", layers}, {"hidden", hidden}, {"heads", heads},
                             {"ffn", ffn}, {"seq", seq}, {"model_batch", modelBatch}})
    if (value < 1)
      return emitError() << "transformer " << name << " must be at least 1, got " << value;
  if (kvHeads < 0 || vocab < 0 || crossAttentionBlocks < 0 || crossAttentionBlocks > layers)
    return emitError() << "transformer kv_heads, vocab and cross_attention_blocks must be "
                          "non-negative, cross_attention_blocks at most layers";
  for (FloatAttr params : {crossAttentionParams, layerParams, embeddingParams, headParams})
    if (params && (!(params.getValueAsDouble() >= 0) || !std::isfinite(params.getValueAsDouble())))
      return emitError() << "transformer parameter counts must be finite and non-negative";
  if (replicated && !llvm::all_of(replicated, [](Attribute a) { return mlir::isa<StringAttr>(a); }))
    return emitError() << "transformer replicated must list node names (strings)";
  if (moe)
    for (int64_t block : moe.getBlocks().asArrayRef())
      if (block < 0 || block >= layers)
        return emitError() << "transformer moe block " << block << " is not among its " << layers
                           << " blocks";
  return success();
}

//===----------------------------------------------------------------------===//
// Baselines
//===----------------------------------------------------------------------===//

LogicalResult BaselineAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                                   FloatAttr iterationUs, FloatAttr uncompressedUs,
                                   StringAttr notFitting, StringAttr) {
  if (name.empty())
    return emitError() << "baseline name must not be empty";
  for (FloatAttr time : {iterationUs, uncompressedUs})
    if (time && (!time.getType().isF64() || !std::isfinite(time.getValueAsDouble()) ||
                 time.getValueAsDouble() < 0))
      return emitError() << "baseline '" << name
                         << "' times must be finite, non-negative f64 microseconds";
  if (iterationUs && notFitting)
    return emitError() << "baseline '" << name << "' has both a time and a reason it does not fit";
  if (!iterationUs && !uncompressedUs && !notFitting)
    return emitError() << "baseline '" << name << "' needs a time or a reason it does not fit";
  return success();
}

LogicalResult zen::verifyBaselines(function_ref<InFlightDiagnostic()> emitError, ArrayAttr baselines,
                                   StringRef owner) {
  StringRef previous;
  for (Attribute entry : baselines) {
    auto baseline = dyn_cast<BaselineAttr>(entry);
    if (!baseline)
      return emitError() << owner << " must hold #zen.baseline entries, got " << entry;
    if (!previous.empty() && !(previous < baseline.getName()))
      return emitError() << owner << " must be sorted by name, each name once ('"
                         << previous << "' then '" << baseline.getName() << "')";
    previous = baseline.getName();
  }
  return success();
}

ArrayAttr zen::baselinesAttr(MLIRContext *context, const BaselineTable &table) {
  std::set<std::string> names;
  for (const auto *times : {&table.iterationUs, &table.uncompressedUs})
    for (const auto &entry : *times)
      names.insert(entry.first);
  for (const auto *texts : {&table.notFitting, &table.configurations})
    for (const auto &entry : *texts)
      names.insert(entry.first);
  auto time = [&](const std::map<std::string, double> &times, const std::string &name) {
    auto found = times.find(name);
    return found == times.end() ? FloatAttr()
                                : FloatAttr::get(Float64Type::get(context), found->second);
  };
  auto text = [&](const std::map<std::string, std::string> &texts, const std::string &name) {
    auto found = texts.find(name);
    return found == texts.end() ? StringAttr() : StringAttr::get(context, found->second);
  };
  SmallVector<Attribute> entries;
  for (const std::string &name : names)
    entries.push_back(BaselineAttr::get(context, name, time(table.iterationUs, name),
                                        time(table.uncompressedUs, name),
                                        text(table.notFitting, name),
                                        text(table.configurations, name)));
  return ArrayAttr::get(context, entries);
}

BaselineTable zen::baselineTableOf(ArrayAttr baselines) {
  BaselineTable table;
  if (!baselines)
    return table;
  for (Attribute entry : baselines) {
    auto baseline = cast<BaselineAttr>(entry);
    const std::string name = baseline.getName().str();
    if (FloatAttr time = baseline.getIterationUs())
      table.iterationUs[name] = time.getValueAsDouble();
    if (FloatAttr time = baseline.getUncompressedUs())
      table.uncompressedUs[name] = time.getValueAsDouble();
    if (StringAttr reason = baseline.getNotFitting())
      table.notFitting[name] = reason.str();
    if (StringAttr configuration = baseline.getConfiguration())
      table.configurations[name] = configuration.str();
  }
  return table;
}

LogicalResult MoeSearchAttr::verify(function_ref<InFlightDiagnostic()> emitError, FloatAttr imbalance,
                                    DictionaryAttr searched, DictionaryAttr notFitting,
                                    ArrayAttr baselines) {
  if (!(imbalance.getValueAsDouble() >= 1) || !std::isfinite(imbalance.getValueAsDouble()))
    return emitError() << "moe_search imbalance must be finite and at least 1";
  for (DictionaryAttr byEp : {searched, notFitting})
    for (NamedAttribute entry : byEp) {
      int64_t ep = 0;
      if (entry.getName().getValue().getAsInteger(10, ep) || ep < 1 ||
          !mlir::isa<FloatAttr>(entry.getValue()))
        return emitError() << "moe_search entries map an ep (a positive integer) to a float, got '"
                           << entry.getName().getValue() << "'";
    }
  return baselines ? verifyBaselines(emitError, baselines, "moe_search baselines") : success();
}

LogicalResult ParallelSearchAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                         int64_t globalBatch, StringRef optimizer,
                                         FloatAttr moeImbalance, StringRef, bool, int64_t scored,
                                         ArrayAttr baselines) {
  if (globalBatch < 1 || scored < 0)
    return emitError() << "parallel_search global_batch must be at least 1 and "
                          "configurations_scored non-negative";
  if (optimizer.empty())
    return emitError() << "parallel_search optimizer must not be empty";
  if (!(moeImbalance.getValueAsDouble() >= 1) || !std::isfinite(moeImbalance.getValueAsDouble()))
    return emitError() << "parallel_search moe_imbalance must be finite and at least 1";
  return verifyBaselines(emitError, baselines, "parallel_search baselines");
}

LogicalResult ShardAttr::verify(function_ref<InFlightDiagnostic()> emitError, ShardKind,
                                int64_t parts, int64_t dim) {
  if (parts < 1)
    return emitError() << "shard parts must be at least 1, got " << parts;
  if (dim < 0)
    return emitError() << "shard dim must be non-negative, got " << dim;
  return success();
}

//===----------------------------------------------------------------------===//
// MoeScheduleAttr
//===----------------------------------------------------------------------===//

LogicalResult MoeScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t ep,
                                      int64_t forward, int64_t backward, MoeAllToAll,
                                      CompressionMethod tokens, MoeGradientSync) {
  for (auto [name, degree] :
       {std::pair{"ep", ep}, {"forward", forward}, {"backward", backward}})
    if (degree < 1)
      return emitError() << "moe_schedule " << name << " must be at least 1, got " << degree;
  // The casts the all-to-alls can carry the tokens in (cost::compressesTokens).
  if (!llvm::is_contained({CompressionMethod::none, CompressionMethod::fp16, CompressionMethod::bf16,
                           CompressionMethod::int8},
                          tokens))
    return emitError() << "moe_schedule tokens must be \"none\", \"fp16\", \"bf16\" or "
                          "\"int8\", got \""
                       << stringifyEnum(tokens) << "\"";
  return success();
}
