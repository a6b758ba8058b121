//===- AmxKernels.cpp - int8 products on AMX tiles ------------------------===//
//
// Intel AMX (Sapphire Rapids and later) multiplies a tile of 16 rows of 64
// u8 by a tile of 16 dword rows of 16 s8 columns into a 16 x 16 i32 tile
// (tdpbusd: 16384 multiply-adds, one every 16 cycles, 8x the rate of
// AVX-512 vpdpbusd). An output block of 32 rows x 32 channels is four
// accumulator tiles; each K step loads two A tiles (16 rows x 64 bytes,
// strided) and two B tiles (1 KiB of packed weights each) and issues four
// tdpbusd.
//
// The tile instructions are inline assembly on fixed tile registers. MLIR
// 19's LLVM dialect has no x86_amx type, and its amx dialect's tiles cannot
// be carried through a loop (the translation gives a phi of arrays against
// x86_amx); LLVM allocates no tile register when no AMX intrinsic is
// called, so from ldtilecfg to tilerelease the tiles belong to these
// statements. Every statement has side effects, so LLVM keeps their order,
// and the loads and stores say they touch memory.
//
// Accumulators start as the zero-point terms (a tile load with stride 0
// repeats the 16 channels' row) and leave through a 4 KiB stack buffer
// into the shared vector epilogue (emitEpilogue), four rows at a time.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>

using namespace mlir;
using namespace qatc::codegen;

namespace {

void asmStatement(KB &k, const std::string &text, StringRef constraints,
                  ValueRange operands) {
  k.b.create<LLVM::InlineAsmOp>(k.loc, TypeRange{}, operands, text, constraints,
                                /*has_side_effects=*/true,
                                /*is_align_stack=*/false,
                                LLVM::AsmDialectAttr{}, ArrayAttr{});
}

std::string tmm(int64_t t) { return "%tmm" + std::to_string(t); }

void tileLoad(KB &k, int64_t t, Value p, Value stride) {
  asmStatement(k, "tileloadd ($0,$1,1), " + tmm(t), "r,r,~{memory}",
               {p, stride});
}

void tileStore(KB &k, int64_t t, Value p, Value stride) {
  asmStatement(k, "tilestored " + tmm(t) + ", ($0,$1,1)", "r,r,~{memory}",
               {p, stride});
}

/// tmm[c] += tmm[a] (u8) x tmm[b] (s8), dword by dword.
void tdpbusd(KB &k, int64_t c, int64_t a, int64_t b) {
  asmStatement(k, "tdpbusd " + tmm(b) + ", " + tmm(a) + ", " + tmm(c), "", {});
}

/// Copies `n` bytes (a constant) from `src` to `dst` in 64-byte vectors, the
/// last one masked.
void copyBytes(KB &k, Value dst, Value src, int64_t n) {
  auto vt = VectorType::get({64}, k.i8);
  for (int64_t o = 0; o < n; o += 64) {
    int64_t len = std::min<int64_t>(64, n - o);
    if (len == 64) {
      k.store(k.load(vt, k.gep(src, o)), k.gep(dst, o));
      continue;
    }
    Value mask = k.prefixMask(64, k.c(len));
    Value v = k.maskedLoad(vt, k.gep(src, o), mask, k.splatI(0, 64, k.i8));
    k.maskedStore(v, k.gep(dst, o), mask);
  }
}

} // namespace

