//===- StridedKernels.cpp - elementwise, movement and reduction loops -----===//
//
// Every op that is not a convolution or a matrix product is a loop nest over
// an index space whose operands are addressed by per-dimension element
// strides: elementwise math with numpy broadcasting (stride 0), layout
// changes, transposes and slices (permuted / scaled strides), concatenation
// (a box of the result), reductions. One emitter serves them all, so a new
// op is a stride computation and a scalar body, and LLVM vectorizes the
// innermost loop where its strides are 0 or 1.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>
#include <functional>
#include <numeric>

using namespace mlir;
using namespace qatc::codegen;

namespace {

/// The loop nest of a map after normalization: unit dimensions dropped,
/// dimensions ordered by the result's stride (the innermost the densest) and
/// neighbours merged where every operand walks them as one.
struct Nest {
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> strides; ///< [operand][dim]; 0 = result
  /// The innermost dimension is not the result's densest but one an input
  /// reads contiguously (normalize): the result's outermost in memory, so
  /// the threads share it (InnerSplit), not the outer dimensions.
  bool rotated = false;
};

Nest normalize(const std::vector<int64_t> &shape,
               const std::vector<const StridedOperand *> &ops) {
  size_t rank = shape.size();
  std::vector<size_t> dims;
  for (size_t d = 0; d < rank; ++d)
    if (shape[d] != 1)
      dims.push_back(d);
  // Outer to inner by the result's stride; stable, so equal strides keep the
  // logical order.
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) {
    return ops[0]->strides[a] > ops[0]->strides[b];
  });
  Nest n;
  n.strides.resize(ops.size());
  for (size_t d : dims) {
    bool merge = !n.shape.empty();
    for (size_t o = 0; merge && o < ops.size(); ++o)
      merge = n.strides[o].back() == ops[o]->strides[d] * shape[d];
    if (merge) {
      n.shape.back() *= shape[d];
      for (size_t o = 0; o < ops.size(); ++o)
        n.strides[o].back() = ops[o]->strides[d];
      continue;
    }
    n.shape.push_back(shape[d]);
    for (size_t o = 0; o < ops.size(); ++o)
      n.strides[o].push_back(ops[o]->strides[d]);
  }
  if (n.shape.empty()) {
    n.shape.push_back(1);
    for (auto &s : n.strides)
      s.push_back(0);
  }
  // A short innermost dimension (the 3 channels of an NHWC image) makes a
  // loop of a few iterations under a full index computation: walk a long
  // dimension that an input reads contiguously innermost instead (a plain
  // NCHW image's pixels).
  size_t nr = n.shape.size();
  if (nr >= 2 && n.shape.back() < 16) {
    size_t best = nr;
    for (size_t d = 0; d + 1 < nr; ++d) {
      bool contiguous = false;
      for (size_t o = 1; o < n.strides.size(); ++o)
        contiguous |= n.strides[o][d] == 1;
      if (contiguous && n.shape[d] >= 16 &&
          (best == nr || n.shape[d] > n.shape[best]))
        best = d;
    }
    if (best != nr) {
      auto rotate = [&](std::vector<int64_t> &v) {
        std::rotate(v.begin() + best, v.begin() + best + 1, v.end());
      };
      rotate(n.shape);
      for (auto &s : n.strides)
        rotate(s);
      n.rotated = true;
    }
  }
  return n;
}

Value address(KB &k, const StridedOperand &op, Value elementIndex) {
  int64_t first = op.byteOffset + op.offset * op.elemBytes;
  return op.inWeights ? k.weightsAt(first, elementIndex, op.elemBytes)
                      : k.at(first, elementIndex, op.elemBytes);
}

Type elementType(KB &k, const StridedOperand &op) {
  if (op.elemBytes == 1)
    return k.i8;
  if (op.isInt)
    return op.elemBytes == 8 ? k.i64 : k.i32;
  return k.f32;
}

