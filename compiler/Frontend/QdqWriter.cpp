//===- QdqWriter.cpp - insert a recipe's Q/DQ pairs into an ONNX model ----===//
//
// `qatc quantize` edits the user's model rather than re-exporting qatc's IR:
// the output is the original graph (dynamic dimensions, shape subgraphs,
// opset, metadata, node order) plus QuantizeLinear/DequantizeLinear nodes and
// their scale initializers. Weights become int8 initializers read through a
// DequantizeLinear (symmetric, zero point 0), the form TensorRT and ONNX
// Runtime both accept.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"
#include "qatc/Frontend/QdqPlan.h"
#include "qatc/Support/Locations.h"
#include "qatc/Support/QuantMath.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstring>

using namespace mlir;
using namespace qatc;

namespace {

using TP = onnxpb::TensorProto;

class Writer {
public:
  Writer(MLIRContext &ctx, StringRef path, onnxpb::ModelProto &model)
      : ctx(ctx), path(path.str()), model(model),
        graph(*model.mutable_graph()) {}

  LogicalResult apply(const QdqPlan &plan) {
    Location fileLoc = makeFileLoc(&ctx, path);
    for (const auto &t : graph.initializer()) {
      if (t.data_location() == TP::EXTERNAL)
        return emitError(fileLoc)
               << "stores its weights as external data, which qatc quantize "
                  "does not rewrite yet; save the model with the weights "
                  "inside";
      initializers[t.name()] = &t;
      used.insert(t.name());
    }
    llvm::StringSet<> nodeNames;
    for (const auto &node : graph.node())
      if (!node.name().empty())
        nodeNames.insert(node.name());
    for (int i = 0; i < graph.node_size(); ++i) {
      const auto &node = graph.node(i);
      std::string name = qatc::detail::nodeName(node, i, nodeNames);
      nodeIndex[name] = i;
      for (const auto &in : node.input())
        used.insert(in);
      for (const auto &out : node.output())
        used.insert(out);
      used.insert(name);
    }
    for (const auto &in : graph.input())
      used.insert(in.name());

    // New nodes go right before the first node that reads their output,
    // which keeps the graph topologically sorted.
    std::vector<std::vector<onnxpb::NodeProto>> before(graph.node_size() + 1);
    for (const QdqInsertion &ins : plan.insertions)
      if (failed(insert(ins, before)))
        return failure();
    google::protobuf::RepeatedPtrField<onnxpb::NodeProto> nodes;
    for (int i = 0; i <= graph.node_size(); ++i) {
      for (auto &n : before[i])
        *nodes.Add() = std::move(n);
      if (i < graph.node_size())
        *nodes.Add() = graph.node(i);
    }
    graph.mutable_node()->Swap(&nodes);
    removeUnusedInitializers();
    return success();
  }

private:
  std::string unique(const std::string &base) {
    return qatc::detail::uniqueName(used, base);
  }

  /// Adds a float32 scale and an int8 zero point initializer.
  std::pair<std::string, std::string> addParams(const QdqInsertion &ins) {
    bool perAxis = ins.scales.size() > 1;
    TP *scale = graph.add_initializer();
    scale->set_name(unique(ins.tensor + "_scale"));
    scale->set_data_type(TP::FLOAT);
    if (perAxis)
      scale->add_dims(static_cast<int64_t>(ins.scales.size()));
    scale->set_raw_data(
        std::string(reinterpret_cast<const char *>(ins.scales.data()),
                    ins.scales.size() * sizeof(float)));
    TP *zp = graph.add_initializer();
    zp->set_name(unique(ins.tensor + "_zero_point"));
    zp->set_data_type(TP::INT8);
    if (perAxis)
      zp->add_dims(static_cast<int64_t>(ins.scales.size()));
    zp->set_raw_data(std::string(ins.scales.size(), '\0'));
    return {scale->name(), zp->name()};
  }

  onnxpb::NodeProto makeNode(StringRef opType, StringRef name,
                             ArrayRef<std::string> inputs, StringRef output,
                             const QdqInsertion &ins) {
    onnxpb::NodeProto node;
    node.set_op_type(opType.str());
    node.set_name(unique(name.str()));
    for (const std::string &in : inputs)
      node.add_input(in);
    node.add_output(output.str());
    if (ins.scales.size() > 1) {
      auto *axis = node.add_attribute();
      axis->set_name("axis");
      axis->set_type(onnxpb::AttributeProto::INT);
      axis->set_i(ins.axis);
    }
    return node;
  }

