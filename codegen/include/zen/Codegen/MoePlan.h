//===- MoePlan.h - the plan file's MoE section ------------------*- C++ -*-===//
//
// Lowers plan::planMoe's decisions to the plan file's `moe` section
// (docs/plan-format.md "moe") and adds the MoE baselines to the plan.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_CODEGEN_MOEPLAN_H
#define ZEN_CODEGEN_MOEPLAN_H

#include "zen/Planner/Moe.h"
#include "zenrt/Plan.h"

#include <vector>

namespace zen::codegen {

/// Sets `plan`'s moe section for `planned` (the layers of `layers`, planned
/// for `request` on `model`) on top of its data-parallel schedule, whose
/// predicted iteration the MoE decisions change by MoeEvaluation::extraUs.
/// With the request's schedule, also the co-scheduled iteration's timeline
/// (plan::moeScheduleTasks of auto's choices, simulated): every task's track,
/// start and duration. Adds moe-nopipe, tutel and pipemoe to the baselines and
/// moves every other baseline by auto's extraUs: the gradient-sync baselines
/// run with auto's MoE decisions, so the comparison stays like with like.
void attachMoe(zenrt::Plan &plan, const std::vector<plan::MoeLayer> &layers,
               const plan::MoePlan &planned, const plan::MoeRequest &request,
               const cost::CostModel &model);

} // namespace zen::codegen

#endif // ZEN_CODEGEN_MOEPLAN_H
