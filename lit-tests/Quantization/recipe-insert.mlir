// Q/DQ insertion into a float graph by a recipe, with activation scales from
// a TensorRT calibration cache (qdq-rules §3.4, §9 cases 50-54).
//
// RUN: rm -rf %t && split-file %s %t
//
// TensorRT recipe: inputs and weights of weighted ops, the residual input of
// the Add that joins a conv branch, pooling inputs; outputs stay float.
// RUN: qatc-opt %t/block.mlir --qat-recipe-insert="recipe=trt calib-cache=%t/block.cache" | FileCheck %s --check-prefix=TRT
//
// TF recipe: weights and the output of each quantizable group.
// RUN: qatc-opt %t/block.mlir --qat-recipe-insert="recipe=tf calib-cache=%t/block.cache" | FileCheck %s --check-prefix=TF
//
// Filters: a node name, an op type, a chain.
// RUN: qatc-opt %t/block.mlir --qat-recipe-insert="calib-cache=%t/block.cache exclude-nodes=conv2" | FileCheck %s --check-prefix=EXNODE
// RUN: qatc-opt %t/block.mlir --qat-recipe-insert="calib-cache=%t/block.cache exclude-op-types=GlobalAveragePool" | FileCheck %s --check-prefix=EXTYPE
// RUN: qatc-opt %t/block.mlir --qat-recipe-insert="calib-cache=%t/block.cache exclude-patterns=Conv>Relu" | FileCheck %s --check-prefix=EXPAT
//
// Two conv branches meet in an Add (case 51): one input is quantized, which
// one depends on the policy.
// RUN: qatc-opt %t/branches.mlir --qat-recipe-insert="calib-cache=%t/branches.cache residual-policy=last" | FileCheck %s --check-prefix=LAST
// RUN: qatc-opt %t/branches.mlir --qat-recipe-insert="calib-cache=%t/branches.cache residual-policy=longest" | FileCheck %s --check-prefix=LONGEST
//
// Concat inputs share one scale, the largest (case 54).
// RUN: qatc-opt %t/concat.mlir --qat-recipe-insert="calib-cache=%t/concat.cache" | FileCheck %s --check-prefix=CONCAT
//
// Refusals.
// RUN: not qatc-opt %t/block.mlir --qat-recipe-insert="calib-cache=%t/partial.cache" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not qatc-opt %t/block.mlir --qat-recipe-insert="calib-cache=%t/bad.cache" 2>&1 | FileCheck %s --check-prefix=BADCACHE
// RUN: not qatc-opt %t/block.mlir --qat-recipe-insert="calib-cache=%t/block.cache exclude-nodes=*conv" 2>&1 | FileCheck %s --check-prefix=BADRE
// RUN: not qatc-opt %t/block.mlir --qat-recipe-insert="calib-cache=%t/block.cache recipe=onnx" 2>&1 | FileCheck %s --check-prefix=BADRECIPE
// RUN: not qatc-opt %t/qdq.mlir --qat-recipe-insert="calib-cache=%t/block.cache" 2>&1 | FileCheck %s --check-prefix=HASQDQ
// RUN: not qatc-opt %t/block.mlir --qat-recipe-insert 2>&1 | FileCheck %s --check-prefix=NOCACHE

// TRT-LABEL: func.func @main_graph
// The conv input (the graph input x) gets one Q/DQ pair at scale 0.02.
// TRT: %[[S0:.*]] = onnx.Constant dense<2.000000e-02> : tensor<f32>
// TRT: %[[Q0:.*]] = onnx.QuantizeLinear(%arg0, %[[S0]], %{{.*}}) {{.*}}onnx.output_names = ["x_quantized"]
// TRT: %[[D0:.*]] = onnx.DequantizeLinear(%[[Q0]], %[[S0]], %{{.*}}) {{.*}}onnx.output_names = ["x_dequantized"]
// The weight is int8 per output channel (scale = amax / 127 per channel).
// TRT: %[[WQ:.*]] = onnx.Constant {onnx.output_names = ["w1_quantized"]} dense<{{\[\[\[\[}}127]], {{\[\[}}64]]], {{\[\[\[}}127]], {{\[\[}}-64]]]]> : tensor<2x2x1x1xi8>
// TRT: onnx.DequantizeLinear(%[[WQ]], %{{.*}}, %{{.*}}) {axis = 0 : i64{{.*}}} : (tensor<2x2x1x1xi8>, tensor<2xf32>, tensor<2xi8>)
// TRT: %[[C1:.*]] = onnx.Conv(%[[D0]], %{{.*}}, %{{.*}})
// The Relu output is not quantized as conv1's output but as conv2's input.
// TRT: %[[R1:.*]] = onnx.Relu(%[[C1]])
// TRT: onnx.QuantizeLinear(%[[R1]], {{.*}}onnx.output_names = ["r1_quantized"]
// TRT: %[[C2:.*]] = onnx.Conv(
// The residual Add: x (not a conv branch) is quantized with its own pair
// (it shares x's pair), conv2's output stays float.
// TRT: %[[ADD:.*]] = onnx.Add(%[[C2]], %[[D0]])
// TRT-NOT: onnx.QuantizeLinear(%[[C2]]
// GlobalAveragePool's input is quantized.
// TRT: onnx.QuantizeLinear(%[[ADD]], {{.*}}onnx.output_names = ["sum_quantized"]
// TRT: onnx.GlobalAveragePool(
// The bias stays a float constant.
// TRT-NOT: onnx.QuantizeLinear({{.*}}b1

