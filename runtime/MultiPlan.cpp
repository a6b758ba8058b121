//===- MultiPlan.cpp - plans with code for several instruction sets -------===//
//
// A multi-path plan stores single-path plans as deduplicated segments (see
// PlanFormat.h). Everything here is bounds checking: the chosen path is
// reassembled into an ordinary plan and goes through the ordinary loader,
// whose checksum then covers the reassembly too.
//
//===----------------------------------------------------------------------===//

#include "qatc/Runtime/PlanFormat.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstring>
#include <map>

using namespace qatc;
using namespace qatc::plan;

namespace {

uint64_t alignUp(uint64_t x) {
  return (x + kSegmentAlign - 1) / kSegmentAlign * kSegmentAlign;
}

/// The tables' end: where segments may start.
uint64_t tablesEnd(uint64_t segments, uint64_t paths) {
  return sizeof(MultiPlanHeader) + segments * sizeof(SegmentEntry) +
         paths * sizeof(PathEntry);
}

} // namespace

bool qatc::plan::isMultiPlan(const uint8_t *data, size_t size) {
  return size >= sizeof(kMultiMagic) &&
         std::memcmp(data, kMultiMagic, sizeof(kMultiMagic)) == 0;
}

bool qatc::plan::parseMultiPlan(const uint8_t *data, size_t size,
                                bool verifyChecksum,
                                std::vector<PathDesc> &paths,
                                std::vector<SegmentEntry> &segments,
                                std::string &error) {
  paths.clear();
  segments.clear();
  if (size < sizeof(MultiPlanHeader)) {
    error = "not a qatc plan (" + std::to_string(size) +
            " bytes, shorter than the header)";
    return false;
  }
  MultiPlanHeader h;
  std::memcpy(&h, data, sizeof(h));
  if (!isMultiPlan(data, size)) {
    error = "not a multi-path qatc plan (bad magic)";
    return false;
  }
  if (h.formatVersion != kMultiFormatVersion) {
    error = "multi-path plan format version " +
            std::to_string(h.formatVersion) + ", this runtime reads version " +
            std::to_string(kMultiFormatVersion) +
            ": recompile the model with this qatc";
    return false;
  }
  auto corrupt = [&](const std::string &why) {
    error = "corrupt plan: " + why;
    return false;
  };
  if (h.headerSize != sizeof(MultiPlanHeader))
    return corrupt("bad header size");
  if (h.fileSize != size)
    return corrupt("the header says " + std::to_string(h.fileSize) +
                   " bytes, the file has " + std::to_string(size) +
                   " (truncated or appended to)");
  if (verifyChecksum &&
      checksum(data, size, offsetof(MultiPlanHeader, checksum),
               sizeof(h.checksum)) != h.checksum)
    return corrupt("checksum mismatch (the file was modified or damaged "
                   "after qatc wrote it)");
  if (h.pathCount == 0 || h.pathCount > kMaxPaths)
    return corrupt(std::to_string(h.pathCount) + " code paths (1 to " +
                   std::to_string(kMaxPaths) + " expected)");
  if (h.segmentCount == 0 || h.segmentCount > 3 * h.pathCount)
    return corrupt(std::to_string(h.segmentCount) + " segments for " +
                   std::to_string(h.pathCount) + " paths");
  uint64_t end = tablesEnd(h.segmentCount, h.pathCount);
  if (end > size)
    return corrupt("the segment and path tables run past the end of the file");
  segments.resize(h.segmentCount);
  std::memcpy(segments.data(), data + sizeof(h),
              h.segmentCount * sizeof(SegmentEntry));
  for (size_t i = 0; i < segments.size(); ++i) {
    const SegmentEntry &s = segments[i];
    if (s.offset < end || s.offset % kSegmentAlign || s.offset > size ||
        s.size > size - s.offset)
      return corrupt("segment " + std::to_string(i) + " (offset " +
                     std::to_string(s.offset) + ", " + std::to_string(s.size) +
                     " bytes) lies outside the file's segment area");
  }
  const uint8_t *table =
      data + sizeof(h) + h.segmentCount * sizeof(SegmentEntry);
  for (uint32_t i = 0; i < h.pathCount; ++i) {
    PathEntry e;
    std::memcpy(&e, table + i * sizeof(PathEntry), sizeof(e));
    auto bad = [&](const std::string &why) {
      return corrupt("path " + std::to_string(i) + ": " + why);
    };
    size_t len = strnlen(e.target, sizeof(e.target));
    if (len == 0 || len == sizeof(e.target))
      return bad("no target name");
    PathDesc p;
    p.target.assign(e.target, len);
    for (char c : p.target)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
            c == '_'))
        // Percent-encoded: an error is one line, whatever the bytes.
        return bad("target name '" + plan::encodeToken(p.target) +
                   "' is not a name");
    for (const PathDesc &q : paths)
      if (q.target == p.target)
        return bad("target '" + p.target + "' appears twice");
    p.cpuFeatures = e.cpuFeatures;
    p.headSegment = e.headSegment;
    p.weightsSegment = e.weightsSegment;
    p.codeSegment = e.codeSegment;
    for (uint32_t s : {e.headSegment, e.weightsSegment, e.codeSegment})
      if (s >= h.segmentCount)
        return bad("segment " + std::to_string(s) + " of " +
                   std::to_string(h.segmentCount));
    // The head is a plan header and its manifest: hold its segment table
    // against the segments the path names, so that reassembly is exact.
    const SegmentEntry &head = segments[e.headSegment];
    if (head.size < sizeof(PlanHeader))
      return bad("the plan head is shorter than a plan header");
    PlanHeader ph;
    std::memcpy(&ph, data + head.offset, sizeof(ph));
    if (std::memcmp(ph.magic, kMagic, sizeof(kMagic)) != 0)
      return bad("the plan head is not a qatc plan header");
    const SegmentEntry &w = segments[e.weightsSegment];
    const SegmentEntry &c = segments[e.codeSegment];
    if (ph.weightsOffset != head.size || ph.weightsSize != w.size ||
        ph.codeOffset < ph.weightsOffset ||
        ph.codeOffset - ph.weightsOffset < w.size ||
        ph.codeOffset - ph.weightsOffset - w.size >= kSegmentAlign ||
        ph.codeSize != c.size || ph.fileSize < ph.codeOffset ||
        ph.fileSize - ph.codeOffset != c.size)
      return bad("its plan header does not match its segments");
    if (ph.cpuFeatures != e.cpuFeatures)
      return bad("the path needs " + featureNames(e.cpuFeatures) +
                 ", its plan header says " + featureNames(ph.cpuFeatures));
    p.planBytes = ph.fileSize;
    p.weightsBytes = w.size;
    p.codeBytes = c.size;
    paths.push_back(std::move(p));
  }
  return true;
}

