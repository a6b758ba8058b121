//===- KernelBench.cpp - the compiled kernels against the CPU's peak ------===//
//
// Google Benchmark over the layer functions qatc emits: each case is a
// one-convolution (or one-Gemm) ONNX model, Q/DQ int8 or fp32, written as
// ONNX text, compiled with `qatc compile` for the host, loaded with the
// runtime, and its convolution's layers (an AMX convolution's relayout
// included) called directly on one thread (the quantize / layout layers
// around them are not timed). On an AMX host each int8 case also runs
// compiled for avx512vnni (".../vnni"), the kernels AMX replaces. Counters:
// GOPS (2 ops per multiply-accumulate) and % of the single-core peak of the
// host's best int8 unit (AMX where the host has it) or its FMA units
// (rt::measureHostPeak).
//
//   build/bin/qatc-kernel-bench [--benchmark_filter=int8]
//
//===----------------------------------------------------------------------===//

#include "qatc/Runtime/Runtime.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct Case {
  const char *name;
  int ic, oc, h, w, k, stride, group;
  bool int8;
  bool gemm = false; ///< a [1, ic] x [ic, oc] Gemm (h, w, k unused)
  /// y = Relu(conv + r), r a second int8 input: ResNet's bottleneck ends,
  /// whose epilogue requantizes the conv, adds and requantizes again.
  bool residual = false;
  /// y = conv * Sigmoid(conv) (SiLU), quantized: EfficientNet's expansion
  /// layers, whose epilogue costs more than their products.
  bool silu = false;
};

const Case kCases[] = {
    {"int8/stem_7x7s2_3to64_224", 3, 64, 224, 224, 7, 2, 1, true},
    {"int8/conv3x3_64_56", 64, 64, 56, 56, 3, 1, 1, true},
    {"int8/conv3x3_256_14", 256, 256, 14, 14, 3, 1, 1, true},
    {"int8/conv3x3_512_7", 512, 512, 7, 7, 3, 1, 1, true},
    {"int8/conv1x1_256to64_56", 256, 64, 56, 56, 1, 1, 1, true},
    {"int8/conv1x1_64to256_56", 64, 256, 56, 56, 1, 1, 1, true},
    {"int8/conv1x1_64to256_56_residual", 64, 256, 56, 56, 1, 1, 1, true, false,
     true},
    {"int8/conv1x1_24to144_56_silu", 24, 144, 56, 56, 1, 1, 1, true, false,
     false, true},
    // MobileNetV2's first expansion: 16 input channels, one K step, so the
    // epilogue of its 1.2 M outputs is the layer's cost.
    {"int8/conv1x1_16to96_112", 16, 96, 112, 112, 1, 1, 1, true},
    {"int8/conv1x1_1024to256_14", 1024, 256, 14, 14, 1, 1, 1, true},
    {"int8/conv1x1_512to2048_7", 512, 2048, 7, 7, 1, 1, 1, true},
    {"int8/depthwise3x3_144_56", 144, 144, 56, 56, 3, 1, 144, true},
    {"int8/depthwise3x3_960_7", 960, 960, 7, 7, 3, 1, 960, true},
    {"int8/depthwise3x3s2_96_112", 96, 96, 112, 112, 3, 2, 96, true},
    // Stride 2 in wide blocks alone, its input in L2: the case above adds
    // 32 channels in narrow blocks and an input (1.2 MB) streamed from L3.
    {"int8/depthwise3x3s2_128_56", 128, 128, 56, 56, 3, 2, 128, true},
    // The two halves of the first case's cost apart: wide blocks over an
    // input streamed from L3 (1.6 MB), and narrow blocks over one in L2.
    {"int8/depthwise3x3s2_128_112", 128, 128, 112, 112, 3, 2, 128, true},
    {"int8/depthwise3x3s2_96_56", 96, 96, 56, 56, 3, 2, 96, true},
    {"int8/depthwise3x3_72_28", 72, 72, 28, 28, 3, 1, 72, true},
    {"int8/depthwise5x5_240_14", 240, 240, 14, 14, 5, 1, 240, true},
    {"int8/gemm_2048to1000", 2048, 1000, 1, 1, 1, 1, 1, true, true},
    {"fp32/conv3x3_64_56", 64, 64, 56, 56, 3, 1, 1, false},
    {"fp32/conv1x1_256to64_56", 256, 64, 56, 56, 1, 1, 1, false},
    {"fp32/conv3x3_64to192_56", 64, 192, 56, 56, 3, 1, 1, false},
    {"fp32/conv3x3_512_7", 512, 512, 7, 7, 3, 1, 1, false},
    {"fp32/depthwise3x3_144_56", 144, 144, 56, 56, 3, 1, 144, false},
    {"fp32/depthwise3x3s2_96_112", 96, 96, 112, 112, 3, 2, 96, false},
    {"fp32/gemm_2048to1000", 2048, 1000, 1, 1, 1, 1, 1, false, true},
};

