//===- ResampleLowering.cpp - Resize, Pad, Gather, block moves ------------===//
//
// Ops whose result elements are input elements found through a per-axis
// index (Resize nearest, Pad in every mode, Gather with constant indices)
// are one gather nest with an index table per remapped axis
// (emitGatherMap); linear Resize interpolates one axis per layer, as the
// reference evaluator does, with the same taps (ref::resizeTaps). Block
// moves (DepthToSpace, SpaceToDepth, Tile) are strided copies over a
// refined index space, and Expand is a view with zero strides.
//
//===----------------------------------------------------------------------===//

#include "GraphLowering.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace qatc;
using namespace qatc::codegen;

namespace qatc::codegen::lowering {

namespace {

/// A table entry that marks padding (any sum containing it stays negative).
constexpr int64_t kPadEntry = -(int64_t(1) << 40);

/// Reflects or clamps `i` into [0, n) as Pad's edge / reflect modes do;
/// nullopt for constant padding.
std::optional<int64_t> padSource(StringRef mode, int64_t i, int64_t n) {
  if (i >= 0 && i < n)
    return i;
  if (mode == "edge")
    return std::clamp<int64_t>(i, 0, n - 1);
  if (mode == "reflect") {
    if (n == 1)
      return 0;
    int64_t period = 2 * (n - 1);
    int64_t m = ((i % period) + period) % period;
    return m < n ? m : period - m;
  }
  if (mode == "wrap")
    return ((i % n) + n) % n;
  return std::nullopt;
}

} // namespace

LogicalResult GraphLowering::gatherLayer(Operation *op, std::string kernel,
                                         int in,
                                         std::vector<std::vector<int64_t>> idx,
                                         std::optional<double> fill) {
  Value res = op->getResult(0);
  auto shape = cast<RankedTensorType>(res.getType()).getShape();
  int o = resultTensor(res, layoutFor(shape));
  if (tensors[o].int8 != tensors[in].int8)
    return op->emitError("a gather keeps its element type");
  std::vector<int64_t> inStrides = stridesOf(tensors[in]);
  // Tables of element offsets for the remapped axes.
  std::vector<int64_t> tables(shape.size(), -1);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (idx[d].empty())
      continue;
    std::vector<int64_t> offsets;
    for (int64_t i : idx[d])
      offsets.push_back(i < 0 ? kPadEntry : i * inStrides[d]);
    tables[d] = addArray(offsets);
  }
  bool int8 = tensors[o].int8;
  int64_t fillStored = 0;
  if (fill && int8) {
    const CTensor &O = tensors[o];
    fillStored = std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(
                                         static_cast<float>(*fill) / O.scale)) +
                                         O.zp,
                                     O.qmin, O.qmax);
  }
  std::vector<int64_t> loop(shape.begin(), shape.end());
  addLayer(op, kernel, int8 ? "int8" : "fp32", product(loop) > 4096, 0, {in},
           {o}, [=](KB &k) {
             GatherMap m;
             m.shape = loop;
             m.out = operand(Src{o, -1, {}}, loop);
             m.in = operand(Src{in, -1, {}}, loop);
             // The input's own strides (not broadcast over the result).
             m.in.strides = stridesOf(tensors[in]);
             m.tables = tables;
             m.hasFill = fill.has_value();
             m.fill = fill ? static_cast<float>(*fill) : 0.f;
             m.fillStored = fillStored;
             emitGatherMap(k, m);
           });
  return success();
}

