//===- MapLowering.cpp - elementwise ops, data movement, pools, means -----===//
//
// Everything that is not a convolution or a matrix product: quantize,
// dequantize and elementwise math through the strided loop nests of
// StridedKernels.cpp, views (Transpose, Slice, Reshape), Concat, pooling,
// means, Softmax and LayerNormalization.
//
//===----------------------------------------------------------------------===//

#include "GraphLowering.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/SaveAndRestore.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace qatc;
using namespace qatc::codegen;

namespace qatc::codegen::lowering {

namespace {

/// The first element of row `r` of a tensor seen as rows of `n` elements
/// `inner` apart (a reduction or selection along one axis).
Value rowStart(KB &k, Value r, int64_t n, int64_t inner) {
  return k.add(k.mul(k.div(r, k.c(inner)), k.c(n * inner)),
               k.rem(r, k.c(inner)));
}

} // namespace

LogicalResult GraphLowering::lowerQuantize(qat::QuantizeOp op) {
  if (!qat::getPerTensorType(op.getOutput().getType()))
    return op.emitError("qatc compiles per-tensor activation quantization "
                        "only");
  return lowerUnary(
      op, "quantize", [](KB &, ArrayRef<Value> v) { return v[0]; },
      /*lanes=*/true);
}

LogicalResult GraphLowering::lowerDequantize(qat::DequantizeOp op) {
  if (!qat::getPerTensorType(op.getInput().getType()))
    return op.emitError("qatc compiles per-tensor dequantization only");
  return lowerUnary(
      op, "dequantize", [](KB &, ArrayRef<Value> v) { return v[0]; },
      /*lanes=*/true);
}

LogicalResult GraphLowering::lowerRequantize(qat::RequantizeOp op) {
  if (!qat::getPerTensorType(op.getInput().getType()) ||
      !qat::getPerTensorType(op.getOutput().getType()))
    return op.emitError("qatc compiles per-tensor requantization only");
  // lowerMap dequantizes the input ((q - z1) * s1) and quantizes the result
  // (/ s2, round half to even, + z2): QuantizeLinear(DequantizeLinear(q)).
  return lowerUnary(
      op, "requantize", [](KB &, ArrayRef<Value> v) { return v[0]; },
      /*lanes=*/true);
}

LogicalResult GraphLowering::lowerMap(Operation *op, std::vector<Src> ins,
                                      std::string kernel, ScalarFn fn,
                                      Value res, std::optional<Location> loc,
                                      bool lanes) {
  if (!res)
    res = op->getResult(0);
  Location at = loc ? *loc : op->getLoc();
  // Float bodies: integer tensors (indices) go through lowerIntMap.
  bool intData = isIntegerValue(res);
  for (const Src &s : ins)
    intData |= s.tensor >= 0 && tensors[s.tensor].isInt();
  if (intData)
    return op->emitError("qatc compiles ")
           << op->getName().stripDialect()
           << " on f32 and int8 data; this one computes on integers";
  auto shape = cast<RankedTensorType>(res.getType()).getShape();
  // A rank-4 map over plain tensors of its own shape, read only by matrix
  // products (which read plain rows), writes plain data: attention's
  // softmax [1, heads, seq, seq] quantized to NHWC was a transpose there and
  // another back for the product. (A quantized NCHW image stays the NHWC
  // write its convolution reads.)
  plan::Layout layout = layoutFor(shape);
  bool plainIns = false;
  for (const Src &s : ins) {
    if (s.tensor < 0 || llvm::ArrayRef(tensors[s.tensor].desc.shape) != shape)
      continue;
    plainIns = tensors[s.tensor].desc.layout == plan::Layout::Plain;
    if (!plainIns)
      break;
  }
  bool products = !res.use_empty() && llvm::all_of(res.getUsers(), [](auto *u) {
    return isa<qat::MatMulOp, onnx::MatMulOp, onnx::GemmOp>(u);
  });
  if (plainIns && products && shape.size() == 4)
    layout = plan::Layout::Plain;
  int o = resultTensor(res, layout);
  std::optional<std::pair<float, float>> act;
  if (!tensors[o].int8)
    act = foldActivation(res, o);
  std::vector<int> reads;
  bool int8 = tensors[o].int8;
  for (const Src &s : ins)
    if (s.tensor >= 0) {
      reads.push_back(s.tensor);
      int8 |= tensors[s.tensor].int8;
    }
  std::vector<int64_t> loop(shape.begin(), shape.end());
  // One result from the loaded inputs: the layer's, and an input map's
  // (noteInputMap) where a convolution takes the map.
  ScalarFn element = [this, ins, o, fn, act](KB &k,
                                             ArrayRef<Value> v) -> Value {
    SmallVector<Value> f;
    for (size_t i = 0; i < ins.size(); ++i) {
      const Src &s = ins[i];
      f.push_back(s.tensor >= 0 && tensors[s.tensor].int8
                      ? k.dequantize(v[i], tensors[s.tensor].zp,
                                     tensors[s.tensor].scale)
                      : v[i]);
    }
    Value y = fn(k, f);
    if (act) {
      if (!std::isinf(act->first))
        y = k.b.create<arith::MaximumFOp>(k.loc, y,
                                          k.floatLike(y.getType(), act->first));
      if (!std::isinf(act->second))
        y = k.b.create<arith::MinimumFOp>(
            k.loc, y, k.floatLike(y.getType(), act->second));
    }
    const CTensor &O = tensors[o];
    return O.int8 ? k.quantize(y, O.scale, O.zp, O.qmin, O.qmax) : y;
  };
  addLayer(at, nodeName(at), opTypeOf(at, op), kernel, int8 ? "int8" : "fp32",
           product(loop) > 4096, 0, reads, {o}, [=](KB &k) {
             StridedMap m;
             m.shape = loop;
             m.out = operand(Src{o, -1, {}}, loop);
             m.lanes = lanes;
             for (const Src &s : ins)
               m.ins.push_back(operand(s, loop));
             emitStridedMap(k, m, [&](ArrayRef<Value> v) -> Value {
               return element(k, v);
             });
           });
  if (lanes)
    noteInputMap(res, o, ins, loop, element);
  return success();
}

void GraphLowering::noteInputMap(Value res, int o, const std::vector<Src> &ins,
                                 const std::vector<int64_t> &loop,
                                 const ScalarFn &element) {
  // A quantized NHWC map (of a body taking 16-lane vectors) read by one
  // int8 convolution as its input, from f32 tensors or constants whose
  // channels are contiguous (or broadcast over pixels, as a
  // squeeze-excitation gate is): denseConv may run it inside the
  // convolution's layer. It maps a pixel's channels 16 at a time, so not
  // under 16 channels: a quantized image's 3 planes take the layer's byte
  // stores, 16 pixels at a time (emitLaneMap).
  const CTensor &O = tensors[o];
  if (!O.int8 || O.desc.layout != plan::Layout::NHWC || loop.size() != 4 ||
      loop[1] < 16 || !res.hasOneUse())
    return;
  auto conv = dyn_cast<qat::ConvOp>(*res.getUsers().begin());
  if (!conv || conv.getInput() != res)
    return;
  std::vector<int> reads;
  for (const Src &s : ins) {
    if (s.isInt || (s.tensor >= 0 &&
                    (tensors[s.tensor].int8 || tensors[s.tensor].isInt() ||
                     tensors[s.tensor].desc.type != plan::ElemType::F32)))
      return;
    if (s.tensor >= 0)
      reads.push_back(s.tensor);
  }
  auto channelsContiguous = [&](const Src &s) {
    StridedOperand x = operand(s, loop);
    return x.strides[1] == 1;
  };
  if (!channelsContiguous(Src{o, -1, {}, false}) ||
      !llvm::all_of(ins, channelsContiguous))
    return;
  InputMap g;
  g.layer = static_cast<int>(layers.size()) - 1;
  g.consumer = conv;
  g.reads = std::move(reads);
  // Pixels [p0, p1) of the map, every channel, as the layer computes them
  // (`element`).
  g.emitPixels = [this, o, ins, loop, element](KB &k, Value p0, Value p1) {
    const int64_t C = loop[1], H = loop[2], W = loop[3];
    std::vector<StridedOperand> xs;
    for (const Src &s : ins)
      xs.push_back(operand(s, loop));
    StridedOperand out = operand(Src{o, -1, {}, false}, loop);
    auto v16f32 = VectorType::get({16}, k.f32);
    k.loop(p0, p1, 1, [&](Value p) {
      Value w = k.rem(p, k.c(W)), rest = k.div(p, k.c(W));
      Value h = k.rem(rest, k.c(H)), n = k.div(rest, k.c(H));
      // An operand's element at channel 0 of pixel p.
      auto pixelAt = [&](const StridedOperand &x) {
        return k.add(
            k.add(k.c(x.offset), k.mul(n, k.c(x.strides[0]))),
            k.add(k.mul(h, k.c(x.strides[2])), k.mul(w, k.c(x.strides[3]))));
      };
      SmallVector<Value> at;
      for (const StridedOperand &x : xs)
        at.push_back(pixelAt(x));
      Value outAt = pixelAt(out);
      // The `lanes` channels from channel c.
      auto channels = [&](Value c, int64_t lanes) {
        Value mask = lanes < 16 ? k.prefixMask(16, k.c(lanes)) : Value();
        SmallVector<Value> v;
        for (size_t i = 0; i < xs.size(); ++i) {
          Value index = k.add(at[i], c);
          Value ptr = xs[i].inWeights ? k.weightsAt(xs[i].byteOffset, index, 4)
                                      : k.at(xs[i].byteOffset, index, 4);
          v.push_back(mask ? k.maskedLoad(v16f32, ptr, mask, k.splatF(0.f, 16))
                           : k.load(v16f32, ptr));
        }
        Value q = element(k, v);
        Value dst = k.at(out.byteOffset, k.add(outAt, c), 1);
        if (mask)
          k.maskedStore(q, dst, mask);
        else
          k.store(q, dst);
      };
      if (C >= 16)
        k.loop(k.c(0), k.c(C / 16 * 16), 16, [&](Value c) { channels(c, 16); });
      if (C % 16)
        channels(k.c(C / 16 * 16), C % 16);
    });
  };
  inputMaps[o] = std::move(g);
}

LogicalResult GraphLowering::lowerIntMap(Operation *op, std::vector<Src> ins,
                                         std::string kernel, ScalarFn fn) {
  Value res = op->getResult(0);
  auto shape = cast<RankedTensorType>(res.getType()).getShape();
  int o = resultTensor(res, plan::Layout::Plain);
  std::vector<int> reads;
  for (const Src &s : ins)
    if (s.tensor >= 0) {
      if (tensors[s.tensor].int8)
        return op->emitError("qatc compiles integer arithmetic on int32 / "
                             "int64 data only");
      reads.push_back(s.tensor);
    }
  std::vector<int64_t> loop(shape.begin(), shape.end());
  Type resultElt = getElementTypeOrSelf(res.getType());
  addLayer(op, kernel, "int", product(loop) > 4096, 0, reads, {o}, [=](KB &k) {
    StridedMap m;
    m.shape = loop;
    m.out = operand(Src{o, -1, {}}, loop);
    for (const Src &s : ins)
      m.ins.push_back(operand(s, loop));
    const CTensor &O = tensors[o];
    OpBuilder &b = k.b;
    emitStridedMap(k, m, [&](ArrayRef<Value> v) -> Value {
      // Integers as int64, floats as they are.
      SmallVector<Value> w;
      for (Value x : v)
        w.push_back(x.getType() == k.i32
                        ? b.create<arith::ExtSIOp>(k.loc, k.i64, x)
                        : x);
      Value y = fn(k, w);
      // A narrower integer type wraps after every op (ONNX arithmetic).
      if (y.getType() == k.i64)
        y = wrapToType(k, y, resultElt);
      if (O.isInt() && O.desc.type == plan::ElemType::I32 &&
          y.getType() == k.i64)
        y = b.create<arith::TruncIOp>(k.loc, k.i32, y);
      return y;
    });
  });
  return success();
}

LogicalResult GraphLowering::lowerTopK(onnx::TopKOp op) {
  auto shape = cast<ShapedType>(op.getX().getType()).getShape();
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0)
    axis += shape.size();
  int64_t k = static_cast<int64_t>(op.getK());
  bool largest = op.getLargest() != 0;
  int in = inLayout(tensorOf(op.getX()), plan::Layout::Plain, op.getLoc());
  if (tensors[in].int8 || tensors[in].isInt())
    return op.emitError("qatc compiles TopK of f32 data only");
  int ov = resultTensor(op.getValues(), plan::Layout::Plain);
  int oi = resultTensor(op.getIndices(), plan::Layout::Plain);
  int64_t n = shape[axis], inner = product(shape.drop_front(axis + 1)),
          rows = product(shape) / n;
  if (k == 0)
    return success();
  // Per row, the k best so far, sorted: each element bubbles into place
  // when it beats the last. Indices start at -1 (empty). Ties keep the lower
  // index first, as ONNX requires.
  addLayer(
      op, largest ? "topk" : "bottomk", "fp32", rows >= 8, 0, {in}, {ov, oi},
      [=](KB &kb) {
        OpBuilder &b = kb.b;
        int64_t xo = tensors[in].desc.offset, vo = tensors[ov].desc.offset,
                io = tensors[oi].desc.offset;
        auto [b0, e0] = kb.share(rows);
        kb.loop(b0, e0, 1, [&](Value r) {
          Value xbase = rowStart(kb, r, n, inner);
          Value ybase = rowStart(kb, r, k, inner);
          auto slot = [&](int64_t off, Value j, int64_t bytes) {
            return kb.at(off, kb.add(ybase, kb.mul(j, kb.c(inner))), bytes);
          };
          kb.loop(kb.c(0), kb.c(k), 1, [&](Value j) {
            kb.store(kb.c(-1), slot(io, j, 8));
            kb.store(kb.cf(0.f), slot(vo, j, 4));
          });
          auto beats = [&](Value x, Value v, Value idx) {
            Value empty = b.create<arith::CmpIOp>(
                kb.loc, arith::CmpIPredicate::slt, idx, kb.c(0));
            Value better = b.create<arith::CmpFOp>(
                kb.loc,
                largest ? arith::CmpFPredicate::OGT : arith::CmpFPredicate::OLT,
                x, v);
            return b.create<arith::OrIOp>(kb.loc, empty, better).getResult();
          };
          kb.loop(kb.c(0), kb.c(n), 1, [&](Value e) {
            Value x = kb.load(
                kb.f32, kb.at(xo, kb.add(xbase, kb.mul(e, kb.c(inner))), 4));
            Value lastV = kb.load(kb.f32, slot(vo, kb.c(k - 1), 4));
            Value lastI = kb.load(kb.i64, slot(io, kb.c(k - 1), 8));
            auto ifOp = b.create<scf::IfOp>(kb.loc, beats(x, lastV, lastI),
                                            /*withElse=*/false);
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToStart(&ifOp.getThenRegion().front());
            kb.loop(
                kb.c(0), kb.c(k), 1, ValueRange{x, e},
                [&](Value j, ValueRange c) -> SmallVector<Value> {
                  Value vp = slot(vo, j, 4), ip = slot(io, j, 8);
                  Value v = kb.load(kb.f32, vp), idx = kb.load(kb.i64, ip);
                  Value swap = beats(c[0], v, idx);
                  kb.store(kb.select(swap, c[0], v), vp);
                  kb.store(kb.select(swap, c[1], idx), ip);
                  return {kb.select(swap, v, c[0]), kb.select(swap, idx, c[1])};
                });
          });
        });
      });
  return success();
}

