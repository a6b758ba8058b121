//===- ObjectEmitter.cpp - kernels module to a shared object --------------===//
//
// scf/arith/vector/math/func -> LLVM dialect -> LLVM IR (-O3 for the
// target) -> object file -> shared object. The link step runs the system
// linker (`ld`, from binutils, which every machine with a C compiler has):
// the runtime loads the code with dlopen.
//
//===----------------------------------------------------------------------===//

#include "qatc/Codegen/Codegen.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;
using namespace qatc::codegen;

namespace {

std::unique_ptr<llvm::TargetMachine> makeTargetMachine(const Target &t,
                                                       std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  // The AMX kernels' tile instructions are inline assembly.
  llvm::InitializeNativeTargetAsmParser();
  std::string triple = llvm::sys::getDefaultTargetTriple();
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  llvm::TargetOptions options;
  auto tm = std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, t.cpu, t.features, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!tm)
    error = "cannot create an LLVM target machine for " + triple;
  return tm;
}

/// Runs LLVM's code generator on `module` into `out`.
LogicalResult emitFile(llvm::TargetMachine &tm, llvm::Module &module,
                       llvm::CodeGenFileType type, llvm::SmallString<0> &out,
                       std::string &error) {
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager cg;
  if (tm.addPassesToEmitFile(cg, os, nullptr, type)) {
    error = "this LLVM cannot emit this kind of file for the target";
    return failure();
  }
  cg.run(module);
  return success();
}

/// Links object code into a shared object with the system linker.
LogicalResult linkSharedObject(llvm::StringRef obj, std::vector<uint8_t> &so,
                               std::string &error) {
  llvm::SmallString<128> objPath, soPath;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("qatc-kernels", "o", fd, objPath) ||
      llvm::sys::fs::createTemporaryFile("qatc-kernels", "so", soPath)) {
    error = "cannot create temporary files for linking";
    return failure();
  }
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << obj;
  }
  auto cleanup = [&] {
    llvm::sys::fs::remove(objPath);
    llvm::sys::fs::remove(soPath);
  };
  auto ld = llvm::sys::findProgramByName("ld");
  if (!ld) {
    cleanup();
    error = "qatc needs the system linker 'ld' (Debian package binutils) to "
            "link plan code";
    return failure();
  }
  std::string errMsg;
  llvm::SmallVector<llvm::StringRef> args = {
      *ld,  "-shared",     "--hash-style=gnu",
      "-z", "noexecstack", "--build-id=none",
      "-o", soPath,        objPath};
  int rc =
      llvm::sys::ExecuteAndWait(*ld, args, std::nullopt, {}, 0, 0, &errMsg);
  if (rc != 0) {
    cleanup();
    error = "linking the plan's code failed (ld exit " + std::to_string(rc) +
            (errMsg.empty() ? "" : ": " + errMsg) + ")";
    return failure();
  }
  auto buf = llvm::MemoryBuffer::getFile(soPath);
  cleanup();
  if (!buf) {
    error = "cannot read the linked code";
    return failure();
  }
  so.assign((*buf)->getBufferStart(), (*buf)->getBufferEnd());
  return success();
}

/// Defines the code record and the layer symbol list (plan::CodeRecordWord):
/// what the loader holds the header and manifest against.
void addCodeRecord(llvm::Module &module, const Target &t,
                   const qatc::plan::Manifest &manifest,
                   uint64_t weightsBytes) {
  using namespace qatc::plan;
  llvm::LLVMContext &ctx = module.getContext();
  std::string names;
  for (const LayerDesc &l : manifest.layers)
    names += l.symbol + '\0';
  std::vector<uint64_t> words(kCodeRecordWords, 0);
  words[kRecMagic] = kCodeRecordMagic;
  words[kRecFormatVersion] = kFormatVersion;
  words[kRecArenaBytes] = manifest.arenaBytes;
  words[kRecWeightsBytes] = weightsBytes;
  words[kRecCpuFeatures] = t.requiredFeatures;
  words[kRecLayerCount] = manifest.layers.size();
  words[kRecLayersBytes] = names.size();
  words[kRecInterfaceDigest] = interfaceDigest(manifest);
  auto define = [&](llvm::Constant *init, const char *symbol) {
    auto *g = new llvm::GlobalVariable(
        module, init->getType(),
        /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage, init, symbol);
    g->setAlignment(llvm::Align(8));
  };
  define(llvm::ConstantDataArray::get(ctx, llvm::ArrayRef<uint64_t>(words)),
         kCodeRecordSymbol);
  define(llvm::ConstantDataArray::getString(ctx, names, /*AddNull=*/false),
         kCodeLayersSymbol);
}

} // namespace

