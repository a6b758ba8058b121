//===- Calibrator.cpp - activation ranges from sample data ----------------===//

#include "qatc/Quantization/Calibrator.h"
#include "qatc/Reference/Evaluator.h"
#include "qatc/Reference/TensorIO.h"
#include "qatc/Support/Progress.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;
using ref::DType;
using ref::Tensor;

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string shapeStr(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "," : "") + std::to_string(d);
  return s + "]";
}

} // namespace

llvm::Expected<std::vector<std::string>>
qatc::quantization::listCalibrationFiles(StringRef path) {
  std::vector<std::string> files;
  if (!llvm::sys::fs::is_directory(path)) {
    files.push_back(path.str());
    return files;
  }
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(path, ec), end; it != end && !ec;
       it.increment(ec)) {
    StringRef p = it->path();
    if (p.ends_with(".npy") || p.ends_with(".npz"))
      files.push_back(p.str());
  }
  if (ec)
    return fail("cannot list " + path + ": " + ec.message());
  llvm::sort(files);
  if (files.empty())
    return fail(path + " holds no .npy or .npz files");
  return files;
}

llvm::Expected<std::vector<Sample>> qatc::quantization::loadCalibrationData(
    StringRef path, ArrayRef<std::string> names,
    ArrayRef<std::vector<int64_t>> inputShapes) {
  auto listed = listCalibrationFiles(path);
  if (!listed)
    return listed.takeError();
  std::vector<std::string> files = std::move(*listed);
  std::vector<Sample> samples;
  for (const std::string &file : files) {
    auto tensors = ref::readTensors(file);
    if (!tensors)
      return tensors.takeError(); // it names the file
    std::vector<std::optional<Tensor>> byInput(names.size());
    if (StringRef(file).ends_with(".npz")) {
      for (auto &[name, t] : *tensors) {
        auto it = llvm::find(names, name);
        if (it == names.end())
          return fail(file + ": array '" + name +
                      "' names no graph input (inputs: " +
                      llvm::join(names, ", ") + ")");
        byInput[it - names.begin()] = t;
      }
    } else if (names.size() == 1 && tensors->size() == 1) {
      byInput[0] = tensors->front().second;
    } else {
      return fail(file + ": the model has " + std::to_string(names.size()) +
                  " inputs; give calibration data as an .npz with one array "
                  "per input");
    }
    int64_t count = -1;
    std::vector<Tensor> data;
    std::vector<int64_t> perSample;
    for (size_t i = 0; i < names.size(); ++i) {
      if (!byInput[i])
        return fail(file + ": no array for graph input '" + names[i] + "'");
      Tensor t = *byInput[i];
      if (t.dtype() == DType::F64 || t.dtype() == DType::F16)
        t = ref::castTensor(t, DType::F32);
      ArrayRef<int64_t> want = inputShapes[i];
      int64_t batch = want.empty() ? 1 : want[0];
      int64_t n;
      if (t.rank() == static_cast<int64_t>(want.size()) && !want.empty() &&
          t.shape().drop_front() == want.drop_front() &&
          t.dim(0) % batch == 0) {
        n = t.dim(0) / batch;
      } else if (t.rank() + 1 == static_cast<int64_t>(want.size()) &&
                 batch == 1 && t.shape() == want.drop_front()) {
        n = 1;
        t = t.reshaped(want);
      } else {
        return fail(file + ": array for input '" + names[i] + "' has shape " +
                    shapeStr(t.shape()) + "; expected [N" +
                    (want.size() > 1 ? "," : "") +
                    shapeStr(want.drop_front()).substr(1) +
                    " (a batch of samples of the input " + shapeStr(want) +
                    ")");
      }
      if (count >= 0 && n != count)
        return fail(file + ": the inputs hold different numbers of samples");
      count = n;
      data.push_back(t);
      perSample.push_back(batch);
    }
    for (int64_t k = 0; k < count; ++k) {
      Sample s;
      for (size_t i = 0; i < names.size(); ++i)
        s.push_back(ref::sliceRows(data[i], k * perSample[i], perSample[i])
                        .reshaped(inputShapes[i]));
      samples.push_back(std::move(s));
    }
  }
  if (samples.empty())
    return fail(path + " holds no samples");
  return samples;
}

namespace {

/// Statistics of every calibrated tensor, for one worker.
struct Stats {
  explicit Stats(size_t n)
      : absMax(n, 0.0), min(n, std::numeric_limits<double>::infinity()),
        max(n, -std::numeric_limits<double>::infinity()), values(n, 0),
        seen(n, false) {}
  std::vector<double> absMax, min, max;
  std::vector<uint64_t> values;
  std::vector<bool> seen;
  std::vector<calib::Histogram> histograms;
};

/// The share of a histogram's values above `amax`; the bin holding amax
/// counts in proportion to the part of it above.
double clippedShare(const calib::Histogram &h, double amax) {
  uint64_t total = h.total();
  if (!total || amax >= h.range)
    return 0;
  double above = 0;
  for (size_t k = 0; k < h.numBins(); ++k) {
    double lo = h.edge(k), hi = h.edge(k + 1);
    if (lo >= amax)
      above += h.counts[k];
    else if (hi > amax)
      above += h.counts[k] * (hi - amax) / (hi - lo);
  }
  return above / total;
}

} // namespace

