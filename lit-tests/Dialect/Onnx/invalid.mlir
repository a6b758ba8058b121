// RUN: qatc-opt %s --split-input-file --verify-diagnostics

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{Conv input has 3 channels but the weight [4,2,3,3] with group=1 expects 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Conv(%x, %w) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_wrong_result(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{'onnx.Conv' op inferred type(s) 'tensor<1x4x6x6xf32>' are incompatible with return type(s) of operation 'tensor<1x4x8x8xf32>'}}
  %0 = onnx.Conv(%x, %w) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  return %0 : tensor<1x4x8x8xf32>
}

// -----

func.func @per_axis_length(%x: tensor<4x3xi8>, %s: tensor<3xf32>, %z: tensor<3xi8>) -> tensor<4x3xf32> {
  // expected-error @+2 {{per-axis scale has 3 elements but axis 0 of the input has size 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.DequantizeLinear(%x, %s, %z) {axis = 0 : i64} : (tensor<4x3xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @zero_point_shape(%x: tensor<4x3xi8>, %s: tensor<4xf32>, %z: tensor<i8>) -> tensor<4x3xf32> {
  // expected-error @+2 {{zero point shape [] differs from scale shape [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.DequantizeLinear(%x, %s, %z) {axis = 0 : i64} : (tensor<4x3xi8>, tensor<4xf32>, tensor<i8>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @blocked(%x: tensor<4x64xf32>, %s: tensor<4x2xf32>, %z: tensor<4x2xi8>) -> tensor<4x64xi8> {
  // expected-error @+2 {{is a blocked quantization, which qatc does not support}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.QuantizeLinear(%x, %s, %z) {axis = 1 : i64} : (tensor<4x64xf32>, tensor<4x2xf32>, tensor<4x2xi8>) -> tensor<4x64xi8>
  return %0 : tensor<4x64xi8>
}

// -----

func.func @int16_quantize(%x: tensor<4xf32>, %s: tensor<f32>, %z: tensor<i16>) -> tensor<4xi16> {
  // expected-error @+1 {{output type 'i16' is not supported (qatc quantizes to int8 or uint8)}}
  %0 = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i16>) -> tensor<4xi16>
  return %0 : tensor<4xi16>
}

// -----

func.func @int32_zero_point(%x: tensor<4xi32>, %s: tensor<f32>) -> tensor<4xf32> {
  %z = onnx.Constant dense<3> : tensor<i32>
  // expected-error @+1 {{int32 input must have a zero point of 0}}
  %0 = onnx.DequantizeLinear(%x, %s, %z) : (tensor<4xi32>, tensor<f32>, tensor<i32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @broadcast(%a: tensor<2x3xf32>, %b: tensor<2xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{shapes [2,3] and [2] are not broadcastable}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Add(%a, %b) : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @reshape_count(%a: tensor<2x3xf32>) -> tensor<7xf32> {
  // expected-error @+1 {{changes the number of elements from 6 to 7}}
  %0 = onnx.Reshape(%a) : (tensor<2x3xf32>) -> tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----

func.func @squeeze_non_unit(%a: tensor<2x3xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{Squeeze axis 0 has size 2, not 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Squeeze(%a) {axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @transpose_perm(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{Transpose perm [1,1] is not a permutation}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Transpose(%a) {perm = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @softmax_axis(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = onnx.Softmax(%a) {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @pool_window(%a: tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32> {
  // expected-error @+2 {{window of size 3 does not fit an input of size 2 with pads 0+0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.MaxPool(%a) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32>
  return %0 : tensor<1x1x1x1xf32>
}
