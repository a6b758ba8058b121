//===- CalibrationTest.cpp - calibration methods and cache files ----------===//
//
// Hand-derived cases for each calibration method, the golden values of
// tests/data/calibration/golden.txt (written by
// tests/calibration/golden_calibration.py, an independent numpy version),
// and the TensorRT calibration cache format.
//
// The golden file is found through QATC_TEST_DATA_DIR: the environment
// variable if set, else the compile definition of the same name (the test
// data directory, tests/data).
//
//===----------------------------------------------------------------------===//

#include "qatc/Quantization/Calibration.h"
#include "qatc/Quantization/CalibrationCache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <tuple>

using namespace qatc::calib;

namespace {

Histogram makeHistogram(double range, std::vector<uint64_t> counts) {
  Histogram h(range, counts.size());
  h.counts = std::move(counts);
  return h;
}

float floatOfBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint32_t bitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

/// Small searches whose every candidate can be worked out by hand: 2-bit
/// signed quantization (2 entropy levels; values -1, 0, 1 for MSE).
SearchOptions tinyOptions(size_t startBin) {
  SearchOptions options;
  options.numBits = 2;
  options.startBin = startBin;
  return options;
}

} // namespace

//===----------------------------------------------------------------------===//
// Methods, histogram, max
//===----------------------------------------------------------------------===//

TEST(Calibration, MethodNamesRoundTrip) {
  for (Method m :
       {Method::Max, Method::Percentile, Method::Entropy, Method::Mse}) {
    Method parsed = Method::Max;
    EXPECT_EQ(parseMethod(methodName(m), parsed), "");
    EXPECT_EQ(parsed, m);
  }
  EXPECT_EQ(methodName(Method::Mse), "mse");
  Method unchanged = Method::Entropy;
  std::string error = parseMethod("kl", unchanged);
  EXPECT_NE(error.find("'kl'"), std::string::npos) << error;
  EXPECT_EQ(unchanged, Method::Entropy);
  EXPECT_NE(parseMethod("Max", unchanged), "") << "names are lower case";
}

TEST(Calibration, HistogramBinsAbsoluteValues) {
  Histogram h(4.0, 4);
  EXPECT_EQ(h.numBins(), 4u);
  EXPECT_EQ(h.binWidth(), 1.0);
  EXPECT_EQ(h.edge(0), 0.0);
  EXPECT_EQ(h.edge(3), 3.0);
  EXPECT_EQ(h.edge(4), 4.0);
  EXPECT_EQ(h.center(2), 2.5);

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float data[] = {0.0f, -0.5f, 1.0f, -1.0f, 2.99f, 3.0f,
                        4.0f, -4.0f, 9.0f, nan,   -0.0f};
  h.addAbs(data, std::size(data));
  // [0,1): 0, 0.5, -0; [1,2): 1, 1; [2,3): 2.99; [3,4]: 3 and everything
  // at or above the range; NaN nowhere.
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{3, 2, 1, 4}));
  EXPECT_EQ(h.total(), 10u);
}

TEST(Calibration, HistogramWithZeroRangePutsEverythingInTheLastBin) {
  Histogram h(0.0, 8);
  const float zeros[] = {0.0f, -0.0f, 0.0f};
  h.addAbs(zeros, 3);
  EXPECT_EQ(h.counts[7], 3u);
  EXPECT_EQ(computeAmax(Method::Entropy, h, 0.0), 0.0);
  EXPECT_EQ(scaleFromAmax(computeAmax(Method::Mse, h, 0.0)), 1.0f);
}

