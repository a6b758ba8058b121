//===- QatOps.td - the qat dialect's ops -------------------*- tablegen -*-===//
//
// Quantize / dequantize / requantize, quantized constants, int8 compute ops
// with fused epilogues, and int8 data movement. Result types are explicit
// (the passes that build these ops know them from the ONNX graph); the
// verifiers check everything a kernel relies on.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_DIALECT_QAT_QATOPS_TD
#define QATC_DIALECT_QAT_QATOPS_TD

include "qatc/Dialect/Qat/QatBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Qat_Op<string mnemonic, list<Trait> traits = []>
    : Op<Qat_Dialect, mnemonic, traits # [Pure]> {
  let hasVerifier = 1;
}

/// An op whose quantized operands and result share one element type.
class Qat_SameScaleOp<string mnemonic, list<Trait> traits = []>
    : Qat_Op<mnemonic, traits # [DeclareOpInterfaceMethods<
                                     Qat_QuantizedOpInterface>]> {
  let extraClassDefinition = [{
    ::qatc::qat::ScaleRelation $cppClass::getScaleRelation() {
      return ::qatc::qat::ScaleRelation::SameScale;
    }
  }];
}

//===----------------------------------------------------------------------===//
// Quantization boundaries and constants
//===----------------------------------------------------------------------===//

