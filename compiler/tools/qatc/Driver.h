//===- Driver.h - run qatc command lines in-process -------------*- C++ -*-===//
//
// For embedders (the Python module): plain C++, no LLVM or MLIR types.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_TOOLS_QATC_DRIVER_H
#define QATC_TOOLS_QATC_DRIVER_H

#include "qatc/Runtime/PlanFormat.h"

#include <string>
#include <vector>

namespace qatc::driver {

/// The numpy dtype name ("float32", "int64", "bool", ...) of a plan's graph
/// input or output, as `qatc run` reads and writes it.
std::string numpyTypeName(const plan::TensorDesc &t);

/// Runs one qatc command line (`args[0]` is the program name) in this
/// process, as the executable would, and returns its exit code. Output goes
/// to file descriptors 1 and 2 (flushed before returning). A command line
/// the parser refuses returns 2 with the parser's message in `usage`
/// instead of ending the process. Not reentrant: one command at a time.
int runCommandLine(const std::vector<std::string> &args, std::string &usage);

} // namespace qatc::driver

#endif // QATC_TOOLS_QATC_DRIVER_H
