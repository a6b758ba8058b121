// Tests of the AMX int8 convolution (AmxKernels.cpp, GraphLowering::amxConv)
// for --target-cpu amx. Tile instructions are inline assembly on fixed
// registers between one ldtilecfg and tilerelease: accumulators tmm0-3
// start from the zero-point terms (a tile load of stride 0), two A and two
// B tiles per K step, four tdpbusd, and four tile stores into the vector
// epilogue. The epilogue's quantization multiplies by the scale's
// reciprocal with an FMA correction (no division). A stride-1 1x1 conv
// reads its input in place; a padded or strided one reads a relayout of
// the stride's phases; a 7x7 stem over 3 channels into more than 64
// reads im2col rows. A conv over 32 input bytes or fewer per output, a
// stem into 64 channels or fewer and a conv with a fused chain over few
// input channels stay on the VNNI kernel.
//
// RUN: qatc-opt %s --split-input-file --qat-lower --qat-layer-functions=target-cpu=amx | FileCheck %s

// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "amx-conv 32x32 1x1 k-tiles (in place)"
// CHECK: llvm.alloca {{.*}} x !llvm.array<4352 x i8>
// CHECK: llvm.inline_asm has_side_effects "ldtilecfg ($0)"
// CHECK: scf.for
// CHECK: "tileloadd ($0,$1,1), %tmm0", "r,r,~{memory}" %{{.*}}, %[[ZERO:c0_i64[_0-9]*]]
// CHECK: "tileloadd ($0,$1,1), %tmm3", "r,r,~{memory}" %{{.*}}, %[[ZERO]]
// CHECK: "tileloadd ($0,$1,1), %tmm4"
// CHECK: "tileloadd ($0,$1,1), %tmm5"
// CHECK: "tileloadd ($0,$1,1), %tmm6"
// CHECK: "tileloadd ($0,$1,1), %tmm7"
// CHECK: "tdpbusd %tmm6, %tmm4, %tmm0"
// CHECK: "tdpbusd %tmm7, %tmm4, %tmm1"
// CHECK: "tdpbusd %tmm6, %tmm5, %tmm2"
// CHECK: "tdpbusd %tmm7, %tmm5, %tmm3"
// CHECK: "tilestored %tmm3, ($0,$1,1)"
// A block whose 32 rows are all output pixels stores them at constant
// displacements from its first; the last block (pixels 32-35) selects a
// pointer per row.
// CHECK: scf.if
// CHECK-NOT: arith.select {{.*}} : !llvm.ptr
// CHECK: "llvm.x86.avx512.mask.cvtps2dq.512"
// CHECK-NOT: arith.select {{.*}} : !llvm.ptr
// CHECK: } else {
// CHECK: arith.select {{.*}} : !llvm.ptr
// CHECK-NOT: arith.divf
// CHECK: arith.mulf
// CHECK: math.fma
// CHECK: math.fma
// CHECK: "llvm.x86.avx512.mask.cvtps2dq.512"
// CHECK: llvm.inline_asm has_side_effects "tilerelease"
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x64x6x6xf32>) -> tensor<1x48x6x6xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<48xf32>
  %wz = onnx.Constant dense<0> : tensor<48xi8>
  %wq = onnx.Constant dense<3> : tensor<48x64x1x1xi8>
  %b = onnx.Constant dense<0.5> : tensor<48xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x64x6x6xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x64x6x6xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<48x64x1x1xi8>, tensor<48xf32>, tensor<48xi8>) -> tensor<48x64x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x64x6x6xf32>, tensor<48x64x1x1xf32>, tensor<48xf32>) -> tensor<1x48x6x6xf32> loc("pointwise")
  %r = onnx.Relu(%c) : (tensor<1x48x6x6xf32>) -> tensor<1x48x6x6xf32>
  %q2 = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x48x6x6xf32>, tensor<f32>, tensor<i8>) -> tensor<1x48x6x6xi8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x48x6x6xi8>, tensor<f32>, tensor<i8>) -> tensor<1x48x6x6xf32>
  return %y : tensor<1x48x6x6xf32>
}

// -----

// 3x3 stride 2: the relayout writes the padded input's four phases (6x6
// each for a 5x5 output), then nine taps of one 64-byte K tile.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "amx-relayout 4 phases"
// CHECK: vector<64xi8>
// CHECK-LABEL: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "amx-conv 32x32 9x1 k-tiles (4 phases)"
// CHECK-COUNT-9: "tdpbusd %tmm7, %tmm5, %tmm3"
// CHECK-NOT: tdpbusd
// CHECK: "tilestored %tmm0

