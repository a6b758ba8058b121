// Tests of the dense convolution's folded kernel rows (emitDenseConv): when
// a kernel row's taps are adjacent pixels that hold exactly the K steps, a
// row whose taps all lie inside the image is one loop of KW * K steps; a
// row reaching into the padding keeps the loop per tap, which reads the
// padding row. Weights of 1 MB or more: each K step prefetches a line of
// the next channel block's weights into L2 (none in the small cases).
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx512vnni | FileCheck %s

// The 7x7 stride-2 stem over 3 channels: 7 * 3 = 21 steps per row, else 7
// taps of 3.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv 16x16"
// CHECK: scf.for %[[KH:.*]] = %{{.*}} to %c7_i64
// CHECK: scf.if %{{.*}} -> (vector<16xf32>
// CHECK: %[[ROW:.*]] = arith.constant 21 : i64
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[ROW]]
// CHECK: vector.fma
// CHECK: } else {
// CHECK: %[[KW:.*]] = arith.constant 7 : i64
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[KW]]
// CHECK: %[[STEPS:.*]] = arith.constant 3 : i64
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[STEPS]]
// CHECK: vector.fma
// CHECK-NOT: llvm.intr.prefetch
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x3x16x16xf32>) -> tensor<1x8x8x8xf32> {
  %w = onnx.Constant dense<0.25> : tensor<8x3x7x7xf32>
  %b = onnx.Constant dense<0.5> : tensor<8xf32>
  %c = onnx.Conv(%x, %w, %b) {kernel_shape = array<i64: 7, 7>, strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>, dilations = array<i64: 1, 1>} : (tensor<1x3x16x16xf32>, tensor<8x3x7x7xf32>, tensor<8xf32>) -> tensor<1x8x8x8xf32> loc("stem")
  return %c : tensor<1x8x8x8xf32>
}

// -----

// 16 channels are 16 steps a tap: the per-tap loop is long enough, and the
// kernel has no second path.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv 16x16"
// CHECK-NOT: scf.if
// CHECK-NOT: llvm.intr.prefetch
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32> {
  %w = onnx.Constant dense<0.25> : tensor<16x16x3x3xf32>
  %b = onnx.Constant dense<0.5> : tensor<16xf32>
  %c = onnx.Conv(%x, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x16x8x8xf32>, tensor<16x16x3x3xf32>, tensor<16xf32>) -> tensor<1x16x8x8xf32> loc("conv16")
  return %c : tensor<1x16x8x8xf32>
}

// -----

// 256 -> 128 channels 3x3: 1.2 MB of weights in two blocks of 64 channels,
// three tiles of 6 pixels. Each tile prefetches its third of the next
// block (clamped to the last), one line per K step, into L2 (hint 2).
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv 6x64"
// CHECK: arith.minsi
// CHECK: scf.for
// CHECK: "llvm.intr.prefetch"(%{{.*}}) <{cache = 1 : i32, hint = 2 : i32, rw = 0 : i32}>
// CHECK: vector.fma
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x256x4x4xf32>) -> tensor<1x128x4x4xf32> {
  %w = onnx.Constant dense<0.25> : tensor<128x256x3x3xf32>
  %b = onnx.Constant dense<0.5> : tensor<128xf32>
  %c = onnx.Conv(%x, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x256x4x4xf32>, tensor<128x256x3x3xf32>, tensor<128xf32>) -> tensor<1x128x4x4xf32> loc("conv256")
  return %c : tensor<1x128x4x4xf32>
}
