//===- QuantizeQuotientTest.cpp - the division-free quantization ----------===//
//
// ExactQuotient (the AMX target's quantization quotient, one multiplication
// and two FMAs instead of a division) against the division the reference
// evaluator does, for every f32 y where the result is not trivially a
// bound or 0: |y / s| between 1/8 and the bounds plus 2, both signs. Below
// that, both quotients round to 0; beyond it, both clamp (ExactQuotient.h).
// The scales are random over eight decades and the significands where
// reciprocals are hardest (1, 1 + ulp, 2 - ulp, all ones).
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
