//===- CompareCommand.cpp - `qatc compare` --------------------------------===//
//
//   qatc compare ref.npz got.npz [tolerances]     (also .npy or dump dirs)
//
// Prints, per tensor present in both, the max abs difference, its share of
// the reference's range, LSB differences for int8/uint8 tensors, cosine,
// SQNR and top-1 agreement; exits 1 when a tolerance is exceeded or a tensor
// is missing, 2 when a file cannot be read.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "qatc/Reference/Compare.h"
#include "qatc/Reference/TensorIO.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace qatc;
using namespace qatc::ref;
namespace cl = llvm::cl;

cl::SubCommand qatc::driver::compareCommand(
    "compare", "Compare tensors (.npy, .npz or dump directories)");

namespace {
cl::opt<std::string> refPath(cl::Positional, cl::desc("<reference>"),
                             cl::Required,
                             cl::sub(qatc::driver::compareCommand));
cl::opt<std::string> gotPath(cl::Positional, cl::desc("<compared>"),
                             cl::Required,
                             cl::sub(qatc::driver::compareCommand));
cl::opt<double> absTol("atol", cl::desc("allclose absolute tolerance"),
                       cl::sub(qatc::driver::compareCommand));
cl::opt<double> relTol("rtol", cl::desc("allclose relative tolerance"),
                       cl::sub(qatc::driver::compareCommand));
cl::opt<double>
    maxRangeRel("max-range-rel",
                cl::desc("Largest max-abs-diff / (max - min of the reference)"),
                cl::sub(qatc::driver::compareCommand));
cl::opt<double> minCosine("min-cosine", cl::desc("Smallest cosine similarity"),
                          cl::sub(qatc::driver::compareCommand));
cl::opt<double> minSqnr("min-sqnr", cl::desc("Smallest SQNR in dB"),
                        cl::sub(qatc::driver::compareCommand));
cl::opt<int64_t> maxLsb("max-lsb",
                        cl::desc("Largest difference of int8/uint8 tensors "
                                 "in LSBs"),
                        cl::sub(qatc::driver::compareCommand));
cl::opt<double> maxLsbFraction(
    "max-lsb-fraction",
    cl::desc("Largest share of int8/uint8 elements that may differ"),
    cl::sub(qatc::driver::compareCommand));
cl::opt<bool> top1("top1",
                   cl::desc("Require the same arg-max in every row of 1-D/2-D "
                            "float tensors"),
                   cl::sub(qatc::driver::compareCommand));
cl::opt<bool> allowMissing(
    "allow-missing",
    cl::desc("Do not fail on tensors present in only one of the two"),
    cl::sub(qatc::driver::compareCommand));
} // namespace

int qatc::driver::runCompare() {
  auto ref = readTensors(refPath);
  if (!ref) {
    llvm::errs() << "qatc compare: " << llvm::toString(ref.takeError()) << "\n";
    return 2;
  }
  auto got = readTensors(gotPath);
  if (!got) {
    llvm::errs() << "qatc compare: " << llvm::toString(got.takeError()) << "\n";
    return 2;
  }
  Tolerance tol;
  if (absTol.getNumOccurrences())
    tol.atol = absTol;
  if (relTol.getNumOccurrences())
    tol.rtol = relTol;
  if (maxRangeRel.getNumOccurrences())
    tol.maxRangeRel = maxRangeRel;
  if (minCosine.getNumOccurrences())
    tol.minCosine = minCosine;
  if (minSqnr.getNumOccurrences())
    tol.minSqnrDb = minSqnr;
  if (maxLsb.getNumOccurrences())
    tol.maxLsb = maxLsb;
  if (maxLsbFraction.getNumOccurrences())
    tol.maxLsbFraction = maxLsbFraction;
  tol.top1 = top1;

  // Two single .npy files compare with each other whatever their names.
  if (ref->size() == 1 && got->size() == 1 &&
      llvm::StringRef(refPath).ends_with(".npy") &&
      llvm::StringRef(gotPath).ends_with(".npy"))
    got->front().first = ref->front().first;

  llvm::raw_ostream &os = llvm::outs();
  os << llvm::formatv("{0,-40} {1,-20} {2,11} {3,9} {4,8} {5,10} {6,8} {7,6}  "
                      "status\n",
                      "tensor", "shape", "max abs", "of range", "LSB", "cosine",
                      "SQNR dB", "top-1");
  int failures = 0, compared = 0;
  for (auto &[name, r] : *ref) {
    auto it = llvm::find_if(*got, [&](auto &p) { return p.first == name; });
    if (it == got->end()) {
      os << llvm::format("%-40s missing from %s\n", name.c_str(),
                         gotPath.c_str());
      failures += !allowMissing;
      continue;
    }
    ++compared;
    TensorDiff d = compareTensors(name, r, it->second, tol);
    std::string shape = r.describe();
    if (!d.problem.empty()) {
      os << llvm::format("%-40s %-20s ", name.c_str(), shape.c_str())
         << "FAIL: " << d.problem << "\n";
      ++failures;
      continue;
    }
    std::string lsb = d.quantized ? std::to_string(d.maxLsb) : "-";
    std::string t1 = d.top1 ? llvm::formatv("{0:P0}", *d.top1).str() : "-";
    os << llvm::format("%-40s %-20s %11.4g %8.4f%% %8s %10.6f %8.1f %6s  %s\n",
                       name.c_str(), shape.c_str(), d.maxAbs, d.rangeRel * 100,
                       lsb.c_str(), d.cosine, d.sqnrDb, t1.c_str(),
                       d.ok() ? "ok" : "FAIL");
    for (const std::string &v : d.violations)
      os << "    " << v << "\n";
    failures += !d.ok();
  }
  for (auto &[name, g] : *got)
    if (llvm::none_of(*ref, [&](auto &p) { return p.first == name; })) {
      os << llvm::format("%-40s missing from %s\n", name.c_str(),
                         refPath.c_str());
      failures += !allowMissing;
    }
  os << compared << " tensors compared, " << failures << " failed\n";
  return failures ? 1 : 0;
}
