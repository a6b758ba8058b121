// Tests of --qat-qdq-convert: ONNX Q/DQ nodes become qat.quantize and
// qat.dequantize whose !quant.uniform types carry the scale and zero point.
//
// RUN: qatc-opt %s --split-input-file --qat-qdq-convert | FileCheck %s
// qdq-rules §9 case 6: axis -1 is normalised (by the importer) to axis 3.
// RUN: qatc-opt %S/Inputs/per-axis-negative-axis.onnxtext --qat-qdq-convert --mlir-print-debuginfo=false | FileCheck %s --check-prefix=AXIS
// RUN: not qatc-opt %S/Inputs/per-axis-wrong-length.onnxtext --qat-qdq-convert 2>&1 | FileCheck %s --check-prefix=AXIS-LEN

// AXIS-LABEL: func.func @main_graph
// AXIS: %[[Q:.*]] = qat.quantize %{{.*}} {onnx.output_names = ["wq"], rounding = #qat.rounding<half_to_even>} : tensor<1x2x2x3xf32> -> tensor<1x2x2x3x!quant.uniform<i8:f32:3, {5.000000e-01,2.500000e-01,1.250000e-01}>>
// AXIS: qat.dequantize %[[Q]] {onnx.output_names = ["wdq"]} : tensor<1x2x2x3x!quant.uniform<i8:f32:3, {5.000000e-01,2.500000e-01,1.250000e-01}>> -> tensor<1x2x2x3xf32>
// AXIS-LEN: node "DequantizeLinear_0" (#0, DequantizeLinear): error: per-axis scale has 2 elements but axis 3 of the input has size 3

// Per-tensor int8: the DQ reads the quantize's result directly; the scale
// and zero-point constants are gone, the tensor names stay.
// CHECK-LABEL: func.func @per_tensor_int8
// CHECK-NOT: onnx.Constant
// CHECK: %[[Q:.*]] = qat.quantize %arg0 {onnx.output_names = ["q"], rounding = #qat.rounding<half_to_even>} : tensor<1x2x4x4xf32> -> tensor<1x2x4x4x!quant.uniform<i8:f32, 1.250000e-01>>
// CHECK-NOT: qat.storage_cast
// CHECK: %[[DQ:.*]] = qat.dequantize %[[Q]] {onnx.output_names = ["dq"]} : tensor<1x2x4x4x!quant.uniform<i8:f32, 1.250000e-01>> -> tensor<1x2x4x4xf32>
// CHECK-NOT: onnx.QuantizeLinear
// CHECK-NOT: onnx.DequantizeLinear
// CHECK: return %[[DQ]]
func.func @per_tensor_int8(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %s = onnx.Constant dense<0.125> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) {onnx.output_names = ["q"]} : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) {onnx.output_names = ["dq"]} : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  return %dq : tensor<1x2x4x4xf32>
}

// -----

// Asymmetric uint8 with zero point 128.
// CHECK-LABEL: func.func @per_tensor_uint8_zero_point
// CHECK: %[[Q:.*]] = qat.quantize %arg0 {{.*}} -> tensor<8x!quant.uniform<u8:f32, 5.000000e-01:128>>
// CHECK: qat.dequantize %[[Q]] : tensor<8x!quant.uniform<u8:f32, 5.000000e-01:128>> -> tensor<8xf32>
func.func @per_tensor_uint8_zero_point(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<128> : tensor<ui8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<ui8>) -> tensor<8xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<8xui8>, tensor<f32>, tensor<ui8>) -> tensor<8xf32>
  return %dq : tensor<8xf32>
}

// -----

// qdq-rules §9 case 3: an odd zero point is kept exactly (uint8, s=1, z=1).
// CHECK-LABEL: func.func @odd_zero_point
// CHECK: qat.quantize %arg0 {{.*}} -> tensor<4x!quant.uniform<u8:f32, 1.000000e+00:1>>
func.func @odd_zero_point(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = onnx.Constant dense<1.0> : tensor<f32>
  %z = onnx.Constant dense<1> : tensor<ui8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<ui8>) -> tensor<4xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xui8>, tensor<f32>, tensor<ui8>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

