//===- CoreClock.cpp - the core's clock under load ------------------------===//
//
// The frequency /proc/cpuinfo reports is often the TSC's (2.6 GHz on a core
// that runs at 3.6 GHz and more under load), so the peak a kernel is
// measured against is computed from a measured clock instead: a chain of
// dependent integer adds retires one per cycle on every x86 core.
//
//===----------------------------------------------------------------------===//

#include "qatc/Runtime/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

double qatc::rt::measureCoreGHz() {
  constexpr int64_t kBlocks = 1 << 16; // x 32 adds: ~2 M cycles per sample
  double best = 0;
  for (int sample = 0; sample < 7; ++sample) {
    uint64_t x = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < kBlocks; ++i) {
#if defined(__x86_64__)
      // 32 adds, each waiting for the previous one: 32 cycles.
      asm volatile(".rept 32\n\taddq $1, %0\n\t.endr" : "+r"(x));
#else
      x += i;
#endif
    }
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (s > 0)
      best = std::max(best, 32.0 * kBlocks / s / 1e9);
  }
  return best > 0 ? best : 3.0;
}
