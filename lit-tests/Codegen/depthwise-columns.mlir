// Tests of the int8 depthwise column kernel (emitDepthwiseColumns): a band
// row outside the image points at the padding plane (a whole row of the
// zero point), so no tap checks its row; a tile whose columns all lie inside
// the image loads each row's 16 bytes at the row's pointer plus an offset,
// with no select, and only the tiles at a row's ends select the padding
// for their columns (at compile time where the column is known then).
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx512vnni | FileCheck %s
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx512vnni --qat-kernels-to-llvm | FileCheck %s --check-prefix=LLVM
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx2 | FileCheck %s --check-prefix=AVX2
//
// With AVX2's 16 registers a band is two output rows only where no chain
// is fused: a chain's epilogue (SiLU here) takes one row at a time. Such
// bands over a multiple of 8 channels go in blocks of 8 (halfBlocks): the
// two carried columns' row pairs are 4 ymm of i16, each row's 8 bytes are
// loaded, each vpmaddwd makes 8 sums, and each epilogue vector stores two
// pixels' 8 bytes.
// AVX2-LABEL: func.func @qatc_layer_1(
// AVX2-SAME: qatc.kernel = "int8-depthwise 2x4x8"
// AVX2: scf.for {{.*}} -> (vector<16xi16>, vector<16xi16>, vector<16xi16>, vector<16xi16>)
// AVX2: llvm.load {{.*}} -> vector<8xi8>
// AVX2: "llvm.x86.avx2.pmadd.wd"({{.*}}) : (vector<16xi16>, vector<16xi16>) -> vector<8xi32>
// AVX2: llvm.store {{.*}} : vector<8xi8>, !llvm.ptr
// AVX2: qatc.kernel = "int8-depthwise 2x4x16"
// AVX2: qatc.kernel = "int8-depthwise 2x4x8"
// AVX2: qatc.kernel = "int8-depthwise 4x16 +sigmoid+mul +row sums"

// 16 channels (one whole block) on a 12x10 map: two whole tiles of 4
// pixels and a tail of 2 per row.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-depthwise 2x4x16"
// First the layer's constants into L2, a line at a time, before the work
// items' loop.
// CHECK: scf.for
// CHECK: "llvm.intr.prefetch"({{.*}}) <{cache = 1 : i32, hint = 2 : i32, rw = 0 : i32}>
// CHECK: scf.for
// The band's 4 rows: the row's pixels or the padding plane.
// CHECK: arith.select %{{.*}}, %{{.*}}, %[[PAD:[0-9]+]] : !llvm.ptr
// CHECK-COUNT-3: arith.select %{{.*}}, %{{.*}}, %[[PAD]] : !llvm.ptr
// Column -1, carried into the first tile: the padding, known here.
// CHECK-COUNT-4: llvm.load %[[PAD]] {{.*}} -> vector<16xi8>
// CHECK: scf.for {{.*}} -> (vector<16xi32>, vector<16xi32>)
// CHECK: scf.if {{.*}} -> (vector<16xi32>, vector<16xi32>) {
// CHECK-NOT: arith.select {{.*}} : !llvm.ptr
// CHECK-COUNT-4: llvm.load %{{.*}} -> vector<16xi8>
// CHECK-NOT: arith.select {{.*}} : !llvm.ptr
// CHECK: } else {
// CHECK-COUNT-4: arith.select %{{.*}}, %{{.*}}, %[[PAD]] : !llvm.ptr
// The tail (pixels 8 and 9) reads column 10, the padding: no select.
// CHECK: scf.if %{{.*}} {
// CHECK-NOT: arith.select {{.*}} : !llvm.ptr
// CHECK-COUNT-4: llvm.load %[[PAD]] {{.*}} -> vector<16xi8>
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x16x12x10xf32>) -> tensor<1x16x12x10xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<3> : tensor<16x1x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<16xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x16x12x10xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x16x12x10xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x16x12x10xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x16x12x10xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x1x3x3xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x1x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 16 : i64, kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x16x12x10xf32>, tensor<16x1x3x3xf32>, tensor<16xf32>) -> tensor<1x16x12x10xf32> loc("depthwise")
  %r = onnx.Relu(%c) : (tensor<1x16x12x10xf32>) -> tensor<1x16x12x10xf32>
  %oq = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x16x12x10xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x16x12x10xui8>
  %o = onnx.DequantizeLinear(%oq, %so, %z) : (tensor<1x16x12x10xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x16x12x10xf32>
  return %o : tensor<1x16x12x10xf32>
}

