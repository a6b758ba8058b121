//===- ConvKernels.cpp - convolution, matrix products, pooling ------------===//
//
// Conv: per image and group, im2col then the blocked GEMM (1x1 stride-1
// convolutions read the input directly); depthwise convolutions use a
// direct loop. Other ranks than 2-D spatial go through the same code with
// the spatial dimensions flattened by a generic im2col. ConvTranspose and
// pooling are direct loops.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "Kernels.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>
#include <vector>

using namespace mlir;
using namespace qatc::ref;
namespace onnx = qatc::onnx;

namespace {

Results notFloat(Operation *op) {
  return op->emitOpError("reference evaluation needs float operands"),
         failure();
}

/// Geometry of an N-D window over the spatial dimensions.
struct Window {
  SmallVector<int64_t> in, out, kernel, strides, padsBegin, dilations;
  int64_t inSize() const {
    int64_t n = 1;
    for (int64_t d : in)
      n *= d;
    return n;
  }
  int64_t outSize() const {
    int64_t n = 1;
    for (int64_t d : out)
      n *= d;
    return n;
  }
  int64_t kernelSize() const {
    int64_t n = 1;
    for (int64_t d : kernel)
      n *= d;
    return n;
  }
};

Window makeWindow(ArrayRef<int64_t> inShape, ArrayRef<int64_t> outShape,
                  ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                  ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations) {
  Window w;
  w.in.assign(inShape.begin() + 2, inShape.end());
  w.out.assign(outShape.begin() + 2, outShape.end());
  w.kernel.assign(kernel.begin(), kernel.end());
  w.strides.assign(strides.begin(), strides.end());
  w.padsBegin.assign(pads.begin(), pads.begin() + kernel.size());
  w.dilations.assign(dilations.begin(), dilations.end());
  return w;
}

/// Increments a multi-index over `shape`; false when it wraps.
bool next(SmallVectorImpl<int64_t> &idx, ArrayRef<int64_t> shape) {
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (++idx[d] < shape[d])
      return true;
    idx[d] = 0;
  }
  return false;
}

/// For every kernel tap k and output position o, the offset of the input
/// element the tap reads, or -1 in the padding.
std::vector<int64_t> tapOffsets(const Window &w) {
  int64_t kSize = w.kernelSize(), oSize = w.outSize();
  size_t nd = w.in.size();
  auto inStrides = stridesOf(w.in);
  std::vector<int64_t> offsets(kSize * oSize);
  SmallVector<int64_t> k(nd, 0);
  for (int64_t kk = 0; kk < kSize; ++kk, next(k, w.kernel)) {
    SmallVector<int64_t> o(nd, 0);
    for (int64_t oo = 0; oo < oSize; ++oo, next(o, w.out)) {
      int64_t offset = 0;
      bool inside = true;
      for (size_t d = 0; d < nd && inside; ++d) {
        int64_t pos =
            o[d] * w.strides[d] - w.padsBegin[d] + k[d] * w.dilations[d];
        inside = pos >= 0 && pos < w.in[d];
        offset += pos * inStrides[d];
      }
      offsets[kk * oSize + oo] = inside ? offset : -1;
    }
  }
  return offsets;
}

/// col[c * K + k][o] = input[c][tap k of output o], or 0 in the padding.
template <typename T>
void im2col(const T *input, int64_t channels, int64_t inSize,
            const std::vector<int64_t> &taps, int64_t kSize, int64_t oSize,
            T *col) {
  for (int64_t c = 0; c < channels; ++c) {
    const T *plane = input + c * inSize;
    for (int64_t kk = 0; kk < kSize; ++kk) {
      const int64_t *off = taps.data() + kk * oSize;
      T *dst = col + (c * kSize + kk) * oSize;
      for (int64_t oo = 0; oo < oSize; ++oo)
        dst[oo] = off[oo] >= 0 ? plane[off[oo]] : T(0);
    }
  }
}

