//===- OnnxImporter.cpp - ONNX model to the onnx dialect ------------------===//
//
// Reads the model, checks the graph (undefined tensors, duplicate producers,
// cycles), re-orders nodes topologically, turns initializers into constants
// (large ones as resource blobs that own the protobuf's bytes), and imports
// every node through its handler in OnnxNodeImporters.cpp.
//
//===----------------------------------------------------------------------===//

#include "qatc/Frontend/OnnxImporter.h"
#include "ImporterImpl.h"
#include "qatc/Support/Locations.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "onnx/defs/parser.h"

#include <google/protobuf/io/coded_stream.h>

#include <cstring>
#include <queue>

using namespace mlir;
using namespace qatc;
using namespace qatc::detail;

namespace {

/// Constants with at most this many elements are printed inline; larger ones
/// become resource blobs. int64 tensors up to the folders' limit stay inline
/// because they are shapes and indices the importer folds.
constexpr int64_t kInlineElements = 16;
constexpr int64_t kInlineInt64Elements = 4096;

size_t byteWidth(Type elt) {
  if (elt.isInteger(1))
    return 1;
  return (elt.getIntOrFloatBitWidth() + 7) / 8;
}

/// Imports one GraphProto into a function.
class GraphImporter {
public:
  GraphImporter(MLIRContext &ctx, StringRef file, StringRef baseDir,
                const ImportOptions &options)
      : ctx(ctx), file(file.str()), baseDir(baseDir.str()), options(options),
        builder(&ctx) {}

  OwningOpRef<ModuleOp> importModel(onnxpb::ModelProto &model);

private:
  LogicalResult checkAndSortNodes(const onnxpb::GraphProto &graph,
                                  SmallVectorImpl<int> &order);
  FailureOr<Type> convertValueInfoType(const onnxpb::ValueInfoProto &info,
                                       Location loc, bool isGraphInput);
  FailureOr<Value> getInitializer(StringRef name);
  LogicalResult importNode(const onnxpb::NodeProto &node, int index);
  void importUnsupported(NodeImporter &ni);
  Location nodeLoc(const onnxpb::NodeProto &node, int index);
  /// Records which dimensions of each argument were dynamic.
  void setDynamicInputDims(func::FuncOp func, ArrayRef<StringRef> argNames);

  MLIRContext &ctx;
  std::string file;
  std::string baseDir;
  const ImportOptions &options;
  OpBuilder builder;
  int64_t opset = 0;

  /// Tensor name -> value, for graph inputs, initializers and node outputs.
  llvm::StringMap<Value> values;
  /// Initializers not yet materialized (created on first use).
  llvm::StringMap<onnxpb::TensorProto *> initializers;
  /// Declared types of intermediate tensors (value_info and graph outputs).
  llvm::StringMap<const onnxpb::TypeProto *> declaredTypes;
  /// Tensor names some node or the graph output consumes.
  llvm::StringSet<> consumed;
  /// Node names in use, to keep synthesized names unique.
  llvm::StringSet<> nodeNames;
  /// Where initializer constants go: the top of the function body.
  Block *body = nullptr;
  Operation *lastConstant = nullptr;
  /// Graph inputs with dynamic dimensions (set to 1): name -> dims.
  std::map<std::string, SmallVector<int64_t>> dynamicInputDims;
  /// Unsupported nodes seen so far: (location, op type).
  SmallVector<std::pair<Location, std::string>> unsupported;
};

} // namespace

//===----------------------------------------------------------------------===//
// Element types and tensors
//===----------------------------------------------------------------------===//

std::string qatc::detail::dataTypeName(int32_t dataType) {
  if (onnxpb::TensorProto_DataType_IsValid(dataType))
    return onnxpb::TensorProto_DataType_Name(
        static_cast<onnxpb::TensorProto_DataType>(dataType));
  return "data type " + std::to_string(dataType);
}

Type qatc::detail::convertElementType(MLIRContext *ctx, int32_t dataType,
                                      std::string *why) {
  Builder b(ctx);
  using TP = onnxpb::TensorProto;
  switch (dataType) {
  case TP::FLOAT:
    return b.getF32Type();
  case TP::DOUBLE:
    return b.getF64Type();
  case TP::FLOAT16:
    return b.getF16Type();
  case TP::BFLOAT16:
    return b.getBF16Type();
  case TP::INT8:
    return b.getIntegerType(8);
  case TP::UINT8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case TP::INT16:
    return b.getIntegerType(16);
  case TP::UINT16:
    return b.getIntegerType(16, false);
  case TP::INT32:
    return b.getIntegerType(32);
  case TP::UINT32:
    return b.getIntegerType(32, false);
  case TP::INT64:
    return b.getIntegerType(64);
  case TP::UINT64:
    return b.getIntegerType(64, false);
  case TP::BOOL:
    return b.getI1Type();
  default:
    break;
  }
  if (why) {
    // FLOAT8E4M3FN..FLOAT8E5M2FNUZ are 17..20 and UINT4/INT4 21/22 in newer
    // ONNX; libonnx 1.12 does not name them, so name them here.
    switch (dataType) {
    case 17:
    case 18:
    case 19:
    case 20:
      *why = "float8 tensors are not supported (qatc quantizes to int8)";
      break;
    case 21:
    case 22:
      *why = "int4/uint4 tensors are not supported (qatc quantizes to int8)";
      break;
    case 8:
      *why = "string tensors are not supported";
      break;
    case 0:
      *why = "the tensor has no data type";
      break;
    default:
      *why = dataTypeName(dataType) + " tensors are not supported";
    }
  }
  return {};
}

