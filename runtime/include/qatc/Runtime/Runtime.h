//===- Runtime.h - load and run qatc plans (C++ API) ------------*- C++ -*-===//
//
// The runtime maps a plan, checks it (magic, version, size, checksum, CPU
// features, manifest), loads its code and runs it on 1..N threads. It
// includes nothing from MLIR or LLVM. A plan holds native code: load only
// plans from a source you trust, as you would a shared library.
//
//   std::string err;
//   auto plan = qatc::rt::Plan::load("m.plan", err);
//   qatc::rt::Session session(*plan, /*threads=*/2);
//   session.run({input}, {output}, err);
//
//===----------------------------------------------------------------------===//

#ifndef QATC_RUNTIME_RUNTIME_H
#define QATC_RUNTIME_RUNTIME_H

#include "qatc/Runtime/PlanFormat.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace qatc::rt {

/// A loaded, verified plan. Immutable; several sessions may share it.
class Plan {
public:
  /// What load() checks and loads.
  struct LoadOptions {
    /// Require this CPU's features and resolve the layer functions: the
    /// plan can run. Without it (to describe a plan, e.g. one built for
    /// another CPU) everything else is checked the same way but the plan
    /// cannot run (hasCode() is false).
    bool runnable = true;
    /// Load the code segment and hold the header and manifest against the
    /// code record. Off only to fuzz the header and manifest checks, whose
    /// plans have no valid code.
    bool checkCode = true;
    /// Off only to fuzz the checks behind the checksum.
    bool verifyChecksum = true;
    /// The code path of a multi-path plan to load ("avx2", ...). Empty: the
    /// one $QATC_ISA names when it is set, else the first (best) path whose
    /// CPU features this CPU has. A single-path plan for another target
    /// than a non-empty `isa` is refused.
    std::string isa;
  };

  /// Reads and verifies the plan at `path` before anything of it runs:
  /// header, segment table, checksum, manifest (parseManifest), the code
  /// record against the header and manifest, CPU features. Null with
  /// `error` set ("<path>: corrupt plan: manifest line N: ...", ...) when it
  /// cannot be run safely here.
  static std::unique_ptr<Plan> load(const std::string &path, std::string &error,
                                    const LoadOptions &options);
  static std::unique_ptr<Plan> load(const std::string &path,
                                    std::string &error) {
    return load(path, error, LoadOptions());
  }
  /// The same for a plan held in memory (copied); `name` labels errors.
  static std::unique_ptr<Plan> fromBytes(const uint8_t *data, size_t size,
                                         const std::string &name,
                                         std::string &error,
                                         const LoadOptions &options);
  bool hasCode() const { return library_ != nullptr; }
  /// The CPU features the plan needs that this CPU lacks (a mask of
  /// plan::CpuFeature bits; 0 when it can run here).
  uint64_t missingFeatures() const;
  ~Plan();
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;

  /// The code paths of a multi-path plan, best first (empty for a plan with
  /// one), and the index of the one loaded.
  const std::vector<plan::PathDesc> &paths() const { return paths_; }
  int pathIndex() const { return pathIndex_; }
  /// The size of the file (a multi-path plan's whole container).
  uint64_t fileBytes() const { return fileBytes_; }
  /// The verified single-path plan as loaded (of a multi-path plan, the
  /// chosen path reassembled): bytes that load as a plan of their own.
  const uint8_t *planData() const {
    return static_cast<const uint8_t *>(mapping_);
  }
  size_t planSize() const { return mappingSize_; }

  /// The loaded plan's header (a multi-path plan's: the loaded path's).
  const plan::PlanHeader &header() const { return header_; }
  const plan::Manifest &manifest() const { return manifest_; }
  const uint8_t *weights() const { return weights_; }
  plan::LayerFn layerFunction(size_t i) const { return functions_[i]; }

private:
  Plan() = default;
  static std::unique_ptr<Plan> verify(std::unique_ptr<Plan> p,
                                      const std::string &name,
                                      std::string &error,
                                      const LoadOptions &options);
  static std::unique_ptr<Plan> checkIsa(std::unique_ptr<Plan> p,
                                        const std::string &name,
                                        std::string &error,
                                        const LoadOptions &options);
  static std::unique_ptr<Plan> fromMultiPlan(const uint8_t *data, size_t size,
                                             const std::string &name,
                                             std::string &error,
                                             const LoadOptions &options);
  plan::PlanHeader header_{};
  std::vector<plan::PathDesc> paths_;
  int pathIndex_ = 0;
  uint64_t fileBytes_ = 0;
  plan::Manifest manifest_;
  void *mapping_ = nullptr;
  size_t mappingSize_ = 0;
  const uint8_t *weights_ = nullptr;
  void *library_ = nullptr;
  int codeFd_ = -1; ///< the memfd the code was loaded from (see Plan.cpp)
  std::vector<plan::LayerFn> functions_;
};

