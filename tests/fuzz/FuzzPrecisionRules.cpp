//===- FuzzPrecisionRules.cpp - libFuzzer target: precision overrides -----===//
//
// The --precision-override file parser; every accepted rule's regular
// expression then matches against a node name, as the pass does.
//
//===----------------------------------------------------------------------===//

#include "qatc/Quantization/PrecisionRules.h"

#include "llvm/Support/Regex.h"

#include <cstdlib>

using namespace qatc::quantization;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  std::vector<PrecisionRule> rules;
  std::string error;
  if (!parsePrecisionRules(text, rules, error)) {
    if (error.empty())
      std::abort();
    return 0;
  }
  for (const PrecisionRule &r : rules) {
    if (r.pattern.empty() || (r.precision != "fp32" && r.precision != "int8"))
      std::abort();
    llvm::Regex regex("^(" + r.pattern + ")$");
    regex.match("/layer1/layer1.0/conv1/Conv");
  }
  return 0;
}
