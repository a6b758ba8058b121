//===- KernelBuilder.cpp - micro-kernels of the layer functions -----------===//
//
// The dense kernel computes a tile of MR output pixels x NV*16 output
// channels with MR*NV vector accumulators carried through the K loop as
// scf.for iter_args (LLVM keeps them in registers), one broadcast of 4 input
// bytes (int8) or 1 float (fp32) per pixel and K step, and NV weight vectors
// per K step. Padded taps read a row holding the padding value (the
// activation zero point, or 0.0), so no tap is skipped and the zero-point
// correction folded into the initial accumulators stays exact.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "qatc/Codegen/ExactQuotient.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "qatc/Runtime/PlanFormat.h"
#include "llvm/Support/SaveAndRestore.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace mlir;
using namespace qatc::codegen;

/// 1.5 * 2^23 and its bits. Its ulp is 1 for +-2^22 around it, so adding it
/// to an f32 rounds that to an integer, which the sum's bits less
/// kMagicBits then hold: no fptosi, whose NaN is poison.
static constexpr float kMagic = 12582912.f;
static constexpr int32_t kMagicBits = 0x4B400000;

KB::KB(OpBuilder &b, Location loc, Value arena, Value weights, Value share,
       Value nthreads)
    : b(b), loc(loc), arena(arena), weights(weights), nthreads(nthreads) {
  i8 = b.getI8Type();
  i32 = b.getI32Type();
  i64 = b.getI64Type();
  f32 = b.getF32Type();
  ptr = LLVM::LLVMPointerType::get(b.getContext());
  // plan::packShare.
  shareLo = b.create<arith::AndIOp>(loc, share, c(0xffffffff));
  shareHi = b.create<arith::ShRUIOp>(loc, share, c(32));
}

Value KB::c(int64_t v) { return b.create<arith::ConstantIntOp>(loc, v, 64); }
Value KB::cf(float v) {
  return b.create<arith::ConstantFloatOp>(loc, llvm::APFloat(v),
                                          b.getF32Type());
}
Value KB::add(Value a, Value x) { return b.create<arith::AddIOp>(loc, a, x); }
Value KB::sub(Value a, Value x) { return b.create<arith::SubIOp>(loc, a, x); }
Value KB::mul(Value a, Value x) { return b.create<arith::MulIOp>(loc, a, x); }
Value KB::div(Value a, Value x) { return b.create<arith::DivUIOp>(loc, a, x); }
Value KB::rem(Value a, Value x) { return b.create<arith::RemUIOp>(loc, a, x); }
Value KB::lt(Value a, Value x) {
  return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, a, x);
}
Value KB::andi(Value a, Value x) { return b.create<arith::AndIOp>(loc, a, x); }
Value KB::select(Value cnd, Value a, Value x) {
  return b.create<arith::SelectOp>(loc, cnd, a, x);
}
Value KB::gep(Value base, Value offset) {
  return b.create<LLVM::GEPOp>(loc, ptr, i8, base, ValueRange{offset});
}
Value KB::entryAlloca(int64_t bytes) {
  Operation *fn = b.getInsertionBlock()->getParentOp();
  while (!isa<func::FuncOp>(fn))
    fn = fn->getParentOp();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&fn->getRegion(0).front());
  auto type = LLVM::LLVMArrayType::get(i8, bytes);
  return b.create<LLVM::AllocaOp>(loc, ptr, type, c(1), /*alignment=*/64);
}

Value KB::load(Type t, Value p) {
  return b.create<LLVM::LoadOp>(loc, t, p, /*alignment=*/1);
}
void KB::store(Value v, Value p) {
  b.create<LLVM::StoreOp>(loc, v, p, /*alignment=*/1);
}
/// Whether a masked load or store of `t` under `mask` is better branched on
/// the whole mask: without AVX-512 no instruction loads or stores bytes or
/// words under a mask, and LLVM does it lane by lane (a test, a branch and
/// a vpinsrb / vpextrb per byte). Where the mask is not a constant (the
/// channels of a block that may pass the last) every lane is set in all
/// but the last block.
static bool branchOnMask(const KB &k, VectorType t, Value mask) {
  return !k.avx512 && t.getElementTypeBitWidth() < 32 &&
         !matchPattern(mask, m_Constant());
}

Value KB::maskedLoad(VectorType t, Value p, Value mask, Value passThru) {
  auto masked = [&]() -> Value {
    return b.create<LLVM::MaskedLoadOp>(loc, t, p, mask, ValueRange{passThru},
                                        1u);
  };
  if (!branchOnMask(*this, t, mask))
    return masked();
  Value all =
      b.create<vector::ReductionOp>(loc, vector::CombiningKind::AND, mask);
  return ifElseValues(
      all, [&] { return SmallVector<Value>{load(t, p)}; },
      [&] { return SmallVector<Value>{masked()}; })[0];
}
void KB::maskedStore(Value v, Value p, Value mask) {
  // EfficientNet-B0's 144-channel layers in blocks of 32 stored byte by
  // byte in every tile.
  if (branchOnMask(*this, cast<VectorType>(v.getType()), mask)) {
    Value all =
        b.create<vector::ReductionOp>(loc, vector::CombiningKind::AND, mask);
    ifElse(
        all, [&] { store(v, p); },
        [&] { b.create<LLVM::MaskedStoreOp>(loc, v, p, mask, 1u); });
    return;
  }
  b.create<LLVM::MaskedStoreOp>(loc, v, p, mask, 1u);
}
Value KB::prefixMask(int64_t lanes, Value n) {
  SmallVector<int32_t> iota;
  for (int64_t i = 0; i < lanes; ++i)
    iota.push_back(static_cast<int32_t>(i));
  auto vt = VectorType::get({lanes}, i32);
  Value steps = b.create<arith::ConstantOp>(
      loc, vt, DenseElementsAttr::get(vt, ArrayRef<int32_t>(iota)));
  Value n32 = b.create<arith::TruncIOp>(loc, i32, n);
  return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, steps,
                                 splat(n32, lanes));
}
Value KB::channelMask(Value c, int64_t count, int64_t step) {
  if (count % step == 0) {
    auto vt = VectorType::get({16}, b.getI1Type());
    return b.create<arith::ConstantOp>(loc, vt,
                                       DenseElementsAttr::get(vt, true));
  }
  return prefixMask(16, sub(this->c(count), c));
}
Value KB::splat(Value scalar, int64_t lanes) {
  return b.create<vector::SplatOp>(
      loc, VectorType::get({lanes}, scalar.getType()), scalar);
}
Value KB::splatF(float v, int64_t lanes) {
  auto vt = VectorType::get({lanes}, f32);
  return b.create<arith::ConstantOp>(loc, vt, DenseElementsAttr::get(vt, v));
}
Value KB::splatI(int64_t v, int64_t lanes, Type elem) {
  auto vt = VectorType::get({lanes}, elem);
  return b.create<arith::ConstantOp>(
      loc, vt,
      DenseElementsAttr::get(
          vt, APInt(elem.getIntOrFloatBitWidth(), v, /*isSigned=*/true)));
}

Value KB::concat(ArrayRef<Value> parts) {
  if (parts.size() == 1)
    return parts[0];
  auto vt = cast<VectorType>(parts[0].getType());
  int64_t n = vt.getNumElements();
  auto wide = VectorType::get({n * static_cast<int64_t>(parts.size())},
                              vt.getElementType());
  Value out = b.create<arith::ConstantOp>(loc, wide, b.getZeroAttr(wide));
  for (size_t i = 0; i < parts.size(); ++i)
    out = b.create<vector::InsertStridedSliceOp>(
        loc, parts[i], out, ArrayRef<int64_t>{n * static_cast<int64_t>(i)},
        ArrayRef<int64_t>{1});
  return out;
}

Value KB::tile(Value v, int64_t times) {
  return concat(SmallVector<Value>(times, v));
}

Value KB::slice(Value v, int64_t i, int64_t lanes) {
  if (cast<VectorType>(v.getType()).getNumElements() == lanes)
    return v;
  return b.create<vector::ExtractStridedSliceOp>(
      loc, v, ArrayRef<int64_t>{lanes * i}, ArrayRef<int64_t>{lanes},
      ArrayRef<int64_t>{1});
}

Value KB::reduceLanes(Value v, bool max, bool skipNaN) {
  // Halves added (or maxed) lane by lane: log2(n) steps. LLVM's own
  // vector.reduce.fadd, without reassociation allowed, adds the lanes one
  // after another: 16 dependent scalar adds.
  auto flags = arith::FastMathFlagsAttr::get(
      b.getContext(),
      skipNaN ? arith::FastMathFlags::nnan : arith::FastMathFlags::none);
  for (int64_t n = cast<VectorType>(v.getType()).getNumElements(); n > 1;
       n /= 2) {
    Value lo = slice(v, 0, n / 2), hi = slice(v, 1, n / 2);
    v = max ? b.create<arith::MaximumFOp>(loc, lo, hi, flags).getResult()
            : b.create<arith::AddFOp>(loc, lo, hi).getResult();
  }
  return b.create<vector::ExtractOp>(loc, v, ArrayRef<int64_t>{0});
}

Value KB::per16(ValueRange operands,
                llvm::function_ref<Value(ArrayRef<Value>)> fn) {
  int64_t n = cast<VectorType>(operands[0].getType()).getNumElements();
  SmallVector<Value> parts;
  for (int64_t i = 0; i < n / 16; ++i) {
    SmallVector<Value> slices;
    for (Value v : operands)
      slices.push_back(slice(v, i));
    parts.push_back(fn(slices));
  }
  return concat(parts);
}

void KB::ifElse(Value cond, llvm::function_ref<void()> then,
                llvm::function_ref<void()> otherwise) {
  auto branch = [&](llvm::function_ref<void()> fn) {
    return [&, fn](OpBuilder &nb, Location) {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
      fn();
      b.create<scf::YieldOp>(loc);
    };
  };
  if (otherwise)
    b.create<scf::IfOp>(loc, cond, branch(then), branch(otherwise));
  else
    b.create<scf::IfOp>(loc, cond, branch(then));
}

SmallVector<Value>
KB::ifElseValues(Value cond, llvm::function_ref<SmallVector<Value>()> then,
                 llvm::function_ref<SmallVector<Value>()> otherwise) {
  auto branch = [&](llvm::function_ref<SmallVector<Value>()> fn) {
    return [&, fn](OpBuilder &nb, Location) {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
      b.create<scf::YieldOp>(loc, fn());
    };
  };
  auto op = b.create<scf::IfOp>(loc, cond, branch(then), branch(otherwise));
  return SmallVector<Value>(op.getResults());
}

void KB::loop(Value lb, Value ub, int64_t step,
              llvm::function_ref<void(Value)> body) {
  b.create<scf::ForOp>(loc, lb, ub, c(step), ValueRange{},
                       [&](OpBuilder &nb, Location, Value iv, ValueRange) {
                         OpBuilder::InsertionGuard g(b);
                         b.setInsertionPoint(nb.getInsertionBlock(),
                                             nb.getInsertionPoint());
                         body(iv);
                         b.create<scf::YieldOp>(loc);
                       });
}

SmallVector<Value>
KB::loop(Value lb, Value ub, int64_t step, ValueRange init,
         llvm::function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto op = b.create<scf::ForOp>(
      loc, lb, ub, c(step), init,
      [&](OpBuilder &nb, Location, Value iv, ValueRange args) {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        SmallVector<Value> next = body(iv, args);
        b.create<scf::YieldOp>(loc, next);
      });
  return SmallVector<Value>(op.getResults());
}

Value KB::shareItem(Value at, int64_t total) {
  // Exact in i64: at <= kShareOne = 2^16, and no layer has 2^47 items.
  return b.create<arith::DivUIOp>(loc, mul(at, c(total)), c(plan::kShareOne));
}

std::pair<Value, Value> KB::share(int64_t total) {
  return {shareItem(shareLo, total), shareItem(shareHi, total)};
}

Value KB::walksDown() {
  return andi(
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, shareLo, c(0)),
      lt(shareHi, c(plan::kShareOne)));
}

void KB::sharedLoop(Value begin, Value end, function_ref<void(Value)> body) {
  Value down = walksDown(), last = sub(end, c(1));
  loop(c(0), sub(end, begin), 1,
       [&](Value j) { body(select(down, sub(last, j), add(begin, j))); });
}

std::pair<Value, Value> KB::share(int64_t total, int64_t weight,
                                  int64_t lastCount, int64_t lastWeight) {
  if (lastCount == 0 || lastWeight == weight)
    return share(total);
  const int64_t full = total - lastCount, fullWeight = full * weight;
  const int64_t sum = fullWeight + lastCount * lastWeight;
  // The first item of the share from boundary `at`: where the weight before
  // it is nearest that part of the sum.
  auto first = [&](Value at) {
    Value target = shareItem(at, sum);
    Value inFull = div(add(target, c(weight / 2)), c(weight));
    Value inLast =
        add(c(full), div(add(sub(target, c(fullWeight)), c(lastWeight / 2)),
                         c(lastWeight)));
    Value item = select(lt(target, c(fullWeight)), inFull, inLast);
    return b.create<arith::MinSIOp>(loc, item, c(total)).getResult();
  };
  return {first(shareLo), first(shareHi)};
}

Value KB::at(int64_t offset, Value index, int64_t elemBytes) {
  return gep(arena, add(c(offset), mul(index, c(elemBytes))));
}

Value KB::weightsAt(int64_t offset, Value index, int64_t elemBytes) {
  return gep(weights, add(c(offset), mul(index, c(elemBytes))));
}

Value KB::divide(Value x, Value d) {
  auto division = [&] { return b.create<arith::DivFOp>(loc, x, d); };
  FloatAttr cst;
  DenseElementsAttr splat;
  float c;
  if (matchPattern(d, m_Constant(&cst)))
    c = cst.getValueAsDouble();
  else if (matchPattern(d, m_Constant(&splat)) && splat.isSplat())
    c = splat.getSplatValue<float>();
  else
    return division();
  std::optional<float> z =
      reciprocalDivision ? exactReciprocal(c) : std::nullopt;
  // Below 2^126 min(1, |c|) no step overflows (ExactQuotient.h).
  if (!z || !argRange ||
      std::max(std::abs(argRange->first), std::abs(argRange->second)) >
          std::ldexp(std::min(1.0, std::abs(double(c))), 126))
    return division();
  Value q0 = b.create<arith::MulFOp>(loc, x, floatLike(x.getType(), *z));
  Value r = b.create<math::FmaOp>(loc, q0, floatLike(x.getType(), -c), x);
  return b.create<math::FmaOp>(loc, r, floatLike(x.getType(), *z), q0);
}

/// erf over slices of `lanes` lanes of `x` (KB::erf): [0, 4) in `lanes`
/// intervals of 4 / lanes, each a polynomial in t = |x| - i * 4 / lanes
/// whose coefficients of t^c are row c of `coefs` ([degree + 1][lanes], one
/// lane per interval; interval 0 is x q(x^2), which keeps small x's
/// relative precision). Every coefficient is picked for its lane's interval
/// by the vpermps `permute`; the interval comes from `truncate`
/// (vcvttps2dq, not fptosi, which is poison for NaN: a NaN's index is some
/// interval, its t NaN).
static Value erfByIntervals(KB &k, Value x, int64_t lanes,
                            ArrayRef<float> coefs, StringRef permute,
                            llvm::function_ref<Value(Value)> truncate) {
  OpBuilder &b = k.b;
  auto vf = VectorType::get({lanes}, k.f32);
  const int64_t degree = static_cast<int64_t>(coefs.size()) / lanes - 1;
  const float width = 4.f / static_cast<float>(lanes);
  int64_t n = cast<VectorType>(x.getType()).getNumElements();
  SmallVector<Value> parts;
  for (int64_t h = 0; h < n / lanes; ++h) {
    Value v = k.slice(x, h, lanes);
    // |x| below 4 (from 4 on erf rounds to 1), NaN kept: c < a ? c : a is
    // one vminps, which returns a where either is NaN.
    Value a = b.create<math::AbsFOp>(k.loc, v);
    Value top = k.splatF(3.9999998f, lanes);
    a = k.select(
        b.create<arith::CmpFOp>(k.loc, arith::CmpFPredicate::OLT, top, a), top,
        a);
    // The interval and t = a - i * width, exact (Sterbenz).
    Value i = truncate(
        b.create<arith::MulFOp>(k.loc, a, k.splatF(1.f / width, lanes)));
    Value t =
        b.create<math::FmaOp>(k.loc, b.create<arith::SIToFPOp>(k.loc, vf, i),
                              k.splatF(-width, lanes), a);
    auto coef = [&](int64_t c) -> Value {
      Value table = b.create<arith::ConstantOp>(
          k.loc, vf, DenseElementsAttr::get(vf, coefs.slice(c * lanes, lanes)));
      return b
          .create<LLVM::CallIntrinsicOp>(k.loc, vf, permute,
                                         ValueRange{table, i})
          .getResult(0);
    };
    Value p = coef(degree);
    for (int64_t c = degree - 1; c >= 0; --c)
      p = b.create<math::FmaOp>(k.loc, p, t, coef(c));
    parts.push_back(b.create<math::CopySignOp>(k.loc, p, v));
  }
  return k.concat(parts);
}

