//===- qatc.cpp - the qatc driver -----------------------------------------===//
//
//   qatc import | eval | compare | quantize | compile | run | bench |
//        inspect | ops ...
//
// Each subcommand registers itself (Commands.h); Driver.cpp parses the
// command line and runs the one named.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  // libLLVM registers dozens of internal flags at the top level; keep them
  // out of `qatc --help` (the subcommands list their own options). Done by
  // LLVM itself: calling into its cl::Option objects from here trips UBSan's
  // vptr check across the shared-library boundary.
  static llvm::cl::OptionCategory qatcCategory("qatc");
  llvm::cl::HideUnrelatedOptions(qatcCategory);
  return qatc::driver::dispatch(argc, argv, /*parseErrors=*/nullptr);
}
