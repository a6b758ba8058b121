//===- Locations.cpp - ONNX-aware locations and diagnostics ---------------===//

#include "qatc/Support/Locations.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace qatc;

Location qatc::makeNodeLoc(MLIRContext *ctx, StringRef file, StringRef name,
                           int64_t index, StringRef opType) {
  auto fileLoc =
      FileLineColLoc::get(ctx, file, static_cast<unsigned>(index), 0);
  auto tagged = FusedLoc::get(ctx, {fileLoc}, StringAttr::get(ctx, opType));
  return NameLoc::get(StringAttr::get(ctx, name), tagged);
}

Location qatc::makeTensorLoc(MLIRContext *ctx, StringRef file, StringRef name,
                             StringRef kind) {
  auto fileLoc = FileLineColLoc::get(ctx, file, 0, 0);
  auto tagged = FusedLoc::get(ctx, {fileLoc}, StringAttr::get(ctx, kind));
  return NameLoc::get(StringAttr::get(ctx, name), tagged);
}

Location qatc::makeFileLoc(MLIRContext *ctx, StringRef file) {
  return FileLineColLoc::get(ctx, file, 0, 0);
}

/// Decodes `NameLoc(name, FusedLoc<kind>[FileLineColLoc])`.
static std::optional<OnnxLocInfo> decodeOne(NameLoc nameLoc) {
  auto fused = dyn_cast<FusedLoc>(nameLoc.getChildLoc());
  if (!fused || fused.getLocations().size() != 1)
    return std::nullopt;
  auto kind = dyn_cast_or_null<StringAttr>(fused.getMetadata());
  auto fileLoc = dyn_cast<FileLineColLoc>(fused.getLocations().front());
  if (!kind || !fileLoc)
    return std::nullopt;
  OnnxLocInfo info;
  info.file = fileLoc.getFilename().str();
  info.name = nameLoc.getName().str();
  info.kind = kind.str();
  bool isTensor = info.kind == kGraphInputKind ||
                  info.kind == kInitializerKind ||
                  info.kind == kGraphOutputKind;
  info.index = isTensor ? -1 : static_cast<int64_t>(fileLoc.getLine());
  return info;
}

static void collect(Location loc, SmallVectorImpl<OnnxLocInfo> &out) {
  if (auto nameLoc = dyn_cast<NameLoc>(loc)) {
    if (auto info = decodeOne(nameLoc)) {
      out.push_back(std::move(*info));
      return;
    }
    collect(nameLoc.getChildLoc(), out);
    return;
  }
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location part : fused.getLocations())
      collect(part, out);
    return;
  }
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    collect(callSite.getCallee(), out);
}

SmallVector<OnnxLocInfo> qatc::getOnnxLocInfos(Location loc) {
  SmallVector<OnnxLocInfo> out;
  collect(loc, out);
  return out;
}

static std::string renderInfo(const OnnxLocInfo &info, bool withFile) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (withFile)
    os << info.file << ": ";
  if (info.kind == kGraphInputKind)
    os << "graph input \"" << info.name << "\"";
  else if (info.kind == kInitializerKind)
    os << "initializer \"" << info.name << "\"";
  else if (info.kind == kGraphOutputKind)
    os << "graph output \"" << info.name << "\"";
  else
    os << "node \"" << info.name << "\" (#" << info.index << ", " << info.kind
       << ")";
  return os.str();
}

std::string qatc::renderLocation(Location loc) {
  SmallVector<OnnxLocInfo> infos = getOnnxLocInfos(loc);
  if (!infos.empty())
    return renderInfo(infos.front(), /*withFile=*/true);
  if (auto fileLoc = dyn_cast<FileLineColLoc>(loc)) {
    if (fileLoc.getLine() == 0 && fileLoc.getColumn() == 0)
      return fileLoc.getFilename().str();
    return (fileLoc.getFilename().getValue() + ":" + Twine(fileLoc.getLine()) +
            ":" + Twine(fileLoc.getColumn()))
        .str();
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  loc.print(os);
  return os.str();
}

static StringRef severityName(DiagnosticSeverity severity) {
  switch (severity) {
  case DiagnosticSeverity::Error:
    return "error";
  case DiagnosticSeverity::Warning:
    return "warning";
  case DiagnosticSeverity::Note:
    return "note";
  case DiagnosticSeverity::Remark:
    return "remark";
  }
  return "error";
}

std::string OnnxDiagnosticHandler::format(Diagnostic &diag) {
  std::string s;
  llvm::raw_string_ostream os(s);
  SmallVector<OnnxLocInfo> infos = getOnnxLocInfos(diag.getLocation());
  os << renderLocation(diag.getLocation()) << ": "
     << severityName(diag.getSeverity()) << ": " << diag.str() << "\n";
  // A fused location (several nodes became one op) lists the other nodes.
  for (size_t i = 1; i < infos.size(); ++i)
    os << "  note: also from " << renderInfo(infos[i], /*withFile=*/false)
       << "\n";
  for (Diagnostic &note : diag.getNotes()) {
    os << "  note: ";
    if (!isa<UnknownLoc>(note.getLocation()) &&
        note.getLocation() != diag.getLocation())
      os << renderLocation(note.getLocation()) << ": ";
    os << note.str() << "\n";
  }
  return os.str();
}

OnnxDiagnosticHandler::OnnxDiagnosticHandler(MLIRContext *ctx,
                                             llvm::raw_ostream &os)
    : ctx(ctx) {
  id = ctx->getDiagEngine().registerHandler([this, &os](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      ++numErrors;
    os << format(diag);
    os.flush();
    return success();
  });
}

OnnxDiagnosticHandler::~OnnxDiagnosticHandler() {
  ctx->getDiagEngine().eraseHandler(id);
}
