//===- QuantUtils.cpp - helpers shared by the quantization passes ---------===//

#include "QuantUtils.h"
#include "qatc/Frontend/OnnxImporter.h"
#include "qatc/Support/Locations.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

#include <cstring>

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

/// Elements below which constants are printed literals, not blobs.
static constexpr int64_t kInlineElements = 16;

bool qatc::quantization::isForcedFp32(Operation *op) {
  auto p = op->getAttrOfType<StringAttr>(kPrecisionAttr);
  return p && p.getValue() == "fp32";
}

void qatc::quantization::eraseUnusedConstants(ModuleOp module) {
  SmallVector<Operation *> dead;
  module.walk([&](onnx::ConstantOp cst) {
    if (cst->use_empty())
      dead.push_back(cst);
  });
  for (Operation *op : dead)
    op->erase();
}

std::string qatc::quantization::getTensorName(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    auto names =
        func ? func->getAttrOfType<ArrayAttr>("onnx.input_names") : ArrayAttr();
    if (names && arg.getArgNumber() < names.size())
      return cast<StringAttr>(names[arg.getArgNumber()]).str();
    return "";
  }
  Operation *def = v.getDefiningOp();
  auto names = def->getAttrOfType<ArrayAttr>(kOutputNamesAttr);
  unsigned idx = cast<OpResult>(v).getResultNumber();
  if (!names || idx >= names.size())
    return "";
  return cast<StringAttr>(names[idx]).str();
}

void qatc::quantization::setTensorName(Operation *op, StringRef name,
                                       unsigned index) {
  if (name.empty() && !op->hasAttr(kOutputNamesAttr))
    return;
  SmallVector<Attribute> names;
  if (auto old = op->getAttrOfType<ArrayAttr>(kOutputNamesAttr))
    names.assign(old.begin(), old.end());
  Builder b(op->getContext());
  names.resize(std::max<size_t>(names.size(), op->getNumResults()),
               b.getStringAttr(""));
  names[index] = b.getStringAttr(name);
  op->setAttr(kOutputNamesAttr, b.getArrayAttr(names));
}

std::string qatc::quantization::getNodeName(Operation *op) {
  auto infos = getOnnxLocInfos(op->getLoc());
  return infos.empty() ? "" : infos.front().name;
}

OnnxLocInfo qatc::quantization::getPrimaryNode(Operation *op) {
  OnnxLocInfo fallback;
  bool first = true;
  for (const OnnxLocInfo &info : getOnnxLocInfos(op->getLoc())) {
    if (first)
      fallback = info;
    first = false;
    if (info.kind != "QuantizeLinear" && info.kind != "DequantizeLinear")
      return info;
  }
  return fallback;
}

std::string qatc::quantization::describeSource(Value v) {
  if (isa<BlockArgument>(v)) {
    std::string name = getTensorName(v);
    return name.empty() ? std::string("a graph input")
                        : "the graph input '" + name + "'";
  }
  Operation *def = v.getDefiningOp();
  if (isa<onnx::ConstantOp>(def))
    return "a float constant";
  OnnxLocInfo node = getPrimaryNode(def);
  std::string what = node.name.empty() ? def->getName().getStringRef().str()
                                       : node.kind + " \"" + node.name + "\"";
  if (isa<qat::DequantizeOp>(def))
    return "the dequantized " + what;
  if (isa<qat::QatDialect>(def->getDialect()))
    return "the fp32 result of the int8 " + what +
           " (the model has no QuantizeLinear after it)";
  return "the fp32 output of " + what;
}

/// Appends the ONNX node locations inside `loc` to `out`.
static void collectNodeLocs(Location loc, llvm::SetVector<Location> &out) {
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    // A node location is itself NameLoc(FusedLoc<"Op">[file]); only fused
    // locations without such metadata group several nodes.
    if (!fused.getMetadata()) {
      for (Location l : fused.getLocations())
        collectNodeLocs(l, out);
      return;
    }
  }
  out.insert(loc);
}

