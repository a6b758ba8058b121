//===- Calibration.cpp - activation ranges from statistics ----------------===//
//
// The methods follow NVIDIA pytorch-quantization's histogram calibrators
// (pytorch_quantization/calib/histogram.py); comments name the behaviour
// matched where it is not the obvious choice. See Calibration.h.
//
//===----------------------------------------------------------------------===//

#include "qatc/Quantization/Calibration.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

using namespace qatc;
using namespace qatc::calib;

std::string calib::parseMethod(std::string_view text, Method &method) {
  for (Method m :
       {Method::Max, Method::Percentile, Method::Entropy, Method::Mse}) {
    if (text == methodName(m)) {
      method = m;
      return "";
    }
  }
  return "unknown calibration method '" + std::string(text) +
         "' (expected max, percentile, entropy or mse)";
}

std::string_view calib::methodName(Method method) {
  switch (method) {
  case Method::Max:
    return "max";
  case Method::Percentile:
    return "percentile";
  case Method::Entropy:
    return "entropy";
  case Method::Mse:
    return "mse";
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Histogram
//===----------------------------------------------------------------------===//

Histogram::Histogram(double range, size_t numBins)
    : counts(numBins, 0), range(range) {
  assert(numBins >= 1 && "a histogram needs at least one bin");
}

double Histogram::binWidth() const {
  return counts.empty() ? 0 : range / static_cast<double>(counts.size());
}

double Histogram::edge(size_t k) const {
  // numpy.linspace multiplies by the step and pins the last edge; PQ's
  // bin_edges come from linspace (torch.linspace in float32 on its default
  // path, so its amax can differ from ours in the last float32 bit).
  if (k >= counts.size())
    return range;
  return static_cast<double>(k) * binWidth();
}

double Histogram::center(size_t k) const { return (edge(k) + edge(k + 1)) / 2; }

uint64_t Histogram::total() const {
  uint64_t sum = 0;
  for (uint64_t c : counts)
    sum += c;
  return sum;
}

void Histogram::addAbs(const float *data, size_t n) {
  if (counts.empty())
    return;
  size_t last = counts.size() - 1;
  double binsPerUnit = static_cast<double>(counts.size());
  for (size_t i = 0; i < n; ++i) {
    float x = std::fabs(data[i]);
    if (std::isnan(x))
      continue;
    // |x| * numBins is exact in double for float x, so only the division
    // rounds. torch.histc bins in float32 and may put a value within an
    // ulp of an edge into the neighbouring bin.
    size_t bin = last;
    if (x < range)
      bin = std::min(last, static_cast<size_t>(static_cast<double>(x) *
                                               binsPerUnit / range));
    ++counts[bin];
  }
}

bool Histogram::merge(const Histogram &other) {
  if (other.range != range || other.counts.size() != counts.size())
    return false;
  for (size_t k = 0; k < counts.size(); ++k)
    counts[k] += other.counts[k];
  return true;
}

float calib::absMax(const float *data, size_t n) {
  float best = 0;
  for (size_t i = 0; i < n; ++i) {
    float x = std::fabs(data[i]);
    // `x > best` is false for NaN, which is therefore skipped.
    if (x > best)
      best = x;
  }
  return best;
}

//===----------------------------------------------------------------------===//
// amax from a histogram
//===----------------------------------------------------------------------===//

namespace {

/// numpy's pairwise summation (np.sum / np.add.reduce of a contiguous
/// float64 array): blocks of at most 128 elements are added in eight
/// interleaved partial sums, larger arrays split in two halves (the first a
/// multiple of 8 long) recursively. pytorch-quantization's sums go through
/// numpy and scipy, which use it, and its entropy search breaks ties between
/// divergences exactly, so the summation order matters for near ties.
double pairwiseSum(const double *a, size_t n) {
  if (n < 8) {
    double res = 0;
    for (size_t i = 0; i < n; ++i)
      res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (size_t k = 0; k < 8; ++k)
      r[k] = a[k];
    size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (size_t k = 0; k < 8; ++k)
        r[k] += a[i + k];
    double res =
        ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i)
      res += a[i];
    return res;
  }
  size_t half = n / 2;
  half -= half % 8;
  return pairwiseSum(a, half) + pairwiseSum(a + half, n - half);
}

/// One term of KL(p || q), scipy.special.rel_entr.
double relEntr(double p, double q) {
  if (std::isnan(p) || std::isnan(q))
    return std::numeric_limits<double>::quiet_NaN();
  if (p > 0 && q > 0)
    return p * std::log(p / q);
  if (p == 0 && q >= 0)
    return 0;
  return std::numeric_limits<double>::infinity();
}

/// What every histogram method returns for a histogram it cannot search:
/// 0 without data or range (nothing to represent: scaleFromAmax gives 1),
/// an infinite range as is (scaleFromAmax gives 1 for it too).
bool degenerate(const Histogram &h, double &result) {
  if (h.counts.empty() || !(h.range > 0) || h.total() == 0) {
    result = 0;
    return true;
  }
  if (!std::isfinite(h.range)) {
    result = h.range;
    return true;
  }
  return false;
}

} // namespace

double calib::percentileAmax(const Histogram &h, double percentile) {
  // PQ raises ValueError outside [0, 100].
  if (!(percentile >= 0 && percentile <= 100))
    return std::numeric_limits<double>::quiet_NaN();
  double result;
  if (degenerate(h, result))
    return result;
  // np.cumsum(hist / total): each count divided first, then summed in bin
  // order; np.searchsorted(cdf, p / 100) (side left) finds the first bin
  // whose CDF is >= the target, and PQ returns that bin's LOWER edge.
  double total = static_cast<double>(h.total());
  double target = percentile / 100;
  double cdf = 0;
  size_t k = 0;
  for (; k < h.numBins(); ++k) {
    cdf += static_cast<double>(h.counts[k]) / total;
    if (cdf >= target)
      break;
  }
  return h.edge(k);
}

double calib::entropyAmax(const Histogram &h, const SearchOptions &options) {
  double result;
  if (degenerate(h, result))
    return result;
  assert(options.numBits >= 1 && options.numBits <= 16);
  size_t n = h.numBins();
  size_t stride = std::max<size_t>(options.stride, 1);
  // PQ's loop needs at least one kept bin.
  size_t start = std::max<size_t>(options.startBin, 1);
  if (start > n)
    return h.range;

  // PQ replaces bin 0 by bin 1 so that the zeros of a ReLU output, all in
  // bin 0, do not dominate the distributions.
  std::vector<uint64_t> bins = h.counts;
  if (n >= 2)
    bins[0] = bins[1];
  uint64_t total = 0;
  for (uint64_t c : bins)
    total += c;
  // suffix[i] = count of bins[i..n), the mass clipped by keeping i bins.
  std::vector<uint64_t> suffix(n + 1, 0);
  for (size_t k = n; k-- > 0;)
    suffix[k] = suffix[k + 1] + bins[k];

  // "128 values + sign" for signed 8-bit: 2^(bits - 1), doubled unsigned.
  size_t levels = size_t(1)
                  << (options.numBits - 1 + (options.isUnsigned ? 1 : 0));
  std::vector<double> levelSum(levels);
  std::vector<size_t> levelNonEmpty(levels);
  std::vector<double> q(n), terms(n);

  // PQ divides both distributions by their sums before KL: its own
  // normalising helper rebinds a local and has no effect, but
  // scipy.stats.entropy normalises both arguments (p / sum(p), an exact
  // integer sum; q / np.sum(q), pairwise).
  double pTotal = static_cast<double>(total);
  size_t bestI = 0;
  double bestD = 0;
  bool haveBest = false, bestIsNaN = false;
  for (size_t i = start; i <= n; i += stride) {
    // Bin j < i falls into level floor(j * levels / i): PQ digitizes j
    // against linspace(0, i, levels + 1), whose points k * (i / levels) are
    // exact for a power-of-two number of levels.
    std::fill(levelSum.begin(), levelSum.end(), 0.0);
    std::fill(levelNonEmpty.begin(), levelNonEmpty.end(), 0);
    for (size_t j = 0; j < i; ++j) {
      if (bins[j] == 0)
        continue;
      size_t level = j * levels / i;
      levelSum[level] += static_cast<double>(bins[j]);
      ++levelNonEmpty[level];
    }
    for (size_t j = 0; j < i; ++j) {
      size_t level = j * levels / i;
      q[j] = bins[j] == 0
                 ? 0.0
                 : levelSum[level] / static_cast<double>(levelNonEmpty[level]);
    }
    double qTotal = pairwiseSum(q.data(), i);
    for (size_t j = 0; j < i; ++j) {
      // P: the kept bins, the clipped mass added to the last one; Q does
      // not get that mass (GTC 2017 does the same).
      uint64_t p = bins[j] + (j + 1 == i ? suffix[i] : 0);
      terms[j] = relEntr(static_cast<double>(p) / pTotal, q[j] / qTotal);
    }
    double d = pairwiseSum(terms.data(), i);

    // PQ picks the last index of numpy.argmin over the reversed list: the
    // last minimum, a NaN beating every number (argmin returns the first
    // NaN it meets). `<=` makes later equal values win; inf == inf ties.
    bool isNaN = std::isnan(d);
    if (isNaN) {
      bestI = i;
      bestIsNaN = true;
    } else if (!bestIsNaN && (!haveBest || d <= bestD)) {
      bestI = i;
      bestD = d;
    }
    haveBest = true;
  }
  return h.edge(bestI);
}

double calib::mseAmax(const Histogram &h, const SearchOptions &options) {
  double result;
  if (degenerate(h, result))
    return result;
  assert(options.numBits >= 1 && options.numBits <= 16);
  size_t n = h.numBins();
  size_t stride = std::max<size_t>(options.stride, 1);
  if (options.startBin >= n)
    return h.range;

  // fake_tensor_quant with narrow_range (PQ's default): [-M, M] signed,
  // [0, M] unsigned. The centres are >= 0, so only M matters.
  double maxBound =
      std::ldexp(1.0, options.numBits - 1 + (options.isUnsigned ? 1 : 0)) - 1;
  double minBound = options.isUnsigned ? 0 : -maxBound;

  std::vector<double> centers(n), counts(n), terms(n);
  for (size_t k = 0; k < n; ++k) {
    centers[k] = h.center(k);
    counts[k] = static_cast<double>(h.counts[k]);
  }
  size_t bestI = options.startBin;
  double bestErr = std::numeric_limits<double>::infinity();
  bool haveBest = false;
  // PQ: candidates range(start_bin, len(centers), stride); amax is a bin
  // centre, never the histogram's upper edge.
  for (size_t i = options.startBin; i < n; i += stride) {
    double scale = maxBound / centers[i];
    for (size_t k = 0; k < n; ++k) {
      // rint: round half to even, as torch.round and the CUDA kernel.
      double qv =
          std::clamp(std::nearbyint(centers[k] * scale), minBound, maxBound);
      double diff = qv / scale - centers[k];
      terms[k] = diff * diff * counts[k];
    }
    double err = pairwiseSum(terms.data(), n) / static_cast<double>(n);
    // np.argmin(mses): the FIRST minimum (unlike the entropy search).
    if (!haveBest || err < bestErr) {
      bestI = i;
      bestErr = err;
      haveBest = true;
    }
  }
  return h.center(bestI);
}

double calib::computeAmax(Method method, const Histogram &histogram,
                          double absMax, double percentile) {
  switch (method) {
  case Method::Max:
    return absMax;
  case Method::Percentile:
    return percentileAmax(histogram, percentile);
  case Method::Entropy:
    return entropyAmax(histogram);
  case Method::Mse:
    return mseAmax(histogram);
  }
  return absMax;
}

float calib::scaleFromAmax(double amax) {
  // PQ's epsilon in tensor_quant.py: amax <= 2^-24 quantizes to zeros.
  constexpr float kTinyAmax = 1.0f / (1 << 24);
  float a = static_cast<float>(amax);
  if (!std::isfinite(a) || !(a > kTinyAmax))
    return 1.0f;
  return a / 127.0f;
}
