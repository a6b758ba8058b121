//===- ElementwiseKernels.cpp - elementwise ops, normalizations, Q/DQ -----===//
//
// Straightforward loops: this is the golden model, so each kernel follows the
// ONNX definition literally. Reductions (softmax and normalization
// statistics, means) accumulate in double.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "qatc/Support/QuantMath.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;
using namespace qatc::ref;
namespace onnx = qatc::onnx;

std::optional<DType> qatc::ref::toDType(Type t, const KernelContext &ctx) {
  // float32 computes in the context's type (float64 in fp64 mode); float64
  // always stays float64. float16 is storage only (Cast converts it; kernels
  // refuse it); bfloat16 is not supported. Neither is ever silently computed
  // in float32.
  if (t.isF32())
    return ctx.floatType;
  if (t.isF64())
    return DType::F64;
  if (t.isF16())
    return DType::F16;
  if (t.isInteger(1))
    return DType::Bool;
  // Quantized tensors are evaluated as their stored integers; the scales
  // and zero points stay in the type.
  if (auto q = dyn_cast<mlir::quant::QuantizedType>(t))
    return storageDType(q);
  if (auto i = dyn_cast<IntegerType>(t)) {
    bool u = i.isUnsigned();
    switch (i.getWidth()) {
    case 8:
      return u ? DType::U8 : DType::I8;
    case 16:
      return u ? DType::U16 : DType::I16;
    case 32:
      return u ? DType::U32 : DType::I32;
    case 64:
      return u ? DType::U64 : DType::I64;
    }
  }
  return std::nullopt;
}

namespace {

/// Calls `fn(T{})` for the numeric dtypes elementwise ops support.
template <typename Fn> bool dispatchNumeric(DType type, Fn &&fn) {
  switch (type) {
  case DType::F32:
    fn(float());
    return true;
  case DType::F64:
    fn(double());
    return true;
  case DType::I8:
    fn(int8_t());
    return true;
  case DType::U8:
    fn(uint8_t());
    return true;
  case DType::I16:
    fn(int16_t());
    return true;
  case DType::U16:
    fn(uint16_t());
    return true;
  case DType::I32:
    fn(int32_t());
    return true;
  case DType::U32:
    fn(uint32_t());
    return true;
  case DType::I64:
    fn(int64_t());
    return true;
  case DType::U64:
    fn(uint64_t());
    return true;
  default:
    return false;
  }
}

Results unsupportedType(Operation *op, const Tensor &t) {
  return op->emitOpError("reference evaluation of ")
             << dtypeName(t.dtype()) << " tensors is not supported",
         failure();
}

/// Integer arithmetic that wraps instead of overflowing (no UB).
template <typename T> T wrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename T> T wrapSub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename T> T wrapMul(T a, T b) {
  // Narrow types would be promoted to (signed) int, which can overflow.
  using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                               std::make_unsigned_t<T>>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

/// out[i] = f(a[ia], b[ib]) with numpy broadcasting; the innermost output
/// dimension is the contiguous inner loop.
template <typename T, typename R, typename F>
void broadcastApply(const Tensor &a, const Tensor &b, Tensor &out, F f) {
  ArrayRef<int64_t> os = out.shape();
  size_t rank = os.size();
  SmallVector<int64_t, 6> sa(rank, 0), sb(rank, 0);
  auto fill = [&](const Tensor &t, SmallVectorImpl<int64_t> &s) {
    auto strides = stridesOf(t.shape());
    size_t off = rank - t.shape().size();
    for (size_t d = 0; d < t.shape().size(); ++d)
      s[d + off] = t.shape()[d] == 1 ? 0 : strides[d];
  };
  fill(a, sa);
  fill(b, sb);
  const T *pa = a.data<T>(), *pb = b.data<T>();
  R *po = out.mutableData<R>();
  int64_t total = out.numElements();
  if (total == 0)
    return;
  int64_t inner = rank ? os.back() : 1;
  int64_t ia = rank ? sa.back() : 0, ib = rank ? sb.back() : 0;
  SmallVector<int64_t, 6> idx(rank, 0);
  int64_t offA = 0, offB = 0;
  for (int64_t base = 0; base < total; base += inner) {
    for (int64_t j = 0; j < inner; ++j)
      po[base + j] = f(pa[offA + j * ia], pb[offB + j * ib]);
    // Advance the odometer over the outer dimensions.
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
      if (++idx[d] < os[d]) {
        offA += sa[d];
        offB += sb[d];
        break;
      }
      offA -= sa[d] * (os[d] - 1);
      offB -= sb[d] * (os[d] - 1);
      idx[d] = 0;
    }
  }
}

template <typename T, typename F> Tensor mapUnary(const Tensor &x, F f) {
  Tensor out(x.dtype(), x.shape());
  const T *src = x.data<T>();
  T *dst = out.mutableData<T>();
  for (int64_t i = 0, n = x.numElements(); i < n; ++i)
    dst[i] = f(src[i]);
  return out;
}

/// Splits `shape` around `axis` into outer * dim * inner.
void splitAround(ArrayRef<int64_t> shape, int64_t axis, int64_t &outer,
                 int64_t &dim, int64_t &inner) {
  outer = inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= shape[i];
  dim = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i)
    inner *= shape[i];
}

} // namespace

