//===- OnnxExporter.cpp - onnx dialect back to ONNX -----------------------===//
//
// The export opset is the model's own, raised to 13 (the first with per-axis
// Q/DQ and input-form Squeeze/Split) and to 17 when LayerNormalization is
// used. Attributes the dialect normalized (Reshape's shape, Slice bounds,
// Clip bounds, Pad pads, Resize scales, ...) are written back as initializer
// inputs in the form that opset expects.
//
//===----------------------------------------------------------------------===//

#include "qatc/Frontend/OnnxExporter.h"
#include "ImporterImpl.h"
#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Frontend/OnnxImporter.h"
#include "qatc/Support/Locations.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include "onnx/defs/printer.h"

#include <sstream>

using namespace mlir;
using namespace qatc;

namespace {

int32_t toOnnxDataType(Type t) {
  using TP = onnxpb::TensorProto;
  if (t.isF32())
    return TP::FLOAT;
  if (t.isF64())
    return TP::DOUBLE;
  if (t.isF16())
    return TP::FLOAT16;
  if (t.isBF16())
    return TP::BFLOAT16;
  if (t.isInteger(1))
    return TP::BOOL;
  if (auto i = dyn_cast<IntegerType>(t)) {
    bool u = i.isUnsigned();
    switch (i.getWidth()) {
    case 8:
      return u ? TP::UINT8 : TP::INT8;
    case 16:
      return u ? TP::UINT16 : TP::INT16;
    case 32:
      return u ? TP::UINT32 : TP::INT32;
    case 64:
      return u ? TP::UINT64 : TP::INT64;
    }
  }
  return TP::UNDEFINED;
}

class Exporter {
public:
  explicit Exporter(ModuleOp module) : module(module) {}
  LogicalResult run(onnxpb::ModelProto &model);

private:
  std::string uniqueName(StringRef hint);
  std::string nameOf(Value v);
  LogicalResult exportOp(Operation *op);
  LogicalResult fillTensor(onnxpb::TensorProto &t, ElementsAttr value,
                           Location loc);
  std::string addInitializer(StringRef hint, ElementsAttr value, Location loc);
  std::string addInt64s(StringRef hint, ArrayRef<int64_t> values,
                        bool scalar = false);
  std::string addScalar(StringRef hint, Type elt, double value, Location loc);
  onnxpb::NodeProto &addNode(Operation *op, StringRef opType);
  void addGenericAttrs(onnxpb::NodeProto &node, DictionaryAttr attrs,
                       ArrayRef<StringRef> skip = {});
  LogicalResult addAttr(onnxpb::NodeProto &node, StringRef name, Attribute a,
                        Location loc);

  ModuleOp module;
  onnxpb::GraphProto *graph = nullptr;
  int64_t opset = 13;
  llvm::StringSet<> usedNames;
  /// Node names (a namespace of their own in ONNX).
  llvm::StringSet<> nodeNames;
  DenseMap<Value, std::string> names;
};

} // namespace

std::string Exporter::uniqueName(StringRef hint) {
  return qatc::detail::uniqueName(usedNames, hint.empty() ? "t" : hint);
}

std::string Exporter::nameOf(Value v) {
  auto it = names.find(v);
  if (it != names.end())
    return it->second;
  std::string hint;
  if (Operation *def = v.getDefiningOp()) {
    if (auto attr = def->getAttrOfType<ArrayAttr>(kOutputNamesAttr)) {
      unsigned idx = cast<OpResult>(v).getResultNumber();
      if (idx < attr.size())
        hint = cast<StringAttr>(attr[idx]).str();
    }
    if (hint.empty()) {
      auto infos = getOnnxLocInfos(def->getLoc());
      hint = (infos.empty() ? def->getName().stripDialect().str()
                            : infos.front().name) +
             "_out" + std::to_string(cast<OpResult>(v).getResultNumber());
    }
  }
  std::string name = uniqueName(hint);
  names[v] = name;
  return name;
}

