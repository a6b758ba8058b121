//===- PointwiseFusion.cpp - elementwise bodies and fused chains ----------===//
//
// The f32 arithmetic of every elementwise op lives here, once, as a body
// that works on scalars (strided map layers) and on 16-lane vectors (the
// epilogues of convolutions and matrix products).
//
// A chain of such ops between a producer and the next QuantizeLinear (SiLU
// = Sigmoid * x, HardSwish, GELU in either form, LeakyRelu / PRelu, scale
// and shift, ...) runs inside the producer's epilogue, in registers: the
// producer writes the chain's last value (quantized, when the chain ends in
// a qat.quantize) and no intermediate tensor exists. Where no producer can
// take the chain, it runs as one strided map layer over its inputs. The
// arithmetic is the same ops in the same order as unfused (no contraction),
// so fusion does not change a single bit of the result.
//
//===----------------------------------------------------------------------===//

#include "GraphLowering.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/SaveAndRestore.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

using namespace mlir;
using namespace qatc;
using namespace qatc::codegen;

namespace qatc::codegen::lowering {

namespace {

Value fconst(KB &k, Value like, float v) {
  return k.floatLike(like.getType(), v);
}

template <typename OpTy> ScalarFn unary() {
  return [](KB &k, ArrayRef<Value> v) -> Value {
    return k.b.create<OpTy>(k.loc, v[0]);
  };
}

template <typename OpTy> ScalarFn binary() {
  return [](KB &k, ArrayRef<Value> v) -> Value {
    return k.b.create<OpTy>(k.loc, v[0], v[1]);
  };
}

Value clamp(KB &k, Value x, float lo, float hi) {
  if (!std::isinf(lo))
    x = k.b.create<arith::MaximumFOp>(k.loc, x, fconst(k, x, lo));
  if (!std::isinf(hi))
    x = k.b.create<arith::MinimumFOp>(k.loc, x, fconst(k, x, hi));
  return x;
}

/// select(x < 0, neg, x)
Value negativeSide(KB &k, Value x, Value neg) {
  Value isNeg = k.b.create<arith::CmpFOp>(k.loc, arith::CmpFPredicate::OLT, x,
                                          fconst(k, x, 0.f));
  return k.select(isNeg, neg, x);
}

} // namespace

std::optional<ScalarFn> elementwiseBody(Operation *op) {
  float inf = std::numeric_limits<float>::infinity();
  return llvm::TypeSwitch<Operation *, std::optional<ScalarFn>>(op)
      .Case<onnx::AddOp>([](auto) { return binary<arith::AddFOp>(); })
      .Case<onnx::SubOp>([](auto) { return binary<arith::SubFOp>(); })
      .Case<onnx::MulOp>([](auto) { return binary<arith::MulFOp>(); })
      .Case<onnx::DivOp>([](auto) -> ScalarFn {
        return [](KB &k, ArrayRef<Value> v) { return k.divide(v[0], v[1]); };
      })
      .Case<onnx::MaxOp>([](auto) { return binary<arith::MaximumFOp>(); })
      .Case<onnx::MinOp>([](auto) { return binary<arith::MinimumFOp>(); })
      .Case<onnx::ModOp>([](auto) { return binary<arith::RemFOp>(); })
      .Case<onnx::ReluOp>([inf](auto) -> ScalarFn {
        return [inf](KB &k, ArrayRef<Value> v) {
          return clamp(k, v[0], 0.f, inf);
        };
      })
      .Case<onnx::ClipOp>([inf](onnx::ClipOp o) -> ScalarFn {
        float lo = o.getMin() ? o.getMin()->convertToFloat() : -inf,
              hi = o.getMax() ? o.getMax()->convertToFloat() : inf;
        return [lo, hi](KB &k, ArrayRef<Value> v) {
          return clamp(k, v[0], lo, hi);
        };
      })
      .Case<onnx::SigmoidOp>([](auto) -> ScalarFn {
        return [](KB &k, ArrayRef<Value> v) -> Value {
          // 1 / (1 + exp(-x)), as the reference.
          return k.sigmoid(v[0]);
        };
      })
      .Case<onnx::HardSigmoidOp, onnx::HardSwishOp>(
          [](Operation *o) -> ScalarFn {
            float alpha = 1.f / 6.f, beta = 0.5f;
            bool swish = isa<onnx::HardSwishOp>(o);
            if (auto h = dyn_cast<onnx::HardSigmoidOp>(o)) {
              alpha = h.getAlpha().convertToFloat();
              beta = h.getBeta().convertToFloat();
            }
            return [=](KB &k, ArrayRef<Value> v) -> Value {
              OpBuilder &b = k.b;
              Value y = b.create<arith::AddFOp>(
                  k.loc,
                  b.create<arith::MulFOp>(k.loc, v[0], fconst(k, v[0], alpha)),
                  fconst(k, v[0], beta));
              // A finite input (a chain over an accumulator's affine
              // image: KB::argRange) gives a finite y: plain vminps /
              // vmaxps, with no NaN handling (the sign of a zero goes
              // nowhere: 0 * x, or a gate).
              auto fm = arith::FastMathFlagsAttr::get(
                  b.getContext(), k.argRange ? arith::FastMathFlags::nnan |
                                                   arith::FastMathFlags::nsz
                                             : arith::FastMathFlags::none);
              y = b.create<arith::MinimumFOp>(k.loc, y, fconst(k, y, 1.f), fm);
              y = b.create<arith::MaximumFOp>(k.loc, y, fconst(k, y, 0.f), fm);
              return swish ? b.create<arith::MulFOp>(k.loc, v[0], y) : y;
            };
          })
      .Case<onnx::LeakyReluOp>([](onnx::LeakyReluOp o) -> ScalarFn {
        float alpha = o.getAlpha().convertToFloat();
        return [alpha](KB &k, ArrayRef<Value> v) {
          return negativeSide(
              k, v[0],
              k.b.create<arith::MulFOp>(k.loc, v[0], fconst(k, v[0], alpha)));
        };
      })
      .Case<onnx::PReluOp>([](auto) -> ScalarFn {
        return [](KB &k, ArrayRef<Value> v) {
          return negativeSide(k, v[0],
                              k.b.create<arith::MulFOp>(k.loc, v[1], v[0]));
        };
      })
      .Case<onnx::EluOp>([](onnx::EluOp o) -> ScalarFn {
        float alpha = o.getAlpha().convertToFloat();
        return [alpha](KB &k, ArrayRef<Value> v) {
          OpBuilder &b = k.b;
          Value e =
              b.create<arith::SubFOp>(k.loc, k.exp(v[0]), fconst(k, v[0], 1.f));
          return negativeSide(
              k, v[0],
              b.create<arith::MulFOp>(k.loc, e, fconst(k, v[0], alpha)));
        };
      })
      .Case<onnx::SoftplusOp>([](auto) -> ScalarFn {
        return [](KB &k, ArrayRef<Value> v) -> Value {
          // log(exp(x) + 1), as the reference.
          OpBuilder &b = k.b;
          Value e = k.exp(v[0]);
          return b.create<math::LogOp>(
              k.loc, b.create<arith::AddFOp>(k.loc, e, fconst(k, e, 1.f)));
        };
      })
      .Case<onnx::SignOp>([](auto) -> ScalarFn {
        return [](KB &k, ArrayRef<Value> v) {
          OpBuilder &b = k.b;
          Value zero = fconst(k, v[0], 0.f);
          Value pos = b.create<arith::CmpFOp>(k.loc, arith::CmpFPredicate::OGT,
                                              v[0], zero);
          Value neg = b.create<arith::CmpFOp>(k.loc, arith::CmpFPredicate::OLT,
                                              v[0], zero);
          return k.select(pos, fconst(k, v[0], 1.f),
                          k.select(neg, fconst(k, v[0], -1.f), zero));
        };
      })
      .Case<onnx::ReciprocalOp>([](auto) -> ScalarFn {
        return [](KB &k, ArrayRef<Value> v) -> Value {
          return k.b.create<arith::DivFOp>(k.loc, fconst(k, v[0], 1.f), v[0]);
        };
      })
      .Case<onnx::ErfOp>([](auto) -> ScalarFn {
        return [](KB &k, ArrayRef<Value> v) { return k.erf(v[0]); };
      })
      .Case<onnx::TanhOp>([](auto) { return unary<math::TanhOp>(); })
      .Case<onnx::ExpOp>([](auto) -> ScalarFn {
        return [](KB &k, ArrayRef<Value> v) { return k.exp(v[0]); };
      })
      .Case<onnx::SqrtOp>([](auto) { return unary<math::SqrtOp>(); })
      .Case<onnx::LogOp>([](auto) { return unary<math::LogOp>(); })
      .Case<onnx::AbsOp>([](auto) { return unary<math::AbsFOp>(); })
      .Case<onnx::NegOp>([](auto) { return unary<arith::NegFOp>(); })
      .Case<onnx::FloorOp>([](auto) { return unary<math::FloorOp>(); })
      .Case<onnx::CeilOp>([](auto) { return unary<math::CeilOp>(); })
      .Case<onnx::RoundOp>([](auto) { return unary<math::RoundEvenOp>(); })
      .Case<onnx::ScalarMathOpInterface>(
          [](onnx::ScalarMathOpInterface o) -> ScalarFn {
            return [o](KB &k, ArrayRef<Value> v) mutable {
              return o.emitF32(k.b, k.loc, v[0]);
            };
          })
      .Default([](Operation *) { return std::nullopt; });
}

std::string elementwiseKernel(Operation *op) {
  if (isa<onnx::ModOp>(op))
    return "fmod";
  return op->getName().stripDialect().lower();
}

namespace {

/// f32 (not bool, not quantized, not integer) tensor values.
bool isF32(Value v) { return getElementTypeOrSelf(v.getType()).isF32(); }

/// `s` broadcasts to `to` (numpy rules, from the right).
bool broadcastsTo(ArrayRef<int64_t> s, ArrayRef<int64_t> to) {
  if (s.size() > to.size())
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t a = s[s.size() - 1 - i], b = to[to.size() - 1 - i];
    if (a != 1 && a != b)
      return false;
  }
  return true;
}

/// A constant that varies along `axis` of `shape` only (one value per
/// channel), or is a scalar.
bool perChannelOnly(ArrayRef<int64_t> s, ArrayRef<int64_t> shape,
                    int64_t axis) {
  if (!broadcastsTo(s, shape))
    return false;
  int64_t offset = shape.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != 1 && static_cast<int64_t>(i) + offset != axis)
      return false;
  return true;
}

} // namespace

