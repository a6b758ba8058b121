//===- OnnxOps.td - the qatc onnx dialect ------------------*- tablegen -*-===//
//
// The import-level dialect: one op per ONNX operator qatc understands, in a
// normalized form that does not depend on the model's opset. Inputs that ONNX
// allows to be tensors but that must be compile-time constants for a static
// graph (Reshape's shape, Squeeze's axes, Slice's bounds, Clip's bounds, Pad's
// pads, Resize's scales, ...) are attributes here; the importer folds them.
// Every result type is a static ranked tensor computed by the op's shape
// inference, so the verifier re-checks every shape the importer produced.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_DIALECT_ONNX_ONNXOPS_TD
#define QATC_DIALECT_ONNX_ONNXOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "qatc/Dialect/Onnx/OnnxInterfaces.td"

def Onnx_Dialect : Dialect {
  let name = "onnx";
  let cppNamespace = "::qatc::onnx";
  let summary = "ONNX operators as imported by qatc";
  let description = [{
    Ops mirror ONNX operators (mnemonics keep ONNX's CamelCase names) with
    opset differences normalized away at import. Locations carry the ONNX node
    name, the model file and the node index, so every diagnostic points at the
    user's model.
  }];
  let hasConstantMaterializer = 1;
  // Attributes live in the attribute dictionary so that the importer can build
  // and shape-infer any op from a generic OperationState.
  let usePropertiesForAttributes = 0;
}

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

class Onnx_Op<string mnemonic, list<Trait> traits = []>
    : Op<Onnx_Dialect, mnemonic, traits> {
  let assemblyFormat =
      "`(` operands `)` attr-dict `:` functional-type(operands, results)";
}

/// An op whose result types come from its C++ shape inference
/// (`inferReturnTypes` in OnnxShapeInference.cpp).
class Onnx_InferredOp<string mnemonic, list<Trait> traits = []>
    : Onnx_Op<mnemonic, traits # [Pure, InferTypeOpAdaptor]>;

/// Elementwise op with one input whose result has the input's type.
class Onnx_UnaryOp<string mnemonic, list<Trait> traits = []>
    : Onnx_Op<mnemonic, traits # [Pure, InferTypeOpAdaptor]> {
  let arguments = (ins AnyTensor:$X);
  let results = (outs AnyTensor:$Y);
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location>,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      types.push_back(adaptor.getX().getType());
      return ::mlir::success();
    }
  }];
}

/// Elementwise op with ONNX multidirectional (numpy) broadcasting; the
/// result has A's element type. Constant operands are evaluated at import by
/// the reference evaluator.
class Onnx_BroadcastOp<string mnemonic, list<Trait> traits = []>
    : Onnx_Op<mnemonic, traits # [Pure, InferTypeOpAdaptor]> {
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$C);
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::qatc::onnx::inferBroadcastType(loc, adaptor.getA().getType(),
                                              adaptor.getB().getType(), types);
    }
  }];
}

/// A broadcasting op with an integer folder of its own (OnnxFolders.cpp).
class Onnx_BinaryOp<string mnemonic, list<Trait> traits = []>
    : Onnx_BroadcastOp<mnemonic, traits> {
  let hasFolder = 1;
}

/// A broadcasting comparison: the result is i1 (ONNX bool).
class Onnx_CompareOp<string mnemonic, list<Trait> traits = []>
    : Onnx_BroadcastOp<mnemonic, traits> {
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *ctx, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      if (::mlir::failed(::qatc::onnx::inferBroadcastType(
              loc, adaptor.getA().getType(), adaptor.getB().getType(), types)))
        return ::mlir::failure();
      types.back() = ::mlir::cast<::mlir::TensorType>(types.back())
                         .clone(::mlir::IntegerType::get(ctx, 1));
      return ::mlir::success();
    }
  }];
}

/// A reduction over `axes` (sorted, non-negative; every axis when empty).
class Onnx_ReduceOp<string mnemonic, list<Trait> traits = []>
    : Onnx_Op<mnemonic, traits # [Pure, InferTypeOpAdaptor]> {
  let arguments = (ins AnyTensor:$data, DenseI64ArrayAttr:$axes,
                   DefaultValuedAttr<I64Attr, "1">:$keepdims);
  let results = (outs AnyTensor:$reduced);
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::qatc::onnx::inferReduceType(loc, adaptor.getData().getType(),
                                           adaptor.getAxes(),
                                           adaptor.getKeepdims(), types);
    }
  }];
}

//===----------------------------------------------------------------------===//
// Constants and metadata
//===----------------------------------------------------------------------===//