func.func @main(%x: tensor<1x64x9x9xf32>) -> tensor<1x32x5x5xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<32xf32>
  %wz = onnx.Constant dense<0> : tensor<32xi8>
  %wq = onnx.Constant dense<3> : tensor<32x64x3x3xi8>
  %b = onnx.Constant dense<0.5> : tensor<32xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x64x9x9xf32>, tensor<f32>, tensor<i8>) -> tensor<1x64x9x9xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x64x9x9xi8>, tensor<f32>, tensor<i8>) -> tensor<1x64x9x9xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<32x64x3x3xi8>, tensor<32xf32>, tensor<32xi8>) -> tensor<32x64x3x3xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x64x9x9xf32>, tensor<32x64x3x3xf32>, tensor<32xf32>) -> tensor<1x32x5x5xf32> loc("strided")
  %r = onnx.Relu(%c) : (tensor<1x32x5x5xf32>) -> tensor<1x32x5x5xf32>
  %q2 = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x32x5x5xf32>, tensor<f32>, tensor<i8>) -> tensor<1x32x5x5xi8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x32x5x5xi8>, tensor<f32>, tensor<i8>) -> tensor<1x32x5x5xf32>
  return %y : tensor<1x32x5x5xf32>
}

// -----

// The 7x7 stem over 3 channels into 96: one im2col row of 49 taps x 4
// bytes (4 K tiles) per output pixel; a kernel row inside the image is one
// masked copy of 7 x 4 bytes.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "amx-im2col"
// CHECK: scf.if
// CHECK: llvm.intr.masked.load {{.*}} -> vector<64xi8>
// CHECK-LABEL: func.func @qatc_layer_2(
// CHECK-SAME: qatc.kernel = "amx-conv 32x32 1x4 k-tiles (im2col)"
// CHECK: scf.for
// CHECK: "tdpbusd %tmm7, %tmm5, %tmm3"

func.func @main(%x: tensor<1x3x16x16xf32>) -> tensor<1x96x8x8xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<96xf32>
  %wz = onnx.Constant dense<0> : tensor<96xi8>
  %wq = onnx.Constant dense<3> : tensor<96x3x7x7xi8>
  %b = onnx.Constant dense<0.5> : tensor<96xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x3x16x16xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x16x16xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x3x16x16xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x16x16xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<96x3x7x7xi8>, tensor<96xf32>, tensor<96xi8>) -> tensor<96x3x7x7xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 7, 7>, strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>, dilations = array<i64: 1, 1>} : (tensor<1x3x16x16xf32>, tensor<96x3x7x7xf32>, tensor<96xf32>) -> tensor<1x96x8x8xf32> loc("stem")
  %r = onnx.Relu(%c) : (tensor<1x96x8x8xf32>) -> tensor<1x96x8x8xf32>
  %q2 = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x96x8x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x96x8x8xi8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x96x8x8xi8>, tensor<f32>, tensor<i8>) -> tensor<1x96x8x8xf32>
  return %y : tensor<1x96x8x8xf32>
}

// -----

// The same stem into 64 channels stays on the VNNI kernel's compact
// patches (no im2col rows through memory).
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv 6x64 3-channel taps"
// CHECK-NOT: tdpbusd
// CHECK: llvm.x86.avx512.vpdpbusd.512
// CHECK: func.func @qatc_layer_2(

func.func @main(%x: tensor<1x3x16x16xf32>) -> tensor<1x64x8x8xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<64xf32>
  %wz = onnx.Constant dense<0> : tensor<64xi8>
  %wq = onnx.Constant dense<3> : tensor<64x3x7x7xi8>
  %b = onnx.Constant dense<0.5> : tensor<64xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x3x16x16xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x16x16xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x3x16x16xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x16x16xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<64x3x7x7xi8>, tensor<64xf32>, tensor<64xi8>) -> tensor<64x3x7x7xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 7, 7>, strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>, dilations = array<i64: 1, 1>} : (tensor<1x3x16x16xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>) -> tensor<1x64x8x8xf32> loc("stem")
  %r = onnx.Relu(%c) : (tensor<1x64x8x8xf32>) -> tensor<1x64x8x8xf32>
  %q2 = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x64x8x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x64x8x8xi8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x64x8x8xi8>, tensor<f32>, tensor<i8>) -> tensor<1x64x8x8xf32>
  return %y : tensor<1x64x8x8xf32>
}

// -----

// A 1x1 conv over 16 input channels (16 bytes of K per output, a quarter
// of a K tile) stays on the VNNI kernel too, with no fused chain.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv 4x48"
// CHECK-NOT: tdpbusd
// CHECK: llvm.x86.avx512.vpdpbusd.512
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x16x8x8xf32>) -> tensor<1x96x8x8xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<96xf32>
  %wz = onnx.Constant dense<0> : tensor<96xi8>
  %wq = onnx.Constant dense<3> : tensor<96x16x1x1xi8>
  %b = onnx.Constant dense<0.5> : tensor<96xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x16x8x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x16x8x8xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x16x8x8xi8>, tensor<f32>, tensor<i8>) -> tensor<1x16x8x8xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<96x16x1x1xi8>, tensor<96xf32>, tensor<96xi8>) -> tensor<96x16x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x16x8x8xf32>, tensor<96x16x1x1xf32>, tensor<96xf32>) -> tensor<1x96x8x8xf32> loc("expand16")
  %r = onnx.Relu(%c) : (tensor<1x96x8x8xf32>) -> tensor<1x96x8x8xf32>
  %q2 = onnx.QuantizeLinear(%r, %so, %z) : (tensor<1x96x8x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x96x8x8xi8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x96x8x8xi8>, tensor<f32>, tensor<i8>) -> tensor<1x96x8x8xf32>
  return %y : tensor<1x96x8x8xf32>
}

