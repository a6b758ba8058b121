// Tests of int8 kernels without VNNI (avx2; generic where it differs).
// Dense convolutions (emitDot4Split, on avx2 where a weight is -128, as in
// the first cases: else vpmaddubsw over signed bytes, the stems below):
// each K step's dword of 4 input bytes
// is broadcast and split into i16 pairs (k0, k2) by a mask and (k1, k3) by
// a shift; the weights, packed in that order, are widened to i16 and
// multiplied by vpmaddwd, whose pair sums are then whole outputs' sums: 16
// i32 lanes per 16 outputs, with no shuffle before or after the K loop.
// Depthwise 3x3 convolutions at stride 1 (the column kernel) split each
// input column's 4 rows into i16 pairs (rows 0 and 2, 1 and 3) for
// emitDot4Rows, with i16 weights read where used: no pair sums to finish.
// Strided, dilated or 5x5 depthwise convolutions sum in f32
// (DepthwiseSpec::floatSums): the bytes converted as loaded, the sums
// started at the zero-point terms and converted to i32 for the epilogue;
// the last block of channels loads under a constant mask, the whole ones
// under none.
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx2 | FileCheck %s
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=generic | FileCheck %s --check-prefix=GENERIC

// A pointwise convolution to 32 channels: tiles of 3 pixels by 32 on avx2
// (12 ymm of sums), of 1 by 32 on generic (8 xmm).
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "int8-generic-conv 3x32"
// CHECK-NOT: vector.shuffle
// CHECK: scf.for {{.*}} -> (vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>)
// CHECK: %[[X:.*]] = vector.bitcast %{{.*}} : vector<8xi32> to vector<16xi16>
// CHECK: %[[P02:.*]] = arith.andi %[[X]], %{{.*}} : vector<16xi16>
// CHECK: %[[P13:.*]] = arith.shrui %[[X]], %{{.*}} : vector<16xi16>
// CHECK: arith.extsi %{{.*}} : vector<16xi8> to vector<16xi16>
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"(%[[P02]], %{{.*}})
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"(%[[P02]], %{{.*}})
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"(%[[P13]], %{{.*}})
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"(%[[P13]], %{{.*}})
// CHECK: arith.addi %{{.*}}, %{{.*}} : vector<16xi32>
// CHECK-NOT: vector.shuffle
// CHECK: scf.yield {{.*}} : vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>
// GENERIC-LABEL: func.func @qatc_layer_1(
// GENERIC-SAME: qatc.kernel = "int8-generic-conv 1x32"
// GENERIC: scf.for {{.*}} -> (vector<16xi32>, vector<16xi32>)
// GENERIC-COUNT-8: llvm.call_intrinsic "llvm.x86.sse2.pmadd.wd"
func.func @main(%x: tensor<1x8x4x4xf32>) -> tensor<1x32x4x4xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<3> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<32xf32>
  %wz = onnx.Constant dense<0> : tensor<32xi8>
  %wq = onnx.Constant dense<-128> : tensor<32x8x1x1xi8>
  %b = onnx.Constant dense<0.5> : tensor<32xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x8x4x4xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x4x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x8x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<32x8x1x1xi8>, tensor<32xf32>, tensor<32xi8>) -> tensor<32x8x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 1 : i64, kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x8x4x4xf32>, tensor<32x8x1x1xf32>, tensor<32xf32>) -> tensor<1x32x4x4xf32> loc("pointwise")
  %r = onnx.Relu(%c) : (tensor<1x32x4x4xf32>) -> tensor<1x32x4x4xf32>
  %q2 = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x32x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x32x4x4xui8>
  %dq2 = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x32x4x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x32x4x4xf32>
  return %dq2 : tensor<1x32x4x4xf32>
}

// -----