TEST(Calibration, HistogramMergeIsOrderIndependent) {
  // Two "threads" fill histograms over the same range from different halves
  // of the data; their sum equals one histogram of all the data, whichever
  // way round they are added.
  std::vector<float> data;
  for (int i = 0; i < 10000; ++i)
    data.push_back(std::sin(0.37f * i) * (1 + i % 7));
  float amax = absMax(data.data(), data.size());
  Histogram whole(amax), first(amax), second(amax);
  whole.addAbs(data.data(), data.size());
  first.addAbs(data.data(), 4321);
  second.addAbs(data.data() + 4321, data.size() - 4321);

  Histogram a = first, b = second;
  ASSERT_TRUE(a.merge(second));
  ASSERT_TRUE(b.merge(first));
  EXPECT_EQ(a.counts, whole.counts);
  EXPECT_EQ(b.counts, whole.counts);
  EXPECT_EQ(whole.total(), data.size());

  Histogram otherRange(amax * 2), otherBins(amax, 1024);
  Histogram before = a;
  EXPECT_FALSE(a.merge(otherRange));
  EXPECT_FALSE(a.merge(otherBins));
  EXPECT_EQ(a.counts, before.counts);
}

TEST(Calibration, MaxIsTheOutlier) {
  // qdq-rules §9 case 57: max calibration keeps an outlier in range.
  std::vector<float> data;
  for (int i = 0; i < 1000; ++i)
    data.push_back(std::cos(0.1f * i));
  data[617] = -37.5f;
  float amax = absMax(data.data(), data.size());
  EXPECT_EQ(amax, 37.5f);
  Histogram unused;
  EXPECT_EQ(computeAmax(Method::Max, unused, amax), 37.5);
  EXPECT_EQ(scaleFromAmax(amax), 37.5f / 127.0f);
}

TEST(Calibration, AbsMaxIgnoresNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float data[] = {nan, -2.0f, 1.0f, nan};
  EXPECT_EQ(absMax(data, 4), 2.0f);
  EXPECT_EQ(absMax(data, 1), 0.0f);
  EXPECT_EQ(absMax(nullptr, 0), 0.0f);
  const float inf[] = {1.0f, -std::numeric_limits<float>::infinity()};
  EXPECT_TRUE(std::isinf(absMax(inf, 2)));
}

//===----------------------------------------------------------------------===//
// Percentile
//===----------------------------------------------------------------------===//

TEST(Calibration, PercentileIsTheLowerEdgeOfTheCrossingBin) {
  // CDF 0.1, 0.2, ..., 0.5 at bin 4: 50% is reached at the upper edge of
  // bin 4 (5.0), but the result is its lower edge.
  Histogram ten = makeHistogram(10.0, std::vector<uint64_t>(10, 1));
  EXPECT_EQ(percentileAmax(ten, 50), 4.0);
  // 0.1 added ten times is 0.9999999999999999 < 1: the search runs off the
  // end and gives the range.
  EXPECT_EQ(percentileAmax(ten, 100), 10.0);
  // Quarters add up exactly: 100% is reached in the last bin, whose lower
  // edge is below the maximum.
  Histogram four = makeHistogram(4.0, {1, 1, 1, 1});
  EXPECT_EQ(percentileAmax(four, 100), 3.0);
  EXPECT_EQ(percentileAmax(four, 75), 2.0);
  EXPECT_EQ(percentileAmax(four, 75.0001), 3.0);
  EXPECT_EQ(percentileAmax(four, 0), 0.0);
  // Outside [0, 100] there is no answer (pytorch-quantization raises).
  EXPECT_TRUE(std::isnan(percentileAmax(four, 100.5)));
  EXPECT_TRUE(std::isnan(percentileAmax(four, -1)));
  // No data: nothing to represent.
  EXPECT_EQ(percentileAmax(makeHistogram(4.0, {0, 0, 0, 0}), 99.99), 0.0);
}

