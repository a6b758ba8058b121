//===- Evaluator.cpp - the reference evaluator of the onnx dialect --------===//
//
// Walks the function in order, keeps each value's tensor until its last use,
// and dispatches every op to its kernel. Constants wrap their weight blobs
// without a copy (unless the fp64 mode widens them).
//
//===----------------------------------------------------------------------===//

#include "qatc/Reference/Evaluator.h"
#include "Kernels.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace qatc::ref;
namespace onnx = qatc::onnx;

func::FuncOp qatc::ref::getMainFunction(ModuleOp module) {
  for (auto f : module.getOps<func::FuncOp>())
    if (f.getName() == "main_graph")
      return f;
  auto funcs = module.getOps<func::FuncOp>();
  return funcs.empty() ? func::FuncOp() : *funcs.begin();
}

static std::vector<std::string> namesOf(func::FuncOp func, StringRef attr,
                                        size_t count, StringRef fallback) {
  std::vector<std::string> names;
  auto a = func->getAttrOfType<ArrayAttr>(attr);
  for (size_t i = 0; i < count; ++i)
    names.push_back(a && i < a.size() ? cast<StringAttr>(a[i]).str()
                                      : (fallback + Twine(i)).str());
  return names;
}

std::vector<std::string> qatc::ref::getInputNames(func::FuncOp func) {
  return namesOf(func, "onnx.input_names", func.getNumArguments(), "input_");
}

std::vector<std::string> qatc::ref::getOutputNames(func::FuncOp func) {
  return namesOf(func, "onnx.output_names", func.getNumResults(), "output_");
}

std::optional<Tensor> qatc::ref::constantValues(ElementsAttr value,
                                                Type elementType) {
  // The stored type: float constants are float32/64 whatever the
  // evaluation's float type.
  KernelContext stored;
  stored.floatType = elementType.isF64() ? DType::F64 : DType::F32;
  auto dtype = toDType(elementType, stored);
  if (!dtype)
    return std::nullopt;
  auto shape = cast<ShapedType>(value.getType()).getShape();
  if (auto res = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    size_t bytes = ShapedType::getNumElements(shape) * dtypeSize(*dtype);
    if (!blob || blob->getData().size() != bytes)
      return std::nullopt;
    return Tensor::wrap(*dtype, shape, blob->getData().data(), nullptr);
  }
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense)
    return std::nullopt;
  Tensor t(*dtype, shape);
  if (*dtype == DType::Bool) {
    bool *dst = t.mutableData<bool>();
    int64_t i = 0;
    for (bool b : dense.getValues<bool>())
      dst[i++] = b;
    return t;
  }
  ArrayRef<char> raw = dense.getRawData();
  size_t size = dtypeSize(*dtype);
  for (int64_t i = 0, n = t.numElements(); i < n; ++i)
    std::memcpy(t.mutableData<char>() + i * size,
                raw.data() + (dense.isSplat() ? 0 : i * size), size);
  return t;
}

DenseElementsAttr qatc::ref::tensorAttr(const Tensor &t,
                                        RankedTensorType type) {
  if (t.shape() != type.getShape())
    return {};
  Type elt = type.getElementType();
  KernelContext stored;
  stored.floatType = elt.isF64() ? DType::F64 : DType::F32;
  auto dtype = toDType(elt, stored);
  if (!dtype || *dtype != t.dtype())
    return {};
  if (t.dtype() == DType::Bool) {
    SmallVector<bool> bits;
    for (int64_t i = 0; i < t.numElements(); ++i)
      bits.push_back(t.data<uint8_t>()[i] != 0);
    return DenseElementsAttr::get(type, bits);
  }
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(t.bytes(), t.byteSize()));
}

namespace {

/// The tensor of a constant op, in the evaluation's float type.
FailureOr<Tensor> constantTensor(onnx::ConstantOp op,
                                 const KernelContext &ctx) {
  Type elt = cast<RankedTensorType>(op.getType()).getElementType();
  auto dtype = toDType(elt, ctx);
  if (!dtype)
    return op.emitOpError("reference evaluation of ")
               << elt << " is not supported",
           failure();
  auto t = constantValues(cast<ElementsAttr>(op.getValue()), elt);
  if (!t)
    return op.emitOpError("constant data is missing or has the wrong size"),
           failure();
  return castTensor(*t, *dtype);
}

/// Dispatches one op to its kernel.
Results evalOp(Operation *op, ArrayRef<Tensor> in, const KernelContext &ctx) {
  return llvm::TypeSwitch<Operation *, Results>(op)
      .Case([&](onnx::ConstantOp c) -> Results {
        auto t = constantTensor(c, ctx);
        if (failed(t))
          return failure();
        return one(*t);
      })
      .Default([&](Operation *o) -> Results {
        // Each kernel file evaluates the ops of its family.
        for (auto family :
             {evalElementwiseFamily, evalMovementFamily, evalConvFamily})
          if (std::optional<Results> r = family(o, in, ctx))
            return std::move(*r);
        if (isa<qatc::qat::QatDialect>(o->getDialect()))
          return evalQat(o, in, ctx);
        if (auto u = dyn_cast<onnx::UnsupportedOp>(o))
          return o->emitError("operator ")
                     << u.getOpType() << " cannot be evaluated (unsupported)",
                 failure();
        return o->emitOpError("has no reference implementation"), failure();
      });
}

} // namespace

