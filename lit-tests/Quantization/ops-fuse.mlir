// Tests of --qat-ops-fuse (after convert, weights-fold and propagate): DQ ->
// op -> Q groups become int8 qat ops with their fp32 epilogue (qdq-rules §5.3,
// §9 cases 11-32, 41, 42, 49); groups that cannot be int8 stay fp32 with a
// qat.fp32_reason.
//
// RUN: qatc-opt %s --split-input-file --qat-qdq-convert --qat-weights-fold --qat-qdq-propagate --qat-ops-fuse | FileCheck %s
// The whole pipeline (--qat-lower) on a digits-like block (Inputs/).
// RUN: qatc-opt %S/Inputs/digits-like-block.mlir --qat-lower | FileCheck %s --check-prefix=LOWER

// qdq-rules §9 case 11: DQ(x), DQ(W axis 0) -> Conv -> Relu -> Q is one
// qat.conv with a Relu epilogue and an int8 result.
// CHECK-LABEL: func.func @conv_relu_q_fuses
// CHECK: %[[X:.*]] = qat.quantize %arg0 {{.*}} -> tensor<1x2x4x4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[W:.*]] = qat.constant dense<{{.*}}> : tensor<3x2x1x1xi8> -> tensor<3x2x1x1x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01,1.250000e-01}>>
// CHECK: %[[C:.*]] = qat.conv %[[X]], %[[W]] {activation = #qat.clamp<relu>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, rounding = #qat.rounding<half_to_even>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4x!quant.uniform<i8:f32, 5.000000e-01>>, tensor<3x2x1x1x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01,1.250000e-01}>>) -> tensor<1x3x4x4x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK: %[[O:.*]] = qat.storage_cast %[[C]]
// CHECK: return %[[O]]
// CHECK-NOT: onnx.
// CHECK-NOT: qat.dequantize
func.func @conv_relu_q_fuses(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<[[[[1]], [[2]]], [[[3]], [[4]]], [[[5]], [[6]]]]> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %r = onnx.Relu(%c) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  return %y : tensor<1x3x4x4xi8>
}

// -----

// qdq-rules §9 case 12: without the trailing Q the conv has an f32 result;
// no requantize or quantize is invented.
// CHECK-LABEL: func.func @conv_without_q_has_float_output
// CHECK: %[[C:.*]] = qat.conv %{{.*}}, %{{.*}} {{.*}} -> tensor<1x3x4x4xf32>
// CHECK-NEXT: return %[[C]]
// CHECK-NOT: qat.requantize
func.func @conv_without_q_has_float_output(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
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

// -----

// qdq-rules §9 case 13: a float bias stays float in the epilogue, unchanged.
// CHECK-LABEL: func.func @conv_float_bias_kept_float
// CHECK: %[[B:.*]] = onnx.Constant dense<[1.000000e+00, -2.000000e+00, 3.500000e+00]> : tensor<3xf32>
// CHECK: qat.conv %{{.*}}, %{{.*}} bias(%[[B]]) {{.*}} -> tensor<1x3x4x4x!quant.uniform<i8:f32, 2.500000e-01>>
func.func @conv_float_bias_kept_float(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %b = onnx.Constant dense<[1.0, -2.0, 3.5]> : tensor<3xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  return %y : tensor<1x3x4x4xi8>
}

// -----

// qdq-rules §9 case 13 (ORT recipe): an int32 bias DQ (scale s_x * s_w[c])
// is absorbed as its dequantized values [8, -8, 16] * [0.25, 0.125, 0.0625].
// CHECK-LABEL: func.func @conv_int32_bias_dequantize_absorbed
// CHECK: %[[B:.*]] = onnx.Constant dense<[2.000000e+00, -1.000000e+00, 1.000000e+00]> : tensor<3xf32>
// CHECK: qat.conv %{{.*}}, %{{.*}} bias(%[[B]])
// CHECK-NOT: qat.dequantize
// CHECK-NOT: i32
func.func @conv_int32_bias_dequantize_absorbed(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %bq = onnx.Constant dense<[8, -8, 16]> : tensor<3xi32>
  %bs = onnx.Constant dense<[0.25, 0.125, 0.0625]> : tensor<3xf32>
  %bz = onnx.Constant dense<0> : tensor<3xi32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %b = onnx.DequantizeLinear(%bq, %bs, %bz) {axis = 0 : i64} : (tensor<3xi32>, tensor<3xf32>, tensor<3xi32>) -> tensor<3xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  return %c : tensor<1x3x4x4xf32>
}

// -----

// qdq-rules §9 case 14: W per channel along axis 1 (a reduction axis): no
// int8 conv; the literal DQ -> Conv stays, with the reason.
// CHECK-LABEL: func.func @conv_weight_reduction_axis_not_fused
// CHECK-DAG: %[[X:.*]] = qat.dequantize %{{.*}} : tensor<1x2x4x4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK-DAG: %[[W:.*]] = qat.dequantize %{{.*}} : tensor<3x2x1x1x!quant.uniform<i8:f32:1, {5.000000e-01,2.500000e-01}>>
// CHECK: onnx.Conv(%[[X]], %[[W]]) {{{.*}}qat.fp32_reason = "weight is quantized per channel along axis 1, a reduction axis"
// CHECK-NOT: qat.conv
func.func @conv_weight_reduction_axis_not_fused(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25]> : tensor<2xf32>
  %wz = onnx.Constant dense<0> : tensor<2xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 1 : i64} : (tensor<3x2x1x1xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  return %c : tensor<1x3x4x4xf32>
}

// -----

