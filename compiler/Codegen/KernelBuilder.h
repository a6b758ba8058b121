//===- KernelBuilder.h - building layer functions ---------------*- C++ -*-===//
//
// Internal to compiler/Codegen. A layer function is
//
//   void qatc_layer_<i>(uint8_t *arena, const uint8_t *weights,
//                       int64_t tid, int64_t nthreads)
//
// written in scf / arith / vector / math plus llvm pointer ops. Shapes,
// strides and the arena and weight offsets of its tensors are constants of
// the function, so LLVM sees fixed trip counts.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_CODEGEN_KERNELBUILDER_H
#define QATC_CODEGEN_KERNELBUILDER_H

#include "qatc/Codegen/Codegen.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace qatc::codegen {

/// Thin helpers over an OpBuilder for i64 index math, byte-addressed loads
/// and stores, and loops.
class KB {
public:
  /// `share` and `nthreads`: the layer function's arguments (plan::LayerFn).
  KB(mlir::OpBuilder &b, mlir::Location loc, mlir::Value arena,
     mlir::Value weights, mlir::Value share, mlir::Value nthreads);

  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::Value arena, weights, nthreads;
  /// This thread's part [shareLo, shareHi) of the layer, in units of
  /// plan::kShareOne.
  mlir::Value shareLo, shareHi;
  mlir::Type i8, i32, i64, f32, ptr;
  /// The target has AVX-512 (16-lane conversions may call its intrinsics).
  bool avx512 = false;
  /// The target has FMA instructions (every one but generic).
  bool hasFma = false;
  /// Quantization divides by multiplying with the scale's reciprocal and
  /// an exact FMA correction (same bits): where vdivps is slow (Intel
  /// cores), not where the FMA pipes are the limit (Zen 4 measured slower).
  bool reciprocalDivision = false;
  /// Set while a fused chain whose result is quantized is emitted: sigmoid's
  /// exp may then be the shorter form (KB::sigmoid), whose error of a few
  /// ulps moves the quotient by under 1e-4 of a step.
  bool quantizedChain = false;
  /// The range of a fused chain's input while the chain is emitted
  /// (Epilogue::chainInputRange), and of the first operand of the step
  /// being emitted (ChainProgram::run carries it through the steps), where
  /// known: KB::sigmoid's short form then leaves out the clamp of exp's
  /// argument that no operand can reach.
  std::optional<std::pair<double, double>> chainInputRange, argRange;

  mlir::Value c(int64_t v);
  mlir::Value cf(float v);
  mlir::Value add(mlir::Value a, mlir::Value b);
  mlir::Value sub(mlir::Value a, mlir::Value b);
  mlir::Value mul(mlir::Value a, mlir::Value b);
  mlir::Value div(mlir::Value a, mlir::Value b);
  mlir::Value rem(mlir::Value a, mlir::Value b);
  mlir::Value lt(mlir::Value a, mlir::Value b);
  mlir::Value andi(mlir::Value a, mlir::Value b);
  mlir::Value select(mlir::Value c, mlir::Value a, mlir::Value b);
  /// base + byte offset.
  mlir::Value gep(mlir::Value base, mlir::Value offset);
  mlir::Value gep(mlir::Value base, int64_t offset) {
    return gep(base, c(offset));
  }
  mlir::Value load(mlir::Type t, mlir::Value p);
  void store(mlir::Value v, mlir::Value p);
  mlir::Value maskedLoad(mlir::VectorType t, mlir::Value p, mlir::Value mask,
                         mlir::Value passThru);
  void maskedStore(mlir::Value v, mlir::Value p, mlir::Value mask);
  /// A vector<lanes x i1> with the first `n` (dynamic) lanes set.
  mlir::Value prefixMask(int64_t lanes, mlir::Value n);
  /// The 16 lanes of channels [c, c + 16) below `count`, where c steps by
  /// multiples of `step`: all set, a constant, when `step` divides `count`
  /// (the masked loads and stores then fold to plain ones), else
  /// prefixMask.
  mlir::Value channelMask(mlir::Value c, int64_t count, int64_t step);
  mlir::Value splat(mlir::Value scalar, int64_t lanes);
  mlir::Value splatF(float v, int64_t lanes);
  mlir::Value splatI(int64_t v, int64_t lanes, mlir::Type elem);
  /// Equal 1-D vectors end to end (one vector: itself).
  mlir::Value concat(llvm::ArrayRef<mlir::Value> parts);
  /// `v` repeated `times` times end to end.
  mlir::Value tile(mlir::Value v, int64_t times);
  /// Lanes [16 i, 16 i + 16) of `v` (or of `lanes` from `lanes` * i).
  mlir::Value slice(mlir::Value v, int64_t i, int64_t lanes = 16);
  /// The sum (or with `max`, the maximum) of the lanes of f32 vector `v`
  /// (a power of 2 of them), as a tree of halves. `skipNaN`: the maximum
  /// may ignore NaN lanes (plain vmaxps).
  mlir::Value reduceLanes(mlir::Value v, bool max = false,
                          bool skipNaN = false);
  /// Softmax of rows held in registers, in place: each row's f32 vectors
  /// (lanes outside the row hold -inf, whose exponential is 0) become
  /// exp(x - max) times the reciprocal of their sum. The rows' steps are
  /// emitted side by side: one row is a chain of dependent steps (maximum,
  /// exponentials, sum, reciprocal), several fill the pipes.
  void softmaxRows(llvm::MutableArrayRef<llvm::SmallVector<mlir::Value>> rows);
  /// `fn` on each 16-lane slice of `operands` (equal vectors of a multiple
  /// of 16 lanes), the results end to end: an x86 intrinsic takes exactly
  /// one zmm.
  mlir::Value
  per16(mlir::ValueRange operands,
        llvm::function_ref<mlir::Value(llvm::ArrayRef<mlir::Value>)> fn);
  /// scf.if cond { then } else { otherwise } (no else when null).
  void ifElse(mlir::Value cond, llvm::function_ref<void()> then,
              llvm::function_ref<void()> otherwise);
  /// scf.if cond { then } else { otherwise }, yielding the values both
  /// branches return (of the same types): the if's results.
  llvm::SmallVector<mlir::Value>
  ifElseValues(mlir::Value cond,
               llvm::function_ref<llvm::SmallVector<mlir::Value>()> then,
               llvm::function_ref<llvm::SmallVector<mlir::Value>()> otherwise);

