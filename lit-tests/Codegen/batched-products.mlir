// Tests of products of two activations in --qat-layer-functions: the
// right-hand side is packed at run time (through its strides: the
// transpose is no separate copy) and the dense kernel runs per batch; the
// scale after Q.K^T runs in its epilogue. An int8 right-hand side whose
// zero point leaves s8 keeps the scalar loop. A softmax quantized for a
// product stays in its plain layout (no NHWC copy and no conversion back).
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx512vnni | FileCheck %s

// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "pack-fp32-rhs"
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-batched-matmul {{[0-9]+}}x{{[0-9]+}} +mul"
// CHECK: vector.fma
// CHECK-NOT: func.func @qatc_layer_2(
func.func @scores(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>) -> tensor<1x2x8x8xf32> {
  %kt = onnx.Transpose(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x8x16xf32>) -> tensor<1x2x16x8xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %c = onnx.Constant dense<0.25> : tensor<f32>
  %y = onnx.Mul(%s, %c) : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  return %y : tensor<1x2x8x8xf32>
}

// -----

// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "quantize"
// CHECK: qatc.kernel = "pack-int8-rhs"
// CHECK: qatc.kernel = "vnni-batched-matmul {{[0-9]+}}x{{[0-9]+}}"
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"
func.func @int8(%a: tensor<2x8x12xf32>, %b: tensor<2x12x20xf32>) -> tensor<2x8x20xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %qa = onnx.QuantizeLinear(%a, %s, %z) : (tensor<2x8x12xf32>, tensor<f32>, tensor<i8>) -> tensor<2x8x12xi8>
  %da = onnx.DequantizeLinear(%qa, %s, %z) : (tensor<2x8x12xi8>, tensor<f32>, tensor<i8>) -> tensor<2x8x12xf32>
  %qb = onnx.QuantizeLinear(%b, %s, %z) : (tensor<2x12x20xf32>, tensor<f32>, tensor<i8>) -> tensor<2x12x20xi8>
  %db = onnx.DequantizeLinear(%qb, %s, %z) : (tensor<2x12x20xi8>, tensor<f32>, tensor<i8>) -> tensor<2x12x20xf32>
  %y = onnx.MatMul(%da, %db) : (tensor<2x8x12xf32>, tensor<2x12x20xf32>) -> tensor<2x8x20xf32>
  return %y : tensor<2x8x20xf32>
}

// -----

// uint8 with zero point 3: q - 3 reaches 252, beyond s8.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK: qatc.kernel = "int8-batched-matmul"
// CHECK-NOT: pack-int8-rhs
func.func @zero_point(%a: tensor<2x8x12xf32>, %b: tensor<2x12x20xf32>) -> tensor<2x8x20xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %zu = onnx.Constant dense<3> : tensor<ui8>
  %qa = onnx.QuantizeLinear(%a, %s, %z) : (tensor<2x8x12xf32>, tensor<f32>, tensor<i8>) -> tensor<2x8x12xi8>
  %da = onnx.DequantizeLinear(%qa, %s, %z) : (tensor<2x8x12xi8>, tensor<f32>, tensor<i8>) -> tensor<2x8x12xf32>
  %qb = onnx.QuantizeLinear(%b, %s, %zu) : (tensor<2x12x20xf32>, tensor<f32>, tensor<ui8>) -> tensor<2x12x20xui8>
  %db = onnx.DequantizeLinear(%qb, %s, %zu) : (tensor<2x12x20xui8>, tensor<f32>, tensor<ui8>) -> tensor<2x12x20xf32>
  %y = onnx.MatMul(%da, %db) : (tensor<2x8x12xf32>, tensor<2x12x20xf32>) -> tensor<2x8x20xf32>
  return %y : tensor<2x8x20xf32>
}

// -----

// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "fp32-softmax"
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "quantize"
// CHECK: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "quantize"
// CHECK: func.func @qatc_layer_3(
// CHECK-SAME: qatc.kernel = "pack-int8-rhs"
// CHECK: func.func @qatc_layer_4(
// CHECK-SAME: qatc.kernel = "vnni-batched-matmul
// CHECK-NOT: func.func @qatc_layer_5(
func.func @main(%x: tensor<1x2x8x8xf32>, %v: tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %sp = onnx.Constant dense<0.0078125> : tensor<f32>
  %p = onnx.Softmax(%x) {axis = -1 : i64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %qp = onnx.QuantizeLinear(%p, %sp, %z) : (tensor<1x2x8x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x8x8xi8>
  %dp = onnx.DequantizeLinear(%qp, %sp, %z) : (tensor<1x2x8x8xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x8x8xf32>
  %qv = onnx.QuantizeLinear(%v, %s, %z) : (tensor<1x2x8x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x8x8xi8>
  %dv = onnx.DequantizeLinear(%qv, %s, %z) : (tensor<1x2x8x8xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x8x8xf32>
  %y = onnx.MatMul(%dp, %dv) : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  return %y : tensor<1x2x8x8xf32>
}

// -----

// Attention's scores, softmax and its QuantizeLinear in one layer: rows of
// 40 fit one tile (3 vectors, 8x48), so the softmax runs on the tile's
// accumulators (the scale folded into the product's epilogue first) and
// the f32 scores never go to memory. The probabilities' exponentials are
// the short 2^t form (vreduceps, vscalefps), as they are quantized.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "quantize"
// CHECK: qatc.kernel = "pack-int8-rhs"
// CHECK: qatc.kernel = "vnni-batched-matmul 8x48+softmax+quantize"
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.mask.reduce.ps.512"
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.mask.scalef.ps.512"
// CHECK-NOT: qatc.kernel = "fp32-softmax
// CHECK: qatc.kernel = "pack-int8-rhs"
// CHECK: qatc.kernel = "vnni-batched-matmul
func.func @scores_softmax(%x: tensor<2x40x16xf32>) -> tensor<2x40x16xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %sp = onnx.Constant dense<0.00390625> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %zu = onnx.Constant dense<0> : tensor<ui8>
  %c = onnx.Constant dense<0.25> : tensor<f32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<2x40x16xf32>, tensor<f32>, tensor<i8>) -> tensor<2x40x16xi8>
  %d = onnx.DequantizeLinear(%q, %s, %z) : (tensor<2x40x16xi8>, tensor<f32>, tensor<i8>) -> tensor<2x40x16xf32>
  %dt = onnx.Transpose(%d) {perm = array<i64: 0, 2, 1>} : (tensor<2x40x16xf32>) -> tensor<2x16x40xf32>
  %sc = onnx.MatMul(%d, %dt) : (tensor<2x40x16xf32>, tensor<2x16x40xf32>) -> tensor<2x40x40xf32>
  %m = onnx.Mul(%sc, %c) : (tensor<2x40x40xf32>, tensor<f32>) -> tensor<2x40x40xf32>
  %p = onnx.Softmax(%m) {axis = -1 : i64} : (tensor<2x40x40xf32>) -> tensor<2x40x40xf32>
  %qp = onnx.QuantizeLinear(%p, %sp, %zu) : (tensor<2x40x40xf32>, tensor<f32>, tensor<ui8>) -> tensor<2x40x40xui8>
  %dp = onnx.DequantizeLinear(%qp, %sp, %zu) : (tensor<2x40x40xui8>, tensor<f32>, tensor<ui8>) -> tensor<2x40x40xf32>
  %y = onnx.MatMul(%dp, %d) : (tensor<2x40x40xf32>, tensor<2x40x16xf32>) -> tensor<2x40x16xf32>
  return %y : tensor<2x40x16xf32>
}
