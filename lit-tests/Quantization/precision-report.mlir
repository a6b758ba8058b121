// Tests of --qat-precision-report: one row per ONNX node (int8 and the qat op
// it was fused into, fp32 with the reason, quantize/dequantize boundaries,
// folded weights, removed nodes), as text (file=-), CSV or JSON; remarks at
// fp32 compute nodes (qdq-rules §8 ask 7, §9 case 49).
//
// RUN: rm -rf %t && split-file --no-leading-lines %s %t
// RUN: qatc-opt %t/model.mlir --qat-qdq-convert --qat-weights-fold --qat-qdq-propagate --qat-ops-fuse --qat-precision-report=file=- -o /dev/null | FileCheck %s --check-prefix=TXT
// RUN: qatc-opt %t/model.mlir --qat-qdq-convert --qat-weights-fold --qat-qdq-propagate --qat-ops-fuse --qat-precision-report=file=%t/report.csv -o /dev/null
// RUN: FileCheck %s --check-prefix=CSV < %t/report.csv
// RUN: qatc-opt %t/model.mlir --qat-lower=precision-report=%t/report.json -o /dev/null
// RUN: FileCheck %s --check-prefix=JSON < %t/report.json
// qdq-rules §9 case 49: the float-residual Add of case 25 is fp32 with the
// reason; a conv without trailing Q is int8->fp32.
// RUN: qatc-opt %t/residual.mlir --qat-lower=precision-report=- -o /dev/null | FileCheck %s --check-prefix=RESIDUAL
// The report does not change the IR.
// RUN: qatc-opt %t/residual.mlir --qat-lower --mlir-print-debuginfo=false > %t/without.mlir
// RUN: qatc-opt %t/residual.mlir --qat-lower=precision-report=%t/r.txt --mlir-print-debuginfo=false > %t/with.mlir
// RUN: diff %t/without.mlir %t/with.mlir
// A report that cannot be written is an error.
// RUN: not qatc-opt %t/residual.mlir --qat-lower=precision-report=%t/no-such-dir/r.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNWRITABLE
// Remarks at every fp32 compute node, and only there.
// RUN: cd %t && qatc-opt remarks.mlir --qat-lower=remarks=true -verify-diagnostics -o /dev/null
//
// Removed Q/DQ nodes keep their op type and index and are not compute
// nodes.
// RUN: qatc-opt %t/model.mlir --qat-lower=precision-report=- -o /dev/null | FileCheck %s --check-prefix=REMOVED
// A Q whose value leaves the graph (through a storage cast) is "for the graph
// output", not for the cast that carries its own node name.
// RUN: qatc-opt %t/residual.mlir --qat-lower=precision-report=- -o /dev/null | FileCheck %s --check-prefix=OUTPUT