namespace {
/// An op defined by one scalar function (Onnx_MathOp), on f32 or f64.
Results evalScalarMath(onnx::ScalarMathOpInterface op, ArrayRef<Tensor> in) {
  const Tensor &x = in[0];
  if (x.dtype() == DType::F32)
    return one(mapUnary<float>(x, [&](float v) { return op.evalF32(v); }));
  if (x.dtype() == DType::F64)
    return one(mapUnary<double>(x, [&](double v) { return op.evalF64(v); }));
  return unsupportedType(op, x);
}
} // namespace

Results qatc::ref::evalUnary(Operation *op, ArrayRef<Tensor> in,
                             const KernelContext &ctx) {
  const Tensor &x = in[0];
  if (isa<onnx::IdentityOp>(op))
    return one(x);
  std::optional<Tensor> result;
  bool isFloatInput = isFloat(x.dtype());
  auto floatOnly = [&](auto f) {
    if (!isFloatInput)
      return;
    dispatchFloat(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      result = mapUnary<T>(x, [&](T v) { return static_cast<T>(f(v)); });
    });
  };
  auto numeric = [&](auto f) {
    dispatchNumeric(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      result = mapUnary<T>(x, [&](T v) { return f(v); });
    });
  };
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](onnx::ReluOp) {
        numeric([](auto v) { return v > decltype(v)(0) ? v : decltype(v)(0); });
      })
      .Case([&](onnx::SigmoidOp) {
        floatOnly([](auto v) { return 1 / (1 + std::exp(-v)); });
      })
      .Case(
          [&](onnx::TanhOp) { floatOnly([](auto v) { return std::tanh(v); }); })
      .Case([&](onnx::ErfOp) { floatOnly([](auto v) { return std::erf(v); }); })
      .Case(
          [&](onnx::SqrtOp) { floatOnly([](auto v) { return std::sqrt(v); }); })
      .Case([&](onnx::ExpOp) { floatOnly([](auto v) { return std::exp(v); }); })
      .Case([&](onnx::LogOp) { floatOnly([](auto v) { return std::log(v); }); })
      .Case([&](onnx::ReciprocalOp) {
        floatOnly([](auto v) { return decltype(v)(1) / v; });
      })
      .Case([&](onnx::NegOp) {
        numeric([](auto v) {
          using T = decltype(v);
          if constexpr (std::is_integral_v<T>)
            return wrapSub<T>(T(0), v);
          else
            return -v;
        });
      })
      .Case([&](onnx::AbsOp) {
        numeric([](auto v) {
          using T = decltype(v);
          if constexpr (std::is_unsigned_v<T>)
            return v;
          else if constexpr (std::is_integral_v<T>)
            return v < 0 ? wrapSub<T>(T(0), v) : v;
          else
            return std::abs(v);
        });
      })
      .Case([&](onnx::HardSwishOp) {
        floatOnly([](auto v) {
          using T = decltype(v);
          return v * std::max(T(0), std::min(T(1), v * T(1.0 / 6) + T(0.5)));
        });
      })
      .Case([&](onnx::LeakyReluOp o) {
        double alpha = o.getAlpha().convertToDouble();
        floatOnly([&](auto v) {
          using T = decltype(v);
          return v < T(0) ? static_cast<T>(static_cast<T>(alpha) * v) : v;
        });
      })
      .Case([&](onnx::HardSigmoidOp o) {
        double alpha = o.getAlpha().convertToDouble();
        double beta = o.getBeta().convertToDouble();
        floatOnly([&](auto v) {
          using T = decltype(v);
          return std::max(T(0), std::min(T(1), static_cast<T>(alpha) * v +
                                                   static_cast<T>(beta)));
        });
      })
      .Case([&](onnx::FloorOp) {
        floatOnly([](auto v) { return std::floor(v); });
      })
      .Case(
          [&](onnx::CeilOp) { floatOnly([](auto v) { return std::ceil(v); }); })
      .Case([&](onnx::RoundOp) {
        // nearbyint in the default rounding mode: half to even, as ONNX.
        floatOnly([](auto v) { return std::nearbyint(v); });
      })
      .Case([&](onnx::SignOp) {
        numeric([](auto v) {
          using T = decltype(v);
          return static_cast<T>(v > T(0) ? 1 : v < T(0) ? -1 : 0);
        });
      })
      .Case([&](onnx::SoftplusOp) {
        floatOnly(
            [](auto v) { return std::log(std::exp(v) + decltype(v)(1)); });
      })
      .Case([&](onnx::EluOp o) {
        double alpha = o.getAlpha().convertToDouble();
        floatOnly([&](auto v) {
          using T = decltype(v);
          return v < T(0) ? static_cast<T>(alpha * (std::exp(v) - T(1))) : v;
        });
      })
      .Case([&](onnx::NotOp) {
        if (x.dtype() == DType::Bool)
          result = mapUnary<uint8_t>(x, [](uint8_t v) { return uint8_t(!v); });
      })
      .Case([&](onnx::ClipOp o) {
        double lo = o.getMin() ? o.getMin()->convertToDouble()
                               : -std::numeric_limits<double>::infinity();
        double hi = o.getMax() ? o.getMax()->convertToDouble()
                               : std::numeric_limits<double>::infinity();
        numeric([&](auto v) {
          using T = decltype(v);
          double d = static_cast<double>(v);
          if (d < lo)
            return static_cast<T>(lo);
          if (d > hi)
            return static_cast<T>(hi);
          return v;
        });
      });
  if (!result)
    return unsupportedType(op, x);
  return one(std::move(*result));
}