LogicalResult GraphLowering::lowerResize(Operation *op, Value inV) {
  ref::ResizeParams p = ref::ResizeParams::of(op);
  auto inShape = cast<ShapedType>(inV.getType()).getShape();
  auto outShape = cast<ShapedType>(op->getResult(0).getType()).getShape();
  ArrayRef<float> scales =
      op->getAttrOfType<DenseF32ArrayAttr>("scales").asArrayRef();
  // The axes that change, as the reference skips the others.
  std::vector<size_t> axes;
  for (size_t d = 0; d < inShape.size(); ++d)
    if (!(inShape[d] == outShape[d] && scales[d] == 1.0f &&
          p.coordinateMode != "tf_half_pixel_for_nn"))
      axes.push_back(d);
  int in = tensorOf(inV);
  if (p.mode == "nearest") {
    std::vector<std::vector<int64_t>> idx(outShape.size());
    for (size_t d : axes)
      idx[d] = ref::resizeTaps(p, inShape[d], outShape[d], scales[d]).index;
    return gatherLayer(op, "resize-nearest", in, idx, std::nullopt);
  }
  if (tensors[in].int8)
    return op->emitError("linear and cubic Resize of int8 data are compiled "
                         "as dequantize, float Resize, quantize");
  if (axes.empty()) {
    valueTensor[op->getResult(0)] = in;
    return success();
  }
  // One layer per axis: out = f32(w0 * x0 + w1 * x1 [+ w2 * x2 + w3 * x3])
  // summed in f64 in tap order, exactly the reference's arithmetic.
  const int nTaps = p.mode == "cubic" ? 4 : 2;
  std::vector<int64_t> cur(inShape.begin(), inShape.end());
  int src = in;
  for (size_t a = 0; a < axes.size(); ++a) {
    size_t d = axes[a];
    ref::ResizeTaps taps =
        ref::resizeTaps(p, inShape[d], outShape[d], scales[d]);
    cur[d] = outShape[d];
    bool last = a + 1 == axes.size();
    int dst =
        last ? resultTensor(op->getResult(0), layoutFor(cur))
             : newTensor(nameOf(op->getResult(0)) + "/axis" + std::to_string(d),
                         cur, false, layoutFor(cur));
    int64_t stride = stridesOf(tensors[src])[d];
    std::vector<int64_t> offsets;
    for (int64_t i : taps.index)
      offsets.push_back(i * stride);
    int64_t tapOff = addArray(offsets), weightOff = addArray(taps.weight);
    std::vector<int64_t> loop = cur;
    addLayer(op, nTaps == 4 ? "resize-cubic" : "resize-linear", "fp32",
             product(loop) > 4096, 0, {src}, {dst}, [=](KB &k) {
               LerpAxis m;
               m.shape = loop;
               m.out = operand(Src{dst, -1, {}}, loop);
               m.in = operand(Src{src, -1, {}}, loop);
               m.in.strides = stridesOf(tensors[src]);
               m.axis = d;
               m.tapOff = tapOff;
               m.weightOff = weightOff;
               m.taps = nTaps;
               OpBuilder &b = k.b;
               emitLerpAxis(k, m, [&](ArrayRef<Value> v) -> Value {
                 Type f64 = b.getF64Type();
                 Value y;
                 for (int t = 0; t < nTaps; ++t) {
                   Value x = b.create<arith::ExtFOp>(k.loc, f64, v[t]);
                   Value term = b.create<arith::MulFOp>(k.loc, v[nTaps + t], x);
                   y = t ? b.create<arith::AddFOp>(k.loc, y, term) : term;
                 }
                 return b.create<arith::TruncFOp>(k.loc, k.f32, y);
               });
             });
    src = dst;
  }
  return success();
}

LogicalResult GraphLowering::lowerPad(Operation *op) {
  ArrayRef<int64_t> pads =
      op->getAttrOfType<DenseI64ArrayAttr>("pads").asArrayRef();
  Value data = op->getOperand(0);
  if (llvm::all_of(pads, [](int64_t p) { return p == 0; })) {
    valueTensor[op->getResult(0)] = tensorOf(data);
    return success();
  }
  auto modeAttr = op->getAttrOfType<StringAttr>("mode");
  StringRef mode = modeAttr ? modeAttr.getValue() : "constant";
  if (mode != "constant" && mode != "edge" && mode != "reflect" &&
      mode != "wrap")
    return op->emitError("Pad mode '") << mode << "' is not supported";
  auto inShape = cast<ShapedType>(data.getType()).getShape();
  auto outShape = cast<ShapedType>(op->getResult(0).getType()).getShape();
  size_t rank = inShape.size();
  std::vector<std::vector<int64_t>> idx(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (pads[d] == 0 && pads[d + rank] == 0)
      continue;
    for (int64_t j = 0; j < outShape[d]; ++j) {
      auto s = padSource(mode, j - pads[d], inShape[d]);
      idx[d].push_back(s ? *s : -1);
    }
  }
  std::optional<double> fill;
  if (mode == "constant") {
    auto v = op->getAttrOfType<FloatAttr>("value");
    fill = v ? v.getValueAsDouble() : 0.0;
  }
  return gatherLayer(op, "pad-" + mode.str(), tensorOf(data), idx, fill);
}

