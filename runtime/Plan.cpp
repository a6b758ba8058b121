//===- Plan.cpp - map, verify and load a plan -----------------------------===//
//
// Every check a corrupt or foreign plan can fail comes before any of its
// code runs: size, magic, version, segment bounds, checksum, CPU features,
// the manifest (every record validated, see parseManifest), then, with the
// code loaded but not run, the code record against the header and the
// manifest: a manifest edited with the checksum recomputed still has to
// describe the arena, weights, layers and graph interface the code was
// compiled for. The code segment is a shared object; it is written to an
// anonymous memory file (memfd) and dlopen'd from there, so nothing is left
// on disk (an unlinked file in $TMPDIR where memfd is missing).
//
//===----------------------------------------------------------------------===//

#include "qatc/Runtime/Runtime.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

using namespace qatc;
using namespace qatc::rt;

namespace {

/// Why AMX is missing when `missing` holds its features: the CPU may have it
/// while the OS or Linux's permission withholds it (" (...)"), else "".
std::string amxNote(uint64_t missing) {
  if (!(missing & (plan::kFeatAMXTILE | plan::kFeatAMXINT8)))
    return "";
  std::string why = plan::amxUnavailableReason();
  return why.empty() ? "" : " (" + why + ")";
}

/// The directory for the plan's code where memfd is missing.
std::string tempDir() {
  const char *dir = std::getenv("TMPDIR");
  return dir && *dir ? dir : "/tmp";
}

/// Writes `size` bytes to a fresh memfd (or, where memfd is missing, an
/// unlinked temporary file in $TMPDIR) and dlopens it. QATC_NO_MEMFD=1
/// takes the second way (to test it). The memfd stays open while the code
/// is loaded (`keepFd`; the caller closes it after dlclose): the dynamic
/// loader knows a library by the path it was opened by, and a second plan
/// opened as "/proc/self/fd/N" with N reused would be handed the first
/// plan's code.
void *loadSharedObject(const uint8_t *data, size_t size, std::string &error,
                       int &keepFd) {
  keepFd = -1;
  const char *noMemfd = std::getenv("QATC_NO_MEMFD");
  bool useMemfd = !(noMemfd && *noMemfd && std::strcmp(noMemfd, "0") != 0);
  int fd = useMemfd ? memfd_create("qatc-plan-code", MFD_CLOEXEC) : -1;
  std::string why = useMemfd ? std::strerror(errno) : "QATC_NO_MEMFD is set";
  std::string tmpPath;
  std::string dir = tempDir();
  if (fd < 0) {
    tmpPath = dir + "/qatc-plan-XXXXXX";
    fd = mkostemp(tmpPath.data(), O_CLOEXEC);
    if (fd < 0) {
      error = "cannot load the plan's code: no memfd (" + why +
              ") and no file in the temporary directory '" + dir +
              "': " + std::strerror(errno) +
              " (set TMPDIR to a writable directory)";
      return nullptr;
    }
  }
  auto where = [&] {
    return tmpPath.empty() ? std::string("a memfd")
                           : "the temporary directory '" + dir + "'";
  };
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) {
      error = "cannot write the plan's code to " + where() + ": " +
              std::strerror(n < 0 ? errno : ENOSPC);
      close(fd);
      if (!tmpPath.empty())
        unlink(tmpPath.c_str());
      return nullptr;
    }
    done += static_cast<size_t>(n);
  }
  std::string path =
      tmpPath.empty() ? "/proc/self/fd/" + std::to_string(fd) : tmpPath;
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *dl = dlerror();
    error = "cannot load the plan's code from " + where() + ": " +
            std::string(dl ? dl : "?");
    struct statvfs fs;
    if (!tmpPath.empty() && statvfs(dir.c_str(), &fs) == 0 &&
        (fs.f_flag & ST_NOEXEC))
      error += " (the directory is on a noexec file system: set TMPDIR to "
               "one that allows executing code)";
  }
  if (!tmpPath.empty())
    unlink(tmpPath.c_str());
  if (handle && tmpPath.empty())
    keepFd = fd;
  else
    close(fd);
  return handle;
}