def Qat_ConstantOp : Qat_Op<"constant"> {
  let summary = "a quantized constant (folded weight)";
  let description = [{
    `value` holds the stored integers (a `dense_resource` blob for weights,
    so they are never printed); the result's `!quant.uniform` type gives
    their scales and zero points, per tensor or per axis:

    ```mlir
    %w = qat.constant dense_resource<w1> : tensor<16x3x3x3xi8>
           -> tensor<16x3x3x3x!quant.uniform<i8:f32:0, {0.01,...}>>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Qat_QuantTensor:$output);
  let assemblyFormat = "$value attr-dict `->` type($output)";
}

def Qat_StorageCastOp : Qat_Op<"storage_cast"> {
  let summary = "reinterpret stored integers as a quantized tensor, or back";
  let description = [{
    Where an integer tensor of the ONNX graph (an int8 initializer, graph
    input or output) meets the quantized world: no value changes, only the
    type. ONNX int8 is `i8`, uint8 is `ui8`; the quantized type's storage
    signedness must agree.
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` type($input) `->` type($output)";
}

def Qat_QuantizeOp : Qat_Op<"quantize"> {
  let summary = "out = saturate(round(x / scale) + zero_point)";
  let description = [{
    Float to quantized, exactly ONNX QuantizeLinear: the division is done in
    f32, the quotient is rounded (`half_to_even` for ONNX), the zero point is
    added, and the result saturates to the storage range of the result type.
    Per-axis result types quantize along their quantized dimension.
  }];
  let arguments = (ins Qat_FloatTensor:$input, Qat_RoundingAttr:$rounding);
  let results = (outs Qat_QuantTensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` type($input) `->` type($output)";
}

def Qat_DequantizeOp : Qat_Op<"dequantize"> {
  let summary = "out = (q - zero_point) * scale";
  let description = [{
    Quantized to f32, exactly ONNX DequantizeLinear (per tensor or per axis).
  }];
  let arguments = (ins Qat_QuantTensor:$input);
  let results = (outs Qat_FloatTensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` type($input) `->` type($output)";
}

def Qat_RequantizeOp : Qat_Op<"requantize",
    [DeclareOpInterfaceMethods<Qat_QuantizedOpInterface>]> {
  let summary = "out = quantize(dequantize(q)) from one scale to another";
  let description = [{
    The fusion of a DequantizeLinear followed by a QuantizeLinear with
    different parameters: `saturate(round(((q - z1) * s1) / s2) + z2)`, with
    the dequantized value and the division in f32 as the Q/DQ pair computes
    them. A lowering that uses the combined factor s1/s2 may differ by one
    LSB at rounding ties.
  }];
  let arguments = (ins Qat_PerTensorQuantTensor:$input,
                   Qat_RoundingAttr:$rounding);
  let results = (outs Qat_PerTensorQuantTensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` type($input) `->` type($output)";
}

//===----------------------------------------------------------------------===//
// Compute with epilogues
//===----------------------------------------------------------------------===//

/// The epilogue shared by conv and matmul, in this order:
///
///   acc[c] = sum((x - z_x) * (w - z_w[c]))           int32, exact
///   y      = acc * (s_x * s_w[c])                    f32
///   y      = y * channel_scale[c] + bias[c]          (each when present)
///   y      = clamp(y, activation)                    (when present)
///   y      = y + (r - z_r) * s_r                     (residual, when present)
///   y      = clamp(y, residual_activation)           (when present)
///   out    = y                                       (f32 result)
///          | saturate(round(y / s_out) + z_out)      (quantized result)
///
/// BatchNormalization folds into channel_scale and bias (never into the
/// int8 weights); a float bias stays float, as the Q/DQ graph says.
class Qat_LinearOp<string mnemonic> : Qat_Op<mnemonic,
    [AttrSizedOperandSegments,
     DeclareOpInterfaceMethods<Qat_QuantizedOpInterface,
         ["getWeightOperandIndex", "getWeightChannelAxis",
          "getBiasOperandIndex"]>]> {
  let results = (outs Qat_QuantOrFloatTensor:$output);
  code epilogueDecl = [{
    /// The accumulator scale s_in * s_w[c] of every output channel.
    ::llvm::SmallVector<double> getAccumulatorScales();
  }];
}

def Qat_ConvOp : Qat_LinearOp<"conv"> {
  let summary = "int8 N-D convolution (grouped, depthwise) with an epilogue";
  let description = [{
    NCHW convolution of a per-tensor quantized input with a quantized
    constant weight [C_out, C_in/group, k...] (per tensor, or per axis along
    axis 0), followed by the epilogue described on `Qat_LinearOp`. Padding
    contributes the real value 0 (the input's zero point).

    ```mlir
    %y = qat.conv %x, %w bias(%b) {activation = #qat.clamp<relu>,
           dilations = array<i64: 1, 1>, group = 1 : i64,
           pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
           rounding = #qat.rounding<half_to_even>} : (...) -> tensor<1x16x8x8x!quant.uniform<i8:f32, 0.05>>
    ```
  }];
  let arguments = (ins Qat_PerTensorQuantTensor:$input,
                   Qat_QuantTensor:$weight,
                   Optional<Qat_FloatTensor>:$bias,
                   Optional<Qat_FloatTensor>:$channel_scale,
                   Optional<Qat_PerTensorQuantTensor>:$residual,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<I64Attr, "1">:$group,
                   OptionalAttr<Qat_ClampAttr>:$activation,
                   OptionalAttr<Qat_ClampAttr>:$residual_activation,
                   Qat_RoundingAttr:$rounding);
  let assemblyFormat = [{
    $input `,` $weight (`bias` `(` $bias^ `)`)?
    (`scale` `(` $channel_scale^ `)`)? (`residual` `(` $residual^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = epilogueDecl;
}

def Qat_MatMulOp : Qat_LinearOp<"matmul"> {
  let summary = "int8 matrix product (Gemm, MatMul, attention) with an epilogue";
  let description = [{
    numpy matmul of `lhs` [..., M, K] and `rhs` [..., K, N] (or [..., N, K]
    with `transpose_rhs`, as Gemm with transB=1), batch dimensions
    broadcast. Both operands are quantized: `rhs` is either a constant weight
    (per tensor, or per axis along its N axis) or an activation (per tensor,
    as in attention's Q.K^T and softmax.V). Then the epilogue of
    `Qat_LinearOp`, per column N.
  }];
  let arguments = (ins Qat_PerTensorQuantTensor:$lhs, Qat_QuantTensor:$rhs,
                   Optional<Qat_FloatTensor>:$bias,
                   Optional<Qat_FloatTensor>:$channel_scale,
                   Optional<Qat_PerTensorQuantTensor>:$residual,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs,
                   OptionalAttr<Qat_ClampAttr>:$activation,
                   OptionalAttr<Qat_ClampAttr>:$residual_activation,
                   Qat_RoundingAttr:$rounding);
  let assemblyFormat = [{
    $lhs `,` $rhs (`bias` `(` $bias^ `)`)?
    (`scale` `(` $channel_scale^ `)`)? (`residual` `(` $residual^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = epilogueDecl;
}

/// Elementwise int8 op with numpy broadcasting:
///   y = f((a - z_a) * s_a, (b - z_b) * s_b); y = clamp(y, activation);
///   out = y | saturate(round(y / s_out) + z_out)
class Qat_ElementwiseOp<string mnemonic, string formula>
    : Qat_Op<mnemonic, [DeclareOpInterfaceMethods<Qat_QuantizedOpInterface>]> {
  let summary = "int8 elementwise " # formula # " with an optional clamp";
  let arguments = (ins Qat_PerTensorQuantTensor:$lhs,
                   Qat_PerTensorQuantTensor:$rhs,
                   OptionalAttr<Qat_ClampAttr>:$activation,
                   Qat_RoundingAttr:$rounding);
  let results = (outs Qat_QuantOrFloatTensor:$output);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDefinition = [{
    ::qatc::qat::ScaleRelation $cppClass::getScaleRelation() {
      return ::qatc::qat::ScaleRelation::Rescale;
    }
  }];
}

def Qat_AddOp : Qat_ElementwiseOp<"add", "a + b">;
def Qat_MulOp : Qat_ElementwiseOp<"mul", "a * b">;

def Qat_AvgPoolOp : Qat_Op<"avg_pool",
    [DeclareOpInterfaceMethods<Qat_QuantizedOpInterface>]> {
  let summary = "int8 average pooling";
  let description = [{
    Sums `(q - z)` over each window in integers, then
    `y = sum * s / count` (count includes the padding when
    `count_include_pad`, where padding is the real value 0) and requantizes
    to the result type, or returns y as f32.
  }];
  let arguments = (ins Qat_PerTensorQuantTensor:$input,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads,
                   DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                   DefaultValuedAttr<I64Attr, "0">:$count_include_pad,
                   Qat_RoundingAttr:$rounding);
  let results = (outs Qat_QuantOrFloatTensor:$output);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($output)
  }];
}

def Qat_GlobalAvgPoolOp : Qat_Op<"global_avg_pool",
    [DeclareOpInterfaceMethods<Qat_QuantizedOpInterface>]> {
  let summary = "int8 mean over all spatial dimensions";
  let arguments = (ins Qat_PerTensorQuantTensor:$input,
                   Qat_RoundingAttr:$rounding);
  let results = (outs Qat_QuantOrFloatTensor:$output);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($output)
  }];
}

//===----------------------------------------------------------------------===//
// Value-selecting ops (same scale in and out)
//===----------------------------------------------------------------------===//

def Qat_MaxPoolOp : Qat_SameScaleOp<"max_pool"> {
  let summary = "int8 max pooling (exact: quantization is monotone)";
  let arguments = (ins Qat_PerTensorQuantTensor:$input,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<I64Attr, "0">:$ceil_mode);
  let results = (outs Qat_PerTensorQuantTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Qat_ClampOp : Qat_SameScaleOp<"clamp"> {
  let summary = "clamp stored integers to [min, max] (Relu, Clip)";
  let description = [{
    Relu and Clip on dequantized values, moved onto the integers:
    `relu(dq(q)) = dq(max(q, z))`.
  }];
  let arguments = (ins Qat_PerTensorQuantTensor:$input, I64Attr:$min,
                   I64Attr:$max);
  let results = (outs Qat_PerTensorQuantTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Qat_ConcatOp : Qat_SameScaleOp<"concat"> {
  let summary = "int8 concatenation; every input has the result's scale";
  let arguments = (ins Variadic<Qat_PerTensorQuantTensor>:$inputs,
                   I64Attr:$axis);
  let results = (outs Qat_PerTensorQuantTensor:$output);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type($inputs, $output)";
}

def Qat_ReshapeOp : Qat_SameScaleOp<"reshape"> {
  let summary = "reshape (Reshape, Flatten, Squeeze, Unsqueeze) of int8 data";
  let arguments = (ins Qat_PerTensorQuantTensor:$input);
  let results = (outs Qat_PerTensorQuantTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Qat_TransposeOp : Qat_SameScaleOp<"transpose"> {
  let summary = "permute the dimensions of int8 data";
  let arguments = (ins Qat_PerTensorQuantTensor:$input,
                   DenseI64ArrayAttr:$perm);
  let results = (outs Qat_PerTensorQuantTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Qat_SliceOp : Qat_SameScaleOp<"slice"> {
  let summary = "strided slice of int8 data (onnx.Slice's normalized bounds)";
  let arguments = (ins Qat_PerTensorQuantTensor:$input,
                   DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$ends,
                   DenseI64ArrayAttr:$steps);
  let results = (outs Qat_PerTensorQuantTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Qat_GatherOp : Qat_SameScaleOp<"gather"> {
  let summary = "gather slices of int8 data along an axis";
  let arguments = (ins Qat_PerTensorQuantTensor:$input,
                   RankedTensorOf<[I32, I64]>:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs Qat_PerTensorQuantTensor:$output);
  let assemblyFormat =
      "$input `[` $indices `]` attr-dict `:` functional-type(operands, results)";
}

def Qat_ResizeOp : Qat_SameScaleOp<"resize"> {
  let summary = "nearest-neighbour Resize of int8 data";
  let description = [{
    The int8 twin of a nearest `onnx.Resize` (which only selects values, so
    Q/DQ move across it exactly); the attributes are onnx.Resize's.
  }];
  let arguments = (ins Qat_PerTensorQuantTensor:$input,
                   DenseF32ArrayAttr:$scales,
                   DefaultValuedAttr<StrAttr, "\"half_pixel\"">:$coordinate_transformation_mode,
                   DefaultValuedAttr<StrAttr, "\"round_prefer_floor\"">:$nearest_mode);
  let results = (outs Qat_PerTensorQuantTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Qat_PadOp : Qat_SameScaleOp<"pad"> {
  let summary = "Pad of int8 data (onnx.Pad's attributes)";
  let description = [{
    The int8 twin of `onnx.Pad`: `value` is the real padding value; the
    padded elements hold its quantization under the result's type (Q/DQ
    move across a constant Pad only when that quantization is exact).
  }];
  let arguments = (ins Qat_PerTensorQuantTensor:$input,
                   DenseI64ArrayAttr:$pads,
                   DefaultValuedAttr<StrAttr, "\"constant\"">:$mode,
                   DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs Qat_PerTensorQuantTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

#endif // QATC_DIALECT_QAT_QATOPS_TD
