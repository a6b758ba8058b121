//===- ModelSummary.cpp - human-readable summary of an imported model -----===//

#include "Commands.h"
#include "qatc/Dialect/Onnx/OnnxOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"

using namespace mlir;

static std::string typeStr(Type type) {
  auto shaped = cast<ShapedType>(type);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << shaped.getElementType() << "[";
  if (shaped.hasRank())
    llvm::interleave(shaped.getShape(), os, ",");
  else
    os << "*";
  os << "]";
  return os.str();
}

void qatc::driver::printModelSummary(ModuleOp module, StringRef path,
                                     llvm::raw_ostream &os) {
  Operation *m = module.getOperation();
  auto str = [&](StringRef name) {
    auto a = m->getAttrOfType<StringAttr>(name);
    return a ? a.str() : std::string();
  };
  auto i64 = [&](StringRef name) {
    auto a = m->getAttrOfType<IntegerAttr>(name);
    return a ? a.getInt() : 0;
  };
  func::FuncOp func = *module.getOps<func::FuncOp>().begin();
  os << "model: " << path << "\n";
  std::string producer = str("onnx.producer_name");
  if (!str("onnx.producer_version").empty())
    producer += " " + str("onnx.producer_version");
  os << "  producer: " << (producer.empty() ? "(unknown)" : producer)
     << ", opset " << i64("onnx.opset") << ", IR version "
     << i64("onnx.ir_version") << "\n";

  auto names = [](Operation *op, StringRef attr, size_t i) {
    auto a = op->getAttrOfType<ArrayAttr>(attr);
    return a && i < a.size() ? cast<StringAttr>(a[i]).str() : std::string("?");
  };
  os << "inputs:\n";
  for (BlockArgument arg : func.getArguments())
    os << "  " << names(func, "onnx.input_names", arg.getArgNumber()) << "  "
       << typeStr(arg.getType()) << "\n";
  os << "outputs:\n";
  for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
    os << "  " << names(func, "onnx.output_names", i) << "  " << typeStr(type)
       << "\n";

  llvm::MapVector<StringRef, int> counts;
  int nodes = 0, quantize = 0, dequantize = 0, perAxis = 0, unsupported = 0;
  int64_t weights = 0, params = 0, bytes = 0;
  func.walk([&](Operation *op) {
    if (auto c = dyn_cast<onnx::ConstantOp>(op)) {
      auto type = cast<ShapedType>(c.getType());
      ++weights;
      params += type.getNumElements();
      unsigned bits = type.getElementType().getIntOrFloatBitWidth();
      bytes += type.getNumElements() * ((bits + 7) / 8);
      return;
    }
    if (op->getDialect() == nullptr || isa<func::FuncOp, func::ReturnOp>(op))
      return;
    ++nodes;
    if (auto u = dyn_cast<onnx::UnsupportedOp>(op)) {
      ++unsupported;
      ++counts[u.getOpType()];
      return;
    }
    ++counts[op->getName().stripDialect()];
    Value scale;
    if (auto q = dyn_cast<onnx::QuantizeLinearOp>(op)) {
      ++quantize;
      scale = q.getYScale();
    } else if (auto dq = dyn_cast<onnx::DequantizeLinearOp>(op)) {
      ++dequantize;
      scale = dq.getXScale();
    }
    if (scale && cast<ShapedType>(scale.getType()).getNumElements() > 1)
      ++perAxis;
  });
  os << "nodes: " << nodes << " (" << counts.size() << " op types)\n  ";
  int col = 2;
  bool first = true;
  for (auto &[name, count] : counts) {
    std::string item = (name + " " + llvm::Twine(count)).str();
    if (!first) {
      os << ", ";
      col += 2;
    }
    if (col + item.size() > 78) {
      os << "\n  ";
      col = 2;
    }
    os << item;
    col += item.size();
    first = false;
  }
  os << "\n";
  if (quantize || dequantize)
    os << "quantization: " << quantize << " QuantizeLinear, " << dequantize
       << " DequantizeLinear (" << perAxis << " per-axis)\n";
  else
    os << "quantization: none (a float model)\n";
  os << "constants: " << weights << " tensors, " << params << " values, "
     << llvm::format("%.1f", bytes / 1024.0) << " KiB\n";
  if (unsupported)
    os << "unsupported nodes: " << unsupported << "\n";
}