std::optional<LogicalResult>
GraphLowering::tryZeroInsertion(Operation *reshape6) {
  // Reshape [N,C,H,W] -> [N,C,H,1,W,1] -> Pad (s - 1 zeros after each
  // element) -> Reshape [N,C,H s,W s] -> [Pad (the border)]: one gather
  // into the NHWC result, channels innermost.
  auto single = [](Value v) -> Operation * {
    return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
  };
  auto zeroPad = [](Operation *op) {
    if (!isa_and_nonnull<onnx::PadOp, qat::PadOp>(op))
      return false;
    auto mode = op->getAttrOfType<StringAttr>("mode");
    auto value = op->getAttrOfType<FloatAttr>("value");
    return (!mode || mode.getValue() == "constant") &&
           (!value || value.getValueAsDouble() == 0.0);
  };
  Value x = reshape6->getOperand(0);
  auto xs = cast<ShapedType>(x.getType()).getShape();
  auto s6 = cast<ShapedType>(reshape6->getResult(0).getType()).getShape();
  if (xs.size() != 4 || s6.size() != 6 || s6[3] != 1 || s6[5] != 1 ||
      s6[0] != xs[0] || s6[1] != xs[1] || s6[2] != xs[2] || s6[4] != xs[3])
    return std::nullopt;
  Operation *pad6 = single(reshape6->getResult(0));
  if (!zeroPad(pad6))
    return std::nullopt;
  ArrayRef<int64_t> p6 =
      pad6->getAttrOfType<DenseI64ArrayAttr>("pads").asArrayRef();
  for (size_t i = 0; i < 12; ++i)
    if (i != 9 && i != 11 && p6[i] != 0)
      return std::nullopt;
  int64_t sh = p6[9] + 1, sw = p6[11] + 1;
  Operation *reshape4 = single(pad6->getResult(0));
  if (!isa_and_nonnull<onnx::ReshapeOp, qat::ReshapeOp>(reshape4))
    return std::nullopt;
  auto s4 = cast<ShapedType>(reshape4->getResult(0).getType()).getShape();
  if (s4.size() != 4 || s4[2] != xs[2] * sh || s4[3] != xs[3] * sw)
    return std::nullopt;
  Operation *last = reshape4;
  int64_t bh = 0, bw = 0;
  if (Operation *border = single(reshape4->getResult(0)); zeroPad(border)) {
    ArrayRef<int64_t> pb =
        border->getAttrOfType<DenseI64ArrayAttr>("pads").asArrayRef();
    if (pb[0] == 0 && pb[1] == 0 && pb[4] == 0 && pb[5] == 0) {
      bh = pb[2];
      bw = pb[3];
      last = border;
    }
  }
  auto outShape = cast<ShapedType>(last->getResult(0).getType()).getShape();
  std::vector<std::vector<int64_t>> idx(4);
  auto table = [](int64_t outLen, int64_t begin, int64_t s, int64_t inLen) {
    std::vector<int64_t> t;
    for (int64_t y = 0; y < outLen; ++y) {
      int64_t p = y - begin;
      t.push_back(p >= 0 && p % s == 0 && p / s < inLen ? p / s : -1);
    }
    return t;
  };
  idx[2] = table(outShape[2], bh, sh, xs[2]);
  idx[3] = table(outShape[3], bw, sw, xs[3]);
  for (Operation *op : {reshape6, pad6, reshape4, last})
    folded.insert(op);
  return gatherLayer(last, "zero-insert", tensorOf(x), idx, 0.0);
}