FoldedChain GraphLowering::foldChainAfter(Value v, int64_t channelAxis) {
  FoldedChain r;
  r.exit = v;
  if (std::optional<Chain> c = matchChain(v, nullptr, channelAxis)) {
    r.chain = std::make_shared<ChainProgram>(
        chainProgram(*c, v, channelAxis, nullptr));
    for (Operation *f : c->ops) {
      folded.insert(f);
      r.locs.push_back(f->getLoc());
    }
    r.exit = c->exit;
  }
  return r;
}

std::optional<Chain> GraphLowering::matchChain(Value seed, Operation *first,
                                               int64_t channelAxis) {
  const bool epilogue = !first;
  ArrayRef<int64_t> shape =
      epilogue ? shapeOf(seed) : shapeOf(first->getResult(0));
  if (epilogue && !isF32(seed))
    return std::nullopt;
  llvm::SetVector<Operation *> ops;
  llvm::SetVector<Value> avail;
  if (epilogue)
    avail.insert(seed);

  auto operandOk = [&](Value x) {
    if (avail.contains(x))
      return true;
    if (auto c = constantOf(x)) {
      if (c->numElements() == 1)
        return true;
      if (!isF32(x))
        return false;
      return epilogue ? perChannelOnly(shapeOf(x), shape, channelAxis)
                      : broadcastsTo(shapeOf(x), shape);
    }
    if (epilogue)
      return false;
    // A map reads other tensors, lowered before the chain's first op.
    auto type = dyn_cast<RankedTensorType>(x.getType());
    if (!type || !broadcastsTo(type.getShape(), shape) ||
        !(type.getElementType().isF32() ||
          isa<quant::QuantizedType>(type.getElementType())))
      return false;
    Operation *def = x.getDefiningOp();
    return !def || def->isBeforeInBlock(first);
  };
  auto candidate = [&](Operation *u) {
    if (folded.contains(u) || ops.contains(u) || u->getNumResults() != 1)
      return false;
    Value r = u->getResult(0);
    if (shapeOf(r) != shape)
      return false;
    if (auto q = dyn_cast<qat::QuantizeOp>(u))
      return avail.contains(q.getInput()) &&
             qat::getPerTensorType(q.getOutput().getType());
    if (!isF32(r) || !elementwiseBody(u))
      return false;
    return llvm::all_of(u->getOperands(), operandOk);
  };
  // Exactly one value leaves the chain: the last op's result.
  auto closed = [&]() {
    for (Value v : avail)
      for (Operation *u : v.getUsers())
        if (!ops.contains(u) && v != ops.back()->getResult(0))
          return false;
    return true;
  };

  std::optional<Chain> best;
  auto record = [&]() {
    if (!closed())
      return;
    Chain c;
    c.ops.assign(ops.begin(), ops.end());
    c.exit = ops.back()->getResult(0);
    best = c;
  };
  if (first) {
    if (!candidate(first))
      return std::nullopt;
    ops.insert(first);
    avail.insert(first->getResult(0));
    record();
  }
  for (int step = 0; step < 32; ++step) {
    if (!ops.empty() && isa<qat::QuantizeOp>(ops.back()))
      break;
    Operation *next = nullptr;
    for (Value v : avail)
      for (Operation *u : v.getUsers())
        if ((!next || u->isBeforeInBlock(next)) && candidate(u))
          next = u;
    if (!next)
      break;
    ops.insert(next);
    avail.insert(next->getResult(0));
    record();
  }
  if (!best)
    return std::nullopt;
  // A map of one op is the op's own layer; an epilogue takes any chain.
  if (!epilogue && best->ops.size() < 2)
    return std::nullopt;
  return best;
}