TEST(Calibration, Percentile9999OfAMillionSamplesWithOutliers) {
  // qdq-rules §9 case 58: 999950 values spread evenly over [0, 1) with
  // alternating sign, and 50 outliers at +-100. 2048 bins over [0, 100] are
  // 100/2048 = 0.048828125 wide; [0, 1) ends inside bin 20 =
  // [0.9765625, 1.0253906). The CDF is 0.976514 after bin 19 and 0.99995 after
  // bin 20, so 99.99% is reached in bin 20: amax = its lower edge, 20 *
  // 100/2048.
  const size_t bulk = 999950;
  std::vector<float> data;
  data.reserve(1000000);
  for (size_t k = 0; k < bulk; ++k) {
    float x = static_cast<float>((k + 0.5) / bulk);
    data.push_back(k % 2 ? -x : x);
  }
  for (int k = 0; k < 50; ++k)
    data.push_back(k % 2 ? -100.0f : 100.0f);

  float amax = absMax(data.data(), data.size());
  ASSERT_EQ(amax, 100.0f);
  Histogram h(amax);
  h.addAbs(data.data(), data.size());
  EXPECT_EQ(h.counts[2047], 50u);
  EXPECT_EQ(h.counts[21], 0u);
  EXPECT_EQ(computeAmax(Method::Percentile, h, amax, 99.99), 0.9765625);
  // 99.996% is beyond the bulk (99.995%): the outliers' bin.
  EXPECT_EQ(percentileAmax(h, 99.996), 2047 * 100.0 / 2048);
}

//===----------------------------------------------------------------------===//
// Entropy
//===----------------------------------------------------------------------===//

TEST(Calibration, EntropyReplacesBinZeroAndReturnsTheUpperEdge) {
  // 4 bins of width 1, 2 levels, candidates i = 2, 3, 4 kept bins.
  // Bin 0 (100 zeros) is replaced by bin 1: bins {4, 4, 4, 1}, total 13.
  //   i=2: P = {4, 4+5}, Q = {4, 4}:          KL = 4/13 ln(8/13)
  //        + 9/13 ln(18/13)                    = 0.0759
  //   i=3: P = {4, 4, 4+1}, levels {0,1}{2}: Q = {4, 4, 4}
  //        KL = 8/13 ln(12/13) + 5/13 ln(15/13) = 0.0058
  //   i=4: levels {0,1}{2,3}: Q = {4, 4, 2.5, 2.5}, P = {4, 4, 4, 1}
  //        KL = (4 ln 1.6 + ln 0.4) / 13        = 0.0741
  // i=3 wins: amax = 3 bins * width 1 = 3.0 (GTC 2017 would say 3.5).
  Histogram h = makeHistogram(4.0, {100, 4, 4, 1});
  EXPECT_EQ(entropyAmax(h, tinyOptions(2)), 3.0);
}

TEST(Calibration, EntropyTiesGoToTheLastCandidate) {
  // bins {1, 1, 0, 0} (bin 0 replaced by bin 1): every candidate's Q equals
  // its P, all divergences are exactly 0; the last (all 4 bins) wins.
  Histogram h = makeHistogram(4.0, {0, 1, 0, 0});
  EXPECT_EQ(entropyAmax(h, tinyOptions(2)), 4.0);
}

TEST(Calibration, EntropyNaNCandidatesWin) {
  // All data in the last bin (a constant tensor): candidates keeping 2 or 3
  // bins keep nothing, their Q is 0/0 and their divergence NaN, which
  // pytorch-quantization's argmin prefers over the 0 of keeping all bins;
  // the last NaN (3 bins) wins and the constant is clipped to 3.0.
  Histogram h = makeHistogram(4.0, {0, 0, 0, 3});
  EXPECT_EQ(entropyAmax(h, tinyOptions(2)), 3.0);
  // The same with the defaults: a constant tensor gets amax = edge 2047.
  Histogram constant(2.0);
  constant.counts[2047] = 1000;
  EXPECT_EQ(entropyAmax(constant), constant.edge(2047));
  // Only bin 0 has data: after the replacement there is no data at all,
  // every divergence is NaN and the last candidate (the range) wins.
  EXPECT_EQ(entropyAmax(makeHistogram(4.0, {7, 0, 0, 0}), tinyOptions(2)), 4.0);
}

