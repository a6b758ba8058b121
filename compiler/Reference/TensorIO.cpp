//===- TensorIO.cpp - tensors to and from numpy files ---------------------===//

#include "qatc/Reference/TensorIO.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace qatc;
using namespace qatc::ref;

static DType toDType(NpyType t) {
  switch (t) {
  case NpyType::F32:
    return DType::F32;
  case NpyType::F64:
    return DType::F64;
  case NpyType::F16:
    return DType::F16;
  case NpyType::I8:
    return DType::I8;
  case NpyType::U8:
    return DType::U8;
  case NpyType::I16:
    return DType::I16;
  case NpyType::U16:
    return DType::U16;
  case NpyType::I32:
    return DType::I32;
  case NpyType::U32:
    return DType::U32;
  case NpyType::I64:
    return DType::I64;
  case NpyType::U64:
    return DType::U64;
  case NpyType::Bool:
    return DType::Bool;
  }
  return DType::F32;
}

static NpyType toNpyType(DType t) {
  switch (t) {
  case DType::F32:
    return NpyType::F32;
  case DType::F64:
    return NpyType::F64;
  case DType::F16:
    return NpyType::F16;
  case DType::I8:
    return NpyType::I8;
  case DType::U8:
    return NpyType::U8;
  case DType::I16:
    return NpyType::I16;
  case DType::U16:
    return NpyType::U16;
  case DType::I32:
    return NpyType::I32;
  case DType::U32:
    return NpyType::U32;
  case DType::I64:
    return NpyType::I64;
  case DType::U64:
    return NpyType::U64;
  case DType::Bool:
    return NpyType::Bool;
  }
  return NpyType::F32;
}

Tensor qatc::ref::fromNpy(const NpyArray &array) {
  Tensor t(toDType(array.type), array.shape);
  if (!array.data.empty()) // an empty vector's data() may be null
    std::memcpy(t.mutableData<char>(), array.data.data(), array.data.size());
  return t;
}

NpyArray qatc::ref::toNpy(const Tensor &tensor) {
  NpyArray a;
  a.type = toNpyType(tensor.dtype());
  a.shape.assign(tensor.shape().begin(), tensor.shape().end());
  a.data.assign(tensor.bytes(), tensor.bytes() + tensor.byteSize());
  return a;
}

std::string qatc::ref::safeFileName(llvm::StringRef name) {
  std::string s;
  for (char c : name)
    s.push_back(llvm::isAlnum(c) || c == '.' || c == '-' || c == '_' ? c : '_');
  if (s.empty() || s == "." || s == "..")
    s = "_" + s;
  return s;
}

llvm::Expected<NamedTensors> qatc::ref::readTensors(llvm::StringRef path) {
  NamedTensors out;
  if (llvm::sys::fs::is_directory(path)) {
    llvm::SmallString<256> index(path);
    llvm::sys::path::append(index, "index.txt");
    std::vector<std::pair<std::string, std::string>> files;
    if (auto buf = llvm::MemoryBuffer::getFile(index)) {
      llvm::SmallVector<llvm::StringRef> lines;
      (*buf)->getBuffer().split(lines, '\n', -1, false);
      for (llvm::StringRef line : lines) {
        auto [file, name] = line.split('\t');
        files.emplace_back(file.str(), name.str());
      }
    } else {
      std::error_code ec;
      for (llvm::sys::fs::directory_iterator it(path, ec), end;
           it != end && !ec; it.increment(ec)) {
        llvm::StringRef file = llvm::sys::path::filename(it->path());
        if (file.ends_with(".npy"))
          files.emplace_back(file.str(), file.drop_back(4).str());
      }
      llvm::sort(files);
    }
    for (auto &[file, name] : files) {
      llvm::SmallString<256> p(path);
      llvm::sys::path::append(p, file);
      auto array = readNpy(p);
      if (!array)
        return array.takeError();
      out.emplace_back(name, fromNpy(*array));
    }
    return out;
  }
  if (path.ends_with(".npz")) {
    auto arrays = readNpz(path);
    if (!arrays)
      return arrays.takeError();
    for (auto &[name, array] : *arrays)
      out.emplace_back(name, fromNpy(array));
    return out;
  }
  auto array = readNpy(path);
  if (!array)
    return array.takeError();
  out.emplace_back(llvm::sys::path::stem(path).str(), fromNpy(*array));
  return out;
}

llvm::Error qatc::ref::writeTensors(llvm::StringRef path,
                                    const NamedTensors &tensors) {
  if (path.ends_with(".npy")) {
    if (tensors.size() != 1)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "%s: a .npy file holds one tensor, but there are %zu; use .npz",
          path.str().c_str(), tensors.size());
    return writeNpy(path, toNpy(tensors[0].second));
  }
  std::vector<std::pair<std::string, NpyArray>> arrays;
  for (auto &[name, t] : tensors)
    arrays.emplace_back(name, toNpy(t));
  return writeNpz(path, arrays);
}

llvm::Expected<TensorDumper> TensorDumper::create(llvm::StringRef dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return llvm::createStringError(ec, "%s: cannot create the directory: %s",
                                   dir.str().c_str(), ec.message().c_str());
  TensorDumper d;
  d.dir = dir.str();
  return d;
}

llvm::Error TensorDumper::add(llvm::StringRef name, const Tensor &tensor) {
  std::string base = safeFileName(name);
  std::string file = base + ".npy";
  // Distinct names can map to the same safe name ("a/b" and "a_b").
  for (int i = 1; files.contains(file); ++i)
    file = base + "_" + std::to_string(i) + ".npy";
  files.insert(file);
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, file);
  if (llvm::Error e = writeNpy(path, toNpy(tensor)))
    return e;
  entries.emplace_back(file, name.str());
  return llvm::Error::success();
}

llvm::Error TensorDumper::finish() {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, "index.txt");
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return llvm::createStringError(ec, "%s: %s", path.c_str(),
                                   ec.message().c_str());
  for (auto &[file, name] : entries)
    os << file << "\t" << name << "\n";
  return llvm::Error::success();
}
