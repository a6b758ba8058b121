//===- Plan.cpp - map, verify and load a plan -----------------------------===//
//
// Every check a corrupt or foreign plan can fail comes before its code is
// loaded: size, magic, version, segment bounds, checksum, CPU features and
// the manifest. The code segment is a shared object; it is written to an
// anonymous memory file (memfd) and dlopen'd from there, so nothing is left
// on disk.
//
//===----------------------------------------------------------------------===//

#include "qatc/Runtime/Runtime.h"

#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace qatc;
using namespace qatc::rt;

namespace {

/// Writes `size` bytes to a fresh memfd (or, where memfd is missing, an
/// unlinked temporary file) and dlopens it.
void *loadSharedObject(const uint8_t *data, size_t size, std::string &error) {
  int fd = memfd_create("qatc-plan-code", MFD_CLOEXEC);
  std::string tmpPath;
  if (fd < 0) {
    const char *dir = std::getenv("TMPDIR");
    tmpPath = std::string(dir ? dir : "/tmp") + "/qatc-plan-XXXXXX";
    fd = mkstemp(tmpPath.data());
    if (fd < 0) {
      error = "cannot create a file for the plan's code: " +
              std::string(std::strerror(errno));
      return nullptr;
    }
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) {
      error =
          "cannot write the plan's code: " + std::string(std::strerror(errno));
      close(fd);
      return nullptr;
    }
    done += static_cast<size_t>(n);
  }
  std::string path =
      tmpPath.empty() ? "/proc/self/fd/" + std::to_string(fd) : tmpPath;
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!tmpPath.empty())
    unlink(tmpPath.c_str());
  close(fd);
  if (!handle) {
    const char *why = dlerror();
    error = "cannot load the plan's code: " + std::string(why ? why : "?");
  }
  return handle;
}

} // namespace

uint64_t Plan::missingFeatures() const {
  return header_.cpuFeatures & ~plan::hostFeatures();
}

std::unique_ptr<Plan> Plan::load(const std::string &path, std::string &error,
                                 bool loadCode) {
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
  auto fail = [&](const std::string &why) -> std::unique_ptr<Plan> {
    error = path + ": " + why;
    return nullptr;
  };
  if (size < sizeof(plan::PlanHeader)) {
    close(fd);
    return fail("not a qatc plan (" + std::to_string(size) +
                " bytes, shorter than the header)");
  }
  void *map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED)
    return fail(std::string("cannot map: ") + std::strerror(errno));
  std::unique_ptr<Plan> p(new Plan());
  p->mapping_ = map;
  p->mappingSize_ = size;
  const auto *bytes = static_cast<const uint8_t *>(map);
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
  uint64_t sum = plan::checksum(
      bytes, size, offsetof(plan::PlanHeader, checksum), sizeof(h.checksum));
  if (sum != h.checksum)
    return fail("corrupt plan: checksum mismatch (the file was modified or "
                "damaged after qatc wrote it)");
  uint64_t missing = h.cpuFeatures & ~plan::hostFeatures();
  if (missing && loadCode)
    return fail("this CPU lacks " + plan::featureNames(missing) +
                ", which the plan's code needs (compiled for " +
                plan::featureNames(h.cpuFeatures) +
                "); recompile with --target-cpu matching this machine");
  std::string text(reinterpret_cast<const char *>(bytes + h.manifestOffset),
                   h.manifestSize);
  std::string why;
  if (!plan::parseManifest(text, p->manifest_, why))
    return fail("corrupt plan: " + why);
  p->weights_ = bytes + h.weightsOffset;
  if (!loadCode)
    return p;
  p->library_ = loadSharedObject(bytes + h.codeOffset, h.codeSize, why);
  if (!p->library_)
    return fail(why);
  for (const plan::LayerDesc &l : p->manifest_.layers) {
    void *sym = dlsym(p->library_, l.symbol.c_str());
    if (!sym)
      return fail("corrupt plan: the code has no layer '" + l.symbol + "'");
    p->functions_.push_back(reinterpret_cast<plan::LayerFn>(sym));
  }
  return p;
}

Plan::~Plan() {
  if (library_)
    dlclose(library_);
  if (mapping_)
    munmap(mapping_, mappingSize_);
}