TEST(Calibration, EntropyWithoutCandidatesKeepsTheRange) {
  // Fewer bins than the start bin: nothing to search.
  Histogram h = makeHistogram(5.0, {1, 2, 3});
  EXPECT_EQ(entropyAmax(h), 5.0);
  EXPECT_EQ(mseAmax(h), 5.0);
}

//===----------------------------------------------------------------------===//
// MSE
//===----------------------------------------------------------------------===//

TEST(Calibration, MseTakesTheFirstBestCentre) {
  // 2-bit signed: q in {-1, 0, 1}, fake-quantized value q * amax. Centres
  // 0.5, 1.5, 2.5, 3.5; candidates (start bin 1) amax = 1.5, 2.5, 3.5.
  //   1.5: 1.5 -> 1.5 (0); 3.5 -> 1.5 (clamped, 2^2 * 1 = 4)     sum 4
  //   2.5: 1.5 -> 2.5 (1 * 3); 3.5 -> 2.5 (1 * 1)               sum 4
  //   3.5: 1.5 -> 0 (2.25 * 3 = 6.75); 3.5 -> 3.5 (0)           sum 6.75
  // 1.5 and 2.5 tie exactly; the first wins.
  Histogram h = makeHistogram(4.0, {0, 3, 0, 1});
  EXPECT_EQ(mseAmax(h, tinyOptions(1)), 1.5);
  // One more value at 3.5 breaks the tie: 2.5 gives 5, 1.5 gives 8.
  Histogram h2 = makeHistogram(4.0, {0, 3, 0, 2});
  EXPECT_EQ(mseAmax(h2, tinyOptions(1)), 2.5);
}

TEST(Calibration, MseCandidatesAreBinCentres) {
  // A constant tensor: the best candidate is the centre of the last bin,
  // which the data (at its upper edge) just exceeds; the range itself is no
  // candidate.
  Histogram constant(2.0);
  constant.counts[2047] = 1000;
  EXPECT_EQ(mseAmax(constant), constant.center(2047));
  EXPECT_EQ(constant.center(2047), 2.0 * 2047.5 / 2048);
}

TEST(Calibration, ComputeAmaxDispatches) {
  Histogram h(8.0);
  for (size_t k = 0; k < h.numBins(); ++k)
    h.counts[k] = 1 + (k * 7919) % 13 + (k < 300 ? 500 : 0);
  EXPECT_EQ(computeAmax(Method::Max, h, 8.0), 8.0);
  EXPECT_EQ(computeAmax(Method::Percentile, h, 8.0, 99.9),
            percentileAmax(h, 99.9));
  EXPECT_EQ(computeAmax(Method::Percentile, h, 8.0), percentileAmax(h, 99.99));
  EXPECT_EQ(computeAmax(Method::Entropy, h, 8.0), entropyAmax(h));
  EXPECT_EQ(computeAmax(Method::Mse, h, 8.0), mseAmax(h));
}

//===----------------------------------------------------------------------===//
// Scale
//===----------------------------------------------------------------------===//

TEST(Calibration, ScaleFromAmax) {
  EXPECT_EQ(scaleFromAmax(127.0), 1.0f);
  EXPECT_EQ(scaleFromAmax(1.0), 1.0f / 127.0f);
  // amax is rounded to float32 before the float32 division.
  EXPECT_EQ(scaleFromAmax(0.1), 0.1f / 127.0f);
  // qdq-rules §9 case 61: a zero, tiny, negative or non-finite amax gives scale
  // 1, never 0 or NaN (pytorch-quantization: amax <= 2^-24 quantizes to zeros
  // with scale 1).
  const double tiny = std::ldexp(1.0, -24);
  EXPECT_EQ(scaleFromAmax(0.0), 1.0f);
  EXPECT_EQ(scaleFromAmax(-0.0), 1.0f);
  EXPECT_EQ(scaleFromAmax(tiny), 1.0f);
  EXPECT_EQ(scaleFromAmax(1e-30), 1.0f);
  EXPECT_EQ(scaleFromAmax(-3.0), 1.0f);
  EXPECT_EQ(scaleFromAmax(std::numeric_limits<double>::quiet_NaN()), 1.0f);
  EXPECT_EQ(scaleFromAmax(std::numeric_limits<double>::infinity()), 1.0f);
  EXPECT_EQ(scaleFromAmax(1e300), 1.0f) << "overflows float32";
  // Just above the threshold the scale is tiny but positive and normal.
  float justAbove = scaleFromAmax(tiny * 1.5);
  EXPECT_EQ(justAbove, static_cast<float>(tiny * 1.5) / 127.0f);
  EXPECT_GT(justAbove, 0.0f);
  EXPECT_TRUE(std::isnormal(justAbove));
}