def Onnx_ConstantOp : Onnx_Op<"Constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "output"]>]> {
  let summary = "a constant tensor (ONNX Constant node or initializer)";
  let description = [{
    Holds an ONNX initializer or Constant node. Large tensors are
    `dense_resource` blobs so that weights are never printed or parsed as
    giant literals; small ones are `dense` literals.
  }];
  let arguments = (ins TypedAttrInterface:$value);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Onnx_ShapeOp : Onnx_InferredOp<"Shape"> {
  let summary = "the shape of a tensor as a 1-D int64 tensor";
  let arguments = (ins AnyTensor:$data, DefaultValuedAttr<I64Attr, "0">:$start,
                   OptionalAttr<I64Attr>:$end);
  let results = (outs AnyTensor:$shape);
  let hasFolder = 1;
}

def Onnx_CastOp : Onnx_Op<"Cast", [Pure]> {
  let summary = "element type conversion; the target type is the result's";
  let arguments = (ins AnyTensor:$input);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Onnx_IdentityOp : Onnx_UnaryOp<"Identity"> {
  let summary = "identity";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

def Onnx_QuantizeLinearOp : Onnx_InferredOp<"QuantizeLinear"> {
  let summary = "y = saturate(round_half_to_even(x / scale) + zero_point)";
  let description = [{
    Scale and zero point stay operands, exactly as in the model. `axis` is
    normalized to a non-negative value; a rank-0 scale means per-tensor, a
    1-D scale of length `shape(x)[axis]` means per-axis. Without a zero point
    the result is uint8 (ONNX opsets 10 to 20).
  }];
  let arguments = (ins AnyTensor:$x, AnyTensor:$y_scale,
                   Optional<AnyTensor>:$y_zero_point,
                   DefaultValuedAttr<I64Attr, "1">:$axis,
                   DefaultValuedAttr<I64Attr, "1">:$saturate);
  let results = (outs AnyTensor:$y);
  let hasVerifier = 1;
}

def Onnx_DequantizeLinearOp : Onnx_InferredOp<"DequantizeLinear"> {
  let summary = "y = (x - zero_point) * scale";
  let arguments = (ins AnyTensor:$x, AnyTensor:$x_scale,
                   Optional<AnyTensor>:$x_zero_point,
                   DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs AnyTensor:$y);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Convolution, matrix products, normalization
//===----------------------------------------------------------------------===//

def Onnx_ConvOp : Onnx_InferredOp<"Conv"> {
  let summary = "N-D convolution; explicit pads (auto_pad resolved at import)";
  let arguments = (ins AnyTensor:$X, AnyTensor:$W, Optional<AnyTensor>:$B,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs AnyTensor:$Y);
}

def Onnx_ConvTransposeOp : Onnx_InferredOp<"ConvTranspose"> {
  let summary = "N-D transposed convolution; explicit pads and output_padding";
  let arguments = (ins AnyTensor:$X, AnyTensor:$W, Optional<AnyTensor>:$B,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$output_padding,
                   DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs AnyTensor:$Y);
}

def Onnx_GemmOp : Onnx_InferredOp<"Gemm"> {
  let summary = "Y = alpha * op(A) * op(B) + beta * C";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B, Optional<AnyTensor>:$C,
                   DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0">:$beta,
                   DefaultValuedAttr<I64Attr, "0">:$transA,
                   DefaultValuedAttr<I64Attr, "0">:$transB);
  let results = (outs AnyTensor:$Y);
}

def Onnx_MatMulOp : Onnx_InferredOp<"MatMul"> {
  let summary = "numpy matmul with batch broadcasting";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$Y);
}

def Onnx_BatchNormalizationOp : Onnx_InferredOp<"BatchNormalization"> {
  let summary = "inference-mode batch normalization";
  let arguments = (ins AnyTensor:$X, AnyTensor:$scale, AnyTensor:$B,
                   AnyTensor:$input_mean, AnyTensor:$input_var,
                   DefaultValuedAttr<F32Attr, "1e-5">:$epsilon);
  let results = (outs AnyTensor:$Y);
}

def Onnx_LayerNormalizationOp : Onnx_InferredOp<"LayerNormalization"> {
  let summary = "layer normalization over the axes from `axis` to the last";
  let arguments = (ins AnyTensor:$X, AnyTensor:$Scale, Optional<AnyTensor>:$B,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   DefaultValuedAttr<F32Attr, "1e-5">:$epsilon);
  let results = (outs AnyTensor:$Y);
}

//===----------------------------------------------------------------------===//
// Activations and elementwise math
//===----------------------------------------------------------------------===//

def Onnx_ReluOp : Onnx_UnaryOp<"Relu"> { let summary = "max(x, 0)"; }
def Onnx_SigmoidOp : Onnx_UnaryOp<"Sigmoid"> { let summary = "1 / (1 + exp(-x))"; }
def Onnx_TanhOp : Onnx_UnaryOp<"Tanh"> { let summary = "tanh(x)"; }
def Onnx_ErfOp : Onnx_UnaryOp<"Erf"> { let summary = "error function"; }
def Onnx_SqrtOp : Onnx_UnaryOp<"Sqrt"> { let summary = "square root"; }
def Onnx_ExpOp : Onnx_UnaryOp<"Exp"> { let summary = "exp(x)"; }
def Onnx_LogOp : Onnx_UnaryOp<"Log"> { let summary = "natural logarithm"; }
def Onnx_NegOp : Onnx_UnaryOp<"Neg"> { let summary = "-x"; }
def Onnx_AbsOp : Onnx_UnaryOp<"Abs"> { let summary = "|x|"; }
def Onnx_ReciprocalOp : Onnx_UnaryOp<"Reciprocal"> { let summary = "1 / x"; }
def Onnx_HardSwishOp : Onnx_UnaryOp<"HardSwish"> {
  let summary = "x * max(0, min(1, x / 6 + 1 / 2))";
}

def Onnx_LeakyReluOp : Onnx_UnaryOp<"LeakyRelu"> {
  let summary = "x if x >= 0 else alpha * x";
  let arguments = (ins AnyTensor:$X,
                   DefaultValuedAttr<F32Attr, "0.01">:$alpha);
}

def Onnx_HardSigmoidOp : Onnx_UnaryOp<"HardSigmoid"> {
  let summary = "max(0, min(1, alpha * x + beta))";
  let arguments = (ins AnyTensor:$X,
                   DefaultValuedAttr<F32Attr, "0.2">:$alpha,
                   DefaultValuedAttr<F32Attr, "0.5">:$beta);
}

def Onnx_ClipOp : Onnx_UnaryOp<"Clip"> {
  let summary = "clamp to [min, max]; absent bounds are unbounded";
  let description = [{
    Opset 6 attributes and opset 11+ inputs are both normalized to the `min`
    and `max` attributes (bounds must be constants).
  }];
  let arguments = (ins AnyTensor:$X, OptionalAttr<F32Attr>:$min,
                   OptionalAttr<F32Attr>:$max);
}

def Onnx_SoftmaxOp : Onnx_UnaryOp<"Softmax"> {
  let summary = "softmax along one axis (opset 13 semantics)";
  let description = [{
    Before opset 13 Softmax coerced its input to 2-D at `axis`; the importer
    rewrites such nodes to Reshape + Softmax + Reshape when the two meanings
    differ, so this op always has the opset-13 single-axis meaning.
  }];
  let arguments = (ins AnyTensor:$X, DefaultValuedAttr<I64Attr, "-1">:$axis);
  let hasVerifier = 1;
}

def Onnx_FloorOp : Onnx_UnaryOp<"Floor"> { let summary = "floor(x)"; }
def Onnx_CeilOp : Onnx_UnaryOp<"Ceil"> { let summary = "ceil(x)"; }
def Onnx_RoundOp : Onnx_UnaryOp<"Round"> {
  let summary = "round half to even";
}
def Onnx_SignOp : Onnx_UnaryOp<"Sign"> { let summary = "-1, 0 or 1"; }
def Onnx_NotOp : Onnx_UnaryOp<"Not"> { let summary = "logical not"; }
def Onnx_SoftplusOp : Onnx_UnaryOp<"Softplus"> {
  let summary = "log(exp(x) + 1)";
}
def Onnx_EluOp : Onnx_UnaryOp<"Elu"> {
  let summary = "x if x >= 0 else alpha * (exp(x) - 1)";
  let arguments = (ins AnyTensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
}

//===----------------------------------------------------------------------===//
// Scalar math: one definition each (Onnx_ScalarMathOpInterface)
//===----------------------------------------------------------------------===//

/// A float elementwise op defined by one scalar function. `reference` is the
/// body of a C++ function of `x` (of type `T`, float or double) returning a
/// `T`: the reference evaluator's semantics, written as the ONNX spec reads.
/// `emit` is the body of a function returning the f32 result for `x` (a
/// scalar or a vector) built with `m`, a qatc::onnx::ScalarMathBuilder.
/// Attributes are read through the op's getters in both. The importer, the
/// reference evaluator, the map layer and the epilogue fusion of code
/// generation find the op through the interface; nothing else names it.
class Onnx_MathOp<string mnemonic, list<Trait> traits = []>
    : Onnx_Op<mnemonic, traits # [Pure, InferTypeOpAdaptor,
        DeclareOpInterfaceMethods<Onnx_ScalarMathOpInterface>]> {
  let arguments = (ins AnyTensor:$X);
  let results = (outs AnyTensor:$Y);
  code reference = ?;
  code emit = ?;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location>,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      types.push_back(adaptor.getX().getType());
      return ::mlir::success();
    }
    float $cppClass::evalF32(float x) {
      using T = float;
      }] # reference # [{
    }
    double $cppClass::evalF64(double x) {
      using T = double;
      }] # reference # [{
    }
    ::mlir::Value $cppClass::emitF32(::mlir::OpBuilder &b,
                                     ::mlir::Location loc, ::mlir::Value x) {
      ::qatc::onnx::ScalarMathBuilder m(b, loc, x);
      }] # emit # [{
    }
  }];
}

