// Tests of how threads share a layer's work (KB::share, InnerSplit in
// StridedKernels.cpp). A thread's share is [lo, hi) of 2^16 (plan::LayerFn:
// %arg2 holds lo | hi << 32), of the items floor(lo * n / 2^16) to
// floor(hi * n / 2^16). A dense elementwise map is one loop of all its
// elements: the threads share 10 runs of 320 elements (multiples of 64,
// so no two threads write one cache line), the last run also doing the 3
// elements past the last whole vector, as one step under a mask. An AMX convolution over 36 pixels
// has row blocks of 32 and 4 pixels: the threads share 72 pixel-weights of
// work (2 x 32 + 2 x 4 over its two channel blocks), not 4 blocks by count.
// A mean over the last axis of [1, 64, 128] (a layer norm's) is a loop of
// 64 results of 128 reads each: 4 runs of 16 results. A strided map's first
// share (lo = 0, hi < 2^16: thread 0 of several) walks its items downwards
// (KB::sharedLoop), away from the next thread's.
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=amx | FileCheck %s

// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "quantize"
// CHECK: %[[LO:.*]] = arith.andi %arg2, %c4294967295_i64
// CHECK: %[[HI:.*]] = arith.shrui %arg2, %c32_i64
// CHECK: %[[PIECES:.*]] = arith.constant 10 : i64
// CHECK: %[[B:.*]] = arith.muli %[[LO]], %[[PIECES]]
// CHECK: arith.divui %[[B]], %c65536_i64
// CHECK: %[[E:.*]] = arith.divui %{{.*}}, %c65536_i64
// CHECK: %[[NOTALL:.*]] = arith.cmpi ult, %[[HI]], %{{.*}}
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[LO]], %{{.*}}
// CHECK: %[[DOWN:.*]] = arith.andi %[[FIRST]], %[[NOTALL]]
// CHECK: %[[LASTI:.*]] = arith.subi %[[E]], %{{.*}}
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[UP:.*]] = arith.addi %{{.*}}, %[[J]]
// CHECK: %[[DN:.*]] = arith.subi %[[LASTI]], %[[J]]
// CHECK: %[[I:.*]] = arith.select %[[DOWN]], %[[DN]], %[[UP]]
// CHECK: %[[PIECE:.*]] = arith.remui %[[I]], %{{.*}}
// CHECK: %[[LEN:.*]] = arith.constant 320 : i64
// CHECK: %[[LO:.*]] = arith.muli %[[PIECE]], %[[LEN]]
// CHECK: %[[FULL:.*]] = arith.constant 3056 : i64
// CHECK: %[[HI:.*]] = arith.minsi %{{.*}}, %[[FULL]]
// CHECK: scf.for %{{.*}} = %[[LO]] to %[[HI]] step %c16_i64
// CHECK: %[[LAST:.*]] = arith.cmpi eq, %[[PIECE]], %c9_i64
// CHECK: scf.if %[[LAST]]
// CHECK: llvm.intr.masked.load
// CHECK: llvm.intr.masked.store
// CHECK: func.func @qatc_layer_1(
func.func @main(%x: tensor<1x3059xf32>) -> tensor<1x3059xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x3059xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x3059xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x3059xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x3059xf32>
  return %dq : tensor<1x3059xf32>
}

// -----

// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "amx-conv 32x32 1x1 k-tiles (in place)"
// CHECK: %[[LO:.*]] = arith.andi %arg2, %c4294967295_i64
// CHECK: %[[SUM:.*]] = arith.constant 72 : i64
// CHECK: %[[T:.*]] = arith.muli %[[LO]], %[[SUM]]
// CHECK: %[[TARGET:.*]] = arith.divui %[[T]], %c65536_i64
// CHECK: arith.cmpi ult, %[[TARGET]], %c64_i64
// CHECK: %[[FIRST:.*]] = arith.minsi %{{.*}}, %c4_i64
// CHECK: scf.for %{{.*}} = %[[FIRST]] to
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x64x6x6xf32>) -> tensor<1x48x6x6xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<48xf32>
  %wz = onnx.Constant dense<0> : tensor<48xi8>
  %wq = onnx.Constant dense<3> : tensor<48x64x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x64x6x6xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x64x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<48x64x1x1xi8>, tensor<48xf32>, tensor<48xi8>) -> tensor<48x64x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x6x6xf32>, tensor<48x64x1x1xf32>) -> tensor<1x48x6x6xf32>
  %q2 = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x48x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x48x6x6xi8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x48x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x48x6x6xf32>
  return %y : tensor<1x48x6x6xf32>
}

// -----

// CHECK: qatc.kernel = "fp32-mean"
// CHECK: %[[LO:.*]] = arith.andi %arg2, %c4294967295_i64
// CHECK: %[[PIECES:.*]] = arith.constant 4 : i64
// CHECK: arith.muli %[[LO]], %[[PIECES]]
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[I:.*]] = arith.select
// CHECK: %[[PIECE:.*]] = arith.remui %[[I]], %{{.*}}
// CHECK: %[[LO:.*]] = arith.muli %[[PIECE]], %c16_i64
// CHECK: %[[HI:.*]] = arith.minsi %{{.*}}, %c64_i64
// CHECK: scf.for %{{.*}} = %[[LO]] to %[[HI]] step
func.func @main(%x: tensor<1x64x128xf32>) -> tensor<1x64x1xf32> {
  %m = onnx.ReduceMean(%x) {axes = array<i64: 2>, keepdims = 1 : i64} : (tensor<1x64x128xf32>) -> tensor<1x64x1xf32>
  return %m : tensor<1x64x1xf32>
}