// qdq-rules §9 case 4 (generic mode): a Q without zero point is uint8 with
// zero point 0, never int8 (§6.12).
// CHECK-LABEL: func.func @no_zero_point_is_uint8
// CHECK: %[[Q:.*]] = qat.quantize %arg0 {{.*}} -> tensor<4x!quant.uniform<u8:f32, 2.500000e-01>>
// CHECK-NOT: i8:f32
// CHECK: qat.dequantize %[[Q]] : tensor<4x!quant.uniform<u8:f32, 2.500000e-01>> -> tensor<4xf32>
func.func @no_zero_point_is_uint8(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0.25> : tensor<f32>
  %q = onnx.QuantizeLinear(%x, %s) : (tensor<4xf32>, tensor<f32>) -> tensor<4xui8>
  %dq = onnx.DequantizeLinear(%q, %s) : (tensor<4xui8>, tensor<f32>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

// A scale of shape [1] is per tensor.
// CHECK-LABEL: func.func @shape1_scale_is_per_tensor
// CHECK: qat.quantize %arg0 {{.*}} -> tensor<1x3x2x2x!quant.uniform<i8:f32, 5.000000e-01>>
func.func @shape1_scale_is_per_tensor(%x: tensor<1x3x2x2xf32>) -> tensor<1x3x2x2xf32> {
  %s = onnx.Constant dense<[0.5]> : tensor<1xf32>
  %z = onnx.Constant dense<[0]> : tensor<1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x3x2x2xf32>, tensor<1xf32>, tensor<1xi8>) -> tensor<1x3x2x2xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x3x2x2xi8>, tensor<1xf32>, tensor<1xi8>) -> tensor<1x3x2x2xf32>
  return %dq : tensor<1x3x2x2xf32>
}

// -----

// An int8 initializer + per-axis DQ: the stored integers enter the quantized
// world through a storage cast; the axis and every scale are kept.
// CHECK-LABEL: func.func @per_axis_int8_initializer
// CHECK: %[[W:.*]] = onnx.Constant dense<{{\[}}[1, -2], [3, -4], [5, -6]]> : tensor<3x2xi8>
// CHECK: %[[C:.*]] = qat.storage_cast %[[W]] : tensor<3x2xi8> -> tensor<3x2x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01,1.250000e-01}>>
// CHECK: qat.dequantize %[[C]] : tensor<3x2x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01,1.250000e-01}>> -> tensor<3x2xf32>
func.func @per_axis_int8_initializer() -> tensor<3x2xf32> {
  %wq = onnx.Constant dense<[[1, -2], [3, -4], [5, -6]]> : tensor<3x2xi8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2xf32>
  return %w : tensor<3x2xf32>
}

// -----

// Per-axis uint8 with one zero point per channel, along axis 1.
// CHECK-LABEL: func.func @per_axis_uint8_zero_points
// CHECK: qat.storage_cast %{{.*}} : tensor<2x3xui8> -> tensor<2x3x!quant.uniform<u8:f32:1, {1.250000e-01:1,2.500000e-01:2,5.000000e-01:3}>>
func.func @per_axis_uint8_zero_points() -> tensor<2x3xf32> {
  %wq = onnx.Constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xui8>
  %ws = onnx.Constant dense<[0.125, 0.25, 0.5]> : tensor<3xf32>
  %wz = onnx.Constant dense<[1, 2, 3]> : tensor<3xui8>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) : (tensor<2x3xui8>, tensor<3xf32>, tensor<3xui8>) -> tensor<2x3xf32>
  return %w : tensor<2x3xf32>
}

// -----

// A QAT weight: float constant -> per-axis Q -> DQ; the DQ reads the
// quantize's result (same parameters), no storage cast in between.
// CHECK-LABEL: func.func @per_axis_qat_weight
// CHECK: %[[Q:.*]] = qat.quantize %{{.*}} : tensor<2x2xf32> -> tensor<2x2x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01}>>
// CHECK-NEXT: qat.dequantize %[[Q]] : tensor<2x2x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01}>> -> tensor<2x2xf32>
func.func @per_axis_qat_weight() -> tensor<2x2xf32> {
  %wf = onnx.Constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %ws = onnx.Constant dense<[0.5, 0.25]> : tensor<2xf32>
  %wz = onnx.Constant dense<0> : tensor<2xi8>
  %wq = onnx.QuantizeLinear(%wf, %ws, %wz) {axis = 0 : i64} : (tensor<2x2xf32>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x2xi8>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<2x2xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x2xf32>
  return %w : tensor<2x2xf32>
}

// -----

// An int32 bias DQ, per tensor (without zero point) and per axis.
// CHECK-LABEL: func.func @int32_bias
// CHECK: qat.storage_cast %{{.*}} : tensor<3xi32> -> tensor<3x!quant.uniform<i32:f32, 1.250000e-01>>
// CHECK: qat.storage_cast %{{.*}} : tensor<3xi32> -> tensor<3x!quant.uniform<i32:f32:0, {1.250000e-01,2.500000e-01,5.000000e-01}>>
func.func @int32_bias() -> (tensor<3xf32>, tensor<3xf32>) {
  %bq = onnx.Constant dense<[8, -8, 16]> : tensor<3xi32>
  %s = onnx.Constant dense<0.125> : tensor<f32>
  %bs = onnx.Constant dense<[0.125, 0.25, 0.5]> : tensor<3xf32>
  %bz = onnx.Constant dense<0> : tensor<3xi32>
  %b1 = onnx.DequantizeLinear(%bq, %s) : (tensor<3xi32>, tensor<f32>) -> tensor<3xf32>
  %b2 = onnx.DequantizeLinear(%bq, %bs, %bz) {axis = 0 : i64} : (tensor<3xi32>, tensor<3xf32>, tensor<3xi32>) -> tensor<3xf32>
  return %b1, %b2 : tensor<3xf32>, tensor<3xf32>
}

// -----

// An int8 graph output: the quantized value leaves through a storage cast
// back to the ONNX integer type.
// CHECK-LABEL: func.func @int8_graph_output
// CHECK: %[[Q:.*]] = qat.quantize %arg0 {{.*}} -> tensor<4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[I:.*]] = qat.storage_cast %[[Q]] : tensor<4x!quant.uniform<i8:f32, 5.000000e-01>> -> tensor<4xi8>
// CHECK: return %[[I]] : tensor<4xi8>
func.func @int8_graph_output(%x: tensor<4xf32>) -> tensor<4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  return %q : tensor<4xi8>
}

