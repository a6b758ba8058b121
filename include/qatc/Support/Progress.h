//===- Progress.h - a progress bar for long-running work --------*- C++ -*-===//
//
// Calibration over hundreds of images takes minutes; users want to see that
// it moves, how fast, and when it will end. On a terminal the bar redraws in
// place; in a log (stderr not a terminal) it prints a line every 10 %.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_SUPPORT_PROGRESS_H
#define QATC_SUPPORT_PROGRESS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <string>

namespace qatc {

class ProgressBar {
public:
  /// `total` steps of `unit` (e.g. "samples"), labelled `what`.
  ProgressBar(llvm::StringRef what, size_t total, llvm::StringRef unit,
              llvm::raw_ostream &os = llvm::errs());
  /// Shows that `done` steps are complete (redraws at most ten times a
  /// second on a terminal).
  void update(size_t done);
  /// Draws the final state and ends the line.
  void finish();
  /// Seconds since construction.
  double elapsed() const;

private:
  void draw(size_t done, bool final);

  std::string what, unit;
  size_t total;
  llvm::raw_ostream &os;
  bool interactive;
  std::chrono::steady_clock::time_point start, lastDraw;
  int lastDecile = -1;
};

} // namespace qatc

#endif // QATC_SUPPORT_PROGRESS_H