  /// for (iv = lb; iv < ub; iv += step) body(iv)
  void loop(mlir::Value lb, mlir::Value ub, int64_t step,
            llvm::function_ref<void(mlir::Value)> body);
  /// The same with loop-carried values.
  llvm::SmallVector<mlir::Value>
  loop(mlir::Value lb, mlir::Value ub, int64_t step, mlir::ValueRange init,
       llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value,
                                                         mlir::ValueRange)>
           body);
  /// This thread's share [begin, end) of `total` work items.
  std::pair<mlir::Value, mlir::Value> share(int64_t total);
  /// Whether this thread walks its share downwards (sharedLoop): it is the
  /// first of several, thread 0's.
  mlir::Value walksDown();
  /// body(item) for each item of this thread's share [begin, end): upwards,
  /// or downwards where walksDown(). A core walking upwards has its L2
  /// stream prefetcher run past its share's end into the next share's
  /// first lines, which the next thread writes at the same time or just
  /// wrote: each such line then crosses between the cores, and back in the
  /// next layer (Zen 5: ShuffleNetV2's channel-shuffle copies took thread 1
  /// 3.7x thread 0's time on equal halves). Thread 0 walking down runs its
  /// prefetcher away from thread 1's half.
  void sharedLoop(mlir::Value begin, mlir::Value end,
                  llvm::function_ref<void(mlir::Value)> body);
  /// The first of `total` items at share boundary `at` (shareLo or
  /// shareHi): floor(at * total / kShareOne), so the threads on either side
  /// of a boundary agree on it.
  mlir::Value shareItem(mlir::Value at, int64_t total);
  /// This thread's share [begin, end) of `total` work items in order, each
  /// of weight `weight` but the last `lastCount` of weight `lastWeight`:
  /// equal weights (to an item), not equal counts. For blocks of pixels
  /// whose last block is partial: shared by count, a 14x14 map in blocks of
  /// 32 pixels gave one thread 112 pixels and the other 84.
  std::pair<mlir::Value, mlir::Value>
  share(int64_t total, int64_t weight, int64_t lastCount, int64_t lastWeight);

  /// The arena address of element `index` of `elemBytes` bytes of the
  /// tensor at arena offset `offset`.
  mlir::Value at(int64_t offset, mlir::Value index, int64_t elemBytes);
  /// The same in the weights blob (packed weights, per-channel arrays).
  mlir::Value weightsAt(int64_t offset, mlir::Value index, int64_t elemBytes);
  /// A float constant shaped like `like` (a scalar or a vector type).
  mlir::Value floatLike(mlir::Type like, float v);
  /// The same for f64 and integer (any width) element types.
  mlir::Value doubleLike(mlir::Type like, double v);
  mlir::Value intLike(mlir::Type like, int64_t v);
  /// `like` (a scalar or a vector type) with element type `elem`.
  static mlir::Type like(mlir::Type like, mlir::Type elem);
  /// QuantizeLinear of f32 `y` (scalar or vector) to the stored domain:
  /// `y / scale`, clamped to [qmin, qmax] - zp, rounded half to even, + zp;
  /// i8 of y's shape.
  mlir::Value quantize(mlir::Value y, float scale, int64_t zp, int64_t qmin,
                       int64_t qmax);
  /// The same with the quotient clamped to [lo, hi] (zero point removed)
  /// before rounding, and y first clamped to [yLo, yHi] when yLo <= yHi (a
  /// fused activation).
  /// `finite`: y is known finite (no NaN handling in the clamps).
  /// `approximate`: y carries an ulp or so of error already (quantizeWide).
  mlir::Value quantize(mlir::Value y, float scale, int64_t zp, float lo,
                       float hi, bool finite = false, float yLo = 1.f,
                       float yHi = 0.f, bool approximate = false);
  /// The same for a `y` that carries an error of an ulp or so already (a
  /// softmax's probabilities): the quotient by a multiplication by RN(1 /
  /// scale), as quantizeWide's `approximate`.
  mlir::Value quantizeApproximate(mlir::Value y, float scale, int64_t zp,
                                  int64_t qmin, int64_t qmax);
  /// f32 `q` (scalar or vector) rounded half to even to i32: within the i32
  /// range, or 0x80000000 past it or for NaN on AVX-512 and AVX2 vectors
  /// (the conversion instructions' own result, which the saturating packs
  /// of storePacked send to the lowest byte).
  mlir::Value roundToI32(mlir::Value q);
  /// The same as i32 (the stored value, zero point added), not narrowed.
  /// `approximate`: y carries an error of an ulp or so already (a chain
  /// with exp or sigmoid in it), so the quotient is a multiplication by
  /// RN(1 / scale), within an ulp of the division, rather than the division
  /// or its exact three-instruction form. `saturatesBelow` (approximate
  /// only): the caller's narrowing saturates at lo + zp, and vcvtps2dq's
  /// 0x80000000 (NaN, -inf, under -2^31) plus zp stays below it, so the
  /// quotient is not clamped below. `saturatesAbove` (approximate only):
  /// the narrowing saturates at hi + zp and every quotient is known to fit
  /// int32, so it is not clamped above.
  mlir::Value quantizeWide(mlir::Value y, float scale, int64_t zp, float lo,
                           float hi, bool finite = false, float yLo = 1.f,
                           float yHi = 0.f, bool approximate = false,
                           bool saturatesBelow = false,
                           bool saturatesAbove = false);
  /// y * RN(1 / scale) rounded half to even, plus `zp`, as i32, for an
  /// approximate `y` (see quantizeWide) whose quotient is known to stay
  /// within +-2^21 (Epilogue::chainQuotientSmall) and whose narrowing
  /// saturates at both ends: one FMA adds 1.5 * 2^23 and zp's even part,
  /// whose rounding is the rounding to an integer (of the exact product:
  /// no rounding before it), and one integer subtraction reads the result
  /// from the bits. vroundps, vcvttps2dq and the zero point's vpaddd go.
  mlir::Value quantizeRounded(mlir::Value y, float scale, int64_t zp);
  /// `y / scale` clamped to [lo, hi] and rounded half to even, as f32: the
  /// stored value minus its zero point, for a quantize-dequantize round trip
  /// that needs no integer (one vrndscaleps, not vcvtps2dq, the zero point
  /// added and taken away, and vcvtdq2ps).
  mlir::Value roundedQuotient(mlir::Value y, float scale, float lo, float hi,
                              bool finite = false);
  /// exp of f32 `x` (a scalar or a vector). On AVX-512 it is Cody-Waite
  /// reduction, Cephes' degree-5 polynomial and vscalefps, about 15
  /// instructions per 16 lanes against about 30 for math.exp's
  /// approximation, within 2 ulp of it (scalars take lane 0 of the same
  /// code, so a map's remainder agrees with its vector body); elsewhere
  /// math.exp.
  mlir::Value exp(mlir::Value x);
  /// exp(x), or exp(-x) when `negated` (on AVX-512 with no instruction for
  /// the negation, and the exponent stopping at 88, where exp is finite).
  mlir::Value expOf(mlir::Value x, bool negated);
  /// 1 / (1 + exp(-x)) of f32 `x` (a scalar or a vector). With
  /// `reciprocalDivision` on AVX-512 the reciprocal is vrcp14ps and a Newton
  /// step (within an ulp; four instructions where vdivps issues one every
  /// 10 cycles on Intel cores), else a division. In a `quantizedChain` on
  /// a target with FMA, exp(-x) is 2^t for t = -x log2(e) rounded once,
  /// split by vreduceps (AVX-512) or a floor (AVX2) and a degree-5
  /// polynomial (10 instructions instead of 14 per 16 lanes on AVX-512, 12
  /// instead of 17 per 8 on AVX2; within 2.2e-7 of 2^f, and t's rounding
  /// costs under 1.5e-8 of the sigmoid where it is not saturated).
  mlir::Value sigmoid(mlir::Value x);
  /// 1 + exp(-x), the sigmoid's denominator, with sigmoid's choice of exp.
  mlir::Value sigmoidDenominator(mlir::Value x);
  /// x * sigmoid(x) (SiLU): x / (1 + exp(-x)), one division where the
  /// product takes a division and a multiplication, and one rounding fewer;
  /// the product of the reciprocal where sigmoid takes vrcp14ps, and on the
  /// generic target (the reference's form).
  mlir::Value silu(mlir::Value x);
  /// erf of f32 `x` (scalar or vector): on AVX-512 a degree-7 polynomial
  /// per interval of 1/4 of [0, 4), its coefficients picked by vpermps
  /// (within 2.3 ulps, no division); on AVX2 a degree-9 one per interval
  /// of 1/2 (within 2.4 ulps); elsewhere math.erf (MLIR's expansion).
  mlir::Value erf(mlir::Value x);
  /// x / d. With `reciprocalDivision`, a constant d whose reciprocal
  /// passes exactReciprocal (ExactQuotient.h) and an operand range
  /// (argRange) inside its domain's upper bound, a multiplication and two
  /// FMAs giving the same bits (vdivps issues one every 10 cycles on Intel
  /// cores; a GELU's x / sqrt(2) took one per 16 outputs); else a division.
  mlir::Value divide(mlir::Value x, mlir::Value d);
  /// `bytes` of stack, 64-byte aligned, in the layer function's entry block
  /// (never inside a loop, where each iteration would take more).
  mlir::Value entryAlloca(int64_t bytes);
  /// DequantizeLinear of stored u8 `q` (scalar or vector): (q - zp) * scale.
  mlir::Value dequantize(mlir::Value q, int64_t zp, float scale);
  /// dequantize of stored values already widened to i32 (zero-extended).
  mlir::Value dequantizeI32(mlir::Value qi, int64_t zp, float scale);
};