LogicalResult GraphLowering::lowerTranspose(Operation *op, Value inV,
                                            ArrayRef<int64_t> perm) {
  int in = tensorOf(inV);
  std::vector<int64_t> st = stridesOf(tensors[in]), out(perm.size());
  for (size_t d = 0; d < perm.size(); ++d)
    out[d] = st[perm[d]];
  makeView(in, op->getResult(0), out, tensors[in].view ? tensors[in].vbase : 0);
  return success();
}

LogicalResult GraphLowering::lowerSlice(Operation *op, Value inV,
                                        ArrayRef<int64_t> starts,
                                        ArrayRef<int64_t> steps) {
  int in = tensorOf(inV);
  std::vector<int64_t> st = stridesOf(tensors[in]);
  if (starts.size() != st.size() || steps.size() != st.size())
    return op->emitError("a slice needs bounds for every axis");
  int64_t base = tensors[in].view ? tensors[in].vbase : 0;
  for (size_t d = 0; d < st.size(); ++d) {
    base += starts[d] * st[d];
    st[d] *= steps[d];
  }
  makeView(in, op->getResult(0), st, base);
  return success();
}

namespace {

/// A Concat along the channels of rank-4 data.
bool isChannelConcat(Operation *op) {
  if (!op || !isa<onnx::ConcatOp, qat::ConcatOp>(op))
    return false;
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  int64_t axis = cast<IntegerAttr>(op->getAttr("axis")).getInt();
  return type.getRank() == 4 && (axis == 1 || axis == -3);
}

} // namespace

void GraphLowering::planConcatSlices() {
  // A candidate is a channel Concat of f32 data, or of int8 data whose
  // inputs share the result's quantization and have channels in multiples of
  // 4 (each input's stored channels are then its channels). Every input is
  // the result of a layer (no graph input or constant) and feeds only
  // candidates, so no other reader sees it with the buffer's wide channel
  // stride; a Concat result feeding a Concat stays a copy.
  llvm::SetVector<Operation *> candidates;
  for (Operation &op : func.getBody().front()) {
    if (!isChannelConcat(&op))
      continue;
    Type elt = getElementTypeOrSelf(op.getResult(0).getType());
    bool ok = elt.isF32() || isa<quant::UniformQuantizedType>(elt);
    for (Value v : op.getOperands()) {
      Operation *def = v.getDefiningOp();
      ok = ok && def && !constantOf(v) && !isChannelConcat(def) &&
           getElementTypeOrSelf(v.getType()) == elt &&
           (elt.isF32() || shapeOf(v)[1] % 4 == 0);
    }
    if (ok)
      candidates.insert(&op);
  }
  // Grouping: every input has one channel offset in its buffer. Concats
  // sharing an input share a buffer, shifted to agree on that input (a
  // DenseNet block's Concats are prefixes of its last one). An input that
  // feeds a non-candidate, or whose offsets disagree or overlap another's,
  // takes its Concats out; repeat until nothing changes.
  while (true) {
    llvm::DenseMap<Value, std::pair<int, int64_t>> at; // group, offset
    llvm::DenseMap<Operation *, int> groupOf; // each Concat's first group
    std::vector<int> parent;
    auto find = [&](int g) {
      while (parent[g] != g)
        g = parent[g];
      return g;
    };
    std::vector<int64_t> shift; // offset of group g in its root
    auto shiftOf = [&](int g) {
      int64_t s = 0;
      for (; parent[g] != g; g = parent[g])
        s += shift[g];
      return s;
    };
    llvm::SetVector<Operation *> drop;
    for (Operation *op : candidates) {
      int g = parent.size();
      parent.push_back(g);
      shift.push_back(0);
      groupOf[op] = g;
      int64_t off = 0;
      for (Value v : op->getOperands()) {
        bool onlyCandidates = llvm::all_of(
            v.getUsers(), [&](Operation *u) { return candidates.contains(u); });
        if (!onlyCandidates)
          drop.insert(op);
        auto [it, fresh] = at.try_emplace(v, g, off);
        if (!fresh) {
          int h = find(it->second.first), r = find(g);
          int64_t want = shiftOf(it->second.first) + it->second.second,
                  have = shiftOf(g) + off;
          if (h != r) {
            // Hang group r under h, shifted so that v's offsets agree.
            parent[r] = h;
            shift[r] = want - have;
          } else if (want != have) {
            drop.insert(op);
          }
        }
        off += shapeOf(v)[1];
      }
    }
    // Channel ranges per buffer: no two values overlap.
    std::map<int, std::vector<std::pair<int64_t, int64_t>>> ranges;
    for (auto &[v, gOff] : at) {
      int64_t lo = shiftOf(gOff.first) + gOff.second;
      ranges[find(gOff.first)].push_back({lo, lo + shapeOf(v)[1]});
    }
    for (auto &[root, rs] : ranges) {
      llvm::sort(rs);
      for (size_t i = 1; i < rs.size(); ++i)
        if (rs[i].first < rs[i - 1].second) {
          // Overlapping inputs: the buffer is dropped whole.
          for (Operation *op : candidates)
            if (find(groupOf[op]) == root)
              drop.insert(op);
          break;
        }
    }
    if (!drop.empty()) {
      for (Operation *op : drop)
        candidates.remove(op);
      continue;
    }
    // Buffers from 0: the ranges are sorted and apart, so a buffer spans
    // its first range's start to its last one's end.
    std::map<int, int> buffer;
    std::map<int, int64_t> lowest;
    for (auto &[root, rs] : ranges) {
      buffer[root] = concatBuffers.size();
      lowest[root] = rs.front().first;
      concatBuffers.push_back({rs.back().second - rs.front().first, -1});
    }
    for (auto &[v, gOff] : at) {
      int root = find(gOff.first);
      slices[v] = {buffer[root],
                   shiftOf(gOff.first) + gOff.second - lowest[root]};
    }
    for (Operation *op : candidates) {
      // A copy: inserting the result may move the map's entries.
      std::pair<int, int64_t> first = slices.lookup(op->getOperand(0));
      slices[op->getResult(0)] = first;
    }
    return;
  }
}

int GraphLowering::sliceTensor(Value res, plan::Layout layout) {
  auto [b, channel] = slices.lookup(res);
  auto type = cast<RankedTensorType>(res.getType());
  bool int8 = isa<quant::QuantizedType>(type.getElementType());
  int t = newTensor(nameOf(res), type.getShape(), int8, layout,
                    int8 ? type : Type());
  valueTensor[res] = t;
  ConcatBuffer &buf = concatBuffers[b];
  CTensor &c = tensors[t];
  int64_t es = int8 ? 1 : 4;
  if (buf.storage < 0) {
    // One pixel of slack: the runtime's checks see a slice as the rows of
    // its channel stride from its first channel.
    Storage s;
    s.bytes = roundUp((c.pixels() + 1) * buf.channels * es, 64);
    buf.storage = storages.size();
    storages.push_back(s);
  }
  c.storage = buf.storage;
  c.storageOffset = channel * es;
  c.desc.channelStride = buf.channels;
  out.manifest.tensors[c.manifestIndex].channelStride = buf.channels;
  return t;
}

