//===- HostPeakTest.cpp - the core models whose issue rate is known
//--------===//
//
// The peak `qatc bench` reports is the model's 512-bit issue rate times the
// measured clock where the model fixes that rate, so a wrong entry would
// misstate every "% of peak" on that CPU by 2x.
//
//===----------------------------------------------------------------------===//

#include "qatc/Runtime/Runtime.h"

#include <cmath>
#include <gtest/gtest.h>
#include <string>

using qatc::rt::zmmPerCycle;

TEST(HostPeak, ServerCoresWithTwo512BitUnits) {
  for (unsigned model : {106u, 108u, 143u, 207u, 173u, 174u})
    EXPECT_EQ(zmmPerCycle("GenuineIntel", 6, model), 2) << model;
  EXPECT_EQ(zmmPerCycle("AuthenticAMD", 0x1a, 0x02), 2); // Turin
  EXPECT_EQ(zmmPerCycle("AuthenticAMD", 0x1a, 0x11), 2); // Turin dense
  EXPECT_EQ(zmmPerCycle("AuthenticAMD", 0x1a, 0x44), 2); // Granite Ridge
}

TEST(HostPeak, CoresWithOne) {
  EXPECT_EQ(zmmPerCycle("AuthenticAMD", 0x19, 0x11), 1); // Zen 4 Genoa
  EXPECT_EQ(zmmPerCycle("AuthenticAMD", 0x19, 0x61), 1); // Zen 4 Raphael
  for (unsigned model : {125u, 126u, 140u, 141u, 167u})
    EXPECT_EQ(zmmPerCycle("GenuineIntel", 6, model), 1) << model;
}

TEST(HostPeak, UnknownOrVaryingModelsAreMeasured) {
  // Skylake-SP / Cascade Lake: one or two FMA units by SKU.
  EXPECT_EQ(zmmPerCycle("GenuineIntel", 6, 85), 0);
  // Zen 5 mobile (Strix Point) splits 512-bit ops; an unlisted Intel model.
  EXPECT_EQ(zmmPerCycle("AuthenticAMD", 0x1a, 0x24), 0);
  EXPECT_EQ(zmmPerCycle("GenuineIntel", 6, 151), 0);
  EXPECT_EQ(zmmPerCycle("GenuineIntel", 19, 1), 0);
  EXPECT_EQ(zmmPerCycle("HygonGenuine", 0x18, 2), 0);
}

TEST(HostPeak, NeverBelowWhatTheUnitGave) {
  // 2 vpdpbusd per cycle at 3.45 GHz: 883 GOPS.
  EXPECT_DOUBLE_EQ(qatc::rt::modelPeak(850, 2, 128, 3.45), 2 * 128 * 3.45);
  // The clock read 2.93 GHz while the unit gave 850 GOPS (2.27 per cycle):
  // the measured rate is the peak, not the 750 of the model.
  EXPECT_DOUBLE_EQ(qatc::rt::modelPeak(850, 2, 128, 2.93), 850);
}

TEST(HostPeak, ReportNamesItsSource) {
  qatc::rt::HostPeak p = qatc::rt::measureHostPeak();
  ASSERT_GT(p.ghz, 0.1);
  EXPECT_GT(p.int8Gops, 0);
  EXPECT_GT(p.fp32Gflops, 0);
  EXPECT_FALSE(p.int8Unit.empty());
  // A rate from the model is that rate times the clock, exactly.
  if (p.int8Unit.find("per cycle (") != std::string::npos &&
      p.int8Unit.find("AMX") == std::string::npos) {
    double perCycle = p.int8Gops / (128 * p.ghz);
    EXPECT_NEAR(perCycle, std::round(perCycle), 1e-9) << p.int8Unit;
  }
  // A measured vpdpbusd rate above the model's (the clock read low) is the
  // peak itself: no "% of peak" may be computed against less than the unit
  // was seen to give.
  if (p.int8Unit.find("the clock read low") != std::string::npos) {
    auto at = p.int8Unit.find("measured: ");
    ASSERT_NE(at, std::string::npos) << p.int8Unit;
    double perCycle = std::stod(p.int8Unit.substr(at + 10));
    EXPECT_NEAR(perCycle, p.int8Gops / (128 * p.ghz), 0.01) << p.int8Unit;
  }
  // On AMX: the rate measured on tiles, at most the architectural 2048 ops
  // per cycle (plus the clock's error), and named per cycle in the unit.
  if (p.int8Unit.find("AMX") != std::string::npos) {
    EXPECT_LT(p.int8Gops, 2048 * p.ghz * 1.1) << p.int8Unit;
    auto at = p.int8Unit.find("measured: ");
    ASSERT_NE(at, std::string::npos) << p.int8Unit;
    double perCycle = std::stod(p.int8Unit.substr(at + 10));
    EXPECT_NEAR(perCycle, p.int8Gops / p.ghz, 1.0) << p.int8Unit;
  }
}
