//===- CalibrationCache.h - TensorRT calibration cache files ----*- C++ -*-===//
//
// Reads and writes the text calibration cache of TensorRT's implicit
// (calibrator-based) INT8 mode, so scales computed by qatc can be handed to
// trtexec --calib and scales calibrated by TensorRT can be read back:
//
//   TRT-8601-EntropyCalibration2
//   input: 3c010a14
//   (Unnamed Layer* 8) [Constant]_output: 39137939
//   conv1/convolution:0: 3d0b7086
//
// What the format is, from the files TensorRT writes and the tools that read
// or write them (TensorRT itself is closed source):
//   - Line 1 is "TRT-<version>-<algorithm>". <version> is TensorRT's
//     NV_TENSORRT_VERSION: major*1000 + minor*100 + patch up to 8.x (8601 is
//     8.6.1), major*10000 + minor*100 + patch from 10.0 (100300 is 10.3.0).
//     <algorithm> names the calibrator that wrote it (EntropyCalibration2,
//     EntropyCalibration, MinMaxCalibration). TensorRT ignores a cache whose
//     version or algorithm differs from its own and the calibrator's
//     ("Calibration table does not match calibrator algorithm type") and
//     calibrates again; trtexec --calib reads the file through an
//     IInt8EntropyCalibrator2, so it wants EntropyCalibration2.
//   - Every other line is "<tensor name>: <hex>", <hex> being the bits of
//     the float32 SCALE (amax / 127, not amax) as a big-endian hexadecimal
//     number: 3c010a14 is 0.0078759; readers multiply by 127 to get the
//     dynamic range.
//   - TensorRT prints the hex in lower case without leading zeros: a tensor
//     it saw only zeros in is written "366: 0". NVIDIA's own writers (TAO
//     export, the DLA qdq-translator) use Python's hex(), equally unpadded;
//     ModelOpt's reader (bytes.fromhex) would want all eight digits.
//     Every scale >= 2^-95 has eight digits, so the difference from a
//     zero-padded form only shows for zero, denormal and tiny scales
//     (scaleFromAmax never gives one below 2^-24 / 127).
//   - Tensor names may contain spaces and colons (TensorFlow-derived ONNX
//     names end in ":0"; NVIDIA ships caches such as "input_1:0: 3c010a14"),
//     so the separator is the LAST ": " of the line; a hex number never
//     contains one. Names cannot contain a line break.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_QUANTIZATION_CALIBRATIONCACHE_H
#define QATC_QUANTIZATION_CALIBRATIONCACHE_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qatc::calib {

/// What CalibrationCache::parse accepts beyond the default.
struct CacheParseOptions {
  /// Accept a +0 scale (TensorRT writes one for a tensor that was all
  /// zeros); rejected by default since a zero scale cannot reach a
  /// QuantizeLinear. Negative, infinite and NaN scales are always errors.
  bool allowZeroScale = false;
};

/// A TensorRT calibration cache: the header line and the scale of each
/// tensor, in file order.
struct CalibrationCache {
  struct Entry {
    std::string name;
    /// The float32 scale (amax / 127), bit for bit as in the file.
    float scale = 0;
  };

  /// "TRT-<version>-<algorithm>", without the line break.
  std::string header;
  std::vector<Entry> entries;

  /// Parses the text of a cache file. Lines may end in "\n" or "\r\n", the
  /// last one need not end at all, blank lines are skipped; the hex may be
  /// upper or lower case with 1 to 8 digits. On failure returns nullopt and
  /// sets `error` to a message starting "line N: " that quotes the offending
  /// text: an empty file, a malformed header, a line without ": ", an empty
  /// name, malformed hex, a duplicate tensor name or a scale that is not
  /// positive and finite.
  static std::optional<CalibrationCache>
  parse(std::string_view text, std::string &error,
        const CacheParseOptions &options = {});

  /// Reads and parses the cache file at `path`; on failure `error` starts
  /// with the path (and the line number for a malformed line).
  static std::optional<CalibrationCache>
  readFile(const std::string &path, std::string &error,
           const CacheParseOptions &options = {});
  /// The file text: the header and one "name: hex" line per entry, in order,
  /// each ending in "\n", the hex in TensorRT's form (lower case, no leading
  /// zeros), so parse(write()) gives back the same bits and write() of that
  /// the same text. Writes any cache as given; validate() says whether parse
  /// will accept the result.
  std::string write() const;

  /// The error parse() would report for the text write() produces (without
  /// a line number), or "" if there is none.
  std::string validate(const CacheParseOptions &options = {}) const;

  /// The entry for `name`, or null.
  const Entry *find(std::string_view name) const;

  /// "TRT-<version>-<algorithm>" for TensorRT `major.minor.patch`, e.g.
  /// makeHeader(8, 6, 1) is "TRT-8601-EntropyCalibration2".
  static std::string
  makeHeader(unsigned major, unsigned minor, unsigned patch,
             std::string_view algorithm = "EntropyCalibration2");
};

} // namespace qatc::calib

#endif // QATC_QUANTIZATION_CALIBRATIONCACHE_H
