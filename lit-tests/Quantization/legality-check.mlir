// Tests of --qat-legality-check: every refusal (an error at the ONNX node),
// the reduction-axis warnings (qdq-rules §9 cases 14-17), and legal graphs
// that must pass silently. The TensorRT-compatible mode (--trt-compat) has
// its own part, since what it refuses is legal in the generic mode.
//
// RUN: rm -rf %t && split-file %s %t
// RUN: qatc-opt %t/generic.mlir --split-input-file --qat-legality-check -verify-diagnostics | FileCheck %s
// RUN: qatc-opt %t/trt.mlir --split-input-file --qat-legality-check=trt-compat=true -verify-diagnostics | FileCheck %s --check-prefix=TRT
// The TensorRT refusals are legal Q/DQ in the generic mode (the zero scale
// of @trt_generic_refusal_still_reported stays refused).
// RUN: not qatc-opt %t/trt.mlir --split-input-file --qat-legality-check 2>/dev/null | FileCheck %s --check-prefix=GEN
// The driver names the ONNX node of every refusal, and reports all of them.
// RUN: not qatc compile %t/named.mlir --emit=qat --trt-compat 2>&1 | FileCheck %s --check-prefix=NAMED
// uint8 itself is refused in TRT mode, whatever the zero point.
// RUN: qatc-opt %t/trt-uint8.mlir --qat-legality-check=trt-compat=true -verify-diagnostics

//--- generic.mlir

// A scale computed at run time (a function argument) cannot be compiled.
func.func @scale_not_constant(%x: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xi8> {
  %z = onnx.Constant dense<0> : tensor<i8>
  // expected-error @+1 {{QuantizeLinear scale must be a constant (an initializer); a scale computed at run time cannot be compiled}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  return %q : tensor<4xi8>
}

// -----

func.func @zero_point_not_constant(%q: tensor<4xi8>, %z: tensor<i8>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  // expected-error @+1 {{DequantizeLinear zero point must be a constant}}
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

func.func @scale_zero(%x: tensor<4xf32>) -> tensor<4xi8> {
  %s = onnx.Constant dense<0.0> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  // expected-error @+1 {{QuantizeLinear scale is 0.000000e+00; scales must be finite and positive}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  return %q : tensor<4xi8>
}

// -----

// qdq-rules §9 case 10: a negative scale in front of a MaxPool is refused
// (max pooling on integers needs a monotone quantization).
func.func @scale_negative_before_maxpool(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32> {
  %s = onnx.Constant dense<-0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  // expected-error @+1 {{QuantizeLinear scale is -5.000000e-01; scales must be finite and positive}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x1x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x1x4x4xi8>
  // expected-error @+1 {{DequantizeLinear scale is -5.000000e-01; scales must be finite and positive}}
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x1x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x1x4x4xf32>
  %p = onnx.MaxPool(%dq) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
  return %p : tensor<1x1x2x2xf32>
}

// -----

func.func @scale_nan(%q: tensor<4xi8>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0x7FC00000> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  // expected-error @+1 {{DequantizeLinear scale is nan; scales must be finite and positive}}
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

func.func @scale_inf(%x: tensor<4xf32>) -> tensor<4xi8> {
  %s = onnx.Constant dense<0x7F800000> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  // expected-error @+1 {{QuantizeLinear scale is INF; scales must be finite and positive}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  return %q : tensor<4xi8>
}

// -----

// qdq-rules §9 case 61: one zero-filled channel must not give a zero scale;
// the message names the channel.
func.func @per_channel_scale_zero_named(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.0, 0.25]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  // expected-error @+1 {{DequantizeLinear scale[1] is 0.000000e+00; scales must be finite and positive}}
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  return %c : tensor<1x3x4x4xf32>
}

// -----

func.func @per_channel_scale_negative_named(%wq: tensor<4x2xi8>) -> tensor<4x2xf32> {
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125, -1.0]> : tensor<4xf32>
  %wz = onnx.Constant dense<0> : tensor<4xi8>
  // expected-error @+1 {{DequantizeLinear scale[3] is -1.000000e+00}}
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<4x2xi8>, tensor<4xf32>, tensor<4xi8>) -> tensor<4x2xf32>
  return %w : tensor<4x2xf32>
}

// -----

func.func @scale_float16(%x: tensor<4xf32>) -> tensor<4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f16>
  %z = onnx.Constant dense<0> : tensor<i8>
  // expected-error @+1 {{QuantizeLinear scale is 'f16'; qatc supports float32 scales only}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f16>, tensor<i8>) -> tensor<4xi8>
  return %q : tensor<4xi8>
}

