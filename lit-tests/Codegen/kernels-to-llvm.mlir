// Tests of --qat-kernels-to-llvm: the layer functions in the LLVM dialect as
// `qatc compile` hands them to LLVM; Sigmoid's exp is a polynomial, not a
// libm call.
//
// RUN: qatc-opt %s --qat-lower --qat-layer-functions=target-cpu=avx512vnni --qat-kernels-to-llvm | FileCheck %s

// CHECK: llvm.func @qatc_layer_0(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64)
// CHECK-NOT: scf.
// CHECK-NOT: math.exp
// CHECK-NOT: llvm.call @expf
// CHECK: llvm.fmul

func.func @main(%x: tensor<2x40xf32>) -> tensor<2x40xf32> {
  %y = onnx.Sigmoid(%x) : (tensor<2x40xf32>) -> tensor<2x40xf32>
  return %y : tensor<2x40xf32>
}
