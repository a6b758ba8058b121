//===- Recipe.cpp - where a quantization recipe puts Q/DQ -----------------===//
//
// Placement follows qdq-rules §3.4: the TensorRT recipe quantizes the
// inputs and weights of Conv/ConvTranspose/Gemm/MatMul, the residual input
// of an Add that joins a conv branch, the inputs of average pools, and the
// inputs of a Concat with one shared scale; outputs stay float so the next
// consumer's input Q becomes the fused op's int8 output. The TF recipe
// quantizes the outputs of every quantizable group and the graph inputs
// that feed them. Weights are per output channel, symmetric int8.
//
//===----------------------------------------------------------------------===//

#include "qatc/Quantization/Recipe.h"
#include "QuantUtils.h"
#include "qatc/Quantization/Calibration.h"
#include "qatc/Support/Locations.h"
#include "qatc/Support/QuantMath.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

#include <cmath>
#include <set>

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

std::string qatc::quantization::parseRecipeKind(StringRef text,
                                                RecipeKind &kind) {
  if (text == "trt" || text == "tensorrt")
    kind = RecipeKind::TensorRT;
  else if (text == "tf")
    kind = RecipeKind::TF;
  else
    return "unknown recipe '" + text.str() + "' (expected trt or tf)";
  return "";
}

std::string qatc::quantization::parseResidualPolicy(StringRef text,
                                                    ResidualPolicy &policy) {
  if (text == "last")
    policy = ResidualPolicy::Last;
  else if (text == "longest")
    policy = ResidualPolicy::Longest;
  else
    return "unknown residual policy '" + text.str() +
           "' (expected last or longest)";
  return "";
}

std::string qatc::quantization::parseRecipeOptions(
    StringRef recipe, StringRef residual, ArrayRef<std::string> includeNodes,
    ArrayRef<std::string> excludeNodes, ArrayRef<std::string> includeOpTypes,
    ArrayRef<std::string> excludeOpTypes, ArrayRef<std::string> includePatterns,
    ArrayRef<std::string> excludePatterns, RecipeOptions &options) {
  if (std::string e = parseRecipeKind(recipe, options.kind); !e.empty())
    return e;
  if (std::string e = parseResidualPolicy(residual, options.residual);
      !e.empty())
    return e;
  options.includeNodes = includeNodes.vec();
  options.excludeNodes = excludeNodes.vec();
  options.includeOpTypes = includeOpTypes.vec();
  options.excludeOpTypes = excludeOpTypes.vec();
  options.includePatterns = includePatterns.vec();
  options.excludePatterns = excludePatterns.vec();
  return "";
}

namespace {

StringRef opTypeOf(Operation *op) { return op->getName().stripDialect(); }

bool isWeighted(Operation *op) {
  return isa<onnx::ConvOp, onnx::ConvTransposeOp, onnx::GemmOp, onnx::MatMulOp>(
      op);
}

bool isConstant(Value v) { return v.getDefiningOp<onnx::ConstantOp>(); }

/// The user's include/exclude filters.
class Selector {
public:
  LogicalResult init(ModuleOp module, const RecipeOptions &options) {
    auto compile = [&](const std::vector<std::string> &patterns,
                       std::vector<llvm::Regex> &out) -> LogicalResult {
      for (const std::string &p : patterns) {
        llvm::Regex re("^(" + p + ")$");
        std::string error;
        if (!re.isValid(error))
          return emitError(module.getLoc())
                 << "invalid node-name pattern '" << p << "': " << error;
        out.push_back(std::move(re));
      }
      return success();
    };
    if (failed(compile(options.includeNodes, includeNames)) ||
        failed(compile(options.excludeNodes, excludeNames)))
      return failure();
    includeTypes.insert(options.includeOpTypes.begin(),
                        options.includeOpTypes.end());
    excludeTypes.insert(options.excludeOpTypes.begin(),
                        options.excludeOpTypes.end());
    if (failed(matchChains(module, options.includePatterns, includeChain)) ||
        failed(matchChains(module, options.excludePatterns, excludeChain)))
      return failure();
    hasInclude = !includeNames.empty() || !includeTypes.empty() ||
                 !options.includePatterns.empty();
    return success();
  }

