//===- PlanStress.cpp - the runtime under concurrency, soak and reload ----===//
//
//   qatc-plan-stress threads PLAN [sessions] [workers] [runs]
//     One plan, `sessions` threads each with its own session of `workers`
//     threads, `runs` runs each on per-thread inputs; every output must equal
//     the output of a lone one-thread session on the same input, byte for
//     byte. Built a second time with ThreadSanitizer (qatc-plan-stress-tsan).
//   qatc-plan-stress shares PLAN [runs]
//     Sessions of 2, 3 and 4 threads with fixed unequal shares of the shared
//     layers, down to the smallest a share may be (Session::setShares), and
//     sessions whose shares follow the threads' times: every output equal
//     to a lone one-thread session's, byte for byte.
//   qatc-plan-stress soak PLAN [runs] [workers]
//     Peak resident memory (VmHWM) after 1 % of the runs and after all of
//     them: within 5 %.
//   qatc-plan-stress reload PLAN [cycles]
//     Load, run and unload the plan `cycles` times: open descriptors and
//     mappings (/proc/self/fd, /proc/self/maps) as after the first cycle,
//     resident memory within 1 MiB.
//   qatc-plan-stress profile PLAN [runs] [workers]
//     One session of `workers` threads (3: more than a 2-core host has),
//     profiling and the layer callback switched between runs: no hang,
//     every output equal to a lone session's, every callback made.
//   A last argument `sanitized` (the ASan build) keeps the descriptor check
//   and reports the memory figures without limits: ASan's allocator and
//   quarantine hold freed memory on purpose, and LeakSanitizer checks for
//   leaks at exit instead.
//
// Inputs are deterministic pseudo-random data of each input's type. Only the
// runtime is linked: this is what an application embedding plans does.
//
//===----------------------------------------------------------------------===//

#include "qatc/Runtime/Runtime.h"

#include <dirent.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace qatc;

namespace {

using Bytes = std::vector<uint8_t>;

size_t tensorBytes(const plan::TensorDesc &t) {
  return static_cast<size_t>(t.numElements()) * plan::elemSize(t.type);
}

/// Input data for run `seed`: floats in [-2, 2), integers in a small range
/// (indices stay valid for index inputs of 0..3).
std::vector<Bytes> makeInputs(const plan::Manifest &m, uint64_t seed) {
  std::vector<Bytes> inputs;
  uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
  auto next = [&] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  for (int i : m.inputs) {
    const plan::TensorDesc &t = m.tensors[i];
    Bytes b(tensorBytes(t));
    for (int64_t e = 0, n = t.numElements(); e < n; ++e) {
      uint64_t r = next();
      switch (t.type) {
      case plan::ElemType::F32: {
        float v = static_cast<float>(r % 4096) / 1024.0f - 2.0f;
        std::memcpy(&b[e * 4], &v, 4);
        break;
      }
      case plan::ElemType::I32: {
        int32_t v = static_cast<int32_t>(r % 4);
        std::memcpy(&b[e * 4], &v, 4);
        break;
      }
      case plan::ElemType::I64: {
        int64_t v = static_cast<int64_t>(r % 4);
        std::memcpy(&b[e * 8], &v, 8);
        break;
      }
      default:
        b[e] = static_cast<uint8_t>(r);
      }
    }
    inputs.push_back(std::move(b));
  }
  return inputs;
}

bool runOnce(rt::Session &session, const plan::Manifest &m,
             const std::vector<Bytes> &inputs, std::vector<Bytes> &outputs) {
  std::vector<const void *> in;
  for (const Bytes &b : inputs)
    in.push_back(b.data());
  outputs.resize(m.outputs.size());
  std::vector<void *> out;
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    outputs[i].assign(tensorBytes(m.tensors[m.outputs[i]]), 0);
    out.push_back(outputs[i].data());
  }
  std::string error;
  if (!session.run(in, out, error)) {
    std::fprintf(stderr, "run failed: %s\n", error.c_str());
    return false;
  }
  return true;
}

std::unique_ptr<rt::Plan> load(const char *path) {
  std::string error;
  auto plan = rt::Plan::load(path, error);
  if (!plan)
    std::fprintf(stderr, "%s\n", error.c_str());
  return plan;
}