template <typename T>
void convImpl(const Tensor &x, const Tensor &wt, const Tensor *bias,
              const Window &w, int64_t group, Tensor &out) {
  int64_t n = x.dim(0), cIn = x.dim(1), cOut = wt.dim(0);
  int64_t cg = cIn / group, mg = cOut / group;
  int64_t kSize = w.kernelSize(), iSize = w.inSize(), oSize = w.outSize();
  const T *xp = x.data<T>(), *wp = wt.data<T>();
  T *op = out.mutableData<T>();
  bool pointwise =
      kSize == 1 && llvm::all_of(w.strides, [](int64_t s) { return s == 1; }) &&
      llvm::all_of(w.padsBegin, [](int64_t p) { return p == 0; }) &&
      w.in == w.out;
  bool depthwise = cg == 1 && mg == 1;
  std::vector<T> col(pointwise || depthwise ? 0 : cg * kSize * oSize);
  std::vector<int64_t> taps =
      pointwise ? std::vector<int64_t>() : tapOffsets(w);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < group; ++g) {
      const T *in = xp + (b * cIn + g * cg) * iSize;
      T *dst = op + (b * cOut + g * mg) * oSize;
      const T *wg = wp + g * mg * cg * kSize;
      if (depthwise) {
        // One input channel, one filter: a direct loop.
        for (int64_t oo = 0; oo < oSize; ++oo) {
          T sum = 0;
          for (int64_t kk = 0; kk < kSize; ++kk) {
            int64_t off = taps[kk * oSize + oo];
            if (off >= 0)
              sum += in[off] * wg[kk];
          }
          dst[oo] = sum;
        }
      } else if (pointwise) {
        gemm<T>(mg, oSize, cg, {wg, cg, 1}, {in, oSize, 1}, dst, oSize, false);
      } else {
        im2col(in, cg, iSize, taps, kSize, oSize, col.data());
        gemm<T>(mg, oSize, cg * kSize, {wg, cg * kSize, 1},
                {col.data(), oSize, 1}, dst, oSize, false);
      }
    }
    if (bias) {
      const T *bp = bias->data<T>();
      for (int64_t c = 0; c < cOut; ++c)
        for (int64_t i = 0; i < oSize; ++i)
          op[(b * cOut + c) * oSize + i] += bp[c];
    }
  }
}

} // namespace

Results qatc::ref::evalConv(onnx::ConvOp op, ArrayRef<Tensor> in,
                            const KernelContext &ctx) {
  const Tensor &x = in[0], &wt = in[1];
  if (!isFloat(x.dtype()) || x.dtype() != wt.dtype())
    return notFloat(op);
  Tensor out(x.dtype(), resultShape(op));
  Window w = makeWindow(x.shape(), out.shape(), op.getKernelShape(),
                        op.getStrides(), op.getPads(), op.getDilations());
  const Tensor *bias = in.size() > 2 ? &in[2] : nullptr;
  dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    convImpl<T>(x, wt, bias, w, static_cast<int64_t>(op.getGroup()), out);
  });
  return one(std::move(out));
}

Tensor qatc::ref::convolve(const Tensor &x, const Tensor &w,
                           ArrayRef<int64_t> outShape,
                           ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                           ArrayRef<int64_t> dilations, int64_t group) {
  Tensor out(x.dtype(), outShape);
  Window win = makeWindow(x.shape(), outShape, w.shape().drop_front(2), strides,
                          pads, dilations);
  dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    convImpl<T>(x, w, nullptr, win, group, out);
  });
  return out;
}

Results qatc::ref::evalConvTranspose(onnx::ConvTransposeOp op,
                                     ArrayRef<Tensor> in,
                                     const KernelContext &ctx) {
  const Tensor &x = in[0], &wt = in[1];
  if (!isFloat(x.dtype()) || x.dtype() != wt.dtype())
    return notFloat(op);
  Tensor out(x.dtype(), resultShape(op));
  int64_t group = static_cast<int64_t>(op.getGroup());
  int64_t n = x.dim(0), cIn = x.dim(1), cg = cIn / group, mg = wt.dim(1);
  int64_t cOut = mg * group;
  Window w = makeWindow(x.shape(), out.shape(), op.getKernelShape(),
                        op.getStrides(), op.getPads(), op.getDilations());
  size_t nd = w.in.size();
  auto outStrides = stridesOf(w.out);
  int64_t kSize = w.kernelSize(), iSize = w.inSize(), oSize = w.outSize();
  dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.data<T>(), *wp = wt.data<T>();
    T *op = out.mutableData<T>();
    // Scatter: every input pixel adds kernel-weighted values to the output.
    for (int64_t b = 0; b < n; ++b)
      for (int64_t g = 0; g < group; ++g)
        for (int64_t ci = 0; ci < cg; ++ci) {
          const T *src = xp + (b * cIn + g * cg + ci) * iSize;
          SmallVector<int64_t> i(nd, 0);
          for (int64_t ii = 0; ii < iSize; ++ii, next(i, w.in)) {
            SmallVector<int64_t> k(nd, 0);
            for (int64_t kk = 0; kk < kSize; ++kk, next(k, w.kernel)) {
              int64_t offset = 0;
              bool inside = true;
              for (size_t d = 0; d < nd && inside; ++d) {
                int64_t pos = i[d] * w.strides[d] - w.padsBegin[d] +
                              k[d] * w.dilations[d];
                inside = pos >= 0 && pos < w.out[d];
                offset += pos * outStrides[d];
              }
              if (!inside)
                continue;
              for (int64_t m = 0; m < mg; ++m) {
                T wv = wp[((g * cg + ci) * mg + m) * kSize + kk];
                op[(b * cOut + g * mg + m) * oSize + offset] += src[ii] * wv;
              }
            }
          }
        }
    if (in.size() > 2) {
      const T *bp = in[2].data<T>();
      for (int64_t b = 0; b < n; ++b)
        for (int64_t c = 0; c < cOut; ++c)
          for (int64_t i = 0; i < oSize; ++i)
            op[(b * cOut + c) * oSize + i] += bp[c];
    }
  });
  return one(std::move(out));
}

