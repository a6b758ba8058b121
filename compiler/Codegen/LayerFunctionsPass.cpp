//===- LayerFunctionsPass.cpp - qat-layer-functions -----------------------===//
//
// The graph function after qat-lower becomes the layer functions `qatc
// compile` emits (lowerGraph), so each stage of code generation can be
// printed with qatc-opt.
//
//===----------------------------------------------------------------------===//

#include "qatc/Codegen/Codegen.h"
#include "qatc/Codegen/Passes.h"

namespace qatc::codegen {
#define GEN_PASS_DEF_QATLAYERFUNCTIONS
#include "qatc/Codegen/Passes.h.inc"
} // namespace qatc::codegen

using namespace mlir;
using namespace qatc::codegen;

namespace {

struct LayerFunctionsPass
    : public qatc::codegen::impl::QatLayerFunctionsBase<LayerFunctionsPass> {
  using QatLayerFunctionsBase::QatLayerFunctionsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> graphs(module.getOps<func::FuncOp>());
    if (graphs.size() != 1) {
      module.emitError("qat-layer-functions needs a module with one graph "
                       "function, not ")
          << graphs.size();
      return signalPassFailure();
    }
    Target target;
    std::string error;
    if (!resolveTarget(targetCpu, target, error)) {
      module.emitError(error);
      return signalPassFailure();
    }
    LoweredGraph lowered;
    if (failed(lowerGraph(graphs[0], target, lowered)))
      return signalPassFailure();
    // The layer functions replace the graph.
    graphs[0].erase();
    Block *body = module.getBody();
    for (Operation &op : llvm::make_early_inc_range(
             lowered.kernels->getBody()->getOperations()))
      op.moveBefore(body, body->end());
  }
};

} // namespace
