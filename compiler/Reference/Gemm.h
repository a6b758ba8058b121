//===- Gemm.h - blocked matrix multiplication -------------------*- C++ -*-===//
//
// The reference evaluator's GEMM: C = A * B (+ C), for float and double, on
// matrices given by pointer and row/column strides (so transposed operands
// need no copy). Blocked and packed so that a ResNet-50 image evaluates in
// about a second; the summation order is fixed, so results are reproducible.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_COMPILER_REFERENCE_GEMM_H
#define QATC_COMPILER_REFERENCE_GEMM_H

#include <cstdint>

namespace qatc::ref {

/// A strided matrix view: element (i, j) is p[i * rowStride + j * colStride].
template <typename T> struct MatView {
  const T *p;
  int64_t rowStride;
  int64_t colStride;
};

/// C[M,N] (row-major, leading dimension ldc) = A[M,K] * B[K,N], plus the old
/// C when `accumulate`.
template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, MatView<T> a, MatView<T> b, T *c,
          int64_t ldc, bool accumulate);

template <>
void gemm<float>(int64_t, int64_t, int64_t, MatView<float>, MatView<float>,
                 float *, int64_t, bool);
template <>
void gemm<double>(int64_t, int64_t, int64_t, MatView<double>, MatView<double>,
                  double *, int64_t, bool);

} // namespace qatc::ref

#endif // QATC_COMPILER_REFERENCE_GEMM_H
