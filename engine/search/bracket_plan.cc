#include "engine/search/bracket_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace cairn {
namespace {

// Relative slack for lengths and counts computed in floating point: 5/3·9 must count as
// 15 trials, not 16, and 81·3⁻² as 9 units, not 8.
constexpr double kTolerance = 1e-9;
constexpr int kMaxHyperbandBrackets = 100;
constexpr double kMaxHyperbandTrials = 100'000;

int64_t floor_units(double x) {
  return static_cast<int64_t>(std::floor(x * (1 + kTolerance)));
}
double ceil_count(double x) {
  return std::ceil(x * (1 - kTolerance));
}

std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", x);
  return text;
}

void drop_repeated_lengths(std::vector<RungPlan>& rungs) {
  auto same_length = [](const RungPlan& a, const RungPlan& b) { return a.length == b.length; };
  rungs.erase(std::unique(rungs.begin(), rungs.end(), same_length), rungs.end());
}

// Bracket s of Hyperband, starting `trials` trials at max_length·η^-s.
BracketPlan hyperband_bracket(const SearcherConfig& config, int s, int64_t trials) {
  const double eta = config.divisor;
  BracketPlan bracket{trials, {}};
  for (int i = 0; i <= s; ++i) {
    const int64_t length =
        i == s ? config.max_length
               : std::max<int64_t>(1, floor_units(config.max_length * std::pow(eta, i - s)));
    const int64_t population = std::max<int64_t>(1, floor_units(trials * std::pow(eta, -i)));
    bracket.rungs.push_back({length, population});
  }
  drop_repeated_lengths(bracket.rungs);
  return bracket;
}

// The distinct lengths max(1, ⌊max_length·η^-k⌋) for 0 <= k < max_rungs, longest first, at
// most `limit` of them. Jumps straight to the next k that changes the length, so a divisor
// close to 1 costs no more than a large one.
std::vector<int64_t> asha_ladder(const SearcherConfig& config, int64_t limit) {
  const double eta = config.divisor;
  const double top = static_cast<double>(config.max_length);
  auto length_at = [&](int64_t k) {
    return std::max<int64_t>(1, floor_units(top * std::pow(eta, -static_cast<double>(k))));
  };
  std::vector<int64_t> ladder{config.max_length};
  int64_t k = 0;
  while (static_cast<int64_t>(ladder.size()) < limit && ladder.back() > 1) {
    const int64_t current = ladder.back();
    // The smallest k' with max_length·η^-k' below `current`, then corrected for rounding.
    const double estimate = std::floor(std::log(top * (1 + kTolerance) / current) / std::log(eta));
    int64_t next = std::max<int64_t>(k + 1, static_cast<int64_t>(estimate) + 1);
    while (next - 1 > k && length_at(next - 1) < current) --next;
    while (length_at(next) >= current) ++next;
    if (next >= config.max_rungs) break;
    k = next;
    ladder.push_back(length_at(k));
  }
  return ladder;
}

std::vector<int> asha_bracket_rungs(const std::string& mode, int rungs) {
  std::vector<int> counts;  // rungs per bracket, the most aggressive bracket first
  const int fewest = mode == "aggressive" ? rungs : mode == "standard" ? (rungs - 1) / 2 + 1 : 1;
  for (int j = rungs; j >= fewest; --j) counts.push_back(j);
  return counts;
}

}  // namespace

int floor_log(double x, double base) {
  constexpr double kCeiling = 1 << 30;  // callers bound what they use; this bounds the work
  if (x < base * (1 - kTolerance)) return 0;
  double s = std::min(kCeiling, std::max(0.0, std::floor(std::log(x) / std::log(base))));
  while (s < kCeiling && std::pow(base, s + 1) <= x * (1 + kTolerance)) ++s;
  while (s > 0 && std::pow(base, s) > x * (1 + kTolerance)) --s;
  return static_cast<int>(s);
}

