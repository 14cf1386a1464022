// A trial attempt's OpenBLAS kernels as the coordinator decides and records them
// (engine/coordinator/trial_blas_core.h), with this machine's CPU: the cores these tests
// name (Prescott, Core2) run on every x86-64 CPU.
#include "engine/coordinator/trial_blas_core.h"

#include <doctest/doctest.h>

#include "engine/config/config.h"
#include "engine/coordinator/rank_environment.h"

namespace cairn {

namespace {

ExperimentConfig config(bool builtin, bool deterministic) {
  ExperimentConfig c;
  c.entrypoint = builtin ? std::vector<std::string>{"builtin:mlp"}
                         : std::vector<std::string>{"/usr/bin/python3", "train.py"};
  c.reproducibility.deterministic = deterministic;
  return c;
}

TrialEnvironment user_env(const std::string& inherited, const std::string& configured) {
  TrialEnvironment env;
  if (!inherited.empty()) env.inherited["OPENBLAS_CORETYPE"] = inherited;
  if (!configured.empty()) env.configured["OPENBLAS_CORETYPE"] = configured;
  return env;
}

}  // namespace

TEST_CASE("choose_trial_blas_core: a trial of the user's is only advised, nothing recorded") {
  Json record = Json::object();
  const auto blas = choose_trial_blas_core(config(false, false), Json::object(), record,
                                           user_env("Prescott", ""));
  CHECK(blas.coretype.empty());  // its numerics are its own: the variable stays as it is
#if defined(__x86_64__)
  CHECK_FALSE(blas.advice.empty());
#endif
  CHECK_FALSE(record.contains("blas_core"));
}

TEST_CASE("choose_trial_blas_core: builtin:mlp takes the config's variable over the shell's") {
  Json record = Json::object();
  const auto blas = choose_trial_blas_core(config(true, false), Json::object(), record,
                                           user_env("Core2", "Prescott"));
  CHECK(blas.coretype == "Prescott");
  CHECK(blas.advice.empty());
  CHECK(blas.warning.empty());
  CHECK(blas_core_field(record, "core") == "Prescott");
  CHECK(blas_core_field(record, "chosen_by") == "user");
  CHECK_FALSE(blas_core_field(record, "cpu").empty());
}

TEST_CASE(
    "choose_trial_blas_core: deterministic mode keeps the record, and a reproduction "
    "takes the reproduced trial's") {
  Json record = {{"blas_core", {{"core", "Prescott"}, {"chosen_by", "user"}}}};
  const Json before = record;
  auto blas =
      choose_trial_blas_core(config(true, true), Json::object(), record, user_env("Core2", ""));
  CHECK(blas.coretype == "Prescott");
  CHECK(blas.warning.find("OPENBLAS_CORETYPE=Core2 is ignored") == 0);
  CHECK(record == before);  // the record says what the trial ran, and who chose it first

  const Json experiment = {
      {"reproduces", {{"trial", "3.1"}, {"blas_core", {{"core", "Prescott"}}}}}};
  Json fresh = Json::object();
  blas = choose_trial_blas_core(config(true, true), experiment, fresh, TrialEnvironment{});
  CHECK(blas.coretype == "Prescott");
  CHECK(blas_core_field(fresh, "chosen_by") == "recorded");
  CHECK(blas_core_field(fresh, "from") == "3.1");

  // Outside deterministic mode neither counts: the machine's choice, recorded anew.
  Json again = before;
  blas = choose_trial_blas_core(config(true, false), experiment, again, TrialEnvironment{});
#if defined(__x86_64__)
  CHECK(blas.coretype != "Prescott");
  CHECK(blas_core_field(again, "chosen_by") != "recorded");
#endif
}

TEST_CASE("blas_core_field: a damaged record reads as none, never throws") {
  CHECK(blas_core_field(Json(nullptr), "core").empty());
  CHECK(blas_core_field(Json::array(), "core").empty());
  CHECK(blas_core_field(Json{{"blas_core", "Haswell"}}, "core").empty());
  CHECK(blas_core_field(Json{{"blas_core", {{"core", 7}}}}, "core").empty());
  CHECK(blas_core_field(Json{{"blas_core", {{"core", "Haswell"}}}}, "core") == "Haswell");

  // A damaged record of an earlier attempt is no record: decided afresh.
  Json record = {{"blas_core", {{"core", 7}}}};
  const auto blas = choose_trial_blas_core(config(true, true), Json{{"reproduces", 5}}, record,
                                           TrialEnvironment{});
  CHECK(blas_core_field(record, "chosen_by") != "recorded");
#if defined(__x86_64__)
  CHECK_FALSE(blas.coretype.empty());
#endif
}

}  // namespace cairn
