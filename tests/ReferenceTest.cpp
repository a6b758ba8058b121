//===- ReferenceTest.cpp - the reference evaluator ------------------------===//
//
// Q/DQ semantics (qdq-rules §9 cases 1-4, per-axis, int32 bias), the GEMM
// and convolution against naive loops over many shapes, pooling corner
// cases, and input validation.
//
//===----------------------------------------------------------------------===//

#include "../compiler/Reference/Gemm.h"
#include "TestUtils.h"

#include "qatc/Reference/Evaluator.h"

#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace qatc;
using namespace qatc::ref;
using namespace qatc::test;

namespace {

/// Imports an ONNX text model and evaluates it on `inputs`.
struct TextModel {
  explicit TextModel(const std::string &text) {
    module =
        importOnnxBuffer(f.ctx, text, "test.onnxtext", /*isText=*/true, "", {});
  }
  FailureOr<std::vector<Tensor>> run(ArrayRef<Tensor> inputs,
                                     bool fp64 = false) {
    EvalOptions options;
    options.fp64 = fp64;
    return evaluate(*module, inputs, options);
  }
  ImportFixture f;
  OwningOpRef<ModuleOp> module;
};

Tensor floats(std::vector<int64_t> shape, std::vector<float> values) {
  Tensor t(DType::F32, shape);
  std::copy(values.begin(), values.end(), t.mutableData<float>());
  return t;
}

template <typename T> std::vector<T> valuesOf(const Tensor &t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numElements());
}

} // namespace

TEST(Reference, QuantizeRoundsHalfToEvenAndSaturates) {
  TextModel m(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[8] x) => (int8[8] q, uint8[8] u, float[8] d) <float s = {1.0}, int8 z = {0}, uint8 uz = {0}> {
  q = QuantizeLinear(x, s, z)
  u = QuantizeLinear(x, s, uz)
  d = DequantizeLinear(q, s, z)
})");
  ASSERT_TRUE(m.module) << m.f.diagnostics;
  auto out = m.run(
      {floats({8}, {2.5f, 3.5f, -2.5f, -3.5f, 0.5f, 1000.f, -1000.f, 126.5f})});
  ASSERT_TRUE(succeeded(out)) << m.f.diagnostics;
  EXPECT_EQ(valuesOf<int8_t>((*out)[0]),
            (std::vector<int8_t>{2, 4, -2, -4, 0, 127, -128, 126}));
  EXPECT_EQ(valuesOf<uint8_t>((*out)[1]),
            (std::vector<uint8_t>{2, 4, 0, 0, 0, 255, 0, 126}));
  EXPECT_EQ(valuesOf<float>((*out)[2]),
            (std::vector<float>{2, 4, -2, -4, 0, 127, -128, 126}));
}

TEST(Reference, QuantizeRoundsBeforeAddingAnOddZeroPoint) {
  // qdq-rules §9 case 3: rne(0.5) + 1 = 1, not rne(1.5) = 2.
  TextModel m(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (uint8[2] q) <float s = {1.0}, uint8 z = {1}> {
  q = QuantizeLinear(x, s, z)
})");
  ASSERT_TRUE(m.module) << m.f.diagnostics;
  auto out = m.run({floats({2}, {0.5f, 1.5f})});
  ASSERT_TRUE(succeeded(out));
  EXPECT_EQ(valuesOf<uint8_t>((*out)[0]), (std::vector<uint8_t>{1, 3}));
}

TEST(Reference, QuantizeWithoutZeroPointIsUint8) {
  TextModel m(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[3] x) => (uint8[3] q) <float s = {0.5}> {
  q = QuantizeLinear(x, s)
})");
  ASSERT_TRUE(m.module) << m.f.diagnostics;
  auto out = m.run({floats({3}, {-1.0f, 10.0f, 200.0f})});
  ASSERT_TRUE(succeeded(out));
  EXPECT_EQ((*out)[0].dtype(), DType::U8);
  EXPECT_EQ(valuesOf<uint8_t>((*out)[0]), (std::vector<uint8_t>{0, 20, 255}));
}

