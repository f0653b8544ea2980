//===- Moe.h - the MoE layers of imported IR --------------------*- C++ -*-===//
//
// Reads a module's Mixture-of-Experts layers (zen.moe_dispatch ->
// zen.moe_experts -> zen.moe_combine) into the planner's shapes, and the
// request zen-plan-moe plans them with (docs/design.md "Mixture of Experts").
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PASSES_MOE_H
#define ZEN_PASSES_MOE_H

#include "zen/Dialect/ZenDialect.h"
#include "zen/Planner/Moe.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace zen {

/// One layer's three ops and its shape.
struct MoeLayerOps {
  MoeDispatchOp dispatch;
  MoeExpertsOp experts;
  MoeCombineOp combine;
  plan::MoeLayer layer;
};

/// The module's MoE layers in op order, one per zen.moe_dispatch, named by its
/// `node` (else "moe<i>"). A dispatch whose buffer does not feed exactly one
/// zen.moe_experts, whose result feeds exactly one zen.moe_combine reading
/// the dispatch's gates, is reported in `error` (nullopt is returned).
std::optional<std::vector<MoeLayerOps>> collectMoeLayers(mlir::ModuleOp module,
                                                         std::string &error);

/// The #zen.moe_schedule of a layer run with `choice` at expert parallelism `ep`:
/// the planner's enums as the dialect's (the only conversion, checked case by case).
MoeScheduleAttr moeScheduleAttr(mlir::MLIRContext *context, int64_t ep,
                                const cost::MoeLayerChoice &choice);
/// The layer choice a #zen.moe_schedule records (its ep aside).
cost::MoeLayerChoice moeLayerChoiceOf(MoeScheduleAttr schedule);

/// What zen-plan-moe plans `layers` with on the data-parallel group `dp`: the
/// module's compute precision (zen.compute_dtype, fp32 when absent), its
/// gradient sync when it has one (with the layers' expert gradients marked),
/// the allowed compressors that can run where the tokens are (not those fixed
/// @cpu), and the memory of the parameters outside the layers' experts on
/// `model`'s GPUs. Fails (with an error) when the training function or its
/// gradient sync cannot be read.
mlir::FailureOr<plan::MoeRequest>
moeRequestOf(mlir::ModuleOp module, const std::vector<plan::MoeLayer> &layers,
             const cost::CostModel &model, cost::Group dp, std::optional<int64_t> ep,
             double imbalance, const std::vector<cost::CompressionSpec> &compressors);

} // namespace zen

#endif // ZEN_PASSES_MOE_H