namespace {
/// An index loaded from an int32 / int64 tensor, as an i64 made to count
/// from the start of an axis of size `n` when it counts from the end, and
/// whether it is then in [0, n): {index, valid}.
std::pair<Value, Value> indexIn(KB &k, Value loaded, int64_t n) {
  Value idx = loaded;
  if (idx.getType() != k.i64)
    idx = k.b.create<arith::ExtSIOp>(k.loc, k.i64, idx);
  Value negative =
      k.b.create<arith::CmpIOp>(k.loc, arith::CmpIPredicate::slt, idx, k.c(0));
  idx = k.select(negative, k.add(idx, k.c(n)), idx);
  // Unsigned: a still negative index is out of range too.
  return {idx, k.lt(idx, k.c(n))};
}
} // namespace

LogicalResult GraphLowering::lowerGather(Operation *op, Value data,
                                         Value indices, int64_t axis) {
  auto idx = constantOf(indices);
  if (!idx)
    return lowerRowGather(op, data, indices, axis);
  auto dataShape = cast<ShapedType>(data.getType()).getShape();
  if (axis < 0)
    axis += dataShape.size();
  if (idx->rank() > 1) // an index table: the rows' gather reads it
    return lowerRowGather(op, data, indices, axis);
  int in = tensorOf(data);
  std::vector<int64_t> values;
  for (int64_t i = 0; i < idx->numElements(); ++i) {
    int64_t v = intAt(*idx, i);
    values.push_back(v < 0 ? v + dataShape[axis] : v);
  }
  std::vector<int64_t> st = stridesOf(tensors[in]);
  int64_t base = tensors[in].view ? tensors[in].vbase : 0;
  if (idx->rank() == 0) {
    // One index: a view without the axis.
    std::vector<int64_t> strides;
    for (size_t d = 0; d < st.size(); ++d)
      if (static_cast<int64_t>(d) != axis)
        strides.push_back(st[d]);
    makeView(in, op->getResult(0), strides, base + values[0] * st[axis]);
    return success();
  }
  std::vector<std::vector<int64_t>> tables(dataShape.size());
  tables[axis] = values;
  return gatherLayer(op, "gather", in, tables, std::nullopt);
}

