//===- ExactQuotient.h - the quantization quotient, no division -*- C++ -*-===//
//
// QuantizeLinear divides: q = rne(clamp(RN(y / s), lo, hi)). Where vdivps is
// slow (one every 10 cycles on Intel cores), the kernels compute the same
// integer without it: y clamped to [L, H] (the quotients lo - 1/4 and
// hi + 1/4), then the correctly rounded quotient by one multiplication and
// two FMAs (Markstein): q0 = RN(y * z) with z = RN(1 / s), the residual
// r = y - q0 * s exactly (an FMA), q = RN(q0 + r * z).
//
// Why the integer is the same for every f32 y:
// - y < L: the reference's quotient is below lo - 1/4 (RN is monotone), so
//   it clamps to lo; ours is RN(L / s), within an ulp of lo - 1/4, which
//   rounds to lo. Likewise above H.
// - y in [L, H]: q equals RN(y / s), whose rounding to an integer lies in
//   [lo, hi] already (lo and hi are integers), so clamping changes nothing.
//   Only a residual that underflows (|y| below about 2^-100 for the scales
//   accepted here) makes q differ, and then both quotients are far below
//   1/2 and round to 0.
// - An activation clamp of y to [a, b] before the quantization composes
//   with [L, H]: clamp(clamp(y, a, b), L, H) = clamp(y, clamp(a, L, H),
//   clamp(b, L, H)).
// The unit test QuantizeQuotient checks it against the division over every
// f32 y in the range where the quotient is not trivially clamped or 0, for
// many scales (edge significands among them).
//
//===----------------------------------------------------------------------===//

#ifndef QATC_CODEGEN_EXACTQUOTIENT_H
#define QATC_CODEGEN_EXACTQUOTIENT_H

#include <algorithm>
#include <cmath>
#include <optional>

namespace qatc::codegen {

/// The constants of the division-free quantization quotient for scale `s`
/// and integer bounds [lo, hi] (the stored range minus the zero point).
struct ExactQuotient {
  float scale = 1, recip = 1;
  float yLo = 0, yHi = 0; ///< the clamp of y (with any activation clamp)

  /// nullopt where the argument does not hold: bounds that are not
  /// integers, or a scale far from 1 (the residual could underflow or the
  /// bounds overflow). `actLo <= actHi` is an activation clamp of y first.
  static std::optional<ExactQuotient>
  make(float s, float lo, float hi, float actLo = 1.f, float actHi = 0.f) {
    if (!(s > 0x1p-100f && s < 0x1p100f) || std::floor(lo) != lo ||
        std::floor(hi) != hi || lo > hi)
      return std::nullopt;
    ExactQuotient e;
    e.scale = s;
    e.recip = 1.0f / s;
    double sd = s;
    float L = static_cast<float>((lo - 0.25) * sd),
          H = static_cast<float>((hi + 0.25) * sd);
    e.yLo = L;
    e.yHi = H;
    if (actLo <= actHi) {
      e.yLo = std::clamp(actLo, L, H);
      e.yHi = std::clamp(actHi, L, H);
    }
    return e;
  }

  /// The quotient of a (non-NaN) y, as the kernels compute it; rounding it
  /// half to even gives the quantized integer (minus the zero point).
  float quotient(float y) const {
    float c = std::min(std::max(y, yLo), yHi);
    float q0 = c * recip;
    float r = std::fma(q0, -scale, c);
    return std::fma(r, recip, q0);
  }
};

/// A division by the constant `c` without vdivps: q0 = RN(x * z) with
/// z = RN(1 / c), r = x - q0 * c exactly (an FMA), q = RN(q0 + r * z).
/// Returns z where q = RN(x / c) for every f32 x with |x| in
/// [2^-100 max(1, |c|), 2^126 min(1, |c|)] (and x = 0): there each value
/// is a power of two times the same computation on x's significand, so
/// every significand in [1, 2) is checked against the division (once per
/// c, about 40 ms). Below that range q lies within ulps of a quotient
/// under 2^-100, which no quantization tells from the exact one. nullopt
/// where a significand differs, or c is not a normal number.
std::optional<float> exactReciprocal(float c);

} // namespace qatc::codegen

#endif // QATC_CODEGEN_EXACTQUOTIENT_H
