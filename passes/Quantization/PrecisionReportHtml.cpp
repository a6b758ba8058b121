//===- PrecisionReportHtml.cpp - the precision report as a web page -------===//
//
// "Which part of my graph fell back to fp32, and why" answered with a
// picture: the graph as it runs after fusion, one box per ONNX node,
// coloured by precision, the nodes one op absorbed outlined together, every
// fp32 node carrying its reason. Graphviz's `dot` (Debian's graphviz) lays
// it out at report time; its SVG is inlined, so the page is one file.
//
//===----------------------------------------------------------------------===//

#include "PrecisionReportHtml.h"
#include "qatc/Dialect/Qat/QatOps.h"
#include "qatc/Reference/Evaluator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <fmt/format.h>

#include <set>

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

namespace {

/// Fill colours by precision (the legend shows them).
const char *colorOf(llvm::StringRef precision) {
  return llvm::StringSwitch<const char *>(precision)
      .Case("int8", "#9bd89b")
      .Case("int8->fp32", "#8ecae6")
      .Case("fp32", "#f6a06a")
      .Case("quantize", "#d7c4ec")
      .Case("dequantize", "#d7c4ec")
      .Case("weight", "#dddddd")
      .Default("#ffffff");
}

std::string html(llvm::StringRef s) {
  std::string out;
  for (char c : s)
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  return out;
}

/// A DOT string literal's contents.
std::string dot(llvm::StringRef s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

/// `s` broken into lines of at most `width` characters, at spaces where
/// possible.
std::vector<std::string> splitLines(llvm::StringRef s, size_t width) {
  std::vector<std::string> lines;
  std::string line;
  llvm::SmallVector<llvm::StringRef> words;
  s.split(words, ' ');
  for (llvm::StringRef w : words) {
    if (!line.empty() && line.size() + 1 + w.size() > width) {
      lines.push_back(line);
      line.clear();
    }
    while (w.size() > width) {
      if (!line.empty())
        lines.push_back(line);
      lines.push_back(w.take_front(width).str());
      line.clear();
      w = w.drop_front(width);
    }
    line += (line.empty() ? "" : " ") + w.str();
  }
  if (!line.empty())
    lines.push_back(line);
  return lines;
}

/// Per ONNX node, milliseconds per run from a `qatc bench --json` file (a
/// layer's time goes to the node it is named after).
LogicalResult readProfile(llvm::StringRef path,
                          std::map<std::string, double> &ms,
                          std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    error = "cannot read the profile '" + path.str() +
            "': " + buffer.getError().message();
    return failure();
  }
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json) {
    error = "the profile '" + path.str() + "' is not JSON (" +
            llvm::toString(json.takeError()) + ")";
    return failure();
  }
  const llvm::json::Object *top = json->getAsObject();
  const llvm::json::Array *layers = top ? top->getArray("layers") : nullptr;
  if (!layers) {
    error = "the profile '" + path.str() +
            "' has no \"layers\" array (write it with qatc bench --json)";
    return failure();
  }
  for (const llvm::json::Value &l : *layers) {
    const llvm::json::Object *o = l.getAsObject();
    auto node = o ? o->getString("node") : std::nullopt;
    auto t = o ? o->getNumber("ms") : std::nullopt;
    if (node && t)
      ms[node->str()] += *t;
  }
  return success();
}

/// Runs `dot -Tsvg` on `graph`; the SVG element, or "" with `why`.
std::string layOut(const std::string &graph, std::string &why) {
  auto dotPath = llvm::sys::findProgramByName("dot");
  if (!dotPath) {
    why = "Graphviz's dot is not installed (Debian: graphviz), so the page "
          "has no graph";
    return "";
  }
  llvm::SmallString<128> in, out;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("qatc-report", "dot", fd, in) ||
      llvm::sys::fs::createTemporaryFile("qatc-report", "svg", out)) {
    why = "cannot create temporary files for dot";
    return "";
  }
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << graph;
  }
  std::string message;
  llvm::SmallVector<llvm::StringRef> args = {*dotPath, "-Tsvg", "-o", out, in};
  int rc = llvm::sys::ExecuteAndWait(*dotPath, args, std::nullopt, {},
                                     /*SecondsToWait=*/600, 0, &message);
  std::string svg;
  if (rc == 0)
    if (auto b = llvm::MemoryBuffer::getFile(out))
      svg = (*b)->getBuffer().str();
  llvm::sys::fs::remove(in);
  llvm::sys::fs::remove(out);
  size_t start = svg.find("<svg");
  if (rc != 0 || start == std::string::npos) {
    why = "dot failed (" +
          (message.empty() ? "exit " + std::to_string(rc) : message) +
          "), so the page has no graph";
    return "";
  }
  return svg.substr(start);
}

/// `s` in lines of at most `width` characters, HTML-escaped, joined by
/// Graphviz HTML-label line breaks.
std::string wrapLines(llvm::StringRef s, size_t width) {
  std::string out;
  for (const std::string &line : splitLines(s, width))
    out += (out.empty() ? "" : "<BR/>") + html(line);
  return out;
}