Results qatc::ref::evalGemm(onnx::GemmOp op, ArrayRef<Tensor> in,
                            const KernelContext &ctx) {
  const Tensor &a = in[0], &b = in[1];
  if (!isFloat(a.dtype()) || a.dtype() != b.dtype())
    return notFloat(op);
  Tensor out(a.dtype(), resultShape(op));
  int64_t m = out.dim(0), n = out.dim(1);
  bool ta = op.getTransA() != 0, tb = op.getTransB() != 0;
  int64_t k = ta ? a.dim(0) : a.dim(1);
  double alpha = op.getAlpha().convertToDouble();
  double beta = op.getBeta().convertToDouble();
  dispatchFloat(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    MatView<T> av = ta ? MatView<T>{a.data<T>(), 1, a.dim(1)}
                       : MatView<T>{a.data<T>(), a.dim(1), 1};
    MatView<T> bv = tb ? MatView<T>{b.data<T>(), 1, b.dim(1)}
                       : MatView<T>{b.data<T>(), b.dim(1), 1};
    T *c = out.mutableData<T>();
    gemm<T>(m, n, k, av, bv, c, n, false);
    if (alpha != 1.0)
      for (int64_t i = 0; i < m * n; ++i)
        c[i] *= static_cast<T>(alpha);
    if (in.size() > 2 && beta != 0.0) {
      // C broadcasts to [M, N] (scalar, [N], [M, 1] or [M, N]).
      const Tensor &cc = in[2];
      const T *cp = cc.data<T>();
      int64_t cr = cc.rank() == 2 ? cc.dim(0) : 1;
      int64_t ccols = cc.rank() >= 1 ? cc.dim(cc.rank() - 1) : 1;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          c[i * n + j] += static_cast<T>(beta) *
                          cp[(cr == 1 ? 0 : i) * ccols + (ccols == 1 ? 0 : j)];
    }
  });
  return one(std::move(out));
}

Tensor qatc::ref::matmul(const Tensor &a, const Tensor &b,
                         ArrayRef<int64_t> outShape) {
  Tensor out(a.dtype(), outShape);
  // Promote vectors to matrices as numpy does.
  SmallVector<int64_t> as(a.shape()), bs(b.shape());
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  ArrayRef<int64_t> batchA = ArrayRef(as).drop_back(2);
  ArrayRef<int64_t> batchB = ArrayRef(bs).drop_back(2);
  size_t rank = std::max(batchA.size(), batchB.size());
  SmallVector<int64_t> batch(rank, 1), strideA(rank, 0), strideB(rank, 0);
  auto sa = stridesOf(batchA), sb = stridesOf(batchB);
  for (size_t d = 0; d < rank; ++d) {
    int64_t da =
        d < rank - batchA.size() ? 1 : batchA[d - (rank - batchA.size())];
    int64_t db =
        d < rank - batchB.size() ? 1 : batchB[d - (rank - batchB.size())];
    batch[d] = std::max(da, db);
    if (da != 1)
      strideA[d] = sa[d - (rank - batchA.size())] * m * k;
    if (db != 1)
      strideB[d] = sb[d - (rank - batchB.size())] * k * n;
  }
  dispatchFloat(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T *c = out.mutableData<T>();
    SmallVector<int64_t> idx(rank, 0);
    int64_t count = 1;
    for (int64_t d : batch)
      count *= d;
    for (int64_t bi = 0; bi < count; ++bi, next(idx, batch)) {
      int64_t offA = 0, offB = 0;
      for (size_t d = 0; d < rank; ++d) {
        offA += idx[d] * strideA[d];
        offB += idx[d] * strideB[d];
      }
      gemm<T>(m, n, k, {a.data<T>() + offA, k, 1}, {b.data<T>() + offB, n, 1},
              c + bi * m * n, n, false);
    }
  });
  return out;
}

Results qatc::ref::evalMatMul(onnx::MatMulOp op, ArrayRef<Tensor> in,
                              const KernelContext &ctx) {
  const Tensor &a = in[0], &b = in[1];
  if (!isFloat(a.dtype()) || a.dtype() != b.dtype())
    return notFloat(op);
  return one(matmul(a, b, resultShape(op)));
}