std::vector<int64_t> split_trials(int64_t total, const std::vector<double>& weights) {
  const auto brackets = static_cast<int64_t>(weights.size());
  std::vector<int64_t> parts(weights.size(), 0);
  if (brackets == 0 || total <= 0) return parts;
  if (total < brackets) {
    std::fill(parts.begin(), parts.begin() + total, 1);
    return parts;
  }
  double sum = 0;
  for (double w : weights) sum += w;
  int64_t allocated = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    parts[i] = static_cast<int64_t>(std::floor(weights[i] / sum * static_cast<double>(total)));
    allocated += parts[i];
  }
  parts[0] += total - allocated;
  for (int64_t& part : parts) {
    if (part > 0) continue;
    auto largest = std::max_element(parts.begin(), parts.end());  // the first of equals
    --*largest;
    part = 1;
  }
  return parts;
}

Result<std::vector<BracketPlan>> hyperband_plan(const SearcherConfig& config) {
  const double eta = config.divisor;
  const int s_max =
      floor_log(static_cast<double>(config.max_length) / config.min_length, config.divisor);
  const std::string shape = "hyperband with max_length " + std::to_string(config.max_length) +
                            ", min_length " + std::to_string(config.min_length) + " and divisor " +
                            number(eta);
  if (s_max + 1 > kMaxHyperbandBrackets) {
    return Status::BadInput("searcher.divisor: " + shape + " has " + std::to_string(s_max + 1) +
                            " brackets, more than " + std::to_string(kMaxHyperbandBrackets) +
                            "; raise divisor or min_length");
  }
  std::vector<double> starts;  // n for s = s_max … 0
  double total = 0;
  for (int s = s_max; s >= 0; --s) {
    starts.push_back(ceil_count((s_max + 1.0) / (s + 1.0) * std::pow(eta, s)));
    total += starts.back();
  }
  std::vector<int64_t> trials(starts.size());
  if (config.max_trials > 0 && config.max_trials < total) {
    trials = split_trials(config.max_trials, starts);
  } else if (total > kMaxHyperbandTrials) {
    return Status::BadInput("searcher.max_trials: " + shape + " creates " + number(total) +
                            " trials, more than " + number(kMaxHyperbandTrials) +
                            "; set max_trials to cap them, or raise divisor or min_length");
  } else {
    std::transform(starts.begin(), starts.end(), trials.begin(),
                   [](double n) { return static_cast<int64_t>(n); });
  }
  std::vector<BracketPlan> plan;
  for (int s = s_max; s >= 0; --s) {
    const int64_t n = trials[s_max - s];
    if (n > 0) plan.push_back(hyperband_bracket(config, s, n));
  }
  return plan;
}

std::vector<BracketPlan> asha_plan(const SearcherConfig& config) {
  const double eta = config.divisor;
  // More rungs than η^(rungs-1) <= max_trials would leave the top rung empty.
  const int64_t limit =
      std::min<int64_t>(config.max_rungs, floor_log(std::max(config.max_trials, 1), eta) + 1);
  std::vector<int64_t> ladder = asha_ladder(config, limit);
  std::reverse(ladder.begin(), ladder.end());
  const int rungs = static_cast<int>(ladder.size());
  // Determined's bracket_rungs name the brackets instead of `mode`; a bracket cannot have
  // more rungs than the ladder.
  std::vector<int> counts = asha_bracket_rungs(config.mode, rungs);
  if (!config.bracket_rungs.empty()) {
    counts.clear();
    for (int j : config.bracket_rungs) counts.push_back(std::min(j, rungs));
  }
  std::vector<double> weights;  // Determined's: roughly the same budget for every bracket
  for (int j : counts) weights.push_back(std::pow(eta, j - 1) / j);
  const std::vector<int64_t> trials = split_trials(config.max_trials, weights);
  std::vector<BracketPlan> plan;
  for (size_t b = 0; b < counts.size(); ++b) {
    if (trials[b] == 0) continue;
    BracketPlan bracket{trials[b], {}};
    int64_t population = trials[b];
    for (size_t i = ladder.size() - counts[b]; i < ladder.size(); ++i) {
      bracket.rungs.push_back({ladder[i], population});
      population = floor_units(population / eta);
    }
    plan.push_back(std::move(bracket));
  }
  return plan;
}

}  // namespace cairn
