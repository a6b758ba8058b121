//===- InitAll.h - every dialect and pass qatc's tools use ------*- C++ -*-===//
//
// One place that registers the dialects and passes, so `qatc-opt` and the
// `qatc` driver accept the same IR and pipelines. Only what qatc uses is
// registered (never MLIR's InitAllDialects.h, which costs ~45 s and 2.5 GB to
// compile).
//
//===----------------------------------------------------------------------===//

#ifndef QATC_INITALL_H
#define QATC_INITALL_H

#include "qatc/Codegen/Passes.h"
#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Dialect/Qat/QatOps.h"
#include "qatc/Quantization/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Quant/QuantOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace qatc {

/// Registers the dialects of qatc's IR: onnx, qat, quant (for the
/// !quant.uniform types) and func, and those of the layer functions code
/// generation emits (arith, scf, vector, math, llvm).
inline void registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<onnx::OnnxDialect, qat::QatDialect,
                  mlir::quant::QuantizationDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::scf::SCFDialect,
                  mlir::vector::VectorDialect, mlir::math::MathDialect,
                  mlir::LLVM::LLVMDialect>();
}

/// Registers qatc's passes and pipelines and the generic MLIR passes the
/// tools offer.
inline void registerAllPasses() {
  quantization::registerPassesAndPipelines();
  codegen::registerCodegenPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();
}

} // namespace qatc

#endif // QATC_INITALL_H
