//===- QatKernels.cpp - reference semantics of the qat dialect ------------===//
//
// The golden model of every int8 op the quantization passes build, so that
// a pass's output can be evaluated and compared with the Q/DQ graph it came
// from. Quantized tensors are their stored integers; scales and zero points
// come from the `!quant.uniform` types. Integer sums are exact (the int8
// products are accumulated in double, which holds them without rounding);
// epilogues compute in the evaluation's float type, as the Q/DQ graph does,
// and requantize with QuantizeLinear's arithmetic. A fused op therefore
// differs from its Q/DQ subgraph only by float reassociation: at most one
// LSB, at rounding ties (design.md, numerical contract).
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "qatc/Reference/Evaluator.h"
#include "qatc/Support/QuantMath.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cstring>

using namespace mlir;
using namespace qatc;
using namespace qatc::ref;

std::optional<DType> qatc::ref::storageDType(quant::QuantizedType type) {
  switch (type.getStorageTypeIntegralWidth()) {
  case 8:
    return type.isSigned() ? DType::I8 : DType::U8;
  case 16:
    return type.isSigned() ? DType::I16 : DType::U16;
  case 32:
    return type.isSigned() ? DType::I32 : DType::U32;
  default:
    return std::nullopt;
  }
}

namespace {

/// Reads element `i` of an integer tensor as int64.
int64_t intAt(const Tensor &t, int64_t i) {
  switch (t.dtype()) {
  case DType::I8:
    return t.data<int8_t>()[i];
  case DType::U8:
    return t.data<uint8_t>()[i];
  case DType::I16:
    return t.data<int16_t>()[i];
  case DType::U16:
    return t.data<uint16_t>()[i];
  case DType::I32:
    return t.data<int32_t>()[i];
  case DType::U32:
    return t.data<uint32_t>()[i];
  default:
    return 0;
  }
}

void setInt(Tensor &t, int64_t i, int64_t v) {
  switch (t.dtype()) {
  case DType::I8:
    t.mutableData<int8_t>()[i] = static_cast<int8_t>(v);
    return;
  case DType::U8:
    t.mutableData<uint8_t>()[i] = static_cast<uint8_t>(v);
    return;
  case DType::I16:
    t.mutableData<int16_t>()[i] = static_cast<int16_t>(v);
    return;
  case DType::U16:
    t.mutableData<uint16_t>()[i] = static_cast<uint16_t>(v);
    return;
  case DType::I32:
    t.mutableData<int32_t>()[i] = static_cast<int32_t>(v);
    return;
  case DType::U32:
    t.mutableData<uint32_t>()[i] = static_cast<uint32_t>(v);
    return;
  default:
    return;
  }
}

/// The stored integers minus their zero points, as an exact F64 tensor.
Tensor centered(const Tensor &q, Type type) {
  qat::QuantLayout p(type);
  Tensor out(DType::F64, q.shape());
  double *dst = out.mutableData<double>();
  for (int64_t i = 0, n = q.numElements(); i < n; ++i)
    dst[i] = static_cast<double>(intAt(q, i) - p.zeroPoints[p.channel(i)]);
  return out;
}

/// Rounds with `mode`.
template <typename T> T roundWith(qat::RoundingMode mode, T v) {
  return mode == qat::RoundingMode::HalfToEven ? roundHalfToEven(v)
                                               : roundHalfAwayFromZero(v);
}

/// Writes real values `y(i)` (in T) to a result of `type`: f32 as is, or
/// quantized with `mode`.
template <typename T, typename Fn>
Tensor finish(Type type, int64_t count, ArrayRef<int64_t> shape,
              const KernelContext &ctx, qat::RoundingMode mode, Fn &&y) {
  if (!qat::getQuantType(type)) {
    Tensor out(ctx.floatType, shape);
    dispatchFloat(ctx.floatType, [&](auto tag) {
      using F = decltype(tag);
      F *dst = out.mutableData<F>();
      for (int64_t i = 0; i < count; ++i)
        dst[i] = static_cast<F>(y(i));
    });
    return out;
  }
  qat::QuantLayout p(type);
  Tensor out(*storageDType(p.type), shape);
  for (int64_t i = 0; i < count; ++i) {
    int64_t c = p.channel(i);
    T v = y(i) / static_cast<T>(p.scales[c]);
    setInt(out, i,
           saturateAdd(roundWith(mode, v), p.zeroPoints[c], p.qmin, p.qmax));
  }
  return out;
}

/// The tensor held by a qat.constant.
FailureOr<Tensor> constantTensor(qat::ConstantOp op) {
  auto t = constantValues(op.getValue(),
                          getElementTypeOrSelf(op.getOutput().getType()));
  if (!t)
    return op.emitOpError("weight data is missing or has the wrong size"),
           failure();
  return *t;
}

/// Runs `fn(T{})` in the evaluation's float type.
template <typename Fn> Tensor inFloat(const KernelContext &ctx, Fn &&fn) {
  Tensor out;
  dispatchFloat(ctx.floatType, [&](auto tag) { out = fn(tag); });
  return out;
}

/// A clamp's bounds in T (infinite when absent), read once per op: reading
/// an attribute per element would dominate the evaluation.
template <typename T> struct Bounds {
  Bounds(qat::ClampAttr clamp)
      : on(bool(clamp)), lo(on ? static_cast<T>(clamp.getMin()) : T(0)),
        hi(on ? static_cast<T>(clamp.getMax()) : T(0)) {}
  T operator()(T v) const { return !on ? v : v < lo ? lo : (v > hi ? hi : v); }
  bool on;
  T lo, hi;
};

/// A per-channel f32 (or f64) operand as T values.
template <typename T> std::vector<T> channelValues(const Tensor *t) {
  std::vector<T> out;
  if (!t)
    return out;
  for (int64_t i = 0, n = t->numElements(); i < n; ++i)
    out.push_back(t->dtype() == DType::F64
                      ? static_cast<T>(t->data<double>()[i])
                      : static_cast<T>(t->data<float>()[i]));
  return out;
}

/// The epilogue of qat.conv / qat.matmul over accumulators `acc` (F64,
/// exact): element i belongs to channel (i / inner) % channels.
template <typename OpTy>
Tensor linearEpilogue(OpTy op, const Tensor &acc, ArrayRef<Tensor> in,
                      int64_t channels, int64_t inner,
                      const KernelContext &ctx) {
  double sIn = qat::getPerTensorType(op->getOperand(0).getType()).getScale();
  SmallVector<double> wScales = qat::getChannelScales(
      qat::getQuantType(op->getOperand(1).getType()), channels);
  unsigned next = 2;
  const Tensor *bias = op.getBias() ? &in[next++] : nullptr;
  const Tensor *scale = op.getChannelScale() ? &in[next++] : nullptr;
  const Tensor *residual = op.getResidual() ? &in[next++] : nullptr;
  std::optional<qat::QuantLayout> rp;
  if (residual)
    rp.emplace(op.getResidual().getType());
  auto type = op.getOutput().getType();
  return inFloat(ctx, [&](auto tag) {
    using T = decltype(tag);
    // The accumulator scale in T, as the Q/DQ graph multiplies s_x * s_w.
    std::vector<T> m;
    for (double w : wScales)
      m.push_back(static_cast<T>(sIn) * static_cast<T>(w));
    std::vector<T> biases = channelValues<T>(bias),
                   scales = channelValues<T>(scale);
    Bounds<T> act(op.getActivationAttr()), post(op.getResidualActivationAttr());
    T rScale = rp ? static_cast<T>(rp->scales[0]) : T(0);
    int64_t rZero = rp ? rp->zeroPoints[0] : 0;
    const double *a = acc.data<double>();
    int64_t count = acc.numElements();
    std::vector<T> y(count);
    for (int64_t base = 0; base < count; base += inner) {
      int64_t c = (base / inner) % channels;
      T mc = m[c], sc = scales.empty() ? T(1) : scales[c],
        bc = biases.empty() ? T(0) : biases[c];
      for (int64_t i = base; i < base + inner; ++i) {
        T v = static_cast<T>(a[i]) * mc;
        if (scale)
          v *= sc;
        if (bias)
          v += bc;
        v = act(v);
        if (residual)
          v += dequantizeValue<T>(intAt(*residual, i), rScale, rZero);
        y[i] = post(v);
      }
    }
    return finish<T>(type, count, acc.shape(), ctx, op.getRounding(),
                     [&](int64_t i) { return y[i]; });
  });
}

Results evalQatConv(qat::ConvOp op, ArrayRef<Tensor> in,
                    const KernelContext &ctx) {
  Tensor x = centered(in[0], op.getInput().getType());
  Tensor w = centered(in[1], op.getWeight().getType());
  auto shape = op.getOutput().getType().getShape();
  Tensor acc = convolve(x, w, shape, op.getStrides(), op.getPads(),
                        op.getDilations(), op.getGroup());
  int64_t channels = shape[1],
          inner = acc.numElements() / (shape[0] * channels);
  return one(linearEpilogue(op, acc, in, channels, inner, ctx));
}

Results evalQatMatMul(qat::MatMulOp op, ArrayRef<Tensor> in,
                      const KernelContext &ctx) {
  Tensor a = centered(in[0], op.getLhs().getType());
  Tensor b = centered(in[1], op.getRhs().getType());
  if (op.getTransposeRhs()) {
    // Gemm's transB: swap the last two axes of the rhs.
    int64_t rank = b.rank();
    SmallVector<int64_t> shape(b.shape());
    std::swap(shape[rank - 1], shape[rank - 2]);
    Tensor t(DType::F64, shape);
    int64_t rows = b.dim(rank - 2), cols = b.dim(rank - 1);
    int64_t batch = b.numElements() / (rows * cols);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          t.mutableData<double>()[(n * cols + c) * rows + r] =
              b.data<double>()[(n * rows + r) * cols + c];
    b = t;
  }
  auto shape = op.getOutput().getType().getShape();
  Tensor acc = matmul(a, b, shape);
  return one(linearEpilogue(op, acc, in, shape.back(), 1, ctx));
}

/// Index of output element `i` in an input of `inShape` broadcast to
/// `outShape` (numpy rules).
struct Broadcast {
  Broadcast(ArrayRef<int64_t> inShape, ArrayRef<int64_t> outShape)
      : out(outShape) {
    size_t rank = outShape.size(), offset = rank - inShape.size();
    SmallVector<int64_t> inStrides = stridesOf(inShape);
    strides.assign(rank, 0);
    for (size_t d = offset; d < rank; ++d)
      if (inShape[d - offset] != 1)
        strides[d] = inStrides[d - offset];
    outStrides = stridesOf(outShape);
  }
  int64_t operator()(int64_t i) const {
    int64_t src = 0;
    for (size_t d = 0; d < out.size(); ++d) {
      int64_t idx = (i / outStrides[d]) % out[d];
      src += idx * strides[d];
    }
    return src;
  }
  SmallVector<int64_t> out, strides, outStrides;
};

template <typename OpTy>
Results evalElementwise(OpTy op, ArrayRef<Tensor> in, const KernelContext &ctx,
                        bool isAdd) {
  qat::QuantLayout pa(op.getLhs().getType()), pb(op.getRhs().getType());
  auto shape = op.getOutput().getType().getShape();
  Broadcast ba(in[0].shape(), shape), bb(in[1].shape(), shape);
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  return one(inFloat(ctx, [&](auto tag) {
    using T = decltype(tag);
    Bounds<T> act(op.getActivationAttr());
    auto y = [&](int64_t i) -> T {
      T a = dequantizeValue<T>(intAt(in[0], ba(i)),
                               static_cast<T>(pa.scales[0]), pa.zeroPoints[0]);
      T b = dequantizeValue<T>(intAt(in[1], bb(i)),
                               static_cast<T>(pb.scales[0]), pb.zeroPoints[0]);
      return act(isAdd ? a + b : a * b);
    };
    return finish<T>(op.getOutput().getType(), count, shape, ctx,
                     op.getRounding(), y);
  }));
}

/// Average pooling: integer window sums (exact), divided by the count,
/// scaled, requantized.
Tensor averagePool(Operation *op, const Tensor &q, Type inType, Type outType,
                   ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                   ArrayRef<int64_t> pads, bool countPad,
                   qat::RoundingMode mode, const KernelContext &ctx) {
  qat::QuantLayout p(inType);
  Tensor x = centered(q, inType);
  auto shape = cast<RankedTensorType>(outType).getShape();
  SmallVector<int64_t> dilations(kernel.size(), 1);
  Tensor mean =
      poolWindow(x, shape, kernel, strides, pads, dilations, false, countPad);
  return inFloat(ctx, [&](auto tag) {
    using T = decltype(tag);
    const double *m = mean.data<double>();
    auto y = [&](int64_t i) -> T { return static_cast<T>(m[i] * p.scales[0]); };
    return finish<T>(outType, mean.numElements(), shape, ctx, mode, y);
  });
}

Results evalQatQuantize(qat::QuantizeOp op, ArrayRef<Tensor> in,
                        const KernelContext &ctx) {
  const Tensor &x = in[0];
  auto type = op.getOutput().getType();
  return one(inFloat(ctx, [&](auto tag) {
    using T = decltype(tag);
    const T *src = x.data<T>();
    return finish<T>(type, x.numElements(), x.shape(), ctx, op.getRounding(),
                     [&](int64_t i) { return src[i]; });
  }));
}

Results evalQatDequantize(qat::DequantizeOp op, ArrayRef<Tensor> in,
                          const KernelContext &ctx) {
  const Tensor &q = in[0];
  qat::QuantLayout p(op.getInput().getType());
  Tensor out(ctx.floatType, q.shape());
  dispatchFloat(ctx.floatType, [&](auto tag) {
    using T = decltype(tag);
    T *dst = out.mutableData<T>();
    for (int64_t i = 0, n = q.numElements(); i < n; ++i) {
      int64_t c = p.channel(i);
      // (x - zero_point) in the float type, times the scale, as
      // DequantizeLinear computes it.
      dst[i] = (static_cast<T>(intAt(q, i)) - static_cast<T>(p.zeroPoints[c])) *
               static_cast<T>(p.scales[c]);
    }
  });
  return one(std::move(out));
}

Results evalRequantize(qat::RequantizeOp op, ArrayRef<Tensor> in,
                       const KernelContext &ctx) {
  const Tensor &q = in[0];
  qat::QuantLayout p(op.getInput().getType());
  return one(inFloat(ctx, [&](auto tag) {
    using T = decltype(tag);
    auto y = [&](int64_t i) -> T {
      return (static_cast<T>(intAt(q, i)) - static_cast<T>(p.zeroPoints[0])) *
             static_cast<T>(p.scales[0]);
    };
    return finish<T>(op.getOutput().getType(), q.numElements(), q.shape(), ctx,
                     op.getRounding(), y);
  }));
}

Results evalClamp(qat::ClampOp op, ArrayRef<Tensor> in) {
  const Tensor &q = in[0];
  Tensor out(q.dtype(), q.shape());
  auto lo = static_cast<int64_t>(op.getMin()),
       hi = static_cast<int64_t>(op.getMax());
  for (int64_t i = 0, n = q.numElements(); i < n; ++i)
    setInt(out, i, std::clamp(intAt(q, i), lo, hi));
  return one(std::move(out));
}

/// Reinterprets the bytes of `t` as `dtype` (same width).
Tensor retyped(const Tensor &t, DType dtype) {
  Tensor out(dtype, t.shape());
  std::memcpy(out.mutableData<char>(), t.bytes(), t.byteSize());
  return out;
}

} // namespace

