// Tests of --qat-layer-functions: the graph after --qat-lower becomes one
// function per layer (arena, weights, tid, nthreads), each located at its
// ONNX node; the int8 convolution calls vpdpbusd on AVX-512 VNNI and, on
// AVX2, vpmaddubsw over |q| and the weights with q's sign (vpsignb), which
// cannot saturate there: |128 * 127 * 2| < 2^15.
//
// RUN: qatc-opt %s --qat-lower --qat-layer-functions=target-cpu=avx512vnni --mlir-print-debuginfo | FileCheck %s
// RUN: qatc-opt %s --qat-lower --qat-layer-functions=target-cpu=avx2 | FileCheck %s --check-prefix=AVX2
// RUN: not qatc-opt %s --qat-lower --qat-layer-functions=target-cpu=pentium 2>&1 | FileCheck %s --check-prefix=BAD

// Quantize (rounding half to even: cvtps2dq under rounding mode 8), the
// fused Conv+Relu+Q, dequantize, NHWC back to NCHW.
// CHECK: #[[CONV:loc[0-9]+]] = loc("conv_node")
// CHECK-NOT: func.func @main
// CHECK: func.func @qatc_layer_0(%{{.*}}: !llvm.ptr {{.*}}, %{{.*}}: !llvm.ptr {{.*}}, %{{.*}}: i64 {{.*}}, %{{.*}}: i64
// CHECK: "llvm.x86.avx512.mask.cvtps2dq.512"({{.*}}, %c8_i32
// CHECK: func.func @qatc_layer_1(%{{.*}}: !llvm.ptr loc(fused[{{.*}}#[[CONV]]
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"
// CHECK: func.func @qatc_layer_2(
// CHECK: func.func @qatc_layer_3(
// CHECK-NOT: func.func @qatc_layer_4(

// AVX2: func.func @qatc_layer_1(
// AVX2-SAME: qatc.kernel = "int8-sign-maddubs-conv
// AVX2-NOT: vpdpbusd
// AVX2: %[[A:.*]] = math.absi %{{.*}} : vector<32xi8>
// AVX2: %[[W:.*]] = llvm.call_intrinsic "llvm.x86.avx2.psign.b"
// AVX2: llvm.call_intrinsic "llvm.x86.avx2.pmadd.ub.sw"(%[[A]], %[[W]])
// AVX2: llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"

// BAD: error: unknown --target-cpu 'pentium'

func.func @main(%x: tensor<1x8x6x6xf32>) -> tensor<1x16x6x6xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<16xf32>
  %wz = onnx.Constant dense<0> : tensor<16xi8>
  %wq = onnx.Constant dense<3> : tensor<16x8x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<16xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x8x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x8x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x8x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<16x8x3x3xi8>, tensor<16xf32>, tensor<16xi8>) -> tensor<16x8x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<16x8x3x3xf32>, tensor<16xf32>) -> tensor<1x16x6x6xf32> loc("conv_node")
  %r = onnx.Relu(%c) : (tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %q2 = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x16x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x16x6x6xi8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x16x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x16x6x6xf32>
  return %y : tensor<1x16x6x6xf32>
}