TEST(Reference, PerAxisQuantizeUsesTheScaleOfEachChannel) {
  TextModel m(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (int8[2,3] q, float[2,3] d) <float[3] s = {1.0, 0.5, 0.25}, int8[3] z = {0, 1, -1}> {
  q = QuantizeLinear <axis = -1> (x, s, z)
  d = DequantizeLinear <axis = 1> (q, s, z)
})");
  ASSERT_TRUE(m.module) << m.f.diagnostics;
  auto out = m.run({floats({2, 3}, {1, 1, 1, -2, 3, 100})});
  ASSERT_TRUE(succeeded(out)) << m.f.diagnostics;
  EXPECT_EQ(valuesOf<int8_t>((*out)[0]),
            (std::vector<int8_t>{1, 3, 3, -2, 7, 127}));
  EXPECT_EQ(valuesOf<float>((*out)[1]),
            (std::vector<float>{1, 1, 1, -2, 3, 32}));
}

TEST(Reference, DequantizeInt32Bias) {
  TextModel m(R"(<ir_version: 8, opset_import: ["" : 13]>
g (int32[3] b) => (float[3] d) <float s = {0.001}> {
  d = DequantizeLinear(b, s)
})");
  ASSERT_TRUE(m.module) << m.f.diagnostics;
  Tensor b(DType::I32, {3});
  b.mutableData<int32_t>()[0] = 1000;
  b.mutableData<int32_t>()[1] = -123456;
  b.mutableData<int32_t>()[2] = 0;
  auto out = m.run({b});
  ASSERT_TRUE(succeeded(out));
  EXPECT_EQ(valuesOf<float>((*out)[0]),
            (std::vector<float>{1000 * 0.001f, -123456 * 0.001f, 0}));
}

TEST(Reference, Fp64ModeDividesInDouble) {
  // 0.3 / 0.1 is 2.9999999999999996 in double (rounds to 3) but the float32
  // division of the float32 values rounds to exactly 3 too; pick values
  // whose float and double quotients round differently: x = 2.5 * s + tiny.
  TextModel m(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1] x) => (int8[1] q) <float s = {0.1}, int8 z = {0}> {
  q = QuantizeLinear(x, s, z)
})");
  ASSERT_TRUE(m.module) << m.f.diagnostics;
  // 0.25f / 0.1f == 2.5f exactly in float (ties to even: 2), while in double
  // 0.25f / 0.1f = 2.4999999627... (rounds to 2) -- both 2; but 0.35f:
  // float 0.35f/0.1f = 3.5f (tie -> 4), double = 3.4999999776 (-> 3).
  auto f32 = m.run({floats({1}, {0.35f})});
  auto f64 = m.run({floats({1}, {0.35f})}, /*fp64=*/true);
  ASSERT_TRUE(succeeded(f32) && succeeded(f64));
  EXPECT_EQ(valuesOf<int8_t>((*f32)[0])[0], 4);
  EXPECT_EQ(valuesOf<int8_t>((*f64)[0])[0], 3);
}

TEST(Reference, InputsAreValidatedAgainstTheGraph) {
  TextModel m(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,2] x) => (float[2,2] y) { y = Relu(x) })");
  ASSERT_TRUE(m.module);
  EXPECT_TRUE(failed(m.run({floats({4}, {1, 2, 3, 4})})));
  EXPECT_NE(m.f.diagnostics.find("test.onnxtext: graph input \"x\": error: "
                                 "expects shape 'tensor<2x2xf32>', got "
                                 "float32[4]"),
            std::string::npos)
      << m.f.diagnostics;
  Tensor ints(DType::I64, {2, 2});
  EXPECT_TRUE(failed(m.run({ints})));
  EXPECT_NE(m.f.diagnostics.find("expects 'f32' data, got int64"),
            std::string::npos)
      << m.f.diagnostics;
  EXPECT_TRUE(failed(m.run({})));
  EXPECT_NE(m.f.diagnostics.find("the model has 1 inputs but 0 were given"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// GEMM and convolution against naive loops
//===----------------------------------------------------------------------===//

template <typename T> class GemmTest : public ::testing::Test {};
using GemmTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GemmTest, GemmTypes);

TYPED_TEST(GemmTest, MatchesNaiveLoopsOnOddShapesAndTransposes) {
  using T = TypeParam;
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> dist(-1, 1);
  // Sizes around the tile and block edges (MR=6, NR=16/8, KC=256, MC=96).
  const int64_t shapes[][3] = {{1, 1, 1},    {6, 16, 1},   {7, 17, 3},
                               {13, 5, 257}, {97, 33, 64}, {200, 300, 520},
                               {5, 2100, 9}, {0, 4, 4},    {3, 3, 0}};
  for (auto &s : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool acc : {false, true}) {
          int64_t m = s[0], n = s[1], k = s[2];
          std::vector<T> a(m * k), b(k * n), c(m * n), want(m * n);
          for (auto &v : a)
            v = static_cast<T>(dist(rng));
          for (auto &v : b)
            v = static_cast<T>(dist(rng));
          for (auto &v : c)
            v = static_cast<T>(dist(rng));
          // Element (i, p) of A is at ta ? p * m + i : i * k + p.
          auto at = [&](int64_t i, int64_t p) {
            return ta ? a[p * m + i] : a[i * k + p];
          };
          auto bt = [&](int64_t p, int64_t j) {
            return tb ? b[j * k + p] : b[p * n + j];
          };
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double sum = acc ? c[i * n + j] : 0;
              for (int64_t p = 0; p < k; ++p)
                sum += static_cast<double>(at(i, p)) * bt(p, j);
              want[i * n + j] = static_cast<T>(sum);
            }
          MatView<T> av =
              ta ? MatView<T>{a.data(), 1, m} : MatView<T>{a.data(), k, 1};
          MatView<T> bv =
              tb ? MatView<T>{b.data(), 1, k} : MatView<T>{b.data(), n, 1};
          gemm<T>(m, n, k, av, bv, c.data(), n, acc);
          double tol = (sizeof(T) == 4 ? 1e-5 : 1e-12) * (k + 1);
          for (int64_t i = 0; i < m * n; ++i)
            ASSERT_NEAR(c[i], want[i], tol)
                << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta
                << " tb=" << tb << " acc=" << acc << " at " << i;
        }
}

