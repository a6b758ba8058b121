//===- OnnxNodeImporters.cpp - one handler per ONNX op type ---------------===//
//
// Each handler reads a node's inputs and attributes, normalizes the opset
// differences (attributes that became inputs, changed defaults, auto_pad) and
// builds the `onnx` dialect op. Inputs that the dialect keeps as attributes
// must be constants after the importer's folding; if not, the error says so.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"
#include "qatc/Frontend/OnnxImporter.h"
#include "qatc/Reference/Evaluator.h"
#include "qatc/Support/Locations.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace qatc;
using namespace qatc::detail;

//===----------------------------------------------------------------------===//
// NodeImporter
//===----------------------------------------------------------------------===//

const onnxpb::AttributeProto *NodeImporter::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeImporter::intAttr(StringRef name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}

float NodeImporter::floatAttr(StringRef name, float dflt) const {
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}

std::string NodeImporter::stringAttr(StringRef name, StringRef dflt) const {
  const auto *a = attr(name);
  return a ? a->s() : dflt.str();
}

std::optional<SmallVector<int64_t>>
NodeImporter::intsAttr(StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<SmallVector<float>>
NodeImporter::floatsAttr(StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<float>(a->floats().begin(), a->floats().end());
}

std::optional<SmallVector<int64_t>> NodeImporter::constInts(Value v) const {
  DenseIntElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  SmallVector<int64_t> out;
  for (const APInt &x : attr.getValues<APInt>())
    out.push_back(attr.getElementType().isUnsignedInteger()
                      ? static_cast<int64_t>(x.getZExtValue())
                      : x.getSExtValue());
  return out;
}

std::optional<SmallVector<double>> NodeImporter::constFloats(Value v) const {
  DenseFPElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  SmallVector<double> out;
  for (const APFloat &x : attr.getValues<APFloat>())
    out.push_back(x.convertToDouble());
  return out;
}

/// Why `v` is not a constant: the graph input whose data it depends on and
/// the node that reads that data, or the first node qatc could not evaluate.
static std::string whyNotConstant(Value v) {
  llvm::SmallPtrSet<Operation *, 16> seen;
  SmallVector<std::pair<Value, Operation *>> stack{{v, nullptr}};
  Operation *firstOp = v.getDefiningOp();
  while (!stack.empty()) {
    auto [value, user] = stack.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      auto infos = getOnnxLocInfos(arg.getLoc());
      std::string name = infos.empty() ? "?" : infos.front().name;
      std::string msg = "it depends on the data of graph input '" + name + "'";
      if (user) {
        auto node = getOnnxLocInfos(user->getLoc());
        if (!node.empty() && node.front().index >= 0)
          msg += " (read by node \"" + node.front().name + "\" (" +
                 node.front().kind + "))";
      }
      return msg + ", so it is only known at run time";
    }
    Operation *def = value.getDefiningOp();
    if (!def || !seen.insert(def).second)
      continue;
    for (Value operand : def->getOperands())
      if (!matchPattern(operand, m_Constant()))
        stack.push_back({operand, def});
  }
  if (firstOp) {
    auto node = getOnnxLocInfos(firstOp->getLoc());
    if (!node.empty())
      return "it is computed by node \"" + node.front().name + "\" (" +
             node.front().kind + "), which qatc does not evaluate at import";
  }
  return "it is not a constant";
}

FailureOr<SmallVector<int64_t>> NodeImporter::requireConstInts(size_t i,
                                                               StringRef what) {
  auto v = constInts(input(i));
  if (!v) {
    InFlightDiagnostic diag = error();
    diag << "input #" << i << " ('" << what << "') of " << node.op_type()
         << " must be a constant integer tensor (qatc needs it at compile "
            "time to give every tensor a static shape)";
    if (Value in = input(i)) {
      if (matchPattern(in, m_Constant()))
        diag << ", but it is a constant of type " << in.getType();
      else
        diag << ", but " << whyNotConstant(in);
    } else {
      diag << ", but it is absent";
    }
    return failure();
  }
  return *v;
}

FailureOr<ArrayRef<int64_t>> NodeImporter::staticShape(Value v,
                                                       StringRef what) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return error() << what << " of " << node.op_type()
                   << " has no static shape (" << v.getType() << ")",
           failure();
  return type.getShape();
}

bool qatc::detail::isReasonableShape(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > kMaxDimension)
      return false;
    if (d != 0 && count > kMaxElements / d)
      return false;
    count *= d;
  }
  return true;
}

/// Largest result (in elements) the importer evaluates at import time: shape
/// computations and small constants, never weights.
static constexpr int64_t kMaxEvaluatedElements = 4096;

std::optional<SmallVector<Value>>
NodeImporter::evaluateConstantOp(Operation *op) {
  // Q/DQ stay as the model wrote them: the quantization passes read them.
  if (isa<qatc::onnx::QuantizeLinearOp, qatc::onnx::DequantizeLinearOp,
          qatc::onnx::UnsupportedOp, qatc::onnx::ConstantOp>(op))
    return std::nullopt;
  for (Value r : op->getResults()) {
    auto type = dyn_cast<RankedTensorType>(r.getType());
    if (!type || !type.hasStaticShape() ||
        type.getNumElements() > kMaxEvaluatedElements)
      return std::nullopt;
  }
  SmallVector<ref::Tensor> in;
  for (Value v : op->getOperands()) {
    ElementsAttr attr;
    if (!matchPattern(v, m_Constant(&attr)))
      return std::nullopt;
    auto t = ref::constantValues(
        attr, cast<ShapedType>(v.getType()).getElementType());
    if (!t)
      return std::nullopt;
    in.push_back(std::move(*t));
  }
  // An op the evaluator cannot compute here stays an op: silence it.
  ScopedDiagnosticHandler silence(getContext(),
                                  [](Diagnostic &) { return success(); });
  auto out = ref::evaluateOp(op, in);
  if (failed(out))
    return std::nullopt;
  SmallVector<Value> values;
  for (auto [r, t] : llvm::zip(op->getResults(), *out)) {
    auto attr = ref::tensorAttr(t, cast<RankedTensorType>(r.getType()));
    if (!attr)
      return std::nullopt;
    values.push_back(constant(attr));
  }
  return values;
}

FailureOr<SmallVector<Value>>
NodeImporter::buildWithTypes(StringRef opName, ValueRange operands,
                             ArrayRef<NamedAttribute> attrs, TypeRange types) {
  for (Type t : types) {
    auto ranked = dyn_cast<RankedTensorType>(t);
    if (ranked && !isReasonableShape(ranked.getShape()))
      return error() << node.op_type() << " would produce a tensor of type "
                     << t << ", which is too large (qatc allows dimensions up "
                     << "to " << kMaxDimension << " and " << kMaxElements
                     << " elements)",
             failure();
  }
  OperationState state(loc, opName);
  state.addOperands(operands);
  state.addAttributes(attrs);
  state.addTypes(types);
  Operation *op = builder.create(state);
  if (failed(mlir::verify(op, /*verifyRecursively=*/false))) {
    op->erase();
    return failure();
  }
  SmallVector<Value> results(op->getResults());
  // Fold when every operand is a constant, and Shape always (static types):
  // this is what turns run-time shape computations into the constants that
  // Reshape and friends need. Other folds (an Identity forwarding its input)
  // would drop tensors the user can see, so they are left alone.
  bool allConstant = llvm::all_of(
      operands, [](Value v) { return matchPattern(v, m_Constant()); });
  if (!(allConstant || isa<qatc::onnx::ShapeOp>(op)) ||
      op->getNumResults() == 0)
    return results;
  SmallVector<OpFoldResult> folded;
  if (failed(op->fold(folded)) || folded.empty()) {
    if (!allConstant)
      return results;
    if (auto evaluated = evaluateConstantOp(op)) {
      op->erase();
      return *evaluated;
    }
    return results;
  }
  SmallVector<Value> replaced;
  for (auto [result, fr] : llvm::zip(op->getResults(), folded)) {
    if (auto v = dyn_cast<Value>(fr)) {
      replaced.push_back(v);
      continue;
    }
    Operation *cst = op->getDialect()->materializeConstant(
        builder, cast<Attribute>(fr), result.getType(), loc);
    if (!cst)
      return results;
    replaced.push_back(cst->getResult(0));
  }
  op->erase();
  return replaced;
}