/// Every path from `v` reaches a QuantizeLinear through at most `depth`
/// products, means, pools, clamps and data movement, and nothing else reads
/// it (not a graph output, not a float convolution). Those carry an error
/// of a few ulps of v's magnitude through, under 1e-4 of a step of a
/// quantization whose range is about v's. Sums and differences are left
/// out: cancellation can leave a result far smaller than its operands, and
/// a quantization of that finer than v's error. (A mean can cancel too;
/// squeeze-excitation averages a SiLU, which is under 0.28 below zero.)
static bool feedsOnlyQuantize(Value v, int depth = 3) {
  if (v.use_empty())
    return false;
  for (Operation *u : v.getUsers()) {
    if (isa<qat::QuantizeOp>(u))
      continue;
    if (depth == 0 || u->getNumResults() != 1 ||
        !isa<onnx::MulOp, onnx::GlobalAveragePoolOp, onnx::ReduceMeanOp,
             onnx::AveragePoolOp, onnx::MaxPoolOp, onnx::ReluOp, onnx::ClipOp,
             onnx::ReshapeOp, onnx::FlattenOp, onnx::TransposeOp,
             onnx::SqueezeOp, onnx::UnsqueezeOp, onnx::ConcatOp, onnx::SliceOp>(
            u) ||
        !feedsOnlyQuantize(u->getResult(0), depth - 1))
      return false;
  }
  return true;
}