Results qatc::ref::evalBinary(Operation *op, ArrayRef<Tensor> in,
                              const KernelContext &ctx) {
  Tensor a = in[0], b = in[1];
  if (isa<onnx::PowOp>(op) && b.dtype() != a.dtype())
    b = castTensor(b, a.dtype());
  if (a.dtype() != b.dtype())
    return op->emitOpError("operands have different element types"), failure();
  if (isa<onnx::EqualOp, onnx::LessOp, onnx::LessOrEqualOp, onnx::GreaterOp,
          onnx::GreaterOrEqualOp>(op)) {
    Tensor out(DType::Bool, resultShape(op));
    auto compare = [&](auto tag) {
      using T = decltype(tag);
      llvm::TypeSwitch<Operation *>(op)
          .Case([&](onnx::EqualOp) {
            broadcastApply<T, uint8_t>(a, b, out,
                                       [](T x, T y) { return x == y; });
          })
          .Case([&](onnx::LessOp) {
            broadcastApply<T, uint8_t>(a, b, out,
                                       [](T x, T y) { return x < y; });
          })
          .Case([&](onnx::LessOrEqualOp) {
            broadcastApply<T, uint8_t>(a, b, out,
                                       [](T x, T y) { return x <= y; });
          })
          .Case([&](onnx::GreaterOp) {
            broadcastApply<T, uint8_t>(a, b, out,
                                       [](T x, T y) { return x > y; });
          })
          .Case([&](onnx::GreaterOrEqualOp) {
            broadcastApply<T, uint8_t>(a, b, out,
                                       [](T x, T y) { return x >= y; });
          });
    };
    if (a.dtype() == DType::Bool)
      compare(uint8_t());
    else if (!dispatchNumeric(a.dtype(), compare))
      return unsupportedType(op, a);
    return one(std::move(out));
  }
  if (isa<onnx::AndOp, onnx::OrOp, onnx::XorOp>(op)) {
    if (a.dtype() != DType::Bool)
      return unsupportedType(op, a);
    Tensor out(DType::Bool, resultShape(op));
    llvm::TypeSwitch<Operation *>(op)
        .Case([&](onnx::AndOp) {
          broadcastApply<uint8_t, uint8_t>(
              a, b, out, [](uint8_t x, uint8_t y) { return x && y; });
        })
        .Case([&](onnx::OrOp) {
          broadcastApply<uint8_t, uint8_t>(
              a, b, out, [](uint8_t x, uint8_t y) { return x || y; });
        })
        .Case([&](onnx::XorOp) {
          broadcastApply<uint8_t, uint8_t>(
              a, b, out, [](uint8_t x, uint8_t y) { return !x != !y; });
        });
    return one(std::move(out));
  }
  Tensor out(a.dtype(), resultShape(op));
  bool ok = dispatchNumeric(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    llvm::TypeSwitch<Operation *>(op)
        .Case([&](onnx::MaxOp) {
          // NaN propagates, as in numpy.maximum and ONNX Runtime.
          broadcastApply<T, T>(a, b, out, [](T x, T y) {
            if constexpr (std::is_floating_point_v<T>)
              if (std::isnan(x) || std::isnan(y))
                return x + y;
            return x < y ? y : x;
          });
        })
        .Case([&](onnx::MinOp) {
          broadcastApply<T, T>(a, b, out, [](T x, T y) {
            if constexpr (std::is_floating_point_v<T>)
              if (std::isnan(x) || std::isnan(y))
                return x + y;
            return y < x ? y : x;
          });
        })
        .Case([&](onnx::PReluOp) {
          broadcastApply<T, T>(a, b, out, [](T x, T slope) {
            if constexpr (std::is_integral_v<T>)
              return x < T(0) ? wrapMul(slope, x) : x;
            else
              return x < T(0) ? slope * x : x;
          });
        })
        .Case([&](onnx::ModOp m) {
          bool fmod = m.getFmod() != 0;
          broadcastApply<T, T>(a, b, out, [fmod](T x, T y) {
            if constexpr (std::is_integral_v<T>) {
              if (y == 0 || (std::is_signed_v<T> && y == T(-1)))
                return T(0);
              T r = static_cast<T>(x % y);
              // Without fmod the result takes the divisor's sign (Python).
              if (!fmod && r != 0 && ((r < 0) != (y < 0)))
                r = static_cast<T>(r + y);
              return r;
            } else {
              T r = std::fmod(x, y);
              if (!fmod && r != 0 && ((r < 0) != (y < 0)))
                r += y;
              return r;
            }
          });
        })
        .Case([&](onnx::AddOp) {
          broadcastApply<T, T>(a, b, out, [](T x, T y) {
            if constexpr (std::is_integral_v<T>)
              return wrapAdd(x, y);
            else
              return x + y;
          });
        })
        .Case([&](onnx::SubOp) {
          broadcastApply<T, T>(a, b, out, [](T x, T y) {
            if constexpr (std::is_integral_v<T>)
              return wrapSub(x, y);
            else
              return x - y;
          });
        })
        .Case([&](onnx::MulOp) {
          broadcastApply<T, T>(a, b, out, [](T x, T y) {
            if constexpr (std::is_integral_v<T>)
              return wrapMul(x, y);
            else
              return x * y;
          });
        })
        .Case([&](onnx::DivOp) {
          broadcastApply<T, T>(a, b, out, [](T x, T y) {
            if constexpr (std::is_integral_v<T>) {
              // Integer division truncates; x / 0 and MIN / -1 give 0
              // rather than undefined behaviour.
              if (y == 0 || (std::is_signed_v<T> && y == T(-1) &&
                             x == std::numeric_limits<T>::min()))
                return T(0);
              return static_cast<T>(x / y);
            } else {
              return x / y;
            }
          });
        })
        .Case([&](onnx::PowOp) {
          broadcastApply<T, T>(a, b, out, [](T x, T y) {
            return static_cast<T>(
                std::pow(static_cast<double>(x), static_cast<double>(y)));
          });
        });
  });
  if (!ok)
    return unsupportedType(op, a);
  return one(std::move(out));
}