FailureOr<SmallVector<Value>>
NodeImporter::build(StringRef opName, ValueRange operands,
                    ArrayRef<NamedAttribute> attrs) {
  OperationName name(opName, getContext());
  auto *infer = name.getInterface<InferTypeOpInterface>();
  assert(infer && "op without shape inference");
  SmallVector<Type> types;
  if (failed(infer->inferReturnTypes(
          getContext(), loc, operands, DictionaryAttr::get(getContext(), attrs),
          /*properties=*/nullptr, /*regions=*/{}, types)))
    return failure();
  return buildWithTypes(opName, operands, attrs, types);
}

FailureOr<Value> NodeImporter::build1(StringRef opName, ValueRange operands,
                                      ArrayRef<NamedAttribute> attrs) {
  auto results = build(opName, operands, attrs);
  if (failed(results))
    return failure();
  return (*results)[0];
}

Value NodeImporter::constant(TypedAttr value) {
  return builder.create<qatc::onnx::ConstantOp>(loc, value.getType(), value);
}

//===----------------------------------------------------------------------===//
// Generic attributes (for onnx.Unsupported)
//===----------------------------------------------------------------------===//

Attribute
qatc::detail::convertGenericAttribute(MLIRContext *ctx,
                                      const onnxpb::AttributeProto &a) {
  Builder b(ctx);
  using AP = onnxpb::AttributeProto;
  switch (a.type()) {
  case AP::INT:
    return b.getI64IntegerAttr(a.i());
  case AP::FLOAT:
    return b.getF32FloatAttr(a.f());
  case AP::STRING:
    return b.getStringAttr(a.s());
  case AP::INTS:
    return b.getDenseI64ArrayAttr(
        SmallVector<int64_t>(a.ints().begin(), a.ints().end()));
  case AP::FLOATS:
    return b.getDenseF32ArrayAttr(
        SmallVector<float>(a.floats().begin(), a.floats().end()));
  case AP::STRINGS: {
    SmallVector<StringRef> strs(a.strings().begin(), a.strings().end());
    return b.getStrArrayAttr(strs);
  }
  case AP::TENSOR:
    return b.getStringAttr("<tensor " + dataTypeName(a.t().data_type()) + ">");
  case AP::GRAPH:
    return b.getStringAttr("<graph '" + a.g().name() + "' with " +
                           std::to_string(a.g().node_size()) + " nodes>");
  default:
    return b.getStringAttr("<attribute of type " +
                           AP::AttributeType_Name(a.type()) + ">");
  }
}

//===----------------------------------------------------------------------===//
// Shared normalization helpers
//===----------------------------------------------------------------------===//

LogicalResult qatc::detail::single(NodeImporter &ni, FailureOr<Value> v) {
  if (failed(v))
    return failure();
  ni.results.push_back(*v);
  return success();
}

LogicalResult qatc::detail::requireInputs(NodeImporter &ni, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!ni.input(i))
      return ni.error() << ni.node.op_type() << " needs input #" << i,
             failure();
  return success();
}

FailureOr<int64_t> qatc::detail::normAxis(NodeImporter &ni, int64_t axis,
                                          int64_t rank) {
  if (axis < -rank || axis >= rank)
    return ni.error() << "axis " << axis << " is out of range for rank "
                      << rank,
           failure();
  return axis < 0 ? axis + rank : axis;
}

FailureOr<std::optional<SmallVector<int64_t>>>
qatc::detail::readAxes(NodeImporter &ni, int64_t inputSinceOpset,
                       size_t inputIndex) {
  if (ni.opset < inputSinceOpset)
    return ni.intsAttr("axes");
  if (!ni.input(inputIndex))
    return std::optional<SmallVector<int64_t>>();
  auto axes = ni.requireConstInts(inputIndex, "axes");
  if (failed(axes))
    return failure();
  return std::optional<SmallVector<int64_t>>(*axes);
}

FailureOr<SmallVector<int64_t>>
qatc::detail::normAxes(NodeImporter &ni, ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<int64_t> out;
  for (int64_t a : axes) {
    auto n = normAxis(ni, a, rank);
    if (failed(n))
      return failure();
    if (llvm::is_contained(out, *n))
      return ni.error() << "axis " << a << " appears twice", failure();
    out.push_back(*n);
  }
  llvm::sort(out);
  return out;
}

