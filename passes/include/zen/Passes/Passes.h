//===- Passes.h - zen planning passes ---------------------------*- C++ -*-===//
#ifndef ZEN_PASSES_PASSES_H
#define ZEN_PASSES_PASSES_H

#include "zen/Dialect/ZenDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace zen {

#define GEN_PASS_DECL
#include "zen/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zen/Passes/Passes.h.inc"

} // namespace zen

#endif // ZEN_PASSES_PASSES_H
