//===- ZenDialect.cpp - zen dialect registration --------------------------===//
#include "zen/Dialect/ZenDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace zen;

#include "zen/Dialect/ZenDialect.cpp.inc"
#include "zen/Dialect/ZenEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "zen/Dialect/ZenAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "zen/Dialect/ZenTypes.cpp.inc"

void ZenDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "zen/Dialect/ZenAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "zen/Dialect/ZenTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "zen/Dialect/ZenOps.cpp.inc"
      >();
}

LogicalResult ZenDialect::verifyOperationAttribute(Operation *op, NamedAttribute attribute) {
  // Each declared module attribute must have its declared type.
  auto expect = [&](bool ok, StringRef what) -> LogicalResult {
    if (ok)
      return success();
    return op->emitError("'") << attribute.getName().getValue() << "' must be " << what
                              << ", got " << attribute.getValue();
  };
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  if (name == ClusterAttrHelper::getNameStr() || name == ComputeDtypeAttrHelper::getNameStr() ||
      name == StrategyAttrHelper::getNameStr())
    return expect(isa<StringAttr>(value), "a string");
  if (name == WorldSizeAttrHelper::getNameStr())
    return expect(isa<IntegerAttr>(value) && cast<IntegerAttr>(value).getInt() >= 1,
                  "a positive integer");
  if (name == PredictedAttrHelper::getNameStr())
    return expect(isa<PredictionAttr>(value), "a #zen.prediction");
  if (name == BaselinesAttrHelper::getNameStr()) {
    auto times = dyn_cast<DictionaryAttr>(value);
    return expect(times && llvm::all_of(times, [](NamedAttribute entry) {
                    auto time = dyn_cast<FloatAttr>(entry.getValue());
                    return time && time.getType().isF64() && time.getValueAsDouble() >= 0;
                  }),
                  "a dictionary of non-negative f64 times");
  }
  return success();
}
