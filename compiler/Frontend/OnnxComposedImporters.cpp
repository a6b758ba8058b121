//===- OnnxComposedImporters.cpp - ops imported as other ops --------------===//
//
// Operators that are compositions of ops qatc already has import as that
// composition, the way ONNX's own function bodies define most of them, so
// they need no kernel or lowering of their own:
//
// - NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (plain inference
//   computations models export to score or to distil): LogSoftmax,
//   GatherElements of the target class, Gather of the class weights, Where
//   for ignore_index and ReduceSum for the reductions;
// - Trilu: Where with a constant mask; EyeLike: a constant;
// - Hardmax: ArgMax compared with the positions along the axis;
// - OneHot: the indices compared with the positions along the new axis;
// - IsNaN, IsInf: comparisons; ReduceLogSum: Log of ReduceSum.
//
// Every op built carries the node's location, so errors, the precision
// report and the plan's layers still name the node.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include <limits>

using namespace mlir;
using namespace qatc;
using namespace qatc::detail;

namespace {

/// A rank-0 constant of element type `elt`.
Value scalar(NodeImporter &ni, Type elt, double v) {
  auto type = RankedTensorType::get({}, elt);
  if (isa<FloatType>(elt))
    return ni.constant(
        DenseElementsAttr::get(type, FloatAttr::get(elt, v).getValue()));
  return ni.constant(DenseElementsAttr::get(
      type, IntegerAttr::get(elt, static_cast<int64_t>(v)).getValue()));
}

/// A constant of `shape` and element type `elt` (float, integer or i1)
/// whose element at row-major index i is `f(i)`.
Value tensorOf(NodeImporter &ni, ArrayRef<int64_t> shape, Type elt,
               llvm::function_ref<double(int64_t)> f) {
  auto type = RankedTensorType::get(shape, elt);
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < type.getNumElements(); ++i) {
    double v = f(i);
    if (isa<FloatType>(elt))
      values.push_back(FloatAttr::get(elt, v));
    else if (elt.isInteger(1))
      values.push_back(BoolAttr::get(ni.getContext(), v != 0));
    else
      values.push_back(IntegerAttr::get(elt, static_cast<int64_t>(v)));
  }
  return ni.constant(DenseElementsAttr::get(type, values));
}

/// The positions 0 .. n-1 along `axis` of a rank-`rank` int64 tensor that
/// is 1 on every other axis (for comparing indices against).
Value positions(NodeImporter &ni, int64_t rank, int64_t axis, int64_t n) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = n;
  return tensorOf(ni, shape, ni.builder.getI64Type(),
                  [](int64_t i) { return static_cast<double>(i); });
}

FailureOr<Value> build(NodeImporter &ni, StringRef op, ValueRange operands,
                       ArrayRef<NamedAttribute> attrs = {}) {
  return ni.build1(("onnx." + op).str(), operands, attrs);
}