  /// Whether `op` may be quantized; sets `why` when not.
  bool selected(Operation *op, std::string &why) const {
    std::string name = getNodeName(op);
    std::string type = opTypeOf(op).str();
    if (hasInclude) {
      bool in = includeTypes.count(type) || includeChain.contains(op) ||
                llvm::any_of(includeNames, [&](const llvm::Regex &re) {
                  return re.match(name);
                });
      if (!in) {
        why = "not selected by the include filters";
        return false;
      }
    }
    if (excludeTypes.count(type)) {
      why = "op type " + type + " excluded";
      return false;
    }
    if (excludeChain.contains(op)) {
      why = "excluded by pattern";
      return false;
    }
    for (const llvm::Regex &re : excludeNames)
      if (re.match(name)) {
        why = "node name excluded";
        return false;
      }
    return true;
  }

private:
  /// Marks every node of every chain `A>B>...` that matches.
  LogicalResult matchChains(ModuleOp module,
                            const std::vector<std::string> &patterns,
                            DenseSet<Operation *> &out) {
    for (const std::string &p : patterns) {
      SmallVector<StringRef> types;
      StringRef(p).split(types, '>');
      for (StringRef &t : types)
        t = t.trim();
      if (llvm::any_of(types, [](StringRef t) { return t.empty(); }))
        return emitError(module.getLoc())
               << "invalid pattern '" << p
               << "': expected op types joined by '>' (e.g. Conv>Relu)";
      module.walk([&](Operation *op) {
        SmallVector<Operation *> chain;
        Operation *cur = op;
        for (StringRef t : types) {
          if (!cur || opTypeOf(cur) != t ||
              !isa<onnx::OnnxDialect>(cur->getDialect()))
            return;
          chain.push_back(cur);
          cur = cur->getNumResults() == 1 ? getSingleUser(cur->getResult(0))
                                          : nullptr;
        }
        out.insert(chain.begin(), chain.end());
      });
    }
    return success();
  }

  std::vector<llvm::Regex> includeNames, excludeNames;
  std::set<std::string> includeTypes, excludeTypes;
  DenseSet<Operation *> includeChain, excludeChain;
  bool hasInclude = false;
};

/// The weighted op that ends in `v` through BatchNormalization, Relu/Clip
/// and Identity (a "conv branch" of a residual Add), or null.
Operation *convBranchRoot(Value v) {
  Operation *op = v.getDefiningOp();
  while (op && isa<onnx::BatchNormalizationOp, onnx::ReluOp, onnx::ClipOp,
                   onnx::IdentityOp>(op))
    op = op->getOperand(0).getDefiningOp();
  return op && isWeighted(op) ? op : nullptr;
}

/// Every value `v` depends on (itself included): op results and graph
/// inputs.
DenseSet<Value> ancestors(Value v) {
  DenseSet<Value> seen;
  SmallVector<Value> stack{v};
  while (!stack.empty()) {
    Value cur = stack.pop_back_val();
    if (!seen.insert(cur).second)
      continue;
    if (Operation *op = cur.getDefiningOp())
      for (Value operand : op->getOperands())
        stack.push_back(operand);
  }
  return seen;
}

/// True if `a` is defined before `b` (graph inputs come first).
bool definedBefore(Value a, Value b) {
  Operation *da = a.getDefiningOp(), *db = b.getDefiningOp();
  if (!da)
    return db != nullptr || cast<BlockArgument>(a).getArgNumber() <
                                cast<BlockArgument>(b).getArgNumber();
  return db && da->isBeforeInBlock(db);
}

/// Length (in ops) of the longest path from `from` to `to` through values
/// in `within`; program order is a topological order, so one sweep does.
int64_t longestPath(Value from, Value to, const DenseSet<Value> &within) {
  DenseMap<Value, int64_t> dist;
  dist[from] = 0;
  Block *block = to.getParentBlock();
  Operation *start = from.getDefiningOp();
  for (Operation &op : *block) {
    if (start && !start->isBeforeInBlock(&op))
      continue;
    if (op.getNumResults() != 1 || !within.contains(op.getResult(0)))
      continue;
    int64_t best = -1;
    for (Value operand : op.getOperands()) {
      auto it = dist.find(operand);
      if (it != dist.end())
        best = std::max(best, it->second + 1);
    }
    if (best >= 0)
      dist[op.getResult(0)] = best;
    if (op.getResult(0) == to)
      break;
  }
  auto it = dist.find(to);
  return it == dist.end() ? 0 : it->second;
}

/// For an Add of two conv branches: the input index that stays float.
unsigned floatInputOfTwoBranches(Operation *add, Operation *rootA,
                                 Operation *rootB, ResidualPolicy policy) {
  unsigned last = rootA->isBeforeInBlock(rootB) ? 1 : 0;
  if (policy == ResidualPolicy::Last)
    return last;
  // ModelOpt: the input with the longer path from the lowest common
  // ancestor (the latest value both depend on) is the main branch.
  Value a = add->getOperand(0), b = add->getOperand(1);
  DenseSet<Value> ancA = ancestors(a), ancB = ancestors(b);
  std::optional<Value> lca;
  for (Value v : ancA)
    if (ancB.contains(v) && (!lca || definedBefore(*lca, v)))
      lca = v;
  if (!lca)
    return last;
  int64_t la = longestPath(*lca, a, ancA), lb = longestPath(*lca, b, ancB);
  if (la == lb)
    return last;
  return la > lb ? 0 : 1;
}

/// The per-channel axis of a weight operand, or -1 for one scale.
int64_t weightAxis(Operation *op) {
  // A grouped ConvTranspose's axis 1 holds C_out / group channels: not one
  // scale per output channel.
  if (auto ct = dyn_cast<onnx::ConvTransposeOp>(op); ct && ct.getGroup() != 1)
    return -1;
  // Per-column scales are TensorRT's form for 2-D MatMul weights only.
  if (isa<onnx::MatMulOp>(op) &&
      cast<RankedTensorType>(op->getOperand(1).getType()).getRank() != 2)
    return -1;
  return weightChannelAxis(op, 1).value_or(-1);
}

/// Builds a decision.
class Decider {
public:
  Decider(const RecipeOptions &options, const Selector &selector)
      : options(options), selector(selector) {}

