// Tests of --qat-weights-fold (after --qat-qdq-convert): Q(float constant)
// folds with exactly QuantizeLinear's arithmetic (f32 division, round half
// to even, add the zero point, saturate), int8 initializers become
// qat.constant, and a Transpose of a dequantized constant folds into it.
//
// RUN: qatc-opt %s --split-input-file --qat-qdq-convert --qat-weights-fold | FileCheck %s
// RUN: qatc-opt %S/Inputs/per-axis-negative-axis.onnxtext --qat-qdq-convert --qat-weights-fold --mlir-print-debuginfo=false | FileCheck %s --check-prefix=AXIS3

// Per-axis along the last axis (axis -1 in the model): channel c of flat
// element i is i % 3; w = [0.5, 1, 1.5, 2, 2.5, 3, ...] / [0.5, 0.25, 0.125].
// AXIS3-LABEL: func.func @main_graph
// AXIS3: %[[W:.*]] = qat.constant dense<{{\[\[\[\[}}1, 4, 12], [4, 10, 24]], {{\[\[}}7, 16, 36], [10, 22, 48]]]]> : tensor<1x2x2x3xi8> {onnx.output_names = ["wq"]} -> tensor<1x2x2x3x!quant.uniform<i8:f32:3, {5.000000e-01,2.500000e-01,1.250000e-01}>>
// AXIS3: qat.dequantize %[[W]]
// AXIS3-NOT: qat.quantize

// qdq-rules §9 case 1: ties round to even: {2.5, 3.5, -2.5, -3.5, 0.5, 1.5}
// -> {2, 4, -2, -4, 0, 2} (not away from zero).
// CHECK-LABEL: func.func @fold_ties_to_even
// CHECK-NOT: qat.quantize
// CHECK: %[[C:.*]] = qat.constant dense<[2, 4, -2, -4, 0, 2]> : tensor<6xi8> -> tensor<6x!quant.uniform<i8:f32, 1.000000e+00>>
// CHECK: qat.dequantize %[[C]]
// CHECK-NOT: onnx.Constant
func.func @fold_ties_to_even() -> tensor<6xf32> {
  %x = onnx.Constant dense<[2.5, 3.5, -2.5, -3.5, 0.5, 1.5]> : tensor<6xf32>
  %s = onnx.Constant dense<1.0> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<6xf32>, tensor<f32>, tensor<i8>) -> tensor<6xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<6xi8>, tensor<f32>, tensor<i8>) -> tensor<6xf32>
  return %dq : tensor<6xf32>
}

// -----

// The division is done in f32, as ONNX does: 0.35f / 0.1f is exactly 3.5 in
// f32 (rounds to 4) but 3.4999999 in f64 (would round to 3).
// CHECK-LABEL: func.func @fold_divides_in_f32
// CHECK: qat.constant dense<[4, -4, 2, 4]> : tensor<4xi8>
func.func @fold_divides_in_f32() -> tensor<4xf32> {
  %x = onnx.Constant dense<[0.35, -0.35, 0.25, 0.45]> : tensor<4xf32>
  %s = onnx.Constant dense<0.1> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

// qdq-rules §9 case 2: saturation to [-128, 127].
// CHECK-LABEL: func.func @fold_saturates_int8
// CHECK: qat.constant dense<[127, -128, 127, -128, 127]> : tensor<5xi8> -> tensor<5x!quant.uniform<i8:f32, 0.10000000149011612>>
func.func @fold_saturates_int8() -> tensor<5xf32> {
  %x = onnx.Constant dense<[100.0, -100.0, 12.75, -12.85, 3.0e38]> : tensor<5xf32>
  %s = onnx.Constant dense<0.1> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<5xf32>, tensor<f32>, tensor<i8>) -> tensor<5xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<5xi8>, tensor<f32>, tensor<i8>) -> tensor<5xf32>
  return %dq : tensor<5xf32>
}

// -----

