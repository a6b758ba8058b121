//===- OneStepRequant.cpp - requantization in one FMA, proven exact -------===//
//
// Built with -ffp-contract=off: Requant::exact must round each product and
// sum on its own, as the two-step epilogue and the reference do.
//
//===----------------------------------------------------------------------===//

#include "qatc/Codegen/OneStepRequant.h"

#include <algorithm>
#include <cmath>
#include <tuple>

using namespace qatc::codegen;

std::pair<float, float> Requant::quotientBounds() const {
  float lo = static_cast<float>(qmin - zp), hi = static_cast<float>(qmax - zp);
  if (hasAct && actLo <= actHi) {
    // The reference clamps y before dividing; the quotient is monotone, so
    // that is a clamp of the quotient to these.
    lo = std::max(lo, actLo / outScale);
    hi = std::min(hi, actHi / outScale);
  }
  return {lo, hi};
}

std::pair<int64_t, int64_t> Requant::bounds() const {
  auto [lo, hi] = quotientBounds();
  return {zp + static_cast<int64_t>(std::nearbyint(lo)),
          zp + static_cast<int64_t>(std::nearbyint(hi))};
}

int64_t Requant::exact(int64_t acc) const {
  float y = static_cast<float>(acc) * mult;
  if (hasScale)
    y = y * scale;
  if (hasBias)
    y = y + bias;
  auto [lo, hi] = quotientBounds();
  float q = std::min(std::max(y / outScale, lo), hi);
  return zp + static_cast<int64_t>(std::nearbyint(q));
}

int64_t OneStepRequant::raw(int64_t acc) const {
  float x = std::fma(static_cast<float>(acc), m, b);
  if (clampLo)
    x = std::max(x, lo);
  if (clampHi)
    x = std::min(x, hi);
  return zp + static_cast<int64_t>(std::nearbyint(x));
}

int64_t OneStepRequant::eval(int64_t acc) const {
  int64_t v = raw(acc);
  for (auto [a, d] : exceptions)
    if (a == acc)
      v += d;
  return std::clamp(v, typeLo, typeHi);
}

bool OneStepRequant::clampsOnBytes(int64_t accMin, int64_t accMax) const {
  if (leavesI32(accMin, accMax))
    return false;
  for (auto [a, d] : exceptions) {
    float x = std::nearbyint(std::fma(static_cast<float>(a), m, b));
    if ((clampLo && x < lo) || (clampHi && x > hi))
      return false;
  }
  return true;
}

bool OneStepRequant::leavesI32(int64_t accMin, int64_t accMax) const {
  double reach = std::max(std::abs(static_cast<double>(accMin)),
                          std::abs(static_cast<double>(accMax))) *
                     m * 1.01 +
                 std::abs(b) + 2;
  return reach >= 0x1p30;
}

int64_t OneStepRequant::evalOnBytes(int64_t acc) const {
  int64_t v = zp + static_cast<int64_t>(
                       std::nearbyint(std::fma(static_cast<float>(acc), m, b)));
  for (auto [a, d] : exceptions)
    if (a == acc)
      v += d;
  v = std::clamp(v, typeLo, typeHi);
  if (clampLo)
    v = std::max(v, static_cast<int64_t>(lo) + zp);
  if (clampHi)
    v = std::min(v, static_cast<int64_t>(hi) + zp);
  return v;
}

