//===- PrecisionOverride.cpp - force nodes to fp32 / require int8 ---------===//
//
// Users localise accuracy problems by keeping a layer in fp32, and guard
// performance by demanding that a layer runs int8 (TensorRT users ask for
// both: qdq-rules §8, asks 8 and 19). The file has one rule per line:
//
//   # comment
//   /model/head/.*     fp32
//   /layer1/.*/Conv    int8
//
// The regular expression must match a whole ONNX node name. Later rules win.
//
//===----------------------------------------------------------------------===//

#include "QuantUtils.h"
#include "qatc/Quantization/Passes.h"
#include "qatc/Quantization/PrecisionRules.h"
#include "qatc/Support/Locations.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

namespace qatc::quantization {
#define GEN_PASS_DEF_QATPRECISIONOVERRIDE
#include "qatc/Quantization/Passes.h.inc"
} // namespace qatc::quantization

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

namespace {

struct Rule {
  std::string pattern;
  llvm::Regex regex;
  std::string precision;
  unsigned line;
  unsigned matches = 0;
};

struct QatPrecisionOverridePass
    : public qatc::quantization::impl::QatPrecisionOverrideBase<
          QatPrecisionOverridePass> {
  using QatPrecisionOverrideBase::QatPrecisionOverrideBase;

  void runOnOperation() override {
    if (file.empty())
      return;
    ModuleOp module = getOperation();
    auto buffer = llvm::MemoryBuffer::getFile(file);
    if (!buffer) {
      emitError(module.getLoc())
          << "cannot read the precision override file '" << file
          << "': " << buffer.getError().message();
      return signalPassFailure();
    }
    std::vector<PrecisionRule> parsed;
    std::string error;
    if (!parsePrecisionRules((*buffer)->getBuffer(), parsed, error)) {
      emitError(module.getLoc()) << file << ":" << error;
      return signalPassFailure();
    }
    std::vector<Rule> rules;
    for (PrecisionRule &r : parsed)
      rules.push_back({r.pattern, llvm::Regex("^(" + r.pattern + ")$"),
                       r.precision, r.line});
    module.walk([&](Operation *op) {
      if (!isa<onnx::OnnxDialect>(op->getDialect()) ||
          isa<onnx::ConstantOp>(op))
        return;
      std::string name = getNodeName(op);
      if (name.empty())
        return;
      for (Rule &rule : rules)
        if (rule.regex.match(name)) {
          op->setAttr(kPrecisionAttr,
                      StringAttr::get(op->getContext(), rule.precision));
          ++rule.matches;
        }
    });
    for (const Rule &rule : rules)
      if (!rule.matches)
        emitWarning(module.getLoc()) << file << ":" << rule.line << ": '"
                                     << rule.pattern << "' matches no node";
  }
};

} // namespace