namespace {

/// Resolved window attributes of Conv and pooling ops.
struct Window {
  SmallVector<int64_t> kernel, strides, pads, dilations;
};

/// Reads kernel_shape/strides/pads/dilations and resolves auto_pad for an
/// input with the given spatial sizes.
FailureOr<Window> readWindow(NodeImporter &ni, ArrayRef<int64_t> spatialIn,
                             std::optional<SmallVector<int64_t>> kernelDefault,
                             bool ceilMode = false) {
  size_t n = spatialIn.size();
  Window w;
  auto kernel = ni.intsAttr("kernel_shape");
  if (!kernel)
    kernel = kernelDefault;
  if (!kernel)
    return ni.error() << ni.node.op_type() << " needs kernel_shape", failure();
  w.kernel = *kernel;
  w.strides = ni.intsAttr("strides").value_or(SmallVector<int64_t>(n, 1));
  w.dilations = ni.intsAttr("dilations").value_or(SmallVector<int64_t>(n, 1));
  w.pads = ni.intsAttr("pads").value_or(SmallVector<int64_t>(2 * n, 0));
  if (w.kernel.size() != n || w.strides.size() != n ||
      w.dilations.size() != n || w.pads.size() != 2 * n)
    return ni.error() << ni.node.op_type() << " on a " << n << "-D input needs "
                      << n << " kernel_shape/strides/dilations entries and "
                      << 2 * n << " pads",
           failure();
  auto bad = [](int64_t v) { return v <= 0 || v > kMaxDimension; };
  for (size_t i = 0; i < n; ++i)
    if (bad(w.strides[i]) || bad(w.dilations[i]) || bad(w.kernel[i]))
      return ni.error() << "kernel_shape, strides and dilations must be in [1, "
                        << kMaxDimension << "]",
             failure();
  std::string autoPad = ni.stringAttr("auto_pad", "NOTSET");
  if (autoPad == "NOTSET")
    return w;
  if (autoPad == "VALID") {
    w.pads.assign(2 * n, 0);
    return w;
  }
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return ni.error() << "auto_pad '" << autoPad << "' is not valid", failure();
  for (size_t i = 0; i < n; ++i) {
    int64_t out = (spatialIn[i] + w.strides[i] - 1) / w.strides[i];
    int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
    int64_t total =
        std::max<int64_t>(0, (out - 1) * w.strides[i] + span - spatialIn[i]);
    int64_t small = total / 2, large = total - total / 2;
    w.pads[i] = autoPad == "SAME_UPPER" ? small : large;
    w.pads[i + n] = autoPad == "SAME_UPPER" ? large : small;
  }
  (void)ceilMode;
  return w;
}

SmallVector<NamedAttribute> windowAttrs(NodeImporter &ni, const Window &w) {
  return {ni.ints("kernel_shape", w.kernel), ni.ints("strides", w.strides),
          ni.ints("pads", w.pads), ni.ints("dilations", w.dilations)};
}

/// Checks that a Q/DQ tensor type is int8/uint8 (or int32 for DQ) and says
/// what is refused otherwise.
LogicalResult checkQuantizedType(NodeImporter &ni, Type t, bool allowInt32) {
  if (t.isInteger(8) || (allowInt32 && t.isSignlessInteger(32)))
    return success();
  return ni.error() << ni.node.op_type() << " with " << t
                    << " data is not supported: qatc handles int8 and uint8 "
                    << "(per-tensor and per-axis)"
                    << (allowInt32 ? " and int32 biases" : ""),
         failure();
}

/// Shared part of QuantizeLinear and DequantizeLinear.
LogicalResult importQdq(NodeImporter &ni, bool isQuantize) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  if (ni.intAttr("block_size", 0) != 0)
    return ni.error() << "blocked quantization (block_size="
                      << ni.intAttr("block_size", 0)
                      << ") is not supported: qatc handles per-tensor and "
                         "per-axis scales",
           failure();
  Value x = ni.input(0), scale = ni.input(1), zp = ni.input(2);
  Type xElt = cast<ShapedType>(x.getType()).getElementType();
  if (!isQuantize && failed(checkQuantizedType(ni, xElt, /*allowInt32=*/true)))
    return failure();
  if (isQuantize) {
    if (const auto *od = ni.attr("output_dtype"); od && od->i() != 0) {
      std::string why;
      Type t = convertElementType(ni.getContext(),
                                  static_cast<int32_t>(od->i()), &why);
      if (!t)
        return ni.error() << "QuantizeLinear output_dtype: " << why, failure();
      if (failed(checkQuantizedType(ni, t, false)))
        return failure();
      if (zp && cast<ShapedType>(zp.getType()).getElementType() != t)
        return ni.error() << "output_dtype differs from the zero point's type",
               failure();
      if (!zp) {
        // Make the zero point explicit so the result type is carried by it.
        auto type = RankedTensorType::get({}, t);
        zp = ni.constant(DenseElementsAttr::get(type, APInt(8, 0)));
      }
    }
    if (zp && failed(checkQuantizedType(
                  ni, cast<ShapedType>(zp.getType()).getElementType(), false)))
      return failure();
  }
  int64_t axis = ni.intAttr("axis", 1);
  if (auto type = dyn_cast<RankedTensorType>(x.getType())) {
    int64_t rank = type.getRank();
    auto scaleType = cast<RankedTensorType>(scale.getType());
    bool perAxis = scaleType.getRank() == 1 && scaleType.getDimSize(0) != 1;
    if (perAxis && (axis < -rank || axis >= rank))
      return ni.error() << "axis " << axis << " is out of range for rank "
                        << rank,
             failure();
    if (axis < 0 && axis >= -rank)
      axis += rank;
  }
  SmallVector<Value> operands{x, scale};
  if (zp)
    operands.push_back(zp);
  SmallVector<NamedAttribute> attrs{ni.i64("axis", axis)};
  if (isQuantize) {
    if (ni.intAttr("saturate", 1) != 1)
      attrs.push_back(ni.i64("saturate", ni.intAttr("saturate", 1)));
    return single(ni, ni.build1("onnx.QuantizeLinear", operands, attrs));
  }
  return single(ni, ni.build1("onnx.DequantizeLinear", operands, attrs));
}

//===----------------------------------------------------------------------===//
// Handlers
//===----------------------------------------------------------------------===//

template <const char *OpName> LogicalResult importUnary(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  return single(ni, ni.build1(OpName, {ni.input(0)}));
}

template <const char *OpName> LogicalResult importBinary(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  return single(ni, ni.build1(OpName, {ni.input(0), ni.input(1)}));
}

constexpr char kRelu[] = "onnx.Relu", kSigmoid[] = "onnx.Sigmoid",
               kTanh[] = "onnx.Tanh", kErf[] = "onnx.Erf",
               kSqrt[] = "onnx.Sqrt", kExp[] = "onnx.Exp", kLog[] = "onnx.Log",
               kNeg[] = "onnx.Neg", kAbs[] = "onnx.Abs",
               kReciprocal[] = "onnx.Reciprocal",
               kHardSwish[] = "onnx.HardSwish",
               kGlobalAveragePool[] = "onnx.GlobalAveragePool",
               kGlobalMaxPool[] = "onnx.GlobalMaxPool", kAdd[] = "onnx.Add",
               kSub[] = "onnx.Sub", kMul[] = "onnx.Mul", kDiv[] = "onnx.Div",
               kPow[] = "onnx.Pow", kMatMul[] = "onnx.MatMul",
               kFloor[] = "onnx.Floor", kCeil[] = "onnx.Ceil",
               kRound[] = "onnx.Round", kSign[] = "onnx.Sign",
               kNot[] = "onnx.Not", kSoftplus[] = "onnx.Softplus",
               kPRelu[] = "onnx.PRelu", kAnd[] = "onnx.And", kOr[] = "onnx.Or",
               kXor[] = "onnx.Xor", kEqual[] = "onnx.Equal",
               kLess[] = "onnx.Less", kLessOrEqual[] = "onnx.LessOrEqual",
               kGreater[] = "onnx.Greater",
               kGreaterOrEqual[] = "onnx.GreaterOrEqual";

LogicalResult importIdentity(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  // Kept as an op (unless its input is a constant) so that the tensor it
  // names stays visible.
  return single(ni, ni.build1("onnx.Identity", {ni.input(0)}));
}

LogicalResult importDropout(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  // Opset 12+ has a training_mode input; inference graphs leave it absent or
  // false. Older opsets use is_test/ratio attributes, also inference here.
  if (Value mode = ni.input(2)) {
    auto v = ni.constInts(mode);
    DenseElementsAttr b;
    bool isTrue = false;
    if (matchPattern(mode, m_Constant(&b)) && b.getElementType().isInteger(1))
      isTrue = *b.getValues<bool>().begin();
    else if (v)
      isTrue = !v->empty() && (*v)[0] != 0;
    else
      return ni.error() << "Dropout training_mode must be a constant",
             failure();
    if (isTrue)
      return ni.error() << "Dropout in training mode is not supported",
             failure();
  }
  return single(ni, ni.build1("onnx.Identity", {ni.input(0)}));
}

