//===- BarriersTest.cpp - where a plan's threads must meet ----------------===//

#include "qatc/Codegen/Barriers.h"

#include <gtest/gtest.h>

using namespace qatc::codegen;

namespace {

using Range = std::pair<int64_t, int64_t>;

LayerAccess layer(bool parallel, std::vector<Range> reads,
                  std::vector<Range> writes) {
  LayerAccess l;
  l.parallel = parallel;
  l.reads = std::move(reads);
  l.writes = std::move(writes);
  return l;
}

} // namespace

TEST(Barriers, IndependentProjectionsMeetOnce) {
  // A layer norm writes x; Q, K and V read x and write three tensors; the
  // scores read Q and K.
  std::vector<LayerAccess> l = {
      layer(true, {{0, 64}}, {{64, 128}}),                  // norm
      layer(true, {{64, 128}}, {{128, 192}}),               // Q
      layer(true, {{64, 128}}, {{192, 256}}),               // K
      layer(true, {{64, 128}}, {{256, 320}}),               // V
      layer(true, {{128, 192}, {192, 256}}, {{320, 384}})}; // scores
  std::vector<bool> want = {true, true, false, false, true};
  EXPECT_EQ(barriersBefore(l), want);
}

TEST(Barriers, EveryHazardMeets) {
  // Read after write, write after read, write after write: each across a
  // layer without a barrier in between (the window, not only the last).
  auto two = [](LayerAccess a, LayerAccess b) {
    LayerAccess gap = layer(true, {{1000, 1064}}, {{2000, 2064}});
    return barriersBefore({a, gap, b});
  };
  std::vector<bool> meetAtLast = {true, false, true};
  EXPECT_EQ(two(layer(true, {}, {{0, 64}}), layer(true, {{32, 96}}, {})),
            meetAtLast);
  EXPECT_EQ(two(layer(true, {{0, 64}}, {}), layer(true, {}, {{63, 64}})),
            meetAtLast);
  EXPECT_EQ(two(layer(true, {}, {{0, 64}}), layer(true, {}, {{0, 8}})),
            meetAtLast);
  // Adjacent ranges and shared reads do not conflict.
  std::vector<bool> once = {true, false, false};
  EXPECT_EQ(two(layer(true, {{0, 64}}, {{64, 128}}),
                layer(true, {{0, 64}}, {{128, 192}})),
            once);
}

TEST(Barriers, ThreadZeroAloneKeepsItsOrder) {
  // Two layers thread 0 runs alone need no barrier between them however
  // they overlap; a shared layer after them that reads their result does,
  // and so does a thread-0 layer after a shared one it reads.
  std::vector<LayerAccess> l = {
      layer(true, {{0, 64}}, {{64, 128}}),
      layer(false, {{64, 128}}, {{128, 192}}),   // reads the shared result
      layer(false, {{128, 192}}, {{192, 256}}),  // thread 0 after thread 0
      layer(true, {{192, 256}}, {{256, 320}}),   // reads thread 0's
      layer(true, {{0, 64}}, {{320, 384}}),      // independent
      layer(false, {{256, 320}}, {{384, 448}})}; // reads a shared result
  std::vector<bool> want = {true, true, false, true, false, true};
  EXPECT_EQ(barriersBefore(l), want);
}

TEST(Barriers, ABarrierClearsTheWindow) {
  // Layer 2 conflicts with layer 0 only; after the barrier before layer 2,
  // layer 3, which conflicts with layer 0 as well, needs none.
  std::vector<LayerAccess> l = {layer(true, {}, {{0, 64}}),
                                layer(true, {}, {{64, 128}}),
                                layer(true, {{0, 64}}, {{128, 192}}),
                                layer(true, {{0, 64}}, {{192, 256}})};
  std::vector<bool> want = {true, false, true, false};
  EXPECT_EQ(barriersBefore(l), want);
}