/// The range rule of a chain op (ChainStep::range), for the ops whose
/// result interval follows from their operands' by a few lines; none for
/// the others (exp, erf, log, ...), which leave the chain unbounded.
static std::function<std::optional<ChainRange>(ArrayRef<ChainRange>)>
stepRange(Operation *op) {
  using Args = ArrayRef<ChainRange>;
  using R = std::optional<ChainRange>;
  auto product = [](ChainRange a, ChainRange b) {
    double v[] = {a.first * b.first, a.first * b.second, a.second * b.first,
                  a.second * b.second};
    return ChainRange{*std::min_element(v, v + 4), *std::max_element(v, v + 4)};
  };
  if (isa<onnx::SigmoidOp, onnx::HardSigmoidOp>(op))
    return [](Args) -> R { return ChainRange{0, 1}; };
  if (isa<onnx::TanhOp>(op))
    return [](Args) -> R { return ChainRange{-1, 1}; };
  // x * HardSigmoid(x): within x * [0, 1].
  if (isa<onnx::HardSwishOp>(op))
    return [=](Args a) -> R { return product(a[0], {0, 1}); };
  if (isa<onnx::ReluOp>(op))
    return [](Args a) -> R {
      return ChainRange{std::max(a[0].first, 0.0), std::max(a[0].second, 0.0)};
    };
  if (auto clip = dyn_cast<onnx::ClipOp>(op)) {
    double lo = clip.getMin() ? clip.getMin()->convertToDouble()
                              : -std::numeric_limits<double>::infinity();
    double hi = clip.getMax() ? clip.getMax()->convertToDouble()
                              : std::numeric_limits<double>::infinity();
    return [=](Args a) -> R {
      return ChainRange{std::min(std::max(a[0].first, lo), hi),
                        std::min(std::max(a[0].second, lo), hi)};
    };
  }
  if (isa<onnx::MulOp>(op))
    return [=](Args a) -> R { return product(a[0], a[1]); };
  if (isa<onnx::AddOp>(op))
    return [](Args a) -> R {
      return ChainRange{a[0].first + a[1].first, a[0].second + a[1].second};
    };
  if (isa<onnx::SubOp>(op))
    return [](Args a) -> R {
      return ChainRange{a[0].first - a[1].second, a[0].second - a[1].first};
    };
  return nullptr;
}

