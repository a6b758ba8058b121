//===- MovementKernels.cpp - data movement and resizing -------------------===//
//
// Concat, Split, Slice, Transpose, Gather and Pad move bytes and work on any
// element type. Resize applies its 1-D interpolation along each axis in turn
// (interpolation is separable), following the ONNX definitions of the
// coordinate transformations, nearest modes and the cubic kernel.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "qatc/Dialect/Qat/QatOps.h"
#include "qatc/Reference/Evaluator.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace qatc::ref;
namespace onnx = qatc::onnx;

namespace {

int64_t product(ArrayRef<int64_t> v) {
  int64_t n = 1;
  for (int64_t d : v)
    n *= d;
  return n;
}

} // namespace

template <typename OpTy>
Results qatc::ref::evalConcat(OpTy op, ArrayRef<Tensor> in,
                              const KernelContext &) {
  Tensor out(in[0].dtype(), resultShape(op));
  int64_t axis = static_cast<int64_t>(op.getAxis());
  int64_t outer = product(out.shape().take_front(axis));
  size_t elt = dtypeSize(out.dtype());
  int64_t outBlock = product(out.shape().drop_front(axis)) * elt;
  char *dst = out.mutableData<char>();
  int64_t offset = 0;
  for (const Tensor &t : in) {
    int64_t block = product(t.shape().drop_front(axis)) * elt;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * outBlock + offset, t.bytes() + o * block, block);
    offset += block;
  }
  return one(std::move(out));
}

Results qatc::ref::evalSplit(onnx::SplitOp op, ArrayRef<Tensor> in,
                             const KernelContext &) {
  const Tensor &x = in[0];
  int64_t axis = static_cast<int64_t>(op.getAxis());
  int64_t outer = product(x.shape().take_front(axis));
  size_t elt = dtypeSize(x.dtype());
  int64_t inBlock = product(x.shape().drop_front(axis)) * elt;
  SmallVector<Tensor, 1> results;
  int64_t offset = 0;
  for (unsigned i = 0; i < op->getNumResults(); ++i) {
    Tensor t(x.dtype(), resultShape(op, i));
    int64_t block = product(t.shape().drop_front(axis)) * elt;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(t.mutableData<char>() + o * block,
                  x.bytes() + o * inBlock + offset, block);
    offset += block;
    results.push_back(std::move(t));
  }
  return results;
}

template <typename OpTy>
Results qatc::ref::evalSlice(OpTy op, ArrayRef<Tensor> in,
                             const KernelContext &) {
  const Tensor &x = in[0];
  Tensor out(x.dtype(), resultShape(op));
  size_t elt = dtypeSize(x.dtype());
  auto inStrides = stridesOf(x.shape());
  ArrayRef<int64_t> shape = out.shape();
  int64_t rank = x.rank();
  SmallVector<int64_t> idx(rank, 0);
  char *dst = out.mutableData<char>();
  for (int64_t i = 0, n = out.numElements(); i < n; ++i) {
    int64_t src = 0;
    for (int64_t d = 0; d < rank; ++d)
      src += (op.getStarts()[d] + idx[d] * op.getSteps()[d]) * inStrides[d];
    std::memcpy(dst + i * elt, x.bytes() + src * elt, elt);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return one(std::move(out));
}

namespace {
Tensor stridedCopy(const Tensor &x, ArrayRef<int64_t> shape,
                   ArrayRef<int64_t> srcStride);
} // namespace

template <typename OpTy>
Results qatc::ref::evalTranspose(OpTy op, ArrayRef<Tensor> in,
                                 const KernelContext &) {
  // Output dimension d walks input dimension perm[d].
  const Tensor &x = in[0];
  auto inStrides = stridesOf(x.shape());
  SmallVector<int64_t> srcStride;
  for (int64_t p : op.getPerm())
    srcStride.push_back(inStrides[p]);
  return one(stridedCopy(x, resultShape(op), srcStride));
}

namespace {
/// Element `i` of int32 / int64 `indices`, an index along `axis` of size
/// `dim`: negative ones count from the end, out of range ones are an error.
FailureOr<int64_t> indexAt(Operation *op, const Tensor &indices, int64_t i,
                           int64_t axis, int64_t dim) {
  int64_t idx = indices.dtype() == DType::I64 ? indices.data<int64_t>()[i]
                                              : indices.data<int32_t>()[i];
  if (idx < -dim || idx >= dim)
    return op->emitOpError("index ") << idx << " is out of range for axis "
                                     << axis << " of size " << dim,
           failure();
  return idx < 0 ? idx + dim : idx;
}
} // namespace

template <typename OpTy>
Results qatc::ref::evalGather(OpTy op, ArrayRef<Tensor> in,
                              const KernelContext &) {
  const Tensor &x = in[0], &indices = in[1];
  Tensor out(x.dtype(), resultShape(op));
  int64_t axis = static_cast<int64_t>(op.getAxis());
  int64_t outer = product(x.shape().take_front(axis));
  int64_t dim = x.dim(axis);
  size_t block = product(x.shape().drop_front(axis + 1)) * dtypeSize(x.dtype());
  int64_t count = indices.numElements();
  char *dst = out.mutableData<char>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      auto idx = indexAt(op, indices, j, axis, dim);
      if (failed(idx))
        return failure();
      std::memcpy(dst + (o * count + j) * block,
                  x.bytes() + (o * dim + *idx) * block, block);
    }
  return one(std::move(out));
}