/// The graph in DOT: one box per op as it runs after fusion, a row per ONNX
/// node it absorbed (coloured by that node's precision; fp32 rows carry
/// their reason), a dashed outline where an op absorbed several nodes;
/// edges where an op reads what another produced (through storage casts);
/// graph inputs as ellipses. Weight constants are left to the tables.
std::string buildGraph(ModuleOp module, const std::vector<ReportRow> &rows,
                       const std::map<std::string, double> &ms) {
  llvm::DenseMap<Operation *, std::vector<size_t>> groups;
  std::vector<Operation *> order;
  for (size_t i = 0; i < rows.size(); ++i)
    if (Operation *op = rows[i].op; op && rows[i].precision != "weight") {
      if (!groups.count(op))
        order.push_back(op);
      groups[op].push_back(i); // rows come sorted by node index
    }
  llvm::DenseMap<Operation *, size_t> groupId;
  for (size_t c = 0; c < order.size(); ++c)
    groupId[order[c]] = c;
  std::string g = "digraph precision {\n"
                  "  rankdir=TB; nodesep=0.3; ranksep=0.35;\n"
                  "  node [shape=plain, fontname=\"Helvetica\", "
                  "fontsize=10];\n"
                  "  edge [color=\"#666666\", arrowsize=0.6];\n";
  for (size_t c = 0; c < order.size(); ++c) {
    const std::vector<size_t> &members = groups[order[c]];
    bool fused = members.size() > 1;
    std::string label =
        fmt::format("<TABLE BORDER=\"{}\" STYLE=\"rounded{}\" CELLBORDER=\"0\" "
                    "CELLSPACING=\"1\" CELLPADDING=\"3\" COLOR=\"#333333\">",
                    fused ? 2 : 1, fused ? ",dashed" : "");
    double groupMs = 0;
    bool timed = false;
    for (size_t i : members) {
      const ReportRow &r = rows[i];
      std::string text =
          wrapLines(r.name, 48) + "<BR/><I>" + html(r.opType) +
          (r.precision == "int8" ? "" : " · " + html(r.precision)) + "</I>";
      if (r.precision == "fp32")
        text += "<BR/><B>fp32:</B> " + wrapLines(r.reason, 56);
      if (auto t = ms.find(r.name); t != ms.end()) {
        groupMs += t->second;
        timed = true;
      }
      label += fmt::format("<TR><TD BGCOLOR=\"{}\">{}</TD></TR>",
                           colorOf(r.precision), text);
    }
    if (fused || timed)
      label += fmt::format(
          "<TR><TD><FONT POINT-SIZE=\"8\">{}{}</FONT></TD></TR>",
          fused ? html(order[c]->getName().getStringRef()) : "",
          timed ? fmt::format("{}{:.3f} ms", fused ? " · " : "", groupMs) : "");
    label += "</TABLE>";
    g += fmt::format("  g{} [label=<{}>, tooltip=\"{}\"];\n", c, label,
                     dot(rows[members.front()].name));
  }
  // Edges between ops; a storage cast only hands a value on.
  func::FuncOp func;
  module.walk([&](func::FuncOp f) {
    if (!func)
      func = f;
  });
  std::vector<std::string> inputNames =
      func ? ref::getInputNames(func) : std::vector<std::string>();
  std::set<std::pair<std::string, size_t>> edges;
  std::set<unsigned> usedInputs;
  for (Operation *op : order)
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      while (def && !groups.count(def) && isa<qat::StorageCastOp>(def)) {
        v = def->getOperand(0);
        def = v.getDefiningOp();
      }
      if (def && groups.count(def) && def != op) {
        edges.insert({"g" + std::to_string(groupId[def]), groupId[op]});
      } else if (auto arg = dyn_cast<BlockArgument>(v);
                 arg && func && arg.getOwner() == &func.getBody().front()) {
        edges.insert({"in" + std::to_string(arg.getArgNumber()), groupId[op]});
        usedInputs.insert(arg.getArgNumber());
      }
    }
  for (unsigned i : usedInputs)
    g += fmt::format("  in{} [shape=ellipse, label=\"{}\"];\n", i,
                     dot(i < inputNames.size() ? inputNames[i] : "input"));
  for (const auto &[from, to] : edges)
    g += fmt::format("  {} -> g{};\n", from, to);
  return g + "}\n";
}

} // namespace

bool qatc::quantization::isComputeRow(const ReportRow &row) {
  return !llvm::is_contained({"QuantizeLinear", "DequantizeLinear", "Constant",
                              "Identity", "Reshape", "Flatten", "Squeeze",
                              "Unsqueeze", "Transpose", "Slice", "Gather",
                              "Concat", "Split", "Shape", "Cast"},
                             row.opType);
}

