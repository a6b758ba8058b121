// Tests of the dense convolution's folded kernel rows (emitDenseConv): when
// a kernel row's taps are adjacent pixels that hold exactly the K steps, a
// row whose taps all lie inside the image is one loop of KW * K steps; a
// row reaching into the padding keeps the loop per tap, which reads the
// padding row. Tiles of 16 pixels inside one output row address them from
// the first. Windows of up to 16 int8 K steps are copied per tile into
// patches that one K loop reads. Weights of 256 KB or more: each K step prefetches a line of
// the next channel block's weights into L2 (none in the small cases); an
// f32 block of 64 channels past 768 KB becomes two of 32.
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

// 16 channels are 16 steps a tap: the per-tap loop is long enough, and a
// row has no second path (the kernel's only branches choose a tile size).
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv 16x16"
// CHECK-NOT: scf.if {{.*}} -> (vector
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

// -----

// An int8 3x3 stride-2 convolution over 8 channels (two dwords a pixel, 18
// K steps) in tiles of 16 pixels: a tile inside one output row (its first
// pixel's column plus 15 below the 20 of a row) whose kernel row lies
// inside the image reads its pixels at constant offsets from the first, 16
// bytes apart (stride 2); else each pixel is checked and addressed on its
// own.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv 16x16"
// CHECK-NOT: llvm.alloca
// CHECK: scf.for %{{.*}} = %{{.*}} to %c3_i64
// CHECK: %[[COL:.*]] = arith.remui %{{.*}}, %c20_i64
// CHECK: %[[LAST:.*]] = arith.addi %[[COL]], %c15_i64
// CHECK: arith.cmpi ult, %[[LAST]], %c20_i64
// CHECK: scf.if
// CHECK: %[[FIRST:.*]] = llvm.getelementptr %arg0
// CHECK: llvm.getelementptr %[[FIRST]][%c16_i64{{.*}}]
// CHECK: llvm.getelementptr %[[FIRST]][%c240_i64]
// CHECK: scf.for
// CHECK: llvm.x86.avx512.vpdpbusd.512
// CHECK: } else {
// CHECK: scf.if
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x8x20x40xf32>) -> tensor<1x16x10x20xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<3> : tensor<16x8x3x3xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x20x40xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x8x20x40xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x20x40xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x8x20x40xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x8x3x3xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x8x3x3xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x20x40xf32>, tensor<16x8x3x3xf32>) -> tensor<1x16x10x20xf32>
  %q2 = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x16x10x20xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x16x10x20xui8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x16x10x20xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x16x10x20xf32>
  return %y : tensor<1x16x10x20xf32>
}

// -----

// The int8 3x3 stride-2 stem over 3 channels: each tile copies its pixels'
// windows into a stack buffer of 16 patches of 48 bytes, a row inside the
// image as one 16-byte vector whose taps' 3 real channels a byte shuffle
// moves together (3 rows of 9 bytes, DenseConvSpec::compactTaps), else tap
// by tap (the padding's dword where the tap lies outside); then one K loop
// of 7 steps (27 bytes; 9 when each tap took its padded dword) reads the
// patches.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv 16x16 3-channel taps"
// CHECK: %[[BUF:.*]] = llvm.alloca %{{.*}} x !llvm.array<768 x i8>
// CHECK: scf.if
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> vector<16xi8>
// CHECK-NEXT: vector.shuffle %{{.*}} [0, 1, 2, 4, 5, 6, 8, 9, 10,
// CHECK: } else {
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> vector<4xi8>
// CHECK: llvm.getelementptr %[[BUF]][%c720_i64]
// CHECK: scf.for %{{.*}} = %{{.*}} to %c7_i64
// CHECK: llvm.x86.avx512.vpdpbusd.512
// CHECK-NOT: scf.if {{.*}} -> (vector
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x3x20x40xf32>) -> tensor<1x16x10x20xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<3> : tensor<16x3x3x3xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x3x20x40xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x3x20x40xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x3x20x40xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x3x20x40xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x3x3x3xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x3x3x3xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x3x20x40xf32>, tensor<16x3x3x3xf32>) -> tensor<1x16x10x20xf32>
  %q2 = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x16x10x20xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x16x10x20xui8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x16x10x20xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x16x10x20xf32>
  return %y : tensor<1x16x10x20xf32>
}

// -----

// 512 -> 128 channels 3x3 in f32: a block of 64 channels would be 1.2 MB
// of weights, two of them (one prefetched) more than a 2 MB L2 holds with
// the activations; blocks of 32 channels (12x32 tiles), 590 KB each.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv 12x32"
// CHECK: "llvm.intr.prefetch"
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x512x4x4xf32>) -> tensor<1x128x4x4xf32> {
  %w = onnx.Constant dense<0.25> : tensor<128x512x3x3xf32>
  %b = onnx.Constant dense<0.5> : tensor<128xf32>
  %c = onnx.Conv(%x, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x512x4x4xf32>, tensor<128x512x3x3xf32>, tensor<128xf32>) -> tensor<1x128x4x4xf32> loc("conv512")
  return %c : tensor<1x128x4x4xf32>
}
