//===- Barriers.cpp - where a plan's threads must meet --------------------===//

#include "qatc/Codegen/Barriers.h"

#include <cstddef>

using namespace qatc::codegen;

namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

bool overlap(const Ranges &a, const Ranges &b) {
  for (const auto &[b0, e0] : a)
    for (const auto &[b1, e1] : b)
      if (b0 < e1 && b1 < e0)
        return true;
  return false;
}

bool conflict(const LayerAccess &a, const LayerAccess &b) {
  return overlap(a.writes, b.reads) || overlap(a.writes, b.writes) ||
         overlap(a.reads, b.writes);
}

} // namespace

std::vector<bool>
qatc::codegen::barriersBefore(const std::vector<LayerAccess> &layers) {
  std::vector<bool> meet(layers.size(), false);
  // The layers since the threads last met.
  std::vector<std::size_t> window;
  for (std::size_t j = 0; j < layers.size(); ++j) {
    bool need = j == 0;
    for (std::size_t w : window)
      if ((layers[j].parallel || layers[w].parallel) &&
          conflict(layers[j], layers[w]))
        need = true;
    meet[j] = need;
    if (need)
      window.clear();
    window.push_back(j);
  }
  return meet;
}