//===----------------------------------------------------------------------===//
// Golden values from tests/calibration/golden_calibration.py
//===----------------------------------------------------------------------===//

namespace {

struct GoldenRecord {
  std::string name;
  Histogram histogram;
  /// (method, percentile or NaN, amax)
  std::vector<std::tuple<std::string, double, double>> amax;
};

std::string goldenPath() {
  std::string dir;
  if (const char *env = std::getenv("QATC_TEST_DATA_DIR"))
    dir = env;
#ifdef QATC_TEST_DATA_DIR
  if (dir.empty())
    dir = QATC_TEST_DATA_DIR;
#endif
  if (dir.empty())
    return "";
  return dir + "/calibration/golden.txt";
}

/// Reads the golden file (format: see golden_calibration.py); "" or the
/// problem.
std::string readGolden(const std::string &path,
                       std::vector<GoldenRecord> &records) {
  std::ifstream in(path);
  if (!in)
    return "cannot open " + path;
  std::string line;
  GoldenRecord current;
  bool open = false;
  for (size_t lineNo = 1; std::getline(in, line); ++lineNo) {
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    std::string where = path + ":" + std::to_string(lineNo) + ": ";
    if (key == "histogram") {
      current = GoldenRecord();
      fields >> current.name;
      open = true;
    } else if (!open) {
      return where + "'" + key + "' outside a histogram";
    } else if (key == "range") {
      fields >> current.histogram.range;
    } else if (key == "bins") {
      size_t bins = 0;
      fields >> bins;
      current.histogram.counts.assign(bins, 0);
    } else if (key == "counts") {
      for (uint64_t &c : current.histogram.counts)
        if (!(fields >> c))
          return where + "too few counts";
      uint64_t extra;
      if (fields >> extra)
        return where + "too many counts";
    } else if (key == "amax") {
      std::vector<std::string> rest;
      for (std::string f; fields >> f;)
        rest.push_back(f);
      if (rest.size() == 2)
        current.amax.emplace_back(rest[0],
                                  std::numeric_limits<double>::quiet_NaN(),
                                  std::strtod(rest[1].c_str(), nullptr));
      else if (rest.size() == 3)
        current.amax.emplace_back(rest[0],
                                  std::strtod(rest[1].c_str(), nullptr),
                                  std::strtod(rest[2].c_str(), nullptr));
      else
        return where + "malformed amax line";
    } else if (key == "end") {
      records.push_back(current);
      open = false;
    } else {
      return where + "unknown line '" + key + "'";
    }
    if (fields.fail() && !fields.eof())
      return where + "malformed line";
  }
  return "";
}

} // namespace