/// acc + dot4(u8 a, s8 b) per i32 lane (vpdpbusd semantics, exact: no
/// saturation), for vector<16xi32> operands `a` and `b` holding 4 bytes per
/// lane. The one place that knows how each ISA does it. `acc` is in the
/// ISA's accumulator form: dotAccInit of 16 sums before a K loop,
/// dotAccFinish after it.
mlir::Value emitDot4(KB &k, Isa isa, mlir::Value acc, mlir::Value a,
                     mlir::Value b);
/// Whether emitDot4 sums products in pairs (vpmaddwd: avx2, generic), not
/// in fours.
bool dotSumsPairs(Isa isa);
/// The accumulator emitDot4 takes for 16 sums `acc16` (vector<16xi32>):
/// itself with VNNI; without it (avx2, generic), 32 lanes of pair sums,
/// lane 2l + h holding half h of sum l (acc16's lane in h = 0), so that each
/// step adds vpmaddwd's pair sums as they come and the halves meet once,
/// after the K loop, not at every step.
mlir::Value dotAccInit(KB &k, Isa isa, mlir::Value acc16);
/// The 16 sums of an accumulator in emitDot4's form.
mlir::Value dotAccFinish(KB &k, Isa isa, mlir::Value acc);
/// acc (16 sums) + dot4 per channel of 16 channels' 4 rows, for ISAs that
/// sum in pairs: `p02` and `p13` (vector<32xi16>) hold each channel's rows
/// 0 and 2, 1 and 3, adjacent; `w` 64 i16 weights in splitPairIndex's order
/// (channel, row). Each vpmaddwd pair sum is then a whole channel's. With
/// 8 sums (AVX2), 8 channels: vector<16xi16> pairs, 32 weights in
/// splitPairIndex's order for 8 outputs.
mlir::Value emitDot4Rows(KB &k, Isa isa, mlir::Value acc, mlir::Value p02,
                         mlir::Value p13, mlir::Value w);

