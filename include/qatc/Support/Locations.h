//===- Locations.h - ONNX-aware locations and diagnostics -------*- C++ -*-===//
//
// Every op imported from ONNX carries a location that names its node:
//
//   NameLoc(<node name>, FusedLoc<"<OpType>">[FileLineColLoc(<file>, <index>,
//   0)])
//
// where <index> is the node's position in the model's graph (0-based). Graph
// inputs and initializers get the same shape with "graph-input" or
// "initializer" in place of the op type. This header builds such locations,
// decodes them, and renders diagnostics as
//
//   model.onnx: node "/layer1/conv1/Conv" (#17, Conv): error: ...
//
//===----------------------------------------------------------------------===//

#ifndef QATC_SUPPORT_LOCATIONS_H
#define QATC_SUPPORT_LOCATIONS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"

#include <optional>
#include <string>

namespace qatc {

/// Metadata string of graph-input locations.
inline constexpr llvm::StringLiteral kGraphInputKind = "graph-input";
/// Metadata string of initializer locations.
inline constexpr llvm::StringLiteral kInitializerKind = "initializer";
/// Metadata string of graph-output locations (used in diagnostics only).
inline constexpr llvm::StringLiteral kGraphOutputKind = "graph-output";

/// What a location says about the ONNX entity it came from.
struct OnnxLocInfo {
  std::string file;
  std::string name;
  /// ONNX op type, or kGraphInputKind / kInitializerKind / kGraphOutputKind.
  std::string kind;
  /// Node index in the graph; -1 for tensors.
  int64_t index = -1;
};

/// Location of ONNX node number `index` (0-based) named `name`.
mlir::Location makeNodeLoc(mlir::MLIRContext *ctx, llvm::StringRef file,
                           llvm::StringRef name, int64_t index,
                           llvm::StringRef opType);

/// Location of a graph input or an initializer (`kind` is kGraphInputKind or
/// kInitializerKind).
mlir::Location makeTensorLoc(mlir::MLIRContext *ctx, llvm::StringRef file,
                             llvm::StringRef name, llvm::StringRef kind);

/// Location of the model file itself (errors not tied to a node).
mlir::Location makeFileLoc(mlir::MLIRContext *ctx, llvm::StringRef file);

/// Decodes the ONNX entities in `loc`: one for a node or tensor location,
/// several for a fused location of several nodes, in order.
llvm::SmallVector<OnnxLocInfo> getOnnxLocInfos(mlir::Location loc);

/// Renders `loc` as the prefix of a diagnostic line, e.g.
/// `model.onnx: node "conv1" (#3, Conv)`. Falls back to MLIR's printing for
/// locations that are not ONNX ones.
std::string renderLocation(mlir::Location loc);

/// Prints every diagnostic emitted while it is alive to `os` in the
/// `file: node "name" (#i, Op): error: message` form, with notes indented
/// below. Counts errors.
class OnnxDiagnosticHandler {
public:
  OnnxDiagnosticHandler(mlir::MLIRContext *ctx, llvm::raw_ostream &os);
  ~OnnxDiagnosticHandler();
  OnnxDiagnosticHandler(const OnnxDiagnosticHandler &) = delete;
  OnnxDiagnosticHandler &operator=(const OnnxDiagnosticHandler &) = delete;

  unsigned getNumErrors() const { return numErrors; }

  /// Formats one diagnostic (and its notes) the way the handler prints it.
  static std::string format(mlir::Diagnostic &diag);

private:
  mlir::MLIRContext *ctx;
  mlir::DiagnosticEngine::HandlerID id;
  unsigned numErrors = 0;
};

} // namespace qatc

#endif // QATC_SUPPORT_LOCATIONS_H
