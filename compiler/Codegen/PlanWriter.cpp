//===- PlanWriter.cpp - serialize a plan and resolve targets --------------===//

#include "qatc/Codegen/Codegen.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

using namespace qatc;
using namespace qatc::codegen;

const char *qatc::codegen::compilerVersion() { return "qatc 0.4.0"; }

namespace {

/// Whether this CPU is Intel's (cpuid leaf 0's vendor string).
bool hostIsIntel() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d))
    return false;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  return std::strcmp(vendor, "GenuineIntel") == 0;
#else
  return false;
#endif
}

} // namespace

bool qatc::codegen::resolveTarget(const std::string &name, Target &t,
                                  std::string &error) {
  using namespace plan;
  std::string which = name;
  t = Target();
  bool intelHost = false;
  if (which.empty() || which == "host") {
    intelHost = hostIsIntel();
    llvm::StringMap<bool> f = llvm::sys::getHostCPUFeatures();
    t.tuneCpu = llvm::sys::getHostCPUName().str();
    bool avx512 =
        f.lookup("avx512vnni") && f.lookup("avx512bw") && f.lookup("avx512vl");
    // AMX only where this process may use it: the runtime's own check (the
    // CPU, the OS's XSAVE support and Linux's permission).
    if (avx512 && f.lookup("amx-int8") && f.lookup("amx-tile") &&
        (plan::hostFeatures() & kFeatAMXINT8))
      which = "amx";
    else if (avx512)
      which = "avx512vnni";
    else if (f.lookup("avxvnni") && f.lookup("avx2"))
      which = "avxvnni";
    else if (f.lookup("avx2") && f.lookup("fma"))
      which = "avx2";
    else
      which = "generic";
  }
  // A feature baseline (x86-64-v3/v4 plus VNNI), never the host's full set,
  // so that a plan runs on every CPU with the features it records.
  if (which == "amx") {
    // Tile instructions are inline assembly (AmxKernels.cpp): no LLVM
    // feature needed beyond AVX-512 VNNI for everything around them.
    t.isa = Isa::AMX;
    t.cpu = "x86-64-v4";
    t.features = "+avx512vnni";
    t.requiredFeatures = kFeatAVX2 | kFeatFMA | kFeatAVX512F | kFeatAVX512BW |
                         kFeatAVX512VL | kFeatAVX512DQ | kFeatAVX512VNNI |
                         kFeatAMXTILE | kFeatAMXINT8;
  } else if (which == "avx512vnni") {
    t.isa = Isa::AVX512VNNI;
    t.cpu = "x86-64-v4";
    t.features = "+avx512vnni";
    t.requiredFeatures = kFeatAVX2 | kFeatFMA | kFeatAVX512F | kFeatAVX512BW |
                         kFeatAVX512VL | kFeatAVX512DQ | kFeatAVX512VNNI;
  } else if (which == "avxvnni") {
    t.isa = Isa::AVXVNNI;
    t.cpu = "x86-64-v3";
    t.features = "+avxvnni";
    t.requiredFeatures = kFeatAVX2 | kFeatFMA | kFeatAVXVNNI;
  } else if (which == "avx2") {
    t.isa = Isa::AVX2;
    t.cpu = "x86-64-v3";
    t.requiredFeatures = kFeatAVX2 | kFeatFMA;
  } else if (which == "generic") {
    t.isa = Isa::Generic;
    t.cpu = "x86-64";
  } else {
    error = "unknown --target-cpu '" + name +
            "' (choose host, amx, avx512vnni, avxvnni, avx2, generic, a "
            "comma-separated list of them or " +
            kMultiTargetName + ")";
    return false;
  }
  t.name = which;
  // A tuning, not a feature: either form runs on any AVX-512 CPU, the
  // quotients are the same integers and a sigmoid's reciprocal (vrcp14ps and
  // a Newton step) is within an ulp of the division. `host` tunes for the
  // CPU's vendor; a named target is the same code on every machine.
  t.reciprocalDivision =
      t.isa == Isa::AMX || (t.isa == Isa::AVX512VNNI && intelHost);
  return true;
}

bool qatc::codegen::resolveTargets(const std::string &name,
                                   std::vector<Target> &targets,
                                   std::string &error) {
  targets.clear();
  std::string list =
      name == kMultiTargetName ? "amx,avx512vnni,avxvnni,avx2,generic" : name;
  size_t at = 0;
  do {
    size_t comma = list.find(',', at);
    std::string one = list.substr(
        at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? list.size() + 1 : comma + 1;
    Target t;
    if (one.empty() && list.find(',') != std::string::npos) {
      error = "--target-cpu '" + name + "' has an empty entry";
      return false;
    }
    if (!resolveTarget(one, t, error))
      return false;
    for (const Target &u : targets)
      if (u.name == t.name) {
        error = "--target-cpu '" + name + "' names " + t.name + " twice";
        return false;
      }
    targets.push_back(t);
  } while (at <= list.size());
  return true;
}

std::vector<uint8_t> qatc::codegen::writePlan(
    const plan::Manifest &manifest, const std::vector<uint8_t> &weights,
    const std::vector<uint8_t> &code, const Target &target) {
  auto align = [](uint64_t x) {
    return (x + plan::kSegmentAlign - 1) / plan::kSegmentAlign *
           plan::kSegmentAlign;
  };
  plan::Manifest withDigest = manifest;
  withDigest.codeDigest = plan::codeDigest(code.data(), code.size());
  std::string text = plan::writeManifest(withDigest);
  plan::PlanHeader h;
  std::memset(&h, 0, sizeof(h));
  std::memcpy(h.magic, plan::kMagic, sizeof(h.magic));
  h.formatVersion = plan::kFormatVersion;
  h.headerSize = sizeof(h);
  h.cpuFeatures = target.requiredFeatures;
  h.manifestOffset = sizeof(h);
  h.manifestSize = text.size();
  h.weightsOffset = align(h.manifestOffset + h.manifestSize);
  h.weightsSize = weights.size();
  h.codeOffset = align(h.weightsOffset + h.weightsSize);
  h.codeSize = code.size();
  h.fileSize = h.codeOffset + h.codeSize;
  std::strncpy(h.compilerVersion, compilerVersion(),
               sizeof(h.compilerVersion) - 1);
  std::vector<uint8_t> out(h.fileSize, 0);
  std::memcpy(out.data() + h.manifestOffset, text.data(), text.size());
  if (!weights.empty())
    std::memcpy(out.data() + h.weightsOffset, weights.data(), weights.size());
  if (!code.empty())
    std::memcpy(out.data() + h.codeOffset, code.data(), code.size());
  std::memcpy(out.data(), &h, sizeof(h));
  h.checksum =
      plan::checksum(out.data(), out.size(),
                     offsetof(plan::PlanHeader, checksum), sizeof(h.checksum));
  std::memcpy(out.data(), &h, sizeof(h));
  return out;
}
