//===- ShareBalancer.cpp - the threads' shares of a shared layer ----------===//
//
// Equal shares make every barrier wait for the slowest thread. On a 2-vCPU
// KVM guest (Xeon family 6 model 207) one vCPU ran a transformer encoder's
// layers 1.34x slower than the other for minutes at a time, so thread 1
// idled at each of the 20 barriers: 56 us of work against 42 per run.
// Moving the shares toward the measured speeds lets the faster core take
// the difference; Session uses it only when asked (setAdaptiveShares):
// the per-run noise of short layers' times also moves shares that were
// right (docs/Design.md has the measurements).
//
//===----------------------------------------------------------------------===//

#include "qatc/Runtime/Runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace qatc;
using namespace qatc::rt;

namespace {

/// Each run moves the average of the balanced shares this part of the way
/// toward its own: about ten runs' worth, so one run that an interrupt
/// slowed moves it little.
constexpr double kAverage = 0.1;
/// The shares stay equal while the average is this close to equal: the
/// per-run noise of short layers' times otherwise moves shares that were
/// right.
constexpr double kDeadBand = 0.03;

/// The bounds of a share (plan::LayerFn promises kernels the lower one).
double minShare(int threads) { return 0.5 / threads; }
double maxShare(int threads) { return 1.5 / threads; }

} // namespace

ShareBalancer::ShareBalancer(int threads)
    : shares_(std::max(threads, 1), 1.0 / std::max(threads, 1)),
      balanced_(shares_) {
  setBounds();
}

void ShareBalancer::setBounds() {
  const int n = threads();
  const int64_t one = plan::kShareOne;
  // Rounding must not take a share under its floor: kernels rely on it.
  const int64_t floor =
      n > 1 ? static_cast<int64_t>(std::ceil(minShare(n) * one)) : 0;
  bounds_.assign(n + 1, 0);
  double sum = 0;
  for (int t = 0; t + 1 < n; ++t) {
    sum += shares_[t];
    int64_t b = static_cast<int64_t>(std::llround(sum * one));
    bounds_[t + 1] =
        std::clamp<int64_t>(b, bounds_[t] + floor, one - (n - t - 1) * floor);
  }
  bounds_[n] = one;
}

void ShareBalancer::update(const std::vector<double> &busy) {
  const int n = threads();
  if (fixed_ || n < 2 || static_cast<int>(busy.size()) != n)
    return;
  std::vector<double> speed(n);
  double total = 0;
  for (int t = 0; t < n; ++t) {
    if (!(busy[t] > 0) || !std::isfinite(busy[t]))
      return;
    speed[t] = shares_[t] / busy[t];
    total += speed[t];
  }
  bool equal = true;
  for (int t = 0; t < n; ++t) {
    balanced_[t] += kAverage * (speed[t] / total - balanced_[t]);
    equal &= std::abs(balanced_[t] - 1.0 / n) < kDeadBand;
  }
  for (int t = 0; t < n; ++t)
    shares_[t] = equal ? 1.0 / n : balanced_[t];
  // Into [minShare, maxShare], summing to 1: a share past a bound stays at
  // it, and the others are scaled to the rest (n shares of at most 1.5 / n
  // and at least 0.5 / n can always sum to 1).
  std::vector<bool> pinned(n, false);
  for (int pass = 0; pass < n; ++pass) {
    double pinnedSum = 0, freeSum = 0;
    for (int t = 0; t < n; ++t)
      (pinned[t] ? pinnedSum : freeSum) += shares_[t];
    if (freeSum <= 0)
      break;
    const double scale = (1 - pinnedSum) / freeSum;
    bool changed = false;
    for (int t = 0; t < n; ++t) {
      if (pinned[t])
        continue;
      shares_[t] *= scale;
      double clamped = std::clamp(shares_[t], minShare(n), maxShare(n));
      if (clamped != shares_[t]) {
        shares_[t] = clamped;
        pinned[t] = changed = true;
      }
    }
    if (!changed)
      break;
  }
  setBounds();
}

bool ShareBalancer::fix(const std::vector<double> &shares, std::string &error) {
  const int n = threads();
  if (static_cast<int>(shares.size()) != n) {
    error = "expected " + std::to_string(n) + " thread shares, got " +
            std::to_string(shares.size());
    return false;
  }
  double sum = 0;
  for (double s : shares) {
    if (!(s >= minShare(n) - 1e-9 && s <= maxShare(n) + 1e-9)) {
      char range[64];
      std::snprintf(range, sizeof range, "[%.4g, %.4g]", minShare(n),
                    maxShare(n));
      error = "each of " + std::to_string(n) + " threads' shares must lie in " +
              range;
      return false;
    }
    sum += s;
  }
  if (std::abs(sum - 1) > 1e-6) {
    error = "the thread shares must sum to 1";
    return false;
  }
  shares_ = shares;
  fixed_ = true;
  setBounds();
  return true;
}
