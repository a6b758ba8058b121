//===- OneStepRequant.h - one-FMA requantization, proven exact -*- C++ -*-===//
//
// An int8 convolution's result is requantized as the reference computes it:
// y = RN(RN(acc * m) [* scale] [+ bias]), then q = rne(clamp(RN(y / s_y))) +
// zp. On AVX-512 that is about ten instructions per 16 outputs (a division
// or the reciprocal's three), the larger part of a depthwise layer's time.
// One FMA, q = rne(acc * M + B) + zp with M = m [* scale] / s_y and B =
// bias / s_y rounded once, needs four, but rounds once where the reference
// rounds twice: the integers differ where the quotient lies within an ulp or
// so of a half.
//
// Both are monotone step functions of the integer accumulator over the
// range its weights allow, so they agree everywhere once they agree at
// every step: for each output level, the first accumulator reaching it.
// `OneStepRequant::find` computes those steps for both (a bisection per
// level) and collects the accumulators where they differ, with the
// difference. Where the constants rounded once and their neighbours in ulps
// leave some, a line is fitted through every step instead: for each level
// the first accumulator reaching it bounds the line from below and the one
// before from above, allowing for the FMA's f32 rounding and the tie to the
// even level (MobileNetV2's channels with exceptions: 272 -> 73 of 14592).
// A channel usually has none; a few have one or two, which the
// kernel corrects with a compare and a masked add each ("exceptions"). A
// channel needing more, or a decreasing channel (a negative channel scale),
// keeps the two-step form for its layer. The result is the same integer as
// the reference's for every accumulator the layer can produce; the unit
// test OneStepRequant checks it by evaluating both over whole ranges.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_CODEGEN_ONESTEPREQUANT_H
#define QATC_CODEGEN_ONESTEPREQUANT_H

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace qatc::codegen {

/// One output channel's requantization as the reference (and the two-step
/// epilogue) computes it.
struct Requant {
  float mult = 1;  ///< s_x * s_w[c], rounded to f32
  float scale = 1; ///< a channel scale (BatchNorm) when hasScale
  float bias = 0;  ///< when hasBias
  bool hasScale = false, hasBias = false;
  float outScale = 1;
  int64_t zp = 0, qmin = 0, qmax = 255; ///< stored domain
  /// An activation clamp of y before the quantization (when lo <= hi).
  bool hasAct = false;
  float actLo = 0, actHi = 0;

  /// The stored integer of accumulator `acc`.
  int64_t exact(int64_t acc) const;
  /// The stored integer bounds of the result: [qmin, qmax] narrowed by the
  /// activation's quotients.
  std::pair<int64_t, int64_t> bounds() const;

private:
  /// The bounds of the quotient y / outScale (minus the zero point) before
  /// the rounding, as the two-step epilogue clamps it.
  std::pair<float, float> quotientBounds() const;
};

/// q = sat(rne(clamp(fma(float(acc), m, b), lo, hi)) + zp + delta), where
/// delta is an exception's for its accumulator and 0 elsewhere, and sat is
/// the stored type's saturation (the kernel's packs). The zero point is
/// added after the rounding: folded into b, it would round with the
/// quotient at up to twice its magnitude, and channels would need more
/// exceptions (about 2 % of channels could not be matched with two against
/// none of 4000 this way).
struct OneStepRequant {
  float m = 0, b = 0;
  int64_t zp = 0;
  bool clampLo = false, clampHi = false;
  float lo = 0, hi = 0; ///< bounds of the quotient (minus the zero point)
  int64_t typeLo = 0, typeHi = 255;
  /// (accumulator, delta), at most the `maxExceptions` given to find.
  std::vector<std::pair<int32_t, int32_t>> exceptions;

  /// rne(clamp(fma(...))) + zp as an integer: before the exceptions and the
  /// saturation.
  int64_t raw(int64_t acc) const;
  /// The stored integer the kernel computes.
  int64_t eval(int64_t acc) const;
  /// Whether the clamps may apply to the stored bytes instead, after the
  /// exceptions and the packs (a vpmaxub per 64 outputs where a vmaxps
  /// takes one per 16): over [accMin, accMax] the FMA stays in the i32
  /// range, and no exception's accumulator rounds outside a clamp's bound.
  /// Then evalOnBytes equals eval there.
  bool clampsOnBytes(int64_t accMin, int64_t accMax) const;
  /// Whether fma(acc, m, b) over [accMin, accMax] could leave the i32 range
  /// (with a margin; vcvtps2dq makes INT_MIN of it).
  bool leavesI32(int64_t accMin, int64_t accMax) const;
  /// The kernel's result with the clamps on the bytes:
  /// clamp(sat(rne(fma(float(acc), m, b)) + zp + delta), lo + zp, hi + zp).
  int64_t evalOnBytes(int64_t acc) const;

  /// Whether `r` over [accMin, accMax] needs the clamps {lo, hi}: where its
  /// bounds are narrower than the stored type, or the FMA could leave the
  /// i32 range (vcvtps2dq makes INT_MIN of it). The packs saturate the rest.
  static std::pair<bool, bool> clamps(const Requant &r, int64_t accMin,
                                      int64_t accMax);
  /// The one-step form of `r` with the clamps given (a layer's channels
  /// share them), equal to `r.exact` for every accumulator in [accMin,
  /// accMax] (within int32), with at most `maxExceptions` exceptions;
  /// nullopt when none is found (a non-increasing channel, a non-finite
  /// constant, or more exceptions needed).
  static std::optional<OneStepRequant> find(const Requant &r, int64_t accMin,
                                            int64_t accMax,
                                            size_t maxExceptions,
                                            std::pair<bool, bool> given);
};

/// A residual add of two stored int8 values as the two-step epilogue (and
/// the reference) computes it: y = RN(RN(u * s1) + RN((r - rZp) * s2)), u the
/// conv's quantized result minus its zero point and r the residual's stored
/// byte, an optional clamp of y (the add's activation), then q =
/// rne(clamp(RN(y / s), qmin - zp, qmax - zp)) + zp.
struct AddRequant {
  float s1 = 1, s2 = 1, outScale = 1;
  int64_t uLo = -128, uHi = 127, rLo = 0, rHi = 255, rZp = 0;
  int64_t zp = 0, qmin = 0, qmax = 255; ///< stored domain
  bool hasAct = false;
  float actLo = 0, actHi = 0;

  /// The stored integer of operands u and r.
  int64_t exact(int64_t u, int64_t r) const;
};

/// q = sat(rne(clamp(fma(u, a, fma(r, b, c)), lo, hi)) + zp): two FMAs where
/// the two-step form takes about ten instructions, or two divisions. It
/// rounds differently from the reference, so it is used only where `find`
/// has compared it with `AddRequant::exact` on every pair of operands (65536
/// of them for two int8 tensors) and found no difference.
struct OneStepAdd {
  float a = 1, b = 1, c = 0;
  int64_t zp = 0;
  bool clampLo = false, clampHi = false;
  float lo = 0, hi = 0; ///< bounds of the quotient (minus the zero point)
  int64_t typeLo = 0, typeHi = 255;
  /// Every t lies well inside i32, so vcvtps2dq converts it exactly and the
  /// clamps (to lo and hi, which are integers) commute with the rounding
  /// and the packs' saturation: they may apply to the packed bytes.
  bool clampsOnBytes = false;

  /// The stored integer the kernel computes.
  int64_t eval(int64_t u, int64_t r) const;
  /// The exact one-step form of `r`: the constants rounded once, or a few
  /// ulps around them; nullopt when none matches every pair.
  static std::optional<OneStepAdd> find(const AddRequant &r);
};

} // namespace qatc::codegen

#endif // QATC_CODEGEN_ONESTEPREQUANT_H