namespace {

/// `v` moved `k` ulps up (k > 0) or down.
float ulpsFrom(float v, int k) {
  for (; k > 0; --k)
    v = std::nextafter(v, INFINITY);
  for (; k < 0; ++k)
    v = std::nextafter(v, -INFINITY);
  return v;
}

/// The smallest a in [lo, hi] with fn(a) >= v, or hi + 1; fn is
/// non-decreasing. `guess` is where the step is expected: a gallop from it
/// brackets the step, then a bisection finds it.
template <typename Fn>
int64_t firstAtLeast(Fn &&fn, int64_t v, int64_t lo, int64_t hi, double guess) {
  // Invariant: fn(below) < v or below = lo - 1; fn(above) >= v or above =
  // hi + 1.
  int64_t g = static_cast<int64_t>(
      std::clamp(guess, static_cast<double>(lo), static_cast<double>(hi)));
  int64_t below, above, step = 1;
  if (fn(g) >= v) {
    above = g;
    below = std::max(lo - 1, g - 1);
    while (below >= lo && fn(below) >= v) {
      above = below;
      step *= 2;
      below = std::max(lo - 1, above - step);
    }
  } else {
    below = g;
    above = std::min(hi + 1, g + 1);
    while (above <= hi && fn(above) < v) {
      below = above;
      step *= 2;
      above = std::min(hi + 1, below + step);
    }
  }
  while (above - below > 1) {
    int64_t mid = below + (above - below) / 2;
    (fn(mid) >= v ? above : below) = mid;
  }
  return above;
}

/// `c`'s exceptions against `r` over [accMin, accMax], or false when more
/// than `maxExceptions` are needed.
bool collectExceptions(const Requant &r, OneStepRequant &c, int64_t accMin,
                       int64_t accMax, size_t maxExceptions) {
  c.exceptions.clear();
  auto exact = [&](int64_t a) { return r.exact(a); };
  auto one = [&](int64_t a) {
    return std::clamp(c.raw(a), c.typeLo, c.typeHi);
  };
  int64_t vLo = std::min(exact(accMin), one(accMin)),
          vHi = std::max(exact(accMax), one(accMax));
  for (int64_t v = vLo + 1; v <= vHi; ++v) {
    // Where both cross v - 1/2: the line's estimate.
    double guess = (static_cast<double>(v - c.zp) - 0.5 - c.b) / c.m;
    int64_t t0 = firstAtLeast(exact, v, accMin, accMax, guess),
            t1 = firstAtLeast(one, v, accMin, accMax, guess);
    for (int64_t a = std::min(t0, t1); a < std::max(t0, t1); ++a) {
      if (std::any_of(c.exceptions.begin(), c.exceptions.end(),
                      [&](auto e) { return e.first == a; }))
        continue;
      if (c.exceptions.size() == maxExceptions)
        return false;
      c.exceptions.push_back(
          {static_cast<int32_t>(a), static_cast<int32_t>(exact(a) - c.raw(a))});
    }
  }
  return true;
}

/// The constants rounded once, the bounds and the stored type of `r`;
/// nullopt where the fold does not apply.
std::optional<OneStepRequant> baseOf(const Requant &r, int64_t accMin,
                                     int64_t accMax) {
  double slope = static_cast<double>(r.mult) * (r.hasScale ? r.scale : 1.f);
  double bias = r.hasBias ? r.bias : 0.f;
  if (!(slope > 0) || !std::isfinite(slope) || !std::isfinite(bias) ||
      !(r.outScale > 0) || !std::isfinite(r.outScale) || accMin > accMax ||
      accMin < INT32_MIN || accMax > INT32_MAX)
    return std::nullopt;
  auto [lo, hi] = r.bounds();
  if (lo > hi)
    return std::nullopt;
  OneStepRequant c;
  c.m = static_cast<float>(slope / r.outScale);
  c.b = static_cast<float>(bias / r.outScale);
  c.zp = r.zp;
  if (!(c.m > 0) || !std::isfinite(c.m) || !std::isfinite(c.b))
    return std::nullopt;
  c.typeLo = r.qmin < 0 ? -128 : 0;
  c.typeHi = r.qmin < 0 ? 127 : 255;
  c.lo = static_cast<float>(lo - r.zp);
  c.hi = static_cast<float>(hi - r.zp);
  return c;
}

/// The clamps `c` (a base) needs over [accMin, accMax]
/// (OneStepRequant::clamps).
std::pair<bool, bool> clampsOf(const OneStepRequant &c, int64_t accMin,
                               int64_t accMax) {
  bool wide = c.leavesI32(accMin, accMax);
  return {wide || c.lo + c.zp > c.typeLo, wide || c.hi + c.zp < c.typeHi};
}

/// A line through every step of `r` over [accMin, accMax]: constants for
/// `base` with no exception, or nullopt. Level v (minus the zero point) is
/// first reached at T_v, so the line must pass below v - 1/2 at T_v - 1
/// and above it at T_v: b >= v - 1/2 - m T_v and b <= v - 1/2 - m (T_v -
/// 1). For a slope m the feasible b form an interval whose width, the
/// least upper bound minus the greatest lower one, is concave in m: a
/// ternary search finds the widest, and the candidate rounded to f32 (and
/// its neighbours) is checked as any other.
std::optional<OneStepRequant> fitLine(const Requant &r, OneStepRequant base,
                                      int64_t accMin, int64_t accMax) {
  auto exact = [&](int64_t a) { return r.exact(a); };
  int64_t vLo = exact(accMin), vHi = exact(accMax);
  if (vHi - vLo > 4096)
    return std::nullopt;
  // (A, t): b >= A - m t (lower) or b <= A - m t (upper).
  std::vector<std::pair<double, double>> lower, upper;
  for (int64_t v = vLo + 1; v <= vHi; ++v) {
    int64_t level = v - base.zp;
    double a = static_cast<double>(level) - 0.5;
    double guess = (a - base.b) / base.m;
    int64_t t = firstAtLeast(exact, v, accMin, accMax, guess);
    if (t > accMax)
      break;
    // The FMA rounds the line to f32 (h: half an ulp at the half) before
    // the rounding to an integer, whose tie goes to the even level: at
    // T_v the f32 may land on the half where v is even, and must pass it
    // where v is odd; at T_v - 1 the reverse.
    float af = static_cast<float>(a);
    double h = (static_cast<double>(std::nextafter(std::abs(af), INFINITY)) -
                std::abs(af)) /
               2;
    bool even = level % 2 == 0;
    double strict = h * 1.001, loose = h * 0.999;
    lower.push_back({even ? a - loose : a + strict, static_cast<double>(t)});
    upper.push_back(
        {even ? a - strict : a + loose, static_cast<double>(t - 1)});
  }
  if (lower.empty())
    return std::nullopt;
  auto bounds = [&](double m) {
    double lo = -INFINITY, hi = INFINITY;
    for (auto [a, t] : lower)
      lo = std::max(lo, a - m * t);
    for (auto [a, t] : upper)
      hi = std::min(hi, a - m * t);
    return std::pair{lo, hi};
  };
  auto width = [&](double m) {
    auto [lo, hi] = bounds(m);
    return hi - lo;
  };
  double mLo = base.m * (1 - 1e-4), mHi = base.m * (1 + 1e-4);
  for (int i = 0; i < 100; ++i) {
    double m1 = mLo + (mHi - mLo) / 3, m2 = mHi - (mHi - mLo) / 3;
    if (width(m1) < width(m2))
      mLo = m1;
    else
      mHi = m2;
  }
  double m = (mLo + mHi) / 2;
  auto [lo, hi] = bounds(m);
  if (!(hi > lo))
    return std::nullopt;
  // The slope rounded to f32 moves the line by up to T_v ulps of m: the
  // b interval is taken again for each f32 slope near the best.
  const float mf = static_cast<float>(m);
  for (int dm : {0, 1, -1, 2, -2, 3, -3, 4, -4}) {
    float mc = ulpsFrom(mf, dm);
    auto [bLo, bHi] = bounds(mc);
    if (!(bHi > bLo))
      continue;
    float bf = static_cast<float>((bLo + bHi) / 2);
    for (int db : {0, 1, -1}) {
      OneStepRequant c = base;
      c.m = mc;
      c.b = ulpsFrom(bf, db);
      if (c.m > 0 && collectExceptions(r, c, accMin, accMax, 0))
        return c;
    }
  }
  return std::nullopt;
}

} // namespace

