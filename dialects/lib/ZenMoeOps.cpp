//===- ZenMoeOps.cpp - Mixture-of-Experts op verifiers --------------------===//
#include "zen/Dialect/ZenDialect.h"

using namespace mlir;
using namespace zen;

namespace {
/// The cost and shape checks every MoE op shares: non-negative work and static
/// types, since the planner prices the buffers by their sizes.
LogicalResult verifyMoeCommon(Operation *op, IntegerAttr flops, IntegerAttr bytes) {
  if (flops.getInt() < 0)
    return op->emitOpError("flops must be non-negative, got ") << flops.getInt();
  if (bytes.getInt() < 0)
    return op->emitOpError("bytes must be non-negative, got ") << bytes.getInt();
  auto isStatic = [](Type type) { return cast<RankedTensorType>(type).hasStaticShape(); };
  if (!llvm::all_of(op->getOperandTypes(), isStatic) ||
      !llvm::all_of(op->getResultTypes(), isStatic))
    return op->emitOpError("operands and results must have static shapes");
  return success();
}

/// A schedule must fit the layer's `[experts, capacity, hidden]` buffer: ep
/// experts' shards and equal pieces of the capacity rows.
LogicalResult verifySchedule(Operation *op, MoeScheduleAttr schedule, RankedTensorType buffer) {
  if (!schedule || buffer.getRank() != 3)
    return success();
  const int64_t experts = buffer.getDimSize(0), capacity = buffer.getDimSize(1);
  if (experts % schedule.getEp() != 0)
    return op->emitOpError("schedule ep ")
           << schedule.getEp() << " must divide the " << experts << " experts";
  for (auto [phase, degree] : {std::pair{"forward", schedule.getForward()},
                               {"backward", schedule.getBackward()}})
    if (capacity % degree != 0)
      return op->emitOpError("schedule ")
             << phase << " degree " << degree << " does not divide the " << capacity
             << " capacity rows it splits";
  return success();
}

/// Tokens of a `[tokens, hidden]` or `[batch, sequence, hidden]` activation; -1 for
/// another rank.
int64_t tokensOf(RankedTensorType type) {
  if (type.getRank() == 2)
    return type.getDimSize(0);
  if (type.getRank() == 3)
    return type.getDimSize(0) * type.getDimSize(1);
  return -1;
}

bool hasShape(RankedTensorType type, ArrayRef<int64_t> shape) { return type.getShape() == shape; }
} // namespace

LogicalResult MoeDispatchOp::verify() {
  if (failed(verifyMoeCommon(*this, getFlopsAttr(), getBytesAttr())))
    return failure();
  auto input = cast<RankedTensorType>(getInput().getType());
  auto router = cast<RankedTensorType>(getRouter().getType());
  auto dispatched = cast<RankedTensorType>(getDispatched().getType());
  auto gates = cast<RankedTensorType>(getGates().getType());
  const int64_t tokens = tokensOf(input);
  if (tokens < 0)
    return emitOpError("input must be [tokens, hidden] or [batch, sequence, hidden], got ")
           << input;
  if (router.getRank() != 2 || router.getDimSize(0) != tokens)
    return emitOpError("router must be [tokens = ") << tokens << ", experts], got " << router;
  const int64_t experts = router.getDimSize(1);
  const int64_t hidden = input.getDimSize(input.getRank() - 1);
  const int64_t k = getKAttr().getInt();
  if (k < 1 || k > experts)
    return emitOpError("top-k ") << k << " must be between 1 and the " << experts << " experts";
  if (dispatched.getRank() != 3 || dispatched.getDimSize(0) != experts ||
      dispatched.getDimSize(1) < 1 || dispatched.getDimSize(2) != hidden)
    return emitOpError("dispatched must be [experts = ")
           << experts << ", capacity >= 1, hidden = " << hidden << "], got " << dispatched;
  if (!hasShape(gates, {tokens, k}))
    return emitOpError("gates must be [tokens = ") << tokens << ", k = " << k << "], got " << gates;
  return verifySchedule(*this, getScheduleAttr(), dispatched);
}

