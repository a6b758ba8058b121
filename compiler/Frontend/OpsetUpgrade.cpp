//===- OpsetUpgrade.cpp - rewrite an opset 7-12 model to opset 13 ---------===//
//
// `qatc quantize` writes Q/DQ models at opset 13, the first with per-axis
// QuantizeLinear/DequantizeLinear, whatever the opset of the float model it
// was given. This edits the user's protobuf in place, node by node: an op
// whose definition did not change between the model's opset and 13 (or
// changed only by accepting more types or negative axes) is kept; an op with
// an adapter below is rewritten; anything else is refused by name, so a
// converted model never means something else.
//
// ONNX's own version converter (libonnx's ConvertVersion) is not used: it
// asserts (aborting the process) on Softmax nodes without static shapes,
// and its opset-10 Resize adapter keeps the default half_pixel coordinates,
// which changes what the model computes.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"
#include "qatc/Frontend/OnnxImporter.h"
#include "qatc/Support/Locations.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

using namespace mlir;
using namespace qatc;

namespace {

using TP = onnxpb::TensorProto;
using AP = onnxpb::AttributeProto;

/// Ops whose definitions changed between opsets 7 and 13 only in ways that
/// keep a model's meaning: more element types, negative axes, new optional
/// attributes or inputs with the old behaviour as default.
const char *const kCompatible[] = {
    // Ops with an adapter here, once adapted.
    "BatchNormalization", "Clip", "Dropout", "Hardmax", "LogSoftmax", "Pad",
    "ReduceSum", "Resize", "Slice", "Softmax", "Split", "Squeeze", "TopK",
    "Unsqueeze",
    // Ops whose changes keep the meaning.
    "Abs", "Acos", "Acosh", "Add", "And", "ArgMax", "ArgMin", "Asin", "Asinh",
    "Atan", "Atanh", "AveragePool", "BitShift", "Cast", "Ceil", "Celu",
    "Compress", "Concat", "Constant", "ConstantOfShape", "Conv", "ConvInteger",
    "ConvTranspose", "Cos", "Cosh", "CumSum", "DepthToSpace",
    "DequantizeLinear", "Det", "Div", "Einsum", "Elu", "Equal", "Erf", "Exp",
    "Expand", "EyeLike", "Flatten", "Floor", "GRU", "Gather", "GatherElements",
    "GatherND", "Gemm", "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool",
    "Greater", "GreaterOrEqual", "HardSigmoid", "Identity", "If",
    "InstanceNormalization", "IsInf", "IsNaN", "LRN", "LSTM", "LeakyRelu",
    "Less", "LessOrEqual", "Log", "Loop", "LpNormalization", "LpPool", "MatMul",
    "MatMulInteger", "Max", "MaxPool", "MaxRoiPool", "MaxUnpool", "Mean",
    "MeanVarianceNormalization", "Min", "Mod", "Mul", "Multinomial", "Neg",
    "NonMaxSuppression", "NonZero", "Not", "OneHot", "Or", "PRelu", "Pow",
    "QLinearConv", "QLinearMatMul", "QuantizeLinear", "RNN", "RandomNormal",
    "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Range",
    "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
    "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSumSquare",
    "Relu", "Reshape", "ReverseSequence", "RoiAlign", "Round", "Scan",
    "ScatterElements", "ScatterND", "Selu", "Shape", "Shrink", "Sigmoid",
    "Sign", "Sin", "Sinh", "Size", "Softplus", "Softsign", "SpaceToDepth",
    "Sqrt", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu", "Tile", "Transpose",
    "Unique", "Where", "Xor"};

/// Ops whose versions before opset 7 differ from their opset-7 version only
/// by the `consumed_inputs` attribute (or not at all; the reductions gained
/// negative axes later); binary arithmetic is absent (its old `broadcast`
/// attribute changes the meaning).
const char *const kUnchangedBeforeOpset7[] = {
    "Abs",           "Ceil",         "Elu",
    "Exp",           "Floor",        "GlobalAveragePool",
    "GlobalMaxPool", "HardSigmoid",  "Identity",
    "LeakyRelu",     "Log",          "Neg",
    "Not",           "Reciprocal",   "ReduceL1",
    "ReduceL2",      "ReduceLogSum", "ReduceLogSumExp",
    "ReduceMax",     "ReduceMean",   "ReduceMin",
    "ReduceProd",    "ReduceSum",    "ReduceSumSquare",
    "Relu",          "Selu",         "Sigmoid",
    "Softplus",      "Softsign",     "Sqrt",
    "Tanh"};

/// What the upgrade knows of the graph's tensors (from ONNX shape
/// inference on a copy): element type and rank, when known.
struct TensorInfo {
  int32_t elemType = 0;
  int64_t rank = -1;
};

class Upgrader {
public:
  Upgrader(MLIRContext &ctx, StringRef path, onnxpb::ModelProto &model,
           int64_t from, int64_t to)
      : ctx(ctx), path(path.str()), model(model), from(from), to(to) {}