  RecipeDecision decision;

  void quantizeInput(Operation *op, unsigned index) {
    Value v = op->getOperand(index);
    // Only float activations: a Concat of indices stays integer.
    if (isConstant(v) ||
        !cast<ShapedType>(v.getType()).getElementType().isF32())
      return;
    std::string name = getTensorName(v);
    if (name.empty())
      return;
    decision.activations.push_back({name, {{getNodeName(op), index}}});
  }

  void quantizeOutput(Value v) {
    std::string name = getTensorName(v);
    if (name.empty() || isConstant(v) ||
        !cast<ShapedType>(v.getType()).getElementType().isF32() ||
        !quantizedOutputs.insert(name).second)
      return;
    decision.activations.push_back({name, {}});
  }

  void quantizeWeight(Operation *op, unsigned index) {
    Value w = op->getOperand(index);
    auto isFloatConstant = [](Value v) {
      return isConstant(v) &&
             cast<RankedTensorType>(v.getType()).getElementType().isF32();
    };
    // A Linear exported as Transpose(W) + MatMul: quantize W itself, along
    // the axis the transpose makes the output channel.
    if (auto t = w.getDefiningOp<onnx::TransposeOp>();
        t && isFloatConstant(t.getData()) && t->hasOneUse()) {
      int64_t axis = weightAxis(op);
      decision.weights.push_back({getTensorName(t.getData()), getNodeName(t), 0,
                                  axis < 0 ? -1 : t.getPerm()[axis],
                                  t.getData()});
      return;
    }
    if (!isFloatConstant(w))
      return quantizeInput(op, index);
    decision.weights.push_back(
        {getTensorName(w), getNodeName(op), index, weightAxis(op), w});
  }