/// Runs `body(base index of operand o)` for every outer iteration of the
/// nest (all dimensions but the innermost), shared by the threads.
/// With `chunks` > 1 every outer iteration is split further into that many
/// pieces of the innermost dimension, `body(bases, piece)`; in a rotated
/// nest the pieces are outermost, so each thread takes a range of them
/// across every outer iteration (InnerSplit).
void walkOuter(KB &k, const Nest &n, int64_t chunks,
               llvm::function_ref<void(ArrayRef<Value>, Value)> body) {
  size_t rank = n.shape.size(), count = n.strides.size();
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < rank; ++d)
    outer *= n.shape[d];
  auto [b0, e0] = k.share(outer * chunks);
  const bool piecesOutermost = n.rotated && chunks > 1 && outer > 1;
  k.sharedLoop(b0, e0, [&](Value i) {
    Value piece = chunks == 1       ? k.c(0)
                  : piecesOutermost ? k.div(i, k.c(outer))
                                    : k.rem(i, k.c(chunks));
    // Decompose the flat outer index (constant divisors) into operand bases.
    SmallVector<Value> base(count, k.c(0));
    Value rest = chunks == 1       ? i
                 : piecesOutermost ? k.rem(i, k.c(outer))
                                   : k.div(i, k.c(chunks));
    for (size_t d = rank - 1; d-- > 0;) {
      Value idx = d == 0 ? rest : k.rem(rest, k.c(n.shape[d]));
      if (d > 0)
        rest = k.div(rest, k.c(n.shape[d]));
      for (size_t o = 0; o < count; ++o)
        if (n.strides[o][d])
          base[o] = k.add(base[o], k.mul(idx, k.c(n.strides[o][d])));
    }
    body(base, piece);
  });
}

/// How a nest's innermost dimension is cut for the threads: `pieces` runs
/// of `length` elements (the last one shorter). Where the outer iterations
/// are few (a dense elementwise map normalizes to a single dimension), they
/// alone would give every element to one thread: `share` hands the only
/// item to the last. The runs are multiples of `align` elements (64: whole
/// cache lines of int8 and f32 results per thread), at least `minRun`
/// long, and follow the memory order, so each thread gets the pixels the
/// layers around it give it (ShuffleNetV2 on 2 threads: thread 1 quantized
/// every tensor, then each core read the other's halves).
struct InnerSplit {
  int64_t pieces = 1, length = 0;

  InnerSplit(const Nest &n, int64_t minRun = 256, int64_t align = 64) {
    int64_t outer = 1;
    for (size_t d = 0; d + 1 < n.shape.size(); ++d)
      outer *= n.shape[d];
    length = n.shape.back();
    constexpr int64_t items = 16;
    minRun = std::max<int64_t>(minRun, align);
    // A rotated nest's outer iterations interleave in the result (the
    // channels of each NHWC pixel): shared among the threads, every line
    // of the result would be written by all of them. Its innermost
    // dimension (the pixels) is cut instead, whatever the outer count: a
    // [1, 8, 64, 64] NCHW input made NHWC took 2 threads 0.31 ms against 1
    // thread's 0.008 (Zen 5), its threads writing halves of the same lines.
    if ((outer >= items && !n.rotated) || length < 2 * minRun)
      return;
    int64_t want = std::min(n.rotated ? items : (items + outer - 1) / outer,
                            length / minRun);
    length = ((length + want - 1) / want + align - 1) / align * align;
    pieces = (n.shape.back() + length - 1) / length;
  }

  /// This piece's range [lo, hi) of the innermost index, hi at most `end`.
  std::pair<Value, Value> range(KB &k, Value piece, int64_t end) const {
    if (pieces == 1)
      return {k.c(0), k.c(end)};
    Value lo = k.mul(piece, k.c(length));
    return {lo, k.b.create<arith::MinSIOp>(k.loc, k.add(lo, k.c(length)),
                                           k.c(end))};
  }
};

/// Runs `body(index of operand o)` over the nest: threads share the outer
/// iterations (and pieces of the innermost, `split`), the innermost is a
/// plain counted loop.
void walk(KB &k, const Nest &n, const InnerSplit &split,
          llvm::function_ref<void(ArrayRef<Value>)> body) {
  size_t rank = n.shape.size(), count = n.strides.size();
  walkOuter(k, n, split.pieces, [&](ArrayRef<Value> base, Value piece) {
    auto [lo, hi] = split.range(k, piece, n.shape[rank - 1]);
    k.loop(lo, hi, 1, [&](Value j) {
      SmallVector<Value> index;
      for (size_t o = 0; o < count; ++o)
        index.push_back(
            n.strides[o][rank - 1]
                ? k.add(base[o], k.mul(j, k.c(n.strides[o][rank - 1])))
                : base[o]);
      body(index);
    });
  });
}

} // namespace