std::pair<bool, bool> OneStepRequant::clamps(const Requant &r, int64_t accMin,
                                             int64_t accMax) {
  std::optional<OneStepRequant> c = baseOf(r, accMin, accMax);
  return c ? clampsOf(*c, accMin, accMax) : std::pair{true, true};
}

std::optional<OneStepRequant>
OneStepRequant::find(const Requant &r, int64_t accMin, int64_t accMax,
                     size_t maxExceptions, std::pair<bool, bool> given) {
  std::optional<OneStepRequant> base = baseOf(r, accMin, accMax);
  if (!base)
    return std::nullopt;
  auto [needLo, needHi] = clampsOf(*base, accMin, accMax);
  if ((needLo && !given.first) || (needHi && !given.second))
    return std::nullopt;
  std::tie(base->clampLo, base->clampHi) = given;
  // The constants rounded once, then a few ulps around them: where the
  // two-step rounding departs from the line, a neighbour may follow it.
  std::optional<OneStepRequant> best;
  for (int dm : {0, 1, -1, 2, -2})
    for (int db : {0, 1, -1, 2, -2, 3, -3}) {
      if (best && best->exceptions.empty())
        return best;
      OneStepRequant c = *base;
      c.m = ulpsFrom(base->m, dm);
      c.b = ulpsFrom(base->b, db);
      size_t limit = best ? best->exceptions.size() - 1 : maxExceptions;
      if (!collectExceptions(r, c, accMin, accMax, limit))
        continue;
      best = c;
    }
  if (!best || !best->exceptions.empty())
    if (std::optional<OneStepRequant> line = fitLine(r, *base, accMin, accMax))
      return line;
  return best;
}

