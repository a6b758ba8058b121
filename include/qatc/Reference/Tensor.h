//===- Tensor.h - tensors of the reference evaluator ------------*- C++ -*-===//
//
// A dense, row-major tensor with a shared, immutable-after-construction
// buffer: copies are cheap and share storage, kernels allocate new outputs.
// Constants may wrap memory owned elsewhere (a weight blob) without a copy.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_REFERENCE_TENSOR_H
#define QATC_REFERENCE_TENSOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

namespace qatc::ref {

/// Element types the evaluator computes with. F16 is storage only: Cast
/// converts to and from it (rounding half to even); no kernel computes in it.
enum class DType { F32, F64, F16, I8, U8, I16, U16, I32, U32, I64, U64, Bool };

/// Bytes per element.
size_t dtypeSize(DType type);
/// numpy-style name ("float32", "int8", ...).
llvm::StringRef dtypeName(DType type);
inline bool isFloat(DType t) { return t == DType::F32 || t == DType::F64; }

class Tensor {
public:
  Tensor() = default;
  /// A zero-filled tensor.
  Tensor(DType type, llvm::ArrayRef<int64_t> shape);
  /// A tensor over `data`, kept alive by `owner` (no copy).
  static Tensor wrap(DType type, llvm::ArrayRef<int64_t> shape,
                     const void *data, std::shared_ptr<const void> owner);

  DType dtype() const { return type; }
  llvm::ArrayRef<int64_t> shape() const { return dims; }
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t dim(int64_t i) const { return dims[i]; }
  int64_t numElements() const;
  size_t byteSize() const { return numElements() * dtypeSize(type); }
  bool empty() const { return !storage; }

  template <typename T> const T *data() const {
    return reinterpret_cast<const T *>(ptr);
  }
  /// Writable data; only for tensors created by this process (not wrapped).
  template <typename T> T *mutableData() {
    return reinterpret_cast<T *>(const_cast<char *>(ptr));
  }
  const char *bytes() const { return ptr; }

  /// The same data with another shape (same element count).
  Tensor reshaped(llvm::ArrayRef<int64_t> shape) const;

  /// "float32[1,3,224,224]".
  std::string describe() const;

private:
  DType type = DType::F32;
  llvm::SmallVector<int64_t, 6> dims;
  std::shared_ptr<const void> storage;
  const char *ptr = nullptr;
};

/// Row-major strides of `shape` in elements.
llvm::SmallVector<int64_t, 6> stridesOf(llvm::ArrayRef<int64_t> shape);

/// IEEE binary16 conversions: exact widening, and narrowing with
/// round-half-to-even (overflow to infinity, underflow to subnormals/zero).
double halfToDouble(uint16_t h);
uint16_t doubleToHalf(double d);

/// Rows [first, first + count) of `t` along axis 0 (a copy).
Tensor sliceRows(const Tensor &t, int64_t first, int64_t count);

/// One ONNX Cast: floats to integers truncate toward zero (saturating
/// instead of undefined behaviour out of range, NaN to 0), to bool is != 0,
/// integer to integer wraps like numpy's astype.
template <typename To, typename From> To castValue(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> &&
                       std::is_integral_v<To>) {
    if (std::isnan(v))
      return To(0);
    double t = std::trunc(static_cast<double>(v));
    if (t <= static_cast<double>(std::numeric_limits<To>::lowest()))
      return std::numeric_limits<To>::lowest();
    if (t >= static_cast<double>(std::numeric_limits<To>::max()))
      return std::numeric_limits<To>::max();
    return static_cast<To>(t);
  } else {
    return static_cast<To>(v);
  }
}

/// Converts every element to `to` with ONNX Cast semantics (float to integer
/// truncates toward zero, to bool is `!= 0`).
Tensor castTensor(const Tensor &t, DType to);

} // namespace qatc::ref

#endif // QATC_REFERENCE_TENSOR_H