namespace {

/// A Conv model in ONNX text with the given attributes, on random data,
/// checked against a direct 2-D convolution.
void checkConv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t m,
               int64_t kh, int64_t kw, int64_t group,
               std::array<int64_t, 2> stride, std::array<int64_t, 4> pads,
               std::array<int64_t, 2> dil, bool bias) {
  int64_t oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) / stride[0] + 1;
  int64_t ow = (w + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) / stride[1] + 1;
  int64_t cg = c / group, mg = m / group;
  std::string text = llvm::formatv(
      R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[{0},{1},{2},{3}] x, float[{4},{5},{6},{7}] wt, float[{4}] b) => (float[{0},{4},{8},{9}] y) {{
  y = Conv <group = {10}, strides = [{11}, {12}], pads = [{13}, {14}, {15}, {16}], dilations = [{17}, {18}]> (x, wt{19})
})",
      n, c, h, w, m, cg, kh, kw, oh, ow, group, stride[0], stride[1], pads[0],
      pads[1], pads[2], pads[3], dil[0], dil[1], bias ? ", b" : "");
  TextModel model(text);
  ASSERT_TRUE(model.module) << model.f.diagnostics << text;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  Tensor x(DType::F32, {n, c, h, w}), wt(DType::F32, {m, cg, kh, kw}),
      b(DType::F32, {m});
  for (Tensor *t : {&x, &wt, &b})
    for (int64_t i = 0; i < t->numElements(); ++i)
      t->mutableData<float>()[i] = dist(rng);
  auto out = model.run({x, wt, b});
  ASSERT_TRUE(succeeded(out)) << model.f.diagnostics;
  const float *xp = x.data<float>(), *wp = wt.data<float>(),
              *bp = b.data<float>(), *yp = (*out)[0].data<float>();
  for (int64_t bi = 0; bi < n; ++bi)
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          int64_t g = oc / mg;
          double sum = bias ? bp[oc] : 0;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t iy = y * stride[0] - pads[0] + ky * dil[0];
                int64_t ix = xo * stride[1] - pads[1] + kx * dil[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                  continue;
                sum += static_cast<double>(
                           xp[((bi * c + g * cg + ic) * h + iy) * w + ix]) *
                       wp[((oc * cg + ic) * kh + ky) * kw + kx];
              }
          float got = yp[((bi * m + oc) * oh + y) * ow + xo];
          ASSERT_NEAR(got, sum, 1e-4)
              << text << " at " << bi << "," << oc << "," << y << "," << xo;
        }
}

} // namespace

TEST(Reference, ConvMatchesDirectConvolution) {
  checkConv(1, 3, 9, 7, 4, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true);
  checkConv(2, 4, 8, 8, 6, 3, 2, 2, {2, 1}, {0, 1, 2, 0}, {1, 2}, false);
  checkConv(1, 8, 6, 6, 8, 3, 3, 8, {1, 1}, {1, 1, 1, 1}, {1, 1}, true); // dw
  checkConv(1, 8, 6, 6, 16, 3, 3, 8, {2, 2}, {1, 1, 1, 1}, {1, 1}, true);
  checkConv(1, 16, 5, 5, 8, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true); // 1x1
  checkConv(1, 5, 11, 4, 3, 5, 1, 1, {3, 2}, {2, 0, 1, 3}, {2, 1}, true);
}