/// Holds the code's record against the header and the manifest; "" when
/// they agree.
std::string checkCodeRecord(void *library, const plan::PlanHeader &h,
                            const plan::Manifest &m) {
  using namespace plan;
  const auto *rec =
      static_cast<const uint64_t *>(dlsym(library, kCodeRecordSymbol));
  const auto *names =
      static_cast<const char *>(dlsym(library, kCodeLayersSymbol));
  if (!rec || !names || rec[kRecMagic] != kCodeRecordMagic ||
      rec[kRecFormatVersion] != kFormatVersion)
    return "the code has no code record of this format";
  auto line = [](int n) { return "manifest line " + std::to_string(n) + ": "; };
  if (rec[kRecCpuFeatures] != h.cpuFeatures)
    return "the header says the code needs " + featureNames(h.cpuFeatures) +
           ", the code says " + featureNames(rec[kRecCpuFeatures]);
  if (rec[kRecWeightsBytes] != h.weightsSize)
    return "the weights segment has " + std::to_string(h.weightsSize) +
           " bytes, the code reads " + std::to_string(rec[kRecWeightsBytes]);
  if (rec[kRecArenaBytes] != m.arenaBytes)
    return line(m.arenaLine) + "an arena of " + std::to_string(m.arenaBytes) +
           " bytes, the code addresses " + std::to_string(rec[kRecArenaBytes]);
  if (rec[kRecLayerCount] != m.layers.size())
    return std::to_string(m.layers.size()) + " layers in the manifest, " +
           std::to_string(rec[kRecLayerCount]) + " in the code";
  size_t at = 0, total = rec[kRecLayersBytes];
  for (const LayerDesc &l : m.layers) {
    std::string name(names + at, strnlen(names + at, total - at));
    if (l.symbol != name)
      return line(l.line) + "layer '" + l.symbol + "' where the code has '" +
             name + "'";
    at = std::min<size_t>(total, at + name.size() + 1);
  }
  if (rec[kRecInterfaceDigest] != interfaceDigest(m)) {
    std::string lines;
    for (const std::vector<int> *list : {&m.inputs, &m.outputs})
      for (int i : *list)
        lines +=
            (lines.empty() ? "" : ", ") + std::to_string(m.tensors[i].line);
    return "manifest lines " + lines +
           ": the graph inputs and outputs are not those the code was "
           "compiled for";
  }
  return "";
}

} // namespace

uint64_t Plan::missingFeatures() const {
  return header_.cpuFeatures & ~plan::hostFeatures();
}

std::unique_ptr<Plan> Plan::load(const std::string &path, std::string &error,
                                 const LoadOptions &options) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    return nullptr;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = path + ": not a regular file";
    close(fd);
    return nullptr;
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < sizeof(plan::PlanHeader)) {
    close(fd);
    error = path + ": not a qatc plan (" + std::to_string(size) +
            " bytes, shorter than the header)";
    return nullptr;
  }
  void *map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    error = path + ": cannot map: " + std::strerror(errno);
    return nullptr;
  }
  if (plan::isMultiPlan(static_cast<const uint8_t *>(map), size)) {
    auto p = fromMultiPlan(static_cast<const uint8_t *>(map), size, path, error,
                           options);
    munmap(map, size);
    return p;
  }
  std::unique_ptr<Plan> p(new Plan());
  p->mapping_ = map;
  p->mappingSize_ = size;
  return checkIsa(verify(std::move(p), path, error, options), path, error,
                  options);
}

std::unique_ptr<Plan> Plan::fromBytes(const uint8_t *data, size_t size,
                                      const std::string &name,
                                      std::string &error,
                                      const LoadOptions &options) {
  if (size < sizeof(plan::PlanHeader)) {
    error = name + ": not a qatc plan (" + std::to_string(size) +
            " bytes, shorter than the header)";
    return nullptr;
  }
  if (plan::isMultiPlan(data, size))
    return fromMultiPlan(data, size, name, error, options);
  void *map = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    error = name + ": cannot map: " + std::strerror(errno);
    return nullptr;
  }
  std::memcpy(map, data, size);
  std::unique_ptr<Plan> p(new Plan());
  p->mapping_ = map;
  p->mappingSize_ = size;
  return checkIsa(verify(std::move(p), name, error, options), name, error,
                  options);
}