/// Where byte `kk` (0-3) of output `o` (0-15) of a K step's 16 outputs
/// stands in the 64 bytes emitDot4Split reads: two halves of 16 byte pairs,
/// (k0, k2) then (k1, k3), each output's pair adjacent. (`outputs`: 8 for
/// emitDot4Rows' 8-channel blocks, 32 values.)
inline int64_t splitPairIndex(int64_t o, int64_t kk, int64_t outputs = 16) {
  return kk % 2 * 2 * outputs + o * 2 + kk / 2;
}
/// The broadcast operands of emitDot4Split for the dword `a` (i32 holding 4
/// u8 k0..k3): i16 lanes (k0, k2) and (k1, k3), repeated.
std::pair<mlir::Value, mlir::Value> splitPairs(KB &k, Isa isa, mlir::Value a);
/// acc (16 sums, vector<16xi32>) + dot4 of one broadcast dword with 16
/// outputs' weights `w` (64 bytes in splitPairIndex's order), for ISAs
/// that sum in pairs (dotSumsPairs): each vpmaddwd's pair sums are whole
/// outputs' (k0 w0 + k2 w2), so the sums need no dotAccInit / dotAccFinish
/// shuffles, and 16 sums take two ymm, not four.
mlir::Value emitDot4Split(KB &k, Isa isa, mlir::Value acc,
                          std::pair<mlir::Value, mlir::Value> pairs,
                          mlir::Value w);

/// acc (16 sums, vector<16xi32>) + dot4 of the broadcast dword of bytes `q`
/// (vector<32xi8>, each in [0, 127]) with 16 outputs' weights `w` (64
/// bytes, 4 per output, VNNI's order): vpmaddubsw (u8 x s8, each pair of
/// products summed into a saturating i16) then vpmaddwd by ones (each
/// dword's two pair sums into an i32). Exact for q under 128:
/// |127 * -128 * 2| < 2^15. Where `sign` is set, q holds |x| of the signed
/// bytes `sign` (vpabsb: up to 128) and the weights take x's signs
/// (vpsignb): x times the weights, exact where no weight is -128
/// (|128 * 127 * 2| < 2^15; vpsignb cannot negate -128).
mlir::Value emitDot4Bytes(KB &k, mlir::Value acc, mlir::Value q, mlir::Value w,
                          mlir::Value sign = {});

/// The requantizing / float epilogue of conv, matmul and add.
struct Epilogue {
  bool quantOut = false; ///< else f32 out
  int64_t multOff = -1;  ///< f32[c] accumulator scale (weights blob)
  int64_t scaleOff = -1; ///< f32[c] channel scale (BatchNorm)
  int64_t biasOff = -1;  ///< f32[c] bias
  /// The one-step requantization (OneStepRequant.h), where the lowering
  /// proved it exact: f32[c] m and b of q = rne(fma(acc, m, b)), the clamps
  /// the layer needs, and up to kMaxFoldExceptions exceptions per channel,
  /// i32[c] accumulators and the deltas added there (0 where a channel has
  /// fewer; f32 before a residual add, where the result stays in f32).
  int64_t foldMulOff = -1, foldAddOff = -1;
  bool foldClampLo = false, foldClampHi = false;
  /// The clamps apply to the stored bytes after the packs
  /// (OneStepRequant::clampsOnBytes holds for every channel).
  bool foldClampBytes = false;
  float foldLo = 0, foldHi = 255;
  static constexpr int64_t kMaxFoldExceptions = 4;
  int64_t foldExceptions = 0;
  int64_t foldAccOff[kMaxFoldExceptions] = {-1, -1, -1, -1},
          foldDeltaOff[kMaxFoldExceptions] = {-1, -1, -1, -1};
  bool hasAct = false;
  float actLo = 0, actHi = 0;
  /// The requantized residual add in two FMAs (OneStepAdd in
  /// OneStepRequant.h), where the lowering proved it exact over every pair
  /// of operands: q = rne(clamp(fma(u, addA, fma(r, addB, addC)))) + outZp,
  /// u the conv's own quantized result minus its zero point and r the
  /// residual's stored byte (midQuant with a residual only).
  bool addFold = false;
  float addA = 1, addB = 1, addC = 0;
  bool addClampLo = false, addClampHi = false;
  /// The add's clamps may apply to the packed bytes
  /// (OneStepAdd::clampsOnBytes).
  bool addClampBytes = false;
  float addLo = 0, addHi = 255;
  bool hasResidual = false;
  /// Arena byte offset / channel stride in elements (u8, or f32 with
  /// resF32).
  int64_t resOff = 0, resCS = 0;
  int64_t resZp = 0; ///< stored domain
  float resScale = 1;
  /// The residual is f32 (an fp32 plan's Add after a convolution), added
  /// as it stands; resZp and resScale do not apply.
  bool resF32 = false;
  bool hasPost = false;
  /// Bytes an element of the output and of the residual take in the arena
  /// (packed u8 or f32): every kernel's epilogue addresses them by these.
  int64_t outBytes() const { return quantOut ? 1 : 4; }
  int64_t resBytes() const { return resF32 ? 4 : 1; }
  float postLo = 0, postHi = 0;
  /// The producer's own QuantizeLinear before the residual add (a conv
  /// whose int8 result only a qat.add reads): y is quantized to (midScale,
  /// midZp, [midQmin, midQmax], stored domain) and dequantized again, as
  /// the reference computes the add from the stored int8 value.
  bool midQuant = false;
  float midScale = 1;
  int64_t midZp = 0, midQmin = 0, midQmax = 255;
  /// A fused chain of elementwise ops on the f32 result before the store:
  /// `chain(k, y, channels)`, where `channels(off)` gives the per-channel
  /// f32 constant at weights offset `off` in the order of y's lanes (the
  /// epilogue knows which channels they hold; `chainChannelBase`, a group's
  /// first channel, offsets them).
  std::function<mlir::Value(KB &, mlir::Value,
                            llvm::function_ref<mlir::Value(int64_t)>)>
      chain;
  std::string chainName; ///< appended to the kernel's name
  int64_t chainChannelBase = 0;
  /// The chain has a step that rounds more than once (exp, sigmoid, tanh,
  /// erf, log): its result is within ulps of the reference's, not equal to
  /// it, so on AVX-512 the requantization before it is one FMA and the
  /// quotient after it a multiplication (emitEpilogue).
  bool chainApproximate = false;
  /// The range of the chain's result for an input range
  /// (ChainProgram::ranges), where known.
  std::function<std::optional<std::pair<double, double>>(
      std::pair<double, double>)>
      chainBound;
  /// Every quotient of the chain's result by the output scale, plus the
  /// zero point, lies well inside int32 (GraphLowering::foldRequantization
  /// bounds it from the accumulator's range): an approximate quantization
  /// leaves its upper clamp to the packs where the stored type's maximum is
  /// the quantization's.
  bool chainQuotientFits = false;
  /// The same within +-2^21: KB::quantizeRounded's magic-number rounding
  /// holds there (it needs +-2^22).
  bool chainQuotientSmall = false;
  /// The range of the chain's input, the accumulator's affine image over
  /// every channel (GraphLowering::boundChain), where known.
  std::optional<std::pair<double, double>> chainInputRange;
  float outScale = 1;
  int64_t outZp = 0, qmin = 0, qmax = 255; ///< stored domain