namespace {

/// emitStridedMap with the innermost loop 16 elements at a time. With
/// AVX-512 the remainder is one more step under a mask; else it runs
/// `element(index of operand o)` one at a time.
///
/// Where the result's innermost stride is 2 to 4 and the next dimension out
/// has 2 to that many values at stride 1 (an RGB image read from NCHW
/// planes into NHWC floats, or int8 bytes 4 apart; the 2 groups of
/// ShuffleNet's channel shuffle), one step computes all of them and
/// interleaves them in registers into one store: 16 pixels of an RGB image
/// are 3 loads and 48 floats stored, where storing each result alone took
/// 16 extracts and scalar stores per vector (0.074 ms of a 224x224 image).
/// The threads then share pixels, not planes: each writes whole lines of
/// the result (sharing the planes, both wrote every line of the quantized
/// image, and 2 threads took as long as 1).
void emitLaneMap(KB &k, const StridedMap &m, const Nest &n, const ElementFn &fn,
                 llvm::function_ref<void(ArrayRef<Value>)> element) {
  constexpr int64_t lanes = 16;
  size_t rank = n.shape.size(), count = n.strides.size();
  int64_t len = n.shape[rank - 1], full = len / lanes * lanes;
  int64_t outStride = n.strides[0][rank - 1];
  auto opAt = [&](size_t o) -> const StridedOperand & {
    return o == 0 ? m.out : m.ins[o - 1];
  };
  // `planes` of them: fewer than the stride where the result's channels
  // are padded (3 channels of NHWC int8 data stored 4 apart); the slots
  // past them are masked off.
  const int64_t planes = rank >= 2 ? n.shape[rank - 2] : 0;
  const bool weave = k.avx512 && rank >= 2 && outStride >= 2 &&
                     outStride <= 4 && planes >= 2 && planes <= outStride &&
                     n.strides[0][rank - 2] == 1;
  // The interleaved dimension is walked inside a step, not around it.
  Nest outer = n;
  std::vector<int64_t> weaveStrides(count, 0);
  if (weave) {
    outer.shape.erase(outer.shape.end() - 2);
    for (size_t o = 0; o < count; ++o) {
      weaveStrides[o] = n.strides[o][rank - 2];
      outer.strides[o].erase(outer.strides[o].end() - 2);
    }
  }
  const size_t inner = outer.shape.size() - 1;
  InnerSplit split(outer);
  // A constant mask of the slots set in `slots`.
  auto slotMask = [&](ArrayRef<bool> slots) -> Value {
    auto type =
        VectorType::get({static_cast<int64_t>(slots.size())}, k.b.getI1Type());
    return k.b.create<arith::ConstantOp>(k.loc, type,
                                         DenseElementsAttr::get(type, slots));
  };
  walkOuter(k, outer, split.pieces, [&](ArrayRef<Value> base, Value piece) {
    auto indexAt = [&](size_t o, Value j) {
      int64_t st = outer.strides[o][inner];
      return st ? k.add(base[o], k.mul(j, k.c(st))) : base[o];
    };
    // Results [j, j + active) of the innermost dimension (active <= 16,
    // known when emitting: a mask of the first `active` lanes below 16).
    auto step = [&](Value j, int64_t active) {
      Value mask = active < lanes ? k.prefixMask(lanes, k.c(active)) : Value();
      SmallVector<Value> results;
      for (int64_t w = 0; w < (weave ? planes : 1); ++w) {
        SmallVector<Value> loaded;
        for (size_t o = 1; o < count; ++o) {
          const StridedOperand &op = opAt(o);
          Type elt = elementType(k, op);
          int64_t st = outer.strides[o][inner];
          Value first = k.add(indexAt(o, j), k.c(w * weaveStrides[o]));
          if (st == 0) {
            loaded.push_back(
                k.splat(k.load(elt, address(k, op, first)), lanes));
            continue;
          }
          auto vt = VectorType::get({lanes}, elt);
          Value zero =
              k.b.create<arith::ConstantOp>(k.loc, k.b.getZeroAttr(vt));
          if (st == 1) {
            Value at = address(k, op, first);
            loaded.push_back(mask ? k.maskedLoad(vt, at, mask, zero)
                                  : k.load(vt, at));
            continue;
          }
          // Lanes past `active` stay 0: no load outside the operand.
          Value v = zero;
          for (int64_t l = 0; l < active; ++l)
            v = k.b.create<vector::InsertOp>(
                k.loc, k.load(elt, address(k, op, k.add(first, k.c(l * st)))),
                v, l);
          loaded.push_back(v);
        }
        results.push_back(fn(loaded));
      }
      Value y = results[0];
      Value first = indexAt(0, j);
      if (weave) {
        // Lane l of result w goes to slot outStride * l + w; slots of no
        // plane take zeros, under the mask.
        while (static_cast<int64_t>(results.size()) < outStride)
          results.push_back(k.b.create<arith::ConstantOp>(
              k.loc, k.b.getZeroAttr(y.getType())));
        Value all = k.concat(results);
        SmallVector<int64_t> order;
        for (int64_t l = 0; l < lanes; ++l)
          for (int64_t w = 0; w < outStride; ++w)
            order.push_back(w * lanes + l);
        Value woven = k.b.create<vector::ShuffleOp>(k.loc, all, all, order);
        Value at = address(k, m.out, first);
        if (active == lanes && planes == outStride) {
          k.store(woven, at);
          return;
        }
        SmallVector<bool> slots(lanes * outStride, false);
        for (int64_t l = 0; l < active; ++l)
          for (int64_t w = 0; w < planes; ++w)
            slots[l * outStride + w] = true;
        k.maskedStore(woven, at, slotMask(slots));
        return;
      }
      if (outStride == 1) {
        if (mask)
          k.maskedStore(y, address(k, m.out, first), mask);
        else
          k.store(y, address(k, m.out, first));
        return;
      }
      if (k.avx512 && !m.out.isInt &&
          (m.out.elemBytes == 1 || m.out.elemBytes == 4) &&
          (outStride == 2 || outStride == 4)) {
        // Results 2 or 4 apart (bytes: NHWC int8 data of a few channels;
        // floats: a strided slice) spread into their slots in registers,
        // then one store under a mask of the slots (AVX-512).
        OpBuilder &b = k.b;
        int64_t st = outStride;
        SmallVector<bool> slots(lanes * st, false);
        for (int64_t l = 0; l < active; ++l)
          slots[l * st] = true;
        Value wide;
        if (m.out.elemBytes == 1) {
          // Each byte widened to its slot.
          Type wideElem = st == 2 ? b.getI16Type() : k.i32;
          Value w = b.create<arith::ExtUIOp>(
              k.loc, VectorType::get({lanes}, wideElem), y);
          wide = b.create<vector::BitCastOp>(
              k.loc, VectorType::get({lanes * st}, k.i8), w);
        } else {
          SmallVector<int64_t> order(lanes * st, lanes);
          for (int64_t l = 0; l < lanes; ++l)
            order[l * st] = l;
          wide = b.create<vector::ShuffleOp>(k.loc, y, k.splatF(0.f, lanes),
                                             order);
        }
        k.maskedStore(wide, address(k, m.out, first), slotMask(slots));
        return;
      }
      for (int64_t l = 0; l < active; ++l)
        k.store(k.b.create<vector::ExtractOp>(k.loc, y, l),
                address(k, m.out, k.add(first, k.c(l * outStride))));
    };
    // Pieces are whole vectors (multiples of 64): the remainder after
    // `full` is the last piece's.
    auto [lo, hi] = split.range(k, piece, full);
    k.loop(lo, hi, lanes, [&](Value j) { step(j, lanes); });
    if (full == len)
      return;
    if (k.avx512) {
      if (split.pieces == 1)
        step(k.c(full), len - full);
      else
        k.ifElse(
            k.b.create<arith::CmpIOp>(k.loc, arith::CmpIPredicate::eq, piece,
                                      k.c(split.pieces - 1)),
            [&] { step(k.c(full), len - full); }, nullptr);
      return;
    }
    Value rest =
        split.pieces == 1
            ? k.c(full)
            : k.select(k.lt(piece, k.c(split.pieces - 1)), k.c(len), k.c(full));
    k.loop(rest, k.c(len), 1, [&](Value j) {
      SmallVector<Value> index;
      for (size_t o = 0; o < count; ++o)
        index.push_back(indexAt(o, j));
      element(index);
    });
  });
}

} // namespace

