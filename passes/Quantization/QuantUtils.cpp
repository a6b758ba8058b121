//===- QuantUtils.cpp - helpers shared by the quantization passes ---------===//

#include "QuantUtils.h"
#include "qatc/Frontend/OnnxImporter.h"
#include "qatc/Reference/Evaluator.h"
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

std::optional<int64_t> qatc::quantization::weightChannelAxis(Operation *op,
                                                             unsigned operand) {
  if (operand != 1)
    return std::nullopt;
  if (isa<onnx::ConvOp>(op))
    return 0;
  if (isa<onnx::ConvTransposeOp>(op))
    return 1;
  if (auto g = dyn_cast<onnx::GemmOp>(op))
    return g.getTransB() ? 0 : 1;
  if (isa<onnx::MatMulOp>(op))
    return cast<RankedTensorType>(op->getOperand(1).getType()).getRank() - 1;
  return std::nullopt;
}

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

/// The values of a constant as `T`, converted as ONNX Cast converts.
template <typename T>
static std::optional<std::vector<T>>
valuesAs(ElementsAttr value, Type elementType, ref::DType dtype) {
  auto t = ref::constantValues(value, elementType);
  if (!t)
    return std::nullopt;
  ref::Tensor converted = ref::castTensor(*t, dtype);
  const T *data = converted.data<T>();
  return std::vector<T>(data, data + converted.numElements());
}

std::optional<std::vector<float>>
qatc::quantization::getConstantFloats(Value v) {
  auto cst = v.getDefiningOp<onnx::ConstantOp>();
  if (!cst || !elementTypeOf(v).isF32())
    return std::nullopt;
  return valuesAs<float>(cast<ElementsAttr>(cst.getValue()), elementTypeOf(v),
                         ref::DType::F32);
}

std::optional<std::vector<double>>
qatc::quantization::getConstantAsDoubles(Value v) {
  auto cst = v.getDefiningOp<onnx::ConstantOp>();
  if (!cst)
    return std::nullopt;
  return valuesAs<double>(cast<ElementsAttr>(cst.getValue()), elementTypeOf(v),
                          ref::DType::F64);
}

std::optional<std::vector<int64_t>>
qatc::quantization::getConstantInts(Value v) {
  auto cst = v.getDefiningOp<qat::ConstantOp>();
  if (!cst)
    return std::nullopt;
  return valuesAs<int64_t>(cst.getValue(), elementTypeOf(v), ref::DType::I64);
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