/// Reads the bytes of an external-data tensor.
static FailureOr<std::string> readExternalData(const onnxpb::TensorProto &t,
                                               StringRef baseDir,
                                               Location loc) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset" || kv.key() == "length") {
      uint64_t v;
      if (!llvm::to_integer(kv.value(), v, 10))
        return emitError(loc) << "external data " << kv.key() << " '"
                              << kv.value() << "' is not a number",
               failure();
      (kv.key() == "offset" ? offset : length.emplace()) = v;
    }
  }
  if (location.empty())
    return emitError(loc) << "external data has no location", failure();
  // As ONNX Runtime does: a model names files beside it, never elsewhere
  // (an absolute path or ".." would let a model read any file, or block
  // on a device).
  bool escapes = llvm::sys::path::is_absolute(location) ||
                 llvm::any_of(llvm::make_range(llvm::sys::path::begin(location),
                                               llvm::sys::path::end(location)),
                              [](StringRef part) { return part == ".."; });
  if (escapes)
    return emitError(loc) << "external data location '" << location
                          << "' is not a relative path inside the model's "
                             "directory",
           failure();
  SmallString<256> path(baseDir);
  llvm::sys::path::append(path, location);
  if (llvm::sys::fs::exists(path) && !llvm::sys::fs::is_regular_file(path))
    return emitError(loc) << "external data file '" << path
                          << "' is not a regular file",
           failure();
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return emitError(loc) << "cannot read external data file '" << path
                          << "': " << buffer.getError().message(),
           failure();
  uint64_t size = (*buffer)->getBufferSize();
  uint64_t len = length ? *length : size - std::min(offset, size);
  if (offset > size || len > size - offset)
    return emitError(loc) << "external data range [" << offset << ", "
                          << offset + len << ") is outside '" << path << "' ("
                          << size << " bytes)",
           failure();
  return std::string((*buffer)->getBufferStart() + offset, len);
}

FailureOr<ElementsAttr> qatc::detail::convertTensor(MLIRContext *ctx,
                                                    onnxpb::TensorProto &t,
                                                    StringRef blobName,
                                                    StringRef baseDir,
                                                    Location loc) {
  std::string why;
  Type elt = convertElementType(ctx, t.data_type(), &why);
  if (!elt)
    return emitError(loc) << why, failure();
  if (t.segment().begin() != 0 || t.segment().end() != 0)
    return emitError(loc) << "segmented tensors are not supported", failure();
  SmallVector<int64_t> shape;
  int64_t count = 1;
  for (int64_t d : t.dims()) {
    if (d < 0)
      return emitError(loc) << "tensor has a negative dimension " << d,
             failure();
    if (d != 0 && count > (int64_t(1) << 40) / d)
      return emitError(loc) << "tensor is too large", failure();
    shape.push_back(d);
    count *= d;
  }
  auto type = RankedTensorType::get(shape, elt);
  size_t width = byteWidth(elt);
  uint64_t expectBytes = static_cast<uint64_t>(count) * width;

  // Gather the little-endian bytes of the tensor.
  std::unique_ptr<std::string> bytes;
  using TP = onnxpb::TensorProto;
  if (t.data_location() == TP::EXTERNAL) {
    auto data = readExternalData(t, baseDir, loc);
    if (failed(data))
      return failure();
    bytes = std::make_unique<std::string>(std::move(*data));
  } else if (t.has_raw_data()) {
    bytes.reset(t.release_raw_data());
  } else {
    bytes = std::make_unique<std::string>();
    bytes->resize(expectBytes);
    char *out = bytes->data();
    auto typedCount = [&]() -> int64_t {
      switch (t.data_type()) {
      case TP::FLOAT:
        return t.float_data_size();
      case TP::DOUBLE:
        return t.double_data_size();
      case TP::INT64:
        return t.int64_data_size();
      case TP::UINT32:
      case TP::UINT64:
        return t.uint64_data_size();
      default:
        return t.int32_data_size();
      }
    }();
    if (typedCount != count)
      return emitError(loc)
                 << "tensor of shape ["
                 << llvm::make_range(shape.begin(), shape.end()) << "] has "
                 << typedCount << " values instead of " << count,
             failure();
    for (int64_t i = 0; i < count; ++i) {
      switch (t.data_type()) {
      case TP::FLOAT: {
        float v = t.float_data(i);
        memcpy(out + i * 4, &v, 4);
        break;
      }
      case TP::DOUBLE: {
        double v = t.double_data(i);
        memcpy(out + i * 8, &v, 8);
        break;
      }
      case TP::INT64: {
        int64_t v = t.int64_data(i);
        memcpy(out + i * 8, &v, 8);
        break;
      }
      case TP::UINT64: {
        uint64_t v = t.uint64_data(i);
        memcpy(out + i * 8, &v, 8);
        break;
      }
      case TP::UINT32: {
        auto v = static_cast<uint32_t>(t.uint64_data(i));
        memcpy(out + i * 4, &v, 4);
        break;
      }
      default: {
        // int32_data holds INT32 and, one per entry, the narrower types.
        int32_t v = t.int32_data(i);
        memcpy(out + i * width, &v, width);
        break;
      }
      }
    }
  }
  if (bytes->size() != expectBytes)
    return emitError(loc) << "tensor data has " << bytes->size()
                          << " bytes but shape and type need " << expectBytes,
           failure();

  if (elt.isInteger(1)) {
    SmallVector<bool> bools;
    for (char c : *bytes)
      bools.push_back(c != 0);
    return cast<ElementsAttr>(DenseElementsAttr::get(type, bools));
  }
  bool inlineIt = count <= kInlineElements ||
                  (elt.isInteger(64) && count <= kInlineInt64Elements);
  if (inlineIt) {
    ArrayRef<char> raw(bytes->data(), bytes->size());
    return cast<ElementsAttr>(DenseElementsAttr::getFromRawBuffer(type, raw));
  }
  // MLIR prints resource keys unquoted, so they must be bare identifiers;
  // the tensor's own name stays in the op's location.
  std::string key;
  for (char c : blobName)
    key.push_back(llvm::isAlnum(c) || c == '_' || c == '.' || c == '-' ? c
                                                                       : '_');
  if (key.empty() || !(llvm::isAlpha(key.front()) || key.front() == '_'))
    key.insert(key.begin(), '_');
  // The blob owns the bytes; std::string storage is malloc-aligned, which
  // satisfies any element type's alignment.
  std::string *owned = bytes.release();
  ArrayRef<char> data(owned->data(), owned->size());
  AsmResourceBlob blob(
      data, width, [owned](void *, size_t, size_t) { delete owned; },
      /*dataIsMutable=*/false);
  return cast<ElementsAttr>(
      DenseResourceElementsAttr::get(type, key, std::move(blob)));
}