void qatc::codegen::emitStridedMap(KB &k, const StridedMap &m,
                                   const ElementFn &fn) {
  std::vector<const StridedOperand *> ops = {&m.out};
  for (const StridedOperand &in : m.ins)
    ops.push_back(&in);
  Nest n = normalize(m.shape, ops);
  // A copy (no `fn`) is lane-safe: its body is the loaded value.
  ElementFn copy = [](ArrayRef<Value> v) { return v[0]; };
  bool lanesOk = (m.lanes || !fn) && n.shape.back() >= 16 && !m.out.isInt;
  for (const StridedOperand &in : m.ins)
    lanesOk &= !in.isInt;
  auto element = [&](ArrayRef<Value> index) {
    SmallVector<Value> loaded;
    for (size_t i = 0; i < m.ins.size(); ++i)
      loaded.push_back(
          k.load(elementType(k, m.ins[i]), address(k, m.ins[i], index[i + 1])));
    k.store(fn ? fn(loaded) : loaded[0], address(k, m.out, index[0]));
  };
  if (lanesOk)
    return emitLaneMap(k, m, n, fn ? fn : copy, element);
  walk(k, n, InnerSplit(n), element);
}

namespace {

/// The reduction of 16 neighbouring results at once: when the innermost
/// kept dimension is contiguous in the input and the result (channels of an
/// NHWC mean), each lane accumulates one result over the reduced index space
/// in the same order as the scalar loop, so the sums are the same bits.
bool emitLaneReduce(KB &k, const StridedReduce &r, const Nest &n,
                    const Nest &rn, const ElementFn &combine,
                    const ElementFn &finish) {
  size_t rank = n.shape.size();
  int64_t inner = n.shape[rank - 1];
  if (n.strides[0][rank - 1] != 1 || n.strides[1][rank - 1] != 1 || inner < 8 ||
      r.in.isInt || (r.in.elemBytes != 4 && r.in.elemBytes != 1))
    return false;
  const int64_t lanes = 16;
  Type inElem = r.in.elemBytes == 1 ? k.i8 : k.f32;
  // Up to 4 blocks of 16 results side by side: as many independent chains
  // of adds, each still in index order (one chain is bound by the add's
  // latency). A block past the last result has an empty mask.
  const int64_t blocks = (inner + lanes - 1) / lanes;
  const int64_t group = std::min<int64_t>(4, blocks);
  walkOuter(
      k, n, (blocks + group - 1) / group,
      [&](ArrayRef<Value> base, Value piece) {
        auto vt = VectorType::get({lanes}, inElem);
        Value zero = r.in.elemBytes == 1 ? k.splatI(0, lanes, k.i8)
                                         : k.splatF(0.f, lanes);
        SmallVector<Value> c0, mask;
        for (int64_t g = 0; g < group; ++g) {
          c0.push_back(
              k.mul(k.add(k.mul(piece, k.c(group)), k.c(g)), k.c(lanes)));
          mask.push_back(k.prefixMask(lanes, k.sub(k.c(inner), c0.back())));
        }
        // One loop per reduced dimension, outer to inner (index order).
        std::function<SmallVector<Value>(size_t, Value, ValueRange)> over =
            [&](size_t d, Value off, ValueRange acc) -> SmallVector<Value> {
          SmallVector<Value> next;
          if (d == rn.shape.size()) {
            for (int64_t g = 0; g < group; ++g) {
              Value at = k.add(k.add(base[1], c0[g]), off);
              Value x = k.maskedLoad(vt, address(k, r.in, at), mask[g], zero);
              next.push_back(combine({acc[g], x}));
            }
            return next;
          }
          return k.loop(k.c(0), k.c(rn.shape[d]), 1, acc,
                        [&](Value j, ValueRange a) -> SmallVector<Value> {
                          return over(
                              d + 1,
                              k.add(off, k.mul(j, k.c(rn.strides[0][d]))), a);
                        });
        };
        Value init = k.splatF(r.init, lanes);
        SmallVector<Value> acc =
            over(0, k.c(0), SmallVector<Value>(group, init));
        for (int64_t g = 0; g < group; ++g)
          k.maskedStore(finish ? finish({acc[g]}) : acc[g],
                        address(k, r.out, k.add(base[0], c0[g])), mask[g]);
      });
  return true;
}

} // namespace

