//===- CoreClock.cpp - the core's clock and the host's peaks --------------===//
//
// The frequency /proc/cpuinfo reports is often the TSC's (2.6 GHz on a core
// that runs at 3.6 GHz and more under load), so the peak a kernel is
// measured against comes from measurements instead:
//
// - the clock: a chain of dependent `imul`s, 3 cycles each on every x86 core
//   of the last decade. A chain of `add $1` is no clock: Golden Cove-class
//   renamers execute small immediate adds at rename, and such a chain
//   reports 23 GHz on a 4.1 GHz core.
// - the int8 and fp32 peaks: independent vpdpbusd / FMA chains on the widest
//   unit the host has, timed. Core designs differ by 2x here at the same
//   ISA (Zen 4 splits a 512-bit op into two 256-bit halves; Intel server
//   cores have two 512-bit ports), so the peak is measured, not assumed.
// - AMX: the tdpbusd rate measured on operands in tiles. Its architectural
//   rate (2048 int8 ops per cycle per core) times the clock overstates
//   what the unit gives: a 2-vCPU KVM guest of a Xeon family 6 model 207
//   measured 1600-1730 ops per imul cycle on mixed operands (no slower
//   clock after tile work), 2000-2020 on tiles of zeros, and half as many
//   in stretches (by all appearances the core's other hyperthread, another
//   guest's, running tiles too); perf notes measured 1870 on another host.
// - where the core's model fixes how many 512-bit vpdpbusd / FMAs it issues
//   per cycle (zmmPerCycle), that rate times the clock is the peak. A
//   measured rate is what the core gave us at that moment: on a
//   2-vCPU KVM guest of a Xeon (family 6 model 207) the best of five 90 us
//   samples ranged from 0.9 to 1.84 vpdpbusd per cycle from one run of
//   `qatc bench` to the next (the other hyperthread of the core busy, or
//   not), which put a conv's "% of peak" anywhere from 90 to 200.
//
//===----------------------------------------------------------------------===//

#include "qatc/Runtime/Runtime.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace {

/// Best rate (units per second) over a few samples of `body(n)`, which does
/// `perCall * n` units of work.
template <typename Fn>
double bestRate(double perCall, int64_t n, Fn body, int samples = 5) {
  double best = 0;
  for (int sample = 0; sample < samples; ++sample) {
    auto t0 = std::chrono::steady_clock::now();
    body(n);
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (s > 0)
      best = std::max(best, perCall * n / s);
  }
  return best;
}

volatile int64_t sink;

#if defined(__x86_64__)
// 16 independent accumulators hide any latency up to 8 cycles at 2 per
// cycle. The operands change nothing (no saturation, no denormals).
// clang-format off
#define QATC_CHAINS(OP)                                                        \
  OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7)                              \
  OP(8) OP(9) OP(10) OP(11) OP(12) OP(13) OP(14) OP(15)
// The ymm kernels have 16 registers, two of them the operands: 16 chains
// spilled (AMD family 25 model 1: 54 of the 93 GFLOPS of two FMAs per
// cycle). 12 hide any latency up to 6 cycles at 2 per cycle.
#define QATC_CHAINS_YMM(OP)                                                    \
  OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7) OP(8) OP(9) OP(10) OP(11)
// clang-format on
constexpr int kYmmChains = 12;

__attribute__((target("avx512f,avx512vnni"))) void vnni512(int64_t n) {
  __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
#define DECL(i) __m512i c##i = _mm512_set1_epi32(i);
#define STEP(i) c##i = _mm512_dpbusd_epi32(c##i, a, b);
#define SUM(i) s = _mm512_add_epi32(s, c##i);
  QATC_CHAINS(DECL)
  for (int64_t i = 0; i < n; ++i) {
    QATC_CHAINS(STEP)
    __asm__ volatile("" : "+v"(a));
  }
  __m512i s = _mm512_setzero_si512();
  QATC_CHAINS(SUM)
  alignas(64) int32_t out[16];
  _mm512_store_si512(out, s);
  sink = out[0];
#undef DECL
#undef STEP
#undef SUM
}

__attribute__((target("avx2,avxvnni"))) void vnni256(int64_t n) {
  __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(1);
#define DECL(i) __m256i c##i = _mm256_set1_epi32(i);
#define STEP(i) c##i = _mm256_dpbusd_avx_epi32(c##i, a, b);
#define SUM(i) s = _mm256_add_epi32(s, c##i);
  QATC_CHAINS_YMM(DECL)
  for (int64_t i = 0; i < n; ++i) {
    QATC_CHAINS_YMM(STEP)
    __asm__ volatile("" : "+x"(a));
  }
  __m256i s = _mm256_setzero_si256();
  QATC_CHAINS_YMM(SUM)
  sink = _mm256_extract_epi32(s, 0);
#undef DECL
#undef STEP
#undef SUM
}

