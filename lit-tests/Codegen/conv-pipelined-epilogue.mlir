// Tests of the pipelined residual tiles (DenseConvSpec::pipelined): an int8
// 1x1 conv whose epilogue adds a residual runs tiles of 4 pixels x 64
// channels, each K loop in 5 segments (their bounds read through a volatile
// 0, so LLVM does not unroll them) with one pixel of the previous tile's
// epilogue between them; the tile's accumulators then go to a 64-byte
// aligned stack buffer, the map's last pixels (35 = 8 x 4 + 3) run as a
// short tile with its epilogue at once, and after the loop the last
// buffered tile's 4 pixels take theirs. Plain epilogues, short K loops
// (16 input channels: 4 steps) and AVX2 keep the 6x64 (or AVX2) tiles.
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx512vnni | FileCheck %s
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx2 | FileCheck %s --check-prefix=AVX2

// CHECK-LABEL: func.func @qatc_layer_2({{.*}}qatc.kernel = "vnni-conv 4x64 pipelined +requantize+add"
// CHECK: llvm.alloca {{.*}} x !llvm.array<1024 x i8> {alignment = 64 : i64}
// CHECK: llvm.store volatile
// CHECK: scf.for {{.*}} -> (i1, i64, i64)
// CHECK: scf.if {{.*}} -> (i1, i64, i64) {
// CHECK: llvm.load volatile
// CHECK: scf.for {{.*}} -> (vector<16xi32>
// CHECK-COUNT-16: llvm.x86.avx512.vpdpbusd.512
// CHECK: llvm.x86.avx512.mask.cvtps2dq.512
// CHECK: llvm.store {{.*}} : vector<64xi8>
// CHECK: llvm.load volatile
// CHECK: scf.for {{.*}} -> (vector<16xi32>
// CHECK: llvm.store {{.*}} : vector<64xi8>
// CHECK: llvm.load volatile
// CHECK: scf.for {{.*}} -> (vector<16xi32>
// CHECK: llvm.store {{.*}} : vector<64xi8>
// CHECK: llvm.load volatile
// CHECK: scf.for {{.*}} -> (vector<16xi32>
// CHECK: llvm.store {{.*}} : vector<64xi8>
// CHECK: llvm.load volatile
// CHECK: scf.for {{.*}} -> (vector<16xi32>
// CHECK-COUNT-16: llvm.store {{.*}} {alignment = 64 : i64} : vector<16xi32>
// CHECK: } else {
// CHECK: scf.for {{.*}} -> (vector<16xi32>
// CHECK-COUNT-12: llvm.x86.avx512.vpdpbusd.512
// CHECK: llvm.store {{.*}} : vector<64xi8>
// CHECK: llvm.store {{.*}} : vector<64xi8>
// CHECK: llvm.store {{.*}} : vector<64xi8>
// CHECK-NOT: llvm.store {{.*}} : vector<64xi8>
// CHECK: scf.yield
// CHECK-COUNT-4: llvm.store {{.*}} : vector<64xi8>
// CHECK-NOT: llvm.store {{.*}} : vector<64xi8>
// CHECK: func.func @qatc_layer_3(
// AVX2-NOT: pipelined
func.func @main(%x: tensor<1x64x7x5xf32>, %r: tensor<1x64x7x5xf32>) -> tensor<1x64x7x5xf32> {
  %s = onnx.Constant dense<0.0473> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %sr = onnx.Constant dense<0.0719> : tensor<f32>
  %sc = onnx.Constant dense<0.0637> : tensor<f32>
  %zc = onnx.Constant dense<128> : tensor<ui8>
  %so = onnx.Constant dense<0.0891> : tensor<f32>
  %ws = onnx.Constant dense<0.00731> : tensor<64xf32>
  %wz = onnx.Constant dense<0> : tensor<64xi8>
  %wq = onnx.Constant dense<3> : tensor<64x64x1x1xi8>
  %b = onnx.Constant dense<0.37> : tensor<64xf32>
  %rq = onnx.QuantizeLinear(%r, %sr, %z) : (tensor<1x64x7x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xui8>
  %rd = onnx.DequantizeLinear(%rq, %sr, %z) : (tensor<1x64x7x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x7x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x7x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<64x64x1x1xi8>, tensor<64xf32>, tensor<64xi8>) -> tensor<64x64x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x7x5xf32>, tensor<64x64x1x1xf32>, tensor<64xf32>) -> tensor<1x64x7x5xf32> loc("bottleneck")
  %cq = onnx.QuantizeLinear(%c, %sc, %zc) : (tensor<1x64x7x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xui8>
  %cd = onnx.DequantizeLinear(%cq, %sc, %zc) : (tensor<1x64x7x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xf32>
  %sum = onnx.Add(%cd, %rd) : (tensor<1x64x7x5xf32>, tensor<1x64x7x5xf32>) -> tensor<1x64x7x5xf32>
  %act = onnx.Relu(%sum) : (tensor<1x64x7x5xf32>) -> tensor<1x64x7x5xf32>
  %q2 = onnx.QuantizeLinear(%act, %so, %z) : (tensor<1x64x7x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xui8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x64x7x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xf32>
  return %y : tensor<1x64x7x5xf32>
}

// -----

// The same conv without the residual: a plain epilogue, 6x64 tiles.
// CHECK-LABEL: func.func @qatc_layer_1({{.*}}qatc.kernel = "vnni-conv 6x64"
// CHECK-NOT: llvm.load volatile
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x64x7x5xf32>) -> tensor<1x64x7x5xf32> {
  %s = onnx.Constant dense<0.0473> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %sc = onnx.Constant dense<0.0637> : tensor<f32>
  %zc = onnx.Constant dense<128> : tensor<ui8>
  %ws = onnx.Constant dense<0.00731> : tensor<64xf32>
  %wz = onnx.Constant dense<0> : tensor<64xi8>
  %wq = onnx.Constant dense<3> : tensor<64x64x1x1xi8>
  %b = onnx.Constant dense<0.37> : tensor<64xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x7x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x7x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<64x64x1x1xi8>, tensor<64xf32>, tensor<64xi8>) -> tensor<64x64x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x7x5xf32>, tensor<64x64x1x1xf32>, tensor<64xf32>) -> tensor<1x64x7x5xf32> loc("plain")
  %cq = onnx.QuantizeLinear(%c, %sc, %zc) : (tensor<1x64x7x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xui8>
  %y = onnx.DequantizeLinear(%cq, %sc, %zc) : (tensor<1x64x7x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xf32>
  return %y : tensor<1x64x7x5xf32>
}

// -----

// 16 input channels: 4 K steps, too few to cut; 6x64 tiles.
// CHECK-LABEL: func.func @qatc_layer_2({{.*}}qatc.kernel = "vnni-conv 6x64 +requantize+add"
// CHECK-NOT: llvm.load volatile
// CHECK: func.func @qatc_layer_3(
func.func @main(%x: tensor<1x16x7x5xf32>, %r: tensor<1x64x7x5xf32>) -> tensor<1x64x7x5xf32> {
  %s = onnx.Constant dense<0.0473> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %sr = onnx.Constant dense<0.0719> : tensor<f32>
  %sc = onnx.Constant dense<0.0637> : tensor<f32>
  %zc = onnx.Constant dense<128> : tensor<ui8>
  %so = onnx.Constant dense<0.0891> : tensor<f32>
  %ws = onnx.Constant dense<0.00731> : tensor<64xf32>
  %wz = onnx.Constant dense<0> : tensor<64xi8>
  %wq = onnx.Constant dense<3> : tensor<64x16x1x1xi8>
  %b = onnx.Constant dense<0.37> : tensor<64xf32>
  %rq = onnx.QuantizeLinear(%r, %sr, %z) : (tensor<1x64x7x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xui8>
  %rd = onnx.DequantizeLinear(%rq, %sr, %z) : (tensor<1x64x7x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x16x7x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x16x7x5xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x16x7x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x16x7x5xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<64x16x1x1xi8>, tensor<64xf32>, tensor<64xi8>) -> tensor<64x16x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x16x7x5xf32>, tensor<64x16x1x1xf32>, tensor<64xf32>) -> tensor<1x64x7x5xf32> loc("short")
  %cq = onnx.QuantizeLinear(%c, %sc, %zc) : (tensor<1x64x7x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xui8>
  %cd = onnx.DequantizeLinear(%cq, %sc, %zc) : (tensor<1x64x7x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xf32>
  %sum = onnx.Add(%cd, %rd) : (tensor<1x64x7x5xf32>, tensor<1x64x7x5xf32>) -> tensor<1x64x7x5xf32>
  %q2 = onnx.QuantizeLinear(%sum, %so, %z) : (tensor<1x64x7x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xui8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x64x7x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x64x7x5xf32>
  return %y : tensor<1x64x7x5xf32>
}