// qdq-rules §9 case 16: Gemm transB=1 with W axis 0 fuses (transpose_rhs),
// transB=0 with W axis 1 fuses, transB=1 with W axis 1 does not.
// CHECK-LABEL: func.func @gemm_weight_axes
// CHECK: qat.matmul %{{.*}}, %{{.*}} {{{.*}}transpose_rhs = true} : (tensor<1x2x!quant.uniform<i8:f32, 5.000000e-01>>, tensor<3x2x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01,1.250000e-01}>>) -> tensor<1x3xf32>
// CHECK: qat.matmul %{{.*}}, %{{.*}} {rounding = #qat.rounding<half_to_even>} : (tensor<1x2x!quant.uniform<i8:f32, 5.000000e-01>>, tensor<2x3x!quant.uniform<i8:f32:1, {5.000000e-01,2.500000e-01,1.250000e-01}>>) -> tensor<1x3xf32>
// CHECK: onnx.Gemm(%{{.*}}, %{{.*}}) {qat.fp32_reason = "weight is quantized per channel along axis 1, a reduction axis", transB = 1 : i64}
// CHECK-NOT: qat.matmul
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
  %w3 = onnx.DequantizeLinear(%wt, %s2, %z2) {axis = 1 : i64} : (tensor<3x2xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<3x2xf32>
  %y3 = onnx.Gemm(%dq, %w3) {transB = 1 : i64} : (tensor<1x2xf32>, tensor<3x2xf32>) -> tensor<1x3xf32>
  return %y1, %y2, %y3 : tensor<1x3xf32>, tensor<1x3xf32>, tensor<1x3xf32>
}

// -----

// qdq-rules §9 case 17: MatMul with a constant B per column (axis 1) fuses;
// per row (axis 0, the reduction axis) does not.
// CHECK-LABEL: func.func @matmul_weight_axes
// CHECK: qat.matmul %{{.*}}, %{{.*}} {rounding = #qat.rounding<half_to_even>} : (tensor<1x2x!quant.uniform<i8:f32, 5.000000e-01>>, tensor<2x3x!quant.uniform<i8:f32:1, {5.000000e-01,2.500000e-01,1.250000e-01}>>) -> tensor<1x3xf32>
// CHECK: onnx.MatMul(%{{.*}}, %{{.*}}) {qat.fp32_reason = "weight is quantized per channel along axis 0, a reduction axis"}
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
  %w2 = onnx.DequantizeLinear(%wn, %s2, %z2) {axis = 0 : i64} : (tensor<2x3xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x3xf32>
  %y2 = onnx.MatMul(%dq, %w2) : (tensor<1x2xf32>, tensor<2x3xf32>) -> tensor<1x3xf32>
  return %y1, %y2 : tensor<1x3xf32>, tensor<1x3xf32>
}

// -----

// Gemm alpha and beta fold into the epilogue: y = alpha * acc + beta * C,
// i.e. channel scale 2 and bias 0.5 * [2, 4, 6] = [1, 2, 3].
// CHECK-LABEL: func.func @gemm_alpha_beta_folded
// CHECK-DAG: %[[S:.*]] = onnx.Constant dense<2.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[B:.*]] = onnx.Constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK: qat.matmul %{{.*}}, %{{.*}} bias(%[[B]]) scale(%[[S]]) {{.*}}transpose_rhs = true
// CHECK-NOT: onnx.Gemm
func.func @gemm_alpha_beta_folded(%x: tensor<1x2xf32>) -> tensor<1x3xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %s3 = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %z3 = onnx.Constant dense<0> : tensor<3xi8>
  %wt = onnx.Constant dense<1> : tensor<3x2xi8>
  %c = onnx.Constant dense<[2.0, 4.0, 6.0]> : tensor<3xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2xf32>
  %w = onnx.DequantizeLinear(%wt, %s3, %z3) {axis = 0 : i64} : (tensor<3x2xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2xf32>
  %y = onnx.Gemm(%dq, %w, %c) {alpha = 2.0 : f32, beta = 0.5 : f32, transB = 1 : i64} : (tensor<1x2xf32>, tensor<3x2xf32>, tensor<3xf32>) -> tensor<1x3xf32>
  return %y : tensor<1x3xf32>
}

// -----

// Gemm with an int32 DQ bias and beta != 1: the bias is dequantized into the
// f32 epilogue and scaled there (beta * [8, 16, -8] * 0.25 = [1, 2, -1]).
// CHECK-LABEL: func.func @gemm_int32_bias_with_beta
// CHECK: %[[B:.*]] = onnx.Constant dense<[1.000000e+00, 2.000000e+00, -1.000000e+00]> : tensor<3xf32>
// CHECK: qat.matmul %{{.*}}, %{{.*}} bias(%[[B]])
// CHECK-NOT: qat.dequantize
func.func @gemm_int32_bias_with_beta(%x: tensor<1x2xf32>) -> tensor<1x3xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<0.5> : tensor<f32>
  %wt = onnx.Constant dense<1> : tensor<3x2xi8>
  %cq = onnx.Constant dense<[8, 16, -8]> : tensor<3xi32>
  %cs = onnx.Constant dense<0.25> : tensor<f32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2xf32>
  %w = onnx.DequantizeLinear(%wt, %ws, %z) : (tensor<3x2xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2xf32>
  %c = onnx.DequantizeLinear(%cq, %cs) : (tensor<3xi32>, tensor<f32>) -> tensor<3xf32>
  %y = onnx.Gemm(%dq, %w, %c) {beta = 0.5 : f32, transB = 1 : i64} : (tensor<1x2xf32>, tensor<3x2xf32>, tensor<3xf32>) -> tensor<1x3xf32>
  return %y : tensor<1x3xf32>
}