// 3x3 at stride 2 over 20 channels: a whole block of 16, then 4 under a
// mask.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "int8-f32sum-depthwise 4x16"
// CHECK: scf.for %{{.*}} = %{{.*}} to %c16_i64{{.*}} step %c16_i64
// CHECK: %[[C:.*]] = arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK: %[[X:.*]] = llvm.intr.masked.load %{{.*}}, %[[ALL:cst[_0-9]*]], {{.*}} -> vector<16xi8>
// CHECK: %[[XI:.*]] = arith.extui %[[X]] : vector<16xi8> to vector<16xi32>
// CHECK: %[[XF:.*]] = arith.uitofp %[[XI]] : vector<16xi32> to vector<16xf32>
// CHECK: vector.fma %[[XF]], %{{.*}}, %[[C]] : vector<16xf32>
// CHECK: arith.fptosi %{{.*}} : vector<16xf32> to vector<16xi32>
// The last 4 channels:
// CHECK: arith.cmpi slt, %{{.*}}, %{{.*}} : vector<16xi32>
// CHECK: arith.fptosi %{{.*}} : vector<16xf32> to vector<16xi32>
// generic multiplies and adds (no FMA instruction):
// GENERIC-LABEL: func.func @qatc_layer_1(
// GENERIC-SAME: qatc.kernel = "int8-f32sum-depthwise 4x16"
// GENERIC-NOT: vector.fma
// GENERIC: arith.mulf %{{.*}}, %{{.*}} : vector<16xf32>
// GENERIC: arith.addf %{{.*}}, %{{.*}} : vector<16xf32>
// GENERIC: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x20x8x8xf32>) -> tensor<1x20x4x4xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<3> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<20xf32>
  %wz = onnx.Constant dense<0> : tensor<20xi8>
  %wq = onnx.Constant dense<-127> : tensor<20x1x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<20xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x20x8x8xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x20x8x8xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x20x8x8xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x20x8x8xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<20x1x3x3xi8>, tensor<20xf32>, tensor<20xi8>) -> tensor<20x1x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 20 : i64, kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x20x8x8xf32>, tensor<20x1x3x3xf32>, tensor<20xf32>) -> tensor<1x20x4x4xf32> loc("depthwise")
  %r = onnx.Relu(%c) : (tensor<1x20x4x4xf32>) -> tensor<1x20x4x4xf32>
  %q2 = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x20x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x20x4x4xui8>
  %dq2 = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x20x4x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x20x4x4xf32>
  return %dq2 : tensor<1x20x4x4xf32>
}

// -----