LogicalResult Exporter::fillTensor(onnxpb::TensorProto &t, ElementsAttr value,
                                   Location loc) {
  auto type = cast<ShapedType>(value.getType());
  Type elt = type.getElementType();
  t.set_data_type(toOnnxDataType(elt));
  if (t.data_type() == onnxpb::TensorProto::UNDEFINED)
    return emitError(loc) << "cannot export " << elt << " tensors to ONNX";
  for (int64_t d : type.getShape())
    t.add_dims(d);
  if (auto res = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob)
      return emitError(loc) << "the weight blob '"
                            << res.getRawHandle().getKey() << "' has no data";
    ArrayRef<char> data = blob->getData();
    t.set_raw_data(data.data(), data.size());
    return success();
  }
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense)
    return emitError(loc) << "cannot export this constant", failure();
  if (elt.isInteger(1)) {
    std::string bytes;
    for (bool b : dense.getValues<bool>())
      bytes.push_back(b ? 1 : 0);
    t.set_raw_data(bytes);
    return success();
  }
  ArrayRef<char> raw = dense.getRawData();
  if (dense.isSplat()) {
    std::string bytes;
    for (int64_t i = 0; i < type.getNumElements(); ++i)
      bytes.append(raw.data(), raw.size());
    t.set_raw_data(bytes);
  } else {
    t.set_raw_data(raw.data(), raw.size());
  }
  return success();
}

std::string Exporter::addInitializer(StringRef hint, ElementsAttr value,
                                     Location loc) {
  std::string name = uniqueName(hint);
  onnxpb::TensorProto *t = graph->add_initializer();
  t->set_name(name);
  (void)fillTensor(*t, value, loc);
  return name;
}

std::string Exporter::addInt64s(StringRef hint, ArrayRef<int64_t> values,
                                bool scalar) {
  std::string name = uniqueName(hint);
  onnxpb::TensorProto *t = graph->add_initializer();
  t->set_name(name);
  t->set_data_type(onnxpb::TensorProto::INT64);
  if (!scalar)
    t->add_dims(values.size());
  t->set_raw_data(values.data(), values.size() * sizeof(int64_t));
  return name;
}

std::string Exporter::addScalar(StringRef hint, Type elt, double value,
                                Location loc) {
  auto type = RankedTensorType::get({}, elt);
  Attribute attr;
  if (auto ft = dyn_cast<FloatType>(elt)) {
    APFloat v(value);
    bool lost;
    v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    attr = DenseElementsAttr::get(type, v);
  } else {
    attr = DenseElementsAttr::get(type, APInt(elt.getIntOrFloatBitWidth(),
                                              static_cast<int64_t>(value),
                                              !elt.isUnsignedInteger()));
  }
  return addInitializer(hint, cast<ElementsAttr>(attr), loc);
}

onnxpb::NodeProto &Exporter::addNode(Operation *op, StringRef opType) {
  onnxpb::NodeProto *node = graph->add_node();
  auto infos = getOnnxLocInfos(op->getLoc());
  // One ONNX node may have become several ops (Softmax before opset 13, a
  // variadic Max): each exported node still needs a name of its own.
  node->set_name(qatc::detail::uniqueName(
      nodeNames, infos.empty() ? opType : StringRef(infos.front().name)));
  node->set_op_type(opType.str());
  for (Value v : op->getOperands())
    node->add_input(nameOf(v));
  for (Value r : op->getResults())
    node->add_output(nameOf(r));
  return *node;
}

LogicalResult Exporter::addAttr(onnxpb::NodeProto &node, StringRef name,
                                Attribute a, Location loc) {
  onnxpb::AttributeProto *p = node.add_attribute();
  p->set_name(name.str());
  using AP = onnxpb::AttributeProto;
  if (auto i = dyn_cast<IntegerAttr>(a)) {
    p->set_type(AP::INT);
    p->set_i(i.getInt());
  } else if (auto f = dyn_cast<FloatAttr>(a)) {
    p->set_type(AP::FLOAT);
    p->set_f(static_cast<float>(f.getValueAsDouble()));
  } else if (auto s = dyn_cast<StringAttr>(a)) {
    if (s.getValue().starts_with("<")) {
      node.mutable_attribute()->RemoveLast();
      return emitError(loc) << "attribute '" << name
                            << "' held a tensor or subgraph that was not kept";
    }
    p->set_type(AP::STRING);
    p->set_s(s.str());
  } else if (auto ints = dyn_cast<DenseI64ArrayAttr>(a)) {
    p->set_type(AP::INTS);
    for (int64_t v : ints.asArrayRef())
      p->add_ints(v);
  } else if (auto floats = dyn_cast<DenseF32ArrayAttr>(a)) {
    p->set_type(AP::FLOATS);
    for (float v : floats.asArrayRef())
      p->add_floats(v);
  } else if (auto arr = dyn_cast<ArrayAttr>(a)) {
    p->set_type(AP::STRINGS);
    for (Attribute e : arr)
      p->add_strings(cast<StringAttr>(e).str());
  } else {
    node.mutable_attribute()->RemoveLast();
    return emitError(loc) << "attribute '" << name << "' cannot be exported";
  }
  return success();
}

