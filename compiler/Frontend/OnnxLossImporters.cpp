//===- OnnxLossImporters.cpp - losses as ops qatc already has -------------===//
//
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss are plain inference
// computations (models export them to score or to distil). They import as
// the ops ONNX's own function bodies use: LogSoftmax, GatherElements of the
// target class, Gather of the class weights, Where for ignore_index and
// ReduceSum for the reductions. Every op built carries the node's location,
// so errors, the precision report and the plan's layers still name it.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

using namespace mlir;
using namespace qatc;
using namespace qatc::detail;

namespace {

Value scalar(NodeImporter &ni, Type elt, double v) {
  auto type = RankedTensorType::get({}, elt);
  if (isa<FloatType>(elt))
    return ni.constant(
        DenseElementsAttr::get(type, FloatAttr::get(elt, v).getValue()));
  return ni.constant(DenseElementsAttr::get(
      type, IntegerAttr::get(elt, static_cast<int64_t>(v)).getValue()));
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
    return ni.build1(("onnx." + op).str(), operands, attrs);
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