LogicalResult MoeExpertsOp::verify() {
  if (failed(verifyMoeCommon(*this, getFlopsAttr(), getBytesAttr())))
    return failure();
  auto dispatched = cast<RankedTensorType>(getDispatched().getType());
  if (dispatched.getRank() != 3)
    return emitOpError("dispatched must be [experts, capacity, hidden], got ") << dispatched;
  const int64_t experts = dispatched.getDimSize(0), hidden = dispatched.getDimSize(2);
  // The layout is read off fc2, whose hidden side is known: [experts, hidden, ffn] now,
  // [experts, ffn, hidden] in earlier ONNX Runtime releases.
  auto fc2 = cast<RankedTensorType>(getFc2Weight().getType());
  if (fc2.getRank() != 3 || fc2.getDimSize(0) != experts ||
      (fc2.getDimSize(1) != hidden && fc2.getDimSize(2) != hidden))
    return emitOpError("fc2_weight must be [experts = ")
           << experts << ", hidden = " << hidden << ", ffn] or [experts = " << experts
           << ", ffn, hidden = " << hidden << "], got " << fc2;
  const bool earlier = fc2.getDimSize(1) != hidden;
  const int64_t ffn = earlier ? fc2.getDimSize(1) : fc2.getDimSize(2);
  Value fc3 = getFc3Weight();
  // SwiGLU's first GEMM yields the gate and the linear half together unless fc3 holds
  // the linear half.
  const int64_t rows = getActivation() == MoeActivation::swiglu && !fc3 ? 2 * ffn : ffn;
  // [experts, out, in], or [experts, in, out] in the earlier layout. With ffn = hidden
  // fc2 fits both, and so may fc1 (fused SwiGLU decides).
  auto fits = [&](RankedTensorType type, int64_t out, bool inOut) {
    const SmallVector<int64_t, 3> shape = inOut ? SmallVector<int64_t, 3>{experts, hidden, out}
                                                : SmallVector<int64_t, 3>{experts, out, hidden};
    return hasShape(type, shape);
  };
  auto fc1 = cast<RankedTensorType>(getFc1Weight().getType());
  auto fitsLayout = [&](bool inOut) {
    return fits(fc1, rows, inOut) &&
           (!fc3 || fits(cast<RankedTensorType>(fc3.getType()), ffn, inOut));
  };
  if (!fitsLayout(earlier) && !(ffn == hidden && fitsLayout(!earlier))) {
    auto expected = [&](int64_t out, const char *what) {
      std::string text = "[experts = " + std::to_string(experts) + ", ";
      const std::string outText = std::string(what) + std::to_string(out);
      const std::string inText = "hidden = " + std::to_string(hidden);
      return text + (earlier ? inText + ", " + outText : outText + ", " + inText) + "]";
    };
    const char *layout = earlier ? " (fc2_weight has the earlier [experts, ffn, hidden] layout)"
                                 : "";
    if (!fits(fc1, rows, earlier))
      return emitOpError("fc1_weight must be ")
             << expected(rows, rows == ffn ? "ffn = " : "2 x ffn = ") << " for "
             << stringifyMoeActivation(getActivation()) << layout << ", got " << fc1;
    return emitOpError("fc3_weight must be ")
           << expected(ffn, "ffn = ") << layout << ", got " << fc3.getType();
  }
  if (Value bias = getFc1Bias();
      bias && !hasShape(cast<RankedTensorType>(bias.getType()), {experts, rows}))
    return emitOpError("fc1_bias must be [")
           << experts << ", " << rows << "], got " << bias.getType();
  if (Value bias = getFc3Bias()) {
    if (!fc3)
      return emitOpError("fc3_bias needs fc3_weight");
    if (!hasShape(cast<RankedTensorType>(bias.getType()), {experts, ffn}))
      return emitOpError("fc3_bias must be [")
             << experts << ", " << ffn << "], got " << bias.getType();
  }
  if (Value bias = getFc2Bias();
      bias && !hasShape(cast<RankedTensorType>(bias.getType()), {experts, hidden}))
    return emitOpError("fc2_bias must be [")
           << experts << ", " << hidden << "], got " << bias.getType();
  if (getResult().getType() != dispatched)
    return emitOpError("result must have the dispatched type ")
           << dispatched << ", got " << getResult().getType();
  return verifySchedule(*this, getScheduleAttr(), dispatched);
}

LogicalResult MoeCombineOp::verify() {
  if (failed(verifyMoeCommon(*this, getFlopsAttr(), getBytesAttr())))
    return failure();
  auto output = cast<RankedTensorType>(getExpertOutput().getType());
  auto gates = cast<RankedTensorType>(getGates().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (output.getRank() != 3)
    return emitOpError("expert_output must be [experts, capacity, hidden], got ") << output;
  if (gates.getRank() != 2 || gates.getDimSize(1) < 1 || gates.getDimSize(1) > output.getDimSize(0))
    return emitOpError("gates must be [tokens, k] with 1 <= k <= ")
           << output.getDimSize(0) << " experts, got " << gates;
  if (tokensOf(result) != gates.getDimSize(0) ||
      result.getDimSize(result.getRank() - 1) != output.getDimSize(2))
    return emitOpError("result must hold ")
           << gates.getDimSize(0) << " tokens of hidden size " << output.getDimSize(2)
           << " ([tokens, hidden] or [batch, sequence, hidden]), got " << result;
  return verifySchedule(*this, getScheduleAttr(), output);
}