// TXT-LABEL: #  node{{ +}}op type{{ +}}precision{{ +}}kernel{{ +}}reason
// TXT: {{^ +}}0  in_q{{ +}}QuantizeLinear{{ +}}quantize{{ +}}qat.quantize{{ +}}quantizes the fp32 output of a graph input for qat.conv "conv1"
// TXT-NEXT: {{^ +}}1  in_dq{{ +}}DequantizeLinear{{ +}}int8{{ +}}qat.conv
// TXT-NEXT: {{^ +}}2  w_q{{ +}}QuantizeLinear{{ +}}weight{{ +}}qat.constant{{ +}}folded into a quantized weight constant
// TXT-NEXT: {{^ +}}3  w_dq{{ +}}DequantizeLinear{{ +}}int8{{ +}}qat.conv
// TXT-NEXT: {{^ +}}4  conv1{{ +}}Conv{{ +}}int8{{ +}}qat.conv
// TXT-NEXT: {{^ +}}5  relu1{{ +}}Relu{{ +}}int8{{ +}}qat.conv
// TXT-NEXT: {{^ +}}6  c1_q{{ +}}QuantizeLinear{{ +}}int8{{ +}}qat.conv
// TXT-NEXT: {{^ +}}7  c1_dq{{ +}}DequantizeLinear{{ +}}removed{{ +}}DequantizeLinear -> QuantizeLinear with identical parameters is an identity
// TXT-NEXT: {{^ +}}8  pool{{ +}}MaxPool{{ +}}int8{{ +}}qat.max_pool
// TXT-NEXT: {{^ +}}9  pool_q{{ +}}QuantizeLinear{{ +}}removed{{ +}}DequantizeLinear -> QuantizeLinear with identical parameters is an identity
// TXT-NEXT: {{^ +}}10  pool_dq{{ +}}DequantizeLinear{{ +}}dequantize{{ +}}qat.dequantize{{ +}}dequantizes for onnx.Add "add"
// TXT-NEXT: {{^ +}}11  add{{ +}}Add{{ +}}fp32{{ +}}onnx.Add{{ +}}input B is not quantized (no DequantizeLinear)
// TXT-NEXT: {{^ +}}12  softmax{{ +}}Softmax{{ +}}fp32{{ +}}onnx.Softmax{{ +}}no int8 kernel for Softmax; it computes in fp32 on dequantized inputs
// TXT-EMPTY:
// TXT-NEXT: Conv/Gemm/MatMul in int8: 1 of 1
// TXT-NEXT: compute nodes: 2 fp32 3 int8

// CSV-LABEL: index,node,op_type,precision,kernel,reason
// CSV: 0,in_q,QuantizeLinear,quantize,qat.quantize,"quantizes the fp32 output of a graph input for qat.conv ""conv1"""
// CSV-NEXT: 1,in_dq,DequantizeLinear,int8,qat.conv,
// CSV-NEXT: 2,w_q,QuantizeLinear,weight,qat.constant,folded into a quantized weight constant
// CSV-NEXT: 3,w_dq,DequantizeLinear,int8,qat.conv,
// CSV-NEXT: 4,conv1,Conv,int8,qat.conv,
// CSV-NEXT: 5,relu1,Relu,int8,qat.conv,
// CSV-NEXT: 6,c1_q,QuantizeLinear,int8,qat.conv,
// CSV-NEXT: 7,c1_dq,DequantizeLinear,removed,,DequantizeLinear -> QuantizeLinear with identical parameters is an identity
// CSV-NEXT: 8,pool,MaxPool,int8,qat.max_pool,
// CSV-NEXT: 9,pool_q,QuantizeLinear,removed,,DequantizeLinear -> QuantizeLinear with identical parameters is an identity
// CSV-NEXT: 10,pool_dq,DequantizeLinear,dequantize,qat.dequantize,"dequantizes for onnx.Add ""add"""
// CSV-NEXT: 11,add,Add,fp32,onnx.Add,input B is not quantized (no DequantizeLinear)
// CSV-NEXT: 12,softmax,Softmax,fp32,onnx.Softmax,no int8 kernel for Softmax; it computes in fp32 on dequantized inputs

// JSON-LABEL: "summary": {
// JSON-NEXT: "conv_gemm_matmul": 1,
// JSON-NEXT: "conv_gemm_matmul_int8": 1,
// JSON-NEXT: "compute_nodes": {
// JSON-NEXT: "fp32": 2,
// JSON-NEXT: "int8": 3
// JSON: "node": "conv1",
// JSON-NEXT: "op_type": "Conv",
// JSON-NEXT: "index": 4,
// JSON-NEXT: "precision": "int8",
// JSON-NEXT: "compute": true,
// JSON-NEXT: "kernel": "qat.conv"
// JSON: "node": "add",
// JSON-NEXT: "op_type": "Add",
// JSON-NEXT: "index": 11,
// JSON-NEXT: "precision": "fp32",
// JSON-NEXT: "compute": true,
// JSON-NEXT: "kernel": "onnx.Add",
// JSON-NEXT: "reason": "input B is not quantized (no DequantizeLinear): it is a graph input"