/// The threads' shares of a shared layer (plan::LayerFn), moved toward
/// what each thread gets done. Each run gives the shares that would have
/// made the threads' times equal; their average over about ten runs
/// (exponential) becomes the shares once it is 0.03 or more from equal,
/// kept in [1 / (2 T), 3 / (2 T)]. A core that runs slower for the whole run (a
/// busy hyperthread sibling, an efficiency core, interrupts) then gets less
/// of every layer, where equal shares would make the other thread wait for
/// it at every barrier. The results do not depend on the shares: each
/// output element is computed whole by one thread.
class ShareBalancer {
public:
  explicit ShareBalancer(int threads);
  int threads() const { return static_cast<int>(shares_.size()); }
  /// Thread t's share is [bound(t), bound(t + 1)) in plan::kShareOne units:
  /// bound(0) = 0, bound(threads) = kShareOne.
  int64_t bound(int t) const { return bounds_[t]; }
  double share(int t) const { return shares_[t]; }
  /// After a run: each thread's time in the shared layers (any unit). A run
  /// with a time that is not positive and finite changes nothing.
  void update(const std::vector<double> &busy);
  /// Fixes the shares (fractions, one per thread, summing to 1 within
  /// 1e-6, each in [1 / (2 T), 3 / (2 T)]); update() then changes nothing.
  bool fix(const std::vector<double> &shares, std::string &error);
  bool fixed() const { return fixed_; }

private:
  void setBounds();
  std::vector<double> shares_;
  /// The average of the runs' balanced shares.
  std::vector<double> balanced_;
  std::vector<int64_t> bounds_;
  bool fixed_ = false;
};

/// Runs a plan: owns the activation arena and the worker threads (created
/// once, spinning at the barrier between layers while a run is under way).
class Session {
public:
  Session(const Plan &plan, int threads);
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  /// Runs one inference. `inputs[i]` / `outputs[i]` point at the plan's
  /// i-th input / output in the row-major order of its ONNX shape and type
  /// (manifest().tensors[manifest().inputs[i]]).
  bool run(const std::vector<const void *> &inputs,
           const std::vector<void *> &outputs, std::string &error);

  /// Called on the calling thread after each layer (then layers run one at
  /// a time): for tensor dumps. The arena holds the layer's outputs.
  void setLayerCallback(
      std::function<void(size_t layer, const uint8_t *arena)> callback) {
    callback_ = std::move(callback);
  }
  /// Seconds spent in each layer, summed over runs since the last reset.
  const std::vector<double> &layerSeconds() const { return layerSeconds_; }
  /// Seconds thread `tid` spent in its share of each shared layer (0 for
  /// the others), summed over profiled runs since the last reset: where a
  /// layer's time exceeds its threads' busy times, they waited for each
  /// other.
  const std::vector<double> &threadLayerSeconds(int tid) const {
    return threadSeconds_[tid];
  }
  void setProfiling(bool on) { profiling_ = on; }
  void resetProfile();
  int threads() const { return threads_; }
  /// The threads' shares of layer `i` (ShareBalancer): equal unless set.
  const ShareBalancer &shares(size_t i) const { return balancers_[i]; }
  /// Fixes every layer's shares (ShareBalancer::fix), e.g. more for a
  /// faster core; ends adaptive shares.
  bool setShares(const std::vector<double> &shares, std::string &error);
  /// Each shared layer's shares follow the threads' times in it, from
  /// equal (ShareBalancer::update after every run). Off by default: on the
  /// 2-vCPU host it took a transformer encoder 0.97-1.09x of its time with
  /// equal shares and ResNet-50 0.89-0.96x (docs/Design.md).
  void setAdaptiveShares(bool on);

private:
  struct Workers;
  void runLayers(int tid);
  /// Thread `tid`'s share of copying the run's inputs into the arena.
  void writeInputs(int tid);
  const Plan &plan_;
  /// The inputs of the run under way (read by every thread's share).
  const std::vector<const void *> *inputs_ = nullptr;
  int threads_;
  uint8_t *arena_ = nullptr;
  bool profiling_ = false;
  std::vector<double> layerSeconds_;
  std::vector<std::vector<double>> threadSeconds_; ///< [thread][layer]
  std::function<void(size_t, const uint8_t *)> callback_;
  std::vector<ShareBalancer> balancers_; ///< one per layer
  bool adaptive_ = false;
  std::unique_ptr<Workers> workers_;
};

/// The clock (GHz) of the calling thread's core under load, measured with a
/// chain of dependent imuls (3 cycles each). Takes a few ms.
double measureCoreGHz();

/// One core's peaks, what a kernel's share of the peak is computed against:
/// the host's best int8 unit (AMX where the host has it, else vpdpbusd or
/// vpmaddubsw at the widest width) and its FMA rate.
struct HostPeak {
  double ghz = 0;        ///< measureCoreGHz()
  double int8Gops = 0;   ///< int8 ops (2 per multiply-accumulate) per ns
  double fp32Gflops = 0; ///< fp32 flops (2 per FMA lane) per ns
  std::string int8Unit, fp32Unit; ///< how each was obtained
};
/// Measures the peaks of the calling thread's core (about 50 ms).
HostPeak measureHostPeak();
/// 512-bit vpdpbusd (and FMA) instructions a core issues per cycle, from its
/// cpuid vendor string, family and model (display family and model); 0
/// where the model does not fix it (SKUs differ, or not listed): then
/// measureHostPeak measures the rate.
int zmmPerCycle(const std::string &vendor, unsigned family, unsigned model);

/// The peak (ops per ns) of a unit issuing `perCycle` instructions of
/// `opsPerInstr` ops per cycle at `ghz`, or the `measured` rate where that
/// is higher: a unit never beats its issue rate, so the clock read low.
double modelPeak(double measured, int perCycle, double opsPerInstr, double ghz);

/// Copies tensor `t` out of the arena into row-major ONNX order, as its
/// stored type (quantized data as the ONNX integers: the stored offset is
/// removed). `out` must hold t.numElements() elements of t.type.
void readTensor(const plan::TensorDesc &t, const uint8_t *arena, void *out);
/// The reverse: writes row-major ONNX-ordered data into the arena layout.
void writeTensor(const plan::TensorDesc &t, const void *in, uint8_t *arena);

} // namespace qatc::rt

#endif // QATC_RUNTIME_RUNTIME_H
