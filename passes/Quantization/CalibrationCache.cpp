//===- CalibrationCache.cpp - TensorRT calibration cache files ------------===//
//
// See CalibrationCache.h for the format and where its rules come from.
//
//===----------------------------------------------------------------------===//

#include "qatc/Quantization/CalibrationCache.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_map>

using namespace qatc;
using namespace qatc::calib;

namespace {

/// Long lines are cut in messages.
constexpr size_t kMaxQuoted = 80;

std::string quote(std::string_view text) {
  if (text.size() <= kMaxQuoted)
    return "'" + std::string(text) + "'";
  return "'" + std::string(text.substr(0, kMaxQuoted)) + "...'";
}

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view trimRight(std::string_view text) {
  while (!text.empty() && isBlank(text.back()))
    text.remove_suffix(1);
  return text;
}

/// "" if `header` is "TRT-<digits>-<algorithm>", else what is wrong.
std::string checkHeader(std::string_view header) {
  std::string expected = "malformed header " + quote(header) +
                         ", expected 'TRT-<version>-<algorithm>' such as "
                         "'TRT-8601-EntropyCalibration2'";
  if (header.substr(0, 4) != "TRT-")
    return expected;
  size_t pos = 4;
  while (pos < header.size() && header[pos] >= '0' && header[pos] <= '9')
    ++pos;
  if (pos == 4 || pos == header.size() || header[pos] != '-' ||
      pos + 1 == header.size())
    return expected;
  for (char c : header.substr(pos + 1)) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || c == '_';
    if (!ok)
      return expected;
  }
  return "";
}

/// "" if `scale` may be stored, else what is wrong with it.
std::string checkScale(float scale, const CacheParseOptions &options) {
  if (std::isnan(scale))
    return "is NaN";
  if (std::isinf(scale))
    return "is infinite";
  if (std::signbit(scale))
    return "is not positive";
  if (scale == 0 && !options.allowZeroScale)
    return "is zero";
  return "";
}

/// "" if `name` can be written on one line and read back.
std::string checkName(std::string_view name) {
  if (name.empty())
    return "empty tensor name";
  if (name.find_first_of("\r\n") != std::string_view::npos)
    return "tensor name " + quote(name) + " contains a line break";
  return "";
}

uint32_t bitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

float floatOf(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/// 1 to 8 hex digits, either case; nothing else (no "0x", no sign).
bool parseHex(std::string_view text, uint32_t &bits) {
  if (text.empty() || text.size() > 8)
    return false;
  uint32_t value = 0;
  for (char c : text) {
    uint32_t digit;
    if (c >= '0' && c <= '9')
      digit = c - '0';
    else if (c >= 'a' && c <= 'f')
      digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      digit = c - 'A' + 10;
    else
      return false;
    value = value << 4 | digit;
  }
  bits = value;
  return true;
}

std::string lineError(size_t line, const std::string &message) {
  return "line " + std::to_string(line) + ": " + message;
}

} // namespace

std::optional<CalibrationCache>
CalibrationCache::readFile(const std::string &path, std::string &error,
                           const CacheParseOptions &options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot be read";
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto cache = parse(text.str(), error, options);
  if (!cache)
    error = path + ": " + error;
  return cache;
}

std::optional<CalibrationCache>
CalibrationCache::parse(std::string_view text, std::string &error,
                        const CacheParseOptions &options) {
  CalibrationCache cache;
  // First line of each tensor name, for duplicate messages.
  std::unordered_map<std::string, size_t> seen;
  bool haveHeader = false;
  size_t lineNo = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view line = trimRight(text.substr(pos, end - pos));
    pos = end + 1;
    ++lineNo;
    if (line.empty())
      continue;

    if (!haveHeader) {
      std::string problem = checkHeader(line);
      if (!problem.empty()) {
        error = lineError(lineNo, problem);
        return std::nullopt;
      }
      cache.header = std::string(line);
      haveHeader = true;
      continue;
    }

    // The last ": ": names may contain both characters, a hex number never.
    size_t sep = line.rfind(": ");
    if (sep == std::string_view::npos) {
      error = lineError(lineNo, "expected '<tensor name>: <hex scale>', got " +
                                    quote(line));
      return std::nullopt;
    }
    std::string_view name = line.substr(0, sep);
    std::string_view hex = line.substr(sep + 2);
    std::string problem = checkName(name);
    if (!problem.empty()) {
      error = lineError(lineNo, problem + " in " + quote(line));
      return std::nullopt;
    }
    uint32_t bits;
    if (!parseHex(hex, bits)) {
      error = lineError(lineNo, "malformed hex scale " + quote(hex) +
                                    " for tensor " + quote(name) +
                                    " (expected 1 to 8 hex digits)");
      return std::nullopt;
    }
    float scale = floatOf(bits);
    problem = checkScale(scale, options);
    if (!problem.empty()) {
      error = lineError(lineNo, "scale " + quote(hex) + " of tensor " +
                                    quote(name) + " " + problem);
      return std::nullopt;
    }
    auto [it, inserted] = seen.emplace(std::string(name), lineNo);
    if (!inserted) {
      error = lineError(lineNo, "duplicate tensor name " + quote(name) +
                                    " (first on line " +
                                    std::to_string(it->second) + ")");
      return std::nullopt;
    }
    cache.entries.push_back({std::string(name), scale});
  }
  if (!haveHeader) {
    error = lineError(1, "empty file, expected a header such as "
                         "'TRT-8601-EntropyCalibration2'");
    return std::nullopt;
  }
  return cache;
}

std::string CalibrationCache::write() const {
  std::string out = header + "\n";
  for (const Entry &entry : entries) {
    // TensorRT's form: lower case, no leading zeros (a zero scale is "0").
    char hex[8];
    auto result =
        std::to_chars(hex, hex + sizeof(hex), bitsOf(entry.scale), 16);
    out += entry.name;
    out += ": ";
    out.append(hex, result.ptr);
    out += '\n';
  }
  return out;
}

std::string CalibrationCache::validate(const CacheParseOptions &options) const {
  std::string problem = checkHeader(header);
  if (!problem.empty())
    return problem;
  std::unordered_map<std::string_view, size_t> seen;
  for (const Entry &entry : entries) {
    problem = checkName(entry.name);
    if (!problem.empty())
      return problem;
    problem = checkScale(entry.scale, options);
    if (!problem.empty())
      return "scale of tensor " + quote(entry.name) + " " + problem;
    if (!seen.emplace(entry.name, 0).second)
      return "duplicate tensor name " + quote(entry.name);
  }
  return "";
}

const CalibrationCache::Entry *
CalibrationCache::find(std::string_view name) const {
  for (const Entry &entry : entries)
    if (entry.name == name)
      return &entry;
  return nullptr;
}

std::string CalibrationCache::makeHeader(unsigned major, unsigned minor,
                                         unsigned patch,
                                         std::string_view algorithm) {
  // NV_TENSORRT_VERSION: the major version's factor grew from 1000 to
  // 10000 with TensorRT 10 (10.3.0 is 100300).
  unsigned version = major * (major >= 10 ? 10000 : 1000) + minor * 100 + patch;
  return "TRT-" + std::to_string(version) + "-" + std::string(algorithm);
}
