//===- OnnxMathImporters.cpp - handlers of the math and shape ops ---------===//
//
// Handlers for the ops exporters use in shape computations and detection
// heads: variadic Max/Min/Sum/Mean (chains of binary ops), Mod, Where, the
// Reduce* family, ArgMax/ArgMin, TopK, Expand, Tile, DepthToSpace /
// SpaceToDepth, Upsample (as Resize), and Range and Size, which only exist
// at import: their results are constants once every shape is static.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;
using namespace qatc;
using namespace qatc::detail;

namespace {

Type elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

/// A 0-D or one-element constant input as a double, or nullopt.
std::optional<double> constScalar(NodeImporter &ni, Value v) {
  if (auto f = ni.constFloats(v); f && f->size() == 1)
    return (*f)[0];
  if (auto i = ni.constInts(v); i && i->size() == 1)
    return static_cast<double>((*i)[0]);
  return std::nullopt;
}

} // namespace

LogicalResult qatc::detail::importVariadic(NodeImporter &ni) {
  SmallVector<Value> operands;
  for (size_t i = 0; i < ni.numInputs(); ++i)
    if (Value v = ni.input(i))
      operands.push_back(v);
  if (operands.empty())
    return ni.error() << ni.node.op_type() << " needs at least one input",
           failure();
  StringRef type = ni.node.op_type();
  std::string opName = type == "Sum" || type == "Mean" ? std::string("onnx.Add")
                                                       : "onnx." + type.str();
  // One input: the result is that input (Identity keeps the tensor's name).
  Value acc = operands[0];
  if (operands.size() == 1)
    return single(ni, ni.build1("onnx.Identity", {acc}));
  // Left to right, as ONNX Runtime accumulates.
  for (size_t i = 1; i < operands.size(); ++i) {
    auto next = ni.build1(opName, {acc, operands[i]});
    if (failed(next))
      return failure();
    acc = *next;
  }
  if (type != "Mean")
    return single(ni, acc);
  Type elt = elementTypeOf(acc);
  if (!isa<FloatType>(elt))
    return ni.error() << "Mean of " << elt << " tensors is not supported",
           failure();
  auto countType = RankedTensorType::get({}, elt);
  Value count = ni.constant(DenseElementsAttr::get(
      countType, FloatAttr::get(elt, static_cast<double>(operands.size()))));
  return single(ni, ni.build1("onnx.Div", {acc, count}));
}

LogicalResult qatc::detail::importMod(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  int64_t fmod = ni.intAttr("fmod", 0);
  if (!fmod && isa<FloatType>(elementTypeOf(ni.input(0))))
    return ni.error() << "Mod of float tensors needs fmod=1 (ONNX)", failure();
  return single(ni, ni.build1("onnx.Mod", {ni.input(0), ni.input(1)},
                              {ni.i64("fmod", fmod)}));
}

LogicalResult qatc::detail::importElu(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  return single(ni, ni.build1("onnx.Elu", {ni.input(0)},
                              {ni.f32("alpha", ni.floatAttr("alpha", 1.0f))}));
}

LogicalResult qatc::detail::importWhere(NodeImporter &ni) {
  if (failed(requireInputs(ni, 3)))
    return failure();
  return single(
      ni, ni.build1("onnx.Where", {ni.input(0), ni.input(1), ni.input(2)}));
}

FailureOr<std::optional<SmallVector<int64_t>>>
qatc::detail::reduceAxes(NodeImporter &ni, int64_t inputSince) {
  auto shape = ni.staticShape(ni.input(0), "input data");
  if (failed(shape))
    return failure();
  auto axes = readAxes(ni, inputSince, 1);
  if (failed(axes))
    return failure();
  int64_t rank = shape->size();
  if (*axes && !(*axes)->empty())
    return normAxes(ni, **axes, rank);
  if (ni.opset >= inputSince && ni.intAttr("noop_with_empty_axes", 0))
    return std::optional<SmallVector<int64_t>>();
  SmallVector<int64_t> all;
  for (int64_t i = 0; i < rank; ++i)
    all.push_back(i);
  return std::optional<SmallVector<int64_t>>(all);
}