int qatc::plan::firstRunnablePath(const std::vector<PathDesc> &paths,
                                  uint64_t hostFeatures) {
  for (size_t i = 0; i < paths.size(); ++i)
    if ((paths[i].cpuFeatures & ~hostFeatures) == 0)
      return static_cast<int>(i);
  return -1;
}

void qatc::plan::assemblePath(const uint8_t *data, const PathDesc &path,
                              const std::vector<SegmentEntry> &segments,
                              uint8_t *out) {
  const SegmentEntry &head = segments[path.headSegment];
  const SegmentEntry &w = segments[path.weightsSegment];
  const SegmentEntry &c = segments[path.codeSegment];
  std::memcpy(out, data + head.offset, head.size);
  if (w.size)
    std::memcpy(out + head.size, data + w.offset, w.size);
  // The padding between weights and code stays as the caller zeroed it.
  if (c.size)
    std::memcpy(out + (path.planBytes - c.size), data + c.offset, c.size);
}

std::vector<uint8_t>
qatc::plan::writeMultiPlan(const std::vector<std::vector<uint8_t>> &plans,
                           const std::string &compilerVersion) {
  // Split each plan into head / weights / code; equal byte strings are
  // stored once (the weights of targets whose packings agree).
  std::vector<std::vector<uint8_t>> segmentBytes;
  std::map<std::vector<uint8_t>, uint32_t> known;
  auto intern = [&](const uint8_t *p, size_t n) {
    std::vector<uint8_t> bytes(p, p + n);
    auto [it, fresh] =
        known.emplace(bytes, static_cast<uint32_t>(segmentBytes.size()));
    if (fresh)
      segmentBytes.push_back(std::move(bytes));
    return it->second;
  };
  std::vector<PathEntry> entries;
  for (const std::vector<uint8_t> &plan : plans) {
    PlanHeader ph;
    std::memcpy(&ph, plan.data(), sizeof(ph));
    PathEntry e;
    std::memset(&e, 0, sizeof(e));
    Manifest m;
    std::string why;
    std::string text(reinterpret_cast<const char *>(plan.data()) +
                         ph.manifestOffset,
                     ph.manifestSize);
    std::string target = parseManifest(text, m, why) ? m.target : "";
    std::memcpy(e.target, target.data(),
                std::min(target.size(), sizeof(e.target) - 1));
    e.cpuFeatures = ph.cpuFeatures;
    e.headSegment = intern(plan.data(), ph.weightsOffset);
    e.weightsSegment = intern(plan.data() + ph.weightsOffset, ph.weightsSize);
    e.codeSegment = intern(plan.data() + ph.codeOffset, ph.codeSize);
    entries.push_back(e);
  }
  MultiPlanHeader h;
  std::memset(&h, 0, sizeof(h));
  std::memcpy(h.magic, kMultiMagic, sizeof(h.magic));
  h.formatVersion = kMultiFormatVersion;
  h.headerSize = sizeof(h);
  h.pathCount = static_cast<uint32_t>(entries.size());
  h.segmentCount = static_cast<uint32_t>(segmentBytes.size());
  std::strncpy(h.compilerVersion, compilerVersion.c_str(),
               sizeof(h.compilerVersion) - 1);
  std::vector<SegmentEntry> table;
  uint64_t at = alignUp(tablesEnd(h.segmentCount, h.pathCount));
  for (const std::vector<uint8_t> &s : segmentBytes) {
    table.push_back({at, s.size()});
    at = alignUp(at + s.size());
  }
  h.fileSize = table.empty() ? at : table.back().offset + table.back().size;
  std::vector<uint8_t> out(h.fileSize, 0);
  std::memcpy(out.data() + sizeof(h), table.data(),
              table.size() * sizeof(SegmentEntry));
  std::memcpy(out.data() + sizeof(h) + table.size() * sizeof(SegmentEntry),
              entries.data(), entries.size() * sizeof(PathEntry));
  for (size_t i = 0; i < segmentBytes.size(); ++i)
    if (!segmentBytes[i].empty())
      std::memcpy(out.data() + table[i].offset, segmentBytes[i].data(),
                  segmentBytes[i].size());
  std::memcpy(out.data(), &h, sizeof(h));
  h.checksum =
      checksum(out.data(), out.size(), offsetof(MultiPlanHeader, checksum),
               sizeof(h.checksum));
  std::memcpy(out.data(), &h, sizeof(h));
  return out;
}