Value KB::erf(Value x) {
  auto vt = dyn_cast<VectorType>(x.getType());
  // Our own polynomials on FMA targets (erfByIntervals): 16 intervals of
  // 1/4 per 16 lanes with AVX-512, 8 of 1/2 per 8 lanes (one ymm vpermps)
  // on AVX2; elsewhere MLIR's expansion.
  const int64_t lanes = avx512 ? 16 : 8;
  if (!hasFma || (vt && vt.getNumElements() % lanes))
    return b.create<math::ErfOp>(loc, x);
  if (!vt) {
    // Lane 0 of the vector code: a map's remainder agrees with its body.
    Value all = erf(splat(x, lanes));
    return b.create<vector::ExtractOp>(loc, all, ArrayRef<int64_t>{0});
  }
  if (!avx512) {
    // Degree 9 per interval of 1/2 (`scripts/erf_coefficients.py --avx2`
    // fits them and measures 2.38 ulps at worst). MLIR's expansion, which
    // this replaces there, took about 60 instructions and a vdivps per 8
    // lanes; this takes 27 and none.
    static const float coefs8[10][8] = {
        {0.000000000e+00f, 5.204998851e-01f, 8.427007794e-01f, 9.661051631e-01f,
         9.953222871e-01f, 9.995930195e-01f, 9.999778867e-01f,
         9.999992847e-01f},
        {1.128379226e+00f, 8.787825704e-01f, 4.151074886e-01f, 1.189302877e-01f,
         2.066698484e-02f, 2.178284340e-03f, 1.392530539e-04f,
         5.399424481e-06f},
        {0.000000000e+00f, -4.393912852e-01f, -4.151075482e-01f,
         -1.783954203e-01f, -4.133396968e-02f, -5.445713177e-03f,
         -4.177590890e-04f, -1.889785381e-05f},
        {-3.761261404e-01f, -1.464637369e-01f, 1.383702308e-01f,
         1.387514621e-01f, 4.822292551e-02f, 8.350162767e-03f, 7.890990819e-04f,
         4.229193655e-05f},
        {0.000000000e+00f, 1.830798090e-01f, 6.917043030e-02f,
         -4.459194466e-02f, -3.444440290e-02f, -8.623338304e-03f,
         -1.044381293e-03f, -6.767094601e-05f},
        {1.128293276e-01f, 7.316946983e-03f, -6.907660514e-02f,
         -1.491750870e-02f, 1.308417600e-02f, 6.124655716e-03f,
         1.016458147e-03f, 8.176088886e-05f},
        {0.000000000e+00f, -4.997860640e-02f, 4.107500892e-03f,
         1.955592260e-02f, 4.857910390e-04f, -2.832433442e-03f,
         -7.378696464e-04f, -7.609009481e-05f},
        {-2.676359750e-02f, 5.079809111e-03f, 1.663022488e-02f,
         -5.373567808e-03f, -3.471822012e-03f, 6.408133195e-04f,
         3.911595559e-04f, 5.336813047e-05f},
        {0.000000000e+00f, 1.101966668e-02f, -7.426303346e-03f,
         -1.347068930e-03f, 1.803327468e-03f, 8.583038289e-05f,
         -1.391557307e-04f, -2.556468826e-05f},
        {4.730064888e-03f, -3.862441052e-03f, 8.230036474e-04f,
         8.929072646e-04f, -3.582159115e-04f, -7.389645180e-05f,
         2.541108370e-05f, 6.235134151e-06f},
    };
    auto v8i = VectorType::get({8}, i32);
    return erfByIntervals(*this, x, 8, ArrayRef<float>(&coefs8[0][0], 80),
                          "llvm.x86.avx2.permps", [&](Value scaled) {
                            return b
                                .create<LLVM::CallIntrinsicOp>(
                                    loc, v8i, "llvm.x86.avx.cvtt.ps2dq.256",
                                    ValueRange{scaled})
                                .getResult(0);
                          });
  }
  // Degree 7 per interval of 1/4. scripts/erf_coefficients.py fits them
  // and measures 2.26 ulps at worst; MLIR's expansion (three rational
  // pieces chosen by 22 selects, and a vdivps) measured 4.33, at about
  // twice the instructions.
  static const float coefs16[8][16] = {
      {0.000000000e+00f, 2.763263881e-01f, 5.204998851e-01f, 7.111556530e-01f,
       8.427007794e-01f, 9.229001403e-01f, 9.661051631e-01f, 9.866716862e-01f,
       9.953222871e-01f, 9.985373020e-01f, 9.995930195e-01f, 9.998993874e-01f,
       9.999778867e-01f, 9.999957085e-01f, 9.999992847e-01f, 9.999998808e-01f},
      {1.128379226e+00f, 1.060014129e+00f, 8.787825704e-01f, 6.429310441e-01f,
       4.151074886e-01f, 2.365211248e-01f, 1.189302877e-01f, 5.277499557e-02f,
       2.066698484e-02f, 7.142319344e-03f, 2.178284340e-03f, 5.862772232e-04f,
       1.392530248e-04f, 2.918901191e-05f, 5.399421752e-06f, 8.814306511e-07f},
      {0.000000000e+00f, -2.650037408e-01f, -4.393914342e-01f,
       -4.821982682e-01f, -4.151073694e-01f, -2.956513166e-01f,
       -1.783954203e-01f, -9.235627204e-02f, -4.133399948e-02f,
       -1.607022993e-02f, -5.445711780e-03f, -1.612259774e-03f,
       -4.177568771e-04f, -9.486317867e-05f, -1.889755913e-05f,
       -3.305242444e-06f},
      {-3.761261404e-01f, -3.091636598e-01f, -1.464592069e-01f,
       2.678791061e-02f, 1.383653730e-01f, 1.675329506e-01f, 1.387515068e-01f,
       9.015815705e-02f, 4.822387174e-02f, 2.172496356e-02f, 8.350126445e-03f,
       2.760304371e-03f, 7.890272536e-04f, 1.957725181e-04f, 4.228151738e-05f,
       7.965472832e-06f},
      {0.000000000e+00f, 1.268690974e-01f, 1.830067486e-01f, 1.506994963e-01f,
       6.924394518e-02f, -6.114058197e-03f, -4.459043965e-02f,
       -4.811573774e-02f, -3.445930779e-02f, -1.908997074e-02f,
       -8.623030968e-03f, -3.256799188e-03f, -1.043236232e-03f,
       -2.859765955e-04f, -6.749440217e-05f, -1.377483295e-05f},
      {1.128147691e-01f, 8.100293577e-02f, 7.962864824e-03f, -5.333163217e-02f,
       -6.968733668e-02f, -4.757536575e-02f, -1.494587399e-02f,
       6.737281568e-03f, 1.321263704e-02f, 1.071569882e-02f, 6.123860832e-03f,
       2.744736616e-03f, 1.006517792e-03f, 3.086275537e-04f, 8.015667845e-05f,
       1.778491242e-05f},
      {0.000000000e+00f, -4.498386756e-02f, -5.319637433e-02f,
       -2.659622394e-02f, 6.954327226e-03f, 2.322168648e-02f, 1.976446435e-02f,
       8.450780995e-03f, -1.338295697e-04f, -3.192969365e-03f,
       -2.836745000e-03f, -1.606288017e-03f, -6.897216081e-04f,
       -2.381736558e-04f, -6.802323333e-05f, -1.633505963e-05f},
      {-2.624071017e-02f, -5.454438739e-03f, 1.378283277e-02f, 1.848155446e-02f,
       9.594081901e-03f, -1.363869989e-03f, -6.134791765e-03f,
       -4.915608559e-03f, -1.879358198e-03f, 1.114219049e-04f, 6.754803471e-04f,
       5.279979086e-04f, 2.673522977e-04f, 1.029130945e-04f, 3.184594607e-05f,
       8.149155292e-06f},
  };
  auto v16i = VectorType::get({16}, i32);
  auto mask = b.create<arith::ConstantIntOp>(loc, -1, 16);
  auto direction = b.create<arith::ConstantIntOp>(loc, 4, 32);
  return erfByIntervals(
      *this, x, 16, ArrayRef<float>(&coefs16[0][0], 128),
      "llvm.x86.avx512.permvar.sf.512", [&](Value scaled) {
        return b
            .create<LLVM::CallIntrinsicOp>(
                loc, v16i, "llvm.x86.avx512.mask.cvttps2dq.512",
                ValueRange{scaled, intLike(v16i, 0), mask, direction})
            .getResult(0);
      });
}

Value KB::floatLike(Type like, float v) {
  if (auto vt = dyn_cast<VectorType>(like))
    return splatF(v, vt.getNumElements());
  return cf(v);
}

Type KB::like(Type like, Type elem) {
  if (auto vt = dyn_cast<VectorType>(like))
    return VectorType::get(vt.getShape(), elem);
  return elem;
}

Value KB::intLike(Type t, int64_t v) {
  if (auto vt = dyn_cast<VectorType>(t))
    return splatI(v, vt.getNumElements(), vt.getElementType());
  return b.create<arith::ConstantIntOp>(loc, v, t.getIntOrFloatBitWidth());
}

Value KB::doubleLike(Type t, double v) {
  auto f64 = b.getF64Type();
  if (auto vt = dyn_cast<VectorType>(t))
    return b.create<arith::ConstantOp>(
        loc, vt, DenseElementsAttr::get(vt, llvm::APFloat(v)));
  return b.create<arith::ConstantFloatOp>(loc, llvm::APFloat(v), f64);
}

Value KB::quantize(Value y, float scale, int64_t zp, int64_t qmin,
                   int64_t qmax) {
  return quantize(y, scale, zp, static_cast<float>(qmin - zp),
                  static_cast<float>(qmax - zp));
}

/// `y / scale` clamped to [lo, hi], then, when `yLo <= yHi`, y first clamped
/// to [yLo, yHi] (an activation before the quantization).
static Value clampedQuotient(KB &k, Value y, float scale, float lo, float hi,
                             bool finite, float yLo, float yHi,
                             bool approximate = false,
                             bool saturatesBelow = false,
                             bool saturatesAbove = false) {
  OpBuilder &b = k.b;
  Type t = y.getType();
  // A finite y needs no NaN handling in the clamp (nor the sign of a zero:
  // it converts to integer 0 either way): plain vmaxps / vminps.
  auto fm = arith::FastMathFlagsAttr::get(b.getContext(),
                                          finite ? arith::FastMathFlags::nnan |
                                                       arith::FastMathFlags::nsz
                                                 : arith::FastMathFlags::none);
  auto clamp = [&](Value v, float a, float z) -> Value {
    v = b.create<arith::MaximumFOp>(k.loc, v, k.floatLike(t, a), fm);
    return b.create<arith::MinimumFOp>(k.loc, v, k.floatLike(t, z), fm);
  };
  const bool act = yLo <= yHi;
  std::optional<ExactQuotient> exact;
  if (k.reciprocalDivision && !approximate)
    exact = ExactQuotient::make(scale, lo, hi, yLo, yHi);
  if (exact) {
    // y clamped to the quotients lo - 1/4 and hi + 1/4 (with the
    // activation), then the quotient by a multiplication and two FMAs: the
    // same integer as dividing (ExactQuotient.h says why). vdivps zmm issues
    // one every 10 cycles on Intel cores; these are three FMA-port
    // instructions, and no clamp is needed after them.
    Value yc = clamp(y, exact->yLo, exact->yHi);
    Value q0 = b.create<arith::MulFOp>(k.loc, yc, k.floatLike(t, exact->recip));
    Value r =
        b.create<math::FmaOp>(k.loc, q0, k.floatLike(t, -exact->scale), yc);
    return b.create<math::FmaOp>(k.loc, r, k.floatLike(t, exact->recip), q0);
  }
  if (act) {
    // y / s rounds monotonically: clamping y to [a, z] first gives the same
    // quotient as clamping it to [RN(a / s), RN(z / s)] after.
    lo = std::max(lo, yLo / scale);
    hi = std::min(hi, yHi / scale);
  }
  // An approximate y (KB::quantizeWide) is multiplied by RN(1 / s): within
  // an ulp of the quotient, as y is of its exact value.
  Value q = approximate
                ? b.create<arith::MulFOp>(k.loc, y, k.floatLike(t, 1.f / scale))
                      .getResult()
                : b.create<arith::DivFOp>(k.loc, y, k.floatLike(t, scale))
                      .getResult();
  if (approximate && (saturatesBelow || saturatesAbove)) {
    if (!saturatesBelow)
      q = b.create<arith::MaximumFOp>(k.loc, q, k.floatLike(t, lo), fm);
    if (!saturatesAbove)
      q = b.create<arith::MinimumFOp>(k.loc, q, k.floatLike(t, hi), fm);
    return q;
  }
  return clamp(q, lo, hi);
}

Value KB::roundedQuotient(Value y, float scale, float lo, float hi,
                          bool finite) {
  return b.create<math::RoundEvenOp>(
      loc, clampedQuotient(*this, y, scale, lo, hi, finite, 1.f, 0.f));
}

Value KB::quantizeWide(Value y, float scale, int64_t zp, float lo, float hi,
                       bool finite, float yLo, float yHi, bool approximate,
                       bool saturatesBelow, bool saturatesAbove) {
  Type t = y.getType();
  Value q = clampedQuotient(*this, y, scale, lo, hi, finite, yLo, yHi,
                            approximate, saturatesBelow, saturatesAbove);
  return b.create<arith::AddIOp>(loc, roundToI32(q), intLike(like(t, i32), zp));
}

Value KB::quantizeRounded(Value y, float scale, int64_t zp) {
  Type t = y.getType(), ti32 = like(t, i32);
  // 1.5 * 2^23 plus an even integer is even, so rounding half to even
  // after adding it is rounding the product half to even, then adding; the
  // zero point's odd bit is added to the integer.
  const int64_t odd = zp & 1, even = zp - odd;
  Value v = b.create<math::FmaOp>(loc, y, floatLike(t, 1.f / scale),
                                  floatLike(t, kMagic + float(even)));
  return b.create<arith::SubIOp>(loc, b.create<arith::BitcastOp>(loc, ti32, v),
                                 intLike(ti32, kMagicBits - odd));
}

Value KB::roundToI32(Value q) {
  Type ti32 = like(q.getType(), i32);
  auto vt = dyn_cast<VectorType>(q.getType());
  if (!avx512 && hasFma && vt && vt.getNumElements() % 8 == 0) {
    // vroundps, then vcvttps2dq by its intrinsic: 0x80000000 for NaN or a
    // quotient past i32, which the saturating packs rely on (fptosi would
    // make those poison).
    Value r = b.create<math::RoundEvenOp>(loc, q);
    auto v8i32 = VectorType::get({8}, i32);
    SmallVector<Value> parts;
    for (int64_t i = 0; i < vt.getNumElements() / 8; ++i)
      parts.push_back(b.create<LLVM::CallIntrinsicOp>(
                           loc, v8i32, "llvm.x86.avx.cvtt.ps2dq.256",
                           ValueRange{slice(r, i, 8)})
                          .getResult(0));
    return concat(parts);
  }
  if (!avx512 || !vt || vt.getNumElements() % 16)
    return b.create<arith::FPToSIOp>(loc, ti32,
                                     b.create<math::RoundEvenOp>(loc, q));
  // One vcvtps2dq rounding half to even ({rn-sae}, whatever MXCSR says)
  // instead of vrndscaleps + vcvttps2dq, per 16 lanes.
  auto mask = b.create<arith::ConstantIntOp>(loc, -1, 16);
  auto rounding = b.create<arith::ConstantIntOp>(loc, 8, 32);
  auto v16i32 = VectorType::get({16}, i32);
  return per16(q, [&](ArrayRef<Value> x) -> Value {
    return b
        .create<LLVM::CallIntrinsicOp>(
            loc, v16i32, "llvm.x86.avx512.mask.cvtps2dq.512",
            ValueRange{x[0], intLike(v16i32, 0), mask, rounding})
        .getResult(0);
  });
}

Value KB::quantize(Value y, float scale, int64_t zp, float lo, float hi,
                   bool finite, float yLo, float yHi, bool approximate) {
  Value qi = quantizeWide(y, scale, zp, lo, hi, finite, yLo, yHi, approximate);
  auto vt = dyn_cast<VectorType>(qi.getType());
  if (!vt || vt.getNumElements() == 16)
    return b.create<arith::TruncIOp>(loc, like(qi.getType(), i8), qi);
  // Each 16 lanes narrowed on their own: the caller's slices of the result
  // fold to the pieces, with no byte shuffles between them.
  return per16(qi, [&](ArrayRef<Value> x) -> Value {
    return b.create<arith::TruncIOp>(loc, VectorType::get({16}, i8), x[0]);
  });
}

Value KB::quantizeApproximate(Value y, float scale, int64_t zp, int64_t qmin,
                              int64_t qmax) {
  Value qi = quantizeWide(y, scale, zp, static_cast<float>(qmin - zp),
                          static_cast<float>(qmax - zp), /*finite=*/false, 1.f,
                          0.f, /*approximate=*/true);
  return b.create<arith::TruncIOp>(loc, like(qi.getType(), i8), qi);
}

/// 2^k for an f32 vector `k` of integers in [-126, 127], built from its
/// bits: the biased exponent k + 127 is read from the bits of k + kMagic
/// less kMagicBits - 127.
static Value pow2Bits(KB &k, Value e) {
  OpBuilder &b = k.b;
  auto vt = cast<VectorType>(e.getType());
  int64_t n = vt.getNumElements();
  auto vi = VectorType::get({n}, k.i32);
  Value biased = b.create<arith::SubIOp>(
      k.loc,
      b.create<arith::BitcastOp>(
          k.loc, vi, b.create<arith::AddFOp>(k.loc, e, k.splatF(kMagic, n))),
      k.splatI(kMagicBits - 127, n, k.i32));
  return b.create<arith::BitcastOp>(
      k.loc, vt,
      b.create<arith::ShLIOp>(k.loc, biased, k.splatI(23, n, k.i32)));
}

Value KB::exp(Value x) { return expOf(x, /*negated=*/false); }