  LogicalResult run() {
    inferTypes();
    onnxpb::GraphProto &graph = *model.mutable_graph();
    for (const auto &t : graph.initializer())
      used.insert(t.name());
    for (const auto &in : graph.input())
      used.insert(in.name());
    for (const auto &node : graph.node()) {
      for (const auto &o : node.output())
        used.insert(o);
      if (!node.name().empty())
        nodeNames.insert(node.name());
    }
    google::protobuf::RepeatedPtrField<onnxpb::NodeProto> out;
    for (int i = 0; i < graph.node_size(); ++i) {
      onnxpb::NodeProto node = graph.node(i);
      std::string name = qatc::detail::nodeName(node, i, nodeNames);
      Location loc = makeNodeLoc(&ctx, path, name, i, node.op_type());
      SmallVector<onnxpb::NodeProto> replacement;
      if (failed(upgradeNode(node, loc, replacement)))
        return failure();
      for (auto &n : replacement)
        *out.Add() = std::move(n);
    }
    graph.mutable_node()->Swap(&out);
    for (auto &imp : *model.mutable_opset_import())
      if (imp.domain().empty() || imp.domain() == "ai.onnx")
        imp.set_version(to);
    // Opset 13 needs IR version 7.
    if (model.ir_version() < 7)
      model.set_ir_version(7);
    return success();
  }

private:
  void inferTypes() {
    // Shape inference on a copy of the graph without weight data (only
    // ranks and types are needed); failures just leave tensors unknown.
    onnxpb::ModelProto copy = model;
    for (auto &t : *copy.mutable_graph()->mutable_initializer()) {
      if (t.data_type() == TP::INT64 || t.data_type() == TP::INT32)
        continue; // shapes, which inference may read
      t.clear_raw_data();
      t.clear_float_data();
      t.clear_double_data();
      t.clear_int32_data();
      t.clear_external_data();
      t.set_data_location(TP::DEFAULT);
    }
    try {
      onnxpb::shape_inference::InferShapes(copy);
    } catch (const std::exception &) {
      // Keep what was inferred before the failure.
    }
    auto record = [&](const onnxpb::ValueInfoProto &vi) {
      if (!vi.type().has_tensor_type())
        return;
      const auto &tt = vi.type().tensor_type();
      TensorInfo info;
      info.elemType = tt.elem_type();
      if (tt.has_shape())
        info.rank = tt.shape().dim_size();
      infos[vi.name()] = info;
    };
    const auto &g = copy.graph();
    for (const auto &vi : g.input())
      record(vi);
    for (const auto &vi : g.value_info())
      record(vi);
    for (const auto &vi : g.output())
      record(vi);
    for (const auto &t : g.initializer()) {
      TensorInfo info;
      info.elemType = t.data_type();
      info.rank = t.dims_size();
      infos[t.name()] = info;
    }
  }

  std::string unique(const std::string &base) {
    return qatc::detail::uniqueName(used, base);
  }

  std::string uniqueNode(const std::string &base) {
    return qatc::detail::uniqueName(nodeNames, base);
  }

  /// A new initializer of ONNX type `type` holding `bytes` (1-D of `count`
  /// elements, or a scalar).
  std::string addInitializer(const std::string &hint, int32_t type,
                             const void *bytes, size_t size,
                             std::optional<int64_t> count) {
    TP *t = model.mutable_graph()->add_initializer();
    t->set_name(unique(hint));
    t->set_data_type(type);
    if (count)
      t->add_dims(*count);
    t->set_raw_data(bytes, size);
    return t->name();
  }

  /// A new 1-D int64 initializer.
  std::string addInts(const std::string &hint, ArrayRef<int64_t> values) {
    return addInitializer(hint, TP::INT64, values.data(),
                          values.size() * sizeof(int64_t),
                          static_cast<int64_t>(values.size()));
  }

