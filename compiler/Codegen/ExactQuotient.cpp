//===- ExactQuotient.cpp - divisions by constants without vdivps ----------===//
//
// Built with -ffp-contract=off: the check rounds the product x * z on its
// own, as the kernels do.
//
//===----------------------------------------------------------------------===//

#include "qatc/Codegen/ExactQuotient.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

using namespace qatc::codegen;

static std::optional<float> checkReciprocal(float c) {
  if (!std::isnormal(c))
    return std::nullopt;
  const float z = 1.0f / c;
  if (!std::isnormal(z))
    return std::nullopt;
  // Every significand in [1, 2): the bits of 1.0f plus each mantissa.
  const float unit = 1.0f;
  uint32_t one;
  std::memcpy(&one, &unit, 4);
  for (uint32_t m = 0; m < (1u << 23); ++m) {
    uint32_t bits = one | m;
    float x;
    std::memcpy(&x, &bits, 4);
    float q0 = x * z;
    float r = std::fma(-q0, c, x);
    float q = std::fma(r, z, q0);
    if (q != x / c)
      return std::nullopt;
  }
  return z;
}

std::optional<float> qatc::codegen::exactReciprocal(float c) {
  static std::mutex mutex;
  static std::map<uint32_t, std::optional<float>> known;
  uint32_t key;
  std::memcpy(&key, &c, 4);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(key);
  if (it == known.end())
    it = known.emplace(key, checkReciprocal(c)).first;
  return it->second;
}
