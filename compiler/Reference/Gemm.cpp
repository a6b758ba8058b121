//===- Gemm.cpp - blocked matrix multiplication ---------------------------===//
//
// Goto-style blocking: B is packed in KC x NR column panels, A in MR x KC
// row panels, and an MR x NR register tile accumulates with vector FMAs.
// The whole GEMM is compiled for x86-64-v3 (AVX2+FMA) and for the baseline
// ISA, and the loader picks by CPU features at run time (GCC target_clones;
// "arch=haswell" would select by CPU model and miss every AMD CPU).
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace qatc::ref;

// Clang (only the fuzz sub-build uses it) leaves the helpers of a
// target_clones function in an anonymous namespace undefined; one baseline
// copy serves there.
#if defined(__clang__)
#define QATC_GEMM_CLONES
#else
#define QATC_GEMM_CLONES                                                       \
  __attribute__((target_clones("arch=x86-64-v3", "default")))
#endif

namespace {

constexpr int64_t kMR = 6;
constexpr int64_t kKC = 256;
constexpr int64_t kMC = 96;
constexpr int64_t kNC = 2048;

/// Register-tile width: two 32-byte vectors.
template <typename T> constexpr int64_t nr() { return 64 / sizeof(T); }

/// acc[MR][NR] = sum over k of a[k][MR] x b[k][NR] (packed panels). The
/// twelve accumulators are named variables: GCC keeps those in registers,
/// but spills an array of vectors to memory on every iteration.
template <typename T>
__attribute__((always_inline)) inline void
microKernelBody(int64_t kc, const T *__restrict a, const T *__restrict b,
                T *__restrict acc) {
  typedef T V __attribute__((vector_size(32)));
  constexpr int64_t kLanes = 32 / sizeof(T);
  static_assert(kMR == 6, "the kernel body is written for 6 rows");
  V c00{}, c01{}, c10{}, c11{}, c20{}, c21{}, c30{}, c31{}, c40{}, c41{}, c50{},
      c51{};
  for (int64_t p = 0; p < kc; ++p) {
    V b0, b1;
    std::memcpy(&b0, b + p * 2 * kLanes, sizeof(V));
    std::memcpy(&b1, b + p * 2 * kLanes + kLanes, sizeof(V));
    const T *ap = a + p * kMR;
    V a0 = V{} + ap[0], a1 = V{} + ap[1], a2 = V{} + ap[2];
    c00 += a0 * b0;
    c01 += a0 * b1;
    c10 += a1 * b0;
    c11 += a1 * b1;
    c20 += a2 * b0;
    c21 += a2 * b1;
    V a3 = V{} + ap[3], a4 = V{} + ap[4], a5 = V{} + ap[5];
    c30 += a3 * b0;
    c31 += a3 * b1;
    c40 += a4 * b0;
    c41 += a4 * b1;
    c50 += a5 * b0;
    c51 += a5 * b1;
  }
  const V rows[kMR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                          {c30, c31}, {c40, c41}, {c50, c51}};
  for (int64_t i = 0; i < kMR; ++i) {
    std::memcpy(acc + i * 2 * kLanes, &rows[i][0], sizeof(V));
    std::memcpy(acc + i * 2 * kLanes + kLanes, &rows[i][1], sizeof(V));
  }
}

/// Packs `depth` steps of a panel `width` lines wide into dst[step][panel],
/// zero-padding the panel to `panel` lines: B panels are rows of columns, A
/// panels columns of rows, so both are this with the strides swapped.
template <typename T>
__attribute__((always_inline)) inline void
packPanel(T *dst, const T *src, int64_t stepStride, int64_t lineStride,
          int64_t depth, int64_t width, int64_t panel) {
  for (int64_t p = 0; p < depth; ++p) {
    const T *row = src + p * stepStride;
    for (int64_t j = 0; j < width; ++j)
      dst[p * panel + j] = row[j * lineStride];
    for (int64_t j = width; j < panel; ++j)
      dst[p * panel + j] = T(0);
  }
}

/// A 64-byte aligned scratch buffer.
template <typename T> struct Buffer {
  explicit Buffer(size_t n)
      : p(static_cast<T *>(
            std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64))) {}
  ~Buffer() { std::free(p); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  T *p;
};

} // namespace