template <typename T> std::string list(const std::vector<T> &v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i)
    os << (i ? "," : "") << +v[i];
  return os.str();
}

/// The case as ONNX text: x -> [Q/DQ] -> Conv/Gemm (weights through
/// per-channel DequantizeLinear for int8) -> [Q/DQ] -> y.
std::string onnxText(const Case &c) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> q(-127, 127);
  int kk = c.gemm ? 1 : c.k, icg = c.ic / c.group;
  size_t count = c.gemm ? size_t(c.oc) * c.ic : size_t(c.oc) * icg * kk * kk;
  std::vector<int> wq(count);
  for (int &v : wq)
    v = q(rng);
  std::ostringstream os;
  int pad = c.gemm ? 0 : c.k / 2;
  int oh = c.gemm ? 1 : (c.h + 2 * pad - c.k) / c.stride + 1;
  int ow = c.gemm ? 1 : (c.w + 2 * pad - c.k) / c.stride + 1;
  std::string inShape = c.gemm ? "1," + std::to_string(c.ic)
                               : "1," + std::to_string(c.ic) + "," +
                                     std::to_string(c.h) + "," +
                                     std::to_string(c.w);
  std::string outShape = c.gemm ? "1," + std::to_string(c.oc)
                                : "1," + std::to_string(c.oc) + "," +
                                      std::to_string(oh) + "," +
                                      std::to_string(ow);
  std::string wShape =
      c.gemm ? std::to_string(c.oc) + "," + std::to_string(c.ic)
             : std::to_string(c.oc) + "," + std::to_string(icg) + "," +
                   std::to_string(kk) + "," + std::to_string(kk);
  os << "<ir_version: 8, opset_import: [\"\" : 17]>\n"
     << "g (float[" << inShape << "] x"
     << (c.residual ? ", float[" + outShape + "] r" : "") << ") => (float["
     << outShape << "] y) <";
  std::vector<float> bias(c.oc, 0.1f);
  if (c.int8) {
    // Scales as calibration leaves them, not round ones: 0.05 * 0.01 / 0.1
    // puts a tie of the exact quotient every 200 accumulators, which no
    // calibrated model has and which keeps the epilogue's two-step
    // requantization (OneStepRequant.h).
    std::vector<float> ws(c.oc);
    for (int o = 0; o < c.oc; ++o)
      ws[o] = 0.0041f + 0.0079f * static_cast<float>((o * 37) % 101) / 101.f;
    std::vector<int> wz(c.oc, 0);
    os << "int8[" << wShape << "] w = {" << list(wq) << "}, float[" << c.oc
       << "] ws = {" << list(ws) << "}, int8[" << c.oc << "] wz = {" << list(wz)
       << "}, float xs = {0.0473}, int8 xz = {0}, float ys = "
       << "{0.0891}, int8 yz = {0}, float cs = {0.0637}, int8 cz = {0}, "
       << "float rs = {0.0719}, int8 rz = {0}, ";
  } else {
    std::vector<float> wf(count);
    for (size_t i = 0; i < count; ++i)
      wf[i] = wq[i] * 0.01f;
    os << "float[" << wShape << "] w = {" << list(wf) << "}, ";
  }
  os << "float[" << c.oc << "] b = {" << list(bias) << "}> {\n";
  std::string in = "x", weight = "w";
  if (c.int8) {
    os << "  xq = QuantizeLinear(x, xs, xz)\n  xd = DequantizeLinear(xq, xs, "
          "xz)\n  wd = DequantizeLinear <axis = 0> (w, ws, wz)\n";
    in = "xd";
    weight = "wd";
    // The residual's quantization before the conv, as an exporter orders
    // a bottleneck's shortcut.
    if (c.residual)
      os << "  rq = QuantizeLinear(r, rs, rz)\n  rd = DequantizeLinear(rq, "
            "rs, rz)\n";
  }
  std::string out = c.int8 ? "c" : "y";
  if (c.gemm)
    os << "  " << out << " = Gemm <transB = 1> (" << in << ", " << weight
       << ", b)\n";
  else
    os << "  " << out << " = Conv <kernel_shape = [" << c.k << "," << c.k
       << "], strides = [" << c.stride << "," << c.stride << "], pads = ["
       << pad << "," << pad << "," << pad << "," << pad
       << "], group = " << c.group << "> (" << in << ", " << weight << ", b)\n";
  if (c.residual) {
    os << "  cq = QuantizeLinear(c, cs, cz)\n  cd = DequantizeLinear(cq, cs, "
          "cz)\n  sum = Add(cd, rd)\n  act = Relu(sum)\n";
    out = "act";
  }
  if (c.silu) {
    os << "  sig = Sigmoid(c)\n  act = Mul(c, sig)\n";
    out = "act";
  }
  if (c.int8)
    os << "  yq = QuantizeLinear(" << out
       << ", ys, yz)\n  y = DequantizeLinear(yq, ys, yz)\n";
  os << "}\n";
  return os.str();
}