// 5x5 at stride 1 sums in f32 too: its 5 rows are two groups of 4 for the
// column kernel, which splitRows does not take. A 3x3 at stride 1 keeps the
// column kernel.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "int8-f32sum-depthwise 4x16"
// CHECK: vector.fma
// CHECK-LABEL: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "int8-depthwise 2x4x8"
// GENERIC-LABEL: func.func @qatc_layer_1(
// GENERIC-SAME: qatc.kernel = "int8-f32sum-depthwise 4x16"
// GENERIC-LABEL: func.func @qatc_layer_2(
// GENERIC-SAME: qatc.kernel = "int8-depthwise 2x4x16"
func.func @main(%x: tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<3> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<-127> : tensor<16x1x5x5xi8>
  %wq3 = onnx.Constant dense<5> : tensor<16x1x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<16xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x16x8x8xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x16x8x8xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x16x8x8xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x16x8x8xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x1x5x5xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x1x5x5xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 16 : i64, kernel_shape = array<i64: 5, 5>, strides = array<i64: 1, 1>, pads = array<i64: 2, 2, 2, 2>, dilations = array<i64: 1, 1>} : (tensor<1x16x8x8xf32>, tensor<16x1x5x5xf32>, tensor<16xf32>) -> tensor<1x16x8x8xf32> loc("depthwise5x5")
  %r = onnx.Relu(%c) : (tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %q2 = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x16x8x8xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x16x8x8xui8>
  %dq2 = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x16x8x8xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x16x8x8xf32>
  %w3 = onnx.DequantizeLinear(%wq3, %ws, %wz) {axis = 0 : i64} : (tensor<16x1x3x3xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x1x3x3xf32>
  %c3 = onnx.Conv(%dq2, %w3, %b) {group = 16 : i64, kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x16x8x8xf32>, tensor<16x1x3x3xf32>, tensor<16xf32>) -> tensor<1x16x8x8xf32> loc("depthwise3x3")
  %r3 = onnx.Relu(%c3) : (tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %q3 = onnx.QuantizeLinear(%r3, %so, %z) : (tensor<1x16x8x8xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x16x8x8xui8>
  %dq3 = onnx.DequantizeLinear(%q3, %so, %z) : (tensor<1x16x8x8xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x16x8x8xf32>
  return %dq3 : tensor<1x16x8x8xf32>
}

// -----

// 3x3 at stride 1 over 20 channels: two output rows of four pixels per
// tile, each input column's rows split into pairs once.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "int8-depthwise 2x4x16"
// CHECK-NOT: vector<32xi32>
// CHECK: arith.extui %{{.*}} : vector<32xi8> to vector<32xi16>
// CHECK: arith.extui %{{.*}} : vector<32xi8> to vector<32xi16>
// CHECK: llvm.load %{{.*}} -> vector<64xi16>
// CHECK-COUNT-4: llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"
// CHECK-NOT: vector<32xi32>
// CHECK: func.func @qatc_layer_2(
// GENERIC-LABEL: func.func @qatc_layer_1(
// GENERIC-SAME: qatc.kernel = "int8-depthwise 2x4x16"
// GENERIC: llvm.call_intrinsic "llvm.x86.sse2.pmadd.wd"
func.func @main(%x: tensor<1x20x8x8xf32>) -> tensor<1x20x8x8xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<3> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<20xf32>
  %wz = onnx.Constant dense<0> : tensor<20xi8>
  %wq = onnx.Constant dense<-127> : tensor<20x1x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<20xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x20x8x8xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x20x8x8xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x20x8x8xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x20x8x8xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<20x1x3x3xi8>, tensor<20xf32>, tensor<20xi8>) -> tensor<20x1x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 20 : i64, kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x20x8x8xf32>, tensor<20x1x3x3xf32>, tensor<20xf32>) -> tensor<1x20x8x8xf32> loc("dw")
  %q2 = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x20x8x8xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x20x8x8xui8>
  %dq2 = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x20x8x8xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x20x8x8xf32>
  return %dq2 : tensor<1x20x8x8xf32>
}

// -----

// A convolution reading a Relu's quantized output at zero point 0 (bytes q
// in [0, 127]): vpmaddubsw multiplies q = stored - 128 (the top bit
// flipped) by the weights in VNNI order, vpmaddwd by ones sums each dword's
// pair sums; 2x32 tiles, 16 whole sums per two ymm. The first convolution,
// reading the signed input, keeps emitDot4Split; generic (SSE2, no
// vpmaddubsw) keeps it for both.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "int8-generic-conv 6x16"
// CHECK-LABEL: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "int8-maddubs-conv 2x32"
// CHECK-NOT: vector.shuffle
// CHECK: scf.for {{.*}} -> (vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>)
// CHECK: %[[Q:.*]] = arith.xori %{{.*}}, %{{.*}} : vector<32xi8>
// CHECK: %[[P:.*]] = llvm.call_intrinsic "llvm.x86.avx2.pmadd.ub.sw"(%[[Q]], %{{.*}}) : (vector<32xi8>, vector<32xi8>) -> vector<16xi16>
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"(%[[P]], %{{.*}}) : (vector<16xi16>, vector<16xi16>) -> vector<8xi32>
// CHECK-NOT: vector.shuffle
// CHECK: scf.yield {{.*}} : vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>
// GENERIC: qatc.kernel = "int8-generic-conv 2x16"
// GENERIC-NOT: pmadd.ub.sw
// GENERIC: qatc.kernel = "int8-generic-conv 1x32"
// GENERIC-NOT: pmadd.ub.sw
func.func @main(%x: tensor<1x8x4x4xf32>) -> tensor<1x32x4x4xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<-128> : tensor<16x8x1x1xi8>
  %ws2 = onnx.Constant dense<0.01> : tensor<32xf32>
  %wz2 = onnx.Constant dense<0> : tensor<32xi8>
  %wq2 = onnx.Constant dense<-128> : tensor<32x16x3x3xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x8x1x1xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x8x1x1xf32>
  %c = onnx.Conv(%dq, %w) {group = 1 : i64, kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x8x4x4xf32>, tensor<16x8x1x1xf32>) -> tensor<1x16x4x4xf32> loc("first")
  %r = onnx.Relu(%c) : (tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %q2 = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x16x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x16x4x4xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x16x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x16x4x4xf32>
  %w2 = onnx.DequantizeLinear(%wq2, %ws2, %wz2) {axis = 0 : i64} : (tensor<32x16x3x3xi8>, tensor<32xf32>, tensor<32xi8>) -> tensor<32x16x3x3xf32>
  %c2 = onnx.Conv(%dq2, %w2) {group = 1 : i64, kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<32x16x3x3xf32>) -> tensor<1x32x4x4xf32> loc("second")
  %q3 = onnx.QuantizeLinear(%c2, %so, %z) : (tensor<1x32x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x32x4x4xi8>
  %dq3 = onnx.DequantizeLinear(%q3, %so, %z) : (tensor<1x32x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x32x4x4xf32>
  return %dq3 : tensor<1x32x4x4xf32>
}

// -----

// 40 channels in blocks of 16: the third block's bytes pass the last
// channel. Without AVX-512 a byte store under a mask is a test and a
// store per lane, so the tile's stores test the whole mask first and store
// the 16 bytes at once where every lane is set.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "int8-generic-conv 6x16"
// CHECK: %[[ALL:.*]] = vector.reduction <and>, %{{.*}} : vector<16xi1> into i1
// CHECK-NEXT: scf.if %[[ALL]] {
// CHECK-NEXT: llvm.store %{{.*}}, %{{.*}} {alignment = 1 : i64} : vector<16xi8>, !llvm.ptr
// CHECK-NEXT: } else {
// CHECK-NEXT: llvm.intr.masked.store
func.func @main(%x: tensor<1x8x4x4xf32>) -> tensor<1x40x4x4xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<3> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<40xf32>
  %wz = onnx.Constant dense<0> : tensor<40xi8>
  %wq = onnx.Constant dense<-128> : tensor<40x8x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<40x8x1x1xi8>, tensor<40xf32>, tensor<40xi8>) -> tensor<40x8x1x1xf32>
  %c = onnx.Conv(%dq, %w) {group = 1 : i64, kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x8x4x4xf32>, tensor<40x8x1x1xf32>) -> tensor<1x40x4x4xf32>
  %q2 = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x40x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x40x4x4xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x40x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x40x4x4xf32>
  return %dq2 : tensor<1x40x4x4xf32>
}

// -----

// A 7x7 stride-2 stem over 3 channels (4-byte pixels): each tile copies its
// pixels' windows into patches of 3 bytes per tap (each kernel row's 28
// bytes shuffled to 21), and one K loop of ceil(147 / 4) = 37 steps reads
// them, where the taps in place took 49. Taps in the padding are copied
// one by one, 3 bytes apart. No weight is -128, so avx2 multiplies by
// vpmaddubsw: |q| (q = stored - 128) times the weights with q's sign.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "int8-sign-maddubs-conv 2x32 3-channel taps"
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 16, 17, 18, 20, 21, 22, 24, 25, 26, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] : vector<32xi8>, vector<32xi8>
// CHECK: %[[STEPS:.*]] = arith.constant 37 : i64
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[STEPS]]
// CHECK: %[[Q:.*]] = arith.xori %{{.*}}, %{{.*}} : vector<32xi8>
// CHECK: %[[A:.*]] = math.absi %[[Q]] : vector<32xi8>
// CHECK: %[[W:.*]] = llvm.call_intrinsic "llvm.x86.avx2.psign.b"(%{{.*}}, %[[Q]])
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pmadd.ub.sw"(%[[A]], %[[W]])
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"
// GENERIC: qatc.kernel = "int8-generic-conv 1x32 3-channel taps"
func.func @main(%x: tensor<1x3x16x16xf32>) -> tensor<1x32x8x8xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<3> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<32xf32>
  %wz = onnx.Constant dense<0> : tensor<32xi8>
  %wq = onnx.Constant dense<-127> : tensor<32x3x7x7xi8>
  %b = onnx.Constant dense<0.5> : tensor<32xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x3x16x16xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x3x16x16xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x3x16x16xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x3x16x16xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<32x3x7x7xi8>, tensor<32xf32>, tensor<32xi8>) -> tensor<32x3x7x7xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 1 : i64, kernel_shape = array<i64: 7, 7>, strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>, dilations = array<i64: 1, 1>} : (tensor<1x3x16x16xf32>, tensor<32x3x7x7xf32>, tensor<32xf32>) -> tensor<1x32x8x8xf32> loc("stem")
  %q2 = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x32x8x8xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x32x8x8xui8>
  %dq2 = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x32x8x8xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x32x8x8xf32>
  return %dq2 : tensor<1x32x8x8xf32>
}