Tensor qatc::ref::poolWindow(const Tensor &x, ArrayRef<int64_t> outShape,
                             ArrayRef<int64_t> kernel,
                             ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                             ArrayRef<int64_t> dilations, bool isMax,
                             bool countPad) {
  Tensor out(x.dtype(), outShape);
  int64_t n = x.dim(0), c = x.dim(1);
  Window w =
      makeWindow(x.shape(), out.shape(), kernel, strides, pads, dilations);
  size_t nd = w.in.size();
  int64_t iSize = w.inSize(), oSize = w.outSize(), kSize = w.kernelSize();
  std::vector<int64_t> taps = tapOffsets(w);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *src = x.data<T>();
    T *dst = out.mutableData<T>();
    for (int64_t plane = 0; plane < n * c; ++plane) {
      const T *in = src + plane * iSize;
      SmallVector<int64_t> o(nd, 0);
      for (int64_t oo = 0; oo < oSize; ++oo, next(o, w.out)) {
        double acc = isMax ? -std::numeric_limits<double>::infinity() : 0.0;
        int64_t valid = 0;
        // Taps inside the padded extent (count_include_pad divisor).
        int64_t padded = 1;
        for (size_t d = 0; d < nd; ++d) {
          int64_t start = o[d] * w.strides[d] - w.padsBegin[d];
          int64_t end = std::min(start + (w.kernel[d] - 1) * w.dilations[d] + 1,
                                 w.in[d] + pads[d + nd]);
          padded *= (end - start + w.dilations[d] - 1) / w.dilations[d];
        }
        for (int64_t kk = 0; kk < kSize; ++kk) {
          int64_t offset = taps[kk * oSize + oo];
          if (offset < 0)
            continue;
          ++valid;
          double v = in[offset];
          acc = isMax ? std::max(acc, v) : acc + v;
        }
        if (!isMax)
          acc /= countPad ? padded : std::max<int64_t>(valid, 1);
        dst[plane * oSize + oo] = static_cast<T>(acc);
      }
    }
  };
  if (x.dtype() == DType::I8)
    run(int8_t());
  else if (x.dtype() == DType::U8)
    run(uint8_t());
  else
    dispatchFloat(x.dtype(), run);
  return out;
}

Results qatc::ref::evalPool(Operation *op, ArrayRef<Tensor> in,
                            const KernelContext &ctx) {
  const Tensor &x = in[0];
  // Global pools are windows covering the whole input.
  SmallVector<int64_t> kernel, strides, pads, dilations;
  bool isMax = isa<onnx::MaxPoolOp, onnx::GlobalMaxPoolOp>(op);
  bool countPad = false;
  if (auto p = dyn_cast<onnx::MaxPoolOp>(op)) {
    kernel.assign(p.getKernelShape().begin(), p.getKernelShape().end());
    strides.assign(p.getStrides().begin(), p.getStrides().end());
    pads.assign(p.getPads().begin(), p.getPads().end());
    dilations.assign(p.getDilations().begin(), p.getDilations().end());
  } else if (auto p = dyn_cast<onnx::AveragePoolOp>(op)) {
    kernel.assign(p.getKernelShape().begin(), p.getKernelShape().end());
    strides.assign(p.getStrides().begin(), p.getStrides().end());
    pads.assign(p.getPads().begin(), p.getPads().end());
    dilations.assign(p.getDilations().begin(), p.getDilations().end());
    countPad = p.getCountIncludePad() != 0;
  } else {
    kernel.assign(x.shape().begin() + 2, x.shape().end());
    strides.assign(kernel.size(), 1);
    pads.assign(2 * kernel.size(), 0);
    dilations.assign(kernel.size(), 1);
  }
  if (!isFloat(x.dtype()) &&
      !(isMax && (x.dtype() == DType::I8 || x.dtype() == DType::U8)))
    return notFloat(op);
  return one(poolWindow(x, resultShape(op), kernel, strides, pads, dilations,
                        isMax, countPad));
}

std::optional<Results> qatc::ref::evalConvFamily(Operation *op,
                                                 ArrayRef<Tensor> in,
                                                 const KernelContext &ctx) {
  return llvm::TypeSwitch<Operation *, std::optional<Results>>(op)
      .Case<onnx::MaxPoolOp, onnx::AveragePoolOp, onnx::GlobalAveragePoolOp,
            onnx::GlobalMaxPoolOp>(
          [&](Operation *o) { return evalPool(o, in, ctx); })
      .Case([&](onnx::ConvOp o) { return evalConv(o, in, ctx); })
      .Case([&](onnx::ConvTransposeOp o) {
        return evalConvTranspose(o, in, ctx);
      })
      .Case([&](onnx::GemmOp o) { return evalGemm(o, in, ctx); })
      .Case([&](onnx::MatMulOp o) { return evalMatMul(o, in, ctx); })
      .Default([](Operation *) { return std::nullopt; });
}
