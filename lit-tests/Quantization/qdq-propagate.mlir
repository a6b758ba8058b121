// Tests of --qat-qdq-propagate (after --qat-qdq-convert --qat-weights-fold):
// DQ moves forward and Q backward across value-selecting ops only (qdq-rules
// §4.2), DQ -> Q collapses (identity or qat.requantize), Q -> DQ is never
// removed, shared DQs are duplicated. Ops that compute new values are never
// crossed (§6.3).
//
// RUN: qatc-opt %s --split-input-file --qat-qdq-convert --qat-weights-fold --qat-qdq-propagate | FileCheck %s
// Cases where qdq-rules §4.2 / §9 cases 46-47 ask for more than the DQ-forward
// moves (Q backward across Relu/Clip, redundant clamps deleted):
// RUN: qatc-opt %s --split-input-file --qat-qdq-convert --qat-weights-fold --qat-qdq-propagate | FileCheck %s --check-prefix=RULE

// qdq-rules §9 case 29: DQ(s) -> MaxPool -> Q(s) is an int8 MaxPool with no
// requantize.
// CHECK-LABEL: func.func @maxpool_same_scale_runs_int8
// CHECK: %[[Q:.*]] = qat.quantize %arg0 {{.*}} -> tensor<1x2x4x4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK-NEXT: %[[P:.*]] = qat.max_pool %[[Q]] {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x2x4x4x!quant.uniform<i8:f32, 5.000000e-01>> -> tensor<1x2x2x2x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK-NEXT: %[[D:.*]] = qat.dequantize %[[P]]
// CHECK-NEXT: return %[[D]]
// CHECK-NOT: qat.requantize
// CHECK-NOT: onnx.MaxPool
func.func @maxpool_same_scale_runs_int8(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %p = onnx.MaxPool(%dq) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  %q2 = onnx.QuantizeLinear(%p, %s, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %s, %z) : (tensor<1x2x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xf32>
  return %dq2 : tensor<1x2x2x2xf32>
}

// -----

// qdq-rules §9 case 30: DQ(s) -> MaxPool -> [Q(s) -> DQ(s) of the Conv
// input] -> Conv: the MaxPool runs int8 and the Conv reads a DQ of its
// result directly.
// CHECK-LABEL: func.func @maxpool_feeding_conv
// CHECK: %[[Q:.*]] = qat.quantize %arg0
// CHECK: %[[P:.*]] = qat.max_pool %[[Q]]
// CHECK-DAG: %[[D:.*]] = qat.dequantize %[[P]]
// CHECK-DAG: %[[W:.*]] = qat.dequantize %{{.*}} : tensor<3x2x1x1x!quant.uniform<i8:f32:0
// CHECK: onnx.Conv(%[[D]], %[[W]])
// CHECK-NOT: qat.quantize
func.func @maxpool_feeding_conv(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x2x2xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %p = onnx.MaxPool(%dq) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  %q2 = onnx.QuantizeLinear(%p, %s, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %s, %z) : (tensor<1x2x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %c = onnx.Conv(%dq2, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x2x2xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x2x2xf32>
  return %c : tensor<1x3x2x2xf32>
}

// -----

// A float MaxPool (digits-style: Conv -> Relu -> MaxPool -> Q) gets the Q
// moved backward in front of it: the MaxPool runs int8.
// CHECK-LABEL: func.func @quantize_moves_backward_across_maxpool
// CHECK: %[[Q:.*]] = qat.quantize %arg0 {{.*}} -> tensor<1x2x4x4x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK: %[[P:.*]] = qat.max_pool %[[Q]]
// CHECK: %[[D:.*]] = qat.dequantize %[[P]]
// CHECK: return %[[D]]
// CHECK-NOT: onnx.MaxPool
func.func @quantize_moves_backward_across_maxpool(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  %s = onnx.Constant dense<0.25> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %p = onnx.MaxPool(%x) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  %q = onnx.QuantizeLinear(%p, %s, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xf32>
  return %dq : tensor<1x2x2x2xf32>
}

// -----

// DQ(s1) -> MaxPool -> Q(s2): the MaxPool runs int8 at s1, followed by one
// requantize to s2.
// CHECK-LABEL: func.func @maxpool_different_scales_requantizes
// CHECK: %[[Q:.*]] = qat.quantize %arg0 {{.*}} -> tensor<1x2x4x4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[P:.*]] = qat.max_pool %[[Q]] {{.*}} -> tensor<1x2x2x2x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[R:.*]] = qat.requantize %[[P]] {{.*}} : tensor<1x2x2x2x!quant.uniform<i8:f32, 5.000000e-01>> -> tensor<1x2x2x2x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK: qat.dequantize %[[R]]
func.func @maxpool_different_scales_requantizes(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %s2 = onnx.Constant dense<0.25> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %p = onnx.MaxPool(%dq) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  %q2 = onnx.QuantizeLinear(%p, %s2, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %s2, %z) : (tensor<1x2x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xf32>
  return %dq2 : tensor<1x2x2x2xf32>
}

// -----

// GlobalMaxPool is a max pool over the whole spatial extent.
// CHECK-LABEL: func.func @global_max_pool_runs_int8
// CHECK: qat.max_pool %{{.*}} {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 4, 4>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<1x2x4x4x!quant.uniform<i8:f32, 5.000000e-01>> -> tensor<1x2x1x1x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK-NOT: onnx.GlobalMaxPool
func.func @global_max_pool_runs_int8(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x1x1xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %p = onnx.GlobalMaxPool(%dq) : (tensor<1x2x4x4xf32>) -> tensor<1x2x1x1xf32>
  return %p : tensor<1x2x1x1xf32>
}

// -----

// qdq-rules §9 case 33: DQ(s) -> Transpose(perm) -> Q(s) is an int8 transpose.
// CHECK-LABEL: func.func @transpose_same_scale_runs_int8
// CHECK: %[[Q:.*]] = qat.quantize %arg0
// CHECK: %[[T:.*]] = qat.transpose %[[Q]] {perm = array<i64: 0, 2, 3, 1>} : tensor<1x2x3x4x!quant.uniform<i8:f32, 5.000000e-01>> -> tensor<1x3x4x2x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[D:.*]] = qat.dequantize %[[T]]
// CHECK: return %[[D]]
// CHECK-NOT: onnx.Transpose
func.func @transpose_same_scale_runs_int8(%x: tensor<1x2x3x4xf32>) -> tensor<1x3x4x2xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x3x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x3x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x3x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x3x4xf32>
  %t = onnx.Transpose(%dq) {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x2x3x4xf32>) -> tensor<1x3x4x2xf32>
  %q2 = onnx.QuantizeLinear(%t, %s, %z) : (tensor<1x3x4x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x2xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %s, %z) : (tensor<1x3x4x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x2xf32>
  return %dq2 : tensor<1x3x4x2xf32>
}

// -----

// Reshape, Flatten, Squeeze, Unsqueeze, Identity, Slice and Gather move
// values only: a DQ crosses the whole chain.
// CHECK-LABEL: func.func @data_movement_chain_runs_int8
// CHECK: %[[Q:.*]] = qat.quantize %arg0
// CHECK: %[[A:.*]] = qat.reshape %[[Q]] {{.*}} -> tensor<2x4x4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[B:.*]] = qat.reshape %[[A]] {{.*}} -> tensor<1x2x4x4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[C:.*]] = qat.reshape %[[B]] {{.*}} -> tensor<1x2x4x4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[D:.*]] = qat.slice %[[C]] {ends = array<i64: 1, 2, 4, 3>, starts = array<i64: 0, 0, 0, 1>, steps = array<i64: 1, 1, 1, 1>} {{.*}} -> tensor<1x2x4x2x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[E:.*]] = qat.gather %[[D]][%{{.*}}] {axis = 1 : i64}
// CHECK: %[[F:.*]] = qat.reshape %[[E]] {{.*}} -> tensor<1x16x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[G:.*]] = qat.reshape %[[F]] {{.*}} -> tensor<16x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[R:.*]] = qat.dequantize %[[G]]
// CHECK: return %[[R]]
func.func @data_movement_chain_runs_int8(%x: tensor<1x2x4x4xf32>) -> tensor<16xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %idx = onnx.Constant dense<[1, 0]> : tensor<2xi64>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %a = onnx.Squeeze(%dq) {axes = array<i64: 0>} : (tensor<1x2x4x4xf32>) -> tensor<2x4x4xf32>
  %b = onnx.Unsqueeze(%a) {axes = array<i64: 0>} : (tensor<2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = onnx.Identity(%b) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %d = onnx.Slice(%c) {starts = array<i64: 0, 0, 0, 1>, ends = array<i64: 1, 2, 4, 3>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x2xf32>
  %e = onnx.Gather(%d, %idx) {axis = 1 : i64} : (tensor<1x2x4x2xf32>, tensor<2xi64>) -> tensor<1x2x4x2xf32>
  %f = onnx.Flatten(%e) : (tensor<1x2x4x2xf32>) -> tensor<1x16xf32>
  %g = onnx.Reshape(%f) : (tensor<1x16xf32>) -> tensor<16xf32>
  return %g : tensor<16xf32>
}

// -----

// The same chain in the other direction: a Q after float data movement moves
// backward to its start (the chain's values have no other consumer).
// CHECK-LABEL: func.func @quantize_moves_backward_across_reshapes
// CHECK: %[[S:.*]] = onnx.Sigmoid(%arg0)
// CHECK: %[[Q:.*]] = qat.quantize %[[S]] {{.*}} -> tensor<1x2x4x4x!quant.uniform<i8:f32, 3.906250e-03>>
// CHECK: %[[T:.*]] = qat.transpose %[[Q]]
// CHECK: %[[R:.*]] = qat.reshape %[[T]]
// CHECK: %[[D:.*]] = qat.dequantize %[[R]]
// CHECK: return %[[D]]
func.func @quantize_moves_backward_across_reshapes(%x: tensor<1x2x4x4xf32>) -> tensor<1x32xf32> {
  %s = onnx.Constant dense<0.00390625> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %sg = onnx.Sigmoid(%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %t = onnx.Transpose(%sg) {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x4x4x2xf32>
  %r = onnx.Flatten(%t) : (tensor<1x4x4x2xf32>) -> tensor<1x32xf32>
  %q = onnx.QuantizeLinear(%r, %s, %z) : (tensor<1x32xf32>, tensor<f32>, tensor<i8>) -> tensor<1x32xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x32xi8>, tensor<f32>, tensor<i8>) -> tensor<1x32xf32>
  return %dq : tensor<1x32xf32>
}

// -----

// A channel split (ShuffleNetV2): the Q of the second half stays below its
// Slice, whose input the first half's Slice reads too, and quantizes only
// that half; a Slice of an input nothing else reads passes the Q back into
// the Sigmoid's result.
// CHECK-LABEL: func.func @quantize_stays_below_a_partial_slice
// CHECK: %[[S:.*]] = onnx.Sigmoid(%arg0)
// CHECK: %[[A:.*]] = onnx.Slice(%[[S]]) {{.*}}starts = array<i64: 0, 0, 0, 0>
// CHECK: %[[B:.*]] = onnx.Slice(%[[S]]) {{.*}}starts = array<i64: 0, 2, 0, 0>
// CHECK: %[[Q:.*]] = qat.quantize %[[B]] {{.*}} -> tensor<1x2x4x4x!quant.uniform
// CHECK: %[[Q2:.*]] = qat.quantize %arg1 {{.*}} -> tensor<1x4x4x4x!quant.uniform
// CHECK: qat.slice %[[Q2]]
func.func @quantize_stays_below_a_partial_slice(%x: tensor<1x4x4x4xf32>, %y: tensor<1x4x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %s = onnx.Constant dense<0.00390625> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %sg = onnx.Sigmoid(%x) : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %a = onnx.Slice(%sg) {starts = array<i64: 0, 0, 0, 0>, ends = array<i64: 1, 2, 4, 4>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x4x4x4xf32>) -> tensor<1x2x4x4xf32>
  %b = onnx.Slice(%sg) {starts = array<i64: 0, 2, 0, 0>, ends = array<i64: 1, 4, 4, 4>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x4x4x4xf32>) -> tensor<1x2x4x4xf32>
  %q = onnx.QuantizeLinear(%b, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %c = onnx.Slice(%y) {starts = array<i64: 0, 2, 0, 0>, ends = array<i64: 1, 4, 4, 4>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x4x4x4xf32>) -> tensor<1x2x4x4xf32>
  %q2 = onnx.QuantizeLinear(%c, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  return %a, %dq, %dq2 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// -----

// §4.2: never move a Q backward past a value with another consumer (here a
// graph output that needs the float result).
// CHECK-LABEL: func.func @quantize_not_moved_past_shared_value
// CHECK: %[[P:.*]] = onnx.MaxPool(%arg0)
// CHECK: %[[Q:.*]] = qat.quantize %[[P]]
// CHECK: return %[[P]],
// CHECK-NOT: qat.max_pool
func.func @quantize_not_moved_past_shared_value(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %p = onnx.MaxPool(%x) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  %q = onnx.QuantizeLinear(%p, %s, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xf32>
  return %p, %dq : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
}

// -----

// The same with a float (non-Q) consumer of the Reshape's result.
// CHECK-LABEL: func.func @quantize_not_moved_past_value_with_float_consumer
// CHECK: %[[R:.*]] = onnx.Reshape(%arg0)
// CHECK-DAG: qat.quantize %[[R]]
// CHECK-DAG: onnx.Sigmoid(%[[R]])
// CHECK-NOT: qat.reshape
func.func @quantize_not_moved_past_value_with_float_consumer(%x: tensor<2x8xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %r = onnx.Reshape(%x) : (tensor<2x8xf32>) -> tensor<16xf32>
  %sg = onnx.Sigmoid(%r) : (tensor<16xf32>) -> tensor<16xf32>
  %q = onnx.QuantizeLinear(%r, %s, %z) : (tensor<16xf32>, tensor<f32>, tensor<i8>) -> tensor<16xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<16xi8>, tensor<f32>, tensor<i8>) -> tensor<16xf32>
  return %sg, %dq : tensor<16xf32>, tensor<16xf32>
}

// -----

// qdq-rules §9 case 34: a per-axis DQ (a weight) followed by a Reshape that
// merges the channel axis is not propagated.
// CHECK-LABEL: func.func @per_axis_reshape_not_propagated
// CHECK: %[[W:.*]] = qat.constant {{.*}} -> tensor<4x2x!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01,1.250000e-01,6.250000e-02}>>
// CHECK: %[[D:.*]] = qat.dequantize %[[W]]
// CHECK: onnx.Reshape(%[[D]]) : (tensor<4x2xf32>) -> tensor<8xf32>
// CHECK-NOT: qat.reshape
func.func @per_axis_reshape_not_propagated() -> tensor<8xf32> {
  %wq = onnx.Constant dense<[[1, 2], [3, 4], [5, 6], [7, 8]]> : tensor<4x2xi8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125, 0.0625]> : tensor<4xf32>
  %wz = onnx.Constant dense<0> : tensor<4xi8>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<4x2xi8>, tensor<4xf32>, tensor<4xi8>) -> tensor<4x2xf32>
  %r = onnx.Reshape(%w) : (tensor<4x2xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// qdq-rules §9 case 37: Split is not a supported propagation: nothing fires,
// the Split stays in float between its DQ and the Qs of its outputs.
// CHECK-LABEL: func.func @split_not_propagated
// CHECK: %[[Q:.*]] = qat.quantize %arg0
// CHECK: %[[D:.*]] = qat.dequantize %[[Q]]
// CHECK: %[[S:.*]]:2 = onnx.Split(%[[D]])
// CHECK-DAG: qat.quantize %[[S]]#0
// CHECK-DAG: qat.quantize %[[S]]#1
// CHECK-NOT: qat.slice
func.func @split_not_propagated(%x: tensor<1x4x2x2xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x4x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x4x2x2xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x4x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x4x2x2xf32>
  %sp:2 = onnx.Split(%dq) {axis = 1 : i64, split = array<i64: 2, 2>} : (tensor<1x4x2x2xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>)
  %q0 = onnx.QuantizeLinear(%sp#0, %s, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  %d0 = onnx.DequantizeLinear(%q0, %s, %z) : (tensor<1x2x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xf32>
  %q1 = onnx.QuantizeLinear(%sp#1, %s, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  %d1 = onnx.DequantizeLinear(%q1, %s, %z) : (tensor<1x2x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xf32>
  return %d0, %d1 : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
}

// -----

// qdq-rules §9 case 38: Concat of DQ(s) inputs -> Q(s): an int8 concat, a
// pure copy (no requantize).
// CHECK-LABEL: func.func @concat_shared_scale_is_copy
// CHECK-DAG: %[[A:.*]] = qat.quantize %arg0
// CHECK-DAG: %[[B:.*]] = qat.quantize %arg1
// CHECK: %[[C:.*]] = qat.concat %[[A]], %[[B]] {axis = 1 : i64} : (tensor<1x2x2x2x!quant.uniform<i8:f32, 5.000000e-01>>, tensor<1x3x2x2x!quant.uniform<i8:f32, 5.000000e-01>>) -> tensor<1x5x2x2x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[D:.*]] = qat.dequantize %[[C]]
// CHECK: return %[[D]]
// CHECK-NOT: qat.requantize
func.func @concat_shared_scale_is_copy(%a: tensor<1x2x2x2xf32>, %b: tensor<1x3x2x2xf32>) -> tensor<1x5x2x2xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %qa = onnx.QuantizeLinear(%a, %s, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  %da = onnx.DequantizeLinear(%qa, %s, %z) : (tensor<1x2x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xf32>
  %qb = onnx.QuantizeLinear(%b, %s, %z) : (tensor<1x3x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x2x2xi8>
  %db = onnx.DequantizeLinear(%qb, %s, %z) : (tensor<1x3x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x2x2xf32>
  %c = onnx.Concat(%da, %db) {axis = 1 : i64} : (tensor<1x2x2x2xf32>, tensor<1x3x2x2xf32>) -> tensor<1x5x2x2xf32>
  %q = onnx.QuantizeLinear(%c, %s, %z) : (tensor<1x5x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x5x2x2xi8>
  %d = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x5x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x5x2x2xf32>
  return %d : tensor<1x5x2x2xf32>
}

// -----

// qdq-rules §9 case 39: Concat of DQ(s1), DQ(s2) -> Q(s3): the Q is pushed
// onto the inputs, each branch is requantized to s3, the concat is int8.
// Scales are never unified (§6.4).
// CHECK-LABEL: func.func @concat_different_scales_requantizes_branches
// CHECK-DAG: %[[A:.*]] = qat.quantize %arg0 {{.*}} -> tensor<1x2x2x2x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK-DAG: %[[B:.*]] = qat.quantize %arg1 {{.*}} -> tensor<1x3x2x2x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK-DAG: %[[RA:.*]] = qat.requantize %[[A]] {{.*}} -> tensor<1x2x2x2x!quant.uniform<i8:f32, 1.250000e-01>>
// CHECK-DAG: %[[RB:.*]] = qat.requantize %[[B]] {{.*}} -> tensor<1x3x2x2x!quant.uniform<i8:f32, 1.250000e-01>>
// CHECK: %[[C:.*]] = qat.concat %[[RA]], %[[RB]] {axis = 1 : i64} {{.*}} -> tensor<1x5x2x2x!quant.uniform<i8:f32, 1.250000e-01>>
// CHECK: qat.dequantize %[[C]]
func.func @concat_different_scales_requantizes_branches(%a: tensor<1x2x2x2xf32>, %b: tensor<1x3x2x2xf32>) -> tensor<1x5x2x2xf32> {
  %s1 = onnx.Constant dense<0.5> : tensor<f32>
  %s2 = onnx.Constant dense<0.25> : tensor<f32>
  %s3 = onnx.Constant dense<0.125> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %qa = onnx.QuantizeLinear(%a, %s1, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  %da = onnx.DequantizeLinear(%qa, %s1, %z) : (tensor<1x2x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xf32>
  %qb = onnx.QuantizeLinear(%b, %s2, %z) : (tensor<1x3x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x2x2xi8>
  %db = onnx.DequantizeLinear(%qb, %s2, %z) : (tensor<1x3x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x2x2xf32>
  %c = onnx.Concat(%da, %db) {axis = 1 : i64} : (tensor<1x2x2x2xf32>, tensor<1x3x2x2xf32>) -> tensor<1x5x2x2xf32>
  %q = onnx.QuantizeLinear(%c, %s3, %z) : (tensor<1x5x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x5x2x2xi8>
  %d = onnx.DequantizeLinear(%q, %s3, %z) : (tensor<1x5x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x5x2x2xf32>
  return %d : tensor<1x5x2x2xf32>
}

// -----

// qdq-rules §9 case 40: Concat with one float input and a Q after: the float
// input gets a quantize, the quantized one a requantize; the concat is int8.
// CHECK-LABEL: func.func @concat_float_input_gets_quantize
// CHECK-DAG: %[[A:.*]] = qat.quantize %arg0 {{.*}} -> tensor<1x2x2x2x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK-DAG: %[[RA:.*]] = qat.requantize %[[A]] {{.*}} -> tensor<1x2x2x2x!quant.uniform<i8:f32, 1.250000e-01>>
// CHECK-DAG: %[[B:.*]] = qat.quantize %arg1 {{.*}} -> tensor<1x3x2x2x!quant.uniform<i8:f32, 1.250000e-01>>
// CHECK: %[[C:.*]] = qat.concat %[[RA]], %[[B]]
// CHECK: qat.dequantize %[[C]]
// CHECK-NOT: onnx.Concat
func.func @concat_float_input_gets_quantize(%a: tensor<1x2x2x2xf32>, %b: tensor<1x3x2x2xf32>) -> tensor<1x5x2x2xf32> {
  %s1 = onnx.Constant dense<0.5> : tensor<f32>
  %s3 = onnx.Constant dense<0.125> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %qa = onnx.QuantizeLinear(%a, %s1, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  %da = onnx.DequantizeLinear(%qa, %s1, %z) : (tensor<1x2x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xf32>
  %c = onnx.Concat(%da, %b) {axis = 1 : i64} : (tensor<1x2x2x2xf32>, tensor<1x3x2x2xf32>) -> tensor<1x5x2x2xf32>
  %q = onnx.QuantizeLinear(%c, %s3, %z) : (tensor<1x5x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x5x2x2xi8>
  %d = onnx.DequantizeLinear(%q, %s3, %z) : (tensor<1x5x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x5x2x2xf32>
  return %d : tensor<1x5x2x2xf32>
}

// -----

// A Concat of DQs with different scales and no Q after stays float (DQ can
// only cross it when every input shares one quantization).
// CHECK-LABEL: func.func @concat_different_scales_no_q_stays_float
// CHECK: onnx.Concat(%{{.*}}, %{{.*}})
// CHECK-NOT: qat.concat
func.func @concat_different_scales_no_q_stays_float(%a: tensor<1x2x2x2xf32>, %b: tensor<1x3x2x2xf32>) -> tensor<1x5x2x2xf32> {
  %s1 = onnx.Constant dense<0.5> : tensor<f32>
  %s2 = onnx.Constant dense<0.25> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %qa = onnx.QuantizeLinear(%a, %s1, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  %da = onnx.DequantizeLinear(%qa, %s1, %z) : (tensor<1x2x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xf32>
  %qb = onnx.QuantizeLinear(%b, %s2, %z) : (tensor<1x3x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x2x2xi8>
  %db = onnx.DequantizeLinear(%qb, %s2, %z) : (tensor<1x3x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x2x2xf32>
  %c = onnx.Concat(%da, %db) {axis = 1 : i64} : (tensor<1x2x2x2xf32>, tensor<1x3x2x2xf32>) -> tensor<1x5x2x2xf32>
  return %c : tensor<1x5x2x2xf32>
}

// -----

// qdq-rules §9 case 41: one DQ feeding two Convs is duplicated, one per
// consumer.
// CHECK-LABEL: func.func @shared_dequantize_duplicated
// CHECK: %[[Q:.*]] = qat.quantize %arg0
// CHECK-DAG: %[[D1:.*]] = qat.dequantize %[[Q]]
// CHECK-DAG: %[[D2:.*]] = qat.dequantize %[[Q]]
// CHECK-DAG: onnx.Conv(%[[D1]],
// CHECK-DAG: onnx.Conv(%[[D2]],
func.func @shared_dequantize_duplicated(%x: tensor<1x2x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32>
  %c1 = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %c2 = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  return %c1, %c2 : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>
}

// -----

// A DQ that is both a graph output and feeds a MaxPool: the graph output
// keeps its own DQ; the MaxPool's copy moves forward.
// CHECK-LABEL: func.func @dequantize_graph_output_kept
// CHECK: %[[Q:.*]] = qat.quantize %arg0
// CHECK-DAG: %[[D1:.*]] = qat.dequantize %[[Q]]
// CHECK-DAG: %[[P:.*]] = qat.max_pool %[[Q]]
// CHECK-DAG: %[[D2:.*]] = qat.dequantize %[[P]]
// CHECK: return %[[D1]], %[[D2]]
func.func @dequantize_graph_output_kept(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x2x2xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %p = onnx.MaxPool(%dq) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  return %dq, %p : tensor<1x2x4x4xf32>, tensor<1x2x2x2xf32>
}

// -----

// qdq-rules §9 case 43: DQ(s,z) -> Q(s,z) is an identity and is removed.
// CHECK-LABEL: func.func @dequantize_quantize_identity_removed
// CHECK-NOT: qat.dequantize
// CHECK-NOT: qat.quantize
// CHECK-NOT: qat.requantize
// CHECK: return
func.func @dequantize_quantize_identity_removed(%x: tensor<4xi8>) -> tensor<4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<3> : tensor<i8>
  %dq = onnx.DequantizeLinear(%x, %s, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  %q = onnx.QuantizeLinear(%dq, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
  return %q : tensor<4xi8>
}

// -----

// qdq-rules §9 case 43: DQ(s1) -> Q(s2) is a single requantize.
// CHECK-LABEL: func.func @dequantize_quantize_different_requantizes
// CHECK: %[[I:.*]] = qat.storage_cast %arg0 : tensor<4xi8> -> tensor<4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[R:.*]] = qat.requantize %[[I]] {rounding = #qat.rounding<half_to_even>} : tensor<4x!quant.uniform<i8:f32, 5.000000e-01>> -> tensor<4x!quant.uniform<u8:f32, 2.500000e-01:128>>
// CHECK: qat.storage_cast %[[R]]
// CHECK-NOT: qat.dequantize
// CHECK-NOT: qat.quantize
func.func @dequantize_quantize_different_requantizes(%x: tensor<4xi8>) -> tensor<4xui8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %s2 = onnx.Constant dense<0.25> : tensor<f32>
  %z2 = onnx.Constant dense<128> : tensor<ui8>
  %dq = onnx.DequantizeLinear(%x, %s, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  %q = onnx.QuantizeLinear(%dq, %s2, %z2) : (tensor<4xf32>, tensor<f32>, tensor<ui8>) -> tensor<4xui8>
  return %q : tensor<4xui8>
}

// -----

// qdq-rules §9 case 44: Q -> DQ around a Softmax with no int8 neighbour is
// kept (fake quantization is lossy; §6.2).
// CHECK-LABEL: func.func @quantize_dequantize_around_softmax_kept
// CHECK: %[[Q1:.*]] = qat.quantize %arg0
// CHECK: %[[D1:.*]] = qat.dequantize %[[Q1]]
// CHECK: %[[S:.*]] = onnx.Softmax(%[[D1]])
// CHECK: %[[Q2:.*]] = qat.quantize %[[S]]
// CHECK: %[[D2:.*]] = qat.dequantize %[[Q2]]
// CHECK: return %[[D2]]
func.func @quantize_dequantize_around_softmax_kept(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %s2 = onnx.Constant dense<0.00390625> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<2x8xf32>, tensor<f32>, tensor<i8>) -> tensor<2x8xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<2x8xi8>, tensor<f32>, tensor<i8>) -> tensor<2x8xf32>
  %sm = onnx.Softmax(%dq) {axis = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %q2 = onnx.QuantizeLinear(%sm, %s2, %z) : (tensor<2x8xf32>, tensor<f32>, tensor<i8>) -> tensor<2x8xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %s2, %z) : (tensor<2x8xi8>, tensor<f32>, tensor<i8>) -> tensor<2x8xf32>
  return %dq2 : tensor<2x8xf32>
}

// -----

// qdq-rules §9 case 45: Q1 -> DQ1 -> Q2 -> DQ2 with different parameters:
// both roundings stay (Q1, then a requantize for DQ1 -> Q2), never merged
// into one pair (§6.4).
// CHECK-LABEL: func.func @double_pairs_different_params_kept
// CHECK: %[[Q:.*]] = qat.quantize %arg0 {{.*}} -> tensor<8x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: %[[R:.*]] = qat.requantize %[[Q]] {{.*}} -> tensor<8x!quant.uniform<i8:f32, 0.10000000149011612>>
// CHECK: %[[D:.*]] = qat.dequantize %[[R]]
// CHECK: return %[[D]]
func.func @double_pairs_different_params_kept(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s1 = onnx.Constant dense<0.5> : tensor<f32>
  %s2 = onnx.Constant dense<0.1> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q1 = onnx.QuantizeLinear(%x, %s1, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %d1 = onnx.DequantizeLinear(%q1, %s1, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %q2 = onnx.QuantizeLinear(%d1, %s2, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %d2 = onnx.DequantizeLinear(%q2, %s2, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  return %d2 : tensor<8xf32>
}

// -----

// qdq-rules §9 case 45: with equal parameters the pairs collapse into one.
// CHECK-LABEL: func.func @double_pairs_equal_params_collapse
// CHECK: %[[Q:.*]] = qat.quantize %arg0
// CHECK-NEXT: %[[D:.*]] = qat.dequantize %[[Q]]
// CHECK-NEXT: return %[[D]]
func.func @double_pairs_equal_params_collapse(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q1 = onnx.QuantizeLinear(%x, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %d1 = onnx.DequantizeLinear(%q1, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %q2 = onnx.QuantizeLinear(%d1, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %d2 = onnx.DequantizeLinear(%q2, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  return %d2 : tensor<8xf32>
}

// -----

// Two identical Qs of one value are merged (the digits model quantizes the
// MaxPool output once for conv3 and once for the Add).
// CHECK-LABEL: func.func @identical_quantizes_merged
// CHECK-COUNT-1: qat.quantize
// CHECK-NOT: qat.quantize
func.func @identical_quantizes_merged(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %qa = onnx.QuantizeLinear(%x, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %da = onnx.DequantizeLinear(%qa, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %qb = onnx.QuantizeLinear(%x, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %db = onnx.DequantizeLinear(%qb, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  return %da, %db : tensor<8xf32>, tensor<8xf32>
}

// -----

// qdq-rules §9 case 46: Relu before Q(int8, z=0) is kept as a clamp [0, 127].
// CHECK-LABEL: func.func @relu_int8_becomes_clamp
// CHECK: %[[Q:.*]] = qat.quantize %arg0
// CHECK: %[[C:.*]] = qat.clamp %[[Q]] {max = 127 : i64, min = 0 : i64} : tensor<8x!quant.uniform<i8:f32, 5.000000e-01>> -> tensor<8x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK: qat.dequantize %[[C]]
// CHECK-NOT: onnx.Relu
func.func @relu_int8_becomes_clamp(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %r = onnx.Relu(%dq) : (tensor<8xf32>) -> tensor<8xf32>
  %q2 = onnx.QuantizeLinear(%r, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  return %dq2 : tensor<8xf32>
}

// -----

// Relu with an asymmetric uint8 zero point clamps at the zero point.
// CHECK-LABEL: func.func @relu_uint8_asymmetric_clamps_at_zero_point
// CHECK: qat.clamp %{{.*}} {max = 255 : i64, min = 100 : i64} : tensor<8x!quant.uniform<u8:f32, 5.000000e-01:100>>
// CHECK-NOT: onnx.Relu
func.func @relu_uint8_asymmetric_clamps_at_zero_point(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<100> : tensor<ui8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<ui8>) -> tensor<8xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<8xui8>, tensor<f32>, tensor<ui8>) -> tensor<8xf32>
  %r = onnx.Relu(%dq) : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// qdq-rules §9 case 47: Clip(0, 6) before Q(int8, s=6/127): the lower bound
// is kept as a clamp at 0, the upper bound (127 * s = 6) is redundant.
// CHECK-LABEL: func.func @clip_0_6_int8_becomes_clamp
// CHECK: qat.clamp %{{.*}} {max = 127 : i64, min = 0 : i64} : tensor<8x!quant.uniform<i8:f32, 0.04724409431219101>>
// CHECK-NOT: onnx.Clip
func.func @clip_0_6_int8_becomes_clamp(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.0472440943> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %c = onnx.Clip(%dq) {min = 0.0 : f32, max = 6.0 : f32} : (tensor<8xf32>) -> tensor<8xf32>
  %q2 = onnx.QuantizeLinear(%c, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  return %dq2 : tensor<8xf32>
}

// -----

// A Clip whose bound is on the grid (1.5 = 3 * 0.5) becomes a clamp even
// without a Q after it: DQ(clamp(q, -2, 3)) == Clip(DQ(q), -1, 1.5).
// CHECK-LABEL: func.func @clip_on_grid_dequantize_moves_forward
// CHECK: %[[C:.*]] = qat.clamp %{{.*}} {max = 3 : i64, min = -2 : i64}
// CHECK: %[[D:.*]] = qat.dequantize %[[C]]
// CHECK: return %[[D]]
func.func @clip_on_grid_dequantize_moves_forward(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %c = onnx.Clip(%dq) {min = -1.0 : f32, max = 1.5 : f32} : (tensor<8xf32>) -> tensor<8xf32>
  return %c : tensor<8xf32>
}

// -----

// A Clip bound off the grid (1.2 is not a multiple of 0.5): moving the DQ
// forward would change the result (1.0 instead of 1.2), so it stays float.
// CHECK-LABEL: func.func @clip_off_grid_not_propagated
// CHECK: %[[D:.*]] = qat.dequantize
// CHECK: %[[C:.*]] = onnx.Clip(%[[D]])
// CHECK: return %[[C]]
// CHECK-NOT: qat.clamp
func.func @clip_off_grid_not_propagated(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %c = onnx.Clip(%dq) {min = 0.0 : f32, max = 1.2 : f32} : (tensor<8xf32>) -> tensor<8xf32>
  return %c : tensor<8xf32>
}

// -----

// qdq-rules §6.3 / case 10: ops that compute new values are never crossed:
// Add, AveragePool, GlobalAveragePool, Sigmoid, Resize(linear), Softmax.
// CHECK-LABEL: func.func @non_commuting_ops_never_crossed
// CHECK: %[[Q:.*]] = qat.quantize %arg0
// CHECK-DAG: %[[A:.*]] = onnx.Add(%{{.*}}, %{{.*}}) : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>)
// CHECK-DAG: %[[AP:.*]] = onnx.AveragePool(%{{.*}}) {{.*}} : (tensor<1x2x4x4xf32>)
// CHECK-DAG: %[[G:.*]] = onnx.GlobalAveragePool(%{{.*}}) : (tensor<1x2x4x4xf32>)
// CHECK-DAG: %[[S:.*]] = onnx.Sigmoid(%{{.*}}) : (tensor<1x2x4x4xf32>)
// CHECK-DAG: %[[R:.*]] = onnx.Resize(%{{.*}}) {{.*}} : (tensor<1x2x4x4xf32>)
// CHECK-DAG: qat.quantize %[[A]]
// CHECK-DAG: qat.quantize %[[AP]]
// CHECK-DAG: qat.quantize %[[G]]
// CHECK-DAG: qat.quantize %[[S]]
// CHECK-DAG: qat.quantize %[[R]]
// CHECK-NOT: qat.requantize
func.func @non_commuting_ops_never_crossed(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x2x2xf32>, tensor<1x2x1x1xf32>, tensor<1x2x4x4xf32>, tensor<1x2x8x8xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %d1 = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %a = onnx.Add(%d1, %d1) : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %qa = onnx.QuantizeLinear(%a, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %da = onnx.DequantizeLinear(%qa, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %d2 = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %ap = onnx.AveragePool(%d2) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  %qp = onnx.QuantizeLinear(%ap, %s, %z) : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  %dp = onnx.DequantizeLinear(%qp, %s, %z) : (tensor<1x2x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xf32>
  %d3 = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %g = onnx.GlobalAveragePool(%d3) : (tensor<1x2x4x4xf32>) -> tensor<1x2x1x1xf32>
  %qg = onnx.QuantizeLinear(%g, %s, %z) : (tensor<1x2x1x1xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x1x1xi8>
  %dg = onnx.DequantizeLinear(%qg, %s, %z) : (tensor<1x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x1x1xf32>
  %d4 = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %sg = onnx.Sigmoid(%d4) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %qs = onnx.QuantizeLinear(%sg, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8>
  %ds = onnx.DequantizeLinear(%qs, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %d5 = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %rs = onnx.Resize(%d5) {scales = array<f32: 1.0, 1.0, 2.0, 2.0>, mode = "linear"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x8x8xf32>
  %qr = onnx.QuantizeLinear(%rs, %s, %z) : (tensor<1x2x8x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x8x8xi8>
  %dr = onnx.DequantizeLinear(%qr, %s, %z) : (tensor<1x2x8x8xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x8x8xf32>
  return %da, %dp, %dg, %ds, %dr : tensor<1x2x4x4xf32>, tensor<1x2x2x2xf32>, tensor<1x2x1x1xf32>, tensor<1x2x4x4xf32>, tensor<1x2x8x8xf32>
}

// -----

// A Q is not moved backward across a computing op either.
// CHECK-LABEL: func.func @quantize_not_moved_backward_across_add
// CHECK: %[[A:.*]] = onnx.Add(%arg0, %arg1)
// CHECK: qat.quantize %[[A]]
func.func @quantize_not_moved_backward_across_add(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %a = onnx.Add(%x, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %q = onnx.QuantizeLinear(%a, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  return %dq : tensor<8xf32>
}

// -----

// qdq-rules §9 case 46, uint8 half: Relu before Q(uint8, z=0) is redundant
// (the clamp [0, 255] is the storage range) and is deleted.
// RULE-LABEL: func.func @relu_uint8_zero_point_zero_deleted
// RULE: %[[Q:.*]] = qat.quantize %arg0 {{.*}} -> tensor<8x!quant.uniform<u8:f32, 5.000000e-01>>
// RULE-NOT: qat.clamp
// RULE-NOT: onnx.Relu
// RULE: %[[D:.*]] = qat.dequantize %[[Q]]
// RULE: return %[[D]]
func.func @relu_uint8_zero_point_zero_deleted(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<ui8>) -> tensor<8xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<8xui8>, tensor<f32>, tensor<ui8>) -> tensor<8xf32>
  %r = onnx.Relu(%dq) : (tensor<8xf32>) -> tensor<8xf32>
  %q2 = onnx.QuantizeLinear(%r, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<ui8>) -> tensor<8xui8>
  %dq2 = onnx.DequantizeLinear(%q2, %s, %z) : (tensor<8xui8>, tensor<f32>, tensor<ui8>) -> tensor<8xf32>
  return %dq2 : tensor<8xf32>
}

// -----

// qdq-rules §9 case 47, uint8 half: Clip(0, 6) before Q(uint8, s=6/255, z=0)
// is redundant and is deleted.
// RULE-LABEL: func.func @clip_0_6_uint8_deleted
// RULE: %[[Q:.*]] = qat.quantize %arg0
// RULE-NOT: qat.clamp
// RULE-NOT: onnx.Clip
// RULE: %[[D:.*]] = qat.dequantize %[[Q]]
// RULE: return %[[D]]
func.func @clip_0_6_uint8_deleted(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.0235294122> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<ui8>) -> tensor<8xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<8xui8>, tensor<f32>, tensor<ui8>) -> tensor<8xf32>
  %c = onnx.Clip(%dq) {min = 0.0 : f32, max = 6.0 : f32} : (tensor<8xf32>) -> tensor<8xf32>
  %q2 = onnx.QuantizeLinear(%c, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<ui8>) -> tensor<8xui8>
  %dq2 = onnx.DequantizeLinear(%q2, %s, %z) : (tensor<8xui8>, tensor<f32>, tensor<ui8>) -> tensor<8xf32>
  return %dq2 : tensor<8xf32>
}

// -----

// qdq-rules §4.2 (Relu row) / case 46: a Q after a float Relu moves backward
// and the Relu becomes the integer clamp max(q, z) (Q is monotone, so
// Q(relu(x)) == max(Q(x), z) exactly). Passes.td promises Q moves backward
// across "Relu and Clip become integer clamps".
// RULE-LABEL: func.func @relu_float_input_quantize_moves_backward
// RULE: %[[Q:.*]] = qat.quantize %arg0 {{.*}} -> tensor<8x!quant.uniform<i8:f32, 5.000000e-01>>
// RULE: %[[C:.*]] = qat.clamp %[[Q]] {max = 127 : i64, min = 0 : i64}
// RULE: %[[D:.*]] = qat.dequantize %[[C]]
// RULE-NOT: onnx.Relu
func.func @relu_float_input_quantize_moves_backward(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %r = onnx.Relu(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %q = onnx.QuantizeLinear(%r, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  return %dq : tensor<8xf32>
}

// -----

// qdq-rules §4.2 (Clip row): on the Q side a Clip is exact whatever its
// bounds: DQ(q) -> Clip(0, 1.2) -> Q(s=0.5) == clamp(q, Q(0), Q(1.2)) ==
// clamp(q, 0, 2). (Without the Q, @clip_off_grid_not_propagated must stay
// float.)
// RULE-LABEL: func.func @clip_off_grid_before_quantize_becomes_clamp
// RULE: %[[Q:.*]] = qat.quantize %arg0
// RULE: %[[C:.*]] = qat.clamp %[[Q]] {max = 2 : i64, min = 0 : i64}
// RULE: qat.dequantize %[[C]]
// RULE-NOT: onnx.Clip
func.func @clip_off_grid_before_quantize_becomes_clamp(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  %c = onnx.Clip(%dq) {min = 0.0 : f32, max = 1.2 : f32} : (tensor<8xf32>) -> tensor<8xf32>
  %q2 = onnx.QuantizeLinear(%c, %s, %z) : (tensor<8xf32>, tensor<f32>, tensor<i8>) -> tensor<8xi8>
  %dq2 = onnx.DequantizeLinear(%q2, %s, %z) : (tensor<8xi8>, tensor<f32>, tensor<i8>) -> tensor<8xf32>
  return %dq2 : tensor<8xf32>
}
