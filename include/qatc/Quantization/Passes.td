//===- Passes.td - qatc's quantization passes --------------*- tablegen -*-===//
//
// The passes that turn a Q/DQ ONNX graph into the `qat` dialect, and that
// insert Q/DQ into float graphs. Each pass lives in its own file in
// passes/Quantization/ and has its own lit test in lit-tests/Quantization/.
// `qatc-opt` runs them one by one; `qatc compile` and `qatc quantize` run
// the pipelines built in Pipelines.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_QUANTIZATION_PASSES_TD
#define QATC_QUANTIZATION_PASSES_TD

include "mlir/Pass/PassBase.td"

def QatRecipeInsert : Pass<"qat-recipe-insert", "::mlir::ModuleOp"> {
  let summary = "Insert Q/DQ into a float graph by a recipe (TensorRT or TF)";
  let description = [{
    Places QuantizeLinear/DequantizeLinear pairs the way a quantization
    recipe says, with activation scales from a calibration table (TensorRT
    calibration-cache format) and per-channel weight scales computed from
    the weights (symmetric int8, scale = amax / 127).

    - `trt`: the inputs and weights of Conv/ConvTranspose/Gemm/MatMul, the
      residual input of Adds that join a conv branch (both inputs when both
      or neither come from one), the inputs of AveragePool and
      GlobalAveragePool, and every Concat input with one shared scale.
      Outputs of weighted ops stay float; biases stay float.
    - `tf`: weights and the outputs of each quantizable group (the end of
      Conv/Gemm/MatMul[+BatchNormalization][+Relu/Clip] chains, Adds,
      average pools, Concats) and the float graph inputs feeding them.

    Nodes can be left float by name (regular expressions), op type, or
    pattern (`Conv>Relu`: a Conv whose only consumer is a Relu).
  }];
  let options = [
    Option<"recipe", "recipe", "std::string", "\"trt\"",
           "placement recipe: trt (inputs and weights) or tf (outputs and "
           "weights)">,
    Option<"calibCache", "calib-cache", "std::string", "\"\"",
           "calibration cache (TensorRT text format) with activation scales">,
    ListOption<"includeNodes", "include-nodes", "std::string",
               "quantize only nodes whose name matches one of these regular "
               "expressions">,
    ListOption<"excludeNodes", "exclude-nodes", "std::string",
               "leave nodes whose name matches one of these regular "
               "expressions float">,
    ListOption<"includeOpTypes", "include-op-types", "std::string",
               "quantize only nodes of these ONNX op types">,
    ListOption<"excludeOpTypes", "exclude-op-types", "std::string",
               "leave nodes of these ONNX op types float">,
    ListOption<"includePatterns", "include-patterns", "std::string",
               "quantize only the nodes of these chains (A>B: an A whose "
               "only consumer is a B)">,
    ListOption<"excludePatterns", "exclude-patterns", "std::string",
               "leave the nodes of these chains float (A>B: an A whose only "
               "consumer is a B)">,
    Option<"residualPolicy", "residual-policy", "std::string", "\"last\"",
           "which input of an Add joining two conv branches stays float: "
           "last (the branch produced last, as TensorFlow's toolkit) or "
           "longest (the longer path from the common ancestor, as "
           "ModelOpt)">,
  ];
}

def QatLegalityCheck : Pass<"qat-legality-check", "::mlir::ModuleOp"> {
  let summary = "Refuse Q/DQ graphs the explicit-quantization rules cannot honour";
  let description = [{
    Checks every QuantizeLinear/DequantizeLinear before the graph is
    converted: constant, finite, positive float32 scales; constant int8 or
    uint8 zero points (int32 only for biases, with zero point 0); per-tensor
    quantization of activations; symmetric weights where the int8 kernels
    need them. Each refusal is an error at the ONNX node. With `trt-compat`
    it also refuses what TensorRT refuses: non-zero zero points and
    QuantizeLinear without a zero point (uint8).
  }];
  let options = [
    Option<"trtCompat", "trt-compat", "bool", "false",
           "also refuse what TensorRT refuses (non-zero zero points, uint8)">,
  ];
}

def QatConvTransposeToConv
    : Pass<"qat-conv-transpose-to-conv", "::mlir::ModuleOp"> {
  let summary = "Rewrite 2-D ConvTranspose as zero insertion, Pad and Conv";
  let description = [{
    A transposed convolution with strides s is the convolution, with the
    kernel flipped and its input and output channels swapped (per group),
    of its input with s - 1 zeros inserted between neighbours and padded by
    `dilation * (kernel - 1) - pads` (plus `output_padding` at the end). The
    zeros are inserted with Reshape -> Pad -> Reshape (ONNX ops that only
    move values), the border with Pad (negative pads crop); the weight
    constant is permuted where it is defined, through its Q/DQ nodes (a
    per-channel axis 1 becomes axis 0). Afterwards Q/DQ propagate across the
    pads and reshapes and the Conv fuses into `qat.conv` like any other, so
    int8 and fp32 transposed convolutions both compile. Where the kernel
    equals the stride and nothing is padded, the rewrite is instead a 1x1
    Conv to Cout * k * k channels and a DepthToSpace (CRD), which computes
    no inserted zeros. Weights that are not constants (possibly through
    QuantizeLinear/DequantizeLinear) are left alone.
  }];
}

