//===- FuzzCalibCache.cpp - libFuzzer target: calibration caches ----------===//
//
// TensorRT calibration cache text. An accepted cache writes back to text
// that parses to the same entries, bit for bit (CalibrationCache.h).
//
//===----------------------------------------------------------------------===//

#include "qatc/Quantization/CalibrationCache.h"

#include <cstdlib>
#include <cstring>

using namespace qatc::calib;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  std::string error;
  auto cache = CalibrationCache::parse(text, error);
  if (!cache) {
    if (error.rfind("line ", 0) != 0)
      std::abort();
    return 0;
  }
  std::string written = cache->write();
  auto again = CalibrationCache::parse(written, error);
  if (!again || again->header != cache->header ||
      again->entries.size() != cache->entries.size())
    std::abort();
  for (size_t i = 0; i < cache->entries.size(); ++i)
    if (again->entries[i].name != cache->entries[i].name ||
        std::memcmp(&again->entries[i].scale, &cache->entries[i].scale,
                    sizeof(float)) != 0)
      std::abort();
  if (again->write() != written)
    std::abort();
  return 0;
}
