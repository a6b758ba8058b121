//===- Barriers.h - where a plan's threads must meet -----------*- C++ -*-===//
//
// The runtime's threads walk a plan's layer list together. A shared
// ("parallel") layer is split across them; thread 0 alone runs the others.
// Threads used to meet at a barrier after every shared layer and before
// each one. A barrier is needed only where a layer touches arena bytes that
// a layer since the threads last met writes, or writes bytes such a layer
// reads: a transformer's Q, K and V projections read one tensor and write
// three, so the threads can run them back to back and meet once. On 2
// threads a barrier costs about a microsecond, a tenth of a small layer.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_CODEGEN_BARRIERS_H
#define QATC_CODEGEN_BARRIERS_H

#include <cstdint>
#include <utility>
#include <vector>

namespace qatc::codegen {

/// The arena bytes one layer reads and writes, as [begin, end) ranges, and
/// whether the threads share it.
struct LayerAccess {
  bool parallel = false;
  std::vector<std::pair<int64_t, int64_t>> reads, writes;
};

/// For each layer, whether the threads must meet before it. Layer j needs a
/// barrier when it conflicts (writes what the other reads or writes, or
/// reads what it writes) with a layer since the last barrier, unless both
/// run on thread 0 alone, in order. The first layer's entry is true: the
/// run starts at a barrier (after the inputs are copied in).
std::vector<bool> barriersBefore(const std::vector<LayerAccess> &layers);

} // namespace qatc::codegen

#endif // QATC_CODEGEN_BARRIERS_H