void Exporter::addGenericAttrs(onnxpb::NodeProto &node, DictionaryAttr attrs,
                               ArrayRef<StringRef> skip) {
  for (NamedAttribute na : attrs) {
    StringRef name = na.getName().strref();
    if (name == kOutputNamesAttr || llvm::is_contained(skip, name))
      continue;
    (void)addAttr(node, name, na.getValue(),
                  UnknownLoc::get(module.getContext()));
  }
}

/// The ONNX op type of a dialect op: its mnemonic.
static StringRef onnxOpType(Operation *op) {
  return op->getName().stripDialect();
}

static bool allOnes(ArrayRef<int64_t> v) {
  return llvm::all_of(v, [](int64_t x) { return x == 1; });
}

LogicalResult Exporter::exportOp(Operation *op) {
  Location loc = op->getLoc();
  // Names of the initializers a node needs start with the node's name.
  std::string nodeName = op->getName().stripDialect().str();
  if (auto infos = getOnnxLocInfos(loc); !infos.empty())
    nodeName = infos.front().name;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](qatc::onnx::ConstantOp c) {
        std::string name = nameOf(c.getResult());
        onnxpb::TensorProto *t = graph->add_initializer();
        t->set_name(name);
        return fillTensor(*t, cast<ElementsAttr>(c.getValue()), loc);
      })
      .Case([&](qatc::onnx::UnsupportedOp u) {
        auto &node = addNode(op, u.getOpType());
        if (!u.getDomain().empty())
          node.set_domain(u.getDomain().str());
        for (NamedAttribute na : u.getOnnxAttributes())
          if (failed(addAttr(node, na.getName(), na.getValue(), loc)))
            return failure();
        return success();
      })
      .Case([&](qatc::onnx::ReshapeOp r) {
        auto shape = cast<RankedTensorType>(r.getType()).getShape();
        auto &node = addNode(op, "Reshape");
        node.add_input(addInt64s(nodeName + "_shape", shape));
        if (llvm::is_contained(shape, 0))
          (void)addAttr(node, "allowzero", Builder(op).getI64IntegerAttr(1),
                        loc);
        return success();
      })
      .Case([&](qatc::onnx::CastOp c) {
        auto &node = addNode(op, "Cast");
        return addAttr(node, "to",
                       Builder(op).getI64IntegerAttr(
                           toOnnxDataType(getElementTypeOrSelf(c.getType()))),
                       loc);
      })
      .Case([&](qatc::onnx::ClipOp c) {
        auto &node = addNode(op, "Clip");
        Type elt = getElementTypeOrSelf(c.getX().getType());
        if (c.getMin())
          node.add_input(addScalar(nodeName + "_min", elt,
                                   c.getMin()->convertToDouble(), loc));
        else if (c.getMax())
          node.add_input("");
        if (c.getMax())
          node.add_input(addScalar(nodeName + "_max", elt,
                                   c.getMax()->convertToDouble(), loc));
        return success();
      })
      .Case<qatc::onnx::SqueezeOp, qatc::onnx::UnsqueezeOp>([&](auto s) {
        auto &node = addNode(op, onnxOpType(op));
        node.add_input(addInt64s(nodeName + "_axes", s.getAxes()));
        return success();
      })
      .Case<qatc::onnx::ReduceMeanOp, qatc::onnx::ReduceSumOp,
            qatc::onnx::ReduceMaxOp, qatc::onnx::ReduceMinOp,
            qatc::onnx::ReduceProdOp, qatc::onnx::ReduceL1Op,
            qatc::onnx::ReduceL2Op, qatc::onnx::ReduceSumSquareOp>([&](auto r) {
        auto &node = addNode(op, onnxOpType(op));
        if (failed(addAttr(node, "keepdims", r.getKeepdimsAttr(), loc)))
          return failure();
        // Axes became an input: ReduceSum at opset 13, the others at 18.
        bool axesInput = opset >= (isa<qatc::onnx::ReduceSumOp>(op) ? 13 : 18);
        if (axesInput)
          node.add_input(addInt64s(nodeName + "_axes", r.getAxes()));
        else
          return addAttr(node, "axes", r.getAxesAttr(), loc);
        return success();
      })
      .Case([&](qatc::onnx::TileOp t) {
        auto &node = addNode(op, "Tile");
        node.add_input(addInt64s(nodeName + "_repeats", t.getRepeats()));
        return success();
      })
      .Case([&](qatc::onnx::ExpandOp e) {
        auto &node = addNode(op, "Expand");
        node.add_input(
            addInt64s(nodeName + "_shape",
                      cast<RankedTensorType>(e.getType()).getShape()));
        return success();
      })
      .Case([&](qatc::onnx::TopKOp t) {
        auto &node = addNode(op, "TopK");
        int64_t k = static_cast<int64_t>(t.getK());
        node.add_input(addInt64s(nodeName + "_k", ArrayRef<int64_t>(k)));
        addGenericAttrs(node, op->getAttrDictionary(), {"k"});
        return success();
      })
      .Case([&](qatc::onnx::SplitOp s) {
        auto &node = addNode(op, "Split");
        (void)addAttr(node, "axis", s.getAxisAttr(), loc);
        node.add_input(addInt64s(nodeName + "_split", s.getSplit()));
        return success();
      })
      .Case([&](qatc::onnx::SliceOp s) {
        auto &node = addNode(op, "Slice");
        SmallVector<int64_t> ends(s.getEnds());
        // A normalized end of -1 with a negative step means "through index
        // 0"; ONNX would read -1 as the last index, so write INT64_MIN.
        for (size_t i = 0; i < ends.size(); ++i)
          if (s.getSteps()[i] < 0 && ends[i] < 0)
            ends[i] = std::numeric_limits<int64_t>::min();
        SmallVector<int64_t> axes;
        for (size_t i = 0; i < ends.size(); ++i)
          axes.push_back(i);
        node.add_input(addInt64s(nodeName + "_starts", s.getStarts()));
        node.add_input(addInt64s(nodeName + "_ends", ends));
        node.add_input(addInt64s(nodeName + "_axes", axes));
        node.add_input(addInt64s(nodeName + "_steps", s.getSteps()));
        return success();
      })
      .Case([&](qatc::onnx::PadOp p) {
        auto &node = addNode(op, "Pad");
        (void)addAttr(node, "mode", p.getModeAttr(), loc);
        node.add_input(addInt64s(nodeName + "_pads", p.getPads()));
        if (p.getMode() == "constant")
          node.add_input(addScalar(nodeName + "_value",
                                   getElementTypeOrSelf(p.getData().getType()),
                                   p.getValue().convertToDouble(), loc));
        return success();
      })
      .Case([&](qatc::onnx::ResizeOp r) {
        auto &node = addNode(op, "Resize");
        addGenericAttrs(node, op->getAttrDictionary(), {"scales"});
        auto in = cast<RankedTensorType>(r.getX().getType()).getShape();
        auto out = cast<RankedTensorType>(r.getType()).getShape();
        bool scalesGiveSize = true;
        for (size_t i = 0; i < in.size(); ++i)
          scalesGiveSize &=
              static_cast<int64_t>(
                  std::floor(static_cast<double>(in[i]) *
                             static_cast<double>(r.getScales()[i]))) == out[i];
        node.add_input("");
        if (scalesGiveSize) {
          auto type = RankedTensorType::get({static_cast<int64_t>(in.size())},
                                            Builder(op).getF32Type());
          node.add_input(addInitializer(
              nodeName + "_scales",
              cast<ElementsAttr>(DenseElementsAttr::get(type, r.getScales())),
              loc));
        } else {
          node.add_input("");
          node.add_input(addInt64s(nodeName + "_sizes", out));
        }
        return success();
      })
      .Case<qatc::onnx::MaxPoolOp, qatc::onnx::AveragePoolOp>([&](auto p) {
        auto &node = addNode(op, onnxOpType(op));
        // Pooling dilations only exist from opset 19 (AveragePool) / 10.
        SmallVector<StringRef> skip;
        if (allOnes(p.getDilations()))
          skip.push_back("dilations");
        addGenericAttrs(node, op->getAttrDictionary(), skip);
        return success();
      })
      .Case([&](qatc::onnx::ShapeOp s) {
        auto &node = addNode(op, "Shape");
        if (s.getStart() != 0 || s.getEnd())
          addGenericAttrs(node, op->getAttrDictionary());
        return success();
      })
      .Case([&](qatc::onnx::QuantizeLinearOp q) {
        auto &node = addNode(op, "QuantizeLinear");
        addGenericAttrs(node, op->getAttrDictionary(), {"saturate"});
        return success();
      })
      .Default([&](Operation *other) -> LogicalResult {
        if (other->getDialect() !=
            module.getContext()->getLoadedDialect<qatc::onnx::OnnxDialect>())
          return emitError(loc)
                 << "'" << other->getName() << "' has no ONNX form";
        auto &node = addNode(other, onnxOpType(other));
        addGenericAttrs(node, other->getAttrDictionary());
        return success();
      });
}

