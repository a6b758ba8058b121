//===- ImportCLOptions.cpp - command-line options of the importer ---------===//

#include "qatc/Frontend/ImportCLOptions.h"

using namespace qatc;
namespace cl = llvm::cl;

ImportCLOptions::ImportCLOptions(cl::SubCommand &sub)
    : inputShapes("input-shape",
                  cl::desc("Pin a graph input with dynamic dimensions: "
                           "name=1x3x224x224 (repeatable)"),
                  cl::value_desc("name=dims"), cl::sub(sub)),
      freezeInputs("freeze-input",
                   cl::desc("Replace a graph input by the constant in a .npy "
                            "file, e.g. a shape or size input (repeatable)"),
                   cl::value_desc("name=file.npy"), cl::sub(sub)),
      allowUnsupported(
          "allow-unsupported-ops",
          cl::desc("Keep unsupported nodes as onnx.Unsupported instead of "
                   "failing"),
          cl::init(false), cl::sub(sub)) {}

std::string ImportCLOptions::get(ImportOptions &options) const {
  options.allowUnsupported = allowUnsupported;
  for (const std::string &spec : inputShapes)
    if (std::string err = parseInputShapeSpec(spec, options); !err.empty())
      return err;
  for (const std::string &spec : freezeInputs)
    if (std::string err = parseFreezeInputSpec(spec, options); !err.empty())
      return err;
  return "";
}