LogicalResult importConstant(NodeImporter &ni) {
  Builder &b = ni.builder;
  if (const auto *a = ni.attr("value")) {
    // A copy: convertTensor may take the bytes out of the proto.
    onnxpb::TensorProto t = a->t();
    auto name = cast<NameLoc>(ni.loc).getName().str();
    auto value = convertTensor(ni.getContext(), t, name, ni.baseDir, ni.loc);
    if (failed(value))
      return failure();
    ni.results.push_back(ni.constant(cast<TypedAttr>(*value)));
    return success();
  }
  if (const auto *a = ni.attr("value_float")) {
    auto type = RankedTensorType::get({}, b.getF32Type());
    ni.results.push_back(ni.constant(DenseElementsAttr::get(type, a->f())));
    return success();
  }
  if (const auto *a = ni.attr("value_floats")) {
    SmallVector<float> v(a->floats().begin(), a->floats().end());
    auto type =
        RankedTensorType::get({static_cast<int64_t>(v.size())}, b.getF32Type());
    ni.results.push_back(
        ni.constant(DenseElementsAttr::get(type, ArrayRef(v))));
    return success();
  }
  if (const auto *a = ni.attr("value_int")) {
    auto type = RankedTensorType::get({}, b.getI64Type());
    ni.results.push_back(ni.constant(DenseElementsAttr::get(type, a->i())));
    return success();
  }
  if (const auto *a = ni.attr("value_ints")) {
    SmallVector<int64_t> v(a->ints().begin(), a->ints().end());
    auto type =
        RankedTensorType::get({static_cast<int64_t>(v.size())}, b.getI64Type());
    ni.results.push_back(
        ni.constant(DenseElementsAttr::get(type, ArrayRef(v))));
    return success();
  }
  return ni.error() << "Constant with "
                    << (ni.node.attribute_size() ? ni.node.attribute(0).name()
                                                 : std::string("no value"))
                    << " is not supported",
         failure();
}

LogicalResult importConv(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  auto x = ni.staticShape(ni.input(0), "input X");
  auto wShape = ni.staticShape(ni.input(1), "weight W");
  if (failed(x) || failed(wShape))
    return failure();
  if (x->size() < 3 || wShape->size() != x->size())
    return ni.error() << "Conv input and weight must have the same rank >= 3",
           failure();
  auto w = readWindow(ni, x->drop_front(2),
                      SmallVector<int64_t>(wShape->drop_front(2)));
  if (failed(w))
    return failure();
  SmallVector<Value> operands{ni.input(0), ni.input(1)};
  if (ni.input(2))
    operands.push_back(ni.input(2));
  auto attrs = windowAttrs(ni, *w);
  attrs.push_back(ni.i64("group", ni.intAttr("group", 1)));
  return single(ni, ni.build1("onnx.Conv", operands, attrs));
}

LogicalResult importConvTranspose(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  auto x = ni.staticShape(ni.input(0), "input X");
  auto wShape = ni.staticShape(ni.input(1), "weight W");
  if (failed(x) || failed(wShape))
    return failure();
  if (x->size() < 3 || wShape->size() != x->size())
    return ni.error()
               << "ConvTranspose input and weight must have the same rank >= 3",
           failure();
  size_t n = x->size() - 2;
  SmallVector<int64_t> kernel =
      ni.intsAttr("kernel_shape")
          .value_or(SmallVector<int64_t>(wShape->drop_front(2)));
  SmallVector<int64_t> strides =
      ni.intsAttr("strides").value_or(SmallVector<int64_t>(n, 1));
  SmallVector<int64_t> dilations =
      ni.intsAttr("dilations").value_or(SmallVector<int64_t>(n, 1));
  SmallVector<int64_t> pads =
      ni.intsAttr("pads").value_or(SmallVector<int64_t>(2 * n, 0));
  SmallVector<int64_t> outPad =
      ni.intsAttr("output_padding").value_or(SmallVector<int64_t>(n, 0));
  if (kernel.size() != n || strides.size() != n || dilations.size() != n ||
      pads.size() != 2 * n || outPad.size() != n)
    return ni.error() << "ConvTranspose attributes do not match a " << n
                      << "-D input",
           failure();
  auto outOfRange = [](ArrayRef<int64_t> v, int64_t lo) {
    return llvm::any_of(v,
                        [&](int64_t x) { return x < lo || x > kMaxDimension; });
  };
  if (outOfRange(kernel, 1) || outOfRange(strides, 1) ||
      outOfRange(dilations, 1) || outOfRange(pads, 0) || outOfRange(outPad, 0))
    return ni.error() << "ConvTranspose attributes must be in [0, "
                      << kMaxDimension << "] (kernel, strides, dilations >= 1)",
           failure();
  std::string autoPad = ni.stringAttr("auto_pad", "NOTSET");
  auto outputShape = ni.intsAttr("output_shape");
  if (outputShape && outputShape->size() == n + 2)
    outputShape =
        SmallVector<int64_t>(outputShape->begin() + 2, outputShape->end());
  if (!outputShape && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")) {
    outputShape.emplace();
    for (size_t i = 0; i < n; ++i)
      outputShape->push_back((*x)[i + 2] * strides[i]);
  }
  if (autoPad == "VALID")
    pads.assign(2 * n, 0);
  if (outputShape) {
    if (outputShape->size() != n || outOfRange(*outputShape, 1))
      return ni.error() << "ConvTranspose output_shape must have " << n
                        << " entries in [1, " << kMaxDimension << "]",
             failure();
    for (size_t i = 0; i < n; ++i) {
      int64_t total = strides[i] * ((*x)[i + 2] - 1) + outPad[i] +
                      ((kernel[i] - 1) * dilations[i] + 1) - (*outputShape)[i];
      if (total < 0) {
        // The requested output is larger than the pads can give: ONNX
        // Runtime extends output_padding, so do the same.
        outPad[i] -= total;
        total = 0;
      }
      int64_t half = total / 2;
      if (autoPad == "SAME_UPPER") {
        pads[i] = half;
        pads[i + n] = total - half;
      } else {
        pads[i] = total - half;
        pads[i + n] = half;
      }
    }
  }
  SmallVector<Value> operands{ni.input(0), ni.input(1)};
  if (ni.input(2))
    operands.push_back(ni.input(2));
  return single(
      ni,
      ni.build1("onnx.ConvTranspose", operands,
                {ni.ints("kernel_shape", kernel), ni.ints("strides", strides),
                 ni.ints("pads", pads), ni.ints("dilations", dilations),
                 ni.ints("output_padding", outPad),
                 ni.i64("group", ni.intAttr("group", 1))}));
}

LogicalResult importGemm(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  SmallVector<Value> operands{ni.input(0), ni.input(1)};
  if (ni.input(2))
    operands.push_back(ni.input(2));
  return single(ni, ni.build1("onnx.Gemm", operands,
                              {ni.f32("alpha", ni.floatAttr("alpha", 1.0f)),
                               ni.f32("beta", ni.floatAttr("beta", 1.0f)),
                               ni.i64("transA", ni.intAttr("transA", 0)),
                               ni.i64("transB", ni.intAttr("transB", 0))}));
}

LogicalResult importBatchNorm(NodeImporter &ni) {
  if (failed(requireInputs(ni, 5)))
    return failure();
  if (ni.intAttr("training_mode", 0) != 0)
    return ni.error() << "BatchNormalization in training mode is not supported",
           failure();
  if (ni.opset < 9 && ni.intAttr("spatial", 1) != 1)
    return ni.error() << "BatchNormalization with spatial=0 is not supported",
           failure();
  return single(ni,
                ni.build1("onnx.BatchNormalization",
                          {ni.input(0), ni.input(1), ni.input(2), ni.input(3),
                           ni.input(4)},
                          {ni.f32("epsilon", ni.floatAttr("epsilon", 1e-5f))}));
}

LogicalResult importBitShift(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  std::string direction = ni.stringAttr("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    return ni.error() << "BitShift direction must be LEFT or RIGHT, not '"
                      << direction << "'",
           failure();
  auto elt = dyn_cast<IntegerType>(
      cast<ShapedType>(ni.input(0).getType()).getElementType());
  if (!elt || !elt.isUnsigned())
    return ni.error() << "BitShift takes unsigned integers", failure();
  return single(ni, ni.build1("onnx.BitShift", {ni.input(0), ni.input(1)},
                              {ni.str("direction", direction)}));
}

LogicalResult importGatherElements(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "data");
  if (failed(shape))
    return failure();
  auto axis = normAxis(ni, ni.intAttr("axis", 0), shape->size());
  if (failed(axis))
    return failure();
  return single(ni, ni.build1("onnx.GatherElements", {ni.input(0), ni.input(1)},
                              {ni.i64("axis", *axis)}));
}