namespace {

/// Softmax (or, with `log`, LogSoftmax) along `axis`, in the tensor's float
/// type; the sum of exponentials in double.
Tensor softmax(const Tensor &x, int64_t axis, bool log) {
  if (axis < 0)
    axis += x.rank();
  int64_t outer, n, inner;
  splitAround(x.shape(), axis, outer, n, inner);
  Tensor out(x.dtype(), x.shape());
  dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *src = x.data<T>();
    T *dst = out.mutableData<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T *s = src + o * n * inner + i;
        T *d = dst + o * n * inner + i;
        T mx = s[0];
        for (int64_t k = 1; k < n; ++k)
          mx = std::max(mx, s[k * inner]);
        double sum = 0;
        for (int64_t k = 0; k < n; ++k) {
          T e = std::exp(s[k * inner] - mx);
          if (!log)
            d[k * inner] = e;
          sum += e;
        }
        T logSum = static_cast<T>(std::log(sum));
        for (int64_t k = 0; k < n; ++k)
          d[k * inner] = log ? s[k * inner] - mx - logSum
                             : static_cast<T>(d[k * inner] / sum);
      }
  });
  return out;
}

} // namespace

Results qatc::ref::evalSoftmax(onnx::SoftmaxOp op, ArrayRef<Tensor> in,
                               const KernelContext &ctx) {
  if (!isFloat(in[0].dtype()))
    return unsupportedType(op, in[0]);
  return one(softmax(in[0], static_cast<int64_t>(op.getAxis()), false));
}

Results qatc::ref::evalLogSoftmax(onnx::LogSoftmaxOp op, ArrayRef<Tensor> in,
                                  const KernelContext &ctx) {
  if (!isFloat(in[0].dtype()))
    return unsupportedType(op, in[0]);
  return one(softmax(in[0], static_cast<int64_t>(op.getAxis()), true));
}

Results qatc::ref::evalWhere(onnx::WhereOp op, ArrayRef<Tensor> in,
                             const KernelContext &ctx) {
  const Tensor &c = in[0], &x = in[1], &y = in[2];
  ArrayRef<int64_t> os = resultShape(op);
  size_t rank = os.size();
  // Element strides of each operand over the result (0 where broadcast).
  auto stridesOver = [&](const Tensor &t) {
    SmallVector<int64_t, 6> s(rank, 0);
    auto st = stridesOf(t.shape());
    size_t off = rank - t.shape().size();
    for (size_t d = 0; d < t.shape().size(); ++d)
      s[d + off] = t.shape()[d] == 1 ? 0 : st[d];
    return s;
  };
  auto sc = stridesOver(c), sx = stridesOver(x), sy = stridesOver(y);
  Tensor out(x.dtype(), os);
  size_t width = dtypeSize(x.dtype());
  const uint8_t *pc = c.data<uint8_t>();
  const char *px = x.bytes(), *py = y.bytes();
  char *po = out.mutableData<char>();
  SmallVector<int64_t, 6> idx(rank, 0);
  for (int64_t i = 0, n = out.numElements(); i < n; ++i) {
    int64_t ic = 0, ix = 0, iy = 0;
    for (size_t d = 0; d < rank; ++d) {
      ic += idx[d] * sc[d];
      ix += idx[d] * sx[d];
      iy += idx[d] * sy[d];
    }
    std::memcpy(po + i * width, pc[ic] ? px + ix * width : py + iy * width,
                width);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < os[d])
        break;
      idx[d] = 0;
    }
  }
  return one(std::move(out));
}

