//===- Session.cpp - run a plan on persistent worker threads --------------===//
//
// Thread 0 is the caller. Workers 1..N-1 are created with the session and
// wait for a run (spinning briefly, then sleeping: between runs nothing is
// due). Within a run every thread walks the layer list and meets the others
// at a spinning barrier where work changes hands: before a layer that
// touches what a layer since they last met writes, or writes what such a
// layer reads (the manifest's flag: codegen::barriersBefore), and after the
// last shared layer. Thread 0 alone runs the small layers; a run of them
// needs no barrier between them. An OS sleep between layers
// would cost tens of microseconds, more than many layers take. The threads'
// shares of a shared layer are equal, or (setAdaptiveShares) each thread
// times its shared layers and after the run the shares move toward those
// times (ShareBalancer).
//
//===----------------------------------------------------------------------===//

#include "qatc/Runtime/Runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#define QATC_PAUSE() _mm_pause()
#else
#define QATC_PAUSE() ((void)0)
#endif

using namespace qatc;
using namespace qatc::rt;

struct Session::Workers {
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> stop{false};
  // Sense-reversing barrier.
  std::atomic<int> arrived{0};
  std::atomic<uint64_t> phase{0};
  int count = 1;
  /// Each thread's time in each shared layer of the run (clock ticks),
  /// written by that thread before the threads last meet, read by thread 0
  /// after. Layer i's is ticks[i + kPad]: the pads keep the threads'
  /// counters off each other's lines.
  struct Busy {
    static constexpr size_t kPad = 8;
    std::vector<uint64_t> ticks;
    uint64_t &at(size_t i) { return ticks[i + kPad]; }
  };
  std::vector<Busy> busy;

  void barrier() {
    uint64_t myPhase = phase.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == count) {
      arrived.store(0, std::memory_order_relaxed);
      phase.store(myPhase + 1, std::memory_order_release);
      return;
    }
    // Spin (a layer takes microseconds), then yield: with more threads than
    // cores (several sessions at once) the thread we wait for may need ours.
    for (int spins = 0; phase.load(std::memory_order_acquire) == myPhase;
         ++spins)
      if (spins < 4096)
        QATC_PAUSE();
      else
        std::this_thread::yield();
  }
};

Session::Session(const Plan &plan, int threads)
    : plan_(plan), threads_(threads < 1 ? 1 : threads),
      balancers_(plan.manifest().layers.size(), ShareBalancer(threads_)),
      workers_(std::make_unique<Workers>()) {
  size_t bytes = (plan.manifest().arenaBytes + 63) / 64 * 64;
  arena_ = static_cast<uint8_t *>(std::aligned_alloc(64, bytes ? bytes : 64));
  std::memset(arena_, 0, bytes);
  layerSeconds_.assign(plan.manifest().layers.size(), 0.0);
  threadSeconds_.assign(threads_, layerSeconds_);
  workers_->count = threads_;
  workers_->busy.resize(threads_);
  for (Workers::Busy &b : workers_->busy)
    b.ticks.assign(balancers_.size() + 2 * Workers::Busy::kPad, 0);
  for (int t = 1; t < threads_; ++t)
    workers_->threads.emplace_back([this, t] {
      Workers &w = *workers_;
      uint64_t seen = 0;
      for (;;) {
        // Spin a little for back-to-back runs, then sleep. Past the first
        // pauses the spin yields now and then: another session's thread
        // waiting for this core (two plans run in turn on 2 threads) gets
        // it instead of waiting out the spin. Zen 4 (AMD family 25 model
        // 17), MobileNetV3-small int8 on 2 threads, medians of 800 runs:
        // two sessions in turn 0.903 -> 0.424 ms a run, one session 0.354
        // -> 0.352 (`qatc bench` 0.352-0.359 -> 0.358).
        for (int i = 0;
             i < 20000 && w.generation.load() == seen && !w.stop.load(); ++i) {
          QATC_PAUSE();
          if (i >= 2048 && i % 64 == 0)
            std::this_thread::yield();
        }
        if (w.generation.load() == seen && !w.stop.load()) {
          std::unique_lock<std::mutex> lock(w.mutex);
          w.wake.wait(lock, [&] {
            return w.generation.load() != seen || w.stop.load();
          });
        }
        if (w.stop.load())
          return;
        seen = w.generation.load();
        runLayers(t);
      }
    });
}

Session::~Session() {
  {
    std::lock_guard<std::mutex> lock(workers_->mutex);
    workers_->stop = true;
  }
  workers_->wake.notify_all();
  for (std::thread &t : workers_->threads)
    t.join();
  std::free(arena_);
}

void Session::resetProfile() {
  std::fill(layerSeconds_.begin(), layerSeconds_.end(), 0.0);
  for (std::vector<double> &t : threadSeconds_)
    std::fill(t.begin(), t.end(), 0.0);
}