/// The loss of log-probabilities `logp` [N, C, d...] for class indices
/// `target` [N, d...] with optional per-class `weight` [C], as ONNX defines
/// NegativeLogLikelihoodLoss (reduction and ignore_index from the node).
FailureOr<Value> nllLoss(NodeImporter &ni, Value logp, Value target,
                         Value weight) {
  auto shape = ni.staticShape(logp, "input");
  auto tShape = ni.staticShape(target, "target");
  if (failed(shape) || failed(tShape))
    return failure();
  SmallVector<int64_t> expect(shape->begin(), shape->end());
  if (expect.size() >= 2)
    expect.erase(expect.begin() + 1);
  if (shape->size() < 2 || ArrayRef<int64_t>(expect) != *tShape)
    return ni.error() << "the target's shape must be the input's without "
                         "axis 1 (the classes)",
           failure();
  Type tElt = cast<ShapedType>(target.getType()).getElementType();
  Type fElt = cast<ShapedType>(logp.getType()).getElementType();
  if (!isa<IntegerType>(tElt) || !isa<FloatType>(fElt))
    return ni.error() << "the loss needs float scores and integer targets",
           failure();
  std::string reduction = ni.stringAttr("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return ni.error() << "reduction '" << reduction
                      << "' is not one of none, sum, mean",
           failure();
  auto build = [&](StringRef op, ValueRange operands,
                   ArrayRef<NamedAttribute> attrs = {}) {
    return ::build(ni, op, operands, attrs);
  };

  // Ignored targets read class 0 and weigh 0.
  Value ignored;
  if (ni.attr("ignore_index")) {
    auto m = build("Equal",
                   {target, scalar(ni, tElt, ni.intAttr("ignore_index", 0))});
    if (failed(m))
      return failure();
    ignored = *m;
    auto t = build("Where", {ignored, scalar(ni, tElt, 0), target});
    if (failed(t))
      return failure();
    target = *t;
  }
  auto index = build("Unsqueeze", {target}, {ni.ints("axes", {1})});
  if (failed(index))
    return failure();
  auto picked = build("GatherElements", {logp, *index}, {ni.i64("axis", 1)});
  if (failed(picked))
    return failure();
  auto squeezed = build("Squeeze", {*picked}, {ni.ints("axes", {1})});
  if (failed(squeezed))
    return failure();
  auto loss = build("Neg", {*squeezed});
  if (failed(loss))
    return failure();

  Value w; // the weight of each element; null: 1
  if (weight) {
    auto g = build("Gather", {weight, target}, {ni.i64("axis", 0)});
    if (failed(g))
      return failure();
    w = *g;
    loss = build("Mul", {*loss, w});
    if (failed(loss))
      return failure();
  }
  if (ignored) {
    // Where, not a weight of 0: an ignored element's loss is +0 (0 times
    // a negative log-probability would be -0).
    Value zero = scalar(ni, fElt, 0);
    loss = build("Where", {ignored, zero, *loss});
    if (failed(loss))
      return failure();
    if (reduction == "mean") {
      // The mean divides by the weights of the elements not ignored.
      auto masked =
          build("Where", {ignored, zero, w ? w : scalar(ni, fElt, 1)});
      if (failed(masked))
        return failure();
      w = *masked;
    }
  }
  if (reduction == "none")
    return loss;

  SmallVector<int64_t> all;
  for (int64_t d = 0; d < static_cast<int64_t>(tShape->size()); ++d)
    all.push_back(d);
  auto sum = [&](Value v) {
    return build("ReduceSum", {v},
                 {ni.ints("axes", all), ni.i64("keepdims", 0)});
  };
  auto total = sum(*loss);
  if (failed(total) || reduction == "sum")
    return total;
  Value count;
  if (w) {
    auto s = sum(w);
    if (failed(s))
      return failure();
    count = *s;
  } else {
    int64_t n = 1;
    for (int64_t d : *tShape)
      n *= d;
    count = scalar(ni, fElt, static_cast<double>(n));
  }
  return build("Div", {*total, count});
}

} // namespace

LogicalResult qatc::detail::importNllLoss(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  return single(ni, nllLoss(ni, ni.input(0), ni.input(1), ni.input(2)));
}

LogicalResult qatc::detail::importSoftmaxCrossEntropyLoss(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  auto logp = ni.build1("onnx.LogSoftmax", {ni.input(0)}, {ni.i64("axis", 1)});
  if (failed(logp))
    return failure();
  auto loss = nllLoss(ni, *logp, ni.input(1), ni.input(2));
  if (failed(loss))
    return failure();
  ni.results.push_back(*loss);
  // The optional second output: the log-probabilities.
  if (ni.node.output_size() > 1)
    ni.results.push_back(*logp);
  return success();
}

LogicalResult qatc::detail::importTrilu(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input");
  if (failed(shape))
    return failure();
  if (shape->size() < 2)
    return ni.error() << "Trilu needs an input of rank 2 or more", failure();
  int64_t k = 0;
  if (ni.input(1)) {
    auto ks = ni.requireConstInts(1, "k");
    if (failed(ks))
      return failure();
    if (ks->size() != 1)
      return ni.error() << "k must be one value", failure();
    k = (*ks)[0];
  }
  bool upper = ni.intAttr("upper", 1) != 0;
  int64_t n = (*shape)[shape->size() - 2], m = shape->back();
  // Kept where j - i >= k (upper) or j - i <= k (lower).
  Value mask = tensorOf(ni, {n, m}, ni.builder.getI1Type(), [&](int64_t e) {
    int64_t d = e % m - e / m;
    return upper ? d >= k : d <= k;
  });
  Type elt = cast<ShapedType>(ni.input(0).getType()).getElementType();
  if (elt.isInteger(1))
    return ni.error() << "Trilu of booleans is not supported", failure();
  return single(ni,
                build(ni, "Where", {mask, ni.input(0), scalar(ni, elt, 0)}));
}

