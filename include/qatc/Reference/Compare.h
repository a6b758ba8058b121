//===- Compare.h - how far apart two tensors are ----------------*- C++ -*-===//
//
// The metrics `qatc compare` prints and the tests assert: max/mean absolute
// difference, difference relative to the reference's range, differences in
// LSBs for quantized (int8/uint8) tensors, cosine similarity, SQNR and, for
// classifier outputs, top-1 agreement.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_REFERENCE_COMPARE_H
#define QATC_REFERENCE_COMPARE_H

#include "qatc/Reference/Tensor.h"

#include <optional>
#include <string>
#include <vector>

namespace qatc::ref {

/// Limits a comparison must stay within; unset limits are not checked.
struct Tolerance {
  /// numpy.allclose: |got - ref| <= atol + rtol * |ref| for every element.
  std::optional<double> atol, rtol;
  /// max |got - ref| / (max(ref) - min(ref)).
  std::optional<double> maxRangeRel;
  std::optional<double> minCosine;
  std::optional<double> minSqnrDb;
  /// Quantized tensors: largest difference in LSBs, and the largest share of
  /// elements allowed to differ at all.
  std::optional<int64_t> maxLsb;
  std::optional<double> maxLsbFraction;
  /// Classifier outputs must agree on the arg-max of every row.
  bool top1 = false;
};

struct TensorDiff {
  std::string name;
  int64_t count = 0;
  double maxAbs = 0, meanAbs = 0, range = 0, rangeRel = 0;
  double cosine = 1, sqnrDb = 0; // sqnrDb is +inf for identical tensors
  bool quantized = false;
  int64_t maxLsb = 0, lsbMismatches = 0;
  /// Share of rows with the same arg-max (2-D or 1-D float tensors).
  std::optional<double> top1;
  /// Shape or type mismatch; when set the metrics are meaningless.
  std::string problem;
  /// Tolerance checks that failed, as sentences.
  std::vector<std::string> violations;

  bool ok() const { return problem.empty() && violations.empty(); }
};

/// Compares `got` against the reference `ref`.
TensorDiff compareTensors(llvm::StringRef name, const Tensor &ref,
                          const Tensor &got, const Tolerance &tolerance = {});

} // namespace qatc::ref

#endif // QATC_REFERENCE_COMPARE_H
