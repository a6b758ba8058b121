//===- Tensor.cpp - tensors of the reference evaluator --------------------===//

#include "qatc/Reference/Tensor.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

using namespace qatc::ref;

size_t qatc::ref::dtypeSize(DType type) {
  switch (type) {
  case DType::F64:
  case DType::I64:
  case DType::U64:
    return 8;
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F16:
  case DType::I16:
  case DType::U16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 1;
}

llvm::StringRef qatc::ref::dtypeName(DType type) {
  switch (type) {
  case DType::F32:
    return "float32";
  case DType::F64:
    return "float64";
  case DType::F16:
    return "float16";
  case DType::I8:
    return "int8";
  case DType::U8:
    return "uint8";
  case DType::I16:
    return "int16";
  case DType::U16:
    return "uint16";
  case DType::I32:
    return "int32";
  case DType::U32:
    return "uint32";
  case DType::I64:
    return "int64";
  case DType::U64:
    return "uint64";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

Tensor::Tensor(DType type, llvm::ArrayRef<int64_t> shape)
    : type(type), dims(shape.begin(), shape.end()) {
  // 64-byte aligned so kernels can use aligned vector loads; at least one
  // byte so that an empty tensor still has a buffer.
  size_t bytes = std::max<size_t>(1, byteSize());
  size_t rounded = (bytes + 63) / 64 * 64;
  void *mem = std::aligned_alloc(64, rounded);
  if (!mem)
    llvm::report_bad_alloc_error("qatc: out of memory for a tensor");
  std::memset(mem, 0, rounded);
  storage = std::shared_ptr<const void>(
      mem, [](const void *p) { std::free(const_cast<void *>(p)); });
  ptr = static_cast<const char *>(mem);
}

Tensor Tensor::wrap(DType type, llvm::ArrayRef<int64_t> shape, const void *data,
                    std::shared_ptr<const void> owner) {
  Tensor t;
  t.type = type;
  t.dims.assign(shape.begin(), shape.end());
  t.storage = owner ? std::move(owner)
                    : std::shared_ptr<const void>(data, [](const void *) {});
  t.ptr = static_cast<const char *>(data);
  return t;
}

int64_t Tensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

Tensor Tensor::reshaped(llvm::ArrayRef<int64_t> shape) const {
  Tensor t = *this;
  t.dims.assign(shape.begin(), shape.end());
  return t;
}

std::string Tensor::describe() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << dtypeName(type) << "[";
  llvm::interleave(dims, os, ",");
  os << "]";
  return os.str();
}

llvm::SmallVector<int64_t, 6>
qatc::ref::stridesOf(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t, 6> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

namespace {

/// Calls `fn(T{})` with T the C++ type of `type`.
template <typename Fn> void dispatchAll(DType type, Fn &&fn) {
  switch (type) {
  case DType::F32:
    return fn(float());
  case DType::F64:
    return fn(double());
  case DType::F16: // handled by castTensor before dispatching
    return;
  case DType::I8:
    return fn(int8_t());
  case DType::U8:
    return fn(uint8_t());
  case DType::I16:
    return fn(int16_t());
  case DType::U16:
    return fn(uint16_t());
  case DType::I32:
    return fn(int32_t());
  case DType::U32:
    return fn(uint32_t());
  case DType::I64:
    return fn(int64_t());
  case DType::U64:
    return fn(uint64_t());
  case DType::Bool:
    return fn(bool());
  }
}

} // namespace

double qatc::ref::halfToDouble(uint16_t h) {
  int sign = h & 0x8000 ? -1 : 1;
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0)
    return sign * std::ldexp(mant, -24);
  if (exp == 31)
    return mant ? std::numeric_limits<double>::quiet_NaN()
                : sign * std::numeric_limits<double>::infinity();
  return sign * std::ldexp(mant | 0x400, exp - 25);
}

uint16_t qatc::ref::doubleToHalf(double d) {
  uint64_t x;
  std::memcpy(&x, &d, 8);
  auto sign = static_cast<uint16_t>((x >> 48) & 0x8000);
  int64_t exp = static_cast<int64_t>((x >> 52) & 0x7ff);
  uint64_t mant = x & ((uint64_t(1) << 52) - 1);
  if (exp == 0x7ff)
    return sign | 0x7c00 | (mant ? 0x200 : 0);
  int64_t e = exp - 1023 + 15; // biased half exponent
  if (e >= 31)
    return sign | 0x7c00;
  // Keep `shift` bits of the 53-bit significand and round half to even; a
  // carry out of the mantissa correctly bumps the exponent (or gives inf).
  uint64_t full = exp ? mant | (uint64_t(1) << 52) : mant;
  int64_t shift = e <= 0 ? 43 - e : 42;
  if (shift > 53)
    return sign;
  uint64_t half = full >> shift;
  uint64_t rem = full & ((uint64_t(1) << shift) - 1);
  uint64_t mid = uint64_t(1) << (shift - 1);
  if (rem > mid || (rem == mid && (half & 1)))
    ++half;
  if (e > 0) // `half` includes the implicit bit (0x400): replace it by e
    half = (static_cast<uint64_t>(e) << 10) + half - 0x400;
  return sign | static_cast<uint16_t>(half);
}

Tensor qatc::ref::castTensor(const Tensor &t, DType to) {
  if (t.dtype() == to)
    return t;
  // float16 goes through float64, which holds every value exactly.
  if (t.dtype() == DType::F16) {
    Tensor wide(DType::F64, t.shape());
    for (int64_t i = 0, n = t.numElements(); i < n; ++i)
      wide.mutableData<double>()[i] = halfToDouble(t.data<uint16_t>()[i]);
    return castTensor(wide, to);
  }
  if (to == DType::F16) {
    Tensor wide = castTensor(t, DType::F64);
    Tensor out(DType::F16, t.shape());
    for (int64_t i = 0, n = t.numElements(); i < n; ++i)
      out.mutableData<uint16_t>()[i] = doubleToHalf(wide.data<double>()[i]);
    return out;
  }
  Tensor out(to, t.shape());
  int64_t n = t.numElements();
  dispatchAll(t.dtype(), [&](auto fromTag) {
    using From = decltype(fromTag);
    dispatchAll(to, [&](auto toTag) {
      using To = decltype(toTag);
      const From *src = t.data<From>();
      To *dst = out.mutableData<To>();
      for (int64_t i = 0; i < n; ++i)
        dst[i] = castValue<To>(src[i]);
    });
  });
  return out;
}

Tensor qatc::ref::sliceRows(const Tensor &t, int64_t first, int64_t count) {
  llvm::SmallVector<int64_t, 6> shape(t.shape());
  shape[0] = count;
  Tensor out(t.dtype(), shape);
  size_t rowBytes = t.dim(0) ? t.byteSize() / t.dim(0) : 0;
  std::memcpy(out.mutableData<char>(), t.bytes() + first * rowBytes,
              count * rowBytes);
  return out;
}