// -----

// The same stem with a weight of -128, which vpsignb cannot negate: avx2
// keeps emitDot4Split (3x32 tiles) over the compact patches.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "int8-generic-conv 3x32 3-channel taps"
// CHECK-NOT: psign
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x3x16x16xf32>) -> tensor<1x32x8x8xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<3> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<32xf32>
  %wz = onnx.Constant dense<0> : tensor<32xi8>
  %wq = onnx.Constant dense<-128> : tensor<32x3x7x7xi8>
  %b = onnx.Constant dense<0.5> : tensor<32xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x3x16x16xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x3x16x16xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x3x16x16xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x3x16x16xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<32x3x7x7xi8>, tensor<32xf32>, tensor<32xi8>) -> tensor<32x3x7x7xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 1 : i64, kernel_shape = array<i64: 7, 7>, strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>, dilations = array<i64: 1, 1>} : (tensor<1x3x16x16xf32>, tensor<32x3x7x7xf32>, tensor<32xf32>) -> tensor<1x32x8x8xf32> loc("stem")
  %q2 = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x32x8x8xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x32x8x8xui8>
  %dq2 = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x32x8x8xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x32x8x8xf32>
  return %dq2 : tensor<1x32x8x8xf32>
}

// -----

// The Relu outputs of two convolutions, concatenated and transposed in f32
// (ShuffleNetV2's channel shuffle), then quantized: never negative
// (nonNegativeFloat), so stored at the zero point 0 or more, and the
// convolution reading them takes vpmaddubsw.
// CHECK-LABEL: func.func @qatc_layer_4(
// CHECK-SAME: qatc.kernel = "int8-maddubs-conv 2x32"
func.func @main(%x: tensor<1x8x4x4xf32>) -> tensor<1x32x4x4xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<-128> : tensor<16x8x1x1xi8>
  %ws2 = onnx.Constant dense<0.01> : tensor<32xf32>
  %wz2 = onnx.Constant dense<0> : tensor<32xi8>
  %wq2 = onnx.Constant dense<-128> : tensor<32x32x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x8x1x1xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x8x1x1xf32>
  %ca = onnx.Conv(%dq, %w) {group = 1 : i64, kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x8x4x4xf32>, tensor<16x8x1x1xf32>) -> tensor<1x16x4x4xf32> loc("a")
  %ra = onnx.Relu(%ca) : (tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %cb = onnx.Conv(%dq, %w) {group = 1 : i64, kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x8x4x4xf32>, tensor<16x8x1x1xf32>) -> tensor<1x16x4x4xf32> loc("b")
  %rb = onnx.Relu(%cb) : (tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %cat = onnx.Concat(%ra, %rb) {axis = 1 : i64} : (tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>) -> tensor<1x32x4x4xf32>
  %t = onnx.Transpose(%cat) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x32x4x4xf32>) -> tensor<1x32x4x4xf32>
  %q2 = onnx.QuantizeLinear(%t, %so, %z) : (tensor<1x32x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x32x4x4xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x32x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x32x4x4xf32>
  %w2 = onnx.DequantizeLinear(%wq2, %ws2, %wz2) {axis = 0 : i64} : (tensor<32x32x1x1xi8>, tensor<32xf32>, tensor<32xi8>) -> tensor<32x32x1x1xf32>
  %c2 = onnx.Conv(%dq2, %w2) {group = 1 : i64, kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x32x4x4xf32>, tensor<32x32x1x1xf32>) -> tensor<1x32x4x4xf32> loc("shuffled")
  %q3 = onnx.QuantizeLinear(%c2, %so, %z) : (tensor<1x32x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x32x4x4xi8>
  %dq3 = onnx.DequantizeLinear(%q3, %so, %z) : (tensor<1x32x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x32x4x4xf32>
  return %dq3 : tensor<1x32x4x4xf32>
}

// -----

// The same with one input of the concatenation not through a Relu: the
// quantized values may be negative, and the convolution keeps
// emitDot4Split.
// CHECK-LABEL: func.func @qatc_layer_4(
// CHECK-SAME: qatc.kernel = "int8-generic-conv 3x32"
func.func @main(%x: tensor<1x8x4x4xf32>) -> tensor<1x32x4x4xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<-128> : tensor<16x8x1x1xi8>
  %ws2 = onnx.Constant dense<0.01> : tensor<32xf32>
  %wz2 = onnx.Constant dense<0> : tensor<32xi8>
  %wq2 = onnx.Constant dense<-128> : tensor<32x32x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x8x1x1xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x8x1x1xf32>
  %ca = onnx.Conv(%dq, %w) {group = 1 : i64, kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x8x4x4xf32>, tensor<16x8x1x1xf32>) -> tensor<1x16x4x4xf32> loc("a")
  %ra = onnx.Relu(%ca) : (tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %cb = onnx.Conv(%dq, %w) {group = 1 : i64, kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x8x4x4xf32>, tensor<16x8x1x1xf32>) -> tensor<1x16x4x4xf32> loc("b")
  %rb = onnx.Relu(%cb) : (tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %cat = onnx.Concat(%ra, %cb) {axis = 1 : i64} : (tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>) -> tensor<1x32x4x4xf32>
  %t = onnx.Transpose(%cat) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x32x4x4xf32>) -> tensor<1x32x4x4xf32>
  %q2 = onnx.QuantizeLinear(%t, %so, %z) : (tensor<1x32x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x32x4x4xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x32x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x32x4x4xf32>
  %w2 = onnx.DequantizeLinear(%wq2, %ws2, %wz2) {axis = 0 : i64} : (tensor<32x32x1x1xi8>, tensor<32xf32>, tensor<32xi8>) -> tensor<32x32x1x1xf32>
  %c2 = onnx.Conv(%dq2, %w2) {group = 1 : i64, kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x32x4x4xf32>, tensor<32x32x1x1xf32>) -> tensor<1x32x4x4xf32> loc("shuffled")
  %q3 = onnx.QuantizeLinear(%c2, %so, %z) : (tensor<1x32x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x32x4x4xi8>
  %dq3 = onnx.DequantizeLinear(%q3, %so, %z) : (tensor<1x32x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x32x4x4xf32>
  return %dq3 : tensor<1x32x4x4xf32>
}

// -----

// Squeeze-excitation's start over a 5x5 depthwise (f32 rows): each output
// row's sums for the GlobalAveragePool, a part per row zeroed at the row's
// start and added to after each epilogue, in pixel order; the pool is then
// one layer adding the 12 rows' parts, with no layer of its own reading
// the map.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "int8-f32sum-depthwise 4x16 +sigmoid+mul +row sums"
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK-NEXT: llvm.store %[[ZERO]], %{{.*}} : vector<16xf32>, !llvm.ptr
// CHECK: %[[PART:.*]] = llvm.load %{{.*}} -> vector<16xf32>
// CHECK-COUNT-4: arith.addf
// CHECK: llvm.store %{{.*}} : vector<16xf32>, !llvm.ptr
// CHECK-NOT: qatc.kernel = "fp32-mean parts"
// CHECK-LABEL: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "fp32-mean"
func.func @main(%x: tensor<1x32x12x10xf32>) -> tensor<1x32x12x10xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<32xf32>
  %wz = onnx.Constant dense<0> : tensor<32xi8>
  %wq = onnx.Constant dense<3> : tensor<32x1x5x5xi8>
  %b = onnx.Constant dense<0.5> : tensor<32xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x32x12x10xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x32x12x10xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x32x12x10xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x32x12x10xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<32x1x5x5xi8>, tensor<32xf32>, tensor<32xi8>) -> tensor<32x1x5x5xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 32 : i64, kernel_shape = array<i64: 5, 5>, strides = array<i64: 1, 1>, pads = array<i64: 2, 2, 2, 2>, dilations = array<i64: 1, 1>} : (tensor<1x32x12x10xf32>, tensor<32x1x5x5xf32>, tensor<32xf32>) -> tensor<1x32x12x10xf32> loc("depthwise")
  %sg = onnx.Sigmoid(%c) : (tensor<1x32x12x10xf32>) -> tensor<1x32x12x10xf32>
  %y = onnx.Mul(%c, %sg) : (tensor<1x32x12x10xf32>, tensor<1x32x12x10xf32>) -> tensor<1x32x12x10xf32>
  %m = onnx.GlobalAveragePool(%y) : (tensor<1x32x12x10xf32>) -> tensor<1x32x1x1xf32>
  %g = onnx.Sigmoid(%m) : (tensor<1x32x1x1xf32>) -> tensor<1x32x1x1xf32>
  %e = onnx.Mul(%y, %g) : (tensor<1x32x12x10xf32>, tensor<1x32x1x1xf32>) -> tensor<1x32x12x10xf32>
  %oq = onnx.QuantizeLinear(%e, %so, %z) : (tensor<1x32x12x10xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x32x12x10xui8>
  %o = onnx.DequantizeLinear(%oq, %so, %z) : (tensor<1x32x12x10xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x32x12x10xf32>
  return %o : tensor<1x32x12x10xf32>
}