Results qatc::ref::evalBatchNorm(onnx::BatchNormalizationOp op,
                                 ArrayRef<Tensor> in,
                                 const KernelContext &ctx) {
  const Tensor &x = in[0];
  if (!isFloat(x.dtype()))
    return unsupportedType(op, x);
  double eps = op.getEpsilon().convertToDouble();
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numElements() / (n * c);
  Tensor out(x.dtype(), x.shape());
  dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *src = x.data<T>(), *scale = in[1].data<T>(),
            *bias = in[2].data<T>(), *mean = in[3].data<T>(),
            *var = in[4].data<T>();
    T *dst = out.mutableData<T>();
    for (int64_t ch = 0; ch < c; ++ch) {
      T denom = std::sqrt(var[ch] + static_cast<T>(eps));
      for (int64_t b = 0; b < n; ++b) {
        int64_t base = (b * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i)
          dst[base + i] =
              (src[base + i] - mean[ch]) / denom * scale[ch] + bias[ch];
      }
    }
  });
  return one(std::move(out));
}

Results qatc::ref::evalLayerNorm(onnx::LayerNormalizationOp op,
                                 ArrayRef<Tensor> in,
                                 const KernelContext &ctx) {
  const Tensor &x = in[0];
  if (!isFloat(x.dtype()))
    return unsupportedType(op, x);
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0)
    axis += x.rank();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < x.rank(); ++i)
    (i < axis ? outer : inner) *= x.dim(i);
  double eps = op.getEpsilon().convertToDouble();
  // Scale and B broadcast against the normalized trailing block.
  auto expand = [&](const Tensor &p) {
    if (p.numElements() == inner)
      return p;
    SmallVector<int64_t> shape(x.shape().drop_front(axis));
    Tensor full(p.dtype(), shape);
    Tensor zero(p.dtype(), shape);
    dispatchFloat(p.dtype(), [&](auto tag) {
      using T = decltype(tag);
      broadcastApply<T, T>(zero, p, full, [](T, T v) { return v; });
    });
    return full;
  };
  Tensor scale = expand(in[1]);
  std::optional<Tensor> bias;
  if (in.size() > 2)
    bias = expand(in[2]);
  Tensor out(x.dtype(), x.shape());
  dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *src = x.data<T>(), *s = scale.data<T>();
    const T *bp = bias ? bias->data<T>() : nullptr;
    T *dst = out.mutableData<T>();
    for (int64_t o = 0; o < outer; ++o) {
      const T *row = src + o * inner;
      double mean = 0;
      for (int64_t i = 0; i < inner; ++i)
        mean += row[i];
      mean /= inner;
      double var = 0;
      for (int64_t i = 0; i < inner; ++i)
        var += (row[i] - mean) * (row[i] - mean);
      var /= inner;
      double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t i = 0; i < inner; ++i)
        dst[o * inner + i] =
            static_cast<T>((row[i] - mean) * inv * s[i] + (bp ? bp[i] : T(0)));
    }
  });
  return one(std::move(out));
}

