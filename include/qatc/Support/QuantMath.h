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

} // namespace qatc

#endif // QATC_SUPPORT_QUANTMATH_H