LogicalResult Exporter::run(onnxpb::ModelProto &model) {
  auto funcs = module.getOps<func::FuncOp>();
  if (std::distance(funcs.begin(), funcs.end()) != 1)
    return module.emitError("expected exactly one function to export");
  func::FuncOp func = *funcs.begin();
  Operation *m = module.getOperation();
  if (auto o = m->getAttrOfType<IntegerAttr>("onnx.opset"))
    opset = std::max<int64_t>(o.getInt(), 13);
  bool hasLayerNorm = false;
  func.walk([&](qatc::onnx::LayerNormalizationOp) { hasLayerNorm = true; });
  if (hasLayerNorm)
    opset = std::max<int64_t>(opset, 17);

  int64_t irVersion = 8;
  if (auto v = m->getAttrOfType<IntegerAttr>("onnx.ir_version"))
    irVersion = std::max<int64_t>(v.getInt(), 7);
  model.set_ir_version(irVersion);
  if (auto p = m->getAttrOfType<StringAttr>("onnx.producer_name"))
    model.set_producer_name(p.str());
  if (auto p = m->getAttrOfType<StringAttr>("onnx.producer_version"))
    model.set_producer_version(p.str());
  auto *imp = model.add_opset_import();
  imp->set_domain("");
  imp->set_version(opset);
  if (auto others = m->getAttrOfType<DictionaryAttr>("onnx.opset_imports")) {
    for (NamedAttribute na : others) {
      auto *o = model.add_opset_import();
      o->set_domain(na.getName().str());
      o->set_version(cast<IntegerAttr>(na.getValue()).getInt());
    }
  }
  graph = model.mutable_graph();
  if (auto g = m->getAttrOfType<StringAttr>("onnx.graph_name"))
    graph->set_name(g.str());
  if (graph->name().empty())
    graph->set_name("qatc");

  auto fillValueInfo = [](onnxpb::ValueInfoProto &vi, StringRef name,
                          Type type) {
    vi.set_name(name.str());
    auto *tt = vi.mutable_type()->mutable_tensor_type();
    auto shaped = cast<ShapedType>(type);
    tt->set_elem_type(toOnnxDataType(shaped.getElementType()));
    if (shaped.hasRank()) {
      auto *shape = tt->mutable_shape();
      for (int64_t d : shaped.getShape())
        shape->add_dim()->set_dim_value(d);
    }
  };

  auto inNames = func->getAttrOfType<ArrayAttr>("onnx.input_names");
  for (BlockArgument arg : func.getArguments()) {
    std::string name = inNames && arg.getArgNumber() < inNames.size()
                           ? cast<StringAttr>(inNames[arg.getArgNumber()]).str()
                           : "input_" + std::to_string(arg.getArgNumber());
    usedNames.insert(name);
    names[arg] = name;
    fillValueInfo(*graph->add_input(), name, arg.getType());
  }

  // Graph outputs keep their names: claim them for the values returned,
  // unless a value is returned twice or is a graph input (then an Identity
  // node carries the name).
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  auto outNames = func->getAttrOfType<ArrayAttr>("onnx.output_names");
  SmallVector<std::string> outputNames;
  SmallVector<std::pair<Value, std::string>> identities;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    std::string name = outNames && i < outNames.size()
                           ? cast<StringAttr>(outNames[i]).str()
                           : "output_" + std::to_string(i);
    outputNames.push_back(name);
    if (!names.count(v) && !usedNames.contains(name)) {
      usedNames.insert(name);
      names[v] = name;
    } else {
      identities.emplace_back(v, name);
    }
  }

  for (Operation &op : func.getBody().front()) {
    if (isa<func::ReturnOp>(op))
      continue;
    if (failed(exportOp(&op)))
      return failure();
  }
  for (auto &[v, name] : identities) {
    onnxpb::NodeProto *node = graph->add_node();
    node->set_op_type("Identity");
    node->set_name(uniqueName(name + "_identity"));
    node->add_input(nameOf(v));
    usedNames.insert(name);
    node->add_output(name);
  }
  for (auto [v, name] : llvm::zip(ret.getOperands(), outputNames))
    fillValueInfo(*graph->add_output(), name, v.getType());
  return success();
}

