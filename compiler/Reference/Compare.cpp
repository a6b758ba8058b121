//===- Compare.cpp - how far apart two tensors are ------------------------===//

#include "qatc/Reference/Compare.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>

using namespace qatc::ref;

static std::string fmt(const char *f, double v) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format(f, v);
  return s;
}

TensorDiff qatc::ref::compareTensors(llvm::StringRef name, const Tensor &ref,
                                     const Tensor &got,
                                     const Tolerance &tolerance) {
  TensorDiff d;
  d.name = name.str();
  if (ref.shape() != got.shape()) {
    d.problem = "shape " + got.describe() + " differs from the reference's " +
                ref.describe();
    return d;
  }
  bool refFloat = isFloat(ref.dtype()), gotFloat = isFloat(got.dtype());
  if (refFloat != gotFloat || (!refFloat && ref.dtype() != got.dtype())) {
    d.problem = "type " + dtypeName(got.dtype()).str() +
                " differs from the reference's " + dtypeName(ref.dtype()).str();
    return d;
  }
  d.quantized = ref.dtype() == DType::I8 || ref.dtype() == DType::U8;
  Tensor a = castTensor(ref, DType::F64), b = castTensor(got, DType::F64);
  const double *pa = a.data<double>(), *pb = b.data<double>();
  d.count = ref.numElements();
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  double sumAbs = 0, dot = 0, na = 0, nb = 0, noise = 0;
  bool allclose = true;
  for (int64_t i = 0; i < d.count; ++i) {
    double x = pa[i], y = pb[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (!(std::isnan(x) && std::isnan(y))) {
        d.maxAbs = std::numeric_limits<double>::infinity();
        allclose = false;
      }
      continue;
    }
    double diff = std::abs(x - y);
    if (x == y)
      diff = 0; // equal infinities
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    d.maxAbs = std::max(d.maxAbs, diff);
    sumAbs += diff;
    dot += x * y;
    na += x * x;
    nb += y * y;
    noise += diff * diff;
    if (tolerance.atol || tolerance.rtol)
      allclose &= diff <= tolerance.atol.value_or(0) +
                              tolerance.rtol.value_or(0) * std::abs(x);
    if (d.quantized && diff != 0) {
      ++d.lsbMismatches;
      d.maxLsb = std::max<int64_t>(d.maxLsb, static_cast<int64_t>(diff));
    }
  }
  d.meanAbs = d.count ? sumAbs / d.count : 0;
  d.range = d.count && hi >= lo ? hi - lo : 0;
  d.rangeRel = d.range > 0 ? d.maxAbs / d.range : (d.maxAbs > 0 ? INFINITY : 0);
  d.cosine = na == 0 && nb == 0   ? 1.0
             : na == 0 || nb == 0 ? 0.0
                                  : dot / std::sqrt(na * nb);
  d.sqnrDb = noise == 0 ? INFINITY : 10 * std::log10(na / noise);
  if (refFloat && (ref.rank() == 1 || ref.rank() == 2) && d.count > 1) {
    int64_t rows = ref.rank() == 2 ? ref.dim(0) : 1;
    int64_t cols = d.count / std::max<int64_t>(rows, 1);
    int64_t agree = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double *ra = pa + r * cols, *rb = pb + r * cols;
      agree += std::max_element(ra, ra + cols) - ra ==
               std::max_element(rb, rb + cols) - rb;
    }
    d.top1 = rows ? static_cast<double>(agree) / rows : 1.0;
  }

  auto violate = [&](std::string s) { d.violations.push_back(std::move(s)); };
  if ((tolerance.atol || tolerance.rtol) && !allclose)
    violate("not allclose (atol " + fmt("%g", tolerance.atol.value_or(0)) +
            ", rtol " + fmt("%g", tolerance.rtol.value_or(0)) +
            "): max abs diff " + fmt("%g", d.maxAbs));
  if (tolerance.maxRangeRel && !(d.rangeRel <= *tolerance.maxRangeRel))
    violate("max abs diff is " + fmt("%.3g", d.rangeRel * 100) +
            "% of the range, above " +
            fmt("%.3g", *tolerance.maxRangeRel * 100) + "%");
  if (tolerance.minCosine && !(d.cosine >= *tolerance.minCosine))
    violate("cosine " + fmt("%.6f", d.cosine) + " below " +
            fmt("%.6f", *tolerance.minCosine));
  if (tolerance.minSqnrDb && !(d.sqnrDb >= *tolerance.minSqnrDb))
    violate("SQNR " + fmt("%.1f", d.sqnrDb) + " dB below " +
            fmt("%.1f", *tolerance.minSqnrDb) + " dB");
  if (d.quantized && tolerance.maxLsb && d.maxLsb > *tolerance.maxLsb)
    violate("differs by up to " + std::to_string(d.maxLsb) + " LSB (limit " +
            std::to_string(*tolerance.maxLsb) + ")");
  if (d.quantized && tolerance.maxLsbFraction && d.count &&
      static_cast<double>(d.lsbMismatches) / d.count >
          *tolerance.maxLsbFraction)
    violate(fmt("%.4g", 100.0 * d.lsbMismatches / d.count) +
            "% of elements differ (limit " +
            fmt("%.4g", *tolerance.maxLsbFraction * 100) + "%)");
  if (tolerance.top1 && d.top1 && *d.top1 < 1.0)
    violate("top-1 agrees on " + fmt("%.4g", *d.top1 * 100) + "% of rows");
  return d;
}