LogicalResult GraphLowering::lowerConcat(Operation *op, ValueRange ins,
                                         int64_t axis) {
  Value res = op->getResult(0);
  auto shape = cast<RankedTensorType>(res.getType()).getShape();
  if (axis < 0)
    axis += shape.size();
  int o = resultTensor(res, layoutFor(shape));
  std::vector<int> parts;
  for (Value v : ins)
    parts.push_back(tensorOf(v));
  for (int p : parts)
    if (tensors[p].int8 != tensors[o].int8)
      return op->emitError("qatc compiles a concatenation of int8 inputs to "
                           "an int8 result, or of f32 inputs to f32");
  // Inputs already in their place of the result (planConcatSlices) need no
  // copy; when all are, the Concat is no layer at all.
  std::vector<std::pair<int, int64_t>> copies; // input, first index on axis
  int64_t start = 0;
  for (int p : parts) {
    const CTensor &P = tensors[p], &O = tensors[o];
    int64_t es = O.int8 ? 1 : 4;
    bool inPlace = axis == 1 && P.storage == O.storage && !P.view && !P.flat &&
                   P.desc.layout == O.desc.layout &&
                   P.desc.channelStride == O.desc.channelStride &&
                   P.storageOffset == O.storageOffset + start * es &&
                   P.zp == O.zp && P.scale == O.scale;
    if (!inPlace)
      copies.push_back({p, start});
    start += P.desc.shape[axis];
  }
  if (copies.empty()) {
    // The result is complete after the last layer writing an input: it is
    // one of that layer's outputs too, so `qatc run --dump-tensors` still
    // writes it (as `qatc eval` does).
    for (size_t l = layers.size(); l-- > 0;) {
      std::vector<int> &outs = layers[l].desc.outputs;
      bool writes = llvm::any_of(parts, [&](int p) {
        return llvm::is_contained(outs, tensors[p].manifestIndex);
      });
      if (writes) {
        outs.push_back(tensors[o].manifestIndex);
        break;
      }
    }
    return success();
  }
  std::vector<int> copied;
  for (auto [p, first] : copies)
    copied.push_back(p);
  addLayer(op, "concat", tensors[o].int8 ? "int8" : "fp32",
           product(shape) > 4096, 0, copied, {o}, [=](KB &k) {
             const CTensor &O = tensors[o];
             for (auto [p, first] : copies) {
               const CTensor &P = tensors[p];
               StridedMap m;
               m.shape = P.desc.shape;
               m.out = operand(Src{o, -1, {}}, m.shape);
               m.out.offset += first * stridesOf(O)[axis];
               m.ins = {operand(Src{p, -1, {}}, m.shape)};
               bool same = !O.int8 || (P.zp == O.zp && P.scale == O.scale);
               // Inputs with other quantization parameters are requantized.
               emitStridedMap(k, m,
                              same ? ElementFn()
                                   : ElementFn([&](ArrayRef<Value> v) -> Value {
                                       return k.quantize(
                                           k.dequantize(v[0], P.zp, P.scale),
                                           O.scale, O.zp, O.qmin, O.qmax);
                                     }));
             }
           });
  return success();
}

LogicalResult GraphLowering::lowerBatchNorm(onnx::BatchNormalizationOp op) {
  auto shape = cast<ShapedType>(op.getX().getType()).getShape();
  if (shape.size() < 2)
    return op.emitError("BatchNormalization needs a channel axis");
  std::vector<std::optional<ref::Tensor>> c = {
      constantOf(op.getScale()), constantOf(op.getB()),
      constantOf(op.getInputMean()), constantOf(op.getInputVar())};
  if (llvm::any_of(c, [](auto &t) { return !t; }))
    return op.emitError("qatc compiles BatchNormalization with constant "
                        "parameters only");
  int64_t C = shape[1];
  std::vector<float> scale = floatsOf(*c[0]), bias = floatsOf(*c[1]),
                     mean = floatsOf(*c[2]), var = floatsOf(*c[3]);
  // As the reference: (x - mean) / sqrt(var + eps) * scale + bias, in f32.
  std::vector<float> denom(C);
  float eps = op.getEpsilon().convertToFloat();
  for (int64_t i = 0; i < C; ++i)
    denom[i] = std::sqrt(var[i] + eps);
  std::vector<int64_t> cshape(shape.size() - 1, 1);
  cshape[0] = C;
  auto channel = [&](const std::vector<float> &v) {
    return Src{-1, addArray(v), cshape};
  };
  // A chain after it with scalar operands only (Relu, Clip, the next
  // QuantizeLinear: DenseNet's norm1 -> relu1 -> conv1's input quantizer)
  // runs in the same layer, so the f32 result never goes to memory.
  std::shared_ptr<ChainProgram> chain;
  Value exit;
  SmallVector<Location> locs = {op.getLoc()};
  if (std::optional<Chain> c = matchChain(op.getResult(), nullptr, 1)) {
    bool scalarsOnly = llvm::all_of(c->ops, [&](Operation *u) {
      return llvm::all_of(u->getOperands(), [&](Value x) {
        auto cst = constantOf(x);
        return !cst || cst->numElements() == 1;
      });
    });
    if (scalarsOnly) {
      chain = std::make_shared<ChainProgram>(
          chainProgram(*c, op.getResult(), 1, nullptr));
      for (Operation *f : c->ops) {
        folded.insert(f);
        locs.push_back(f->getLoc());
      }
      exit = c->exit;
    }
  }
  return lowerMap(
      op,
      {srcOf(op.getX()), channel(mean), channel(denom), channel(scale),
       channel(bias)},
      chain ? "batchnorm+" + chain->name : "batchnorm",
      [chain](KB &k, ArrayRef<Value> v) -> Value {
        OpBuilder &b = k.b;
        Value y = b.create<arith::SubFOp>(k.loc, v[0], v[1]);
        y = b.create<arith::DivFOp>(k.loc, y, v[2]);
        y = b.create<arith::MulFOp>(k.loc, y, v[3]);
        y = b.create<arith::AddFOp>(k.loc, y, v[4]);
        return chain ? chain->run(k, {y}, [](int64_t) { return Value(); }) : y;
      },
      exit,
      chain ? std::optional<Location>(FusedLoc::get(op.getContext(), locs))
            : std::nullopt,
      /*lanes=*/true);
}

LogicalResult GraphLowering::lowerMean(Operation *op, Value inV,
                                       ArrayRef<int64_t> axesIn) {
  return lowerReduce(op, inV, axesIn, ReduceKind::Mean);
}

LogicalResult GraphLowering::lowerReduce(Operation *op, Value inV,
                                         ArrayRef<int64_t> axesIn,
                                         ReduceKind kind) {
  int in = tensorOf(inV);
  Value res = op->getResult(0);
  auto outShape = cast<ShapedType>(res.getType()).getShape();
  std::vector<int64_t> inShape = tensors[in].desc.shape;
  // No axes: ReduceMean over everything.
  std::vector<bool> reduced(inShape.size(), axesIn.empty());
  for (int64_t a : axesIn)
    reduced[a < 0 ? a + inShape.size() : a] = true;
  // The loop runs over the input shape with reduced axes of size 1 (the
  // keepdims shape); the result's strides skip them.
  int o = resultTensor(res, layoutFor(outShape));
  std::vector<int64_t> loop, reduceShape;
  for (size_t d = 0; d < inShape.size(); ++d) {
    loop.push_back(reduced[d] ? 1 : inShape[d]);
    if (reduced[d])
      reduceShape.push_back(inShape[d]);
  }
  int64_t count = product(reduceShape);
  // int8 sums of (q - z) are exact in the f32 accumulator below 2^24.
  if (tensors[in].int8 && count * 255 >= (int64_t(1) << 24))
    return op->emitError("qatc compiles int8 means over at most 65793 "
                         "elements; this one averages ")
           << count;
  bool int8In = tensors[in].int8;
  if (int8In && kind != ReduceKind::Mean)
    return op->emitError("qatc compiles int8 means only; this reduction "
                         "reads int8 data");
  static const char *const names[] = {"mean", "sum", "max", "min",
                                      "prod", "l1",  "l2",  "sumsquare"};
  std::string kernel =
      std::string(int8In ? "int8-" : "fp32-") + names[static_cast<int>(kind)];
  float init = kind == ReduceKind::Max ? -std::numeric_limits<float>::infinity()
               : kind == ReduceKind::Min
                   ? std::numeric_limits<float>::infinity()
               : kind == ReduceKind::Prod ? 1.f
                                          : 0.f;
  // The reduction's step and its last step (scalars, or 16 results at once:
  // emitStridedReduce), for the kernels below.
  auto combineFn = [this, in, kind](KB &k) -> ElementFn {
    return [this, in, kind, &k](ArrayRef<Value> v) -> Value {
      OpBuilder &b = k.b;
      const CTensor &X = tensors[in];
      Value x = v[1];
      if (X.int8) {
        // (q - z) summed exactly: integers below 2^24.
        Value i =
            b.create<arith::ExtUIOp>(k.loc, k.like(x.getType(), k.i32), x);
        i = b.create<arith::SubIOp>(k.loc, i, k.intLike(i.getType(), X.zp));
        x = b.create<arith::SIToFPOp>(k.loc, v[0].getType(), i);
      }
      switch (kind) {
      case ReduceKind::Max:
        return b.create<arith::MaximumFOp>(k.loc, v[0], x);
      case ReduceKind::Min:
        return b.create<arith::MinimumFOp>(k.loc, v[0], x);
      case ReduceKind::Prod:
        return b.create<arith::MulFOp>(k.loc, v[0], x);
      case ReduceKind::L1:
        x = b.create<math::AbsFOp>(k.loc, x);
        break;
      case ReduceKind::L2:
      case ReduceKind::SumSquare:
        x = b.create<arith::MulFOp>(k.loc, x, x);
        break;
      default:
        break;
      }
      return b.create<arith::AddFOp>(k.loc, v[0], x);
    };
  };
  auto finishFn = [this, in, o, kind, count](KB &k) -> ElementFn {
    return [this, in, o, kind, count, &k](ArrayRef<Value> v) -> Value {
      OpBuilder &b = k.b;
      const CTensor &X = tensors[in], &O = tensors[o];
      if (!X.int8 && kind == ReduceKind::L2)
        return b.create<math::SqrtOp>(k.loc, v[0]);
      if (!X.int8 && kind != ReduceKind::Mean)
        return v[0];
      Type t = v[0].getType();
      if (!X.int8)
        return b.create<arith::DivFOp>(k.loc, v[0],
                                       k.floatLike(t, float(count)));
      // As the reference: the mean in double, times the scale.
      Type t64 = k.like(t, b.getF64Type());
      Value m = b.create<arith::ExtFOp>(k.loc, t64, v[0]);
      m = b.create<arith::DivFOp>(k.loc, m, k.doubleLike(t64, double(count)));
      m = b.create<arith::MulFOp>(k.loc, m, k.doubleLike(t64, X.desc.scale));
      Value y = b.create<arith::TruncFOp>(k.loc, t, m);
      return O.int8 ? k.quantize(y, O.scale, O.zp, O.qmin, O.qmax) : y;
    };
  };
  // The result over the keepdims loop: its own strides in order.
  auto resultOperand = [this, o, outShape = std::vector<int64_t>(outShape),
                        loop, reduced]() {
    std::vector<int64_t> ost = stridesOf(tensors[o]);
    StridedOperand r = operand(Src{o, -1, {}}, outShape);
    r.strides.assign(loop.size(), 0);
    for (size_t d = 0, j = 0; d < loop.size(); ++d) {
      if (outShape.size() == loop.size())
        r.strides[d] = loop[d] == 1 ? 0 : ost[d];
      else if (!reduced[d])
        r.strides[d] = ost[j++];
    }
    return r;
  };
  std::string precision = int8In ? "int8" : "fp32";
  // The mean over the pixels of a large NHWC map (GlobalAveragePool) in two
  // layers: the threads sum fixed parts of the rows, the rows the
  // producer's threads wrote, so each core reads what is in its own cache
  // (split by channels, a core read the other's half: 2x slower on 2 threads
  // than on 1); then one thread adds the parts. The parts do not depend on
  // the thread count: any count gives the same bits. int8 sums stay exact.
  // An odd pixel count (a 7x7 or 13x13 map) takes a part per row: split by
  // channels, each core read the rows the other wrote, and the producer's
  // next write to them waited for the lines to come back. (One row, or a
  // sum over many parts, stays one layer.)
  //
  // Where a depthwise layer wrote the map (squeeze-excitation), it sums each
  // band's pixels as it stores them (DepthwiseSpec::sumsOff), and only the
  // second layer remains: one layer and one pass over the map fewer.
  const CTensor &X0 = tensors[in];
  int64_t parts = 0;
  int sums = -1;
  bool overPixels = inShape.size() == 4 && !reduced[0] && !reduced[1] &&
                    reduced[2] && reduced[3];
  auto rowSums = rowSumsOf.find(in);
  if (kind == ReduceKind::Mean && overPixels && rowSums != rowSumsOf.end() &&
      *rowSums->second.sums < 0) {
    const RowSums &r = rowSums->second;
    parts = r.parts;
    sums = newTensor(nameOf(res) + " (row sums)",
                     {parts, inShape[0], roundUp(inShape[1], 16)},
                     /*int8=*/false, plan::Layout::Plain);
    *r.sums = sums;
    Layer &producer = layers[r.layer];
    Storage &st = storages[tensors[sums].storage];
    st.first = std::min(st.first, r.layer);
    st.last = std::max(st.last, r.layer);
    producer.writes.push_back(tensors[sums].storage);
    producer.desc.kernel += " +row sums";
  } else if (kind == ReduceKind::Mean && overPixels &&
             X0.desc.layout == plan::Layout::NHWC &&
             product(inShape) >= 16384) {
    std::vector<int64_t> st = stridesOf(X0);
    if (st[1] == 1 && st[2] == inShape[3] * st[3])
      parts = count % 4 == 0 && count / 4 >= 16     ? 4
              : count % 2 == 0                      ? 2
              : inShape[2] >= 2 && inShape[2] <= 64 ? inShape[2]
                                                    : 0;
  }
  if (parts) {
    const int64_t n = inShape[0], c = inShape[1], each = count / parts;
    if (sums < 0) {
      sums = newTensor(nameOf(res) + " (mean parts)", {parts, n, c},
                       /*int8=*/false, plan::Layout::Plain);
      addLayer(op, kernel + " parts", precision, /*parallel=*/true, 0, {in},
               {sums}, [=](KB &k) {
                 StridedOperand full = operand(Src{in, -1, {}}, inShape);
                 StridedReduce r;
                 r.shape = {parts, n, c};
                 r.in = full;
                 r.in.strides = {each * full.strides[3], full.strides[0],
                                 full.strides[1]};
                 r.reduceShape = {each};
                 r.reduceStrides = {full.strides[3]};
                 r.init = 0.f;
                 r.out = operand(Src{sums, -1, {}}, {parts, n, c});
                 emitStridedReduce(k, r, combineFn(k), nullptr);
               });
    }
    // The parts' channel stride (row sums: padded to 16).
    const int64_t cs = tensors[sums].desc.shape[2];
    addLayer(op, kernel, precision, /*parallel=*/false, 0, {sums}, {o},
             [=](KB &k) {
               StridedReduce r;
               r.shape = loop;
               r.in = operand(Src{sums, -1, {}}, {parts, n, cs});
               r.in.strides = {cs, 1, 0, 0};
               r.reduceShape = {parts};
               r.reduceStrides = {n * cs};
               r.init = 0.f;
               r.out = resultOperand();
               OpBuilder &b = k.b;
               emitStridedReduce(
                   k, r,
                   [&](ArrayRef<Value> v) -> Value {
                     return b.create<arith::AddFOp>(k.loc, v[0], v[1]);
                   },
                   finishFn(k));
             });
    return success();
  }
  addLayer(op, kernel, precision, product(loop) >= 64, 0, {in}, {o},
           [=](KB &k) {
             StridedReduce r;
             r.shape = loop;
             StridedOperand full = operand(Src{in, -1, {}}, inShape);
             r.in = full;
             for (size_t d = 0; d < inShape.size(); ++d) {
               if (reduced[d]) {
                 r.in.strides[d] = 0;
                 r.reduceStrides.push_back(full.strides[d]);
               }
             }
             r.reduceShape = reduceShape;
             r.init = init;
             r.out = resultOperand();
             emitStridedReduce(k, r, combineFn(k), finishFn(k));
           });
  return success();
}

