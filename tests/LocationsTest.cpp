//===- LocationsTest.cpp - ONNX locations and the diagnostic renderer -----===//

#include "qatc/Support/Locations.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace qatc;

TEST(Locations, NodeLocationRoundTrips) {
  MLIRContext ctx;
  Location loc = makeNodeLoc(&ctx, "resnet18.onnx",
                             "/layer1/layer1.0/conv1/Conv", 17, "Conv");
  auto infos = getOnnxLocInfos(loc);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].file, "resnet18.onnx");
  EXPECT_EQ(infos[0].name, "/layer1/layer1.0/conv1/Conv");
  EXPECT_EQ(infos[0].kind, "Conv");
  EXPECT_EQ(infos[0].index, 17);
  EXPECT_EQ(renderLocation(loc),
            "resnet18.onnx: node \"/layer1/layer1.0/conv1/Conv\" (#17, Conv)");
}

TEST(Locations, TensorsAndFiles) {
  MLIRContext ctx;
  EXPECT_EQ(
      renderLocation(makeTensorLoc(&ctx, "m.onnx", "w", kInitializerKind)),
      "m.onnx: initializer \"w\"");
  EXPECT_EQ(renderLocation(makeTensorLoc(&ctx, "m.onnx", "x", kGraphInputKind)),
            "m.onnx: graph input \"x\"");
  EXPECT_EQ(
      getOnnxLocInfos(makeTensorLoc(&ctx, "m.onnx", "x", kGraphInputKind))[0]
          .index,
      -1);
  EXPECT_EQ(renderLocation(makeFileLoc(&ctx, "m.onnx")), "m.onnx");
  EXPECT_EQ(renderLocation(FileLineColLoc::get(&ctx, "a.mlir", 3, 7)),
            "a.mlir:3:7");
}

TEST(Locations, FusedLocationsListEveryNode) {
  MLIRContext ctx;
  Location conv = makeNodeLoc(&ctx, "m.onnx", "conv", 3, "Conv");
  Location q = makeNodeLoc(&ctx, "m.onnx", "q", 5, "QuantizeLinear");
  Location fused = FusedLoc::get(&ctx, {conv, q});
  auto infos = getOnnxLocInfos(fused);
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[1].name, "q");
  // Locations a pass invents wrap the original one.
  Location invented =
      FusedLoc::get(&ctx, {conv}, StringAttr::get(&ctx, "qat-qdq-propagate"));
  EXPECT_EQ(renderLocation(invented), "m.onnx: node \"conv\" (#3, Conv)");

  std::string out;
  llvm::raw_string_ostream os(out);
  {
    OnnxDiagnosticHandler handler(&ctx, os);
    emitError(fused) << "cannot fuse"
                     << " (scale mismatch)";
    EXPECT_EQ(handler.getNumErrors(), 1u);
  }
  EXPECT_EQ(os.str(), "m.onnx: node \"conv\" (#3, Conv): error: cannot fuse "
                      "(scale mismatch)\n"
                      "  note: also from node \"q\" (#5, QuantizeLinear)\n");
}
