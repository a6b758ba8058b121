//===- PlanFormat.cpp - plan header, checksum and manifest text -----------===//
//
// Shared by the plan writer (compiler) and the runtime; plain C++ only.
//
//===----------------------------------------------------------------------===//

#include "qatc/Runtime/PlanFormat.h"

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace qatc::plan {

namespace {

struct FeatureName {
  uint64_t bit;
  const char *name;
};
constexpr FeatureName kFeatureNames[] = {
    {kFeatAVX2, "avx2"},         {kFeatFMA, "fma"},
    {kFeatAVX512F, "avx512f"},   {kFeatAVX512BW, "avx512bw"},
    {kFeatAVX512VL, "avx512vl"}, {kFeatAVX512VNNI, "avx512vnni"},
    {kFeatAVXVNNI, "avxvnni"},   {kFeatAVX512DQ, "avx512dq"},
    {kFeatAMXTILE, "amx-tile"},  {kFeatAMXINT8, "amx-int8"},
};

uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

bool decode(const std::string &s, std::string &out) {
  out.clear();
  if (s == "%")
    return true;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size())
      return false;
    if (!std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2])))
      return false;
    char hex[3] = {s[i + 1], s[i + 2], 0};
    long v = std::strtol(hex, nullptr, 16);
    out += static_cast<char>(v);
    i += 2;
  }
  return true;
}

std::string joinInts(const std::vector<int> &v) {
  if (v.empty())
    return "-";
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

bool parseInt(const std::string &s, int64_t &v) {
  if (s.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end)
    return false;
  v = x;
  return true;
}

bool parseU64(const std::string &s, uint64_t &v) {
  int64_t x;
  if (!parseInt(s, x) || x < 0)
    return false;
  v = static_cast<uint64_t>(x);
  return true;
}

bool parseDouble(const std::string &s, double &v) {
  if (s.empty())
    return false;
  char *end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return !*end && std::isfinite(v);
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

bool parseHex16(const std::string &s, uint64_t &v) {
  if (s.size() != 16)
    return false;
  v = 0;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) ||
        std::isupper(static_cast<unsigned char>(c)))
      return false;
    v = v << 4 |
        static_cast<uint64_t>(std::isdigit(c) ? c - '0' : c - 'a' + 10);
  }
  return true;
}

/// a * b into `out` unless it exceeds `limit` (or overflows).
bool mulWithin(int64_t a, int64_t b, int64_t limit, int64_t &out) {
  return !__builtin_mul_overflow(a, b, &out) && out >= 0 && out <= limit;
}

/// The largest element count a plan tensor may have (2^40: far beyond any
/// arena, small enough that byte counts never overflow).
constexpr int64_t kMaxElements = int64_t(1) << 40;

bool parseShape(const std::string &s, std::vector<int64_t> &shape) {
  shape.clear();
  if (s == "scalar")
    return true;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    int64_t d;
    if (!parseInt(part, d) || d < 0 || d > (int64_t(1) << 40))
      return false;
    shape.push_back(d);
  }
  return !shape.empty();
}

bool parseIntList(const std::string &s, size_t limit, std::vector<int> &v) {
  v.clear();
  if (s == "-")
    return true;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    int64_t x;
    if (!parseInt(part, x) || x < 0 || static_cast<size_t>(x) >= limit)
      return false;
    v.push_back(static_cast<int>(x));
  }
  return true;
}

} // namespace