Value KB::expOf(Value x, bool negated) {
  auto vt = dyn_cast<VectorType>(x.getType());
  if (!hasFma || (vt && vt.getNumElements() % 16))
    return b.create<math::ExpOp>(
        loc, negated ? b.create<arith::NegFOp>(loc, x).getResult() : x);
  if (!vt) {
    Value lanes = expOf(splat(x, 16), negated);
    return b.create<vector::ExtractOp>(loc, lanes, ArrayRef<int64_t>{0});
  }
  int64_t n = vt.getNumElements();
  auto c = [&](float v) { return splatF(v, n); };
  auto fma = [&](Value a, Value m, Value add) -> Value {
    return b.create<math::FmaOp>(loc, a, m, add);
  };
  // The exponent e (x, or -x without computing it) clamped so that n stays
  // small: +-inf become 89 and -104, whose exp overflows to inf and
  // underflows to 0; NaN passes through. exp(-x) is the sigmoid's, which
  // reads only 1 + exp(-x): it stops at 88, where it is finite (1 + exp(-x)
  // then has a finite reciprocal), and at -87 (2^-125.5, where 1 + exp(-x)
  // is 1 as for anything under 2^-24), so that one normal power of two
  // scales it.
  const float lo = negated ? -87.f : -104.f, hi = negated ? 88.f : 89.f;
  Value xc = b.create<arith::MinimumFOp>(
      loc, b.create<arith::MaximumFOp>(loc, x, c(negated ? -hi : lo)),
      c(negated ? -lo : hi));
  // e = k2 ln2 + r, |r| <= ln2 / 2, ln2 in two parts (Cody-Waite). Negated,
  // the same steps give s = -r exactly (RN is odd: each FMA is the negation
  // of the unnegated one), so no instruction negates x.
  const float log2e = 1.44269504088896341f, ln2hi = 0.693359375f,
              ln2lo = -2.12194440e-4f;
  Value k2 = b.create<math::RoundEvenOp>(
      loc, b.create<arith::MulFOp>(loc, xc, c(negated ? -log2e : log2e)));
  float sign = negated ? 1.f : -1.f;
  Value r = fma(k2, c(sign * ln2hi), xc);
  r = fma(k2, c(sign * ln2lo), r);
  // e^r = 1 + r + r^2 P(r) (Cephes expf). At s = -r, P's odd powers change
  // sign: Horner over s with those coefficients negated gives P(r) exactly,
  // and 1 + r + r^2 P is 1 + (s^2 P - s), an FMA that subtracts.
  const float coefs[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
  auto coef = [&](int i) { // the coefficient of r^(5 - i)
    return c(negated && (5 - i) % 2 ? -coefs[i] : coefs[i]);
  };
  Value p = coef(0);
  for (int i = 1; i < 6; ++i)
    p = fma(p, r, coef(i));
  Value rr = b.create<arith::MulFOp>(loc, r, r);
  Value y =
      fma(p, rr, negated ? b.create<arith::NegFOp>(loc, r).getResult() : r);
  y = b.create<arith::AddFOp>(loc, y, c(1.f));
  if (!avx512) {
    // y * 2^k2 without vscalefps: k2 (in [-150, 128]) in two halves, each a
    // normal power of two. y * 2^h1 is exact (y in [0.7, 1.5]), and the
    // second product rounds once, underflowing gradually or overflowing to
    // inf, as one scaling would. k2 is read from the bits of k2 + kMagic.
    auto vi = VectorType::get({n}, i32);
    if (negated) // k2 in [-126, 127]: one normal power of two.
      return b.create<arith::MulFOp>(loc, y, pow2Bits(*this, k2));
    Value ki = b.create<arith::SubIOp>(
        loc,
        b.create<arith::BitcastOp>(loc, vi,
                                   b.create<arith::AddFOp>(loc, k2, c(kMagic))),
        splatI(kMagicBits, n, i32));
    Value h1 = b.create<arith::ShRSIOp>(loc, ki, splatI(1, n, i32));
    Value h2 = b.create<arith::SubIOp>(loc, ki, h1);
    auto pow2 = [&](Value h) -> Value {
      return b.create<arith::BitcastOp>(
          loc, vt,
          b.create<arith::ShLIOp>(
              loc, b.create<arith::AddIOp>(loc, h, splatI(127, n, i32)),
              splatI(23, n, i32)));
    };
    return b.create<arith::MulFOp>(
        loc, b.create<arith::MulFOp>(loc, y, pow2(h1)), pow2(h2));
  }
  // y * 2^k2: vscalefps scales exactly, underflows gradually and overflows
  // to inf.
  auto mask = b.create<arith::ConstantIntOp>(loc, -1, 16);
  auto rounding = b.create<arith::ConstantIntOp>(loc, 4, 32); // current
  auto v16 = VectorType::get({16}, f32);
  return per16(ValueRange{y, k2}, [&](ArrayRef<Value> x) -> Value {
    return b
        .create<LLVM::CallIntrinsicOp>(
            loc, v16, "llvm.x86.avx512.mask.scalef.ps.512",
            ValueRange{x[0], x[1], x[0], mask, rounding})
        .getResult(0);
  });
}

/// 2^t for f32 vector `t` (16-lane multiples, at most 127): f = t -
/// floor(t) (exact, 0 <= f < 1), a degree-5 polynomial for 2^f (relative
/// error 1.65e-7, fitted for the relative error over [0, 1)) and a scaling
/// by 2^floor(t). AVX-512 splits off f by vreduceps and scales by
/// vscalefps, which takes 2^floor(t) from t itself: no instruction computes
/// the integer part (splitting at the nearest integer would need t - f for
/// vscalefps, one instruction more per 16 lanes). AVX2 (FMA targets without
/// AVX-512) floors t by vroundps, subtracts, and multiplies by 2^floor(t)
/// built from its bits (pow2Bits), t first raised to -126 unless it is known
/// to stay over that (`overMin`), so that the power stays normal: below it
/// the result is 2^-126's multiple where it would be under 2^-126, which a
/// sigmoid's 1 + 2^t and a quantized probability cannot tell apart. That is
/// 11-12 instructions per 8 lanes where expOf's Cody-Waite form takes 17.
/// With `plusOne`, 1 + 2^t (AVX2 adds it in the scaling's FMA).
static Value exp2Short(KB &k, Value t, bool overMin = false,
                       bool plusOne = false) {
  OpBuilder &b = k.b;
  int64_t n = cast<VectorType>(t.getType()).getNumElements();
  // Minimax for the relative error on a grid of [0, 1) (a linear program),
  // rounded to f32 and each coefficient moved by an ulp where that lowered
  // the f32 Horner evaluation's error.
  const float coefs[] = {1.878641313e-3f, 8.985498920e-3f, 5.583132803e-2f,
                         2.401509285e-1f, 6.931535006e-1f, 9.999999404e-1f};
  auto poly = [&](Value f) {
    Value p = k.splatF(coefs[0], n);
    for (int i = 1; i < 6; ++i)
      p = b.create<math::FmaOp>(k.loc, p, f, k.splatF(coefs[i], n));
    return p;
  };
  if (!k.avx512) {
    Value tc = overMin
                   ? t
                   : b.create<arith::MaximumFOp>(k.loc, t, k.splatF(-126.f, n));
    Value fl = b.create<math::FloorOp>(k.loc, tc);
    Value f = b.create<arith::SubFOp>(k.loc, tc, fl);
    Value p = poly(f), pow = pow2Bits(k, fl);
    // 1 + 2^t, the sigmoid's denominator, in one FMA.
    if (plusOne)
      return b.create<math::FmaOp>(k.loc, p, pow, k.splatF(1.f, n));
    return b.create<arith::MulFOp>(k.loc, p, pow);
  }
  auto v16 = VectorType::get({16}, k.f32);
  auto mask = b.create<arith::ConstantIntOp>(k.loc, -1, 16);
  auto current = b.create<arith::ConstantIntOp>(k.loc, 4, 32);
  // imm 9: keep 0 fraction bits, round down, no precision exception. Both
  // infinities give 0 (checked on Emerald Rapids), so 2^-inf is p(0) *
  // 2^-inf = 0.
  auto imm = b.create<arith::ConstantIntOp>(k.loc, 9, 32);
  Value f = k.per16(t, [&](ArrayRef<Value> v) -> Value {
    return b
        .create<LLVM::CallIntrinsicOp>(
            k.loc, v16, "llvm.x86.avx512.mask.reduce.ps.512",
            ValueRange{v[0], imm, v[0], mask, current})
        .getResult(0);
  });
  Value p = poly(f);
  Value e = k.per16(ValueRange{p, t}, [&](ArrayRef<Value> x) -> Value {
    return b
        .create<LLVM::CallIntrinsicOp>(
            k.loc, v16, "llvm.x86.avx512.mask.scalef.ps.512",
            ValueRange{x[0], x[1], x[0], mask, current})
        .getResult(0);
  });
  return plusOne ? b.create<arith::AddFOp>(k.loc, e, k.splatF(1.f, n)) : e;
}

void KB::softmaxRows(MutableArrayRef<SmallVector<Value>> rows) {
  // The maximum may skip a NaN (one vmaxps, not three instructions): the
  // NaN's own exponential makes the sum, and so the whole row, NaN anyway.
  auto noNaN =
      arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::nnan);
  // Pairwise, so the adds and maximums do not wait on each other.
  auto tree = [&](SmallVector<Value> v, bool max) {
    while (v.size() > 1) {
      SmallVector<Value> next;
      for (size_t i = 0; i + 1 < v.size(); i += 2)
        next.push_back(
            max ? b.create<arith::MaximumFOp>(loc, v[i], v[i + 1], noNaN)
                      .getResult()
                : b.create<arith::AddFOp>(loc, v[i], v[i + 1]).getResult());
      if (v.size() % 2)
        next.push_back(v.back());
      v = next;
    }
    return reduceLanes(v[0], max, /*skipNaN=*/true);
  };
  // Quantized probabilities: exp(d) as 2^(d log2 e) rounded once, as the
  // sigmoid's (d <= 0, so 2^t needs no clamp; -inf gives 0).
  const bool shortExp = quantizedChain && avx512;
  for (SmallVector<Value> &row : rows) {
    Value mx = splat(tree(row, /*max=*/true), 16);
    for (Value &v : row) {
      Value d = b.create<arith::SubFOp>(loc, v, mx);
      v = shortExp ? exp2Short(*this, b.create<arith::MulFOp>(
                                          loc, d, splatF(1.44269504f, 16)))
                   : exp(d);
    }
  }
  SmallVector<Value> inv;
  for (SmallVector<Value> &row : rows)
    inv.push_back(splat(
        b.create<arith::DivFOp>(loc, cf(1.f), tree(row, /*max=*/false)), 16));
  for (size_t r = 0; r < rows.size(); ++r)
    for (Value &v : rows[r])
      v = b.create<arith::MulFOp>(loc, v, inv[r]);
}

Value KB::sigmoidDenominator(Value x) {
  Type t = x.getType();
  auto vt = dyn_cast<VectorType>(t);
  bool shortExp =
      quantizedChain && hasFma && vt && vt.getNumElements() % 16 == 0;
  // exp(-x) stops at e^88 on AVX-512 (expOf): d is finite, and so is the
  // Newton step of the sigmoid (an infinite d would make it inf * 0). The
  // sigmoid below x = -88, under 2^-126, is then 0 or that bound's. The
  // short form stops at 2^127; NaN passes through the clamp. AVX-512's needs
  // none below: vreduceps gives 0 for -inf, and vscalefps 0 for any t under
  // -150; AVX2's raises t to -126 unless x stays under 87. Nor above where
  // x is known to stay over -87 (argRange: a chain's input is an
  // accumulator's affine image), so that t stays under 126.
  if (!shortExp)
    return b.create<arith::AddFOp>(loc, floatLike(t, 1.f),
                                   expOf(x, /*negated=*/true));
  int64_t n = vt.getNumElements();
  Value te = b.create<arith::MulFOp>(loc, x, splatF(-1.44269504f, n));
  if (!argRange || !(argRange->first > -87.0))
    te = b.create<arith::MinimumFOp>(loc, te, splatF(127.f, n));
  return exp2Short(*this, te,
                   /*overMin=*/argRange && argRange->second < 87.0,
                   /*plusOne=*/true);
}

/// The sigmoid's reciprocal is vrcp14ps and a Newton step.
static bool sigmoidByReciprocal(KB &k, Value x) {
  auto vt = dyn_cast<VectorType>(x.getType());
  return k.avx512 && k.reciprocalDivision && !(vt && vt.getNumElements() % 16);
}

Value KB::sigmoid(Value x) {
  Type t = x.getType();
  Value one = floatLike(t, 1.f);
  auto vt = dyn_cast<VectorType>(t);
  if (!sigmoidByReciprocal(*this, x))
    return b.create<arith::DivFOp>(loc, one, sigmoidDenominator(x));
  if (!vt) {
    // Lane 0 of the vector code: a map's remainder agrees with its body.
    Value lanes = sigmoid(splat(x, 16));
    return b.create<vector::ExtractOp>(loc, lanes, ArrayRef<int64_t>{0});
  }
  Value d = sigmoidDenominator(x);
  auto v16 = VectorType::get({16}, f32);
  auto mask = b.create<arith::ConstantIntOp>(loc, -1, 16);
  Value y0 = per16(d, [&](ArrayRef<Value> v) -> Value {
    return b
        .create<LLVM::CallIntrinsicOp>(loc, v16, "llvm.x86.avx512.rcp14.ps.512",
                                       ValueRange{v[0], v[0], mask})
        .getResult(0);
  });
  // One Newton step from vrcp14ps's 14 bits: within an ulp of 1 / d.
  Value err =
      b.create<math::FmaOp>(loc, b.create<arith::NegFOp>(loc, d), y0, one);
  return b.create<math::FmaOp>(loc, err, y0, y0);
}

Value KB::silu(Value x) {
  // generic (no FMA) keeps the reference's own form, x * (1 / d): its exp
  // is MLIR's, close to the reference's, and x / d flipped one element of
  // an EfficientNet-B0 SiLU quantization that cascaded to 15 LSB by the
  // last layer (plans-zoo).
  if (sigmoidByReciprocal(*this, x) || !hasFma)
    return b.create<arith::MulFOp>(loc, x, sigmoid(x));
  return b.create<arith::DivFOp>(loc, x, sigmoidDenominator(x));
}

Value KB::dequantize(Value q, int64_t zp, float scale) {
  return dequantizeI32(b.create<arith::ExtUIOp>(loc, like(q.getType(), i32), q),
                       zp, scale);
}

Value KB::dequantizeI32(Value qi, int64_t zp, float scale) {
  Type t = qi.getType();
  qi = b.create<arith::SubIOp>(loc, qi, intLike(t, zp));
  Value f = b.create<arith::SIToFPOp>(loc, like(t, f32), qi);
  return b.create<arith::MulFOp>(loc, f, floatLike(t, scale));
}

/// i16 lanes per pmaddwd: a ymm (AVX2) or an xmm (SSE2, the x86-64
/// baseline).
static int64_t pmaddWords(Isa isa) { return isa == Isa::AVX2 ? 16 : 8; }

/// pmaddwd of `a` and `w` (vector<pmaddWords x i16>): each pair of
/// products summed into an i32 lane.
static Value pmaddwd(KB &k, Isa isa, Value a, Value w) {
  const int64_t words = pmaddWords(isa);
  return k.b
      .create<LLVM::CallIntrinsicOp>(k.loc, VectorType::get({words / 2}, k.i32),
                                     isa == Isa::AVX2
                                         ? "llvm.x86.avx2.pmadd.wd"
                                         : "llvm.x86.sse2.pmadd.wd",
                                     ValueRange{a, w})
      .getResult(0);
}

Value qatc::codegen::emitDot4(KB &k, Isa isa, Value acc, Value a, Value w) {
  OpBuilder &b = k.b;
  auto v16 = VectorType::get({16}, k.i32);
  switch (isa) {
  case Isa::AMX:
  case Isa::AVX512VNNI:
    // LLVM 19 does not form vpdpbusd from plain IR; its intrinsic takes
    // three vector<16xi32> (newer LLVM: byte vectors for a and w).
    return b
        .create<LLVM::CallIntrinsicOp>(
            k.loc, v16, "llvm.x86.avx512.vpdpbusd.512", ValueRange{acc, a, w})
        .getResult(0);
  case Isa::AVXVNNI: {
    // Two VEX-encoded ymm vpdpbusd.
    auto v8 = VectorType::get({8}, k.i32);
    Value out = acc;
    for (int64_t h = 0; h < 2; ++h) {
      auto part = [&](Value v) -> Value {
        return b.create<vector::ExtractStridedSliceOp>(
            k.loc, v, ArrayRef<int64_t>{8 * h}, ArrayRef<int64_t>{8},
            ArrayRef<int64_t>{1});
      };
      Value r = b.create<LLVM::CallIntrinsicOp>(
                     k.loc, v8, "llvm.x86.avx512.vpdpbusd.256",
                     ValueRange{part(acc), part(a), part(w)})
                    .getResult(0);
      out = b.create<vector::InsertStridedSliceOp>(
          k.loc, r, out, ArrayRef<int64_t>{8 * h}, ArrayRef<int64_t>{1});
    }
    return out;
  }
  case Isa::AVX2:
  case Isa::Generic: {
    // Both widened to i16 and multiplied by pmaddwd, which adds each pair
    // of products into an i32 lane: exact, as |255 * -128 * 2| < 2^31,
    // where vpmaddubsw would saturate its i16 pair sums on full-range
    // weights. The two pair sums of each dword are then added. Widening
    // to i32 and multiplying there (vpmulld) took about four times the
    // instructions.
    auto i16 = b.getI16Type();
    auto v64i8 = VectorType::get({64}, k.i8);
    auto v64i16 = VectorType::get({64}, i16);
    Value a16 = b.create<arith::ExtUIOp>(
        k.loc, v64i16, b.create<vector::BitCastOp>(k.loc, v64i8, a));
    Value w16 = b.create<arith::ExtSIOp>(
        k.loc, v64i16, b.create<vector::BitCastOp>(k.loc, v64i8, w));
    // One ymm (AVX2) or xmm (SSE2) at a time.
    const int64_t width = pmaddWords(isa);
    SmallVector<Value> pairs;
    for (int64_t part = 0; part < 64 / width; ++part)
      pairs.push_back(pmaddwd(k, isa, k.slice(a16, part, width),
                              k.slice(w16, part, width)));
    // Lane j of part p's pmaddwd is half j % 2 of sum 4p + j / 2 (in the
    // order of the parts' bytes): the 32 lanes are dotAccInit's form.
    return b.create<arith::AddIOp>(k.loc, acc, k.concat(pairs));
  }
  }
  return acc;
}

bool qatc::codegen::dotSumsPairs(Isa isa) {
  return isa == Isa::AVX2 || isa == Isa::Generic;
}

Value qatc::codegen::dotAccInit(KB &k, Isa isa, Value acc16) {
  if (!dotSumsPairs(isa))
    return acc16;
  SmallVector<int64_t> spread;
  for (int64_t l = 0; l < 16; ++l) {
    spread.push_back(l);
    spread.push_back(16 + l);
  }
  return k.b.create<vector::ShuffleOp>(k.loc, acc16, k.splatI(0, 16, k.i32),
                                       spread);
}

Value qatc::codegen::dotAccFinish(KB &k, Isa isa, Value acc) {
  if (!dotSumsPairs(isa))
    return acc;
  SmallVector<int64_t> even, odd;
  for (int64_t l = 0; l < 16; ++l) {
    even.push_back(2 * l);
    odd.push_back(2 * l + 1);
  }
  return k.b.create<arith::AddIOp>(
      k.loc, k.b.create<vector::ShuffleOp>(k.loc, acc, acc, even),
      k.b.create<vector::ShuffleOp>(k.loc, acc, acc, odd));
}

std::pair<Value, Value> qatc::codegen::splitPairs(KB &k, Isa isa, Value a) {
  OpBuilder &b = k.b;
  // One ymm (AVX2) or xmm (SSE2) of i16 lanes: the dword's bytes k0 | k1 <<
  // 8 and k2 | k3 << 8 as words; masking keeps (k0, k2), a logical shift of
  // each word by 8 gives (k1, k3). Neither needs the shuffle port that a
  // widening vpmovzxbw takes.
  const int64_t words = pmaddWords(isa);
  auto vw = VectorType::get({words}, b.getI16Type());
  Value x = b.create<vector::BitCastOp>(k.loc, vw, k.splat(a, words / 2));
  auto splat16 = [&](int64_t v) -> Value {
    return b.create<arith::ConstantOp>(
        k.loc, DenseElementsAttr::get(vw, b.getI16IntegerAttr(v).getValue()));
  };
  return {b.create<arith::AndIOp>(k.loc, x, splat16(0xff)),
          b.create<arith::ShRUIOp>(k.loc, x, splat16(8))};
}

/// acc + the pmaddwd pair sums of 16 outputs' two halves, h = 0 and 1:
/// lanes [off, off + words) of each half from `a(h, off)` and `w(h, off)`
/// (vector<words x i16>), a ymm (AVX2) or xmm (SSE2) at a time.
static Value pairSums(KB &k, Isa isa, Value acc,
                      function_ref<Value(int64_t, int64_t, int64_t)> a,
                      function_ref<Value(int64_t, int64_t, int64_t)> w) {
  assert(dotSumsPairs(isa) && "pairSums is for pmaddwd ISAs");
  // A half's i16 lanes: two per sum (16 sums, or 8 in halfBlocks).
  const int64_t halfLanes =
      2 * cast<VectorType>(acc.getType()).getNumElements();
  const int64_t words = pmaddWords(isa);
  assert(halfLanes % words == 0 && "whole vpmaddwd operands");
  SmallVector<Value> halves;
  for (int64_t h = 0; h < 2; ++h) {
    SmallVector<Value> parts;
    for (int64_t off = 0; off < halfLanes; off += words)
      parts.push_back(pmaddwd(k, isa, a(h, off, words), w(h, off, words)));
    halves.push_back(k.concat(parts));
  }
  return k.b.create<arith::AddIOp>(
      k.loc, acc, k.b.create<arith::AddIOp>(k.loc, halves[0], halves[1]));
}

