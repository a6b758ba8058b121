//===- OnnxDialect.cpp - onnx dialect registration ------------------------===//
//
// Registers the ops of the `onnx` dialect and materializes folded constants
// as `onnx.Constant`.
//
//===----------------------------------------------------------------------===//

#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Dialect/Onnx/ScalarMathBuilder.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace qatc::onnx;

#include "qatc/Dialect/Onnx/OnnxDialect.cpp.inc"
#include "qatc/Dialect/Onnx/OnnxInterfaces.cpp.inc"

void OnnxDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "qatc/Dialect/Onnx/OnnxOps.cpp.inc"
      >();
}

Operation *OnnxDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto typed = dyn_cast<TypedAttr>(value);
  if (!typed || typed.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, typed);
}

#define GET_OP_CLASSES
#include "qatc/Dialect/Onnx/OnnxOps.cpp.inc"
