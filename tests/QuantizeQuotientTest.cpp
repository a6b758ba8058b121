//===- QuantizeQuotientTest.cpp - the division-free quantization ----------===//
//
// ExactQuotient (the AMX target's quantization quotient, one multiplication
// and two FMAs instead of a division) against the division the reference
// evaluator does, for every f32 y where the result is not trivially a
// bound or 0: |y / s| between 1/8 and the bounds plus 2, both signs. Below
// that, both quotients round to 0; beyond it, both clamp (ExactQuotient.h).
// The scales are random over eight decades and the significands where
// reciprocals are hardest (1, 1 + ulp, 2 - ulp, all ones). Also the
// chains' division by a constant (exactReciprocal) over its domain.
//
//===----------------------------------------------------------------------===//

#include "qatc/Codegen/ExactQuotient.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

using qatc::codegen::ExactQuotient;
using qatc::codegen::exactReciprocal;

namespace {

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// The reference: rne(clamp(RN(y / s), lo, hi)) after the activation clamp.
float reference(float y, float s, float lo, float hi, float a, float b) {
  if (a <= b)
    y = std::min(std::max(y, a), b);
  float q = y / s;
  q = std::min(std::max(q, lo), hi);
  return std::nearbyint(q);
}

/// Mismatches of the two over every float with |y| in [from, to].
int64_t mismatches(float s, float lo, float hi, float a, float b, float from,
                   float to) {
  auto e = ExactQuotient::make(s, lo, hi, a, b);
  if (!e)
    return -1;
  uint32_t first = floatToBits(from), last = floatToBits(to);
  int64_t bad = 0;
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t u = first; u <= last; ++u) {
      float y = bitsToFloat(u | sign);
      float want = reference(y, s, lo, hi, a, b);
      float got = std::nearbyint(e->quotient(y));
      bad += want != got;
    }
  return bad;
}

} // namespace

TEST(QuantizeQuotient, EqualsTheDivisionForEveryInput) {
  std::vector<float> scales = {1.0f,
                               std::nextafter(1.0f, 2.0f),
                               std::nextafter(2.0f, 0.0f),
                               bitsToFloat(0x3c7fffffu), // all-ones significand
                               bitsToFloat(0x3a7fffffu),
                               1.0f / 127,
                               0.0123456f,
                               0.1f,
                               3.0f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> decade(-5, 3);
  while (scales.size() < 24)
    scales.push_back(static_cast<float>(std::pow(10.0, decade(rng))));
  struct Bounds {
    float lo, hi, a, b;
  };
  // Symmetric int8, uint8 with a zero point, and a Relu6 joined into it.
  std::vector<Bounds> bounds = {
      {-128, 127, 1, 0}, {-3, 252, 1, 0}, {-128, 127, 0, 6}};
  std::vector<int64_t> bad(scales.size(), 0);
  auto work = [&](size_t part) {
    for (size_t i = part; i < scales.size(); i += 2) {
      float s = scales[i];
      const Bounds &bd = bounds[i % bounds.size()];
      float to = (std::max(std::fabs(bd.lo), std::fabs(bd.hi)) + 2) * s;
      bad[i] = mismatches(s, bd.lo, bd.hi, bd.a, bd.b, s / 8, to);
    }
  };
  std::thread other(work, 1);
  work(0);
  other.join();
  for (size_t i = 0; i < scales.size(); ++i)
    EXPECT_EQ(bad[i], 0) << "scale " << scales[i];
}

TEST(QuantizeQuotient, BoundsAndScalesOutsideTheArgumentAreRefused) {
  EXPECT_FALSE(ExactQuotient::make(0.1f, -128.5f, 127));
  EXPECT_FALSE(ExactQuotient::make(0x1p-110f, -128, 127));
  EXPECT_FALSE(ExactQuotient::make(-0.1f, -128, 127));
  EXPECT_TRUE(ExactQuotient::make(0.1f, -128, 127));
}

TEST(QuantizeQuotient, InfinitiesClampAndTinyValuesRoundToZero) {
  auto e = ExactQuotient::make(0.05f, -128, 127);
  ASSERT_TRUE(e);
  EXPECT_EQ(std::nearbyint(e->quotient(INFINITY)), 127);
  EXPECT_EQ(std::nearbyint(e->quotient(-INFINITY)), -128);
  EXPECT_EQ(std::nearbyint(e->quotient(1e-38f)), 0);
  EXPECT_EQ(std::nearbyint(e->quotient(-1e-45f)), 0);
}

// The chains' division by a constant (KB::divide): where exactReciprocal
// accepts c, the product and two FMAs equal x / c over its whole domain:
// every significand at random exponents across [2^-100 max(1, |c|),
// 2^126 min(1, |c|)], both signs, and 0. GELU's sqrt(2) must be accepted,
// or its projection takes vdivps again.
TEST(ExactReciprocal, EqualsTheDivisionOverItsDomain) {
  const float divisors[] = {1.41421354f, -1.41421354f, 3.f,   6.f,
                            0.1f,        255.f,        1e-3f, 1.17549435e-37f,
                            7.5e30f};
  std::mt19937 rng(7);
  for (float c : divisors) {
    std::optional<float> z = exactReciprocal(c);
    ASSERT_TRUE(z) << c;
    EXPECT_EQ(*z, 1.0f / c);
    int lo = -100 + std::max(0, std::ilogb(c) + 1),
        hi = 125 + std::min(0, std::ilogb(c));
    std::uniform_int_distribution<int> exponent(lo, hi);
    int64_t bad = 0;
    for (uint32_t m = 0; m < (1u << 23); m += 7) {
      uint32_t bits = 0x3f800000u | m;
      float x;
      std::memcpy(&x, &bits, 4);
      x = std::ldexp(x, exponent(rng));
      for (float v : {x, -x}) {
        float q0 = v * *z;
        float q = std::fma(std::fma(q0, -c, v), *z, q0);
        bad += q != v / c;
      }
    }
    EXPECT_EQ(bad, 0) << c;
    float q0 = 0.f * *z;
    EXPECT_EQ(std::fma(std::fma(q0, -c, 0.f), *z, q0), 0.f / c);
  }
}

TEST(ExactReciprocal, DivisorsThatAreNotNormalAreRefused) {
  EXPECT_FALSE(exactReciprocal(0.f));
  EXPECT_FALSE(exactReciprocal(1e-40f));
  EXPECT_FALSE(exactReciprocal(INFINITY));
  EXPECT_FALSE(exactReciprocal(NAN));
  // The reciprocal of 2^126 is normal; of 2^127, below 2^-126.
  EXPECT_TRUE(exactReciprocal(0x1p126f));
  EXPECT_FALSE(exactReciprocal(0x1p127f));
}