/// Builds the ModelProto of `module`.
static FailureOr<onnxpb::ModelProto> buildModel(ModuleOp module) {
  onnxpb::ModelProto model;
  Exporter exporter(module);
  if (failed(exporter.run(model)))
    return failure();
  return model;
}

LogicalResult qatc::exportOnnx(ModuleOp module, llvm::raw_ostream &os) {
  auto model = buildModel(module);
  if (failed(model))
    return failure();
  std::string bytes;
  if (!model->SerializeToString(&bytes))
    return module.emitError("the model is too large to serialize (2 GB "
                            "protobuf limit)");
  os << bytes;
  return success();
}

/// Prints the values of an initializer in ONNX text syntax.
static void printTensorValues(std::ostream &os, const onnxpb::TensorProto &t) {
  const std::string &raw = t.raw_data();
  auto print = [&](auto zero, auto widen) {
    using T = decltype(zero);
    size_t n = raw.size() / sizeof(T);
    for (size_t i = 0; i < n; ++i) {
      T v;
      memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
      os << (i ? ", " : "") << widen(v);
    }
  };
  auto asIs = [](auto v) { return v; };
  auto asInt = [](auto v) { return static_cast<int64_t>(v); };
  auto asFloat = [](auto v) {
    std::ostringstream s;
    s.precision(9);
    s << static_cast<double>(v);
    std::string str = s.str();
    if (str.find_first_of(".einf") == std::string::npos)
      str += ".0";
    return str;
  };
  using TP = onnxpb::TensorProto;
  switch (t.data_type()) {
  case TP::FLOAT:
    return print(float(), asFloat);
  case TP::DOUBLE:
    return print(double(), asFloat);
  case TP::INT8:
    return print(int8_t(), asInt);
  case TP::UINT8:
  case TP::BOOL:
    return print(uint8_t(), asInt);
  case TP::INT16:
    return print(int16_t(), asInt);
  case TP::UINT16:
    return print(uint16_t(), asInt);
  case TP::INT32:
    return print(int32_t(), asIs);
  case TP::UINT32:
    return print(uint32_t(), asIs);
  case TP::INT64:
    return print(int64_t(), asIs);
  case TP::UINT64:
    return print(uint64_t(), asIs);
  default:
    os << "?";
  }
}

