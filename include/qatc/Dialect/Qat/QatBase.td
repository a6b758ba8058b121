//===- QatBase.td - the qat dialect, its attributes and interface -*- tablegen -*-===//
//
// The `qat` dialect holds quantized compute on tensors whose element types
// are upstream `!quant.uniform` types (per tensor or per axis). This file
// declares the dialect, its attributes (clamp ranges, rounding modes), the
// type constraints its ops use, and the interface through which every int8 op
// states how its quantization parameters relate to its operands.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_DIALECT_QAT_QATBASE_TD
#define QATC_DIALECT_QAT_QATBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def Qat_Dialect : Dialect {
  let name = "qat";
  let cppNamespace = "::qatc::qat";
  let summary = "int8 compute on !quant.uniform tensors";
  let description = [{
    The quantized form of a Q/DQ graph. Every op that computes in integers
    carries, in its operand and result types, the scales and zero points a
    kernel needs, and in its attributes the fused epilogue (per-channel
    scale and bias, clamps, residual add, rounding). Saturation bounds are
    the storage range of the result's quantized type (`i8`, `i8<-127:127>`,
    `u8`), so they are explicit in the IR too. Locations keep the ONNX node
    names of every node a fused op absorbed.
  }];
  let dependentDialects = ["::mlir::quant::QuantizationDialect"];
  let useDefaultAttributePrinterParser = 1;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Qat_RoundingMode : I32EnumAttr<"RoundingMode",
    "how a real value is rounded to the integer grid", [
      I32EnumAttrCase<"HalfToEven", 0, "half_to_even">,
      I32EnumAttrCase<"HalfAwayFromZero", 1, "half_away_from_zero">
    ]> {
  let cppNamespace = "::qatc::qat";
  let genSpecializedAttr = 0;
}

def Qat_RoundingAttr : EnumAttr<Qat_Dialect, Qat_RoundingMode, "rounding"> {
  let summary = "rounding mode (ONNX QuantizeLinear rounds half to even)";
  let assemblyFormat = "`<` $value `>`";
}

def Qat_ClampAttr : AttrDef<Qat_Dialect, "Clamp"> {
  let mnemonic = "clamp";
  let summary = "a real-valued clamp [min, max] (Relu, Clip) in an epilogue";
  let description = [{
    `#qat.clamp<relu>` is [0, +inf]; `#qat.clamp<0.0, 6.0>` is Clip(0, 6);
    `none` marks an absent bound (`#qat.clamp<none, 6.0>`). Applied to the float value of the
    epilogue, before requantization: exact, since quantization is monotone.
  }];
  let parameters = (ins "::llvm::APFloat":$lo, "::llvm::APFloat":$hi);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    /// The bounds as doubles (infinite when absent).
    double getMin() const;
    double getMax() const;
    static ClampAttr get(::mlir::MLIRContext *ctx, double min, double max);
    /// Relu's clamp.
    static ClampAttr getRelu(::mlir::MLIRContext *ctx);
    bool isRelu() const;
    /// Applies the clamp to `v`.
    template <typename T> T apply(T v) const {
      T lo = static_cast<T>(getMin()), hi = static_cast<T>(getMax());
      return v < lo ? lo : (v > hi ? hi : v);
    }
  }];
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Qat_IsQuantElement : CPred<
    "::llvm::isa<::mlir::quant::UniformQuantizedType, "
    "::mlir::quant::UniformQuantizedPerAxisType>($_self)">;
def Qat_IsPerTensorElement :
    CPred<"::llvm::isa<::mlir::quant::UniformQuantizedType>($_self)">;

def Qat_QuantElement : Type<Qat_IsQuantElement,
    "!quant.uniform (per tensor or per axis)">;
def Qat_PerTensorElement : Type<Qat_IsPerTensorElement,
    "per-tensor !quant.uniform">;

def Qat_QuantTensor : RankedTensorOf<[Qat_QuantElement]>;
def Qat_PerTensorQuantTensor : RankedTensorOf<[Qat_PerTensorElement]>;
def Qat_FloatTensor : RankedTensorOf<[F32]>;
/// The result of an int8 op: quantized (requantizing epilogue) or f32 (the
/// epilogue stops before quantization because the consumer needs float).
def Qat_QuantOrFloatTensor : RankedTensorOf<[Qat_PerTensorElement, F32]>;

//===----------------------------------------------------------------------===//
// The quantized-op interface
//===----------------------------------------------------------------------===//

def Qat_QuantizedOpInterface : OpInterface<"QuantizedOpInterface"> {
  let cppNamespace = "::qatc::qat";
  let description = [{
    How an op's quantization parameters are constrained, so passes and the
    lowering reason about every int8 op the same way:

    - `SameScale` ops (data movement, max pooling, concat, clamp) select or
      copy integer values: every quantized operand and result has the same
      `!quant.uniform` element type.
    - `Rescale` ops compute new values; their epilogue requantizes from the
      accumulator to the result's own scale (or stops at f32).

    Ops with weights name the per-axis weight operand and the only axis it
    may be quantized along (the output channel; a reduction axis cannot be
    factored out of the integer sum), and the accumulator scales
    `s_in * s_w[c]` at which an integer bias would have to be expressed.
  }];
  let methods = [
    InterfaceMethod<"How the result's quantization relates to the operands.",
      "::qatc::qat::ScaleRelation", "getScaleRelation">,
    InterfaceMethod<"Index of the weight operand (a per-axis or per-tensor "
      "quantized constant), if the op has one.",
      "std::optional<unsigned>", "getWeightOperandIndex", (ins), "",
      "return std::nullopt;">,
    InterfaceMethod<"The weight axis per-axis scales may run along.",
      "int64_t", "getWeightChannelAxis", (ins), "", "return 0;">,
    InterfaceMethod<"Index of the f32 bias operand, if present.",
      "std::optional<unsigned>", "getBiasOperandIndex", (ins), "",
      "return std::nullopt;">,
  ];
  let verify = [{ return ::qatc::qat::verifyQuantizedOp($_op); }];
}

#endif // QATC_DIALECT_QAT_QATBASE_TD
