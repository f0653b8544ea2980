//===- HeadOverrides.h - --heads / --kv-heads for the transformer recognition -*- C++ -*-===//
//
// Where the recognition cannot read a transformer's attention heads from the
// shapes that split its projections, the user gives them: `zenopt MODEL` and
// `zenopt inspect` take --heads and --kv-heads and hand them to the recognition
// as the module attributes zen.heads and zen.kv_heads (passes/lib/Analysis/Transformer.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_ZENOPT_HEADOVERRIDES_H
#define ZEN_TOOLS_ZENOPT_HEADOVERRIDES_H

#include "CliChecks.h"
#include "Command.h"

#include "zen/Dialect/ZenDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cstdint>
#include <string>

namespace zen::cli {

struct HeadOverrides {
  int64_t heads = 0;    // 0: read from the model
  int64_t kvHeads = 0;  // 0: read from the model

  void addOptions(CLI::App &app) {
    app.add_option("--heads", heads,
                   "Attention heads of the transformer, where they cannot be read from the model")
        ->check(wholeNumber(1));
    app.add_option("--kv-heads", kvHeads,
                   "Key/value heads (grouped-query attention), where they cannot be read from the model")
        ->check(wholeNumber(1));
  }

  /// Refuses key/value heads that cannot group the query heads.
  void check() const {
    if (heads > 0 && kvHeads > 0 && heads % kvHeads != 0)
      throw CommandError(ExitUsage, "--kv-heads " + std::to_string(kvHeads) + " must divide --heads " +
                                        std::to_string(heads));
  }

  /// Refuses overrides that no recognised transformer takes (`whyNot`: the
  /// recognition's reason, which names the node when the overrides do not fit it).
  void checkTaken(bool recognised, const std::string &model, const std::string &whyNot) const {
    if (!recognised && (heads > 0 || kvHeads > 0))
      throw CommandError(ExitDataError, model + ": --heads/--kv-heads need a transformer: " + whyNot);
  }

  /// Sets zen.heads / zen.kv_heads on `module` for those given; before the
  /// recognition reads it (and before anything else reads it on another thread).
  void apply(mlir::ModuleOp module) const {
    auto i64 = mlir::IntegerType::get(module.getContext(), 64);
    if (heads > 0)
      module->setAttr(ZenDialect::HeadsAttrHelper::getNameStr(), mlir::IntegerAttr::get(i64, heads));
    if (kvHeads > 0)
      module->setAttr(ZenDialect::KvHeadsAttrHelper::getNameStr(), mlir::IntegerAttr::get(i64, kvHeads));
  }
};

} // namespace zen::cli

#endif // ZEN_TOOLS_ZENOPT_HEADOVERRIDES_H
