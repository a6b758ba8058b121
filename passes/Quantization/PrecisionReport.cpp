//===- PrecisionReport.cpp - which ONNX node runs in which precision ------===//
//
// "Which layers actually run INT8?" is the question TensorRT users ask most
// (qdq-rules §8, ask 7). After the quantization pipeline every ONNX node
// survives in some op's location: an int8 qat op that absorbed it, an fp32
// onnx op (tagged with the reason by the fusion pass), a quantize or
// dequantize left at a precision boundary, a folded weight constant, or the
// module's record of removed nodes. This pass gathers them into one row per
// node and writes text (a table drawn with fmt), CSV or JSON.
//
//===----------------------------------------------------------------------===//

#include "PrecisionReportHtml.h"
#include "QuantUtils.h"
#include "qatc/Quantization/Passes.h"
#include "qatc/Support/Locations.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

namespace qatc::quantization {
#define GEN_PASS_DEF_QATPRECISIONREPORT
#include "qatc/Quantization/Passes.h.inc"
} // namespace qatc::quantization

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

namespace {

using Row = ReportRow;

std::string primaryNodeName(Operation *op) { return getPrimaryNode(op).name; }

/// The consumers of `v`, named for a reason string.
std::string describeUsers(Value v) {
  std::string out;
  for (Operation *user : v.getUsers()) {
    if (!out.empty())
      out += ", ";
    // A cast to the stored integers only hands the value on.
    if (auto cast = dyn_cast<qat::StorageCastOp>(user)) {
      out += describeUsers(cast.getOutput());
      continue;
    }
    if (isa<func::ReturnOp>(user)) {
      out += "the graph output";
      continue;
    }
    std::string name = primaryNodeName(user);
    out += user->getName().getStringRef().str();
    if (!name.empty())
      out += " \"" + name + "\"";
  }
  return out;
}

std::string precisionOf(Operation *op) {
  if (isa<qat::ConstantOp>(op))
    return "weight";
  if (isa<qat::QuantizeOp>(op))
    return "quantize";
  if (isa<qat::DequantizeOp>(op))
    return "dequantize";
  if (isa<qat::StorageCastOp>(op))
    return "int8";
  if (isa<qat::QatDialect>(op->getDialect())) {
    bool floatOut = getElementTypeOrSelf(op->getResult(0).getType()).isF32();
    return floatOut ? "int8->fp32" : "int8";
  }
  return "fp32";
}

/// Why a quantize or dequantize stayed a standalone op.
std::string boundaryReason(Operation *op) {
  if (auto q = dyn_cast<qat::QuantizeOp>(op)) {
    Operation *def = q.getInput().getDefiningOp();
    std::string from = def ? def->getName().getStringRef().str() +
                                 (primaryNodeName(def).empty()
                                      ? ""
                                      : " \"" + primaryNodeName(def) + "\"")
                           : std::string("a graph input");
    return "quantizes the fp32 output of " + from + " for " +
           describeUsers(q.getOutput());
  }
  auto dq = cast<qat::DequantizeOp>(op);
  return "dequantizes for " + describeUsers(dq.getOutput());
}

struct QatPrecisionReportPass
    : public qatc::quantization::impl::QatPrecisionReportBase<
          QatPrecisionReportPass> {
  using QatPrecisionReportBase::QatPrecisionReportBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::map<std::string, Row> rows;
    bool failedStrict = false;
    // The op that best describes a node: compute beats boundary beats
    // constant, so a DQ absorbed into a conv reports the conv.
    auto rank = [](Operation *op) {
      if (isa<qat::ConstantOp>(op))
        return 0;
      if (isa<qat::QuantizeOp, qat::DequantizeOp, qat::StorageCastOp>(op))
        return 1;
      return 2;
    };
    std::map<std::string, Operation *> best;
    std::vector<std::pair<OnnxLocInfo, Operation *>> seen;
    module.walk([&](Operation *op) {
      // Epilogue constants carry the names of the nodes they came from; the
      // op that uses them reports those nodes.
      if (isa<ModuleOp, func::FuncOp, func::ReturnOp, onnx::ConstantOp>(op))
        return;
      for (const OnnxLocInfo &info : getOnnxLocInfos(op->getLoc())) {
        if (info.name.empty() || info.kind == kInitializerKind ||
            info.kind == kGraphInputKind || info.kind == "Constant")
          continue;
        seen.emplace_back(info, op);
      }
    });
    for (auto &[info, op] : seen) {
      Row &row = rows[info.name];
      row.name = info.name;
      row.opType = info.kind;
      row.index = info.index;
      auto it = best.find(row.name);
      if (it != best.end() && rank(it->second) >= rank(op))
        continue;
      best[row.name] = op;
    }
    for (auto &[name, row] : rows) {
      Operation *op = best[name];
      row.op = op;
      row.precision = precisionOf(op);
      row.kernel = op->getName().getStringRef().str();
      if (row.precision == "fp32") {
        auto reason = op->getAttrOfType<StringAttr>(kFp32ReasonAttr);
        row.reason = reason ? reason.str() : "not quantized in the model";
        auto required = op->getAttrOfType<StringAttr>(kPrecisionAttr);
        if (required && required.getValue() == "int8") {
          op->emitError() << "required to run in int8 by the precision "
                             "override, but runs in fp32: "
                          << row.reason;
          failedStrict = true;
        }
        if (remarks && isComputeRow(row))
          op->emitRemark() << "runs in fp32: " << row.reason;
      } else if (row.precision == "quantize" || row.precision == "dequantize") {
        row.reason = boundaryReason(op);
      } else if (row.precision == "weight") {
        row.reason = "folded into a quantized weight constant";
      }
    }
    if (auto removed = module->getAttrOfType<DictionaryAttr>(kRemovedNodesAttr))
      for (NamedAttribute entry : removed) {
        std::string name = entry.getName().str();
        if (rows.count(name))
          continue;
        Row &row = rows[name];
        row.name = name;
        row.precision = "removed";
        auto info = dyn_cast<DictionaryAttr>(entry.getValue());
        if (!info)
          continue;
        if (auto reason = info.getAs<StringAttr>("reason"))
          row.reason = reason.str();
        if (auto type = info.getAs<StringAttr>("op_type"))
          row.opType = type.str();
        if (auto index = info.getAs<IntegerAttr>("index"))
          row.index = index.getInt();
      }
    std::vector<Row> sorted;
    for (auto &[name, row] : rows)
      sorted.push_back(row);
    llvm::stable_sort(
        sorted, [](const Row &a, const Row &b) { return a.index < b.index; });
    if (!file.empty() && failed(write(sorted)))
      return signalPassFailure();
    if (failedStrict)
      return signalPassFailure();
  }