/// AVX2 without VNNI: vpmaddubsw, 32 u8 x s8 products (pairs summed) per
/// instruction, 12 chains each feeding its products back in as the next
/// u8 operand. In assembly: from intrinsics (a vpaddw per vpmaddubsw, or
/// chained ones) the compiler stored chains to the stack in the loop, and
/// the loop measured 1.33 instructions per cycle where the unit issues 2
/// (AMD family 25 model 1: 249 of 374 GOPS).
__attribute__((target("avx2"))) void maddubs256(int64_t n) {
  if (n <= 0)
    return;
// clang-format off
#define QATC_MADDUBS(i) "vpmaddubsw %%ymm15, %%ymm" #i ", %%ymm" #i "\n\t"
#define QATC_ZERO(i) "vpxor %%xmm" #i ", %%xmm" #i ", %%xmm" #i "\n\t"
  __asm__ volatile("vpcmpeqb %%ymm15, %%ymm15, %%ymm15\n\t"
                   QATC_CHAINS_YMM(QATC_ZERO)
                   "1:\n\t"
                   QATC_CHAINS_YMM(QATC_MADDUBS)
                   "dec %0\n\t"
                   "jnz 1b\n\t"
                   "vzeroupper"
                   : "+r"(n)
                   :
                   : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
                     "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm15", "cc");
  // clang-format on
#undef QATC_MADDUBS
#undef QATC_ZERO
}

__attribute__((target("avx512f"))) void fma512(int64_t n) {
  __m512 a = _mm512_set1_ps(1.f), b = _mm512_set1_ps(0.f);
#define DECL(i) __m512 c##i = _mm512_set1_ps(float(i));
#define STEP(i) c##i = _mm512_fmadd_ps(a, b, c##i);
#define SUM(i) s = _mm512_add_ps(s, c##i);
  QATC_CHAINS(DECL)
  for (int64_t i = 0; i < n; ++i) {
    QATC_CHAINS(STEP)
    __asm__ volatile("" : "+v"(a));
  }
  __m512 s = _mm512_setzero_ps();
  QATC_CHAINS(SUM)
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  sink = static_cast<int64_t>(out[0]);
#undef DECL
#undef STEP
#undef SUM
}

__attribute__((target("avx2,fma"))) void fma256(int64_t n) {
  __m256 a = _mm256_set1_ps(1.f), b = _mm256_set1_ps(0.f);
#define DECL(i) __m256 c##i = _mm256_set1_ps(float(i));
#define STEP(i) c##i = _mm256_fmadd_ps(a, b, c##i);
#define SUM(i) s = _mm256_add_ps(s, c##i);
  QATC_CHAINS_YMM(DECL)
  for (int64_t i = 0; i < n; ++i) {
    QATC_CHAINS_YMM(STEP)
    __asm__ volatile("" : "+x"(a));
  }
  __m256 s = _mm256_setzero_ps();
  QATC_CHAINS_YMM(SUM)
  sink = static_cast<int64_t>(_mm256_cvtss_f32(s));
#undef DECL
#undef STEP
#undef SUM
}
#undef QATC_CHAINS
#undef QATC_CHAINS_YMM

/// AMX: four independent tdpbusd accumulators (tmm0-3) over operands
/// already in tiles (tmm4-7), 16 x 16 x 64 multiply-adds each, in inline
/// assembly on fixed tiles as the compiled kernels issue them. Only where
/// the process may use the tiles (plan::hostFeatures()). The operands are
/// mixed bytes, not zeros: tiles of zeros ran 17 % faster (Xeon family 6
/// model 207: 6.2 against 7.2 ns per tdpbusd).
void amxTiles(int64_t n) {
  if (n <= 0)
    return;
  alignas(64) static const auto operand = [] {
    std::array<uint8_t, 1024> bytes;
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<uint8_t>(i * 37 + 11);
    return bytes;
  }();
  // Palette 1, every tile 16 rows of 64 bytes.
  alignas(64) uint8_t cfg[64] = {};
  cfg[0] = 1;
  for (int t = 0; t < 8; ++t) {
    cfg[16 + 2 * t] = 64;
    cfg[48 + t] = 16;
  }
  // clang-format off
  __asm__ volatile("ldtilecfg %1\n\t"
                   "tilezero %%tmm0\n\ttilezero %%tmm1\n\t"
                   "tilezero %%tmm2\n\ttilezero %%tmm3\n\t"
                   "tileloadd (%2,%3,1), %%tmm4\n\t"
                   "tileloadd (%2,%3,1), %%tmm5\n\t"
                   "tileloadd (%2,%3,1), %%tmm6\n\t"
                   "tileloadd (%2,%3,1), %%tmm7\n\t"
                   "1:\n\t"
                   "tdpbusd %%tmm6, %%tmm4, %%tmm0\n\t"
                   "tdpbusd %%tmm7, %%tmm4, %%tmm1\n\t"
                   "tdpbusd %%tmm6, %%tmm5, %%tmm2\n\t"
                   "tdpbusd %%tmm7, %%tmm5, %%tmm3\n\t"
                   "dec %0\n\t"
                   "jnz 1b\n\t"
                   "tilerelease"
                   : "+r"(n)
                   : "m"(cfg), "r"(operand.data()), "r"(int64_t(64))
                   : "cc", "memory");
  // clang-format on
}