/// A Mul step of x and sigmoid(x) (an earlier step's) computes SiLU as
/// KB::silu: x / (1 + exp(-x)), a division and no product. x becomes its
/// only argument, whose range is KB::argRange while the step is emitted;
/// the product's range takes the sigmoid's [0, 1]. Where nothing else reads
/// the sigmoid step, ChainProgram::run emits nothing for it. Call it after
/// step.range is set.
static void fuseSilu(ChainStep &step,
                     const llvm::DenseMap<int, int> &sigmoidOf) {
  if (step.args.size() != 2 || step.args[0].kind != ChainArg::Slot ||
      step.args[1].kind != ChainArg::Slot)
    return;
  for (int i = 0; i < 2; ++i) {
    auto it = sigmoidOf.find(step.args[1 - i].slot);
    if (it == sigmoidOf.end() || it->second != step.args[i].slot)
      continue;
    step.args = {step.args[i]};
    step.fn = [](KB &k, ArrayRef<Value> v) { return k.silu(v[0]); };
    step.range = [product = step.range](ArrayRef<ChainRange> a) {
      return product({a[0], ChainRange{0, 1}});
    };
    return;
  }
}

ChainProgram GraphLowering::chainProgram(const Chain &c, Value seed,
                                         int64_t channelAxis,
                                         std::vector<Src> *mapInputs) {
  ChainProgram p;
  llvm::DenseMap<Value, int> slot;
  if (seed) {
    slot[seed] = 0;
    p.inputs = 1;
  }
  llvm::DenseSet<Value> inside;
  for (Operation *op : c.ops)
    inside.insert(op->getResult(0));
  // Map mode: every operand from outside but scalar constants is an input,
  // numbered before the steps.
  if (mapInputs)
    for (Operation *op : c.ops)
      for (Value x : op->getOperands()) {
        auto cst = constantOf(x);
        if (inside.contains(x) || slot.count(x) ||
            (cst && cst->numElements() == 1))
          continue;
        slot[x] = p.inputs++;
        mapInputs->push_back(srcOf(x));
      }
  p.quantized = !c.ops.empty() && (isa<qat::QuantizeOp>(c.ops.back()) ||
                                   feedsOnlyQuantize(c.exit));
  // The input slot of each sigmoid step's result.
  llvm::DenseMap<int, int> sigmoidOf;
  for (Operation *op : c.ops) {
    if (!p.name.empty())
      p.name += "+";
    p.name += isa<qat::QuantizeOp>(op) ? "quantize" : elementwiseKernel(op);
    if (isa<qat::QuantizeOp>(op)) {
      // The producer or the map quantizes the last value.
      slot[op->getResult(0)] = slot.lookup(op->getOperand(0));
      continue;
    }
    ChainStep step;
    step.fn = *elementwiseBody(op);
    // Our polynomial exp and sigmoid, and MLIR's expansions of the others.
    p.approximate |=
        isa<onnx::SigmoidOp, onnx::ExpOp, onnx::EluOp, onnx::SoftplusOp,
            onnx::ErfOp, onnx::TanhOp, onnx::LogOp>(op);
    for (Value x : op->getOperands()) {
      ChainArg a;
      if (slot.count(x)) {
        a.slot = slot[x];
      } else if (auto cst = constantOf(x); cst && cst->numElements() == 1) {
        a.kind = ChainArg::Scalar;
        a.value = floatsOf(*cst)[0];
      } else if (!mapInputs) {
        // Per channel (matchChain checked it).
        std::vector<float> vals = floatsOf(*cst);
        auto s = shapeOf(x);
        int64_t channels = shapeOf(seed)[channelAxis];
        if (vals.size() == 1 || s.empty())
          vals.assign(channels, vals[0]);
        a.kind = ChainArg::Channel;
        a.offset = addChannels(vals, channels);
        auto [lo, hi] = std::minmax_element(vals.begin(), vals.end());
        a.lo = *lo;
        a.hi = *hi;
      } else {
        llvm_unreachable("map inputs are numbered above");
      }
      step.args.push_back(a);
    }
    step.range = stepRange(op);
    int out = p.inputs + p.steps.size();
    if (isa<onnx::SigmoidOp>(op) && step.args[0].kind == ChainArg::Slot)
      sigmoidOf[out] = step.args[0].slot;
    if (isa<onnx::MulOp>(op))
      fuseSilu(step, sigmoidOf);
    slot[op->getResult(0)] = out;
    p.steps.push_back(std::move(step));
  }
  p.result = slot.lookup(c.exit);
  return p;
}