  /// Calls `f(offset)` on the weights offset of each per-channel array the
  /// epilogue reads (unset ones are -1), so a grouped conv can move them to
  /// its group's channels and a depthwise kernel reorder them.
  template <typename F> void forEachChannelArray(F f) {
    f(multOff);
    f(scaleOff);
    f(biasOff);
    f(foldMulOff);
    f(foldAddOff);
    for (int64_t e = 0; e < foldExceptions; ++e) {
      f(foldAccOff[e]);
      f(foldDeltaOff[e]);
    }
  }
};
/// Applies `ep` to the 16 channels from `c0` of accumulator vectors `accs`
/// (the pixels of a tile) as one computation on a vector of 16 x
/// accs.size() lanes, and stores the lanes of `mask` of each to `outs`;
/// `res` points at each pixel's residual channels when the epilogue has
/// them.
///
/// `interleaved64`: each pixel is 4 vectors of 64 channels from c0 in the
/// order `interleave64` gives them (vector v, lane 4l + i: channel 16l + 4v
/// + i), one pointer in `outs` per pixel; the epilogue's own per-channel
/// arrays are stored in that order (`interleave64Index`), the result is
/// quantized, and a residual (stored bytes) is one pointer per pixel.
///
/// `pairedPixels`: each vector holds the 8 channels from c0 of two pixels
/// (lanes 0-7 and 8-15), two pointers in `outs` per vector, every lane
/// stored (no mask), no residual.
///
/// Returns the f32 result it stored (16 x accs.size() lanes), or a null
/// value where it stored quantized bytes.
mlir::Value emitEpilogue(KB &k, const Epilogue &ep,
                         llvm::ArrayRef<mlir::Value> accs, mlir::Value c0,
                         mlir::Value mask, llvm::ArrayRef<mlir::Value> outs,
                         llvm::ArrayRef<mlir::Value> res,
                         bool interleaved64 = false, bool pairedPixels = false);

/// Where channel c of a block of 64 stands in the interleaved order of
/// emitEpilogue's `interleaved64` (its own inverse: a 4x4 transpose of
/// 4-channel groups).
inline int64_t interleave64Index(int64_t c) {
  int64_t j = c % 64;
  return c - j + (j % 16) / 4 * 16 + j / 16 * 4 + j % 4;
}

/// What the dense and the depthwise kernels share: a 2-D window over NHWC
/// tensors, their place in the arena and the weights blob, the epilogue.
struct ConvSpec {
  bool int8 = true;
  int64_t N = 1, H = 1, W = 1, OH = 1, OW = 1, KH = 1, KW = 1, SH = 1, SW = 1,
          PT = 0, PL = 0, DH = 1, DW = 1;
  int64_t inOff = 0, inCS = 0, outOff = 0, outCS = 0;
  int64_t weightOff = 0; ///< packed weights (layout per kernel)
  int64_t corrOff = -1;  ///< i32[c] initial accumulators (int8)
  /// weightOff and corrOff are arena offsets (weights packed at run time,
  /// the right-hand side of an activation product), not weights-blob ones.
  bool packedInArena = false;
  int64_t padRowOff = 0; ///< a row holding the padding value
  Epilogue ep;
};