void qatc::codegen::emitAmxConv(KB &k, const AmxSpec &s) {
  const int64_t G = s.groupOffsets.size(), MT = s.MT, NT = s.NT;
  const int64_t blockTiles = MT * NT, bufferBytes = blockTiles * 1024;
  // The accumulators' buffer, then a row that no output pixel's results go
  // to.
  Value scratch = k.entryAlloca(bufferBytes + 256);
  Value junk = k.gep(scratch, bufferBytes);
  // The tile configuration, a constant: palette 1, every tile 16 rows of
  // 64 bytes (colsb at 16, rows at 48). Stored on the stack, not read from
  // the weights: weights a tamperer edited (the checksum recomputed) then
  // give other numbers, never an invalid configuration (ldtilecfg faults,
  // and tiles it left unconfigured fault in the next tile instruction).
  SmallVector<int8_t> cfg(64, 0);
  cfg[0] = 1;
  for (int t = 0; t < 8; ++t) {
    cfg[16 + 2 * t] = 64;
    cfg[48 + t] = 16;
  }
  auto cfgType = VectorType::get({64}, k.i8);
  Value cfgAt = k.entryAlloca(64);
  k.store(k.b.create<arith::ConstantOp>(
              k.loc, cfgType,
              DenseElementsAttr::get(cfgType, ArrayRef<int8_t>(cfg))),
          cfgAt);
  asmStatement(k, "ldtilecfg ($0)", "r,~{memory}", {cfgAt});
  const int64_t colBlocks = s.colBlocks();
  const int64_t stepBytes = NT * 1024;
  Value stride64 = k.c(64), stride0 = k.c(0), aStride = k.c(s.aStride);
  // The products of the block of rows from v0 and channel block cb (first
  // channel n0), left in tmm0-3.
  auto products = [&](Value v0, Value cb, Value n0) {
    for (int64_t i = 0; i < MT; ++i)
      for (int64_t j = 0; j < NT; ++j)
        tileLoad(k, i * NT + j,
                 k.weightsAt(s.corrOff, k.add(n0, k.c(16 * j)), 4), stride0);
    Value aBlock = k.at(s.aOff, v0, s.aStride);
    Value wBlock = k.weightsAt(s.weightOff, cb, G * s.chunks * stepBytes);
    auto step = [&](Value a, Value w) {
      for (int64_t i = 0; i < MT; ++i)
        tileLoad(k, 4 + i, k.gep(a, i * 16 * s.aStride), aStride);
      for (int64_t j = 0; j < NT; ++j)
        tileLoad(k, 6 + j, k.gep(w, j * 1024), stride64);
      for (int64_t i = 0; i < MT; ++i)
        for (int64_t j = 0; j < NT; ++j)
          tdpbusd(k, i * NT + j, 4 + i, 6 + j);
    };
    for (int64_t g = 0; g < G; ++g) {
      Value aGroup = k.gep(aBlock, s.groupOffsets[g]);
      Value wGroup = k.gep(wBlock, g * s.chunks * stepBytes);
      if (s.chunks == 1) {
        step(aGroup, wGroup);
        continue;
      }
      k.loop(k.c(0), k.c(s.chunks), 1, [&](Value kc) {
        step(k.gep(aGroup, k.mul(kc, k.c(64))),
             k.gep(wGroup, k.mul(kc, k.c(stepBytes))));
      });
    }
  };

  auto accType = VectorType::get({16}, k.i32);
  const int64_t outBytes = s.ep.outBytes(), resBytes = s.ep.resBytes();
  // The block's epilogue, its accumulators in `scratch`. `whole`: every
  // row is output pixel v0 + row (not a grid, not past the last pixel), so
  // each row's output and residual are a constant displacement from the
  // block's first: no per-row address arithmetic or select (in a 1x1
  // layer's epilogue that was about as many scalar instructions as vector
  // ones).
  auto epilogue = [&](Value v0, Value n0, bool whole) {
    Value outBase, resBase;
    if (whole) {
      outBase = k.at(s.outOff, k.add(k.mul(v0, k.c(s.outCS)), n0), outBytes);
      if (s.ep.hasResidual)
        resBase =
            k.at(s.ep.resOff, k.add(k.mul(v0, k.c(s.ep.resCS)), n0), resBytes);
    }
    // Each row's output pixel and whether there is one: virtual row v is
    // pixel v, or on a grid (n, i, j) stepped from the block's first row (a
    // division per block, not four per row).
    SmallVector<std::pair<Value, Value>> rows;
    for (int64_t r = 0; r < 16 * MT && !whole && !s.grid; ++r) {
      Value v = k.add(v0, k.c(r));
      rows.push_back({k.lt(v, k.c(s.M)), v});
    }
    if (!whole && s.grid) {
      Value j = k.rem(v0, k.c(s.Wq)), t = k.div(v0, k.c(s.Wq));
      Value i = k.rem(t, k.c(s.Hq)), n = k.div(t, k.c(s.Hq));
      auto eq = [&](Value a, int64_t b) {
        return k.b.create<arith::CmpIOp>(k.loc, arith::CmpIPredicate::eq, a,
                                         k.c(b));
      };
      for (int64_t r = 0; r < 16 * MT; ++r) {
        if (r) {
          j = k.add(j, k.c(1));
          Value nextRow = eq(j, s.Wq);
          j = k.select(nextRow, k.c(0), j);
          i = k.select(nextRow, k.add(i, k.c(1)), i);
          Value nextImage = eq(i, s.Hq);
          i = k.select(nextImage, k.c(0), i);
          n = k.select(nextImage, k.add(n, k.c(1)), n);
        }
        Value valid = k.andi(k.lt(k.add(v0, k.c(r)), k.c(s.M)),
                             k.andi(k.lt(i, k.c(s.OH)), k.lt(j, k.c(s.OW))));
        rows.push_back(
            {valid, k.add(k.mul(k.add(k.mul(n, k.c(s.OH)), i), k.c(s.OW)), j)});
      }
    }
    for (int64_t j = 0; j < NT; ++j) {
      Value c = k.add(n0, k.c(16 * j));
      Value mask = k.channelMask(c, s.OC, 16 * NT);
      for (int64_t i = 0; i < MT; ++i)
        for (int64_t r0 = 0; r0 < 16; r0 += 4) {
          SmallVector<Value> accs, outs, res;
          for (int64_t r = r0; r < r0 + 4; ++r) {
            accs.push_back(
                k.load(accType, k.gep(scratch, (i * NT + j) * 1024 + r * 64)));
            if (whole) {
              outs.push_back(
                  k.gep(outBase, ((16 * i + r) * s.outCS + 16 * j) * outBytes));
              if (s.ep.hasResidual)
                res.push_back(k.gep(
                    resBase, ((16 * i + r) * s.ep.resCS + 16 * j) * resBytes));
              continue;
            }
            auto [valid, p] = rows[16 * i + r];
            outs.push_back(k.select(
                valid,
                k.at(s.outOff, k.add(k.mul(p, k.c(s.outCS)), c), outBytes),
                junk));
            if (s.ep.hasResidual)
              res.push_back(
                  k.select(valid,
                           k.at(s.ep.resOff,
                                k.add(k.mul(p, k.c(s.ep.resCS)), c), resBytes),
                           junk));
          }
          emitEpilogue(k, s.ep, accs, c, mask, outs, res);
        }
    }
  };

  // Not software-pipelined: issuing block i + 1's tile products before
  // block i's epilogue (two accumulator buffers) measured no faster here
  // (Xeon, family 6 model 207: conv1x1_64to256_56 195 against 202 us at
  // best), though a microbenchmark overlaps tdpbusd with FMAs.
  // Shared by pixels, not blocks: a partial last row block weighs its rows
  // (on a grid, its rows whether pixels or not).
  const int64_t rows = 16 * MT, lastRows = s.M - (s.rowBlocks() - 1) * rows;
  auto [begin, end] =
      k.share(s.rowBlocks() * colBlocks, rows, colBlocks, lastRows);
  k.loop(begin, end, 1, [&](Value idx) {
    // Row blocks outside, channel blocks inside: a thread's A rows stay in
    // L1 while the weights stream from L2.
    Value cb = k.rem(idx, k.c(colBlocks));
    Value v0 = k.mul(k.div(idx, k.c(colBlocks)), k.c(16 * MT));
    Value n0 = k.mul(cb, k.c(16 * NT));
    products(v0, cb, n0);
    for (int64_t t = 0; t < blockTiles; ++t)
      tileStore(k, t, k.gep(scratch, t * 1024), stride64);
    if (s.grid || s.M % (16 * MT) == 0)
      return epilogue(v0, n0, !s.grid);
    k.ifElse(
        k.lt(k.add(v0, k.c(16 * MT - 1)), k.c(s.M)),
        [&] { epilogue(v0, n0, true); }, [&] { epilogue(v0, n0, false); });
  });
  asmStatement(k, "tilerelease", "", {});
}