/// The vendor string, display family and display model cpuid reports
/// (GenuineIntel, 6, 207 on an Emerald Rapids Xeon); false where cpuid has
/// no leaf 1.
bool cpuModel(std::string &vendor, unsigned &family, unsigned &model) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d))
    return false;
  char id[13] = {};
  std::copy_n(reinterpret_cast<const char *>(&b), 4, id);
  std::copy_n(reinterpret_cast<const char *>(&d), 4, id + 4);
  std::copy_n(reinterpret_cast<const char *>(&c), 4, id + 8);
  vendor = id;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return false;
  family = (a >> 8) & 0xf;
  model = (a >> 4) & 0xf;
  if (family == 0xf)
    family += (a >> 20) & 0xff;
  if (family == 6 || family >= 0xf)
    model |= ((a >> 16) & 0xf) << 4;
  return true;
}

#endif

} // namespace

int qatc::rt::zmmPerCycle(const std::string &vendor, unsigned family,
                          unsigned model) {
  if (vendor == "GenuineIntel" && family == 6) {
    switch (model) {
    case 106: // Ice Lake-SP
    case 108: // Ice Lake-D
    case 143: // Sapphire Rapids
    case 207: // Emerald Rapids
    case 173: // Granite Rapids
    case 174: // Granite Rapids-D
      return 2;
    case 125: // Ice Lake (client)
    case 126:
    case 140: // Tiger Lake
    case 141:
    case 167: // Rocket Lake
      return 1;
    default: // Skylake-SP and Cascade Lake (85): one or two FMA units by SKU
      return 0;
    }
  }
  if (vendor == "AuthenticAMD") {
    if (family == 0x19) // Zen 4: 512-bit ops in two 256-bit halves
      return 1;
    // Zen 5 with the full 512-bit datapath: Turin (and its dense cores) and
    // Granite Ridge; the mobile parts split 512-bit ops as Zen 4 does.
    if (family == 0x1a && (model < 0x20 || (model >= 0x40 && model < 0x50)))
      return 2;
  }
  return 0;
}

double qatc::rt::modelPeak(double measured, int perCycle, double opsPerInstr,
                           double ghz) {
  return std::max(measured, perCycle * opsPerInstr * ghz);
}

double qatc::rt::measureCoreGHz() {
  constexpr int64_t kBlocks = 1 << 14; // x 32 imuls x 3 cycles: ~1.6 M cycles
  return bestRate(96.0 / 1e9, kBlocks, [](int64_t n) {
    uint64_t x = 3;
    for (int64_t i = 0; i < n; ++i) {
#if defined(__x86_64__)
      // 32 imuls, each waiting for the previous one: 96 cycles.
      __asm__ volatile(".rept 32\n\timulq %0, %0\n\t.endr" : "+r"(x));
#else
      x = x * x + 1;
#endif
    }
    sink = static_cast<int64_t>(x);
  });
}

