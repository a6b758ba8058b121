//===- PrecisionRules.cpp - parse precision override files ----------------===//

#include "qatc/Quantization/PrecisionRules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Regex.h"

using namespace llvm;

bool qatc::quantization::parsePrecisionRules(StringRef text,
                                             std::vector<PrecisionRule> &rules,
                                             std::string &error) {
  rules.clear();
  SmallVector<StringRef> lines;
  text.split(lines, '\n');
  for (auto [i, raw] : llvm::enumerate(lines)) {
    unsigned lineNo = static_cast<unsigned>(i + 1);
    StringRef line = raw.split('#').first.trim();
    if (line.empty())
      continue;
    auto bad = [&](const Twine &why) {
      error = (Twine(lineNo) + ": " + why).str();
      return false;
    };
    // The precision is the last whitespace-separated word; the pattern is
    // everything before it.
    size_t split = line.find_last_of(" \t");
    StringRef pattern =
        split == StringRef::npos ? StringRef() : line.take_front(split).trim();
    StringRef precision =
        split == StringRef::npos ? line : line.drop_front(split + 1).trim();
    if (pattern.empty() || (precision != "fp32" && precision != "int8"))
      return bad("expected '<node-name regex> fp32|int8', got '" +
                 line.take_front(200) + "'");
    if (pattern.size() > kMaxPrecisionPatternLength)
      return bad("the pattern is longer than " +
                 Twine(kMaxPrecisionPatternLength) + " characters");
    std::string why;
    if (!Regex("^(" + pattern.str() + ")$").isValid(why))
      return bad("invalid regular expression '" + pattern.take_front(200) +
                 "': " + why);
    rules.push_back({pattern.str(), precision.str(), lineNo});
  }
  return true;
}
