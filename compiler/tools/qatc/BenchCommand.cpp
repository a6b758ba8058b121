//===- BenchCommand.cpp - `qatc bench` ------------------------------------===//
//
//   qatc bench m.plan [--threads N] [--iterations N] [--warmup N] [--json]
//
// Times whole runs on random inputs (median and p90) and, from a second,
// profiled pass, each layer: node name, kernel, time, and for layers with a
// MAC count the GOPS and % of the peak of the layer's precision: the host's
// best int8 unit (AMX, else vpdpbusd) and its FMA rate, measured at start
// (rt::measureHostPeak), or --peak-gops.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "qatc/Runtime/Runtime.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

using namespace qatc;
namespace cl = llvm::cl;

cl::SubCommand qatc::driver::benchCommand("bench",
                                          "Time a plan, whole and per layer");

namespace {
cl::SubCommand &sub = qatc::driver::benchCommand;
cl::opt<std::string> planPath(cl::Positional, cl::desc("<model.plan>"),
                              cl::Required, cl::sub(sub));
driver::SessionCLOptions sessionOptions(sub);
cl::opt<int> iterations("iterations", cl::desc("Timed runs (default 100)"),
                        cl::init(100), cl::sub(sub));
cl::opt<int> warmup("warmup", cl::desc("Untimed runs first (default 10)"),
                    cl::init(10), cl::sub(sub));
cl::opt<bool> json("json", cl::desc("Print JSON"), cl::sub(sub));
cl::opt<double>
    peakGops("peak-gops",
             cl::desc("Per-thread int8 peak in GOPS (default: the "
                      "host's best int8 unit, AMX or vpdpbusd, measured)"),
             cl::init(0), cl::sub(sub));

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}
} // namespace