/// The range of operand `a`, given the values' ranges so far.
static std::optional<ChainRange>
rangeOf(const ChainArg &a, ArrayRef<std::optional<ChainRange>> values) {
  switch (a.kind) {
  case ChainArg::Slot:
    return values[a.slot];
  case ChainArg::Scalar:
    return ChainRange{a.value, a.value};
  case ChainArg::Channel:
    return ChainRange{a.lo, a.hi};
  }
  llvm_unreachable("unknown chain argument");
}

std::vector<std::optional<ChainRange>>
ChainProgram::ranges(std::optional<ChainRange> in) const {
  std::vector<std::optional<ChainRange>> r(inputs);
  if (inputs == 1)
    r[0] = in;
  for (const ChainStep &s : steps) {
    SmallVector<ChainRange> args;
    for (const ChainArg &a : s.args) {
      std::optional<ChainRange> v = rangeOf(a, r);
      if (!v)
        break;
      args.push_back(*v);
    }
    std::optional<ChainRange> out;
    if (args.size() == s.args.size() && s.range)
      out = s.range(args);
    if (out && (!std::isfinite(out->first) || !std::isfinite(out->second)))
      out.reset();
    r.push_back(out);
  }
  return r;
}

Value ChainProgram::run(KB &k, ArrayRef<Value> in,
                        llvm::function_ref<Value(int64_t)> channel) const {
  SmallVector<Value> vals(in.begin(), in.end());
  llvm::SaveAndRestore<bool> coarse(k.quantizedChain, quantized);
  // Each value's range where the input's is known (KB::chainInputRange)
  // and the steps before have rules: a step's first operand's is
  // KB::argRange while the step is emitted.
  std::vector<std::optional<ChainRange>> range = ranges(k.chainInputRange);
  // The steps the result reads (fuseSilu leaves its sigmoid unread).
  std::vector<bool> live(inputs + steps.size(), false);
  live[result] = true;
  for (int i = steps.size() - 1; i >= 0; --i)
    if (live[inputs + i])
      for (const ChainArg &a : steps[i].args)
        if (a.kind == ChainArg::Slot)
          live[a.slot] = true;
  for (const ChainStep &s : steps) {
    if (!live[vals.size()]) {
      vals.push_back(Value());
      continue;
    }
    llvm::SaveAndRestore<std::optional<ChainRange>> argRange(
        k.argRange, s.args.empty() ? std::nullopt : rangeOf(s.args[0], range));
    SmallVector<Value> args;
    for (const ChainArg &a : s.args)
      args.push_back(a.kind == ChainArg::Slot      ? vals[a.slot]
                     : a.kind == ChainArg::Channel ? channel(a.offset)
                     : vals.empty()                ? k.cf(a.value)
                                    : fconst(k, vals[0], a.value));
    vals.push_back(s.fn(k, args));
  }
  return vals[result];
}

int GraphLowering::epilogueOutput(
    Value v, llvm::function_ref<plan::Layout(Value)> layout,
    int64_t channelAxis, Epilogue &ep) {
  std::optional<Chain> c = matchChain(v, nullptr, channelAxis);
  if (!c) {
    int o = resultTensor(v, layout(v));
    fillEpilogueOut(ep, tensors[o]);
    return o;
  }
  auto program =
      std::make_shared<ChainProgram>(chainProgram(*c, v, channelAxis, nullptr));
  for (Operation *op : c->ops)
    folded.insert(op);
  int o = resultTensor(c->exit, layout(c->exit));
  fillEpilogueOut(ep, tensors[o]);
  ep.chainName = " +" + program->name;
  ep.chainApproximate = program->approximate;
  ep.chainBound = [program](ChainRange in) {
    return program->ranges(in)[program->result];
  };
  ep.chain = [program](KB &k, Value y,
                       llvm::function_ref<Value(int64_t)> channels) {
    return program->run(k, {y}, channels);
  };
  return o;
}

