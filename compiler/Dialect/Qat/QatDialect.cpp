//===- QatDialect.cpp - qat dialect registration and attributes -----------===//
//
// Registers the ops and attributes of the `qat` dialect and implements the
// custom syntax of `#qat.clamp`, and the helpers for `!quant.uniform` types.
//
//===----------------------------------------------------------------------===//

#include "qatc/Dialect/Qat/QatOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace qatc::qat;

#include "qatc/Dialect/Qat/QatDialect.cpp.inc"
#include "qatc/Dialect/Qat/QatEnums.cpp.inc"
#include "qatc/Dialect/Qat/QatInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "qatc/Dialect/Qat/QatAttrs.cpp.inc"

void QatDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "qatc/Dialect/Qat/QatAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "qatc/Dialect/Qat/QatOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// #qat.clamp
//===----------------------------------------------------------------------===//

static constexpr double kInf = std::numeric_limits<double>::infinity();

ClampAttr ClampAttr::getRelu(MLIRContext *ctx) {
  return ClampAttr::get(ctx, 0.0, kInf);
}

bool ClampAttr::isRelu() const { return getMin() == 0.0 && getMax() == kInf; }

/// Parses a bound: a float literal, or `none` for an absent one
/// (`-inf` for the lower bound, `+inf` for the upper).
static ParseResult parseBound(AsmParser &parser, double &value, double absent) {
  if (succeeded(parser.parseOptionalKeyword("none"))) {
    value = absent;
    return success();
  }
  return parser.parseFloat(value);
}

static void printBound(AsmPrinter &printer, double value) {
  if (std::isinf(value)) {
    printer << "none";
    return;
  }
  printer.printFloat(llvm::APFloat(value));
}

double ClampAttr::getMin() const { return getLo().convertToDouble(); }
double ClampAttr::getMax() const { return getHi().convertToDouble(); }

ClampAttr ClampAttr::get(MLIRContext *ctx, double min, double max) {
  return Base::get(ctx, llvm::APFloat(min), llvm::APFloat(max));
}

Attribute ClampAttr::parse(AsmParser &parser, Type) {
  double lo = 0, hi = 0;
  if (parser.parseLess())
    return {};
  if (succeeded(parser.parseOptionalKeyword("relu"))) {
    lo = 0;
    hi = kInf;
  } else if (parseBound(parser, lo, -kInf) || parser.parseComma() ||
             parseBound(parser, hi, kInf)) {
    return {};
  }
  if (parser.parseGreater())
    return {};
  if (std::isnan(lo) || std::isnan(hi) || lo > hi) {
    parser.emitError(parser.getNameLoc(),
                     "clamp bounds must satisfy min <= max");
    return {};
  }
  return ClampAttr::get(parser.getContext(), lo, hi);
}

void ClampAttr::print(AsmPrinter &printer) const {
  printer << "<";
  if (isRelu()) {
    printer << "relu>";
    return;
  }
  printBound(printer, getMin());
  printer << ", ";
  printBound(printer, getMax());
  printer << ">";
}

//===----------------------------------------------------------------------===//
// Quantized type helpers
//===----------------------------------------------------------------------===//

quant::UniformQuantizedType qatc::qat::getPerTensorType(Type type) {
  return dyn_cast<quant::UniformQuantizedType>(getElementTypeOrSelf(type));
}

quant::QuantizedType qatc::qat::getQuantType(Type type) {
  Type elt = getElementTypeOrSelf(type);
  if (isa<quant::UniformQuantizedType, quant::UniformQuantizedPerAxisType>(elt))
    return cast<quant::QuantizedType>(elt);
  return {};
}

SmallVector<double> qatc::qat::getChannelScales(quant::QuantizedType type,
                                                int64_t channels) {
  if (auto axis = dyn_cast<quant::UniformQuantizedPerAxisType>(type))
    return SmallVector<double>(axis.getScales());
  return SmallVector<double>(
      channels, cast<quant::UniformQuantizedType>(type).getScale());
}

SmallVector<int64_t> qatc::qat::getChannelZeroPoints(quant::QuantizedType type,
                                                     int64_t channels) {
  if (auto axis = dyn_cast<quant::UniformQuantizedPerAxisType>(type))
    return SmallVector<int64_t>(axis.getZeroPoints());
  return SmallVector<int64_t>(
      channels, cast<quant::UniformQuantizedType>(type).getZeroPoint());
}

qatc::qat::QuantLayout::QuantLayout(Type tensorType)
    : type(getQuantType(tensorType)), qmin(type.getStorageTypeMin()),
      qmax(type.getStorageTypeMax()) {
  auto shape = cast<RankedTensorType>(tensorType).getShape();
  if (auto axis = dyn_cast<quant::UniformQuantizedPerAxisType>(type))
    channel = AxisIndex(shape, axis.getQuantizedDimension());
  scales = getChannelScales(type, channel.channels());
  zeroPoints = getChannelZeroPoints(type, channel.channels());
}
