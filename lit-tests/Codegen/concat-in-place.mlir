// Tests of channel concatenations in --qat-layer-functions: the layers
// producing a Concat's inputs write their channels of its result in place
// (at a channel offset, with the result's channel stride), so the Concat
// is no layer; an input also read elsewhere keeps the copy.
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx512vnni | FileCheck %s

// Two convolutions of 5 and 7 channels concatenated, then read by a third.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "nchw-to-nhwc"
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv
// CHECK: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv
// CHECK: func.func @qatc_layer_3(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv
// CHECK: func.func @qatc_layer_4(
// CHECK-SAME: qatc.kernel = "nhwc-to-nchw"
// CHECK-NOT: func.func @qatc_layer_
func.func @inception(%x: tensor<1x4x6x6xf32>) -> tensor<1x3x6x6xf32> {
  %w1 = onnx.Constant dense<0.5> : tensor<5x4x1x1xf32>
  %w2 = onnx.Constant dense<0.25> : tensor<7x4x3x3xf32>
  %w3 = onnx.Constant dense<0.125> : tensor<3x12x1x1xf32>
  %a = onnx.Conv(%x, %w1) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x6x6xf32>, tensor<5x4x1x1xf32>) -> tensor<1x5x6x6xf32>
  %b = onnx.Conv(%x, %w2) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x6x6xf32>, tensor<7x4x3x3xf32>) -> tensor<1x7x6x6xf32>
  %c = onnx.Concat(%a, %b) {axis = 1 : i64} : (tensor<1x5x6x6xf32>, tensor<1x7x6x6xf32>) -> tensor<1x12x6x6xf32>
  %y = onnx.Conv(%c, %w3) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x12x6x6xf32>, tensor<3x12x1x1xf32>) -> tensor<1x3x6x6xf32>
  return %y : tensor<1x3x6x6xf32>
}

// -----

// The first convolution's result is also added to the output: it keeps a
// tensor of its own, and the Concat copies.
// CHECK-LABEL: func.func @qatc_layer_0(
// CHECK-SAME: qatc.kernel = "nchw-to-nhwc"
// CHECK: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv
// CHECK: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "fp32-fma-conv
// CHECK: func.func @qatc_layer_3(
// CHECK-SAME: qatc.kernel = "concat"
func.func @shared(%x: tensor<1x4x6x6xf32>) -> tensor<1x5x6x6xf32> {
  %w1 = onnx.Constant dense<0.5> : tensor<5x4x1x1xf32>
  %w2 = onnx.Constant dense<0.25> : tensor<7x4x3x3xf32>
  %w3 = onnx.Constant dense<0.125> : tensor<5x12x1x1xf32>
  %a = onnx.Conv(%x, %w1) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x6x6xf32>, tensor<5x4x1x1xf32>) -> tensor<1x5x6x6xf32>
  %b = onnx.Conv(%x, %w2) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x6x6xf32>, tensor<7x4x3x3xf32>) -> tensor<1x7x6x6xf32>
  %c = onnx.Concat(%a, %b) {axis = 1 : i64} : (tensor<1x5x6x6xf32>, tensor<1x7x6x6xf32>) -> tensor<1x12x6x6xf32>
  %y = onnx.Conv(%c, %w3) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x12x6x6xf32>, tensor<5x12x1x1xf32>) -> tensor<1x5x6x6xf32>
  %s = onnx.Add(%y, %a) : (tensor<1x5x6x6xf32>, tensor<1x5x6x6xf32>) -> tensor<1x5x6x6xf32>
  return %s : tensor<1x5x6x6xf32>
}