std::optional<LogicalResult> GraphLowering::tryFusedMap(Operation *op) {
  std::optional<Chain> c = matchChain({}, op, -1);
  if (!c)
    return std::nullopt;
  std::vector<Src> ins;
  auto program = std::make_shared<ChainProgram>(chainProgram(*c, {}, -1, &ins));
  for (Operation *f : c->ops)
    folded.insert(f);
  SmallVector<Location> locs;
  for (Operation *f : c->ops)
    locs.push_back(f->getLoc());
  return lowerMap(
      op, std::move(ins), program->name,
      [program](KB &k, ArrayRef<Value> v) {
        return program->run(k, v, [](int64_t) { return Value(); });
      },
      c->exit, FusedLoc::get(op->getContext(), locs), /*lanes=*/true);
}

LogicalResult GraphLowering::lowerPointwise(Operation *op) {
  // A scalar math op states its code for f32 only (ONNX defines it on
  // floats; f64 and f16 models are refused at the graph's inputs).
  if (isa<onnx::ScalarMathOpInterface>(op) && !isF32(op->getOperand(0)))
    return op->emitError("qatc compiles ")
           << op->getName().stripDialect() << " on f32 tensors only, not "
           << getElementTypeOrSelf(op->getOperand(0).getType());
  if (auto fusedMap = tryFusedMap(op))
    return *fusedMap;
  std::vector<Src> ins;
  for (Value x : op->getOperands())
    ins.push_back(srcOf(x));
  return lowerMap(op, std::move(ins), elementwiseKernel(op),
                  *elementwiseBody(op), {}, std::nullopt, /*lanes=*/true);
}

std::optional<LogicalResult>
GraphLowering::lowerPointwiseFamily(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case<onnx::SigmoidOp, onnx::HardSigmoidOp, onnx::HardSwishOp,
            onnx::ErfOp, onnx::TanhOp, onnx::ExpOp, onnx::SqrtOp,
            onnx::LeakyReluOp, onnx::LogOp, onnx::AbsOp, onnx::NegOp,
            onnx::ReciprocalOp, onnx::FloorOp, onnx::CeilOp, onnx::RoundOp,
            onnx::SignOp, onnx::SoftplusOp, onnx::EluOp, onnx::PReluOp,
            onnx::ScalarMathOpInterface>(
          [&](Operation *o) { return lowerPointwise(o); })
      .Case<onnx::ReluOp>([&](auto o) {
        if (auto fusedMap = tryFusedMap(o))
          return *fusedMap;
        return lowerClamp(o, o.getX(), 0.0,
                          std::numeric_limits<double>::infinity());
      })
      .Case<onnx::ClipOp>([&](auto o) {
        if (isIntegerValue(o.getX())) {
          // Integers clamp exactly (bounds are whole numbers of the
          // data's type).
          std::optional<int64_t> lo, hi;
          if (o.getMin())
            lo = static_cast<int64_t>(o.getMin()->convertToDouble());
          if (o.getMax())
            hi = static_cast<int64_t>(o.getMax()->convertToDouble());
          return lowerIntMap(
              o, {intSrcOf(o.getX())}, "clip",
              [=](KB &k, ArrayRef<Value> v) -> Value {
                Value x = v[0];
                if (lo)
                  x = k.b.create<arith::MaxSIOp>(k.loc, x, k.c(*lo));
                if (hi)
                  x = k.b.create<arith::MinSIOp>(k.loc, x, k.c(*hi));
                return x;
              });
        }
        if (auto fusedMap = tryFusedMap(o))
          return *fusedMap;
        double inf = std::numeric_limits<double>::infinity();
        return lowerClamp(o, o.getX(),
                          o.getMin() ? o.getMin()->convertToDouble() : -inf,
                          o.getMax() ? o.getMax()->convertToDouble() : inf);
      })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace qatc::codegen::lowering
