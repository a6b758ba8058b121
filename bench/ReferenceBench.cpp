//===- ReferenceBench.cpp - benchmarks of the reference evaluator ---------===//
//
// The GEMM behind Conv/Gemm/MatMul at the shapes ResNet-50 uses. Reports
// GFLOP/s; the whole-model time comes from bench/eval_resnet50.sh.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

using namespace qatc::ref;

template <typename T> static void BM_Gemm(benchmark::State &state) {
  int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<T> a(m * k), b(k * n), c(m * n);
  for (auto &v : a)
    v = dist(rng);
  for (auto &v : b)
    v = dist(rng);
  for (auto _ : state) {
    gemm<T>(m, n, k, {a.data(), k, 1}, {b.data(), n, 1}, c.data(), n, false);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
}

// (M = output channels, N = output pixels, K = input channels x kernel).
#define SHAPES                                                                 \
  ->Args({64, 3136, 576})                                                      \
      ->Args({256, 3136, 64})                                                  \
      ->Args({128, 784, 1152})                                                 \
      ->Args({512, 196, 2304})                                                 \
      ->Args({2048, 49, 512})                                                  \
      ->Args({1000, 1, 2048})
BENCHMARK_TEMPLATE(BM_Gemm, float) SHAPES;
BENCHMARK_TEMPLATE(BM_Gemm, double)->Args({64, 3136, 576});

BENCHMARK_MAIN();
