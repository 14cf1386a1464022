#include "cli/report_axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cairn::cli {

namespace {

// 1, 2 or 5 × 10^k: the round step nearest above `raw`.
double nice_step(double raw) {
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw * 0.999) return m * power;
  return 10 * power;
}

std::string compact(double v, int significant) {
  if (v == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", significant, v);
  std::string s = buf;
  // "1e-05" → "1e-5", "2e+04" → "2e4".
  if (size_t e = s.find('e'); e != std::string::npos) {
    std::string mantissa = s.substr(0, e), exponent = s.substr(e + 1);
    bool negative = exponent[0] == '-';
    exponent = exponent.substr(exponent[0] == '-' || exponent[0] == '+' ? 1 : 0);
    while (exponent.size() > 1 && exponent[0] == '0') exponent.erase(0, 1);
    s = mantissa + "e" + (negative ? "-" : "") + exponent;
  }
  return s;
}

}  // namespace

void Extent::add(double v) {
  if (!std::isfinite(v)) return;
  if (!any) {
    lo = hi = v;
    any = true;
    return;
  }
  lo = std::min(lo, v);
  hi = std::max(hi, v);
}

bool spans_decades(const Extent& e) {
  return e.any && e.lo > 0 && e.hi >= 100 * e.lo;
}

Axis::Axis(Extent values, Scale scale) : scale_(scale) {
  if (!values.any) {
    values.add(0);
    values.add(1);
  }
  if (scale_ == Scale::kLog && values.lo <= 0) scale_ = Scale::kLinear;
  if (scale_ == Scale::kLog) {
    lo_ = std::pow(10.0, std::floor(std::log10(values.lo) + 1e-9));
    hi_ = std::pow(10.0, std::ceil(std::log10(values.hi) - 1e-9));
    if (hi_ <= lo_) {
      lo_ /= 10;
      hi_ *= 10;
    }
    return;
  }
  double lo = values.lo, hi = values.hi;
  if (lo == hi) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  step_ = nice_step((hi - lo) / 5);
  lo_ = std::floor(lo / step_ + 1e-9) * step_;
  hi_ = std::ceil(hi / step_ - 1e-9) * step_;
}

double Axis::fraction(double v) const {
  if (scale_ == Scale::kLog) {
    if (v <= 0) return 0;
    return (std::log10(v) - std::log10(lo_)) / (std::log10(hi_) - std::log10(lo_));
  }
  return (v - lo_) / (hi_ - lo_);
}

std::vector<double> Axis::ticks() const {
  std::vector<double> out;
  if (scale_ == Scale::kLog) {
    const int first = static_cast<int>(std::lround(std::log10(lo_)));
    const int last = static_cast<int>(std::lround(std::log10(hi_)));
    const int decades = last - first;
    const int every = std::max(1, (decades + 7) / 8);  // at most about 8 labels
    for (int k = first; k <= last; k += every) {
      out.push_back(std::pow(10.0, k));
      if (decades <= 2 && k < last)
        for (double m : {2.0, 5.0}) out.push_back(m * std::pow(10.0, k));
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  const long n = std::lround((hi_ - lo_) / step_);
  for (long i = 0; i <= n; ++i) {
    double v = lo_ + static_cast<double>(i) * step_;
    if (std::abs(v) < step_ * 1e-9) v = 0;
    out.push_back(v);
  }
  return out;
}

std::string Axis::label(double v) const {
  if (scale_ == Scale::kLog) return compact(v, 3);
  const double magnitude = std::max(std::abs(lo_), std::abs(hi_));
  if (v == 0) return "0";
  if (magnitude < 1e6 && step_ >= 1e-4) {
    // Fixed point with as many decimals as the step has, trailing zeros dropped.
    const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step_) - 1e-9)));
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    std::string s = buf;
    if (s.find('.') != std::string::npos) {
      while (s.back() == '0') s.pop_back();
      if (s.back() == '.') s.pop_back();
    }
    return s == "-0" ? "0" : s;
  }
  // Enough significant digits to tell neighbouring ticks apart, no more.
  const int digits =
      std::clamp(static_cast<int>(std::floor(std::log10(magnitude / step_))) + 2, 1, 10);
  return compact(v, digits);
}

}  // namespace cairn::cli