LogicalResult qatc::codegen::lowerKernelsToLLVM(ModuleOp kernels,
                                                std::string &error) {
  MLIRContext *ctx = kernels.getContext();
  // exp, erf, tanh as polynomials LLVM can vectorize (libm calls would be
  // scalar and tie the plan's code to the host's libm).
  {
    RewritePatternSet patterns(ctx);
    // tan and the hyperbolic functions in exp, log, sin and cos first.
    populateExpandTanPattern(patterns);
    populateExpandSinhPattern(patterns);
    populateExpandCoshPattern(patterns);
    populateExpandAsinhPattern(patterns);
    populateExpandAcoshPattern(patterns);
    populateExpandAtanhPattern(patterns);
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(applyPatternsAndFoldGreedily(kernels, std::move(patterns)))) {
      error = "approximating the kernels' math functions failed";
      return failure();
    }
  }
  PassManager pm(ctx);
  // Vector before SCF: convert-vector-to-llvm simplifies regions with
  // block merging, which in MLIR 19 can give a merged block's operands the
  // wrong arguments (a depthwise kernel's i1 load mask became an i32
  // vector). With the kernels still structured, no two blocks share a region.
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  if (failed(pm.run(kernels))) {
    error = "lowering the kernels to the LLVM dialect failed";
    return failure();
  }
  return success();
}

LogicalResult qatc::codegen::compileKernels(ModuleOp kernels, const Target &t,
                                            KernelOutput what,
                                            const plan::Manifest &manifest,
                                            uint64_t weightsBytes,
                                            std::vector<uint8_t> &bytes,
                                            std::string &error) {
  MLIRContext *ctx = kernels.getContext();
  if (failed(lowerKernelsToLLVM(kernels, error)))
    return failure();
  registerBuiltinDialectTranslation(*ctx);
  registerLLVMDialectTranslation(*ctx);
  llvm::LLVMContext llvmCtx;
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(kernels, llvmCtx, "qatc_plan");
  if (!module) {
    error = "translating the kernels to LLVM IR failed";
    return failure();
  }
  std::unique_ptr<llvm::TargetMachine> tm = makeTargetMachine(t, error);
  if (!tm)
    return failure();
  module->setDataLayout(tm->createDataLayout());
  module->setTargetTriple(tm->getTargetTriple().str());
  for (llvm::Function &f : *module) {
    if (f.isDeclaration())
      continue;
    f.addFnAttr("target-cpu", t.cpu);
    if (!t.features.empty())
      f.addFnAttr("target-features", t.features);
    if (!t.tuneCpu.empty())
      f.addFnAttr("tune-cpu", t.tuneCpu);
    f.addFnAttr(llvm::Attribute::NoUnwind);
    // Layers get raw pointers into one arena; never inline one into another.
    f.addFnAttr(llvm::Attribute::NoInline);
    // Spill slots of 64-byte vectors aligned to 64: without the attribute
    // the register allocator has already given the frame pointer away when
    // it spills, and a zmm spill slot gets the incoming 16-byte alignment,
    // so whether a layer's spills split cache lines depended on its
    // caller's stack depth. On Zen 5 the inner loop of the wide int8
    // depthwise kernel (3x3, 2x2 pixels x 64 channels, 12 zmm spills and
    // reloads per iteration) took 64-75 cycles with its spill slots off by
    // 16 bytes and 51 aligned, looped alone. Plans: ResNet-50 int8 0.991,
    // MobileNetV2 0.995, EfficientNet-B0 0.999 of their time (medians of
    // 7-9 paired rounds): their spills happened to be aligned there.
    f.addFnAttr("stackrealign");
  }

  addCodeRecord(*module, t, manifest, weightsBytes);

  // -O3 on the module.
  {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(tm.get());
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm =
        pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    mpm.run(*module, mam);
  }
  llvm::SmallString<0> buf;
  switch (what) {
  case KernelOutput::LLVMIR: {
    llvm::raw_svector_ostream os(buf);
    module->print(os, nullptr);
    break;
  }
  case KernelOutput::Assembly:
    if (failed(emitFile(*tm, *module, llvm::CodeGenFileType::AssemblyFile, buf,
                        error)))
      return failure();
    break;
  case KernelOutput::SharedObject:
    if (failed(emitFile(*tm, *module, llvm::CodeGenFileType::ObjectFile, buf,
                        error)))
      return failure();
    return linkSharedObject(buf.str(), bytes, error);
  }
  bytes.assign(buf.begin(), buf.end());
  return success();
}