  void decideTensorRT(Operation *op) {
    if (isWeighted(op)) {
      quantizeInput(op, 0);
      quantizeWeight(op, 1);
      return;
    }
    if (isa<onnx::AddOp>(op)) {
      Value a = op->getOperand(0), b = op->getOperand(1);
      if (isConstant(a) || isConstant(b) || a == b)
        return; // a bias-like Add
      Operation *ra = convBranchRoot(a), *rb = convBranchRoot(b);
      if (ra && rb) {
        unsigned keep = floatInputOfTwoBranches(op, ra, rb, options.residual);
        quantizeInput(op, 1 - keep);
      } else if (ra) {
        quantizeInput(op, 1);
      } else if (rb) {
        quantizeInput(op, 0);
      } else {
        quantizeInput(op, 0);
        quantizeInput(op, 1);
      }
      return;
    }
    if (isa<onnx::AveragePoolOp, onnx::GlobalAveragePoolOp>(op)) {
      quantizeInput(op, 0);
      return;
    }
    if (isa<onnx::ConcatOp>(op)) {
      // A Concat of indices stays integer.
      if (!cast<ShapedType>(op->getResult(0).getType())
               .getElementType()
               .isF32())
        return;
      std::vector<std::string> group;
      for (unsigned i = 0; i < op->getNumOperands(); ++i) {
        quantizeInput(op, i);
        std::string name = getTensorName(op->getOperand(i));
        if (!name.empty() && !isConstant(op->getOperand(i)))
          group.push_back(name);
      }
      std::string out = getTensorName(op->getResult(0));
      if (!out.empty())
        group.push_back(out);
      if (group.size() > 1)
        decision.sharedScales.push_back(group);
    }
  }

  /// TF: the end of a group that starts at `op` (the value whose output
  /// is quantized).
  Value groupEnd(Operation *op) {
    Value cur = op->getResult(0);
    while (Operation *next = getSingleUser(cur)) {
      std::string why;
      bool follow = (isWeighted(op) && isa<onnx::BatchNormalizationOp>(next)) ||
                    isa<onnx::ReluOp, onnx::ClipOp>(next) ||
                    (isa<onnx::MatMulOp>(op) && isa<onnx::AddOp>(next) &&
                     llvm::any_of(next->getOperands(), isConstant));
      if (!follow || !selector.selected(next, why))
        break;
      cur = next->getResult(0);
    }
    return cur;
  }

  void decideTF(Operation *op) {
    if (isWeighted(op)) {
      quantizeWeight(op, 1);
      quantizeOutput(groupEnd(op));
      quantizeGraphInput(op, 0);
      return;
    }
    bool quantizable =
        (isa<onnx::AddOp>(op) &&
         !llvm::any_of(op->getOperands(), isConstant)) ||
        isa<onnx::AveragePoolOp, onnx::GlobalAveragePoolOp, onnx::ConcatOp>(op);
    if (!quantizable)
      return;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      quantizeGraphInput(op, i);
    quantizeOutput(groupEnd(op));
  }

  /// TF quantizes graph inputs that feed a quantizable op directly.
  void quantizeGraphInput(Operation *op, unsigned index) {
    if (isa<BlockArgument>(op->getOperand(index)))
      quantizeOutput(op->getOperand(index));
  }

private:
  const RecipeOptions &options;
  const Selector &selector;
  std::set<std::string> quantizedOutputs;
};

} // namespace

FailureOr<RecipeDecision>
qatc::quantization::decideRecipe(ModuleOp module,
                                 const RecipeOptions &options) {
  Selector selector;
  if (failed(selector.init(module, options)))
    return failure();
  bool hasQdq = false;
  module.walk([&](Operation *op) {
    if (isa<onnx::QuantizeLinearOp, onnx::DequantizeLinearOp>(op) && !hasQdq) {
      hasQdq = true;
      op->emitError("the model already holds QuantizeLinear/DequantizeLinear "
                    "nodes; a recipe quantizes float models only");
    }
  });
  if (hasQdq)
    return failure();
  Decider decider(options, selector);
  module.walk([&](Operation *op) {
    if (!isa<onnx::OnnxDialect>(op->getDialect()) || isa<onnx::ConstantOp>(op))
      return;
    std::string why;
    if (!selector.selected(op, why)) {
      std::string name = getNodeName(op);
      if (!name.empty())
        decider.decision.excluded[name] = why;
      return;
    }
    if (options.kind == RecipeKind::TensorRT)
      decider.decideTensorRT(op);
    else
      decider.decideTF(op);
  });
  return decider.decision;
}

