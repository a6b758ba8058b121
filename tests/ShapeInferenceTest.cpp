//===- ShapeInferenceTest.cpp - onnx dialect shape inference --------------===//

#include "qatc/Dialect/Onnx/OnnxOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace qatc::onnx;

TEST(ShapeInference, Broadcasting) {
  auto s = broadcastShapes({2, 1, 4}, {3, 1});
  ASSERT_TRUE(succeeded(s));
  EXPECT_EQ(*s, (SmallVector<int64_t>{2, 3, 4}));
  EXPECT_TRUE(succeeded(broadcastShapes({}, {5})));
  EXPECT_TRUE(failed(broadcastShapes({2, 3}, {2})));
}

namespace {
/// Infers MaxPool's result over a [1,1,n,n] input.
FailureOr<SmallVector<int64_t>> poolShape(int64_t n, int64_t k, int64_t s,
                                          int64_t pad, bool ceil) {
  MLIRContext ctx;
  ctx.loadDialect<OnnxDialect, func::FuncDialect>();
  OpBuilder b(&ctx);
  auto type = RankedTensorType::get({1, 1, n, n}, b.getF32Type());
  auto func = b.create<func::FuncOp>(b.getUnknownLoc(), "f",
                                     b.getFunctionType({type}, {}));
  Block *block = func.addEntryBlock();
  SmallVector<NamedAttribute> attrs{
      b.getNamedAttr("kernel_shape", b.getDenseI64ArrayAttr({k, k})),
      b.getNamedAttr("strides", b.getDenseI64ArrayAttr({s, s})),
      b.getNamedAttr("pads", b.getDenseI64ArrayAttr({pad, pad, pad, pad})),
      b.getNamedAttr("dilations", b.getDenseI64ArrayAttr({1, 1})),
      b.getNamedAttr("ceil_mode", b.getI64IntegerAttr(ceil))};
  SmallVector<Type> types;
  LogicalResult r = MaxPoolOp::inferReturnTypes(
      &ctx, std::nullopt, ValueRange{block->getArgument(0)},
      b.getDictionaryAttr(attrs), nullptr, {}, types);
  func->erase();
  if (failed(r))
    return failure();
  return SmallVector<int64_t>(cast<RankedTensorType>(types[0]).getShape());
}
} // namespace

TEST(ShapeInference, PoolingCeilMode) {
  // floor((112 - 3) / 2) + 1 = 55; ceil mode gives 56 (squeezenet's pools).
  EXPECT_EQ((*poolShape(112, 3, 2, 0, false))[2], 55);
  EXPECT_EQ((*poolShape(112, 3, 2, 0, true))[2], 56);
  // Input 5 with pads 1+1, k=2, s=2: ceil mode would add a 4th window that
  // starts in the trailing padding; it is dropped, as in PyTorch and ONNX
  // Runtime. With input 6 the 4th window starts inside the input.
  EXPECT_EQ((*poolShape(5, 2, 2, 1, true))[2], 3);
  EXPECT_EQ((*poolShape(6, 2, 2, 1, true))[2], 4);
  EXPECT_TRUE(failed(poolShape(2, 3, 1, 0, false)));
}