namespace {
Results evalGatherElements(onnx::GatherElementsOp op, ArrayRef<Tensor> in,
                           const KernelContext &) {
  const Tensor &x = in[0], &indices = in[1];
  Tensor out(x.dtype(), indices.shape());
  int64_t axis = static_cast<int64_t>(op.getAxis());
  int64_t dim = x.dim(axis);
  auto xStrides = stridesOf(x.shape());
  auto iStrides = stridesOf(indices.shape());
  size_t es = dtypeSize(x.dtype());
  char *dst = out.mutableData<char>();
  for (int64_t i = 0; i < indices.numElements(); ++i) {
    auto idx = indexAt(op, indices, i, axis, dim);
    if (failed(idx))
      return failure();
    // The element's coordinates, with the axis' replaced by the index.
    int64_t from = 0, rest = i;
    for (size_t d = 0; d < iStrides.size(); ++d) {
      int64_t c = rest / iStrides[d];
      rest %= iStrides[d];
      from += (static_cast<int64_t>(d) == axis ? *idx : c) * xStrides[d];
    }
    std::memcpy(dst + i * es, x.bytes() + from * es, es);
  }
  return one(std::move(out));
}
} // namespace

// The same byte movers serve the onnx ops and their int8 twins in qat.
#define QATC_INSTANTIATE(fn, op)                                               \
  template Results qatc::ref::fn(onnx::op, ArrayRef<Tensor>,                   \
                                 const KernelContext &);                       \
  template Results qatc::ref::fn(qatc::qat::op, ArrayRef<Tensor>,              \
                                 const KernelContext &);
QATC_INSTANTIATE(evalConcat, ConcatOp)
QATC_INSTANTIATE(evalSlice, SliceOp)
QATC_INSTANTIATE(evalTranspose, TransposeOp)
QATC_INSTANTIATE(evalGather, GatherOp)
#undef QATC_INSTANTIATE

