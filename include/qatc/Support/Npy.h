//===- Npy.h - numpy .npy and .npz files ------------------------*- C++ -*-===//
//
// Reads and writes numpy arrays (C order, little-endian) of the element
// types qatc handles. A malformed file gives an error message that names the
// file and says what is wrong.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_SUPPORT_NPY_H
#define QATC_SUPPORT_NPY_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace qatc {

/// Element types of numpy arrays qatc reads and writes.
enum class NpyType {
  F32,
  F64,
  F16,
  I8,
  U8,
  I16,
  U16,
  I32,
  U32,
  I64,
  U64,
  Bool
};

/// Size in bytes of one element.
size_t npyTypeSize(NpyType type);
/// The numpy dtype name ("float32", "int8", ...).
llvm::StringRef npyTypeName(NpyType type);

/// A numpy array: element type, shape and the raw little-endian bytes.
struct NpyArray {
  NpyType type = NpyType::F32;
  std::vector<int64_t> shape;
  std::vector<char> data;

  int64_t numElements() const;
};

/// Parses the bytes of a .npy file; `name` labels errors.
llvm::Expected<NpyArray> parseNpy(llvm::StringRef bytes, llvm::StringRef name);
/// Reads a .npy file.
llvm::Expected<NpyArray> readNpy(llvm::StringRef path);
/// Serializes `array` as .npy (format 1.0).
std::string serializeNpy(const NpyArray &array);
/// Writes a .npy file.
llvm::Error writeNpy(llvm::StringRef path, const NpyArray &array);

/// Reads every array of an uncompressed or deflate-compressed .npz archive,
/// keyed by name (without the .npy suffix).
llvm::Expected<std::map<std::string, NpyArray>> readNpz(llvm::StringRef path);
/// Parses the bytes of an .npz archive; `name` labels errors.
llvm::Expected<std::map<std::string, NpyArray>> parseNpz(llvm::StringRef bytes,
                                                         llvm::StringRef name);
/// Writes an uncompressed .npz archive (what numpy.savez writes).
llvm::Error
writeNpz(llvm::StringRef path,
         const std::vector<std::pair<std::string, NpyArray>> &arrays);

} // namespace qatc

#endif // QATC_SUPPORT_NPY_H
