//===- KernelsToLLVMPass.cpp - qat-kernels-to-llvm ------------------------===//
//
// The layer functions in the LLVM dialect, as `qatc compile` hands them to
// LLVM (lowerKernelsToLLVM).
//
//===----------------------------------------------------------------------===//

#include "qatc/Codegen/Codegen.h"
#include "qatc/Codegen/Passes.h"

namespace qatc::codegen {
#define GEN_PASS_DEF_QATKERNELSTOLLVM
#include "qatc/Codegen/Passes.h.inc"
} // namespace qatc::codegen

using namespace mlir;

namespace {

struct KernelsToLLVMPass
    : public qatc::codegen::impl::QatKernelsToLLVMBase<KernelsToLLVMPass> {
  void runOnOperation() override {
    std::string error;
    if (failed(qatc::codegen::lowerKernelsToLLVM(getOperation(), error))) {
      getOperation().emitError(error);
      signalPassFailure();
    }
  }
};

} // namespace