// -----

func.func @dequantize_float16_scale(%q: tensor<4xi8>) -> tensor<4xf16> {
  %s = onnx.Constant dense<0.5> : tensor<f16>
  %z = onnx.Constant dense<0> : tensor<i8>
  // expected-error @+1 {{DequantizeLinear scale is 'f16'; qatc supports float32 scales only}}
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xi8>, tensor<f16>, tensor<i8>) -> tensor<4xf16>
  return %dq : tensor<4xf16>
}

// -----

func.func @quantize_float16_input(%x: tensor<4xf16>) -> tensor<4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f16>
  %z = onnx.Constant dense<0> : tensor<i8>
  // expected-error @+1 {{QuantizeLinear of 'f16' input is not supported (float32 only)}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf16>, tensor<f16>, tensor<i8>) -> tensor<4xi8>
  return %q : tensor<4xi8>
}

// -----

// QuantizeLinear of int32 input is valid ONNX but not compiled.
func.func @quantize_int32_input(%x: tensor<4xi32>) -> tensor<4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  // expected-error @+1 {{QuantizeLinear of 'i32' input is not supported (float32 only)}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xi32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  return %q : tensor<4xi8>
}

// -----

// int16 and int4 data (ONNX opset 21) are refused when the IR is verified.
func.func @int16_data(%q: tensor<4xi16>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i16>
  // expected-error @+1 {{input type 'i16' is not supported (qatc dequantizes int8, uint8 or int32)}}
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xi16>, tensor<f32>, tensor<i16>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

func.func @int4_data(%x: tensor<4xf32>) -> tensor<4xi4> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i4>
  // expected-error @+1 {{output type 'i4' is not supported (qatc quantizes to int8 or uint8)}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i4>) -> tensor<4xi4>
  return %q : tensor<4xi4>
}

// -----

// qdq-rules §9 case 8: FP8 quantization (opset 19) gets a clean diagnostic.
func.func @fp8_quantize(%x: tensor<4xf32>) -> tensor<4xf8E4M3FN> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0.0> : tensor<f8E4M3FN>
  // expected-error @+1 {{output type 'f8E4M3FN' is not supported (qatc quantizes to int8 or uint8)}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<f8E4M3FN>) -> tensor<4xf8E4M3FN>
  return %q : tensor<4xf8E4M3FN>
}

// -----