LogicalResult GraphLowering::lowerSoftmax(onnx::SoftmaxOp op) {
  return lowerSoftmaxLike(op, op.getX(), op.getAxis(), /*log=*/false);
}

LogicalResult GraphLowering::lowerLogSoftmax(onnx::LogSoftmaxOp op) {
  return lowerSoftmaxLike(op, op.getX(), op.getAxis(), /*log=*/true);
}

LogicalResult GraphLowering::lowerSoftmaxLike(Operation *op, Value xV,
                                              int64_t axis, bool log) {
  auto shape = cast<ShapedType>(xV.getType()).getShape();
  if (axis < 0)
    axis += shape.size();
  int in = inLayout(tensorOf(xV), plan::Layout::Plain, op->getLoc());
  // Rows of n elements `inner` apart.
  int64_t n = shape[axis], inner = product(shape.drop_front(axis + 1)),
          rows = product(shape) / n;
  if (!log && inner == 1 && n >= 16 && n <= 256)
    return lowerSoftmaxInRegisters(op, in, n, rows);
  int o = resultTensor(op->getResult(0), plan::Layout::Plain);
  if (inner == 1 && n >= 16) {
    // Contiguous rows (the last axis, as in attention): 16 lanes at a time,
    // the tail masked (-inf lanes add exp(-inf) = 0 to the sum).
    addLayer(
        op, log ? "fp32-logsoftmax 16" : "fp32-softmax 16", "fp32", rows >= 8,
        0, {in}, {o}, [=](KB &k) {
          OpBuilder &b = k.b;
          auto vf = VectorType::get({16}, k.f32);
          int64_t xo = tensors[in].desc.offset, yo = tensors[o].desc.offset;
          int64_t chunks = (n + 15) / 16;
          float inf = std::numeric_limits<float>::infinity();
          auto [b0, e0] = k.share(rows);
          k.loop(b0, e0, 1, [&](Value r) {
            auto at = [&](int64_t off, Value c) {
              return k.at(off, k.add(k.mul(r, k.c(n)), k.mul(c, k.c(16))), 4);
            };
            auto mask = [&](Value c) {
              return k.prefixMask(16, k.sub(k.c(n), k.mul(c, k.c(16))));
            };
            auto x = [&](Value c) {
              return k.maskedLoad(vf, at(xo, c), mask(c), k.splatF(-inf, 16));
            };
            auto over = [&](Value init,
                            function_ref<Value(Value, Value)> step) {
              return k.loop(k.c(0), k.c(chunks), 1, ValueRange{init},
                            [&](Value c, ValueRange a) -> SmallVector<Value> {
                              return {step(c, a[0])};
                            })[0];
            };
            Value mx = k.reduceLanes(over(k.splatF(-inf, 16),
                                          [&](Value c, Value a) -> Value {
                                            return b.create<arith::MaximumFOp>(
                                                k.loc, a, x(c));
                                          }),
                                     /*max=*/true);
            Value mxv = k.splat(mx, 16);
            Value sum = k.reduceLanes(
                over(k.splatF(0.f, 16), [&](Value c, Value a) -> Value {
                  Value e = k.exp(b.create<arith::SubFOp>(k.loc, x(c), mxv));
                  if (!log)
                    k.maskedStore(e, at(yo, c), mask(c));
                  return b.create<arith::AddFOp>(k.loc, a, e);
                }));
            Value logSum = k.splat(
                log ? b.create<math::LogOp>(k.loc, sum).getResult() : sum, 16);
            k.loop(k.c(0), k.c(chunks), 1, [&](Value c) {
              Value y =
                  log ? b.create<arith::SubFOp>(
                             k.loc, b.create<arith::SubFOp>(k.loc, x(c), mxv),
                             logSum)
                            .getResult()
                      : b.create<arith::DivFOp>(k.loc,
                                                k.maskedLoad(vf, at(yo, c),
                                                             mask(c),
                                                             k.splatF(0.f, 16)),
                                                logSum)
                            .getResult();
              k.maskedStore(y, at(yo, c), mask(c));
            });
          });
        });
    return success();
  }
  addLayer(
      op, log ? "fp32-logsoftmax" : "fp32-softmax", "fp32", rows >= 8, 0, {in},
      {o}, [=](KB &k) {
        OpBuilder &b = k.b;
        int64_t xo = tensors[in].desc.offset, yo = tensors[o].desc.offset;
        auto [b0, e0] = k.share(rows);
        k.loop(b0, e0, 1, [&](Value r) {
          Value base = rowStart(k, r, n, inner);
          auto at = [&](int64_t off, Value i) {
            return k.at(off, k.add(base, k.mul(i, k.c(inner))), 4);
          };
          auto x = [&](Value i) { return k.load(k.f32, at(xo, i)); };
          Value mx =
              k.loop(k.c(0), k.c(n), 1,
                     ValueRange{k.cf(-std::numeric_limits<float>::infinity())},
                     [&](Value i, ValueRange a) -> SmallVector<Value> {
                       return {b.create<arith::MaximumFOp>(k.loc, a[0], x(i))};
                     })[0];
          Value sum = k.loop(k.c(0), k.c(n), 1, ValueRange{k.cf(0.f)},
                             [&](Value i, ValueRange a) -> SmallVector<Value> {
                               Value e = k.exp(
                                   b.create<arith::SubFOp>(k.loc, x(i), mx));
                               if (!log)
                                 k.store(e, at(yo, i));
                               return {b.create<arith::AddFOp>(k.loc, a[0], e)};
                             })[0];
          Value logSum =
              log ? b.create<math::LogOp>(k.loc, sum).getResult() : sum;
          k.loop(k.c(0), k.c(n), 1, [&](Value i) {
            Value p = at(yo, i);
            if (log) {
              // As the reference: x - max - log(sum).
              Value y = b.create<arith::SubFOp>(k.loc, x(i), mx);
              k.store(b.create<arith::SubFOp>(k.loc, y, logSum), p);
              return;
            }
            k.store(b.create<arith::DivFOp>(k.loc, k.load(k.f32, p), sum), p);
          });
        });
      });
  return success();
}

LogicalResult GraphLowering::lowerSoftmaxInRegisters(Operation *op, int in,
                                                     int64_t n, int64_t rows) {
  // The chain after it (attention's QuantizeLinear before softmax . V) runs
  // on the probabilities in registers: the f32 softmax never goes to
  // memory.
  Value res = op->getResult(0);
  FoldedChain after =
      foldChainAfter(res, cast<ShapedType>(res.getType()).getRank() - 1);
  std::shared_ptr<ChainProgram> chain = after.chain;
  Location at = after.locOf(op);
  int o = resultTensor(after.exit, plan::Layout::Plain);
  std::string kernel = after.kernel("fp32-softmax 16");
  // A row of up to 16 vectors stays in registers: one load of each, the
  // maximum, the exponentials and their sum, then one multiplication by the
  // sum's reciprocal each (a division per element took a third of the
  // layer; the two differ by an ulp, as the reference's double sum does).
  // The last vector's lanes past n load -inf, whose exponential is 0.
  addLayer(
      at, nodeName(at), opTypeOf(at, op), kernel,
      tensors[o].int8 ? "int8" : "fp32", rows >= 8, 0, {in}, {o}, [=](KB &k) {
        auto vf = VectorType::get({16}, k.f32);
        const CTensor &O = tensors[o];
        int64_t xo = tensors[in].desc.offset, yo = O.desc.offset;
        int64_t chunks = (n + 15) / 16, oes = O.int8 ? 1 : 4;
        float inf = std::numeric_limits<float>::infinity();
        Value tail =
            n % 16 ? k.channelMask(k.c(16 * (chunks - 1)), n, 16) : Value();
        // Rows `rs` side by side (attention's 256 rows of 64: 13 -> 10 us
        // in 4s, 11.5 in 2s).
        auto rowsAt = [&](ArrayRef<Value> rs) {
          size_t R = rs.size();
          auto at = [&](size_t r, int64_t off, int64_t c, int64_t es) {
            return k.at(off, k.add(k.mul(rs[r], k.c(n)), k.c(16 * c)), es);
          };
          std::vector<SmallVector<Value>> e(R);
          for (size_t r = 0; r < R; ++r)
            for (int64_t c = 0; c < chunks; ++c)
              e[r].push_back(c + 1 < chunks || !tail
                                 ? k.load(vf, at(r, xo, c, 4))
                                 : k.maskedLoad(vf, at(r, xo, c, 4), tail,
                                                k.splatF(-inf, 16)));
          {
            llvm::SaveAndRestore<bool> coarse(
                k.quantizedChain, O.int8 || (chain && chain->quantized));
            k.softmaxRows(e);
          }
          for (size_t r = 0; r < R; ++r)
            for (int64_t c = 0; c < chunks; ++c) {
              Value y = e[r][c];
              if (chain)
                y = chain->run(k, {y}, [&](int64_t off) {
                  Value p = k.weightsAt(off, k.c(16 * c), 4);
                  return c + 1 < chunks || !tail
                             ? k.load(vf, p)
                             : k.maskedLoad(vf, p, tail, k.splatF(0.f, 16));
                });
              if (O.int8)
                y = k.quantizeApproximate(y, O.scale, O.zp, O.qmin, O.qmax);
              if (c + 1 < chunks || !tail)
                k.store(y, at(r, yo, c, oes));
              else
                k.maskedStore(y, at(r, yo, c, oes), tail);
            }
        };
        // Up to 16 row vectors at once (of 32 registers).
        int64_t group = std::max<int64_t>(1, std::min<int64_t>(4, 16 / chunks));
        auto [b0, e0] = k.share(rows);
        Value mid =
            k.add(b0, k.mul(k.div(k.sub(e0, b0), k.c(group)), k.c(group)));
        k.loop(b0, mid, group, [&](Value r) {
          SmallVector<Value> rs;
          for (int64_t g = 0; g < group; ++g)
            rs.push_back(k.add(r, k.c(g)));
          rowsAt(rs);
        });
        if (group > 1)
          k.loop(mid, e0, 1, [&](Value r) { rowsAt({r}); });
      });
  return success();
}