/// The MLIR element type of a numpy array type.
static Type npyElementType(MLIRContext *ctx, NpyType type) {
  Builder b(ctx);
  switch (type) {
  case NpyType::F32:
    return b.getF32Type();
  case NpyType::F64:
    return b.getF64Type();
  case NpyType::F16:
    return b.getF16Type();
  case NpyType::I8:
    return b.getIntegerType(8);
  case NpyType::U8:
    return b.getIntegerType(8, false);
  case NpyType::I16:
    return b.getIntegerType(16);
  case NpyType::U16:
    return b.getIntegerType(16, false);
  case NpyType::I32:
    return b.getIntegerType(32);
  case NpyType::U32:
    return b.getIntegerType(32, false);
  case NpyType::I64:
    return b.getIntegerType(64);
  case NpyType::U64:
    return b.getIntegerType(64, false);
  case NpyType::Bool:
    return b.getI1Type();
  }
  return {};
}

/// A frozen graph input as a constant; the array must match the input's
/// declared element type and static dimensions.
static FailureOr<DenseElementsAttr>
convertFrozenInput(MLIRContext *ctx, const onnxpb::ValueInfoProto &info,
                   const NpyArray &array, Location loc) {
  Type elt = npyElementType(ctx, array.type);
  std::string why;
  Type declared =
      info.type().has_tensor_type()
          ? convertElementType(ctx, info.type().tensor_type().elem_type(), &why)
          : Type();
  if (!declared)
    return emitError(loc) << "cannot be frozen: " << why, failure();
  if (declared != elt)
    return emitError(loc) << "is " << declared << " but the frozen value is "
                          << npyTypeName(array.type),
           failure();
  const auto &tt = info.type().tensor_type();
  bool rankOk = !tt.has_shape() ||
                tt.shape().dim_size() == static_cast<int>(array.shape.size());
  for (int i = 0; rankOk && tt.has_shape() && i < tt.shape().dim_size(); ++i)
    rankOk = !tt.shape().dim(i).has_dim_value() ||
             tt.shape().dim(i).dim_value() == array.shape[i];
  if (!rankOk)
    return emitError(loc) << "has a declared shape that the frozen value of "
                             "shape ["
                          << llvm::make_range(array.shape.begin(),
                                              array.shape.end())
                          << "] does not match",
           failure();
  auto type = RankedTensorType::get(array.shape, elt);
  if (elt.isInteger(1)) {
    SmallVector<bool> bools;
    for (char c : array.data)
      bools.push_back(c != 0);
    return DenseElementsAttr::get(type, bools);
  }
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(array.data.data(), array.data.size()));
}

//===----------------------------------------------------------------------===//
// Graph checks and ordering
//===----------------------------------------------------------------------===//