// -----

// A fused SiLU over 16 input channels stays on the VNNI kernel (the
// chain's epilogue costs more from the tile kernel's buffer than the tiles
// save), its epilogues 8 pixels at a time; the sigmoid's reciprocal is
// vrcp14ps and a Newton step, the quantization a multiplication by the
// scale's reciprocal: no division.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "vnni-conv 12x32 +sigmoid+mul+quantize"
// CHECK-NOT: tdpbusd
// CHECK: llvm.x86.avx512.vpdpbusd.512
// CHECK-NOT: arith.divf
// CHECK: "llvm.x86.avx512.rcp14.ps.512"
// CHECK-NOT: arith.divf
// CHECK: math.fma {{.*}} : vector<128xf32>
// CHECK-NOT: arith.divf
// CHECK: func.func @qatc_layer_2(
func.func @main(%x: tensor<1x16x8x8xf32>) -> tensor<1x32x8x8xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.1> : tensor<f32>
  %ws = onnx.Constant dense<0.01> : tensor<32xf32>
  %wz = onnx.Constant dense<0> : tensor<32xi8>
  %wq = onnx.Constant dense<3> : tensor<32x16x1x1xi8>
  %b = onnx.Constant dense<0.5> : tensor<32xf32>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x16x8x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x16x8x8xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x16x8x8xi8>, tensor<f32>, tensor<i8>) -> tensor<1x16x8x8xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<32x16x1x1xi8>, tensor<32xf32>, tensor<32xi8>) -> tensor<32x16x1x1xf32>
  %c = onnx.Conv(%dq, %w, %b) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x16x8x8xf32>, tensor<32x16x1x1xf32>, tensor<32xf32>) -> tensor<1x32x8x8xf32> loc("expand")
  %sg = onnx.Sigmoid(%c) : (tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  %m = onnx.Mul(%c, %sg) : (tensor<1x32x8x8xf32>, tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  %q2 = onnx.QuantizeLinear(%m, %so, %z) : (tensor<1x32x8x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x32x8x8xi8>
  %y = onnx.DequantizeLinear(%q2, %so, %z) : (tensor<1x32x8x8xi8>, tensor<f32>, tensor<i8>) -> tensor<1x32x8x8xf32>
  return %y : tensor<1x32x8x8xf32>
}

// -----

// A projection whose residual Add is f32 (the layer norm's input, as in
// plan_kernels' matmul_residual_f32): the residual is 4 bytes an element,
// so its rows step 40 x 4 = 160 bytes like the f32 output's (it was read
// as bytes once: output off by 5.9 on an AMX host). A block of whole rows
// steps both from their first; the last block selects a pointer per row,
// the residual's index times 4.
// CHECK-LABEL: func.func @qatc_layer_1(
// CHECK-SAME: qatc.kernel = "amx-conv 16x32 1x1 k-tiles (in place) +add"
// CHECK: scf.if
// CHECK: %[[OUT:.*]] = llvm.getelementptr %arg0[
// CHECK: %[[RES:.*]] = llvm.getelementptr %arg0[
// CHECK: llvm.getelementptr %[[OUT]][%c160
// CHECK-NEXT: arith.constant 160 : i64
// CHECK-NEXT: llvm.getelementptr %[[RES]][%c160
// CHECK: llvm.intr.masked.load {{.*}} -> vector<16xf32>
// CHECK: } else {
// CHECK: arith.muli %{{.*}}, %c40
// CHECK-NEXT: arith.addi
// CHECK-NEXT: arith.constant 4 : i64
// CHECK-NEXT: arith.muli
// CHECK: arith.select {{.*}} : !llvm.ptr
// CHECK-NEXT: arith.constant 40 : i64
// CHECK-NEXT: arith.muli
// CHECK-NEXT: arith.addi
// CHECK-NEXT: arith.constant 4 : i64
// CHECK-NEXT: arith.muli
// CHECK: arith.select {{.*}} : !llvm.ptr
func.func @projection_residual_f32(%x: tensor<1x11x40xf32>) -> tensor<1x11x40xf32> {
  %s = onnx.Constant dense<0.05> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %ws = onnx.Constant dense<0.0071> : tensor<40xf32>
  %wz = onnx.Constant dense<0> : tensor<40xi8>
  %wq = onnx.Constant dense<3> : tensor<40x40xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x11x40xf32>, tensor<f32>, tensor<i8>) -> tensor<1x11x40xi8>
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x11x40xi8>, tensor<f32>, tensor<i8>) -> tensor<1x11x40xf32>
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 1 : i64} : (tensor<40x40xi8>, tensor<40xf32>, tensor<40xi8>) -> tensor<40x40xf32>
  %y = onnx.MatMul(%dq, %w) : (tensor<1x11x40xf32>, tensor<40x40xf32>) -> tensor<1x11x40xf32>
  %a = onnx.Add(%y, %x) : (tensor<1x11x40xf32>, tensor<1x11x40xf32>) -> tensor<1x11x40xf32>
  return %a : tensor<1x11x40xf32>
}
