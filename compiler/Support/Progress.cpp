//===- Progress.cpp - a progress bar for long-running work ----------------===//

#include "qatc/Support/Progress.h"

#include "llvm/Support/Format.h"

using namespace qatc;

ProgressBar::ProgressBar(llvm::StringRef what, size_t total,
                         llvm::StringRef unit, llvm::raw_ostream &os)
    : what(what.str()), unit(unit.str()), total(total), os(os),
      interactive(os.is_displayed()), start(std::chrono::steady_clock::now()),
      lastDraw(start) {}

double ProgressBar::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

void ProgressBar::update(size_t done) {
  auto now = std::chrono::steady_clock::now();
  if (interactive) {
    if (now - lastDraw < std::chrono::milliseconds(100))
      return;
    lastDraw = now;
    draw(done, false);
    return;
  }
  int decile = total ? static_cast<int>(done * 10 / total) : 10;
  if (decile > lastDecile && decile < 10) {
    lastDecile = decile;
    draw(done, false);
  }
}

void ProgressBar::finish() { draw(total, true); }

void ProgressBar::draw(size_t done, bool final) {
  constexpr int width = 24;
  double seconds = elapsed();
  double rate = seconds > 0 ? done / seconds : 0;
  int filled = total ? static_cast<int>(width * done / total) : width;
  std::string bar(filled, '#');
  bar.append(width - filled, '-');
  if (interactive)
    os << "\r";
  os << "  " << what << " [" << bar << "] " << done << "/" << total << " "
     << unit << "  " << llvm::format("%.1f", rate) << " " << unit << "/s";
  if (final)
    os << "  " << llvm::format("%.1f", seconds) << " s";
  else if (rate > 0)
    os << "  ETA " << llvm::format("%.0f", (total - done) / rate) << " s";
  os << (interactive && !final ? "   " : "\n");
  os.flush();
}
