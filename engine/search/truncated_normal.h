// The standard normal distribution truncated to [a, b], in the numerically careful forms the
// TPE sampler (parzen_estimator.h) needs: log masses that stay finite far out in a tail, and
// sampling by inverting the CDF, so one uniform draw gives one sample and a sample depends on
// nothing but that draw. Pure functions; thread-safe.
#pragma once

namespace cairn {

// log Φ(z), finite for every finite z (asymptotic series far in the lower tail).
double normal_log_cdf(double z);

// log(Φ(b) − Φ(a)) for a < b, accurate when both ends lie far in the same tail; −inf when
// a >= b.
double normal_log_mass(double a, double b);

// Φ⁻¹(p) for p in (0, 1): Acklam's rational approximation refined by one Halley step
// (relative error near machine precision); −inf at 0, +inf at 1.
double normal_quantile(double p);

// The value of the standard normal truncated to [a, b] (a < b) at quantile u in [0, 1):
// Φ⁻¹(Φ(a) + u·(Φ(b) − Φ(a))), computed on the side of zero where it is accurate and kept
// inside [a, b].
double truncated_normal_at(double a, double b, double u);

// log of the density at z of the standard normal truncated to [a, b]; −inf outside.
double truncated_normal_log_pdf(double z, double a, double b);

}  // namespace cairn
