//===- qatc-opt.cpp - run qatc passes on MLIR or ONNX input ---------------===//
//
// MlirOptMain with only the dialects and passes qatc uses. Besides `.mlir`
// it reads `.onnx` and `.onnxtext` directly: the model is imported, handed
// to MlirOptMain as in-memory bytecode (which keeps locations and weight
// blobs without printing them), and then treated like any other input, so
// every MLIR debugging flag works on ONNX models too.
//
//===----------------------------------------------------------------------===//

#include "qatc/Frontend/ImportCLOptions.h"
#include "qatc/Frontend/OnnxImporter.h"
#include "qatc/InitAll.h"
#include "qatc/Support/Locations.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

static qatc::ImportCLOptions importOptions;

static bool isOnnxPath(llvm::StringRef path) {
  return path.ends_with(".onnx") || path.ends_with(".onnxtext") ||
         path.ends_with(".onnxtxt");
}

/// For ONNX input, print each op's location (its ONNX node name) unless the
/// user chose otherwise: that is what reading an imported model is for.
/// (--mlir-print-local-scope would print them inline, but it also drops the
/// weight blobs, so the output would not parse back.) Must run before
/// MlirOptMain builds its printing flags.
static void showNodeNamesByDefault() {
  auto &options = llvm::cl::getRegisteredOptions();
  auto it = options.find("mlir-print-debuginfo");
  if (it == options.end())
    return;
  auto *flag = static_cast<llvm::cl::opt<bool> *>(it->second);
  if (flag->getNumOccurrences() == 0)
    flag->setValue(true);
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  DialectRegistry registry;
  qatc::registerAllDialects(registry);
  qatc::registerAllPasses();

  auto [inputFilename, outputFilename] =
      registerAndParseCLIOptions(argc, argv, "qatc optimizer driver", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  if (isOnnxPath(inputFilename))
    showNodeNamesByDefault();

  std::unique_ptr<llvm::MemoryBuffer> buffer;
  // Holds the imported model's bytecode; the buffer refers to it.
  std::string bytes;
  if (isOnnxPath(inputFilename)) {
    qatc::ImportOptions options;
    if (std::string err = importOptions.get(options); !err.empty()) {
      llvm::errs() << "qatc-opt: " << err << "\n";
      return 1;
    }
    MLIRContext ctx(registry);
    qatc::OnnxDiagnosticHandler handler(&ctx, llvm::errs());
    OwningOpRef<ModuleOp> module =
        qatc::importOnnxFile(ctx, inputFilename, options);
    if (!module)
      return 1;
    llvm::raw_string_ostream os(bytes);
    if (failed(writeBytecodeToFile(*module, os))) {
      llvm::errs() << "qatc-opt: cannot serialize the imported module\n";
      return 1;
    }
    os.flush();
    buffer = llvm::MemoryBuffer::getMemBuffer(bytes, inputFilename,
                                              /*RequiresNullTerminator=*/false);
  } else {
    std::string errorMessage;
    buffer = openInputFile(inputFilename, &errorMessage);
    if (!buffer) {
      llvm::errs() << "qatc-opt: " << errorMessage << "\n";
      return 1;
    }
  }
  std::string errorMessage;
  auto output = openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << "qatc-opt: " << errorMessage << "\n";
    return 1;
  }
  if (failed(MlirOptMain(output->os(), std::move(buffer), registry, config)))
    return 1;
  output->keep();
  return 0;
}