  LogicalResult insert(const QdqInsertion &ins,
                       std::vector<std::vector<onnxpb::NodeProto>> &before) {
    Location fileLoc = makeFileLoc(&ctx, path);
    // Consumers: (node position, input index) pairs to rewire.
    std::vector<std::pair<int, int>> targets;
    if (ins.consumers.empty()) {
      for (int i = 0; i < graph.node_size(); ++i)
        for (int j = 0; j < graph.node(i).input_size(); ++j)
          if (graph.node(i).input(j) == ins.tensor)
            targets.emplace_back(i, j);
    } else {
      for (const auto &[node, input] : ins.consumers) {
        auto it = nodeIndex.find(node);
        if (it == nodeIndex.end() ||
            static_cast<int>(input) >= graph.node(it->second).input_size() ||
            graph.node(it->second).input(input) != ins.tensor)
          return emitError(fileLoc) << "node '" << node << "' does not read '"
                                    << ins.tensor << "' at input " << input;
        targets.emplace_back(it->second, input);
      }
    }
    if (targets.empty())
      return success(); // only a graph output reads it: nothing to rewire
    int first = targets.front().first;
    for (auto &t : targets)
      first = std::min(first, t.first);
    auto [scale, zp] = addParams(ins);
    std::string dqOut = unique(ins.tensor + "_dequantized");
    std::string quantized;
    auto init = initializers.find(ins.tensor);
    if (ins.isWeight && init != initializers.end()) {
      auto values = qatc::detail::floatData(*init->second);
      if (!values)
        return emitError(fileLoc)
               << "weight '" << ins.tensor << "' is not a float32 initializer";
      TP *q = graph.add_initializer();
      q->set_name(unique(ins.tensor + "_quantized"));
      q->set_data_type(TP::INT8);
      for (int64_t d : init->second->dims())
        q->add_dims(d);
      std::vector<int64_t> dims(q->dims().begin(), q->dims().end());
      std::vector<int8_t> ints = quantizeWeights(
          *values, ins.scales,
          AxisIndex(dims, ins.scales.size() > 1 ? ins.axis : -1));
      std::string bytes(ints.begin(), ints.end());
      q->set_raw_data(std::move(bytes));
      quantized = q->name();
      replaced.insert(ins.tensor);
    } else {
      quantized = unique(ins.tensor + "_quantized");
      before[first].push_back(
          makeNode("QuantizeLinear", ins.tensor + "_QuantizeLinear",
                   {ins.tensor, scale, zp}, quantized, ins));
    }
    before[first].push_back(makeNode("DequantizeLinear",
                                     ins.tensor + "_DequantizeLinear",
                                     {quantized, scale, zp}, dqOut, ins));
    for (auto [node, input] : targets)
      graph.mutable_node(node)->set_input(input, dqOut);
    return success();
  }

  /// Float weights that only fed quantized consumers are gone.
  void removeUnusedInitializers() {
    llvm::StringSet<> read;
    for (const auto &node : graph.node())
      for (const auto &in : node.input())
        read.insert(in);
    for (const auto &out : graph.output())
      read.insert(out.name());
    auto *inits = graph.mutable_initializer();
    for (int i = inits->size() - 1; i >= 0; --i)
      if (replaced.contains(inits->Get(i).name()) &&
          !read.contains(inits->Get(i).name()))
        inits->DeleteSubrange(i, 1);
  }

  MLIRContext &ctx;
  std::string path;
  onnxpb::ModelProto &model;
  onnxpb::GraphProto &graph;
  llvm::StringMap<const TP *> initializers;
  llvm::StringMap<int> nodeIndex;
  llvm::StringSet<> used, replaced;
};

} // namespace

LogicalResult qatc::applyQdqPlan(MLIRContext &ctx, StringRef path,
                                 const QdqPlan &plan, llvm::raw_ostream &os,
                                 int64_t *convertedFrom) {
  Location fileLoc = makeFileLoc(&ctx, path);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return emitError(fileLoc)
           << "cannot be read: " << buffer.getError().message();
  try {
    onnxpb::ModelProto model;
    if (failed(detail::parseModel((*buffer)->getBuffer(),
                                  path.ends_with(".onnxtext"), model, fileLoc)))
      return failure();
    // Per-axis Q/DQ needs opset 13: older models are converted first (the
    // recipe's tensor and node names survive the conversion).
    int64_t from = 0;
    if (failed(detail::upgradeOpset(ctx, path, model, kQdqOpset, from)))
      return failure();
    if (convertedFrom)
      *convertedFrom = from < kQdqOpset ? from : 0;
    Writer writer(ctx, path, model);
    if (failed(writer.apply(plan)))
      return failure();
    std::string out;
    if (!model.SerializeToString(&out))
      return emitError(fileLoc) << "the quantized model cannot be serialized "
                                   "(larger than 2 GB?)";
    os << out;
    return success();
  } catch (const std::exception &e) {
    return emitError(fileLoc) << "cannot be quantized: " << e.what();
  }
}

LogicalResult qatc::upgradeOnnxOpset(MLIRContext &ctx, StringRef data,
                                     StringRef path, bool isText,
                                     int64_t targetOpset, bool textOut,
                                     llvm::raw_ostream &os) {
  Location fileLoc = makeFileLoc(&ctx, path);
  try {
    onnxpb::ModelProto model;
    if (failed(detail::parseModel(data, isText, model, fileLoc)))
      return failure();
    int64_t from = 0;
    if (failed(detail::upgradeOpset(ctx, path, model, targetOpset, from)))
      return failure();
    if (textOut) {
      detail::printModelText(model, os);
      return success();
    }
    std::string out;
    if (!model.SerializeToString(&out))
      return emitError(fileLoc) << "cannot be serialized (larger than 2 GB?)";
    os << out;
    return success();
  } catch (const std::exception &e) {
    return emitError(fileLoc) << "cannot be converted: " << e.what();
  }
}
