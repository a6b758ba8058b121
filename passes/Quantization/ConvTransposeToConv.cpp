//===- ConvTransposeToConv.cpp - ConvTranspose as Pad + Conv --------------===//
//
// y = ConvTranspose(x, W) with strides s, dilations d, pads (b, e) and
// output_padding o is, per spatial axis of kernel size k,
//
//   z = x with s - 1 zeros between neighbours       (length (n - 1) s + 1)
//   z = pad(z, d (k - 1) - b, d (k - 1) - e + o)     (negative: crop)
//   y = Conv(z, W') with stride 1 and dilation d,
//
// where W'[g * Cout_g + o][i][a][c] = W[g * Cin_g + i][o][k - 1 - a][k - 1 - c]
// (kernel flipped, input and output channels swapped within each group).
// Zero insertion is Reshape [N,C,H,1,W,1] -> Pad (end s - 1) -> Reshape
// [N,C,H s,W s], ops that only move values, so Q/DQ propagate across them
// exactly (a zero pad quantizes to the zero point) and the Conv fuses into
// qat.conv like any other. The weight is permuted at its constant, through
// its QuantizeLinear / DequantizeLinear nodes, whose per-channel axis 1
// becomes axis 0.
//
// When the kernel equals the stride and nothing is padded (U-Net and
// detection-head upsampling), every output pixel reads exactly one input
// pixel: y = DepthToSpace_CRD(Conv1x1(x, W'')) with
// W''[(g Cout_g + o) k k + i k + j][c] = W[g Cin_g + c][o][i][j], no zeros.
//
//===----------------------------------------------------------------------===//

#include "QuantUtils.h"
#include "qatc/Quantization/Passes.h"
#include "qatc/Reference/Evaluator.h"

namespace qatc::quantization {
#define GEN_PASS_DEF_QATCONVTRANSPOSETOCONV
#include "qatc/Quantization/Passes.h.inc"
} // namespace qatc::quantization

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