// qdq-rules §9 case 2, uint8 variant (scale-only Q): {100, -100} -> {255, 0}.
// The stored bytes are 255, 0, 250, 0 (printed as signed bytes when the
// storage tensor is signless).
// CHECK-LABEL: func.func @fold_saturates_uint8
// CHECK: qat.constant dense<[{{-1|255}}, 0, {{-6|250}}, 0]> : tensor<4x{{u?}}i8> -> tensor<4x!quant.uniform<u8:f32, 0.10000000149011612>>
func.func @fold_saturates_uint8() -> tensor<4xf32> {
  %x = onnx.Constant dense<[100.0, -100.0, 25.0, -0.04]> : tensor<4xf32>
  %s = onnx.Constant dense<0.1> : tensor<f32>
  %q = onnx.QuantizeLinear(%x, %s) : (tensor<4xf32>, tensor<f32>) -> tensor<4xui8>
  %dq = onnx.DequantizeLinear(%q, %s) : (tensor<4xui8>, tensor<f32>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

// qdq-rules §9 case 3: with an odd zero point the quotient is rounded before
// the zero point is added: uint8, s=1, z=1: 0.5 -> 0+1 = 1 (not rne(1.5) = 2),
// 1.5 -> 2+1 = 3, 2.5 -> 2+1 = 3, -0.5 -> 0+1 = 1.
// CHECK-LABEL: func.func @fold_odd_zero_point_rounds_first
// CHECK: qat.constant dense<[1, 3, 3, 1]> : tensor<4x{{u?}}i8> -> tensor<4x!quant.uniform<u8:f32, 1.000000e+00:1>>
func.func @fold_odd_zero_point_rounds_first() -> tensor<4xf32> {
  %x = onnx.Constant dense<[0.5, 1.5, 2.5, -0.5]> : tensor<4xf32>
  %s = onnx.Constant dense<1.0> : tensor<f32>
  %z = onnx.Constant dense<1> : tensor<ui8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<ui8>) -> tensor<4xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xui8>, tensor<f32>, tensor<ui8>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

// The zero point is added after rounding and before saturation (int8, z=-3).
// CHECK-LABEL: func.func @fold_int8_zero_point_then_saturate
// CHECK: qat.constant dense<[-3, -1, 124, 127, -128]> : tensor<5xi8> -> tensor<5x!quant.uniform<i8:f32, 5.000000e-01:-3>>
func.func @fold_int8_zero_point_then_saturate() -> tensor<5xf32> {
  %x = onnx.Constant dense<[0.0, 1.25, 63.5, 65.0, -63.0]> : tensor<5xf32>
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<-3> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<5xf32>, tensor<f32>, tensor<i8>) -> tensor<5xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<5xi8>, tensor<f32>, tensor<i8>) -> tensor<5xf32>
  return %dq : tensor<5xf32>
}

// -----