Location qatc::quantization::fuseLocations(ArrayRef<Operation *> ops) {
  llvm::SetVector<Location> locs;
  for (Operation *op : ops)
    if (op)
      collectNodeLocs(op->getLoc(), locs);
  if (locs.size() == 1)
    return locs.front();
  return FusedLoc::get(ops.front()->getContext(), locs.getArrayRef());
}

void qatc::quantization::recordRemoved(Operation *op, StringRef reason) {
  auto module = op->getParentOfType<ModuleOp>();
  if (!module)
    return;
  NamedAttrList removed;
  if (auto old = module->getAttrOfType<DictionaryAttr>(kRemovedNodesAttr))
    removed.append(old.getValue());
  Builder b(op->getContext());
  size_t before = removed.getAttrs().size();
  for (const OnnxLocInfo &info : getOnnxLocInfos(op->getLoc()))
    if (!info.name.empty() && !removed.get(info.name))
      removed.set(
          info.name,
          b.getDictionaryAttr(
              {b.getNamedAttr("reason", b.getStringAttr(reason)),
               b.getNamedAttr("op_type", b.getStringAttr(info.kind)),
               b.getNamedAttr("index", b.getI64IntegerAttr(info.index))}));
  if (removed.getAttrs().size() != before)
    module->setAttr(kRemovedNodesAttr, removed.getDictionary(op->getContext()));
}

std::optional<std::vector<float>>
qatc::quantization::getConstantFloats(Value v) {
  auto cst = v.getDefiningOp<onnx::ConstantOp>();
  if (!cst)
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(cst.getType());
  if (!type || !type.getElementType().isF32())
    return std::nullopt;
  std::vector<float> out(type.getNumElements());
  Attribute value = cst.getValue();
  if (auto res = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != out.size() * sizeof(float))
      return std::nullopt;
    std::memcpy(out.data(), blob->getData().data(), out.size() * sizeof(float));
    return out;
  }
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    size_t i = 0;
    for (float f : dense.getValues<float>())
      out[i++] = f;
    return out;
  }
  return std::nullopt;
}

std::optional<std::vector<double>>
qatc::quantization::getConstantAsDoubles(Value v) {
  auto cst = v.getDefiningOp<onnx::ConstantOp>();
  if (!cst)
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(cst.getType());
  if (!type)
    return std::nullopt;
  Type elt = type.getElementType();
  std::vector<double> out;
  if (elt.isF32()) {
    auto floats = getConstantFloats(v);
    if (!floats)
      return std::nullopt;
    out.assign(floats->begin(), floats->end());
    return out;
  }
  auto intType = dyn_cast<IntegerType>(elt);
  Attribute value = cst.getValue();
  if (auto res = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    unsigned width = intType ? intType.getWidth() : 0;
    if (!blob || !intType || width % 8 != 0 || width > 64 ||
        blob->getData().size() !=
            static_cast<size_t>(type.getNumElements()) * (width / 8))
      return std::nullopt;
    const char *raw = blob->getData().data();
    for (int64_t i = 0, n = type.getNumElements(); i < n; ++i) {
      uint64_t u = 0;
      std::memcpy(&u, raw + i * (width / 8), width / 8);
      if (!intType.isUnsigned() && width < 64 && (u >> (width - 1)) & 1)
        u |= ~uint64_t(0) << width; // sign-extend
      out.push_back(intType.isUnsigned() ? static_cast<double>(u)
                                         : static_cast<double>(int64_t(u)));
    }
    return out;
  }
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense)
    return std::nullopt;
  if (intType) {
    for (APInt i : dense.getValues<APInt>())
      out.push_back(intType.isUnsigned() || intType.getWidth() == 1
                        ? static_cast<double>(i.getZExtValue())
                        : static_cast<double>(i.getSExtValue()));
    return out;
  }
  if (isa<FloatType>(elt)) {
    for (APFloat f : dense.getValues<APFloat>())
      out.push_back(f.convertToDouble());
    return out;
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>>
qatc::quantization::getConstantInts(Value v) {
  auto cst = v.getDefiningOp<qat::ConstantOp>();
  if (!cst)
    return std::nullopt;
  auto qtype = qat::getQuantType(cst.getType());
  auto type = cast<ShapedType>(cst.getValue().getType());
  unsigned width = type.getElementTypeBitWidth();
  bool isSigned = qtype.isSigned();
  std::vector<int64_t> out(type.getNumElements());
  auto fromRaw = [&](const char *raw, bool splat) {
    size_t bytes = width / 8;
    for (size_t i = 0; i < out.size(); ++i) {
      const char *p = raw + (splat ? 0 : i * bytes);
      int64_t x = 0;
      switch (width) {
      case 8:
        x = isSigned ? int64_t(int8_t(*p)) : int64_t(uint8_t(*p));
        break;
      case 16: {
        uint16_t u;
        std::memcpy(&u, p, 2);
        x = isSigned ? int64_t(int16_t(u)) : int64_t(u);
        break;
      }
      case 32: {
        uint32_t u;
        std::memcpy(&u, p, 4);
        x = isSigned ? int64_t(int32_t(u)) : int64_t(u);
        break;
      }
      default:
        return false;
      }
      out[i] = x;
    }
    return true;
  };
  Attribute value = cst.getValue();
  if (auto res = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != out.size() * (width / 8) ||
        !fromRaw(blob->getData().data(), false))
      return std::nullopt;
    return out;
  }
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    if (!fromRaw(dense.getRawData().data(), dense.isSplat()))
      return std::nullopt;
    return out;
  }
  return std::nullopt;
}