// TF-LABEL: func.func @main_graph
// TF: onnx.QuantizeLinear(%arg0, {{.*}}onnx.output_names = ["x_quantized"]
// TF: %[[R1:.*]] = onnx.Relu(
// TF: onnx.QuantizeLinear(%[[R1]], {{.*}}onnx.output_names = ["r1_quantized"]
// TF: %[[C2:.*]] = onnx.Conv(
// TF: onnx.QuantizeLinear(%[[C2]], {{.*}}onnx.output_names = ["c2_quantized"]
// TF: %[[ADD:.*]] = onnx.Add(
// TF: onnx.QuantizeLinear(%[[ADD]], {{.*}}onnx.output_names = ["sum_quantized"]
// TF: %[[G:.*]] = onnx.GlobalAveragePool(
// TF: onnx.QuantizeLinear(%[[G]], {{.*}}onnx.output_names = ["pooled_quantized"]

// With conv2 excluded its input and weight stay float; conv1 is quantized.
// EXNODE-LABEL: func.func @main_graph
// EXNODE: onnx.QuantizeLinear(%arg0,
// EXNODE-NOT: r1_quantized
// EXNODE-NOT: w2_quantized
// EXNODE: onnx.GlobalAveragePool(

// EXTYPE-LABEL: func.func @main_graph
// EXTYPE: r1_quantized
// EXTYPE-NOT: sum_quantized
// EXTYPE: onnx.GlobalAveragePool(

// Conv>Relu matches conv1 and its Relu: conv1 is left float, conv2 is not.
// EXPAT-LABEL: func.func @main_graph
// EXPAT-NOT: w1_quantized
// EXPAT: w2_quantized
// EXPAT-NOT: w1_quantized

// "last": the branch whose conv comes last (cb) stays float, ca's output is
// quantized. "longest": the branch with the longer path from the common
// ancestor (ca -> relu -> conv, two more nodes) stays float.
// LAST-LABEL: func.func @main_graph
// LAST: ya_quantized
// LAST-NOT: yb_quantized
// LONGEST-LABEL: func.func @main_graph
// LONGEST: yb_quantized
// LONGEST-NOT: ya_quantized

// CONCAT-LABEL: func.func @main_graph
// CONCAT: %[[S1:.*]] = onnx.Constant dense<8.000000e-02> : tensor<f32>
// CONCAT: onnx.QuantizeLinear(%arg{{[01]}}, %[[S1]],
// CONCAT: %[[S2:.*]] = onnx.Constant dense<8.000000e-02> : tensor<f32>
// CONCAT: onnx.QuantizeLinear(%arg{{[01]}}, %[[S2]],
// CONCAT-NOT: onnx.QuantizeLinear

// MISSING: error: the calibration table has no scale for 2 tensors: 'r1', 'sum'
// BADCACHE: error: {{.*}}bad.cache: line 2: {{.*}}
// BADRE: error: invalid node-name pattern '*conv': repetition-operator operand invalid
// BADRECIPE: error: unknown recipe 'onnx' (expected trt or tf)
// HASQDQ: error: the model already holds QuantizeLinear/DequantizeLinear nodes; a recipe quantizes float models only
// NOCACHE: error: qat-recipe-insert needs activation scales: give calib-cache=FILE

