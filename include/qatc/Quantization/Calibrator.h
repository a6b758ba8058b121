//===- Calibrator.h - activation ranges from sample data --------*- C++ -*-===//
//
// Runs the float model over calibration samples with the reference
// evaluator and turns each requested tensor's values into a scale with one
// of the calibration methods of Calibration.h. Two passes when the method
// needs a histogram: the first finds every tensor's absolute maximum, the
// second fills 2048-bin histograms of |x| over [0, that maximum]. Samples are
// spread over worker threads whose statistics merge exactly (maxima and
// counts), so the result does not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_QUANTIZATION_CALIBRATOR_H
#define QATC_QUANTIZATION_CALIBRATOR_H

#include "qatc/Quantization/Calibration.h"
#include "qatc/Quantization/ScaleTable.h"
#include "qatc/Reference/Tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace qatc::quantization {

/// One evaluation's inputs, in the order of the graph inputs.
using Sample = std::vector<ref::Tensor>;

/// The calibration files `path` names: itself, or the .npy and .npz files
/// of a directory in name order (an error if there are none).
llvm::Expected<std::vector<std::string>>
listCalibrationFiles(llvm::StringRef path);

/// Reads calibration data from a .npy (the model's single input, with a
/// batch axis), an .npz (one array per input, named after it, each with a
/// batch axis) or a directory of such files (in name order), and splits it
/// into samples of the model's input shapes (`inputShapes`, batch included:
/// with batch 1 every row is a sample). Arrays without the batch axis are
/// one sample.
llvm::Expected<std::vector<Sample>>
loadCalibrationData(llvm::StringRef path, llvm::ArrayRef<std::string> names,
                    llvm::ArrayRef<std::vector<int64_t>> inputShapes);

struct CalibratorOptions {
  calib::Method method = calib::Method::Max;
  /// For Method::Percentile.
  double percentile = 99.99;
  /// Worker threads (each evaluates whole samples).
  unsigned threads = 2;
  /// Draw a progress bar on stderr.
  bool progress = true;
};

/// What calibration saw of one tensor and what it kept (the calibration
/// report).
struct TensorCalibration {
  double min = 0, max = 0; ///< observed over every sample (NaN ignored)
  double amax = 0;         ///< the calibrated range [-amax, amax]
  uint64_t values = 0;     ///< finite values observed
  /// The share of values with |x| > amax: exactly 0 for Max, otherwise from
  /// the 2048-bin histogram (the bin holding amax counted in proportion).
  double clipped = 0;
};

struct CalibrationResult {
  /// scale = amax / 127 per tensor.
  ScaleTable scales;
  /// The calibrated absolute range per tensor.
  std::map<std::string, double> amax;
  /// Per tensor, what was observed and kept.
  std::map<std::string, TensorCalibration> tensors;
  size_t samples = 0;
  double seconds = 0;
};

/// Calibrates `tensors` of `module` (a float graph in the onnx dialect) on
/// `samples`. Fails after a diagnostic if an evaluation fails; tensors the
/// evaluation never produced are reported by name.
mlir::FailureOr<CalibrationResult>
calibrate(mlir::ModuleOp module, llvm::ArrayRef<Sample> samples,
          llvm::ArrayRef<std::string> tensors,
          const CalibratorOptions &options);

} // namespace qatc::quantization

#endif // QATC_QUANTIZATION_CALIBRATOR_H