func.func @uint16_data(%q: tensor<4xui16>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  // expected-error @+1 {{input type 'ui16' is not supported}}
  %dq = onnx.DequantizeLinear(%q, %s) : (tensor<4xui16>, tensor<f32>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

func.func @int32_quantize(%x: tensor<4xf32>) -> tensor<4xi32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i32>
  // expected-error @+1 {{output type 'i32' is not supported}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i32>) -> tensor<4xi32>
  return %q : tensor<4xi32>
}

// -----

// qdq-rules §9 case 5: DQ of an int32 bias with a non-zero zero point.
func.func @int32_dequantize_nonzero_zero_point(%b: tensor<4xi32>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<3> : tensor<i32>
  // expected-error @+1 {{int32 input must have a zero point of 0}}
  %dq = onnx.DequantizeLinear(%b, %s, %z) : (tensor<4xi32>, tensor<f32>, tensor<i32>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

// The same with the zero point in a resource blob (as imported initializers
// are), which only the legality check sees.
func.func @int32_dequantize_nonzero_zero_point_blob(%b: tensor<4xi32>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense_resource<bias_zp> : tensor<i32>
  // expected-error @+1 {{DequantizeLinear of int32 data (a bias) must have zero point 0}}
  %dq = onnx.DequantizeLinear(%b, %s, %z) : (tensor<4xi32>, tensor<f32>, tensor<i32>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

{-#
  dialect_resources: {
    builtin: {
      bias_zp: "0x0400000003000000"
    }
  }
#-}

// -----

// Activations are quantized per tensor; both the Q and the DQ of a computed
// tensor quantized per axis are refused.
func.func @per_axis_activation(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %z = onnx.Constant dense<0> : tensor<3xi8>
  // expected-error @+1 {{QuantizeLinear quantizes a computed tensor per axis (axis 1); activations must be quantized per tensor, only constant weights per channel}}
  %q = onnx.QuantizeLinear(%x, %s, %z) {axis = 1 : i64} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xi8>) -> tensor<1x3x4x4xi8>
  // expected-error @+1 {{DequantizeLinear quantizes a computed tensor per axis (axis 1)}}
  %dq = onnx.DequantizeLinear(%q, %s, %z) {axis = 1 : i64} : (tensor<1x3x4x4xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<1x3x4x4xf32>
  return %dq : tensor<1x3x4x4xf32>
}

// -----

// A per-axis DQ of int8 data that arrives at run time is an activation too.
func.func @per_axis_graph_input(%q: tensor<2x3xi8>) -> tensor<2x3xf32> {
  %s = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %z = onnx.Constant dense<0> : tensor<3xi8>
  // expected-error @+1 {{DequantizeLinear quantizes a computed tensor per axis (axis 1)}}
  %dq = onnx.DequantizeLinear(%q, %s, %z) {axis = 1 : i64} : (tensor<2x3xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<2x3xf32>
  return %dq : tensor<2x3xf32>
}

// -----

// Weights with a non-zero zero point cannot feed the int8 kernels.
func.func @weight_zero_point_nonzero(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<[0, 1, 0]> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  // expected-error @+1 {{weight zero point is not 0: qatc's int8 kernels need symmetric weights (zero point 0), as TensorRT does}}
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  return %c : tensor<1x3x4x4xf32>
}

// -----

// The same for a QAT export: float weight -> Q -> DQ -> Gemm.
func.func @weight_zero_point_nonzero_qat(%x: tensor<1x2xf32>) -> tensor<1x3xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %wf = onnx.Constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %ws = onnx.Constant dense<0.25> : tensor<f32>
  %wz = onnx.Constant dense<2> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2xf32>
  %wq = onnx.QuantizeLinear(%wf, %ws, %wz) : (tensor<3x2xf32>, tensor<f32>, tensor<i8>) -> tensor<3x2xi8>
  // expected-error @+1 {{weight zero point is not 0}}
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) : (tensor<3x2xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2xf32>
  %y = onnx.Gemm(%dq, %w) {transB = 1 : i64} : (tensor<1x2xf32>, tensor<3x2xf32>) -> tensor<1x3xf32>
  return %y : tensor<1x3xf32>
}

// -----

// Every refusal is reported, not only the first one.
func.func @all_refusals_reported(%x: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  %s0 = onnx.Constant dense<0.0> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  // expected-error @+1 {{QuantizeLinear scale must be a constant}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  // expected-error @+1 {{DequantizeLinear scale is 0.000000e+00}}
  %dq = onnx.DequantizeLinear(%q, %s0, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

// qdq-rules §9 case 14: Conv weight per channel along axis 1 (a reduction
// axis): legal, but the node will run in fp32, and the user is told.
// CHECK-LABEL: func.func @conv_weight_reduction_axis_warns
// CHECK: onnx.DequantizeLinear({{.*}}) : (tensor<3x2x1x1xi8>, tensor<2xf32>, tensor<2xi8>)
// CHECK: onnx.Conv
func.func @conv_weight_reduction_axis_warns(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25]> : tensor<2xf32>
  %wz = onnx.Constant dense<0> : tensor<2xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  // expected-warning @+1 {{weight is quantized per channel along axis 1, a reduction axis of Conv (its output channels are axis 0); the node will run in fp32}}
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 1 : i64} : (tensor<3x2x1x1xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  return %c : tensor<1x3x4x4xf32>
}

// -----

// qdq-rules §9 case 15: ConvTranspose weights [C_in, C_out/g, k...]: the
// output channels are axis 1; axis 0 warns.
// CHECK-LABEL: func.func @conv_transpose_weight_axis0_warns
// CHECK: onnx.ConvTranspose
func.func @conv_transpose_weight_axis0_warns(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25]> : tensor<2xf32>
  %wz = onnx.Constant dense<0> : tensor<2xi8>
  %wq = onnx.Constant dense<1> : tensor<2x3x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  // expected-warning @+1 {{weight is quantized per channel along axis 0, a reduction axis of ConvTranspose (its output channels are axis 1)}}
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<2x3x1x1xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x3x1x1xf32>
  %c = onnx.ConvTranspose(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>} : (tensor<1x2x4x4xf32>, tensor<2x3x1x1xf32>) -> tensor<1x3x4x4xf32>
  return %c : tensor<1x3x4x4xf32>
}

// -----

// CHECK-LABEL: func.func @conv_transpose_weight_axis1_silent
// CHECK: onnx.DequantizeLinear({{.*}}) : (tensor<2x3x1x1xi8>, tensor<3xf32>, tensor<3xi8>)
// CHECK: onnx.ConvTranspose
func.func @conv_transpose_weight_axis1_silent(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<2x3x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 1 : i64} : (tensor<2x3x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<2x3x1x1xf32>
  %c = onnx.ConvTranspose(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>} : (tensor<1x2x4x4xf32>, tensor<2x3x1x1xf32>) -> tensor<1x3x4x4xf32>
  return %c : tensor<1x3x4x4xf32>
}

// -----

// qdq-rules §9 case 16: Gemm transB=1 -> output axis 0, transB=0 -> axis 1.
// CHECK-LABEL: func.func @gemm_weight_axes
// CHECK-COUNT-3: onnx.Gemm
func.func @gemm_weight_axes(%x: tensor<1x2xf32>) -> (tensor<1x3xf32>, tensor<1x3xf32>, tensor<1x3xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %s3 = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %z3 = onnx.Constant dense<0> : tensor<3xi8>
  %s2 = onnx.Constant dense<[0.5, 0.25]> : tensor<2xf32>
  %z2 = onnx.Constant dense<0> : tensor<2xi8>
  %wt = onnx.Constant dense<1> : tensor<3x2xi8>
  %wn = onnx.Constant dense<1> : tensor<2x3xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2xf32>
  %w1 = onnx.DequantizeLinear(%wt, %s3, %z3) {axis = 0 : i64} : (tensor<3x2xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2xf32>
  %y1 = onnx.Gemm(%dq, %w1) {transB = 1 : i64} : (tensor<1x2xf32>, tensor<3x2xf32>) -> tensor<1x3xf32>
  %w2 = onnx.DequantizeLinear(%wn, %s3, %z3) {axis = 1 : i64} : (tensor<2x3xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<2x3xf32>
  %y2 = onnx.Gemm(%dq, %w2) : (tensor<1x2xf32>, tensor<2x3xf32>) -> tensor<1x3xf32>
  // expected-warning @+1 {{weight is quantized per channel along axis 1, a reduction axis of Gemm (its output channels are axis 0)}}
  %w3 = onnx.DequantizeLinear(%wt, %s2, %z2) {axis = 1 : i64} : (tensor<3x2xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<3x2xf32>
  %y3 = onnx.Gemm(%dq, %w3) {transB = 1 : i64} : (tensor<1x2xf32>, tensor<3x2xf32>) -> tensor<1x3xf32>
  return %y1, %y2, %y3 : tensor<1x3xf32>, tensor<1x3xf32>, tensor<1x3xf32>
}

// -----

// qdq-rules §9 case 17: MatMul B per column (axis 1) is fine; per row warns.
// CHECK-LABEL: func.func @matmul_weight_axes
// CHECK-COUNT-2: onnx.MatMul
func.func @matmul_weight_axes(%x: tensor<1x2xf32>) -> (tensor<1x3xf32>, tensor<1x3xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %s3 = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %z3 = onnx.Constant dense<0> : tensor<3xi8>
  %s2 = onnx.Constant dense<[0.5, 0.25]> : tensor<2xf32>
  %z2 = onnx.Constant dense<0> : tensor<2xi8>
  %wn = onnx.Constant dense<1> : tensor<2x3xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2xf32>
  %w1 = onnx.DequantizeLinear(%wn, %s3, %z3) {axis = 1 : i64} : (tensor<2x3xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<2x3xf32>
  %y1 = onnx.MatMul(%dq, %w1) : (tensor<1x2xf32>, tensor<2x3xf32>) -> tensor<1x3xf32>
  // expected-warning @+1 {{weight is quantized per channel along axis 0, a reduction axis of MatMul (its output channels are axis 1)}}
  %w2 = onnx.DequantizeLinear(%wn, %s2, %z2) {axis = 0 : i64} : (tensor<2x3xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x3xf32>
  %y2 = onnx.MatMul(%dq, %w2) : (tensor<1x2xf32>, tensor<2x3xf32>) -> tensor<1x3xf32>
  return %y1, %y2 : tensor<1x3xf32>, tensor<1x3xf32>
}

// -----

// A TensorRT-style Conv: per-tensor activation, per-channel weight on the
// output axis, float bias, QAT weight Q -> DQ. Nothing to say.
// CHECK-LABEL: func.func @trt_style_conv_is_legal
// CHECK: onnx.QuantizeLinear
// CHECK: onnx.DequantizeLinear
// CHECK: onnx.QuantizeLinear{{.*}}axis = 0
// CHECK: onnx.DequantizeLinear{{.*}}axis = 0
// CHECK: onnx.Conv
// CHECK: onnx.Relu
// CHECK: onnx.QuantizeLinear
func.func @trt_style_conv_is_legal(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %wf = onnx.Constant dense<0.75> : tensor<3x2x1x1xf32>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %b = onnx.Constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %wq = onnx.QuantizeLinear(%wf, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xf32>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xi8>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  %r = onnx.Relu(%c) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%r, %s, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  return %y : tensor<1x3x4x4xi8>
}

// -----

// ORT-style: asymmetric uint8 activations, a scale-only Q (uint8), an int32
// bias DQ with zero point 0 and one without a zero point: all legal in the
// generic mode.
// CHECK-LABEL: func.func @ort_style_asymmetric_is_legal
// CHECK: onnx.QuantizeLinear{{.*}} -> tensor<1x2x4x4xui8>
// CHECK: onnx.DequantizeLinear{{.*}}tensor<3xi32>
// CHECK: onnx.DequantizeLinear{{.*}}tensor<3xi32>
// CHECK: onnx.QuantizeLinear{{.*}} -> tensor<1x3x4x4xui8>
func.func @ort_style_asymmetric_is_legal(%x: tensor<1x2x4x4xf32>) -> (tensor<1x3x4x4xui8>, tensor<3xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<128> : tensor<ui8>
  %ws = onnx.Constant dense<0.25> : tensor<f32>
  %wz = onnx.Constant dense<0> : tensor<i8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %bq = onnx.Constant dense<[8, -8, 16]> : tensor<3xi32>
  %bs = onnx.Constant dense<0.125> : tensor<f32>
  %bz = onnx.Constant dense<0> : tensor<i32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x2x4x4xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) : (tensor<3x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2x1x1xf32>
  %b = onnx.DequantizeLinear(%bq, %bs, %bz) : (tensor<3xi32>, tensor<f32>, tensor<i32>) -> tensor<3xf32>
  %b2 = onnx.DequantizeLinear(%bq, %bs) : (tensor<3xi32>, tensor<f32>) -> tensor<3xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%c, %s) : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xui8>
  return %y, %b2 : tensor<1x3x4x4xui8>, tensor<3xf32>
}

// -----

// A scale of shape [1] is per tensor, so an activation may use it.
// CHECK-LABEL: func.func @shape1_scale_is_per_tensor
// CHECK: onnx.QuantizeLinear
// CHECK: onnx.DequantizeLinear
func.func @shape1_scale_is_per_tensor(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<[0.5]> : tensor<1xf32>
  %z = onnx.Constant dense<[0]> : tensor<1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x3x4x4xf32>, tensor<1xf32>, tensor<1xi8>) -> tensor<1x3x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x3x4x4xi8>, tensor<1xf32>, tensor<1xi8>) -> tensor<1x3x4x4xf32>
  return %dq : tensor<1x3x4x4xf32>
}

//--- trt.mlir

// qdq-rules §9 case 9: a non-zero zero point is refused in TRT mode, on the
// Q and on the DQ.
// GEN-LABEL: func.func @trt_nonzero_zero_point
// GEN: onnx.QuantizeLinear
func.func @trt_nonzero_zero_point(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<3> : tensor<i8>
  // expected-error @+1 {{QuantizeLinear has a non-zero zero point; TensorRT (and --trt-compat) accept symmetric quantization only}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  // expected-error @+1 {{DequantizeLinear has a non-zero zero point; TensorRT (and --trt-compat) accept symmetric quantization only}}
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

// A per-channel weight with one non-zero zero point.
// GEN-LABEL: func.func @trt_nonzero_weight_zero_point_channel
func.func @trt_nonzero_weight_zero_point_channel() -> tensor<3x2xf32> {
  %wq = onnx.Constant dense<1> : tensor<3x2xi8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<[0, 0, -1]> : tensor<3xi8>
  // expected-error @+1 {{DequantizeLinear has a non-zero zero point}}
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2xf32>
  return %w : tensor<3x2xf32>
}

// -----

// qdq-rules §9 case 4: a Q without zero point is uint8, which TRT refuses.
// GEN-LABEL: func.func @trt_quantize_without_zero_point
// GEN: onnx.QuantizeLinear{{.*}} -> tensor<4xui8>
func.func @trt_quantize_without_zero_point(%x: tensor<4xf32>) -> tensor<4xui8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  // expected-error @+1 {{QuantizeLinear without a zero point produces uint8 (ONNX default); TensorRT (and --trt-compat) need an int8 zero point}}
  %q = onnx.QuantizeLinear(%x, %s) : (tensor<4xf32>, tensor<f32>) -> tensor<4xui8>
  return %q : tensor<4xui8>
}

// -----

// The trt-compat refusals come on top of the generic ones.
// GEN-NOT: func.func @trt_generic_refusal_still_reported
func.func @trt_generic_refusal_still_reported(%x: tensor<4xf32>) -> tensor<4xi8> {
  %s = onnx.Constant dense<0.0> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  // expected-error @+1 {{QuantizeLinear scale is 0.000000e+00}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  return %q : tensor<4xi8>
}

// -----

// A symmetric int8 graph with per-channel weights passes TRT mode silently.
// TRT-LABEL: func.func @trt_symmetric_is_legal
// TRT: onnx.QuantizeLinear
// TRT: onnx.DequantizeLinear
// TRT: onnx.DequantizeLinear{{.*}}axis = 0
// TRT: onnx.Conv
// GEN-LABEL: func.func @trt_symmetric_is_legal
func.func @trt_symmetric_is_legal(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  return %c : tensor<1x3x4x4xf32>
}

//--- named.mlir

// NAMED: m.onnx: node "in_q" (#3, QuantizeLinear): error: QuantizeLinear has a non-zero zero point
// NAMED: m.onnx: node "in_dq" (#4, DequantizeLinear): error: DequantizeLinear has a non-zero zero point
// NAMED: m.onnx: node "out_q" (#7, QuantizeLinear): error: QuantizeLinear without a zero point produces uint8
func.func @main_graph(%x: tensor<4xf32>) -> tensor<4xui8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<3> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8> loc("in_q"(fused<"QuantizeLinear">["m.onnx":3:0]))
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32> loc("in_dq"(fused<"DequantizeLinear">["m.onnx":4:0]))
  %r = onnx.Relu(%dq) : (tensor<4xf32>) -> tensor<4xf32> loc("relu"(fused<"Relu">["m.onnx":5:0]))
  %y = onnx.QuantizeLinear(%r, %s) : (tensor<4xf32>, tensor<f32>) -> tensor<4xui8> loc("out_q"(fused<"QuantizeLinear">["m.onnx":7:0]))
  return %y : tensor<4xui8>
}

//--- trt-uint8.mlir

// uint8 quantization with an explicit zero point 0 is still uint8, which
// --trt-compat promises to refuse ("non-zero zero points, uint8").
func.func @trt_uint8_zero_point_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  // expected-error @+1 {{uint8}}
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<ui8>) -> tensor<4xui8>
  // expected-error @+1 {{uint8}}
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xui8>, tensor<f32>, tensor<ui8>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

