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
// - IsNaN, IsInf: comparisons; ReduceLogSum: Log of ReduceSum;
//   ReduceLogSumExp: m + Log(ReduceSum(Exp(x - m))) with m the (finite)
//   ReduceMax, as ONNX Runtime computes it to stay finite;
// - CumSum: a MatMul with a constant triangle of ones along the axis;
// - Einsum (up to two operands, no repeated index within one): the
//   operands transposed and unsqueezed to one index order, multiplied with
//   broadcasting, summed over the contracted indices;
// - RNN, GRU, LSTM: unrolled over their static sequence length into
//   MatMul, Add, Mul and the activations, one step after the other (the
//   input projection of all steps is one MatMul).
//
// Every op built carries the node's location, so errors, the precision
// report and the plan's layers still name the node.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>

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

FailureOr<Value> reshape(NodeImporter &ni, Value v, ArrayRef<int64_t> shape) {
  auto type = cast<ShapedType>(v.getType()).clone(shape);
  auto r = ni.buildWithTypes("onnx.Reshape", {v}, {}, {type});
  if (failed(r))
    return failure();
  return (*r)[0];
}

/// v[begin:end] along `axis`.
FailureOr<Value> sliceAxis(NodeImporter &ni, Value v, int64_t axis,
                           int64_t begin, int64_t end) {
  auto shape = cast<ShapedType>(v.getType()).getShape();
  SmallVector<int64_t> starts(shape.size(), 0), ends(shape),
      steps(shape.size(), 1);
  starts[axis] = begin;
  ends[axis] = end;
  return build(ni, "Slice", {v},
               {ni.ints("starts", starts), ni.ints("ends", ends),
                ni.ints("steps", steps)});
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

namespace {

LogicalResult importNllLoss(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  return single(ni, nllLoss(ni, ni.input(0), ni.input(1), ni.input(2)));
}

LogicalResult importSoftmaxCrossEntropyLoss(NodeImporter &ni) {
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

LogicalResult importLayerNorm(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  SmallVector<Value> operands{ni.input(0), ni.input(1)};
  if (ni.input(2))
    operands.push_back(ni.input(2));
  float epsilon = ni.floatAttr("epsilon", 1e-5f);
  auto y = build(
      ni, "LayerNormalization", operands,
      {ni.i64("axis", ni.intAttr("axis", -1)), ni.f32("epsilon", epsilon)});
  if (failed(y))
    return failure();
  ni.results.push_back(*y);
  if (llvm::none_of(llvm::drop_begin(ni.node.output()),
                    [](const std::string &o) { return !o.empty(); }))
    return success();
  // Mean and InvStdDev over the normalized axes, kept as size 1.
  Value x = ni.input(0);
  auto shape = ni.staticShape(x, "X");
  if (failed(shape))
    return failure();
  int64_t rank = shape->size();
  auto axis = normAxis(ni, ni.intAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  SmallVector<int64_t> axes;
  for (int64_t d = *axis; d < rank; ++d)
    axes.push_back(d);
  SmallVector<NamedAttribute> reduce{ni.ints("axes", axes),
                                     ni.i64("keepdims", 1)};
  auto mean = build(ni, "ReduceMean", {x}, reduce);
  if (failed(mean))
    return failure();
  auto d = build(ni, "Sub", {x, *mean});
  if (failed(d))
    return failure();
  auto sq = build(ni, "Mul", {*d, *d});
  if (failed(sq))
    return failure();
  auto var = build(ni, "ReduceMean", {*sq}, reduce);
  if (failed(var))
    return failure();
  Type elt = cast<ShapedType>(x.getType()).getElementType();
  auto sum = build(ni, "Add", {*var, scalar(ni, elt, epsilon)});
  if (failed(sum))
    return failure();
  auto root = build(ni, "Sqrt", {*sum});
  if (failed(root))
    return failure();
  auto inv = build(ni, "Reciprocal", {*root});
  if (failed(inv))
    return failure();
  ni.results.push_back(*mean);
  ni.results.push_back(*inv);
  return success();
}

LogicalResult importTrilu(NodeImporter &ni) {
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

LogicalResult importEyeLike(NodeImporter &ni) {
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

LogicalResult importHardmax(NodeImporter &ni) {
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
    auto r = reshape(ni, x, flat);
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
    auto r = reshape(ni, y, *shape);
    if (failed(r))
      return failure();
    y = *r;
  }
  ni.results.push_back(y);
  return success();
}

LogicalResult importOneHot(NodeImporter &ni) {
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

LogicalResult importIsNaN(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  // NaN is the one value not equal to itself.
  auto eq = build(ni, "Equal", {ni.input(0), ni.input(0)});
  if (failed(eq))
    return failure();
  return single(ni, build(ni, "Not", {*eq}));
}

LogicalResult importIsInf(NodeImporter &ni) {
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

LogicalResult importReduceLogSum(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto axes = reduceAxes(ni, 18);
  if (failed(axes))
    return failure();
  if (!*axes) // no axes and noop_with_empty_axes: log of each element
    return single(ni, build(ni, "Log", {ni.input(0)}));
  auto sum = build(
      ni, "ReduceSum", {ni.input(0)},
      {ni.ints("axes", **axes), ni.i64("keepdims", ni.intAttr("keepdims", 1))});
  if (failed(sum))
    return failure();
  return single(ni, build(ni, "Log", {*sum}));
}

//===----------------------------------------------------------------------===//
// RNN, GRU, LSTM: unrolled over their (static) sequence length
//===----------------------------------------------------------------------===//

namespace {

/// Builds the ops of one recurrent node, step by step. Every value is
/// checked as it is built: the first failure has already been reported at
/// the node, and later calls see `failed` and do nothing.
class Recurrence {
public:
  enum Kind { Rnn, Gru, Lstm };

  Recurrence(NodeImporter &ni, Kind kind) : ni(ni), kind(kind) {}

  LogicalResult run();

private:
  NodeImporter &ni;
  Kind kind;
  bool failedOnce = false;

  Value op(StringRef name, ValueRange operands,
           ArrayRef<NamedAttribute> attrs = {}) {
    if (failedOnce || llvm::any_of(operands, [](Value v) { return !v; }))
      return failedOnce = true, Value();
    auto r = build(ni, name, operands, attrs);
    if (failed(r))
      return failedOnce = true, Value();
    return *r;
  }
  Value slice(Value v, int64_t axis, int64_t b, int64_t e) {
    if (failedOnce || !v)
      return failedOnce = true, Value();
    auto r = sliceAxis(ni, v, axis, b, e);
    if (failed(r))
      return failedOnce = true, Value();
    return *r;
  }
  /// v[i] of the first axis, without that axis.
  Value row(Value v, int64_t i) {
    return op("Squeeze", {slice(v, 0, i, i + 1)}, {ni.ints("axes", {0})});
  }
  Value unsqueeze(Value v, int64_t axis) {
    return op("Unsqueeze", {v}, {ni.ints("axes", {axis})});
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    return op("Transpose", {v}, {ni.ints("perm", perm)});
  }
  Value concat(ValueRange vs, int64_t axis) {
    if (vs.size() == 1)
      return vs[0];
    return op("Concat", vs, {ni.i64("axis", axis)});
  }
  Value zeros(ArrayRef<int64_t> shape) {
    return tensorOf(ni, shape, elt, [](int64_t) { return 0.0; });
  }
  Value one() { return scalar(ni, elt, 1.0); }

  struct Activation {
    std::string name;
    float alpha = 0, beta = 0;
  };
  /// `x` clipped (the `clip` attribute, unless `clipped` is false), then
  /// through activation `a`.
  Value activate(const Activation &a, Value x, bool clipped = true);
  FailureOr<std::vector<Activation>> activations(int64_t dirs);

  Type elt;
  std::optional<float> clip;
};

FailureOr<std::vector<Recurrence::Activation>>
Recurrence::activations(int64_t dirs) {
  std::vector<std::string> names;
  if (const auto *a = ni.attr("activations"))
    for (const std::string &n : a->strings())
      names.push_back(n);
  size_t per = kind == Rnn ? 1 : kind == Gru ? 2 : 3;
  if (names.empty()) {
    std::vector<std::string> def =
        kind == Rnn   ? std::vector<std::string>{"Tanh"}
        : kind == Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                      : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < dirs; ++d)
      names.insert(names.end(), def.begin(), def.end());
  }
  if (names.size() != per * dirs)
    return ni.error() << "activations lists " << names.size()
                      << " functions; this node needs " << per * dirs,
           failure();
  auto alphas = ni.floatsAttr("activation_alpha");
  auto betas = ni.floatsAttr("activation_beta");
  std::vector<Activation> out;
  size_t ai = 0, bi = 0;
  for (const std::string &n : names) {
    Activation a{n};
    // Defaults as the ONNX operator defines them; the lists hold values
    // for the functions that take them, in order.
    bool takesAlpha = n == "LeakyRelu" || n == "ThresholdedRelu" ||
                      n == "Elu" || n == "HardSigmoid";
    if (n == "LeakyRelu")
      a.alpha = 0.01f;
    else if (n == "ThresholdedRelu" || n == "Elu")
      a.alpha = 1.0f;
    else if (n == "HardSigmoid")
      a.alpha = 0.2f, a.beta = 0.5f;
    if (takesAlpha && alphas && ai < alphas->size())
      a.alpha = (*alphas)[ai++];
    if (n == "HardSigmoid" && betas && bi < betas->size())
      a.beta = (*betas)[bi++];
    static const char *const known[] = {
        "Sigmoid",     "Tanh", "Relu",     "LeakyRelu", "ThresholdedRelu",
        "HardSigmoid", "Elu",  "Softsign", "Softplus"};
    if (!llvm::is_contained(known, n))
      return ni.error() << "activation '" << n << "' is not supported",
             failure();
    out.push_back(a);
  }
  return out;
}

Value Recurrence::activate(const Activation &a, Value x, bool clipped) {
  if (clip && clipped)
    x = op("Clip", {x}, {ni.f32("min", -*clip), ni.f32("max", *clip)});
  SmallVector<NamedAttribute> attrs;
  if (a.name == "LeakyRelu" || a.name == "ThresholdedRelu" || a.name == "Elu")
    attrs.push_back(ni.f32("alpha", a.alpha));
  if (a.name == "HardSigmoid") {
    attrs.push_back(ni.f32("alpha", a.alpha));
    attrs.push_back(ni.f32("beta", a.beta));
  }
  return op(a.name, {x}, attrs);
}

LogicalResult Recurrence::run() {
  StringRef opType = ni.node.op_type();
  if (failed(requireInputs(ni, 3)))
    return failure();
  Value x = ni.input(0), w = ni.input(1), r = ni.input(2);
  auto xs = ni.staticShape(x, "X");
  auto ws = ni.staticShape(w, "W");
  auto rs = ni.staticShape(r, "R");
  if (failed(xs) || failed(ws) || failed(rs))
    return failure();
  elt = cast<ShapedType>(x.getType()).getElementType();
  if (!isa<FloatType>(elt))
    return ni.error() << opType << " needs float data", failure();
  int64_t gates = kind == Rnn ? 1 : kind == Gru ? 3 : 4;
  std::string direction = ni.stringAttr("direction", "forward");
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return ni.error() << "direction '" << direction << "' is not forward, "
                      << "reverse or bidirectional",
           failure();
  int64_t dirs = direction == "bidirectional" ? 2 : 1;
  int64_t layout = ni.intAttr("layout", 0);
  if (xs->size() != 3 || ws->size() != 3 || rs->size() != 3)
    return ni.error() << opType << " needs X, W and R of rank 3", failure();
  int64_t hidden = ni.intAttr("hidden_size", (*rs)[2]);
  int64_t seq = layout ? (*xs)[1] : (*xs)[0];
  int64_t batch = layout ? (*xs)[0] : (*xs)[1];
  int64_t inputSize = (*xs)[2];
  if ((*ws)[0] != dirs || (*ws)[1] != gates * hidden || (*ws)[2] != inputSize ||
      (*rs)[0] != dirs || (*rs)[1] != gates * hidden || (*rs)[2] != hidden)
    return ni.error() << "W and R do not match " << dirs << " direction(s), "
                      << gates << " gate(s) of hidden size " << hidden
                      << " and input size " << inputSize,
           failure();
  if (Value lens = ni.input(4)) {
    auto l = ni.constInts(lens);
    if (!l || llvm::any_of(*l, [&](int64_t v) { return v != seq; }))
      return ni.error() << "qatc compiles " << opType
                        << " only when every sequence has the full length "
                        << seq << " (sequence_lens must be a constant "
                        << "tensor of " << seq << "s)",
             failure();
  }
  if (const auto *c = ni.attr("clip"))
    clip = c->f();
  bool inputForget = kind == Lstm && ni.intAttr("input_forget", 0) != 0;
  bool linearBeforeReset =
      kind == Gru && ni.intAttr("linear_before_reset", 0) != 0;
  auto acts = activations(dirs);
  if (failed(acts))
    return failure();

  // Time-major X: [seq, batch, input].
  if (layout)
    x = transpose(x, {1, 0, 2});
  Value bias = ni.input(3);
  Value h0 = ni.input(5), c0 = kind == Lstm ? ni.input(6) : Value();
  Value peep = kind == Lstm ? ni.input(7) : Value();

  SmallVector<Value> ys, hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    bool reverse = direction == "reverse" || d == 1;
    const Activation *f = &(*acts)[d * (kind == Rnn ? 1 : kind == Gru ? 2 : 3)];
    Value wT = transpose(row(w, d), {1, 0}); // [input, gates*hidden]
    Value rT = transpose(row(r, d), {1, 0}); // [hidden, gates*hidden]
    Value wb, rb;
    if (bias) {
      Value b = row(bias, d); // [2*gates*hidden]
      wb = slice(b, 0, 0, gates * hidden);
      rb = slice(b, 0, gates * hidden, 2 * gates * hidden);
    }
    // X W^T for every step at once: [seq, batch, gates*hidden].
    Value xw = op("MatMul", {x, wT});
    if (wb)
      xw = op("Add", {xw, wb});
    Value h = h0 ? row(h0, d) : zeros({batch, hidden});
    Value c =
        kind == Lstm ? (c0 ? row(c0, d) : zeros({batch, hidden})) : Value();
    Value pi, po, pf;
    if (peep) {
      Value p = row(peep, d); // [3*hidden]: i, o, f
      pi = slice(p, 0, 0, hidden);
      po = slice(p, 0, hidden, 2 * hidden);
      pf = slice(p, 0, 2 * hidden, 3 * hidden);
    }
    auto gate = [&](Value v, int64_t g) {
      return slice(v, 1, g * hidden, (g + 1) * hidden);
    };
    SmallVector<Value> steps(seq);
    for (int64_t s = 0; s < seq && !failedOnce; ++s) {
      int64_t t = reverse ? seq - 1 - s : s;
      Value xt = row(xw, t); // [batch, gates*hidden]
      if (kind == Rnn) {
        Value g = op("Add", {xt, op("MatMul", {h, rT})});
        if (rb)
          g = op("Add", {g, rb});
        h = activate(f[0], g);
      } else if (kind == Gru) {
        // Gates z, r, h.
        Value hr = op("MatMul", {h, rT});
        if (rb)
          hr = op("Add", {hr, rb});
        Value z = activate(f[0], op("Add", {gate(xt, 0), gate(hr, 0)}));
        Value rg = activate(f[0], op("Add", {gate(xt, 1), gate(hr, 1)}));
        Value hterm;
        if (linearBeforeReset) {
          hterm = op("Mul", {rg, gate(hr, 2)});
        } else {
          hterm = op("MatMul", {op("Mul", {rg, h}),
                                slice(rT, 1, 2 * hidden, 3 * hidden)});
          if (rb)
            hterm = op("Add", {hterm, slice(rb, 0, 2 * hidden, 3 * hidden)});
        }
        Value ht = activate(f[1], op("Add", {gate(xt, 2), hterm}));
        // (1 - z) * ht + z * h
        h = op("Add",
               {op("Mul", {op("Sub", {one(), z}), ht}), op("Mul", {z, h})});
      } else {
        // Gates i, o, f, c.
        Value g = op("Add", {xt, op("MatMul", {h, rT})});
        if (rb)
          g = op("Add", {g, rb});
        Value i = gate(g, 0), o = gate(g, 1), fg = gate(g, 2), cc = gate(g, 3);
        if (pi) {
          i = op("Add", {i, op("Mul", {pi, c})});
          fg = op("Add", {fg, op("Mul", {pf, c})});
        }
        i = activate(f[0], i);
        fg = inputForget ? op("Sub", {one(), i}) : activate(f[0], fg);
        cc = activate(f[1], cc);
        c = op("Add", {op("Mul", {fg, c}), op("Mul", {i, cc})});
        if (po)
          o = op("Add", {o, op("Mul", {po, c})});
        o = activate(f[0], o);
        // The cell clip bounds the gates' inputs, not the cell state
        // (as ONNX Runtime reads the spec).
        h = op("Mul", {o, activate(f[2], c, /*clipped=*/false)});
      }
      steps[t] = unsqueeze(h, 0); // [1, batch, hidden]
    }
    if (failedOnce)
      return failure();
    ys.push_back(unsqueeze(concat(steps, 0), 1)); // [seq, 1, batch, hidden]
    hs.push_back(unsqueeze(h, 0));
    if (c)
      cs.push_back(unsqueeze(c, 0));
  }
  Value y = concat(ys, 1), yh = concat(hs, 0);
  Value yc = cs.empty() ? Value() : concat(cs, 0);
  if (layout) {
    y = transpose(y, {2, 0, 1, 3}); // [batch, seq, dirs, hidden]
    yh = transpose(yh, {1, 0, 2});  // [batch, dirs, hidden]
    if (yc)
      yc = transpose(yc, {1, 0, 2});
  }
  if (failedOnce)
    return failure();
  ni.results.push_back(y);
  ni.results.push_back(yh);
  if (yc)
    ni.results.push_back(yc);
  return success();
}

} // namespace

LogicalResult importRnn(NodeImporter &ni) {
  return Recurrence(ni, Recurrence::Rnn).run();
}
LogicalResult importGru(NodeImporter &ni) {
  return Recurrence(ni, Recurrence::Gru).run();
}
LogicalResult importLstm(NodeImporter &ni) {
  return Recurrence(ni, Recurrence::Lstm).run();
}

LogicalResult importCumSum(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "x");
  if (failed(shape))
    return failure();
  Type elt = cast<ShapedType>(ni.input(0).getType()).getElementType();
  if (!isa<FloatType>(elt))
    return ni.error() << "qatc computes CumSum on floats only", failure();
  auto axes = ni.requireConstInts(1, "axis");
  if (failed(axes))
    return failure();
  if (axes->size() != 1)
    return ni.error() << "axis must be one value", failure();
  int64_t rank = shape->size();
  auto axis = normAxis(ni, (*axes)[0], rank);
  if (failed(axis))
    return failure();
  bool exclusive = ni.intAttr("exclusive", 0),
       reverse = ni.intAttr("reverse", 0);
  int64_t n = (*shape)[*axis];
  // y[.., j] = sum over i of x[.., i] * T[i, j] along the axis moved last.
  Value tri = tensorOf(ni, {n, n}, elt, [&](int64_t e) {
    int64_t i = e / n, j = e % n;
    bool in =
        reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
    return in ? 1.0 : 0.0;
  });
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis)
      perm.push_back(d);
  perm.push_back(*axis);
  bool moved = *axis != rank - 1;
  Value x = ni.input(0);
  if (moved) {
    auto t = build(ni, "Transpose", {x}, {ni.ints("perm", perm)});
    if (failed(t))
      return failure();
    x = *t;
  }
  if (rank == 1) {
    // A row of one: plans compile matrix products of rank 2 and more.
    auto r = reshape(ni, x, {1, n});
    if (failed(r))
      return failure();
    auto y = build(ni, "MatMul", {*r, tri});
    if (failed(y))
      return failure();
    return single(ni, reshape(ni, *y, {n}));
  }
  auto y = build(ni, "MatMul", {x, tri});
  if (failed(y) || !moved)
    return single(ni, y);
  SmallVector<int64_t> back(rank);
  for (int64_t d = 0; d < rank; ++d)
    back[perm[d]] = d;
  return single(ni, build(ni, "Transpose", {*y}, {ni.ints("perm", back)}));
}

LogicalResult importEinsum(NodeImporter &ni) {
  std::string eq = ni.stringAttr("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  SmallVector<std::string> terms;
  for (size_t b = 0;;) {
    size_t c = lhs.find(',', b);
    terms.push_back(lhs.substr(b, c == std::string::npos ? c : c - b));
    if (c == std::string::npos)
      break;
    b = c + 1;
  }
  if (terms.size() != ni.numInputs() || terms.empty() || terms.size() > 2)
    return ni.error() << "qatc compiles Einsum of one or two operands; '" << eq
                      << "' has " << terms.size(),
           failure();
  // Letters in order of appearance; an index repeated within one term
  // (a diagonal) or an ellipsis is refused.
  std::string all;
  for (const std::string &t : terms) {
    for (size_t i = 0; i < t.size(); ++i) {
      if (!std::isalpha(static_cast<unsigned char>(t[i])) ||
          t.find(t[i], i + 1) != std::string::npos)
        return ni.error() << "qatc compiles Einsum without ellipses and "
                             "without an index repeated within one operand; "
                             "this equation is '"
                          << eq << "'",
               failure();
      if (all.find(t[i]) == std::string::npos)
        all += t[i];
    }
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
  } else {
    // Implicit output: the indices that appear once, alphabetically.
    for (char c : all) {
      int count = 0;
      for (const std::string &t : terms)
        count += std::count(t.begin(), t.end(), c);
      if (count == 1)
        out += c;
    }
    std::sort(out.begin(), out.end());
  }
  for (char c : out)
    if (all.find(c) == std::string::npos)
      return ni.error() << "output index '" << c << "' of '" << eq
                        << "' is in no operand",
             failure();
  // One order for every index: the output's, then the contracted ones.
  std::string order = out;
  for (char c : all)
    if (order.find(c) == std::string::npos)
      order += c;
  int64_t rank = order.size();
  std::map<char, int64_t> size;
  SmallVector<Value> aligned;
  for (auto [k, t] : llvm::enumerate(terms)) {
    Value v = ni.input(k);
    auto shape = ni.staticShape(v, "operand");
    if (failed(shape))
      return failure();
    if (shape->size() != t.size())
      return ni.error() << "operand " << k << " has rank " << shape->size()
                        << " but '" << t << "' names " << t.size()
                        << " indices",
             failure();
    for (size_t i = 0; i < t.size(); ++i) {
      auto [it, fresh] = size.emplace(t[i], (*shape)[i]);
      if (!fresh && it->second != (*shape)[i] && it->second != 1 &&
          (*shape)[i] != 1)
        return ni.error() << "index '" << t[i] << "' has sizes " << it->second
                          << " and " << (*shape)[i],
               failure();
      it->second = std::max(it->second, (*shape)[i]);
    }
    // Transpose the operand's indices into `order`, then insert the
    // missing ones as size-1 axes.
    SmallVector<int64_t> perm, missing;
    for (char c : order)
      if (size_t p = t.find(c); p != std::string::npos)
        perm.push_back(p);
    bool identity = llvm::equal(perm, llvm::seq<int64_t>(0, perm.size()));
    if (!identity) {
      auto tr = build(ni, "Transpose", {v}, {ni.ints("perm", perm)});
      if (failed(tr))
        return failure();
      v = *tr;
    }
    for (int64_t d = 0; d < rank; ++d)
      if (t.find(order[d]) == std::string::npos)
        missing.push_back(d);
    if (!missing.empty()) {
      auto u = build(ni, "Unsqueeze", {v}, {ni.ints("axes", missing)});
      if (failed(u))
        return failure();
      v = *u;
    }
    aligned.push_back(v);
  }
  Value prod = aligned[0];
  if (aligned.size() == 2) {
    auto m = build(ni, "Mul", {aligned[0], aligned[1]});
    if (failed(m))
      return failure();
    prod = *m;
  }
  SmallVector<int64_t> contracted;
  for (int64_t d = out.size(); d < rank; ++d)
    contracted.push_back(d);
  if (contracted.empty())
    return single(ni, prod);
  return single(ni,
                build(ni, "ReduceSum", {prod},
                      {ni.ints("axes", contracted), ni.i64("keepdims", 0)}));
}

LogicalResult importReduceLogSumExp(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  Value x = ni.input(0);
  Type elt = cast<ShapedType>(x.getType()).getElementType();
  if (!isa<FloatType>(elt))
    return ni.error() << "ReduceLogSumExp needs float data", failure();
  auto axes = reduceAxes(ni, 18);
  if (failed(axes))
    return failure();
  if (!*axes) // no axes and noop_with_empty_axes: log(exp(x))
    return single(ni, build(ni, "Log", {*build(ni, "Exp", {x})}));
  int64_t keep = ni.intAttr("keepdims", 1);
  auto shift = [&](int64_t keepdims) -> FailureOr<Value> {
    // The maximum, or 0 where it is infinite (all -inf, or a +inf).
    auto m = build(ni, "ReduceMax", {x},
                   {ni.ints("axes", **axes), ni.i64("keepdims", keepdims)});
    if (failed(m))
      return failure();
    auto inf =
        build(ni, "Equal",
              {*build(ni, "Abs", {*m}),
               scalar(ni, elt, std::numeric_limits<double>::infinity())});
    if (failed(inf))
      return failure();
    return build(ni, "Where", {*inf, scalar(ni, elt, 0), *m});
  };
  auto m = shift(1);
  if (failed(m))
    return failure();
  auto e = build(ni, "Exp", {*build(ni, "Sub", {x, *m})});
  if (failed(e))
    return failure();
  auto sum = build(ni, "ReduceSum", {*e},
                   {ni.ints("axes", **axes), ni.i64("keepdims", keep)});
  if (failed(sum))
    return failure();
  auto log = build(ni, "Log", {*sum});
  auto m2 = keep ? m : shift(0);
  if (failed(log) || failed(m2))
    return failure();
  return single(ni, build(ni, "Add", {*log, *m2}));
}

struct ComposedEntry {
  const char *opType;
  NodeHandler handler;
};

/// Every operator imported as a composition, sorted by name.
const ComposedEntry kComposed[] = {
    {"CumSum", importCumSum},
    {"Einsum", importEinsum},
    {"EyeLike", importEyeLike},
    {"GRU", importGru},
    {"Hardmax", importHardmax},
    {"IsInf", importIsInf},
    {"IsNaN", importIsNaN},
    {"LSTM", importLstm},
    {"LayerNormalization", importLayerNorm},
    {"NegativeLogLikelihoodLoss", importNllLoss},
    {"OneHot", importOneHot},
    {"RNN", importRnn},
    {"ReduceLogSum", importReduceLogSum},
    {"ReduceLogSumExp", importReduceLogSumExp},
    {"SoftmaxCrossEntropyLoss", importSoftmaxCrossEntropyLoss},
    {"Trilu", importTrilu},
};

} // namespace

NodeHandler qatc::detail::lookupComposedHandler(StringRef opType) {
  for (const ComposedEntry &e : kComposed)
    if (opType == e.opType)
      return e.handler;
  return nullptr;
}

void qatc::detail::appendComposedOps(std::vector<std::string> &ops) {
  for (const ComposedEntry &e : kComposed)
    ops.push_back(e.opType);
}