std::unique_ptr<Plan> Plan::checkIsa(std::unique_ptr<Plan> p,
                                     const std::string &name,
                                     std::string &error,
                                     const LoadOptions &options) {
  // A code path asked for by name (not by $QATC_ISA, which is meant for
  // multi-path plans) that a single-path plan does not hold.
  if (p && !options.isa.empty() && p->manifest_.target != options.isa) {
    error = name + ": the plan holds one code path (" + p->manifest_.target +
            "), not '" + options.isa + "'";
    return nullptr;
  }
  return p;
}

std::unique_ptr<Plan> Plan::fromMultiPlan(const uint8_t *data, size_t size,
                                          const std::string &name,
                                          std::string &error,
                                          const LoadOptions &options) {
  std::vector<plan::PathDesc> paths;
  std::vector<plan::SegmentEntry> segments;
  std::string why;
  if (!plan::parseMultiPlan(data, size, options.verifyChecksum, paths, segments,
                            why)) {
    error = name + ": " + why;
    return nullptr;
  }
  std::string want = options.isa;
  if (const char *env = std::getenv("QATC_ISA"); want.empty() && env)
    want = env;
  std::string held;
  for (const plan::PathDesc &p : paths)
    held += (held.empty() ? "" : ", ") + p.target;
  uint64_t host = plan::hostFeatures();
  int runnable = plan::firstRunnablePath(paths, host);
  int chosen = runnable;
  if (!want.empty()) {
    chosen = -1;
    for (size_t i = 0; i < paths.size() && chosen < 0; ++i)
      if (paths[i].target == want)
        chosen = static_cast<int>(i);
  }
  if (chosen < 0 && !want.empty()) {
    error = name + ": the plan has no code path '" + want + "' (it holds " +
            held + ")";
    return nullptr;
  }
  if (chosen < 0 && options.runnable) {
    error = name + ": this CPU lacks what every code path of the plan needs (";
    for (size_t i = 0; i < paths.size(); ++i)
      error += (i ? "; " : "") + paths[i].target + " needs " +
               plan::featureNames(paths[i].cpuFeatures & ~host);
    error += "); recompile with --target-cpu matching this machine";
    return nullptr;
  }
  // Described, not run: the best path stands for the plan.
  chosen = std::max(chosen, 0);
  const plan::PathDesc &path = paths[chosen];
  if (uint64_t lacks = path.cpuFeatures & ~host; lacks && options.runnable) {
    error = name + ": code path " + path.target + " needs " +
            plan::featureNames(lacks) + ", which this CPU lacks" +
            amxNote(lacks);
    if (runnable >= 0)
      error += " (without " +
               std::string(options.isa.empty() ? "QATC_ISA" : "the choice") +
               " the plan runs " + paths[runnable].target + ")";
    return nullptr;
  }
  void *map = mmap(nullptr, path.planBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    error = name + ": cannot map: " + std::strerror(errno);
    return nullptr;
  }
  plan::assemblePath(data, path, segments, static_cast<uint8_t *>(map));
  std::unique_ptr<Plan> p(new Plan());
  p->mapping_ = map;
  p->mappingSize_ = path.planBytes;
  std::string label = name + ": code path " + path.target;
  p = verify(std::move(p), label, error, options);
  if (!p)
    return nullptr;
  if (p->manifest_.target != path.target) {
    error = label + ": corrupt plan: the path is named " + path.target +
            ", its manifest's target is " + p->manifest_.target;
    return nullptr;
  }
  p->paths_ = std::move(paths);
  p->pathIndex_ = chosen;
  p->fileBytes_ = size;
  return p;
}