ElementsAttr qatc::quantization::makeElements(RankedTensorType type,
                                              ArrayRef<char> bytes,
                                              StringRef keyHint) {
  if (type.getNumElements() <= kInlineElements)
    return cast<ElementsAttr>(DenseElementsAttr::getFromRawBuffer(type, bytes));
  // Resource keys must be bare identifiers to print and parse back.
  std::string key;
  for (char c : keyHint)
    key.push_back(llvm::isAlnum(c) || c == '_' || c == '.' || c == '-' ? c
                                                                       : '_');
  if (key.empty() || !(llvm::isAlpha(key.front()) || key.front() == '_'))
    key.insert(key.begin(), '_');
  size_t align = std::max<size_t>(1, type.getElementTypeBitWidth() / 8);
  AsmResourceBlob blob =
      HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, align);
  return cast<ElementsAttr>(
      DenseResourceElementsAttr::get(type, key, std::move(blob)));
}

Value qatc::quantization::createFloatConstant(OpBuilder &b, Location loc,
                                              ArrayRef<int64_t> shape,
                                              ArrayRef<float> values,
                                              StringRef keyHint) {
  auto type = RankedTensorType::get(shape, b.getF32Type());
  ArrayRef<char> bytes(reinterpret_cast<const char *>(values.data()),
                       values.size() * sizeof(float));
  return b.create<onnx::ConstantOp>(loc, makeElements(type, bytes, keyHint));
}

qat::ConstantOp qatc::quantization::createQuantConstant(
    OpBuilder &b, Location loc, RankedTensorType type, ArrayRef<int64_t> values,
    StringRef keyHint) {
  auto qtype = qat::getQuantType(type);
  unsigned width = qtype.getStorageTypeIntegralWidth();
  std::vector<char> bytes(values.size() * (width / 8));
  for (size_t i = 0; i < values.size(); ++i) {
    uint64_t u = static_cast<uint64_t>(values[i]);
    std::memcpy(bytes.data() + i * (width / 8), &u, width / 8); // little-endian
  }
  auto storage =
      RankedTensorType::get(type.getShape(), b.getIntegerType(width));
  return b.create<qat::ConstantOp>(loc, type,
                                   makeElements(storage, bytes, keyHint));
}

Type qatc::quantization::elementTypeOf(Value v) {
  return getElementTypeOrSelf(v.getType());
}

qat::DequantizeOp qatc::quantization::getDequantize(Value v) {
  return v.getDefiningOp<qat::DequantizeOp>();
}

Operation *qatc::quantization::getSingleUser(Value v) {
  if (!v.hasOneUse())
    return nullptr;
  return *v.getUsers().begin();
}

qat::RoundingModeAttr qatc::quantization::halfToEven(MLIRContext *ctx) {
  return qat::RoundingModeAttr::get(ctx, qat::RoundingMode::HalfToEven);
}
