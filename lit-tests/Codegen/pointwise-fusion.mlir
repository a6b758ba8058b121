// Tests of pointwise fusion in --qat-layer-functions: a chain of
// elementwise ops after a convolution or a matrix product runs in its
// epilogue (the layer's kernel name lists the chain), a chain no producer
// can take is one map layer, and a value used outside the chain stops it.
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx512vnni | FileCheck %s --check-prefixes=CHECK,VNNI
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=amx | FileCheck %s --check-prefix=AMX
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx2 | FileCheck %s --check-prefix=AVX2

// SiLU between an int8 convolution and the next QuantizeLinear: one layer,
// no fp32 tensor in between.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "quantize"
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}} +sigmoid+mul+quantize"
// The epilogue computes 4 pixels' 16 channels at once (64 lanes). The
// chain is quantized: exp(-x) is the short form, 2^t split by vreduceps
// rounding down (imm 9; no Cody-Waite steps) and scaled by vscalefps by
// 2^floor(t) of t itself, with no subtraction between them.
// Around a chain that rounds more than once (exp, sigmoid), the
// requantization is one FMA and the quotient by the output scale 0.1 a
// multiplication by 10. SiLU(x) is within x's range, and x within the
// accumulator's affine image, so the quotient fits int32 and the packs'
// saturation is its clamp at both ends: no minimumf / maximumf on it.
// CHECK: %[[ACC:.*]] = arith.sitofp {{.*}} : vector<64xi32> to vector<64xf32>
// CHECK: math.fma %[[ACC]], {{.*}} : vector<64xf32>
// CHECK-NOT: math.roundeven
// The conv's output stays over -14 for any input (bias 0.5, 72 weights of
// 3 at scales 0.05 and 0.01), so exp's argument is not clamped at 127.
// CHECK: %[[LOG2E:.*]] = arith.constant dense<-1.44269502> : vector<64xf32>
// CHECK-NEXT: arith.mulf {{.*}}, %[[LOG2E]] : vector<64xf32>
// CHECK-NOT: arith.minimumf
// CHECK: %[[DOWN:.*]] = arith.constant 9 : i32
// CHECK: llvm.x86.avx512.mask.reduce.ps.512"({{[^,]*}}, %[[DOWN]],
// CHECK-NOT: arith.subf
// CHECK: llvm.x86.avx512.mask.scalef.ps.512
// CHECK: %[[TEN:.*]] = arith.constant dense<1.000000e+01> : vector<64xf32>
// CHECK-NEXT: arith.mulf {{.*}}, %[[TEN]] : vector<64xf32>
// CHECK-NOT: arith.minimumf
// CHECK-NOT: arith.maximumf
// CHECK: llvm.x86.avx512.mask.cvtps2dq.512
// CHECK: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}}"{{[,}]}}
// CHECK: func.func @qatc_layer_3(
// CHECK-SAME: qatc.kernel = "nhwc-to-nchw"
// CHECK-NOT: func.func @qatc_layer_
// AVX2 takes the same short exp: t floored (vroundps), f = t - floor(t)
// exactly, and 2^floor(t) from its bits; the conv's output stays within
// (-87, 87), so t is clamped at neither end. 1 + 2^t is one FMA, and
// x * sigmoid(x) is one division of x by it (no 1 / d, no product).
// AVX2-LABEL: func.func @qatc_layer_1(
// AVX2-SAME: qatc.kernel = "int8-sign-maddubs-conv {{[0-9]+}}x{{[0-9]+}} +sigmoid+mul+quantize"
// AVX2: %[[X:.*]] = math.fma {{.*}} : vector<64xf32>
// AVX2-NOT: arith.minimumf
// AVX2-NOT: arith.maximumf
// AVX2: %[[T:.*]] = arith.mulf %[[X]], {{.*}} : vector<64xf32>
// AVX2-NEXT: %[[FL:.*]] = math.floor %[[T]] : vector<64xf32>
// AVX2-NEXT: %[[F:.*]] = arith.subf %[[T]], %[[FL]] : vector<64xf32>
// AVX2: arith.addf %[[FL]], {{.*}} : vector<64xf32>
// AVX2: %[[POW:.*]] = arith.bitcast {{.*}} : vector<64xi32> to vector<64xf32>
// AVX2: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : vector<64xf32>
// AVX2-NEXT: %[[D:.*]] = math.fma {{.*}}, %[[POW]], %[[ONE]] : vector<64xf32>
// AVX2-NEXT: %[[Y:.*]] = arith.divf %[[X]], %[[D]] : vector<64xf32>
// The quotient by the output scale stays far inside +-2^21, so it rounds by
// a magic number: y * 10 + 1.5 * 2^23 + 128 (the zero point of an int8
// tensor stored as u8) in one FMA, the integer read from the bits less
// 1.5 * 2^23's (0x4B400000): no vroundps, no vcvttps2dq.
// AVX2-NEXT: %[[MAGIC:.*]] = arith.constant dense<0x4B400080> : vector<64xf32>
// AVX2-NEXT: %[[TEN:.*]] = arith.constant dense<1.000000e+01> : vector<64xf32>
// AVX2-NEXT: %[[R:.*]] = math.fma %[[Y]], %[[TEN]], %[[MAGIC]] : vector<64xf32>
// AVX2-NEXT: %[[BITS:.*]] = arith.constant dense<1262485504> : vector<64xi32>
// AVX2-NEXT: %[[RI:.*]] = arith.bitcast %[[R]] : vector<64xf32> to vector<64xi32>
// AVX2-NEXT: arith.subi %[[RI]], %[[BITS]] : vector<64xi32>
// AVX2-NOT: llvm.x86.avx512
// AVX2: func.func @qatc_layer_2(
func.func @silu(%x: tensor<1x8x6x6xf32>) -> tensor<1x4x6x6xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %s2 = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<3> : tensor<16x8x3x3xi8>
  %ws2 = onnx.Constant dense<0.02> : tensor<4xf32>
  %wz2 = onnx.Constant dense<0> : tensor<4xi8>
  %wq2 = onnx.Constant dense<-2> : tensor<4x16x1x1xi8>
  %b = onnx.Constant dense<0.5> : tensor<16xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x8x3x3xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x8x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<16x8x3x3xf32>, tensor<16xf32>) -> tensor<1x16x6x6xf32>
  %sg = onnx.Sigmoid(%c) : (tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %m = onnx.Mul(%c, %sg) : (tensor<1x16x6x6xf32>, tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %q2 = onnx.QuantizeLinear(%m, %s2, %z) : (tensor<1x16x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x16x6x6xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %s2, %z) : (tensor<1x16x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x16x6x6xf32>
  %w2 = onnx.DequantizeLinear(%wq2, %ws2, %wz2) {axis = 0 : i64} : (tensor<4x16x1x1xi8>, tensor<4xf32>, tensor<4xi8>) -> tensor<4x16x1x1xf32>
  %y = onnx.Conv(%dq2, %w2) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x16x6x6xf32>, tensor<4x16x1x1xf32>) -> tensor<1x4x6x6xf32>
  return %y : tensor<1x4x6x6xf32>
}

// -----

// The same SiLU where the conv's output can reach -1.2e5 (weights of 127 at
// scale 0.1): exp's argument keeps its clamp at 127, which the Newton step
// of the reciprocal needs finite.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}} +sigmoid+mul+quantize"
// CHECK: %[[LOG2E:.*]] = arith.constant dense<-1.44269502> : vector<64xf32>
// CHECK-NEXT: %[[T:.*]] = arith.mulf {{.*}}, %[[LOG2E]] : vector<64xf32>
// CHECK: arith.minimumf %[[T]]
// CHECK: llvm.x86.avx512.mask.reduce.ps.512
func.func @silu_wide(%x: tensor<1x8x6x6xf32>) -> tensor<1x16x6x6xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %s2 = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.1> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<127> : tensor<16x8x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<16xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x8x3x3xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x8x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<16x8x3x3xf32>, tensor<16xf32>) -> tensor<1x16x6x6xf32>
  %sg = onnx.Sigmoid(%c) : (tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %m = onnx.Mul(%c, %sg) : (tensor<1x16x6x6xf32>, tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %q2 = onnx.QuantizeLinear(%m, %s2, %z) : (tensor<1x16x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x16x6x6xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %s2, %z) : (tensor<1x16x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x16x6x6xf32>
  return %dq2 : tensor<1x16x6x6xf32>
}

// -----

// Exp has no range rule (ChainProgram::ranges): its quotient by the output
// scale may leave int32, so the approximate quantization keeps its clamp
// above (and, the zero point being >= 0, leaves the one below to the
// packs).
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}} +exp+quantize"
// CHECK: %[[TEN:.*]] = arith.constant dense<1.000000e+01> : vector<64xf32>
// CHECK-NEXT: arith.mulf {{.*}}, %[[TEN]] : vector<64xf32>
// CHECK-NOT: arith.maximumf
// CHECK: arith.minimumf
// CHECK: llvm.x86.avx512.mask.cvtps2dq.512
func.func @exp(%x: tensor<1x8x6x6xf32>) -> tensor<1x16x6x6xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %s2 = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<3> : tensor<16x8x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<16xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x8x3x3xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x8x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<16x8x3x3xf32>, tensor<16xf32>) -> tensor<1x16x6x6xf32>
  %e = onnx.Exp(%c) : (tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %q2 = onnx.QuantizeLinear(%e, %s2, %z) : (tensor<1x16x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x16x6x6xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %s2, %z) : (tensor<1x16x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x16x6x6xf32>
  return %dq2 : tensor<1x16x6x6xf32>
}

// -----

// A SiLU whose fp32 result is a graph output keeps the exp within an ulp:
// the exponent rounded (math.roundeven) and Cody-Waite steps, no vreduceps.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}} +sigmoid+mul"
// CHECK-NOT: llvm.x86.avx512.mask.reduce.ps.512
// CHECK: math.roundeven {{.*}} : vector<64xf32>
// CHECK-NOT: llvm.x86.avx512.mask.reduce.ps.512
// CHECK: llvm.x86.avx512.mask.scalef.ps.512
// CHECK-NOT: llvm.x86.avx512.mask.reduce.ps.512
func.func @silu_out(%x: tensor<1x8x6x6xf32>) -> tensor<1x16x6x6xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<3> : tensor<16x8x3x3xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x8x3x3xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x8x3x3xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<16x8x3x3xf32>) -> tensor<1x16x6x6xf32>
  %sg = onnx.Sigmoid(%c) : (tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %m = onnx.Mul(%c, %sg) : (tensor<1x16x6x6xf32>, tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  return %m : tensor<1x16x6x6xf32>
}

// -----

// Squeeze-excitation's input: the SiLU's fp32 result is read only by a
// GlobalAveragePool and a Mul, each quantized after: the short exp.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}} +sigmoid+mul"
// CHECK-NOT: math.roundeven
// CHECK: llvm.x86.avx512.mask.reduce.ps.512
// CHECK: func.func @qatc_layer_2(
func.func @silu_se(%x: tensor<1x8x6x6xf32>, %g: tensor<1x16x1x1xf32>) -> (tensor<1x16x6x6xf32>, tensor<1x16x1x1xf32>) {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<3> : tensor<16x8x3x3xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x8x3x3xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x8x3x3xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<16x8x3x3xf32>) -> tensor<1x16x6x6xf32>
  %sg = onnx.Sigmoid(%c) : (tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %m = onnx.Mul(%c, %sg) : (tensor<1x16x6x6xf32>, tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %p = onnx.GlobalAveragePool(%m) : (tensor<1x16x6x6xf32>) -> tensor<1x16x1x1xf32>
  %qp = onnx.QuantizeLinear(%p, %s, %z) : (tensor<1x16x1x1xf32>, tensor<f32>, tensor<i8>) -> tensor<1x16x1x1xi8>
  %dqp = onnx.DequantizeLinear(%qp, %s, %z) : (tensor<1x16x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<1x16x1x1xf32>
  %gm = onnx.Mul(%g, %m) : (tensor<1x16x1x1xf32>, tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %qg = onnx.QuantizeLinear(%gm, %s, %z) : (tensor<1x16x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x16x6x6xi8>
  %y = onnx.DequantizeLinear(%qg, %s, %z) : (tensor<1x16x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x16x6x6xf32>
  return %y, %dqp : tensor<1x16x6x6xf32>, tensor<1x16x1x1xf32>
}

// -----

// GELU (Erf form) and a per-channel scale-and-shift after an fp32 matrix
// product: the Div, Erf, Add, Mul, Mul, Mul, Add run in its epilogue, the
// per-channel constants read 16 channels at a time.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv {{[0-9]+}}x{{[0-9]+}} +div+erf+add+mul+mul+mul+add"
// CHECK-NOT: func.func @qatc_layer_1(
func.func @gelu(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %w = onnx.Constant dense<0.03> : tensor<32x32xf32>
  %sq2 = onnx.Constant dense<1.41421354> : tensor<f32>
  %one = onnx.Constant dense<1.0> : tensor<f32>
  %half = onnx.Constant dense<0.5> : tensor<f32>
  %gamma = onnx.Constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<32xf32>
  %beta = onnx.Constant dense<0.25> : tensor<1x32xf32>
  %h = onnx.MatMul(%x, %w) : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
  %d = onnx.Div(%h, %sq2) : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  %e = onnx.Erf(%d) : (tensor<4x32xf32>) -> tensor<4x32xf32>
  %a = onnx.Add(%e, %one) : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  %m = onnx.Mul(%h, %a) : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %g = onnx.Mul(%m, %half) : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  %sc = onnx.Mul(%g, %gamma) : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  %y = onnx.Add(%sc, %beta) : (tensor<4x32xf32>, tensor<1x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

// Squeeze-excitation's gate: Sigmoid of the [1, C, 1, 1] gate is a layer of
// its own (another shape), the channel-broadcast Mul and the QuantizeLinear
// after it are one map layer.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "sigmoid"
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "mul+quantize"
// CHECK: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "dequantize"
func.func @gate(%x: tensor<1x8x5x5xf32>, %g: tensor<1x8x1x1xf32>) -> tensor<1x8x5x5xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %sg = onnx.Sigmoid(%g) : (tensor<1x8x1x1xf32>) -> tensor<1x8x1x1xf32>
  %m = onnx.Mul(%sg, %x) : (tensor<1x8x1x1xf32>, tensor<1x8x5x5xf32>) -> tensor<1x8x5x5xf32>
  %q = onnx.QuantizeLinear(%m, %s, %z) : (tensor<1x8x5x5xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x5x5xi8>
  %y = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x5x5xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x5x5xf32>
  return %y : tensor<1x8x5x5xf32>
}

// -----

// The convolution's result is also a graph output: it cannot be fused away,
// so the Relu after it is a layer of its own.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "nchw-to-nhwc"
// CHECK: qatc.kernel = "fp32-fma-conv {{[0-9]+}}x{{[0-9]+}}"{{[,}]}}
// CHECK: qatc.kernel = "clamp"
func.func @escapes(%x: tensor<1x4x5x5xf32>) -> (tensor<1x4x5x5xf32>, tensor<1x4x5x5xf32>) {
  %w = onnx.Constant dense<0.5> : tensor<4x4x1x1xf32>
  %c = onnx.Conv(%x, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x5x5xf32>
  %r = onnx.Relu(%c) : (tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32>
  return %c, %r : tensor<1x4x5x5xf32>, tensor<1x4x5x5xf32>
}

// -----

// A residual Add whose inputs are both quantized, the convolution's result
// read by nothing else: the conv's epilogue quantizes its result,
// dequantizes it and adds the residual (the reference's order), then the
// Relu and the Add's quantization. The second Add sums two convolutions
// (a block and its downsampling branch): it joins the later one, whose
// residual, the earlier one's result, exists by then. The conv's own
// quantization round trip stays in f32 (rounded, never converted to an
// integer); the result's quantization converts.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "quantize"
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}} +requantize+add"
// CHECK: arith.sitofp %{{.*}} : vector<64xi32> to vector<64xf32>
// CHECK: arith.divf
// CHECK: %[[MID:.*]] = math.roundeven %{{.*}} : vector<64xf32>
// CHECK: arith.mulf %[[MID]]
// CHECK: arith.sitofp %{{.*}} : vector<64xi32> to vector<64xf32>
// CHECK: arith.addf
// CHECK: arith.divf
// CHECK: llvm.x86.avx512.mask.cvtps2dq.512
// CHECK: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}}"{{[,}]}}
// CHECK: func.func @qatc_layer_3(
// CHECK-SAME: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}} +requantize+add"
// CHECK: func.func @qatc_layer_4(
// CHECK-SAME: qatc.kernel = "dequantize"
func.func @residual(%x: tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %s2 = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<8xf32>
  %wz = onnx.Constant dense<0> : tensor<8xi8>
  %wq = onnx.Constant dense<3> : tensor<8x8x3x3xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<8x8x3x3xi8>, tensor<8xf32>, tensor<8xi8>) -> tensor<8x8x3x3xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x6x6xf32>
  %cq = onnx.QuantizeLinear(%c, %s2, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %cd = onnx.DequantizeLinear(%cq, %s2, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  %a = onnx.Add(%cd, %dq) : (tensor<1x8x6x6xf32>, tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  %r = onnx.Relu(%a) : (tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  %rq = onnx.QuantizeLinear(%r, %s2, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %rd = onnx.DequantizeLinear(%rq, %s2, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  %c2 = onnx.Conv(%rd, %w) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x6x6xf32>
  %c2q = onnx.QuantizeLinear(%c2, %s2, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %c2d = onnx.DequantizeLinear(%c2q, %s2, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  %d = onnx.Conv(%rd, %w) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x6x6xf32>
  %dq2 = onnx.QuantizeLinear(%d, %s2, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %dd = onnx.DequantizeLinear(%dq2, %s2, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  %a2 = onnx.Add(%c2d, %dd) : (tensor<1x8x6x6xf32>, tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  %a2q = onnx.QuantizeLinear(%a2, %s2, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %y = onnx.DequantizeLinear(%a2q, %s2, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  return %y : tensor<1x8x6x6xf32>
}

// -----

// BatchNormalization, Relu and the next QuantizeLinear (DenseNet's norm ->
// relu -> conv input): one map layer from the f32 input (read through its
// NCHW strides) to int8.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "batchnorm+relu+quantize"
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}}"{{[,}]}}
func.func @batchnorm(%x: tensor<1x8x6x6xf32>) -> tensor<1x16x6x6xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %g = onnx.Constant dense<1.5> : tensor<8xf32>
  %b = onnx.Constant dense<0.25> : tensor<8xf32>
  %m = onnx.Constant dense<0.125> : tensor<8xf32>
  %v = onnx.Constant dense<2.0> : tensor<8xf32>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<3> : tensor<16x8x3x3xi8>
  %n = onnx.BatchNormalization(%x, %g, %b, %m, %v) {epsilon = 1.0e-05 : f32} : (tensor<1x8x6x6xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x6x6xf32>
  %r = onnx.Relu(%n) : (tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  %q = onnx.QuantizeLinear(%r, %s, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x8x3x3xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x8x3x3xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<16x8x3x3xf32>) -> tensor<1x16x6x6xf32>
  return %c : tensor<1x16x6x6xf32>
}

// -----

// A decomposed layer norm with gamma and beta (qat-layernorm-fuse makes
// it one LayerNormalization), then a Mul the pass leaves (a constant that
// varies along the row: the chain reads it from the weights by column)
// and the next QuantizeLinear: one row layer from the f32 input to int8.
// The row's 20 elements are a whole vector and a masked one of 4.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "fp32-layernorm+mul+quantize"
// Four rows at a time, each phase (the lane sums, ...) for all four: one
// row's steps depend on each other, four rows' overlap.
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// The sums add halves of the lane vector (16 -> 8 -> 4 -> 2 -> 1), not the
// 16 lanes one after another (LLVM's ordered vector.reduce.fadd).
// CHECK-NOT: vector.reduction
// CHECK: vector.extract_strided_slice {{.*}} {offsets = [8], sizes = [8], strides = [1]} : vector<16xf32> to vector<8xf32>
// CHECK: vector.extract_strided_slice {{.*}} {offsets = [1], sizes = [1], strides = [1]} : vector<2xf32> to vector<1xf32>
// CHECK-NOT: vector.reduction
// CHECK: llvm.intr.masked.store {{.*}} : vector<16xi8>, vector<16xi1> into !llvm.ptr
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "dequantize"
func.func @layernorm_quantized(%x: tensor<1x6x20xf32>) -> tensor<1x6x20xf32> {
  %two = onnx.Constant dense<2.0> : tensor<f32>
  %eps = onnx.Constant dense<1.0e-5> : tensor<f32>
  %gamma = onnx.Constant dense<1.5> : tensor<20xf32>
  %beta = onnx.Constant dense<0.25> : tensor<20xf32>
  %c = onnx.Constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0]> : tensor<20xf32>
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %m = onnx.ReduceMean(%x) {axes = array<i64: 2>} : (tensor<1x6x20xf32>) -> tensor<1x6x1xf32>
  %d = onnx.Sub(%x, %m) : (tensor<1x6x20xf32>, tensor<1x6x1xf32>) -> tensor<1x6x20xf32>
  %p = onnx.Pow(%d, %two) : (tensor<1x6x20xf32>, tensor<f32>) -> tensor<1x6x20xf32>
  %v = onnx.ReduceMean(%p) {axes = array<i64: 2>} : (tensor<1x6x20xf32>) -> tensor<1x6x1xf32>
  %ve = onnx.Add(%v, %eps) : (tensor<1x6x1xf32>, tensor<f32>) -> tensor<1x6x1xf32>
  %sd = onnx.Sqrt(%ve) : (tensor<1x6x1xf32>) -> tensor<1x6x1xf32>
  %n = onnx.Div(%d, %sd) : (tensor<1x6x20xf32>, tensor<1x6x1xf32>) -> tensor<1x6x20xf32>
  %ng = onnx.Mul(%n, %gamma) : (tensor<1x6x20xf32>, tensor<20xf32>) -> tensor<1x6x20xf32>
  %nb = onnx.Add(%ng, %beta) : (tensor<1x6x20xf32>, tensor<20xf32>) -> tensor<1x6x20xf32>
  %g = onnx.Mul(%nb, %c) : (tensor<1x6x20xf32>, tensor<20xf32>) -> tensor<1x6x20xf32>
  %q = onnx.QuantizeLinear(%g, %s, %z) : (tensor<1x6x20xf32>, tensor<f32>, tensor<i8>) -> tensor<1x6x20xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x6x20xi8>, tensor<f32>, tensor<i8>) -> tensor<1x6x20xf32>
  return %dq : tensor<1x6x20xf32>
}

// -----

// Softmax over rows of 40 (2 vectors and a masked 8) and the next
// QuantizeLinear: one layer, the rows in registers, 4 rows a step (5
// rows: 4, then the last alone), one division per row for the
// reciprocal of its sum.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "fp32-softmax 16+quantize"
// CHECK-COUNT-4: arith.divf %{{.*}} : f32
// CHECK: scf.for
// CHECK: arith.divf %{{.*}} : f32
// CHECK: llvm.intr.masked.store {{.*}} : vector<16xi8>, vector<16xi1> into !llvm.ptr
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "dequantize"
func.func @softmax_quantized(%x: tensor<1x5x40xf32>) -> tensor<1x5x40xf32> {
  %s = onnx.Constant dense<0.0078125> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %p = onnx.Softmax(%x) {axis = -1 : i64} : (tensor<1x5x40xf32>) -> tensor<1x5x40xf32>
  %q = onnx.QuantizeLinear(%p, %s, %z) : (tensor<1x5x40xf32>, tensor<f32>, tensor<i8>) -> tensor<1x5x40xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x5x40xi8>, tensor<f32>, tensor<i8>) -> tensor<1x5x40xf32>
  return %dq : tensor<1x5x40xf32>
}

// -----

// f32 ResNet blocks: the Add after a convolution, with an operand computed
// before it, runs in the convolution's epilogue before the Relu after it
// (an f32 load of the residual per 16 channels, no layer of its own). The
// second block's Add reads a convolution made after the one feeding it:
// that one cannot take the Add, the later one can.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "nchw-to-nhwc"
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv {{[0-9]+}}x{{[0-9]+}} +add +relu"
// CHECK: arith.addf {{.*}} : vector<{{[0-9]+}}xf32>
// CHECK: arith.maximumf
// CHECK: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv {{[0-9]+}}x{{[0-9]+}}"
// CHECK: func.func @qatc_layer_3(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv {{[0-9]+}}x{{[0-9]+}} +add"
// CHECK-NOT: qatc.kernel = "add
func.func @residual_f32(%x: tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32> {
  %w = onnx.Constant dense<0.01> : tensor<16x16x3x3xf32>
  %b = onnx.Constant dense<0.1> : tensor<16xf32>
  %c = onnx.Conv(%x, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x16x6x6xf32>, tensor<16x16x3x3xf32>, tensor<16xf32>) -> tensor<1x16x6x6xf32>
  %a = onnx.Add(%c, %x) : (tensor<1x16x6x6xf32>, tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %r = onnx.Relu(%a) : (tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %w1 = onnx.Constant dense<0.02> : tensor<16x16x1x1xf32>
  %c1 = onnx.Conv(%r, %w1) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x16x6x6xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x6x6xf32>
  %c2 = onnx.Conv(%r, %w1) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x16x6x6xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x6x6xf32>
  %a2 = onnx.Add(%c1, %c2) : (tensor<1x16x6x6xf32>, tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  return %a2 : tensor<1x16x6x6xf32>
}

// -----

// A transformer's projection with Q/DQ on both inputs of the residual Add
// and an f32 sum (the layer norm's input): one layer, the product's own
// quantization (one FMA) then the dequantized residual added in f32.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "quantize"
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}} +requantize+add"
// CHECK: math.fma
// CHECK: math.roundeven
// CHECK: arith.addf
// CHECK-NOT: func.func @qatc_layer_2(
func.func @projection_residual(%x: tensor<1x8x32xf32>) -> tensor<1x8x32xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.08> : tensor<f32>
  %ws = onnx.Constant dense<0.0071> : tensor<32xf32>
  %wz = onnx.Constant dense<0> : tensor<32xi8>
  %wq = onnx.Constant dense<3> : tensor<32x32xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x32xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x32xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x32xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x32xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 1 : i64} : (tensor<32x32xi8>, tensor<32xf32>, tensor<32xi8>) -> tensor<32x32xf32>
  %y = onnx.MatMul(%dq, %w) : (tensor<1x8x32xf32>, tensor<32x32xf32>) -> tensor<1x8x32xf32>
  %q2 = onnx.QuantizeLinear(%y, %so, %z) : (tensor<1x8x32xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x32xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x8x32xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x32xf32>
  %a = onnx.Add(%dq, %dq2) : (tensor<1x8x32xf32>, tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
  return %a : tensor<1x8x32xf32>
}

// -----

// An int8 convolution's GELU: the accumulator bounds the chain's input, so
// with reciprocal divisions (amx; Intel hosts) x / sqrt(2) is a product
// and two FMAs that give the division's bits (exactReciprocal), not
// vdivps; avx512vnni keeps the division. On AVX-512 erf is KB::erf: each
// coefficient picked per lane's interval by vpermps, no division.
// AMX: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}} +div+erf+add+mul+mul+quantize"
// AMX-NOT: arith.divf
// AMX: %[[Z:.*]] = arith.constant dense<0.707106769>
// AMX: %[[Q0:.*]] = arith.mulf %[[X:.*]], %[[Z]]
// AMX: %[[R:.*]] = math.fma %[[Q0]], %{{.*}}, %[[X]]
// AMX: %[[Q:.*]] = math.fma %[[R]], %{{.*}}, %[[Q0]]
// AMX: %[[L:.*]] = vector.extract_strided_slice %[[Q]] {offsets = [0], sizes = [16]
// AMX: math.absf %[[L]]
// AMX: llvm.x86.avx512.permvar.sf.512
// AMX-NOT: arith.divf
// AMX: math.copysign %{{.*}}, %[[L]]
// AMX: func.func @qatc_layer_2(
// VNNI: qatc.kernel = "vnni-conv {{[0-9]+}}x{{[0-9]+}} +div+erf+add+mul+mul+quantize"
// VNNI: arith.divf
// VNNI: llvm.x86.avx512.permvar.sf.512
// VNNI: func.func @qatc_layer_2(
// AVX2's erf is KB::erf too, 8 lanes at a time: an interval of 1/2 per
// lane (vcvttps2dq, whose NaN is an index, not poison) and 10 coefficients
// picked by the ymm vpermps, no division; MLIR's expansion (math.erf) took
// 18 vblendvps and a vdivps per 8 lanes.
// AVX2: qatc.kernel = "int8-sign-maddubs-conv {{[0-9]+}}x{{[0-9]+}} +div+erf+add+mul+mul+quantize"
// AVX2-NOT: math.erf
// AVX2: %[[H:.*]] = vector.extract_strided_slice %{{.*}} {offsets = [0], sizes = [8]
// AVX2: math.absf %[[H]] : vector<8xf32>
// AVX2: llvm.x86.avx.cvtt.ps2dq.256
// AVX2-COUNT-10: llvm.x86.avx2.permps
// AVX2: math.copysign %{{.*}}, %[[H]] : vector<8xf32>
// AVX2-NOT: math.erf
// AVX2: func.func @qatc_layer_2(
func.func @gelu_int8(%x: tensor<1x64x6x6xf32>) -> tensor<1x48x6x6xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<48xf32>
  %wz = onnx.Constant dense<0> : tensor<48xi8>
  %wq = onnx.Constant dense<3> : tensor<48x64x1x1xi8>
  %sq2 = onnx.Constant dense<1.41421354> : tensor<f32>
  %one = onnx.Constant dense<1.0> : tensor<f32>
  %half = onnx.Constant dense<0.5> : tensor<f32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x64x6x6xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x64x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<48x64x1x1xi8>, tensor<48xf32>, tensor<48xi8>) -> tensor<48x64x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x6x6xf32>, tensor<48x64x1x1xf32>) -> tensor<1x48x6x6xf32>
  %d = onnx.Div(%c, %sq2) : (tensor<1x48x6x6xf32>, tensor<f32>) -> tensor<1x48x6x6xf32>
  %e = onnx.Erf(%d) : (tensor<1x48x6x6xf32>) -> tensor<1x48x6x6xf32>
  %a = onnx.Add(%e, %one) : (tensor<1x48x6x6xf32>, tensor<f32>) -> tensor<1x48x6x6xf32>
  %m = onnx.Mul(%c, %a) : (tensor<1x48x6x6xf32>, tensor<1x48x6x6xf32>) -> tensor<1x48x6x6xf32>
  %g = onnx.Mul(%m, %half) : (tensor<1x48x6x6xf32>, tensor<f32>) -> tensor<1x48x6x6xf32>
  %q2 = onnx.QuantizeLinear(%g, %so, %z) : (tensor<1x48x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x48x6x6xi8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x48x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x48x6x6xf32>
  return %y : tensor<1x48x6x6xf32>
}
