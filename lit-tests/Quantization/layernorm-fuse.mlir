// Tests of --qat-layernorm-fuse: a layer norm spelled as ReduceMean, Sub,
// Pow 2 (or Mul(d, d)), ReduceMean, Add eps, Sqrt, Div [, Mul gamma, Add
// beta] over the trailing axes becomes one onnx.LayerNormalization named
// after every node it replaces; groups with outside readers, other axes or
// other exponents stay as they are.
//
// RUN: qatc-opt %s --split-input-file --qat-layernorm-fuse | FileCheck %s

// torch.onnx's nn.LayerNorm before opset 17: gamma and beta are kept, the
// result keeps the last node's tensor name (epsilon 1e-5 is the default,
// not printed).
// CHECK-LABEL: func.func @torch_layernorm
// CHECK-DAG: %[[G:.*]] = onnx.Constant dense<2.000000e+00> : tensor<8xf32>
// CHECK-DAG: %[[B:.*]] = onnx.Constant dense<5.000000e-01> : tensor<8xf32>
// CHECK: %[[Y:.*]] = onnx.LayerNormalization(%arg0, %[[G]], %[[B]]) {axis = 2 : i64, onnx.output_names = ["y"]} : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: onnx.ReduceMean
// CHECK-NOT: onnx.Sqrt
func.func @torch_layernorm(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %two = onnx.Constant dense<2.0> : tensor<f32>
  %eps = onnx.Constant dense<1.0e-5> : tensor<f32>
  %g = onnx.Constant dense<2.0> : tensor<8xf32>
  %b = onnx.Constant dense<0.5> : tensor<8xf32>
  %m = onnx.ReduceMean(%x) {axes = array<i64: -1>} : (tensor<1x4x8xf32>) -> tensor<1x4x1xf32>
  %d = onnx.Sub(%x, %m) : (tensor<1x4x8xf32>, tensor<1x4x1xf32>) -> tensor<1x4x8xf32>
  %p = onnx.Pow(%d, %two) : (tensor<1x4x8xf32>, tensor<f32>) -> tensor<1x4x8xf32>
  %v = onnx.ReduceMean(%p) {axes = array<i64: 2>} : (tensor<1x4x8xf32>) -> tensor<1x4x1xf32>
  %ve = onnx.Add(%v, %eps) : (tensor<1x4x1xf32>, tensor<f32>) -> tensor<1x4x1xf32>
  %s = onnx.Sqrt(%ve) : (tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  %n = onnx.Div(%d, %s) : (tensor<1x4x8xf32>, tensor<1x4x1xf32>) -> tensor<1x4x8xf32>
  %y0 = onnx.Mul(%n, %g) : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %y = onnx.Add(%y0, %b) {onnx.output_names = ["y"]} : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// Mul(d, d), eps on the left, two trailing axes, no gamma or beta: the
// scale is ones over the normalized shape, axis 1.
// CHECK-LABEL: func.func @square_by_mul_two_axes
// CHECK: %[[ONES:.*]] = onnx.Constant dense<1.000000e+00> : tensor<3x4xf32>
// CHECK-NEXT: %[[Y:.*]] = onnx.LayerNormalization(%arg0, %[[ONES]]) {axis = 1 : i64, epsilon = 1.000000e-03 : f32} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @square_by_mul_two_axes(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %eps = onnx.Constant dense<1.0e-3> : tensor<1xf32>
  %m = onnx.ReduceMean(%x) {axes = array<i64: 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %d = onnx.Sub(%x, %m) : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  %p = onnx.Mul(%d, %d) : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %v = onnx.ReduceMean(%p) {axes = array<i64: 1, 2>} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %ve = onnx.Add(%eps, %v) : (tensor<1xf32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %s = onnx.Sqrt(%ve) : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %n = onnx.Div(%d, %s) : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  return %n : tensor<2x3x4xf32>
}

// -----

// The mean is also a result of the graph: nothing changes.
// CHECK-LABEL: func.func @mean_read_outside
// CHECK: onnx.ReduceMean
// CHECK-NOT: onnx.LayerNormalization
func.func @mean_read_outside(%x: tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x4x1xf32>) {
  %two = onnx.Constant dense<2.0> : tensor<f32>
  %eps = onnx.Constant dense<1.0e-5> : tensor<f32>
  %m = onnx.ReduceMean(%x) {axes = array<i64: 2>} : (tensor<1x4x8xf32>) -> tensor<1x4x1xf32>
  %d = onnx.Sub(%x, %m) : (tensor<1x4x8xf32>, tensor<1x4x1xf32>) -> tensor<1x4x8xf32>
  %p = onnx.Pow(%d, %two) : (tensor<1x4x8xf32>, tensor<f32>) -> tensor<1x4x8xf32>
  %v = onnx.ReduceMean(%p) {axes = array<i64: 2>} : (tensor<1x4x8xf32>) -> tensor<1x4x1xf32>
  %ve = onnx.Add(%v, %eps) : (tensor<1x4x1xf32>, tensor<f32>) -> tensor<1x4x1xf32>
  %s = onnx.Sqrt(%ve) : (tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  %n = onnx.Div(%d, %s) : (tensor<1x4x8xf32>, tensor<1x4x1xf32>) -> tensor<1x4x8xf32>
  return %n, %m : tensor<1x4x8xf32>, tensor<1x4x1xf32>
}

// -----

// Averages over axis 1 of [1, 4, 8] (not the trailing axes), and a cube:
// neither is a layer norm.
// CHECK-LABEL: func.func @not_trailing
// CHECK-NOT: onnx.LayerNormalization
// CHECK-LABEL: func.func @cube
// CHECK-NOT: onnx.LayerNormalization
func.func @not_trailing(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %two = onnx.Constant dense<2.0> : tensor<f32>
  %eps = onnx.Constant dense<1.0e-5> : tensor<f32>
  %m = onnx.ReduceMean(%x) {axes = array<i64: 1>} : (tensor<1x4x8xf32>) -> tensor<1x1x8xf32>
  %d = onnx.Sub(%x, %m) : (tensor<1x4x8xf32>, tensor<1x1x8xf32>) -> tensor<1x4x8xf32>
  %p = onnx.Pow(%d, %two) : (tensor<1x4x8xf32>, tensor<f32>) -> tensor<1x4x8xf32>
  %v = onnx.ReduceMean(%p) {axes = array<i64: 1>} : (tensor<1x4x8xf32>) -> tensor<1x1x8xf32>
  %ve = onnx.Add(%v, %eps) : (tensor<1x1x8xf32>, tensor<f32>) -> tensor<1x1x8xf32>
  %s = onnx.Sqrt(%ve) : (tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  %n = onnx.Div(%d, %s) : (tensor<1x4x8xf32>, tensor<1x1x8xf32>) -> tensor<1x4x8xf32>
  return %n : tensor<1x4x8xf32>
}
func.func @cube(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %three = onnx.Constant dense<3.0> : tensor<f32>
  %eps = onnx.Constant dense<1.0e-5> : tensor<f32>
  %m = onnx.ReduceMean(%x) {axes = array<i64: 2>} : (tensor<1x4x8xf32>) -> tensor<1x4x1xf32>
  %d = onnx.Sub(%x, %m) : (tensor<1x4x8xf32>, tensor<1x4x1xf32>) -> tensor<1x4x8xf32>
  %p = onnx.Pow(%d, %three) : (tensor<1x4x8xf32>, tensor<f32>) -> tensor<1x4x8xf32>
  %v = onnx.ReduceMean(%p) {axes = array<i64: 2>} : (tensor<1x4x8xf32>) -> tensor<1x4x1xf32>
  %ve = onnx.Add(%v, %eps) : (tensor<1x4x1xf32>, tensor<f32>) -> tensor<1x4x1xf32>
  %s = onnx.Sqrt(%ve) : (tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  %n = onnx.Div(%d, %s) : (tensor<1x4x8xf32>, tensor<1x4x1xf32>) -> tensor<1x4x8xf32>
  return %n : tensor<1x4x8xf32>
}

// -----

// A gamma computed at run time (here the input itself): Div stays the end
// of the group, which still fuses; the Mul reads the LayerNormalization.
// CHECK-LABEL: func.func @runtime_gamma
// CHECK: %[[Y:.*]] = onnx.LayerNormalization(%arg0, %{{.*}}) {axis = 2 : i64
// CHECK-NEXT: onnx.Mul(%[[Y]], %arg0)
func.func @runtime_gamma(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %two = onnx.Constant dense<2.0> : tensor<f32>
  %eps = onnx.Constant dense<1.0e-5> : tensor<f32>
  %m = onnx.ReduceMean(%x) {axes = array<i64: 2>} : (tensor<1x4x8xf32>) -> tensor<1x4x1xf32>
  %d = onnx.Sub(%x, %m) : (tensor<1x4x8xf32>, tensor<1x4x1xf32>) -> tensor<1x4x8xf32>
  %p = onnx.Pow(%d, %two) : (tensor<1x4x8xf32>, tensor<f32>) -> tensor<1x4x8xf32>
  %v = onnx.ReduceMean(%p) {axes = array<i64: 2>} : (tensor<1x4x8xf32>) -> tensor<1x4x1xf32>
  %ve = onnx.Add(%v, %eps) : (tensor<1x4x1xf32>, tensor<f32>) -> tensor<1x4x1xf32>
  %s = onnx.Sqrt(%ve) : (tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  %n = onnx.Div(%d, %s) : (tensor<1x4x8xf32>, tensor<1x4x1xf32>) -> tensor<1x4x8xf32>
  %y = onnx.Mul(%n, %x) : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}