/// A field of /proc/self/status in KiB ("VmHWM", "VmRSS").
long statusKiB(const char *field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  size_t n = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0 && line[n] == ':')
      return std::atol(line.c_str() + n + 1);
  return -1;
}

int countOpenFds() {
  int n = 0;
  if (DIR *d = opendir("/proc/self/fd")) {
    while (dirent *e = readdir(d))
      n += e->d_name[0] != '.';
    closedir(d);
  }
  return n - 1; // the directory's own descriptor
}

int countMappings() {
  std::ifstream f("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(f, line))
    ++n;
  return n;
}

int threadsMode(const char *path, int sessions, int workers, int runs) {
  auto plan = load(path);
  if (!plan)
    return 1;
  const plan::Manifest &m = plan->manifest();
  // Expected outputs from a lone one-thread session.
  std::vector<std::vector<Bytes>> expected(sessions * runs);
  {
    rt::Session lone(*plan, 1);
    for (int k = 0; k < sessions * runs; ++k)
      if (!runOnce(lone, m, makeInputs(m, k % 7), expected[k]))
        return 1;
  }
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int s = 0; s < sessions; ++s)
    threads.emplace_back([&, s] {
      rt::Session session(*plan, workers);
      std::vector<Bytes> out;
      for (int r = 0; r < runs; ++r) {
        int k = s * runs + r;
        if (!runOnce(session, m, makeInputs(m, k % 7), out)) {
          ++failures;
          return;
        }
        if (out != expected[k])
          ++mismatches;
      }
    });
  for (std::thread &t : threads)
    t.join();
  std::printf("threads: %d sessions x %d workers x %d runs on one plan: %d "
              "of %d results differ from a lone session's, %d failed\n",
              sessions, workers, runs, mismatches.load(), sessions * runs,
              failures.load());
  return mismatches || failures ? 1 : 0;
}

int sharesMode(const char *path, int runs) {
  auto plan = load(path);
  if (!plan)
    return 1;
  const plan::Manifest &m = plan->manifest();
  std::vector<std::vector<Bytes>> expected(runs);
  {
    rt::Session lone(*plan, 1);
    for (int r = 0; r < runs; ++r)
      if (!runOnce(lone, m, makeInputs(m, r), expected[r]))
        return 1;
  }
  // Empty: the shares follow the times.
  const std::vector<std::vector<double>> cases = {{0.25, 0.75},
                                                  {0.75, 0.25},
                                                  {0.4, 0.6},
                                                  {},
                                                  {1 / 6., 0.5, 1 / 3.},
                                                  {0.5, 1 / 6., 1 / 3.},
                                                  {0.125, 0.375, 0.125, 0.375},
                                                  {}};
  int mismatches = 0, total = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    int threads = cases[c].empty() ? (c < 4 ? 2 : 4) : cases[c].size();
    rt::Session session(*plan, threads);
    std::string error;
    if (cases[c].empty())
      session.setAdaptiveShares(true);
    else if (!session.setShares(cases[c], error)) {
      std::fprintf(stderr, "setShares: %s\n", error.c_str());
      return 1;
    }
    std::vector<Bytes> out;
    for (int r = 0; r < runs; ++r, ++total) {
      if (!runOnce(session, m, makeInputs(m, r), out))
        return 1;
      mismatches += out != expected[r];
    }
  }
  std::printf("shares: %zu sessions of 2-4 threads with unequal or measured "
              "shares x %d runs: %d of %d results differ from a lone "
              "session's\n",
              cases.size(), runs, mismatches, total);
  return mismatches ? 1 : 0;
}

