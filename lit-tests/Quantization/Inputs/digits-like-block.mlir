// Input of ops-fuse.mlir (RUN with --check-prefix=LOWER).
func.func @digits_like_block(%x: tensor<1x1x4x4xf32>) -> tensor<1x2xf32> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %s1 = onnx.Constant dense<0.25> : tensor<f32>
  %s2 = onnx.Constant dense<0.125> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %w1f = onnx.Constant dense<0.5> : tensor<4x1x3x3xf32>
  %w1s = onnx.Constant dense<[0.5, 0.25, 0.125, 0.0625]> : tensor<4xf32>
  %w1z = onnx.Constant dense<0> : tensor<4xi8>
  %b1 = onnx.Constant dense<[0.1, 0.2, 0.3, 0.4]> : tensor<4xf32>
  %w2q = onnx.Constant dense<1> : tensor<4x4x1x1xi8>
  %fcq = onnx.Constant dense<1> : tensor<2x4xi8>
  %fcb = onnx.Constant dense<[1.0, -1.0]> : tensor<2xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x1x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x1x4x4xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x1x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x1x4x4xf32>
  %w1q = onnx.QuantizeLinear(%w1f, %w1s, %w1z) {axis = 0 : i64} : (tensor<4x1x3x3xf32>, tensor<4xf32>, tensor<4xi8>) -> tensor<4x1x3x3xi8>
  %w1 = onnx.DequantizeLinear(%w1q, %w1s, %w1z) {axis = 0 : i64} : (tensor<4x1x3x3xi8>, tensor<4xf32>, tensor<4xi8>) -> tensor<4x1x3x3xf32>
  %c1 = onnx.Conv(%dq, %w1, %b1) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x1x4x4xf32>, tensor<4x1x3x3xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
  %r1 = onnx.Relu(%c1) : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %q1 = onnx.QuantizeLinear(%r1, %s1, %z) : (tensor<1x4x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x4x4x4xi8>
  %d1 = onnx.DequantizeLinear(%q1, %s1, %z) : (tensor<1x4x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x4x4x4xf32>
  %p = onnx.MaxPool(%d1) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x2x2xf32>
  %pq = onnx.QuantizeLinear(%p, %s1, %z) : (tensor<1x4x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x4x2x2xi8>
  %pd = onnx.DequantizeLinear(%pq, %s1, %z) : (tensor<1x4x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x4x2x2xf32>
  %w2 = onnx.DequantizeLinear(%w2q, %s, %z) : (tensor<4x4x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<4x4x1x1xf32>
  %c2 = onnx.Conv(%pd, %w2) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x2x2xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x2x2xf32>
  %r2 = onnx.Relu(%c2) : (tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  %q2 = onnx.QuantizeLinear(%r2, %s2, %z) : (tensor<1x4x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x4x2x2xi8>
  %d2 = onnx.DequantizeLinear(%q2, %s2, %z) : (tensor<1x4x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x4x2x2xf32>
  %pq2 = onnx.QuantizeLinear(%p, %s1, %z) : (tensor<1x4x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x4x2x2xi8>
  %pd2 = onnx.DequantizeLinear(%pq2, %s1, %z) : (tensor<1x4x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x4x2x2xf32>
  %a = onnx.Add(%pd2, %d2) : (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  %g = onnx.GlobalAveragePool(%a) : (tensor<1x4x2x2xf32>) -> tensor<1x4x1x1xf32>
  %f = onnx.Flatten(%g) : (tensor<1x4x1x1xf32>) -> tensor<1x4xf32>
  %fq = onnx.QuantizeLinear(%f, %s, %z) : (tensor<1x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x4xi8>
  %fd = onnx.DequantizeLinear(%fq, %s, %z) : (tensor<1x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x4xf32>
  %fw = onnx.DequantizeLinear(%fcq, %s, %z) : (tensor<2x4xi8>, tensor<f32>, tensor<i8>) -> tensor<2x4xf32>
  %y = onnx.Gemm(%fd, %fw, %fcb) {transB = 1 : i64} : (tensor<1x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<1x2xf32>
  return %y : tensor<1x2xf32>
}