namespace {

/// The whole blocked GEMM, inlined into one function per ISA below: mixing
/// AVX code (the micro-kernel) with baseline SSE code (the packing loops)
/// across calls made the GEMM ten times slower.
template <typename T>
__attribute__((always_inline)) inline void
gemmBody(int64_t m, int64_t n, int64_t k, MatView<T> a, MatView<T> b, T *c,
         int64_t ldc, bool accumulate) {
  constexpr int64_t kNR = nr<T>();
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i)
        std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  Buffer<T> packA(kMC * kKC);
  Buffer<T> packB(kKC * (kNC + kNR));
  T acc[kMR * kNR];
  for (int64_t jc = 0; jc < n; jc += kNC) {
    int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      int64_t kc = std::min(kKC, k - pc);
      bool first = pc == 0 && !accumulate;
      // Pack B[pc:pc+kc, jc:jc+nc] as NR-wide panels, zero-padded.
      for (int64_t jr = 0; jr < nc; jr += kNR)
        packPanel(packB.p + jr * kc,
                  b.p + pc * b.rowStride + (jc + jr) * b.colStride, b.rowStride,
                  b.colStride, kc, std::min(kNR, nc - jr), kNR);
      for (int64_t ic = 0; ic < m; ic += kMC) {
        int64_t mc = std::min(kMC, m - ic);
        // Pack A[ic:ic+mc, pc:pc+kc] as MR-tall panels, zero-padded.
        for (int64_t ir = 0; ir < mc; ir += kMR)
          packPanel(packA.p + ir * kc,
                    a.p + (ic + ir) * a.rowStride + pc * a.colStride,
                    a.colStride, a.rowStride, kc, std::min(kMR, mc - ir), kMR);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          int64_t w = std::min(kNR, nc - jr);
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            int64_t h = std::min(kMR, mc - ir);
            microKernelBody<T>(kc, packA.p + ir * kc, packB.p + jr * kc, acc);
            for (int64_t i = 0; i < h; ++i) {
              T *row = c + (ic + ir + i) * ldc + jc + jr;
              const T *src = acc + i * kNR;
              if (first)
                for (int64_t j = 0; j < w; ++j)
                  row[j] = src[j];
              else
                for (int64_t j = 0; j < w; ++j)
                  row[j] += src[j];
            }
          }
        }
      }
    }
  }
}

QATC_GEMM_CLONES void gemmF32(int64_t m, int64_t n, int64_t k, MatView<float> a,
                              MatView<float> b, float *c, int64_t ldc,
                              bool accumulate) {
  gemmBody<float>(m, n, k, a, b, c, ldc, accumulate);
}

QATC_GEMM_CLONES void gemmF64(int64_t m, int64_t n, int64_t k,
                              MatView<double> a, MatView<double> b, double *c,
                              int64_t ldc, bool accumulate) {
  gemmBody<double>(m, n, k, a, b, c, ldc, accumulate);
}

} // namespace

template <>
void qatc::ref::gemm<float>(int64_t m, int64_t n, int64_t k, MatView<float> a,
                            MatView<float> b, float *c, int64_t ldc,
                            bool accumulate) {
  gemmF32(m, n, k, a, b, c, ldc, accumulate);
}

template <>
void qatc::ref::gemm<double>(int64_t m, int64_t n, int64_t k, MatView<double> a,
                             MatView<double> b, double *c, int64_t ldc,
                             bool accumulate) {
  gemmF64(m, n, k, a, b, c, ldc, accumulate);
}