LogicalResult GraphLowering::lowerRowGather(Operation *op, Value data,
                                            Value indices, int64_t axis) {
  auto dataType = cast<RankedTensorType>(data.getType());
  auto dataShape = dataType.getShape();
  if (axis < 0)
    axis += dataShape.size();
  bool int8 = isa<quant::QuantizedType>(dataType.getElementType());
  if (!dataType.getElementType().isF32() && !int8)
    return op->emitError("qatc compiles Gather by indices computed at run "
                         "time on f32 or int8 data (an embedding table); "
                         "this data is ")
           << dataType.getElementType();
  if (!isIntegerValue(indices))
    return op->emitError("the indices of Gather must be int32 or int64");
  // out[o, i, r] = data[o, idx[i], r] over the axes before / the indices /
  // the axes after: rows of `inner` contiguous elements.
  int64_t outer = 1, inner = 1, rows = dataShape[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= dataShape[d];
  for (size_t d = axis + 1; d < dataShape.size(); ++d)
    inner *= dataShape[d];
  int64_t n = cast<ShapedType>(indices.getType()).getNumElements();
  int it = inLayout(tensorOf(indices), plan::Layout::Plain, op->getLoc());
  int o = resultTensor(op->getResult(0), plan::Layout::Plain);
  const int64_t es = int8 ? 1 : 4;
  // The table: a constant in the weights blob (int8: its stored bytes),
  // or a plain tensor.
  int dataTensor = -1;
  int64_t tableOff = -1;
  if (auto c = constantOf(data)) {
    if (int8) {
      int64_t stored = tensors[o].desc.storedOffset;
      std::vector<uint8_t> bytes;
      for (float v : floatsOf(*c))
        bytes.push_back(static_cast<uint8_t>(static_cast<int64_t>(v) + stored));
      tableOff = addArray(bytes);
    } else {
      tableOff = srcOf(data).weightOff;
    }
  } else {
    dataTensor = inLayout(tensorOf(data), plan::Layout::Plain, op->getLoc());
  }
  // An index outside [-rows, rows) reads this row (zeros; int8: the zero
  // point): ONNX Runtime refuses such an index, a layer cannot fail and must
  // not read outside the table.
  int64_t padRowOff =
      int8 ? addArray(std::vector<uint8_t>(roundUp(inner, 64),
                                           static_cast<uint8_t>(tensors[o].zp)))
           : addArray(std::vector<float>(roundUp(inner, 16), 0.f));
  std::vector<int> ins = {it};
  if (dataTensor >= 0)
    ins.push_back(dataTensor);
  addLayer(op, "gather-rows", int8 ? "int8" : "fp32",
           outer * n * inner * es > 65536, 0, ins, {o}, [=](KB &k) {
             const CTensor &I = tensors[it];
             bool wide = I.desc.type == plan::ElemType::I64;
             int64_t outOff = tensors[o].desc.offset;
             const int64_t lanes = int8 ? 64 : 16;
             auto vt = VectorType::get({lanes}, int8 ? k.i8 : k.f32);
             Value zero = int8 ? k.splatI(0, lanes, k.i8) : k.splatF(0.f, 16);
             auto [begin, end] = k.share(outer * n);
             k.loop(begin, end, 1, [&](Value r) {
               Value oi = k.div(r, k.c(n));
               Value i = k.rem(r, k.c(n));
               auto [idx, valid] =
                   indexIn(k,
                           k.load(wide ? k.i64 : k.i32,
                                  k.at(I.desc.offset, i, wide ? 8 : 4)),
                           rows);
               Value row =
                   k.add(k.mul(oi, k.c(rows)), k.select(valid, idx, k.c(0)));
               Value first = k.mul(row, k.c(inner));
               Value from =
                   dataTensor >= 0
                       ? k.at(tensors[dataTensor].desc.offset, first, es)
                       : k.weightsAt(tableOff, first, es);
               from = k.select(valid, from, k.gep(k.weights, padRowOff));
               Value to = k.at(outOff, k.mul(r, k.c(inner)), es);
               k.loop(k.c(0), k.c(inner), lanes, [&](Value c0) {
                 Value mask = k.prefixMask(lanes, k.sub(k.c(inner), c0));
                 Value bytes = k.mul(c0, k.c(es));
                 k.maskedStore(k.maskedLoad(vt, k.gep(from, bytes), mask, zero),
                               k.gep(to, bytes), mask);
               });
             });
           });
  return success();
}

/// onnx.GatherElements, by indices known at compile or at run time.
template <> LogicalResult GraphLowering::lower(onnx::GatherElementsOp op) {
  Value data = op.getData(), indices = op.getIndices();
  auto dataShape = cast<ShapedType>(data.getType()).getShape();
  auto idxShape = cast<ShapedType>(indices.getType()).getShape();
  int64_t axis = op.getAxis(), dim = dataShape[axis];
  if (!isIntegerValue(indices))
    return op.emitError("the indices of GatherElements must be int32 or int64");
  // Indices known at compile time go to the weights as int64; others are
  // read from their tensor (int32 or int64).
  int64_t idxOff = -1;
  int it = -1;
  if (auto c = constantOf(indices)) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < c->numElements(); ++i)
      v.push_back(intAt(*c, i));
    idxOff = addArray(v);
  } else {
    it = inLayout(tensorOf(indices), plan::Layout::Plain, op.getLoc());
  }
  int64_t tableOff = -1;
  int dt = -1;
  if (constantOf(data)) {
    if (!getElementTypeOrSelf(data.getType()).isF32())
      return op.emitError("qatc compiles GatherElements from a constant "
                          "table of f32 only; this one is ")
             << data.getType();
    tableOff = srcOf(data).weightOff;
  } else {
    dt = inLayout(tensorOf(data), plan::Layout::Plain, op.getLoc());
  }
  int o = resultTensor(op.getResult(), plan::Layout::Plain);
  const int64_t es =
      dt >= 0 ? static_cast<int64_t>(plan::elemSize(tensors[dt].desc.type)) : 4;
  if (tensors[o].desc.type !=
      (dt >= 0 ? tensors[dt].desc.type : plan::ElemType::F32))
    return op.emitError("qatc cannot compile GatherElements of ")
           << data.getType();
  std::vector<int64_t> dataStrides = rowMajor(dataShape),
                       idxStrides = rowMajor(idxShape);
  int64_t total = product(idxShape);
  std::vector<int> ins;
  if (it >= 0)
    ins.push_back(it);
  if (dt >= 0)
    ins.push_back(dt);
  addLayer(
      op, "gather-elements", "fp32", total > 16384, 0, ins, {o}, [=](KB &k) {
        Type elt = es == 8 ? k.i64 : es == 4 ? k.i32 : k.i8;
        bool wide = it < 0 || tensors[it].desc.type == plan::ElemType::I64;
        auto [begin, end] = k.share(total);
        k.loop(begin, end, 1, [&](Value r) {
          // An element whose index is out of range reads as 0 (a layer
          // cannot fail, and must not read outside the data).
          auto [idx, valid] = indexIn(
              k,
              it >= 0 ? k.load(wide ? k.i64 : k.i32,
                               k.at(tensors[it].desc.offset, r, wide ? 8 : 4))
                      : k.load(k.i64, k.weightsAt(idxOff, r, 8)),
              dim);
          Value from = k.c(0), rest = r;
          for (size_t d = 0; d < idxStrides.size(); ++d) {
            Value c = k.div(rest, k.c(idxStrides[d]));
            rest = k.rem(rest, k.c(idxStrides[d]));
            if (static_cast<int64_t>(d) == axis)
              c = k.select(valid, idx, k.c(0));
            from = k.add(from, k.mul(c, k.c(dataStrides[d])));
          }
          Value v =
              k.load(elt, dt >= 0 ? k.at(tensors[dt].desc.offset, from, es)
                                  : k.weightsAt(tableOff, from, es));
          Value zero =
              k.b.create<arith::ConstantOp>(k.loc, k.b.getIntegerAttr(elt, 0));
          k.store(k.select(valid, v, zero),
                  k.at(tensors[o].desc.offset, r, es));
        });
      });
  return success();
}