LogicalResult qatc::detail::importReduce(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  // ReduceSum took its axes as an input from opset 13, the others from 18.
  auto axes = reduceAxes(ni, ni.node.op_type() == "ReduceSum" ? 13 : 18);
  if (failed(axes))
    return failure();
  if (!*axes)
    return single(ni, ni.build1("onnx.Identity", {ni.input(0)}));
  return single(ni, ni.build1("onnx." + ni.node.op_type(), {ni.input(0)},
                              {ni.ints("axes", **axes),
                               ni.i64("keepdims", ni.intAttr("keepdims", 1))}));
}

LogicalResult qatc::detail::importArgReduce(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input data");
  if (failed(shape))
    return failure();
  auto axis = normAxis(ni, ni.intAttr("axis", 0), shape->size());
  if (failed(axis))
    return failure();
  return single(ni, ni.build1("onnx." + ni.node.op_type(), {ni.input(0)},
                              {ni.i64("axis", *axis),
                               ni.i64("keepdims", ni.intAttr("keepdims", 1)),
                               ni.i64("select_last_index",
                                      ni.intAttr("select_last_index", 0))}));
}

LogicalResult qatc::detail::importTopK(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input X");
  if (failed(shape))
    return failure();
  int64_t k;
  if (ni.opset < 10) {
    k = ni.intAttr("k", -1);
  } else {
    auto kv = ni.requireConstInts(1, "K");
    if (failed(kv))
      return failure();
    if (kv->size() != 1)
      return ni.error() << "TopK K must have one element", failure();
    k = (*kv)[0];
  }
  auto axis = normAxis(ni, ni.intAttr("axis", -1), shape->size());
  if (failed(axis))
    return failure();
  auto results = ni.build("onnx.TopK", {ni.input(0)},
                          {ni.i64("k", k), ni.i64("axis", *axis),
                           ni.i64("largest", ni.intAttr("largest", 1)),
                           ni.i64("sorted", ni.intAttr("sorted", 1))});
  if (failed(results))
    return failure();
  ni.results.append(results->begin(), results->end());
  return success();
}

LogicalResult qatc::detail::importExpand(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  auto in = ni.staticShape(ni.input(0), "input");
  if (failed(in))
    return failure();
  auto target = ni.requireConstInts(1, "shape");
  if (failed(target))
    return failure();
  auto shape = qatc::onnx::broadcastShapes(*in, *target);
  if (failed(shape))
    return ni.error() << "Expand cannot broadcast the input to the given shape",
           failure();
  if (!isReasonableShape(*shape))
    return ni.error() << "Expand shape is invalid or too large", failure();
  auto type = RankedTensorType::get(*shape, elementTypeOf(ni.input(0)));
  if (type == ni.input(0).getType())
    return single(ni, ni.build1("onnx.Identity", {ni.input(0)}));
  auto results = ni.buildWithTypes("onnx.Expand", {ni.input(0)}, {}, {type});
  if (failed(results))
    return failure();
  ni.results.push_back((*results)[0]);
  return success();
}

LogicalResult qatc::detail::importTile(NodeImporter &ni) {
  if (failed(requireInputs(ni, 2)))
    return failure();
  auto repeats = ni.requireConstInts(1, "repeats");
  if (failed(repeats))
    return failure();
  return single(ni, ni.build1("onnx.Tile", {ni.input(0)},
                              {ni.ints("repeats", *repeats)}));
}

LogicalResult qatc::detail::importDepthSpace(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  if (!ni.attr("blocksize"))
    return ni.error() << ni.node.op_type() << " needs a blocksize", failure();
  SmallVector<NamedAttribute> attrs{
      ni.i64("blocksize", ni.intAttr("blocksize", 1))};
  if (ni.node.op_type() == "DepthToSpace")
    attrs.push_back(ni.str("mode", ni.stringAttr("mode", "DCR")));
  return single(ni,
                ni.build1("onnx." + ni.node.op_type(), {ni.input(0)}, attrs));
}

