//===- ConvLowering.cpp - convolutions and matrix products ----------------===//
//
// qat.conv / qat.matmul and fp32 Conv / Gemm / MatMul: dense, grouped and
// depthwise convolutions (Gemm and MatMul with constant weights are 1x1
// convolutions over a 1 x M image, their weights packed for the
// micro-kernel), batched products of two activations, and the fp32
// epilogue of each.
//
//===----------------------------------------------------------------------===//

#include "GraphLowering.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/SaveAndRestore.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace qatc;
using namespace qatc::codegen;

namespace qatc::codegen::lowering {

template <typename OpTy>
LogicalResult GraphLowering::linearEpilogue(OpTy op, const CTensor &x,
                                            const qat::QuantLayout &wl,
                                            int64_t channels, Epilogue &ep) {
  // s_x * s_w[c] in f32, as the reference multiplies them.
  std::vector<float> mult(channels);
  for (int64_t c = 0; c < channels; ++c)
    mult[c] = static_cast<float>(x.desc.scale) *
              static_cast<float>(wl.scales[wl.scales.size() == 1 ? 0 : c]);
  ep.multOff = addChannels(mult, channels);
  if (op.getBias() && failed(addChannelConstant(op, op.getBias(), "bias",
                                                channels, ep.biasOff)))
    return failure();
  if (op.getChannelScale() &&
      failed(addChannelConstant(op, op.getChannelScale(), "channel scale",
                                channels, ep.scaleOff)))
    return failure();
  fillActivation(ep, op.getActivation(), false);
  fillActivation(ep, op.getResidualActivation(), true);
  return success();
}

void GraphLowering::chooseTile(DenseConvSpec &s) const {
  bool avx512 = hasAvx512(target.isa);
  // The widest tile whose channel blocks waste little: OC = 96 takes two
  // blocks of 48 (NV = 3), not 64 + 32 of 128.
  auto useful = [&](int64_t nv) {
    int64_t nb = nv * 16;
    return double(s.OC) / double((s.OC + nb - 1) / nb * nb);
  };
  // ymm fp32 (avx2, avxvnni; generic packs alike): blocks of 16 channels,
  // each weight vector then serving 6 pixels (tileRows) where 2x32 tiles
  // gave it 2. From L2, whose 32 bytes per cycle 2x32 tiles of a 3x3 conv
  // over 64 channels needed: conv3x3 64->64 at 56x56 2.92 -> 2.66 ms,
  // 512 at 7x7 (590 KB blocks of 32 channels, over L2's 512 KB) 4.24 ->
  // 2.79 ms (fastest of 12); fp32 plans, paired: ResNet-50 0.80 of their
  // time, ResNet-18 0.82, MobileNetV2 0.86, GoogLeNet 0.87, SqueezeNet
  // 0.91, EfficientNet-B0 0.92 (AMD family 25 model 1). 3x32 spilled.
  // Under 6 pixels (a Gemm of one row) the wider blocks stay: 4 chains of
  // FMAs, not 2 (gemm 2048->1000: 0.14 against 0.19 ms).
  const bool narrowF32 = !s.int8 && s.N * s.OH * s.OW >= 6;
  int64_t maxNV = std::min<int64_t>(avx512      ? 4
                                    : narrowF32 ? 1
                                                : 2,
                                    (s.OC + 15) / 16);
  double best = 0;
  for (int64_t nv = maxNV; nv >= 1; --nv)
    best = std::max(best, useful(nv));
  s.NV = 1;
  for (int64_t nv = maxNV; nv >= 1; --nv)
    if (useful(nv) >= 0.85 * best) {
      s.NV = nv;
      break;
    }
  // A block of 64 channels of f32 weights over 512 input channels, 3x3, is
  // 1.2 MB: with the next block prefetched into L2 as the tiles run
  // (emitDenseConv), the two and the activations overflow a 2 MB L2 and
  // the block's tiles fetch it again. Blocks of 32 channels (12x32 tiles)
  // where a block of 64 passes 768 KB: ResNet-18 fp32 0.935 of its time
  // (median of 6 paired rounds, 6 faster), ResNet-50 fp32 0.996 (4 of 6;
  // Xeon 6/207, 2 MB L2). int8 blocks are a quarter of the size and stay.
  if (s.NV == 4 && s.KH * s.KW * s.kSteps() * 64 * 4 > (768 << 10))
    s.NV = 2;
  // Without VNNI the weights go in emitDot4Split's order (packDense, and a
  // product's right-hand side packed at run time: Int8RhsPack).
  s.splitPairs = s.int8 && dotSumsPairs(target.isa);
  s.MR = tileRows(s, s.NV);
  // A 1x1 int8 convolution with a residual add spends as long in its
  // epilogue as in its K loop, and a 6x64 tile's epilogue (about 330
  // instructions) does not overlap the next tile's K loop (docs/Design.md).
  // In 4x64 tiles it overlaps more: AMD family 26 model 2, 1 thread,
  // ResNet-50 int8's 16 such layers 0.94-1.00 of their time (0.97 in all, 5
  // rounds); 3 and 5 pixels were 1.01-1.02 against 4. Paired plans:
  // ResNet-50 0.992 (2 threads 0.979), EfficientNet-B0 0.993, MobileNetV2
  // 0.997, the transformer 1.002 (2 threads 0.94-1.01). Not for 3x3 ones
  // (ResNet-18's 1.03-1.04), nor without a residual (neutral).
  if (hasAvx512(target.isa) && s.NV >= 4 && s.int8 && s.ep.hasResidual &&
      s.KH == 1 && s.KW == 1)
    s.MR = 4;
  // The same for 1x1 int8 convolutions of 48-channel blocks over at most 32
  // channels (MobileNetV2's and EfficientNet-B0's first expansions, K loops
  // of 4-8 steps beside a whole epilogue): AMD family 26 model 2, 1 thread,
  // MobileNetV2's three 0.91-0.94 of their time (5 rounds), EfficientNet-
  // B0's SiLU one 0.97; 3 and 5 pixels 1.01-1.11 against 4. Paired plans,
  // 1 and 2 threads: MobileNetV2 0.998 and 0.984, EfficientNet-B0 0.998 and
  // 0.990, MobileNetV3-small 1.001 and 0.968. Blocks of 32 channels
  // measured no difference in 6 or 8 pixels, nor 64 in 4.
  if (hasAvx512(target.isa) && s.NV == 3 && s.int8 && s.KH == 1 && s.KW == 1 &&
      s.kSteps() <= 8)
    s.MR = 4;
}

int64_t GraphLowering::tileRows(const DenseConvSpec &s, int64_t nv) const {
  if (hasAvx512(target.isa))
    return nv >= 4 ? 6 : nv == 3 ? 8 : nv == 2 ? 12 : 16;
  // emitDot4Bytes holds weights and the ones it multiplies pair sums by in
  // registers: 2x32 and 4x16 tiles (8 ymm of sums). 3x32 spilled (conv3x3
  // 64->64 at 56x56 3.7 ms, 1.4 at 2x32), 3x16 took 1.45-1.7.
  if (s.bytePairs)
    return nv >= 2 ? 2 : 4;
  // avx2 int8 in emitDot4Split's form: 16 sums take two ymm, so 3x32 and
  // 6x16 tiles hold 12 ymm of sums, each k step's weights widened
  // (vpmovsxbw) once per tile. conv3x3 64->64 at 56x56, fastest of 12
  // runs, AMD family 25 model 1: 1.9-2.0 ms against 2.2-2.3 at 1x32;
  // 4x32 (16 ymm of sums) about the same, with spills.
  // emitDot4's pair sums took 8 ymm for 32 sums: 1x32 or 2x16 there
  // (2x32 spilled: 2.8 ms). A softmax product's single block of up to
  // 1024 columns keeps one row.
  // generic (xmm, 16 registers) takes avx2's blocks (NV), so that a
  // multi-path plan stores their weights once, with fewer rows.
  if (s.int8 && dotSumsPairs(target.isa)) {
    if (target.isa == Isa::AVX2)
      return std::max<int64_t>(1, 6 / nv);
    return nv >= 2 ? 1 : 2;
  }
  // fp32 1x16 tiles (chooseTile): 6 pixels, 12 ymm of sums, the broadcasts
  // and weights in the other 4; generic (xmm) 3 pixels. Wider blocks (a
  // softmax row's, a one-row Gemm's) keep 2 pixels, and avxvnni's int8
  // tiles theirs.
  if (nv == 1 && !s.int8)
    return target.isa == Isa::Generic ? 3 : 6;
  return nv >= 2 ? 2 : 4;
}

void GraphLowering::chooseBytePairs(DenseConvSpec &s, bool signedBytes) const {
  // vpmaddubsw takes three instructions per 32 products where
  // emitDot4Split takes about five (the pair split, the weights' widening,
  // twice the vpaddd); both issue two multiplies per 32 products. Fastest
  // of 12 runs, AMD family 25 model 1: conv3x3 64->64 at 56x56 1.97 ->
  // 1.39-1.44 ms, 512 at 7x7 1.94 -> 1.38-1.49, conv1x1 1024->256 at 14x14
  // 0.85 -> 0.62-0.68. It would saturate on the signed values of other
  // inputs; |q| times the weights with q's sign (vpsignb, `signedBytes`)
  // is exact for weights above -128 (packDense), and stored u8 times the
  // weights needs 7-bit weights. packDense moves the zero-point terms to
  // q's.
  s.bytePairs = true;
  s.signedBytes = signedBytes;
  s.splitPairs = false;
  s.MR = tileRows(s, s.NV);
}

DenseConvSpec GraphLowering::packDense(
    DenseConvSpec s,
    std::function<double(int64_t, int64_t, int64_t, int64_t)> weightAt) {
  chooseTile(s);
  // A 3-channel image in 4-byte pixels: a quarter of the K steps multiply
  // padding. The patches hold 3 bytes per tap, so ResNet's 7x7 stem takes
  // 37 K steps where it took 49. AMD family 25 model 1, 1 thread: the 7x7
  // stride-2 stem 3->64 at 224 2.75 -> 2.20 ms (fastest of 12); whole
  // plans, paired: SqueezeNet 0.940, GoogLeNet 0.94, ResNet-18 0.977.
  // With AVX-512 too, though uncompacted 7x7 patches (49 steps) were 6-12 %
  // slower than reading the rows in place: 37 steps pay for the copies.
  // AMD family 26 model 2, 1 thread, per layer: the 7x7 stems of ResNet-18
  // 0.330 -> 0.278 ms, ResNet-50 0.337 -> 0.288, GoogLeNet 0.344 -> 0.285,
  // SqueezeNet 0.545 -> 0.447, DenseNet-121 0.363 -> 0.340; the 3x3 ones
  // 0.93-1.03 (EfficientNet-B0's, whose SiLU epilogue bounds it, 1.03).
  s.compactTaps = !s.packedInArena && !s.KC && s.patchable() &&
                  (s.KH * s.KW * s.IC + 3) / 4 < s.KH * s.KW * s.kSteps();
  // Inputs that may be negative take vpmaddubsw too, through vpsignb
  // (emitDot4Bytes' `sign`), where no weight is -128: 2x32 tiles that keep
  // their weights in registers, where emitDot4Split's 3x32 ones spill.
  // AMD family 25 model 1, 1 thread, paired, the stems alone: SqueezeNet
  // 0.963 of its time, ResNet-18 0.96-0.985; every such layer: the
  // transformer 0.885, EfficientNet-B0 0.959, MobileNetV2 0.960,
  // ShuffleNetV2 0.979, MobileNetV3-small 1.002 (conv3x3 64->64 alone had
  // been 2.07 against 1.97 ms).
  auto noMinus128 = [&] {
    for (int64_t oc = 0; oc < s.OC; ++oc)
      for (int64_t kh = 0; kh < s.KH; ++kh)
        for (int64_t kw = 0; kw < s.KW; ++kw)
          for (int64_t ic = 0; ic < s.IC; ++ic)
            if (weightAt(oc, ic, kh, kw) == -128)
              return false;
    return true;
  };
  if (s.splitPairs && target.isa == Isa::AVX2 && !s.packedInArena &&
      s.corrOff >= 0) {
    if (s.inputAbove128)
      chooseBytePairs(s, /*signedBytes=*/false);
    else if (noMinus128())
      chooseBytePairs(s, /*signedBytes=*/true);
  }
  const int64_t NB = s.NV * 16, blocks = (s.OC + NB - 1) / NB;
  s.interleaved = s.int8 && hasAvx512(target.isa) && NB == 64 &&
                  s.OC % 64 == 0 && s.ep.quantOut && !s.ep.resF32 &&
                  !s.rowEpilogue && !s.packedInArena;
  if (s.interleaved) {
    interleaveChannels(s.ep, s.OC, s.OC);
    if (s.corrOff >= 0)
      s.corrOff = interleavedCopy(s.corrOff, s.OC, s.OC);
  }
  // Packed [blk][kh][kw][k][NB]: k steps of 4 input channels (one int8
  // dword per lane) or of one float. Without VNNI each step's 16-channel
  // groups are in emitDot4Split's order: its sums need no shuffles after
  // the K loop, which short loops felt (conv1x1 16->96 at 112x112, 1x32
  // tiles, fastest of 12 runs, AMD family 25 model 1: 0.98 -> 0.87 ms),
  // and take half the registers (3x32 tiles: 0.62 ms).
  // Compact taps pack as one tap of the window's K steps.
  const int64_t taps = s.compactTaps ? 1 : s.KH * s.KW;
  const int64_t KS = s.windowSteps() / taps, step = s.int8 ? 4 : 1;
  auto index = [&](int64_t oc, int64_t kh, int64_t kw, int64_t ic) {
    int64_t slot = s.interleaved ? interleave64Index(oc) : oc;
    int64_t tap = kh * s.KW + kw;
    if (s.compactTaps) {
      ic += tap * s.IC;
      tap = 0;
    }
    int64_t stepBase = ((oc / NB * taps + tap) * KS + ic / step) * NB * step;
    if (s.splitPairs)
      return stepBase + slot % NB / 16 * 64 +
             splitPairIndex(slot % 16, ic % step);
    return stepBase + slot % NB * step + ic % step;
  };
  std::vector<int8_t> packed8;
  std::vector<float> packedF;
  (s.int8 ? packed8.resize(blocks * taps * KS * NB * step)
          : packedF.resize(blocks * taps * KS * NB));
  // Each output channel's weight sum, for bytePairs' zero-point terms.
  std::vector<int64_t> sums(s.bytePairs ? s.OC : 0, 0);
  for (int64_t oc = 0; oc < s.OC; ++oc)
    for (int64_t kh = 0; kh < s.KH; ++kh)
      for (int64_t kw = 0; kw < s.KW; ++kw)
        for (int64_t ic = 0; ic < s.kSteps() * step; ++ic) {
          if (s.compactTaps && ic >= s.IC)
            continue;
          double w = weightAt(oc, ic, kh, kw);
          if (s.bytePairs)
            sums[oc] += static_cast<int64_t>(w);
          if (s.int8)
            packed8[index(oc, kh, kw, ic)] = static_cast<int8_t>(w);
          else
            packedF[index(oc, kh, kw, ic)] = static_cast<float>(w);
        }
  s.weightOff = s.int8 ? addArray(packed8) : addArray(packedF);
  if (s.bytePairs) {
    // The products are of q = stored - 128: the initial accumulators
    // -z_x * sum(w) become -(z_x - 128) * sum(w).
    std::vector<int32_t> corr(roundUp(s.OC, 64) + 64, 0);
    for (int64_t oc = 0; oc < s.OC; ++oc) {
      int32_t stored;
      std::memcpy(&stored, out.weights.data() + s.corrOff + 4 * oc, 4);
      corr[oc] = static_cast<int32_t>(stored + 128 * sums[oc]);
    }
    s.corrOff = addArray(corr);
  }
  return s;
}

std::string GraphLowering::denseKernelName(const DenseConvSpec &s) const {
  std::string isaName = !s.int8                      ? "fp32-fma"
                        : hasAvx512(target.isa)      ? "vnni"
                        : target.isa == Isa::AVXVNNI ? "avxvnni"
                        : s.signedBytes              ? "int8-sign-maddubs"
                        : s.bytePairs                ? "int8-maddubs"
                                                     : "int8-generic";
  return isaName + "-conv " + std::to_string(s.MR) + "x" +
         std::to_string(s.NV * 16) +
         (s.compactTaps ? " " + std::to_string(s.IC) + "-channel taps" : "") +
         s.ep.chainName;
}

bool GraphLowering::amxConv(
    Operation *op, const DenseConvSpec &s, int in, int outT,
    std::function<double(int64_t, int64_t, int64_t, int64_t)> weightAt,
    int residual) {
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  // Bytes of one tap: the input channels in whole dwords.
  const int64_t xc = roundUp(s.IC, 4), P = s.N * s.OH * s.OW;
  // One output row (a Gemm at batch 1) uses 1/16 of each tile: the VNNI
  // kernel is faster there (ResNet-50's 2048 x 1000 fc: 43 against 68 us).
  if (P < 2)
    return false;
  // A fused elementwise chain (SiLU, HardSwish: 20 to 30 vector
  // instructions per 16 outputs) costs more in the tile kernel's epilogue
  // (read back from memory, the tile unit idle meanwhile) than the VNNI
  // kernel saves on products of 256 input bytes or fewer per output.
  // EfficientNet-B0 int8, Xeon family 6 model 207: 7.2 -> 6.1 ms with its
  // expansion layers on VNNI; whole-model medians with residual epilogues
  // or small plain layers on VNNI were no faster (ResNet-50 slower).
  if (s.ep.chain && s.KH * s.KW * s.IC <= 256)
    return false;
  // So does any conv over 32 input bytes or fewer per output: a 64-byte K
  // tile half used or less, where the tile kernel's epilogue from its
  // buffer costs more than the few vpdpbusd of VNNI's 4x48 and 16x16
  // tiles. Xeon family 6 model 207 with AMX, 1 thread, AMX / VNNI per
  // layer: MobileNetV2's and MobileNetV3-small's 1x1 expansions over 16
  // and 24 channels 1.37-1.75, SqueezeNet's over 16 channels 1.54-1.68,
  // the 3x3 stems over 3 channels (27 bytes) 1.19-1.55; over 32 channels
  // 1.0-1.2, over 48 0.82-0.85.
  if (s.KH * s.KW * s.IC <= 32)
    return false;
  const int64_t colTiles = ceilDiv(s.OC, 16);
  AmxSpec a;
  a.OC = s.OC;
  a.NT = colTiles >= 2 ? 2 : 1;
  const int64_t colBlocks = ceilDiv(colTiles, a.NT);

  // The taps of stride 1 without leading padding are rows of the input
  // itself; otherwise of a relayout: the padded input split into the
  // stride's phases, where every tap of output row v is row v + offset.
  const bool inPlace = s.SH == 1 && s.SW == 1 && s.PT == 0 && s.PL == 0 &&
                       s.H >= s.OH + (s.KH - 1) * s.DH &&
                       s.W >= s.OW + (s.KW - 1) * s.DW;
  const int64_t Hq = inPlace ? s.H : s.OH + (s.KH - 1) * s.DH / s.SH;
  const int64_t Wq = inPlace ? s.W : s.OW + (s.KW - 1) * s.DW / s.SW;
  const int64_t pixelBytes = inPlace ? s.inCS : xc;
  const int64_t gridRows = ((s.N - 1) * Hq + s.OH - 1) * Wq + s.OW;
  // A kernel row's taps are adjacent pixels of the same phase along W: one
  // group when that takes fewer 64-byte K chunks than a group per tap.
  const bool fold = s.SW == 1 && s.DW == 1 && pixelBytes == xc && s.KW > 1 &&
                    ceilDiv(s.KW * xc, 64) < s.KW * ceilDiv(xc, 64);
  const int64_t tapsPerGroup = fold ? s.KW : 1;
  const int64_t gridChunks = ceilDiv(tapsPerGroup * xc, 64);
  const int64_t gridGroups = s.KH * s.KW / tapsPerGroup;
  // Im2col: one row of every tap per output pixel.
  const int64_t im2colBytes = roundUp(s.KH * s.KW * xc, 64);
  // Cycles, roughly: four tdpbusd (64 cycles) per 32 rows, 32 channels and
  // 64 bytes of K; about 2 cycles per 64 bytes a relayout writes.
  auto tileCycles = [&](int64_t rows, int64_t chunks) {
    return double(ceilDiv(rows, 32)) * chunks * colBlocks * 64;
  };
  std::vector<std::pair<int64_t, int64_t>> phases;
  for (int64_t kh = 0; kh < s.KH; ++kh)
    for (int64_t kw = 0; kw < s.KW; ++kw) {
      std::pair<int64_t, int64_t> ph = {kh * s.DH % s.SH, kw * s.DW % s.SW};
      if (llvm::find(phases, ph) == phases.end())
        phases.push_back(ph);
    }
  const int64_t gridBytes =
      inPlace ? 0 : int64_t(phases.size()) * s.N * Hq * Wq * xc;
  double gridCost =
      tileCycles(gridRows, gridGroups * gridChunks) + gridBytes / 64.0 * 2;
  double im2colCost =
      tileCycles(P, im2colBytes / 64) + double(P) * im2colBytes / 64.0 * 2;
  const bool im2col = s.KH * s.KW > 1 && im2colCost < gridCost;
  // An im2col stem (the 7x7 over 3 channels: 192 bytes a pixel, 2.4 MB
  // of rows at 112 x 112, written and read back) of 64 channels or fewer
  // is faster on VNNI's compact patches, which stay in L1: ResNet-18's
  // 1.41 and ResNet-50's 1.75 of the VNNI time on AMX, GoogLeNet's 1.09;
  // SqueezeNet's over 96 channels 0.73 (same host and runs as above).
  if (im2col && s.OC <= 64)
    return false;

  std::vector<std::vector<std::pair<int64_t, int64_t>>> groups;
  if (im2col) {
    a.M = P;
    a.aStride = im2colBytes;
    a.chunks = im2colBytes / 64;
    groups.emplace_back();
    for (int64_t kh = 0; kh < s.KH; ++kh)
      for (int64_t kw = 0; kw < s.KW; ++kw)
        groups.back().push_back({kh, kw});
    a.groupOffsets = {0};
  } else {
    a.M = gridRows;
    a.aStride = pixelBytes;
    a.chunks = gridChunks;
    a.grid = !(Hq == s.OH && Wq == s.OW);
    a.Hq = Hq;
    a.Wq = Wq;
    a.OH = s.OH;
    a.OW = s.OW;
    a.groupOffsets.clear();
    for (int64_t kh = 0; kh < s.KH; ++kh)
      for (int64_t kw = 0; kw < s.KW; kw += tapsPerGroup) {
        std::vector<std::pair<int64_t, int64_t>> taps;
        for (int64_t t = 0; t < tapsPerGroup; ++t)
          taps.push_back({kh, kw + t});
        groups.push_back(taps);
        int64_t ph = llvm::find(phases, std::make_pair(kh * s.DH % s.SH,
                                                       kw * s.DW % s.SW)) -
                     phases.begin();
        a.groupOffsets.push_back(ph * s.N * Hq * Wq * xc +
                                 (kh * s.DH / s.SH * Wq + kw * s.DW / s.SW) *
                                     pixelBytes);
      }
  }
  a.MT = a.M > 16 ? 2 : 1;
  const int64_t G = groups.size();

  // Weights [block][group][chunk][tile][16 dwords][16 channels][4 bytes].
  std::vector<int8_t> packed(colBlocks * G * a.chunks * a.NT * 1024, 0);
  for (int64_t oc = 0; oc < s.OC; ++oc) {
    int64_t cb = oc / 16 / a.NT, j = oc / 16 % a.NT, n = oc % 16;
    for (int64_t g = 0; g < G; ++g)
      for (size_t t = 0; t < groups[g].size(); ++t)
        for (int64_t ic = 0; ic < s.IC; ++ic) {
          int64_t kk = int64_t(t) * xc + ic;
          int64_t at = ((((cb * G + g) * a.chunks + kk / 64) * a.NT + j) * 16 +
                        kk % 64 / 4) *
                           64 +
                       n * 4 + kk % 4;
          packed[at] = static_cast<int8_t>(
              weightAt(oc, ic, groups[g][t].first, groups[g][t].second));
        }
  }
  a.weightOff = addArray(packed);
  a.corrOff = s.corrOff;

  // The farthest byte a tile load reads: past the last real row (whole
  // blocks of rows) and past the last tap's K (whole chunks).
  int64_t farthest = *llvm::max_element(a.groupOffsets) +
                     (a.rowBlocks() * 16 * a.MT - 1) * a.aStride +
                     a.chunks * 64;
  const bool relayout = im2col || !inPlace;
  int x = in;
  std::string what = im2col    ? "im2col"
                     : inPlace ? "in place"
                               : std::to_string(phases.size()) + " phase" +
                                     (phases.size() > 1 ? "s" : "");
  if (relayout) {
    int64_t bytes = std::max(im2col ? P * im2colBytes : gridBytes, farthest);
    x = newIntTensor(nameOf(op->getResult(0)) + " (amx rows)",
                     {roundUp(bytes, 64) / 4}, plan::ElemType::I32);
    AmxRelayoutSpec r;
    static_cast<ConvSpec &>(r) = s;
    r.Hq = Hq;
    r.Wq = Wq;
    r.xc = xc;
    r.phases = phases;
    r.im2col = im2col;
    r.rowBytes = im2colBytes;
    addLayer(op, "amx-" + (im2col ? what : "relayout " + what), "int8",
             bytes > 32768, 0, {in}, {x}, [=](KB &k) {
               AmxRelayoutSpec spec = r;
               bindConv(spec, in, outT, -1);
               spec.outOff = tensors[x].desc.offset;
               emitAmxRelayout(k, spec);
             });
  } else {
    // Tile loads read past the input's last pixel.
    storages[tensors[in].storage].bytes +=
        std::max<int64_t>(0, farthest - s.N * s.H * s.W * s.inCS) + 64;
  }
  a.outCS = s.outCS;
  a.ep = s.ep;
  std::vector<int> ins = {x};
  if (residual >= 0)
    ins.push_back(residual);
  int64_t macs = s.N * s.OH * s.OW * s.OC * s.KH * s.KW * s.IC;
  std::string kernel = "amx-conv " + std::to_string(16 * a.MT) + "x" +
                       std::to_string(16 * a.NT) + " " + std::to_string(G) +
                       "x" + std::to_string(a.chunks) + " k-tiles (" + what +
                       ")" + s.ep.chainName;
  addLayer(op, kernel, "int8", macs > 50000, macs, ins, {outT}, [=](KB &k) {
    ConvSpec c = s;
    bindConv(c, in, outT, residual);
    AmxSpec spec = a;
    spec.aOff = relayout ? tensors[x].desc.offset : c.inOff;
    spec.outOff = c.outOff;
    spec.ep = c.ep;
    emitAmxConv(k, spec);
  });
  return true;
}

LogicalResult GraphLowering::denseConv(
    Operation *op, DenseConvSpec s, int in, int outT,
    std::function<double(int64_t, int64_t, int64_t, int64_t)> weightAt,
    int residual) {
  if (s.int8 && target.isa == Isa::AMX && !s.packedInArena && !s.KC &&
      amxConv(op, s, in, outT, weightAt, residual))
    return success();
  s = packDense(s, weightAt);
  // A small window's rows are copied in vectors of up to 64 bytes, past
  // the last pixel's bytes.
  if (s.copiesWindows())
    storages[tensors[in].storage].bytes += 64;
  // Threads split the pixels where every thread may read all the weights
  // (256 KiB: an L2's share): then each writes the rows the next layer's
  // thread reads. EfficientNet-B0 int8 on 2 threads: its depthwise layers
  // read the other core's channel half of every row before. With AVX-512
  // at any size: each thread then streams every block's weights from L3
  // (twice the weight traffic of two halves, which the L3 serves), while
  // splitting the channels makes each thread read every pixel, half of
  // them from the other core's L2 (a 1x1 832 -> 384 f32 layer at 7x7
  // took 0.20 ms on 2 threads against 0.25 on one; zoo plans 0.970-1.003
  // of their time on 2 threads, docs/Design.md). AVX2 hosts' 512 KB L2s
  // were not measured.
  const int64_t NB = s.NV * 16, blocks = (s.OC + NB - 1) / NB;
  const int64_t tiles = (s.N * s.OH * s.OW + s.MR - 1) / s.MR;
  // Unless an even split of a small map (emitDenseConv's tiles of MR and
  // MR - 1 pixels) makes 2 threads compute overlapping tiles: a 7x7 map's
  // 25 pixels a thread take 3 tiles of 11 in 12x32 tiles (f32 blocks over
  // 768 KB, chooseTile), 33 pixels' work; splitting the blocks then
  // balances them, and halves the weights each thread streams. ResNet-18
  // fp32's three layer4 3x3 convolutions (9.4 MB of weights), 2 threads:
  // 0.63 -> 0.57-0.58 ms each (AMD family 26 model 2).
  const int64_t half = (s.N * s.OH * s.OW + 1) / 2;
  const bool overlapping =
      tiles < 32 && s.MR > 1 && 20 * s.evenSplitPixels(half) > 23 * half;
  s.splitPixels = (hasAvx512(target.isa) ||
                   blocks * s.windowSteps() * NB * 4 <= 256 * 1024) &&
                  tiles >= 4 && (!overlapping || blocks < 2);
  std::string kernel = denseKernelName(s);
  std::vector<int> ins = {in}, outs = {outT};
  if (residual >= 0)
    ins.push_back(residual);
  // The elementwise map that quantizes this pointwise convolution's input
  // (squeeze-excitation's gating Mul, a BatchNorm + ReLU), when it is the
  // layer just before and nothing else reads its result, runs in this
  // layer: each thread maps the pixels its share reads, then convolves
  // them. The threads met before the map's layer and after it; now only
  // before this one.
  std::shared_ptr<InputMap> inputMap;
  auto pending = inputMaps.find(in);
  if (pending != inputMaps.end() && s.int8 && s.splitPixels && s.pointwise() &&
      !s.copiesWindows() && residual != in && pending->second.consumer == op &&
      pending->second.layer + 1 == static_cast<int>(layers.size())) {
    inputMap = std::make_shared<InputMap>(std::move(pending->second));
    inputMaps.erase(pending);
    // Its storages' lifetimes already reach this layer's index.
    Layer map = std::move(layers.back());
    layers.pop_back();
    kernel = map.desc.kernel + " > " + kernel;
    ins.insert(ins.end(), inputMap->reads.begin(), inputMap->reads.end());
    outs.push_back(in);
  }
  int64_t macs = s.N * s.OH * s.OW * s.OC * s.KH * s.KW * s.IC;
  Isa isa = target.isa;
  addLayer(op, kernel, s.int8 ? "int8" : "fp32", macs > 50000, macs, ins, outs,
           [=](KB &k) {
             DenseConvSpec spec = s;
             bindConv(spec, in, outT, residual);
             if (inputMap) {
               auto [p0, p1] = densePixelShare(k, spec);
               inputMap->emitPixels(k, p0, p1);
             }
             emitDenseConv(k, isa, spec);
           });
  return success();
}

void GraphLowering::bindConv(ConvSpec &s, int in, int out, int residual,
                             int64_t inChannel, int64_t outChannel) const {
  s.inOff = tensors[in].desc.offset + inChannel * (tensors[in].int8 ? 1 : 4);
  s.outOff =
      tensors[out].desc.offset + outChannel * (tensors[out].int8 ? 1 : 4);
  if (residual >= 0) // u8, or f32 in fp32 plans
    s.ep.resOff = tensors[residual].desc.offset +
                  outChannel * (tensors[residual].int8 ? 1 : 4);
}

LogicalResult GraphLowering::lowerConv(Operation *op, bool int8, int in, int o,
                                       ArrayRef<int64_t> ws, int64_t group,
                                       ArrayRef<int64_t> strides,
                                       ArrayRef<int64_t> pads,
                                       ArrayRef<int64_t> dilations, Epilogue ep,
                                       int64_t corrOff, int residual,
                                       std::function<double(int64_t)> weight) {
  // This conv's constants start here (lowerQatConv's epilogue arrays
  // included).
  const int64_t constLo =
      std::min<int64_t>(convConstantsFrom, out.weights.size());
  convConstantsFrom = INT64_MAX;
  const CTensor &x = tensors[in];
  int64_t OC = ws[0], ICg = ws[1], KH = ws[2], KW = ws[3], IC = x.channels();
  auto inShape = x.desc.shape, outShape = tensors[o].desc.shape;
  if (group == 1) {
    DenseConvSpec s;
    s.int8 = int8;
    setWindow(s, inShape, outShape, KH, KW, strides, pads, dilations);
    s.IC = IC;
    s.OC = OC;
    s.inCS = x.desc.channelStride;
    s.outCS = tensors[o].desc.channelStride;
    s.corrOff = corrOff;
    s.padRowOff = padRow(int8, x.zp, int8 ? x.desc.channelStride : IC);
    s.inputAbove128 = int8 && storedFloor(op->getOperand(0)) >= 128;
    s.ep = ep;
    return denseConv(
        op, s, in, o,
        [weight, ICg, KH, KW](int64_t oc, int64_t ic, int64_t kh,
                              int64_t kw) -> double {
          return ic < ICg ? weight(((oc * ICg + ic) * KH + kh) * KW + kw) : 0;
        },
        residual);
  }
  if (group != IC || OC != IC || ICg != 1)
    return groupedConv(op, int8, in, o, ws, group, strides, pads, dilations, ep,
                       corrOff, residual, weight);
  DepthwiseSpec s;
  s.int8 = int8;
  setWindow(s, inShape, outShape, KH, KW, strides, pads, dilations);
  s.C = IC;
  s.inCS = x.desc.channelStride;
  s.outCS = tensors[o].desc.channelStride;
  s.corrOff = corrOff;
  int64_t C16 = roundUp(IC, 16);
  s.ep = ep;
  // f32: [kh*kw][C16]. int8: [kw][output row][row group][C16][4 rows]
  // without dilation (the column kernel), else [tap group][C16][4 taps]; zero
  // past the last row / tap: one vpdpbusd dword per channel.
  // Without VNNI, strided or dilated int8 sums in f32 (DepthwiseSpec::
  // floatSums). A product is at most 255 * 255 in magnitude, the zero-point
  // term (-zx * the weights' sum) at most KH * KW of them, and so is the
  // sum. At stride 1 the column kernel, which loads each input column
  // once per band, stays ahead: AMD family 25 model 1, fastest of 12 runs,
  // 3x3 over 96 channels at 112x112, stride 2: 0.27 -> 0.21 ms; over 128
  // at 56x56: 95 -> 75 us; but stride 1, 72 channels at 28x28: 40 -> 46 us,
  // 5x5 over 240 at 14x14: 60 -> 72 us. Windows of more than 4 rows (5x5),
  // which splitRows below does not take, have since measured the other way
  // and sum in f32 too: 5x5 over 240 at 14x14 85-97 -> 71 us (fastest of
  // 10, twice); paired, 1 thread: EfficientNet-B0 0.950, MobileNetV3-small
  // 0.967 of their time (2 of 2 blocks each), the same output bytes.
  const bool unitSteps = s.SH == 1 && s.SW == 1 && s.DH == 1 && s.DW == 1;
  s.floatSums = int8 && dotSumsPairs(target.isa) && (!unitSteps || KH > 4) &&
                2 * 255 * 255 * KH * KW < (int64_t(1) << 24);
  s.columns = int8 && !s.floatSums && s.DH == 1 && s.DW == 1;
  if (s.columns)
    s.chooseRows();
  // With 16 vector registers, two output rows and a fused chain's epilogue
  // (SiLU, HardSwish) spilled about 15 stack moves per 8 outputs; one row
  // spills less. AMD family 25 model 1, paired, 1 thread: EfficientNet-B0
  // int8 0.956, MobileNetV3-small 0.958 of their time. Without a chain two
  // rows stay (MobileNetV2 level: 1.004).
  if (s.columns && !hasAvx512(target.isa) && ep.chain)
    s.rows = 1;
  // Without VNNI, columns of one group of 4 rows (3x3) are split into row
  // pairs for emitDot4Rows: 3x3 over 144 channels at 56x56 0.29 -> 0.23
  // ms, 72 at 28x28 0.053 -> 0.034 (fastest of 12, AMD family 25 model 1).
  // A 5x5's two groups carry twice the registers of columns (widened
  // once, where emitDot4 widens each use): 240 at 14x14 0.058 -> 0.082.
  s.splitRows = s.columns && dotSumsPairs(target.isa) && s.rowGroups() == 1;
  // AVX2's two-row bands of 16 channels held 16 ymm of sums and 8 of
  // carried columns and spilled about 90 stack moves per 64 outputs; in
  // blocks of 8 channels they take 8 and 4, and each 16-lane epilogue
  // vector holds two pixels. Fastest of 6 kernel-bench runs, 4 rounds (AMD
  // family 25 model 1): 72 channels at 28x28 22-33 -> 36-42 GOPS (no
  // masked half block), 960 at 7x7 30-39 -> 38-43, 144 at 56x56 level;
  // paired plans, 1 thread: MobileNetV2 0.979, MobileNetV3-small 0.979. A
  // chain's one-row bands keep 16 channels: 4 pixels of 8 halve the
  // epilogue's independent work (EfficientNet-B0 1.023).
  s.halfBlocks = s.splitRows && target.isa == Isa::AVX2 && IC % 8 == 0 &&
                 !ep.chain && !ep.hasResidual && residual < 0;
  // Whole blocks of 64 channels in interleave64's order, where the epilogue
  // stores quantized pixels whole (no residual).
  if (s.columns && hasAvx512(target.isa) && ep.quantOut && !ep.hasResidual &&
      residual < 0) {
    s.wideBlocks = IC / 64;
    // 32 channels left over go in one block of two vectors (they took two
    // blocks of 16). Paired, 1 thread, AMD family 25 model 17 (Zen 4),
    // 2000 runs, the profile's kernel sums: MobileNetV2's 32 channels at
    // 112x112 0.0634 -> 0.0585 ms, its stride-2 layers (96 channels at
    // 112x112 among them) 0.1087 -> 0.1019; the whole plan 0.996 (2
    // threads 0.993), 14 of 20 blocks faster each.
    s.pairBlocks = IC % 64 / 32;
    interleaveChannels(s.ep, IC, 64 * s.wideBlocks);
    if (s.corrOff >= 0)
      s.corrOff = interleavedCopy(s.corrOff, IC, 64 * s.wideBlocks);
  }
  // Where channel c's weights stand.
  auto slot = [&](int64_t c) {
    return c < 64 * s.wideBlocks ? interleave64Index(c) : c;
  };
  // The column kernel's (and f32 rows') rows outside the image point at a
  // whole row of the zero point (its padding plane), the others' taps at
  // one pixel of it.
  s.padRowOff = padRow(
      int8, x.zp, s.columns || s.floatSums || !int8 ? s.W * s.inCS + C16 : C16);
  int64_t rowGroups = s.rowGroups();
  int64_t groups = s.columns ? KW * s.rows * rowGroups : (KH * KW + 3) / 4;
  const bool bytes = int8 && !s.floatSums && !s.splitRows;
  std::vector<int8_t> packed8(bytes ? groups * C16 * 4 : 0, 0);
  std::vector<int16_t> packed16(s.splitRows ? groups * C16 * 4 : 0, 0);
  std::vector<float> packedF(bytes || s.splitRows ? 0 : KH * KW * C16, 0.f);
  for (int64_t c = 0; c < IC; ++c)
    for (int64_t t = 0; t < KH * KW; ++t) {
      double w = weight(c * KH * KW + t);
      int64_t kh = t / KW, kw = t % KW;
      if (s.splitRows)
        for (int64_t r = 0; r < s.rows; ++r) {
          int64_t row = r * s.SH + kh;
          packed16[((kw * s.rows + r) * rowGroups + row / 4) * C16 * 4 +
                   (s.halfBlocks
                        ? c / 8 * 32 + splitPairIndex(c % 8, row % 4, 8)
                        : c / 16 * 64 + splitPairIndex(c % 16, row % 4))] =
              static_cast<int16_t>(w);
        }
      else if (!bytes)
        packedF[t * C16 + c] = static_cast<float>(w);
      else if (s.columns)
        for (int64_t r = 0; r < s.rows; ++r) {
          // Output row r of the band reads band row r * SH + kh.
          int64_t row = r * s.SH + kh;
          packed8[(((kw * s.rows + r) * rowGroups + row / 4) * C16 + slot(c)) *
                      4 +
                  row % 4] = static_cast<int8_t>(w);
        }
      else
        packed8[((t / 4) * C16 + c) * 4 + t % 4] = static_cast<int8_t>(w);
    }
  s.weightOff = s.splitRows ? addArray(packed16)
                : bytes     ? addArray(packed8)
                            : addArray(packedF);
  // Paired, 1 thread and 2 (AMD family 26 model 2): MobileNetV2 int8
  // 0.983-0.996 and 0.977-0.978 of its time (2000 runs, 37 and 31 of 40
  // blocks faster), EfficientNet-B0 1.000 and 0.997. A depthwise layer's
  // constants are tens of KB (960 channels: about 50).
  if (int8 && out.weights.size() - constLo <= (256 << 10)) {
    s.constOff = roundUp(constLo, 64);
    s.constBytes = out.weights.size() - s.constOff;
  }
  std::vector<int> ins = {in};
  if (residual >= 0)
    ins.push_back(residual);
  int64_t macs = s.N * s.OH * s.OW * IC * KH * KW;
  Isa isa = target.isa;
  // Tile: output pixels x channels.
  std::string kernel =
      std::string(int8 ? (hasAvx512(isa)        ? "vnni-depthwise "
                          : isa == Isa::AVXVNNI ? "avxvnni-depthwise "
                          : s.floatSums         ? "int8-f32sum-depthwise "
                                                : "int8-depthwise ")
                       : "fp32-depthwise ") +
      (!int8 || s.floatSums ? "4x16"
       : !s.columns         ? "1x16"
       : s.wideBlocks       ? (s.rows == 2 ? "2x2x64" : "2x64")
       : s.pairBlocks       ? (s.rows == 2 ? "2x4x32" : "4x32")
       : s.halfBlocks       ? (s.rows == 2 ? "2x4x8" : "4x8")
       : s.rows == 2        ? "2x4x16"
                            : "4x16") +
      s.ep.chainName;
  // An int8 layer's f32 result in 16-channel blocks (the column kernel's, or
  // the f32 rows' of floatSums) can also be summed row by row for a
  // GlobalAveragePool of it (lowerReduce asks). Paired, AMD family 25 model
  // 1, against the pool's own layer over a 5x5's map: EfficientNet-B0 int8
  // 0.998 of its time on 1 and 2 threads (2 of 2 blocks each),
  // MobileNetV3-small 0.999 and 0.948. Not in f32 plans, where every
  // depthwise layer takes the f32 rows: MobileNetV3-small fp32 1.034 (0 of
  // 6), EfficientNet-B0 0.989.
  auto sums = std::make_shared<int>(-1);
  if ((s.columns || s.floatSums) && !s.wideBlocks && !ep.quantOut &&
      residual < 0)
    rowSumsOf[o] = {static_cast<int>(layers.size()), s.sumParts(), sums};
  addLayer(op, kernel, int8 ? "int8" : "fp32", macs > 50000, macs, ins, {o},
           [=](KB &k) {
             DepthwiseSpec spec = s;
             bindConv(spec, in, o, residual);
             if (*sums >= 0)
               spec.sumsOff = tensors[*sums].desc.offset;
             emitDepthwise(k, isa, spec);
           });
  return success();
}

LogicalResult GraphLowering::groupedConv(
    Operation *op, bool int8, int in, int o, ArrayRef<int64_t> ws,
    int64_t group, ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
    ArrayRef<int64_t> dilations, Epilogue ep, int64_t corrOff, int residual,
    std::function<double(int64_t)> weight) {
  const CTensor &x = tensors[in];
  int64_t OC = ws[0], ICg = ws[1], KH = ws[2], KW = ws[3];
  if (OC % group || x.channels() != ICg * group)
    return op->emitError("a grouped convolution needs channels divisible by "
                         "its group count");
  int64_t OCg = OC / group;
  std::vector<DenseConvSpec> specs;
  int64_t padRowOff = padRow(int8, x.zp, x.desc.channelStride + 64);
  const bool above128 = int8 && storedFloor(op->getOperand(0)) >= 128;
  for (int64_t g = 0; g < group; ++g) {
    DenseConvSpec s;
    s.int8 = int8;
    setWindow(s, x.desc.shape, tensors[o].desc.shape, KH, KW, strides, pads,
              dilations);
    s.IC = ICg;
    s.OC = OCg;
    // Pixels keep the full strides; the K loop reads this group's channels
    // (int8: rounded up to dwords; the weights past ICg are zero).
    s.inCS = x.desc.channelStride;
    s.outCS = tensors[o].desc.channelStride;
    s.KC = int8 ? roundUp(ICg, 4) : ICg;
    s.inputAbove128 = above128;
    s.padRowOff = padRowOff;
    s.ep = ep;
    auto shift = [&](int64_t &off) {
      if (off >= 0)
        off += g * OCg * 4;
    };
    s.ep.forEachChannelArray(shift);
    s.ep.chainChannelBase = g * OCg;
    s.corrOff = corrOff;
    shift(s.corrOff);
    specs.push_back(packDense(
        s, [&](int64_t oc, int64_t ic, int64_t kh, int64_t kw) -> double {
          return ic < ICg
                     ? weight((((g * OCg + oc) * ICg + ic) * KH + kh) * KW + kw)
                     : 0;
        }));
  }
  // The last group's dword reads may pass the last pixel's channels.
  storages[x.storage].bytes += 64;
  std::vector<int> ins = {in};
  if (residual >= 0)
    ins.push_back(residual);
  const DenseConvSpec &s0 = specs[0];
  int64_t macs = s0.N * s0.OH * s0.OW * OC * KH * KW * ICg;
  Isa isa = target.isa;
  addLayer(op, denseKernelName(s0) + " x" + std::to_string(group) + " groups",
           int8 ? "int8" : "fp32", macs > 50000, macs, ins, {o}, [=](KB &k) {
             for (int64_t g = 0; g < group; ++g) {
               DenseConvSpec spec = specs[g];
               bindConv(spec, in, o, residual, g * ICg, g * OCg);
               emitDenseConv(k, isa, spec);
             }
           });
  return success();
}

/// A residual Add of `op`'s result `out`: its only reader, an AddT (qat.add
/// or onnx.Add), whose other operand, of a type `fits` accepts, has `out`'s
/// shape (as has the sum) and is computed before `op` runs, so that `op`'s
/// epilogue can add it in registers.
template <typename AddT> struct ResidualAdd {
  AddT add;
  Value other; ///< the operand that is not `out`
};
template <typename AddT>
static ResidualAdd<AddT> residualAddOf(Operation *op, Value out,
                                       llvm::function_ref<bool(Type)> fits) {
  if (!out.hasOneUse())
    return {};
  auto add = dyn_cast<AddT>(*out.getUsers().begin());
  if (!add || add->getOperand(0) == add->getOperand(1))
    return {};
  Value other = add->getOperand(add->getOperand(0) == out ? 1 : 0);
  if (!fits(other.getType()) || shapeOf(other) != shapeOf(out) ||
      shapeOf(add->getResult(0)) != shapeOf(out))
    return {};
  Operation *def = other.getDefiningOp();
  if (def && !def->isBeforeInBlock(op))
    return {};
  return {add, other};
}

/// The qat.add after `op`'s per-tensor int8 result `out`, of two such
/// tensors: `op`'s epilogue can quantize its result, dequantize both and
/// add (ResNet's bottleneck blocks quantize both inputs of the residual
/// add, and so do transformer encoders exported with Q/DQ on each input of
/// their Adds).
static ResidualAdd<qat::AddOp> quantResidualAddOf(Operation *op, Value out) {
  auto perTensor = [](Type t) { return bool(qat::getPerTensorType(t)); };
  if (!perTensor(out.getType()))
    return {};
  return residualAddOf<qat::AddOp>(op, out, perTensor);
}

void GraphLowering::setMidQuant(Epilogue &ep, Value out) {
  StoredQuant mid = storedQuant(qat::QuantLayout(out.getType()));
  ep.midQuant = true;
  ep.midScale = mid.scale;
  ep.midZp = mid.zp;
  ep.midQmin = mid.qmin;
  ep.midQmax = mid.qmax;
}

int GraphLowering::setQuantResidual(Epilogue &ep, int residual) {
  const CTensor &r = tensors[residual];
  ep.hasResidual = true;
  ep.resCS = rowStride(r);
  ep.resZp = r.zp;
  ep.resScale = r.scale;
  return residual;
}

LogicalResult GraphLowering::lowerQatConv(qat::ConvOp op) {
  if (op.getInput().getType().getRank() != 4)
    return op.emitError("qatc compiles 2-D convolutions only");
  int in = inLayout(tensorOf(op.getInput()), plan::Layout::NHWC, op.getLoc());
  convConstantsFrom = out.weights.size();
  auto w = constantOf(op.getWeight());
  if (!w)
    return op.emitError("the weight of a compiled convolution must be a "
                        "constant");
  qat::QuantLayout wl(op.getWeight().getType());
  if (failed(requireSymmetric(op, wl)))
    return failure();
  const CTensor &x = tensors[in];
  auto ws = cast<ShapedType>(op.getWeight().getType()).getShape();
  int64_t OC = ws[0], perChannel = ws[1] * ws[2] * ws[3];
  Epilogue ep;
  auto [add, other] = op.getResidual() ? ResidualAdd<qat::AddOp>()
                                       : quantResidualAddOf(op, op.getOutput());
  int o;
  Value residualIn = op.getResidual();
  if (add) {
    // The conv's own quantization, in the stored domain (u8, signed int8
    // offset by 128), then the add's operand, activation and result.
    setMidQuant(ep, op.getOutput());
    o = epilogueOutput(add.getOutput(), plan::Layout::NHWC, 1, ep);
    ep.chainName = " +requantize+add" + ep.chainName;
    folded.insert(add);
    residualIn = other;
  } else {
    o = epilogueOutput(op.getOutput(), plan::Layout::NHWC, 1, ep);
  }
  if (failed(linearEpilogue(op, x, wl, OC, ep)))
    return failure();
  if (add)
    fillActivation(ep, add.getActivation(), /*post=*/true);
  int residual = -1;
  if (residualIn)
    residual = setQuantResidual(
        ep, inLayout(tensorOf(residualIn), plan::Layout::NHWC, op.getLoc()));
  ref::Tensor wt = *w;
  int64_t corrOff = addZeroPointTerms(OC, x.zp, [&](int64_t c) {
    int64_t sum = 0;
    for (int64_t i = 0; i < perChannel; ++i)
      sum += intAt(wt, c * perChannel + i);
    return sum;
  });
  foldRequantization(ep, OC, [&](int64_t c) {
    return accumulatorRange(x.zp, perChannel, [&](int64_t i) {
      return intAt(wt, c * perChannel + i);
    });
  });
  return lowerConv(op, true, in, o, ws, op.getGroup(), op.getStrides(),
                   op.getPads(), op.getDilations(), ep, corrOff, residual,
                   [wt](int64_t i) -> double { return intAt(wt, i); });
}

LogicalResult
GraphLowering::matrixProduct(Operation *op, bool int8, int in, int o, int64_t K,
                             int64_t N, Epilogue ep, int64_t corrOff,
                             std::function<double(int64_t, int64_t)> weightAt,
                             int residual) {
  const CTensor &x = tensors[in];
  int64_t kPhys = physicalK(x), M = x.dim(0);
  DenseConvSpec s;
  s.int8 = int8;
  s.inputAbove128 = int8 && storedFloor(op->getOperand(0)) >= 128;
  s.W = s.OW = M;
  s.IC = s.inCS = kPhys;
  s.OC = N;
  s.outCS = tensors[o].desc.layout == plan::Layout::NHWC
                ? tensors[o].desc.channelStride
                : N;
  s.corrOff = corrOff;
  s.padRowOff = padRow(int8, x.zp, kPhys);
  s.ep = ep;
  CTensor view = x;
  return denseConv(
      op, s, in, o,
      [view, weightAt](int64_t n, int64_t kp, int64_t, int64_t) -> double {
        int64_t kl = logicalK(view, kp);
        return kl < 0 ? 0 : weightAt(n, kl);
      },
      residual);
}

int GraphLowering::asRows(int t, Location loc) {
  const CTensor &x = tensors[t];
  if (x.flat)
    return t;
  if (x.desc.shape.size() == 2)
    return inLayout(t, plan::Layout::NHWC, loc);
  int64_t K = x.desc.shape.back(), M = product(x.desc.shape) / K;
  std::vector<int64_t> rows = {M, K};
  if (!x.view && x.desc.layout == plan::Layout::Plain &&
      (!x.int8 || K % 4 == 0)) {
    // The same bytes as a [M, K] matrix.
    int a = alias(t, x.desc.name, rows);
    tensors[a].desc.layout = plan::Layout::NHWC;
    tensors[a].desc.channelStride = K;
    out.manifest.tensors[tensors[a].manifestIndex] = tensors[a].desc;
    return a;
  }
  // A copy with the rows padded for the int8 kernel.
  CTensor copy = x;
  copy.view = false;
  copy.vstrides.clear();
  copy.vbase = 0;
  copy.desc.shape = rows;
  copy.desc.layout = plan::Layout::NHWC;
  copy.desc.channelStride = x.int8 ? roundUp(K, 4) : K;
  int r = addTensor(copy);
  std::vector<int64_t> shape = x.desc.shape;
  addLayer(loc, nodeName(loc), "layout", "strided-copy", "layout",
           product(shape) > 4096, 0, {t}, {r}, [=](KB &k) {
             StridedMap m;
             m.shape = shape;
             m.ins = {operand(Src{t, -1, {}}, shape)};
             m.out = operand(Src{r, -1, {}}, rows);
             // Row m of the copy holds the last axis of input index m.
             m.out.strides.assign(shape.size(), 0);
             int64_t st = tensors[r].desc.channelStride;
             m.out.strides.back() = 1;
             for (size_t d = shape.size() - 1; d-- > 0;) {
               m.out.strides[d] = st;
               st *= shape[d];
             }
             emitStridedMap(k, m, nullptr);
           });
  return r;
}

bool GraphLowering::packable(int ta, int tb, ArrayRef<int64_t> outShape) const {
  const CTensor &A = tensors[ta], &B = tensors[tb];
  if (A.int8 != B.int8 || A.isInt() || B.isInt() || B.flat)
    return false;
  // int8: the right-hand side becomes s8 weights w = stored - zp.
  if (B.int8 && (B.qmin - B.zp < -128 || B.qmax - B.zp > 127))
    return false;
  size_t rank = outShape.size();
  if (rank < 2 || A.desc.shape.size() != rank || B.desc.shape.size() != rank)
    return false;
  for (size_t d = 0; d + 2 < rank; ++d)
    if (A.desc.shape[d] != outShape[d] || B.desc.shape[d] != outShape[d])
      return false;
  return true;
}

namespace {
/// An int8 right-hand side w[k][n] of a batched product packed as the dense
/// kernel's weights, [batch][n / NB][k / 4][n % NB][4 bytes] of stored - zp
/// (`split`: each k step's 16 columns in splitPairIndex's order), with each
/// column's zero-point term -za * sum_k w[k][n].
struct Int8RhsPack {
  int64_t batches, cols, K, N, NB, KS, batchBytes;
  int64_t dstOff, corrOff, srcBase; ///< bytes
  int64_t sbk, sbn;                 ///< source strides of k and n
  int64_t zp, za;
  bool split;
};
} // namespace

/// 16 bytes of stored - zp (lanes under `mask`; the others 0): v - zp in
/// bytes is the scalar path's truncation, as stored - zp fits s8
/// (GraphLowering::packable).
static Value loadWeights16(KB &k, const Int8RhsPack &p, Value at, Value mask) {
  auto v16i8 = VectorType::get({16}, k.i8);
  Value zp = k.splatI(p.zp, 16, k.i8);
  Value v = k.maskedLoad(v16i8, at, mask, zp);
  return k.b.create<arith::SubIOp>(k.loc, v, zp);
}

/// The byte offset of column `n`'s first dword of batch `bat` in the
/// dense kernel's packed layout of blocks of NB columns, KS k steps each
/// (split: of its (k0, k2) pair; its (k1, k3) pair is 32 bytes on).
static Value packedColumn(KB &k, bool split, int64_t NB, int64_t KS,
                          int64_t batchBytes, Value bat, Value n) {
  Value inBlock = k.rem(n, k.c(NB));
  Value slot = split ? k.add(k.mul(k.div(inBlock, k.c(16)), k.c(64)),
                             k.mul(k.rem(inBlock, k.c(16)), k.c(2)))
                     : k.mul(inBlock, k.c(4));
  return k.add(k.add(k.mul(bat, k.c(batchBytes)),
                     k.mul(k.div(n, k.c(NB)), k.c(KS * NB * 4))),
               slot);
}
static Value packedColumn(KB &k, const Int8RhsPack &p, Value bat, Value n) {
  return packedColumn(k, p.split, p.NB, p.KS, p.batchBytes, bat, n);
}

static Value widen(KB &k, Value w) {
  return k.b.create<arith::ExtSIOp>(k.loc, VectorType::get({16}, k.i32), w);
}

/// K contiguous in the source (K^T of attention is K's rows): a column's K
/// bytes 16 at a time, each 4 of them one dword of the packed
/// layout. The threads share (batch, column), batch by batch.
static void packColumnsOfRows(KB &k, const Int8RhsPack &p,
                              function_ref<Value(Value)> batchOffset) {
  OpBuilder &b = k.b;
  auto v4i32 = VectorType::get({4}, k.i32);
  auto [b0, e0] = k.share(p.batches * p.cols);
  k.loop(b0, e0, 1, [&](Value idx) {
    Value bat = k.div(idx, k.c(p.cols)), n = k.rem(idx, k.c(p.cols));
    Value nOk = k.lt(n, k.c(p.N));
    Value col =
        k.add(batchOffset(bat), k.mul(k.select(nOk, n, k.c(0)), k.c(p.sbn)));
    Value dst = packedColumn(k, p, bat, n);
    Value none = k.prefixMask(16, k.c(0));
    // Bytes [16 g, 16 g + count) of the column: count / 4 dwords (rounded
    // up; bytes past K load as zp, so they pack as 0).
    auto group = [&](Value g, int64_t count, Value sum) -> Value {
      Value mask = k.select(nOk, k.prefixMask(16, k.c(count)), none);
      Value w = loadWeights16(
          k, p, k.at(p.srcBase, k.add(col, k.mul(g, k.c(16))), 1), mask);
      Value words = b.create<vector::BitCastOp>(k.loc, v4i32, w);
      // split: the (k0, k2) and (k1, k3) bytes of each dword, as i16 pairs.
      Value even, odd;
      if (p.split) {
        auto v4i16 = VectorType::get({4}, b.getI16Type());
        SmallVector<int64_t> e, o;
        for (int64_t j = 0; j < 4; ++j) {
          e.append({4 * j, 4 * j + 2});
          o.append({4 * j + 1, 4 * j + 3});
        }
        even = b.create<vector::BitCastOp>(
            k.loc, v4i16, b.create<vector::ShuffleOp>(k.loc, w, w, e));
        odd = b.create<vector::BitCastOp>(
            k.loc, v4i16, b.create<vector::ShuffleOp>(k.loc, w, w, o));
      }
      for (int64_t j = 0; j < (count + 3) / 4; ++j) {
        Value kd = k.add(k.mul(g, k.c(4)), k.c(j));
        Value at = k.at(p.dstOff, k.add(dst, k.mul(kd, k.c(p.NB * 4))), 1);
        if (p.split) {
          k.store(
              b.create<vector::ExtractOp>(k.loc, even, ArrayRef<int64_t>{j}),
              at);
          k.store(b.create<vector::ExtractOp>(k.loc, odd, ArrayRef<int64_t>{j}),
                  k.gep(at, 32));
          continue;
        }
        k.store(b.create<vector::ExtractOp>(k.loc, words, ArrayRef<int64_t>{j}),
                at);
      }
      return b.create<arith::AddIOp>(k.loc, sum, widen(k, w));
    };
    Value sum =
        k.loop(k.c(0), k.c(p.K / 16), 1, ValueRange{k.splatI(0, 16, k.i32)},
               [&](Value g, ValueRange a) -> SmallVector<Value> {
                 return {group(g, 16, a[0])};
               })[0];
    if (p.K % 16)
      sum = group(k.c(p.K / 16), p.K % 16, sum);
    Value total =
        b.create<vector::ReductionOp>(k.loc, vector::CombiningKind::ADD, sum);
    k.store(b.create<arith::MulIOp>(
                k.loc, total, b.create<arith::ConstantIntOp>(k.loc, -p.za, 32)),
            k.at(p.corrOff, idx, 4));
  });
}

/// N contiguous in the source (V of attention): 16 columns of 4 rows at a
/// time, their bytes interleaved to 16 dwords, one 64-byte store; the 16
/// columns' sums in one vector. The threads share (batch, 16 columns),
/// batch by batch.
static void packRowsOf16Columns(KB &k, const Int8RhsPack &p,
                                function_ref<Value(Value)> batchOffset) {
  OpBuilder &b = k.b;
  const int64_t groups = p.cols / 16;
  // Byte 4 c + r of the result is row r's byte c (split: byte
  // splitPairIndex(c, r)).
  SmallVector<int64_t> pairs, quads(64);
  for (int64_t i = 0; i < 32; ++i)
    pairs.push_back(i);
  for (int64_t c = 0; c < 16; ++c)
    for (int64_t r = 0; r < 4; ++r)
      quads[p.split ? splitPairIndex(c, r) : 4 * c + r] =
          (r / 2) * 32 + (r % 2) * 16 + c;
  auto [b0, e0] = k.share(p.batches * groups);
  k.loop(b0, e0, 1, [&](Value idx) {
    Value bat = k.div(idx, k.c(groups));
    Value n0 = k.mul(k.rem(idx, k.c(groups)), k.c(16));
    Value base = k.add(batchOffset(bat), k.mul(n0, k.c(p.sbn)));
    Value cols = k.prefixMask(16, k.sub(k.c(p.N), n0));
    Value none = k.prefixMask(16, k.c(0));
    Value dst = packedColumn(k, p, bat, n0);
    Value sum = k.loop(
        k.c(0), k.c(p.KS), 1, ValueRange{k.splatI(0, 16, k.i32)},
        [&](Value kd, ValueRange a) -> SmallVector<Value> {
          SmallVector<Value> w;
          Value acc = a[0];
          for (int64_t r = 0; r < 4; ++r) {
            Value row = k.add(k.mul(kd, k.c(4)), k.c(r));
            Value ok = k.lt(row, k.c(p.K));
            Value at = k.at(
                p.srcBase,
                k.add(base, k.mul(k.select(ok, row, k.c(0)), k.c(p.sbk))), 1);
            w.push_back(loadWeights16(k, p, at, k.select(ok, cols, none)));
            acc = b.create<arith::AddIOp>(k.loc, acc, widen(k, w.back()));
          }
          Value lo = b.create<vector::ShuffleOp>(k.loc, w[0], w[1], pairs);
          Value hi = b.create<vector::ShuffleOp>(k.loc, w[2], w[3], pairs);
          k.store(b.create<vector::ShuffleOp>(k.loc, lo, hi, quads),
                  k.at(p.dstOff, k.add(dst, k.mul(kd, k.c(p.NB * 4))), 1));
          return {acc};
        })[0];
    Value corr =
        b.create<arith::MulIOp>(k.loc, sum, k.splatI(-p.za, 16, k.i32));
    k.store(corr, k.at(p.corrOff, k.add(k.mul(bat, k.c(p.cols)), n0), 4));
  });
}

std::function<void(KB &, const DenseConvSpec &, ArrayRef<SmallVector<Value>>,
                   ArrayRef<Value>)>
GraphLowering::rowSoftmaxEpilogue(const FoldedChain &sm, int o, int64_t N,
                                  const Epilogue &ep) {
  std::shared_ptr<ChainProgram> chain = sm.chain;
  const CTensor O = tensors[o];
  return [=](KB &k, const DenseConvSpec &s, ArrayRef<SmallVector<Value>> accs,
             ArrayRef<Value> pixels) {
    OpBuilder &b = k.b;
    auto vf = VectorType::get({16}, k.f32);
    const int64_t NV = s.NV, oes = O.int8 ? 1 : 4;
    float inf = std::numeric_limits<float>::infinity();
    auto channel = [&](int64_t off, int64_t v) {
      return k.load(vf, k.weightsAt(off, k.c(16 * v), 4));
    };
    // All the tile's rows side by side, as the separate softmax layer does
    // 4 (attention's 6 rows of 4 vectors: 8.3 us a layer; 2 rows at a
    // time, 10 us).
    std::vector<SmallVector<Value>> rows(accs.size());
    for (size_t r = 0; r < accs.size(); ++r)
      for (int64_t v = 0; v < NV; ++v) {
        // The product's epilogue (emitEpilogue's factors, then the bias):
        // the scores are the bits the unfused layer stored.
        Value y = accs[r][v];
        if (s.int8)
          y = b.create<arith::SIToFPOp>(k.loc, vf, y);
        for (int64_t off : {ep.multOff, ep.scaleOff})
          if (off >= 0)
            y = b.create<arith::MulFOp>(k.loc, y, channel(off, v));
        if (ep.biasOff >= 0)
          y = b.create<arith::AddFOp>(k.loc, y, channel(ep.biasOff, v));
        if (16 * (v + 1) > N)
          y = k.select(k.channelMask(k.c(16 * v), N, 16), y,
                       k.splatF(-inf, 16));
        rows[r].push_back(y);
      }
    {
      llvm::SaveAndRestore<bool> coarse(k.quantizedChain,
                                        O.int8 || (chain && chain->quantized));
      k.softmaxRows(rows);
    }
    for (size_t r = 0; r < rows.size(); ++r)
      for (int64_t v = 0; v < NV; ++v) {
        Value y = rows[r][v];
        if (chain)
          y = chain->run(k, {y}, [&](int64_t off) { return channel(off, v); });
        if (O.int8)
          y = k.quantizeApproximate(y, O.scale, O.zp, O.qmin, O.qmax);
        Value at = k.at(
            s.outOff, k.add(k.mul(pixels[r], k.c(s.outCS)), k.c(16 * v)), oes);
        k.maskedStore(y, at, k.channelMask(k.c(16 * v), N, 16));
      }
  };
}

std::optional<FoldedChain> GraphLowering::matchRowSoftmax(Value v) {
  auto shape = cast<ShapedType>(v.getType()).getShape();
  if (!v.hasOneUse() || shape.size() < 2 ||
      !getElementTypeOrSelf(v.getType()).isF32() ||
      shape.back() > (hasAvx512(target.isa) ? 64 : 32))
    return std::nullopt;
  auto sm = dyn_cast<onnx::SoftmaxOp>(*v.getUsers().begin());
  int64_t rank = shape.size();
  if (!sm || (static_cast<int64_t>(sm.getAxis()) + rank) % rank != rank - 1)
    return std::nullopt;
  folded.insert(sm);
  FoldedChain r = foldChainAfter(sm.getResult(), rank - 1);
  r.locs.insert(r.locs.begin(), sm.getLoc());
  return r;
}

Operation *GraphLowering::matchOutputTranspose(Value v) {
  auto t = v.hasOneUse() ? *v.getUsers().begin() : nullptr;
  if (!isa_and_nonnull<qat::TransposeOp, onnx::TransposeOp>(t))
    return nullptr;
  auto perm = cast<DenseI64ArrayAttr>(t->getAttr("perm")).asArrayRef();
  if (perm.empty() || perm.back() != static_cast<int64_t>(perm.size()) - 1)
    return nullptr;
  folded.insert(t);
  return t;
}

LogicalResult GraphLowering::packedProduct(Operation *op, int ta, int tb,
                                           bool transB, int o, float mult,
                                           Epilogue ep,
                                           const FoldedChain *softmax,
                                           ArrayRef<int64_t> outPerm) {
  const bool int8 = tensors[ta].int8;
  // Rows of the left-hand side must be contiguous: an NHWC or strided one is
  // copied to plain first.
  if (tensors[ta].flat || stridesOf(tensors[ta]).back() != 1)
    ta = inLayout(ta, plan::Layout::Plain, op->getLoc());
  const CTensor &A = tensors[ta], &B = tensors[tb], &O = tensors[o];
  std::vector<int64_t> outShape(
      cast<ShapedType>(op->getResult(0).getType()).getShape());
  size_t rank = outShape.size();
  int64_t M = outShape[rank - 2], N = outShape[rank - 1],
          K = A.desc.shape[rank - 1];
  std::vector<int64_t> batch(outShape.begin(), outShape.end() - 2);
  std::vector<int64_t> sa = stridesOf(A), sb = stridesOf(B);
  int64_t batches = product(batch);
  int64_t sbk = transB ? sb[rank - 1] : sb[rank - 2],
          sbn = transB ? sb[rank - 2] : sb[rank - 1];

  DenseConvSpec base;
  base.int8 = int8;
  base.N = base.H = base.OH = 1;
  base.W = base.OW = M;
  base.IC = K;
  base.OC = N;
  base.KC = int8 ? roundUp(K, 4) : K;
  base.inCS = sa[rank - 2];
  // The product's strides in `o`: its own row-major ones, or through the
  // transpose folded into it (`outPerm`: result dim i is product dim
  // outPerm[i]), whose result `o` is.
  std::vector<int64_t> os(rank);
  {
    std::vector<int64_t> rm = rowMajor(O.desc.shape);
    for (size_t i = 0; i < rank; ++i)
      os[outPerm.empty() ? i : outPerm[i]] = rm[i];
  }
  base.outCS = os[rank - 2];
  base.packedInArena = true;
  chooseTile(base);
  if (softmax) {
    // One block of columns: a tile holds whole rows.
    base.NV = (N + 15) / 16;
    base.MR = tileRows(base, base.NV);
  }
  // Packed [batch][block][k step][NB][4 bytes]: a dword of 4 int8 k, or one
  // float.
  const int64_t NB = base.NV * 16, blocks = (N + NB - 1) / NB,
                KS = base.kSteps(), step = int8 ? 4 : 1, cols = blocks * NB;
  const int64_t batchBytes = blocks * KS * NB * 4,
                corrBase = batches * batchBytes,
                bytes = corrBase + (int8 ? batches * cols * 4 : 0);
  ep.multOff =
      int8 || mult != 1.f ? addChannels(std::vector<float>(N, mult), N) : -1;
  base.ep = ep;
  // The int8 kernel reads the last row's K steps in whole dwords.
  storages[A.storage].bytes += 64;

  // Layer 1: each column of each batch's right-hand side, w[k][n] (zero past
  // K and N), in the kernel's weight layout; for int8 also its zero-point
  // term -z_a * sum_k w[k][n].
  Value res = op->getResult(0);
  int packed = newIntTensor(nameOf(res) + " (packed rhs)", {bytes / 4},
                            plan::ElemType::I32);
  std::vector<int64_t> lb = batch;
  lb.insert(lb.end(), {transB ? N : K, transB ? K : N});
  int64_t za = A.zp;
  // Shared from 4096 elements, as elementwise maps: attention's K^T (4
  // heads x 64 x 32) took thread 0 7 us while the other waited.
  addLayer(
      op->getLoc(), nodeName(op->getLoc()), opTypeOf(op->getLoc(), op),
      int8 ? "pack-int8-rhs" : "pack-fp32-rhs", int8 ? "int8" : "fp32",
      batches * cols * K > 4096, 0, {tb}, {packed}, [=](KB &k) {
        const CTensor &Bt = tensors[tb], &P = tensors[packed];
        StridedOperand src = operand(Src{tb, -1, {}}, lb);
        int64_t es = int8 ? 1 : 4;
        int64_t srcBase = src.byteOffset + src.offset * es;
        OpBuilder &b = k.b;
        // Where batch `bat` starts in the source (elements).
        auto batchOffset = [&](Value bat) {
          Value rest = bat, bOff = k.c(0);
          for (size_t d = rank - 2; d-- > 0;) {
            Value i = d == 0 ? rest : k.rem(rest, k.c(batch[d]));
            if (d > 0)
              rest = k.div(rest, k.c(batch[d]));
            bOff = k.add(bOff, k.mul(i, k.c(src.strides[d])));
          }
          return bOff;
        };
        if (int8 && (sbk == 1 || sbn == 1)) {
          const int64_t dst = P.desc.offset;
          Int8RhsPack pk{
              batches,        cols,    K,   N,   NB,    KS, batchBytes,     dst,
              dst + corrBase, srcBase, sbk, sbn, Bt.zp, za, base.splitPairs};
          if (sbk == 1)
            packColumnsOfRows(k, pk, batchOffset);
          else
            packRowsOf16Columns(k, pk, batchOffset);
          return;
        }
        auto [b0, e0] = k.share(batches * cols);
        k.loop(b0, e0, 1, [&](Value idx) {
          Value bat = k.div(idx, k.c(cols)), n = k.rem(idx, k.c(cols));
          Value bOff = batchOffset(bat);
          Value nOk = k.lt(n, k.c(N));
          Value colBase =
              k.add(bOff, k.mul(k.select(nOk, n, k.c(0)), k.c(sbn)));
          Value dst =
              packedColumn(k, base.splitPairs, NB, KS, batchBytes, bat, n);
          Value zero32 = b.create<arith::ConstantIntOp>(k.loc, 0, 32);
          Value sum = k.loop(
              k.c(0), k.c(KS * step), 1, ValueRange{zero32},
              [&](Value kk, ValueRange acc) -> SmallVector<Value> {
                Value ok = k.andi(nOk, k.lt(kk, k.c(K)));
                Value at =
                    k.add(colBase, k.mul(k.select(ok, kk, k.c(0)), k.c(sbk)));
                Value d = k.add(dst, k.mul(k.div(kk, k.c(step)), k.c(NB * 4)));
                if (!int8) {
                  Value v = k.load(k.f32, k.at(srcBase, at, 4));
                  k.store(k.select(ok, v, k.cf(0.f)),
                          k.at(P.desc.offset, d, 1));
                  return {acc[0]};
                }
                Value q = b.create<arith::ExtUIOp>(
                    k.loc, k.i32, k.load(k.i8, k.at(srcBase, at, 1)));
                Value w = b.create<arith::SubIOp>(
                    k.loc, q, b.create<arith::ConstantIntOp>(k.loc, Bt.zp, 32));
                w = k.select(ok, w, zero32);
                Value kk4 = k.rem(kk, k.c(4));
                d = base.splitPairs
                        ? k.add(d, k.add(k.mul(k.rem(kk4, k.c(2)), k.c(32)),
                                         k.div(kk4, k.c(2))))
                        : k.add(d, kk4);
                k.store(b.create<arith::TruncIOp>(k.loc, k.i8, w),
                        k.at(P.desc.offset, d, 1));
                return {b.create<arith::AddIOp>(k.loc, acc[0], w)};
              })[0];
          if (int8)
            k.store(
                b.create<arith::MulIOp>(
                    k.loc, sum, b.create<arith::ConstantIntOp>(k.loc, -za, 32)),
                k.at(P.desc.offset + corrBase, idx, 4));
        });
      });

  // Layer 2: the dense kernel per batch, rows of the left-hand side read in
  // place (its strides), results written to the batch's rows.
  std::vector<int64_t> la = batch;
  la.insert(la.end(), {M, K});
  Isa isa = target.isa;
  std::string kernel = denseKernelName(base);
  kernel.replace(kernel.find("-conv"), 5, "-batched-matmul");
  Location at = op->getLoc();
  if (softmax) {
    kernel = softmax->kernel(kernel + "+softmax");
    at = softmax->locOf(op);
    base.rowEpilogue = rowSoftmaxEpilogue(*softmax, o, N, ep);
  }
  addLayer(at, nodeName(at), opTypeOf(at, op), kernel, int8 ? "int8" : "fp32",
           batches * M * N * K > 50000, batches * M * N * K, {ta, packed}, {o},
           [=](KB &k) {
             const CTensor &Ot = tensors[o], &P = tensors[packed];
             StridedOperand ao = operand(Src{ta, -1, {}}, la);
             int64_t aes = int8 ? 1 : 4, oes = Ot.int8 ? 1 : 4;
             // The threads share the (batch, block, tile) items batch by
             // batch, as the packing layer shares (batch, column) and the
             // softmax between the products shares (batch, row): each
             // thread then reads mostly what it wrote. Split per batch,
             // each thread read the other's half of every head (2 threads:
             // 2.3 -> 4-5 us for attention's 4 heads of 64 x 64).
             const int64_t items = base.workItems();
             auto [begin, end] = k.share(batches * items);
             auto clampTo = [&](Value v) -> Value {
               OpBuilder &b = k.b;
               v = b.create<arith::MaxSIOp>(k.loc, v, k.c(0));
               return b.create<arith::MinSIOp>(k.loc, v, k.c(items));
             };
             for (int64_t bat = 0; bat < batches; ++bat) {
               int64_t aOff = ao.offset, oOff = 0, rest = bat;
               for (size_t d = rank - 2; d-- > 0;) {
                 int64_t i = rest % batch[d];
                 rest /= batch[d];
                 aOff += i * ao.strides[d];
                 oOff += i * os[d];
               }
               DenseConvSpec s = base;
               s.inOff = ao.byteOffset + aOff * aes;
               s.outOff = Ot.desc.offset + oOff * oes;
               s.weightOff = P.desc.offset + bat * batchBytes;
               s.corrOff = P.desc.offset + corrBase + bat * cols * 4;
               s.shareBegin = clampTo(k.sub(begin, k.c(bat * items)));
               s.shareEnd = clampTo(k.sub(end, k.c(bat * items)));
               emitDenseConv(k, isa, s);
             }
           });
  return success();
}

LogicalResult GraphLowering::batchedProduct(Operation *op, int ta, int tb,
                                            bool transB, int o, float mult,
                                            int64_t scaleOff, int64_t biasOff,
                                            std::optional<qat::ClampAttr> act) {
  std::vector<int64_t> outShape = tensors[o].desc.shape;
  size_t rank = outShape.size();
  int64_t M = outShape[rank - 2], N = outShape[rank - 1],
          K = tensors[ta].desc.shape.back();
  std::vector<int64_t> batch(outShape.begin(), outShape.end() - 2);
  int64_t batches = product(batch);
  float lo = -std::numeric_limits<float>::infinity(), hi = -lo;
  if (act && *act) {
    lo = static_cast<float>(act->getMin());
    hi = static_cast<float>(act->getMax());
  }
  bool int8 = tensors[ta].int8;
  addLayer(
      op, int8 ? "int8-batched-matmul" : "fp32-batched-matmul",
      int8 ? "int8" : "fp32", batches * M * N * K > 50000, batches * M * N * K,
      {ta, tb}, {o}, [=](KB &k) {
        const CTensor &A = tensors[ta], &B = tensors[tb], &O = tensors[o];
        std::vector<int64_t> la = batch, lb = batch;
        la.insert(la.end(), {M, K});
        lb.insert(lb.end(), transB ? std::initializer_list<int64_t>{N, K}
                                   : std::initializer_list<int64_t>{K, N});
        StridedOperand sa = operand(Src{ta, -1, {}}, la),
                       sb = operand(Src{tb, -1, {}}, lb),
                       so = operand(Src{o, -1, {}}, outShape);
        if (transB)
          std::swap(sb.strides[rank - 2], sb.strides[rank - 1]);
        OpBuilder &bb = k.b;
        auto elem = [&](const StridedOperand &s, Value idx) {
          Value p = k.gep(s.inWeights ? k.weights : k.arena,
                          k.add(k.c(s.byteOffset + s.offset * s.elemBytes),
                                k.mul(idx, k.c(s.elemBytes))));
          Value v = k.load(s.elemBytes == 1 ? k.i8 : k.f32, p);
          return v;
        };
        auto centered = [&](Value q, int64_t zp) -> Value {
          Value i = bb.create<arith::ExtUIOp>(k.loc, k.i32, q);
          return bb.create<arith::SubIOp>(
              k.loc, i, bb.create<arith::ConstantIntOp>(k.loc, zp, 32));
        };
        auto [b0, e0] = k.share(batches * M);
        k.loop(b0, e0, 1, [&](Value r) {
          Value m = k.rem(r, k.c(M)), rest = k.div(r, k.c(M));
          Value ba = k.mul(m, k.c(sa.strides[rank - 2])),
                bo = k.mul(m, k.c(so.strides[rank - 2])), bbase = k.c(0);
          for (size_t d = rank - 2; d-- > 0;) {
            Value idx = d == 0 ? rest : k.rem(rest, k.c(batch[d]));
            if (d > 0)
              rest = k.div(rest, k.c(batch[d]));
            ba = k.add(ba, k.mul(idx, k.c(sa.strides[d])));
            bbase = k.add(bbase, k.mul(idx, k.c(sb.strides[d])));
            bo = k.add(bo, k.mul(idx, k.c(so.strides[d])));
          }
          k.loop(k.c(0), k.c(N), 1, [&](Value n) {
            Value zero =
                int8 ? bb.create<arith::ConstantIntOp>(k.loc, 0, 32).getResult()
                     : k.cf(0.f);
            Value acc = k.loop(
                k.c(0), k.c(K), 1, ValueRange{zero},
                [&](Value kk, ValueRange s) -> SmallVector<Value> {
                  Value x =
                      elem(sa, k.add(ba, k.mul(kk, k.c(sa.strides[rank - 1]))));
                  Value w = elem(
                      sb,
                      k.add(bbase, k.add(k.mul(kk, k.c(sb.strides[rank - 2])),
                                         k.mul(n, k.c(sb.strides[rank - 1])))));
                  if (int8)
                    return {bb.create<arith::AddIOp>(
                        k.loc, s[0],
                        bb.create<arith::MulIOp>(k.loc, centered(x, A.zp),
                                                 centered(w, B.zp)))};
                  return {bb.create<arith::AddFOp>(
                      k.loc, s[0], bb.create<arith::MulFOp>(k.loc, x, w))};
                })[0];
            Value y = int8
                          ? bb.create<arith::MulFOp>(
                                  k.loc,
                                  bb.create<arith::SIToFPOp>(k.loc, k.f32, acc),
                                  k.cf(mult))
                                .getResult()
                          : acc;
            if (!int8 && mult != 1.f)
              y = bb.create<arith::MulFOp>(k.loc, y, k.cf(mult));
            auto channel = [&](int64_t off) {
              return k.load(k.f32, k.weightsAt(off, n, 4));
            };
            if (scaleOff >= 0)
              y = bb.create<arith::MulFOp>(k.loc, y, channel(scaleOff));
            if (biasOff >= 0)
              y = bb.create<arith::AddFOp>(k.loc, y, channel(biasOff));
            if (!std::isinf(lo))
              y = bb.create<arith::MaximumFOp>(k.loc, y, k.cf(lo));
            if (!std::isinf(hi))
              y = bb.create<arith::MinimumFOp>(k.loc, y, k.cf(hi));
            Value idx = k.add(bo, k.mul(n, k.c(so.strides[rank - 1])));
            if (O.int8)
              k.store(k.quantize(y, O.scale, O.zp, O.qmin, O.qmax),
                      k.at(O.desc.offset, idx, 1));
            else
              k.store(y, k.at(O.desc.offset, idx, 4));
          });
        });
      });
  return success();
}

LogicalResult GraphLowering::lowerQatMatMul(qat::MatMulOp op) {
  auto w = constantOf(op.getRhs());
  auto outShape = op.getOutput().getType().getShape();
  if (!w || cast<ShapedType>(op.getRhs().getType()).getRank() != 2) {
    // Activation x activation (attention): a batched product.
    if (op.getResidual())
      return op.emitError("a residual on a matrix product is not compiled "
                          "yet");
    if (!qat::getPerTensorType(op.getRhs().getType()))
      return op.emitError("qatc compiles activation matrix products with a "
                          "per-tensor right-hand side only");
    const bool packed =
        packable(tensorOf(op.getLhs()), tensorOf(op.getRhs()), outShape);
    // Attention's scores: the softmax after them runs in the product's
    // epilogue.
    std::optional<FoldedChain> softmax;
    if (packed && !op.getActivation())
      softmax = matchRowSoftmax(op.getOutput());
    // A transpose after it (attention's heads back to rows) is the
    // product's output strides, not a copy.
    Operation *transpose = nullptr;
    if (packed && !softmax)
      transpose = matchOutputTranspose(op.getOutput());
    int o = resultTensor(softmax     ? softmax->exit
                         : transpose ? Value(transpose->getResult(0))
                                     : op.getOutput(),
                         plan::Layout::Plain);
    const CTensor &A = tensors[tensorOf(op.getLhs())],
                  &B = tensors[tensorOf(op.getRhs())];
    float mult =
        static_cast<float>(A.desc.scale) * static_cast<float>(B.desc.scale);
    int64_t N = outShape.back(), scaleOff = -1, biasOff = -1;
    if (op.getBias() &&
        failed(addChannelConstant(op, op.getBias(), "bias", N, biasOff)))
      return failure();
    if (op.getChannelScale() &&
        failed(addChannelConstant(op, op.getChannelScale(), "channel scale", N,
                                  scaleOff)))
      return failure();
    if (op.getResidualActivation())
      return op.emitError("a residual activation without a residual");
    if (packed) {
      Epilogue ep;
      if (!softmax)
        fillEpilogueOut(ep, tensors[o]);
      ep.scaleOff = scaleOff;
      ep.biasOff = biasOff;
      fillActivation(ep, op.getActivation(), false);
      return packedProduct(
          op, tensorOf(op.getLhs()), tensorOf(op.getRhs()),
          op.getTransposeRhs(), o, mult, ep, softmax ? &*softmax : nullptr,
          transpose
              ? cast<DenseI64ArrayAttr>(transpose->getAttr("perm")).asArrayRef()
              : ArrayRef<int64_t>());
    }
    return batchedProduct(op, tensorOf(op.getLhs()), tensorOf(op.getRhs()),
                          op.getTransposeRhs(), o, mult, scaleOff, biasOff,
                          op.getActivation());
  }
  qat::QuantLayout wl(op.getRhs().getType());
  if (failed(requireSymmetric(op, wl)))
    return failure();
  int in = asRows(tensorOf(op.getLhs()), op.getLoc());
  const CTensor &x = tensors[in];
  auto rs = cast<ShapedType>(op.getRhs().getType()).getShape();
  bool tr = op.getTransposeRhs();
  int64_t K = tr ? rs[1] : rs[0], N = tr ? rs[0] : rs[1];
  if (op.getResidual())
    return op.emitError("a residual on a matrix product is not compiled yet");
  Epilogue ep;
  // The residual Add after it (a transformer's attention output and its
  // feed-forward's) joins the epilogue: a quantized one after its own
  // quantization, as a convolution's; an f32 one as it stands.
  Value exit = op.getOutput();
  auto [add, other] = quantResidualAddOf(op, op.getOutput());
  if (add && !residualRows(tensorOf(other)))
    add = {};
  int residual = -1;
  if (add) {
    setMidQuant(ep, op.getOutput());
    exit = add.getOutput();
  } else if (isa<FloatType>(getElementTypeOrSelf(exit.getType()))) {
    residual = foldFloatResidual(op, op.getOutput(), true, ep, exit);
  }
  // Rank-2 int8 results are NHWC (rows padded to dwords for the next
  // product), the others plain.
  int o = epilogueOutput(
      exit,
      [&](Value r) {
        return isa<quant::QuantizedType>(getElementTypeOrSelf(r.getType())) &&
                       outShape.size() == 2
                   ? plan::Layout::NHWC
                   : plan::Layout::Plain;
      },
      outShape.size() - 1, ep);
  if (residual >= 0)
    ep.chainName = " +add" + ep.chainName;
  if (failed(linearEpilogue(op, x, wl, N, ep)))
    return failure();
  if (add) {
    ep.chainName = " +requantize+add" + ep.chainName;
    folded.insert(add);
    fillActivation(ep, add.getActivation(), /*post=*/true);
    residual = setQuantResidual(ep, asRows(tensorOf(other), op.getLoc()));
  }
  ref::Tensor wt = *w;
  auto weightAt = [wt, tr, K, N](int64_t n, int64_t k) -> double {
    return intAt(wt, tr ? n * K + k : k * N + n);
  };
  int64_t corrOff = addZeroPointTerms(N, x.zp, [&](int64_t n) {
    int64_t sum = 0;
    for (int64_t k = 0; k < K; ++k)
      sum += static_cast<int64_t>(weightAt(n, k));
    return sum;
  });
  foldRequantization(ep, N, [&](int64_t n) {
    return accumulatorRange(x.zp, K, [&](int64_t k) {
      return static_cast<int64_t>(weightAt(n, k));
    });
  });
  return matrixProduct(op, true, in, o, K, N, ep, corrOff, weightAt, residual);
}

bool GraphLowering::residualRows(int t) const {
  // Its own bytes in logical order: not a flattened NHWC view (its columns
  // are pixel-major) nor a strided one (a copy would cost what the Add layer
  // costs).
  const CTensor &x = tensors[t];
  return !x.flat && !x.view;
}

int GraphLowering::foldFloatResidual(Operation *op, Value out, bool rows,
                                     Epilogue &ep, Value &exit) {
  exit = out;
  auto [add, other] = residualAddOf<onnx::AddOp>(op, out, [](Type t) {
    auto r = dyn_cast<RankedTensorType>(t);
    return r && r.getElementType().isF32();
  });
  if (!add)
    return -1;
  int t = tensorOf(other);
  if (rows && !residualRows(t))
    return -1;
  int residual = rows ? asRows(t, op->getLoc())
                      : inLayout(t, plan::Layout::NHWC, op->getLoc());
  ep.hasResidual = true;
  ep.resF32 = true;
  ep.resCS = rowStride(tensors[residual]);
  folded.insert(add);
  exit = add.getC();
  return residual;
}

LogicalResult GraphLowering::lowerFloatConv(onnx::ConvOp op) {
  auto inType = cast<RankedTensorType>(op.getX().getType());
  if (inType.getRank() != 4 || !inType.getElementType().isF32())
    return op.emitError("qatc compiles 2-D f32 convolutions only");
  int in = inLayout(tensorOf(op.getX()), plan::Layout::NHWC, op.getLoc());
  auto w = constantOf(op.getW());
  if (!w)
    return op.emitError("the weight of a compiled convolution must be a "
                        "constant");
  std::vector<float> wf = floatsOf(*w);
  auto ws = cast<ShapedType>(op.getW().getType()).getShape();
  Epilogue ep;
  // A residual Add after the convolution (ResNet's blocks) joins its
  // epilogue, before the chain after the Add (its Relu): the sum rounds as
  // the Add layer rounded it.
  Value exit;
  int residual = foldFloatResidual(op, op.getY(), false, ep, exit);
  int o = epilogueOutput(exit, plan::Layout::NHWC, 1, ep);
  if (residual >= 0)
    ep.chainName = " +add" + ep.chainName;
  if (op.getB() &&
      failed(addChannelConstant(op, op.getB(), "bias", ws[0], ep.biasOff)))
    return failure();
  return lowerConv(op, false, in, o, ws, op.getGroup(), op.getStrides(),
                   op.getPads(), op.getDilations(), ep, -1, residual,
                   [wf](int64_t i) -> double { return wf[i]; });
}

LogicalResult GraphLowering::lowerFloatMatMul(onnx::MatMulOp op) {
  if (cast<ShapedType>(op.getA().getType()).getRank() < 2 ||
      cast<ShapedType>(op.getB().getType()).getRank() < 2)
    return op.emitError("qatc compiles MatMul of operands of rank 2 or more "
                        "(a vector operand is not compiled yet)");
  auto w = constantOf(op.getB());
  auto bs = cast<ShapedType>(op.getB().getType()).getShape();
  if (!w || bs.size() != 2) {
    auto outShape = cast<ShapedType>(op.getY().getType()).getShape();
    if (packable(tensorOf(op.getA()), tensorOf(op.getB()), outShape)) {
      // The chain after the product (attention's scale) runs in its
      // epilogue.
      Epilogue ep;
      int o = epilogueOutput(op.getY(), plan::Layout::Plain,
                             outShape.size() - 1, ep);
      return packedProduct(op, tensorOf(op.getA()), tensorOf(op.getB()), false,
                           o, 1.f, ep);
    }
    int o = resultTensor(op.getY(), plan::Layout::Plain);
    std::optional<std::pair<float, float>> act = foldActivation(op.getY(), o);
    std::optional<qat::ClampAttr> clamp;
    if (act)
      clamp = qat::ClampAttr::get(op.getContext(), act->first, act->second);
    return batchedProduct(op, tensorOf(op.getA()), tensorOf(op.getB()), false,
                          o, 1.f, -1, -1, clamp);
  }
  if (cast<ShapedType>(op.getA().getType()).getRank() < 2)
    return op.emitError("qatc compiles MatMul with a matrix left-hand side");
  std::vector<float> wf = floatsOf(*w);
  int in = asRows(tensorOf(op.getA()), op.getLoc());
  int64_t K = bs[0], N = bs[1];
  Epilogue ep;
  int64_t rank = cast<ShapedType>(op.getY().getType()).getRank();
  Value exit;
  int residual = foldFloatResidual(op, op.getY(), true, ep, exit);
  int o = epilogueOutput(exit, plan::Layout::Plain, rank - 1, ep);
  if (residual >= 0)
    ep.chainName = " +add" + ep.chainName;
  return matrixProduct(
      op, false, in, o, K, N, ep, -1,
      [wf, N](int64_t n, int64_t k) -> double { return wf[k * N + n]; },
      residual);
}

LogicalResult GraphLowering::lowerGemm(onnx::GemmOp op) {
  float alpha = op.getAlpha().convertToFloat(),
        beta = op.getBeta().convertToFloat();
  int a = tensorOf(op.getA());
  if (op.getTransA()) {
    // A transposed view; the product reads it through a copy.
    CTensor v = tensors[a];
    std::vector<int64_t> st = stridesOf(v);
    std::swap(st[0], st[1]);
    std::swap(v.desc.shape[0], v.desc.shape[1]);
    v.vbase = v.view ? v.vbase : 0;
    v.view = true;
    v.vstrides = st;
    v.flat = false;
    v.manifestIndex = -1;
    tensors.push_back(v);
    a = tensors.size() - 1;
  }
  auto bs = cast<ShapedType>(op.getB().getType()).getShape();
  bool tr = op.getTransB();
  int64_t K = tr ? bs[1] : bs[0], N = tr ? bs[0] : bs[1];
  std::vector<float> bias;
  if (op.getC()) {
    auto c = constantOf(op.getC());
    if (!c)
      return op.emitError("qatc compiles Gemm with a constant C only");
    // Per column: a scalar, [N] or [1, N] (a [M, 1] C is per row).
    auto cs = cast<ShapedType>(op.getC().getType()).getShape();
    if (cs.size() > 2 || (cs.size() == 2 && cs[0] != 1))
      return op.emitError("qatc compiles Gemm with a per-column C only");
    bias = floatsOf(*c);
    if (bias.size() == 1)
      bias.assign(N, bias[0]);
    if (static_cast<int64_t>(bias.size()) != N)
      return op.emitError("qatc compiles Gemm with a per-column C only");
    for (float &x : bias)
      x *= beta;
  }
  Epilogue ep;
  if (!bias.empty())
    ep.biasOff = addChannels(bias, N);
  auto w = constantOf(op.getB());
  if (!w) {
    int o = resultTensor(op.getY(), plan::Layout::Plain);
    std::optional<std::pair<float, float>> act = foldActivation(op.getY(), o);
    std::optional<qat::ClampAttr> clamp;
    if (act)
      clamp = qat::ClampAttr::get(op.getContext(), act->first, act->second);
    return batchedProduct(op, a, tensorOf(op.getB()), tr, o, alpha, -1,
                          ep.biasOff, clamp);
  }
  std::vector<float> wf = floatsOf(*w);
  // alpha folds into the weights.
  if (alpha != 1.f)
    for (float &x : wf)
      x *= alpha;
  int in = asRows(a, op.getLoc());
  Value exit;
  int residual = foldFloatResidual(op, op.getY(), true, ep, exit);
  int o = epilogueOutput(exit, plan::Layout::Plain, 1, ep);
  if (residual >= 0)
    ep.chainName = " +add" + ep.chainName;
  return matrixProduct(
      op, false, in, o, K, N, ep, -1,
      [wf, tr, K, N](int64_t n, int64_t k) -> double {
        return wf[tr ? n * K + k : k * N + n];
      },
      residual);
}

std::optional<LogicalResult> GraphLowering::lowerConvFamily(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case<qat::ConvOp>([&](auto o) { return lowerQatConv(o); })
      .Case<qat::MatMulOp>([&](auto o) { return lowerQatMatMul(o); })
      .Case<onnx::ConvOp>([&](auto o) { return lowerFloatConv(o); })
      .Case<onnx::GemmOp>([&](auto o) { return lowerGemm(o); })
      .Case<onnx::MatMulOp>([&](auto o) { return lowerFloatMatMul(o); })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace qatc::codegen::lowering
