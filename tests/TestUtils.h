//===- TestUtils.h - helpers shared by the unit tests -----------*- C++ -*-===//

#ifndef QATC_TESTS_TESTUTILS_H
#define QATC_TESTS_TESTUTILS_H

#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Frontend/OnnxImporter.h"
#include "qatc/Support/Locations.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include "onnx/onnx_pb.h"

#include <string>

namespace qatc::test {

/// An MLIR context with the import dialects that collects diagnostics in the
/// form the qatc driver prints them.
struct ImportFixture {
  ImportFixture() : ctx(makeRegistry()), handler(&ctx, os) {}

  static mlir::DialectRegistry makeRegistry() {
    mlir::DialectRegistry registry;
    registerImportDialects(registry);
    return registry;
  }

  /// Imports `model` (serialized to bytes first, as from a file).
  mlir::OwningOpRef<mlir::ModuleOp> import(const ::onnx::ModelProto &model,
                                           llvm::StringRef baseDir = "",
                                           const ImportOptions &options = {}) {
    std::string bytes;
    model.SerializeToString(&bytes);
    return importOnnxBuffer(ctx, bytes, "model.onnx", /*isText=*/false, baseDir,
                            options);
  }

  mlir::MLIRContext ctx;
  std::string diagnostics;
  llvm::raw_string_ostream os{diagnostics};
  OnnxDiagnosticHandler handler;
};

/// A model with one graph input `x` of `shape` (float) at `opset`.
inline ::onnx::ModelProto makeModel(std::vector<int64_t> shape,
                                    int64_t opset = 13) {
  ::onnx::ModelProto model;
  model.set_ir_version(8);
  auto *imp = model.add_opset_import();
  imp->set_domain("");
  imp->set_version(opset);
  auto *graph = model.mutable_graph();
  graph->set_name("g");
  auto *in = graph->add_input();
  in->set_name("x");
  auto *tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : shape)
    tt->mutable_shape()->add_dim()->set_dim_value(d);
  return model;
}

inline void addOutput(::onnx::ModelProto &model, const std::string &name) {
  model.mutable_graph()->add_output()->set_name(name);
}

inline ::onnx::NodeProto *addNode(::onnx::ModelProto &model,
                                  const std::string &op,
                                  std::vector<std::string> inputs,
                                  std::vector<std::string> outputs,
                                  const std::string &name = "") {
  auto *node = model.mutable_graph()->add_node();
  node->set_op_type(op);
  node->set_name(name);
  for (auto &i : inputs)
    node->add_input(i);
  for (auto &o : outputs)
    node->add_output(o);
  return node;
}

/// The single function of an imported module.
inline mlir::func::FuncOp mainFunc(mlir::ModuleOp module) {
  return *module.getOps<mlir::func::FuncOp>().begin();
}

} // namespace qatc::test

#endif // QATC_TESTS_TESTUTILS_H