int qatc::driver::runBench() {
  std::string error;
  auto plan = rt::Plan::load(planPath, error);
  if (!plan) {
    llvm::errs() << "qatc bench: " << error << "\n";
    return 1;
  }
  const plan::Manifest &m = plan->manifest();
  std::mt19937 rng(0);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<std::vector<uint8_t>> in, out;
  for (int i : m.inputs) {
    const plan::TensorDesc &d = m.tensors[i];
    in.emplace_back(d.numElements() * plan::elemSize(d.type));
    if (d.type == plan::ElemType::F32) {
      auto *f = reinterpret_cast<float *>(in.back().data());
      for (int64_t k = 0; k < d.numElements(); ++k)
        f[k] = dist(rng);
    }
  }
  for (int i : m.outputs) {
    const plan::TensorDesc &d = m.tensors[i];
    out.emplace_back(d.numElements() * plan::elemSize(d.type));
  }
  std::vector<const void *> inPtrs;
  std::vector<void *> outPtrs;
  for (auto &v : in)
    inPtrs.push_back(v.data());
  for (auto &v : out)
    outPtrs.push_back(v.data());
  rt::Session session(*plan, sessionOptions.threads());
  if (!sessionOptions.applyShares(session, error)) {
    llvm::errs() << "qatc bench: " << error << "\n";
    return 1;
  }
  for (int i = 0; i < warmup; ++i)
    session.run(inPtrs, outPtrs, error);
  std::vector<double> times;
  for (int i = 0; i < std::max(1, iterations.getValue()); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (!session.run(inPtrs, outPtrs, error)) {
      llvm::errs() << "qatc bench: " << error << "\n";
      return 1;
    }
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count());
  }
  // Per-layer profile in a separate pass (timestamps cost a little).
  session.setProfiling(true);
  int profiled = std::max(1, iterations.getValue() / 2);
  for (int i = 0; i < profiled; ++i)
    session.run(inPtrs, outPtrs, error);
  std::vector<double> layerMs;
  double total = 0;
  for (double s : session.layerSeconds()) {
    layerMs.push_back(s / profiled * 1e3);
    total += layerMs.back();
  }
  // Each thread's busy time in each shared layer, and in all of them.
  const int threads = session.threads();
  std::vector<std::vector<double>> threadMs(threads);
  std::vector<double> threadTotal(threads, 0.0);
  for (int t = 0; t < threads; ++t)
    for (double s : session.threadLayerSeconds(t)) {
      threadMs[t].push_back(s / profiled * 1e3);
      threadTotal[t] += threadMs[t].back();
    }
  rt::HostPeak host = rt::measureHostPeak();
  double peak = peakGops > 0 ? peakGops.getValue() : host.int8Gops;
  peak *= session.threads();
  // fp32 layers against the FMA peak (scaled with an int8 peak given).
  double fp32Peak = host.fp32Gflops * session.threads() *
                    (peakGops > 0 ? peakGops.getValue() / host.int8Gops : 1.0);
  auto peakOf = [&](const plan::LayerDesc &l) {
    return l.precision == "fp32" ? fp32Peak : peak;
  };
  double median = quantile(times, 0.5) * 1e3, p90 = quantile(times, 0.9) * 1e3;
  // GOPS of a layer of `macs` multiply-accumulates taking `ms`.
  auto gopsOf = [](int64_t macs, double ms) {
    return macs && ms > 0 ? 2.0 * macs / (ms * 1e-3) / 1e9 : 0.0;
  };
  // Conv/matmul work per precision: MACs and milliseconds.
  std::map<std::string, std::pair<int64_t, double>> work;
  for (size_t i = 0; i < m.layers.size(); ++i)
    if (m.layers[i].macs > 0) {
      auto &w = work[m.layers[i].precision];
      w.first += m.layers[i].macs;
      w.second += layerMs[i];
    }
  if (json) {
    llvm::json::OStream j(llvm::outs(), 2);
    j.object([&] {
      j.attribute("plan", planPath);
      j.attribute("target", m.target);
      j.attribute("threads", session.threads());
      j.attribute("iterations", static_cast<int64_t>(times.size()));
      j.attribute("median_ms", median);
      j.attribute("p90_ms", p90);
      j.attribute("peak_gops", peak);
      j.attribute("fp32_peak_gops", fp32Peak);
      j.attribute("peak_unit", peakGops > 0 ? "--peak-gops" : host.int8Unit);
      j.attribute("fp32_peak_unit", host.fp32Unit);
      j.attribute("core_ghz", host.ghz);
      j.attributeArray("layers", [&] {
        for (size_t i = 0; i < m.layers.size(); ++i) {
          const plan::LayerDesc &l = m.layers[i];
          double gops = gopsOf(l.macs, layerMs[i]);
          j.object([&] {
            j.attribute("node", l.node);
            j.attribute("op", l.opType);
            j.attribute("precision", l.precision);
            j.attribute("kernel", l.kernel);
            j.attribute("ms", layerMs[i]);
            j.attribute("macs", l.macs);
            j.attribute("gops", gops);
            j.attribute("peak_pct", gops / peakOf(l) * 100);
            // Each thread's share: the layer's time minus the slowest
            // thread's is the barrier and the wait for it.
            if (threads > 1 && l.parallel)
              j.attributeArray("thread_ms", [&] {
                for (int t = 0; t < threads; ++t)
                  j.value(threadMs[t][i]);
              });
          });
        }
      });
    });
    llvm::outs() << "\n";
    return 0;
  }
  llvm::outs() << planPath << " (" << m.target
               << (plan->paths().size() > 1
                       ? ", code path " +
                             std::to_string(plan->pathIndex() + 1) + " of " +
                             std::to_string(plan->paths().size())
                       : std::string())
               << "): " << times.size() << " runs on " << session.threads()
               << " thread(s): median " << llvm::format("%.3f", median)
               << " ms, p90 " << llvm::format("%.3f", p90) << " ms\n";
  llvm::outs() << fmt::format("{:<44} {:<17} {:<26} {:>9} {:>6} {:>8} {:>7}\n",
                              "node", "op", "kernel", "ms", "%time", "GOPS",
                              "%peak");
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const plan::LayerDesc &l = m.layers[i];
    double gops = gopsOf(l.macs, layerMs[i]);
    std::string node = lastChars(l.node, 44);
    llvm::outs() << fmt::format("{:<44} {:<17} {:<26} {:>9.4f} {:>6.1f} ", node,
                                l.opType, l.kernel, layerMs[i],
                                total > 0 ? 100 * layerMs[i] / total : 0.0);
    if (l.macs)
      llvm::outs() << llvm::format("%8.1f %7.1f\n", gops,
                                   gops / peakOf(l) * 100);
    else
      llvm::outs() << fmt::format("{:>8} {:>7}\n", "-", "-");
  }
  if (threads > 1) {
    double shared = 0;
    for (size_t i = 0; i < m.layers.size(); ++i)
      if (m.layers[i].parallel)
        shared += layerMs[i];
    llvm::outs() << fmt::format("shared layers: {:.3f} ms; the threads busy in "
                                "them",
                                shared);
    for (int t = 0; t < threads; ++t)
      llvm::outs() << fmt::format("{} {:.3f} ms", t ? "," : "", threadTotal[t]);
    llvm::outs() << " (the rest: barriers and waits)\n";
  }
  for (auto &[precision, w] : work) {
    double p = precision == "fp32" ? fp32Peak : peak,
           g = gopsOf(w.first, w.second);
    llvm::outs() << llvm::format(
        "%s conv/matmul layers: %.3f ms, %.1f GOPS, %.1f %% of the %.0f GOPS "
        "%s peak (%s)\n",
        precision.c_str(), w.second, g, g / p * 100, p, precision.c_str(),
        precision == "fp32" ? host.fp32Unit.c_str()
        : peakGops > 0      ? "--peak-gops"
                            : host.int8Unit.c_str());
  }
  return 0;
}