// A QAT Conv weight per channel (axis 0): each output channel is divided by
// its own scale, and the per-axis type is kept.
// CHECK-LABEL: func.func @fold_per_axis_weight
// CHECK: %[[W:.*]] = qat.constant dense<{{\[\[\[\[}}2]], {{\[\[}}-3]]], {{\[\[\[}}4]], {{\[\[}}-6]]], {{\[\[\[}}127]], {{\[\[}}-128]]]]> : tensor<3x2x1x1xi8> -> tensor<3x2x1x1x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01,1.250000e-01}>>
// CHECK: qat.dequantize %[[W]] : tensor<3x2x1x1x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01,1.250000e-01}>> -> tensor<3x2x1x1xf32>
func.func @fold_per_axis_weight() -> tensor<3x2x1x1xf32> {
  %wf = onnx.Constant dense<[[[[1.0]], [[-1.5]]], [[[1.0]], [[-1.5]]], [[[100.0]], [[-100.0]]]]> : tensor<3x2x1x1xf32>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.QuantizeLinear(%wf, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xf32>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xi8>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  return %w : tensor<3x2x1x1xf32>
}

// -----

// A large weight becomes a resource blob (never printed as a literal).
// CHECK-LABEL: func.func @fold_large_weight_to_blob
// CHECK: qat.constant dense_resource<{{.*}}> : tensor<8x4xi8> -> tensor<8x4x!quant.uniform<i8:f32, 5.000000e-01>>
func.func @fold_large_weight_to_blob() -> tensor<8x4xf32> {
  %wf = onnx.Constant dense<1.0> : tensor<8x4xf32>
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %wq = onnx.QuantizeLinear(%wf, %s, %z) : (tensor<8x4xf32>, tensor<f32>, tensor<i8>) -> tensor<8x4xi8>
  %w = onnx.DequantizeLinear(%wq, %s, %z) : (tensor<8x4xi8>, tensor<f32>, tensor<i8>) -> tensor<8x4xf32>
  return %w : tensor<8x4xf32>
}

// -----

// An int8 initializer + DQ: the data is reused as is, the DQ stays.
// CHECK-LABEL: func.func @int8_initializer
// CHECK-NOT: qat.storage_cast
// CHECK: %[[W:.*]] = qat.constant dense<{{\[}}[1, -2], [3, -4], [5, -6]]> : tensor<3x2xi8> {onnx.output_names = ["w_int8"]} -> tensor<3x2x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01,1.250000e-01}>>
// CHECK: qat.dequantize %[[W]]
// CHECK-NOT: onnx.Constant
func.func @int8_initializer() -> tensor<3x2xf32> {
  %wq = onnx.Constant {onnx.output_names = ["w_int8"]} dense<[[1, -2], [3, -4], [5, -6]]> : tensor<3x2xi8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2xf32>
  return %w : tensor<3x2xf32>
}

// -----

// An int32 bias initializer too.
// CHECK-LABEL: func.func @int32_bias_initializer
// CHECK: %[[B:.*]] = qat.constant dense<[8, -8, 16]> : tensor<3xi32> -> tensor<3x!quant.uniform<i32:f32, 1.250000e-01>>
// CHECK: qat.dequantize %[[B]]
func.func @int32_bias_initializer() -> tensor<3xf32> {
  %bq = onnx.Constant dense<[8, -8, 16]> : tensor<3xi32>
  %s = onnx.Constant dense<0.125> : tensor<f32>
  %b = onnx.DequantizeLinear(%bq, %s) : (tensor<3xi32>, tensor<f32>) -> tensor<3xf32>
  return %b : tensor<3xf32>
}

// -----

// A Transpose of a dequantized constant weight (Linear exported as
// Transpose + MatMul) folds: the integers are transposed and the per-axis
// dimension follows the permutation (axis 0 -> axis 1).
// CHECK-LABEL: func.func @transpose_of_dequantized_weight
// CHECK-NOT: onnx.Transpose
// CHECK: %[[W:.*]] = qat.constant dense<{{\[}}[1, 4], [-2, 5], [3, -6]]> : tensor<3x2xi8> -> tensor<3x2x!quant.uniform<i8:f32:1, {5.000000e-01,2.500000e-01}>>
// CHECK: %[[D:.*]] = qat.dequantize %[[W]] : tensor<3x2x!quant.uniform<i8:f32:1, {5.000000e-01,2.500000e-01}>> -> tensor<3x2xf32>
// CHECK: onnx.MatMul(%arg0, %[[D]])
func.func @transpose_of_dequantized_weight(%x: tensor<1x3xf32>) -> tensor<1x2xf32> {
  %wq = onnx.Constant dense<[[1, -2, 3], [4, 5, -6]]> : tensor<2x3xi8>
  %ws = onnx.Constant dense<[0.5, 0.25]> : tensor<2xf32>
  %wz = onnx.Constant dense<0> : tensor<2xi8>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<2x3xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x3xf32>
  %t = onnx.Transpose(%w) {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %y = onnx.MatMul(%x, %t) : (tensor<1x3xf32>, tensor<3x2xf32>) -> tensor<1x2xf32>
  return %y : tensor<1x2xf32>
}

// -----

// A QAT weight (float -> Q -> DQ -> Transpose) folds both steps; a rank-3
// permutation [2, 0, 1] moves axis 1 to position 2.
// in[a][b][c] = 4a + 2b + c + 1 (a<1, b<2, c<2), scale 1 per b-channel.
// out[c][a][b] = in[a][b][c]: [[[1, 3]], [[2, 4]]].
// CHECK-LABEL: func.func @transpose_rank3_axis_follows_perm
// CHECK-NOT: onnx.Transpose
// CHECK: %[[W:.*]] = qat.constant dense<{{\[\[\[}}1, 3]], {{\[\[}}2, 4]]]> : tensor<2x1x2xi8> -> tensor<2x1x2x!quant.uniform<i8:f32:2, {1.000000e+00,5.000000e-01}>>
// CHECK: qat.dequantize %[[W]]
func.func @transpose_rank3_axis_follows_perm() -> tensor<2x1x2xf32> {
  %wf = onnx.Constant dense<[[[1.0, 2.0], [1.5, 2.0]]]> : tensor<1x2x2xf32>
  %ws = onnx.Constant dense<[1.0, 0.5]> : tensor<2xf32>
  %wz = onnx.Constant dense<0> : tensor<2xi8>
  %wq = onnx.QuantizeLinear(%wf, %ws, %wz) {axis = 1 : i64} : (tensor<1x2x2xf32>, tensor<2xf32>, tensor<2xi8>) -> tensor<1x2x2xi8>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 1 : i64} : (tensor<1x2x2xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<1x2x2xf32>
  %t = onnx.Transpose(%w) {perm = array<i64: 2, 0, 1>} : (tensor<1x2x2xf32>) -> tensor<2x1x2xf32>
  return %t : tensor<2x1x2xf32>
}

// -----

// A weight DQ that also feeds something else stays; the transposed copy is
// a new constant.
// CHECK-LABEL: func.func @transpose_of_shared_weight
// CHECK-DAG: %[[T:.*]] = qat.constant dense<{{\[}}[1, 3], [2, 4]]> : tensor<2x2xi8> -> tensor<2x2x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK-DAG: %[[W:.*]] = qat.constant dense<{{\[}}[1, 2], [3, 4]]> : tensor<2x2xi8> -> tensor<2x2x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK-DAG: %[[DT:.*]] = qat.dequantize %[[T]]
// CHECK-DAG: %[[DW:.*]] = qat.dequantize %[[W]]
// CHECK: return %[[DW]], %[[DT]]
func.func @transpose_of_shared_weight() -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %wq = onnx.Constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi8>
  %s = onnx.Constant dense<0.25> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %w = onnx.DequantizeLinear(%wq, %s, %z) : (tensor<2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<2x2xf32>
  %t = onnx.Transpose(%w) {perm = array<i64: 1, 0>} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return %w, %t : tensor<2x2xf32>, tensor<2x2xf32>
}

// -----

// Quantizes of computed values and Transposes of dequantized activations
// are not folded.
// CHECK-LABEL: func.func @activations_not_folded
// CHECK: %[[Q:.*]] = qat.quantize %arg0
// CHECK: %[[D:.*]] = qat.dequantize %[[Q]]
// CHECK: onnx.Transpose(%[[D]])
// CHECK-NOT: qat.constant
func.func @activations_not_folded(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<2x3xf32>, tensor<f32>, tensor<i8>) -> tensor<2x3xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<2x3xi8>, tensor<f32>, tensor<i8>) -> tensor<2x3xf32>
  %t = onnx.Transpose(%dq) {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %t : tensor<3x2xf32>
}

// -----

// Float constants that are not quantized stay float (a float bias).
// CHECK-LABEL: func.func @float_bias_untouched
// CHECK: onnx.Constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
func.func @float_bias_untouched(%x: tensor<1x2xf32>) -> tensor<1x2xf32> {
  %b = onnx.Constant dense<[1.0, 2.0]> : tensor<2xf32>
  %y = onnx.Add(%x, %b) : (tensor<1x2xf32>, tensor<2xf32>) -> tensor<1x2xf32>
  return %y : tensor<1x2xf32>
}