qatc::rt::HostPeak qatc::rt::measureHostPeak() {
  HostPeak p;
  // The clock is taken before and after the units' samples, the higher of
  // the two: a single reading taken as the core came up to speed (or while
  // a co-tenant held it down) gave 2.93 GHz on a Zen 5 that reads 3.39-3.49
  // GHz otherwise (AMD family 26 model 2), which put `qatc bench`'s int8
  // peak 16 % low and its convolutions at 106 % of it.
  p.ghz = measureCoreGHz();
  p.int8Gops = 256.0 * p.ghz;
  p.fp32Gflops = 64.0 * p.ghz;
  p.int8Unit = "assumed 256 ops/cycle";
  p.fp32Unit = "assumed 64 flops/cycle";
#if defined(__x86_64__)
  __builtin_cpu_init();
  // 16 instructions per iteration: about 40 us per sample, and many samples
  // (bestRate's best), so a quiet moment of the core is among them.
  constexpr int64_t n = 1 << 12;
  std::string vendor, model;
  unsigned family = 0, modelNumber = 0;
  int perCycle = 0;
  if (cpuModel(vendor, family, modelNumber)) {
    perCycle = rt::zmmPerCycle(vendor, family, modelNumber);
    model = vendor + " family " + std::to_string(family) + " model " +
            std::to_string(modelNumber);
  }
  // The model's rate times the clock where it is known; the measured rate
  // goes into the report beside it. A measured rate above it means the
  // clock read low (no unit beats its issue rate), and is the peak then.
  auto fromModel = [&](double &peak, std::string &unit, double opsPerInstr,
                       const char *what) {
    if (!perCycle)
      return;
    const double measuredPerCycle = peak / (opsPerInstr * p.ghz);
    char text[200];
    if (measuredPerCycle > perCycle) {
      std::snprintf(text, sizeof text,
                    "%s, measured: %.2f per cycle of the measured clock, "
                    "above the %d per cycle of %s (the clock read low)",
                    what, measuredPerCycle, perCycle, model.c_str());
    } else {
      std::snprintf(text, sizeof text,
                    "%s, %d per cycle (%s) x measured clock; measured %.2f "
                    "per cycle",
                    what, perCycle, model.c_str(), measuredPerCycle);
    }
    peak = rt::modelPeak(peak, perCycle, opsPerInstr, p.ghz);
    unit = text;
  };
  // The feature checks the plan loader makes (AMX only where this process
  // may use it).
  const uint64_t features = plan::hostFeatures();
  // Rates the clock turns into the peak or the report, once it is final.
  bool vnniFromModel = false, fmaFromModel = false, amxMeasured = false;
  if (features & plan::kFeatAMXINT8) {
    // 2048 tdpbusd of 16 x 16 x 64 multiply-adds a sample: about 16 us,
    // the tile configuration's cost under 1 % of it. Bursts of samples 3
    // ms apart, since in stretches each tdpbusd takes twice as long (the
    // unit shared, by all appearances): one burst of 64 samples gave 3845
    // to 4655 GOPS from run to run, 16 bursts 4654-4657.
    double measured = 0;
    for (int burst = 0; burst < 16; ++burst) {
      if (burst)
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
      measured =
          std::max(measured, bestRate(4 * 16384 * 2 / 1e9, 512, amxTiles, 8));
    }
    p.int8Gops = measured;
    amxMeasured = true;
  } else if (__builtin_cpu_supports("avx512vnni")) {
    // 16 lanes x 4 multiply-adds x 2 ops per vpdpbusd.
    p.int8Gops = bestRate(16 * 128 / 1e9, n, vnni512, 64);
    p.int8Unit = "AVX-512 VNNI vpdpbusd, measured";
    vnniFromModel = true;
  } else if (features & plan::kFeatAVXVNNI) {
    p.int8Gops = bestRate(kYmmChains * 64 / 1e9, n, vnni256, 64);
    p.int8Unit = "AVX-VNNI vpdpbusd, measured";
  } else if (__builtin_cpu_supports("avx2")) {
    p.int8Gops = bestRate(kYmmChains * 64 / 1e9, n, maddubs256, 64);
    // u8 x s8 pair sums in i16 saturate on full-range operands, so exact
    // kernels use vpmaddwd (i16 operands): half the products per
    // instruction.
    p.int8Unit = "AVX2 vpmaddubsw, measured; exact kernels reach half";
  }
  if (__builtin_cpu_supports("avx512f")) {
    p.fp32Gflops = bestRate(16 * 32 / 1e9, n, fma512, 64);
    p.fp32Unit = "AVX-512 FMA, measured";
    fmaFromModel = true;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    p.fp32Gflops = bestRate(kYmmChains * 16 / 1e9, n, fma256, 64);
    p.fp32Unit = "AVX2 FMA, measured";
  }
  p.ghz = std::max(p.ghz, measureCoreGHz());
  if (vnniFromModel)
    fromModel(p.int8Gops, p.int8Unit, 128, "AVX-512 VNNI vpdpbusd");
  if (fmaFromModel)
    fromModel(p.fp32Gflops, p.fp32Unit, 32, "AVX-512 FMA");
  if (amxMeasured) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "AMX tdpbusd on operands in tiles, measured: %.0f ops per "
                  "cycle of the measured clock (2048 architectural)",
                  p.int8Gops / p.ghz);
    p.int8Unit = text;
  }
#endif
  return p;
}
