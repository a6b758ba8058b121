//===- ScaleTable.h - activation scales by tensor name ----------*- C++ -*-===//
//
// What calibration produces and Q/DQ insertion consumes: one float32 scale
// per ONNX tensor name, as a TensorRT calibration cache stores it.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_QUANTIZATION_SCALETABLE_H
#define QATC_QUANTIZATION_SCALETABLE_H

#include <map>
#include <string>

namespace qatc::quantization {

/// Activation scales (amax / 127) by ONNX tensor name.
using ScaleTable = std::map<std::string, float>;

} // namespace qatc::quantization

#endif // QATC_QUANTIZATION_SCALETABLE_H