LogicalResult qatc::detail::importRange(NodeImporter &ni) {
  if (failed(requireInputs(ni, 3)))
    return failure();
  // The result's length depends on the values, so they must be known now.
  const char *names[] = {"start", "limit", "delta"};
  double v[3];
  for (int i = 0; i < 3; ++i) {
    auto s = constScalar(ni, ni.input(i));
    if (!s) {
      // Reports why the input is not a constant (which data it reads).
      (void)ni.requireConstInts(i, names[i]);
      return failure();
    }
    v[i] = *s;
  }
  if (v[2] == 0)
    return ni.error() << "Range delta is 0", failure();
  double n = std::max(0.0, std::ceil((v[1] - v[0]) / v[2]));
  if (n > static_cast<double>(kMaxDimension))
    return ni.error() << "Range would have " << n << " elements", failure();
  auto count = static_cast<int64_t>(n);
  Type elt = elementTypeOf(ni.input(0));
  auto type = RankedTensorType::get({count}, elt);
  // start + i * delta in the input type (as ONNX defines it).
  if (auto ft = dyn_cast<FloatType>(elt)) {
    SmallVector<APFloat> values;
    for (int64_t i = 0; i < count; ++i) {
      double x = ft.isF64()
                     ? v[0] + static_cast<double>(i) * v[2]
                     : static_cast<double>(static_cast<float>(
                           static_cast<float>(v[0]) +
                           static_cast<float>(i) * static_cast<float>(v[2])));
      APFloat f(x);
      bool lost;
      f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(f);
    }
    ni.results.push_back(ni.constant(DenseElementsAttr::get(type, values)));
    return success();
  }
  if (!elt.isIntOrIndex())
    return ni.error() << "Range of " << elt << " is not supported", failure();
  SmallVector<APInt> values;
  unsigned width = elt.getIntOrFloatBitWidth();
  for (int64_t i = 0; i < count; ++i)
    values.emplace_back(width,
                        static_cast<uint64_t>(static_cast<int64_t>(v[0]) +
                                              i * static_cast<int64_t>(v[2])),
                        /*isSigned=*/true);
  ni.results.push_back(ni.constant(DenseElementsAttr::get(type, values)));
  return success();
}

LogicalResult qatc::detail::importSize(NodeImporter &ni) {
  if (failed(requireInputs(ni, 1)))
    return failure();
  auto shape = ni.staticShape(ni.input(0), "input");
  if (failed(shape))
    return failure();
  int64_t count = 1;
  for (int64_t d : *shape)
    count *= d;
  auto type = RankedTensorType::get({}, ni.builder.getI64Type());
  ni.results.push_back(
      ni.constant(DenseElementsAttr::get(type, APInt(64, count))));
  return success();
}

LogicalResult qatc::detail::importUpsample(NodeImporter &ni) {
  // Upsample (opsets 7-9) is Resize with the asymmetric coordinate mapping
  // (and `floor` for nearest): output index i reads input i / scale.
  if (failed(requireInputs(ni, 1)))
    return failure();
  Value x = ni.input(0);
  auto shape = ni.staticShape(x, "input X");
  if (failed(shape))
    return failure();
  SmallVector<double> scales;
  if (ni.opset < 9) {
    auto attr = ni.floatsAttr("scales");
    if (!attr)
      return ni.error() << "Upsample needs scales", failure();
    scales.assign(attr->begin(), attr->end());
  } else {
    auto s = ni.input(1) ? ni.constFloats(ni.input(1)) : std::nullopt;
    if (!s)
      return ni.error() << "input #1 ('scales') of Upsample must be a constant "
                           "float tensor",
             failure();
    scales = *s;
  }
  if (scales.size() != shape->size())
    return ni.error() << "Upsample has " << scales.size()
                      << " scales for an input of rank " << shape->size(),
           failure();
  std::string mode = ni.stringAttr("mode", "nearest");
  if (mode == "bilinear")
    mode = "linear";
  if (mode != "nearest" && mode != "linear")
    return ni.error() << "Upsample mode '" << mode << "' is not supported",
           failure();
  SmallVector<float> fscales;
  SmallVector<int64_t> out;
  for (size_t i = 0; i < scales.size(); ++i) {
    auto s = static_cast<float>(scales[i]);
    if (!(s >= 1))
      return ni.error() << "Upsample scales must be at least 1", failure();
    double size = std::floor(static_cast<double>((*shape)[i]) * s);
    if (size > static_cast<double>(kMaxDimension))
      return ni.error() << "Upsample output dimension " << size
                        << " is too large",
             failure();
    fscales.push_back(s);
    out.push_back(static_cast<int64_t>(size));
  }
  auto results = ni.buildWithTypes(
      "onnx.Resize", {x},
      {ni.named("scales", ni.builder.getDenseF32ArrayAttr(fscales)),
       ni.str("mode", mode),
       ni.str("coordinate_transformation_mode", "asymmetric"),
       ni.str("nearest_mode", "floor")},
      {RankedTensorType::get(out, elementTypeOf(x))});
  if (failed(results))
    return failure();
  ni.results.push_back((*results)[0]);
  return success();
}