void qatc::codegen::emitStridedReduce(KB &k, const StridedReduce &r,
                                      const ElementFn &combine,
                                      const ElementFn &finish) {
  Nest n = normalize(r.shape, {&r.out, &r.in});
  // The reduced dimensions, innermost last, as one flat counted loop.
  StridedOperand red;
  red.strides = r.reduceStrides;
  Nest rn = normalize(r.reduceShape, {&red});
  if (emitLaneReduce(k, r, n, rn, combine, finish))
    return;
  int64_t total = std::accumulate(rn.shape.begin(), rn.shape.end(), int64_t(1),
                                  std::multiplies<int64_t>());
  // Each result reads `total` elements: runs of 16 results (a line of f32)
  // are worth sharing from 256 elements read.
  InnerSplit split(n, 256 / std::max<int64_t>(1, total), 16);
  walk(k, n, split, [&](ArrayRef<Value> index) {
    SmallVector<Value> acc =
        k.loop(k.c(0), k.c(total), 1, ValueRange{k.cf(r.init)},
               [&](Value t, ValueRange a) -> SmallVector<Value> {
                 Value off = k.c(0), rest = t;
                 for (size_t d = rn.shape.size(); d-- > 0;) {
                   Value idx = d == 0 ? rest : k.rem(rest, k.c(rn.shape[d]));
                   if (d > 0)
                     rest = k.div(rest, k.c(rn.shape[d]));
                   off = k.add(off, k.mul(idx, k.c(rn.strides[0][d])));
                 }
                 Value v = k.load(elementType(k, r.in),
                                  address(k, r.in, k.add(index[1], off)));
                 return {combine({a[0], v})};
               });
    k.store(finish ? finish({acc[0]}) : acc[0], address(k, r.out, index[0]));
  });
}

