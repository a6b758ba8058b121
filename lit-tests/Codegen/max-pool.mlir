// Tests of the max pool layer (lowerMaxPool): each output pixel takes its
// taps' addresses once (a tap outside the image points at a row of -inf),
// then runs its channels as whole vectors with plain loads and the
// remainder under a mask. Each tap is `v > m ? v : m` from -inf, the
// reference's std::max (a NaN tap is skipped), never arith.maximumf.
//
// RUN: qatc-opt %s --qat-lower --qat-layer-functions=target-cpu=avx512vnni | FileCheck %s

// 20 channels: one whole vector of 16, then 4 under a mask.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "maxpool"
// CHECK-COUNT-9: arith.select %{{.*}} : !llvm.ptr
// CHECK: scf.for %{{.*}} = %{{.*}} to %c16_i64 step %c16_i64
// CHECK: %[[LOW:.*]] = arith.constant dense<0xFF800000> : vector<16xf32>
// CHECK: %[[V:.*]] = llvm.load %{{.*}} -> vector<16xf32>
// CHECK: %[[GT:.*]] = arith.cmpf ogt, %[[V]], %[[LOW]]
// CHECK: arith.select %[[GT]], %[[V]], %[[LOW]]
// CHECK-COUNT-8: arith.cmpf ogt
// CHECK-NOT: arith.maximumf
// CHECK: llvm.store %{{.*}} : vector<16xf32>
// CHECK: llvm.intr.masked.load %{{.*}} -> vector<16xf32>
// CHECK-COUNT-9: arith.cmpf ogt
// CHECK: llvm.intr.masked.store
// CHECK-NOT: arith.maximumf
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x20x6x6xf32>) -> tensor<1x20x6x6xf32> {
  %p = onnx.MaxPool(%x) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x20x6x6xf32>) -> tensor<1x20x6x6xf32> loc("pool")
  return %p : tensor<1x20x6x6xf32>
}