Results qatc::ref::evalQat(Operation *op, ArrayRef<Tensor> in,
                           const KernelContext &ctx) {
  return llvm::TypeSwitch<Operation *, Results>(op)
      .Case([&](qat::ConstantOp c) -> Results {
        auto t = constantTensor(c);
        if (failed(t))
          return failure();
        return one(*t);
      })
      .Case([&](qat::StorageCastOp c) -> Results {
        auto dtype = toDType(getElementTypeOrSelf(c.getOutput()), ctx);
        if (!dtype)
          return c.emitOpError("unsupported type"), failure();
        return one(retyped(in[0], *dtype));
      })
      .Case([&](qat::QuantizeOp q) { return evalQatQuantize(q, in, ctx); })
      .Case([&](qat::DequantizeOp q) { return evalQatDequantize(q, in, ctx); })
      .Case([&](qat::RequantizeOp q) { return evalRequantize(q, in, ctx); })
      .Case([&](qat::ConvOp c) { return evalQatConv(c, in, ctx); })
      .Case([&](qat::MatMulOp m) { return evalQatMatMul(m, in, ctx); })
      .Case([&](qat::AddOp a) { return evalElementwise(a, in, ctx, true); })
      .Case([&](qat::MulOp m) { return evalElementwise(m, in, ctx, false); })
      .Case([&](qat::AvgPoolOp p) {
        return one(averagePool(
            p, in[0], p.getInput().getType(), p.getOutput().getType(),
            p.getKernelShape(), p.getStrides(), p.getPads(),
            p.getCountIncludePad() != 0, p.getRounding(), ctx));
      })
      .Case([&](qat::GlobalAvgPoolOp p) {
        auto shape = p.getInput().getType().getShape();
        SmallVector<int64_t> kernel(shape.drop_front(2));
        SmallVector<int64_t> ones(kernel.size(), 1), pads(2 * kernel.size(), 0);
        return one(averagePool(p, in[0], p.getInput().getType(),
                               p.getOutput().getType(), kernel, ones, pads,
                               false, p.getRounding(), ctx));
      })
      .Case([&](qat::MaxPoolOp p) {
        return one(poolWindow(in[0], p.getOutput().getType().getShape(),
                              p.getKernelShape(), p.getStrides(), p.getPads(),
                              p.getDilations(), true, false));
      })
      .Case([&](qat::ClampOp c) { return evalClamp(c, in); })
      .Case([&](qat::ReshapeOp r) {
        return one(in[0].reshaped(r.getOutput().getType().getShape()));
      })
      .Case([&](qat::ConcatOp c) { return evalConcat(c, in, ctx); })
      .Case([&](qat::TransposeOp t) { return evalTranspose(t, in, ctx); })
      .Case([&](qat::SliceOp s) { return evalSlice(s, in, ctx); })
      .Case([&](qat::GatherOp g) { return evalGather(g, in, ctx); })
      .Case([&](qat::ResizeOp r) { return evalResize(r, in, ctx); })
      .Case([&](qat::PadOp p) { return evalPad(p, in, ctx); })
      .Default([&](Operation *o) -> Results {
        return o->emitOpError("has no reference implementation"), failure();
      });
}