LogicalResult GraphLowering::stridedCopyLayer(Operation *op, std::string kernel,
                                              int in, int o,
                                              std::vector<int64_t> loop,
                                              std::vector<int64_t> inStrides,
                                              std::vector<int64_t> outStrides) {
  bool int8 = tensors[o].int8;
  int64_t inBase = tensors[in].view ? tensors[in].vbase : 0;
  addLayer(op, std::move(kernel), int8 ? "int8" : "fp32", product(loop) > 4096,
           0, {in}, {o}, [=](KB &k) {
             StridedMap m;
             m.shape = loop;
             m.out = operand(Src{o, -1, {}}, tensors[o].desc.shape);
             m.out.strides = outStrides;
             m.ins = {operand(Src{in, -1, {}}, tensors[in].desc.shape)};
             m.ins[0].strides = inStrides;
             m.ins[0].offset = inBase;
             emitStridedMap(k, m, nullptr);
           });
  return success();
}

LogicalResult GraphLowering::lowerDepthSpace(Operation *op) {
  Value inV = op->getOperand(0);
  int in = tensorOf(inV);
  Value res = op->getResult(0);
  auto outShape = cast<ShapedType>(res.getType()).getShape();
  auto inShape = cast<ShapedType>(inV.getType()).getShape();
  int o = resultTensor(res, layoutFor(outShape));
  int64_t b = op->getAttrOfType<IntegerAttr>("blocksize").getInt();
  std::vector<int64_t> si = stridesOf(tensors[in]), so = stridesOf(tensors[o]);
  // A loop over (n, c, h, i, w, j) with the strides of both sides.
  std::vector<int64_t> loop, inSt, outSt;
  if (auto d2s = dyn_cast<onnx::DepthToSpaceOp>(op)) {
    int64_t c = outShape[1];
    bool dcr = d2s.getMode() == "DCR";
    loop = {outShape[0], c, inShape[2], b, inShape[3], b};
    outSt = {so[0], so[1], b * so[2], so[2], b * so[3], so[3]};
    // DCR: input channel (i * b + j) * C + c; CRD: c * b * b + i * b + j.
    inSt = {si[0], dcr ? si[1] : b * b * si[1],
            si[2], dcr ? b * c * si[1] : b * si[1],
            si[3], dcr ? c * si[1] : si[1]};
  } else {
    int64_t c = inShape[1];
    // Output channel (i * b + j) * C + c reads input (c, h * b + i, w * b + j).
    loop = {inShape[0], c, outShape[2], b, outShape[3], b};
    inSt = {si[0], si[1], b * si[2], si[2], b * si[3], si[3]};
    outSt = {so[0], so[1], so[2], b * c * so[1], so[3], c * so[1]};
  }
  return stridedCopyLayer(op, "block-move", in, o, loop, inSt, outSt);
}