int64_t AddRequant::exact(int64_t u, int64_t r) const {
  float y1 = static_cast<float>(u) * s1;
  float y2 = static_cast<float>(r - rZp) * s2;
  float y = y1 + y2;
  if (hasAct)
    y = std::min(std::max(y, actLo), actHi);
  float lo = static_cast<float>(qmin - zp), hi = static_cast<float>(qmax - zp);
  float q = std::min(std::max(y / outScale, lo), hi);
  return zp + static_cast<int64_t>(std::nearbyint(q));
}

int64_t OneStepAdd::eval(int64_t u, int64_t r) const {
  float t =
      std::fma(static_cast<float>(u), a, std::fma(static_cast<float>(r), b, c));
  if (clampLo)
    t = std::max(t, lo);
  if (clampHi)
    t = std::min(t, hi);
  return std::clamp(zp + static_cast<int64_t>(std::nearbyint(t)), typeLo,
                    typeHi);
}

std::optional<OneStepAdd> OneStepAdd::find(const AddRequant &r) {
  // A degenerate activation (min above max) is applied as it stands by the
  // two-step form, not as `exact` models it.
  if (!(r.s1 > 0) || !(r.s2 > 0) || !(r.outScale > 0) || !std::isfinite(r.s1) ||
      !std::isfinite(r.s2) || !std::isfinite(r.outScale) || r.uLo > r.uHi ||
      r.rLo > r.rHi || r.qmin > r.qmax || (r.hasAct && !(r.actLo <= r.actHi)))
    return std::nullopt;
  OneStepAdd base;
  base.a = static_cast<float>(static_cast<double>(r.s1) / r.outScale);
  base.b = static_cast<float>(static_cast<double>(r.s2) / r.outScale);
  base.c = static_cast<float>(-static_cast<double>(r.rZp) * base.b);
  if (!(base.a > 0) || !(base.b > 0) || !std::isfinite(base.a) ||
      !std::isfinite(base.b) || !std::isfinite(base.c))
    return std::nullopt;
  base.zp = r.zp;
  base.typeLo = r.qmin < 0 ? -128 : 0;
  base.typeHi = r.qmin < 0 ? 127 : 255;
  // The activation's bounds as quotients, rounded (the clamp is of the
  // integer); the comparison below decides anyway.
  double lo = static_cast<double>(r.qmin - r.zp),
         hi = static_cast<double>(r.qmax - r.zp);
  if (r.hasAct) {
    lo = std::max(lo, std::nearbyint(static_cast<double>(
                          static_cast<float>(r.actLo / r.outScale))));
    hi = std::min(hi, std::nearbyint(static_cast<double>(
                          static_cast<float>(r.actHi / r.outScale))));
  }
  if (lo > hi)
    return std::nullopt;
  base.lo = static_cast<float>(lo);
  base.hi = static_cast<float>(hi);
  // The packs saturate to the stored type; vcvtps2dq needs the i32 range.
  double reach =
      std::max(std::abs(r.uLo), std::abs(r.uHi)) * static_cast<double>(base.a) +
      std::max(std::abs(r.rLo), std::abs(r.rHi)) * static_cast<double>(base.b) +
      std::abs(static_cast<double>(base.c)) + 2;
  bool wide = reach >= 0x1p30;
  base.clampLo = wide || lo + r.zp > base.typeLo;
  base.clampHi = wide || hi + r.zp < base.typeHi;
  base.clampsOnBytes = !wide;
  const int64_t nu = r.uHi - r.uLo + 1, nr = r.rHi - r.rLo + 1;
  if (nu * nr > (1 << 20))
    return std::nullopt;
  std::vector<int16_t> want(nu * nr);
  for (int64_t u = r.uLo; u <= r.uHi; ++u)
    for (int64_t x = r.rLo; x <= r.rHi; ++x)
      want[(u - r.uLo) * nr + (x - r.rLo)] =
          static_cast<int16_t>(r.exact(u, x));
  // Nearest first: 0, +1, -1, +2, -2 ulps of each constant.
  const int order[] = {0, 1, -1, 2, -2};
  for (int da : order)
    for (int db : order)
      for (int dc : order) {
        OneStepAdd t = base;
        t.a = ulpsFrom(base.a, da);
        t.b = ulpsFrom(base.b, db);
        if (base.c == 0 && dc)
          continue; // a zero point of 0: no constant to move
        t.c = ulpsFrom(base.c, dc);
        bool same = true;
        for (int64_t u = r.uLo; u <= r.uHi && same; ++u)
          for (int64_t x = r.rLo; x <= r.rHi && same; ++x)
            same = t.eval(u, x) == want[(u - r.uLo) * nr + (x - r.rLo)];
        if (same)
          return t;
      }
  return std::nullopt;
}
