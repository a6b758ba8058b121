// Tests of the f32 depthwise kernel (emitDepthwiseF32Rows): the output
// columns whose taps all lie inside the row run 4 pixels at a time, 16
// channels each, as 4 independent chains of FMAs (one load of each tap's
// weights for the 4); the columns at the row's ends run one pixel at a
// time, each tap selecting the padding row where it lies outside (once per
// pixel, for every channel block). A kernel row outside the image points
// at the padding row for the whole row.
//
// RUN: qatc-opt %s --qat-lower --qat-layer-functions=target-cpu=avx512vnni | FileCheck %s

// 3x3, pad 1, 12 columns: column 0 alone, columns 1-8 in two steps of 4,
// columns 9-11 alone (11 reaches past the row, 9 and 10 are left over).
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "fp32-depthwise 4x16"
// CHECK-COUNT-3: arith.select %{{.*}}, %{{.*}}, %[[PAD:[0-9]+]] : !llvm.ptr
// CHECK: scf.for %{{.*}} = %{{.*}} to %c1_i64{{.*}} step %c1_i64
// CHECK: arith.select %{{.*}}, %{{.*}}, %[[PAD]] : !llvm.ptr
// CHECK: scf.for %{{.*}} = %{{.*}} to %c32_i64{{.*}} step %c16_i64
// CHECK: %[[A:.*]] = vector.fma %{{.*}}, %{{.*}}, %cst : vector<16xf32>
// CHECK: vector.fma %{{.*}}, %{{.*}}, %[[A]] : vector<16xf32>
// CHECK: scf.for %{{.*}} = %c1_i64{{.*}} to %c9_i64 step %c4_i64
// CHECK: scf.for %{{.*}} = %{{.*}} to %c32_i64{{.*}} step %c16_i64
// CHECK-NOT: arith.select
// CHECK: %[[W:.*]] = llvm.load %{{.*}} -> vector<16xf32>
// CHECK: %[[P0:.*]] = vector.fma %{{.*}}, %[[W]], %cst : vector<16xf32>
// CHECK: %[[P1:.*]] = vector.fma %{{.*}}, %[[W]], %cst : vector<16xf32>
// CHECK: %[[P2:.*]] = vector.fma %{{.*}}, %[[W]], %cst : vector<16xf32>
// CHECK: %[[P3:.*]] = vector.fma %{{.*}}, %[[W]], %cst : vector<16xf32>
// CHECK: %[[W1:.*]] = llvm.load %{{.*}} -> vector<16xf32>
// CHECK: vector.fma %{{.*}}, %[[W1]], %[[P0]] : vector<16xf32>
// CHECK: vector.fma %{{.*}}, %[[W1]], %[[P1]] : vector<16xf32>
// CHECK: scf.for %{{.*}} = %c9_i64{{.*}} to %c12_i64{{.*}} step %c1_i64
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x32x6x12xf32>) -> tensor<1x32x6x12xf32> {
  %w = onnx.Constant dense<0.25> : tensor<32x1x3x3xf32>
  %b = onnx.Constant dense<0.5> : tensor<32xf32>
  %c = onnx.Conv(%x, %w, %b) {group = 32 : i64, kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x32x6x12xf32>, tensor<32x1x3x3xf32>, tensor<32xf32>) -> tensor<1x32x6x12xf32> loc("dw")
  return %c : tensor<1x32x6x12xf32>
}