// -----

// Gemm with transA=1 has no int8 kernel.
// CHECK-LABEL: func.func @gemm_trans_a_not_fused
// CHECK: onnx.Gemm({{.*}}qat.fp32_reason = "Gemm with transA=1 has no int8 kernel"
func.func @gemm_trans_a_not_fused(%x: tensor<2x1xf32>) -> tensor<1x3xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %wt = onnx.Constant dense<1> : tensor<3x2xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<2x1xf32>, tensor<f32>, tensor<i8>) -> tensor<2x1xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<2x1xi8>, tensor<f32>, tensor<i8>) -> tensor<2x1xf32>
  %w = onnx.DequantizeLinear(%wt, %s, %z) : (tensor<3x2xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2xf32>
  %y = onnx.Gemm(%dq, %w) {transA = 1 : i64, transB = 1 : i64} : (tensor<2x1xf32>, tensor<3x2xf32>) -> tensor<1x3xf32>
  return %y : tensor<1x3xf32>
}

// -----

// qdq-rules §9 case 20: a QAT export's float weight + Q + DQ is folded into
// int8 weights; the fused conv keeps s_w in the weight type.
// CHECK-LABEL: func.func @qat_float_weight_folded_and_fused
// CHECK: %[[W:.*]] = qat.constant dense<{{\[\[\[\[}}2]], {{\[\[}}-4]]], {{\[\[\[}}4]], {{\[\[}}6]]]]> : tensor<2x2x1x1xi8> -> tensor<2x2x1x1x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01}>>
// CHECK: qat.conv %{{.*}}, %[[W]]
// CHECK-NOT: qat.quantize %{{.*}} : tensor<2x2x1x1xf32>
func.func @qat_float_weight_folded_and_fused(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %wf = onnx.Constant dense<[[[[1.0]], [[-2.0]]], [[[1.0]], [[1.5]]]]> : tensor<2x2x1x1xf32>
  %ws = onnx.Constant dense<[0.5, 0.25]> : tensor<2xf32>
  %wz = onnx.Constant dense<0> : tensor<2xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %wq = onnx.QuantizeLinear(%wf, %ws, %wz) {axis = 0 : i64} : (tensor<2x2x1x1xf32>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x2x1x1xi8>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<2x2x1x1xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  return %c : tensor<1x2x4x4xf32>
}

// -----

// qdq-rules §9 case 21: Conv -> BatchNormalization -> Relu -> Q: BN folds
// into the epilogue's per-channel scale m = gamma / sqrt(var + eps) =
// [1, 3, 1] and bias b * m + beta - m * mean = [1.5, 3, 0]; the int8 weights
// are the same resource, with the same bytes (never BN-folded, §6.8).
// CHECK-LABEL: func.func @conv_batchnorm_relu_q_folds_into_epilogue
// CHECK: %[[W:.*]] = qat.constant dense_resource<conv_bn_w> : tensor<3x2x3x3xi8> -> tensor<3x2x3x3x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01,1.250000e-01}>>
// CHECK-DAG: %[[S:.*]] = onnx.Constant dense<[1.000000e+00, 3.000000e+00, 1.000000e+00]> : tensor<3xf32>
// CHECK-DAG: %[[B:.*]] = onnx.Constant dense<[1.500000e+00, 3.000000e+00, 0.000000e+00]> : tensor<3xf32>
// CHECK: qat.conv %{{.*}}, %[[W]] bias(%[[B]]) scale(%[[S]]) {activation = #qat.clamp<relu>, {{.*}}pads = array<i64: 1, 1, 1, 1>{{.*}} -> tensor<1x3x4x4x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK-NOT: onnx.BatchNormalization
// CHECK: conv_bn_w: "0x01000000010203040506070809FFFEFDFCFBFAF9F8F7010203040506070809FFFEFDFCFBFAF9F8F7010203040506070809FFFEFDFCFBFAF9F8F7"
func.func @conv_batchnorm_relu_q_folds_into_epilogue(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense_resource<conv_bn_w> : tensor<3x2x3x3xi8>
  %b = onnx.Constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %g = onnx.Constant dense<[2.0, 3.0, 0.5]> : tensor<3xf32>
  %be = onnx.Constant dense<[1.0, 0.0, -1.0]> : tensor<3xf32>
  %m = onnx.Constant dense<[0.5, 1.0, 2.0]> : tensor<3xf32>
  %v = onnx.Constant dense<[4.0, 1.0, 0.25]> : tensor<3xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x3x3xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  %n = onnx.BatchNormalization(%c, %g, %be, %m, %v) {epsilon = 0.0 : f32} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  %r = onnx.Relu(%n) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  return %y : tensor<1x3x4x4xi8>
}

{-#
  dialect_resources: {
    builtin: {
      conv_bn_w: "0x01000000010203040506070809fffefdfcfbfaf9f8f7010203040506070809fffefdfcfbfaf9f8f7010203040506070809fffefdfcfbfaf9f8f7"
    }
  }
#-}

// -----

// A BatchNormalization after the activation is not folded (it would change
// the order of the epilogue, §6.11).
// CHECK-LABEL: func.func @batchnorm_after_relu_not_folded
// CHECK: %[[C:.*]] = qat.conv {{.*}}activation = #qat.clamp<relu>{{.*}} -> tensor<1x3x4x4xf32>
// CHECK: onnx.BatchNormalization(%[[C]],
func.func @batchnorm_after_relu_not_folded(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %g = onnx.Constant dense<[2.0, 3.0, 0.5]> : tensor<3xf32>
  %be = onnx.Constant dense<[1.0, 0.0, -1.0]> : tensor<3xf32>
  %m = onnx.Constant dense<[0.5, 1.0, 2.0]> : tensor<3xf32>
  %v = onnx.Constant dense<[4.0, 1.0, 0.25]> : tensor<3xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %r = onnx.Relu(%c) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %n = onnx.BatchNormalization(%r, %g, %be, %m, %v) : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  return %n : tensor<1x3x4x4xf32>
}

// -----

// qdq-rules §9 case 22: Conv -> Sigmoid / Mul (SiLU) without a Q: an int8
// conv with an f32 result feeding the float SiLU; no Q is invented.
// CHECK-LABEL: func.func @conv_silu_float_output
// CHECK: %[[C:.*]] = qat.conv {{.*}} -> tensor<1x3x4x4xf32>
// CHECK: %[[S:.*]] = onnx.Sigmoid(%[[C]])
// CHECK: %[[M:.*]] = onnx.Mul(%[[C]], %[[S]])
// CHECK: return %[[M]]
// CHECK-NOT: qat.quantize
func.func @conv_silu_float_output(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %sg = onnx.Sigmoid(%c) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %m = onnx.Mul(%c, %sg) : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  return %m : tensor<1x3x4x4xf32>
}

// -----

// qdq-rules §9 case 23: depthwise conv (group = C) with one scale per channel.
// CHECK-LABEL: func.func @depthwise_conv_fuses
// CHECK: qat.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, group = 3 : i64, pads = array<i64: 1, 1, 1, 1>, {{.*}}} : (tensor<1x3x4x4x!quant.uniform<i8:f32, 5.000000e-01>>, tensor<3x1x3x3x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01,1.250000e-01}>>) -> tensor<1x3x4x4x!quant.uniform<i8:f32, 2.500000e-01>>
func.func @depthwise_conv_fuses(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x1x3x3xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x3x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x1x3x3xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x1x3x3xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 3 : i64} : (tensor<1x3x4x4xf32>, tensor<3x1x3x3xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  return %y : tensor<1x3x4x4xi8>
}

// -----

// qdq-rules §9 case 19: asymmetric uint8 input (z = 128) with padding: the
// conv reads the u8 input directly (padding is the real value 0, i.e. 128).
// CHECK-LABEL: func.func @asymmetric_uint8_input_conv_fuses
// CHECK: qat.conv %{{.*}}, %{{.*}} {{.*}}pads = array<i64: 1, 1, 1, 1>{{.*}} : (tensor<1x2x4x4x!quant.uniform<u8:f32, 5.000000e-01:128>>, tensor<3x2x3x3x!quant.uniform<i8:f32:0, {{.*}}}>>) -> tensor<1x3x4x4x!quant.uniform<u8:f32, 2.500000e-01:128>>
func.func @asymmetric_uint8_input_conv_fuses(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xui8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<128> : tensor<ui8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x3x3xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x2x4x4xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x3x3xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x3x3xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%c, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x3x4x4xui8>
  return %y : tensor<1x3x4x4xui8>
}

// -----

// qdq-rules §9 case 24: Conv -> Add(DQ(r)) -> Relu -> Q: one conv with a
// residual and a post-residual Relu, int8 out.
// CHECK-LABEL: func.func @conv_add_quantized_residual_relu_q
// CHECK-DAG: %[[X:.*]] = qat.quantize %arg0
// CHECK-DAG: %[[R:.*]] = qat.quantize %arg1 {{.*}} -> tensor<1x3x4x4x!quant.uniform<i8:f32, 1.250000e-01>>
// CHECK: %[[C:.*]] = qat.conv %[[X]], %{{.*}} residual(%[[R]]) {{{.*}}residual_activation = #qat.clamp<relu>{{.*}}} : ({{.*}}) -> tensor<1x3x4x4x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK-NOT: activation = #qat.clamp<relu>, {{.*}}residual_activation
// CHECK-NOT: onnx.Add
// CHECK-NOT: onnx.Relu
func.func @conv_add_quantized_residual_relu_q(%x: tensor<1x2x4x4xf32>, %r: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %sr = onnx.Constant dense<0.125> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %qr = onnx.QuantizeLinear(%r, %sr, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  %dr = onnx.DequantizeLinear(%qr, %sr, %z) : (tensor<1x3x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %a = onnx.Add(%c, %dr) : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %rl = onnx.Relu(%a) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%rl, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  return %y : tensor<1x3x4x4xi8>
}

// -----

// The residual may be the Add's first operand.
// CHECK-LABEL: func.func @conv_residual_first_operand
// CHECK: qat.conv %{{.*}}, %{{.*}} residual(%{{.*}}) {{.*}} -> tensor<1x3x4x4x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK-NOT: onnx.Add
func.func @conv_residual_first_operand(%x: tensor<1x2x4x4xf32>, %r: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %sr = onnx.Constant dense<0.125> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %qr = onnx.QuantizeLinear(%r, %sr, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  %dr = onnx.DequantizeLinear(%qr, %sr, %z) : (tensor<1x3x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %s, %z) : (tensor<3x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %a = onnx.Add(%dr, %c) : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%a, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  return %y : tensor<1x3x4x4xi8>
}

// -----

// qdq-rules §9 cases 25 and 49: a float residual (no DQ): the conv output is
// float, the Add and Relu stay fp32 (the Add with the reason), the trailing Q
// stays a standalone quantize.
// CHECK-LABEL: func.func @conv_add_float_residual_not_fused
// CHECK: %[[C:.*]] = qat.conv {{.*}} -> tensor<1x3x4x4xf32>
// CHECK: %[[A:.*]] = onnx.Add(%[[C]], %arg1) {qat.fp32_reason = "residual input is not quantized (no DequantizeLinear), so the Add runs in fp32: it is a graph input"}
// CHECK: %[[R:.*]] = onnx.Relu(%[[A]]) {qat.fp32_reason = "not quantized in the model (no Q/DQ around it): its input is the fp32 output of onnx.Add"}
// CHECK: %[[Q:.*]] = qat.quantize %[[R]] {{.*}} -> tensor<1x3x4x4x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK-NOT: residual(
func.func @conv_add_float_residual_not_fused(%x: tensor<1x2x4x4xf32>, %r: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %s, %z) : (tensor<3x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %a = onnx.Add(%c, %r) : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %rl = onnx.Relu(%a) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%rl, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  return %y : tensor<1x3x4x4xi8>
}

// -----

// qdq-rules §9 case 26 (ResNet-v2 order): Conv -> Relu -> Add(DQ(r)) is an
// activation before the residual, not after it (§6.11).
// CHECK-LABEL: func.func @conv_relu_add_activation_before_residual
// CHECK: qat.conv %{{.*}}, %{{.*}} residual(%{{.*}}) {activation = #qat.clamp<relu>,
// CHECK-NOT: residual_activation
// CHECK: return
func.func @conv_relu_add_activation_before_residual(%x: tensor<1x2x4x4xf32>, %r: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %qr = onnx.QuantizeLinear(%r, %s, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  %dr = onnx.DequantizeLinear(%qr, %s, %z) : (tensor<1x3x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %s, %z) : (tensor<3x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %rl = onnx.Relu(%c) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %a = onnx.Add(%rl, %dr) : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%a, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  return %y : tensor<1x3x4x4xi8>
}

// -----

// qdq-rules §9 case 26, other order: Conv -> Add(DQ(r)) -> Clip(0, 6) puts
// the clamp after the residual.
// CHECK-LABEL: func.func @conv_add_clip_activation_after_residual
// CHECK: qat.conv %{{.*}}, %{{.*}} residual(%{{.*}}) {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, residual_activation = #qat.clamp<0.000000e+00, 6.000000e+00>,
// CHECK-NOT: {activation =
func.func @conv_add_clip_activation_after_residual(%x: tensor<1x2x4x4xf32>, %r: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %qr = onnx.QuantizeLinear(%r, %s, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  %dr = onnx.DequantizeLinear(%qr, %s, %z) : (tensor<1x3x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %s, %z) : (tensor<3x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %a = onnx.Add(%c, %dr) : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %cl = onnx.Clip(%a) {min = 0.0 : f32, max = 6.0 : f32} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%cl, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  return %y : tensor<1x3x4x4xi8>
}

// -----

// qdq-rules §9 case 27: DQ(a, s1) + DQ(b, s2) -> Q(s3) is one int8 add whose
// types carry the three scales.
// CHECK-LABEL: func.func @add_of_two_dequantized_inputs
// CHECK: qat.add %{{.*}}, %{{.*}} {rounding = #qat.rounding<half_to_even>} : (tensor<8x!quant.uniform<i8:f32, 5.000000e-01>>, tensor<8x!quant.uniform<i8:f32, 2.500000e-01>>) -> tensor<8x!quant.uniform<i8:f32, 1.250000e-01>>
// CHECK-NOT: onnx.Add
func.func @add_of_two_dequantized_inputs(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xi8> {
  %s1 = onnx.Constant dense<0.5> : tensor<f32>
  %s2 = onnx.Constant dense<0.25> : tensor<f32>
  %s3 = onnx.Constant dense<0.125> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %qa = onnx.QuantizeLinear(%a, %s1, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %da = onnx.DequantizeLinear(%qa, %s1, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %qb = onnx.QuantizeLinear(%b, %s2, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %db = onnx.DequantizeLinear(%qb, %s2, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %s = onnx.Add(%da, %db) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y = onnx.QuantizeLinear(%s, %s3, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  return %y : tensor<8xi8>
}

// -----

// An int8 Mul with a Relu and no Q: int8 in, f32 out.
// CHECK-LABEL: func.func @mul_relu_float_output
// CHECK: %[[M:.*]] = qat.mul %{{.*}}, %{{.*}} {activation = #qat.clamp<relu>, rounding = #qat.rounding<half_to_even>} : ({{.*}}) -> tensor<8xf32>
// CHECK: return %[[M]]
func.func @mul_relu_float_output(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %qa = onnx.QuantizeLinear(%a, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %da = onnx.DequantizeLinear(%qa, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %qb = onnx.QuantizeLinear(%b, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %db = onnx.DequantizeLinear(%qb, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %m = onnx.Mul(%da, %db) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %r = onnx.Relu(%m) : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// qdq-rules §9 case 28: Add with one quantized and one float input and no Q
// stays float (no partial int8).
// CHECK-LABEL: func.func @add_with_float_input_stays_float
// CHECK: %[[D:.*]] = qat.dequantize
// CHECK: onnx.Add(%[[D]], %arg1) {qat.fp32_reason = "input B is not quantized (no DequantizeLinear): it is a graph input"}
// CHECK-NOT: qat.add
func.func @add_with_float_input_stays_float(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %qa = onnx.QuantizeLinear(%a, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %da = onnx.DequantizeLinear(%qa, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %y = onnx.Add(%da, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// An Add of a quantized input and a float constant: stays float, and says so.
// CHECK-LABEL: func.func @add_with_float_constant_stays_float
// CHECK: onnx.Add({{.*}}) {qat.fp32_reason = "input B is a float constant"}
func.func @add_with_float_constant_stays_float(%a: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %c = onnx.Constant dense<1.0> : tensor<8xf32>
  %qa = onnx.QuantizeLinear(%a, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %da = onnx.DequantizeLinear(%qa, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %y = onnx.Add(%da, %c) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// qdq-rules §9 case 31: DQ -> AveragePool(count_include_pad=1, pads) -> Q is
// an int8 average pool with the attributes kept.
// CHECK-LABEL: func.func @avgpool_count_include_pad_fuses
// CHECK: qat.avg_pool %{{.*}} {count_include_pad = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, rounding = #qat.rounding<half_to_even>, strides = array<i64: 1, 1>} : tensor<1x2x4x4x!quant.uniform<i8:f32, 5.000000e-01:-5>> -> tensor<1x2x4x4x!quant.uniform<i8:f32, 2.500000e-01:3>>
// CHECK-NOT: onnx.AveragePool
func.func @avgpool_count_include_pad_fuses(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<-5> : tensor<i8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %zo = onnx.Constant dense<3> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %p = onnx.AveragePool(%dq) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, count_include_pad = 1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %y = onnx.QuantizeLinear(%p, %so, %zo) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  return %y : tensor<1x2x4x4xi8>
}

// -----

// An average pool followed by a Relu before the Q: the Q moves back across
// the Relu (Q(relu(x)) = max(Q(x), z) exactly), the pool runs int8 with an
// int8 result and the Relu is an integer clamp at the zero point.
// CHECK-LABEL: func.func @avgpool_relu_q_pool_float_out
// CHECK: %[[P:.*]] = qat.avg_pool {{.*}} -> tensor<1x2x2x2x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: qat.clamp %[[P]] {max = 127 : i64, min = 0 : i64}
// CHECK-NOT: onnx.Relu
func.func @avgpool_relu_q_pool_float_out(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %p = onnx.AveragePool(%dq) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  %r = onnx.Relu(%p) : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %y = onnx.QuantizeLinear(%r, %s, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  return %y : tensor<1x2x2x2xi8>
}

// -----

// qdq-rules §9 case 32: DQ -> GlobalAveragePool -> Flatten -> Q -> DQ ->
// Gemm: the Gemm's input Q moves back across the Flatten (never across the
// GAP), so the GAP runs int8 with an int8 result, the Flatten is an int8
// reshape and the Gemm reads it.
// CHECK-LABEL: func.func @gap_flatten_gemm
// CHECK: %[[X:.*]] = qat.quantize %arg0 {{.*}} -> tensor<1x3x4x4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[G:.*]] = qat.global_avg_pool %[[X]] {{.*}} -> tensor<1x3x1x1x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK: %[[F:.*]] = qat.reshape %[[G]] {{.*}} -> tensor<1x3x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK: qat.matmul %[[F]], %{{.*}} {{.*}}transpose_rhs = true{{.*}} -> tensor<1x2xf32>
// CHECK-NOT: qat.quantize
// CHECK-NOT: onnx.
func.func @gap_flatten_gemm(%x: tensor<1x3x4x4xf32>) -> tensor<1x2xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %s2 = onnx.Constant dense<0.25> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %wq = onnx.Constant dense<1> : tensor<2x3xi8>
  %ws = onnx.Constant dense<[0.5, 0.25]> : tensor<2xf32>
  %wz = onnx.Constant dense<0> : tensor<2xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x3x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xf32>
  %g = onnx.GlobalAveragePool(%dq) : (tensor<1x3x4x4xf32>) -> tensor<1x3x1x1xf32>
  %f = onnx.Flatten(%g) : (tensor<1x3x1x1xf32>) -> tensor<1x3xf32>
  %qf = onnx.QuantizeLinear(%f, %s2, %z) : (tensor<1x3xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3xi8>
  %df = onnx.DequantizeLinear(%qf, %s2, %z) : (tensor<1x3xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<2x3xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x3xf32>
  %y = onnx.Gemm(%df, %w) {transB = 1 : i64} : (tensor<1x3xf32>, tensor<2x3xf32>) -> tensor<1x2xf32>
  return %y : tensor<1x2xf32>
}

// -----

// qdq-rules §9 case 41: one DQ feeding two Convs: duplicated, both fuse.
// CHECK-LABEL: func.func @shared_dequantize_two_convs_both_fuse
// CHECK: %[[X:.*]] = qat.quantize %arg0
// CHECK-COUNT-2: qat.conv %[[X]],
// CHECK-NOT: onnx.Conv
// CHECK-NOT: qat.dequantize
func.func @shared_dequantize_two_convs_both_fuse(%x: tensor<1x2x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %s, %z) : (tensor<3x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2x1x1xf32>
  %c1 = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %c2 = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  return %c1, %c2 : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>
}

// -----

// qdq-rules §9 case 42: a conv's output Q read by an int8 conv and by a graph
// output: the second conv reads the int8 value, the graph output a DQ of it.
// CHECK-LABEL: func.func @conv_q_feeds_int8_conv_and_graph_output
// CHECK: %[[C1:.*]] = qat.conv %{{.*}} -> tensor<1x2x4x4x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK-DAG: %[[C2:.*]] = qat.conv %[[C1]], %{{.*}} -> tensor<1x3x4x4xf32>
// CHECK-DAG: %[[D:.*]] = qat.dequantize %[[C1]]
// CHECK: return %[[D]], %[[C2]]
func.func @conv_q_feeds_int8_conv_and_graph_output(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x3x4x4xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %s2 = onnx.Constant dense<0.25> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %w1q = onnx.Constant dense<1> : tensor<2x2x1x1xi8>
  %w2q = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w1 = onnx.DequantizeLinear(%w1q, %s, %z) : (tensor<2x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<2x2x1x1xf32>
  %c1 = onnx.Conv(%dq, %w1) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %q1 = onnx.QuantizeLinear(%c1, %s2, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %d1 = onnx.DequantizeLinear(%q1, %s2, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w2 = onnx.DequantizeLinear(%w2q, %s, %z) : (tensor<3x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2x1x1xf32>
  %c2 = onnx.Conv(%d1, %w2) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  return %d1, %c2 : tensor<1x2x4x4xf32>, tensor<1x3x4x4xf32>
}

// -----

// Attention scores: MatMul(DQ(q), DQ(k^T)) -> Mul(1/sqrt(d)) -> Softmax: an
// int8 matmul of two activations with the scale folded into the epilogue and
// an f32 result for the float Softmax.
// CHECK-LABEL: func.func @attention_scores_scale_folded
// CHECK: %[[S:.*]] = onnx.Constant dense<1.250000e-01> : tensor<4xf32>
// CHECK: %[[M:.*]] = qat.matmul %{{.*}}, %{{.*}} scale(%[[S]]) {rounding = #qat.rounding<half_to_even>} : (tensor<1x4x8x!quant.uniform<i8:f32, 5.000000e-01>>, tensor<1x8x4x!quant.uniform<i8:f32, 2.500000e-01>>, tensor<4xf32>) -> tensor<1x4x4xf32>
// CHECK: onnx.Softmax(%[[M]])
// CHECK-NOT: onnx.Mul
// CHECK-NOT: onnx.MatMul
func.func @attention_scores_scale_folded(%q: tensor<1x4x8xf32>, %k: tensor<1x8x4xf32>) -> tensor<1x4x4xf32> {
  %s1 = onnx.Constant dense<0.5> : tensor<f32>
  %s2 = onnx.Constant dense<0.25> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %c = onnx.Constant dense<0.125> : tensor<f32>
  %qq = onnx.QuantizeLinear(%q, %s1, %z) : (tensor<1x4x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x4x8xi8>
  %dq = onnx.DequantizeLinear(%qq, %s1, %z) : (tensor<1x4x8xi8>, tensor<f32>, tensor<i8>) -> tensor<1x4x8xf32>
  %qk = onnx.QuantizeLinear(%k, %s2, %z) : (tensor<1x8x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x4xi8>
  %dk = onnx.DequantizeLinear(%qk, %s2, %z) : (tensor<1x8x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x4xf32>
  %m = onnx.MatMul(%dq, %dk) : (tensor<1x4x8xf32>, tensor<1x8x4xf32>) -> tensor<1x4x4xf32>
  %sc = onnx.Mul(%m, %c) : (tensor<1x4x4xf32>, tensor<f32>) -> tensor<1x4x4xf32>
  %sm = onnx.Softmax(%sc) {axis = -1 : i64} : (tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  return %sm : tensor<1x4x4xf32>
}

// -----

// A Linear exported as MatMul + Add(bias) then Div(const): the bias and the
// division fold into the epilogue: (acc + [1, 2]) / 4.
// CHECK-LABEL: func.func @matmul_add_bias_div_folded
// CHECK-DAG: %[[S:.*]] = onnx.Constant dense<2.500000e-01> : tensor<2xf32>
// CHECK-DAG: %[[B:.*]] = onnx.Constant dense<[2.500000e-01, 5.000000e-01]> : tensor<2xf32>
// CHECK: qat.matmul %{{.*}}, %{{.*}} bias(%[[B]]) scale(%[[S]]) {{.*}} -> tensor<3x2x!quant.uniform<i8:f32, 1.250000e-01>>
// CHECK-NOT: onnx.Add
// CHECK-NOT: onnx.Div
func.func @matmul_add_bias_div_folded(%x: tensor<3x4xf32>) -> tensor<3x2xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %so = onnx.Constant dense<0.125> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %wq = onnx.Constant dense<1> : tensor<4x2xi8>
  %ws = onnx.Constant dense<[0.5, 0.25]> : tensor<2xf32>
  %wz = onnx.Constant dense<0> : tensor<2xi8>
  %b = onnx.Constant dense<[1.0, 2.0]> : tensor<2xf32>
  %d = onnx.Constant dense<4.0> : tensor<f32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<3x4xf32>, tensor<f32>, tensor<i8>) -> tensor<3x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<3x4xi8>, tensor<f32>, tensor<i8>) -> tensor<3x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 1 : i64} : (tensor<4x2xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<4x2xf32>
  %m = onnx.MatMul(%dq, %w) : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %a = onnx.Add(%m, %b) : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %v = onnx.Div(%a, %d) : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %y = onnx.QuantizeLinear(%v, %so, %z) : (tensor<3x2xf32>, tensor<f32>, tensor<i8>) -> tensor<3x2xi8>
  return %y : tensor<3x2xi8>
}

// -----

// Reasons for what stays fp32: a Conv whose input or weight is not
// dequantized, a Softmax on dequantized input, a float-only Relu.
// CHECK-LABEL: func.func @fp32_reasons
// CHECK: onnx.Conv({{.*}}qat.fp32_reason = "input is not quantized (no DequantizeLinear before the Conv): it is a graph input"
// CHECK: onnx.Conv({{.*}}qat.fp32_reason = "weight is not a quantized constant (no DequantizeLinear on the weight)"
// CHECK: onnx.Softmax({{.*}}qat.fp32_reason = "no int8 kernel for Softmax; it computes in fp32 on dequantized inputs"
// CHECK: onnx.Relu({{.*}}qat.fp32_reason = "not quantized in the model (no Q/DQ around it): its input is a graph input"
func.func @fp32_reasons(%x: tensor<1x2x4x4xf32>, %wf: tensor<3x2x1x1xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %w = onnx.DequantizeLinear(%wq, %s, %z) : (tensor<3x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2x1x1xf32>
  %c1 = onnx.Conv(%x, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %c2 = onnx.Conv(%dq, %wf) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %sm = onnx.Softmax(%dq) {axis = 1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %r = onnx.Relu(%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return %c1, %c2, %sm, %r : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// -----

// Clip(0, 6) right after the conv is its activation (before any residual).
// CHECK-LABEL: func.func @conv_clip6_q_fuses
// CHECK: qat.conv %{{.*}}, %{{.*}} {activation = #qat.clamp<0.000000e+00, 6.000000e+00>, {{.*}} -> tensor<1x3x4x4x!quant.uniform<i8:f32, 0.04724409431219101>>
// CHECK-NOT: onnx.Clip
func.func @conv_clip6_q_fuses(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.0472440943> : tensor<f32>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %s, %z) : (tensor<3x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %cl = onnx.Clip(%c) {min = 0.0 : f32, max = 6.0 : f32} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%cl, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  return %y : tensor<1x3x4x4xi8>
}

// -----

// A weight with a non-zero zero point is not fused (the legality check
// refuses it in the pipeline; the fusion pass alone says why).
// CHECK-LABEL: func.func @conv_weight_zero_point_not_fused
// CHECK: onnx.Conv({{.*}}qat.fp32_reason = "weight zero point is not 0"
// CHECK-NOT: qat.conv
func.func @conv_weight_zero_point_not_fused(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<[0, 0, 1]> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  return %c : tensor<1x3x4x4xf32>
}

// -----

// A residual that only broadcasts to the conv output is not fused into the
// conv's epilogue: the conv stops at f32 and the Add stays fp32.
// CHECK-LABEL: func.func @conv_broadcast_residual_not_fused
// CHECK: %[[C:.*]] = qat.conv {{.*}} -> tensor<1x3x4x4xf32>
// CHECK: onnx.Add(%[[C]], %{{.*}}) {qat.fp32_reason =
// CHECK-NOT: residual(
func.func @conv_broadcast_residual_not_fused(%x: tensor<1x2x4x4xf32>, %r: tensor<1x3x1x1xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %qr = onnx.QuantizeLinear(%r, %s, %z) : (tensor<1x3x1x1xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x1x1xi8>
  %dr = onnx.DequantizeLinear(%qr, %s, %z) : (tensor<1x3x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x1x1xf32>
  %w = onnx.DequantizeLinear(%wq, %s, %z) : (tensor<3x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %a = onnx.Add(%c, %dr) : (tensor<1x3x4x4xf32>, tensor<1x3x1x1xf32>) -> tensor<1x3x4x4xf32>
  %y = onnx.QuantizeLinear(%a, %s, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  return %y : tensor<1x3x4x4xi8>
}

// -----

// qdq-rules §9 case 32, no Q after the GAP: the pool reads the int8 input and
// produces f32 (the project's int8-in/fp32-out pooling); no Q is invented
// and none is moved across the GAP.
// CHECK-LABEL: func.func @gap_without_q_float_output
// CHECK: %[[X:.*]] = qat.quantize %arg0
// CHECK: %[[G:.*]] = qat.global_avg_pool %[[X]] {{.*}} -> tensor<1x3x1x1xf32>
// CHECK: onnx.Flatten(%[[G]])
// CHECK-NOT: qat.quantize
func.func @gap_without_q_float_output(%x: tensor<1x3x4x4xf32>) -> tensor<1x3xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x3x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xf32>
  %g = onnx.GlobalAveragePool(%dq) : (tensor<1x3x4x4xf32>) -> tensor<1x3x1x1xf32>
  %f = onnx.Flatten(%g) : (tensor<1x3x1x1xf32>) -> tensor<1x3xf32>
  return %f : tensor<1x3xf32>
}

// The whole pipeline (--qat-lower) on Inputs/digits-like-block.mlir:
// conv1 + Relu + Q, MaxPool by propagation, conv2 reading it, a quantized
// residual Add with an f32 result, GAP, Flatten, Q, Gemm.
// LOWER-LABEL: func.func @digits_like_block
// LOWER: %[[X:.*]] = qat.quantize %arg0
// LOWER: %[[C1:.*]] = qat.conv %[[X]], %{{.*}} bias(%{{.*}}) {activation = #qat.clamp<relu>, {{.*}} -> tensor<1x4x4x4x!quant.uniform<i8:f32, 2.500000e-01>>
// LOWER: %[[P:.*]] = qat.max_pool %[[C1]]
// LOWER: %[[C2:.*]] = qat.conv %[[P]], %{{.*}} {activation = #qat.clamp<relu>, {{.*}} -> tensor<1x4x2x2x!quant.uniform<i8:f32, 1.250000e-01>>
// LOWER: %[[A:.*]] = qat.add %[[P]], %[[C2]] {{.*}} -> tensor<1x4x2x2xf32>
// LOWER: %[[G:.*]] = onnx.GlobalAveragePool(%[[A]])
// LOWER: %[[Q:.*]] = qat.quantize %[[G]]
// LOWER: %[[F:.*]] = qat.reshape %[[Q]]
// LOWER: %[[Y:.*]] = qat.matmul %[[F]], %{{.*}} bias(%{{.*}}) {{{.*}}transpose_rhs = true} {{.*}} -> tensor<1x2xf32>
// LOWER: return %[[Y]]
// LOWER-NOT: qat.dequantize
