// Tests of the strided maps' byte stores (emitLaneMap): a quantized NCHW
// image becomes NHWC int8 data, channels 4 bytes apart (the channel
// stride). On AVX-512 a step quantizes 16 pixels of each of the 3 planes,
// interleaves them in registers into 4-byte slots and stores the 64 bytes
// under a mask of each slot's first 3; one plane is widened to i32 slots
// and stored under a mask of their first bytes; not 16 scalar stores a
// plane. AVX2 has no byte-masked store and keeps the scalar ones. A float
// image's 3 planes to NHWC f32 (no channel padding) interleave into one
// store of 48 floats; the 8 pixels past the last 16 are one more step
// under masks.
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx512vnni | FileCheck %s
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx2 | FileCheck %s --check-prefix=AVX2

// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "quantize"
// CHECK: scf.for %{{.*}} = %{{.*}} to %c320_i64 step %c16_i64
// CHECK: %[[V:.*]] = vector.shuffle %{{.*}}, %{{.*}} [0, 16, 32, 48, 1, 17, 33, 49,
// CHECK: %[[M:.*]] = arith.constant dense<[true, true, true, false, true, true, true, false,
// CHECK: llvm.intr.masked.store %[[V]], %{{.*}}, %[[M]] {alignment = 1 : i32} : vector<64xi8>, vector<64xi1> into !llvm.ptr
// CHECK: func.func @qatc_layer_1(
// AVX2-LABEL: func.func @qatc_layer_0(
// AVX2-NOT: llvm.intr.masked.store
// AVX2: func.func @qatc_layer_1(
func.func @main(%x: tensor<1x3x8x40xf32>) -> tensor<1x8x8x40xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<8xf32>
  %wz = onnx.Constant dense<0> : tensor<8xi8>
  %wq = onnx.Constant dense<3> : tensor<8x3x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x3x8x40xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x3x8x40xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x3x8x40xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x3x8x40xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<8x3x1x1xi8>, tensor<8xf32>, tensor<8xi8>) -> tensor<8x3x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x40xf32>, tensor<8x3x1x1xf32>) -> tensor<1x8x8x40xf32>
  %q2 = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x8x8x40xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x8x8x40xui8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x8x8x40xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x8x8x40xf32>
  return %y : tensor<1x8x8x40xf32>
}

// -----

// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "nchw-to-nhwc"
// CHECK: scf.for %{{.*}} = %{{.*}} to %c288_i64 step %c16_i64
// CHECK: %[[W:.*]] = vector.shuffle %{{.*}}, %{{.*}} [0, 16, 32, 1, 17, 33, 2, 18, 34,
// CHECK: llvm.store %[[W]], %{{.*}} : vector<48xf32>
// CHECK: llvm.intr.masked.load
// CHECK: llvm.intr.masked.load
// CHECK: llvm.intr.masked.load
// CHECK: %[[T:.*]] = vector.shuffle
// CHECK: llvm.intr.masked.store %[[T]], %{{.*}}, %{{.*}} : vector<48xf32>, vector<48xi1>
// CHECK: func.func @qatc_layer_1(
// AVX2-LABEL: func.func @qatc_layer_0(
// AVX2-NOT: vector<48xf32>
// AVX2: func.func @qatc_layer_1(
func.func @main(%x: tensor<1x3x8x37xf32>) -> tensor<1x8x8x37xf32> {
  %w = onnx.Constant dense<0.25> : tensor<8x3x1x1xf32>
  %c = onnx.Conv(%x, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x37xf32>, tensor<8x3x1x1xf32>) -> tensor<1x8x8x37xf32>
  return %c : tensor<1x8x8x37xf32>
}

// -----

// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "quantize"
// CHECK: %[[W:.*]] = arith.extui %{{.*}} : vector<16xi8> to vector<16xi32>
// CHECK: %[[B:.*]] = vector.bitcast %[[W]] : vector<16xi32> to vector<64xi8>
// CHECK: %[[M:.*]] = arith.constant dense<[true, false, false, false, true, false, false, false,
// CHECK: llvm.intr.masked.store %[[B]], %{{.*}}, %[[M]] {alignment = 1 : i32} : vector<64xi8>, vector<64xi1> into !llvm.ptr
// CHECK: func.func @qatc_layer_1(
// AVX2-LABEL: func.func @qatc_layer_0(
// AVX2-NOT: llvm.intr.masked.store
// AVX2: func.func @qatc_layer_1(
func.func @main(%x: tensor<1x1x8x40xf32>) -> tensor<1x8x8x40xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<8xf32>
  %wz = onnx.Constant dense<0> : tensor<8xi8>
  %wq = onnx.Constant dense<3> : tensor<8x1x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x1x8x40xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x1x8x40xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x1x8x40xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x1x8x40xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<8x1x1x1xi8>, tensor<8xf32>, tensor<8xi8>) -> tensor<8x1x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x8x40xf32>, tensor<8x1x1x1xf32>) -> tensor<1x8x8x40xf32>
  %q2 = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x8x8x40xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x8x8x40xui8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x8x8x40xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x8x8x40xf32>
  return %y : tensor<1x8x8x40xf32>
}