// -----

// 17 channels: a block of 16 with plain loads, one of 1 under a constant
// mask. Lowered to the LLVM dialect, every masked load keeps its i1 mask
// (with masked loads for both blocks, MLIR 19's block merging inside
// convert-vector-to-llvm gave one an i32 vector when scf had already
// become blocks).
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-depthwise 2x4x16"
// LLVM-LABEL: llvm.func @qatc_layer_1(
// LLVM: llvm.intr.masked.load %{{.*}}, %{{.*}}, %{{.*}} {{.*}} : (!llvm.ptr, vector<16xi1>, vector<16xi8>) -> vector<16xi8>
// LLVM-NOT: vector<16xi32>, vector<16xi8>) -> vector<16xi8>
// LLVM: llvm.func @qatc_layer_2(
func.func @main(%x: tensor<1x17x10x9xf32>) -> tensor<1x17x10x9xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<17xf32>
  %wz = onnx.Constant dense<0> : tensor<17xi8>
  %wq = onnx.Constant dense<3> : tensor<17x1x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<17xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x17x10x9xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x17x10x9xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x17x10x9xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x17x10x9xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<17x1x3x3xi8>, tensor<17xf32>, tensor<17xi8>) -> tensor<17x1x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 17 : i64, kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x17x10x9xf32>, tensor<17x1x3x3xf32>, tensor<17xf32>) -> tensor<1x17x10x9xf32> loc("depthwise17")
  %r = onnx.Relu(%c) : (tensor<1x17x10x9xf32>) -> tensor<1x17x10x9xf32>
  %oq = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x17x10x9xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x17x10x9xui8>
  %o = onnx.DequantizeLinear(%oq, %so, %z) : (tensor<1x17x10x9xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x17x10x9xf32>
  return %o : tensor<1x17x10x9xf32>
}

// -----

// 112 channels: a whole block of 64 (AVX-512), one of 32, then one of 16. The wide
// block loads each row's 64 bytes and interleaves 4 rows by in-lane
// unpacks (bytes, then words), carries 2 columns of 4 vectors into each
// tile of 2 pixels, and stores each pixel's 64 channels whole after the
// in-lane packs, which undo the unpacks' order: no 16-byte store.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-depthwise 2x2x64"
// CHECK: llvm.load %{{.*}} -> vector<64xi8>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 64, 1, 65, 2, 66, 3, 67, 4, 68, 5, 69, 6, 70, 7, 71, 16, 80,
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 32, 1, 33, 2, 34, 3, 35, 8, 40,
// CHECK: scf.for {{.*}} step %{{.*}} iter_args({{.*}}) -> (vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>)
// CHECK-NOT: vector<16xi8>, !llvm.ptr
// CHECK: llvm.x86.avx512.packuswb.512
// CHECK-NEXT: llvm.store %{{.*}} : vector<64xi8>, !llvm.ptr
// The block of 32: 32-byte rows, two in a zmm, one vpermt2d and one vpshufb
// per 16 channels; two vectors per carried column, in channel order.
// CHECK: scf.for {{.*}} -> (vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>)
// CHECK: llvm.load %{{.*}} -> vector<32xi8>
// CHECK: llvm.x86.avx512.vpermi2var.d.512
// CHECK: llvm.x86.avx512.pshuf.b.512
// The block of 16: 16-byte rows, one vector per carried column.
// CHECK: scf.for {{.*}} -> (vector<16xi32>, vector<16xi32>)
// CHECK: llvm.load %{{.*}} -> vector<16xi8>
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x112x6x9xf32>) -> tensor<1x112x6x9xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<112xf32>
  %wz = onnx.Constant dense<0> : tensor<112xi8>
  %wq = onnx.Constant dense<3> : tensor<112x1x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<112xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x112x6x9xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x112x6x9xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x112x6x9xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x112x6x9xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<112x1x3x3xi8>, tensor<112xf32>, tensor<112xi8>) -> tensor<112x1x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 112 : i64, kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x112x6x9xf32>, tensor<112x1x3x3xf32>, tensor<112xf32>) -> tensor<1x112x6x9xf32> loc("depthwise112")
  %r = onnx.Relu(%c) : (tensor<1x112x6x9xf32>) -> tensor<1x112x6x9xf32>
  %oq = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x112x6x9xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x112x6x9xui8>
  %o = onnx.DequantizeLinear(%oq, %so, %z) : (tensor<1x112x6x9xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x112x6x9xf32>
  return %o : tensor<1x112x6x9xf32>
}