Value qatc::codegen::emitDot4Split(KB &k, Isa isa, Value acc,
                                   std::pair<Value, Value> pairs, Value w) {
  // Half h: 16 outputs' (k_h, k_h+2) pairs, each times the broadcast pair.
  Value w8 =
      k.b.create<vector::BitCastOp>(k.loc, VectorType::get({64}, k.i8), w);
  return pairSums(
      k, isa, acc,
      [&](int64_t h, int64_t, int64_t) {
        return h == 0 ? pairs.first : pairs.second;
      },
      [&](int64_t h, int64_t off, int64_t n) -> Value {
        return k.b.create<arith::ExtSIOp>(
            k.loc, VectorType::get({n}, k.b.getI16Type()),
            k.slice(w8, (32 * h + off) / n, n));
      });
}

Value qatc::codegen::emitDot4Bytes(KB &k, Value acc, Value q, Value w,
                                   Value sign) {
  OpBuilder &b = k.b;
  auto v16i16 = VectorType::get({16}, b.getI16Type());
  Value w8 = b.create<vector::BitCastOp>(k.loc, VectorType::get({64}, k.i8), w);
  Value ones = k.splatI(1, 16, b.getI16Type());
  // A ymm of 8 outputs' 4 bytes at a time.
  SmallVector<Value> sums;
  for (int64_t h = 0; h < 2; ++h) {
    Value wh = k.slice(w8, h, 32);
    if (sign)
      wh = b.create<LLVM::CallIntrinsicOp>(k.loc, wh.getType(),
                                           "llvm.x86.avx2.psign.b",
                                           ValueRange{wh, sign})
               .getResult(0);
    Value pairs = b.create<LLVM::CallIntrinsicOp>(k.loc, v16i16,
                                                  "llvm.x86.avx2.pmadd.ub.sw",
                                                  ValueRange{q, wh})
                      .getResult(0);
    sums.push_back(pmaddwd(k, Isa::AVX2, pairs, ones));
  }
  return b.create<arith::AddIOp>(k.loc, acc, k.concat(sums));
}

Value qatc::codegen::emitDot4Rows(KB &k, Isa isa, Value acc, Value p02,
                                  Value p13, Value w) {
  const int64_t sums = cast<VectorType>(acc.getType()).getNumElements();
  Value w16 = k.b.create<vector::BitCastOp>(
      k.loc, VectorType::get({4 * sums}, k.b.getI16Type()), w);
  return pairSums(
      k, isa, acc,
      [&](int64_t h, int64_t off, int64_t n) {
        return k.slice(h == 0 ? p02 : p13, off / n, n);
      },
      [&](int64_t h, int64_t off, int64_t n) {
        return k.slice(w16, (2 * sums * h + off) / n, n);
      });
}

/// Whether storePacked's saturating packs exist: zmm on AVX-512, ymm on
/// AVX2 and the AVX2-class targets, that is every target with FMA (all but
/// generic).
static bool hasBytePacks(const KB &k) { return k.hasFma; }

/// Stores the i32 vector `qi` (16 lanes per part) as bytes, 16 to each of
/// `outs` under `mask`: four parts at a time narrowed by two vpackssdw, a
/// vpackuswb (vpacksswb when `isSigned`) and a vpermd that gathers each
/// part's 16 bytes into one 128-bit lane. That is four shuffle-port
/// instructions per four parts where a vpmovdb each costs two (Xeon family
/// 6 model 207: 1.5 against 2 cycles per part, stores included). AVX2 packs
/// two parts at a time, a vpackssdw per part: four instructions per two
/// parts where a truncation takes a vpand per 8 lanes, a vpackusdw, a
/// vextracti128, a vpackuswb and a vpshufd per part, after an f32 clamp
/// to keep it in range. The packs saturate to the stored type; `clamped`
/// says the values are in range already, so a lone part may be truncated
/// instead (AVX-512). `offset128`: `qi` is
/// the stored u8 value minus 128, packed as signed bytes and moved up by
/// flipping their top bits (a vpxord per four parts, not a vpaddd per part).
///
/// `interleaved64`: each four parts are one pixel's 64 channels in
/// interleave64's order, which the in-lane packs undo: their 64 bytes go to
/// that pixel's one pointer in `outs`, with no vpermd.
///
/// `byteLo` / `byteHi`: bounds of the stored value applied to the packed
/// bytes (a vpmaxub / vpminub, or signed, per 64), where set.
/// Part `i` of emitEpilogue's `pairedPixels` (16 lanes: 8 channels of each
/// of two pixels) to its two pixels' pointers, outs[2i] and outs[2i + 1].
static void storePixelPair(KB &k, Value part, ArrayRef<Value> outs, int64_t i) {
  for (int64_t h = 0; h < 2; ++h)
    k.store(k.slice(part, h, 8), outs[2 * i + h]);
}

static void storePacked(KB &k, Value qi, bool isSigned, ArrayRef<Value> outs,
                        Value mask, bool clamped = true, bool offset128 = false,
                        bool interleaved64 = false,
                        std::optional<int64_t> byteLo = std::nullopt,
                        std::optional<int64_t> byteHi = std::nullopt,
                        bool pairedPixels = false) {
  assert(hasBytePacks(k) && (k.avx512 || !interleaved64) &&
         "packs of zmm (AVX-512) or ymm (AVX2)");
  assert((!pairedPixels || !k.avx512) && "paired pixels in ymm packs");
  OpBuilder &b = k.b;
  // Parts narrowed together: four by zmm packs, two by ymm packs.
  const int64_t group = k.avx512 ? 4 : 2;
  auto wordsType = VectorType::get({8 * group}, b.getI16Type());
  auto bytesType = VectorType::get({16 * group}, k.i8);
  auto dwordsType = VectorType::get({4 * group}, k.i32);
  const char *packDwords =
      k.avx512 ? "llvm.x86.avx512.packssdw.512" : "llvm.x86.avx2.packssdw";
  const char *packWords = isSigned || offset128
                              ? (k.avx512 ? "llvm.x86.avx512.packsswb.512"
                                          : "llvm.x86.avx2.packsswb")
                              : (k.avx512 ? "llvm.x86.avx512.packuswb.512"
                                          : "llvm.x86.avx2.packuswb");
  // After the packs, part p's dword j (its lanes 4j .. 4j + 3) is, in a
  // zmm, dword 4j + p (128-bit lane j holds dword j of parts 0-3 in turn);
  // in a ymm, whose in-lane packs take a part's lanes 0-3 and 8-11 to lane
  // 0 and 4-7 and 12-15 to lane 1, dword (j % 2) * 4 + 2p + j / 2.
  SmallVector<int64_t> order;
  for (int64_t p = 0; p < group; ++p)
    for (int64_t j = 0; j < 4; ++j)
      order.push_back(k.avx512 ? 4 * j + p : j % 2 * 4 + 2 * p + j / 2);
  auto pack = [&](const char *name, Type t, Value x, Value y) {
    return b.create<LLVM::CallIntrinsicOp>(k.loc, t, name, ValueRange{x, y})
        .getResult(0);
  };
  const int64_t parts = cast<VectorType>(qi.getType()).getNumElements() / 16;
  for (int64_t first = 0; first < parts; first += group) {
    int64_t n = std::min<int64_t>(group, parts - first);
    if (k.avx512 && n == 1 && clamped && !offset128) {
      Value one = k.slice(qi, first);
      k.maskedStore(
          b.create<arith::TruncIOp>(k.loc, VectorType::get({16}, k.i8), one),
          outs[first], mask);
      continue;
    }
    auto part = [&](int64_t i) {
      return k.slice(qi, first + std::min(i, n - 1));
    };
    // Words of parts 2i and 2i + 1 (zmm), or of part i's two halves (ymm).
    SmallVector<Value> words;
    for (int64_t i = 0; i < 2; ++i)
      words.push_back(
          k.avx512 ? pack(packDwords, wordsType, part(2 * i), part(2 * i + 1))
                   : pack(packDwords, wordsType, k.slice(part(i), 0, 8),
                          k.slice(part(i), 1, 8)));
    Value bytes = pack(packWords, bytesType, words[0], words[1]);
    const int64_t nb = 16 * group;
    if (offset128)
      bytes = b.create<arith::XOrIOp>(k.loc, bytes, k.splatI(-128, nb, k.i8));
    if (byteLo) {
      Value lo = k.splatI(*byteLo, nb, k.i8);
      bytes = isSigned ? b.create<arith::MaxSIOp>(k.loc, bytes, lo).getResult()
                       : b.create<arith::MaxUIOp>(k.loc, bytes, lo).getResult();
    }
    if (byteHi) {
      Value hi = k.splatI(*byteHi, nb, k.i8);
      bytes = isSigned ? b.create<arith::MinSIOp>(k.loc, bytes, hi).getResult()
                       : b.create<arith::MinUIOp>(k.loc, bytes, hi).getResult();
    }
    if (interleaved64) {
      k.store(bytes, outs[first / 4]);
      continue;
    }
    Value dw = b.create<vector::BitCastOp>(k.loc, dwordsType, bytes);
    dw = b.create<vector::ShuffleOp>(k.loc, dw, dw, order);
    bytes = b.create<vector::BitCastOp>(k.loc, bytesType, dw);
    for (int64_t i = 0; i < n; ++i) {
      if (pairedPixels)
        storePixelPair(k, k.slice(bytes, i), outs, first + i);
      else
        k.maskedStore(k.slice(bytes, i), outs[first + i], mask);
    }
  }
}

Value qatc::codegen::emitEpilogue(KB &k, const Epilogue &ep,
                                  ArrayRef<Value> accs, Value c0, Value mask,
                                  ArrayRef<Value> outs, ArrayRef<Value> res,
                                  bool interleaved64, bool pairedPixels) {
  OpBuilder &b = k.b;
  const int64_t parts = accs.size(), lanes = 16 * parts;
  assert((!pairedPixels ||
          (!interleaved64 && res.empty() && outs.size() == 2 * accs.size())) &&
         "paired pixels: two pointers per vector, no residual");
  assert((!interleaved64 ||
          (parts % 4 == 0 && ep.quantOut && k.avx512 && !ep.resF32 &&
           (res.empty() || res.size() == outs.size()))) &&
         "an interleaved epilogue stores whole pixels of quantized channels");
  auto vf = VectorType::get({lanes}, k.f32);
  Value acc = k.concat(accs);
  bool intAcc =
      !isa<FloatType>(cast<VectorType>(acc.getType()).getElementType());
  Value y = intAcc ? b.create<arith::SIToFPOp>(k.loc, vf, acc) : acc;
  // Per-channel constants (f32, or i32 `elem`) of a pixel's channels from
  // `first` in the parts' order, repeated for each pixel. `natural`: stored
  // in channel order where the parts are interleaved (a fused chain's own
  // constants), so reordered here.
  auto channelVecAt = [&](int64_t off, Value first, Type elem, bool natural) {
    auto vt = VectorType::get({16}, elem ? elem : k.f32);
    if (pairedPixels)
      return k.tile(k.load(VectorType::get({8}, vt.getElementType()),
                           k.weightsAt(off, first, 4)),
                    2 * parts);
    if (!interleaved64)
      return k.tile(k.load(vt, k.weightsAt(off, first, 4)), parts);
    // One base register, constant displacements.
    Value base = k.gep(k.weights, k.mul(first, k.c(4)));
    SmallVector<Value> quarters;
    for (int64_t l = 0; l < 4; ++l)
      quarters.push_back(k.load(vt, k.gep(base, off + 64 * l)));
    Value pixel = k.concat(quarters);
    if (natural) {
      SmallVector<int64_t> order(64);
      for (int64_t c = 0; c < 64; ++c)
        order[interleave64Index(c)] = c;
      pixel = b.create<vector::ShuffleOp>(k.loc, pixel, pixel, order);
    }
    return k.tile(pixel, parts / 4);
  };
  auto channelVec = [&](int64_t off, Type elem = nullptr) {
    return channelVecAt(off, c0, elem, false);
  };
  // The one-step forms' clamps of a finite quotient (plain vmaxps /
  // vminps), each where its form needs it.
  auto noNaN = arith::FastMathFlagsAttr::get(
      b.getContext(), arith::FastMathFlags::nnan | arith::FastMathFlags::nsz);
  auto clampIf = [&](Value v, bool lo, float loV, bool hi, float hiV) {
    if (lo)
      v = b.create<arith::MaximumFOp>(k.loc, v, k.splatF(loV, lanes), noNaN);
    if (hi)
      v = b.create<arith::MinimumFOp>(k.loc, v, k.splatF(hiV, lanes), noNaN);
    return v;
  };
  bool isSigned = ep.qmin < 0, offset128 = !isSigned && ep.outZp == 128;
  // The zero point after the rounding (OneStepRequant.h says why); 128 on a
  // u8 result by the store's sign flip. The packs saturate to the stored
  // type. Clamps to [lo, hi] that commute with the rounding and the packs
  // (`onBytes`) apply to the stored bytes: a vpmaxub / vpminub per 64
  // outputs, not a vmaxps / vminps per 16.
  auto storeOneStep = [&](Value qi, bool onBytes, bool clampLo, float lo,
                          bool clampHi, float hi) {
    std::optional<int64_t> byteLo, byteHi;
    if (onBytes && clampLo)
      byteLo = static_cast<int64_t>(lo) + ep.outZp;
    if (onBytes && clampHi)
      byteHi = static_cast<int64_t>(hi) + ep.outZp;
    if (!offset128 && ep.outZp)
      qi = b.create<arith::AddIOp>(k.loc, qi, k.splatI(ep.outZp, lanes, k.i32));
    storePacked(k, qi, isSigned, outs, mask, /*clamped=*/false, offset128,
                interleaved64, byteLo, byteHi, pairedPixels);
  };
  // Before a residual add: the conv's own quantized value minus its zero
  // point, an integer in f32.
  Value u;
  if (intAcc && ep.foldMulOff >= 0) {
    // One FMA where the reference rounds twice (acc * s_x * s_w[c], then the
    // quotient by s_y), the same integers (OneStepRequant.h): four to eight
    // instructions per 16 outputs where the two-step form takes about ten,
    // or waits on a vdivps (avx512vnni).
    Value q = b.create<math::FmaOp>(k.loc, y, channelVec(ep.foldMulOff),
                                    channelVec(ep.foldAddOff));
    // The clamps on the bytes, where they commute with the rounding, the
    // exceptions and the packs.
    bool onBytes = ep.foldClampBytes && !ep.midQuant;
    if (!onBytes)
      q = clampIf(q, ep.foldClampLo, ep.foldLo, ep.foldClampHi, ep.foldHi);
    auto hitAt = [&](int64_t e) {
      return b.create<arith::CmpIOp>(k.loc, arith::CmpIPredicate::eq, acc,
                                     channelVec(ep.foldAccOff[e], k.i32));
    };
    if (!ep.midQuant) {
      Value qi = k.roundToI32(q);
      for (int64_t e = 0; e < ep.foldExceptions; ++e)
        qi = b.create<arith::SelectOp>(
            k.loc, hitAt(e),
            b.create<arith::AddIOp>(k.loc, qi,
                                    channelVec(ep.foldDeltaOff[e], k.i32)),
            qi);
      storeOneStep(qi, onBytes, ep.foldClampLo, ep.foldLo, ep.foldClampHi,
                   ep.foldHi);
      return Value();
    }
    // Both clamps are set before an add (nothing saturates an f32), so the
    // exceptions, which land on the exact integer, need no clamp after.
    u = b.create<math::RoundEvenOp>(k.loc, q);
    for (int64_t e = 0; e < ep.foldExceptions; ++e)
      u = b.create<arith::SelectOp>(
          k.loc, hitAt(e),
          b.create<arith::AddFOp>(k.loc, u, channelVec(ep.foldDeltaOff[e])), u);
  }
  auto clamp = [&](Value v, float lo, float hi) -> Value {
    v = b.create<arith::MaximumFOp>(k.loc, v, k.splatF(lo, lanes));
    return b.create<arith::MinimumFOp>(k.loc, v, k.splatF(hi, lanes));
  };
  // The last clamp before a quantized store joins the quantization's own
  // clamp: y / s rounds monotonically, so clamping y to [lo, hi] first gives
  // the same quotient as clamping it to [RN(lo / s), RN(hi / s)] after.
  bool lastClampJoins = ep.quantOut && !ep.chain;
  bool actJoins = lastClampJoins && ep.hasAct && !ep.hasResidual &&
                  !ep.hasPost && ep.actLo <= ep.actHi;
  bool postJoins = lastClampJoins && ep.hasPost && ep.postLo <= ep.postHi;
  // Before and after a chain that rounds more than once, the reference's
  // own roundings (a product, then a sum; a quotient) are no more exact
  // than the chain: one FMA and a multiplication by the reciprocal, three
  // fewer instructions per 16 outputs of a SiLU epilogue. Without AVX-512
  // (avx2) the quotient's vdivps also lay on the epilogue's latency chain.
  const bool approximate = ep.chain && ep.chainApproximate && k.hasFma;
  if (!u) {
    SmallVector<int64_t, 2> factors;
    for (int64_t off : {ep.multOff, ep.scaleOff})
      if (off >= 0)
        factors.push_back(off);
    bool fmaBias = approximate && ep.biasOff >= 0 && !factors.empty();
    for (size_t i = 0; i < factors.size(); ++i)
      y = fmaBias && i + 1 == factors.size()
              ? b.create<math::FmaOp>(k.loc, y, channelVec(factors[i]),
                                      channelVec(ep.biasOff))
                    .getResult()
              : b.create<arith::MulFOp>(k.loc, y, channelVec(factors[i]))
                    .getResult();
    if (ep.biasOff >= 0 && !fmaBias)
      y = b.create<arith::AddFOp>(k.loc, y, channelVec(ep.biasOff));
    if (ep.hasAct && !actJoins)
      y = clamp(y, ep.actLo, ep.actHi);
    // q - zp is a small integer, exact in f32: the round trip stays in f32.
    if (ep.midQuant)
      u = k.roundedQuotient(y, ep.midScale,
                            static_cast<float>(ep.midQmin - ep.midZp),
                            static_cast<float>(ep.midQmax - ep.midZp), intAcc);
  }
  // The residual: f32 as it stands, or its stored bytes widened to i32.
  Value rF32, rI32;
  if (!res.empty() && ep.resF32) {
    SmallVector<Value> r;
    for (Value p : res)
      r.push_back(k.maskedLoad(VectorType::get({16}, k.f32), p, mask,
                               k.splatF(0.f, 16)));
    rF32 = k.concat(r);
  } else if (!res.empty() && interleaved64) {
    // A pixel's 64 bytes in one load; vector v takes bytes 4v .. 4v + 3 of
    // each 128-bit lane, zero-extended (one in-lane vpshufb each), the
    // accumulators' interleave64 order.
    auto v64i8 = VectorType::get({64}, k.i8);
    Value zeros = k.splatI(0, 64, k.i8);
    SmallVector<Value> r;
    for (Value p : res) {
      Value bytes = k.load(v64i8, p);
      for (int64_t v = 0; v < 4; ++v) {
        SmallVector<int64_t> idx;
        for (int64_t l = 0; l < 4; ++l)
          for (int64_t i = 0; i < 4; ++i)
            for (int64_t byte = 0; byte < 4; ++byte)
              idx.push_back(byte ? 64 : 16 * l + 4 * v + i);
        r.push_back(b.create<vector::BitCastOp>(
            k.loc, VectorType::get({16}, k.i32),
            b.create<vector::ShuffleOp>(k.loc, bytes, zeros, idx)));
      }
    }
    rI32 = k.concat(r);
  } else if (!res.empty()) {
    SmallVector<Value> r;
    for (Value p : res)
      r.push_back(k.maskedLoad(VectorType::get({16}, k.i8), p, mask,
                               k.splatI(0, 16, k.i8)));
    rI32 = b.create<arith::ExtUIOp>(k.loc, k.like(vf, k.i32), k.concat(r));
  }
  if (ep.addFold && u) {
    // The requantized add in two FMAs, proven exact over every pair of
    // operands (OneStepAdd): no dequantization, no quotient.
    Value rf = b.create<arith::SIToFPOp>(k.loc, vf, rI32);
    Value v = b.create<math::FmaOp>(k.loc, rf, k.splatF(ep.addB, lanes),
                                    k.splatF(ep.addC, lanes));
    Value t = b.create<math::FmaOp>(k.loc, u, k.splatF(ep.addA, lanes), v);
    // The clamps on the bytes where they commute with the rounding and the
    // packs (OneStepAdd::clampsOnBytes); else t may leave i32, and the f32
    // clamps keep vcvtps2dq in range.
    if (!ep.addClampBytes)
      t = clampIf(t, ep.addClampLo, ep.addLo, ep.addClampHi, ep.addHi);
    storeOneStep(k.roundToI32(t), ep.addClampBytes, ep.addClampLo, ep.addLo,
                 ep.addClampHi, ep.addHi);
    return Value();
  }
  if (ep.midQuant)
    y = b.create<arith::MulFOp>(k.loc, u, k.splatF(ep.midScale, lanes));
  if (ep.hasResidual)
    y = b.create<arith::AddFOp>(
        k.loc, y,
        ep.resF32 ? rF32 : k.dequantizeI32(rI32, ep.resZp, ep.resScale));
  if (ep.hasPost && !postJoins)
    y = clamp(y, ep.postLo, ep.postHi);
  if (ep.chain) {
    llvm::SaveAndRestore<std::optional<std::pair<double, double>>> range(
        k.chainInputRange, ep.chainInputRange);
    Value first = k.add(c0, k.c(ep.chainChannelBase));
    y = ep.chain(k, y, [&](int64_t off) {
      return channelVecAt(off, first, nullptr, true);
    });
  }
  if (ep.quantOut) {
    // QuantizeLinear's arithmetic (KB::quantize); clamping to the integer
    // bounds before rounding gives the same result as saturating after, and
    // keeps fptosi in range.
    float lo = static_cast<float>(ep.qmin - ep.outZp),
          hi = static_cast<float>(ep.qmax - ep.outZp);
    float a = 1.f, z = 0.f; // no activation clamp
    if (actJoins || postJoins) {
      a = actJoins ? ep.actLo : ep.postLo;
      z = actJoins ? ep.actHi : ep.postHi;
    }
    // An integer accumulator's affine image is finite; a fused chain's
    // result may not be.
    bool finite = intAcc && !ep.chain;
    if (hasBytePacks(k) && parts >= 2) {
      // The packs saturate to the stored type: where that is the whole
      // range, an approximate quotient needs no clamp at that end (one
      // instruction each of a SiLU epilogue's 22 per 16 outputs). Below,
      // vcvtps2dq's 0x80000000 (NaN, -inf, or a quotient past int32) plus
      // a zero point >= 0 stays below the range; above, only a quotient
      // known to fit int32 (Epilogue::chainQuotientFits) converts to
      // itself.
      const bool fits = approximate && ep.chainQuotientFits;
      bool saturatesBelow = approximate && (ep.outZp >= 0 || fits) &&
                            ep.qmin == (ep.qmin < 0 ? -128 : 0);
      bool saturatesAbove = fits && ep.qmax == (ep.qmin < 0 ? 127 : 255);
      // Without AVX-512's one rounding conversion, a quotient known to stay
      // small rounds by a magic number (three instructions fewer).
      Value qi =
          !k.avx512 && saturatesBelow && saturatesAbove && a > z &&
                  ep.chainQuotientSmall
              ? k.quantizeRounded(y, ep.outScale, ep.outZp)
              : k.quantizeWide(y, ep.outScale, ep.outZp, lo, hi, finite, a, z,
                               approximate, saturatesBelow, saturatesAbove);
      storePacked(k, qi, ep.qmin < 0, outs, mask,
                  /*clamped=*/!saturatesBelow && !saturatesAbove,
                  /*offset128=*/false, interleaved64, std::nullopt,
                  std::nullopt, pairedPixels);
      return Value();
    }
    y = k.quantize(y, ep.outScale, ep.outZp, lo, hi, finite, a, z, approximate);
  }
  for (int64_t i = 0; i < parts; ++i) {
    if (pairedPixels)
      storePixelPair(k, k.slice(y, i), outs, i);
    else
      k.maskedStore(k.slice(y, i), outs[i], mask);
  }
  return ep.quantOut ? Value() : y;
}

