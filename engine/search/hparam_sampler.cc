#include "engine/search/hparam_sampler.h"

#include <algorithm>
#include <cmath>

namespace cairn {

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SplitMix64::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

Json sample_one(const HyperparameterSpec& spec, SplitMix64& rng) {
  using Type = HyperparameterSpec::Type;
  switch (spec.type) {
    case Type::kConst:
      return spec.value;
    case Type::kInt: {
      const auto lo = static_cast<int64_t>(spec.minval);
      const auto hi = static_cast<int64_t>(spec.maxval);
      return lo + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(hi - lo + 1));
    }
    case Type::kDouble:
    case Type::kLog:
      return range_value(spec, rng.uniform());
    case Type::kCategorical:
      return spec.vals[rng.next() % spec.vals.size()];
    case Type::kNested: {
      Json out = Json::object();
      for (const auto& [name, child] : spec.children) out[name] = sample_one(child, rng);
      return out;
    }
  }
  return nullptr;
}

Json sample_hparams(const std::map<std::string, HyperparameterSpec>& specs,
                    uint64_t experiment_seed, int64_t trial_index) {
  SplitMix64 rng(experiment_seed * 0x100000001b3ULL + static_cast<uint64_t>(trial_index));
  Json out = Json::object();
  for (const auto& [name, spec] : specs) out[name] = sample_one(spec, rng);  // std::map: sorted
  return out;
}

uint64_t trial_seed(uint64_t experiment_seed, int64_t trial_index) {
  SplitMix64 rng(experiment_seed ^ (0xd1b54a32d192ed03ULL * static_cast<uint64_t>(trial_index)));
  return rng.next() & 0x7fffffffULL;
}

}  // namespace cairn
