//===- TensorIO.h - tensors to and from numpy files -------------*- C++ -*-===//
//
// Named tensors in .npy, .npz and dump directories (one .npy per tensor plus
// index.txt mapping file names to ONNX tensor names).
//
//===----------------------------------------------------------------------===//

#ifndef QATC_REFERENCE_TENSORIO_H
#define QATC_REFERENCE_TENSORIO_H

#include "qatc/Reference/Tensor.h"
#include "qatc/Support/Npy.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace qatc::ref {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

Tensor fromNpy(const NpyArray &array);
/// Fails for element types numpy files cannot hold here (none today).
NpyArray toNpy(const Tensor &tensor);

/// A file-system-safe form of a tensor name ("/conv1/Conv_output_0" ->
/// "_conv1_Conv_output_0").
std::string safeFileName(llvm::StringRef name);

/// Reads named tensors from a .npy file (named after the file), a .npz
/// archive, or a directory written by writeTensorDir (or holding .npy files).
llvm::Expected<NamedTensors> readTensors(llvm::StringRef path);

/// Writes tensors as a .npz archive, or one .npy when the path ends in .npy
/// and there is one tensor.
llvm::Error writeTensors(llvm::StringRef path, const NamedTensors &tensors);

/// Incrementally writes a dump directory: one .npy per tensor under a safe,
/// unique file name, and index.txt ("file<TAB>tensor name" per line).
class TensorDumper {
public:
  /// Creates `dir` (and parents).
  static llvm::Expected<TensorDumper> create(llvm::StringRef dir);
  llvm::Error add(llvm::StringRef name, const Tensor &tensor);
  llvm::Error finish();
  size_t count() const { return entries.size(); }

private:
  std::string dir;
  std::vector<std::pair<std::string, std::string>> entries;
  /// The file names of `entries`, to keep them unique.
  llvm::StringSet<> files;
};

} // namespace qatc::ref

#endif // QATC_REFERENCE_TENSORIO_H