namespace {

/// Output vectors per batched epilogue (epilogueAt): more independent
/// chains for the out-of-order core. 4 was measured best on Zen 4; on the
/// Intel AMX hosts 8 (EfficientNet-B0 int8, whose SiLU epilogues run on the
/// VNNI kernel there: 6.0 -> 5.5 ms, Xeon family 6 model 207).
size_t epilogueBatch(const KB &k) { return k.reciprocalDivision ? 8 : 4; }

/// Channel `c` of output pixel `pix` (a flat N*OH*OW index) of `s`.
Value outputAt(KB &k, const ConvSpec &s, Value pix, Value c) {
  return k.at(s.outOff, k.add(k.mul(pix, k.c(s.outCS)), c), s.ep.outBytes());
}

} // namespace

Value qatc::codegen::pixelPointer(KB &k, const ConvSpec &s, Value n, Value ih,
                                  Value iw) {
  Value pixel = k.add(k.mul(k.add(k.mul(n, k.c(s.H)), ih), k.c(s.W)), iw);
  return k.at(s.inOff, pixel, s.inCS * (s.int8 ? 1 : 4));
}

Value qatc::codegen::tapPointer(KB &k, const ConvSpec &s, Value n, Value ih,
                                Value iw, Value rowOk, Value padRow) {
  Value ok = k.andi(rowOk, k.lt(iw, k.c(s.W)));
  return k.select(ok, pixelPointer(k, s, n, ih, iw), padRow);
}

namespace {

/// The epilogues of 16 channels from `c` of output pixels `pix` (flat
/// N*OH*OW indices) of `s`, in batches of epilogueBatch: one chain of
/// operations on wider vectors, which LLVM splits into 16-lane instructions
/// side by side, so the out-of-order core overlaps their latencies (a SiLU
/// epilogue is a chain of about 30 dependent instructions).
///
/// `interleaved64`: each pixel's accumulators are 4 vectors of the 64
/// channels from `c` in interleave64's order (emitEpilogue), pixel by
/// pixel; a batch then takes whole pixels.
///
/// `stored`, where given, receives each pixel's f32 result (an f32 epilogue).
void epilogueAt(KB &k, const ConvSpec &s, ArrayRef<Value> accs,
                ArrayRef<Value> pix, Value c, Value mask,
                bool interleaved64 = false,
                SmallVectorImpl<Value> *stored = nullptr) {
  const size_t perPixel = interleaved64 ? 4 : 1;
  const size_t batch = std::max<size_t>(1, epilogueBatch(k) / perPixel);
  for (size_t first = 0; first < pix.size(); first += batch) {
    size_t n = std::min<size_t>(batch, pix.size() - first);
    SmallVector<Value> outs, res;
    for (size_t i = first; i < first + n; ++i) {
      outs.push_back(outputAt(k, s, pix[i], c));
      if (s.ep.hasResidual)
        res.push_back(k.at(s.ep.resOff,
                           k.add(k.mul(pix[i], k.c(s.ep.resCS)), c),
                           s.ep.resBytes()));
    }
    Value y = emitEpilogue(k, s.ep, accs.slice(first * perPixel, n * perPixel),
                           c, mask, outs, res, interleaved64);
    if (stored) {
      assert(y && !interleaved64 && "only an f32 result is handed back");
      for (size_t i = 0; i < n; ++i)
        stored->push_back(k.slice(y, i));
    }
  }
}

/// epilogueAt for 8 channels from `c` (DepthwiseSpec::halfBlocks): `accs`
/// holds one vector<8xi32> per pixel of `pix`, two pixels go to a vector
/// of emitEpilogue's `pairedPixels` (an odd last one fills both halves and
/// is stored twice), so a batch has as many independent chains as
/// epilogueAt's. `stored` receives each pixel's 8 f32 results, in order.
void pairedEpilogueAt(KB &k, const ConvSpec &s, ArrayRef<Value> accs,
                      ArrayRef<Value> pix, Value c,
                      SmallVectorImpl<Value> *stored = nullptr) {
  assert(!s.ep.hasResidual && "no residual in 8-channel blocks");
  SmallVector<Value> parts, outs;
  for (size_t p = 0; p < pix.size(); p += 2) {
    size_t q = std::min(p + 1, pix.size() - 1);
    parts.push_back(k.concat({accs[p], accs[q]}));
    for (size_t i : {p, q})
      outs.push_back(outputAt(k, s, pix[i], c));
  }
  const size_t batch = epilogueBatch(k);
  for (size_t first = 0; first < parts.size(); first += batch) {
    size_t n = std::min(batch, parts.size() - first);
    Value y =
        emitEpilogue(k, s.ep, ArrayRef<Value>(parts).slice(first, n), c,
                     Value(), ArrayRef<Value>(outs).slice(2 * first, 2 * n), {},
                     /*interleaved64=*/false, /*pairedPixels=*/true);
    if (stored) {
      assert(y && "only an f32 result is handed back");
      for (size_t i = 0; i < 2 * n && 2 * first + i < pix.size(); ++i)
        stored->push_back(k.slice(y, i, 8));
    }
  }
}

} // namespace

namespace {
/// A thread's part of a layer whose threads split the pixels
/// (DenseConvSpec::splitPixels): whole tiles [first, first + count), or,
/// where `even` holds (evenSplit), the pixels [begin, rangeEnd) in tiles of
/// MR and MR - 1.
struct PixelShare {
  Value first, count, begin, rangeEnd, even;
};
} // namespace

/// Whether threads splitting a map's pixels take an equal range each, in
/// tiles of MR and MR - 1 (emitDenseConv). From 32 tiles whole ones are
/// within 3 % of even, without a tile version of MR - 1 pixels (MobileNetV2
/// took 7.0 s to compile, not 4.5, with one on every layer).
static bool evenSplit(const DenseConvSpec &s) {
  const int64_t tiles = (s.N * s.OH * s.OW + s.MR - 1) / s.MR;
  return s.splitPixels && tiles < 32 && s.MR > 1;
}

static PixelShare pixelShareOf(KB &k, const DenseConvSpec &s) {
  const int64_t P = s.N * s.OH * s.OW, tiles = (P + s.MR - 1) / s.MR;
  PixelShare r;
  auto [t0, t1] = k.share(tiles);
  r.first = t0;
  r.count = k.sub(t1, t0);
  if (evenSplit(s)) {
    std::tie(r.begin, r.rangeEnd) = k.share(P);
    // The threads must choose alike, and a share may be as small as
    // P / (2 threads) pixels (plan::LayerFn): from P >= 2 MR threads
    // every range holds at least MR - 1. One thread takes the map in tiles
    // of MR and MR - 1 too where the whole tiles would leave one or two
    // pixels and those tiles cover it without overlapping: a 7x7 map's 49
    // pixels in 4 tiles of 6 and 5 of 5, not 8 of 6 and one pixel, whose 4
    // accumulators (8 for two) wait on each vpdpbusd's latency. AMD family
    // 26 model 2, 1 thread: ResNet-50 int8's layer4 convolutions 0.95-0.96
    // of their time; paired plans ResNet-50 int8 0.993 (twice), GoogLeNet
    // 0.994, EfficientNet-B0 0.992, the others 0.98-1.004. Larger
    // remainders keep their tile (the transformer's 64 rows as 10 x 6 + 4:
    // 1.004 in tiles of 6 and 5). Else one thread keeps the whole tiles
    // (its range is the map).
    const bool evenAlone =
        P % s.MR > 0 && P % s.MR <= 2 && s.evenSplitPixels(P) == P;
    r.even = k.andi(
        evenAlone ? k.lt(k.c(0), k.nthreads) : k.lt(k.c(1), k.nthreads),
        k.b.create<arith::CmpIOp>(k.loc, arith::CmpIPredicate::sge, k.c(P),
                                  k.mul(k.nthreads, k.c(2 * s.MR))));
  }
  return r;
}

std::pair<Value, Value> qatc::codegen::densePixelShare(KB &k,
                                                       const DenseConvSpec &s) {
  assert(s.splitPixels && "the threads split the blocks, not the pixels");
  const int64_t P = s.N * s.OH * s.OW;
  PixelShare r = pixelShareOf(k, s);
  Value p0 = k.mul(r.first, k.c(s.MR));
  Value p1 = k.b.create<arith::MinSIOp>(
      k.loc, k.mul(k.add(r.first, r.count), k.c(s.MR)), k.c(P));
  if (!r.even)
    return {p0, p1};
  return {k.select(r.even, r.begin, p0), k.select(r.even, r.rangeEnd, p1)};
}

