//===- Codegen.h - qat/onnx graph to a plan -------------------*- C++ -*-===//
//
// The back end: lowers a function after the `qat-lower` pipeline (int8 qat
// ops, fp32 onnx ops) to one MLIR function per layer (scf / arith / vector /
// math / llvm, the int8 micro-kernels calling vpdpbusd through one helper),
// packs the weights, plans the activation arena, compiles the functions with
// LLVM into a shared object and writes the plan file.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_CODEGEN_CODEGEN_H
#define QATC_CODEGEN_CODEGEN_H

#include "qatc/Runtime/PlanFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <string>
#include <vector>

namespace qatc::codegen {

/// The instruction set the int8 kernels are written for. AMX is AVX-512
/// VNNI plus AMX tiles for the dense int8 products.
enum class Isa { AMX, AVX512VNNI, AVXVNNI, AVX2, Generic };

/// The ISA has AVX-512 (and VNNI) for everything that is not a tile product.
inline bool hasAvx512(Isa isa) {
  return isa == Isa::AMX || isa == Isa::AVX512VNNI;
}

/// What the code is compiled for.
struct Target {
  Isa isa = Isa::Generic;
  std::string cpu;      ///< LLVM CPU the code may use (a feature baseline)
  std::string tuneCpu;  ///< LLVM CPU to schedule for
  std::string features; ///< extra LLVM features ("+avx512vnni,...")
  uint64_t requiredFeatures = 0; ///< plan::CpuFeature bits
  std::string name;              ///< "avx512vnni", "avxvnni", "avx2", "generic"
  /// Quotients by the output scale as a multiplication and two FMAs
  /// (ExactQuotient.h, the same integers) and sigmoids by vrcp14ps and a
  /// Newton step, instead of vdivps: on AMX, and for `host` on an Intel CPU
  /// with AVX-512 (vdivps zmm issues once every 10 cycles there; Zen 4
  /// divides faster than the FMA sequence).
  bool reciprocalDivision = false;
};

/// Resolves `--target-cpu`: "host" (the default), "amx", "avx512vnni",
/// "avxvnni", "avx2" or "generic". Returns false with `error` set on an unknown
/// name.
bool resolveTarget(const std::string &name, Target &target, std::string &error);

/// The targets of a multi-path plan, best first: every x86-64 code path.
inline constexpr const char *kMultiTargetName = "x86-64-multi";
/// Resolves a `--target-cpu` that may name several code paths: one target,
/// a comma-separated list ("avx512vnni,avx2") or x86-64-multi (amx,
/// avx512vnni, avxvnni, avx2, generic). Paths are kept in the order given (the
/// runtime takes the first one the CPU runs); a target named twice is an error.
bool resolveTargets(const std::string &name, std::vector<Target> &targets,
                    std::string &error);

/// The lowered graph: the layer functions, the packed weights and the
/// manifest (offsets into the arena and weights are final).
struct LoweredGraph {
  mlir::OwningOpRef<mlir::ModuleOp> kernels;
  std::vector<uint8_t> weights;
  plan::Manifest manifest;
};

/// True when `func` computes on f64 tensors. Plans hold them as f32 (the
/// model's f64 inputs and outputs convert at the boundary); `qatc compile`
/// warns.
bool computesF64(mlir::func::FuncOp func);

/// Lowers `func` (after qat-lower). Errors are emitted at the op's location
/// (its ONNX node) and make it return failure.
mlir::LogicalResult lowerGraph(mlir::func::FuncOp func, const Target &target,
                               LoweredGraph &out);

/// Lowers the kernels module to the LLVM dialect in place (math functions
/// as polynomials, then scf/vector/math/arith/cf/func to LLVM): the step
/// before LLVM, also the `qat-kernels-to-llvm` pass.
mlir::LogicalResult lowerKernelsToLLVM(mlir::ModuleOp kernels,
                                       std::string &error);

/// What compileKernels produces.
enum class KernelOutput { SharedObject, LLVMIR, Assembly };

/// Compiles the kernels module with LLVM (-O3 for the target) into `bytes`:
/// a shared object (linked by the system `ld`), or the LLVM IR or assembly
/// text. The code also defines the code record (plan::kCodeRecordSymbol)
/// of `manifest` and a weights segment of `weightsBytes`.
mlir::LogicalResult
compileKernels(mlir::ModuleOp kernels, const Target &target, KernelOutput what,
               const plan::Manifest &manifest, uint64_t weightsBytes,
               std::vector<uint8_t> &bytes, std::string &error);

/// Serializes a plan (header, manifest, weights, code) into bytes.
std::vector<uint8_t> writePlan(const plan::Manifest &manifest,
                               const std::vector<uint8_t> &weights,
                               const std::vector<uint8_t> &code,
                               const Target &target);

/// The compiler's version string recorded in plans.
const char *compilerVersion();

} // namespace qatc::codegen

#endif // QATC_CODEGEN_CODEGEN_H