void runCase(benchmark::State &state, const Case &c, const char *target) {
  std::string dir =
      std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  std::string base = dir + "/qatc-kernel-bench-" + std::to_string(getpid());
  std::string model = base + ".onnxtext", planPath = base + ".plan";
  {
    std::ofstream f(model);
    f << onnxText(c);
  }
  std::string cmd = std::string("'") + QATC_EXECUTABLE + "' compile '" + model +
                    "' --target-cpu " + target + " -o '" + planPath +
                    "' 2>/dev/null";
  int rc = std::system(cmd.c_str());
  std::remove(model.c_str());
  std::string error;
  std::unique_ptr<qatc::rt::Plan> plan =
      rc == 0 ? qatc::rt::Plan::load(planPath, error) : nullptr;
  std::remove(planPath.c_str());
  if (!plan) {
    state.SkipWithError(rc ? "qatc compile failed" : error.c_str());
    return;
  }
  const qatc::plan::Manifest &m = plan->manifest();
  int layer = -1;
  for (size_t i = 0; i < m.layers.size(); ++i)
    if (m.layers[i].macs > 0)
      layer = i;
  if (layer < 0) {
    state.SkipWithError("no compute layer in the plan");
    return;
  }
  // Bytes 0x3f: f32 0.75 and u8 63 alike. (Bytes of 1 made every f32
  // 2.4e-38, whose products are denormal: the fp32 depthwise cases measured
  // Intel's denormal assists, 10 ms for 30 us of work.)
  std::vector<uint8_t> arenaStorage(m.arenaBytes + 128, 0x3f);
  auto *arena = reinterpret_cast<uint8_t *>(
      (reinterpret_cast<uintptr_t>(arenaStorage.data()) + 63) & ~uintptr_t(63));
  // The compute layer and the layers of the same node before it (an AMX
  // convolution's relayout), but not a layout change of the graph's NCHW
  // input, which the fp32 plan charges to its first node: a model pays it
  // once, not per convolution (it was 1.7 of the 1.9 ms the fp32 stride-2
  // depthwise case measured).
  std::vector<qatc::plan::LayerFn> fns;
  for (int i = layer; i >= 0 && m.layers[i].node == m.layers[layer].node; --i)
    if (m.layers[i].opType != "layout")
      fns.insert(fns.begin(), plan->layerFunction(i));
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (qatc::plan::LayerFn fn : fns)
      fn(arena, plan->weights(),
         qatc::plan::packShare(0, qatc::plan::kShareOne), 1);
    benchmark::ClobberMemory();
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count() /
      std::max<int64_t>(state.iterations(), 1);
  static const qatc::rt::HostPeak host = qatc::rt::measureHostPeak();
  double ghz = host.ghz;
  double ops = 2.0 * m.layers[layer].macs;
  double peak = (c.int8 ? host.int8Gops : host.fp32Gflops) * 1e9;
  state.counters["GOPS"] = ops / seconds / 1e9;
  state.counters["peak%"] = 100.0 * ops / seconds / peak;
  state.counters["GHz"] = ghz;
  state.SetLabel(m.layers[layer].kernel);
}

int registerAll() {
  bool amx = qatc::plan::hostFeatures() & qatc::plan::kFeatAMXINT8;
  for (const Case &c : kCases) {
    benchmark::RegisterBenchmark(c.name, [&c](benchmark::State &s) {
      runCase(s, c, "host");
    })->Unit(benchmark::kMicrosecond);
    if (amx && c.int8)
      benchmark::RegisterBenchmark(
          (std::string(c.name) + "/vnni").c_str(),
          [&c](benchmark::State &s) { runCase(s, c, "avx512vnni"); })
          ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}
int registered = registerAll();

} // namespace

BENCHMARK_MAIN();