ReportSummary
qatc::quantization::summarizeRows(const std::vector<ReportRow> &rows) {
  ReportSummary s;
  for (const ReportRow &r : rows) {
    if (!isComputeRow(r))
      continue;
    ++s.computeByPrecision[r.precision];
    if (llvm::is_contained({"Conv", "Gemm", "MatMul", "ConvTranspose"},
                           llvm::StringRef(r.opType))) {
      ++s.linear;
      s.linearInt8 += llvm::StringRef(r.precision).starts_with("int8");
    }
  }
  return s;
}

LogicalResult qatc::quantization::writePrecisionReportHtml(
    ModuleOp module, const std::vector<ReportRow> &rows,
    llvm::StringRef profilePath, llvm::raw_ostream &os, std::string &warning,
    std::string &error) {
  std::map<std::string, double> ms;
  if (!profilePath.empty() && failed(readProfile(profilePath, ms, error)))
    return failure();
  std::string svg = layOut(buildGraph(module, rows, ms), warning);
  ReportSummary s = summarizeRows(rows);
  int compute = 0, int8Compute = 0;
  for (auto &[p, n] : s.computeByPrecision) {
    compute += n;
    if (llvm::StringRef(p).starts_with("int8"))
      int8Compute += n;
  }
  double totalMs = 0;
  for (auto &[node, t] : ms)
    totalMs += t;
  auto timeOf = [&](const ReportRow &r) -> std::string {
    auto it = ms.find(r.name);
    return it == ms.end() ? "" : fmt::format("{:.3f}", it->second);
  };

  os << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<title>qatc precision report</title>\n<style>\n"
        "body{font-family:Helvetica,Arial,sans-serif;margin:1.5em;"
        "color:#222}\n"
        "table{border-collapse:collapse;font-size:13px;margin:0.5em 0}\n"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;"
        "vertical-align:top}\nth{background:#f0f0f0}\n"
        ".swatch{display:inline-block;width:1em;height:1em;border:1px solid "
        "#888;vertical-align:middle;margin:0 0.3em 0 1em}\n"
        ".graph{overflow:auto;border:1px solid #ccc;max-height:90vh}\n"
        ".num{text-align:right}\n"
        // dot sizes boxes with Helvetica's metrics; the sans fonts a browser
        // substitutes (DejaVu Sans on Debian) run about 10 % wider.
        ".graph text{font-size:9px}\n</style></head><body>\n"
        "<h1>qatc precision report</h1>\n";
  os << fmt::format(
      "<p id=\"summary\">Conv/Gemm/MatMul in int8: <b>{} of {}</b>. Compute "
      "nodes: <b>{} of {}</b> in int8 ({:.1f} %)",
      s.linearInt8, s.linear, int8Compute, compute,
      compute ? 100.0 * int8Compute / compute : 0.0);
  for (auto &[p, n] : s.computeByPrecision)
    os << fmt::format("; {} {}", n, html(p));
  os << ".";
  if (!ms.empty())
    os << fmt::format(" Profile: {:.3f} ms per run over the layers.", totalMs);
  os << "</p>\n<p>";
  for (const char *p : {"int8", "int8->fp32", "fp32", "quantize", "weight"})
    os << fmt::format(
        "<span class=\"swatch\" style=\"background:{}\"></span>{}", colorOf(p),
        html(p));
  os << " &nbsp; dashed outline: ONNX nodes fused into one op</p>\n";
  if (!warning.empty())
    os << "<p><b>No graph:</b> " << html(warning) << "</p>\n";
  else
    os << "<h2>Graph</h2>\n<div class=\"graph\">\n" << svg << "\n</div>\n";

  os << "<h2>Nodes in fp32</h2>\n<table id=\"fp32\">\n<tr><th>#</th><th>node"
        "</th><th>op type</th><th>runs as</th><th>reason</th>"
     << (ms.empty() ? "" : "<th>ms</th>") << "</tr>\n";
  for (const ReportRow &r : rows)
    if (r.precision == "fp32")
      os << fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>"
          "{}</td>{}</tr>\n",
          r.index, html(r.name), html(r.opType), html(r.kernel), html(r.reason),
          ms.empty() ? "" : "<td class=\"num\">" + timeOf(r) + "</td>");
  os << "</table>\n<h2>All nodes</h2>\n<table id=\"nodes\">\n<tr><th>#</th>"
        "<th>node</th><th>op type</th><th>precision</th><th>runs as</th>"
        "<th>reason</th>"
     << (ms.empty() ? "" : "<th>ms</th>") << "</tr>\n";
  for (const ReportRow &r : rows)
    os << fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td style=\"background:{}\">"
        "{}</td><td>{}</td><td>{}</td>{}</tr>\n",
        r.index >= 0 ? std::to_string(r.index) : "-", html(r.name),
        html(r.opType), colorOf(r.precision), html(r.precision), html(r.kernel),
        html(r.reason),
        ms.empty() ? "" : "<td class=\"num\">" + timeOf(r) + "</td>");
  os << "</table>\n</body></html>\n";
  return success();
}