def QatLayerNormFuse : Pass<"qat-layernorm-fuse", "::mlir::ModuleOp"> {
  let summary = "Rewrite decomposed layer norms as LayerNormalization";
  let description = [{
    ReduceMean -> Sub -> Pow(2) (or Mul(d, d)) -> ReduceMean -> Add(eps) ->
    Sqrt -> Div over the trailing axes of an f32 tensor, optionally followed
    by a Mul with a constant gamma and an Add with a constant beta (how
    exporters before opset 17 spell a layer norm), becomes one
    `onnx.LayerNormalization` named after all the nodes it replaces, which
    the code generator runs as one row kernel. Groups whose intermediate
    values have other readers, whose gamma or beta is not a constant over
    the normalized axes, or whose nodes the precision override forces to
    fp32 are left alone. Results change by fp32 reassociation only.
  }];
}

def QatQdqConvert : Pass<"qat-qdq-convert", "::mlir::ModuleOp"> {
  let summary = "Turn ONNX Q/DQ nodes into qat.quantize / qat.dequantize";
  let description = [{
    Every `onnx.QuantizeLinear` / `onnx.DequantizeLinear` (with constant
    parameters, as the legality pass guarantees) becomes `qat.quantize` /
    `qat.dequantize` on a tensor of `!quant.uniform` element type carrying
    its scale and zero point. Where an integer tensor enters or leaves the
    quantized world (an int8 constant, graph input or output) a
    `qat.storage_cast` converts between the storage and the quantized type.
  }];
  let dependentDialects = ["::qatc::qat::QatDialect",
                           "::mlir::quant::QuantizationDialect"];
}

def QatWeightsFold : Pass<"qat-weights-fold", "::mlir::ModuleOp"> {
  let summary = "Fold quantized weights into qat.constant";
  let description = [{
    `qat.quantize` of a float constant (a QAT export's weight Q) becomes the
    quantized constant it computes, with exactly QuantizeLinear's rounding;
    `quant.scast` of an integer constant (an int8 initializer) becomes a
    `qat.constant`. Per-axis parameters are kept. A Transpose of a
    dequantized constant weight is folded into the constant (the per-axis
    dimension follows the permutation).
  }];
  let dependentDialects = ["::qatc::qat::QatDialect"];
}

def QatQdqPropagate : Pass<"qat-qdq-propagate", "::mlir::ModuleOp"> {
  let summary = "Move Q/DQ across value-selecting ops; simplify DQ->Q";
  let description = [{
    Dequantize moves forward and quantize backward across ops that only
    select or move values (Relu and Clip become integer clamps, MaxPool,
    Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Slice, Gather, Identity,
    and Concat when its inputs share one quantization), so the int8 region
    grows exactly as TensorRT grows it. DQ->Q with identical parameters is
    removed; with different ones it becomes a `qat.requantize`. A Q->DQ pair
    is never removed. Shared dequantizes are duplicated per consumer, and
    identical quantizes of one value are merged.
  }];
  let dependentDialects = ["::qatc::qat::QatDialect"];
}

def QatPrecisionOverride : Pass<"qat-precision-override", "::mlir::ModuleOp"> {
  let summary = "Force nodes to fp32, or require them to run int8";
  let description = [{
    Reads a file of `<node-name regex> fp32|int8` lines. Nodes forced to
    fp32 are left out of every fusion (their Q/DQ are evaluated literally);
    nodes required to be int8 make the precision report fail, naming the
    reason, if they end up in fp32.
  }];
  let options = [
    Option<"file", "file", "std::string", "\"\"", "the override file">,
  ];
}

def QatOpsFuse : Pass<"qat-ops-fuse", "::mlir::ModuleOp"> {
  let summary = "Fuse DQ -> op -> Q groups into int8 qat ops";
  let description = [{
    DQ(x), DQ(w), bias -> Conv/Gemm/MatMul -> [BatchNormalization] ->
    [Relu/Clip] -> [Add of a dequantized residual] -> [Relu/Clip] -> [Q]
    becomes one `qat.conv` / `qat.matmul` whose epilogue holds the
    per-channel scale and bias (BatchNorm folds there, never into the int8
    weights), the clamps and the residual; without a trailing Q the epilogue
    stops at f32. Likewise Add, Mul, AveragePool and GlobalAveragePool with
    dequantized inputs. Ops that stay fp32 are marked with the reason.
  }];
  let dependentDialects = ["::qatc::qat::QatDialect"];
}

def QatPrecisionReport : Pass<"qat-precision-report", "::mlir::ModuleOp"> {
  let summary = "Report, per ONNX node, the precision it runs in and why";
  let description = [{
    Lists every ONNX node of the model: int8 (and the qat op it was fused
    into), fp32 with the reason, or removed. Writes text, CSV or JSON (by the
    file's extension; `-` prints text to stdout) and can emit one MLIR
    remark per fp32 compute node. A `.html` file is one self-contained page:
    the graph laid out by Graphviz's `dot`, nodes coloured by precision,
    fused groups outlined, fp32 nodes with their reason, the tables, and
    with `profile` each layer's time. Fails if a node that
    `qat-precision-override` required to be int8 runs in fp32.
  }];
  let options = [
    Option<"file", "file", "std::string", "\"\"",
           "where to write the report (.txt, .csv, .json, .html; - for stdout)">,
    Option<"remarks", "remarks", "bool", "false",
           "emit a remark at every fp32 compute node">,
    Option<"profile", "profile", "std::string", "\"\"",
           "a `qatc bench --json` file: each layer's time on the HTML "
           "report">,
  ];
}

#endif // QATC_QUANTIZATION_PASSES_TD