namespace {

/// The dimensions of a gather-like nest, outer to inner by the result's
/// stride (unit dimensions dropped); the innermost is the contiguous loop.
std::vector<size_t> gatherOrder(const std::vector<int64_t> &shape,
                                const StridedOperand &out) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1)
      dims.push_back(d);
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) {
    return out.strides[a] > out.strides[b];
  });
  if (dims.empty())
    dims.push_back(0);
  return dims;
}

/// Walks `dims` of `shape` (threads share all but the innermost). For each
/// outer index `hoist(coords)` runs once (the innermost coordinate is 0
/// there) and returns values the inner loop reuses; `body(coords, hoisted)`
/// runs for every element. Dimensions not walked have coordinate 0.
void walkCoords(
    KB &k, const std::vector<int64_t> &shape, const std::vector<size_t> &dims,
    llvm::function_ref<SmallVector<Value>(ArrayRef<Value>)> hoist,
    llvm::function_ref<void(ArrayRef<Value>, ArrayRef<Value>)> body) {
  int64_t outer = 1;
  for (size_t i = 0; i + 1 < dims.size(); ++i)
    outer *= shape[dims[i]];
  auto [b0, e0] = k.share(outer);
  k.sharedLoop(b0, e0, [&](Value flat) {
    SmallVector<Value> coords(shape.size(), k.c(0));
    Value rest = flat;
    for (size_t i = dims.size() - 1; i-- > 0;) {
      size_t d = dims[i];
      coords[d] = i == 0 ? rest : k.rem(rest, k.c(shape[d]));
      if (i > 0)
        rest = k.div(rest, k.c(shape[d]));
    }
    SmallVector<Value> hoisted = hoist(coords);
    size_t inner = dims.back();
    k.loop(k.c(0), k.c(shape[inner]), 1, [&](Value j) {
      coords[inner] = j;
      body(coords, hoisted);
    });
  });
}

} // namespace