std::vector<std::string>
qatc::quantization::tensorsToCalibrate(const RecipeDecision &decision) {
  std::set<std::string> names;
  for (const auto &a : decision.activations)
    names.insert(a.tensor);
  for (const auto &group : decision.sharedScales)
    names.insert(group.begin(), group.end());
  return std::vector<std::string>(names.begin(), names.end());
}

FailureOr<QdqPlan> qatc::quantization::buildPlan(ModuleOp module,
                                                 const RecipeDecision &decision,
                                                 const ScaleTable &scales) {
  // Shared groups take their largest scale (no member then clips).
  std::map<std::string, float> effective(scales.begin(), scales.end());
  for (const auto &group : decision.sharedScales) {
    float shared = 0;
    for (const std::string &t : group) {
      auto it = scales.find(t);
      if (it != scales.end())
        shared = std::max(shared, it->second);
    }
    if (shared > 0)
      for (const std::string &t : group)
        effective[t] = shared;
  }
  // One insertion per tensor: consumer lists merge, "every consumer" wins.
  std::map<std::string, size_t> byTensor;
  QdqPlan plan;
  std::vector<std::string> missing;
  for (const auto &a : decision.activations) {
    auto it = effective.find(a.tensor);
    if (it == effective.end()) {
      if (!llvm::is_contained(missing, a.tensor))
        missing.push_back(a.tensor);
      continue;
    }
    auto [pos, fresh] = byTensor.try_emplace(a.tensor, plan.insertions.size());
    if (fresh) {
      QdqInsertion ins;
      ins.tensor = a.tensor;
      ins.consumers = a.consumers;
      ins.scales = {it->second};
      plan.insertions.push_back(std::move(ins));
      continue;
    }
    QdqInsertion &ins = plan.insertions[pos->second];
    if (ins.consumers.empty() || a.consumers.empty())
      ins.consumers.clear();
    else
      for (const auto &c : a.consumers)
        if (!llvm::is_contained(ins.consumers, c))
          ins.consumers.push_back(c);
  }
  if (!missing.empty()) {
    InFlightDiagnostic diag = emitError(module.getLoc());
    diag << "the calibration table has no scale for " << missing.size()
         << " tensor" << (missing.size() > 1 ? "s" : "") << ": ";
    for (size_t i = 0; i < missing.size() && i < 10; ++i)
      diag << (i ? ", " : "") << "'" << missing[i] << "'";
    if (missing.size() > 10)
      diag << ", ...";
    return failure();
  }
  for (const auto &w : decision.weights) {
    auto values = getConstantFloats(w.value);
    if (!values)
      continue;
    auto shape = cast<RankedTensorType>(w.value.getType()).getShape();
    QdqInsertion ins;
    ins.tensor = w.tensor;
    ins.consumers = {{w.node, w.input}};
    ins.isWeight = true;
    // Per output channel (or one scale for the whole weight).
    AxisIndex channel(shape, w.axis);
    std::vector<double> amax(channel.channels(), 0.0);
    for (size_t i = 0; i < values->size(); ++i) {
      double &a = amax[channel(static_cast<int64_t>(i))];
      a = std::max(a, std::fabs(double((*values)[i])));
    }
    for (double a : amax)
      ins.scales.push_back(calib::scaleFromAmax(a));
    ins.axis = std::max<int64_t>(w.axis, 0);
    plan.insertions.push_back(std::move(ins));
  }
  return plan;
}

//===----------------------------------------------------------------------===//
// Applying a plan to the IR
//===----------------------------------------------------------------------===//

namespace {

/// A scalar or 1-D constant.
Value constant(OpBuilder &b, Location loc, ArrayRef<float> values, bool vector,
               StringRef hint) {
  SmallVector<int64_t> shape;
  if (vector)
    shape.push_back(static_cast<int64_t>(values.size()));
  return createFloatConstant(b, loc, shape, values, hint);
}

Value zeroPoints(OpBuilder &b, Location loc, size_t count, bool vector) {
  SmallVector<int64_t> shape;
  if (vector)
    shape.push_back(static_cast<int64_t>(count));
  auto type = RankedTensorType::get(shape, b.getIntegerType(8));
  return b.create<onnx::ConstantOp>(loc,
                                    DenseElementsAttr::get(type, APInt(8, 0)));
}

} // namespace