LogicalResult importLeakyRelu(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  return single(ni, ni.build1("onnx.LeakyRelu", {ni.input(0)},
                              {ni.f32("alpha", ni.floatAttr("alpha", 0.01f))}));
}

LogicalResult importHardSigmoid(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  return single(ni, ni.build1("onnx.HardSigmoid", {ni.input(0)},
                              {ni.f32("alpha", ni.floatAttr("alpha", 0.2f)),
                               ni.f32("beta", ni.floatAttr("beta", 0.5f))}));
}

LogicalResult importClip(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  Type elt = cast<ShapedType>(ni.input(0).getType()).getElementType();
  bool isFloat = isa<FloatType>(elt);
  if (!isFloat && !elt.isIntOrIndex())
    return ni.error() << "Clip on " << elt << " tensors is not supported",
           failure();
  SmallVector<NamedAttribute> attrs;
  const char *names[] = {"min", "max"};
  if (ni.opset < 11) {
    for (const char *name : names)
      if (ni.attr(name))
        attrs.push_back(ni.f32(name, ni.floatAttr(name, 0.0f)));
    return single(ni, ni.build1("onnx.Clip", {ni.input(0)}, attrs));
  }
  for (int i = 0; i < 2; ++i) {
    Value bound = ni.input(1 + i);
    if (!bound)
      continue;
    std::optional<double> v;
    if (auto f = ni.constFloats(bound); f && f->size() == 1)
      v = (*f)[0];
    else if (auto n = ni.constInts(bound); n && n->size() == 1)
      v = static_cast<double>((*n)[0]);
    if (!v)
      return ni.error() << "Clip " << names[i] << " must be a constant scalar",
             failure();
    // The dialect keeps bounds as f32: integer bounds must survive that.
    if (!isFloat && std::abs(*v) > (1 << 24))
      return ni.error() << "Clip " << names[i] << " " << *v
                        << " on an integer tensor is too large for qatc",
             failure();
    attrs.push_back(ni.f32(names[i], static_cast<float>(*v)));
  }
  return single(ni, ni.build1("onnx.Clip", {ni.input(0)}, attrs));
}

/// Softmax and LogSoftmax.
LogicalResult importSoftmax(NodeImporter &ni) {
  std::string opName = "onnx." + ni.node.op_type();
  if (failed(requireInputs(ni, 1)))
    return failure();
  Value x = ni.input(0);
  auto shape = ni.staticShape(x, "input");
  if (failed(shape))
    return failure();
  int64_t rank = shape->size();
  auto axis = normAxis(ni, ni.intAttr("axis", ni.opset < 13 ? 1 : -1), rank);
  if (failed(axis))
    return failure();
  if (ni.opset >= 13 || *axis == rank - 1)
    return single(ni, ni.build1(opName, {x}, {ni.i64("axis", *axis)}));
  // Before opset 13, (Log)Softmax normalized over the flattened trailing axes
  // [axis, rank): express that as Reshape -> Softmax -> Reshape.
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < *axis ? outer : inner) *= (*shape)[i];
  Type elt = cast<ShapedType>(x.getType()).getElementType();
  auto flatType = RankedTensorType::get({outer, inner}, elt);
  auto flat = ni.buildWithTypes("onnx.Reshape", {x}, {}, {flatType});
  if (failed(flat))
    return failure();
  auto sm = ni.build1(opName, {(*flat)[0]}, {ni.i64("axis", 1)});
  if (failed(sm))
    return failure();
  auto back = ni.buildWithTypes("onnx.Reshape", {*sm}, {}, {x.getType()});
  if (failed(back))
    return failure();
  ni.results.push_back((*back)[0]);
  return success();
}

template <bool IsMax> LogicalResult importPool(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto x = ni.staticShape(ni.input(0), "input X");
  if (failed(x))
    return failure();
  if (x->size() < 3)
    return ni.error() << "pooling input must have rank >= 3", failure();
  int64_t ceil = ni.intAttr("ceil_mode", 0);
  auto w = readWindow(ni, x->drop_front(2), std::nullopt, ceil != 0);
  if (failed(w))
    return failure();
  auto attrs = windowAttrs(ni, *w);
  attrs.push_back(ni.i64("ceil_mode", ceil));
  if (IsMax) {
    // A used Indices output is refused by the importer's output check.
    return single(ni, ni.build1("onnx.MaxPool", {ni.input(0)}, attrs));
  }
  attrs.push_back(
      ni.i64("count_include_pad", ni.intAttr("count_include_pad", 0)));
  return single(ni, ni.build1("onnx.AveragePool", {ni.input(0)}, attrs));
}

LogicalResult importConcat(NodeImporter &ni) {
  SmallVector<Value> operands;
  for (size_t i = 0; i < ni.numInputs(); ++i)
    if (Value v = ni.input(i))
      operands.push_back(v);
  if (operands.empty())
    return ni.error() << "Concat needs inputs", failure();
  if (!ni.attr("axis"))
    return ni.error() << "Concat needs an axis", failure();
  auto shape = ni.staticShape(operands[0], "input #0");
  if (failed(shape))
    return failure();
  auto axis = normAxis(ni, ni.intAttr("axis", 0), shape->size());
  if (failed(axis))
    return failure();
  // Zero-sized inputs (exporters emit them for empty shape pieces) drop out.
  SmallVector<Value> nonEmpty;
  for (Value v : operands)
    if (cast<ShapedType>(v.getType()).getNumElements() != 0)
      nonEmpty.push_back(v);
  if (!nonEmpty.empty() && nonEmpty.size() != operands.size())
    operands = nonEmpty;
  return single(ni,
                ni.build1("onnx.Concat", operands, {ni.i64("axis", *axis)}));
}

LogicalResult importSplit(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input");
  if (failed(shape))
    return failure();
  auto axis = normAxis(ni, ni.intAttr("axis", 0), shape->size());
  if (failed(axis))
    return failure();
  int64_t dim = (*shape)[*axis];
  std::optional<SmallVector<int64_t>> split;
  if (ni.opset < 13) {
    split = ni.intsAttr("split");
  } else if (ni.input(1)) {
    auto s = ni.requireConstInts(1, "split");
    if (failed(s))
      return failure();
    split = *s;
  }
  if (!split) {
    int64_t parts = ni.opset >= 18 && ni.attr("num_outputs")
                        ? ni.intAttr("num_outputs", 1)
                        : ni.node.output_size();
    if (parts <= 0)
      return ni.error() << "Split needs at least one output", failure();
    // Equal pieces; with opset 18 num_outputs the last one may be smaller.
    int64_t chunk = (dim + parts - 1) / parts;
    if (ni.opset < 18 && dim % parts != 0)
      return ni.error() << "Split cannot divide " << dim << " into " << parts
                        << " equal pieces",
             failure();
    split.emplace();
    for (int64_t i = 0, left = dim; i < parts; ++i, left -= chunk)
      split->push_back(std::min(chunk, left));
  }
  if (static_cast<int>(split->size()) != ni.node.output_size())
    return ni.error() << "Split has " << ni.node.output_size()
                      << " outputs but " << split->size() << " sizes",
           failure();
  auto results = ni.build("onnx.Split", {ni.input(0)},
                          {ni.i64("axis", *axis), ni.ints("split", *split)});
  if (failed(results))
    return failure();
  ni.results = *results;
  return success();
}