std::unique_ptr<Plan> Plan::verify(std::unique_ptr<Plan> p,
                                   const std::string &name, std::string &error,
                                   const LoadOptions &options) {
  auto fail = [&](const std::string &why) -> std::unique_ptr<Plan> {
    error = name + ": " + why;
    return nullptr;
  };
  size_t size = p->mappingSize_;
  p->fileBytes_ = size;
  const auto *bytes = static_cast<const uint8_t *>(p->mapping_);
  plan::PlanHeader &h = p->header_;
  std::memcpy(&h, bytes, sizeof(h));
  if (std::memcmp(h.magic, plan::kMagic, sizeof(h.magic)) != 0)
    return fail("not a qatc plan (bad magic)");
  if (h.formatVersion != plan::kFormatVersion)
    return fail("plan format version " + std::to_string(h.formatVersion) +
                ", this runtime reads version " +
                std::to_string(plan::kFormatVersion) +
                ": recompile the model with this qatc");
  h.compilerVersion[sizeof(h.compilerVersion) - 1] = 0;
  if (h.headerSize != sizeof(plan::PlanHeader))
    return fail("corrupt plan: bad header size");
  if (h.fileSize != size)
    return fail("corrupt plan: the header says " + std::to_string(h.fileSize) +
                " bytes, the file has " + std::to_string(size) +
                " (truncated or appended to)");
  auto inBounds = [&](uint64_t off, uint64_t len) {
    return off >= sizeof(plan::PlanHeader) && off <= size && len <= size - off;
  };
  if (!inBounds(h.manifestOffset, h.manifestSize) ||
      !inBounds(h.weightsOffset, h.weightsSize) ||
      !inBounds(h.codeOffset, h.codeSize) ||
      h.weightsOffset % plan::kSegmentAlign ||
      h.codeOffset % plan::kSegmentAlign)
    return fail("corrupt plan: segment table out of bounds");
  if (options.verifyChecksum &&
      plan::checksum(bytes, size, offsetof(plan::PlanHeader, checksum),
                     sizeof(h.checksum)) != h.checksum)
    return fail("corrupt plan: checksum mismatch (the file was modified or "
                "damaged after qatc wrote it)");
  if (h.cpuFeatures & ~plan::kKnownFeatures)
    return fail("corrupt plan: the header asks for CPU features this "
                "runtime does not know (" +
                plan::featureNames(h.cpuFeatures & ~plan::kKnownFeatures) +
                ")");
  uint64_t missing = h.cpuFeatures & ~plan::hostFeatures();
  if (missing && options.runnable)
    return fail("this CPU lacks " + plan::featureNames(missing) +
                ", which the plan's code needs (compiled for " +
                plan::featureNames(h.cpuFeatures) + ")" + amxNote(missing) +
                "; recompile with --target-cpu matching this machine");
  std::string text(reinterpret_cast<const char *>(bytes + h.manifestOffset),
                   h.manifestSize);
  std::string why;
  if (!plan::parseManifest(text, p->manifest_, why))
    return fail("corrupt plan: " + why);
  p->weights_ = bytes + h.weightsOffset;
  if (!options.checkCode)
    return p;
  if (plan::codeDigest(bytes + h.codeOffset, h.codeSize) !=
      p->manifest_.codeDigest)
    return fail("corrupt plan: manifest line " +
                std::to_string(p->manifest_.codeLine) +
                ": the code segment does not match its digest (the code was "
                "modified after qatc wrote it)");
  int codeFd = -1;
  void *library =
      loadSharedObject(bytes + h.codeOffset, h.codeSize, why, codeFd);
  if (!library)
    return fail(why);
  // Owned by the plan from here: closed after the library is unloaded.
  p->library_ = library;
  p->codeFd_ = codeFd;
  why = checkCodeRecord(library, h, p->manifest_);
  if (!why.empty())
    return fail("corrupt plan: " + why);
  if (!options.runnable) {
    dlclose(library);
    p->library_ = nullptr;
    close(p->codeFd_);
    p->codeFd_ = -1;
    return p;
  }
  for (const plan::LayerDesc &l : p->manifest_.layers) {
    void *sym = dlsym(p->library_, l.symbol.c_str());
    if (!sym)
      return fail("corrupt plan: manifest line " + std::to_string(l.line) +
                  ": the code has no layer '" + l.symbol + "'");
    p->functions_.push_back(reinterpret_cast<plan::LayerFn>(sym));
  }
  return p;
}

Plan::~Plan() {
  if (library_)
    dlclose(library_);
  if (codeFd_ >= 0)
    close(codeFd_);
  if (mapping_)
    munmap(mapping_, mappingSize_);
}
