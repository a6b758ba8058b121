//===- Kernels.h - reference kernels of the onnx dialect --------*- C++ -*-===//
//
// One function per op family. Each takes the op (for its attributes and
// static result types), the operand tensors and the float type the
// evaluation uses (float32, or float64 in --fp64 mode), and returns the
// result tensors or fails after emitting an error at the op.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_COMPILER_REFERENCE_KERNELS_H
#define QATC_COMPILER_REFERENCE_KERNELS_H

#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Dialect/Qat/QatOps.h"
#include "qatc/Reference/Tensor.h"

namespace qatc::ref {

using Results = mlir::FailureOr<llvm::SmallVector<Tensor, 1>>;

/// Evaluation context.
struct KernelContext {
  /// The type float tensors are computed in (F32, or F64 in fp64 mode).
  DType floatType = DType::F32;
};

/// The evaluator dtype of an MLIR element type in `ctx` (float types map to
/// ctx.floatType); nullopt for types the evaluator does not handle.
std::optional<DType> toDType(mlir::Type elementType, const KernelContext &ctx);

/// The dtype of the integers a quantized type stores (int8, uint8, int32...).
std::optional<DType> storageDType(mlir::quant::QuantizedType type);

/// Evaluates an op of the qat dialect (QatKernels.cpp).
Results evalQat(mlir::Operation *op, llvm::ArrayRef<Tensor> in,
                const KernelContext &ctx);

/// Calls `fn(T{})` with T = float or double for a float dtype.
template <typename Fn> void dispatchFloat(DType type, Fn &&fn) {
  if (type == DType::F64)
    fn(double());
  else
    fn(float());
}

/// The ops of each kernel file's family (ElementwiseKernels.cpp,
/// MovementKernels.cpp, ConvKernels.cpp): the op's results, or nullopt when
/// `op` is not of the family. A new op's kernel and its line in the
/// dispatch live in the family's file.
std::optional<Results> evalElementwiseFamily(mlir::Operation *op,
                                             llvm::ArrayRef<Tensor> in,
                                             const KernelContext &ctx);
std::optional<Results> evalMovementFamily(mlir::Operation *op,
                                          llvm::ArrayRef<Tensor> in,
                                          const KernelContext &ctx);
std::optional<Results> evalConvFamily(mlir::Operation *op,
                                      llvm::ArrayRef<Tensor> in,
                                      const KernelContext &ctx);

// ElementwiseKernels.cpp
Results evalUnary(mlir::Operation *op, llvm::ArrayRef<Tensor> in,
                  const KernelContext &ctx);
Results evalBinary(mlir::Operation *op, llvm::ArrayRef<Tensor> in,
                   const KernelContext &ctx);
Results evalSoftmax(qatc::onnx::SoftmaxOp op, llvm::ArrayRef<Tensor> in,
                    const KernelContext &ctx);
Results evalBatchNorm(qatc::onnx::BatchNormalizationOp op,
                      llvm::ArrayRef<Tensor> in, const KernelContext &ctx);
Results evalLayerNorm(qatc::onnx::LayerNormalizationOp op,
                      llvm::ArrayRef<Tensor> in, const KernelContext &ctx);
Results evalLogSoftmax(qatc::onnx::LogSoftmaxOp op, llvm::ArrayRef<Tensor> in,
                       const KernelContext &ctx);
Results evalWhere(qatc::onnx::WhereOp op, llvm::ArrayRef<Tensor> in,
                  const KernelContext &ctx);
/// Every Reduce* op (float, or int32/int64 for the integer ones).
Results evalReduce(mlir::Operation *op, llvm::ArrayRef<Tensor> in,
                   const KernelContext &ctx);
/// ArgMax / ArgMin.
Results evalArgReduce(mlir::Operation *op, llvm::ArrayRef<Tensor> in,
                      const KernelContext &ctx);
Results evalTopK(qatc::onnx::TopKOp op, llvm::ArrayRef<Tensor> in,
                 const KernelContext &ctx);
Results evalQuantize(qatc::onnx::QuantizeLinearOp op, llvm::ArrayRef<Tensor> in,
                     const KernelContext &ctx);
Results evalDequantize(qatc::onnx::DequantizeLinearOp op,
                       llvm::ArrayRef<Tensor> in, const KernelContext &ctx);

// ConvKernels.cpp
Results evalConv(qatc::onnx::ConvOp op, llvm::ArrayRef<Tensor> in,
                 const KernelContext &ctx);
Results evalConvTranspose(qatc::onnx::ConvTransposeOp op,
                          llvm::ArrayRef<Tensor> in, const KernelContext &ctx);
Results evalGemm(qatc::onnx::GemmOp op, llvm::ArrayRef<Tensor> in,
                 const KernelContext &ctx);
Results evalMatMul(qatc::onnx::MatMulOp op, llvm::ArrayRef<Tensor> in,
                   const KernelContext &ctx);
Results evalPool(mlir::Operation *op, llvm::ArrayRef<Tensor> in,
                 const KernelContext &ctx);

/// Sliding-window max or average of x [N, C, spatial...] into `outShape`
/// (averages accumulate in double; padding is excluded from the divisor
/// unless `countPad`). The result has x's element type.
Tensor poolWindow(const Tensor &x, llvm::ArrayRef<int64_t> outShape,
                  llvm::ArrayRef<int64_t> kernel,
                  llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> pads,
                  llvm::ArrayRef<int64_t> dilations, bool isMax, bool countPad);

/// Convolution of two float (or double) tensors without bias; in double it
/// is exact for integer-valued inputs of int8 magnitude.
Tensor convolve(const Tensor &x, const Tensor &w,
                llvm::ArrayRef<int64_t> outShape,
                llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> pads,
                llvm::ArrayRef<int64_t> dilations, int64_t group);

/// numpy matmul (batch broadcasting) of two tensors of one float type.
Tensor matmul(const Tensor &a, const Tensor &b,
              llvm::ArrayRef<int64_t> outShape);

// MovementKernels.cpp (Concat, Slice, Transpose and Gather serve the onnx ops
// and their qat twins alike)
template <typename OpTy>
Results evalConcat(OpTy op, llvm::ArrayRef<Tensor> in,
                   const KernelContext &ctx);
Results evalSplit(qatc::onnx::SplitOp op, llvm::ArrayRef<Tensor> in,
                  const KernelContext &ctx);
template <typename OpTy>
Results evalSlice(OpTy op, llvm::ArrayRef<Tensor> in, const KernelContext &ctx);
template <typename OpTy>
Results evalTranspose(OpTy op, llvm::ArrayRef<Tensor> in,
                      const KernelContext &ctx);
template <typename OpTy>
Results evalGather(OpTy op, llvm::ArrayRef<Tensor> in,
                   const KernelContext &ctx);
/// onnx.Pad and its int8 twin qat.pad.
Results evalPad(mlir::Operation *op, llvm::ArrayRef<Tensor> in,
                const KernelContext &ctx);
/// onnx.Resize and its int8 twin qat.resize (nearest: any element type).
Results evalResize(mlir::Operation *op, llvm::ArrayRef<Tensor> in,
                   const KernelContext &ctx);
Results evalExpand(qatc::onnx::ExpandOp op, llvm::ArrayRef<Tensor> in,
                   const KernelContext &ctx);
Results evalTile(qatc::onnx::TileOp op, llvm::ArrayRef<Tensor> in,
                 const KernelContext &ctx);
/// DepthToSpace and SpaceToDepth (a reshape-transpose-reshape each).
Results evalDepthSpace(mlir::Operation *op, llvm::ArrayRef<Tensor> in,
                       const KernelContext &ctx);

/// A single-result success.
inline Results one(Tensor t) {
  llvm::SmallVector<Tensor, 1> r;
  r.push_back(std::move(t));
  return r;
}

/// The static shape of result `i` of `op`.
inline llvm::ArrayRef<int64_t> resultShape(mlir::Operation *op,
                                           unsigned i = 0) {
  return mlir::cast<mlir::RankedTensorType>(op->getResult(i).getType())
      .getShape();
}

} // namespace qatc::ref

#endif // QATC_COMPILER_REFERENCE_KERNELS_H