  /// A new 1-D float32 initializer.
  std::string addFloats(const std::string &hint, ArrayRef<float> values) {
    return addInitializer(hint, TP::FLOAT, values.data(),
                          values.size() * sizeof(float),
                          static_cast<int64_t>(values.size()));
  }

  /// A scalar of ONNX element type `type` (float32 for types not listed)
  /// holding `value`.
  std::string addScalar(const std::string &hint, int32_t type, double value) {
    auto scalar = [&](auto v) {
      return addInitializer(hint, type, &v, sizeof(v), std::nullopt);
    };
    switch (type) {
    case TP::DOUBLE:
      return scalar(value);
    case TP::INT64:
      return scalar(static_cast<int64_t>(value));
    case TP::INT32:
      return scalar(static_cast<int32_t>(value));
    case TP::INT8:
      return scalar(static_cast<int8_t>(value));
    case TP::UINT8:
      return scalar(static_cast<uint8_t>(value));
    default:
      type = TP::FLOAT;
      return scalar(static_cast<float>(value));
    }
  }

  const AP *findAttr(const onnxpb::NodeProto &n, StringRef name) {
    for (const auto &a : n.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }

  /// Removes attribute `name` and returns it (nullopt when absent).
  std::optional<AP> takeAttr(onnxpb::NodeProto &n, StringRef name) {
    auto *attrs = n.mutable_attribute();
    for (int i = 0; i < attrs->size(); ++i)
      if (attrs->Get(i).name() == name) {
        AP a = attrs->Get(i);
        attrs->DeleteSubrange(i, 1);
        return a;
      }
    return std::nullopt;
  }

  void setString(onnxpb::NodeProto &n, StringRef name, StringRef value) {
    takeAttr(n, name);
    AP *a = n.add_attribute();
    a->set_name(name.str());
    a->set_type(AP::STRING);
    a->set_s(value.str());
  }

  void setInt(onnxpb::NodeProto &n, StringRef name, int64_t value) {
    takeAttr(n, name);
    AP *a = n.add_attribute();
    a->set_name(name.str());
    a->set_type(AP::INT);
    a->set_i(value);
  }

  /// A new node (uniquely named after `name`) of `opType`.
  onnxpb::NodeProto newNode(StringRef opType, const std::string &name,
                            ArrayRef<std::string> inputs,
                            const std::string &output) {
    onnxpb::NodeProto node;
    node.set_name(uniqueNode(name));
    node.set_op_type(opType.str());
    for (const std::string &in : inputs)
      node.add_input(in);
    node.add_output(output);
    return node;
  }

  /// Sets input `i` of `n`, padding with absent ("") inputs.
  static void setInput(onnxpb::NodeProto &n, int i, const std::string &v) {
    while (n.input_size() <= i)
      n.add_input("");
    n.set_input(i, v);
  }

  /// Moves an INTS attribute to input `index` (absent attribute: no input).
  void intsAttrToInput(onnxpb::NodeProto &n, StringRef attr, int index,
                       const std::string &base) {
    if (auto a = takeAttr(n, attr)) {
      SmallVector<int64_t> v(a->ints().begin(), a->ints().end());
      setInput(n, index, addInts(base + "_" + attr.str(), v));
    }
  }

  /// The nearest mode opset 10's Resize and Upsample meant (ONNX Runtime's
  /// "simple" mode: floor when enlarging, ceil when shrinking).
  static StringRef simpleNearestMode(ArrayRef<float> scales) {
    // Axes with scale 1 read whole coordinates, where floor and ceil agree.
    bool shrink = llvm::any_of(scales, [](float s) { return s < 1.0f; }) &&
                  llvm::none_of(scales, [](float s) { return s > 1.0f; });
    return shrink ? "ceil" : "floor";
  }

  /// The float values of a constant initializer or Constant-node tensor.
  std::optional<std::vector<float>> constFloats(const std::string &name) {
    const TP *t = nullptr;
    for (const auto &init : model.graph().initializer())
      if (init.name() == name)
        t = &init;
    if (!t)
      for (const auto &n : model.graph().node())
        if (n.op_type() == "Constant" && n.output_size() == 1 &&
            n.output(0) == name)
          if (const AP *a = findAttr(n, "value"))
            t = &a->t();
    if (!t)
      return std::nullopt;
    return qatc::detail::floatData(*t);
  }

  LogicalResult upgradeNode(onnxpb::NodeProto &n, Location loc,
                            SmallVectorImpl<onnxpb::NodeProto> &out) {
    bool defaultDomain = n.domain().empty() || n.domain() == "ai.onnx";
    if (!defaultDomain) {
      out.push_back(n);
      return success();
    }
    // Subgraphs (If, Loop, Scan) use the model's opset too.
    for (auto &a : *n.mutable_attribute())
      if (a.has_g() || a.graphs_size() > 0)
        return emitError(loc)
               << n.op_type() << " with a subgraph cannot be converted from "
               << "opset " << from << " to " << to << " by qatc yet";
    if (from < 7) {
      // Dropped at opset 6 from every op that had it; it never had meaning.
      auto *attrs = n.mutable_attribute();
      for (int i = attrs->size() - 1; i >= 0; --i)
        if (attrs->Get(i).name() == "consumed_inputs")
          attrs->DeleteSubrange(i, 1);
    }
    const std::string &op = n.op_type();
    std::string base = n.name().empty() ? op : n.name();
    const auto *oldSchema =
        onnxpb::OpSchemaRegistry::Schema(op, static_cast<int>(from));
    const auto *newSchema =
        onnxpb::OpSchemaRegistry::Schema(op, static_cast<int>(to));
    if (op == "Upsample")
      return upgradeUpsample(n, loc, out, base);
    if (!oldSchema || !newSchema)
      return emitError(loc) << "operator " << op << " does not exist at opset "
                            << (oldSchema ? to : from),
             failure();
    // The same definition at both opsets: nothing to do.
    if (oldSchema->since_version() == newSchema->since_version()) {
      out.push_back(n);
      return success();
    }
    if (op == "Slice" && from < 10) {
      intsAttrToInput(n, "starts", 1, base);
      intsAttrToInput(n, "ends", 2, base);
      intsAttrToInput(n, "axes", 3, base);
    } else if (op == "Clip" && from < 11) {
      auto lo = takeAttr(n, "min"), hi = takeAttr(n, "max");
      if (lo)
        setInput(n, 1, addScalar(base + "_min", TP::FLOAT, lo->f()));
      if (hi)
        setInput(n, 2, addScalar(base + "_max", TP::FLOAT, hi->f()));
    } else if (op == "Pad" && from < 11) {
      auto pads = takeAttr(n, "pads");
      auto value = takeAttr(n, "value");
      SmallVector<int64_t> p;
      if (pads)
        p.assign(pads->ints().begin(), pads->ints().end());
      setInput(n, 1, addInts(base + "_pads", p));
      if (value && value->f() != 0.0f) {
        int32_t type = infos.lookup(n.input(0)).elemType;
        setInput(
            n, 2,
            addScalar(base + "_value", type ? type : TP::FLOAT, value->f()));
      }
    } else if ((op == "Squeeze" || op == "Unsqueeze") && from < 13) {
      intsAttrToInput(n, "axes", 1, base);
    } else if (op == "Split" && from < 13) {
      intsAttrToInput(n, "split", 1, base);
    } else if (op == "ReduceSum" && from < 13) {
      intsAttrToInput(n, "axes", 1, base);
    } else if (op == "TopK" && from < 10) {
      auto k = takeAttr(n, "k");
      if (!k)
        return emitError(loc) << "TopK has no k", failure();
      setInput(n, 1, addInts(base + "_k", ArrayRef<int64_t>(k->i())));
    } else if (op == "Resize" && from < 11) {
      // (X, scales) -> (X, roi, scales), with opset 10's coordinates.
      std::string scales = n.input_size() > 1 ? n.input(1) : "";
      setInput(n, 1, "");
      setInput(n, 2, scales);
      setString(n, "coordinate_transformation_mode", "asymmetric");
      if (!findAttr(n, "mode") || findAttr(n, "mode")->s() == "nearest") {
        auto s = constFloats(scales);
        setString(
            n, "nearest_mode",
            simpleNearestMode(s ? ArrayRef<float>(*s) : ArrayRef<float>()));
      }
    } else if (op == "BatchNormalization" && from < 9) {
      auto spatial = takeAttr(n, "spatial");
      if (spatial && spatial->i() != 1)
        return emitError(loc) << "BatchNormalization with spatial=0 has no "
                              << "opset " << to << " form",
               failure();
    } else if (op == "Dropout" && from < 12) {
      // Inference ignores the ratio; opset 12 made it an input.
      takeAttr(n, "ratio");
      takeAttr(n, "is_test");
    } else if (op == "Scatter") {
      n.set_op_type("ScatterElements");
    } else if ((op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") &&
               from < 13) {
      return upgradeSoftmax(n, loc, out, base);
    } else if (!llvm::is_contained(kCompatible, StringRef(op))) {
      return emitError(loc)
                 << "qatc cannot convert " << op << " from opset " << from
                 << " to " << to << " (its definition changed at opset "
                 << newSchema->since_version() << ")",
             failure();
    }
    out.push_back(n);
    return success();
  }

  /// Before opset 13 these ops worked on the input coerced to 2-D at
  /// `axis`. Where that is the last axis nothing changes; otherwise the node
  /// becomes Flatten -> op(axis 1) -> Reshape to the input's shape.
  LogicalResult upgradeSoftmax(onnxpb::NodeProto &n, Location loc,
                               SmallVectorImpl<onnxpb::NodeProto> &out,
                               const std::string &base) {
    int64_t axis = 1;
    if (auto a = takeAttr(n, "axis"))
      axis = a->i();
    int64_t rank = infos.lookup(n.input(0)).rank;
    if (axis < 0 && rank >= 0)
      axis += rank;
    if (axis == -1 || (rank >= 0 && axis == rank - 1)) {
      setInt(n, "axis", -1);
      out.push_back(n);
      return success();
    }
    std::string x = n.input(0), y = n.output(0);
    std::string flat = unique(base + "_flat"),
                shapeOut = unique(base + "_input_shape"),
                inner = unique(base + "_2d");
    onnxpb::NodeProto flatten =
        newNode("Flatten", base + "_flatten", {x}, flat);
    setInt(flatten, "axis", axis);
    out.push_back(flatten);
    out.push_back(newNode("Shape", base + "_shape", {x}, shapeOut));
    n.set_input(0, flat);
    n.set_output(0, inner);
    setInt(n, "axis", 1);
    out.push_back(n);
    out.push_back(newNode("Reshape", base + "_reshape", {inner, shapeOut}, y));
    return success();
  }

  /// Upsample (7-9, deprecated at 10) -> Resize with ONNX Runtime's meaning:
  /// asymmetric coordinates, floor for nearest.
  LogicalResult upgradeUpsample(onnxpb::NodeProto &n, Location loc,
                                SmallVectorImpl<onnxpb::NodeProto> &out,
                                const std::string &base) {
    std::string scales;
    std::vector<float> values;
    if (auto a = takeAttr(n, "scales")) {
      values.assign(a->floats().begin(), a->floats().end());
      scales = addFloats(base + "_scales", values);
    } else if (n.input_size() > 1) {
      scales = n.input(1);
      if (auto s = constFloats(scales))
        values = *s;
    } else {
      return emitError(loc) << "Upsample has no scales", failure();
    }
    std::string mode = "nearest";
    if (auto m = takeAttr(n, "mode"))
      mode = m->s() == "bilinear" ? "linear" : m->s();
    std::string x = n.input(0);
    n.set_op_type("Resize");
    n.clear_input();
    n.add_input(x);
    n.add_input("");
    n.add_input(scales);
    setString(n, "mode", mode);
    setString(n, "coordinate_transformation_mode", "asymmetric");
    if (mode == "nearest")
      setString(n, "nearest_mode", simpleNearestMode(values));
    out.push_back(n);
    return success();
  }

  MLIRContext &ctx;
  std::string path;
  onnxpb::ModelProto &model;
  int64_t from, to;
  llvm::StringMap<TensorInfo> infos;
  llvm::StringSet<> used, nodeNames;
};

} // namespace

LogicalResult qatc::detail::upgradeOpset(MLIRContext &ctx, StringRef path,
                                         onnxpb::ModelProto &model,
                                         int64_t targetOpset,
                                         int64_t &fromOpset) {
  fromOpset = 0;
  for (const auto &imp : model.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      fromOpset = imp.version();
  if (fromOpset >= targetOpset)
    return success();
  if (fromOpset < 7)
    return emitError(makeFileLoc(&ctx, path))
           << "uses opset " << fromOpset << "; qatc converts opsets 7 to "
           << targetOpset - 1 << " to " << targetOpset;
  return Upgrader(ctx, path, model, fromOpset, targetOpset).run();
}

bool qatc::isUnchangedBeforeOpset7(StringRef opType) {
  return llvm::is_contained(kUnchangedBeforeOpset7, opType);
}
