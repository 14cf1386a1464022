#include "engine/search/truncated_normal.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace cairn {
namespace {

constexpr double kSqrt2 = std::numbers::sqrt2;
const double kLogSqrt2Pi = 0.5 * std::log(2 * std::numbers::pi);

// Φ(z) and Φ(−z) through erfc, which keeps its relative precision in the tails.
double cdf(double z) {
  return 0.5 * std::erfc(-z / kSqrt2);
}

}  // namespace

double normal_log_cdf(double z) {
  if (z > 0) return std::log1p(-cdf(-z));
  // erfc stays representable (and accurate) down to about z = −37; past −30 the asymptotic
  // series log Φ(z) = −z²/2 − log(−z√(2π)) + log(1 − 1/z² + 3/z⁴ − 15/z⁶ + 105/z⁸ …) is
  // already exact to double precision.
  if (z > -30) return std::log(cdf(z));
  const double t = 1 / (z * z);
  const double series = 1 - t * (1 - t * (3 - t * (15 - t * 105)));
  return -0.5 * z * z - std::log(-z) - kLogSqrt2Pi + std::log(series);
}

double normal_log_mass(double a, double b) {
  if (!(a < b)) return -HUGE_VAL;
  if (a >= 0) return normal_log_mass(-b, -a);  // the same mass, in the lower tail
  if (b <= 0) {
    const double la = normal_log_cdf(a);
    const double lb = normal_log_cdf(b);
    return lb + std::log1p(-std::exp(la - lb));
  }
  // a < 0 < b: 1 − Φ(a) − Φ(−b), both small terms accurate.
  return std::log1p(-cdf(a) - cdf(-b));
}

double normal_quantile(double p) {
  if (!(p > 0)) return -HUGE_VAL;
  if (!(p < 1)) return HUGE_VAL;
  // P. J. Acklam's rational approximations (relative error below 1.15e-9).
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  auto tail = [&](double q) {
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  };
  double x;
  if (p < kLow) {
    x = tail(std::sqrt(-2 * std::log(p)));
  } else if (p <= 1 - kLow) {
    const double q = p - 0.5;
    const double r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    x = -tail(std::sqrt(-2 * std::log1p(-p)));
  }
  // One step of Halley's method on Φ(x) − p brings it to about machine precision.
  const double e = cdf(x) - p;
  const double u = e * std::exp(0.5 * x * x + kLogSqrt2Pi);
  if (std::isfinite(u)) x -= u / (1 + 0.5 * x * u);
  return x;
}

double truncated_normal_at(double a, double b, double u) {
  if (a >= 0) return -truncated_normal_at(-b, -a, 1 - u);  // work in the lower tail
  const double pa = cdf(a);
  const double pb = cdf(b);
  const double p = pa + u * (pb - pa);
  double x;
  if (p <= 0.5) {
    x = normal_quantile(p);
  } else {
    // 1 − p from the upper tail's own terms, where subtracting from 1 would lose digits.
    const double qa = cdf(-a);
    const double qb = cdf(-b);
    x = -normal_quantile(qa - u * (qa - qb));
  }
  if (std::isnan(x)) return a;
  return std::clamp(x, a, b);
}

double truncated_normal_log_pdf(double z, double a, double b) {
  if (z < a || z > b) return -HUGE_VAL;
  return -0.5 * z * z - kLogSqrt2Pi - normal_log_mass(a, b);
}

}  // namespace cairn