  LogicalResult write(const std::vector<Row> &rows) {
    std::error_code ec;
    std::unique_ptr<llvm::raw_fd_ostream> fileStream;
    llvm::raw_ostream *os = &llvm::outs();
    if (file != "-") {
      fileStream = std::make_unique<llvm::raw_fd_ostream>(
          file, ec, llvm::sys::fs::OF_Text);
      if (ec)
        return emitError(getOperation().getLoc())
               << "cannot write the precision report '" << file
               << "': " << ec.message();
      os = fileStream.get();
    }
    StringRef path = file;
    if (path.ends_with(".html")) {
      std::string warning, error;
      if (failed(writePrecisionReportHtml(getOperation(), rows, profile, *os,
                                          warning, error)))
        return emitError(getOperation().getLoc()) << error;
      if (!warning.empty())
        emitWarning(getOperation().getLoc()) << warning;
      return success();
    }
    if (!profile.empty())
      return emitError(getOperation().getLoc())
             << "a profile is shown by the HTML report only (give a .html "
                "file)";
    if (path.ends_with(".json"))
      writeJson(rows, *os);
    else if (path.ends_with(".csv"))
      writeCsv(rows, *os);
    else
      writeText(rows, *os);
    return success();
  }

  static std::string csvField(StringRef s) {
    if (!s.contains(',') && !s.contains('"') && !s.contains('\n'))
      return s.str();
    std::string out = "\"";
    for (char c : s) {
      if (c == '"')
        out += '"';
      out += c;
    }
    return out + "\"";
  }

  void writeCsv(const std::vector<Row> &rows, llvm::raw_ostream &os) {
    os << "index,node,op_type,precision,kernel,reason\n";
    for (const Row &r : rows)
      os << r.index << "," << csvField(r.name) << "," << csvField(r.opType)
         << "," << r.precision << "," << csvField(r.kernel) << ","
         << csvField(r.reason) << "\n";
  }

  void writeJson(const std::vector<Row> &rows, llvm::raw_ostream &os) {
    ReportSummary s = summarizeRows(rows);
    llvm::json::OStream j(os, 2);
    j.object([&] {
      j.attributeObject("summary", [&] {
        j.attribute("conv_gemm_matmul", s.linear);
        j.attribute("conv_gemm_matmul_int8", s.linearInt8);
        j.attributeObject("compute_nodes", [&] {
          for (auto &[p, n] : s.computeByPrecision)
            j.attribute(p, n);
        });
      });
      j.attributeArray("nodes", [&] {
        for (const Row &r : rows)
          j.object([&] {
            j.attribute("node", r.name);
            j.attribute("op_type", r.opType);
            j.attribute("index", r.index);
            j.attribute("precision", r.precision);
            j.attribute("compute", isComputeRow(r));
            j.attribute("kernel", r.kernel);
            if (!r.reason.empty())
              j.attribute("reason", r.reason);
          });
      });
    });
    os << "\n";
  }

  void writeText(const std::vector<Row> &rows, llvm::raw_ostream &os) {
    size_t nameWidth = 4, typeWidth = 7, kernelWidth = 6;
    for (const Row &r : rows) {
      nameWidth = std::max(nameWidth, std::min<size_t>(r.name.size(), 60));
      typeWidth = std::max(typeWidth, r.opType.size());
      kernelWidth = std::max(kernelWidth, r.kernel.size());
    }
    os << fmt::format("{:>5}  {:<{}}  {:<{}}  {:<10}  {:<{}}  {}\n", "#",
                      "node", nameWidth, "op type", typeWidth, "precision",
                      "kernel", kernelWidth, "reason");
    for (const Row &r : rows) {
      std::string name = r.name.size() > 60
                             ? "..." + r.name.substr(r.name.size() - 57)
                             : r.name;
      std::string index = r.index >= 0 ? std::to_string(r.index) : "-";
      os << fmt::format("{:>5}  {:<{}}  {:<{}}  {:<10}  {:<{}}  {}\n", index,
                        name, nameWidth, r.opType, typeWidth, r.precision,
                        r.kernel, kernelWidth, r.reason);
    }
    ReportSummary s = summarizeRows(rows);
    os << fmt::format("\nConv/Gemm/MatMul in int8: {} of {}\n", s.linearInt8,
                      s.linear);
    os << "compute nodes:";
    for (auto &[p, n] : s.computeByPrecision)
      os << fmt::format(" {} {}", n, p);
    os << "\n";
  }
};

} // namespace