//--- block.mlir
func.func @main_graph(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x1x1xf32> attributes {onnx.input_names = ["x"], onnx.output_names = ["pooled"]} {
  %w1 = onnx.Constant {onnx.output_names = ["w1"]} dense<[[[[1.0]], [[0.5]]], [[[0.25]], [[-0.125]]]]> : tensor<2x2x1x1xf32>
  %b1 = onnx.Constant {onnx.output_names = ["b1"]} dense<[0.1, -0.1]> : tensor<2xf32>
  %w2 = onnx.Constant {onnx.output_names = ["w2"]} dense<[[[[0.5]], [[0.5]]], [[[0.5]], [[0.25]]]]> : tensor<2x2x1x1xf32>
  %c1 = onnx.Conv(%x, %w1, %b1) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, onnx.output_names = ["c1"]} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32> loc("conv1"(fused<"Conv">["m.onnx":0:0]))
  %r1 = onnx.Relu(%c1) {onnx.output_names = ["r1"]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("relu1"(fused<"Relu">["m.onnx":1:0]))
  %c2 = onnx.Conv(%r1, %w2) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, onnx.output_names = ["c2"]} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32> loc("conv2"(fused<"Conv">["m.onnx":2:0]))
  %sum = onnx.Add(%c2, %x) {onnx.output_names = ["sum"]} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("add"(fused<"Add">["m.onnx":3:0]))
  %g = onnx.GlobalAveragePool(%sum) {onnx.output_names = ["pooled"]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x1x1xf32> loc("gap"(fused<"GlobalAveragePool">["m.onnx":4:0]))
  return %g : tensor<1x2x1x1xf32>
}

//--- block.cache
TRT-8601-EntropyCalibration2
x: 3ca3d70a
r1: 3d23d70a
c2: 3d4ccccd
sum: 3d75c28f
pooled: 3c23d70a

//--- partial.cache
TRT-8601-EntropyCalibration2
x: 3ca3d70a

//--- bad.cache
TRT-8601-EntropyCalibration2
x 3ca3d70a

//--- branches.mlir
func.func @main_graph(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> attributes {onnx.input_names = ["x"], onnx.output_names = ["y"]} {
  %w = onnx.Constant {onnx.output_names = ["w"]} dense<0.5> : tensor<2x2x1x1xf32>
  %wb = onnx.Constant {onnx.output_names = ["wb"]} dense<0.25> : tensor<2x2x1x1xf32>
  %wc = onnx.Constant {onnx.output_names = ["wc"]} dense<0.125> : tensor<2x2x1x1xf32>
  %ca = onnx.Conv(%x, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, onnx.output_names = ["ya0"]} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32> loc("ca"(fused<"Conv">["m.onnx":0:0]))
  %ra = onnx.Relu(%ca) {onnx.output_names = ["ra"]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("relu_a"(fused<"Relu">["m.onnx":1:0]))
  %ya = onnx.Conv(%ra, %wc) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, onnx.output_names = ["ya"]} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32> loc("ca2"(fused<"Conv">["m.onnx":2:0]))
  %yb = onnx.Conv(%x, %wb) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, onnx.output_names = ["yb"]} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32> loc("cb"(fused<"Conv">["m.onnx":3:0]))
  %y = onnx.Add(%ya, %yb) {onnx.output_names = ["y"]} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("add"(fused<"Add">["m.onnx":4:0]))
  return %y : tensor<1x2x4x4xf32>
}

//--- branches.cache
TRT-8601-EntropyCalibration2
x: 3ca3d70a
ra: 3d23d70a
ya: 3d4ccccd
yb: 3d75c28f

//--- concat.mlir
func.func @main_graph(%a: tensor<1x2x4x4xf32>, %b: tensor<1x3x4x4xf32>) -> tensor<1x5x4x4xf32> attributes {onnx.input_names = ["a", "b"], onnx.output_names = ["cat"]} {
  %c = onnx.Concat(%a, %b) {axis = 1 : i64, onnx.output_names = ["cat"]} : (tensor<1x2x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x5x4x4xf32> loc("concat"(fused<"Concat">["m.onnx":0:0]))
  return %c : tensor<1x5x4x4xf32>
}

//--- concat.cache
TRT-8601-EntropyCalibration2
a: 3ca3d70a
b: 3da3d70a
cat: 3d23d70a

//--- qdq.mlir
func.func @main_graph(%x: tensor<4xf32>) -> tensor<4xf32> attributes {onnx.input_names = ["x"], onnx.output_names = ["y"]} {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8> loc("q"(fused<"QuantizeLinear">["m.onnx":0:0]))
  %d = onnx.DequantizeLinear(%q, %s, %z) : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32> loc("dq"(fused<"DequantizeLinear">["m.onnx":1:0]))
  return %d : tensor<4xf32>
}
