//===- ShareBalancerTest.cpp - the threads' shares of a shared layer ------===//

#include "qatc/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace qatc;
using namespace qatc::rt;

namespace {

/// The bounds tile [0, kShareOne) in order, each share at least the floor
/// kernels are promised (plan::LayerFn).
void expectValidBounds(const ShareBalancer &b) {
  const int n = b.threads();
  EXPECT_EQ(b.bound(0), 0);
  EXPECT_EQ(b.bound(n), plan::kShareOne);
  for (int t = 0; t < n; ++t) {
    int64_t width = b.bound(t + 1) - b.bound(t);
    if (n > 1)
      EXPECT_GE(width * 2 * n, plan::kShareOne) << "thread " << t;
    else
      EXPECT_EQ(width, plan::kShareOne);
  }
}

} // namespace

TEST(ShareBalancer, StartsEqual) {
  for (int n : {1, 2, 3, 7}) {
    ShareBalancer b(n);
    expectValidBounds(b);
    for (int t = 0; t < n; ++t)
      EXPECT_NEAR(b.share(t), 1.0 / n, 1e-12);
  }
}

TEST(ShareBalancer, MovesTowardTheMeasuredSpeeds) {
  // Thread 1 takes twice as long for the same work: the balanced shares are
  // 2/3 and 1/3, and each run goes part of the way there.
  ShareBalancer b(2);
  double before = b.share(0);
  for (int run = 0; run < 100; ++run) {
    double work0 = b.share(0), work1 = b.share(1);
    b.update({work0 * 1.0, work1 * 2.0});
    EXPECT_GE(b.share(0), before - 1e-12) << "run " << run;
    before = b.share(0);
    expectValidBounds(b);
  }
  EXPECT_NEAR(b.share(0), 2.0 / 3, 1e-3);
  EXPECT_NEAR(b.share(0) + b.share(1), 1.0, 1e-12);
}

TEST(ShareBalancer, NoiseAroundEqualKeepsThemEqual) {
  // Times within 4 % of each other, run by run: the average stays within
  // the dead band, and the shares exactly equal.
  ShareBalancer b(2);
  const double noise[] = {1.04, 0.97, 1.02, 0.96, 1.03, 1.0, 0.98, 1.04};
  for (int run = 0; run < 200; ++run) {
    b.update({0.5 * noise[run % 8], 0.5 * noise[(run + 3) % 8]});
    EXPECT_EQ(b.bound(1), plan::kShareOne / 2) << "run " << run;
  }
}

TEST(ShareBalancer, KeepsEveryShareWithinItsBounds) {
  // A thread 100 times slower: its share stops at 1 / (2 T).
  ShareBalancer b(3);
  for (int run = 0; run < 100; ++run)
    b.update({b.share(0), b.share(1) * 100, b.share(2)});
  EXPECT_NEAR(b.share(1), 0.5 / 3, 1e-9);
  EXPECT_LE(b.share(0), 1.5 / 3 + 1e-9);
  EXPECT_NEAR(b.share(0) + b.share(1) + b.share(2), 1.0, 1e-9);
  expectValidBounds(b);
}

TEST(ShareBalancer, IgnoresRunsWithoutTimes) {
  ShareBalancer b(2);
  b.update({0.0, 1.0});
  b.update({NAN, 1.0});
  b.update({1.0});
  EXPECT_NEAR(b.share(0), 0.5, 1e-12);
  ShareBalancer one(1);
  one.update({5.0});
  EXPECT_EQ(one.bound(1), plan::kShareOne);
}

TEST(ShareBalancer, FixedSharesStay) {
  ShareBalancer b(2);
  std::string error;
  ASSERT_TRUE(b.fix({0.25, 0.75}, error)) << error;
  EXPECT_EQ(b.bound(1), plan::kShareOne / 4);
  b.update({1.0, 10.0});
  EXPECT_NEAR(b.share(0), 0.25, 1e-12);
  EXPECT_TRUE(b.fixed());
  expectValidBounds(b);
}

TEST(ShareBalancer, RefusesSharesOutsideTheBounds) {
  ShareBalancer b(2);
  std::string error;
  EXPECT_FALSE(b.fix({0.2, 0.8}, error));
  EXPECT_NE(error.find("[0.25"), std::string::npos) << error;
  EXPECT_FALSE(b.fix({0.5, 0.6}, error));
  EXPECT_NE(error.find("sum to 1"), std::string::npos) << error;
  EXPECT_FALSE(b.fix({1.0}, error));
  EXPECT_NE(error.find("expected 2"), std::string::npos) << error;
  EXPECT_FALSE(b.fixed());
}
