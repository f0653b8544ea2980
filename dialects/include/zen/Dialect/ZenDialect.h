//===- ZenDialect.h - the zen dialect ---------------------------*- C++ -*-===//
#ifndef ZEN_DIALECT_ZENDIALECT_H
#define ZEN_DIALECT_ZENDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "zen/Dialect/ZenDialect.h.inc"
#include "zen/Dialect/ZenEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "zen/Dialect/ZenAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "zen/Dialect/ZenTypes.h.inc"

#define GET_OP_CLASSES
#include "zen/Dialect/ZenOps.h.inc"

#endif // ZEN_DIALECT_ZENDIALECT_H