void Session::writeInputs(int tid) {
  const plan::Manifest &m = plan_.manifest();
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const plan::TensorDesc &t = m.tensors[m.inputs[i]];
    const void *src = (*inputs_)[i];
    if (t.layout != plan::Layout::Plain || t.storedOffset != 0) {
      if (tid == 0)
        writeTensor(t, src, arena_);
      continue;
    }
    // A plain tensor is copied as it is: each thread copies its share of
    // every plane (of an image: the same rows of each channel), as the
    // first layer's threads share the pixels, so each thread reads what it
    // wrote, from its own cache. Thread 0 copying a 224x224 image alone
    // cost every plan on 2 threads the copy, and the other thread's share
    // of the image's quantize came from thread 0's cache. The shares meet
    // at cache lines of the arena, not of the plane: planes whose size is
    // no multiple of 64 bytes put both threads' writes in one line per
    // plane. Planes under 1 KiB per thread are one range: 960 planes of
    // 7x7 floats cost 2 threads 20 us of such lines per run.
    size_t bytes =
        static_cast<size_t>(t.numElements()) * plan::elemSize(t.type);
    size_t rank = t.shape.size();
    size_t plane =
        rank >= 4 ? static_cast<size_t>(t.shape[rank - 2] * t.shape[rank - 1]) *
                        plan::elemSize(t.type)
                  : bytes;
    if (plane == 0)
      continue;
    if (plane < 1024 * static_cast<size_t>(threads_))
      plane = bytes;
    const uint8_t *from = static_cast<const uint8_t *>(src);
    uint8_t *to = arena_ + t.offset;
    // Thread k's share of the plane at p starts at the first arena line
    // from p + plane * k / threads (the arena is 64-byte aligned); thread
    // 0's at p itself, which need not start a line.
    auto boundary = [&](size_t p, int k) {
      if (k == 0)
        return p;
      size_t at = t.offset + p + plane * k / threads_;
      return std::min(p + plane, (at + 63) / 64 * 64 - t.offset);
    };
    for (size_t p = 0; p < bytes; p += plane) {
      size_t begin = boundary(p, tid), end = boundary(p, tid + 1);
      if (end > begin)
        std::memcpy(to + begin, from + begin, end - begin);
    }
  }
}

namespace {

/// A cheap clock for the threads' busy times: only ratios are used.
uint64_t ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return std::chrono::steady_clock::now().time_since_epoch().count();
#endif
}

} // namespace

void Session::runLayers(int tid) {
  const plan::Manifest &m = plan_.manifest();
  const uint8_t *weights = plan_.weights();
  using Clock = std::chrono::steady_clock;
  // Thread 0 moves the shares between runs only.
  const bool timed = threads_ > 1 && adaptive_;
  // Where the threads meet depends on these, so every thread reads them
  // once, here, before the first barrier: the caller sets them between
  // runs, and may do so as soon as it has passed the run's last barrier,
  // while a worker still walks the run's last, unshared layers. Read per
  // layer, a worker that lagged there (descheduled on a loaded host) saw
  // profiling switched on for the next run and met once more than the
  // caller: `qatc bench --threads 2` (timed runs, then profiled ones) hung
  // in a test run beside others.
  const bool profiling = profiling_, hasCallback = static_cast<bool>(callback_);
  Workers::Busy &busy = workers_->busy[tid];
  writeInputs(tid);
  if (threads_ > 1)
    workers_->barrier();
  auto last = Clock::now();
  // Whether a shared layer ran since the threads last met.
  bool shared = false;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (m.layers[i].parallel) {
      const ShareBalancer &b = balancers_[i];
      uint64_t start = timed ? ticks() : 0;
      auto began = profiling ? Clock::now() : Clock::time_point();
      plan_.layerFunction(i)(arena_, weights,
                             plan::packShare(b.bound(tid), b.bound(tid + 1)),
                             threads_);
      if (timed)
        busy.at(i) = ticks() - start;
      // Each thread adds to its own vector; thread 0 reads them after the
      // run, past the barrier that profiling puts after every layer.
      if (profiling)
        threadSeconds_[tid][i] +=
            std::chrono::duration<double>(Clock::now() - began).count();
    } else if (tid == 0) {
      plan_.layerFunction(i)(arena_, weights,
                             plan::packShare(0, plan::kShareOne), 1);
    }
    shared |= m.layers[i].parallel;
    // Threads meet where the next layer touches what a layer since they
    // last met writes, or writes what such a layer reads (the manifest's
    // flag), and after the last shared layer: the caller reads the outputs.
    bool meet = i + 1 < m.layers.size() ? m.layers[i + 1].sync : shared;
    if (threads_ > 1 && (meet || profiling || hasCallback)) {
      workers_->barrier();
      shared = false;
    }
    if (tid == 0) {
      if (profiling) {
        auto now = Clock::now();
        layerSeconds_[i] += std::chrono::duration<double>(now - last).count();
        last = now;
      }
      if (hasCallback)
        callback_(i, arena_);
    }
    // With a callback, the others wait until thread 0 has looked.
    if (hasCallback && threads_ > 1)
      workers_->barrier();
  }
}

