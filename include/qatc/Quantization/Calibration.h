//===- Calibration.h - activation ranges from statistics --------*- C++ -*-===//
//
// The arithmetic of post-training calibration, free of LLVM and MLIR: a
// histogram of |x|, the absolute maximum, and the four ways of turning them
// into a clipping range `amax` (qdq-rules §7), plus the symmetric int8
// scale amax / 127.
//
// The histogram methods reproduce NVIDIA pytorch-quantization's calibrators
// (pytorch_quantization/calib/histogram.py in NVIDIA/TensorRT,
// tools/pytorch-quantization: `_compute_amax_percentile`,
// `_compute_amax_entropy`, `_compute_amax_mse`), including their rounding
// where it can decide a result; tests/calibration/golden_calibration.py is
// an independent numpy implementation the unit tests compare against.
//
// Entropy: this is the pytorch-quantization variant, not the one of the
// GTC 2017 talk "8-bit Inference with TensorRT" (S. Migacz) that TensorRT's
// entropy calibrator is described by. Both search, for every number i of
// kept bins from 128 up, the KL divergence between the kept bins (with the
// clipped mass added to the last one) and the same bins merged into 128
// levels. They differ in
//   - the result: here amax = i * binWidth, the upper edge of the last kept
//     bin; GTC 2017 takes (i + 0.5) * binWidth, half a bin more;
//   - the candidates: here i runs from 128 to numBins inclusive (keeping
//     everything is a candidate), in GTC 2017 up to numBins - 1;
//   - bin 0: here its count is replaced by bin 1's before the search, so the
//     exact zeros of a ReLU output do not dominate; GTC 2017 uses it as is;
//   - ties: here the largest i among equal divergences wins.
// Only the pytorch-quantization variant is implemented.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_QUANTIZATION_CALIBRATION_H
#define QATC_QUANTIZATION_CALIBRATION_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qatc::calib {

/// How a tensor's clipping range is chosen.
enum class Method {
  /// The largest |x| seen (pytorch-quantization MaxCalibrator).
  Max,
  /// The histogram edge below which a given percentage of |x| lies.
  Percentile,
  /// The range whose 128-level quantization loses the least information
  /// (KL divergence).
  Entropy,
  /// The range with the smallest mean squared quantization error.
  Mse,
};

/// Parses "max", "percentile", "entropy" or "mse"; returns an error message
/// or "".
std::string parseMethod(std::string_view text, Method &method);
/// The name parseMethod accepts.
std::string_view methodName(Method method);

/// A histogram of |x| with equal bins over [0, range]. The calibrator fills
/// it in a second pass over the data, once the first pass has found the
/// tensor's absolute maximum, so its range is fixed from the start; every
/// worker thread fills its own histogram and merge() adds them, which gives
/// the same counts whatever the number of threads or the order of samples.
///
/// pytorch-quantization instead grows its histogram batch by batch (adding
/// bins of the same width when a batch has a larger maximum), so its bins
/// depend on the order of the batches; the two agree when the first batch
/// holds the maximum.
struct Histogram {
  static constexpr size_t kDefaultBins = 2048;

  /// Counts per bin; bin k covers [edge(k), edge(k + 1)), the last bin also
  /// its upper edge.
  std::vector<uint64_t> counts;
  /// The upper edge of the last bin (the tensor's absolute maximum).
  double range = 0;

  Histogram() = default;
  /// `numBins` empty bins over [0, range]. `range` should be finite and
  /// >= 0; `numBins` must be >= 1.
  explicit Histogram(double range, size_t numBins = kDefaultBins);

  size_t numBins() const { return counts.size(); }
  double binWidth() const;
  /// Lower edge of bin `k` (k == numBins(): the range), computed as
  /// numpy.linspace(0, range, numBins + 1) does: k * (range / numBins),
  /// the last edge exactly `range`.
  double edge(size_t k) const;
  /// Centre of bin `k`: (edge(k) + edge(k + 1)) / 2.
  double center(size_t k) const;
  /// Sum of all counts.
  uint64_t total() const;

  /// Adds |x| for each of the `n` values: into bin floor(|x| * numBins /
  /// range) (computed in double), values >= range into the last bin, NaN
  /// ignored. With range 0 every value lands in the last bin.
  void addAbs(const float *data, size_t n);

  /// Adds `other`'s counts. Fails, changing nothing, unless both have the
  /// same range and number of bins.
  bool merge(const Histogram &other);
};

/// The largest |x| of `n` values, NaN ignored; 0 for no values.
float absMax(const float *data, size_t n);

