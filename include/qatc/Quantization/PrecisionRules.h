//===- PrecisionRules.h - precision override files --------------*- C++ -*-===//
//
// The file `--precision-override` reads: one rule per line,
// `<node-name regex> fp32|int8`, `#` comments, blank lines skipped. The
// parser is plain LLVM Support (no MLIR), so that it can be fuzzed alone.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_QUANTIZATION_PRECISIONRULES_H
#define QATC_QUANTIZATION_PRECISIONRULES_H

#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace qatc::quantization {

/// One line of a precision override file.
struct PrecisionRule {
  std::string pattern;   ///< matches a whole ONNX node name
  std::string precision; ///< "fp32" or "int8"
  unsigned line = 0;     ///< 1-based
};

/// The longest pattern accepted (a regex engine's time and memory grow
/// with the pattern; real node-name patterns are short).
inline constexpr size_t kMaxPrecisionPatternLength = 1024;

/// Parses the text of a precision override file into `rules`, in file
/// order (later rules win). On failure returns false with `error` set to
/// "<line>: <why>", quoting the line: a line without a pattern, a precision
/// other than fp32/int8, a pattern that is too long or not a valid regular
/// expression.
bool parsePrecisionRules(llvm::StringRef text,
                         std::vector<PrecisionRule> &rules, std::string &error);

} // namespace qatc::quantization

#endif // QATC_QUANTIZATION_PRECISIONRULES_H
