//===- QuantMath.h - ONNX quantization arithmetic --------------*- C++ -*-===//
//
// The scalar arithmetic of QuantizeLinear / DequantizeLinear exactly as ONNX
// defines it (qdq-rules §2.1): divide in the float type, round half to even,
// add the zero point, saturate. The reference evaluator, the passes that fold
// quantized constants and the qat kernels all use these, so "exact" means
// the same thing everywhere. Header-only and free of MLIR, so the runtime can
// use it too.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_SUPPORT_QUANTMATH_H
#define QATC_SUPPORT_QUANTMATH_H

#include <cmath>
#include <cstdint>
#include <vector>

namespace qatc {

/// Rounds half to even (the rounding of ONNX QuantizeLinear). NaN maps to 0.
template <typename T> inline T roundHalfToEven(T v) {
  if (std::isnan(v))
    return 0;
  return std::nearbyint(v); // the default FE_TONEAREST mode is half-to-even
}

/// Rounds half away from zero (TFLite's rounding).
template <typename T> inline T roundHalfAwayFromZero(T v) {
  if (std::isnan(v))
    return 0;
  return std::round(v);
}

/// Adds `zeroPoint` to an already rounded value and saturates to
/// [qmin, qmax].
template <typename T>
inline int64_t saturateAdd(T rounded, int64_t zeroPoint, int64_t qmin,
                           int64_t qmax) {
  T v = rounded + static_cast<T>(zeroPoint);
  if (v <= static_cast<T>(qmin))
    return qmin;
  if (v >= static_cast<T>(qmax))
    return qmax;
  return static_cast<int64_t>(v);
}

/// QuantizeLinear of one value: sat(rne(x / scale) + zeroPoint), the
/// division in T (float for an f32 model, double in fp64 evaluation).
template <typename T>
inline int64_t quantizeValue(T x, T scale, int64_t zeroPoint, int64_t qmin,
                             int64_t qmax) {
  return saturateAdd(roundHalfToEven(x / scale), zeroPoint, qmin, qmax);
}

/// DequantizeLinear of one value: (q - zeroPoint) * scale in T.
template <typename T>
inline T dequantizeValue(int64_t q, T scale, int64_t zeroPoint) {
  return static_cast<T>(q - zeroPoint) * scale;
}

/// Per-axis quantization: the channel (index along `axis`) of flat,
/// row-major element `i` of a tensor of shape `dims`. Default-constructed,
/// or with a negative axis, it is per tensor: always channel 0.
class AxisIndex {
public:
  AxisIndex() = default;
  template <typename Dims> AxisIndex(const Dims &dims, int64_t axis) {
    if (axis < 0)
      return;
    int64_t d = 0;
    for (int64_t n : dims) {
      if (d == axis)
        size = n;
      else if (d > axis)
        inner *= n;
      ++d;
    }
  }
  int64_t operator()(int64_t i) const {
    return size <= 1 ? 0 : (i / inner) % size;
  }
  /// Slices along the axis (1 per tensor).
  int64_t channels() const { return size; }

private:
  int64_t size = 1, inner = 1;
};

/// A weight as TensorRT quantizes it at build time: symmetric int8
/// (zero point 0), one scale per channel of `channel`.
inline std::vector<int8_t> quantizeWeights(const std::vector<float> &values,
                                           const std::vector<float> &scales,
                                           const AxisIndex &channel) {
  std::vector<int8_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    out[i] = static_cast<int8_t>(quantizeValue<float>(
        values[i], scales[channel(static_cast<int64_t>(i))], 0, -128, 127));
  return out;
}

} // namespace qatc

#endif // QATC_SUPPORT_QUANTMATH_H