Results qatc::ref::evalReduce(Operation *op, ArrayRef<Tensor> in,
                              const KernelContext &ctx) {
  const Tensor &x = in[0];
  bool isInt = x.dtype() == DType::I64 || x.dtype() == DType::I32;
  if (!isFloat(x.dtype()) && !isInt)
    return unsupportedType(op, x);
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
  int64_t rank = x.rank();
  SmallVector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes)
    reduced[a < 0 ? a + rank : a] = true;
  // Output index of each input element: strides of the kept dimensions.
  SmallVector<int64_t> keptShape;
  for (int64_t d = 0; d < rank; ++d)
    keptShape.push_back(reduced[d] ? 1 : x.dim(d));
  auto outStrides = stridesOf(keptShape);
  int64_t outCount = 1;
  for (int64_t d : keptShape)
    outCount *= d;
  int64_t count = outCount ? x.numElements() / outCount : 0;
  // Accumulate in double (int64 for integer sums and products), then finish.
  enum Kind { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare };
  Kind kind = llvm::TypeSwitch<Operation *, Kind>(op)
                  .Case([](onnx::ReduceMeanOp) { return Mean; })
                  .Case([](onnx::ReduceMaxOp) { return Max; })
                  .Case([](onnx::ReduceMinOp) { return Min; })
                  .Case([](onnx::ReduceProdOp) { return Prod; })
                  .Case([](onnx::ReduceL1Op) { return L1; })
                  .Case([](onnx::ReduceL2Op) { return L2; })
                  .Case([](onnx::ReduceSumSquareOp) { return SumSquare; })
                  .Default([](Operation *) { return Sum; });
  double init = kind == Max    ? -std::numeric_limits<double>::infinity()
                : kind == Min  ? std::numeric_limits<double>::infinity()
                : kind == Prod ? 1.0
                               : 0.0;
  std::vector<double> acc(outCount, init);
  std::vector<int64_t> iacc(outCount, kind == Prod ? 1 : 0);
  bool intExact = isInt && (kind == Sum || kind == Prod);
  auto visit = [&](auto &&fn) {
    SmallVector<int64_t> idx(rank, 0);
    for (int64_t i = 0, n = x.numElements(); i < n; ++i) {
      int64_t o = 0;
      for (int64_t d = 0; d < rank; ++d)
        if (!reduced[d])
          o += idx[d] * outStrides[d];
      fn(i, o);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < x.dim(d))
          break;
        idx[d] = 0;
      }
    }
  };
  auto valueAt = [&](int64_t i) -> double {
    switch (x.dtype()) {
    case DType::F32:
      return x.data<float>()[i];
    case DType::F64:
      return x.data<double>()[i];
    case DType::I32:
      return x.data<int32_t>()[i];
    default:
      return static_cast<double>(x.data<int64_t>()[i]);
    }
  };
  auto intAt = [&](int64_t i) -> int64_t {
    return x.dtype() == DType::I32 ? x.data<int32_t>()[i]
                                   : x.data<int64_t>()[i];
  };
  visit([&](int64_t i, int64_t o) {
    if (intExact) {
      int64_t v = intAt(i);
      iacc[o] = kind == Sum ? wrapAdd(iacc[o], v) : wrapMul(iacc[o], v);
      return;
    }
    double v = valueAt(i);
    switch (kind) {
    case Max:
      acc[o] = std::isnan(v) || v > acc[o] ? v : acc[o];
      break;
    case Min:
      acc[o] = std::isnan(v) || v < acc[o] ? v : acc[o];
      break;
    case Prod:
      acc[o] *= v;
      break;
    case L1:
      acc[o] += std::abs(v);
      break;
    case L2:
    case SumSquare:
      acc[o] += v * v;
      break;
    default:
      acc[o] += v;
    }
  });
  Tensor out(x.dtype(), resultShape(op));
  for (int64_t o = 0; o < outCount; ++o) {
    double r = acc[o];
    if (kind == Mean)
      r = count ? r / count : std::numeric_limits<double>::quiet_NaN();
    else if (kind == L2)
      r = std::sqrt(r);
    switch (x.dtype()) {
    case DType::F32:
      out.mutableData<float>()[o] = static_cast<float>(r);
      break;
    case DType::F64:
      out.mutableData<double>()[o] = r;
      break;
    case DType::I32:
      out.mutableData<int32_t>()[o] =
          intExact ? static_cast<int32_t>(iacc[o]) : castValue<int32_t>(r);
      break;
    default:
      out.mutableData<int64_t>()[o] =
          intExact ? iacc[o] : castValue<int64_t>(r);
    }
  }
  return one(std::move(out));
}

Results qatc::ref::evalArgReduce(Operation *op, ArrayRef<Tensor> in,
                                 const KernelContext &ctx) {
  const Tensor &x = in[0];
  bool isMax = isa<onnx::ArgMaxOp>(op);
  int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
  bool last = op->getAttrOfType<IntegerAttr>("select_last_index") &&
              op->getAttrOfType<IntegerAttr>("select_last_index").getInt();
  if (axis < 0)
    axis += x.rank();
  int64_t outer, n, inner;
  splitAround(x.shape(), axis, outer, n, inner);
  Tensor out(DType::I64, resultShape(op));
  int64_t *dst = out.mutableData<int64_t>();
  bool ok = dispatchNumeric(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *src = x.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T *s = src + o * n * inner + i;
        int64_t best = 0;
        for (int64_t k = 1; k < n; ++k) {
          T v = s[k * inner], b = s[best * inner];
          bool better =
              isMax ? (v > b || (last && v == b)) : (v < b || (last && v == b));
          if (better)
            best = k;
        }
        dst[o * inner + i] = best;
      }
  });
  if (!ok)
    return unsupportedType(op, x);
  return one(std::move(out));
}

Results qatc::ref::evalTopK(onnx::TopKOp op, ArrayRef<Tensor> in,
                            const KernelContext &ctx) {
  const Tensor &x = in[0];
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0)
    axis += x.rank();
  int64_t k = static_cast<int64_t>(op.getK());
  bool largest = op.getLargest() != 0;
  int64_t outer, n, inner;
  splitAround(x.shape(), axis, outer, n, inner);
  Tensor values(x.dtype(), resultShape(op, 0));
  Tensor indices(DType::I64, resultShape(op, 1));
  bool ok = dispatchNumeric(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *src = x.data<T>();
    T *vd = values.mutableData<T>();
    int64_t *id = indices.mutableData<int64_t>();
    std::vector<int64_t> order(n);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T *s = src + o * n * inner + i;
        for (int64_t j = 0; j < n; ++j)
          order[j] = j;
        // Ties keep the lower index first, as ONNX specifies.
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return largest ? s[a * inner] > s[b * inner]
                         : s[a * inner] < s[b * inner];
        });
        for (int64_t j = 0; j < k; ++j) {
          vd[(o * k + j) * inner + i] = s[order[j] * inner];
          id[(o * k + j) * inner + i] = order[j];
        }
      }
  });
  if (!ok)
    return unsupportedType(op, x);
  SmallVector<Tensor, 1> r;
  r.push_back(std::move(values));
  r.push_back(std::move(indices));
  return r;
}

