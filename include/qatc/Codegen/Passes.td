//===- Passes.td - qatc's code-generation passes -----------*- tablegen -*-===//
//
// The lowering steps of `qatc compile` after the quantization pipeline, as
// passes `qatc-opt` can run one at a time to print each stage:
//
//   qatc-opt m.onnx --qat-lower --qat-layer-functions      (scf/vector)
//   qatc-opt m.onnx --qat-lower --qat-layer-functions --qat-kernels-to-llvm
//
// `qatc compile` runs the same code (lowerGraph, lowerKernelsToLLVM), then
// LLVM, and writes the plan.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_CODEGEN_PASSES_TD
#define QATC_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def QatLayerFunctions : Pass<"qat-layer-functions", "::mlir::ModuleOp"> {
  let summary = "Lower the graph (after qat-lower) to one function per layer";
  let description = [{
    Replaces the module's graph function by the layer functions
    `qatc_layer_<i>(arena, weights, tid, nthreads)` that `qatc compile`
    emits: scf/arith/vector/math plus llvm pointer ops, every shape and
    arena/weights offset a constant, each op located at its ONNX node. The
    packed weights and the manifest are computed but not kept (they go into
    the plan; see `qatc inspect`).
  }];
  let options = [
    Option<"targetCpu", "target-cpu", "std::string", "\"host\"",
           "host, amx, avx512vnni, avxvnni, avx2 or generic">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect", "::mlir::math::MathDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::func::FuncDialect"
  ];
}

def QatKernelsToLLVM : Pass<"qat-kernels-to-llvm", "::mlir::ModuleOp"> {
  let summary = "Lower the layer functions to the LLVM dialect";
  let description = [{
    What `qatc compile` does before LLVM: exp/erf/tanh/log become
    polynomials, then scf, vector, math, arith, cf and func convert to the
    LLVM dialect.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // QATC_CODEGEN_PASSES_TD