LogicalResult GraphLowering::lowerArgReduce(Operation *op) {
  Value xV = op->getOperand(0);
  auto shape = cast<ShapedType>(xV.getType()).getShape();
  int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
  if (axis < 0)
    axis += shape.size();
  auto last = op->getAttrOfType<IntegerAttr>("select_last_index");
  bool lastIndex = last && last.getInt() != 0;
  bool isMax = isa<onnx::ArgMaxOp>(op);
  int in = inLayout(tensorOf(xV), plan::Layout::Plain, op->getLoc());
  if (tensors[in].int8 || tensors[in].isInt())
    return op->emitError("qatc compiles ArgMax / ArgMin of f32 data only");
  Value res = op->getResult(0);
  int o = resultTensor(res, plan::Layout::Plain);
  int64_t n = shape[axis], inner = product(shape.drop_front(axis + 1)),
          rows = product(shape) / n;
  addLayer(op, isMax ? "argmax" : "argmin", "fp32", rows >= 64, 0, {in}, {o},
           [=](KB &k) {
             OpBuilder &b = k.b;
             int64_t xo = tensors[in].desc.offset, yo = tensors[o].desc.offset;
             auto [b0, e0] = k.share(rows);
             k.loop(b0, e0, 1, [&](Value r) {
               Value base = rowStart(k, r, n, inner);
               auto x = [&](Value i) {
                 return k.load(k.f32,
                               k.at(xo, k.add(base, k.mul(i, k.c(inner))), 4));
               };
               // The first (or with select_last_index the last) extreme.
               arith::CmpFPredicate better =
                   isMax ? (lastIndex ? arith::CmpFPredicate::OGE
                                      : arith::CmpFPredicate::OGT)
                         : (lastIndex ? arith::CmpFPredicate::OLE
                                      : arith::CmpFPredicate::OLT);
               SmallVector<Value> best =
                   k.loop(k.c(1), k.c(n), 1, ValueRange{x(k.c(0)), k.c(0)},
                          [&](Value i, ValueRange a) -> SmallVector<Value> {
                            Value v = x(i);
                            Value c =
                                b.create<arith::CmpFOp>(k.loc, better, v, a[0]);
                            return {k.select(c, v, a[0]), k.select(c, i, a[1])};
                          });
               k.store(best[1], k.at(yo, r, 8));
             });
           });
  return success();
}

LogicalResult GraphLowering::lowerLayerNorm(onnx::LayerNormalizationOp op) {
  auto shape = cast<ShapedType>(op.getX().getType()).getShape();
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0)
    axis += shape.size();
  int64_t n = product(shape.drop_front(axis)), rows = product(shape) / n;
  // Scale and bias over the normalized block (broadcast from 1 element).
  auto block = [&](Value v, float fill) -> std::optional<std::vector<float>> {
    if (!v)
      return std::vector<float>(n, fill);
    auto c = constantOf(v);
    if (!c)
      return std::nullopt;
    std::vector<float> f = floatsOf(*c);
    if (f.size() == 1)
      f.assign(n, f[0]);
    if (static_cast<int64_t>(f.size()) != n)
      return std::nullopt;
    return f;
  };
  auto scale = block(op.getScale(), 1.f), bias = block(op.getB(), 0.f);
  if (!scale || !bias)
    return op.emitError("qatc compiles LayerNormalization with constant "
                        "scale and bias over the normalized axes only");
  int64_t scaleOff = addArray(*scale), biasOff = addArray(*bias);
  int in = inLayout(tensorOf(op.getX()), plan::Layout::Plain, op.getLoc());
  // The chain after it (the next QuantizeLinear above all: an encoder's
  // norm feeds a quantized matrix product) runs on the normalized vectors
  // in registers; constants per element of the row come from the weights.
  FoldedChain after;
  after.exit = op.getY();
  if (axis == static_cast<int64_t>(shape.size()) - 1)
    after = foldChainAfter(op.getY(), axis);
  std::shared_ptr<ChainProgram> chain = after.chain;
  Location at = after.locOf(op);
  int o = resultTensor(after.exit, plan::Layout::Plain);
  float eps = op.getEpsilon().convertToFloat();
  std::string kernel = after.kernel("fp32-layernorm");
  // Rows of n contiguous floats, 16 lanes at a time with the tail masked:
  // lane sums, one horizontal add per sum, then (x - mean) * (1 /
  // sqrt(var + eps)) * scale + bias as the reference (in f32; its sums are
  // double).
  addLayer(
      at, nodeName(at), opTypeOf(at, op), kernel,
      tensors[o].int8 ? "int8" : "fp32", rows >= 8, 0, {in}, {o}, [=](KB &k) {
        OpBuilder &b = k.b;
        auto vf = VectorType::get({16}, k.f32);
        const CTensor &O = tensors[o];
        int64_t xo = tensors[in].desc.offset, yo = O.desc.offset;
        int64_t chunks = (n + 15) / 16, oes = O.int8 ? 1 : 4;
        auto [b0, e0] = k.share(rows);
        auto col = [&](Value c) { return k.mul(c, k.c(16)); };
        auto mask = [&](Value c) { return k.channelMask(col(c), n, 16); };
        Value zero = k.splatF(0.f, 16);
        // Rows `rs` together, each phase for all of them: a row alone is a
        // chain of dependent steps (the lane sums, their horizontal add,
        // the division, the square root), about 200 cycles for 128
        // floats; four rows' chains overlap. Each row's arithmetic is the
        // one-row order, so the bits are the same.
        auto rowsAt = [&](ArrayRef<Value> rs) {
          const size_t g = rs.size();
          SmallVector<Value> base;
          for (Value r : rs)
            base.push_back(k.mul(r, k.c(n)));
          auto x = [&](size_t i, Value c, Value fill) {
            return k.maskedLoad(vf, k.at(xo, k.add(base[i], col(c)), 4),
                                mask(c), fill);
          };
          // Lane sums of term(row, chunk) per row, then each row's total.
          auto sums = [&](function_ref<Value(size_t, Value)> term) {
            SmallVector<Value> init(g, zero);
            SmallVector<Value> lanes =
                k.loop(k.c(0), k.c(chunks), 1, init,
                       [&](Value c, ValueRange a) -> SmallVector<Value> {
                         SmallVector<Value> next;
                         for (size_t i = 0; i < g; ++i)
                           next.push_back(b.create<arith::AddFOp>(k.loc, a[i],
                                                                  term(i, c)));
                         return next;
                       });
            SmallVector<Value> total;
            for (Value l : lanes)
              total.push_back(k.reduceLanes(l));
            return total;
          };
          SmallVector<Value> meanV, inv;
          for (Value s : sums([&](size_t i, Value c) { return x(i, c, zero); }))
            meanV.push_back(
                k.splat(b.create<arith::DivFOp>(k.loc, s, k.cf(float(n))), 16));
          // Masked-off lanes load the mean: their deviation is 0.
          for (Value s : sums([&](size_t i, Value c) -> Value {
                 Value d = b.create<arith::SubFOp>(k.loc, x(i, c, meanV[i]),
                                                   meanV[i]);
                 return b.create<arith::MulFOp>(k.loc, d, d);
               })) {
            Value var = b.create<arith::DivFOp>(k.loc, s, k.cf(float(n)));
            inv.push_back(k.splat(
                b.create<arith::DivFOp>(
                    k.loc, k.cf(1.f),
                    b.create<math::SqrtOp>(
                        k.loc, b.create<arith::AddFOp>(k.loc, var, k.cf(eps)))),
                16));
          }
          k.loop(k.c(0), k.c(chunks), 1, [&](Value c) {
            Value m = mask(c);
            auto param = [&](int64_t off) {
              return k.maskedLoad(vf, k.weightsAt(off, col(c), 4), m, zero);
            };
            Value gamma = param(scaleOff), beta = param(biasOff);
            for (size_t i = 0; i < g; ++i) {
              Value y = b.create<arith::MulFOp>(
                  k.loc,
                  b.create<arith::SubFOp>(k.loc, x(i, c, zero), meanV[i]),
                  inv[i]);
              y = b.create<arith::MulFOp>(k.loc, y, gamma);
              y = b.create<arith::AddFOp>(k.loc, y, beta);
              if (chain)
                y = chain->run(k, {y}, param);
              if (O.int8)
                y = k.quantize(y, O.scale, O.zp, O.qmin, O.qmax);
              k.maskedStore(y, k.at(yo, k.add(base[i], col(c)), oes), m);
            }
          });
        };
        constexpr int64_t kGroup = 4;
        Value groups = k.div(k.sub(e0, b0), k.c(kGroup));
        Value rest = k.add(b0, k.mul(groups, k.c(kGroup)));
        k.loop(k.c(0), groups, 1, [&](Value gi) {
          Value r0 = k.add(b0, k.mul(gi, k.c(kGroup)));
          SmallVector<Value> rs;
          for (int64_t i = 0; i < kGroup; ++i)
            rs.push_back(k.add(r0, k.c(i)));
          rowsAt(rs);
        });
        k.loop(rest, e0, 1, [&](Value r) { rowsAt({r}); });
      });
  return success();
}