LogicalResult qatc::quantization::applyPlan(ModuleOp module,
                                            const QdqPlan &plan) {
  auto funcs = module.getOps<func::FuncOp>();
  if (funcs.empty())
    return emitError(module.getLoc(), "no function to quantize");
  func::FuncOp func = *funcs.begin();
  std::map<std::string, Value> values;
  for (BlockArgument arg : func.getArguments())
    values[getTensorName(arg)] = arg;
  std::string file;
  func.walk([&](Operation *op) {
    for (Value r : op->getResults()) {
      std::string name = getTensorName(r);
      if (!name.empty())
        values.emplace(name, r);
    }
    if (file.empty())
      for (const OnnxLocInfo &info : getOnnxLocInfos(op->getLoc()))
        if (!info.file.empty())
          file = info.file;
  });
  MLIRContext *ctx = module.getContext();
  for (const QdqInsertion &ins : plan.insertions) {
    auto it = values.find(ins.tensor);
    if (it == values.end())
      return emitError(module.getLoc())
             << "no tensor named '" << ins.tensor << "'";
    Value v = it->second;
    OpBuilder b(ctx);
    if (auto arg = dyn_cast<BlockArgument>(v))
      b.setInsertionPointToStart(arg.getOwner());
    else
      b.setInsertionPointAfter(v.getDefiningOp());
    Location qloc = makeNodeLoc(ctx, file, ins.tensor + "_QuantizeLinear", -1,
                                "QuantizeLinear");
    Location dqloc = makeNodeLoc(ctx, file, ins.tensor + "_DequantizeLinear",
                                 -1, "DequantizeLinear");
    bool perAxis = ins.scales.size() > 1;
    Value scale = constant(b, qloc, ins.scales, perAxis, ins.tensor + "_scale");
    Value zp = zeroPoints(b, qloc, ins.scales.size(), perAxis);
    Value quantized;
    auto type = cast<RankedTensorType>(v.getType());
    int64_t axis = perAxis ? ins.axis : 1;
    if (ins.isWeight) {
      // Store the weight as int8, as TensorRT would quantize it at build
      // time: symmetric, narrow range [-127, 127] with scale = amax / 127.
      auto floats = getConstantFloats(v);
      if (!floats)
        return emitError(module.getLoc())
               << "weight '" << ins.tensor << "' is not a float constant";
      std::vector<int8_t> ints = quantizeWeights(
          *floats, ins.scales, AxisIndex(type.getShape(), perAxis ? axis : -1));
      ArrayRef<char> bytes(reinterpret_cast<const char *>(ints.data()),
                           ints.size());
      auto i8 = RankedTensorType::get(type.getShape(), b.getIntegerType(8));
      auto cst = b.create<onnx::ConstantOp>(
          qloc, makeElements(i8, bytes, ins.tensor + "_quantized"));
      setTensorName(cst, ins.tensor + "_quantized");
      quantized = cst;
    } else {
      auto q = b.create<onnx::QuantizeLinearOp>(qloc, v, scale, zp, axis, 1);
      setTensorName(q, ins.tensor + "_quantized");
      quantized = q.getY();
    }
    auto dq =
        b.create<onnx::DequantizeLinearOp>(dqloc, quantized, scale, zp, axis);
    setTensorName(dq, ins.tensor + "_dequantized");
    if (ins.consumers.empty()) {
      v.replaceAllUsesExcept(dq.getY(), quantized.getDefiningOp());
      continue;
    }
    for (const auto &[node, index] : ins.consumers) {
      bool found = false;
      for (OpOperand &use : llvm::make_early_inc_range(v.getUses())) {
        Operation *user = use.getOwner();
        if (use.getOperandNumber() == index && getNodeName(user) == node) {
          use.set(dq.getY());
          found = true;
        }
      }
      if (!found)
        return emitError(module.getLoc())
               << "node '" << node << "' does not read '" << ins.tensor
               << "' at input " << index;
    }
  }
  return success();
}