/// Checks that every tensor a node reads is defined exactly once and orders
/// the nodes topologically. Kahn's algorithm with a min-heap on the original
/// index keeps an already-sorted graph in its order (a DFS order, as
/// Boost.Graph's topological_sort gives, would shuffle every model) and
/// leaves exactly the nodes on or behind a cycle when there is one.
LogicalResult GraphImporter::checkAndSortNodes(const onnxpb::GraphProto &graph,
                                               SmallVectorImpl<int> &order) {
  int n = graph.node_size();
  llvm::StringMap<int> producer;
  llvm::StringSet<> external;
  for (const auto &in : graph.input())
    external.insert(in.name());
  for (const auto &init : graph.initializer())
    external.insert(init.name());
  for (int i = 0; i < n; ++i) {
    const auto &node = graph.node(i);
    for (const std::string &out : node.output()) {
      if (out.empty())
        continue;
      if (external.contains(out))
        return emitError(nodeLoc(node, i))
               << "output '" << out
               << "' redefines a graph input or initializer";
      auto [it, inserted] = producer.try_emplace(out, i);
      if (!inserted)
        return emitError(nodeLoc(node, i))
               << "output '" << out << "' is also produced by node \""
               << graph.node(it->second).name() << "\" (#" << it->second << ")";
    }
  }
  std::vector<SmallVector<int>> users(n);
  std::vector<int> indegree(n, 0);
  for (int i = 0; i < n; ++i) {
    const auto &node = graph.node(i);
    for (const std::string &in : node.input()) {
      if (in.empty())
        continue;
      consumed.insert(in);
      auto it = producer.find(in);
      if (it != producer.end()) {
        users[it->second].push_back(i);
        ++indegree[i];
      } else if (!external.contains(in)) {
        return emitError(nodeLoc(node, i))
               << "input '" << in
               << "' is not produced by any node and is neither a graph "
                  "input nor an initializer";
      }
    }
  }
  for (const auto &out : graph.output()) {
    consumed.insert(out.name());
    if (!producer.count(out.name()) && !external.contains(out.name()))
      return emitError(makeFileLoc(&ctx, file))
             << "graph output '" << out.name() << "' is never produced";
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i)
    if (indegree[i] == 0)
      ready.push(i);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[i])
      if (--indegree[u] == 0)
        ready.push(u);
  }
  if (static_cast<int>(order.size()) != n) {
    int first = -1;
    std::string names;
    int listed = 0;
    for (int i = 0; i < n; ++i) {
      if (indegree[i] == 0)
        continue;
      if (first < 0)
        first = i;
      if (listed++ < 8)
        names +=
            (names.empty() ? "" : ", ") +
            ("\"" + cast<NameLoc>(nodeLoc(graph.node(i), i)).getName().str() +
             "\"");
    }
    return emitError(nodeLoc(graph.node(first), first))
           << "the graph has a cycle through " << (n - order.size())
           << " nodes: " << names << (listed > 8 ? ", ..." : "");
  }
  return success();
}

std::string qatc::detail::nodeName(const onnxpb::NodeProto &node, int index,
                                   const llvm::StringSet<> &usedNames) {
  std::string name = node.name();
  if (name.empty()) {
    // Stable across runs: depends only on the node's type and position, and
    // steers clear of the names the model itself uses.
    name = node.op_type() + "_" + std::to_string(index);
    while (usedNames.contains(name))
      name += "_";
  }
  return name;
}

Location GraphImporter::nodeLoc(const onnxpb::NodeProto &node, int index) {
  return makeNodeLoc(&ctx, file, qatc::detail::nodeName(node, index, nodeNames),
                     index, node.op_type());
}

//===----------------------------------------------------------------------===//
// Graph inputs and initializers
//===----------------------------------------------------------------------===//

FailureOr<Type>
GraphImporter::convertValueInfoType(const onnxpb::ValueInfoProto &info,
                                    Location loc, bool isGraphInput) {
  if (!info.type().has_tensor_type())
    return emitError(loc) << "only tensor inputs and outputs are supported",
           failure();
  const auto &tt = info.type().tensor_type();
  std::string why;
  Type elt = convertElementType(&ctx, tt.elem_type(), &why);
  if (!elt)
    return emitError(loc) << why, failure();
  auto pinned = options.inputShapes.find(info.name());
  if (isGraphInput && pinned != options.inputShapes.end()) {
    const auto &dims = pinned->second;
    if (tt.has_shape() &&
        tt.shape().dim_size() != static_cast<int>(dims.size()))
      return emitError(loc) << "--input-shape gives " << dims.size()
                            << " dimensions but the input has rank "
                            << tt.shape().dim_size(),
             failure();
    for (int i = 0; tt.has_shape() && i < tt.shape().dim_size(); ++i) {
      const auto &dim = tt.shape().dim(i);
      if (dim.has_dim_value() && dim.dim_value() != dims[i])
        return emitError(loc)
                   << "--input-shape sets dimension " << i << " to " << dims[i]
                   << " but the model fixes it to " << dim.dim_value(),
               failure();
    }
    if (!isReasonableShape(dims))
      return emitError(loc) << "--input-shape gives an invalid or too large "
                               "shape",
             failure();
    return Type(RankedTensorType::get(dims, elt));
  }
  if (!tt.has_shape()) {
    if (!isGraphInput)
      return Type(UnrankedTensorType::get(elt));
    return emitError(loc) << "the input has no shape; pin it with "
                             "--input-shape "
                          << info.name() << "=<d0>x<d1>x...",
           failure();
  }
  SmallVector<int64_t> shape;
  SmallVector<int64_t> dynamic;
  std::string hint, dims;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto &dim = tt.shape().dim(i);
    bool known = dim.has_dim_value() && dim.dim_value() >= 0;
    hint += (i ? "x" : "") +
            (known ? std::to_string(dim.dim_value()) : std::string("1"));
    if (known) {
      shape.push_back(dim.dim_value());
      continue;
    }
    if (!isGraphInput)
      return Type(UnrankedTensorType::get(elt));
    // Like trtexec: a dynamic dimension without --input-shape becomes 1.
    dims +=
        (dynamic.empty() ? "" : ", ") + std::to_string(i) +
        (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : std::string());
    dynamic.push_back(i);
    shape.push_back(1);
  }
  if (!dynamic.empty()) {
    dynamicInputDims[info.name()] = dynamic;
    if (!options.quietDynamicDims)
      emitWarning(loc) << "dynamic dimension"
                       << (dynamic.size() > 1 ? "s " : " ") << dims
                       << " set to 1; choose with --input-shape " << info.name()
                       << "=" << hint;
  }
  if (!isReasonableShape(shape))
    return emitError(loc) << "has an invalid or too large shape (qatc allows "
                             "dimensions up to "
                          << kMaxDimension << " and " << kMaxElements
                          << " elements)",
           failure();
  return Type(RankedTensorType::get(shape, elt));
}