/// A dense (group = 1) convolution; Gemm / MatMul are 1x1 convolutions over
/// a 1 x M image. Weights packed [blk][kh][kw][k][NB].
struct DenseConvSpec : ConvSpec {
  int64_t IC = 0, OC = 0;
  int64_t NV = 4, MR = 6; ///< tile: MR pixels x NV*16 channels
  /// Threads share the pixels (each every channel block over its range), not
  /// the (block, tile) pairs: each writes whole rows, the rows the next
  /// layer's threads read (depthwise, pooling, means and pointwise layers
  /// split by rows). Each thread then reads all the weights: set with
  /// AVX-512, else where the weights are small (GraphLowering::denseConv).
  bool splitPixels = false;
  /// int8 weights in splitPairIndex's order within each K step's 16
  /// outputs, for emitDot4Split (avx2, generic).
  bool splitPairs = false;
  /// avx2 int8 by emitDot4Bytes, for an input whose stored bytes are all
  /// 128 or more (a Relu's output at zero point 0): its K steps multiply
  /// q = stored - 128, weights in VNNI order, zero-point terms for q
  /// (chooseBytePairs).
  bool bytePairs = false;
  /// bytePairs over an input of any bytes: q = stored - 128 as signed
  /// bytes, |q| times the weights with q's sign (emitDot4Bytes' `sign`).
  bool signedBytes = false;
  /// Every stored byte of the input is 128 or more (set by the lowering).
  bool inputAbove128 = false;
  /// Set when the threads share a larger whole (a batched product's batches
  /// one after another): this thread's (block, tile) items of this
  /// product, clamped to [0, workItems()]; else the threads share them.
  mlir::Value shareBegin, shareEnd;
  /// Set where every output channel lies in one block (OC <= NV * 16): the
  /// epilogue of a tile's rows, each row's NV accumulators together (a
  /// softmax over the row: packedProduct), in place of `ep`'s.
  std::function<void(KB &, const struct DenseConvSpec &,
                     llvm::ArrayRef<llvm::SmallVector<mlir::Value>> rows,
                     llvm::ArrayRef<mlir::Value> pixels)>
      rowEpilogue;
  /// int8 on AVX-512, every block 64 quantized channels:
  /// the weights, zero-point terms and epilogue arrays hold each block in
  /// interleave64Index's order, so a pixel's 4 accumulators pack in-lane
  /// into its 64 bytes, one store (emitEpilogue's `interleaved64`) where
  /// the channel-major epilogue takes a vpermd per 4 pixels and a
  /// vextracti32x4 per pixel and vector.
  bool interleaved = false;
  /// Input channels the K loop reads (0: the channel stride for int8, IC for
  /// f32); a group of a grouped convolution reads fewer than the stride.
  int64_t KC = 0;
  /// K loop steps per tap: dwords of 4 channels (int8) or floats.
  int64_t kSteps() const {
    return int8 ? (KC ? KC : inCS) / 4 : (KC ? KC : IC);
  }
  /// 1x1, stride 1, no padding: output pixel p reads input pixel p.
  bool pointwise() const {
    return KH == 1 && KW == 1 && SH == 1 && SW == 1 && PT == 0 && PL == 0 &&
           H == OH && W == OW;
  }
  /// A kernel row's taps are adjacent pixels, and a pixel holds exactly its
  /// K steps: the row is one run of KW * kSteps() steps (emitDenseConv).
  /// Rows of more than 8 steps (3x3 over 64 channels) ran slower as one
  /// run than tap by tap (docs/Design.md).
  bool foldsRows() const {
    return !pointwise() && DW == 1 && KW > 1 && KW <= W && kSteps() <= 8 &&
           inCS * (int8 ? 1 : 4) == kSteps() * 4;
  }
  /// The patches hold each tap's IC channels back to back, not inCS apart
  /// (a 3-channel image in 4-byte pixels), and the weights are packed as
  /// one tap of windowSteps() K steps over them (packDense).
  bool compactTaps = false;
  /// K steps over a whole window.
  int64_t windowSteps() const {
    return compactTaps ? (KH * KW * IC + 3) / 4 : KH * KW * kSteps();
  }
  /// An int8 window whose rows fold, each row at most 64 bytes: one a tile
  /// can copy into patches (copiesWindows, and compactTaps' condition).
  bool patchable() const {
    return int8 && foldsRows() && DH == 1 && KW * inCS <= 64;
  }
  /// A patchable window of up to 16 K steps (or of compactTaps): each tile
  /// copies its pixels' windows into patches (emitDenseConv), reading up to
  /// 64 bytes past a row's last pixel.
  bool copiesWindows() const {
    return patchable() && (compactTaps || KH * KW * kSteps() <= 16);
  }
  /// The pixels a thread's range of `len` computes when the threads split
  /// the map evenly (emitDenseConv): ceil(len / MR) tiles of MR and MR - 1,
  /// which overlap, more than `len`, where the range is too short for them.
  int64_t evenSplitPixels(int64_t len) const {
    return std::max(len, (len + MR - 1) / MR * (MR - 1));
  }
  /// The (channel block, pixel tile) pairs the threads share.
  int64_t workItems() const {
    return (OC + NV * 16 - 1) / (NV * 16) * ((N * OH * OW + MR - 1) / MR);
  }
};
void emitDenseConv(KB &k, Isa isa, const DenseConvSpec &s);
/// The pixels [first, end) of the map a thread's share of a layer whose
/// threads split the pixels (`s.splitPixels`) computes: for a pointwise
/// convolution, also the input pixels it reads.
std::pair<mlir::Value, mlir::Value> densePixelShare(KB &k,
                                                    const DenseConvSpec &s);

