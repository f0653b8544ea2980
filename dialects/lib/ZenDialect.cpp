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