LogicalResult qatc::detail::importEyeLike(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input");
  if (failed(shape))
    return failure();
  if (shape->size() != 2)
    return ni.error() << "EyeLike needs a 2-D input", failure();
  Type elt = cast<ShapedType>(ni.input(0).getType()).getElementType();
  if (ni.attr("dtype")) {
    std::string why;
    elt = convertElementType(
        ni.getContext(), static_cast<int32_t>(ni.intAttr("dtype", 0)), &why);
    if (!elt)
      return ni.error() << "EyeLike to an unsupported type: " << why, failure();
  }
  int64_t k = ni.intAttr("k", 0), m = (*shape)[1];
  ni.results.push_back(tensorOf(ni, *shape, elt, [&](int64_t e) {
    return e % m - e / m == k ? 1.0 : 0.0;
  }));
  return success();
}

LogicalResult qatc::detail::importHardmax(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input");
  if (failed(shape))
    return failure();
  int64_t rank = shape->size();
  Value x = ni.input(0);
  auto axis = normAxis(ni, ni.intAttr("axis", ni.opset < 13 ? 1 : -1), rank);
  if (failed(axis))
    return failure();
  Type elt = cast<ShapedType>(x.getType()).getElementType();
  if (!isa<FloatType>(elt))
    return ni.error() << "Hardmax needs float data", failure();
  // Before opset 13 the input is seen as 2-D [before axis, from axis on].
  SmallVector<int64_t> flat;
  if (ni.opset < 13) {
    int64_t a = 1, b = 1;
    for (int64_t d = 0; d < rank; ++d)
      (d < *axis ? a : b) *= (*shape)[d];
    flat = {a, b};
    auto r = build(ni, "Reshape", {x}, {ni.ints("shape", flat)});
    if (failed(r))
      return failure();
    x = *r;
  }
  int64_t xr = flat.empty() ? rank : 2, xa = flat.empty() ? *axis : 1;
  int64_t n = cast<ShapedType>(x.getType()).getDimSize(xa);
  // The first largest element's position, compared with every position.
  auto am =
      build(ni, "ArgMax", {x}, {ni.i64("axis", xa), ni.i64("keepdims", 1)});
  if (failed(am))
    return failure();
  auto eq = build(ni, "Equal", {*am, positions(ni, xr, xa, n)});
  if (failed(eq))
    return failure();
  auto type = cast<ShapedType>(x.getType());
  auto cast = ni.buildWithTypes("onnx.Cast", {*eq}, {}, {type});
  if (failed(cast))
    return failure();
  Value y = (*cast)[0];
  if (!flat.empty()) {
    auto r = build(ni, "Reshape", {y}, {ni.ints("shape", *shape)});
    if (failed(r))
      return failure();
    y = *r;
  }
  ni.results.push_back(y);
  return success();
}