/// Depthwise convolution (group = channels, one filter each). Weights
/// f32 [kh*kw][C16]; i8 [kw][output row][row group][C16][4 rows]
/// (`columns`) or [ceil(kh*kw / 4)][C16][4 taps]: one dword per channel for
/// vpdpbusd.
struct DepthwiseSpec : ConvSpec {
  int64_t C = 0;
  /// int8 without dilation: weights packed [kw][output row][row
  /// group][C16][4 rows], each input column's rows interleaved once for a
  /// band of `rows` output rows x 4 pixels (else [tap group][C16][4 taps]).
  bool columns = false;
  /// int8 summed in f32 by the f32 kernel (avx2, generic: vpmaddwd's
  /// interleaving and widening cost more than the products): the bytes
  /// converted as loaded, weights packed as f32 [kh*kw][C16] of their
  /// integers, the sums started at the zero-point terms and converted to
  /// i32 for the int8 epilogue. Exact: every product and partial sum is an
  /// integer under 2^24.
  bool floatSums = false;
  /// Output rows per band (`columns`): 2 where the band's input rows,
  /// (rows - 1) * SH + KH of them, take no more groups of 4 than one output
  /// row's (3x3 and 5x5 at stride 1), so one interleaved column serves both
  /// rows, each with its own weights (row r's kernel row kh at band row
  /// r * SH + kh).
  int64_t rows = 1;
  /// `columns` without VNNI (avx2, generic): weights i16 [kw][output
  /// row][row group][C16 / 16][64 in splitPairIndex's order], columns split
  /// into row pairs (0, 2) and (1, 3) for emitDot4Rows.
  bool splitRows = false;
  /// `splitRows` in blocks of 8 channels (AVX2, C a multiple of 8): each
  /// pixel's sums one ymm, each column's row pairs two, so a tile's sums
  /// and the columns it carries stay in registers (16 channels took 16 ymm
  /// of sums and 8 of columns, and spilled); the weights i16 [kw][output
  /// row][row group][C16 / 8][32 in splitPairIndex's order for 8]. The
  /// epilogue takes two pixels' 8 channels per vector (emitEpilogue's
  /// `pairedPixels`).
  bool halfBlocks = false;
  /// Groups of 4 input rows of a band.
  int64_t rowGroups() const { return ((rows - 1) * SH + KH + 3) / 4; }
  /// `rows` for this window: 2 when it costs no extra group, else 1.
  void chooseRows() {
    rows = OH > 1 && (SH + KH + 3) / 4 == (KH + 3) / 4 ? 2 : 1;
  }
  /// Where set (an arena offset; an f32 result in 16-channel blocks), the
  /// kernel also sums its result and stores the sums to f32
  /// [sumParts()][N][C rounded up to 16] at this offset (the lanes past C
  /// hold no sums): a GlobalAveragePool of the result (squeeze-excitation)
  /// then adds the parts, and no layer reads the result again for it. The
  /// column kernel sums each band's pixels of each chunk (`chunkPixels`),
  /// row by row in pixel order, in registers, into part band * chunks() +
  /// chunk; the f32 rows (`floatSums`) each output row's into part oh,
  /// through memory. The parts do not depend on the thread count.
  int64_t sumsOff = -1;
  /// Output pixels per chunk of a band row: the band's input rows of a
  /// chunk stay in L1 while a channel block sweeps them.
  int64_t chunkPixels() const {
    int64_t perPixel = std::max<int64_t>(1, ((rows - 1) * SH + KH) * SW * inCS);
    return std::max<int64_t>(8, (24 * 1024 / perPixel) / 4 * 4);
  }
  /// Chunks per band row: the whole 4-pixel tiles in chunks of
  /// chunkPixels(), the row's last pixels in the last chunk.
  int64_t chunks() const {
    int64_t full = OW / 4 * 4;
    return std::max<int64_t>(1, (full + chunkPixels() - 1) / chunkPixels());
  }
  /// The sums' parts (`sumsOff`): bands times chunks (`columns`), else a
  /// part per output row (the f32 rows of emitDepthwiseF32Rows).
  int64_t sumParts() const {
    return columns ? (OH + rows - 1) / rows * chunks() : OH;
  }
  /// Leading blocks of 64 channels (`columns`, AVX-512) whose weights,
  /// initial accumulators and epilogue arrays are stored in the
  /// interleave64Index order: 4 rows of 64 channels interleave by 8 in-lane
  /// unpacks and narrow back by 3 in-lane packs, where 16 channels take 5
  /// cross-lane shuffles and a store of their own.
  int64_t wideBlocks = 0;
  /// Blocks of 32 channels after the wide ones (`columns`, AVX-512), in
  /// channel order: each input column's 4 rows of them interleave by 5 or 6
  /// shuffles (interleaveRows32), about what interleave64 spends per 32,
  /// where two 16-channel blocks spend 10.
  int64_t pairBlocks = 0;
  /// The layer's constants in the weights blob (weights, zero-point terms,
  /// epilogue arrays: bytes [constOff, constOff + constBytes)), prefetched
  /// into L2 at the kernel's start where constBytes > 0.
  int64_t constOff = 0, constBytes = 0;
};
void emitDepthwise(KB &k, Isa isa, const DepthwiseSpec &s);

/// An int8 matrix product on AMX tiles (AmxKernels.cpp): C[v][oc] = corr[oc]
/// + sum over groups g and K bytes kk of A(v, g)[kk] * B[g][kk][oc], u8 rows
/// times s8 weights (tdpbusd), then the epilogue. Row v of group g is at
/// arena byte `aOff + groupOffsets[g] + v * aStride`, `64 * chunks` bytes of
/// it read (bytes past the group's K meet zero weights). A block of MT x NT
/// tiles of 16 rows x 16 channels is accumulated in tile registers tmm0-3,
/// its A tiles in tmm4-5, its B tiles in tmm6-7.
struct AmxSpec {
  int64_t M = 0; ///< virtual rows
  int64_t aOff = 0, aStride = 0, chunks = 1;
  std::vector<int64_t> groupOffsets = {0};
  int64_t OC = 0;
  /// Weights [block][group][chunk][NT tiles][16 dwords][16 channels][4]
  /// (weights blob): one 1 KiB B tile each, loaded with a 64-byte stride.
  int64_t weightOff = 0;
  int64_t corrOff = 0; ///< i32[c] initial accumulators, readable past OC
  int64_t MT = 2, NT = 2;
  /// Virtual row v is output pixel v, or on a grid (`grid`) pixel (n, i, j)
  /// of v = (n * Hq + i) * Wq + j, which exists when i < OH and j < OW.
  bool grid = false;
  int64_t Hq = 1, Wq = 1, OH = 1, OW = 1;
  int64_t outOff = 0, outCS = 0;
  Epilogue ep;
  /// Blocks of MT*16 rows and NT*16 channels.
  int64_t rowBlocks() const { return (M + 16 * MT - 1) / (16 * MT); }
  int64_t colBlocks() const { return ((OC + 15) / 16 + NT - 1) / NT; }
};
void emitAmxConv(KB &k, const AmxSpec &s);