/// Parameters of the entropy and MSE searches (pytorch-quantization's
/// `compute_amax` keyword arguments and the quantizer's bits).
struct SearchOptions {
  /// Bits of the quantized type: 2^(numBits - 1) levels for signed, twice
  /// that for unsigned, e.g. 128 (int8) and 256 (uint8).
  unsigned numBits = 8;
  bool isUnsigned = false;
  /// First candidate: bins kept (entropy) or bin whose centre is amax
  /// (MSE).
  size_t startBin = 128;
  /// Step between candidates; 0 is taken as 1 (and a start bin of 0 as 1
  /// for the entropy search, which needs a kept bin).
  size_t stride = 1;
};

/// pytorch-quantization's percentile amax: the LOWER edge of the first bin k
/// at which the CDF reaches the percentile, i.e. edge(k) for the first k
/// with cdf[k] >= percentile / 100, where cdf is the running sum (in bin
/// order, in double) of count / total. If rounding keeps the CDF below the
/// target to the end, k is numBins and the result is the range (with ten
/// equal bins, percentile 100 gives the range: 0.1 added ten times is
/// 0.9999999999999999). Returns NaN for a percentile outside [0, 100], 0 for
/// a histogram without counts.
double percentileAmax(const Histogram &histogram, double percentile);

/// pytorch-quantization's entropy amax (see the file comment for how it
/// differs from GTC 2017). For each i from startBin to numBins (stride
/// apart), with bins[0] set to bins[1]:
///   P = bins[0..i), plus the count of bins[i..) added to P[i-1];
///   Q = bins[0..i) merged into L levels (L = 128 for signed 8-bit, 256 for
///       unsigned; bin j is in level floor(j * L / i)), each level's count
///       spread evenly over its non-empty bins, empty bins staying 0;
///   D(i) = KL(P/sum P || Q/sum Q) with scipy.stats.entropy's conventions:
///       terms p*log(p/q), 0 where p == 0, +inf where p > 0 == q, NaN if a
///       sum is 0.
/// The result is edge(i) for the LAST i with the smallest D, where a NaN
/// counts as smaller than any number (numpy.argmin's rule, which
/// pytorch-quantization applies to the reversed list); a histogram whose
/// data all lie at or above bin startBin therefore gets the edge of the bin
/// holding its smallest value. Sums are taken in numpy's pairwise order and
/// logs with the C library's log, as numpy and scipy do, so that near ties
/// resolve the same way. Returns the range if there is no candidate (fewer
/// than startBin bins), 0 for a histogram without counts.
double entropyAmax(const Histogram &histogram,
                   const SearchOptions &options = {});

/// pytorch-quantization's MSE amax. Candidates are the centres c_i of bins
/// i = startBin, startBin + stride, ... < numBins (never the range itself).
/// For each, every bin centre c_k is fake-quantized with amax = c_i
/// (s = M / amax, M = 2^(numBits - 1) - 1 or 2^numBits - 1 unsigned;
/// q = clamp(round-half-even(c_k * s), -M or 0, M); c_k' = q / s) and the
/// error is mean_k(count_k * (c_k' - c_k)^2). The result is the FIRST
/// candidate with the smallest error. Computed in double, where
/// pytorch-quantization computes in float32 on the GPU, so a near tie could
/// resolve differently. Returns the range if there is no candidate, 0 for a
/// histogram without counts.
double mseAmax(const Histogram &histogram, const SearchOptions &options = {});

/// amax of a tensor by `method`: Max gives `absMax` (the histogram is not
/// used and may be empty), the others the functions above with default
/// options (`percentile` only for Percentile).
double computeAmax(Method method, const Histogram &histogram, double absMax,
                   double percentile = 99.99);

/// The symmetric int8 scale amax / 127, as float32.
///
/// amax is rounded to float32 first and divided in float32, as
/// pytorch-quantization exports it (its amax is a float32 tensor). An amax
/// that is not finite, not positive or <= 2^-24 (pytorch-quantization's
/// epsilon, "smaller than the minimum representable fp16") gives scale 1:
/// pytorch-quantization quantizes such tensors to all zeros and reports
/// scale 1 for them (tensor_quant.py), and its ONNX export replaces a zero
/// scale by 1, so a zero-filled channel or tensor never yields a 0 or NaN
/// scale. Every |x| <= amax <= 2^-24 still quantizes to 0 with scale 1.
float scaleFromAmax(double amax);

} // namespace qatc::calib

#endif // QATC_QUANTIZATION_CALIBRATION_H