LogicalResult importSlice(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input data");
  if (failed(shape))
    return failure();
  int64_t rank = shape->size();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (ni.opset < 10) {
    starts = ni.intsAttr("starts").value_or(SmallVector<int64_t>());
    ends = ni.intsAttr("ends").value_or(SmallVector<int64_t>());
    axes = ni.intsAttr("axes").value_or(SmallVector<int64_t>());
  } else {
    if (failed(requireInputs(ni, 3)))
      return failure();
    auto s = ni.requireConstInts(1, "starts"),
         e = ni.requireConstInts(2, "ends");
    if (failed(s) || failed(e))
      return failure();
    starts = *s;
    ends = *e;
    if (ni.input(3)) {
      auto a = ni.requireConstInts(3, "axes");
      if (failed(a))
        return failure();
      axes = *a;
    }
    if (ni.input(4)) {
      auto st = ni.requireConstInts(4, "steps");
      if (failed(st))
        return failure();
      steps = *st;
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return ni.error() << "Slice starts, ends, axes and steps differ in length",
           failure();
  SmallVector<int64_t> outStarts(rank, 0), outEnds(*shape), outSteps(rank, 1);
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = normAxis(ni, axes[i], rank);
    if (failed(axis))
      return failure();
    if (seen[*axis])
      return ni.error() << "Slice axis " << axes[i] << " appears twice",
             failure();
    seen[*axis] = true;
    int64_t dim = (*shape)[*axis], step = steps[i];
    if (step == 0)
      return ni.error() << "Slice step must not be 0", failure();
    // Clamp exactly as the ONNX specification does.
    int64_t start = starts[i], end = ends[i];
    if (start < 0)
      start += dim;
    if (end < 0)
      end += dim;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
    }
    outStarts[*axis] = start;
    outEnds[*axis] = end;
    outSteps[*axis] = step;
  }
  return single(
      ni, ni.build1("onnx.Slice", {ni.input(0)},
                    {ni.ints("starts", outStarts), ni.ints("ends", outEnds),
                     ni.ints("steps", outSteps)}));
}

LogicalResult importReshape(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto in = ni.staticShape(ni.input(0), "input data");
  if (failed(in))
    return failure();
  SmallVector<int64_t> target;
  if (ni.opset < 5) {
    target = ni.intsAttr("shape").value_or(SmallVector<int64_t>());
  } else {
    if (failed(requireInputs(ni, 2)))
      return failure();
    auto t = ni.requireConstInts(1, "shape");
    if (failed(t))
      return failure();
    target = *t;
  }
  bool allowZero = ni.intAttr("allowzero", 0) != 0;
  int64_t known = 1, inferIdx = -1, total = 1;
  for (int64_t d : *in)
    total *= d;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowZero) {
      if (i >= in->size())
        return ni.error() << "Reshape copies dimension " << i
                          << " that the input does not have",
               failure();
      target[i] = (*in)[i];
    }
    if (target[i] == -1) {
      if (inferIdx >= 0)
        return ni.error() << "Reshape shape has more than one -1", failure();
      inferIdx = i;
      continue;
    }
    if (target[i] < 0 || target[i] > kMaxDimension)
      return ni.error() << "Reshape shape has an invalid dimension "
                        << target[i],
             failure();
    if (target[i] != 0 && known > kMaxElements / target[i])
      return ni.error() << "Reshape shape is too large", failure();
    known *= target[i];
  }
  if (inferIdx >= 0) {
    if (known == 0 || total % known != 0)
      return ni.error() << "Reshape cannot infer the -1 dimension: " << total
                        << " elements do not divide by " << known,
             failure();
    target[inferIdx] = total / known;
    known *= target[inferIdx];
  }
  if (known != total)
    return ni.error() << "Reshape to " << target.size() << "-D shape with "
                      << known << " elements from an input of " << total
                      << " elements",
           failure();
  Type elt = cast<ShapedType>(ni.input(0).getType()).getElementType();
  auto results = ni.buildWithTypes("onnx.Reshape", {ni.input(0)}, {},
                                   {RankedTensorType::get(target, elt)});
  if (failed(results))
    return failure();
  ni.results.push_back((*results)[0]);
  return success();
}

LogicalResult importFlatten(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input");
  if (failed(shape))
    return failure();
  int64_t rank = shape->size(), axis = ni.intAttr("axis", 1);
  if (axis < -rank || axis > rank)
    return ni.error() << "Flatten axis " << axis << " is out of range",
           failure();
  if (axis < 0)
    axis += rank;
  return single(
      ni, ni.build1("onnx.Flatten", {ni.input(0)}, {ni.i64("axis", axis)}));
}

LogicalResult importTranspose(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input");
  if (failed(shape))
    return failure();
  auto perm = ni.intsAttr("perm");
  if (!perm) {
    perm.emplace();
    for (int64_t i = shape->size() - 1; i >= 0; --i)
      perm->push_back(i);
  }
  return single(
      ni, ni.build1("onnx.Transpose", {ni.input(0)}, {ni.ints("perm", *perm)}));
}

LogicalResult importSqueeze(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input");
  if (failed(shape))
    return failure();
  auto axes = readAxes(ni, 13, 1);
  if (failed(axes))
    return failure();
  SmallVector<int64_t> normalized;
  if (!*axes) {
    for (size_t i = 0; i < shape->size(); ++i)
      if ((*shape)[i] == 1)
        normalized.push_back(i);
  } else {
    auto n = normAxes(ni, **axes, shape->size());
    if (failed(n))
      return failure();
    normalized = *n;
  }
  return single(ni, ni.build1("onnx.Squeeze", {ni.input(0)},
                              {ni.ints("axes", normalized)}));
}

LogicalResult importUnsqueeze(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input");
  if (failed(shape))
    return failure();
  auto axes = readAxes(ni, 13, 1);
  if (failed(axes))
    return failure();
  if (!*axes)
    return ni.error() << "Unsqueeze needs axes", failure();
  auto n = normAxes(ni, **axes, shape->size() + (*axes)->size());
  if (failed(n))
    return failure();
  return single(
      ni, ni.build1("onnx.Unsqueeze", {ni.input(0)}, {ni.ints("axes", *n)}));
}

LogicalResult importGather(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input data");
  if (failed(shape))
    return failure();
  auto axis = normAxis(ni, ni.intAttr("axis", 0), shape->size());
  if (failed(axis))
    return failure();
  // Constant indices must be in range; run-time ones are checked when run.
  if (auto idx = ni.constInts(ni.input(1))) {
    int64_t dim = (*shape)[*axis];
    for (int64_t i : *idx)
      if (i < -dim || i >= dim)
        return ni.error() << "Gather index " << i << " is out of range for "
                          << "a dimension of size " << dim,
               failure();
  }
  return single(ni, ni.build1("onnx.Gather", {ni.input(0), ni.input(1)},
                              {ni.i64("axis", *axis)}));
}

