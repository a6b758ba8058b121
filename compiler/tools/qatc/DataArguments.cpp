//===- DataArguments.cpp - --input and --labels, shared by commands -------===//
//
// `qatc eval` (a model) and `qatc run` (a plan) take their data the same way.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "qatc/Reference/TensorIO.h"
#include "qatc/Runtime/Runtime.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir;
using namespace qatc;
using namespace qatc::ref;
using llvm::StringRef;
using llvm::Twine;

FailureOr<std::vector<std::optional<Tensor>>>
qatc::driver::readInputSpecs(llvm::ArrayRef<std::string> specs,
                             llvm::ArrayRef<std::string> names,
                             StringRef command) {
  auto fail = [&](const Twine &message) {
    llvm::errs() << "qatc " << command << ": " << message << "\n";
  };
  std::vector<std::optional<Tensor>> inputs(names.size());
  auto indexOf = [&](StringRef name) -> int {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name)
        return static_cast<int>(i);
    return -1;
  };
  auto bind = [&](int i, Tensor t, StringRef spec) {
    if (inputs[i]) {
      fail("--input " + spec + ": graph input '" + names[i] +
           "' is already given");
      return false;
    }
    inputs[i] = std::move(t);
    return true;
  };
  size_t nextPositional = 0;
  for (const std::string &spec : specs) {
    auto [lhs, rhs] = StringRef(spec).split('=');
    bool named = !rhs.empty() && !llvm::sys::fs::exists(spec);
    StringRef file = named ? rhs : StringRef(spec);
    // The graph input a positional .npy is for, to name it in errors.
    while (nextPositional < names.size() && inputs[nextPositional])
      ++nextPositional;
    std::string target =
        named ? lhs.str()
        : !file.ends_with(".npz") && nextPositional < names.size()
            ? names[nextPositional]
            : std::string();
    auto tensors = readTensors(file);
    if (!tensors) {
      fail("--input " + spec +
           (target.empty() || named ? ""
                                    : " (for graph input '" + target + "')") +
           ": " + llvm::toString(tensors.takeError()));
      return failure();
    }
    if (named) {
      int i = indexOf(lhs);
      if (i < 0) {
        fail("--input " + spec + ": the model has no graph input '" + lhs +
             "' (inputs: " + llvm::join(names, ", ") + ")");
        return failure();
      }
      if (tensors->size() != 1) {
        fail("--input " + spec + ": the file holds " + Twine(tensors->size()) +
             " arrays; give one .npy per input");
        return failure();
      }
      if (!bind(i, tensors->front().second, spec))
        return failure();
    } else if (file.ends_with(".npz")) {
      for (auto &[name, t] : *tensors) {
        int i = indexOf(name);
        if (i < 0) {
          fail("--input " + spec + ": array '" + name +
               "' names no graph input (inputs: " + llvm::join(names, ", ") +
               ")");
          return failure();
        }
        if (!bind(i, t, spec))
          return failure();
      }
    } else {
      if (nextPositional >= names.size()) {
        fail("--input " + spec + ": more inputs than the model's " +
             Twine(names.size()));
        return failure();
      }
      bind(nextPositional++, tensors->front().second, spec);
    }
  }
  return inputs;
}

int qatc::driver::printTop1Accuracy(const Tensor &logits, StringRef labelsPath,
                                    StringRef command) {
  auto fail = [&](const Twine &message) {
    llvm::errs() << "qatc " << command << ": " << message << "\n";
    return 1;
  };
  auto labels = readTensors(labelsPath);
  if (!labels)
    return fail("--labels: " + llvm::toString(labels.takeError()));
  Tensor y = castTensor(labels->front().second, DType::I64);
  if (logits.rank() != 2 || y.numElements() != logits.dim(0))
    return fail("--labels: " + Twine(y.numElements()) +
                " labels for a first output of shape " + logits.describe());
  Tensor l = castTensor(logits, DType::F64);
  int64_t n = l.dim(0), c = l.dim(1), correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double *row = l.data<double>() + i * c;
    int64_t best = std::max_element(row, row + c) - row;
    correct += best == y.data<int64_t>()[i];
  }
  llvm::outs() << "top-1 accuracy: "
               << llvm::format("%.2f",
                               100.0 * correct / std::max<int64_t>(n, 1))
               << "% (" << correct << "/" << n << ")\n";
  return 0;
}

qatc::driver::SessionCLOptions::SessionCLOptions(llvm::cl::SubCommand &sub)
    : threadCount("threads", llvm::cl::desc("Worker threads (default 1)"),
                  llvm::cl::init(1), llvm::cl::sub(sub)),
      shares(
          "thread-shares",
          llvm::cl::desc("Each thread's share of every shared layer, one per "
                         "thread (e.g. 0.6,0.4), or 'auto': moved toward the "
                         "threads' measured times after each run (default: "
                         "equal)"),
          llvm::cl::value_desc("list|auto"), llvm::cl::sub(sub)) {}

int qatc::driver::SessionCLOptions::threads() const {
  return std::max(1, threadCount.getValue());
}

bool qatc::driver::SessionCLOptions::applyShares(rt::Session &session,
                                                 std::string &error) const {
  StringRef given = shares;
  if (given.empty())
    return true;
  if (given == "auto") {
    session.setAdaptiveShares(true);
    return true;
  }
  SmallVector<StringRef> parts;
  given.split(parts, ',');
  std::vector<double> values;
  for (StringRef p : parts) {
    double v;
    if (p.trim().getAsDouble(v)) {
      error = "--thread-shares: '" + p.str() +
              "' is not a number (give one share per thread, or auto)";
      return false;
    }
    values.push_back(v);
  }
  if (session.setShares(values, error))
    return true;
  error = "--thread-shares: " + error;
  return false;
}