namespace {

/// Index of the scale/zero point of each element: per tensor (always 0) or
/// along `axis`.
qatc::AxisIndex quantIndex(const Tensor &x, const Tensor &scale, int64_t axis) {
  return scale.numElements() <= 1 ? qatc::AxisIndex()
                                  : qatc::AxisIndex(x.shape(), axis);
}

template <typename Fn> bool dispatchQuantized(DType type, Fn &&fn) {
  switch (type) {
  case DType::I8:
    fn(int8_t());
    return true;
  case DType::U8:
    fn(uint8_t());
    return true;
  case DType::I32:
    fn(int32_t());
    return true;
  default:
    return false;
  }
}

/// Refuses what `qatc compile` refuses (LegalityCheck): a scale that is not
/// finite and positive gives no meaningful quantization, only garbage.
LogicalResult checkScales(Operation *op, const Tensor &scale) {
  bool ok = true;
  int64_t bad = 0;
  double value = 0;
  dispatchFloat(scale.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *s = scale.data<T>();
    for (int64_t i = 0, n = scale.numElements(); i < n && ok; ++i)
      if (!(s[i] > 0) || !std::isfinite(static_cast<double>(s[i]))) {
        ok = false;
        bad = i;
        value = static_cast<double>(s[i]);
      }
  });
  if (ok)
    return success();
  InFlightDiagnostic diag = op->emitError();
  diag << op->getName().stripDialect() << " scale";
  if (scale.numElements() > 1)
    diag << "[" << bad << "]";
  diag << " is " << value
       << "; scales must be finite and positive (the model's quantization "
          "is meaningless with it, and qatc compile refuses it too)";
  return failure();
}

} // namespace

Results qatc::ref::evalQuantize(onnx::QuantizeLinearOp op, ArrayRef<Tensor> in,
                                const KernelContext &ctx) {
  Tensor x = in[0];
  const Tensor &scale = in[1];
  auto outType = toDType(getElementTypeOrSelf(op.getY().getType()), ctx);
  if (!outType || (*outType != DType::I8 && *outType != DType::U8))
    return op.emitOpError("reference evaluation quantizes to int8 or uint8 "
                          "only"),
           failure();
  if (failed(checkScales(op, scale)))
    return failure();
  // int32 input is quantized like float (ONNX allows both).
  if (!isFloat(x.dtype()))
    x = castTensor(x, scale.dtype());
  std::optional<Tensor> zp;
  if (in.size() > 2)
    zp = in[2];
  qatc::AxisIndex qi = quantIndex(x, scale, static_cast<int64_t>(op.getAxis()));
  Tensor out(*outType, x.shape());
  dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    dispatchQuantized(*outType, [&](auto qtag) {
      using Q = decltype(qtag);
      const T *src = x.data<T>(), *s = scale.data<T>();
      const Q *z = zp ? zp->data<Q>() : nullptr;
      Q *dst = out.mutableData<Q>();
      constexpr double lo = std::numeric_limits<Q>::lowest();
      constexpr double hi = std::numeric_limits<Q>::max();
      for (int64_t i = 0, n = x.numElements(); i < n; ++i) {
        int64_t k = qi(i);
        // Divide in the float type, round half to even, then add the zero
        // point and saturate (qdq-rules §2.1).
        T q = std::nearbyint(src[i] / s[k]);
        double v = std::isnan(q) ? 0.0 : static_cast<double>(q);
        v += z ? z[k] : 0;
        dst[i] = static_cast<Q>(std::clamp(v, lo, hi));
      }
    });
  });
  return one(std::move(out));
}

Results qatc::ref::evalDequantize(onnx::DequantizeLinearOp op,
                                  ArrayRef<Tensor> in,
                                  const KernelContext &ctx) {
  const Tensor &x = in[0], &scale = in[1];
  if (failed(checkScales(op, scale)))
    return failure();
  std::optional<Tensor> zp;
  if (in.size() > 2)
    zp = in[2];
  qatc::AxisIndex qi = quantIndex(x, scale, static_cast<int64_t>(op.getAxis()));
  Tensor out(scale.dtype(), x.shape());
  bool ok = dispatchQuantized(x.dtype(), [&](auto qtag) {
    using Q = decltype(qtag);
    dispatchFloat(scale.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const Q *src = x.data<Q>();
      const Q *z = zp ? zp->data<Q>() : nullptr;
      const T *s = scale.data<T>();
      T *dst = out.mutableData<T>();
      for (int64_t i = 0, n = x.numElements(); i < n; ++i) {
        int64_t k = qi(i);
        // (x - zero_point) in the float type, times the scale.
        T diff = static_cast<T>(src[i]) - static_cast<T>(z ? z[k] : 0);
        dst[i] = diff * s[k];
      }
    });
  });
  if (!ok)
    return unsupportedType(op, x);
  return one(std::move(out));
}

