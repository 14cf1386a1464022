#include "engine/config/hparam_values.h"

#include <algorithm>
#include <cmath>

namespace cairn {
namespace {

constexpr int64_t kMaxIntValues = 10'000;

// Evenly spaced values of [lo, hi], both ends included; one value is the midpoint.
std::vector<double> spaced(double lo, double hi, int64_t count) {
  if (count == 1) return {(lo + hi) / 2};
  std::vector<double> out;
  for (int64_t i = 0; i < count; ++i)
    out.push_back(i == count - 1 ? hi : lo + (hi - lo) * static_cast<double>(i) / (count - 1));
  return out;
}

std::vector<Json> int_values(const HyperparameterSpec& spec) {
  const auto lo = static_cast<int64_t>(spec.minval);
  const auto hi = static_cast<int64_t>(spec.maxval);
  std::vector<Json> out;
  if (!spec.count) {
    for (int64_t v = lo; v <= hi; ++v) out.emplace_back(v);
    return out;
  }
  // count <= range size makes the spacing at least 1, so rounding never repeats a value.
  const int64_t count = std::min<int64_t>(*spec.count, hi - lo + 1);
  for (double v : spaced(static_cast<double>(lo), static_cast<double>(hi), count))
    out.emplace_back(static_cast<int64_t>(std::llround(v)));
  return out;
}

}  // namespace

Result<std::vector<Json>> grid_values(const HyperparameterSpec& spec) {
  using Type = HyperparameterSpec::Type;
  switch (spec.type) {
    case Type::kConst:
      return std::vector<Json>{spec.value};
    case Type::kNested:  // an empty group: the sampler's {} as well
      return std::vector<Json>{Json::object()};
    case Type::kCategorical:
      return spec.vals;
    case Type::kInt:
      if (!spec.count && spec.maxval - spec.minval + 1 > kMaxIntValues)
        return Status::BadInput("count: is required for an int range of more than 10000 values");
      return int_values(spec);
    case Type::kDouble:
    case Type::kLog:
      break;
  }
  if (!spec.count) return Status::BadInput("count: is required for a double or log grid");
  std::vector<Json> out;
  for (double v : spaced(spec.minval, spec.maxval, *spec.count))
    out.emplace_back(spec.type == Type::kLog ? std::pow(spec.base, v) : v);
  return out;
}

double range_value(const HyperparameterSpec& spec, double u) {
  // For u near 1 the sum can round up to maxval, which the range leaves out.
  const double x = std::min(spec.minval + (spec.maxval - spec.minval) * u,
                            std::nextafter(spec.maxval, spec.minval));
  return spec.type == HyperparameterSpec::Type::kLog ? std::pow(spec.base, x) : x;
}

}  // namespace cairn