void qatc::detail::printModelText(const onnxpb::ModelProto &model,
                                  llvm::raw_ostream &os) {
  const onnxpb::GraphProto &graph = model.graph();
  std::ostringstream ss;
  ss << "<\n  ir_version: " << model.ir_version() << ",\n  opset_import: [";
  for (int i = 0; i < model.opset_import_size(); ++i)
    ss << (i ? ", " : "") << "\"" << model.opset_import(i).domain()
       << "\" : " << model.opset_import(i).version();
  ss << "]\n>\n"
     << graph.name() << " " << graph.input() << " => " << graph.output()
     << "\n";
  // libonnx 1.12's graph printer leaves out initializers; print them here.
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const onnxpb::TensorProto &t = graph.initializer(i);
    onnxpb::TypeProto type;
    type.mutable_tensor_type()->set_elem_type(t.data_type());
    auto *shape = type.mutable_tensor_type()->mutable_shape();
    for (int64_t d : t.dims())
      shape->add_dim()->set_dim_value(d);
    ss << (i ? ",\n   " : "  <") << type << " " << t.name() << " = {";
    printTensorValues(ss, t);
    ss << "}";
  }
  if (graph.initializer_size())
    ss << ">\n";
  ss << "{\n";
  for (const onnxpb::NodeProto &node : graph.node())
    ss << "  " << node << "\n";
  ss << "}\n";
  os << ss.str();
}

LogicalResult qatc::exportOnnxText(ModuleOp module, llvm::raw_ostream &os) {
  auto model = buildModel(module);
  if (failed(model))
    return failure();
  qatc::detail::printModelText(*model, os);
  return success();
}