/// The A operand of an AMX convolution, written before it by a layer of its
/// own (emitAmxRelayout) from the window's input (ConvSpec: its input, the
/// padding row; `outOff` is where the rows go): for each phase (a, b) of the
/// stride, the padded input's pixels (i * SH + a, j * SW + b) for i < Hq,
/// j < Wq as rows of `xc` bytes (the image's N, then i, then j). Output
/// pixel (oh, ow)'s tap (kh, kw) is then row (oh + kh * DH / SH) * Wq + ow +
/// kw * DW / SW of phase (kh * DH % SH, kw * DW % SW): every tap of a tile
/// of rows is one strided tile load.
struct AmxRelayoutSpec : ConvSpec {
  int64_t Hq = 1, Wq = 1, xc = 0;
  std::vector<std::pair<int64_t, int64_t>> phases;
  /// Im2col instead: one row of `rowBytes` per output pixel holding every
  /// tap's `xc` bytes, kh then kw.
  bool im2col = false;
  int64_t rowBytes = 0;
};
void emitAmxRelayout(KB &k, const AmxRelayoutSpec &s);

/// The address of input pixel (n, ih, iw) of the window `s` (its input:
/// inOff, inCS, int8), inside the image.
mlir::Value pixelPointer(KB &k, const ConvSpec &s, mlir::Value n,
                         mlir::Value ih, mlir::Value iw);
/// The same, or the padding row `padRow` when the pixel lies outside the
/// image (`rowOk`: ih is inside; iw is checked here, unsigned).
mlir::Value tapPointer(KB &k, const ConvSpec &s, mlir::Value n, mlir::Value ih,
                       mlir::Value iw, mlir::Value rowOk, mlir::Value padRow);

/// The addresses of the KH * KW taps (row-major) of output pixel (n, oh, ow)
/// of the window `s` (its input: inOff, inCS, int8); a tap outside the image
/// points at `padRow`.
llvm::SmallVector<mlir::Value> windowTaps(KB &k, const ConvSpec &s,
                                          mlir::Value n, mlir::Value oh,
                                          mlir::Value ow, mlir::Value padRow);

/// One operand of a strided loop nest: element (i_0, ..., i_r-1) of the
/// nest is at byte `byteOffset + elemBytes * (offset + sum i_d * strides[d])`
/// of the arena, or of the weights blob for constants. A stride of 0
/// broadcasts.
struct StridedOperand {
  bool inWeights = false;
  int64_t byteOffset = 0; ///< the tensor's arena / weights offset
  int64_t elemBytes = 4;  ///< 1: u8 (loaded as i8), 4: f32 or i32, 8: i64
  bool isInt = false;     ///< 4 / 8 bytes: an integer (i32 / i64)
  int64_t offset = 0;     ///< elements
  std::vector<int64_t> strides;
};

/// The scalar body of a strided loop: loaded operand values to a result.
using ElementFn =
    std::function<mlir::Value(llvm::ArrayRef<mlir::Value> operands)>;

/// out[i] = fn(ins[0][i], ...) over every index i of `shape`; without `fn`
/// the first input is copied. The dimensions are ordered and merged by the
/// result's strides, threads share all but the innermost.
struct StridedMap {
  std::vector<int64_t> shape;
  StridedOperand out;
  std::vector<StridedOperand> ins;
  /// `fn` takes 16-lane vectors as well as scalars: the innermost loop runs
  /// 16 elements at a time (strided operands gathered and scattered lane by
  /// lane, results 2 or 4 apart stored under a mask), its remainder one at a
  /// time. A copy (no `fn`) always does.
  bool lanes = false;
};
void emitStridedMap(KB &k, const StridedMap &m, const ElementFn &fn);

/// out[i] = finish(fold(combine, init, in[i, j] for j in reduceShape)), an
/// f32 accumulator; `in.strides` walk `shape`, `reduceStrides` the reduced
/// index space.
struct StridedReduce {
  std::vector<int64_t> shape, reduceShape, reduceStrides;
  StridedOperand out, in;
  float init = 0;
};
void emitStridedReduce(KB &k, const StridedReduce &r, const ElementFn &combine,
                       const ElementFn &finish);

/// out[i] = in[sum_d src_d(i_d)] over every index i of `shape`: dimension d
/// of the input is either walked with `in.strides[d]` (table -1) or looked
/// up in `tables[d]`, an int64[shape[d]] array of element offsets in the
/// weights blob (Resize nearest, Pad, Gather with constant indices). A
/// negative sum marks padding: the result is `fill` (f32) or `fillStored`
/// (u8), when `hasFill`.
struct GatherMap {
  std::vector<int64_t> shape;
  StridedOperand out, in;
  std::vector<int64_t> tables;
  bool hasFill = false;
  float fill = 0;
  int64_t fillStored = 0;
};
void emitGatherMap(KB &k, const GatherMap &m);

/// One axis of a linear interpolation: out[.., j, ..] = fn(x0, x1, w0, w1)
/// where x_t = in[.., taps[j][t], ..] (int64 element offsets along `axis`
/// at `tapOff`) and w_t the f64 weights at `weightOff`, both [outLen][2] in
/// the weights blob. `in.strides` walk the other dimensions.
struct LerpAxis {
  std::vector<int64_t> shape;
  StridedOperand out, in;
  size_t axis = 0;
  int64_t tapOff = 0, weightOff = 0;
  /// Taps per output (2 linear, 4 cubic): `fn` gets the taps' input values
  /// and then their f64 weights.
  int taps = 2;
};
void emitLerpAxis(KB &k, const LerpAxis &m, const ElementFn &fn);

} // namespace qatc::codegen

#endif // QATC_CODEGEN_KERNELBUILDER_H
