// Tests of the one-step requantization (OneStepRequant.h): on AVX-512 and
// AVX2 a plain int8 epilogue is one FMA by constants the lowering folded, a
// rounding conversion and the packs, where OneStepRequant proves it equal
// to the reference's two roundings for every accumulator the weights
// allow; a channel that needs it corrects one accumulator with a compare
// and a select. A u8 zero point of 128 is a sign flip of the signed packs
// (on AVX2 a vpackssdw per 8 lanes, a vpacksswb per 32). Round scales (exact
// ties every few hundred accumulators) keep the two-step form.
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx512vnni | FileCheck %s
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx2 | FileCheck %s --check-prefix=AVX2

// Calibrated scales, no exception, zero point 128.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-NOT: arith.divf
// CHECK-NOT: arith.cmpi eq, {{.*}} : vector
// CHECK: %[[Y:.*]] = arith.sitofp %{{.*}} : vector<64xi32> to vector<64xf32>
// CHECK: math.fma %[[Y]], %{{.*}}, %{{.*}} : vector<64xf32>
// CHECK-NOT: arith.divf
// CHECK: llvm.x86.avx512.mask.cvtps2dq.512
// CHECK: %[[B:.*]] = llvm.call_intrinsic "llvm.x86.avx512.packsswb.512"
// CHECK: arith.xori %[[B]]
// CHECK: func.func @qatc_layer_2(
// AVX2-LABEL: func.func @qatc_layer_1(
// AVX2-NOT: arith.divf
// AVX2: %[[Y:.*]] = arith.sitofp %{{.*}} : vector<64xi32> to vector<64xf32>
// AVX2: math.fma %[[Y]], %{{.*}}, %{{.*}} : vector<64xf32>
// AVX2-NOT: arith.divf
// AVX2: llvm.x86.avx2.packssdw
// AVX2: %[[B:.*]] = llvm.call_intrinsic "llvm.x86.avx2.packsswb"
// AVX2: arith.xori %[[B]]
// AVX2: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x64x6x6xf32>) -> tensor<1x48x6x6xf32> {
  %s = onnx.Constant dense<0.0473> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.0891> : tensor<f32>
  %zo = onnx.Constant dense<128> : tensor<ui8>
  %ws = onnx.Constant dense<0.00731> : tensor<48xf32>
  %wz = onnx.Constant dense<0> : tensor<48xi8>
  %wq = onnx.Constant dense<3> : tensor<48x64x1x1xi8>
  %b = onnx.Constant dense<0.37> : tensor<48xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<48x64x1x1xi8>, tensor<48xf32>, tensor<48xi8>) -> tensor<48x64x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x6x6xf32>, tensor<48x64x1x1xf32>, tensor<48xf32>) -> tensor<1x48x6x6xf32> loc("pointwise")
  %q2 = onnx.QuantizeLinear(%c, %so, %zo) : (tensor<1x48x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xui8>
  %y = onnx.DequantizeLinear(%q2, %so, %zo) : (tensor<1x48x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xf32>
  return %y : tensor<1x48x6x6xf32>
}

// -----

// A Relu6 (Clip) on a u8 zero point 128: its clamps (the quotient's bounds
// 0 and 67 past the zero point) commute with the rounding and the packs,
// so they apply to the stored bytes, one unsigned byte max and min per 64
// outputs instead of an f32 max and min per 16.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK: math.fma %{{.*}} : vector<64xf32>
// CHECK-NOT: arith.maximumf
// CHECK-NOT: arith.minimumf
// CHECK: llvm.x86.avx512.mask.cvtps2dq.512
// CHECK: %[[B:.*]] = llvm.call_intrinsic "llvm.x86.avx512.packsswb.512"
// CHECK: %[[U:.*]] = arith.xori %[[B]]
// CHECK: %[[LO:.*]] = arith.maxui %[[U]], %{{.*}} : vector<64xi8>
// CHECK: arith.minui %[[LO]], %{{.*}} : vector<64xi8>
// CHECK: func.func @qatc_layer_2(
// AVX2-LABEL: func.func @qatc_layer_1(
// AVX2: math.fma %{{.*}} : vector<64xf32>
// AVX2-NOT: arith.maximumf
// AVX2-NOT: arith.minimumf
// AVX2: %[[B:.*]] = llvm.call_intrinsic "llvm.x86.avx2.packsswb"
// AVX2: %[[U:.*]] = arith.xori %[[B]]
// AVX2: %[[LO:.*]] = arith.maxui %[[U]], %{{.*}} : vector<32xi8>
// AVX2: arith.minui %[[LO]], %{{.*}} : vector<32xi8>
// AVX2: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x64x6x6xf32>) -> tensor<1x48x6x6xf32> {
  %s = onnx.Constant dense<0.0473> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.0891> : tensor<f32>
  %zo = onnx.Constant dense<128> : tensor<ui8>
  %ws = onnx.Constant dense<0.00731> : tensor<48xf32>
  %wz = onnx.Constant dense<0> : tensor<48xi8>
  %wq = onnx.Constant dense<3> : tensor<48x64x1x1xi8>
  %b = onnx.Constant dense<0.37> : tensor<48xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<48x64x1x1xi8>, tensor<48xf32>, tensor<48xi8>) -> tensor<48x64x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x6x6xf32>, tensor<48x64x1x1xf32>, tensor<48xf32>) -> tensor<1x48x6x6xf32> loc("pointwise")
  %r = onnx.Clip(%c) {min = 0.0 : f32, max = 6.0 : f32} : (tensor<1x48x6x6xf32>) -> tensor<1x48x6x6xf32>
  %q2 = onnx.QuantizeLinear(%r, %so, %zo) : (tensor<1x48x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xui8>
  %y = onnx.DequantizeLinear(%q2, %so, %zo) : (tensor<1x48x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xf32>
  return %y : tensor<1x48x6x6xf32>
}

// -----

// Scales whose channels need an exception (no line through every step
// of the two-step form: 1 pair of 600 drawn), zero point 0 (no flip).
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-NOT: arith.divf
// CHECK: %[[Y:.*]] = arith.sitofp %[[ACC:.*]] : vector<64xi32> to vector<64xf32>
// CHECK: math.fma %[[Y]]
// CHECK: %[[HIT:.*]] = arith.cmpi eq, %[[ACC]], %{{.*}} : vector<64xi32>
// CHECK: arith.select %[[HIT]], %{{.*}} : vector<64xi1>, vector<64xi32>
// CHECK: llvm.x86.avx512.packuswb.512
// CHECK-NOT: arith.xori
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x64x6x6xf32>) -> tensor<1x48x6x6xf32> {
  %s = onnx.Constant dense<0.0473> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.03345356> : tensor<f32>
  %zo = onnx.Constant dense<0> : tensor<ui8>
  %ws = onnx.Constant dense<0.01003212> : tensor<48xf32>
  %wz = onnx.Constant dense<0> : tensor<48xi8>
  %wq = onnx.Constant dense<3> : tensor<48x64x1x1xi8>
  %b = onnx.Constant dense<0.37> : tensor<48xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<48x64x1x1xi8>, tensor<48xf32>, tensor<48xi8>) -> tensor<48x64x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x6x6xf32>, tensor<48x64x1x1xf32>, tensor<48xf32>) -> tensor<1x48x6x6xf32> loc("pointwise")
  %q2 = onnx.QuantizeLinear(%c, %so, %zo) : (tensor<1x48x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xui8>
  %y = onnx.DequantizeLinear(%q2, %so, %zo) : (tensor<1x48x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xf32>
  return %y : tensor<1x48x6x6xf32>
}

// -----

// Round scales: 0.05 * 0.01 / 0.1 puts a tie every 200 accumulators; two steps.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK: arith.divf
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x64x6x6xf32>) -> tensor<1x48x6x6xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %zo = onnx.Constant dense<128> : tensor<ui8>
  %ws = onnx.Constant dense<0.01> : tensor<48xf32>
  %wz = onnx.Constant dense<0> : tensor<48xi8>
  %wq = onnx.Constant dense<3> : tensor<48x64x1x1xi8>
  %b = onnx.Constant dense<0.5> : tensor<48xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<48x64x1x1xi8>, tensor<48xf32>, tensor<48xi8>) -> tensor<48x64x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x6x6xf32>, tensor<48x64x1x1xf32>, tensor<48xf32>) -> tensor<1x48x6x6xf32> loc("pointwise")
  %q2 = onnx.QuantizeLinear(%c, %so, %zo) : (tensor<1x48x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xui8>
  %y = onnx.DequantizeLinear(%q2, %so, %zo) : (tensor<1x48x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xf32>
  return %y : tensor<1x48x6x6xf32>
}

// -----

// A residual add (ResNet's bottleneck end): the conv's own quantization
// folds to an FMA, clamped and rounded in f32, and the add's requantization
// to two FMAs over the residual's bytes (OneStepAdd), proven over every pair
// of operands: no division, no dequantization.
// CHECK-LABEL: func.func @qatc_layer_2({{.*}}+requantize+add"
// CHECK-NOT: arith.divf
// CHECK: %[[Y:.*]] = arith.sitofp %{{.*}} : vector<64xi32> to vector<64xf32>
// CHECK: math.fma %[[Y]], %{{.*}}, %{{.*}} : vector<64xf32>
// CHECK: %[[U:.*]] = math.roundeven %{{.*}} : vector<64xf32>
// CHECK: %[[R:.*]] = arith.extui %{{.*}} : vector<64xi8> to vector<64xi32>
// CHECK: %[[RF:.*]] = arith.sitofp %[[R]]
// CHECK: %[[V:.*]] = math.fma %[[RF]], %{{.*}}, %{{.*}} : vector<64xf32>
// CHECK: math.fma %[[U]], %{{.*}}, %[[V]] : vector<64xf32>
// CHECK-NOT: arith.divf
// CHECK: llvm.x86.avx512.mask.cvtps2dq.512
// CHECK: llvm.x86.avx512.packuswb.512
// CHECK: func.func @qatc_layer_3(
// AVX2-LABEL: func.func @qatc_layer_2({{.*}}+requantize+add"
// AVX2-NOT: arith.divf
// AVX2: math.fma %{{.*}} : vector<64xf32>
// AVX2: %[[U:.*]] = math.roundeven %{{.*}} : vector<64xf32>
// AVX2: %[[V:.*]] = math.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<64xf32>
// AVX2: math.fma %[[U]], %{{.*}}, %[[V]] : vector<64xf32>
// AVX2-NOT: arith.divf
// AVX2: llvm.x86.avx2.packssdw
// AVX2: llvm.x86.avx2.packuswb
// AVX2: func.func @qatc_layer_3(
func.func @main(%x: tensor<1x64x6x6xf32>, %r: tensor<1x48x6x6xf32>) -> tensor<1x48x6x6xf32> {
  %s = onnx.Constant dense<0.0473> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %sr = onnx.Constant dense<0.0719> : tensor<f32>
  %sc = onnx.Constant dense<0.0637> : tensor<f32>
  %zc = onnx.Constant dense<128> : tensor<ui8>
  %so = onnx.Constant dense<0.0891> : tensor<f32>
  %ws = onnx.Constant dense<0.00731> : tensor<48xf32>
  %wz = onnx.Constant dense<0> : tensor<48xi8>
  %wq = onnx.Constant dense<3> : tensor<48x64x1x1xi8>
  %b = onnx.Constant dense<0.37> : tensor<48xf32>
  %rq = onnx.QuantizeLinear(%r, %sr, %z) : (tensor<1x48x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xui8>
  %rd = onnx.DequantizeLinear(%rq, %sr, %z) : (tensor<1x48x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<48x64x1x1xi8>, tensor<48xf32>, tensor<48xi8>) -> tensor<48x64x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x6x6xf32>, tensor<48x64x1x1xf32>, tensor<48xf32>) -> tensor<1x48x6x6xf32> loc("bottleneck")
  %cq = onnx.QuantizeLinear(%c, %sc, %zc) : (tensor<1x48x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xui8>
  %cd = onnx.DequantizeLinear(%cq, %sc, %zc) : (tensor<1x48x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xf32>
  %sum = onnx.Add(%cd, %rd) : (tensor<1x48x6x6xf32>, tensor<1x48x6x6xf32>) -> tensor<1x48x6x6xf32>
  %act = onnx.Relu(%sum) : (tensor<1x48x6x6xf32>) -> tensor<1x48x6x6xf32>
  %q2 = onnx.QuantizeLinear(%act, %so, %z) : (tensor<1x48x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xui8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x48x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xf32>
  return %y : tensor<1x48x6x6xf32>
}

// -----

// Blocks of 64 channels: a 1x1 conv with a residual add takes 4x64 tiles
// (its epilogue overlaps the next tile's K loop better than a 6x64 tile's,
// GraphLowering::tileRows), a 3x3 one keeps 6x64.
// CHECK-LABEL: func.func @qatc_layer_2({{.*}}qatc.kernel = "vnni-conv 4x64 +requantize+add"
// CHECK-LABEL: func.func @qatc_layer_3({{.*}}qatc.kernel = "vnni-conv 6x64 +requantize+add"
// AVX2-LABEL: func.func @qatc_layer_2({{.*}}+requantize+add"
func.func @main(%x: tensor<1x64x6x6xf32>, %r: tensor<1x64x6x6xf32>) -> tensor<1x64x6x6xf32> {
  %s = onnx.Constant dense<0.0473> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %sr = onnx.Constant dense<0.0719> : tensor<f32>
  %sc = onnx.Constant dense<0.0637> : tensor<f32>
  %zc = onnx.Constant dense<128> : tensor<ui8>
  %so = onnx.Constant dense<0.0891> : tensor<f32>
  %ws = onnx.Constant dense<0.00731> : tensor<64xf32>
  %wz = onnx.Constant dense<0> : tensor<64xi8>
  %wq = onnx.Constant dense<3> : tensor<64x64x1x1xi8>
  %wq3 = onnx.Constant dense<2> : tensor<64x64x3x3xi8>
  %rq = onnx.QuantizeLinear(%r, %sr, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xui8>
  %rd = onnx.DequantizeLinear(%rq, %sr, %z) : (tensor<1x64x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<64x64x1x1xi8>, tensor<64xf32>, tensor<64xi8>) -> tensor<64x64x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x6x6xf32>, tensor<64x64x1x1xf32>) -> tensor<1x64x6x6xf32>
  %cq = onnx.QuantizeLinear(%c, %sc, %zc) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xui8>
  %cd = onnx.DequantizeLinear(%cq, %sc, %zc) : (tensor<1x64x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xf32>
  %sum = onnx.Add(%cd, %rd) : (tensor<1x64x6x6xf32>, tensor<1x64x6x6xf32>) -> tensor<1x64x6x6xf32>
  %sq = onnx.QuantizeLinear(%sum, %so, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xui8>
  %sd = onnx.DequantizeLinear(%sq, %so, %z) : (tensor<1x64x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xf32>
  %w3 = onnx.DequantizeLinear(%wq3, %ws, %wz) {axis = 0 : i64} : (tensor<64x64x3x3xi8>, tensor<64xf32>, tensor<64xi8>) -> tensor<64x64x3x3xf32>
  %c3 = onnx.Conv(%sd, %w3) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x64x6x6xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x6x6xf32>
  %c3q = onnx.QuantizeLinear(%c3, %sc, %zc) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xui8>
  %c3d = onnx.DequantizeLinear(%c3q, %sc, %zc) : (tensor<1x64x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xf32>
  %sum3 = onnx.Add(%c3d, %sd) : (tensor<1x64x6x6xf32>, tensor<1x64x6x6xf32>) -> tensor<1x64x6x6xf32>
  %q3 = onnx.QuantizeLinear(%sum3, %so, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xui8>
  %y = onnx.DequantizeLinear(%q3, %so, %z) : (tensor<1x64x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xf32>
  return %y : tensor<1x64x6x6xf32>
}

// -----

// A 1x1 conv over at most 32 channels into blocks of 48 (MobileNetV2's first
// expansion) takes 4x48 tiles (GraphLowering::chooseTile); over 64 channels,
// 8x48.
// CHECK-LABEL: func.func @qatc_layer_1({{.*}}qatc.kernel = "vnni-conv 4x48"
// CHECK-LABEL: func.func @qatc_layer_2({{.*}}qatc.kernel = "vnni-conv 8x48"
func.func @main(%x: tensor<1x16x6x6xf32>) -> tensor<1x96x6x6xf32> {
  %s = onnx.Constant dense<0.0473> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.0891> : tensor<f32>
  %ws = onnx.Constant dense<0.00731> : tensor<96xf32>
  %wz = onnx.Constant dense<0> : tensor<96xi8>
  %wq = onnx.Constant dense<3> : tensor<96x16x1x1xi8>
  %wq2 = onnx.Constant dense<2> : tensor<96x96x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x16x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x16x6x6xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x16x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x16x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<96x16x1x1xi8>, tensor<96xf32>, tensor<96xi8>) -> tensor<96x16x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x16x6x6xf32>, tensor<96x16x1x1xf32>) -> tensor<1x96x6x6xf32>
  %cq = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x96x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x96x6x6xui8>
  %cd = onnx.DequantizeLinear(%cq, %so, %z) : (tensor<1x96x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x96x6x6xf32>
  %w2 = onnx.DequantizeLinear(%wq2, %ws, %wz) {axis = 0 : i64} : (tensor<96x96x1x1xi8>, tensor<96xf32>, tensor<96xi8>) -> tensor<96x96x1x1xf32>
  %c2 = onnx.Conv(%cd, %w2) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x96x6x6xf32>, tensor<96x96x1x1xf32>) -> tensor<1x96x6x6xf32>
  %c2q = onnx.QuantizeLinear(%c2, %so, %z) : (tensor<1x96x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x96x6x6xui8>
  %y = onnx.DequantizeLinear(%c2q, %so, %z) : (tensor<1x96x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x96x6x6xf32>
  return %y : tensor<1x96x6x6xf32>
}