void qatc::codegen::emitGatherMap(KB &k, const GatherMap &m) {
  std::vector<size_t> dims = gatherOrder(m.shape, m.out);
  size_t inner = dims.back();
  Type elt = elementType(k, m.in);
  // The source offset of dimension d at coordinate c.
  auto offsetOf = [&](size_t d, Value c) -> Value {
    if (m.tables[d] >= 0)
      return k.load(k.i64, k.weightsAt(m.tables[d], c, 8));
    return m.in.strides[d] ? k.mul(c, k.c(m.in.strides[d])) : k.c(0);
  };
  walkCoords(
      k, m.shape, dims,
      [&](ArrayRef<Value> coords) -> SmallVector<Value> {
        // Every dimension but the innermost, once per outer index.
        Value src = k.c(0), dst = k.c(0);
        for (size_t d = 0; d < m.shape.size(); ++d) {
          if (d == inner)
            continue;
          src = k.add(src, offsetOf(d, coords[d]));
          if (m.out.strides[d])
            dst = k.add(dst, k.mul(coords[d], k.c(m.out.strides[d])));
        }
        return {src, dst};
      },
      [&](ArrayRef<Value> coords, ArrayRef<Value> h) {
        Value src = k.add(h[0], offsetOf(inner, coords[inner]));
        Value dst = address(
            k, m.out,
            k.add(h[1], k.mul(coords[inner], k.c(m.out.strides[inner]))));
        if (!m.hasFill) {
          k.store(k.load(elt, address(k, m.in, src)), dst);
          return;
        }
        // Padding: some table gave a negative offset; read element 0
        // instead and store the fill value.
        Value pad = k.b.create<arith::CmpIOp>(k.loc, arith::CmpIPredicate::slt,
                                              src, k.c(0));
        Value v = k.load(elt, address(k, m.in, k.select(pad, k.c(0), src)));
        Value fill =
            m.in.elemBytes == 1
                ? k.b.create<arith::ConstantIntOp>(k.loc, m.fillStored, 8)
                      .getResult()
                : k.cf(m.fill);
        k.store(k.select(pad, fill, v), dst);
      });
}

void qatc::codegen::emitLerpAxis(KB &k, const LerpAxis &m,
                                 const ElementFn &fn) {
  std::vector<size_t> dims = gatherOrder(m.shape, m.out);
  size_t inner = dims.back();
  Type elt = elementType(k, m.in);
  Type f64 = k.b.getF64Type();
  // Offsets of the input (all but the interpolated axis) and the output.
  auto offsets = [&](ArrayRef<Value> coords, size_t skip) {
    Value in = k.c(0), out = k.c(0);
    for (size_t d = 0; d < m.shape.size(); ++d) {
      if (d == skip)
        continue;
      if (d != m.axis && m.in.strides[d])
        in = k.add(in, k.mul(coords[d], k.c(m.in.strides[d])));
      if (m.out.strides[d])
        out = k.add(out, k.mul(coords[d], k.c(m.out.strides[d])));
    }
    return SmallVector<Value>{in, out};
  };
  walkCoords(
      k, m.shape, dims,
      [&](ArrayRef<Value> coords) { return offsets(coords, inner); },
      [&](ArrayRef<Value> coords, ArrayRef<Value> h) {
        // Only the innermost coordinate changes here: add its terms.
        SmallVector<Value> part = {h[0], h[1]};
        Value ci = coords[inner];
        if (inner != m.axis && m.in.strides[inner])
          part[0] = k.add(part[0], k.mul(ci, k.c(m.in.strides[inner])));
        if (m.out.strides[inner])
          part[1] = k.add(part[1], k.mul(ci, k.c(m.out.strides[inner])));
        Value j = coords[m.axis];
        SmallVector<Value> xs, ws;
        for (int t = 0; t < m.taps; ++t) {
          Value idx = k.add(k.mul(j, k.c(m.taps)), k.c(t));
          Value off = k.load(k.i64, k.weightsAt(m.tapOff, idx, 8));
          ws.push_back(k.load(f64, k.weightsAt(m.weightOff, idx, 8)));
          xs.push_back(k.load(elt, address(k, m.in, k.add(part[0], off))));
        }
        xs.append(ws.begin(), ws.end());
        Value y = fn(xs);
        k.store(y, address(k, m.out, part[1]));
      });
}
