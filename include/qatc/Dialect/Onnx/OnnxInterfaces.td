//===- OnnxInterfaces.td - interfaces of onnx ops ----------*- tablegen -*-===//
//
// Interfaces through which the reference evaluator, the importer and code
// generation handle a family of ops without a case per op.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_DIALECT_ONNX_ONNXINTERFACES_TD
#define QATC_DIALECT_ONNX_ONNXINTERFACES_TD

include "mlir/IR/OpBase.td"

def Onnx_ScalarMathOpInterface : OpInterface<"ScalarMathOpInterface"> {
  let cppNamespace = "::qatc::onnx";
  let description = [{
    A float elementwise op whose whole meaning is one scalar function of
    its input element and its attributes (Cos, Selu, Softsign, ...). The op
    states that function twice, side by side in its TableGen definition:
    once in C++ for the reference evaluator (in the element's own type) and
    once as arith/math IR for code generation (f32 scalars and vectors).

    Such an op is imported, evaluated, lowered to a map layer and fused
    into a producer's epilogue through this interface alone: adding one is
    one definition in OnnxOps.td (docs/AddingAnOp.md).
  }];
  let methods = [
    InterfaceMethod<"The reference result for one f32 element.", "float",
                    "evalF32", (ins "float":$x)>,
    InterfaceMethod<"The reference result for one f64 element.", "double",
                    "evalF64", (ins "double":$x)>,
    InterfaceMethod<[{
        Builds the f32 result for `x` (an f32 scalar or a vector of f32)
        with arith and math ops at `loc`.
      }], "::mlir::Value", "emitF32",
      (ins "::mlir::OpBuilder &":$b, "::mlir::Location":$loc,
           "::mlir::Value":$x)>,
  ];
}

#endif // QATC_DIALECT_ONNX_ONNXINTERFACES_TD