LogicalResult qatc::detail::importOneHot(NodeImporter &ni) {
  if (failed(requireInputs(ni, 3)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "indices");
  if (failed(shape))
    return failure();
  auto depths = ni.constFloats(ni.input(1));
  if (!depths || depths->size() != 1)
    return ni.error() << "input #1 ('depth') of OneHot must be a constant "
                         "scalar (qatc needs it at compile time to give the "
                         "result a static shape)",
           failure();
  int64_t depth = static_cast<int64_t>((*depths)[0]);
  if (depth <= 0)
    return ni.error() << "OneHot depth " << depth << " is not positive",
           failure();
  auto vShape = ni.staticShape(ni.input(2), "values");
  if (failed(vShape))
    return failure();
  if (*vShape != ArrayRef<int64_t>{2})
    return ni.error() << "OneHot values must be [off_value, on_value]",
           failure();
  int64_t rank = shape->size() + 1;
  auto axis = normAxis(ni, ni.intAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  Type i64 = ni.builder.getI64Type();
  Value idx = ni.input(0);
  if (!cast<ShapedType>(idx.getType()).getElementType().isInteger(64)) {
    // Float or narrower indices: as int64 (floats truncated toward 0).
    auto c = ni.buildWithTypes("onnx.Cast", {idx}, {},
                               {cast<ShapedType>(idx.getType()).clone(i64)});
    if (failed(c))
      return failure();
    idx = (*c)[0];
  }
  // Negative indices count from the end; out of range ones match nothing.
  auto neg = build(ni, "Less", {idx, scalar(ni, i64, 0)});
  auto wrapped = build(ni, "Add", {idx, scalar(ni, i64, depth)});
  if (failed(neg) || failed(wrapped))
    return failure();
  auto fixed = build(ni, "Where", {*neg, *wrapped, idx});
  if (failed(fixed))
    return failure();
  auto u = build(ni, "Unsqueeze", {*fixed}, {ni.ints("axes", {*axis})});
  if (failed(u))
    return failure();
  auto eq = build(ni, "Equal", {*u, positions(ni, rank, *axis, depth)});
  if (failed(eq))
    return failure();
  // off = values[0], on = values[1].
  auto pick = [&](int64_t i) {
    return build(ni, "Gather", {ni.input(2), scalar(ni, i64, i)},
                 {ni.i64("axis", 0)});
  };
  auto off = pick(0), on = pick(1);
  if (failed(off) || failed(on))
    return failure();
  return single(ni, build(ni, "Where", {*eq, *on, *off}));
}

LogicalResult qatc::detail::importIsNaN(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  // NaN is the one value not equal to itself.
  auto eq = build(ni, "Equal", {ni.input(0), ni.input(0)});
  if (failed(eq))
    return failure();
  return single(ni, build(ni, "Not", {*eq}));
}

LogicalResult qatc::detail::importIsInf(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  Value x = ni.input(0);
  auto type = cast<ShapedType>(x.getType());
  if (!isa<FloatType>(type.getElementType()))
    return ni.error() << "IsInf needs float data", failure();
  double inf = std::numeric_limits<double>::infinity();
  SmallVector<Value> hits;
  for (auto [attr, v] : {std::make_pair("detect_positive", inf),
                         std::make_pair("detect_negative", -inf)}) {
    if (!ni.intAttr(attr, 1))
      continue;
    auto eq = build(ni, "Equal", {x, scalar(ni, type.getElementType(), v)});
    if (failed(eq))
      return failure();
    hits.push_back(*eq);
  }
  if (hits.empty()) {
    auto shape = ni.staticShape(x, "input");
    if (failed(shape))
      return failure();
    ni.results.push_back(tensorOf(ni, *shape, ni.builder.getI1Type(),
                                  [](int64_t) { return 0.0; }));
    return success();
  }
  if (hits.size() == 1)
    return single(ni, hits[0]);
  return single(ni, build(ni, "Or", {hits[0], hits[1]}));
}

LogicalResult qatc::detail::importReduceLogSum(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input data");
  if (failed(shape))
    return failure();
  auto axes = readAxes(ni, 18, 1);
  if (failed(axes))
    return failure();
  int64_t rank = shape->size();
  SmallVector<int64_t> normalized;
  if (!*axes || (*axes)->empty()) {
    if (ni.opset >= 18 && ni.intAttr("noop_with_empty_axes", 0))
      return single(ni, build(ni, "Log", {ni.input(0)}));
    for (int64_t i = 0; i < rank; ++i)
      normalized.push_back(i);
  } else {
    auto n = normAxes(ni, **axes, rank);
    if (failed(n))
      return failure();
    normalized = *n;
  }
  auto sum = build(ni, "ReduceSum", {ni.input(0)},
                   {ni.ints("axes", normalized),
                    ni.i64("keepdims", ni.intAttr("keepdims", 1))});
  if (failed(sum))
    return failure();
  return single(ni, build(ni, "Log", {*sum}));
}