namespace {
/// A << B or A >> B on unsigned integers; a shift by the width or more
/// gives 0.
Results evalBitShift(onnx::BitShiftOp op, ArrayRef<Tensor> in) {
  const Tensor &a = in[0], &b = in[1];
  if (a.dtype() != b.dtype())
    return op.emitOpError("operands have different element types"), failure();
  Tensor out(a.dtype(), resultShape(op));
  bool left = op.getDirection() == "LEFT";
  auto shift = [&](auto tag) {
    using T = decltype(tag);
    constexpr uint64_t bits = sizeof(T) * 8;
    broadcastApply<T, T>(a, b, out, [left](T x, T y) {
      if (static_cast<uint64_t>(y) >= bits)
        return T(0);
      return left ? static_cast<T>(x << y) : static_cast<T>(x >> y);
    });
  };
  switch (a.dtype()) {
  case DType::U8:
    shift(uint8_t());
    break;
  case DType::U16:
    shift(uint16_t());
    break;
  case DType::U32:
    shift(uint32_t());
    break;
  case DType::U64:
    shift(uint64_t());
    break;
  default:
    return unsupportedType(op, a);
  }
  return one(std::move(out));
}
} // namespace

std::optional<Results>
qatc::ref::evalElementwiseFamily(Operation *op, ArrayRef<Tensor> in,
                                 const KernelContext &ctx) {
  if (auto math = dyn_cast<onnx::ScalarMathOpInterface>(op))
    return evalScalarMath(math, in);
  return llvm::TypeSwitch<Operation *, std::optional<Results>>(op)
      .Case([&](onnx::BitShiftOp o) { return evalBitShift(o, in); })
      .Case<onnx::ReluOp, onnx::SigmoidOp, onnx::TanhOp, onnx::ErfOp,
            onnx::SqrtOp, onnx::ExpOp, onnx::LogOp, onnx::NegOp, onnx::AbsOp,
            onnx::ReciprocalOp, onnx::HardSwishOp, onnx::LeakyReluOp,
            onnx::HardSigmoidOp, onnx::ClipOp, onnx::IdentityOp, onnx::FloorOp,
            onnx::CeilOp, onnx::RoundOp, onnx::SignOp, onnx::NotOp,
            onnx::SoftplusOp, onnx::EluOp>(
          [&](Operation *o) { return evalUnary(o, in, ctx); })
      .Case<onnx::AddOp, onnx::SubOp, onnx::MulOp, onnx::DivOp, onnx::PowOp,
            onnx::MaxOp, onnx::MinOp, onnx::ModOp, onnx::PReluOp, onnx::AndOp,
            onnx::OrOp, onnx::XorOp, onnx::EqualOp, onnx::LessOp,
            onnx::LessOrEqualOp, onnx::GreaterOp, onnx::GreaterOrEqualOp>(
          [&](Operation *o) { return evalBinary(o, in, ctx); })
      .Case([&](onnx::CastOp c) -> Results {
        auto to = toDType(getElementTypeOrSelf(c.getType()), ctx);
        if (!to)
          return c.emitOpError("cast to an unsupported type"), failure();
        return one(castTensor(in[0], *to));
      })
      .Case([&](onnx::QuantizeLinearOp q) { return evalQuantize(q, in, ctx); })
      .Case([&](onnx::DequantizeLinearOp q) {
        return evalDequantize(q, in, ctx);
      })
      .Case([&](onnx::BatchNormalizationOp o) {
        return evalBatchNorm(o, in, ctx);
      })
      .Case([&](onnx::LayerNormalizationOp o) {
        return evalLayerNorm(o, in, ctx);
      })
      .Case([&](onnx::SoftmaxOp o) { return evalSoftmax(o, in, ctx); })
      .Case<onnx::ReduceMeanOp, onnx::ReduceSumOp, onnx::ReduceMaxOp,
            onnx::ReduceMinOp, onnx::ReduceProdOp, onnx::ReduceL1Op,
            onnx::ReduceL2Op, onnx::ReduceSumSquareOp>(
          [&](Operation *o) { return evalReduce(o, in, ctx); })
      .Case<onnx::ArgMaxOp, onnx::ArgMinOp>(
          [&](Operation *o) { return evalArgReduce(o, in, ctx); })
      .Case([&](onnx::TopKOp o) { return evalTopK(o, in, ctx); })
      .Case([&](onnx::LogSoftmaxOp o) { return evalLogSoftmax(o, in, ctx); })
      .Case([&](onnx::WhereOp o) { return evalWhere(o, in, ctx); })
      .Default([](Operation *) { return std::nullopt; });
}