LogicalResult GraphLowering::lowerPow(onnx::PowOp op) {
  bool intX = isIntegerValue(op.getX()), intY = isIntegerValue(op.getY());
  if (intX || intY) {
    // Integer bases: an integer exponent multiplies exactly (a negative one
    // gives 1: numpy refuses it), a float one goes through powf and
    // truncates; a float base with an integer exponent is powf.
    Src x = intX ? intSrcOf(op.getX()) : srcOf(op.getX());
    Src y = intY ? intSrcOf(op.getY()) : srcOf(op.getY());
    return lowerIntMap(
        op, {x, y}, "pow", [=](KB &k, ArrayRef<Value> v) -> Value {
          OpBuilder &b = k.b;
          if (intX && intY)
            return k.loop(k.c(0), v[1], 1, {k.c(1)}, [&](Value, ValueRange r) {
              return SmallVector<Value>{
                  b.create<arith::MulIOp>(k.loc, r[0], v[0])};
            })[0];
          auto toF32 = [&](Value a) -> Value {
            return a.getType() == k.f32
                       ? a
                       : b.create<arith::SIToFPOp>(k.loc, k.f32, a);
          };
          Value p = b.create<math::PowFOp>(k.loc, toF32(v[0]), toF32(v[1]));
          return intX ? Value(b.create<arith::FPToSIOp>(k.loc, k.i64, p)) : p;
        });
  }
  // x^2 (LayerNorm's variance) as a product; other exponents through powf.
  if (auto e = constantOf(op.getY()))
    if (e->numElements() == 1 && floatsOf(*e)[0] == 2.f)
      return lowerMap(op, {srcOf(op.getX())}, "square",
                      [](KB &k, ArrayRef<Value> v) -> Value {
                        return k.b.create<arith::MulFOp>(k.loc, v[0], v[0]);
                      });
  return lowerBinary(op, "pow", [](KB &k, ArrayRef<Value> v) -> Value {
    return k.b.create<math::PowFOp>(k.loc, v[0], v[1]);
  });
}

LogicalResult
GraphLowering::lowerElementwise(Operation *op, Value a, Value b, bool mul,
                                std::optional<qat::ClampAttr> act) {
  float lo = -std::numeric_limits<float>::infinity(), hi = -lo;
  if (act && *act) {
    lo = static_cast<float>(act->getMin());
    hi = static_cast<float>(act->getMax());
  }
  return lowerMap(
      op, {srcOf(a), srcOf(b)}, mul ? "mul" : "add",
      [=](KB &k, ArrayRef<Value> v) -> Value {
        OpBuilder &bb = k.b;
        Value y = mul ? bb.create<arith::MulFOp>(k.loc, v[0], v[1]).getResult()
                      : bb.create<arith::AddFOp>(k.loc, v[0], v[1]).getResult();
        if (!std::isinf(lo))
          y = bb.create<arith::MaximumFOp>(k.loc, y, k.cf(lo));
        if (!std::isinf(hi))
          y = bb.create<arith::MinimumFOp>(k.loc, y, k.cf(hi));
        return y;
      });
}

LogicalResult GraphLowering::lowerClamp(Operation *op, Value inV, double lo,
                                        double hi) {
  // Input and result in the same layout: one flat loop over the storage.
  plan::Layout layout =
      layoutFor(cast<ShapedType>(op->getResult(0).getType()).getShape());
  int in = inLayout(tensorOf(inV), layout, op->getLoc());
  if (tensors[in].isInt())
    return op->emitError("qatc compiles Relu / Clip of f32 and int8 data "
                         "only; this one clamps integers");
  int o = resultTensor(op->getResult(0), layout);
  const CTensor &x = tensors[in];
  // Channel slices (planConcatSlices) have wider channel strides: then the
  // loop runs over pixels and channels, else over the storage at once.
  bool flat = x.packedChannels() && tensors[o].packedChannels();
  int64_t rows = flat ? 1 : x.pixels(),
          count = flat ? x.desc.storedElements() : x.channels();
  addLayer(op, "clamp", x.int8 ? "int8" : "fp32", rows * count > 4096, 0, {in},
           {o}, [=](KB &k) {
             const CTensor &X = tensors[in], &O = tensors[o];
             int64_t es = X.int8 ? 1 : 4;
             auto [b0, e0] = k.share(rows * count);
             OpBuilder &bb = k.b;
             k.loop(b0, e0, 1, [&](Value i) {
               Value xi = i, oi = i;
               if (!flat) {
                 Value p = k.div(i, k.c(count)), c = k.rem(i, k.c(count));
                 xi = k.add(k.mul(p, k.c(X.desc.channelStride)), c);
                 oi = k.add(k.mul(p, k.c(O.desc.channelStride)), c);
               }
               Value v =
                   k.load(X.int8 ? k.i8 : k.f32, k.at(X.desc.offset, xi, es));
               if (X.int8) {
                 // Stored-domain bounds (lo/hi are stored integers here).
                 v = bb.create<arith::MaxUIOp>(
                     k.loc, v,
                     bb.create<arith::ConstantIntOp>(k.loc, int64_t(lo), 8));
                 v = bb.create<arith::MinUIOp>(
                     k.loc, v,
                     bb.create<arith::ConstantIntOp>(k.loc, int64_t(hi), 8));
               } else {
                 if (!std::isinf(lo))
                   v = bb.create<arith::MaximumFOp>(k.loc, v, k.cf(lo));
                 if (!std::isinf(hi))
                   v = bb.create<arith::MinimumFOp>(k.loc, v, k.cf(hi));
               }
               k.store(v, k.at(O.desc.offset, oi, es));
             });
           });
  return success();
}

LogicalResult GraphLowering::lowerPool(Operation *op, Value inV,
                                       ArrayRef<int64_t> kernel,
                                       ArrayRef<int64_t> strides,
                                       ArrayRef<int64_t> pads,
                                       ArrayRef<int64_t> dilations,
                                       bool average, bool countPad) {
  if (kernel.size() != 2)
    return op->emitError("qatc compiles 2-D pooling only");
  if (isIntegerValue(inV))
    return op->emitError("qatc compiles pooling of f32 and quantized int8 "
                         "data; this one pools integers");
  int in = inLayout(tensorOf(inV), plan::Layout::NHWC, op->getLoc());
  int o = resultTensor(op->getResult(0), plan::Layout::NHWC);
  ConvSpec s;
  setWindow(s, tensors[in].desc.shape, tensors[o].desc.shape, kernel[0],
            kernel[1], strides, pads, dilations);
  if (!average)
    return lowerMaxPool(op, in, o, s);
  int64_t C = tensors[o].channels();
  // The divisor of every output position (ONNX: the taps inside the input,
  // or inside the padded input with count_include_pad).
  std::vector<float> divisor(s.OH * s.OW);
  int64_t PB = pads.size() > 2 ? pads[2] : s.PT,
          PR = pads.size() > 3 ? pads[3] : s.PL;
  auto taps = [&](int64_t o, int64_t S, int64_t P, int64_t K, int64_t D,
                  int64_t in, int64_t padEnd) {
    int64_t n = 0;
    for (int64_t t = 0; t < K; ++t) {
      int64_t i = o * S - P + t * D;
      n += countPad ? (i < in + padEnd) : (i >= 0 && i < in);
    }
    return n;
  };
  for (int64_t oh = 0; oh < s.OH; ++oh)
    for (int64_t ow = 0; ow < s.OW; ++ow)
      divisor[oh * s.OW + ow] = static_cast<float>(
          std::max<int64_t>(taps(oh, s.SH, s.PT, s.KH, s.DH, s.H, PB) *
                                taps(ow, s.SW, s.PL, s.KW, s.DW, s.W, PR),
                            1));
  int64_t divOff = addArray(divisor);
  addLayer(
      op, "avgpool", tensors[in].int8 ? "int8" : "fp32", true, 0, {in}, {o},
      [=](KB &k) {
        const CTensor &X = tensors[in], &O = tensors[o];
        int64_t es = X.int8 ? 1 : 4;
        Type et = X.int8 ? Type(k.i8) : Type(k.f32);
        OpBuilder &bb = k.b;
        auto [b0, e0] = k.share(s.N * s.OH);
        k.loop(b0, e0, 1, [&](Value r) {
          Value n = k.div(r, k.c(s.OH)), oh = k.rem(r, k.c(s.OH));
          k.loop(k.c(0), k.c(s.OW), 1, [&](Value ow) {
            k.loop(k.c(0), k.c(C), 1, [&](Value ch) {
              Value m = k.cf(0.f);
              for (int64_t kh = 0; kh < s.KH; ++kh)
                for (int64_t kw = 0; kw < s.KW; ++kw) {
                  Value ih = k.add(k.mul(oh, k.c(s.SH)), k.c(kh * s.DH - s.PT));
                  Value iw = k.add(k.mul(ow, k.c(s.SW)), k.c(kw * s.DW - s.PL));
                  Value ok = k.andi(k.lt(ih, k.c(s.H)), k.lt(iw, k.c(s.W)));
                  // Out-of-bounds taps read pixel 0 and are discarded.
                  Value pixel = k.select(
                      ok,
                      k.add(k.mul(k.add(k.mul(n, k.c(s.H)), ih), k.c(s.W)), iw),
                      k.c(0));
                  Value v = k.load(
                      et,
                      k.at(X.desc.offset,
                           k.add(k.mul(pixel, k.c(X.desc.channelStride)), ch),
                           es));
                  if (X.int8) // q - z, exact in f32
                    v = bb.create<arith::SIToFPOp>(
                        k.loc, k.f32,
                        bb.create<arith::SubIOp>(
                            k.loc, bb.create<arith::ExtUIOp>(k.loc, k.i32, v),
                            bb.create<arith::ConstantIntOp>(k.loc, X.zp, 32)));
                  m = k.select(ok, bb.create<arith::AddFOp>(k.loc, m, v), m);
                }
              Value d = k.load(
                  k.f32,
                  k.weightsAt(divOff, k.add(k.mul(oh, k.c(s.OW)), ow), 4));
              if (X.int8) {
                // As the reference: the mean in double, times the scale.
                FloatType f64 = bb.getF64Type();
                Value md = bb.create<arith::DivFOp>(
                    k.loc, bb.create<arith::ExtFOp>(k.loc, f64, m),
                    bb.create<arith::ExtFOp>(k.loc, f64, d));
                md = bb.create<arith::MulFOp>(
                    k.loc, md,
                    bb.create<arith::ConstantFloatOp>(
                        k.loc, llvm::APFloat(X.desc.scale), f64));
                m = bb.create<arith::TruncFOp>(k.loc, k.f32, md);
              } else {
                m = bb.create<arith::DivFOp>(k.loc, m, d);
              }
              if (O.int8)
                m = k.quantize(m, O.scale, O.zp, O.qmin, O.qmax);
              Value opix =
                  k.add(k.mul(k.add(k.mul(n, k.c(s.OH)), oh), k.c(s.OW)), ow);
              k.store(m, k.at(O.desc.offset,
                              k.add(k.mul(opix, k.c(O.desc.channelStride)), ch),
                              O.int8 ? 1 : 4));
            });
          });
        });
      });
  return success();
}