TEST(Calibration, MatchesGoldenValues) {
  std::string path = goldenPath();
  ASSERT_FALSE(path.empty())
      << "set QATC_TEST_DATA_DIR to the test data directory (tests/data)";
  std::vector<GoldenRecord> records;
  std::string error = readGolden(path, records);
  ASSERT_EQ(error, "");
  ASSERT_GE(records.size(), 4u);

  size_t compared = 0;
  for (const GoldenRecord &rec : records) {
    ASSERT_EQ(rec.histogram.numBins(), 2048u) << rec.name;
    for (const auto &[method, percentile, expected] : rec.amax) {
      SearchOptions options;
      double actual;
      if (method == "percentile") {
        actual = percentileAmax(rec.histogram, percentile);
      } else if (method == "entropy" || method == "entropy-unsigned") {
        options.isUnsigned = method == "entropy-unsigned";
        actual = entropyAmax(rec.histogram, options);
      } else if (method == "mse" || method == "mse-unsigned") {
        options.isUnsigned = method == "mse-unsigned";
        actual = mseAmax(rec.histogram, options);
      } else {
        ADD_FAILURE() << rec.name << ": unknown method " << method;
        continue;
      }
      EXPECT_NEAR(actual, expected, 1e-9 * std::fabs(expected))
          << rec.name << " " << method << " " << percentile;
      ++compared;
    }
  }
  EXPECT_GE(compared, 20u);
}

TEST(Calibration, GoldenReluHistogramDefaults) {
  // qdq-rules §9 cases 59 and 60 spelled out: the ReLU-shaped histogram (a
  // spike of zeros in bin 0) through computeAmax with the defaults the
  // calibrator uses.
  std::vector<GoldenRecord> records;
  ASSERT_EQ(readGolden(goldenPath(), records), "");
  const GoldenRecord *relu = nullptr;
  for (const GoldenRecord &rec : records)
    if (rec.name == "relu")
      relu = &rec;
  ASSERT_NE(relu, nullptr);
  const Histogram &h = relu->histogram;
  EXPECT_GT(h.counts[0], 50 * h.counts[1]) << "the spike at 0";
  EXPECT_EQ(computeAmax(Method::Entropy, h, h.range), 2.625);
  EXPECT_EQ(computeAmax(Method::Mse, h, h.range), 2.41845703125);
  EXPECT_EQ(computeAmax(Method::Percentile, h, h.range, 99.99), 1.9423828125);
  EXPECT_EQ(computeAmax(Method::Max, h, h.range), 6.0);
}

//===----------------------------------------------------------------------===//
// TensorRT calibration cache
//===----------------------------------------------------------------------===//

TEST(CalibrationCache, RoundTripsBitExactly) {
  CalibrationCache cache;
  cache.header = CalibrationCache::makeHeader(8, 6, 1);
  const uint32_t bits[] = {
      0x3c010204, // 1/127
      0x00000001, // smallest denormal
      0x007fffff, // largest denormal
      0x00800000, // smallest normal
      0x7f7fffff, // largest float
      0x3f800000, // 1
      0x3c92aa10, // a TensorRT scale (NVIDIA forum: 0.0179033577)
  };
  const char *names[] = {"zeta",
                         "input_1:0",
                         "a: b",
                         "(Unnamed Layer* 8) [Constant]_output",
                         "conv1/convolution:0",
                         "x",
                         "relu46"};
  for (size_t i = 0; i < std::size(bits); ++i)
    cache.entries.push_back({names[i], floatOfBits(bits[i])});
  EXPECT_EQ(1.0f / 127.0f, floatOfBits(0x3c010204));
  ASSERT_EQ(cache.validate(), "");

  std::string text = cache.write();
  EXPECT_EQ(text, "TRT-8601-EntropyCalibration2\n"
                  "zeta: 3c010204\n"
                  "input_1:0: 1\n"
                  "a: b: 7fffff\n"
                  "(Unnamed Layer* 8) [Constant]_output: 800000\n"
                  "conv1/convolution:0: 7f7fffff\n"
                  "x: 3f800000\n"
                  "relu46: 3c92aa10\n");

  std::string error;
  auto parsed = CalibrationCache::parse(text, error);
  ASSERT_TRUE(parsed) << error;
  EXPECT_EQ(parsed->header, cache.header);
  ASSERT_EQ(parsed->entries.size(), std::size(bits));
  for (size_t i = 0; i < std::size(bits); ++i) {
    EXPECT_EQ(parsed->entries[i].name, names[i]) << "file order is kept";
    EXPECT_EQ(bitsOf(parsed->entries[i].scale), bits[i]) << names[i];
  }
  EXPECT_EQ(parsed->write(), text);
  EXPECT_FLOAT_EQ(parsed->find("relu46")->scale, 0.0179033577f);
  EXPECT_EQ(parsed->find("missing"), nullptr);
}