void qatc::codegen::emitAmxRelayout(KB &k, const AmxRelayoutSpec &s) {
  Value padRow = k.gep(k.weights, s.padRowOff);
  if (s.im2col) {
    // One row per output pixel: each kernel row's taps, a contiguous run of
    // the input when the whole row lies inside the image.
    const bool runs = s.DW == 1 && s.inCS == s.xc && s.KW <= s.W;
    auto [begin, end] = k.share(s.N * s.OH * s.OW);
    k.loop(begin, end, 1, [&](Value p) {
      Value ow = k.rem(p, k.c(s.OW)), t = k.div(p, k.c(s.OW));
      Value oh = k.rem(t, k.c(s.OH)), n = k.div(t, k.c(s.OH));
      Value iw0 = k.sub(k.mul(ow, k.c(s.SW)), k.c(s.PL));
      Value row = k.at(s.outOff, p, s.rowBytes);
      k.loop(k.c(0), k.c(s.KH), 1, [&](Value kh) {
        Value ih =
            k.add(k.sub(k.mul(oh, k.c(s.SH)), k.c(s.PT)), k.mul(kh, k.c(s.DH)));
        Value rowOk = k.lt(ih, k.c(s.H));
        Value dst = k.gep(row, k.mul(kh, k.c(s.KW * s.xc)));
        auto perTap = [&] {
          k.loop(k.c(0), k.c(s.KW), 1, [&](Value kw) {
            Value iw = k.add(iw0, k.mul(kw, k.c(s.DW)));
            copyBytes(k, k.gep(dst, k.mul(kw, k.c(s.xc))),
                      tapPointer(k, s, n, ih, iw, rowOk, padRow), s.xc);
          });
        };
        if (!runs) {
          perTap();
          return;
        }
        // Unsigned: a negative first column fails too.
        Value inside = k.andi(rowOk, k.lt(iw0, k.c(s.W - s.KW + 1)));
        k.ifElse(
            inside,
            [&] {
              copyBytes(k, dst, pixelPointer(k, s, n, ih, iw0), s.KW * s.xc);
            },
            perTap);
      });
    });
    return;
  }
  const int64_t rows = s.N * s.Hq;
  for (size_t ph = 0; ph < s.phases.size(); ++ph) {
    auto [a, b] = s.phases[ph];
    auto [begin, end] = k.share(rows);
    k.loop(begin, end, 1, [&](Value r) {
      Value n = k.div(r, k.c(s.Hq)), i = k.rem(r, k.c(s.Hq));
      Value ih = k.sub(k.add(k.mul(i, k.c(s.SH)), k.c(a)), k.c(s.PT));
      Value rowOk = k.lt(ih, k.c(s.H));
      Value dst = k.at(s.outOff + static_cast<int64_t>(ph) * rows * s.Wq * s.xc,
                       r, s.Wq * s.xc);
      k.loop(k.c(0), k.c(s.Wq), 1, [&](Value j) {
        Value iw = k.sub(k.add(k.mul(j, k.c(s.SW)), k.c(b)), k.c(s.PL));
        copyBytes(k, k.gep(dst, k.mul(j, k.c(s.xc))),
                  tapPointer(k, s, n, ih, iw, rowOk, padRow), s.xc);
      });
    });
  }
}
