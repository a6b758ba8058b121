//===- ImportCLOptions.h - command-line options of the importer -*- C++ -*-===//
//
// The import options every qatc tool accepts (--input-shape, --freeze-input,
// --allow-unsupported-ops), defined once.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_FRONTEND_IMPORTCLOPTIONS_H
#define QATC_FRONTEND_IMPORTCLOPTIONS_H

#include "qatc/Frontend/OnnxImporter.h"

#include "llvm/Support/CommandLine.h"

namespace qatc {

/// Registers the import options on `sub` (the top level by default).
class ImportCLOptions {
public:
  explicit ImportCLOptions(
      llvm::cl::SubCommand &sub = llvm::cl::SubCommand::getTopLevel());

  /// Fills `options` from the parsed command line; returns an error message
  /// or an empty string.
  std::string get(ImportOptions &options) const;

private:
  llvm::cl::list<std::string> inputShapes;
  llvm::cl::list<std::string> freezeInputs;
  llvm::cl::opt<bool> allowUnsupported;
};

} // namespace qatc

#endif // QATC_FRONTEND_IMPORTCLOPTIONS_H