// -----

// A quantized tensor that is both a graph output and dequantized: the DQ
// reads the quantized value, the output the storage cast.
// CHECK-LABEL: func.func @int8_output_and_dequantize
// CHECK: %[[Q:.*]] = qat.quantize %arg0
// CHECK-DAG: %[[I:.*]] = qat.storage_cast %[[Q]] : tensor<4x!quant.uniform<u8:f32, 5.000000e-01:7>> -> tensor<4xui8>
// CHECK-DAG: %[[DQ:.*]] = qat.dequantize %[[Q]]
// CHECK: return %[[I]], %[[DQ]]
func.func @int8_output_and_dequantize(%x: tensor<4xf32>) -> (tensor<4xui8>, tensor<4xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<7> : tensor<ui8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<ui8>) -> tensor<4xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xui8>, tensor<f32>, tensor<ui8>) -> tensor<4xf32>
  return %q, %dq : tensor<4xui8>, tensor<4xf32>
}

// -----

// An int8 graph input dequantized: storage cast in.
// CHECK-LABEL: func.func @int8_graph_input
// CHECK: %[[C:.*]] = qat.storage_cast %arg0 : tensor<4xi8> -> tensor<4x!quant.uniform<i8:f32, 2.500000e-01:-3>>
// CHECK: qat.dequantize %[[C]]
func.func @int8_graph_input(%q: tensor<4xi8>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0.25> : tensor<f32>
  %z = onnx.Constant dense<-3> : tensor<i8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

// A DQ whose parameters differ from the Q feeding it reinterprets the
// stored integers with its own parameters: it must not read the Q's type.
// CHECK-LABEL: func.func @dequantize_params_differ
// CHECK: %[[Q:.*]] = qat.quantize %arg0 {{.*}} -> tensor<4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[I:.*]] = qat.storage_cast %[[Q]] : tensor<4x!quant.uniform<i8:f32, 5.000000e-01>> -> tensor<4xi8>
// CHECK: %[[R:.*]] = qat.storage_cast %[[I]] : tensor<4xi8> -> tensor<4x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK: %[[DQ:.*]] = qat.dequantize %[[R]] : tensor<4x!quant.uniform<i8:f32, 2.500000e-01>> -> tensor<4xf32>
// CHECK: return %[[DQ]]
func.func @dequantize_params_differ(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %s2 = onnx.Constant dense<0.25> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  %dq = onnx.DequantizeLinear(%q, %s2, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

// Same scale, different zero point: also a reinterpretation.
// CHECK-LABEL: func.func @dequantize_zero_point_differs
// CHECK: %[[Q:.*]] = qat.quantize %arg0 {{.*}} -> tensor<4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[I:.*]] = qat.storage_cast %[[Q]]
// CHECK: %[[R:.*]] = qat.storage_cast %[[I]] : tensor<4xi8> -> tensor<4x!quant.uniform<i8:f32, 5.000000e-01:2>>
// CHECK: qat.dequantize %[[R]]
func.func @dequantize_zero_point_differs(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %z2 = onnx.Constant dense<2> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z2) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  return %dq : tensor<4xf32>
}

// -----

// Ops between Q/DQ are untouched; one Q read by two DQs.
// CHECK-LABEL: func.func @other_ops_untouched
// CHECK: %[[Q:.*]] = qat.quantize
// CHECK: %[[D1:.*]] = qat.dequantize %[[Q]]
// CHECK: %[[D2:.*]] = qat.dequantize %[[Q]]
// CHECK: onnx.Add(%[[D1]], %[[D2]])
func.func @other_ops_untouched(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  %d1 = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  %d2 = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  %a = onnx.Add(%d1, %d2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}