namespace {

/// The bytes of `t` reordered: element `dst` of the result is element
/// `srcOf(dst)` of `t`.
std::vector<char> permuteBytes(const ref::Tensor &t, int64_t count,
                               llvm::function_ref<int64_t(int64_t)> srcOf) {
  size_t width = ref::dtypeSize(t.dtype());
  std::vector<char> out(count * width);
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(out.data() + i * width, t.bytes() + srcOf(i) * width, width);
  return out;
}

struct QatConvTransposeToConvPass
    : public qatc::quantization::impl::QatConvTransposeToConvBase<
          QatConvTransposeToConvPass> {
  void runOnOperation() override {
    SmallVector<onnx::ConvTransposeOp> all;
    getOperation().walk([&](onnx::ConvTransposeOp ct) { all.push_back(ct); });
    for (onnx::ConvTransposeOp ct : all)
      rewrite(ct);
    eraseUnusedConstants(getOperation());
  }

  /// A constant `like`'s element type and `shape` holding `bytes`.
  Value constant(OpBuilder &b, Location loc, Type elt, ArrayRef<int64_t> shape,
                 ArrayRef<char> bytes, StringRef hint) {
    auto type = RankedTensorType::get(shape, elt);
    return b.create<onnx::ConstantOp>(
        loc, type, cast<TypedAttr>(makeElements(type, bytes, hint)));
  }

  /// Rebuilds the weight `w` (a constant, possibly behind QuantizeLinear /
  /// DequantizeLinear) as the equivalent Conv's weight; null if `w` is
  /// anything else.
  Value convWeight(OpBuilder &b, onnx::ConvTransposeOp ct, int64_t group,
                   bool shuffle, SmallVectorImpl<Operation *> &chain) {
    Value v = ct.getW();
    onnx::ConstantOp root;
    while (!root) {
      Operation *def = v.getDefiningOp();
      if (auto c = dyn_cast_or_null<onnx::ConstantOp>(def))
        root = c;
      else if (isa_and_nonnull<onnx::QuantizeLinearOp,
                               onnx::DequantizeLinearOp>(def))
        chain.push_back(def), v = def->getOperand(0);
      else
        return {};
    }
    auto shape = cast<RankedTensorType>(root.getType()).getShape();
    int64_t cin = shape[0], cog = shape[1], kh = shape[2], kw = shape[3];
    int64_t cig = cin / group, cout = cog * group;
    // Conv output channels per ConvTranspose output channel.
    int64_t rep = shuffle ? kh * kw : 1;
    SmallVector<int64_t> newShape =
        shuffle ? SmallVector<int64_t>{cout * rep, cig, 1, 1}
                : SmallVector<int64_t>{cout, cig, kh, kw};
    Type elt = cast<RankedTensorType>(root.getType()).getElementType();
    auto values = ref::constantValues(cast<ElementsAttr>(root.getValue()), elt);
    if (!values)
      return {};
    std::vector<char> bytes = permuteBytes(
        *values, cout * cig * kh * kw, [&](int64_t dst) -> int64_t {
          if (shuffle) {
            // W'[(g cog + o) kh kw + i kw + j][ci] = W[g cig + ci][o][i][j].
            int64_t ci = dst % cig, ocij = dst / cig;
            int64_t ij = ocij % rep, oc = ocij / rep;
            int64_t g = oc / cog, o = oc % cog;
            return ((g * cig + ci) * cog + o) * rep + ij;
          }
          // W'[g cog + o][i][a][c] = W[g cig + i][o][kh - 1 - a][kw - 1 - c].
          int64_t c = dst % kw, a = (dst / kw) % kh,
                  i = (dst / (kw * kh)) % cig, oc = dst / (kw * kh * cig);
          int64_t g = oc / cog, o = oc % cog;
          return (((g * cig + i) * cog + o) * kh + (kh - 1 - a)) * kw +
                 (kw - 1 - c);
        });
    Location loc = root.getLoc();
    Value cur = constant(b, loc, elt, newShape, bytes,
                         getNodeName(ct) + "_conv_weight");
    // The Q/DQ nodes again, on the new shape; per-channel parameters (one
    // per output channel of a group) apply to every group and every conv
    // channel made from that output channel, along axis 0.
    for (Operation *op : llvm::reverse(chain)) {
      SmallVector<Value> operands = {cur};
      bool perAxis = false;
      for (unsigned i = 1; i < op->getNumOperands(); ++i) {
        Value p = op->getOperand(i);
        auto pt = cast<RankedTensorType>(p.getType());
        if (pt.getNumElements() <= 1) {
          operands.push_back(p);
          continue;
        }
        perAxis = true;
        auto pv = constantOf(p);
        if (!pv)
          return {};
        std::vector<char> tiled = permuteBytes(
            *pv, cout * rep, [&](int64_t dst) { return (dst / rep) % cog; });
        operands.push_back(constant(b, p.getLoc(), pt.getElementType(),
                                    {cout * rep}, tiled,
                                    getNodeName(ct) + "_conv_qparam"));
      }
      Type resElt =
          cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
      OperationState state(op->getLoc(), op->getName());
      state.addOperands(operands);
      NamedAttrList attrs(op->getAttrs());
      if (perAxis)
        attrs.set("axis", b.getI64IntegerAttr(0));
      state.addAttributes(attrs);
      state.addTypes(RankedTensorType::get(newShape, resElt));
      cur = b.create(state)->getResult(0);
    }
    return cur;
  }

  /// The values of a constant operand.
  static std::optional<ref::Tensor> constantOf(Value v) {
    auto c = v.getDefiningOp<onnx::ConstantOp>();
    if (!c)
      return std::nullopt;
    return ref::constantValues(cast<ElementsAttr>(c.getValue()),
                               cast<ShapedType>(v.getType()).getElementType());
  }

  void rewrite(onnx::ConvTransposeOp ct) {
    auto xType = cast<RankedTensorType>(ct.getX().getType());
    auto yType = cast<RankedTensorType>(ct.getType());
    if (xType.getRank() != 4)
      return; // 1-D and 3-D ones are refused by name later
    ArrayRef<int64_t> x = xType.getShape(), k = ct.getKernelShape(),
                      s = ct.getStrides(), d = ct.getDilations(),
                      p = ct.getPads(), op = ct.getOutputPadding();
    int64_t group = static_cast<int64_t>(ct.getGroup());
    // The border pads; the reshaped tensor ends with s - 1 zeros past the
    // last element.
    int64_t bh = d[0] * (k[0] - 1) - p[0], bw = d[1] * (k[1] - 1) - p[1];
    int64_t eh = d[0] * (k[0] - 1) - p[2] + op[0] - (s[0] - 1);
    int64_t ew = d[1] * (k[1] - 1) - p[3] + op[1] - (s[1] - 1);
    // Never guess: the convolution must give the ConvTranspose's shape.
    int64_t oh = x[2] * s[0] + bh + eh - d[0] * (k[0] - 1);
    int64_t ow = x[3] * s[1] + bw + ew - d[1] * (k[1] - 1);
    if (oh != yType.getDimSize(2) || ow != yType.getDimSize(3) ||
        x[2] * s[0] + bh + eh <= 0 || x[3] * s[1] + bw + ew <= 0)
      return;
    OpBuilder b(ct);
    Location invented =
        FusedLoc::get(b.getContext(), {ct.getLoc()},
                      b.getStringAttr("qat-conv-transpose-to-conv"));
    // Kernel == stride, no padding: every output pixel gets exactly one
    // input pixel, so a 1x1 Conv to Cout * k * k channels and DepthToSpace
    // (CRD) compute it without the inserted zeros (k * k times less work).
    bool shuffle = k[0] == s[0] && k[1] == s[1] && s[0] == s[1] &&
                   llvm::all_of(p, [](int64_t v) { return v == 0; }) &&
                   op[0] == 0 && op[1] == 0 && d[0] == 1 && d[1] == 1;
    std::optional<ref::Tensor> bias;
    if (shuffle && ct.getB()) {
      bias = constantOf(ct.getB());
      shuffle = bias && bias->dtype() == ref::DType::F32;
    }
    // The old weight chain (ConvTranspose side first), erased once unused.
    SmallVector<Operation *> chain;
    Value w = convWeight(b, ct, group, shuffle, chain);
    if (!w)
      return;
    if (shuffle) {
      int64_t rep = k[0] * k[1], cout = yType.getDimSize(1);
      Value bias2;
      if (bias) {
        std::vector<char> bytes = permuteBytes(
            *bias, cout * rep, [&](int64_t dst) { return dst / rep; });
        bias2 = constant(b, invented, b.getF32Type(), {cout * rep}, bytes,
                         getNodeName(ct) + "_conv_bias");
      }
      SmallVector<int64_t> ones = {1, 1};
      Value conv = strideOneConv(b, ct, ct.getX(), w, bias2, ones, ones);
      auto d2s = b.create<onnx::DepthToSpaceOp>(
          invented, conv, b.getI64IntegerAttr(k[0]), b.getStringAttr("CRD"));
      return replace(ct, d2s, chain);
    }
    Type elt = xType.getElementType();
    Value z = ct.getX();
    int64_t n = x[0], c = x[1], h = x[2], wd = x[3];
    if (s[0] > 1 || s[1] > 1) {
      auto r6 = RankedTensorType::get({n, c, h, 1, wd, 1}, elt);
      z = b.create<onnx::ReshapeOp>(invented, r6, z);
      SmallVector<int64_t> pads = {0, 0, 0, 0,        0, 0,
                                   0, 0, 0, s[0] - 1, 0, s[1] - 1};
      z = b.create<onnx::PadOp>(invented, z, b.getDenseI64ArrayAttr(pads),
                                b.getStringAttr("constant"),
                                b.getF64FloatAttr(0.0));
      auto r4 = RankedTensorType::get({n, c, h * s[0], wd * s[1]}, elt);
      z = b.create<onnx::ReshapeOp>(invented, r4, z);
    }
    if (bh || bw || eh || ew)
      z = b.create<onnx::PadOp>(
          invented, z, b.getDenseI64ArrayAttr({0, 0, bh, bw, 0, 0, eh, ew}),
          b.getStringAttr("constant"), b.getF64FloatAttr(0.0));
    Value conv = strideOneConv(b, ct, z, w, ct.getB(), k, d);
    replace(ct, conv.getDefiningOp(), chain);
  }

  /// The unpadded, stride-1 Conv that replaces `ct` (at its location).
  Value strideOneConv(OpBuilder &b, onnx::ConvTransposeOp ct, Value x, Value w,
                      Value bias, ArrayRef<int64_t> kernel,
                      ArrayRef<int64_t> dilations) {
    SmallVector<int64_t> ones = {1, 1}, zeros = {0, 0, 0, 0};
    return b.create<onnx::ConvOp>(
        ct.getLoc(), x, w, bias, b.getDenseI64ArrayAttr(kernel),
        b.getDenseI64ArrayAttr(ones), b.getDenseI64ArrayAttr(zeros),
        b.getDenseI64ArrayAttr(dilations), ct.getGroupAttr());
  }

  /// Replaces `ct` by the result of `last` (which takes its tensor name)
  /// and erases the old weight chain where nothing else reads it.
  void replace(onnx::ConvTransposeOp ct, Operation *last,
               ArrayRef<Operation *> chain) {
    if (auto names = ct->getAttr(kOutputNamesAttr))
      last->setAttr(kOutputNamesAttr, names);
    ct.getResult().replaceAllUsesWith(last->getResult(0));
    ct.erase();
    for (Operation *op : chain)
      if (op->use_empty())
        op->erase();
  }
};

} // namespace