void qatc::codegen::emitDenseConv(KB &k, Isa isa, const DenseConvSpec &s) {
  OpBuilder &b = k.b;
  const int64_t NB = s.NV * 16;
  const int64_t blocks = (s.OC + NB - 1) / NB;
  // K steps per tap: dwords of 4 channels (int8) or single floats.
  const int64_t KS = s.kSteps();
  const int64_t blockBytes = s.windowSteps() * NB * 4;
  auto accType = VectorType::get({16}, s.int8 ? k.i32 : k.f32);
  // Each accumulator holds 16 whole sums, not dotAccInit's pair halves.
  const bool wholeSums = s.splitPairs || s.bytePairs;
  // Tiles of MR consecutive output pixels in N*OH*OW order: a tile may span
  // rows, so small maps (7x7, 14x14) waste no tile on a row's tail.
  const int64_t P = s.N * s.OH * s.OW, tiles = (P + s.MR - 1) / s.MR;
  const int64_t tail = P % s.MR;
  const bool pointwise = s.pointwise();
  const int64_t inPixelBytes = s.inCS * (s.int8 ? 1 : 4);
  // A row of the 7x7 stem over 3 channels is one loop of 21 (int8: 7)
  // steps, not 7 loops of 3 (1) that each recompute 6 tap addresses. Rows
  // reaching into the padding keep the loop per tap.
  const bool foldRows = s.foldsRows();
  // A small window over few channels (the 3x3 stems over 3 channels: 9 K
  // steps) is copied per tile into a stack buffer, each pixel's window one
  // row of it (`patchBytes` apart), and the K loop reads that as a pointwise
  // one: one base register and constant displacements. Read in place, each
  // of the tile's 12 or 16 pixels kept a pointer per kernel row, which
  // spilled around the vpdpbusd, and the K loop ran 3 steps at a time.
  // Xeon family 6 model 207, 1 thread: MobileNetV2's stem 0.117 -> 0.075
  // ms, ShuffleNetV2's 0.109 -> 0.073, MobileNetV3-small's 0.128 -> 0.094.
  // Uncompacted, the 7x7 stems (6x64 tiles, 49 K steps) took 6-12 % longer
  // than read in place; they take compact patches (37 K steps,
  // DenseConvSpec::compactTaps).
  const int64_t windowSteps = s.windowSteps();
  const int64_t rowBytes = s.KW * inPixelBytes;
  const bool patches = s.copiesWindows();
  const int64_t rowCopy = rowBytes <= 16 ? 16 : rowBytes <= 32 ? 32 : 64;
  // A tap's and a kernel row's bytes in a patch.
  const int64_t tapBytes = s.compactTaps ? s.IC : inPixelBytes;
  const int64_t patchRow = s.KW * tapBytes;
  const int64_t patchBytes =
      (std::max(windowSteps * 4, (s.KH - 1) * patchRow + rowCopy) + 15) / 16 *
      16;
  // A kernel row's rowCopy bytes, its taps' channels moved together where
  // the taps are compact (the bytes past them are overwritten by the next
  // row's, or lie in the patch's slack).
  auto copyRow = [&](Value src, Value dst) {
    auto vRow = VectorType::get({rowCopy}, k.i8);
    Value row = k.load(vRow, src);
    if (s.compactTaps) {
      SmallVector<int64_t> from;
      for (int64_t i = 0; i < rowCopy; ++i)
        from.push_back(i < patchRow ? i / s.IC * inPixelBytes + i % s.IC : i);
      row = b.create<vector::ShuffleOp>(k.loc, row, row, from);
    }
    k.store(row, dst);
  };
  // (Before any loop or branch: their regions are not yet in the function
  // while they are built.)
  Value buf = patches ? k.entryAlloca(s.MR * patchBytes) : Value();
  // The weights come from memory at each run (a ResNet's are tens of MB),
  // and a block's first tile would wait for all of them (the block's other
  // tiles find them in L2). So each tile prefetches its share of the next
  // block into L2, one line per K step: the next block's fetch is spread
  // over this block's tiles. ResNet-18 fp32, layer4 (9.4 MB per 3x3 layer):
  // 9.1 -> 7.3 ms for its five convolutions, the fastest of 14 alternating
  // runs (Xeon family 6 model 207). From 256 KB of weights: ResNet-50
  // int8's 3x3 layers of layer3 (576 KB each) took 0.34-0.39 ms in the
  // model, 0.31 ms alone (their weights in L2), and take 0.31-0.32 ms with
  // the prefetch; the plan 0.955 of its time (median of 8 paired rounds, 8
  // faster; 64 KB: 0.968, other zoo plans within the noise either way).
  const bool prefetchNext = !s.packedInArena && blocks >= 2 && tiles >= 2 &&
                            blocks * blockBytes >= (256 << 10);
  // Each tile's part of the next block and the prefetch step through it,
  // for `shares` tiles per block (set once, before the tile loops).
  Value pfPart, pfStride;
  auto planPrefetch = [&](Value shares) {
    if (!prefetchNext)
      return;
    pfPart = k.div(k.c(blockBytes), shares);
    pfStride = k.div(k.add(pfPart, k.c(windowSteps - 1)), k.c(windowSteps));
  };
  // The work of output block `blk` (NB channels) over the `mr` pixels from
  // `p0`; the tile prefetches part `share` of the next block.
  auto work = [&](Value blk, Value p0, Value share, int64_t mr) {
    Value c0 = k.mul(blk, k.c(NB));
    // Packed weights and zero-point terms: constants, or packed at run time.
    auto packedAt = [&](int64_t off, Value i, int64_t es) {
      return s.packedInArena ? k.at(off, i, es) : k.weightsAt(off, i, es);
    };
    Value wBlk = packedAt(s.weightOff, blk, blockBytes);
    Value padRow = k.gep(k.weights, s.padRowOff);
    Value pfTile;
    if (prefetchNext)
      pfTile = k.gep(packedAt(s.weightOff,
                              k.b.create<arith::MinSIOp>(
                                  k.loc, k.add(blk, k.c(1)), k.c(blocks - 1)),
                              blockBytes),
                     k.mul(share, pfPart));

    auto tile = [&](int64_t mr) {
      // Each pixel's image, first input row and column.
      SmallVector<Value> img, ih0, iw0;
      for (int64_t m = 0; m < mr && !pointwise; ++m) {
        Value p = k.add(p0, k.c(m));
        Value r = k.rem(p, k.c(s.OH * s.OW));
        img.push_back(k.div(p, k.c(s.OH * s.OW)));
        ih0.push_back(k.sub(k.mul(k.div(r, k.c(s.OW)), k.c(s.SH)), k.c(s.PT)));
        iw0.push_back(k.sub(k.mul(k.rem(r, k.c(s.OW)), k.c(s.SW)), k.c(s.PL)));
      }
      SmallVector<Value> init;
      for (int64_t m = 0; m < mr; ++m)
        for (int64_t v = 0; v < s.NV; ++v) {
          if (!s.int8) {
            init.push_back(k.splatF(0.f, 16));
            continue;
          }
          Value corr = k.load(accType, packedAt(s.corrOff + v * 64, c0, 4));
          init.push_back(wholeSums ? corr : dotAccInit(k, isa, corr));
        }
      // `steps` K steps from the MR pixels `px` and the weights at `w`.
      auto kLoop = [&](ArrayRef<Value> px, Value w, int64_t steps,
                       ValueRange init, Value tapIndex, int64_t tapSteps) {
        Value pf =
            pfTile
                ? k.gep(pfTile, k.mul(k.mul(tapIndex, k.c(tapSteps)), pfStride))
                : Value();
        return k.loop(
            k.c(0), k.c(steps), 1, init, [&](Value ks, ValueRange a2) {
              if (pf)
                b.create<LLVM::Prefetch>(k.loc, k.gep(pf, k.mul(ks, pfStride)),
                                         b.getI32IntegerAttr(0),
                                         b.getI32IntegerAttr(2),
                                         b.getI32IntegerAttr(1));
              Value kOff = k.mul(ks, k.c(4));
              SmallVector<Value> av, wv, signs;
              SmallVector<std::pair<Value, Value>> pairs;
              for (int64_t m = 0; m < mr; ++m) {
                Value a = k.load(s.int8 ? k.i32 : k.f32, k.gep(px[m], kOff));
                if (s.splitPairs) {
                  pairs.push_back(splitPairs(k, isa, a));
                } else if (s.bytePairs) {
                  // q = stored - 128: the top bit flipped.
                  Value q = b.create<arith::XOrIOp>(
                      k.loc,
                      b.create<vector::BitCastOp>(
                          k.loc, VectorType::get({32}, k.i8), k.splat(a, 8)),
                      k.splatI(-128, 32, k.i8));
                  if (s.signedBytes) {
                    signs.push_back(q);
                    q = b.create<math::AbsIOp>(k.loc, q);
                  }
                  av.push_back(q);
                } else {
                  av.push_back(k.splat(a, 16));
                }
              }
              Value wK = k.gep(w, k.mul(ks, k.c(NB * 4)));
              for (int64_t v = 0; v < s.NV; ++v)
                wv.push_back(k.load(accType, k.gep(wK, v * 64)));
              SmallVector<Value> next;
              for (int64_t m = 0; m < mr; ++m)
                for (int64_t v = 0; v < s.NV; ++v) {
                  Value acc = a2[m * s.NV + v];
                  if (s.splitPairs)
                    next.push_back(emitDot4Split(k, isa, acc, pairs[m], wv[v]));
                  else if (s.bytePairs)
                    next.push_back(
                        emitDot4Bytes(k, acc, av[m], wv[v],
                                      s.signedBytes ? signs[m] : Value()));
                  else
                    next.push_back(s.int8 ? emitDot4(k, isa, acc, av[m], wv[v])
                                          : b.create<vector::FMAOp>(
                                                k.loc, av[m], wv[v], acc));
                }
              return next;
            });
      };
      SmallVector<Value> accs;
      if (patches) {
        // Row kh of pixel m's window: one copy of rowCopy bytes where the
        // row lies inside the image (the bytes past rowBytes land in the
        // next row's place, or in the patch's slack, before that row's own
        // copy), else tap by tap, each inside or the padding. Where the
        // tile lies in one output row and kernel row kh of every pixel
        // inside the image, the pixels' rows are constant offsets from the
        // first's, with no check each: MobileNetV3-small's stem (16-pixel
        // tiles of 16 channels) 0.083 -> 0.073 ms, ShuffleNetV2's 0.076 ->
        // 0.065.
        auto vTap = VectorType::get({inPixelBytes}, k.i8);
        const int64_t span = (mr - 1) * s.SW;
        Value oneRow =
            k.lt(k.add(k.rem(p0, k.c(s.OW)), k.c(mr - 1)), k.c(s.OW));
        for (int64_t kh = 0; kh < s.KH; ++kh) {
          auto each = [&] {
            for (int64_t m = 0; m < mr; ++m) {
              Value ih = k.add(ih0[m], k.c(kh));
              Value dst = k.gep(buf, m * patchBytes + kh * patchRow);
              Value inside =
                  k.andi(k.lt(ih, k.c(s.H)), k.lt(iw0[m], k.c(s.W - s.KW + 1)));
              k.ifElse(
                  inside,
                  [&] { copyRow(pixelPointer(k, s, img[m], ih, iw0[m]), dst); },
                  [&] {
                    for (int64_t kw = 0; kw < s.KW; ++kw) {
                      Value iw = k.add(iw0[m], k.c(kw));
                      Value src = tapPointer(k, s, img[m], ih, iw,
                                             k.lt(ih, k.c(s.H)), padRow);
                      k.store(k.load(vTap, src), k.gep(dst, kw * tapBytes));
                    }
                  });
            }
          };
          if (s.W - s.KW + 1 - span <= 0) {
            each();
            continue;
          }
          Value ih = k.add(ih0[0], k.c(kh));
          Value fast =
              k.andi(oneRow, k.andi(k.lt(ih, k.c(s.H)),
                                    k.lt(iw0[0], k.c(s.W - s.KW + 1 - span))));
          k.ifElse(
              fast,
              [&] {
                Value first = pixelPointer(k, s, img[0], ih, iw0[0]);
                for (int64_t m = 0; m < mr; ++m)
                  copyRow(k.gep(first, m * s.SW * inPixelBytes),
                          k.gep(buf, m * patchBytes + kh * patchRow));
              },
              each);
        }
        SmallVector<Value> px;
        for (int64_t m = 0; m < mr; ++m)
          px.push_back(k.gep(buf, m * patchBytes));
        accs = kLoop(px, wBlk, windowSteps, init, k.c(0), windowSteps);
      } else
        accs = k.loop(k.c(0), k.c(s.KH), 1, init, [&](Value kh, ValueRange a0) {
          auto perTap = [&] {
            return k.loop(
                k.c(0), k.c(s.KW), 1, a0, [&](Value kw, ValueRange a1) {
                  SmallVector<Value> px;
                  for (int64_t m = 0; m < mr; ++m) {
                    if (pointwise) {
                      px.push_back(
                          k.at(s.inOff, k.add(p0, k.c(m)), inPixelBytes));
                      continue;
                    }
                    Value ih = k.add(ih0[m], k.mul(kh, k.c(s.DH)));
                    Value iw = k.add(iw0[m], k.mul(kw, k.c(s.DW)));
                    px.push_back(tapPointer(k, s, img[m], ih, iw,
                                            k.lt(ih, k.c(s.H)), padRow));
                  }
                  Value tap = k.add(k.mul(kh, k.c(s.KW)), kw);
                  Value wTap = k.gep(wBlk, k.mul(tap, k.c(KS * NB * 4)));
                  return kLoop(px, wTap, KS, a1, tap, KS);
                });
          };
          if (!foldRows)
            return perTap();
          Value wRow = k.gep(wBlk, k.mul(kh, k.c(s.KW * KS * NB * 4)));
          // The whole kernel row of every pixel lies inside the image (an
          // unsigned compare also rejects negative indices).
          auto anyRow = [&] {
            Value inside;
            SmallVector<Value> px;
            for (int64_t m = 0; m < mr; ++m) {
              Value ih = k.add(ih0[m], k.mul(kh, k.c(s.DH)));
              Value ok =
                  k.andi(k.lt(ih, k.c(s.H)), k.lt(iw0[m], k.c(s.W - s.KW + 1)));
              inside = inside ? k.andi(inside, ok) : ok;
              px.push_back(pixelPointer(k, s, img[m], ih, iw0[m]));
            }
            return k.ifElseValues(
                inside,
                [&] { return kLoop(px, wRow, s.KW * KS, a0, kh, s.KW * KS); },
                perTap);
          };
          // Most tiles lie in one output row with every kernel row inside
          // the image: their pixels are then constant offsets from the
          // first, which the loads take as displacements. Sixteen pixel
          // pointers spilled around the vpdpbusd otherwise: MobileNetV3's
          // 3x3 stride-2 stem (16x16 tiles) 0.072 -> 0.052 ms. Not for
          // fewer pixels: LLVM then keeps the broadcasts that neighbouring
          // taps share in registers, and the spills move there (the 7x7
          // stems of SqueezeNet, 8x48 tiles, and ResNet, 6x64, 8 % and
          // 1.5 % slower; 12x32 tiles the same).
          const int64_t span = (mr - 1) * s.SW;
          if (mr < 16 || s.W - s.KW + 1 - span <= 0)
            return anyRow();
          Value ih = k.add(ih0[0], k.mul(kh, k.c(s.DH)));
          Value oneRow =
              k.lt(k.add(k.rem(p0, k.c(s.OW)), k.c(mr - 1)), k.c(s.OW));
          Value fast =
              k.andi(oneRow, k.andi(k.lt(ih, k.c(s.H)),
                                    k.lt(iw0[0], k.c(s.W - s.KW + 1 - span))));
          return k.ifElseValues(
              fast,
              [&] {
                Value first = pixelPointer(k, s, img[0], ih, iw0[0]);
                SmallVector<Value> px;
                for (int64_t m = 0; m < mr; ++m)
                  px.push_back(k.gep(first, m * s.SW * inPixelBytes));
                return kLoop(px, wRow, s.KW * KS, a0, kh, s.KW * KS);
              },
              anyRow);
        });
      if (s.int8 && !wholeSums)
        for (Value &acc : accs)
          acc = dotAccFinish(k, isa, acc);
      if (s.rowEpilogue) {
        assert(blocks == 1 && "a row epilogue needs every channel in a tile");
        SmallVector<SmallVector<Value>> rows(mr);
        SmallVector<Value> pix;
        for (int64_t m = 0; m < mr; ++m) {
          rows[m].assign(accs.begin() + m * s.NV,
                         accs.begin() + (m + 1) * s.NV);
          pix.push_back(k.add(p0, k.c(m)));
        }
        s.rowEpilogue(k, s, rows, pix);
        return;
      }
      if (s.interleaved) {
        // Each pixel's 64 channels one store.
        SmallVector<Value> pix;
        for (int64_t m = 0; m < mr; ++m)
          pix.push_back(k.add(p0, k.c(m)));
        epilogueAt(k, s, accs, pix, c0, k.channelMask(c0, s.OC, 16),
                   /*interleaved64=*/true);
        return;
      }
      for (int64_t v = 0; v < s.NV; ++v) {
        Value c = k.add(c0, k.c(v * 16));
        Value mask = k.channelMask(c, s.OC, NB);
        SmallVector<Value> vs, pix;
        for (int64_t m = 0; m < mr; ++m) {
          vs.push_back(accs[m * s.NV + v]);
          pix.push_back(k.add(p0, k.c(m)));
        }
        epilogueAt(k, s, vs, pix, c, mask);
      }
    };
    tile(mr);
  };
  // Threads splitting a map's pixels: an equal range each, in tiles of MR
  // and MR - 1 (below), or whole tiles.
  const bool even = evenSplit(s);
  // The `mr` pixels from `p0`, for mr one of MR, MR - 1 (evenSplit) and the
  // map's tail.
  auto sized = [&](Value blk, Value p0, Value share, Value mr) {
    SmallVector<int64_t> sizes = {s.MR};
    if (even)
      sizes.push_back(s.MR - 1);
    if (tail && !llvm::is_contained(sizes, tail))
      sizes.push_back(tail);
    std::function<void(size_t)> from = [&](size_t i) {
      if (i + 1 == sizes.size())
        return work(blk, p0, share, sizes[i]);
      k.ifElse(
          k.b.create<arith::CmpIOp>(k.loc, arith::CmpIPredicate::eq, mr,
                                    k.c(sizes[i])),
          [&] { work(blk, p0, share, sizes[i]); }, [&] { from(i + 1); });
    };
    from(0);
  };
  // Tile `t`'s first pixel and size: the map's last tile holds the
  // remaining `tail` pixels.
  auto tileAt = [&](Value t) -> std::pair<Value, Value> {
    Value p0 = k.mul(t, k.c(s.MR));
    Value mr = k.c(s.MR);
    if (tail)
      mr = k.select(k.lt(k.add(p0, k.c(s.MR - 1)), k.c(P)), mr, k.c(tail));
    return {p0, mr};
  };
  if (s.splitPixels) {
    // Each thread a range of the map's tiles, every block over it (the
    // blocks outermost, so a block's weights stay cached across the range).
    PixelShare share = pixelShareOf(k, s);
    Value first = share.first, count = share.count;
    // Tile i of the thread's range: its first pixel and size.
    std::function<std::pair<Value, Value>(Value)> tileOfRange = [&](Value i) {
      return tileAt(k.add(first, i));
    };
    if (even) {
      // Or the thread's range of pixels, in n = ceil(range / MR) tiles of
      // MR and MR - 1 pixels. Whole tiles to each thread split attention's
      // 64 rows in 6-row tiles 30 / 34 between 2 threads (a 7x7 map's 49
      // pixels 30 / 19): in the transformer's GELU projection thread 1 took
      // 20.3 us to thread 0's 18.3, and now both 19.6. Also tried: any tile
      // size (a version each), the rows past a range's whole tiles as one
      // small tile (32 = 5 x 6 + 2: its 8 accumulators wait on each
      // vpdpbusd), and the middle tile's blocks split between the threads
      // (20-22 us each).
      Value begin = share.begin, rangeEnd = share.rangeEnd;
      Value len = k.sub(rangeEnd, begin);
      Value n = k.div(k.add(len, k.c(s.MR - 1)), k.c(s.MR));
      count = k.select(share.even, n, count);
      // The first r tiles hold MR pixels, the others MR - 1. A range too
      // short for that (r < 0: 13 pixels in tiles of 6 and 5) takes n
      // tiles of MR - 1, the last ending where the range does: the pixels
      // they overlap are computed twice, by this thread.
      Value r = k.b.create<arith::MaxSIOp>(
          k.loc, k.sub(len, k.mul(n, k.c(s.MR - 1))), k.c(0));
      tileOfRange = [&, begin, rangeEnd,
                     r](Value i) -> std::pair<Value, Value> {
        Value longer = k.lt(i, r);
        Value emr = k.select(longer, k.c(s.MR), k.c(s.MR - 1));
        Value ep0 = k.b.create<arith::MinSIOp>(
            k.loc,
            k.add(begin,
                  k.add(k.mul(i, k.c(s.MR - 1)), k.select(longer, i, r))),
            k.sub(rangeEnd, emr));
        auto [wp0, wmr] = tileAt(k.add(first, i));
        return {k.select(share.even, ep0, wp0), k.select(share.even, emr, wmr)};
      };
    }
    planPrefetch(k.b.create<arith::MaxSIOp>(k.loc, count, k.c(1)));
    k.loop(k.c(0), k.c(blocks), 1, [&](Value blk) {
      k.loop(k.c(0), count, 1, [&](Value i) {
        auto [p0, mr] = tileOfRange(i);
        sized(blk, p0, i, mr);
      });
    });
    return;
  }
  auto [begin, end] = s.shareBegin ? std::make_pair(s.shareBegin, s.shareEnd)
                                   : k.share(blocks * tiles);
  planPrefetch(k.c(tiles));
  k.loop(begin, end, 1, [&](Value idx) {
    Value t = k.rem(idx, k.c(tiles));
    auto [p0, mr] = tileAt(t);
    sized(k.div(idx, k.c(tiles)), p0, t, mr);
  });
}