FailureOr<SmallVector<Tensor, 1>>
qatc::ref::evaluateOp(Operation *op, ArrayRef<Tensor> inputs, bool fp64) {
  KernelContext ctx;
  ctx.floatType = fp64 ? DType::F64 : DType::F32;
  for (Value r : op->getResults())
    if (!toDType(getElementTypeOrSelf(r.getType()), ctx))
      return op->emitError("the reference evaluator does not support ")
                 << getElementTypeOrSelf(r.getType()) << " tensors",
             failure();
  return evalOp(op, inputs, ctx);
}

FailureOr<std::vector<Tensor>> qatc::ref::evaluate(ModuleOp module,
                                                   ArrayRef<Tensor> inputs,
                                                   const EvalOptions &options) {
  func::FuncOp func = getMainFunction(module);
  if (!func)
    return module.emitError("the module has no function to evaluate"),
           failure();
  KernelContext ctx;
  ctx.floatType = options.fp64 ? DType::F64 : DType::F32;

  Block &body = func.getBody().front();
  std::vector<std::string> inNames = getInputNames(func);
  if (inputs.size() != func.getNumArguments())
    return emitError(func.getLoc())
               << "the model has " << func.getNumArguments() << " inputs but "
               << inputs.size() << " were given",
           failure();

  // Every tensor type must be one the evaluator computes with.
  for (BlockArgument arg : func.getArguments()) {
    Type elt = getElementTypeOrSelf(arg.getType());
    if (!toDType(elt, ctx))
      return emitError(arg.getLoc())
                 << "the reference evaluator does not support " << elt
                 << " tensors",
             failure();
  }
  WalkResult typesOk = func.walk([&](Operation *op) {
    for (Value r : op->getResults()) {
      Type elt = getElementTypeOrSelf(r.getType());
      if (!toDType(elt, ctx)) {
        op->emitError("the reference evaluator does not support ")
            << elt << " tensors";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  if (typesOk.wasInterrupted())
    return failure();

  DenseMap<Value, Tensor> values;
  DenseMap<Value, unsigned> usesLeft;
  auto countUses = [&](Value v) {
    usesLeft[v] = std::distance(v.getUses().begin(), v.getUses().end());
  };
  for (auto [arg, given, name] :
       llvm::zip(func.getArguments(), inputs, inNames)) {
    auto type = cast<RankedTensorType>(arg.getType());
    auto expect = toDType(type.getElementType(), ctx);
    bool floatOk = isFloat(given.dtype()) && expect && isFloat(*expect);
    if (!expect || (given.dtype() != *expect && !floatOk))
      return emitError(arg.getLoc())
                 << "expects " << type.getElementType() << " data, got "
                 << dtypeName(given.dtype()),
             failure();
    if (given.shape() != type.getShape())
      return emitError(arg.getLoc())
                 << "expects shape " << type << ", got " << given.describe(),
             failure();
    Tensor t = castTensor(given, *expect);
    if (options.onTensor)
      options.onTensor(name, t);
    values[arg] = std::move(t);
    countUses(arg);
  }

  auto release = [&](Operation *op) {
    for (Value v : op->getOperands())
      if (--usesLeft[v] == 0)
        values.erase(v);
  };

  for (Operation &opRef : body) {
    Operation *op = &opRef;
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<Tensor> outputs;
      for (Value v : ret.getOperands())
        outputs.push_back(values.lookup(v));
      return outputs;
    }
    SmallVector<Tensor, 4> in;
    for (Value v : op->getOperands())
      in.push_back(values.lookup(v));
    Results results = evalOp(op, in, ctx);
    if (failed(results))
      return failure();
    auto names = op->getAttrOfType<ArrayAttr>(qatc::kOutputNamesAttr);
    for (auto [i, r] : llvm::enumerate(op->getResults())) {
      Tensor &t = (*results)[i];
      if (names && i < names.size() &&
          !isa<onnx::ConstantOp, qatc::qat::ConstantOp>(op)) {
        StringRef name = cast<StringAttr>(names[i]).getValue();
        if (!name.empty() && options.onTensor)
          options.onTensor(name, t);
        if (!name.empty() && options.substitute)
          if (const Tensor *other = options.substitute(name))
            if (other->dtype() == t.dtype() && other->shape() == t.shape())
              t = *other;
      }
      values[r] = std::move(t);
      countUses(r);
    }
    release(op);
  }
  return func.emitError("function has no return"), failure();
}