TEST(CalibrationCache, ReadsWhatTensorRTWrites) {
  // Lines as TensorRT writes them (unpadded lower-case hex, "0" for a tensor
  // that was all zeros), with CRLF line ends, a blank line, upper-case and
  // zero-padded hex and no final line break.
  std::string text = "TRT-8401-EntropyCalibration2\r\n"
                     "input: 3caa54fc\r\n"
                     "(Unnamed Layer* 64) [Shuffle]_output: 0\r\n"
                     "\r\n"
                     "366: 00800000\r\n"
                     "395: 3CBE52AF";
  std::string error;
  EXPECT_FALSE(CalibrationCache::parse(text, error));
  EXPECT_EQ(error, "line 3: scale '0' of tensor '(Unnamed Layer* 64) "
                   "[Shuffle]_output' is zero");

  CacheParseOptions options;
  options.allowZeroScale = true;
  auto cache = CalibrationCache::parse(text, error, options);
  ASSERT_TRUE(cache) << error;
  EXPECT_EQ(cache->header, "TRT-8401-EntropyCalibration2");
  ASSERT_EQ(cache->entries.size(), 4u);
  EXPECT_EQ(bitsOf(cache->entries[0].scale), 0x3caa54fcu);
  EXPECT_EQ(cache->entries[1].scale, 0.0f);
  EXPECT_EQ(bitsOf(cache->entries[2].scale), 0x00800000u);
  EXPECT_EQ(cache->entries[3].name, "395");
  EXPECT_EQ(bitsOf(cache->entries[3].scale), 0x3cbe52afu);
  // Written back in TensorRT's form.
  EXPECT_EQ(cache->write(), "TRT-8401-EntropyCalibration2\n"
                            "input: 3caa54fc\n"
                            "(Unnamed Layer* 64) [Shuffle]_output: 0\n"
                            "366: 800000\n"
                            "395: 3cbe52af\n");
  EXPECT_NE(cache->validate(), "");
  EXPECT_EQ(cache->validate(options), "");
}

TEST(CalibrationCache, HeaderOnlyIsAnEmptyCache) {
  std::string error;
  auto cache = CalibrationCache::parse("TRT-100300-MinMaxCalibration\n", error);
  ASSERT_TRUE(cache) << error;
  EXPECT_TRUE(cache->entries.empty());
  EXPECT_EQ(cache->write(), "TRT-100300-MinMaxCalibration\n");
}

TEST(CalibrationCache, MakeHeader) {
  EXPECT_EQ(CalibrationCache::makeHeader(8, 6, 1),
            "TRT-8601-EntropyCalibration2");
  EXPECT_EQ(CalibrationCache::makeHeader(7, 1, 3, "EntropyCalibration"),
            "TRT-7103-EntropyCalibration");
  EXPECT_EQ(CalibrationCache::makeHeader(10, 3, 0),
            "TRT-100300-EntropyCalibration2");
  EXPECT_EQ(CalibrationCache::makeHeader(10, 16, 2, "MinMaxCalibration"),
            "TRT-101602-MinMaxCalibration");
}