LogicalResult GraphLowering::lowerMaxPool(Operation *op, int in, int o,
                                          const ConvSpec &s) {
  const CTensor &X = tensors[in];
  if (X.int8 && (tensors[o].zp != X.zp || tensors[o].scale != X.scale))
    return op->emitError("an int8 max pool keeps its input's quantization");
  int64_t C = tensors[o].channels();
  // Taps outside the image read a row of the lowest value (-inf, or the
  // stored u8 0): each output pixel computes its KH * KW tap addresses once,
  // and its channel loop is a max over KH * KW vector loads, with no test.
  int64_t lowRow =
      X.int8
          ? padRow(true, 0, C)
          : addArray(std::vector<float>(
                roundUp(C, 64) + 64, -std::numeric_limits<float>::infinity()));
  addLayer(
      op, "maxpool", X.int8 ? "int8" : "fp32", true, 0, {in}, {o}, [=](KB &k) {
        const CTensor &X = tensors[in], &O = tensors[o];
        int64_t es = X.int8 ? 1 : 4;
        // The arena offsets are known when the layer is emitted.
        ConvSpec window = s;
        window.int8 = X.int8;
        window.inOff = X.desc.offset;
        window.inCS = X.desc.channelStride;
        OpBuilder &bb = k.b;
        Value low = k.gep(k.weights, lowRow);
        auto [b0, e0] = k.share(s.N * s.OH);
        k.loop(b0, e0, 1, [&](Value r) {
          Value n = k.div(r, k.c(s.OH)), oh = k.rem(r, k.c(s.OH));
          k.loop(k.c(0), k.c(s.OW), 1, [&](Value ow) {
            SmallVector<Value> px = windowTaps(k, window, n, oh, ow, low);
            Value opix =
                k.add(k.mul(k.add(k.mul(n, k.c(s.OH)), oh), k.c(s.OW)), ow);
            Value out = k.at(O.desc.offset, opix, O.desc.channelStride * es);
            // Whole vectors (64 bytes: 64 int8 or 16 f32 channels), then
            // the remainder under a constant mask.
            const int64_t lanes = X.int8 ? 64 : 16, whole = C / lanes * lanes;
            auto vt = VectorType::get({lanes}, X.int8 ? k.i8 : k.f32);
            auto block = [&](Value c0, int64_t n) {
              Value off = k.mul(c0, k.c(es));
              Value mask = n < lanes ? k.prefixMask(lanes, k.c(n)) : Value();
              Value pass =
                  X.int8 ? k.splatI(0, lanes, k.i8) : k.splatF(0.f, lanes);
              auto load = [&](Value p) {
                return mask ? k.maskedLoad(vt, p, mask, pass) : k.load(vt, p);
              };
              // m = v > m ? v : m from -inf: the reference's std::max(m, v)
              // (a NaN tap is skipped), one vmaxps v, m per tap
              // (arith.maximumf would propagate NaN, in a dependent chain
              // of six instructions).
              Value m = X.int8
                            ? Value()
                            : k.splatF(-std::numeric_limits<float>::infinity(),
                                       lanes);
              for (Value p : px) {
                Value v = load(k.gep(p, off));
                if (!m)
                  m = v;
                else if (X.int8)
                  m = bb.create<arith::MaxUIOp>(k.loc, m, v);
                else
                  m = k.select(bb.create<arith::CmpFOp>(
                                   k.loc, arith::CmpFPredicate::OGT, v, m),
                               v, m);
              }
              if (mask)
                k.maskedStore(m, k.gep(out, off), mask);
              else
                k.store(m, k.gep(out, off));
            };
            if (whole)
              k.loop(k.c(0), k.c(whole), lanes,
                     [&](Value c0) { block(c0, lanes); });
            if (C > whole)
              block(k.c(whole), C - whole);
          });
        });
      });
  return success();
}

LogicalResult GraphLowering::lowerReshape(Operation *op, Value inV) {
  Value res = op->getResult(0);
  auto rt = cast<RankedTensorType>(res.getType());
  int in = tensorOf(inV);
  const CTensor x = tensors[in];
  auto shape = rt.getShape();
  // A Concat's channel slice in a wider buffer (planConcatSlices) is no
  // matrix of packed rows: a product would read the buffer's other channels
  // (stale bytes times zero weights can make NaN). Views copy it instead.
  // [N, C, 1, 1] NHWC -> [N, C]: the same bytes.
  if (!x.view && x.packedChannels() && x.desc.layout == plan::Layout::NHWC &&
      x.desc.shape.size() == 4 && shape.size() == 2 &&
      x.dim(2) * x.dim(3) == 1 && shape[1] == x.dim(1)) {
    int a = alias(in, nameOf(res), shape);
    valueTensor[res] = a;
    return success();
  }
  // [N, C, H, W] NHWC -> [N, C*H*W] read only by matrix products: a view;
  // the product's packed weights absorb the order.
  // (Only as the left operand of products with constant 2-D weights: the
  // view has no strides a strided kernel or a batched product could use.)
  bool onlyProducts = llvm::all_of(res.getUses(), [](OpOperand &use) {
    Operation *u = use.getOwner();
    auto constant2D = [](Value w) {
      return constantOf(w) && cast<ShapedType>(w.getType()).getRank() == 2;
    };
    if (auto m = dyn_cast<qat::MatMulOp>(u))
      return use.getOperandNumber() == 0 && constant2D(m.getRhs());
    if (auto g = dyn_cast<onnx::GemmOp>(u))
      return use.getOperandNumber() == 0 && !g.getTransA() &&
             constant2D(g.getB());
    return false;
  });
  if (!x.view && x.packedChannels() && x.desc.layout == plan::Layout::NHWC &&
      x.desc.shape.size() == 4 && shape.size() == 2 && shape[0] == x.dim(0) &&
      x.dim(0) == 1 && onlyProducts && !res.use_empty()) {
    CTensor v = x;
    v.flat = true;
    v.fC = x.dim(1);
    v.fH = x.dim(2);
    v.fW = x.dim(3);
    v.fCS = x.desc.channelStride;
    v.desc.name = nameOf(res);
    v.desc.shape.assign(shape.begin(), shape.end());
    v.manifestIndex = -1;
    tensors.push_back(v);
    valueTensor[res] = tensors.size() - 1;
    return success();
  }
  bool rowMajorBytes =
      !x.view && !x.flat &&
      (x.desc.layout == plan::Layout::Plain ||
       (x.desc.shape.size() == 2 && x.desc.channelStride == x.dim(1)));
  if (!rowMajorBytes && !x.flat) {
    // A view of the same storage when the strides allow (splitting the
    // channels of NHWC data, merging contiguous dimensions)...
    if (auto st = reshapedStrides(x.desc.shape, stridesOf(x), shape)) {
      makeView(in, res, *st, x.view ? x.vbase : 0);
      return success();
    }
    // ... else one copy into the result's layout, looping over the common
    // refinement of both shapes.
    std::vector<int64_t> loop, sIn, sOut;
    int o = resultTensor(res, layoutFor(shape));
    if (refineShapes(x.desc.shape, stridesOf(x), shape, stridesOf(tensors[o]),
                     loop, sIn, sOut)) {
      addLayer(op, "strided-copy", "layout", product(shape) > 4096, 0, {in},
               {o}, [=](KB &k) {
                 StridedMap m;
                 m.shape = loop;
                 m.out = operand(Src{o, -1, {}}, tensors[o].desc.shape);
                 m.out.strides = sOut;
                 m.ins = {operand(Src{in, -1, {}}, tensors[in].desc.shape)};
                 m.ins[0].strides = sIn;
                 emitStridedMap(k, m, nullptr);
               });
      return success();
    }
    // (The result tensor stays unused: it takes no arena space.)
  }
  // Anything else: plain row-major order is reshape-invariant.
  int plain = inLayout(in, plan::Layout::Plain, op->getLoc());
  int a = alias(plain, nameOf(res), shape);
  tensors[a].desc.layout = plan::Layout::Plain;
  tensors[a].desc.channelStride = 0;
  out.manifest.tensors[tensors[a].manifestIndex] = tensors[a].desc;
  valueTensor[res] = a;
  return success();
}

/// The scalar body that is one op of `OpTy` on the (f32) operands.
template <typename OpTy> static ScalarFn binaryFn() {
  return [](KB &k, ArrayRef<Value> v) -> Value {
    return k.b.create<OpTy>(k.loc, v[0], v[1]);
  };
}

/// The axes a global pool averages: every axis after N and C.
static std::vector<int64_t> spatialAxes(Value v) {
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < cast<ShapedType>(v.getType()).getRank(); ++d)
    axes.push_back(d);
  return axes;
}

/// onnx.BitShift on unsigned integers (held zero-extended in int32 /
/// int64): the shift in int64, wrapped to the type; a shift by the type's
/// width or more gives 0.
template <> LogicalResult GraphLowering::lower(onnx::BitShiftOp op) {
  Type elt = getElementTypeOrSelf(op.getA().getType());
  auto it = dyn_cast<IntegerType>(elt);
  if (!it || !it.isUnsigned() || it.getWidth() > 32)
    return op.emitError("qatc compiles BitShift of uint8, uint16 and uint32; "
                        "this one shifts ")
           << elt;
  int64_t width = it.getWidth();
  bool left = op.getDirection() == "LEFT";
  return lowerIntMap(
      op, {intSrcOf(op.getA()), intSrcOf(op.getB())},
      left ? "shift-left" : "shift-right",
      [=](KB &k, ArrayRef<Value> v) -> Value {
        OpBuilder &b = k.b;
        Value tooFar = b.create<arith::CmpIOp>(k.loc, arith::CmpIPredicate::uge,
                                               v[1], k.c(width));
        Value safe = k.select(tooFar, k.c(0), v[1]);
        Value r = left ? Value(b.create<arith::ShLIOp>(k.loc, v[0], safe))
                       : Value(b.create<arith::ShRUIOp>(k.loc, v[0], safe));
        return k.select(tooFar, k.c(0), r);
      });
}

