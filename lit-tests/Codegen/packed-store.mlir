// Tests of the int8 epilogue's store (storePacked): on AVX-512, four output
// vectors of 16 quantized i32 lanes are narrowed together by two
// vpackssdw, one vpackuswb and one vpermd, then stored 16 bytes each,
// instead of a vpmovdb each. On AVX2, two vectors at a time: a vpackssdw
// per 8 lanes, a vpackuswb and a vpermd that puts each vector's 16 bytes
// in one 128-bit lane. (Plans hold int8 activations as u8, so the second
// pack saturates unsigned.)
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx512vnni | FileCheck %s
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx2 | FileCheck %s --check-prefix=AVX2

// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK: %[[AB:.*]] = llvm.call_intrinsic "llvm.x86.avx512.packssdw.512"
// CHECK: %[[CD:.*]] = llvm.call_intrinsic "llvm.x86.avx512.packssdw.512"
// CHECK: %[[B:.*]] = llvm.call_intrinsic "llvm.x86.avx512.packuswb.512"(%[[AB]], %[[CD]])
// CHECK: %[[D:.*]] = vector.bitcast %[[B]] : vector<64xi8> to vector<16xi32>
// CHECK: vector.shuffle %[[D]], %[[D]] [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]
// CHECK-COUNT-4: llvm.intr.masked.store
// CHECK: func.func @qatc_layer_2(
// AVX2-LABEL: func.func @qatc_layer_1(
// AVX2: %[[A:.*]] = llvm.call_intrinsic "llvm.x86.avx2.packssdw"
// AVX2: %[[B:.*]] = llvm.call_intrinsic "llvm.x86.avx2.packssdw"
// AVX2: %[[P:.*]] = llvm.call_intrinsic "llvm.x86.avx2.packuswb"(%[[A]], %[[B]])
// AVX2: %[[D:.*]] = vector.bitcast %[[P]] : vector<32xi8> to vector<8xi32>
// AVX2: vector.shuffle %[[D]], %[[D]] [0, 4, 1, 5, 2, 6, 3, 7]
// AVX2-COUNT-2: llvm.intr.masked.store
// AVX2: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x64x6x6xf32>) -> tensor<1x48x6x6xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<48xf32>
  %wz = onnx.Constant dense<0> : tensor<48xi8>
  %wq = onnx.Constant dense<3> : tensor<48x64x1x1xi8>
  %b = onnx.Constant dense<0.5> : tensor<48xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<48x64x1x1xi8>, tensor<48xf32>, tensor<48xi8>) -> tensor<48x64x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x6x6xf32>, tensor<48x64x1x1xf32>, tensor<48xf32>) -> tensor<1x48x6x6xf32> loc("pointwise")
  %r = onnx.Relu(%c) : (tensor<1x48x6x6xf32>) -> tensor<1x48x6x6xf32>
  %q2 = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x48x6x6xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xui8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x48x6x6xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x48x6x6xf32>
  return %y : tensor<1x48x6x6xf32>
}

