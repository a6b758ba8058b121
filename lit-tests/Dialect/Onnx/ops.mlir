// RUN: qatc-opt %s | FileCheck %s
// RUN: qatc-opt %s | qatc-opt | FileCheck %s
// RUN: qatc-opt %s --mlir-print-op-generic | qatc-opt | FileCheck %s

// CHECK-LABEL: func.func @qdq_conv
func.func @qdq_conv(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x4x4xf32> {
  // CHECK-DAG: %[[S:.*]] = onnx.Constant dense<1.250000e-01> : tensor<f32>
  // CHECK-DAG: %[[Z:.*]] = onnx.Constant dense<0> : tensor<i8>
  %s = onnx.Constant dense<0.125> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125, 1.0]> : tensor<4xf32>
  %wz = onnx.Constant dense<0> : tensor<4xi8>
  %wq = onnx.Constant dense<1> : tensor<4x3x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<4xf32>
  // CHECK: %[[Q:.*]] = onnx.QuantizeLinear(%{{.*}}, %[[S]], %[[Z]]) : (tensor<1x3x8x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x8x8xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) {axis = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x8x8xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) {axis = 1 : i64} : (tensor<1x3x8x8xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x8x8xf32>
  // CHECK: onnx.DequantizeLinear(%{{.*}}) {axis = 0 : i64} : (tensor<4x3x3x3xi8>, tensor<4xf32>, tensor<4xi8>) -> tensor<4x3x3x3xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<4x3x3x3xi8>, tensor<4xf32>, tensor<4xi8>) -> tensor<4x3x3x3xf32>
  // CHECK: onnx.Conv
  // CHECK-SAME: -> tensor<1x4x4x4xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
  return %c : tensor<1x4x4x4xf32>
}

// CHECK-LABEL: func.func @uint8_default
func.func @uint8_default(%x: tensor<2xf32>, %s: tensor<f32>) -> tensor<2xui8> {
  // CHECK: onnx.QuantizeLinear(%{{.*}}, %{{.*}}) : (tensor<2xf32>, tensor<f32>) -> tensor<2xui8>
  %q = onnx.QuantizeLinear(%x, %s) : (tensor<2xf32>, tensor<f32>) -> tensor<2xui8>
  return %q : tensor<2xui8>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // CHECK: onnx.Add(%{{.*}}, %{{.*}}) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = onnx.Add(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = onnx.Relu(%0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Clip(%{{.*}}) {max = 6.000000e+00 : f32, min = 0.000000e+00 : f32}
  %2 = onnx.Clip(%1) {min = 0.0 : f32, max = 6.0 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = onnx.HardSigmoid(%2) {alpha = 0.2 : f32, beta = 0.5 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = onnx.Softmax(%3) {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = onnx.Pow(%4, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %5 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<1x4x6xf32>) -> (tensor<24x1xf32>, tensor<1x2x6xf32>, tensor<6x4x1xf32>) {
  // CHECK: onnx.Reshape(%{{.*}}) : (tensor<1x4x6xf32>) -> tensor<24x1xf32>
  %0 = onnx.Reshape(%x) : (tensor<1x4x6xf32>) -> tensor<24x1xf32>
  // CHECK: onnx.Split(%{{.*}}) {axis = 1 : i64, split = array<i64: 2, 2>} : (tensor<1x4x6xf32>) -> (tensor<1x2x6xf32>, tensor<1x2x6xf32>)
  %1:2 = onnx.Split(%x) {axis = 1 : i64, split = array<i64: 2, 2>} : (tensor<1x4x6xf32>) -> (tensor<1x2x6xf32>, tensor<1x2x6xf32>)
  %2 = onnx.Transpose(%x) {perm = array<i64: 2, 1, 0>} : (tensor<1x4x6xf32>) -> tensor<6x4x1xf32>
  return %0, %1#1, %2 : tensor<24x1xf32>, tensor<1x2x6xf32>, tensor<6x4x1xf32>
}

// CHECK-LABEL: func.func @unsupported
func.func @unsupported(%x: tensor<2xf32>) -> tensor<*xf32> {
  // CHECK: onnx.Unsupported(%{{.*}}) {domain = "", onnx_attributes = {mode = "x"}, op_type = "TopK"} : (tensor<2xf32>) -> tensor<*xf32>
  %0 = onnx.Unsupported(%x) {op_type = "TopK", domain = "", onnx_attributes = {mode = "x"}} : (tensor<2xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}
