//===- Commands.h - qatc driver subcommands ---------------------*- C++ -*-===//
//
// Each subcommand owns an llvm::cl::SubCommand and a run function; qatc.cpp
// dispatches to the one the user named.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_TOOLS_QATC_COMMANDS_H
#define QATC_TOOLS_QATC_COMMANDS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace qatc::driver {

extern llvm::cl::SubCommand importCommand;
int runImport();

/// Prints what a user wants to know about an imported model: I/O, op counts,
/// quantization and weights.
void printModelSummary(mlir::ModuleOp module, llvm::StringRef path,
                       llvm::raw_ostream &os);

} // namespace qatc::driver

#endif // QATC_TOOLS_QATC_COMMANDS_H
