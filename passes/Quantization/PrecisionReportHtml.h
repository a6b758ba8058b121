//===- PrecisionReportHtml.h - the precision report's rows and page -*- C++
//-*-===//
//
// Internal to the precision report pass: its rows, and the HTML page drawn
// from them (PrecisionReportHtml.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef QATC_PASSES_QUANTIZATION_PRECISIONREPORTHTML_H
#define QATC_PASSES_QUANTIZATION_PRECISIONREPORTHTML_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <string>
#include <vector>

namespace qatc::quantization {

/// One ONNX node's row of the precision report.
struct ReportRow {
  std::string name, opType;
  int64_t index = -1;
  /// int8, int8->fp32, fp32, quantize, dequantize, weight, removed.
  std::string precision;
  /// The op it runs in ("qat.conv", "onnx.Softmax", ...).
  std::string kernel;
  /// For everything but int8: why.
  std::string reason;
  /// The op that runs it (null for removed nodes): rows sharing one op are
  /// one fused group.
  mlir::Operation *op = nullptr;
};

/// Nodes that compute (not Q/DQ, constants or data movement): what the
/// precision question is about.
bool isComputeRow(const ReportRow &row);

/// Counts of compute nodes by precision, and of int8 Conv/Gemm/MatMul.
struct ReportSummary {
  std::map<std::string, int> computeByPrecision;
  int linear = 0, linearInt8 = 0;
};
ReportSummary summarizeRows(const std::vector<ReportRow> &rows);

/// Writes the report as one self-contained HTML page: the graph laid out by
/// Graphviz's `dot` (nodes coloured by precision, fused groups outlined,
/// fp32 nodes labelled with their reason), the coverage summary and the
/// tables. With `profilePath` (a `qatc bench --json` file) each layer's
/// time is shown on its nodes. Without `dot` the page has the tables only
/// and `warning` says why. Fails (with `error`) on an unreadable profile.
mlir::LogicalResult writePrecisionReportHtml(mlir::ModuleOp module,
                                             const std::vector<ReportRow> &rows,
                                             llvm::StringRef profilePath,
                                             llvm::raw_ostream &os,
                                             std::string &warning,
                                             std::string &error);

} // namespace qatc::quantization

#endif // QATC_PASSES_QUANTIZATION_PRECISIONREPORTHTML_H