// RESIDUAL-LABEL: #  node
// RESIDUAL: {{^ +}}3  conv{{ +}}Conv{{ +}}int8->fp32{{ +}}qat.conv
// RESIDUAL-NEXT: {{^ +}}4  residual_add{{ +}}Add{{ +}}fp32{{ +}}onnx.Add{{ +}}residual input is not quantized (no DequantizeLinear), so the Add runs in fp32
// RESIDUAL-NEXT: {{^ +}}5  relu{{ +}}Relu{{ +}}fp32{{ +}}onnx.Relu{{ +}}not quantized in the model (no Q/DQ around it)
// RESIDUAL-NEXT: {{^ +}}6  out_q{{ +}}QuantizeLinear{{ +}}quantize{{ +}}qat.quantize{{ +}}quantizes the fp32 output of onnx.Relu "relu" for
// RESIDUAL: Conv/Gemm/MatMul in int8: 1 of 1
// RESIDUAL-NEXT: compute nodes: 2 fp32 1 int8->fp32

// OUTPUT: {{^ +}}6  out_q{{ +}}QuantizeLinear{{ +}}quantize{{ +}}qat.quantize{{ +}}quantizes the fp32 output of onnx.Relu "relu" for the graph output{{$}}

// UNWRITABLE: error: cannot write the precision report '{{.*}}no-such-dir/r.txt'

// REMOVED-LABEL: #  node
// REMOVED-NOT: ?
// REMOVED: {{^ +}}6  c1_q
// REMOVED-NEXT: {{^ +}}7  c1_dq{{ +}}DequantizeLinear{{ +}}removed{{ +}}DequantizeLinear -> QuantizeLinear with identical parameters is an identity
// REMOVED-NEXT: {{^ +}}8  pool
// REMOVED-NEXT: {{^ +}}9  pool_q{{ +}}QuantizeLinear{{ +}}removed{{ +}}DequantizeLinear -> QuantizeLinear with identical parameters is an identity
// REMOVED: compute nodes: 2 fp32 3 int8{{$}}