// -----

// Squeeze-excitation's start: the SiLU result (f32) is read by a
// GlobalAveragePool and by the gating Mul. The depthwise layer sums each
// band's pixels as it stores them, carried from tile to tile in registers
// (a sum per row after the 2 carried columns), and stores one vector of
// sums per band and block: the rows' sums added. The pool is then one
// layer adding the 6 bands' sums, with no layer of its own reading the map.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-depthwise 2x4x16 +sigmoid+mul +row sums"
// CHECK: scf.for {{.*}} -> (vector<16xi32>, vector<16xi32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-4: arith.addf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK: %[[SUMS:.*]] = arith.addf %{{.*}}#2, %{{.*}}#3 : vector<16xf32>
// CHECK: llvm.store %[[SUMS]], %{{.*}} : vector<16xf32>, !llvm.ptr
// CHECK-NOT: qatc.kernel = "fp32-mean parts"
// CHECK-LABEL: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "fp32-mean"
func.func @main(%x: tensor<1x32x12x10xf32>) -> tensor<1x32x12x10xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<32xf32>
  %wz = onnx.Constant dense<0> : tensor<32xi8>
  %wq = onnx.Constant dense<3> : tensor<32x1x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<32xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x32x12x10xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x32x12x10xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x32x12x10xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x32x12x10xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<32x1x3x3xi8>, tensor<32xf32>, tensor<32xi8>) -> tensor<32x1x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 32 : i64, kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x32x12x10xf32>, tensor<32x1x3x3xf32>, tensor<32xf32>) -> tensor<1x32x12x10xf32> loc("depthwise")
  %sg = onnx.Sigmoid(%c) : (tensor<1x32x12x10xf32>) -> tensor<1x32x12x10xf32>
  %y = onnx.Mul(%c, %sg) : (tensor<1x32x12x10xf32>, tensor<1x32x12x10xf32>) -> tensor<1x32x12x10xf32>
  %m = onnx.GlobalAveragePool(%y) : (tensor<1x32x12x10xf32>) -> tensor<1x32x1x1xf32>
  %g = onnx.Sigmoid(%m) : (tensor<1x32x1x1xf32>) -> tensor<1x32x1x1xf32>
  %e = onnx.Mul(%y, %g) : (tensor<1x32x12x10xf32>, tensor<1x32x1x1xf32>) -> tensor<1x32x12x10xf32>
  %oq = onnx.QuantizeLinear(%e, %so, %z) : (tensor<1x32x12x10xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x32x12x10xui8>
  %o = onnx.DequantizeLinear(%oq, %so, %z) : (tensor<1x32x12x10xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x32x12x10xf32>
  return %o : tensor<1x32x12x10xf32>
}
