//===- FuzzPlanLoader.cpp - libFuzzer target: the plan loader -------------===//
//
// Everything the loader checks before it loads code: header, segment table,
// manifest (the checksum is bypassed, so mutations reach the parser). Then
// the properties the checks promise: an accepted manifest writes back to
// text that parses to the same manifest, and the runtime's own accesses to
// the graph's inputs and outputs stay inside the arena (ASan watches).
//
//===----------------------------------------------------------------------===//

#include "qatc/Runtime/Runtime.h"

#include <cstdlib>
#include <vector>

using namespace qatc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rt::Plan::LoadOptions options;
  options.runnable = false;
  options.checkCode = false;
  options.verifyChecksum = false;
  std::string error;
  auto plan = rt::Plan::fromBytes(data, size, "fuzz.plan", error, options);
  if (!plan) {
    // One line, always.
    if (error.empty() || error.find('\n') != std::string::npos)
      std::abort();
    return 0;
  }
  const plan::Manifest &m = plan->manifest();
  std::string text = plan::writeManifest(m);
  plan::Manifest again;
  if (!plan::parseManifest(text, again, error) ||
      plan::writeManifest(again) != text)
    std::abort();
  constexpr uint64_t kLimit = 64 << 20;
  if (m.arenaBytes > kLimit)
    return 0;
  std::vector<uint8_t> arena(m.arenaBytes + 1);
  for (const std::vector<int> *list : {&m.inputs, &m.outputs})
    for (int i : *list) {
      const plan::TensorDesc &t = m.tensors[i];
      uint64_t bytes = t.numElements() * plan::elemSize(t.type);
      if (bytes > kLimit)
        continue;
      std::vector<uint8_t> buffer(bytes + 1);
      rt::writeTensor(t, buffer.data(), arena.data());
      rt::readTensor(t, arena.data(), buffer.data());
    }
  return 0;
}