Results qatc::ref::evalPad(Operation *op, ArrayRef<Tensor> in,
                           const KernelContext &) {
  const Tensor &x = in[0];
  Tensor out(x.dtype(), resultShape(op));
  size_t elt = dtypeSize(x.dtype());
  int64_t rank = x.rank();
  ArrayRef<int64_t> pads =
      op->getAttrOfType<DenseI64ArrayAttr>("pads").asArrayRef();
  auto modeAttr = op->getAttrOfType<StringAttr>("mode");
  StringRef mode = modeAttr ? modeAttr.getValue() : "constant";
  // The constant, in the tensor's element type (qat.pad: its quantization).
  auto valueAttr = op->getAttrOfType<FloatAttr>("value");
  double value = valueAttr ? valueAttr.getValueAsDouble() : 0.0;
  if (auto q = dyn_cast<quant::UniformQuantizedType>(
          cast<ShapedType>(op->getResult(0).getType()).getElementType()))
    value =
        std::clamp<double>(std::nearbyint(static_cast<float>(value) /
                                          static_cast<float>(q.getScale())) +
                               q.getZeroPoint(),
                           q.getStorageTypeMin(), q.getStorageTypeMax());
  Tensor fill =
      castTensor(Tensor::wrap(DType::F64, {}, &value, nullptr), x.dtype());
  auto inStrides = stridesOf(x.shape());
  ArrayRef<int64_t> shape = out.shape();
  SmallVector<int64_t> idx(rank, 0);
  char *dst = out.mutableData<char>();
  for (int64_t i = 0, n = out.numElements(); i < n; ++i) {
    int64_t src = 0;
    bool inside = true;
    for (int64_t d = 0; d < rank && inside; ++d) {
      int64_t len = x.dim(d);
      int64_t p = idx[d] - pads[d];
      if (p < 0 || p >= len) {
        if (mode == "constant" || len == 0) {
          inside = false;
          break;
        }
        if (mode == "edge") {
          p = std::clamp<int64_t>(p, 0, len - 1);
        } else if (mode == "wrap") {
          p = ((p % len) + len) % len;
        } else { // reflect, possibly several times over
          int64_t period = len > 1 ? 2 * (len - 1) : 1;
          p = ((p % period) + period) % period;
          if (p >= len)
            p = period - p;
        }
      }
      src += p * inStrides[d];
    }
    std::memcpy(dst + i * elt, inside ? x.bytes() + src * elt : fill.bytes(),
                elt);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return one(std::move(out));
}

namespace {

/// Input coordinate of output coordinate `x` along one axis (ONNX Resize
/// coordinate_transformation_mode).
double sourceCoordinate(StringRef mode, double x, double scale, int64_t inLen,
                        int64_t outLen) {
  if (mode == "asymmetric")
    return x / scale;
  if (mode == "align_corners")
    return outLen == 1 ? 0.0
                       : x * static_cast<double>(inLen - 1) /
                             static_cast<double>(outLen - 1);
  if (mode == "pytorch_half_pixel")
    return outLen > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "tf_half_pixel_for_nn")
    return (x + 0.5) / scale;
  if (mode == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(outLen) / (scale * inLen);
    double center = inLen / 2.0;
    double offset = center * (1 - adjustment);
    return offset + (x + 0.5) / scale - 0.5;
  }
  return (x + 0.5) / scale - 0.5; // half_pixel
}

int64_t nearestIndex(StringRef mode, double x) {
  if (mode == "floor")
    return static_cast<int64_t>(std::floor(x));
  if (mode == "ceil")
    return static_cast<int64_t>(std::ceil(x));
  double f = std::floor(x);
  if (x - f == 0.5)
    return static_cast<int64_t>(mode == "round_prefer_ceil" ? f + 1 : f);
  return static_cast<int64_t>(std::round(x));
}

} // namespace