LogicalResult GraphLowering::lowerTile(onnx::TileOp op) {
  int in = tensorOf(op.getInput());
  auto inShape = cast<ShapedType>(op.getInput().getType()).getShape();
  auto outShape = cast<ShapedType>(op.getType()).getShape();
  int o = resultTensor(op.getResult(), layoutFor(outShape));
  std::vector<int64_t> si = stridesOf(tensors[in]), so = stridesOf(tensors[o]);
  // Output axis d is (repeat r, position i): index r * dim + i.
  std::vector<int64_t> loop, inSt, outSt;
  for (size_t d = 0; d < inShape.size(); ++d) {
    loop.push_back(op.getRepeats()[d]);
    inSt.push_back(0);
    outSt.push_back(inShape[d] * so[d]);
    loop.push_back(inShape[d]);
    inSt.push_back(si[d]);
    outSt.push_back(so[d]);
  }
  return stridedCopyLayer(op, "tile", in, o, loop, inSt, outSt);
}

LogicalResult GraphLowering::lowerExpand(onnx::ExpandOp op) {
  // A view: broadcast axes get stride 0.
  int in = tensorOf(op.getInput());
  auto inShape = cast<ShapedType>(op.getInput().getType()).getShape();
  auto outShape = cast<ShapedType>(op.getType()).getShape();
  std::vector<int64_t> si = stridesOf(tensors[in]);
  std::vector<int64_t> st(outShape.size(), 0);
  size_t lead = outShape.size() - inShape.size();
  for (size_t d = 0; d < inShape.size(); ++d)
    if (inShape[d] != 1)
      st[lead + d] = si[d];
  makeView(in, op.getResult(), st, tensors[in].view ? tensors[in].vbase : 0);
  return success();
}

std::optional<LogicalResult> GraphLowering::lowerResampleFamily(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case<onnx::PadOp, qat::PadOp>([&](Operation *o) { return lowerPad(o); })
      .Case<onnx::ResizeOp>([&](auto o) { return lowerResize(o, o.getX()); })
      .Case<qat::ResizeOp>([&](auto o) { return lowerResize(o, o.getInput()); })
      .Case<onnx::GatherOp>([&](auto o) {
        return lowerGather(o, o.getData(), o.getIndices(), o.getAxis());
      })
      .Case<onnx::GatherElementsOp>([&](auto o) { return lower(o); })
      .Case<qat::GatherOp>([&](auto o) {
        return lowerGather(o, o.getInput(), o.getIndices(), o.getAxis());
      })
      .Case<onnx::DepthToSpaceOp, onnx::SpaceToDepthOp>(
          [&](Operation *o) { return lowerDepthSpace(o); })
      .Case<onnx::TileOp>([&](auto o) { return lowerTile(o); })
      .Case<onnx::ExpandOp>([&](auto o) { return lowerExpand(o); })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace qatc::codegen::lowering
