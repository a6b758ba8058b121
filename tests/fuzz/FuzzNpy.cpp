//===- FuzzNpy.cpp - libFuzzer target: the .npy and .npz readers ----------===//
//
// Every input is read both as .npy and as .npz. An accepted array holds
// exactly its shape's bytes and writes back to a .npy that reads the same.
//
//===----------------------------------------------------------------------===//

#include "qatc/Support/Npy.h"

#include "llvm/Support/Error.h"

#include <cstdlib>

using namespace qatc;

namespace {
void checkArray(const NpyArray &a) {
  if (a.data.size() !=
      static_cast<size_t>(a.numElements()) * npyTypeSize(a.type))
    std::abort();
  auto back = parseNpy(serializeNpy(a), "round trip");
  if (!back || back->shape != a.shape || back->type != a.type ||
      back->data != a.data)
    std::abort();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  if (auto a = parseNpy(bytes, "fuzz.npy"))
    checkArray(*a);
  else
    llvm::consumeError(a.takeError());
  if (auto z = parseNpz(bytes, "fuzz.npz")) {
    for (const auto &entry : *z)
      checkArray(entry.second);
  } else {
    llvm::consumeError(z.takeError());
  }
  return 0;
}