bool Session::run(const std::vector<const void *> &inputs,
                  const std::vector<void *> &outputs, std::string &error) {
  const plan::Manifest &m = plan_.manifest();
  if (inputs.size() != m.inputs.size() || outputs.size() != m.outputs.size()) {
    error = "the plan has " + std::to_string(m.inputs.size()) + " inputs and " +
            std::to_string(m.outputs.size()) + " outputs; given " +
            std::to_string(inputs.size()) + " and " +
            std::to_string(outputs.size());
    return false;
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i]) {
      error = "input " + std::to_string(i) + " is null";
      return false;
    }
  // The threads copy the inputs in (writeInputs) as their run begins.
  inputs_ = &inputs;
  if (threads_ > 1) {
    {
      std::lock_guard<std::mutex> lock(workers_->mutex);
      workers_->generation.fetch_add(1);
    }
    workers_->wake.notify_all();
  }
  runLayers(0);
  // Workers touch the arena only in shared layers, and the threads meet
  // after the last one: they are done with it here, and with their times.
  if (threads_ > 1 && adaptive_) {
    std::vector<double> busy(threads_);
    for (size_t i = 0; i < balancers_.size(); ++i) {
      if (!m.layers[i].parallel)
        continue;
      for (int t = 0; t < threads_; ++t)
        busy[t] = static_cast<double>(workers_->busy[t].at(i));
      balancers_[i].update(busy);
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i])
      readTensor(m.tensors[m.outputs[i]], arena_, outputs[i]);
  return true;
}

namespace {

/// Visits element (row-major ONNX index `i`) -> arena byte offset.
template <typename F> void forEachElement(const plan::TensorDesc &t, F &&f) {
  size_t es = plan::elemSize(t.type);
  int64_t n = t.numElements();
  if (t.layout == plan::Layout::Plain) {
    for (int64_t i = 0; i < n; ++i)
      f(i, t.offset + static_cast<uint64_t>(i) * es);
    return;
  }
  int64_t c = t.shape[1];
  int64_t hw = t.shape.size() == 4 ? t.shape[2] * t.shape[3] : 1;
  int64_t batch = t.shape[0];
  int64_t i = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p, ++i)
        f(i,
          t.offset +
              static_cast<uint64_t>((b * hw + p) * t.channelStride + ch) * es);
}

} // namespace

namespace {

/// Copies tensor `t` between the caller's row-major buffer and the arena
/// (`toArena`), element by element through its layout: a fixed-size copy
/// per element of `Es` bytes (a memcpy of a run-time size per element costs
/// a call each: 0.4 ms for a 224x224 image).
template <size_t Es>
void copyElements(const plan::TensorDesc &t, uint8_t *arena, uint8_t *user,
                  bool toArena) {
  forEachElement(t, [&](int64_t i, uint64_t off) {
    if (toArena)
      std::memcpy(arena + off, user + i * Es, Es);
    else
      std::memcpy(user + i * Es, arena + off, Es);
  });
}

void copyTensor(const plan::TensorDesc &t, uint8_t *arena, uint8_t *user,
                bool toArena) {
  size_t es = plan::elemSize(t.type);
  if (t.storedOffset != 0) {
    // Offset int8 storage: u8 holding q + offset.
    forEachElement(t, [&](int64_t i, uint64_t off) {
      if (toArena)
        arena[off] = static_cast<uint8_t>(user[i] + t.storedOffset);
      else
        user[i] = static_cast<uint8_t>(arena[off] - t.storedOffset);
    });
    return;
  }
  if (t.layout == plan::Layout::Plain) {
    size_t bytes = static_cast<size_t>(t.numElements()) * es;
    if (toArena)
      std::memcpy(arena + t.offset, user, bytes);
    else
      std::memcpy(user, arena + t.offset, bytes);
    return;
  }
  switch (es) {
  case 1:
    return copyElements<1>(t, arena, user, toArena);
  case 2:
    return copyElements<2>(t, arena, user, toArena);
  case 4:
    return copyElements<4>(t, arena, user, toArena);
  default:
    return copyElements<8>(t, arena, user, toArena);
  }
}

} // namespace

void qatc::rt::readTensor(const plan::TensorDesc &t, const uint8_t *arena,
                          void *out) {
  copyTensor(t, const_cast<uint8_t *>(arena), static_cast<uint8_t *>(out),
             /*toArena=*/false);
}

void qatc::rt::writeTensor(const plan::TensorDesc &t, const void *in,
                           uint8_t *arena) {
  copyTensor(t, arena, static_cast<uint8_t *>(const_cast<void *>(in)),
             /*toArena=*/true);
}

bool Session::setShares(const std::vector<double> &shares, std::string &error) {
  // Checked once; every layer gets the same parts.
  ShareBalancer fixed(threads_);
  if (!fixed.fix(shares, error))
    return false;
  std::fill(balancers_.begin(), balancers_.end(), fixed);
  adaptive_ = false;
  return true;
}

void Session::setAdaptiveShares(bool on) {
  adaptive_ = on;
  if (on)
    std::fill(balancers_.begin(), balancers_.end(), ShareBalancer(threads_));
}