LogicalResult importPad(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input data");
  if (failed(shape))
    return failure();
  int64_t rank = shape->size();
  SmallVector<int64_t> pads;
  double value = 0.0;
  if (ni.opset < 11) {
    pads = ni.intsAttr("pads").value_or(SmallVector<int64_t>());
    value = ni.floatAttr("value", 0.0f);
  } else {
    auto p = ni.requireConstInts(1, "pads");
    if (failed(p))
      return failure();
    pads = *p;
    if (Value cv = ni.input(2)) {
      if (auto f = ni.constFloats(cv); f && f->size() == 1)
        value = (*f)[0];
      else if (auto i = ni.constInts(cv); i && i->size() == 1)
        value = static_cast<double>((*i)[0]);
      else
        return ni.error() << "Pad constant_value must be a constant scalar",
               failure();
    }
    if (Value axesInput = ni.input(3)) {
      auto axes = ni.requireConstInts(3, "axes");
      if (failed(axes))
        return failure();
      if (pads.size() != 2 * axes->size())
        return ni.error() << "Pad has " << pads.size() << " pads for "
                          << axes->size() << " axes",
               failure();
      SmallVector<int64_t> full(2 * rank, 0);
      for (size_t i = 0; i < axes->size(); ++i) {
        auto a = normAxis(ni, (*axes)[i], rank);
        if (failed(a))
          return failure();
        full[*a] = pads[i];
        full[*a + rank] = pads[i + axes->size()];
      }
      pads = full;
    }
  }
  return single(
      ni, ni.build1("onnx.Pad", {ni.input(0)},
                    {ni.ints("pads", pads),
                     ni.str("mode", ni.stringAttr("mode", "constant")),
                     ni.named("value", ni.builder.getF64FloatAttr(value))}));
}

LogicalResult importResize(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  Value x = ni.input(0);
  auto shape = ni.staticShape(x, "input X");
  if (failed(shape))
    return failure();
  int64_t rank = shape->size();
  std::string mode = ni.stringAttr("mode", "nearest");
  std::string coord =
      ni.stringAttr("coordinate_transformation_mode",
                    ni.opset < 11 ? "asymmetric" : "half_pixel");
  if (coord == "tf_crop_and_resize")
    return ni.error() << "Resize with tf_crop_and_resize is not supported",
           failure();
  if (ni.intAttr("antialias", 0) != 0)
    return ni.error() << "Resize with antialias is not supported", failure();
  std::string policy = ni.stringAttr("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch")
    return ni.error() << "Resize keep_aspect_ratio_policy '" << policy
                      << "' is not supported",
           failure();
  SmallVector<int64_t> axes;
  if (auto a = ni.intsAttr("axes")) {
    auto n = normAxes(ni, *a, rank);
    if (failed(n))
      return failure();
    axes = *n;
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  // Opset 10: (X, scales); 11+: (X, roi, scales, sizes).
  Value scalesIn = ni.opset < 11 ? ni.input(1) : ni.input(2);
  Value sizesIn = ni.opset < 11 ? Value() : ni.input(3);
  SmallVector<float> scales(rank, 1.0f);
  SmallVector<int64_t> out(*shape);
  std::optional<SmallVector<double>> scaleVals =
      scalesIn ? ni.constFloats(scalesIn) : std::nullopt;
  if (scaleVals && scaleVals->empty())
    scaleVals.reset();
  if (scaleVals) {
    if (scaleVals->size() != axes.size())
      return ni.error() << "Resize has " << scaleVals->size() << " scales for "
                        << axes.size() << " axes",
             failure();
    for (size_t i = 0; i < axes.size(); ++i) {
      float s = static_cast<float>((*scaleVals)[i]);
      if (!(s > 0))
        return ni.error() << "Resize scales must be positive", failure();
      double size = std::floor(static_cast<double>((*shape)[axes[i]]) * s);
      if (size > static_cast<double>(kMaxDimension))
        return ni.error() << "Resize output dimension " << size
                          << " is too large",
               failure();
      scales[axes[i]] = s;
      out[axes[i]] = static_cast<int64_t>(size);
    }
  } else if (sizesIn) {
    auto sizes = ni.requireConstInts(3, "sizes");
    if (failed(sizes))
      return failure();
    if (sizes->size() != axes.size())
      return ni.error() << "Resize has " << sizes->size() << " sizes for "
                        << axes.size() << " axes",
             failure();
    for (size_t i = 0; i < axes.size(); ++i) {
      if ((*sizes)[i] < 0 || (*sizes)[i] > kMaxDimension)
        return ni.error() << "Resize size " << (*sizes)[i] << " is invalid",
               failure();
      out[axes[i]] = (*sizes)[i];
      scales[axes[i]] = static_cast<float>((*sizes)[i]) /
                        static_cast<float>((*shape)[axes[i]]);
    }
  } else {
    return ni.error() << "Resize needs constant scales or sizes", failure();
  }
  // Opset 10 had no nearest_mode: ONNX Runtime reads it as floor when
  // enlarging and ceil when shrinking (its "simple" mode), as Upsample.
  std::string nearestMode = ni.stringAttr("nearest_mode", "round_prefer_floor");
  if (ni.opset < 11 && mode == "nearest") {
    bool up = llvm::any_of(scales, [](float s) { return s > 1.0f; });
    bool down = llvm::any_of(scales, [](float s) { return s < 1.0f; });
    if (up && down)
      return ni.error() << "opset-10 nearest Resize that enlarges some axes "
                           "and shrinks others is not supported",
             failure();
    nearestMode = down ? "ceil" : "floor";
  }
  Type elt = cast<ShapedType>(x.getType()).getElementType();
  auto results = ni.buildWithTypes(
      "onnx.Resize", {x},
      {ni.named("scales", ni.builder.getDenseF32ArrayAttr(scales)),
       ni.str("mode", mode), ni.str("coordinate_transformation_mode", coord),
       ni.str("nearest_mode", nearestMode),
       ni.f32("cubic_coeff_a", ni.floatAttr("cubic_coeff_a", -0.75f)),
       ni.i64("exclude_outside", ni.intAttr("exclude_outside", 0)),
       ni.f32("extrapolation_value",
              ni.floatAttr("extrapolation_value", 0.0f))},
      {RankedTensorType::get(out, elt)});
  if (failed(results))
    return failure();
  ni.results.push_back((*results)[0]);
  return success();
}

LogicalResult importShape(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  SmallVector<NamedAttribute> attrs{ni.i64("start", ni.intAttr("start", 0))};
  if (ni.attr("end"))
    attrs.push_back(ni.i64("end", ni.intAttr("end", 0)));
  return single(ni, ni.build1("onnx.Shape", {ni.input(0)}, attrs));
}

LogicalResult importCast(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  std::string why;
  Type to = convertElementType(ni.getContext(),
                               static_cast<int32_t>(ni.intAttr("to", 0)), &why);
  if (!to)
    return ni.error() << "Cast to an unsupported type: " << why, failure();
  auto type = cast<ShapedType>(ni.input(0).getType()).clone(to);
  auto results = ni.buildWithTypes("onnx.Cast", {ni.input(0)}, {}, {type});
  if (failed(results))
    return failure();
  ni.results.push_back((*results)[0]);
  return success();
}

/// CastLike: a Cast to the element type of the second input (whose data is
/// not read).
LogicalResult importCastLike(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  Type to = cast<ShapedType>(ni.input(1).getType()).getElementType();
  auto type = cast<ShapedType>(ni.input(0).getType()).clone(to);
  auto results = ni.buildWithTypes("onnx.Cast", {ni.input(0)}, {}, {type});
  if (failed(results))
    return failure();
  ni.results.push_back((*results)[0]);
  return success();
}

LogicalResult importConstantOfShape(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.requireConstInts(0, "input");
  if (failed(shape))
    return failure();
  if (!isReasonableShape(*shape))
    return ni.error() << "ConstantOfShape shape is invalid or too large",
           failure();
  // The shape is known at import, so this is just a constant.
  Attribute element = ni.builder.getF32FloatAttr(0.0f);
  if (const auto *a = ni.attr("value")) {
    onnxpb::TensorProto t = a->t();
    auto value = convertTensor(ni.getContext(), t, "value", ni.baseDir, ni.loc);
    if (failed(value))
      return failure();
    auto dense = dyn_cast<DenseElementsAttr>(*value);
    if (!dense || dense.getNumElements() != 1 ||
        dense.getElementType().isInteger(1))
      return ni.error() << "ConstantOfShape value must be a one-element "
                           "numeric tensor",
             failure();
    element = dense.getSplatValue<Attribute>();
  }
  auto type = RankedTensorType::get(*shape, cast<TypedAttr>(element).getType());
  DenseElementsAttr value = DenseElementsAttr::get(type, element);
  ni.results.push_back(ni.constant(value));
  return success();
}

LogicalResult importQuantize(NodeImporter &ni) { return importQdq(ni, true); }
LogicalResult importDequantize(NodeImporter &ni) {
  return importQdq(ni, false);
}

} // namespace