//--- model.mlir
func.func @main_graph(%x: tensor<1x2x4x4xf32>, %r: tensor<1x3x2x2xf32>) -> (tensor<1x3x2x2xf32>, tensor<1x3x2x2xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %wf = onnx.Constant dense<1.0> : tensor<3x2x1x1xf32>
  %ws = onnx.Constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %wz = onnx.Constant dense<0> : tensor<3xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8> loc("in_q"(fused<"QuantizeLinear">["m.onnx":0:0]))
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32> loc("in_dq"(fused<"DequantizeLinear">["m.onnx":1:0]))
  %wq = onnx.QuantizeLinear(%wf, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xf32>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xi8> loc("w_q"(fused<"QuantizeLinear">["m.onnx":2:0]))
  %w = onnx.DequantizeLinear(%wq, %ws, %wz) {axis = 0 : i64} : (tensor<3x2x1x1xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<3x2x1x1xf32> loc("w_dq"(fused<"DequantizeLinear">["m.onnx":3:0]))
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32> loc("conv1"(fused<"Conv">["m.onnx":4:0]))
  %rl = onnx.Relu(%c) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> loc("relu1"(fused<"Relu">["m.onnx":5:0]))
  %cq = onnx.QuantizeLinear(%rl, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8> loc("c1_q"(fused<"QuantizeLinear">["m.onnx":6:0]))
  %cdq = onnx.DequantizeLinear(%cq, %so, %z) : (tensor<1x3x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xf32> loc("c1_dq"(fused<"DequantizeLinear">["m.onnx":7:0]))
  %p = onnx.MaxPool(%cdq) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x2x2xf32> loc("pool"(fused<"MaxPool">["m.onnx":8:0]))
  %pq = onnx.QuantizeLinear(%p, %so, %z) : (tensor<1x3x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x2x2xi8> loc("pool_q"(fused<"QuantizeLinear">["m.onnx":9:0]))
  %pdq = onnx.DequantizeLinear(%pq, %so, %z) : (tensor<1x3x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x2x2xf32> loc("pool_dq"(fused<"DequantizeLinear">["m.onnx":10:0]))
  %a = onnx.Add(%pdq, %r) : (tensor<1x3x2x2xf32>, tensor<1x3x2x2xf32>) -> tensor<1x3x2x2xf32> loc("add"(fused<"Add">["m.onnx":11:0]))
  %sm = onnx.Softmax(%pdq) {axis = 1 : i64} : (tensor<1x3x2x2xf32>) -> tensor<1x3x2x2xf32> loc("softmax"(fused<"Softmax">["m.onnx":12:0]))
  return %a, %sm : tensor<1x3x2x2xf32>, tensor<1x3x2x2xf32>
}

//--- residual.mlir
func.func @main_graph(%x: tensor<1x2x4x4xf32>, %r: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xi8> {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %so = onnx.Constant dense<0.25> : tensor<f32>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8> loc("in_q"(fused<"QuantizeLinear">["m.onnx":0:0]))
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32> loc("in_dq"(fused<"DequantizeLinear">["m.onnx":1:0]))
  %w = onnx.DequantizeLinear(%wq, %s, %z) : (tensor<3x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2x1x1xf32> loc("w_dq"(fused<"DequantizeLinear">["m.onnx":2:0]))
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32> loc("conv"(fused<"Conv">["m.onnx":3:0]))
  %a = onnx.Add(%c, %r) : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> loc("residual_add"(fused<"Add">["m.onnx":4:0]))
  %rl = onnx.Relu(%a) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> loc("relu"(fused<"Relu">["m.onnx":5:0]))
  %y = onnx.QuantizeLinear(%rl, %so, %z) : (tensor<1x3x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x3x4x4xi8> loc("out_q"(fused<"QuantizeLinear">["m.onnx":6:0]))
  return %y : tensor<1x3x4x4xi8>
}

//--- remarks.mlir
func.func @main_graph(%x: tensor<1x2x4x4xf32>, %y: tensor<8xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<8xf32>) {
  %s = onnx.Constant dense<0.5> : tensor<f32>
  %z = onnx.Constant dense<0> : tensor<i8>
  %wq = onnx.Constant dense<1> : tensor<3x2x1x1xi8>
  %q = onnx.QuantizeLinear(%x, %s, %z) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xi8> loc("in_q"(fused<"QuantizeLinear">["remarks.mlir":5:0]))
  %dq = onnx.DequantizeLinear(%q, %s, %z) : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32> loc("in_dq"(fused<"DequantizeLinear">["remarks.mlir":6:0]))
  %w = onnx.DequantizeLinear(%wq, %s, %z) : (tensor<3x2x1x1xi8>, tensor<f32>, tensor<i8>) -> tensor<3x2x1x1xf32> loc("w_dq"(fused<"DequantizeLinear">["remarks.mlir":7:0]))
  %c = onnx.Conv(%dq, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32> loc("conv"(fused<"Conv">["remarks.mlir":8:0]))
  // expected-remark @+1 {{runs in fp32: no int8 kernel for Sigmoid; it computes in fp32 on dequantized inputs}}
  %sg = onnx.Sigmoid(%dq) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("sigmoid"(fused<"Sigmoid">["remarks.mlir":10:0]))
  // expected-remark @+1 {{runs in fp32: input is not quantized (no DequantizeLinear before the Conv)}}
  %c2 = onnx.Conv(%sg, %w) {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32> loc("conv_float"(fused<"Conv">["remarks.mlir":12:0]))
  // expected-remark @+1 {{runs in fp32: not quantized in the model (no Q/DQ around it)}}
  %t = onnx.Tanh(%y) : (tensor<8xf32>) -> tensor<8xf32> loc("tanh"(fused<"Tanh">["remarks.mlir":14:0]))
  return %c, %c2, %t : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<8xf32>
}