/// Profiling and the layer callback switched between runs, as `qatc bench`
/// does (timed runs, then profiled ones), on more threads than cores, so
/// that a worker is often descheduled at a run's end: the threads must
/// still meet alike in every run (each reads the switches once per run).
/// A hang here is the failure; the results must match a lone session's.
int profileMode(const char *path, int runs, int workers) {
  auto plan = load(path);
  if (!plan)
    return 1;
  const plan::Manifest &m = plan->manifest();
  const std::vector<Bytes> inputs = makeInputs(m, 0);
  std::vector<Bytes> expected, out;
  {
    rt::Session lone(*plan, 1);
    if (!runOnce(lone, m, inputs, expected))
      return 1;
  }
  rt::Session session(*plan, workers);
  int mismatches = 0;
  size_t seen = 0;
  for (int r = 0; r < runs; ++r) {
    session.setProfiling(r % 3 == 1);
    if (r % 5 == 4)
      session.setLayerCallback([&](size_t, const uint8_t *) { ++seen; });
    else
      session.setLayerCallback(nullptr);
    if (!runOnce(session, m, inputs, out))
      return 1;
    mismatches += out != expected;
  }
  std::printf("profile: %d runs on %d threads switching profiling and the "
              "layer callback between runs: %d results differ from a lone "
              "session's, %zu callbacks\n",
              runs, workers, mismatches, seen);
  return mismatches || seen != (runs / 5) * m.layers.size() ? 1 : 0;
}

bool sanitized = false;

int soakMode(const char *path, int runs, int workers) {
  auto plan = load(path);
  if (!plan)
    return 1;
  const plan::Manifest &m = plan->manifest();
  rt::Session session(*plan, workers);
  std::vector<Bytes> inputs = makeInputs(m, 1), out;
  int early = std::max(1, runs / 100);
  long earlyPeak = 0;
  for (int r = 0; r < runs; ++r) {
    if (!runOnce(session, m, inputs, out))
      return 1;
    if (r + 1 == early)
      earlyPeak = statusKiB("VmHWM");
  }
  long peak = statusKiB("VmHWM");
  double ratio = static_cast<double>(peak) / static_cast<double>(earlyPeak);
  std::printf("soak: peak resident memory %ld KiB after %d runs, %ld KiB "
              "after %d runs (%.2f %%)\n",
              earlyPeak, early, peak, runs, (ratio - 1) * 100);
  return ratio <= 1.05 || sanitized ? 0 : 1;
}

int reloadMode(const char *path, int cycles) {
  int fds0 = 0, maps0 = 0;
  long rss0 = 0;
  for (int c = 0; c < cycles; ++c) {
    {
      auto plan = load(path);
      if (!plan)
        return 1;
      rt::Session session(*plan, 2);
      std::vector<Bytes> out;
      if (!runOnce(session, plan->manifest(), makeInputs(plan->manifest(), c),
                   out))
        return 1;
    }
    if (c == 0) {
      fds0 = countOpenFds();
      maps0 = countMappings();
      rss0 = statusKiB("VmRSS");
    }
  }
  int fds = countOpenFds(), maps = countMappings();
  long rss = statusKiB("VmRSS");
  std::printf("reload: %d load/run/unload cycles: open descriptors %d -> %d, "
              "mappings %d -> %d, resident %ld -> %ld KiB\n",
              cycles, fds0, fds, maps0, maps, rss0, rss);
  if (sanitized)
    return fds == fds0 ? 0 : 1;
  return fds == fds0 && maps == maps0 && rss - rss0 <= 1024 ? 0 : 1;
}

int arg(int argc, char **argv, int i, int fallback) {
  return argc > i ? std::atoi(argv[i]) : fallback;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(
        stderr,
        "usage: %s threads|shares|soak|reload|profile PLAN [counts...]\n",
        argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  if (std::string(argv[argc - 1]) == "sanitized") {
    sanitized = true;
    --argc;
  }
  if (mode == "threads")
    return threadsMode(argv[2], arg(argc, argv, 3, 4), arg(argc, argv, 4, 2),
                       arg(argc, argv, 5, 20));
  if (mode == "shares")
    return sharesMode(argv[2], arg(argc, argv, 3, 20));
  if (mode == "soak")
    return soakMode(argv[2], arg(argc, argv, 3, 20000), arg(argc, argv, 4, 1));
  if (mode == "profile")
    return profileMode(argv[2], arg(argc, argv, 3, 2000),
                       arg(argc, argv, 4, 3));
  if (mode == "reload")
    return reloadMode(argv[2], arg(argc, argv, 3, 100));
  std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
  return 2;
}