TEST(Reference, AveragePoolDivisors) {
  // 3x3 input, 2x2 windows with stride 2, pad 1 at the start: each window
  // sees 1, 2 or 4 real values.
  TextModel m(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,3,3] x) => (float[1,1,2,2] a, float[1,1,2,2] b) {
  a = AveragePool <kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 0, 0]> (x)
  b = AveragePool <kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 0, 0], count_include_pad = 1> (x)
})");
  ASSERT_TRUE(m.module) << m.f.diagnostics;
  auto out = m.run({floats({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})});
  ASSERT_TRUE(succeeded(out)) << m.f.diagnostics;
  EXPECT_EQ(valuesOf<float>((*out)[0]), (std::vector<float>{1, 2.5, 5.5, 7}));
  EXPECT_EQ(valuesOf<float>((*out)[1]),
            (std::vector<float>{0.25, 1.25, 2.75, 7}));
}

TEST(Reference, MaxPoolCeilModeAndInt8) {
  TextModel m(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,1,5] x) => (float[1,1,1,3] y, int8[1,1,1,3] q) <float s = {1.0}, int8 z = {0}> {
  y = MaxPool <kernel_shape = [1, 2], strides = [1, 2], ceil_mode = 1> (x)
  xq = QuantizeLinear(x, s, z)
  q = MaxPool <kernel_shape = [1, 2], strides = [1, 2], ceil_mode = 1> (xq)
})");
  ASSERT_TRUE(m.module) << m.f.diagnostics;
  auto out = m.run({floats({1, 1, 1, 5}, {1, -3, 2, 5, -7})});
  ASSERT_TRUE(succeeded(out)) << m.f.diagnostics;
  EXPECT_EQ(valuesOf<float>((*out)[0]), (std::vector<float>{1, 5, -7}));
  EXPECT_EQ(valuesOf<int8_t>((*out)[1]), (std::vector<int8_t>{1, 5, -7}));
}

TEST(Reference, DumpCallbackSeesEveryNamedTensor) {
  TextModel m(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) {
  a = Relu(x)
  y = Neg(a)
})");
  ASSERT_TRUE(m.module);
  std::vector<std::string> names;
  EvalOptions options;
  options.onTensor = [&](StringRef name, const Tensor &) {
    names.push_back(name.str());
  };
  ASSERT_TRUE(succeeded(evaluate(*m.module, {floats({2}, {1, -1})}, options)));
  EXPECT_EQ(names, (std::vector<std::string>{"x", "a", "y"}));
}

TEST(Reference, HalfConversionsRoundHalfToEven) {
  EXPECT_EQ(doubleToHalf(0.1), 0x2E66);
  EXPECT_EQ(doubleToHalf(-2.0), 0xC000);
  EXPECT_EQ(doubleToHalf(65504.0), 0x7BFF);
  EXPECT_EQ(doubleToHalf(65519.0), 0x7BFF);
  EXPECT_EQ(doubleToHalf(65520.0), 0x7C00); // the tie goes to even: infinity
  EXPECT_EQ(doubleToHalf(70000.0), 0x7C00);
  EXPECT_EQ(doubleToHalf(std::ldexp(1.0, -24)), 0x0001);
  EXPECT_EQ(doubleToHalf(std::ldexp(1.0, -25)), 0x0000);    // tie -> 0
  EXPECT_EQ(doubleToHalf(std::ldexp(3.0, -25)), 0x0002);    // tie -> 2
  EXPECT_EQ(doubleToHalf(std::ldexp(1023.5, -24)), 0x0400); // carry to normal
  EXPECT_EQ(doubleToHalf(1e-8), 0x0000);
  EXPECT_EQ(doubleToHalf(1.0 + std::ldexp(1.0, -11)), 0x3C00); // tie -> even
  EXPECT_EQ(doubleToHalf(1.0 + std::ldexp(3.0, -11)), 0x3C02);
  EXPECT_TRUE(std::isnan(halfToDouble(doubleToHalf(NAN))));
  for (uint32_t h = 0; h < 0x7C00; ++h) // every finite half round-trips
    ASSERT_EQ(doubleToHalf(halfToDouble(static_cast<uint16_t>(h))), h);
}
