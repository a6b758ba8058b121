// Tests of input maps (GraphLowering::noteInputMap and denseConv): an
// elementwise map quantizing a pointwise int8 convolution's input, which
// nothing else reads (squeeze-excitation's gating Mul and its quantize),
// runs inside the convolution's layer. Each thread maps the pixels its share
// of the convolution reads (densePixelShare), then convolves them: one
// layer, and no meeting of the threads between the two.
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=avx512vnni | FileCheck %s

// 40 channels (two vectors and a masked one of 8) of 2 images, gated per
// image and channel; the projection to 24 channels takes the map.
// CHECK-NOT: qatc.kernel = "mul+quantize"
// CHECK-LABEL: func.func @qatc_layer_4(
// CHECK-SAME: qatc.kernel = "mul+quantize > vnni-conv 12x32"} {
// The layer meets the threads before it (no qatc.sync = false): it reads
// the depthwise result. The thread's pixels, then 16 channels at a time:
// CHECK: scf.for
// CHECK: scf.for {{.*}} step %c16_i64
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK: arith.divf
// CHECK: llvm.store %{{.*}}, %{{.*}} : vector<16xi8>, !llvm.ptr
// The last 8 channels under a mask:
// CHECK: llvm.intr.masked.load
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK: llvm.intr.masked.store %{{.*}} : vector<16xi8>, vector<16xi1> into !llvm.ptr
// Then the convolution.
// CHECK: llvm.x86.avx512.vpdpbusd.512
// CHECK-LABEL: func.func @qatc_layer_5(
// CHECK-SAME: qatc.kernel = "dequantize"
func.func @main(%x: tensor<2x40x6x5xf32>) -> tensor<2x24x6x5xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<40xf32>
  %wz = onnx.Constant dense<0> : tensor<40xi8>
  %wq = onnx.Constant dense<3> : tensor<40x1x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<40xf32>
  %pws = onnx.Constant dense<0.02> : tensor<24xf32>
  %pwz = onnx.Constant dense<0> : tensor<24xi8>
  %pwq = onnx.Constant dense<-2> : tensor<24x40x1x1xi8>
  %pb = onnx.Constant dense<0.25> : tensor<24xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<2x40x6x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<2x40x6x5xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<2x40x6x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<2x40x6x5xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<40x1x3x3xi8>, tensor<40xf32>, tensor<40xi8>) -> tensor<40x1x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 40 : i64, kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x40x6x5xf32>, tensor<40x1x3x3xf32>, tensor<40xf32>) -> tensor<2x40x6x5xf32>
  %sg = onnx.Sigmoid(%c) : (tensor<2x40x6x5xf32>) -> tensor<2x40x6x5xf32>
  %y = onnx.Mul(%c, %sg) : (tensor<2x40x6x5xf32>, tensor<2x40x6x5xf32>) -> tensor<2x40x6x5xf32>
  %m = onnx.GlobalAveragePool(%y) : (tensor<2x40x6x5xf32>) -> tensor<2x40x1x1xf32>
  %g = onnx.Sigmoid(%m) : (tensor<2x40x1x1xf32>) -> tensor<2x40x1x1xf32>
  %e = onnx.Mul(%y, %g) : (tensor<2x40x6x5xf32>, tensor<2x40x1x1xf32>) -> tensor<2x40x6x5xf32>
  %eq = onnx.QuantizeLinear(%e, %so, %z) : (tensor<2x40x6x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<2x40x6x5xui8>
  %ed = onnx.DequantizeLinear(%eq, %so, %z) : (tensor<2x40x6x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<2x40x6x5xf32>
  %pw = onnx.DequantizeLinear(%pwq, %pws, %pwz) {axis = 0 : i64} : (tensor<24x40x1x1xi8>, tensor<24xf32>, tensor<24xi8>) -> tensor<24x40x1x1xf32>
  %p = onnx.Conv(%ed, %pw, %pb) {group = 1 : i64, kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x40x6x5xf32>, tensor<24x40x1x1xf32>, tensor<24xf32>) -> tensor<2x24x6x5xf32> loc("project")
  %oq = onnx.QuantizeLinear(%p, %so, %z) : (tensor<2x24x6x5xf32>, tensor<f32>, tensor<ui8>) -> tensor<2x24x6x5xui8>
  %o = onnx.DequantizeLinear(%oq, %so, %z) : (tensor<2x24x6x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<2x24x6x5xf32>
  return %o : tensor<2x24x6x5xf32>
}

// -----

// A projection whose weights (640 x 512 bytes) exceed an L2's share: its
// threads split the output channels, each reading every pixel, so the
// gating map keeps its own layer, and the threads meet after it (no
// qatc.sync = false on the convolution).
// CHECK-LABEL: func.func @qatc_layer_4(
// CHECK-SAME: qatc.kernel = "mul+quantize"
// CHECK-LABEL: func.func @qatc_layer_5(
// CHECK-SAME: qatc.kernel = "vnni-conv 6x64"} {
func.func @main(%x: tensor<1x640x4x4xf32>) -> tensor<1x512x4x4xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<ui8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<640xf32>
  %wz = onnx.Constant dense<0> : tensor<640xi8>
  %wq = onnx.Constant dense<3> : tensor<640x1x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<640xf32>
  %pws = onnx.Constant dense<0.02> : tensor<512xf32>
  %pwz = onnx.Constant dense<0> : tensor<512xi8>
  %pwq = onnx.Constant dense<-2> : tensor<512x640x1x1xi8>
  %pb = onnx.Constant dense<0.25> : tensor<512xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x640x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x640x4x4xui8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x640x4x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x640x4x4xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<640x1x3x3xi8>, tensor<640xf32>, tensor<640xi8>) -> tensor<640x1x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {group = 640 : i64, kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x640x4x4xf32>, tensor<640x1x3x3xf32>, tensor<640xf32>) -> tensor<1x640x4x4xf32>
  %sg = onnx.Sigmoid(%c) : (tensor<1x640x4x4xf32>) -> tensor<1x640x4x4xf32>
  %y = onnx.Mul(%c, %sg) : (tensor<1x640x4x4xf32>, tensor<1x640x4x4xf32>) -> tensor<1x640x4x4xf32>
  %m = onnx.GlobalAveragePool(%y) : (tensor<1x640x4x4xf32>) -> tensor<1x640x1x1xf32>
  %g = onnx.Sigmoid(%m) : (tensor<1x640x1x1xf32>) -> tensor<1x640x1x1xf32>
  %e = onnx.Mul(%y, %g) : (tensor<1x640x4x4xf32>, tensor<1x640x1x1xf32>) -> tensor<1x640x4x4xf32>
  %eq = onnx.QuantizeLinear(%e, %so, %z) : (tensor<1x640x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x640x4x4xui8>
  %ed = onnx.DequantizeLinear(%eq, %so, %z) : (tensor<1x640x4x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x640x4x4xf32>
  %pw = onnx.DequantizeLinear(%pwq, %pws, %pwz) {axis = 0 : i64} : (tensor<512x640x1x1xi8>, tensor<512xf32>, tensor<512xi8>) -> tensor<512x640x1x1xf32>
  %p = onnx.Conv(%ed, %pw, %pb) {group = 1 : i64, kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x640x4x4xf32>, tensor<512x640x1x1xf32>, tensor<512xf32>) -> tensor<1x512x4x4xf32> loc("project")
  %oq = onnx.QuantizeLinear(%p, %so, %z) : (tensor<1x512x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x512x4x4xui8>
  %o = onnx.DequantizeLinear(%oq, %so, %z) : (tensor<1x512x4x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x512x4x4xf32>
  return %o : tensor<1x512x4x4xf32>
}