def Onnx_CosOp : Onnx_MathOp<"Cos"> {
  let summary = "cos(x)";
  let reference = [{ return std::cos(x); }];
  let emit = [{ return m.cos(x); }];
}
def Onnx_SinOp : Onnx_MathOp<"Sin"> {
  let summary = "sin(x)";
  let reference = [{ return std::sin(x); }];
  let emit = [{ return m.sin(x); }];
}
def Onnx_TanOp : Onnx_MathOp<"Tan"> {
  let summary = "tan(x)";
  let reference = [{ return std::tan(x); }];
  let emit = [{ return m.div(m.sin(x), m.cos(x)); }];
}
def Onnx_AcosOp : Onnx_MathOp<"Acos"> {
  let summary = "arccos(x)";
  let reference = [{ return std::acos(x); }];
  // 2 atan(sqrt((1 - x) / (1 + x))): MLIR's acos polynomial is off by up to
  // 3 % near |x| = 1; atan is accurate to a few ulp.
  let emit = [{
    return m.mul(m.c(2), m.atan(m.sqrt(m.div(m.sub(m.c(1), x),
                                             m.add(m.c(1), x)))));
  }];
}
def Onnx_AsinOp : Onnx_MathOp<"Asin"> {
  let summary = "arcsin(x)";
  let reference = [{ return std::asin(x); }];
  // atan(x / sqrt((1 - x)(1 + x))), for the reason given at Acos.
  let emit = [{
    return m.atan(
        m.div(x, m.sqrt(m.mul(m.sub(m.c(1), x), m.add(m.c(1), x)))));
  }];
}
def Onnx_AtanOp : Onnx_MathOp<"Atan"> {
  let summary = "arctan(x)";
  let reference = [{ return std::atan(x); }];
  let emit = [{ return m.atan(x); }];
}
def Onnx_SinhOp : Onnx_MathOp<"Sinh"> {
  let summary = "sinh(x)";
  let reference = [{ return std::sinh(x); }];
  // (e^x - e^-x) / 2
  let emit = [{
    return m.mul(m.sub(m.exp(x), m.exp(m.neg(x))), m.c(0.5));
  }];
}
def Onnx_CoshOp : Onnx_MathOp<"Cosh"> {
  let summary = "cosh(x)";
  let reference = [{ return std::cosh(x); }];
  let emit = [{
    return m.mul(m.add(m.exp(x), m.exp(m.neg(x))), m.c(0.5));
  }];
}
def Onnx_AsinhOp : Onnx_MathOp<"Asinh"> {
  let summary = "arsinh(x)";
  let reference = [{ return std::asinh(x); }];
  // sign(x) * log(|x| + sqrt(x^2 + 1)): no cancellation for x < 0.
  let emit = [{
    ::mlir::Value a = m.abs(x);
    ::mlir::Value r =
        m.log(m.add(a, m.sqrt(m.add(m.mul(a, a), m.c(1)))));
    return m.select(m.lt(x, m.c(0)), m.neg(r), r);
  }];
}
def Onnx_AcoshOp : Onnx_MathOp<"Acosh"> {
  let summary = "arcosh(x)";
  let reference = [{ return std::acosh(x); }];
  // log(x + sqrt(x^2 - 1)); NaN below 1 as the reference.
  let emit = [{
    return m.log(m.add(x, m.sqrt(m.sub(m.mul(x, x), m.c(1)))));
  }];
}
def Onnx_AtanhOp : Onnx_MathOp<"Atanh"> {
  let summary = "artanh(x)";
  let reference = [{ return std::atanh(x); }];
  // log((1 + x) / (1 - x)) / 2
  let emit = [{
    return m.mul(m.log(m.div(m.add(m.c(1), x), m.sub(m.c(1), x))),
                 m.c(0.5));
  }];
}
def Onnx_SoftsignOp : Onnx_MathOp<"Softsign"> {
  let summary = "x / (1 + |x|)";
  let reference = [{ return x / (T(1) + std::abs(x)); }];
  let emit = [{ return m.div(x, m.add(m.c(1), m.abs(x))); }];
}
def Onnx_SeluOp : Onnx_MathOp<"Selu"> {
  let summary = "gamma * (x if x > 0 else alpha * exp(x) - alpha)";
  let arguments = (ins AnyTensor:$X,
      DefaultValuedAttr<F32Attr, "1.67326319217681884765625">:$alpha,
      DefaultValuedAttr<F32Attr, "1.05070102214813232421875">:$gamma);
  let reference = [{
    T alpha = T(getAlpha().convertToFloat());
    T gamma = T(getGamma().convertToFloat());
    return x > T(0) ? gamma * x : gamma * (alpha * std::exp(x) - alpha);
  }];
  let emit = [{
    ::mlir::Value alpha = m.c(getAlpha().convertToFloat());
    ::mlir::Value gamma = m.c(getGamma().convertToFloat());
    ::mlir::Value neg = m.mul(gamma, m.sub(m.mul(alpha, m.exp(x)), alpha));
    return m.select(m.gt(x, m.c(0)), m.mul(gamma, x), neg);
  }];
}
def Onnx_CeluOp : Onnx_MathOp<"Celu"> {
  let summary = "max(0, x) + min(0, alpha * (exp(x / alpha) - 1))";
  let arguments = (ins AnyTensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
  let reference = [{
    T alpha = T(getAlpha().convertToFloat());
    return std::max(T(0), x) +
           std::min(T(0), alpha * (std::exp(x / alpha) - T(1)));
  }];
  let emit = [{
    ::mlir::Value alpha = m.c(getAlpha().convertToFloat());
    ::mlir::Value e = m.mul(alpha, m.sub(m.exp(m.div(x, alpha)), m.c(1)));
    return m.add(m.max(m.c(0), x), m.min(m.c(0), e));
  }];
}
def Onnx_ThresholdedReluOp : Onnx_MathOp<"ThresholdedRelu"> {
  let summary = "x if x > alpha else 0";
  let arguments = (ins AnyTensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
  let reference = [{
    return x > T(getAlpha().convertToFloat()) ? x : T(0);
  }];
  let emit = [{
    return m.select(m.gt(x, m.c(getAlpha().convertToFloat())), x, m.c(0));
  }];
}
def Onnx_ShrinkOp : Onnx_MathOp<"Shrink"> {
  let summary = "x + bias if x < -lambd, x - bias if x > lambd, else 0";
  let arguments = (ins AnyTensor:$X, DefaultValuedAttr<F32Attr, "0.0">:$bias,
                       DefaultValuedAttr<F32Attr, "0.5">:$lambd);
  let reference = [{
    T bias = T(getBias().convertToFloat());
    T lambd = T(getLambd().convertToFloat());
    return x < -lambd ? x + bias : x > lambd ? x - bias : T(0);
  }];
  let emit = [{
    ::mlir::Value bias = m.c(getBias().convertToFloat());
    ::mlir::Value lambd = m.c(getLambd().convertToFloat());
    return m.select(m.lt(x, m.neg(lambd)), m.add(x, bias),
                    m.select(m.gt(x, lambd), m.sub(x, bias), m.c(0)));
  }];
}

def Onnx_LogSoftmaxOp : Onnx_UnaryOp<"LogSoftmax"> {
  let summary = "log of softmax along one axis (opset 13 semantics)";
  let description = [{
    Normalized like Softmax: older nodes that coerced their input to 2-D
    become Reshape + LogSoftmax + Reshape.
  }];
  let arguments = (ins AnyTensor:$X, DefaultValuedAttr<I64Attr, "-1">:$axis);
  let hasVerifier = 1;
}

def Onnx_AddOp : Onnx_BinaryOp<"Add"> { let summary = "A + B"; }
def Onnx_SubOp : Onnx_BinaryOp<"Sub"> { let summary = "A - B"; }
def Onnx_MulOp : Onnx_BinaryOp<"Mul"> { let summary = "A * B"; }
def Onnx_DivOp : Onnx_BinaryOp<"Div"> { let summary = "A / B"; }

def Onnx_MaxOp : Onnx_BroadcastOp<"Max"> {
  let summary = "max(A, B) (variadic Max becomes a chain)";
}
def Onnx_MinOp : Onnx_BroadcastOp<"Min"> {
  let summary = "min(A, B) (variadic Min becomes a chain)";
}
def Onnx_ModOp : Onnx_BroadcastOp<"Mod"> {
  let summary = "remainder: fmod when `fmod`, else with the divisor's sign";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B,
                   DefaultValuedAttr<I64Attr, "0">:$fmod);
}
def Onnx_BitShiftOp : Onnx_BroadcastOp<"BitShift"> {
  let summary = "A << B or A >> B on unsigned integers, with broadcasting";
  let description = [{
    `direction` is "LEFT" or "RIGHT". Bits shifted out of the type are lost;
    a shift by the type's width or more gives 0.
  }];
  let arguments = (ins AnyTensor:$A, AnyTensor:$B, StrAttr:$direction);
}
def Onnx_PReluOp : Onnx_BroadcastOp<"PRelu"> {
  let summary = "x if x >= 0 else slope * x (slope broadcast to x)";
}
def Onnx_AndOp : Onnx_BroadcastOp<"And"> { let summary = "logical and"; }
def Onnx_OrOp : Onnx_BroadcastOp<"Or"> { let summary = "logical or"; }
def Onnx_XorOp : Onnx_BroadcastOp<"Xor"> { let summary = "logical xor"; }
def Onnx_EqualOp : Onnx_CompareOp<"Equal"> { let summary = "A == B"; }
def Onnx_LessOp : Onnx_CompareOp<"Less"> { let summary = "A < B"; }
def Onnx_LessOrEqualOp : Onnx_CompareOp<"LessOrEqual"> {
  let summary = "A <= B";
}
def Onnx_GreaterOp : Onnx_CompareOp<"Greater"> { let summary = "A > B"; }
def Onnx_GreaterOrEqualOp : Onnx_CompareOp<"GreaterOrEqual"> {
  let summary = "A >= B";
}

def Onnx_WhereOp : Onnx_InferredOp<"Where"> {
  let summary = "condition ? X : Y with three-way broadcasting";
  let arguments = (ins AnyTensor:$condition, AnyTensor:$X, AnyTensor:$Y);
  let results = (outs AnyTensor:$output);
}

def Onnx_PowOp : Onnx_InferredOp<"Pow"> {
  let summary = "X ^ Y with broadcasting; the result has X's element type";
  let arguments = (ins AnyTensor:$X, AnyTensor:$Y);
  let results = (outs AnyTensor:$Z);
}

//===----------------------------------------------------------------------===//
// Pooling and reductions
//===----------------------------------------------------------------------===//

def Onnx_MaxPoolOp : Onnx_InferredOp<"MaxPool"> {
  let summary = "max pooling (the Indices output is not supported)";
  let arguments = (ins AnyTensor:$X, DenseI64ArrayAttr:$kernel_shape,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<I64Attr, "0">:$ceil_mode);
  let results = (outs AnyTensor:$Y);
}

def Onnx_AveragePoolOp : Onnx_InferredOp<"AveragePool"> {
  let summary = "average pooling";
  let arguments = (ins AnyTensor:$X, DenseI64ArrayAttr:$kernel_shape,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                   DefaultValuedAttr<I64Attr, "0">:$count_include_pad);
  let results = (outs AnyTensor:$Y);
}

def Onnx_GlobalAveragePoolOp : Onnx_InferredOp<"GlobalAveragePool"> {
  let summary = "mean over all spatial dimensions";
  let arguments = (ins AnyTensor:$X);
  let results = (outs AnyTensor:$Y);
}

def Onnx_GlobalMaxPoolOp : Onnx_InferredOp<"GlobalMaxPool"> {
  let summary = "max over all spatial dimensions";
  let arguments = (ins AnyTensor:$X);
  let results = (outs AnyTensor:$Y);
}

def Onnx_ReduceMeanOp : Onnx_ReduceOp<"ReduceMean"> {
  let summary = "mean over `axes`";
}
def Onnx_ReduceSumOp : Onnx_ReduceOp<"ReduceSum"> {
  let summary = "sum over `axes`";
}
def Onnx_ReduceMaxOp : Onnx_ReduceOp<"ReduceMax"> {
  let summary = "max over `axes`";
}
def Onnx_ReduceMinOp : Onnx_ReduceOp<"ReduceMin"> {
  let summary = "min over `axes`";
}
def Onnx_ReduceProdOp : Onnx_ReduceOp<"ReduceProd"> {
  let summary = "product over `axes`";
}
def Onnx_ReduceL1Op : Onnx_ReduceOp<"ReduceL1"> {
  let summary = "sum of |x| over `axes`";
}
def Onnx_ReduceL2Op : Onnx_ReduceOp<"ReduceL2"> {
  let summary = "sqrt of the sum of x^2 over `axes`";
}
def Onnx_ReduceSumSquareOp : Onnx_ReduceOp<"ReduceSumSquare"> {
  let summary = "sum of x^2 over `axes`";
}

def Onnx_ArgMaxOp : Onnx_InferredOp<"ArgMax"> {
  let summary = "int64 index of the largest element along `axis`";
  let arguments = (ins AnyTensor:$data, I64Attr:$axis,
                   DefaultValuedAttr<I64Attr, "1">:$keepdims,
                   DefaultValuedAttr<I64Attr, "0">:$select_last_index);
  let results = (outs AnyTensor:$reduced);
}
def Onnx_ArgMinOp : Onnx_InferredOp<"ArgMin"> {
  let summary = "int64 index of the smallest element along `axis`";
  let arguments = (ins AnyTensor:$data, I64Attr:$axis,
                   DefaultValuedAttr<I64Attr, "1">:$keepdims,
                   DefaultValuedAttr<I64Attr, "0">:$select_last_index);
  let results = (outs AnyTensor:$reduced);
}

def Onnx_TopKOp : Onnx_InferredOp<"TopK"> {
  let summary = "the `k` largest (or smallest) elements along `axis`";
  let arguments = (ins AnyTensor:$X, I64Attr:$k, I64Attr:$axis,
                   DefaultValuedAttr<I64Attr, "1">:$largest,
                   DefaultValuedAttr<I64Attr, "1">:$sorted);
  let results = (outs AnyTensor:$Values, AnyTensor:$Indices);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Onnx_ConcatOp : Onnx_InferredOp<"Concat"> {
  let summary = "concatenation along a non-negative axis";
  let arguments = (ins Variadic<AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyTensor:$concat_result);
  let hasFolder = 1;
}

def Onnx_SplitOp : Onnx_InferredOp<"Split"> {
  let summary = "split along an axis into pieces of the given sizes";
  let arguments = (ins AnyTensor:$input, I64Attr:$axis,
                   DenseI64ArrayAttr:$split);
  let results = (outs Variadic<AnyTensor>:$outputs);
}

def Onnx_SliceOp : Onnx_InferredOp<"Slice"> {
  let summary = "strided slice with normalized, clamped bounds";
  let description = [{
    `starts`, `ends` and `steps` have one entry per axis of the input: the
    importer expands ONNX's `axes` input, resolves negative indices and clamps
    them exactly as the ONNX reference does, so `ends` can be -1 only for a
    negative step that runs to the start.
  }];
  let arguments = (ins AnyTensor:$data, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$steps);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Onnx_ReshapeOp : Onnx_Op<"Reshape", [Pure]> {
  let summary = "reshape; the target shape is the result type";
  let arguments = (ins AnyTensor:$data);
  let results = (outs AnyTensor:$reshaped);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Onnx_FlattenOp : Onnx_InferredOp<"Flatten"> {
  let summary = "reshape to 2-D at `axis`";
  let arguments = (ins AnyTensor:$input, DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs AnyTensor:$output);
}

def Onnx_TransposeOp : Onnx_InferredOp<"Transpose"> {
  let summary = "permute dimensions";
  let arguments = (ins AnyTensor:$data, DenseI64ArrayAttr:$perm);
  let results = (outs AnyTensor:$transposed);
}

def Onnx_SqueezeOp : Onnx_InferredOp<"Squeeze"> {
  let summary = "remove size-1 axes (non-negative, sorted)";
  let arguments = (ins AnyTensor:$data, DenseI64ArrayAttr:$axes);
  let results = (outs AnyTensor:$squeezed);
  let hasFolder = 1;
}

def Onnx_UnsqueezeOp : Onnx_InferredOp<"Unsqueeze"> {
  let summary = "insert size-1 axes (non-negative positions in the output)";
  let arguments = (ins AnyTensor:$data, DenseI64ArrayAttr:$axes);
  let results = (outs AnyTensor:$expanded);
  let hasFolder = 1;
}

def Onnx_GatherOp : Onnx_InferredOp<"Gather"> {
  let summary = "gather slices of `data` along `axis` at `indices`";
  let arguments = (ins AnyTensor:$data, AnyTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Onnx_GatherElementsOp
    : Onnx_Op<"GatherElements", [Pure, InferTypeOpAdaptor]> {
  let summary = "out[i, j] = data[indices[i, j], j] (axis 0; likewise "
                "along any `axis`, non-negative)";
  let description = [{
    The result has the shape of `indices` (int32 or int64; negative values
    count from the end of the axis) and the element type of `data`; both
    have one rank, and `indices` is no larger than `data` on the other axes.
  }];
  let arguments = (ins AnyTensor:$data, AnyTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AnyTensor:$output);
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      auto data = ::llvm::dyn_cast<::mlir::RankedTensorType>(
          adaptor.getData().getType());
      auto idx = ::llvm::dyn_cast<::mlir::RankedTensorType>(
          adaptor.getIndices().getType());
      if (!data || !idx)
        return ::mlir::emitOptionalError(loc, "GatherElements needs ranked "
                                              "data and indices");
      int64_t axis = adaptor.getAxis();
      if (data.getRank() != idx.getRank() || axis < 0 ||
          axis >= data.getRank())
        return ::mlir::emitOptionalError(
            loc, "GatherElements needs data and indices of one rank and an "
                 "axis in [0, rank); data is ", data, ", indices ", idx,
            ", axis ", axis);
      for (int64_t d = 0; d < data.getRank(); ++d)
        if (d != axis && idx.getDimSize(d) > data.getDimSize(d))
          return ::mlir::emitOptionalError(
              loc, "GatherElements indices are larger than the data on axis ",
              d, ": ", idx, " and ", data);
      types.push_back(::mlir::RankedTensorType::get(idx.getShape(),
                                                    data.getElementType()));
      return ::mlir::success();
    }
  }];
}

def Onnx_ExpandOp : Onnx_Op<"Expand", [Pure]> {
  let summary = "broadcast to a shape; the target shape is the result type";
  let arguments = (ins AnyTensor:$input);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def Onnx_TileOp : Onnx_InferredOp<"Tile"> {
  let summary = "repeat the input `repeats[i]` times along axis i";
  let arguments = (ins AnyTensor:$input, DenseI64ArrayAttr:$repeats);
  let results = (outs AnyTensor:$output);
}

def Onnx_DepthToSpaceOp : Onnx_InferredOp<"DepthToSpace"> {
  let summary = "move channel blocks into spatial blocks (DCR or CRD order)";
  let arguments = (ins AnyTensor:$input, I64Attr:$blocksize,
                   DefaultValuedAttr<StrAttr, "\"DCR\"">:$mode);
  let results = (outs AnyTensor:$output);
}

def Onnx_SpaceToDepthOp : Onnx_InferredOp<"SpaceToDepth"> {
  let summary = "move spatial blocks into channels";
  let arguments = (ins AnyTensor:$input, I64Attr:$blocksize);
  let results = (outs AnyTensor:$output);
}

def Onnx_PadOp : Onnx_InferredOp<"Pad"> {
  let summary = "pad with `pads` = [begin_0.., end_0..] over every axis";
  let arguments = (ins AnyTensor:$data, DenseI64ArrayAttr:$pads,
                   DefaultValuedAttr<StrAttr, "\"constant\"">:$mode,
                   DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs AnyTensor:$output);
}

def Onnx_ResizeOp : Onnx_Op<"Resize", [Pure]> {
  let summary = "resize; the output size is the result type";
  let description = [{
    Opset 10 and 11+ inputs (`scales` or `sizes`) are folded into the static
    result type; `scales` keeps the per-axis scale factors because they, not
    the rounded output size, define the coordinate mapping.
  }];
  let arguments = (ins AnyTensor:$X, DenseF32ArrayAttr:$scales,
                   DefaultValuedAttr<StrAttr, "\"nearest\"">:$mode,
                   DefaultValuedAttr<StrAttr, "\"half_pixel\"">:$coordinate_transformation_mode,
                   DefaultValuedAttr<StrAttr, "\"round_prefer_floor\"">:$nearest_mode,
                   DefaultValuedAttr<F32Attr, "-0.75">:$cubic_coeff_a,
                   DefaultValuedAttr<I64Attr, "0">:$exclude_outside,
                   DefaultValuedAttr<F32Attr, "0.0">:$extrapolation_value);
  let results = (outs AnyTensor:$Y);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Ops qatc does not model
//===----------------------------------------------------------------------===//

def Onnx_UnsupportedOp : Onnx_Op<"Unsupported"> {
  let summary = "an ONNX node qatc does not support";
  let description = [{
    Keeps a node the importer has no op for (its `op_type`, `domain` and
    attributes) so that one import can list every unsupported node. Result
    types come from the model's value_info when it has them, else they are
    unranked. Nothing lowers this op; `qatc` reports all of them at once.
  }];
  let arguments = (ins Variadic<AnyTensor>:$inputs, StrAttr:$op_type,
                   StrAttr:$domain, DictionaryAttr:$onnx_attributes);
  let results = (outs Variadic<AnyTensor>:$outputs);
}

#endif // QATC_DIALECT_ONNX_ONNXOPS_TD