FailureOr<Value> GraphImporter::getInitializer(StringRef name) {
  auto it = initializers.find(name);
  assert(it != initializers.end() && "not an initializer");
  Location loc = makeTensorLoc(&ctx, file, name, kInitializerKind);
  auto value = convertTensor(&ctx, *it->second, name, baseDir, loc);
  if (failed(value))
    return failure();
  OpBuilder::InsertionGuard guard(builder);
  if (lastConstant)
    builder.setInsertionPointAfter(lastConstant);
  else
    builder.setInsertionPointToStart(body);
  auto op = builder.create<qatc::onnx::ConstantOp>(loc, value->getType(),
                                                   cast<TypedAttr>(*value));
  op->setAttr(kOutputNamesAttr, builder.getStrArrayAttr({name}));
  lastConstant = op;
  initializers.erase(it);
  values[name] = op.getResult();
  return op.getResult();
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

void GraphImporter::importUnsupported(NodeImporter &ni) {
  const auto &node = ni.node;
  SmallVector<Type> types;
  for (const std::string &out : node.output()) {
    Type type = UnrankedTensorType::get(builder.getF32Type());
    auto it = declaredTypes.find(out);
    if (it != declaredTypes.end() && it->second->has_tensor_type()) {
      const auto &tt = it->second->tensor_type();
      if (Type elt = convertElementType(&ctx, tt.elem_type())) {
        type = UnrankedTensorType::get(elt);
        bool isStatic = tt.has_shape();
        SmallVector<int64_t> shape;
        for (int i = 0; isStatic && i < tt.shape().dim_size(); ++i) {
          isStatic = tt.shape().dim(i).has_dim_value();
          shape.push_back(tt.shape().dim(i).dim_value());
        }
        if (isStatic)
          type = RankedTensorType::get(shape, elt);
      }
    }
    types.push_back(type);
  }
  SmallVector<NamedAttribute> attrs;
  for (const auto &a : node.attribute())
    attrs.push_back(
        builder.getNamedAttr(a.name(), convertGenericAttribute(&ctx, a)));
  SmallVector<Value> operands;
  for (size_t i = 0; i < ni.numInputs(); ++i)
    if (Value v = ni.input(i))
      operands.push_back(v);
  auto op = builder.create<qatc::onnx::UnsupportedOp>(
      ni.loc, types, operands, builder.getStringAttr(node.op_type()),
      builder.getStringAttr(node.domain()), builder.getDictionaryAttr(attrs));
  ni.results.assign(op->result_begin(), op->result_end());
  unsupported.emplace_back(ni.loc,
                           node.domain().empty() || node.domain() == "ai.onnx"
                               ? node.op_type()
                               : node.domain() + "." + node.op_type());
}

LogicalResult GraphImporter::importNode(const onnxpb::NodeProto &node,
                                        int index) {
  Location loc = nodeLoc(node, index);
  SmallVector<Value> inputs;
  for (const std::string &in : node.input()) {
    if (in.empty()) {
      inputs.push_back(Value());
      continue;
    }
    auto it = values.find(in);
    if (it != values.end()) {
      inputs.push_back(it->second);
      continue;
    }
    auto v = getInitializer(in);
    if (failed(v))
      return failure();
    inputs.push_back(*v);
  }
  NodeImporter ni(builder, node, loc, opset, baseDir, std::move(inputs));
  bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
  NodeHandler handler =
      defaultDomain ? lookupNodeHandler(node.op_type()) : nullptr;
  if (handler) {
    if (failed(handler(ni)))
      return failure();
  } else {
    importUnsupported(ni);
  }
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string &name = node.output(i);
    if (name.empty())
      continue;
    Value v = i < static_cast<int>(ni.results.size()) ? ni.results[i] : Value();
    if (!v) {
      if (consumed.contains(name))
        return emitError(loc)
               << "output #" << i << " ('" << name << "') of " << node.op_type()
               << " is used, but qatc supports only the "
               << "inference outputs of this op";
      continue;
    }
    values[name] = v;
  }
  // Name the ops' results after the ONNX tensors (for dumps and export).
  for (int i = 0; i < static_cast<int>(ni.results.size()); ++i) {
    Value v = ni.results[i];
    if (!v || i >= node.output_size() || node.output(i).empty())
      continue;
    Operation *def = v.getDefiningOp();
    if (!def || def->hasAttr(kOutputNamesAttr))
      continue;
    SmallVector<StringRef> names;
    for (Value r : def->getResults()) {
      auto pos = llvm::find(ni.results, r);
      names.push_back(pos == ni.results.end() ||
                              pos - ni.results.begin() >= node.output_size()
                          ? StringRef()
                          : StringRef(node.output(pos - ni.results.begin())));
    }
    def->setAttr(kOutputNamesAttr, builder.getStrArrayAttr(names));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Model
//===----------------------------------------------------------------------===//

void GraphImporter::setDynamicInputDims(func::FuncOp func,
                                        ArrayRef<StringRef> argNames) {
  if (dynamicInputDims.empty())
    return;
  SmallVector<Attribute> perInput;
  for (StringRef name : argNames) {
    auto it = dynamicInputDims.find(name.str());
    perInput.push_back(builder.getDenseI64ArrayAttr(
        it == dynamicInputDims.end() ? ArrayRef<int64_t>() : it->second));
  }
  func->setAttr(kDynamicInputDimsAttr, builder.getArrayAttr(perInput));
}

OwningOpRef<ModuleOp> GraphImporter::importModel(onnxpb::ModelProto &model) {
  Location fileLoc = makeFileLoc(&ctx, file);
  if (!model.has_graph())
    return emitError(fileLoc) << "is not an ONNX model (no graph)", nullptr;
  bool hasDefault = false;
  for (const auto &imp : model.opset_import()) {
    if (imp.domain().empty() || imp.domain() == "ai.onnx") {
      opset = imp.version();
      hasDefault = true;
    }
  }
  if (!hasDefault)
    return emitError(fileLoc)
               << "is not an ONNX model (it imports no default-domain opset)",
           nullptr;
  if (opset > kMaxOpset || opset < 1)
    return emitError(fileLoc)
               << "uses opset " << opset << "; qatc imports opsets "
               << kMinOpset << " to " << kMaxOpset,
           nullptr;
  if (opset < kMinOpset) {
    // Older models import when every operator means at `opset` what it
    // means at 7 (the legacy `consumed_inputs` attribute aside).
    for (const auto &node : model.graph().node()) {
      bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
      if (!defaultDomain || !isUnchangedBeforeOpset7(node.op_type()))
        return emitError(fileLoc)
                   << "uses opset " << opset << "; qatc imports opsets "
                   << kMinOpset << " to " << kMaxOpset
                   << ", and older models only when each operator means what "
                      "it means at opset 7 ("
                   << node.op_type() << " changed since)",
               nullptr;
    }
  }

  onnxpb::GraphProto &graph = *model.mutable_graph();
  if (graph.sparse_initializer_size() > 0)
    return emitError(fileLoc) << "sparse initializers are not supported",
           nullptr;

  for (const auto &node : graph.node())
    if (!node.name().empty())
      nodeNames.insert(node.name());
  SmallVector<int> order;
  if (failed(checkAndSortNodes(graph, order)))
    return nullptr;

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  auto i64Attr = [&](int64_t v) { return builder.getI64IntegerAttr(v); };
  module->getOperation()->setAttr("onnx.opset", i64Attr(opset));
  module->getOperation()->setAttr("onnx.ir_version",
                                  i64Attr(model.ir_version()));
  module->getOperation()->setAttr("onnx.producer_name",
                                  builder.getStringAttr(model.producer_name()));
  module->getOperation()->setAttr(
      "onnx.producer_version", builder.getStringAttr(model.producer_version()));
  module->getOperation()->setAttr("onnx.graph_name",
                                  builder.getStringAttr(graph.name()));
  SmallVector<NamedAttribute> otherDomains;
  for (const auto &imp : model.opset_import())
    if (!imp.domain().empty() && imp.domain() != "ai.onnx")
      otherDomains.push_back(
          builder.getNamedAttr(imp.domain(), i64Attr(imp.version())));
  if (!otherDomains.empty())
    module->getOperation()->setAttr("onnx.opset_imports",
                                    builder.getDictionaryAttr(otherDomains));

  // Initializers: held until first use, then turned into constants.
  for (auto &init : *graph.mutable_initializer())
    initializers[init.name()] = &init;
  for (const auto &vi : graph.value_info())
    declaredTypes[vi.name()] = &vi.type();
  for (const auto &vi : graph.output())
    declaredTypes[vi.name()] = &vi.type();

  for (const auto &pin : options.frozenInputs) {
    bool found = llvm::any_of(graph.input(), [&](const auto &in) {
      return in.name() == pin.first && !initializers.count(in.name());
    });
    if (!found)
      return emitError(fileLoc) << "--freeze-input names '" << pin.first
                                << "', which is not a graph input",
             nullptr;
  }
  for (const auto &pin : options.inputShapes) {
    bool found = llvm::any_of(graph.input(), [&](const auto &in) {
      return in.name() == pin.first && !initializers.count(in.name());
    });
    if (!found)
      return emitError(fileLoc) << "--input-shape names '" << pin.first
                                << "', which is not a graph input",
             nullptr;
  }

  // Graph inputs that are not initializers become function arguments.
  SmallVector<Type> argTypes;
  SmallVector<Location> argLocs;
  SmallVector<StringRef> argNames;
  SmallVector<std::pair<std::string, DenseElementsAttr>> frozen;
  for (const auto &in : graph.input()) {
    if (initializers.count(in.name()))
      continue;
    Location loc = makeTensorLoc(&ctx, file, in.name(), kGraphInputKind);
    auto fit = options.frozenInputs.find(in.name());
    if (fit != options.frozenInputs.end()) {
      auto value = convertFrozenInput(&ctx, in, fit->second, loc);
      if (failed(value))
        return nullptr;
      frozen.emplace_back(in.name(), *value);
      continue;
    }
    auto type = convertValueInfoType(in, loc, /*isGraphInput=*/true);
    if (failed(type))
      return nullptr;
    argTypes.push_back(*type);
    argLocs.push_back(loc);
    argNames.push_back(in.name());
  }

  builder.setInsertionPointToEnd(module->getBody());
  auto func = builder.create<func::FuncOp>(
      fileLoc, "main_graph", builder.getFunctionType(argTypes, {}));
  body = func.addEntryBlock();
  for (auto [arg, loc, name] :
       llvm::zip(func.getArguments(), argLocs, argNames)) {
    arg.setLoc(loc);
    values[name] = arg;
  }
  builder.setInsertionPointToEnd(body);
  for (auto &[name, value] : frozen) {
    auto op = builder.create<qatc::onnx::ConstantOp>(
        makeTensorLoc(&ctx, file, name, kGraphInputKind), value.getType(),
        value);
    op->setAttr(kOutputNamesAttr, builder.getStrArrayAttr({name}));
    lastConstant = op;
    values[name] = op.getResult();
  }

  if (options.signatureOnly) {
    builder.create<func::ReturnOp>(fileLoc, ValueRange{});
    func->setAttr("onnx.input_names", builder.getStrArrayAttr(argNames));
    setDynamicInputDims(func, argNames);
    return module;
  }
  for (int index : order)
    if (failed(importNode(graph.node(index), index)))
      return nullptr;
  // A value_info whose element type contradicts what its node computes is
  // refused (ONNX Runtime refuses it too): a tool that reads the declared
  // type would misread the data.
  for (const auto &vi : graph.value_info()) {
    auto it = values.find(vi.name());
    if (it == values.end() || !vi.type().has_tensor_type() ||
        !vi.type().tensor_type().elem_type())
      continue;
    Type declared =
        convertElementType(&ctx, vi.type().tensor_type().elem_type());
    Type actual = getElementTypeOrSelf(it->second.getType());
    if (!declared || declared == actual)
      continue;
    Operation *def = it->second.getDefiningOp();
    return emitError(def ? def->getLoc() : fileLoc)
               << "value_info declares '" << vi.name() << "' as " << declared
               << " but the node computes " << actual,
           nullptr;
  }

  SmallVector<Value> results;
  SmallVector<StringRef> outNames;
  for (const auto &out : graph.output()) {
    auto it = values.find(out.name());
    Value v;
    if (it != values.end()) {
      v = it->second;
    } else {
      auto init = getInitializer(out.name());
      if (failed(init))
        return nullptr;
      v = *init;
    }
    // The declared output type must agree with what the graph computes.
    Location loc = makeTensorLoc(&ctx, file, out.name(), kGraphOutputKind);
    if (out.type().has_tensor_type() && out.type().tensor_type().elem_type()) {
      Type declared =
          convertElementType(&ctx, out.type().tensor_type().elem_type());
      auto actual = cast<ShapedType>(v.getType());
      if (declared && declared != actual.getElementType())
        return emitError(loc)
                   << "graph output '" << out.name() << "' is declared "
                   << declared << " but the graph computes "
                   << actual.getElementType(),
               nullptr;
      const auto &tt = out.type().tensor_type();
      if (tt.has_shape() && actual.hasRank()) {
        bool mismatch = tt.shape().dim_size() != actual.getRank();
        for (int i = 0; !mismatch && i < tt.shape().dim_size(); ++i)
          mismatch = tt.shape().dim(i).has_dim_value() &&
                     tt.shape().dim(i).dim_value() != actual.getDimSize(i);
        if (mismatch)
          return emitError(loc) << "graph output '" << out.name()
                                << "' is declared with a shape that differs "
                                   "from the computed "
                                << v.getType(),
                 nullptr;
      }
    }
    results.push_back(v);
    outNames.push_back(out.name());
  }
  builder.create<func::ReturnOp>(fileLoc, results);
  func.setType(
      builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  func->setAttr("onnx.input_names", builder.getStrArrayAttr(argNames));
  setDynamicInputDims(func, argNames);
  func->setAttr("onnx.output_names", builder.getStrArrayAttr(outNames));

  if (!unsupported.empty()) {
    llvm::StringMap<int> counts;
    SmallVector<std::string> opTypes;
    for (auto &[loc, opType] : unsupported) {
      if (counts[opType]++ == 0)
        opTypes.push_back(opType);
      if (!options.allowUnsupported)
        emitError(loc) << "operator " << opType << " is not supported";
    }
    std::string summary;
    for (const std::string &t : opTypes)
      summary += (summary.empty() ? "" : ", ") + t +
                 (counts[t] > 1 ? " (x" + std::to_string(counts[t]) + ")" : "");
    if (!options.allowUnsupported) {
      emitError(fileLoc) << unsupported.size()
                         << " node(s) use operators qatc does not support: "
                         << summary;
      return nullptr;
    }
    emitWarning(fileLoc) << "kept " << unsupported.size()
                         << " unsupported node(s) as onnx.Unsupported: "
                         << summary;
  } else {
    // Every tensor must have a static shape (no unsupported op hides one).
    WalkResult walk = func.walk([&](Operation *op) {
      for (Value r : op->getResults()) {
        auto type = dyn_cast<RankedTensorType>(r.getType());
        if (!type || !type.hasStaticShape()) {
          emitError(op->getLoc())
              << "result " << r.getType() << " does not have a static shape";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return nullptr;
  }
  // Shape computations folded into constants leave the intermediate
  // constants unused; drop those and Constant nodes nobody reads.
  bool erased = true;
  while (erased) {
    erased = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*body))) {
      if (isa<qatc::onnx::ConstantOp>(op) && op.use_empty()) {
        op.erase();
        erased = true;
      }
    }
  }
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

void qatc::registerImportDialects(DialectRegistry &registry) {
  registry.insert<qatc::onnx::OnnxDialect, func::FuncDialect>();
}

std::string qatc::parseInputShapeSpec(StringRef spec, ImportOptions &options) {
  auto [name, dims] = spec.rsplit('=');
  if (name.empty() || dims.empty() || !spec.contains('='))
    return "--input-shape expects name=d0xd1x..., got '" + spec.str() + "'";
  std::vector<int64_t> shape;
  if (dims != "scalar") {
    SmallVector<StringRef> parts;
    dims.split(parts, 'x');
    for (StringRef p : parts) {
      int64_t d;
      if (p.getAsInteger(10, d) || d < 0)
        return "--input-shape: '" + p.str() + "' in '" + spec.str() +
               "' is not a dimension";
      shape.push_back(d);
    }
  }
  options.inputShapes[name.str()] = std::move(shape);
  return "";
}

std::string qatc::parseFreezeInputSpec(StringRef spec, ImportOptions &options) {
  auto [name, path] = spec.split('=');
  if (name.empty() || path.empty())
    return "--freeze-input expects name=file.npy, got '" + spec.str() + "'";
  auto array = readNpy(path);
  if (!array)
    return "--freeze-input: " + llvm::toString(array.takeError());
  options.frozenInputs[name.str()] = std::move(*array);
  return "";
}

std::string qatc::detail::uniqueName(llvm::StringSet<> &used, StringRef base) {
  std::string name = base.str();
  for (int i = 1; used.contains(name); ++i)
    name = (base + "_" + Twine(i)).str();
  used.insert(name);
  return name;
}

std::optional<std::vector<float>>
qatc::detail::floatData(const onnxpb::TensorProto &t) {
  using TP = onnxpb::TensorProto;
  if (t.data_type() != TP::FLOAT || t.data_location() == TP::EXTERNAL)
    return std::nullopt;
  int64_t count = 1;
  for (int64_t d : t.dims())
    count *= d;
  std::vector<float> out(count);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != out.size() * sizeof(float))
      return std::nullopt;
    std::memcpy(out.data(), t.raw_data().data(), t.raw_data().size());
    return out;
  }
  if (t.float_data_size() != count)
    return std::nullopt;
  for (int64_t i = 0; i < count; ++i)
    out[i] = t.float_data(i);
  return out;
}

LogicalResult qatc::detail::parseModel(StringRef buffer, bool isText,
                                       onnxpb::ModelProto &model,
                                       Location fileLoc) {
  if (isText) {
    std::string text = buffer.str();
    auto status = onnxpb::OnnxParser::Parse(model, text.c_str());
    if (!status.IsOK())
      return emitError(fileLoc)
             << "is not valid ONNX text: " << status.ErrorMessage();
    return success();
  }
  if (buffer.size() > INT32_MAX)
    return emitError(fileLoc) << "is larger than 2 GB; store the weights "
                                 "as external data";
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(buffer.data()),
      static_cast<int>(buffer.size()));
  stream.SetTotalBytesLimit(INT32_MAX);
  if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
    return emitError(fileLoc)
           << "is not a valid ONNX model (protobuf parsing failed: the file "
              "is truncated, corrupt or not ONNX)";
  return success();
}

OwningOpRef<ModuleOp> qatc::importOnnxBuffer(MLIRContext &ctx, StringRef buffer,
                                             StringRef displayName, bool isText,
                                             StringRef baseDir,
                                             const ImportOptions &options) {
  ctx.loadDialect<qatc::onnx::OnnxDialect, func::FuncDialect>();
  Location fileLoc = makeFileLoc(&ctx, displayName);
  onnxpb::ModelProto model;
  try {
    if (failed(qatc::detail::parseModel(buffer, isText, model, fileLoc)))
      return nullptr;
    GraphImporter importer(ctx, displayName, baseDir, options);
    return importer.importModel(model);
  } catch (const std::exception &e) {
    return emitError(fileLoc) << "cannot be imported: " << e.what(), nullptr;
  }
}

OwningOpRef<ModuleOp> qatc::importOnnxFile(MLIRContext &ctx, StringRef path,
                                           const ImportOptions &options) {
  Location fileLoc = makeFileLoc(&ctx, path);
  if (llvm::sys::fs::is_directory(path))
    return emitError(fileLoc) << "is a directory, not an ONNX model", nullptr;
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return emitError(fileLoc)
               << "cannot be read: " << buffer.getError().message(),
           nullptr;
  bool isText = path.ends_with(".onnxtext") || path.ends_with(".onnxtxt");
  StringRef baseDir = llvm::sys::path::parent_path(path);
  return importOnnxBuffer(ctx, (*buffer)->getBuffer(), path, isText, baseDir,
                          options);
}
