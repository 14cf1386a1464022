#include "engine/coordinator/trial_blas_core.h"

#include "common/cpu_features.h"
#include "engine/config/config.h"
#include "trainer/blas_core_type.h"

namespace cairn {

namespace {

constexpr const char* kVariable = "OPENBLAS_CORETYPE";

std::string env_value(const std::map<std::string, std::string>& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

std::string recorded_core(const Json& holder) {
  return blas_core_field(holder, "core");
}

blas::CoreChoice decide(bool deterministic, const std::string& user, const std::string& recorded) {
  return blas::choose_core_type(
      {this_cpu_features(), blas::openblas_own_choice(), user, recorded, deterministic});
}

}  // namespace

std::string blas_core_field(const Json& holder, const char* field) {
  if (!holder.is_object()) return "";
  const auto core = holder.find("blas_core");
  if (core == holder.end() || !core->is_object()) return "";
  const auto value = core->find(field);
  return value != core->end() && value->is_string() ? value->get<std::string>() : "";
}

TrialEnvironment::Blas choose_trial_blas_core(const ExperimentConfig& config,
                                              const Json& experiment, Json& trial_record,
                                              const TrialEnvironment& env) {
  const bool deterministic = config.reproducibility.deterministic;
  TrialEnvironment::Blas out;
  if (!is_builtin_entrypoint(config)) {
    // Advice only: the SDK says when the trial's own OpenBLAS runs older kernels.
    out.advice = decide(deterministic, "", "").core;
    return out;
  }
  // The user's: the config's `environment:` over what cairn inherited.
  std::string user = env_value(env.inherited, kVariable);
  if (auto it = env.configured.find(kVariable); it != env.configured.end()) user = it->second;
  // Kept through resumes in deterministic mode, and taken from the reproduced trial.
  std::string recorded;
  std::string from;
  if (deterministic) {
    recorded = recorded_core(trial_record);
    if (recorded.empty() && experiment.contains("reproduces")) {
      recorded = recorded_core(experiment["reproduces"]);
      const Json& reproduces = experiment["reproduces"];
      if (!recorded.empty() && reproduces.is_object() && reproduces.contains("trial") &&
          reproduces["trial"].is_string())
        from = reproduces["trial"].get<std::string>();
    }
  }
  const blas::CoreChoice choice = decide(deterministic, user, recorded);
  // "" (not x86): OpenBLAS decides, as without cairn.
  out.coretype = choice.core;
  out.warning = choice.warning;
  const bool kept = choice.source == blas::CoreSource::kRecorded && from.empty();
  if (!kept) {
    Json record{{"core", choice.core.empty() ? blas::openblas_own_choice() : choice.core},
                {"chosen_by", blas::source_name(choice.source)},
                {"openblas_own", blas::openblas_own_choice()},
                {"cpu", this_cpu_features().summary()}};
    if (!from.empty() && choice.source == blas::CoreSource::kRecorded) record["from"] = from;
    if (!choice.warning.empty()) record["warning"] = choice.warning;
    trial_record["blas_core"] = std::move(record);
  }
  return out;
}

std::string blas_core_fingerprint(bool deterministic, const std::string& recorded,
                                  const std::map<std::string, std::string>& env) {
  const blas::CoreChoice choice =
      decide(deterministic, env_value(env, kVariable), deterministic ? recorded : "");
  if (choice.core.empty()) return "";
  return choice.core + " (" + std::string(blas::source_name(choice.source)) + ")";
}

}  // namespace cairn