qatc::ref::ResizeTaps qatc::ref::resizeTaps(const ResizeParams &p,
                                            int64_t inLen, int64_t outLen,
                                            double scale) {
  ResizeTaps taps;
  StringRef mode = p.mode;
  double a = p.cubicCoeffA;
  taps.perOutput = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  auto clampIndex = [&](int64_t i) {
    return std::clamp<int64_t>(i, 0, inLen - 1);
  };
  for (int64_t j = 0; j < outLen; ++j) {
    double x = sourceCoordinate(p.coordinateMode, static_cast<double>(j), scale,
                                inLen, outLen);
    if (mode == "nearest") {
      taps.index.push_back(clampIndex(nearestIndex(p.nearestMode, x)));
      taps.weight.push_back(1.0);
      continue;
    }
    double f = std::floor(x), t = x - f;
    auto base = static_cast<int64_t>(f);
    if (mode == "linear") {
      taps.index.push_back(clampIndex(base));
      taps.index.push_back(clampIndex(base + 1));
      taps.weight.push_back(1 - t);
      taps.weight.push_back(t);
      continue;
    }
    // Cubic convolution (Keys) with coefficient a.
    double w[4] = {((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                   ((a + 2) * t - (a + 3)) * t * t + 1,
                   ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                   ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a};
    double sum = 0;
    for (int k = 0; k < 4; ++k) {
      int64_t i = base - 1 + k;
      if (p.excludeOutside && (i < 0 || i >= inLen))
        w[k] = 0;
      sum += w[k];
    }
    for (int k = 0; k < 4; ++k) {
      taps.index.push_back(clampIndex(base - 1 + k));
      taps.weight.push_back(p.excludeOutside && sum != 0 ? w[k] / sum : w[k]);
    }
  }
  return taps;
}

qatc::ref::ResizeParams qatc::ref::ResizeParams::of(Operation *op) {
  ResizeParams p;
  auto str = [&](StringRef name, StringRef dflt) {
    auto a = op->getAttrOfType<StringAttr>(name);
    return a ? a.str() : dflt.str();
  };
  p.mode = str("mode", "nearest");
  p.coordinateMode = str("coordinate_transformation_mode", "half_pixel");
  p.nearestMode = str("nearest_mode", "round_prefer_floor");
  if (auto a = op->getAttrOfType<FloatAttr>("cubic_coeff_a"))
    p.cubicCoeffA = a.getValueAsDouble();
  if (auto a = op->getAttrOfType<IntegerAttr>("exclude_outside"))
    p.excludeOutside = a.getInt() != 0;
  return p;
}

Results qatc::ref::evalResize(Operation *op, ArrayRef<Tensor> in,
                              const KernelContext &) {
  Tensor cur = in[0];
  ArrayRef<int64_t> outShape = resultShape(op);
  ResizeParams params = ResizeParams::of(op);
  ArrayRef<float> scales =
      op->getAttrOfType<DenseF32ArrayAttr>("scales").asArrayRef();
  bool nearest = params.mode == "nearest";
  if (!isFloat(cur.dtype()) && !nearest)
    return op->emitOpError("linear and cubic Resize need a float input"),
           failure();
  size_t elt = dtypeSize(cur.dtype());
  for (int64_t d = 0; d < cur.rank(); ++d) {
    int64_t inLen = cur.dim(d), outLen = outShape[d];
    double scale = scales[d];
    if (inLen == outLen && scale == 1.0 &&
        params.coordinateMode != "tf_half_pixel_for_nn")
      continue;
    ResizeTaps taps = resizeTaps(params, inLen, outLen, scale);
    SmallVector<int64_t> shape(cur.shape());
    shape[d] = outLen;
    Tensor next(cur.dtype(), shape);
    int64_t outer = product(cur.shape().take_front(d));
    int64_t inner = product(cur.shape().drop_front(d + 1));
    if (nearest) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < outLen; ++j)
          std::memcpy(next.mutableData<char>() +
                          ((o * outLen + j) * inner) * elt,
                      cur.bytes() + ((o * inLen + taps.index[j]) * inner) * elt,
                      inner * elt);
    } else {
      dispatchFloat(cur.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T *src = cur.data<T>();
        T *dst = next.mutableData<T>();
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < outLen; ++j)
            for (int64_t i = 0; i < inner; ++i) {
              double acc = 0;
              for (int64_t k = 0; k < taps.perOutput; ++k)
                acc += taps.weight[j * taps.perOutput + k] *
                       src[(o * inLen + taps.index[j * taps.perOutput + k]) *
                               inner +
                           i];
              dst[(o * outLen + j) * inner + i] = static_cast<T>(acc);
            }
      });
    }
    cur = std::move(next);
  }
  return one(std::move(cur));
}