// -----

// Threads meet only where a layer touches what a layer since they last met
// writes (Barriers.cpp): the two 1x1 convolutions both read the relayout
// and write their own results, so the threads run them back to back; the
// Mul reads both. A map of 64 pixels in 6-pixel tiles (11 tiles): with
// more than one thread, and at least 2 x 6 pixels per thread (a share may
// be half an equal one), each takes its range of pixels in tiles of 6 and 5
// (emitDenseConv's even split), not whole tiles of the map; a tile that
// would pass the range's end starts earlier (minsi).
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv 6x64"}
// CHECK: %[[NEED:.*]] = arith.muli %arg3, %c12_i64
// CHECK: arith.cmpi sge, %c64_i64{{.*}}, %[[NEED]]
// CHECK: arith.cmpi ult, %c1_i64{{.*}}, %arg3
// CHECK: scf.for
// CHECK: arith.select %{{.*}}, %c6_i64{{.*}}, %c5_i64
// CHECK: arith.minsi
// CHECK: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv 6x64", qatc.sync = false}
// CHECK: func.func @qatc_layer_3(
// CHECK-SAME: qatc.kernel = "mul"}
func.func @main(%x: tensor<1x64x8x8xf32>) -> tensor<1x64x8x8xf32> {
  %w = onnx.Constant dense<0.25> : tensor<64x64x1x1xf32>
  %v = onnx.Constant dense<0.5> : tensor<64x64x1x1xf32>
  %a = onnx.Conv(%x, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x8x8xf32>, tensor<64x64x1x1xf32>) -> tensor<1x64x8x8xf32>
  %b = onnx.Conv(%x, %v) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x8x8xf32>, tensor<64x64x1x1xf32>) -> tensor<1x64x8x8xf32>
  %m = onnx.Mul(%a, %b) : (tensor<1x64x8x8xf32>, tensor<1x64x8x8xf32>) -> tensor<1x64x8x8xf32>
  return %m : tensor<1x64x8x8xf32>
}

// -----

// 256 pixels are 43 tiles: each thread takes whole tiles (within 3 % of
// even), with no tile version of 5 pixels.
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv 6x64"}
// CHECK-NOT: arith.cmpi ult, %c1_i64{{.*}}, %arg3
// CHECK-NOT: arith.select %{{.*}}, %c6_i64{{.*}}, %c5_i64
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x64x16x16xf32>) -> tensor<1x64x16x16xf32> {
  %w = onnx.Constant dense<0.25> : tensor<64x64x1x1xf32>
  %a = onnx.Conv(%x, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x16x16xf32>, tensor<64x64x1x1xf32>) -> tensor<1x64x16x16xf32>
  return %a : tensor<1x64x16x16xf32>
}

// -----

// 512 -> 512 channels 3x3 in f32 over 7x7 (12x32 tiles): an even split of
// the 49 pixels would give each of 2 threads 25 in 3 overlapping tiles of
// 11, 33 pixels' work, so the threads share the 16 blocks x 5 tiles
// instead. Over 8x8 the 32 pixels a thread fit 3 tiles of 11 and 10 (33,
// within 15 %): the threads share the 6 tiles and the 64 pixels.
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv 12x32"
// CHECK: %[[LO:.*]] = arith.andi %arg2, %c4294967295_i64
// CHECK: %[[ITEMS:.*]] = arith.constant 80 : i64
// CHECK-NEXT: arith.muli %[[LO]], %[[ITEMS]]
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x512x7x7xf32>) -> tensor<1x512x7x7xf32> {
  %w = onnx.Constant dense<0.25> : tensor<512x512x3x3xf32>
  %b = onnx.Constant dense<0.5> : tensor<512xf32>
  %c = onnx.Conv(%x, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x512x7x7xf32>, tensor<512x512x3x3xf32>, tensor<512xf32>) -> tensor<1x512x7x7xf32>
  return %c : tensor<1x512x7x7xf32>
}

// -----

// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv 12x32"
// CHECK: %[[LO:.*]] = arith.andi %arg2, %c4294967295_i64
// CHECK: %[[TILES:.*]] = arith.constant 6 : i64
// CHECK-NEXT: arith.muli %[[LO]], %[[TILES]]
// CHECK: %[[PIXELS:.*]] = arith.constant 64 : i64
// CHECK-NEXT: arith.muli %[[LO]], %[[PIXELS]]
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x512x8x8xf32>) -> tensor<1x512x8x8xf32> {
  %w = onnx.Constant dense<0.25> : tensor<512x512x3x3xf32>
  %b = onnx.Constant dense<0.5> : tensor<512xf32>
  %c = onnx.Conv(%x, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x512x8x8xf32>, tensor<512x512x3x3xf32>, tensor<512xf32>) -> tensor<1x512x8x8xf32>
  return %c : tensor<1x512x8x8xf32>
}
