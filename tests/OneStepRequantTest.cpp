//===- OneStepRequantTest.cpp - requantization in one FMA, proven exact ---===//
//
// OneStepRequant (the AVX-512 epilogue's requantization: one FMA, a clamp
// where needed and up to two exceptions per channel) against the two-step
// requantization the reference computes, for every accumulator of each
// channel's range. The channels draw their scales over several decades, a
// bias, u8 and s8 outputs and a Relu clamp, as calibrated models have them.
// OneStepAdd (the requantized residual add in two FMAs) against the
// reference's DequantizeLinear, Add, Relu and QuantizeLinear on every pair
// of operands.
//
//===----------------------------------------------------------------------===//

#include "qatc/Codegen/OneStepRequant.h"
#include "qatc/Support/QuantMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>

using qatc::codegen::AddRequant;
using qatc::codegen::OneStepAdd;
using qatc::codegen::OneStepRequant;
using qatc::codegen::Requant;

namespace {

Requant randomChannel(std::mt19937 &rng, int i) {
  std::uniform_real_distribution<float> u(0, 1);
  Requant r;
  float sx = std::exp(std::log(0.005f) + 3.f * u(rng));
  float sw = std::exp(std::log(0.0002f) + 5.f * u(rng));
  r.mult = sx * sw;
  r.outScale = std::exp(std::log(0.005f) + 4.f * u(rng));
  r.hasBias = i % 4 != 0;
  r.bias = (u(rng) - 0.5f) * 4.f;
  r.hasScale = i % 5 == 0;
  r.scale = 0.5f + u(rng);
  bool u8 = i % 2;
  r.zp = u8 ? (i % 3 ? 128 : 97) : 0;
  r.qmin = u8 ? 0 : -128;
  r.qmax = u8 ? 255 : 127;
  if (i % 3 == 0) {
    r.hasAct = true;
    r.actLo = 0;
    r.actHi = i % 6 == 0 ? 6.f : INFINITY;
  }
  return r;
}

/// A channel from narrow scale ranges (many output levels over an
/// accumulator range), where the two roundings depart from the line now and
/// then; u8 with zero point 128 on odd `i`, s8 on even.
Requant narrowChannel(std::mt19937 &rng, int i) {
  std::uniform_real_distribution<float> u(0, 1);
  Requant r;
  r.mult = (0.01f + 0.09f * u(rng)) * (0.0005f + 0.02f * u(rng));
  r.outScale = 0.01f + 0.2f * u(rng);
  r.hasBias = true;
  r.bias = (u(rng) - 0.5f) * 2;
  r.zp = i % 2 ? 128 : 0;
  r.qmin = i % 2 ? 0 : -128;
  r.qmax = i % 2 ? 255 : 127;
  return r;
}

/// The fold of `r` over [lo, hi] with the clamps it needs there.
std::optional<OneStepRequant> foldOf(const Requant &r, int64_t lo, int64_t hi,
                                     size_t maxExceptions = 2) {
  return OneStepRequant::find(r, lo, hi, maxExceptions,
                              OneStepRequant::clamps(r, lo, hi));
}

/// Every accumulator of [lo, hi] gives the two-step result; true when the
/// fold was found.
bool foldsExactly(const Requant &r, int64_t lo, int64_t hi,
                  size_t *exceptions = nullptr, size_t maxExceptions = 2) {
  auto f = foldOf(r, lo, hi, maxExceptions);
  if (!f)
    return false;
  int64_t bad = 0;
  for (int64_t a = lo; a <= hi; ++a)
    bad += f->eval(a) != r.exact(a);
  EXPECT_EQ(bad, 0) << "mult " << r.mult << " out " << r.outScale << " zp "
                    << r.zp;
  if (exceptions)
    *exceptions = f->exceptions.size();
  return true;
}

TEST(OneStepRequant, EqualsTwoStepOverWholeRanges) {
  std::mt19937 rng(7);
  int found = 0;
  const int channels = 400;
  for (int i = 0; i < channels; ++i) {
    Requant r = randomChannel(rng, i);
    int64_t half = 20000 + (i % 7) * 15000;
    found += foldsExactly(r, -half, half + i);
  }
  // Calibrated scales fold almost always (4000 of 4000 channels measured);
  // fewer would cost the depthwise and pointwise layers their speed.
  EXPECT_GE(found, channels * 99 / 100);
}

TEST(OneStepRequant, ExceptionsFollowTheTwoStepRounding) {
  // Where the two roundings depart from the line, the fold adds the
  // difference at that accumulator: channels that need it, found among
  // narrow scale ranges (many levels per range), checked over the range.
  std::mt19937 rng(11);
  int checked = 0;
  for (int i = 0; i < 4000 && checked < 8; ++i) {
    Requant r = narrowChannel(rng, i);
    const int64_t lo = -150000, hi = 150000;
    auto f = foldOf(r, lo, hi);
    if (!f || f->exceptions.empty())
      continue;
    size_t e = 0;
    EXPECT_TRUE(foldsExactly(r, lo, hi, &e));
    EXPECT_EQ(e, f->exceptions.size());
    // Without its exceptions the channel is not exact: they are needed.
    OneStepRequant plain = *f;
    plain.exceptions.clear();
    int64_t bad = 0;
    for (auto [a, d] : f->exceptions)
      bad += plain.eval(a) != r.exact(a);
    EXPECT_GT(bad, 0);
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

TEST(OneStepRequant, ALineThroughEveryStepNeedsNoException) {
  // Narrow channels (many levels over the range), where the constants
  // rounded once and their neighbours in ulps leave exceptions on about one
  // channel in twenty (16 of these 300): a line fitted through every step of
  // the two-step form, through the FMA's f32 rounding and the ties, leaves
  // them on 6. Each fold is checked over its whole range.
  std::mt19937 rng(17);
  int folded = 0, withExceptions = 0;
  const int channels = 300;
  for (int i = 0; i < channels; ++i) {
    Requant r = narrowChannel(rng, i);
    size_t e = 0;
    if (!foldsExactly(r, -150000, 150000, &e))
      continue;
    ++folded;
    withExceptions += e > 0;
  }
  EXPECT_GE(folded, channels * 98 / 100);
  EXPECT_LE(withExceptions, channels / 30);
}

TEST(OneStepRequant, ClampsOnTheBytesWhereThatIsExact) {
  // The clamps moved after the exceptions and the packs (one byte max / min
  // per 64 outputs): wherever clampsOnBytes allows it, every accumulator of
  // the range still gives the two-step result. Channels with a Relu or
  // Relu6 (clamped) and narrow ones with exceptions.
  std::mt19937 rng(13);
  int clamped = 0, onBytes = 0, withExceptions = 0;
  for (int i = 0; i < 600; ++i) {
    Requant r = i % 2 ? randomChannel(rng, i) : narrowChannel(rng, i);
    if (i % 4 == 0) {
      r.hasAct = true;
      r.actLo = 0;
      r.actHi = i % 8 == 0 ? 6.f : INFINITY;
    }
    const int64_t lo = -60000, hi = 60000 + i;
    auto f = foldOf(r, lo, hi);
    if (!f || !(f->clampLo || f->clampHi))
      continue;
    ++clamped;
    if (!f->clampsOnBytes(lo, hi))
      continue;
    ++onBytes;
    withExceptions += !f->exceptions.empty();
    int64_t bad = 0;
    for (int64_t a = lo; a <= hi; ++a)
      bad += f->evalOnBytes(a) != r.exact(a);
    EXPECT_EQ(bad, 0) << "channel " << i;
  }
  EXPECT_GE(clamped, 100);
  EXPECT_GE(onBytes, clamped * 9 / 10);
  EXPECT_GT(withExceptions, 0);
  // An FMA that could leave the i32 range keeps its clamps on the floats.
  Requant r = randomChannel(rng, 1);
  r.mult = 1.5f;
  r.outScale = 1;
  auto f = foldOf(r, -800000000, 800000000);
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->clampsOnBytes(-800000000, 800000000));
}

TEST(OneStepRequant, MoreExceptionsWhereTheTargetDivides) {
  // Targets whose two-step form divides allow four exceptions: channels
  // that two cannot match, checked over their whole range with four.
  std::mt19937 rng(5);
  int checked = 0;
  for (int i = 0; i < 20000 && checked < 4; ++i) {
    Requant r = narrowChannel(rng, i);
    const int64_t lo = -150000, hi = 150000;
    if (foldOf(r, lo, hi))
      continue;
    size_t e = 0;
    if (!foldsExactly(r, lo, hi, &e, 4))
      continue;
    EXPECT_GT(e, 2u);
    EXPECT_LE(e, 4u);
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(OneStepRequant, ClampsWhereTheRangeIsWide) {
  Requant r;
  r.mult = 0.02f;
  r.outScale = 0.013f;
  r.zp = 128;
  r.qmin = 0;
  r.qmax = 255;
  // 2^30 / 1.5: the FMA could leave the i32 range, so both clamps.
  auto c = OneStepRequant::clamps(r, -800000000, 800000000);
  EXPECT_TRUE(c.first && c.second);
  // A small range relies on the packs' saturation.
  c = OneStepRequant::clamps(r, -100000, 100000);
  EXPECT_FALSE(c.first || c.second);
  EXPECT_TRUE(foldsExactly(r, -100000, 100000));
  // Relu narrows the low bound to the zero point: a clamp there.
  r.hasAct = true;
  r.actLo = 0;
  r.actHi = INFINITY;
  c = OneStepRequant::clamps(r, -100000, 100000);
  EXPECT_TRUE(c.first);
  EXPECT_FALSE(c.second);
  EXPECT_TRUE(foldsExactly(r, -100000, 100000));
  // Fewer clamps than needed are refused.
  EXPECT_FALSE(OneStepRequant::find(r, -100000, 100000, 2, {false, false}));
}

TEST(OneStepRequant, RefusesWhatItCannotMatch) {
  // A decreasing channel (a negative channel scale).
  Requant r;
  r.mult = 0.001f;
  r.hasScale = true;
  r.scale = -0.7f;
  r.outScale = 0.05f;
  EXPECT_FALSE(OneStepRequant::find(r, -1000, 1000, 2, {true, true}));
  // Round scales put a tie of the exact quotient every 200 accumulators
  // (0.05 * 0.01 / 0.1 = 1/200), each broken by the two-step rounding its
  // own way: more than two exceptions, so the layer keeps two steps.
  Requant t;
  t.mult = 0.05f * 0.01f;
  t.hasBias = true;
  t.bias = 0.1f;
  t.outScale = 0.1f;
  t.zp = 128;
  t.qmin = 0;
  t.qmax = 255;
  EXPECT_FALSE(OneStepRequant::find(t, -72640, 72710, 2, {true, true}));
}

} // namespace

namespace {

/// The reference's add of stored u (the conv's result, zero point zu) and r:
/// two DequantizeLinear, the Add, the activation, QuantizeLinear.
int64_t referenceAdd(const AddRequant &a, int64_t zu, int64_t q, int64_t r) {
  using namespace qatc;
  float y = dequantizeValue<float>(q, a.s1, zu) +
            dequantizeValue<float>(r, a.s2, a.rZp);
  if (a.hasAct)
    y = std::min(std::max(y, a.actLo), a.actHi);
  return quantizeValue<float>(y, a.outScale, a.zp, a.qmin, a.qmax);
}

} // namespace

TEST(OneStepAdd, EqualsTheReferenceOnEveryPair) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0, 1);
  int found = 0, layers = 120;
  for (int i = 0; i < layers; ++i) {
    AddRequant a;
    a.s1 = std::exp(std::log(0.005f) + 4.f * u(rng));
    a.s2 = std::exp(std::log(0.005f) + 4.f * u(rng));
    a.outScale = std::exp(std::log(0.005f) + 4.f * u(rng));
    // Stored bytes: signed int8 offset by 128, as the plans store them.
    int64_t zu = i % 3 ? 128 : 131;
    a.uLo = 0 - zu;
    a.uHi = 255 - zu;
    a.rZp = i % 4 ? 128 : 0;
    bool u8 = i % 2;
    a.zp = u8 ? (i % 5 ? 128 : 97) : 0;
    a.qmin = u8 ? 0 : -128;
    a.qmax = u8 ? 255 : 127;
    if (i % 3 != 2) {
      a.hasAct = true;
      a.actLo = 0;
      a.actHi = i % 6 == 0 ? 6.f : INFINITY;
    }
    std::optional<OneStepAdd> f = OneStepAdd::find(a);
    if (!f)
      continue;
    ++found;
    int64_t bad = 0;
    for (int64_t q = 0; q <= 255; ++q)
      for (int64_t r = 0; r <= 255; ++r) {
        int64_t want = referenceAdd(a, zu, q, r);
        bad += f->eval(q - zu, r) != want;
        bad += a.exact(q - zu, r) != want;
      }
    EXPECT_EQ(bad, 0) << "s1 " << a.s1 << " s2 " << a.s2 << " s " << a.outScale;
  }
  // The constants rounded once already match on most layers; a few ulps
  // around them on the rest (200 of 200 in a wider sweep).
  EXPECT_GE(found, layers * 95 / 100);
}

TEST(OneStepAdd, RoundScalesAndClamps) {
  // Equal scales: the sum is exact and the form is u + r - zp.
  AddRequant a;
  a.s1 = a.s2 = a.outScale = 0.05f;
  a.rZp = 128;
  a.zp = 128;
  a.uLo = -128;
  a.uHi = 127;
  a.hasAct = true; // Relu
  a.actLo = 0;
  a.actHi = INFINITY;
  std::optional<OneStepAdd> f = OneStepAdd::find(a);
  ASSERT_TRUE(f);
  // Relu at zero point 128 lifts the lower bound above the stored type's.
  EXPECT_TRUE(f->clampLo);
  EXPECT_FALSE(f->clampHi);
  EXPECT_TRUE(f->clampsOnBytes);
  EXPECT_EQ(f->eval(-128, 0), 128);
  EXPECT_EQ(f->eval(100, 255), 255);
  EXPECT_EQ(f->eval(3, 130), 133);
  // An output scale 2^-24 of the operands': t reaches past i32, so both
  // clamps stay in f32, before vcvtps2dq.
  AddRequant wide = a;
  wide.outScale = a.s1 * 0x1p-24f;
  std::optional<OneStepAdd> w = OneStepAdd::find(wide);
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->clampLo);
  EXPECT_TRUE(w->clampHi);
  EXPECT_FALSE(w->clampsOnBytes);
  // A Clip whose min exceeds its max, which the two-step epilogue applies
  // as it stands, is refused.
  a.actLo = 2;
  a.actHi = 1;
  EXPECT_FALSE(OneStepAdd::find(a));
  // So are scales that are not positive and finite.
  a.hasAct = false;
  a.s2 = -0.05f;
  EXPECT_FALSE(OneStepAdd::find(a));
  a.s2 = NAN;
  EXPECT_FALSE(OneStepAdd::find(a));
}