namespace {

/// out[idx] = x[sum(idx[d] * srcStride[d])] over `shape` (element strides
/// of x; 0 broadcasts).
Tensor stridedCopy(const Tensor &x, ArrayRef<int64_t> shape,
                   ArrayRef<int64_t> srcStride) {
  Tensor out(x.dtype(), shape);
  size_t elt = dtypeSize(x.dtype());
  int64_t rank = static_cast<int64_t>(shape.size());
  SmallVector<int64_t> idx(rank, 0);
  char *dst = out.mutableData<char>();
  int64_t src = 0;
  for (int64_t i = 0, n = out.numElements(); i < n; ++i) {
    std::memcpy(dst + i * elt, x.bytes() + src * elt, elt);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        src += srcStride[d];
        break;
      }
      src -= srcStride[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
  return out;
}

/// `x` viewed as `shape` (row-major), permuted by `perm`, as a tensor of
/// `outShape`.
Tensor permuted(const Tensor &x, ArrayRef<int64_t> shape,
                ArrayRef<int64_t> perm, ArrayRef<int64_t> outShape) {
  auto strides = stridesOf(shape);
  SmallVector<int64_t> pshape, pstride;
  for (int64_t p : perm) {
    pshape.push_back(shape[p]);
    pstride.push_back(strides[p]);
  }
  return stridedCopy(x, pshape, pstride).reshaped(outShape);
}

} // namespace

Results qatc::ref::evalExpand(onnx::ExpandOp op, ArrayRef<Tensor> in,
                              const KernelContext &) {
  const Tensor &x = in[0];
  ArrayRef<int64_t> shape = resultShape(op);
  size_t rank = shape.size(), off = rank - x.rank();
  auto strides = stridesOf(x.shape());
  SmallVector<int64_t> src(rank, 0);
  for (size_t d = 0; d < static_cast<size_t>(x.rank()); ++d)
    src[d + off] = x.dim(d) == 1 ? 0 : strides[d];
  return one(stridedCopy(x, shape, src));
}

Results qatc::ref::evalTile(onnx::TileOp op, ArrayRef<Tensor> in,
                            const KernelContext &) {
  // Tile is a broadcast over [r0, d0, r1, d1, ...] (the repeat outside each
  // dimension), then a reshape.
  const Tensor &x = in[0];
  auto strides = stridesOf(x.shape());
  SmallVector<int64_t> shape, src;
  for (int64_t d = 0; d < x.rank(); ++d) {
    shape.push_back(op.getRepeats()[d]);
    src.push_back(0);
    shape.push_back(x.dim(d));
    src.push_back(strides[d]);
  }
  return one(stridedCopy(x, shape, src).reshaped(resultShape(op)));
}

Results qatc::ref::evalDepthSpace(Operation *op, ArrayRef<Tensor> in,
                                  const KernelContext &) {
  const Tensor &x = in[0];
  int64_t b = op->getAttrOfType<IntegerAttr>("blocksize").getInt();
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (auto d2s = dyn_cast<onnx::DepthToSpaceOp>(op)) {
    int64_t oc = c / (b * b);
    if (d2s.getMode() == "DCR")
      return one(permuted(x, {n, b, b, oc, h, w}, {0, 3, 4, 1, 5, 2},
                          resultShape(op)));
    return one(
        permuted(x, {n, oc, b, b, h, w}, {0, 1, 4, 2, 5, 3}, resultShape(op)));
  }
  return one(permuted(x, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4},
                      resultShape(op)));
}

std::optional<Results> qatc::ref::evalMovementFamily(Operation *op,
                                                     ArrayRef<Tensor> in,
                                                     const KernelContext &ctx) {
  return llvm::TypeSwitch<Operation *, std::optional<Results>>(op)
      .Case<onnx::ReshapeOp, onnx::FlattenOp, onnx::SqueezeOp,
            onnx::UnsqueezeOp>([&](Operation *o) {
        // Row-major data is unchanged; only the shape differs.
        return one(in[0].reshaped(resultShape(o)));
      })
      .Case([&](onnx::ShapeOp s) {
        Tensor t(DType::I64, resultShape(s));
        ArrayRef<int64_t> shape = in[0].shape();
        int64_t start = static_cast<int64_t>(s.getStart());
        if (start < 0)
          start += shape.size();
        start = std::clamp<int64_t>(start, 0, shape.size());
        for (int64_t i = 0; i < t.numElements(); ++i)
          t.mutableData<int64_t>()[i] = shape[start + i];
        return one(std::move(t));
      })
      .Case([&](onnx::ExpandOp o) { return evalExpand(o, in, ctx); })
      .Case([&](onnx::TileOp o) { return evalTile(o, in, ctx); })
      .Case<onnx::DepthToSpaceOp, onnx::SpaceToDepthOp>(
          [&](Operation *o) { return evalDepthSpace(o, in, ctx); })
      .Case([&](onnx::ConcatOp o) { return evalConcat(o, in, ctx); })
      .Case([&](onnx::SplitOp o) { return evalSplit(o, in, ctx); })
      .Case([&](onnx::SliceOp o) { return evalSlice(o, in, ctx); })
      .Case([&](onnx::TransposeOp o) { return evalTranspose(o, in, ctx); })
      .Case([&](onnx::GatherOp o) { return evalGather(o, in, ctx); })
      .Case([&](onnx::GatherElementsOp o) {
        return evalGatherElements(o, in, ctx);
      })
      .Case([&](onnx::PadOp o) { return evalPad(o, in, ctx); })
      .Case([&](onnx::ResizeOp o) { return evalResize(o, in, ctx); })

      .Default([](Operation *) { return std::nullopt; });
}