FailureOr<CalibrationResult>
qatc::quantization::calibrate(ModuleOp module, ArrayRef<Sample> samples,
                              ArrayRef<std::string> tensors,
                              const CalibratorOptions &options) {
  llvm::StringMap<unsigned> index;
  for (auto [i, name] : llvm::enumerate(tensors))
    index[name] = i;
  unsigned threads =
      std::max(1u, std::min<unsigned>(options.threads, samples.size()));
  bool needHistogram = options.method != calib::Method::Max;
  auto start = std::chrono::steady_clock::now();

  // One pass over the samples; `observe` sees each calibrated tensor.
  auto runPass = [&](StringRef label, std::vector<Stats> &stats,
                     auto observe) -> LogicalResult {
    std::atomic<size_t> done{0};
    std::atomic<bool> failedAny{false};
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        ref::EvalOptions eval;
        eval.onTensor = [&](StringRef name, const Tensor &value) {
          auto it = index.find(name);
          if (it == index.end() || value.dtype() != DType::F32)
            return;
          observe(stats[t], it->second, value);
        };
        for (size_t i = t; i < samples.size() && !failedAny; i += threads) {
          if (failed(ref::evaluate(module, samples[i], eval)))
            failedAny = true;
          ++done;
        }
      });
    std::optional<ProgressBar> bar;
    if (options.progress)
      bar.emplace(label, samples.size(), "samples");
    while (done < samples.size() && !failedAny) {
      if (bar)
        bar->update(done);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (std::thread &w : workers)
      w.join();
    if (failedAny)
      return failure();
    if (bar)
      bar->finish();
    return success();
  };

  // Pass 1: absolute maxima.
  std::vector<Stats> stats(threads, Stats(tensors.size()));
  if (failed(runPass(
          needHistogram ? "calibrating (1/2: ranges)" : "calibrating", stats,
          [](Stats &s, unsigned i, const Tensor &v) {
            const float *x = v.data<float>();
            size_t n = v.numElements();
            s.absMax[i] = std::max<double>(s.absMax[i], calib::absMax(x, n));
            float lo = std::numeric_limits<float>::infinity(), hi = -lo;
            uint64_t finite = 0;
            for (size_t k = 0; k < n; ++k)
              if (std::isfinite(x[k])) {
                lo = std::min(lo, x[k]);
                hi = std::max(hi, x[k]);
                ++finite;
              }
            s.min[i] = std::min<double>(s.min[i], lo);
            s.max[i] = std::max<double>(s.max[i], hi);
            s.values[i] += finite;
            s.seen[i] = true;
          })))
    return failure();
  Stats total(tensors.size());
  for (const Stats &s : stats)
    for (size_t i = 0; i < tensors.size(); ++i) {
      total.absMax[i] = std::max(total.absMax[i], s.absMax[i]);
      total.min[i] = std::min(total.min[i], s.min[i]);
      total.max[i] = std::max(total.max[i], s.max[i]);
      total.values[i] += s.values[i];
      total.seen[i] = total.seen[i] || s.seen[i];
    }
  std::vector<std::string> missing;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!total.seen[i])
      missing.push_back(tensors[i]);
  if (!missing.empty()) {
    emitError(module.getLoc())
        << "calibration never computed " << llvm::join(missing, ", ");
    return failure();
  }

  // Pass 2: histograms over [0, absmax].
  if (needHistogram) {
    for (Stats &s : stats)
      for (size_t i = 0; i < tensors.size(); ++i)
        s.histograms.emplace_back(total.absMax[i]);
    if (failed(runPass("calibrating (2/2: histograms)", stats,
                       [](Stats &s, unsigned i, const Tensor &v) {
                         s.histograms[i].addAbs(v.data<float>(),
                                                v.numElements());
                       })))
      return failure();
    for (size_t t = 1; t < stats.size(); ++t)
      for (size_t i = 0; i < tensors.size(); ++i)
        stats[0].histograms[i].merge(stats[t].histograms[i]);
  }

  CalibrationResult result;
  result.samples = samples.size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    double amax = total.absMax[i];
    if (needHistogram)
      amax = calib::computeAmax(options.method, stats[0].histograms[i],
                                total.absMax[i], options.percentile);
    result.amax[tensors[i]] = amax;
    result.scales[tensors[i]] = calib::scaleFromAmax(amax);
    TensorCalibration &c = result.tensors[tensors[i]];
    c.amax = amax;
    c.values = total.values[i];
    c.min = total.values[i] ? total.min[i] : 0;
    c.max = total.values[i] ? total.max[i] : 0;
    if (needHistogram)
      c.clipped = clippedShare(stats[0].histograms[i], amax);
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}