std::string encodeToken(const std::string &s) {
  if (s.empty())
    return "%";
  std::string out;
  for (unsigned char c : s) {
    if (c <= ' ' || c == '%' || c >= 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

std::string featureNames(uint64_t mask) {
  std::string s;
  for (const FeatureName &f : kFeatureNames)
    if (mask & f.bit) {
      s += (s.empty() ? "" : " ") + std::string(f.name);
      mask &= ~f.bit;
    }
  // Bits of a newer format this runtime does not know.
  for (int b = 0; b < 64; ++b)
    if (mask & (uint64_t(1) << b))
      s += (s.empty() ? "" : " ") + ("feature-bit-" + std::to_string(b));
  return s.empty() ? "none" : s;
}

uint64_t hostFeatures() {
  uint64_t m = 0;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2"))
    m |= kFeatAVX2;
  if (__builtin_cpu_supports("fma"))
    m |= kFeatFMA;
  if (__builtin_cpu_supports("avx512f"))
    m |= kFeatAVX512F;
  if (__builtin_cpu_supports("avx512bw"))
    m |= kFeatAVX512BW;
  if (__builtin_cpu_supports("avx512vl"))
    m |= kFeatAVX512VL;
  if (__builtin_cpu_supports("avx512dq"))
    m |= kFeatAVX512DQ;
  if (__builtin_cpu_supports("avx512vnni"))
    m |= kFeatAVX512VNNI;
  // AVX-VNNI (VEX-encoded vpdpbusd): CPUID leaf 7 subleaf 1, EAX bit 4.
  unsigned a = 0, b = 0, c = 0, d = 0;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
  if (a & (1u << 4))
    m |= kFeatAVXVNNI;
  // The CPU's AMX, where this process may use it.
  if (amxUnavailableReason().empty())
    m |= kFeatAMXTILE | kFeatAMXINT8;
#endif
  return m;
}

#if defined(__linux__) && defined(__x86_64__)
static bool cpuHasAmx() {
  // CPUID leaf 7 subleaf 0: EDX bit 24 AMX-TILE, bit 25 AMX-INT8.
  unsigned a = 0, b = 0, c = 0, d = 0;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  return (d & (1u << 24)) && (d & (1u << 25));
}
#endif

std::string amxUnavailableReason() {
#if defined(__linux__) && defined(__x86_64__)
  // Asked once per process: Linux grants the tile data (XFEATURE 18) to the
  // whole process, and every thread made after may use it.
  static const std::string reason = [] {
    if (!cpuHasAmx())
      return std::string("this CPU has no AMX");
    unsigned a = 0, b = 0, c = 0, d = 0;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
    if (!(c & (1u << 27))) // OSXSAVE
      return std::string("the OS does not enable XSAVE");
    unsigned lo = 0, hi = 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    // XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA).
    if ((lo & (3u << 17)) != (3u << 17))
      return std::string("the OS does not save AMX tile state (XCR0)");
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
      return "Linux refused this process the AMX tile data "
             "(arch_prctl(ARCH_REQ_XCOMP_PERM): " +
             std::string(std::strerror(errno)) + ")";
    return std::string();
  }();
  return reason;
#else
  return "AMX plans run on Linux x86-64 only";
#endif
}

uint64_t checksum(const uint8_t *data, size_t size, size_t skipOffset,
                  size_t skipSize) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ size;
  auto byteAt = [&](size_t i) -> uint8_t {
    return (i >= skipOffset && i < skipOffset + skipSize) ? 0 : data[i];
  };
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    if (i + 8 <= skipOffset || i >= skipOffset + skipSize) {
      std::memcpy(&w, data + i, 8);
    } else {
      w = 0;
      for (size_t k = 0; k < 8; ++k)
        w |= uint64_t(byteAt(i + k)) << (8 * k);
    }
    h = (h ^ w) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  for (size_t k = 0; i + k < size; ++k)
    tail |= uint64_t(byteAt(i + k)) << (8 * k);
  return mix(h ^ tail);
}

const char *elemTypeName(ElemType t) {
  switch (t) {
  case ElemType::F32:
    return "f32";
  case ElemType::I8:
    return "i8";
  case ElemType::U8:
    return "u8";
  case ElemType::I32:
    return "i32";
  case ElemType::I64:
    return "i64";
  case ElemType::Bool:
    return "bool";
  case ElemType::I16:
    return "i16";
  case ElemType::U16:
    return "u16";
  case ElemType::U32:
    return "u32";
  case ElemType::F64:
    return "f64";
  }
  return "?";
}

bool parseElemType(const std::string &s, ElemType &t) {
  for (ElemType c : {ElemType::F32, ElemType::I8, ElemType::U8, ElemType::I32,
                     ElemType::I64, ElemType::Bool, ElemType::I16,
                     ElemType::U16, ElemType::U32, ElemType::F64})
    if (s == elemTypeName(c)) {
      t = c;
      return true;
    }
  return false;
}

size_t elemSize(ElemType t) {
  switch (t) {
  case ElemType::F32:
  case ElemType::I32:
  case ElemType::U32:
    return 4;
  case ElemType::I16:
  case ElemType::U16:
    return 2;
  case ElemType::I8:
  case ElemType::U8:
  case ElemType::Bool:
    return 1;
  case ElemType::I64:
  case ElemType::F64:
    return 8;
  }
  return 1;
}

int64_t TensorDesc::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t TensorDesc::storedElements() const {
  if (layout != Layout::NHWC || shape.size() < 2)
    return numElements();
  return numElements() / (shape[1] ? shape[1] : 1) * channelStride;
}

uint64_t codeDigest(const uint8_t *code, size_t size) {
  // The file checksum's hash, seeded differently.
  return checksum(code, size, 0, 0) ^ 0x636f646564696765ULL;
}

std::string tensorRecord(const TensorDesc &t) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", t.scale);
  return encodeToken(t.name) + " " + elemTypeName(t.type) + " " +
         shapeText(t.shape) + " " +
         (t.layout == Layout::NHWC ? "nhwc" : "plain") + " " +
         std::to_string(t.channelStride) + " " + std::to_string(t.offset) +
         " " + std::to_string(t.bytes) + " " + (t.quantized ? "q" : "f") + " " +
         buf + " " + std::to_string(t.zeroPoint) + " " +
         std::to_string(t.storedOffset) + " " + (t.isSigned ? "s" : "u");
}

uint64_t interfaceDigest(const Manifest &m) {
  std::string text;
  for (int i : m.inputs)
    text += "input " + tensorRecord(m.tensors[i]) + "\n";
  for (int i : m.outputs)
    text += "output " + tensorRecord(m.tensors[i]) + "\n";
  return checksum(reinterpret_cast<const uint8_t *>(text.data()), text.size(),
                  0, 0);
}

std::string writeManifest(const Manifest &m) {
  std::string out = "qatc-plan-manifest " + std::to_string(kFormatVersion) +
                    "\ncompiler " + encodeToken(m.compiler) + "\ntarget " +
                    encodeToken(m.target) + "\ncode " + hex16(m.codeDigest) +
                    "\narena " + std::to_string(m.arenaBytes) + "\n";
  for (size_t i = 0; i < m.tensors.size(); ++i)
    out +=
        "tensor " + std::to_string(i) + " " + tensorRecord(m.tensors[i]) + "\n";
  for (int i : m.inputs)
    out += "input " + std::to_string(i) + "\n";
  for (int i : m.outputs)
    out += "output " + std::to_string(i) + "\n";
  for (const LayerDesc &l : m.layers)
    out += "layer " + encodeToken(l.symbol) + " " + encodeToken(l.node) + " " +
           encodeToken(l.opType) + " " + encodeToken(l.precision) + " " +
           encodeToken(l.kernel) + " " + (l.parallel ? "1" : "0") + " " +
           (l.sync ? "1" : "0") + " " + std::to_string(l.macs) + " " +
           joinInts(l.inputs) + " " + joinInts(l.outputs) + "\n";
  return out;
}

namespace {

/// Why tensor `d` cannot be what the manifest says, or "".
std::string checkTensor(const TensorDesc &d, uint64_t arenaBytes) {
  int64_t n = 1;
  for (int64_t dim : d.shape)
    if (!mulWithin(n, dim, kMaxElements, n))
      return "tensor '" + d.name + "' has too many elements";
  if (d.layout == Layout::NHWC) {
    // Stored as [N][H][W][channelStride] (rank 4) or [M][channelStride].
    if ((d.shape.size() != 4 && d.shape.size() != 2) ||
        d.channelStride < d.shape[1] || d.channelStride > kMaxElements)
      return "bad NHWC tensor '" + d.name + "'";
  } else if (d.channelStride < 0 || d.channelStride > kMaxElements) {
    return "tensor '" + d.name + "' has a bad channel stride";
  }
  int64_t stored = n;
  if (d.layout == Layout::NHWC && d.shape[1] != 0 &&
      !mulWithin(n / d.shape[1], d.channelStride, kMaxElements, stored))
    return "tensor '" + d.name + "' has too many elements";
  int64_t need;
  if (!mulWithin(stored, static_cast<int64_t>(elemSize(d.type)),
                 kMaxElements * 8, need) ||
      static_cast<uint64_t>(need) > d.bytes)
    return "tensor '" + d.name + "' does not fit its bytes";
  if (d.offset > arenaBytes || d.bytes > arenaBytes - d.offset)
    return "tensor '" + d.name + "' lies outside the arena";
  if (d.quantized) {
    // Quantized data is stored as u8, s8 with +128 (docs/Plan.md).
    int64_t lo = d.isSigned ? -128 : 0, hi = d.isSigned ? 127 : 255;
    if (d.type != ElemType::U8 || d.storedOffset != (d.isSigned ? 128 : 0))
      return "quantized tensor '" + d.name + "' has a bad storage type";
    if (!(d.scale > 0) || !std::isfinite(d.scale))
      return "quantized tensor '" + d.name +
             "' has a scale that is not "
             "positive and finite";
    if (d.zeroPoint < lo || d.zeroPoint > hi)
      return "quantized tensor '" + d.name + "' has a zero point outside " +
             (d.isSigned ? "int8" : "uint8");
  } else if (d.storedOffset != 0 || d.zeroPoint != 0 || d.scale != 0) {
    return "tensor '" + d.name +
           "' is not quantized but has quantization "
           "parameters";
  }
  return "";
}

/// A C identifier: what the code's layer symbols are.
bool isSymbol(const std::string &s) {
  if (s.empty() || s.size() > 256 ||
      std::isdigit(static_cast<unsigned char>(s[0])))
    return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '_')
      return false;
  return true;
}

} // namespace