/// A v16i32 constant that LLVM's shuffle combiner cannot see (it passes
/// through an empty inline asm), as a dword permute's index: seen, the
/// combiner merged the lane inserts, the permute and the vpshufb after it
/// into its own sequence of about eleven shuffles.
static Value opaqueIndex(KB &k, ArrayRef<int32_t> idx) {
  auto v16i32 = VectorType::get({16}, k.i32);
  return k.b
      .create<LLVM::InlineAsmOp>(
          k.loc, v16i32,
          ValueRange{k.b.create<arith::ConstantOp>(
              k.loc, v16i32, DenseElementsAttr::get(v16i32, idx))},
          "", "=v,0", /*has_side_effects=*/false,
          /*is_align_stack=*/false, LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

/// `d` (v16i32) whose 128-bit lane j holds, in dword l, channels 4j..4j+3
/// of row l: each channel's 4 row bytes made one dword within the lane (a
/// vpshufb), so lane j holds channels 4j..4j+3 as interleaveRows gives them.
static Value interleaveLanes(KB &k, Value d) {
  OpBuilder &b = k.b;
  auto v64i8 = VectorType::get({64}, k.i8);
  SmallVector<int8_t> bytes(64);
  for (int64_t l = 0; l < 4; ++l)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t r = 0; r < 4; ++r)
        bytes[16 * l + 4 * j + r] = static_cast<int8_t>(4 * r + j);
  auto bytesV = b.create<arith::ConstantOp>(
      k.loc, v64i8, DenseElementsAttr::get(v64i8, ArrayRef<int8_t>(bytes)));
  Value by = b.create<vector::BitCastOp>(k.loc, v64i8, d);
  by = b.create<LLVM::CallIntrinsicOp>(
            k.loc, v64i8, "llvm.x86.avx512.pshuf.b.512", ValueRange{by, bytesV})
           .getResult(0);
  return b.create<vector::BitCastOp>(k.loc, d.getType(), by);
}

/// Concatenation of two vectors of one type, as one shuffle. KB::concat
/// inserts the parts into a zero vector instead; in the depthwise row
/// interleaves that form compiled to other code (a zeroed register, another
/// allocation: MobileNetV2's AVX-512 assembly differed in 600 lines).
static Value concatPair(KB &k, Value lo, Value hi) {
  SmallVector<int64_t> cat(2 * cast<VectorType>(lo.getType()).getNumElements());
  std::iota(cat.begin(), cat.end(), 0);
  return k.b.create<vector::ShuffleOp>(k.loc, lo, hi, cat);
}

/// One dword per channel holding the bytes of up to 4 kernel rows,
/// [r0, r1, r2, r3], from the rows' 16 channels (vector<16xi8> each): the
/// operand vpdpbusd multiplies by a channel's 4 row weights.
static Value interleaveRows(KB &k, Isa isa, ArrayRef<Value> x) {
  OpBuilder &b = k.b;
  auto v16i32 = VectorType::get({16}, k.i32);
  if (hasAvx512(isa)) {
    // The rows as the four 128-bit lanes; vpermd transposes the 4x4 dwords
    // (lane L dword j to lane j dword L), so lane j holds channels 4j..4j+3
    // of every row, and vpshufb interleaves them within the lane: two
    // shuffles (LLVM lowers the generic byte interleave below to about
    // eight on AVX-512).
    Value all =
        concatPair(k, concatPair(k, x[0], x[1]), concatPair(k, x[2], x[3]));
    SmallVector<int32_t> perm(16);
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t l = 0; l < 4; ++l)
        perm[4 * j + l] = static_cast<int32_t>(4 * l + j);
    Value d = b.create<vector::BitCastOp>(k.loc, v16i32, all);
    d = b.create<LLVM::CallIntrinsicOp>(k.loc, v16i32,
                                        "llvm.x86.avx512.permvar.si.512",
                                        ValueRange{d, opaqueIndex(k, perm)})
            .getResult(0);
    return interleaveLanes(k, d);
  }
  SmallVector<int64_t> pairMask, quadMask;
  for (int64_t c = 0; c < 16; ++c) {
    pairMask.append({c, 16 + c});
    quadMask.append({2 * c, 2 * c + 1, 32 + 2 * c, 32 + 2 * c + 1});
  }
  Value lo = b.create<vector::ShuffleOp>(k.loc, x[0], x[1], pairMask);
  Value hi = b.create<vector::ShuffleOp>(k.loc, x[2], x[3], pairMask);
  return b.create<vector::BitCastOp>(
      k.loc, v16i32, b.create<vector::ShuffleOp>(k.loc, lo, hi, quadMask));
}

/// interleaveRows for 32 channels (AVX-512): rows of vector<32xi8>, two
/// v16i32 of channels 0-15 and 16-31, in order. The rows in pairs make two
/// zmm, [r0 | r1] and [r2 | r3] (a lane insert each; none where r3 is the
/// zero row, a ymm load clearing the top); per 16 channels, one vpermt2d
/// takes each row's 4 dwords of them in interleaveRows's transposed order
/// and vpshufb interleaves: 5 or 6 shuffles per 32 channels, where two
/// interleaveRows take 10 and interleave64 takes 4.
static SmallVector<Value> interleaveRows32(KB &k, ArrayRef<Value> x) {
  OpBuilder &b = k.b;
  auto v16i32 = VectorType::get({16}, k.i32);
  Value lo =
      b.create<vector::BitCastOp>(k.loc, v16i32, concatPair(k, x[0], x[1]));
  Value hi =
      b.create<vector::BitCastOp>(k.loc, v16i32, concatPair(k, x[2], x[3]));
  SmallVector<Value> out;
  for (int64_t v = 0; v < 2; ++v) {
    // Lane j, dword l: row l's channels 16v + 4j .. 16v + 4j + 3, which is
    // dword 4v + j of its row (rows 1 and 3 are the upper halves, the
    // second table is indices 16-31).
    SmallVector<int32_t> idx(16);
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t l = 0; l < 4; ++l)
        idx[4 * j + l] =
            static_cast<int32_t>(l / 2 * 16 + l % 2 * 8 + 4 * v + j);
    Value d = b.create<LLVM::CallIntrinsicOp>(
                   k.loc, v16i32, "llvm.x86.avx512.vpermi2var.d.512",
                   ValueRange{lo, opaqueIndex(k, idx), hi})
                  .getResult(0);
    out.push_back(interleaveLanes(k, d));
  }
  return out;
}

/// emitDot4Rows's operands from 4 rows of 16 (or 8) channels' bytes
/// (vector<16xi8> each): rows 0 and 2, then 1 and 3, each channel's two
/// bytes adjacent as i16 (a byte interleave and a widening per 8 channels,
/// in order).
static std::pair<Value, Value> splitRows(KB &k, ArrayRef<Value> x) {
  OpBuilder &b = k.b;
  const int64_t n = cast<VectorType>(x[0].getType()).getNumElements();
  auto pairsType = VectorType::get({2 * n}, b.getI16Type());
  auto pairOf = [&](Value a, Value c) -> Value {
    SmallVector<int64_t> idx;
    for (int64_t ch = 0; ch < n; ++ch)
      idx.append({ch, n + ch});
    return b.create<arith::ExtUIOp>(
        k.loc, pairsType, b.create<vector::ShuffleOp>(k.loc, a, c, idx));
  };
  return {pairOf(x[0], x[2]), pairOf(x[1], x[3])};
}

/// Four rows of 64 channels' bytes (v64i8) interleaved into one dword per
/// channel, four v16i32 in interleave64Index's order: vpunpck{l,h}bw pairs
/// rows 0-1 and 2-3, vpunpck{l,h}wd the pairs, all within 128-bit lanes,
/// so vector v's lane L holds channels 16L + 4v .. 16L + 4v + 3.
static SmallVector<Value> interleave64(KB &k, ArrayRef<Value> x) {
  OpBuilder &b = k.b;
  auto v32i16 = VectorType::get({32}, b.getI16Type());
  auto v16i32 = VectorType::get({16}, k.i32);
  // Per 128-bit lane of `lanes` elements: its elements [half * lanes / 2,
  // (half + 1) * lanes / 2) of a and b, alternating.
  auto unpack = [&](Value a, Value c, int64_t lanes, int64_t half) -> Value {
    int64_t n = cast<VectorType>(a.getType()).getNumElements();
    SmallVector<int64_t> idx;
    for (int64_t L = 0; L < n / lanes; ++L)
      for (int64_t m = 0; m < lanes / 2; ++m) {
        int64_t e = L * lanes + half * lanes / 2 + m;
        idx.append({e, n + e});
      }
    return b.create<vector::ShuffleOp>(k.loc, a, c, idx);
  };
  SmallVector<Value> out;
  Value ab[2], cd[2];
  for (int64_t h = 0; h < 2; ++h) {
    ab[h] =
        b.create<vector::BitCastOp>(k.loc, v32i16, unpack(x[0], x[1], 16, h));
    cd[h] =
        b.create<vector::BitCastOp>(k.loc, v32i16, unpack(x[2], x[3], 16, h));
  }
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t q = 0; q < 2; ++q)
      out.push_back(b.create<vector::BitCastOp>(k.loc, v16i32,
                                                unpack(ab[h], cd[h], 8, q)));
  return out;
}

/// The int8 depthwise kernel without dilation. Each input column's kernel
/// rows (in groups of 4) are interleaved once into a dword per channel
/// (interleaveRows, or interleave64 for the wide blocks) and serve every
/// output pixel that reads that column, each with its own column of
/// weights, packed [kw][output row][row group][C16][4 rows] (see
/// DepthwiseSpec::rows). A band of `rows` output rows is swept in tiles of
/// pixels for one block of channels at a time (4 pixels of 16 channels, or
/// 2 of 64 in the wide blocks), so the columns a tile shares with the next
/// one (KW - SW of them) are carried over in registers: each input column
/// of the band is loaded and interleaved once per block.
static void emitDepthwiseColumns(KB &k, Isa isa, const DepthwiseSpec &s) {
  constexpr int64_t kPixels = 4;
  const int64_t C16 = (s.C + 15) / 16 * 16;
  const int64_t R = s.rows, span = (R - 1) * s.SH + s.KH;
  const int64_t groups = s.rowGroups();
  const int64_t carried = std::max<int64_t>(0, s.KW - s.SW);
  const int64_t bands = (s.OH + R - 1) / R;
  auto v16i32 = VectorType::get({16}, k.i32);
  // W pixels of the zero point (lowerConv sizes the padding row so).
  Value padPlane = k.gep(k.weights, s.padRowOff);
  // A band's whole tiles go in chunks whose input rows (band rows x chunk
  // columns x C bytes) stay in L1 while a channel block sweeps them; a
  // chunk starts its carried columns afresh, and the last one ends with the
  // row's tail.
  const int64_t full = s.OW / kPixels * kPixels, tail = s.OW % kPixels;
  const int64_t chunk = s.chunkPixels(), chunks = s.chunks();
  // The wide blocks of 64 channels first, then of 32 (pairBlocks), then of
  // 16.
  const int64_t wide = s.wideBlocks, pairs = s.pairBlocks;
  // Channels per narrow block: 8 in halfBlocks (C a multiple of 8).
  const int64_t chans = s.halfBlocks ? 8 : 16;
  assert((!s.halfBlocks || (s.C % 8 == 0 && s.splitRows && !wide && !pairs)) &&
         "8-channel blocks of whole row pairs");
  const int64_t blocks =
      s.halfBlocks ? s.C / 8
                   : wide + pairs + (C16 - 64 * wide - 32 * pairs) / 16;
  // Work items (image, band, chunk, channel block), the block fastest: the
  // threads split even a 7x7 map evenly.
  auto [begin, end] = k.share(s.N * bands * chunks * blocks);
  k.loop(begin, end, 1, [&](Value idx) {
    Value blk = k.rem(idx, k.c(blocks));
    Value rest = k.div(idx, k.c(blocks));
    Value chunkIdx = k.rem(rest, k.c(chunks));
    rest = k.div(rest, k.c(chunks));
    Value bandIdx = k.rem(rest, k.c(bands));
    Value n = k.div(rest, k.c(bands));
    Value oh0 = k.mul(bandIdx, k.c(R));
    // Each input row's first pixel, and whether the row lies inside the
    // image (a row above it has a negative ih: unsigned, not below H).
    SmallVector<Value> rowPix, rowOk;
    for (int64_t t = 0; t < span; ++t) {
      Value ih = k.add(k.mul(oh0, k.c(s.SH)), k.c(t - s.PT));
      rowOk.push_back(k.lt(ih, k.c(s.H)));
      rowPix.push_back(k.mul(k.add(k.mul(n, k.c(s.H)), ih), k.c(s.W)));
    }
    // The band's first `nrows` output rows (fewer than R at the bottom),
    // for a channel block of V vectors of 16 channels (1, 2 in order, or 4
    // in interleave64's order) of which `lanes` hold channels (a prefix of
    // 16 when V is 1: a constant mask): the whole tiles [first, end), and
    // the tail in the last chunk.
    auto block = [&](int64_t nrows, Value c0, int64_t V, int64_t lanes,
                     Value first, Value end) {
      const int64_t np = V == 4 ? 2 : kPixels;
      auto vIn = VectorType::get({chans * V}, k.i8);
      Value mask = k.prefixMask(chans, k.c(lanes));
      Value zero = k.splatI(0, chans * V, k.i8);
      // The block's per-channel arrays from one base register: constant
      // displacements, not a register (spilled) per array.
      Value wBase = k.gep(k.weights, k.mul(c0, k.c(4)));
      auto channelsAt = [&](int64_t off, int64_t v) {
        return k.load(VectorType::get({chans}, k.i32),
                      k.gep(wBase, off + 64 * v));
      };
      SmallVector<Value> corr, w; // w: [kw][output row][row group]
      for (int64_t v = 0; v < V; ++v)
        corr.push_back(channelsAt(s.corrOff, v));
      // A wide block's 24 weight vectors (3x3) would not fit in registers
      // beside its accumulators: they are loaded where used, as vpdpbusd's
      // memory operand.
      auto weight = [&](int64_t i, int64_t v) {
        if (s.splitRows)
          return k.load(
              VectorType::get({4 * chans}, k.b.getI16Type()),
              k.gep(k.weights,
                    k.add(k.mul(c0, k.c(8)), k.c(s.weightOff + i * C16 * 8))));
        return V == 1 ? w[i] : channelsAt(s.weightOff + i * C16 * 4, v);
      };
      // Values per column and row group: emitDot4Rows's two, or V.
      const int64_t CV = s.splitRows ? 2 : V;
      // The band's sums of this chunk (DepthwiseSpec::sumsOff), one per
      // row, carried in registers from tile to tile after the columns.
      const bool sums = s.sumsOff >= 0;
      assert((!sums || V == 1) && "row sums of 16-channel blocks only");
      const int64_t nsums = sums ? nrows : 0;
      // (emitDot4Rows's weights are loaded where used: 6 of 4 ymm each
      // would not fit in registers.)
      if (V == 1 && !s.splitRows)
        for (int64_t i = 0; i < s.KW * R * groups; ++i)
          w.push_back(channelsAt(s.weightOff + i * C16 * 4, 0));
      // Each band row's pixel 0 at channel c0; a row outside the image
      // points at the padding plane, a whole row of the zero point, so no
      // tap checks its row.
      Value padAt = k.gep(padPlane, c0);
      SmallVector<Value> rowBase;
      for (int64_t t = 0; t < span; ++t)
        rowBase.push_back(k.select(
            rowOk[t], k.gep(k.at(s.inOff, rowPix[t], s.inCS), c0), padAt));
      // Row group g of input column iw0 + j (V vectors): a tap is its row's
      // pointer plus the column's offset, or the padding where the column
      // lies outside the image. `checkCol` asks at run time; a column known
      // at compile time (`staticIw0`) is decided here.
      auto column = [&](Value iw0, std::optional<int64_t> staticIw0, int64_t j,
                        int64_t g, bool checkCol) -> SmallVector<Value> {
        std::optional<bool> inside;
        if (staticIw0)
          inside = *staticIw0 + j >= 0 && *staticIw0 + j < s.W;
        bool padding = inside && !*inside;
        Value colOk =
            checkCol && !inside ? k.lt(k.add(iw0, k.c(j)), k.c(s.W)) : Value();
        // iw0 * inCS + j * inCS, not (iw0 + j) * inCS: the constant folds
        // into the load's displacement.
        Value colOff =
            padding ? Value() : k.add(k.mul(iw0, k.c(s.inCS)), k.c(j * s.inCS));
        SmallVector<Value> x;
        for (int64_t t = 4 * g; t < 4 * g + 4; ++t) {
          if (t >= span) {
            x.push_back(zero);
            continue;
          }
          Value p = padding ? padAt : k.gep(rowBase[t], colOff);
          if (colOk)
            p = k.select(colOk, p, padAt);
          x.push_back(V > 1 || lanes == chans
                          ? k.load(vIn, p)
                          : k.maskedLoad(vIn, p, mask, zero));
        }
        if (V == 4)
          return interleave64(k, x);
        if (V == 2)
          return interleaveRows32(k, x);
        if (s.splitRows) {
          auto [p02, p13] = splitRows(k, x);
          return {p02, p13};
        }
        return {interleaveRows(k, isa, x)};
      };
      // Pixels [ow0, ow0 + count) of the rows; `in` holds the first
      // `carried` columns ([column][row group][V]), the result the next
      // tile's.
      auto tile = [&](Value ow0, std::optional<int64_t> staticOw0,
                      int64_t count, ValueRange in, bool checkCol) {
        Value iw0 = k.sub(k.mul(ow0, k.c(s.SW)), k.c(s.PL));
        std::optional<int64_t> staticIw0;
        if (staticOw0)
          staticIw0 = *staticOw0 * s.SW - s.PL;
        SmallVector<Value> acc, out; // acc: [row][pixel][V]
        SmallVector<Value> rowSums;
        for (int64_t i = 0; i < nrows * count; ++i)
          for (int64_t v = 0; v < V; ++v) {
            // Plain loads, which LLVM keeps in registers where it can:
            // volatile ones, meant to start each accumulator on a load port
            // rather than a vector one, took a 3x3 tile of 16 output
            // vectors from 128 to 151 memory operands, and Zen 5's two
            // 512-bit loads per cycle bound this kernel (AMD family 26
            // model 2, kernel bench, medians: 144 channels at 56x56 33.5 ->
            // 31.5 us, 72 at 28x28 4.06 -> 3.84, 960 at 7x7 3.68 -> 3.45).
            Value init = V == 1 ? corr[v]
                                : k.b.create<LLVM::LoadOp>(
                                      k.loc, v16i32,
                                      k.gep(wBase, s.corrOff + 64 * v), 1);
            acc.push_back(s.splitRows ? init : dotAccInit(k, isa, init));
          }
        for (int64_t j = 0; j < (count - 1) * s.SW + s.KW; ++j)
          for (int64_t g = 0; g < groups; ++g) {
            SmallVector<Value> col =
                j < carried
                    ? SmallVector<Value>(in.slice((j * groups + g) * CV, CV))
                    : column(iw0, staticIw0, j, g, checkCol);
            if (j >= count * s.SW)
              out.append(col);
            for (int64_t r = 0; r < nrows; ++r)
              for (int64_t p = 0; p < count; ++p) {
                int64_t kw = j - p * s.SW;
                if (kw < 0 || kw >= s.KW)
                  continue;
                if (s.splitRows) {
                  Value &a = acc[r * count + p];
                  a = emitDot4Rows(k, isa, a, col[0], col[1],
                                   weight((kw * R + r) * groups + g, 0));
                  continue;
                }
                for (int64_t v = 0; v < V; ++v) {
                  Value &a = acc[(r * count + p) * V + v];
                  a = emitDot4(k, isa, a, col[v],
                               weight((kw * R + r) * groups + g, v));
                }
              }
          }
        if (!s.splitRows)
          for (Value &a : acc)
            a = dotAccFinish(k, isa, a);
        // Row r's output pixels (flat N*OH*OW indices).
        auto rowPixels = [&](int64_t r) {
          Value pixRow =
              k.mul(k.add(k.mul(n, k.c(s.OH)), k.add(oh0, k.c(r))), k.c(s.OW));
          SmallVector<Value> pix;
          for (int64_t p = 0; p < count; ++p)
            pix.push_back(k.add(pixRow, k.add(ow0, k.c(p))));
          return pix;
        };
        // Row r's sum: its carried part plus its pixels' f32 results, in
        // pixel order.
        auto addRowSum = [&](int64_t r, ArrayRef<Value> stored) {
          Value sum = in[carried * groups * CV + r];
          for (Value y : stored)
            sum = k.b.create<arith::AddFOp>(k.loc, sum, y);
          rowSums.push_back(sum);
        };
        if (s.halfBlocks) {
          // Every row's pixels in one run of paired epilogues: as many
          // independent chains as a 16-channel row's.
          SmallVector<Value> pix, stored;
          for (int64_t r = 0; r < nrows; ++r)
            pix.append(rowPixels(r));
          pairedEpilogueAt(k, s, acc, pix, c0, sums ? &stored : nullptr);
          for (int64_t r = 0; r < nsums; ++r)
            addRowSum(r, ArrayRef<Value>(stored).slice(r * count, count));
        }
        for (int64_t r = 0; r < nrows && !s.halfBlocks; ++r) {
          SmallVector<Value> pix = rowPixels(r);
          ArrayRef<Value> rowAcc =
              ArrayRef<Value>(acc).slice(r * count * V, count * V);
          if (V == 1) {
            SmallVector<Value> stored;
            epilogueAt(k, s, rowAcc, pix, c0, mask, false,
                       sums ? &stored : nullptr);
            if (sums)
              addRowSum(r, stored);
            continue;
          }
          if (V == 2) {
            // Channels c0 .. c0 + 15 of each pixel, then the next 16.
            for (int64_t v = 0; v < 2; ++v) {
              SmallVector<Value> half;
              for (int64_t p = 0; p < count; ++p)
                half.push_back(rowAcc[p * 2 + v]);
              epilogueAt(k, s, half, pix, k.add(c0, k.c(16 * v)), mask);
            }
            continue;
          }
          SmallVector<Value> outs;
          for (Value p : pix)
            outs.push_back(outputAt(k, s, p, c0));
          emitEpilogue(k, s.ep, rowAcc, c0, mask, outs, {},
                       /*interleaved64=*/true);
        }
        out.append(rowSums);
        return out;
      };
      SmallVector<Value> carry;
      Value iwFirst = k.sub(k.mul(first, k.c(s.SW)), k.c(s.PL));
      std::optional<int64_t> staticFirst;
      if (chunks == 1)
        staticFirst = -s.PL;
      for (int64_t j = 0; j < carried; ++j)
        for (int64_t g = 0; g < groups; ++g)
          carry.append(column(iwFirst, staticFirst, j, g, true));
      for (int64_t r = 0; r < nsums; ++r)
        carry.push_back(k.splatF(0.f, chans));
      // Only the tiles at a row's ends read columns outside the image: the
      // others take the version without checks.
      if (full)
        carry = k.loop(first, end, np, carry, [&](Value ow0, ValueRange in) {
          Value iw0 = k.sub(k.mul(ow0, k.c(s.SW)), k.c(s.PL));
          Value lo = k.add(iw0, k.c(carried));
          Value hi = k.add(iw0, k.c((np - 1) * s.SW + s.KW - 1));
          return k.ifElseValues(
              k.andi(k.lt(lo, k.c(s.W)), k.lt(hi, k.c(s.W))),
              [&] { return tile(ow0, std::nullopt, np, in, false); },
              [&] { return tile(ow0, std::nullopt, np, in, true); });
        });
      // The row's last pixels, in the last chunk; with sums, they leave the
      // if as its results.
      auto tailTiles = [&] {
        SmallVector<Value> in = carry;
        for (int64_t p = 0; p < tail; p += np) {
          int64_t count = std::min(np, tail - p);
          in = tile(k.c(full + p), full + p, count, in, true);
        }
        return in;
      };
      if (tail) {
        Value lastChunk = k.b.create<arith::CmpIOp>(
            k.loc, arith::CmpIPredicate::eq, chunkIdx, k.c(chunks - 1));
        if (sums)
          carry = k.ifElseValues(lastChunk, tailTiles, [&] { return carry; });
        else
          k.ifElse(
              lastChunk, [&] { tailTiles(); }, nullptr);
      }
      if (sums) {
        // The band's rows in order: part band * chunks + chunk.
        Value sum = carry[carry.size() - nsums];
        for (int64_t r = 1; r < nsums; ++r)
          sum = k.b.create<arith::AddFOp>(k.loc, sum,
                                          carry[carry.size() - nsums + r]);
        Value part = k.add(k.mul(bandIdx, k.c(chunks)), chunkIdx);
        Value at = k.add(k.mul(k.add(k.mul(part, k.c(s.N)), n), k.c(C16)), c0);
        k.store(sum, k.at(s.sumsOff, at, 4));
      }
    };
    Value first = k.mul(chunkIdx, k.c(chunk));
    Value last =
        k.b.create<arith::MinSIOp>(k.loc, k.add(first, k.c(chunk)), k.c(full));
    // Block blk's first channel: 64 per wide block before it, 32 per pair
    // block, 16 after.
    auto minOf = [&](Value a, int64_t bound) -> Value {
      return k.b.create<arith::MinSIOp>(k.loc, a, k.c(bound));
    };
    Value pastWide =
        k.b.create<arith::MaxSIOp>(k.loc, k.sub(blk, k.c(wide)), k.c(0));
    Value c0 = s.halfBlocks ? k.mul(blk, k.c(8))
                            : k.add(k.add(k.mul(blk, k.c(16)),
                                          k.mul(minOf(blk, wide), k.c(48))),
                                    k.mul(minOf(pastWide, pairs), k.c(16)));
    // The remainder rows and channels take their own constant versions.
    auto rows = [&](int64_t V, int64_t lanes) {
      if (s.OH % R == 0)
        return block(R, c0, V, lanes, first, last);
      k.ifElse(
          k.lt(k.add(oh0, k.c(R - 1)), k.c(s.OH)),
          [&] { block(R, c0, V, lanes, first, last); },
          [&] { block(s.OH % R, c0, V, lanes, first, last); });
    };
    auto narrow = [&] {
      if (s.C % chans == 0)
        return rows(1, chans);
      k.ifElse(
          k.lt(blk, k.c(blocks - 1)), [&] { rows(1, 16); },
          [&] { rows(1, s.C % 16); });
    };
    auto afterWide = [&] {
      if (!pairs)
        return narrow();
      if (blocks == wide + pairs)
        return rows(2, 16);
      k.ifElse(
          k.lt(blk, k.c(wide + pairs)), [&] { rows(2, 16); }, narrow);
    };
    if (!wide)
      return afterWide();
    if (blocks == wide)
      return rows(4, 16);
    k.ifElse(
        k.lt(blk, k.c(wide)), [&] { rows(4, 16); }, afterWide);
  });
}

