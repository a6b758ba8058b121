//===- Passes.h - qatc's code-generation passes -----------------*- C++ -*-===//
//
// The code-generation steps as passes for `qatc-opt` (generated from
// Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef QATC_CODEGEN_PASSES_H
#define QATC_CODEGEN_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace qatc::codegen {

#define GEN_PASS_DECL
#include "qatc/Codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "qatc/Codegen/Passes.h.inc"

} // namespace qatc::codegen

#endif // QATC_CODEGEN_PASSES_H