bool parseManifest(const std::string &text, Manifest &m, std::string &error) {
  m = Manifest();
  std::stringstream lines(text);
  std::string line;
  int lineNo = 0;
  auto failAt = [&](int at, const std::string &why) {
    error = "manifest line " + std::to_string(at) + ": " + why;
    return false;
  };
  auto fail = [&](const std::string &why) { return failAt(lineNo, why); };
  bool sawHeader = false, sawArena = false;
  std::set<std::string> seen[2];
  while (std::getline(lines, line)) {
    ++lineNo;
    std::vector<std::string> tok;
    std::stringstream ss(line);
    std::string t;
    while (ss >> t)
      tok.push_back(t);
    if (tok.empty())
      continue;
    const std::string &kind = tok[0];
    if (!sawHeader) {
      if (kind != "qatc-plan-manifest" || tok.size() != 2 ||
          tok[1] != std::to_string(kFormatVersion))
        return fail("not a version " + std::to_string(kFormatVersion) +
                    " manifest");
      sawHeader = true;
      continue;
    }
    if ((kind == "compiler" || kind == "target") && tok.size() == 2) {
      if (!decode(tok[1], kind == "compiler" ? m.compiler : m.target))
        return fail("bad text");
    } else if (kind == "code" && tok.size() == 2) {
      if (m.codeLine || !parseHex16(tok[1], m.codeDigest))
        return fail("bad code digest");
      m.codeLine = lineNo;
    } else if (kind == "arena" && tok.size() == 2) {
      // Tensors are checked against it as they come.
      if (sawArena || !m.tensors.empty() || !parseU64(tok[1], m.arenaBytes) ||
          m.arenaBytes > uint64_t(kMaxElements) * 8)
        return fail("bad arena size");
      sawArena = true;
      m.arenaLine = lineNo;
    } else if (kind == "tensor" && tok.size() == 14) {
      TensorDesc d;
      int64_t idx;
      if (!parseInt(tok[1], idx) ||
          idx != static_cast<int64_t>(m.tensors.size()) ||
          !decode(tok[2], d.name) || !parseElemType(tok[3], d.type) ||
          !parseShape(tok[4], d.shape) ||
          (tok[5] != "nhwc" && tok[5] != "plain") ||
          !parseInt(tok[6], d.channelStride) || !parseU64(tok[7], d.offset) ||
          !parseU64(tok[8], d.bytes) || (tok[9] != "q" && tok[9] != "f") ||
          !parseDouble(tok[10], d.scale) || !parseInt(tok[11], d.zeroPoint) ||
          !parseInt(tok[12], d.storedOffset) ||
          (tok[13] != "s" && tok[13] != "u"))
        return fail("malformed tensor");
      d.layout = tok[5] == "nhwc" ? Layout::NHWC : Layout::Plain;
      d.quantized = tok[9] == "q";
      d.isSigned = tok[13] == "s";
      d.line = lineNo;
      if (!sawArena)
        return fail("tensor before the arena");
      std::string why = checkTensor(d, m.arenaBytes);
      if (!why.empty())
        return fail(why);
      m.tensors.push_back(std::move(d));
    } else if ((kind == "input" || kind == "output") && tok.size() == 2) {
      int64_t idx;
      if (!parseInt(tok[1], idx) || idx < 0 ||
          idx >= static_cast<int64_t>(m.tensors.size()))
        return fail("bad tensor index");
      bool isInput = kind == "input";
      std::vector<int> &list = isInput ? m.inputs : m.outputs;
      for (int other : list)
        if (other == idx)
          return fail("tensor " + std::to_string(idx) + " is listed twice");
      if (!seen[isInput].insert(m.tensors[idx].name).second)
        return fail("two " + kind + "s are named '" + m.tensors[idx].name +
                    "'");
      list.push_back(int(idx));
    } else if (kind == "layer" && tok.size() == 11) {
      LayerDesc l;
      auto flag = [](const std::string &t) { return t == "0" || t == "1"; };
      if (!decode(tok[1], l.symbol) || !decode(tok[2], l.node) ||
          !decode(tok[3], l.opType) || !decode(tok[4], l.precision) ||
          !decode(tok[5], l.kernel) || !flag(tok[6]) || !flag(tok[7]) ||
          !parseInt(tok[8], l.macs) || l.macs < 0 ||
          !parseIntList(tok[9], m.tensors.size(), l.inputs) ||
          !parseIntList(tok[10], m.tensors.size(), l.outputs))
        return fail("malformed layer");
      if (!isSymbol(l.symbol))
        return fail("bad layer symbol");
      l.parallel = tok[6] == "1";
      l.sync = tok[7] == "1";
      l.line = lineNo;
      m.layers.push_back(std::move(l));
    } else {
      return fail("unknown or malformed record '" + kind + "'");
    }
  }
  if (!sawHeader)
    return fail("empty manifest");
  if (!sawArena)
    return fail("no arena");
  if (!m.codeLine)
    return fail("no code digest");
  // A plan may have no inputs (a model whose outputs are constants), never
  // no outputs.
  if (m.outputs.empty())
    return fail("no outputs");
  return true;
}

} // namespace qatc::plan