namespace {
struct HandlerEntry {
  const char *opType;
  NodeHandler handler;
};

/// Every default-domain operator the importer supports, sorted by name.
const HandlerEntry kHandlers[] = {
    {"Abs", importUnary<kAbs>},
    {"Add", importBinary<kAdd>},
    {"And", importBinary<kAnd>},
    {"ArgMax", importArgReduce},
    {"ArgMin", importArgReduce},
    {"AveragePool", importPool<false>},
    {"BatchNormalization", importBatchNorm},
    {"BitShift", importBitShift},
    {"Cast", importCast},
    {"CastLike", importCastLike},
    {"Ceil", importUnary<kCeil>},
    {"Clip", importClip},
    {"Concat", importConcat},
    {"Constant", importConstant},
    {"ConstantOfShape", importConstantOfShape},
    {"Conv", importConv},
    {"ConvTranspose", importConvTranspose},
    {"DepthToSpace", importDepthSpace},
    {"DequantizeLinear", importDequantize},
    {"Div", importBinary<kDiv>},
    {"Dropout", importDropout},
    {"Elu", importElu},
    {"Equal", importBinary<kEqual>},
    {"Erf", importUnary<kErf>},
    {"Exp", importUnary<kExp>},
    {"Expand", importExpand},
    {"Flatten", importFlatten},
    {"Floor", importUnary<kFloor>},
    {"Gather", importGather},
    {"GatherElements", importGatherElements},
    {"Gemm", importGemm},
    {"GlobalAveragePool", importUnary<kGlobalAveragePool>},
    {"GlobalMaxPool", importUnary<kGlobalMaxPool>},
    {"Greater", importBinary<kGreater>},
    {"GreaterOrEqual", importBinary<kGreaterOrEqual>},
    {"HardSigmoid", importHardSigmoid},
    {"HardSwish", importUnary<kHardSwish>},
    {"Identity", importIdentity},
    {"LeakyRelu", importLeakyRelu},
    {"Less", importBinary<kLess>},
    {"LessOrEqual", importBinary<kLessOrEqual>},
    {"Log", importUnary<kLog>},
    {"LogSoftmax", importSoftmax},
    {"MatMul", importBinary<kMatMul>},
    {"Max", importVariadic},
    {"MaxPool", importPool<true>},
    {"Mean", importVariadic},
    {"Min", importVariadic},
    {"Mod", importMod},
    {"Mul", importBinary<kMul>},
    {"Neg", importUnary<kNeg>},
    {"Not", importUnary<kNot>},
    {"Or", importBinary<kOr>},
    {"PRelu", importBinary<kPRelu>},
    {"Pad", importPad},
    {"Pow", importBinary<kPow>},
    {"QuantizeLinear", importQuantize},
    {"Range", importRange},
    {"Reciprocal", importUnary<kReciprocal>},
    {"ReduceL1", importReduce},
    {"ReduceL2", importReduce},
    {"ReduceMax", importReduce},
    {"ReduceMean", importReduce},
    {"ReduceMin", importReduce},
    {"ReduceProd", importReduce},
    {"ReduceSum", importReduce},
    {"ReduceSumSquare", importReduce},
    {"Relu", importUnary<kRelu>},
    {"Reshape", importReshape},
    {"Resize", importResize},
    {"Round", importUnary<kRound>},
    {"Shape", importShape},
    {"Sigmoid", importUnary<kSigmoid>},
    {"Sign", importUnary<kSign>},
    {"Size", importSize},
    {"Slice", importSlice},
    {"Softmax", importSoftmax},
    {"Softplus", importUnary<kSoftplus>},
    {"SpaceToDepth", importDepthSpace},
    {"Split", importSplit},
    {"Sqrt", importUnary<kSqrt>},
    {"Squeeze", importSqueeze},
    {"Sub", importBinary<kSub>},
    {"Sum", importVariadic},
    {"Tanh", importUnary<kTanh>},
    {"Tile", importTile},
    {"TopK", importTopK},
    {"Transpose", importTranspose},
    {"Unsqueeze", importUnsqueeze},
    {"Upsample", importUpsample},
    {"Where", importWhere},
    {"Xor", importBinary<kXor>},
};
} // namespace

namespace {

/// The ONNX op types of the ops defined by one scalar function (Onnx_MathOp
/// in OnnxOps.td), found through their interface: none needs a line here.
const llvm::StringMap<llvm::SmallVector<std::string>> &scalarMathOps() {
  static const auto ops = [] {
    MLIRContext ctx(MLIRContext::Threading::DISABLED);
    ctx.loadDialect<qatc::onnx::OnnxDialect>();
    llvm::StringMap<llvm::SmallVector<std::string>> m;
    for (RegisteredOperationName name : ctx.getRegisteredOperations()) {
      if (!name.hasInterface<qatc::onnx::ScalarMathOpInterface>())
        continue;
      auto &attrs = m[name.stripDialect()];
      for (StringAttr a : name.getAttributeNames())
        attrs.push_back(a.str());
    }
    return m;
  }();
  return ops;
}

/// A scalar math op: its one input, and its float attributes by the names
/// ONNX gives them (absent ones take the op's defaults).
LogicalResult importScalarMath(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  StringRef opType = ni.node.op_type();
  const auto &known = scalarMathOps().find(opType)->second;
  SmallVector<NamedAttribute> attrs;
  for (const onnxpb::AttributeProto &a : ni.node.attribute()) {
    if (a.name() == "consumed_inputs" && ni.opset < 6)
      continue; // legacy, meaningless
    if (!llvm::is_contained(known, a.name()))
      return ni.error() << opType << " has no attribute '" << a.name() << "'",
             failure();
    if (a.type() != onnxpb::AttributeProto::FLOAT)
      return ni.error() << "attribute '" << a.name() << "' of " << opType
                        << " must be a float",
             failure();
    attrs.push_back(ni.f32(a.name(), a.f()));
  }
  return single(ni, ni.build1(("onnx." + opType).str(), {ni.input(0)}, attrs));
}

} // namespace

NodeHandler qatc::detail::lookupNodeHandler(StringRef opType) {
  for (const HandlerEntry &e : kHandlers)
    if (opType == e.opType)
      return e.handler;
  if (NodeHandler h = lookupComposedHandler(opType))
    return h;
  if (scalarMathOps().contains(opType))
    return importScalarMath;
  return nullptr;
}

std::vector<std::string> qatc::getSupportedOnnxOps() {
  std::vector<std::string> ops;
  for (const HandlerEntry &e : kHandlers)
    ops.push_back(e.opType);
  for (const auto &e : scalarMathOps())
    ops.push_back(e.getKey().str());
  appendComposedOps(ops);
  llvm::sort(ops);
  return ops;
}