SmallVector<Value> qatc::codegen::windowTaps(KB &k, const ConvSpec &s, Value n,
                                             Value oh, Value ow, Value padRow) {
  SmallVector<Value> px;
  for (int64_t kh = 0; kh < s.KH; ++kh)
    for (int64_t kw = 0; kw < s.KW; ++kw) {
      Value ih = k.add(k.mul(oh, k.c(s.SH)), k.c(kh * s.DH - s.PT));
      Value iw = k.add(k.mul(ow, k.c(s.SW)), k.c(kw * s.DW - s.PL));
      px.push_back(tapPointer(k, s, n, ih, iw, k.lt(ih, k.c(s.H)), padRow));
    }
  return px;
}

/// f32 depthwise along a row: R output pixels of 16 channels at a time are
/// independent chains of FMAs over input columns they share, each weight
/// loaded once for the R. One pixel at a time was one chain of KH * KW
/// dependent FMAs and as many weight loads per 16 outputs:
/// MobileNetV3-small fp32 spent 28 % of its time in depthwise layers at 13
/// to 23 % of the FMA peak. Each chain adds its taps in the same order as
/// the pixel-at-a-time loop, which still does the columns whose taps reach
/// past the row's ends; a kernel row outside the image reads the padding
/// row (zeros, a whole row of them), as that loop's taps do.
static void emitDepthwiseF32Rows(KB &k, Isa isa, const DepthwiseSpec &s) {
  OpBuilder &b = k.b;
  constexpr int64_t R = 4;
  const int64_t C16 = (s.C + 15) / 16 * 16, T = s.KH * s.KW;
  // int8 (DepthwiseSpec::floatSums): bytes in, i32 sums out.
  const int64_t inBytes = s.int8 ? 1 : 4, pixBytes = s.inCS * inBytes;
  auto vIn = VectorType::get({16}, k.f32);
  auto vLoad = VectorType::get({16}, s.int8 ? k.i8 : k.f32);
  // 0 as loaded (each row's constant): the masked lanes, and f32 sums'
  // start.
  Value zero;
  // The input's 16 channels at `p` as f32 (lanes off `mask` undefined).
  auto input = [&](Value p, Value mask) -> Value {
    Value x = k.maskedLoad(vLoad, p, mask, zero);
    if (!s.int8)
      return x;
    return b.create<arith::UIToFPOp>(
        k.loc, vIn,
        b.create<arith::ExtUIOp>(k.loc, VectorType::get({16}, k.i32), x));
  };
  // acc + x * w: products and sums of integers under 2^24 are exact either
  // way; generic (no FMA instruction) multiplies and adds.
  auto madd = [&](Value x, Value w, Value acc) -> Value {
    if (s.int8 && isa == Isa::Generic)
      return b.create<arith::AddFOp>(k.loc, acc,
                                     b.create<arith::MulFOp>(k.loc, x, w));
    return b.create<vector::FMAOp>(k.loc, x, w, acc);
  };
  // f32 sums start at 0, int8 ones at the zero-point terms and leave as
  // i32.
  auto start = [&](Value c0) -> Value {
    if (!s.int8)
      return zero;
    return b.create<arith::SIToFPOp>(
        k.loc, vIn,
        k.load(VectorType::get({16}, k.i32), k.weightsAt(s.corrOff, c0, 4)));
  };
  // The channel blocks of 16 and their masks. AVX2 has no masked byte
  // load: under a mask known only at run time LLVM loads int8 lane by lane
  // (3x3 over 72 channels at 28x28: 4x the time). So int8 takes the whole
  // blocks unmasked and the last one with a constant mask.
  auto channelBlocks = [&](llvm::function_ref<void(Value, Value)> body) {
    if (!s.int8)
      return k.loop(k.c(0), k.c(s.C), 16,
                    [&](Value c0) { body(c0, k.channelMask(c0, s.C, 16)); });
    const int64_t whole = s.C / 16 * 16;
    if (whole)
      k.loop(k.c(0), k.c(whole), 16,
             [&](Value c0) { body(c0, k.channelMask(c0, 16, 16)); });
    if (whole < s.C)
      body(k.c(whole), k.prefixMask(16, k.c(s.C - whole)));
  };
  auto sums = [&](Value acc) -> Value {
    if (!s.int8)
      return acc;
    return b.create<arith::FPToSIOp>(k.loc, VectorType::get({16}, k.i32), acc);
  };
  // Output columns whose every tap lies inside the row.
  const int64_t owLo = std::min(s.OW, (s.PL + s.SW - 1) / s.SW);
  const int64_t lastTap = (s.KW - 1) * s.DW - s.PL;
  const int64_t owHi =
      s.W - 1 - lastTap < 0
          ? owLo
          : std::max(owLo, std::min(s.OW, (s.W - 1 - lastTap) / s.SW + 1));
  const int64_t inner = (owHi - owLo) / R * R;
  auto [begin, end] = k.share(s.N * s.OH);
  Value padRow = k.gep(k.weights, s.padRowOff);
  k.loop(begin, end, 1, [&](Value idx) {
    Value n = k.div(idx, k.c(s.OH));
    Value oh = k.rem(idx, k.c(s.OH));
    // The row's sums for a GlobalAveragePool (DepthwiseSpec::sumsOff): part
    // oh, zeroed here, each epilogue's results added in pixel order. A row
    // is one thread's, so the parts do not depend on the thread count.
    Value partAt;
    if (s.sumsOff >= 0) {
      partAt = k.mul(k.add(k.mul(oh, k.c(s.N)), n), k.c(C16));
      k.loop(k.c(0), k.c(C16), 16, [&](Value c0) {
        k.store(k.splatF(0.f, 16), k.at(s.sumsOff, k.add(partAt, c0), 4));
      });
    }
    // The epilogue of `acc` (pixels `pix`), and their sum into the row's.
    auto finish = [&](ArrayRef<Value> acc, ArrayRef<Value> pix, Value c0,
                      Value mask) {
      if (s.sumsOff < 0)
        return epilogueAt(k, s, acc, pix, c0, mask);
      SmallVector<Value> stored;
      epilogueAt(k, s, acc, pix, c0, mask, false, &stored);
      Value at = k.at(s.sumsOff, k.add(partAt, c0), 4);
      Value sum = k.load(VectorType::get({16}, k.f32), at);
      for (Value y : stored)
        sum = b.create<arith::AddFOp>(k.loc, sum, y);
      k.store(sum, at);
    };
    SmallVector<Value> rows;
    for (int64_t kh = 0; kh < s.KH; ++kh) {
      Value ih = k.add(k.mul(oh, k.c(s.SH)), k.c(kh * s.DH - s.PT));
      rows.push_back(k.select(k.lt(ih, k.c(s.H)),
                              pixelPointer(k, s, n, ih, k.c(0)), padRow));
    }
    Value pixRow = k.mul(idx, k.c(s.OW));
    zero = s.int8 ? k.splatI(0, 16, k.i8) : k.splatF(0.f, 16);
    auto weightAt = [&](int64_t t, Value c0) {
      return k.load(vIn, k.weightsAt(s.weightOff + t * C16 * 4, c0, 4));
    };
    // Columns of taps outside the row read the padding row (windowTaps,
    // once per pixel for every channel block).
    auto single = [&](Value ow) {
      SmallVector<Value> px = windowTaps(k, s, n, oh, ow, padRow);
      channelBlocks([&](Value c0, Value mask) {
        Value cOff = k.mul(c0, k.c(inBytes));
        Value acc = start(c0);
        for (int64_t t = 0; t < T; ++t)
          acc = madd(input(k.gep(px[t], cOff), mask), weightAt(t, c0), acc);
        finish({sums(acc)}, {k.add(pixRow, ow)}, c0, mask);
      });
    };
    k.loop(k.c(0), k.c(owLo), 1, single);
    // R pixels, every channel block: their input columns (KH rows of
    // (R - 1) * SW + KW pixels, all channels) stay in L1 across the blocks.
    k.loop(k.c(owLo), k.c(owLo + inner), R, [&](Value ow) {
      channelBlocks([&](Value c0, Value mask) {
        Value cOff = k.mul(c0, k.c(inBytes));
        SmallVector<Value> acc(R, start(c0)), pix;
        for (int64_t t = 0; t < T; ++t) {
          int64_t kh = t / s.KW, kw = t % s.KW;
          Value w = weightAt(t, c0);
          for (int64_t r = 0; r < R; ++r) {
            // Input column (ow + r) * SW + kw * DW - PL of kernel row kh:
            // neighbouring pixels' taps load the same columns (LLVM keeps
            // one load of each).
            Value iw =
                k.add(k.mul(ow, k.c(s.SW)), k.c(r * s.SW + kw * s.DW - s.PL));
            Value x = input(
                k.gep(k.gep(rows[kh], k.mul(iw, k.c(pixBytes))), cOff), mask);
            acc[r] = madd(x, w, acc[r]);
          }
        }
        for (int64_t r = 0; r < R; ++r) {
          pix.push_back(k.add(pixRow, k.add(ow, k.c(r))));
          acc[r] = sums(acc[r]);
        }
        finish(acc, pix, c0, mask);
      });
    });
    k.loop(k.c(owLo + inner), k.c(s.OW), 1, single);
  });
}

void qatc::codegen::emitDepthwise(KB &k, Isa isa, const DepthwiseSpec &s) {
  // The layer's constants into L2 first (prefetcht1, a line each): they
  // were last read a whole run ago, and the work items, channel block
  // fastest, would otherwise meet each block's misses one at a time.
  if (s.constBytes > 0)
    k.loop(k.c(0), k.c((s.constBytes + 63) / 64), 1, [&](Value line) {
      k.b.create<LLVM::Prefetch>(
          k.loc, k.gep(k.weights, k.add(k.c(s.constOff), k.mul(line, k.c(64)))),
          k.b.getI32IntegerAttr(0), k.b.getI32IntegerAttr(2),
          k.b.getI32IntegerAttr(1));
    });
  if (!s.int8 || s.floatSums)
    return emitDepthwiseF32Rows(k, isa, s);
  if (s.columns)
    return emitDepthwiseColumns(k, isa, s);
  // int8 with dilation: one pixel at a time, taps in groups of 4: the 16
  // channels' bytes of 4 taps interleaved into one dword per channel,
  // against weights packed [group][C16][4], one vpdpbusd per group
  // (perf.md section 8).
  const int64_t C16 = (s.C + 15) / 16 * 16, T = s.KH * s.KW;
  auto vIn = VectorType::get({16}, k.i8);
  auto v16i32 = VectorType::get({16}, k.i32);
  auto [begin, end] = k.share(s.N * s.OH);
  Value padRow = k.gep(k.weights, s.padRowOff);
  k.loop(begin, end, 1, [&](Value idx) {
    Value n = k.div(idx, k.c(s.OH));
    Value oh = k.rem(idx, k.c(s.OH));
    k.loop(k.c(0), k.c(s.OW), 1, [&](Value ow) {
      // The taps' pointers, shared by every channel block.
      SmallVector<Value> px = windowTaps(k, s, n, oh, ow, padRow);
      Value pix = k.add(k.mul(k.add(k.mul(n, k.c(s.OH)), oh), k.c(s.OW)), ow);
      k.loop(k.c(0), k.c(s.C), 16, [&](Value c0) {
        Value mask = k.prefixMask(16, k.sub(k.c(s.C), c0));
        Value acc =
            dotAccInit(k, isa, k.load(v16i32, k.weightsAt(s.corrOff, c0, 4)));
        Value zero = k.splatI(0, 16, k.i8);
        for (int64_t g = 0; g * 4 < T; ++g) {
          SmallVector<Value> x;
          for (int64_t j = 0; j < 4; ++j) {
            int64_t t = 4 * g + j;
            x.push_back(t < T ? k.maskedLoad(vIn, k.gep(px[t], c0), mask, zero)
                              : zero);
          }
          Value w =
              k.load(v16i32, k.weightsAt(s.weightOff + g * C16 * 4, c0, 4));
          acc = emitDot4(k, isa, acc, interleaveRows(k, isa, x), w);
        }
        epilogueAt(k, s, dotAccFinish(k, isa, acc), pix, c0, mask);
      });
    });
  });
}
