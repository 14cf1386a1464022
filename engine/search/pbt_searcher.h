// `pbt`: population-based training (Jaderberg et al. 2017) in generations, so that its
// decisions depend on the validations it is told and never on their timing (docs/search.md,
// "Population-based training").
//
// A population of `population_size` trials trains `perturbation_interval` units at a time.
// When every member has validated at the generation's length L, the members are ranked by the
// metric; each of the bottom floor(quantile_fraction · population_size) is closed (STOPPED)
// and replaced by a new trial cloned from a top-quantile member — it starts from that
// member's checkpoint at L with perturbed hyperparameters (perturb_hparams) — and every other
// member trains on to the next length. At max_length the population closes.
//
// Pure: a function of (config, seed, the calls it is fed), like every searcher. Not
// thread-safe.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/search/hparam_sampler.h"
#include "engine/search/rung.h"
#include "engine/search/searcher.h"

namespace cairn {

// The hyperparameters of a clone of `parent`: each perturbed by its rule in `config`
// (SearcherConfig::perturbations; numeric: multiplied by one of the factors and kept in its
// range, or with the resample probability drawn again; categorical: drawn again with the
// resample probability; constants kept), from `rng`, keys in sorted order.
Json perturb_hparams(const std::map<std::string, HyperparameterSpec>& specs,
                     const SearcherConfig& config, const Json& parent, SplitMix64& rng);

class PbtSearcher : public Searcher {
 public:
  PbtSearcher(const ExperimentConfig& config, uint64_t seed);

  std::vector<SearcherAction> start() override;
  std::vector<SearcherAction> on_validation(int64_t trial, int64_t length, double metric) override;
  std::vector<SearcherAction> on_trial_closed(int64_t trial) override;
  bool finished() const override;
  Json describe() const override;

 private:
  struct Member {
    int64_t trial = 0;
    Json hparams;
    std::optional<double> metric;  // at the generation's length; nullopt: not yet
    bool gone = false;             // closed by itself (errored): ranked last, not continued
  };
  // Every member has reported at length_ (or is gone): the generation's decisions.
  std::vector<SearcherAction> next_generation();
  std::vector<SearcherAction> create_member(Json hparams, int64_t parent);
  int64_t next_length() const;

  SearcherConfig config_;
  std::map<std::string, HyperparameterSpec> specs_;
  uint64_t seed_;
  std::vector<Member> members_;  // the current population
  int generation_ = 0;
  int64_t length_ = 0;  // what the current generation trains to
  int64_t created_ = 0;
  SearcherAction close(int64_t trial);  // a close of ours (close_sent_)

  std::set<int64_t> closed_;      // trials the coordinator reported closed
  std::set<int64_t> close_sent_;  // trials this searcher closed
  bool done_ = false;             // the last generation ended: every member was closed
  // Lineage, for describe(): trial -> (parent, length cloned at).
  std::map<int64_t, std::pair<int64_t, int64_t>> parents_;
  BestValidation best_;
};

}  // namespace cairn