std::optional<LogicalResult> GraphLowering::lowerMapFamily(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case<onnx::BitShiftOp>([&](auto o) { return lower(o); })
      .Case<qat::QuantizeOp>([&](auto o) { return lowerQuantize(o); })
      .Case<qat::DequantizeOp>([&](auto o) { return lowerDequantize(o); })
      .Case<qat::RequantizeOp>([&](auto o) { return lowerRequantize(o); })
      .Case<qat::AddOp>([&](auto o) {
        return lowerElementwise(o, o.getLhs(), o.getRhs(), false,
                                o.getActivation());
      })
      .Case<qat::MulOp>([&](auto o) {
        return lowerElementwise(o, o.getLhs(), o.getRhs(), true,
                                o.getActivation());
      })
      .Case<qat::ClampOp>([&](auto o) {
        int64_t so = tensors[tensorOf(o.getInput())].desc.storedOffset;
        return lowerClamp(o, o.getInput(), double(o.getMin() + so),
                          double(o.getMax() + so));
      })
      .Case<qat::MaxPoolOp>([&](auto o) {
        return lowerPool(o, o.getInput(), o.getKernelShape(), o.getStrides(),
                         o.getPads(), o.getDilations());
      })
      .Case<onnx::MaxPoolOp>([&](auto o) {
        return lowerPool(o, o.getX(), o.getKernelShape(), o.getStrides(),
                         o.getPads(), o.getDilations());
      })
      .Case<qat::AvgPoolOp>([&](auto o) {
        return lowerPool(o, o.getInput(), o.getKernelShape(), o.getStrides(),
                         o.getPads(), {}, true, o.getCountIncludePad() != 0);
      })
      .Case<onnx::AveragePoolOp>([&](auto o) {
        return lowerPool(o, o.getX(), o.getKernelShape(), o.getStrides(),
                         o.getPads(), o.getDilations(), true,
                         o.getCountIncludePad() != 0);
      })
      .Case<qat::GlobalAvgPoolOp>([&](auto o) {
        return lowerMean(o, o.getInput(), spatialAxes(o.getInput()));
      })
      .Case<onnx::GlobalAveragePoolOp>(
          [&](auto o) { return lowerMean(o, o.getX(), spatialAxes(o.getX())); })
      .Case<onnx::ReduceMeanOp>(
          [&](auto o) { return lowerMean(o, o.getData(), o.getAxes()); })
      .Case<onnx::ReduceSumOp>([&](auto o) {
        return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::Sum);
      })
      .Case<onnx::GlobalMaxPoolOp>([&](auto o) {
        return lowerReduce(o, o.getX(), spatialAxes(o.getX()), ReduceKind::Max);
      })
      .Case<onnx::ReduceMaxOp>([&](auto o) {
        return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::Max);
      })
      .Case<onnx::ReduceMinOp>([&](auto o) {
        return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::Min);
      })
      .Case<onnx::ReduceProdOp>([&](auto o) {
        return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::Prod);
      })
      .Case<onnx::ReduceL1Op>([&](auto o) {
        return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::L1);
      })
      .Case<onnx::ReduceL2Op>([&](auto o) {
        return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::L2);
      })
      .Case<onnx::ReduceSumSquareOp>([&](auto o) {
        return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::SumSquare);
      })
      .Case<onnx::LogSoftmaxOp>([&](auto o) { return lowerLogSoftmax(o); })
      .Case<onnx::ArgMaxOp, onnx::ArgMinOp>(
          [&](Operation *o) { return lowerArgReduce(o); })
      .Case<onnx::TopKOp>([&](auto o) { return lowerTopK(o); })
      .Case<onnx::EqualOp, onnx::LessOp, onnx::LessOrEqualOp, onnx::GreaterOp,
            onnx::GreaterOrEqualOp>([&](Operation *o) -> LogicalResult {
        if (isIntegerValue(o->getOperand(0))) {
          // Integer comparisons (of indices): int64, bool result.
          arith::CmpIPredicate ip =
              isa<onnx::EqualOp>(o)         ? arith::CmpIPredicate::eq
              : isa<onnx::LessOp>(o)        ? arith::CmpIPredicate::slt
              : isa<onnx::LessOrEqualOp>(o) ? arith::CmpIPredicate::sle
              : isa<onnx::GreaterOp>(o)     ? arith::CmpIPredicate::sgt
                                            : arith::CmpIPredicate::sge;
          return lowerIntMap(
              o, {intSrcOf(o->getOperand(0)), intSrcOf(o->getOperand(1))},
              "int-compare", [=](KB &k, ArrayRef<Value> v) -> Value {
                Value c = k.b.create<arith::CmpIOp>(k.loc, ip, v[0], v[1]);
                return k.select(c, k.cf(1.f), k.cf(0.f));
              });
        }
        // Bool results are f32 0 / 1.
        arith::CmpFPredicate pred =
            isa<onnx::EqualOp>(o)         ? arith::CmpFPredicate::OEQ
            : isa<onnx::LessOp>(o)        ? arith::CmpFPredicate::OLT
            : isa<onnx::LessOrEqualOp>(o) ? arith::CmpFPredicate::OLE
            : isa<onnx::GreaterOp>(o)     ? arith::CmpFPredicate::OGT
                                          : arith::CmpFPredicate::OGE;
        return lowerBinary(
            o, "compare", [=](KB &k, ArrayRef<Value> v) -> Value {
              Value c = k.b.create<arith::CmpFOp>(k.loc, pred, v[0], v[1]);
              return k.select(c, k.cf(1.f), k.cf(0.f));
            });
      })
      .Case<onnx::CastOp>([&](onnx::CastOp o) -> LogicalResult {
        Type from = getElementTypeOrSelf(o.getInput().getType());
        Type to = getElementTypeOrSelf(o.getType());
        // Bool is held as f32 0 / 1: to f32 it is the same bytes.
        if ((from.isF32() || from.isInteger(1)) && to.isF32()) {
          valueTensor[o.getResult()] = tensorOf(o.getInput());
          return success();
        }
        if (from.isF32() && to.isInteger(1))
          return lowerUnary(o, "to-bool", [](KB &k, ArrayRef<Value> v) {
            Value c = k.b.create<arith::CmpFOp>(
                k.loc, arith::CmpFPredicate::UNE, v[0], k.cf(0.f));
            return k.select(c, k.cf(1.f), k.cf(0.f));
          });
        bool fromInt = isIntegerValue(o.getInput()),
             toInt = isIntegerValue(o.getResult());
        if ((fromInt || from.isF32() || from.isInteger(1)) &&
            (toInt || to.isF32() || to.isInteger(1))) {
          // Integers through int64: f32 to integers truncates toward
          // zero (ONNX), integers to bool compare with 0.
          bool toBool = to.isInteger(1);
          return lowerIntMap(
              o, {fromInt ? intSrcOf(o.getInput()) : srcOf(o.getInput())},
              "cast", [=](KB &k, ArrayRef<Value> v) -> Value {
                OpBuilder &b = k.b;
                Value x = v[0];
                if (x.getType() == k.f32)
                  return b.create<arith::FPToSIOp>(k.loc, k.i64, x);
                if (toBool) {
                  Value c = b.create<arith::CmpIOp>(
                      k.loc, arith::CmpIPredicate::ne, x, k.c(0));
                  return k.select(c, k.cf(1.f), k.cf(0.f));
                }
                if (!toInt)
                  return b.create<arith::SIToFPOp>(k.loc, k.f32, x);
                return x;
              });
        }
        return o.emitError("qatc compiles Cast between f32, bool, "
                           "int32 and int64 only; this one casts ")
               << from << " to " << to;
      })
      .Case<onnx::NotOp>([&](auto o) {
        return lowerUnary(o, "not", [](KB &k, ArrayRef<Value> v) {
          return k.b.create<arith::SubFOp>(k.loc, k.cf(1.f), v[0]);
        });
      })
      .Case<onnx::AndOp>([&](auto o) {
        return lowerBinary(o, "and", binaryFn<arith::MulFOp>());
      })
      .Case<onnx::OrOp>([&](auto o) {
        return lowerBinary(o, "or", binaryFn<arith::MaximumFOp>());
      })
      .Case<onnx::XorOp>([&](auto o) {
        return lowerBinary(o, "xor", [](KB &k, ArrayRef<Value> v) {
          Value c = k.b.create<arith::CmpFOp>(k.loc, arith::CmpFPredicate::ONE,
                                              v[0], v[1]);
          return k.select(c, k.cf(1.f), k.cf(0.f));
        });
      })
      .Case<onnx::WhereOp>([&](auto o) -> LogicalResult {
        if (isIntegerValue(o.getResult()))
          return lowerIntMap(
              o,
              {srcOf(o.getCondition()), intSrcOf(o.getX()), intSrcOf(o.getY())},
              "int-where", [](KB &k, ArrayRef<Value> v) -> Value {
                Value c = k.b.create<arith::CmpFOp>(
                    k.loc, arith::CmpFPredicate::ONE, v[0], k.cf(0.f));
                return k.select(c, v[1], v[2]);
              });
        return lowerMap(
            o, {srcOf(o.getCondition()), srcOf(o.getX()), srcOf(o.getY())},
            "where", [](KB &k, ArrayRef<Value> v) -> Value {
              Value c = k.b.create<arith::CmpFOp>(
                  k.loc, arith::CmpFPredicate::ONE, v[0], k.cf(0.f));
              return k.select(c, v[1], v[2]);
            });
      })
      .Case<qat::ConcatOp>(
          [&](auto o) { return lowerConcat(o, o.getInputs(), o.getAxis()); })
      .Case<onnx::ConcatOp>(
          [&](auto o) { return lowerConcat(o, o.getInputs(), o.getAxis()); })
      .Case<qat::TransposeOp>(
          [&](auto o) { return lowerTranspose(o, o.getInput(), o.getPerm()); })
      .Case<onnx::TransposeOp>(
          [&](auto o) { return lowerTranspose(o, o.getData(), o.getPerm()); })
      .Case<qat::SliceOp>([&](auto o) {
        return lowerSlice(o, o.getInput(), o.getStarts(), o.getSteps());
      })
      .Case<onnx::SliceOp>([&](auto o) {
        return lowerSlice(o, o.getData(), o.getStarts(), o.getSteps());
      })
      .Case<onnx::BatchNormalizationOp>(
          [&](auto o) { return lowerBatchNorm(o); })
      .Case<onnx::SoftmaxOp>([&](auto o) { return lowerSoftmax(o); })
      .Case<onnx::LayerNormalizationOp>(
          [&](auto o) { return lowerLayerNorm(o); })
      .Case<onnx::PowOp>([&](auto o) { return lowerPow(o); })
      .Case<onnx::AddOp, onnx::SubOp, onnx::MulOp, onnx::DivOp, onnx::ModOp,
            onnx::MaxOp, onnx::MinOp>([&](Operation *o) -> LogicalResult {
        if (!isIntegerValue(o->getResult(0)))
          return lowerPointwise(o);
        // Integer arithmetic on indices, in int64 (ONNX Div
        // truncates, Mod without fmod takes the divisor's sign).
        bool fmod = false;
        if (auto m = dyn_cast<onnx::ModOp>(o))
          fmod = m.getFmod() != 0;
        return lowerIntMap(
            o, {intSrcOf(o->getOperand(0)), intSrcOf(o->getOperand(1))},
            "int-" + o->getName().stripDialect().lower(),
            [o, fmod](KB &k, ArrayRef<Value> v) -> Value {
              OpBuilder &b = k.b;
              Value x = v[0], y = v[1];
              if (isa<onnx::AddOp>(o))
                return b.create<arith::AddIOp>(k.loc, x, y);
              if (isa<onnx::SubOp>(o))
                return b.create<arith::SubIOp>(k.loc, x, y);
              if (isa<onnx::MulOp>(o))
                return b.create<arith::MulIOp>(k.loc, x, y);
              if (isa<onnx::MaxOp>(o))
                return b.create<arith::MaxSIOp>(k.loc, x, y);
              if (isa<onnx::MinOp>(o))
                return b.create<arith::MinSIOp>(k.loc, x, y);
              // Division by 0 (and by -1, for Mod) gives 0, as
              // the reference.
              Value zero = k.c(0);
              Value bad = b.create<arith::CmpIOp>(
                  k.loc, arith::CmpIPredicate::eq, y, zero);
              if (isa<onnx::ModOp>(o))
                bad = b.create<arith::OrIOp>(
                    k.loc, bad,
                    b.create<arith::CmpIOp>(k.loc, arith::CmpIPredicate::eq, y,
                                            k.c(-1)));
              Value safe = k.select(bad, k.c(1), y);
              if (isa<onnx::DivOp>(o))
                return k.select(bad, zero,
                                b.create<arith::DivSIOp>(k.loc, x, safe));
              Value r = b.create<arith::RemSIOp>(k.loc, x, safe);
              if (!fmod) {
                // r != 0 and sign(r) != sign(y): r + y.
                Value rneg = b.create<arith::CmpIOp>(
                    k.loc, arith::CmpIPredicate::slt, r, zero);
                Value yneg = b.create<arith::CmpIOp>(
                    k.loc, arith::CmpIPredicate::slt, safe, zero);
                Value nz = b.create<arith::CmpIOp>(
                    k.loc, arith::CmpIPredicate::ne, r, zero);
                Value differ = b.create<arith::AndIOp>(
                    k.loc, nz, b.create<arith::XOrIOp>(k.loc, rneg, yneg));
                r = k.select(differ, b.create<arith::AddIOp>(k.loc, r, safe),
                             r);
              }
              return k.select(bad, zero, r);
            });
      })
      .Case<onnx::SplitOp>([&](onnx::SplitOp o) -> LogicalResult {
        // Every piece is a slice view of the input.
        int in = tensorOf(o.getInput());
        int64_t rank = cast<ShapedType>(o.getInput().getType()).getRank(),
                axis = static_cast<int64_t>(o.getAxis());
        if (axis < 0)
          axis += rank;
        std::vector<int64_t> st = stridesOf(tensors[in]);
        int64_t base = tensors[in].view ? tensors[in].vbase : 0;
        for (Value r : o.getResults()) {
          makeView(in, r, st, base);
          base += cast<ShapedType>(r.getType()).getDimSize(axis) * st[axis];
        }
        return success();
      })
      .Case<onnx::IdentityOp>([&](auto o) {
        valueTensor[o->getResult(0)] = tensorOf(o->getOperand(0));
        return success();
      })
      .Case<onnx::SqueezeOp, onnx::UnsqueezeOp>(
          [&](Operation *o) { return lowerReshape(o, o->getOperand(0)); })
      .Case<qat::ReshapeOp>([&](auto o) {
        if (auto r = tryZeroInsertion(o))
          return *r;
        return lowerReshape(o, o.getInput());
      })
      .Case<onnx::FlattenOp>(
          [&](auto o) { return lowerReshape(o, o.getInput()); })
      .Case<onnx::ReshapeOp>([&](auto o) {
        if (auto r = tryZeroInsertion(o))
          return *r;
        return lowerReshape(o, o.getData());
      })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace qatc::codegen::lowering