TEST(CalibrationCache, ParseErrors) {
  const std::string header = "TRT-8601-EntropyCalibration2\n";
  struct Case {
    std::string text;
    std::string error;
  } cases[] = {
      {"", "line 1: empty file, expected a header such as "
           "'TRT-8601-EntropyCalibration2'"},
      {"\n  \r\n", "line 1: empty file, expected a header such as "
                   "'TRT-8601-EntropyCalibration2'"},
      {"TRT-8XXX-EntropyCalibration2\n",
       "line 1: malformed header 'TRT-8XXX-EntropyCalibration2', expected "
       "'TRT-<version>-<algorithm>' such as 'TRT-8601-EntropyCalibration2'"},
      {"input: 3c010a14\n",
       "line 1: malformed header 'input: 3c010a14', expected "
       "'TRT-<version>-<algorithm>' such as 'TRT-8601-EntropyCalibration2'"},
      {header + "a: 3f800000\ninput 3c010a14\n",
       "line 3: expected '<tensor name>: <hex scale>', got 'input 3c010a14'"},
      {header + "input:3c010a14\n",
       "line 2: expected '<tensor name>: <hex scale>', got 'input:3c010a14'"},
      {header + "input: \n",
       "line 2: expected '<tensor name>: <hex scale>', got 'input:'"},
      {header + ": 3f800000\n", "line 2: empty tensor name in ': 3f800000'"},
      {header + "input: 3g010a14\n",
       "line 2: malformed hex scale '3g010a14' for tensor 'input' (expected 1 "
       "to 8 hex digits)"},
      {header + "input: 0x3c010a14\n",
       "line 2: malformed hex scale '0x3c010a14' for tensor 'input' (expected "
       "1 to 8 hex digits)"},
      {header + "input: 13c010a14\n",
       "line 2: malformed hex scale '13c010a14' for tensor 'input' (expected "
       "1 to 8 hex digits)"},
      {header + "input: 3c01 0a14\n",
       "line 2: malformed hex scale '3c01 0a14' for tensor 'input' (expected "
       "1 to 8 hex digits)"},
      {header + "a: 3f800000\nb: 3f800000\na: 40000000\n",
       "line 4: duplicate tensor name 'a' (first on line 2)"},
      {header + "a: 0\n", "line 2: scale '0' of tensor 'a' is zero"},
      {header + "a: 80000000\n",
       "line 2: scale '80000000' of tensor 'a' is not positive"},
      {header + "a: bf800000\n",
       "line 2: scale 'bf800000' of tensor 'a' is not positive"},
      {header + "a: 7fc00000\n",
       "line 2: scale '7fc00000' of tensor 'a' is NaN"},
      {header + "a: 7f800000\n",
       "line 2: scale '7f800000' of tensor 'a' is infinite"},
  };
  for (const Case &c : cases) {
    std::string error;
    EXPECT_FALSE(CalibrationCache::parse(c.text, error)) << c.text;
    EXPECT_EQ(error, c.error) << c.text;
  }
  // Negative and NaN stay errors when zero is allowed.
  CacheParseOptions options;
  options.allowZeroScale = true;
  std::string error;
  EXPECT_FALSE(
      CalibrationCache::parse(header + "a: 80000000\n", error, options));
  EXPECT_FALSE(
      CalibrationCache::parse(header + "a: ffc00000\n", error, options));
}

TEST(CalibrationCache, ValidateBeforeWriting) {
  CalibrationCache cache;
  cache.header = "TRT-8601-EntropyCalibration2";
  cache.entries = {{"a", 0.5f}, {"b", 0.25f}};
  EXPECT_EQ(cache.validate(), "");

  CalibrationCache dup = cache;
  dup.entries.push_back({"a", 1.0f});
  EXPECT_EQ(dup.validate(), "duplicate tensor name 'a'");

  CalibrationCache badName = cache;
  badName.entries.push_back({"two\nlines", 1.0f});
  EXPECT_EQ(badName.validate(),
            "tensor name 'two\nlines' contains a line break");
  badName.entries.back().name = "";
  EXPECT_EQ(badName.validate(), "empty tensor name");

  CalibrationCache badScale = cache;
  badScale.entries[1].scale = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(badScale.validate(), "scale of tensor 'b' is NaN");

  CalibrationCache badHeader = cache;
  badHeader.header = "TRT-EntropyCalibration2";
  EXPECT_NE(badHeader.validate().find("malformed header"), std::string::npos);

  // What validate() accepts, parse() reads back.
  std::string error;
  EXPECT_TRUE(CalibrationCache::parse(cache.write(), error)) << error;
}
