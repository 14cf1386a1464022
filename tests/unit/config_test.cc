// The experiment config: what a valid config turns into, and that every kind of mistake is
// reported as one line naming the file, the line and the dotted key (exit status 2).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/experiment_control.h"
#include "engine/config/config.h"
#include "engine/config/config_sections.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with everything in it at scope end.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = fs::temp_directory_path() / ("cairn_config_test_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(counter++) + "_" + std::to_string(now));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& text) const {
    fs::path file = path_ / name;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file;
  }

 private:
  fs::path path_;
};

Result<ExperimentConfig> parse(const TempDir& dir, const std::string& yaml,
                               const std::vector<std::string>& sets = {}) {
  return parse_experiment_config(yaml, "exp.yaml", dir.path(), sets, ConfigUse::kNewExperiment);
}

// Parses a config that must be valid, failing the test with the message otherwise.
ExperimentConfig parse_ok(const TempDir& dir, const std::string& yaml,
                          const std::vector<std::string>& sets = {}) {
  Result<ExperimentConfig> config = parse(dir, yaml, sets);
  INFO(config.status().message());
  REQUIRE(config.ok());
  return std::move(config).value();
}

void check_bad_input(const Result<ExperimentConfig>& config, const std::string& prefix,
                     const std::string& detail) {
  REQUIRE_FALSE(config.ok());
  const std::string& message = config.status().message();
  INFO("message: " << message);
  CHECK(config.status().kind() == ErrorKind::kBadInput);
  CHECK(config.status().exit_code() == 2);
  CHECK(message.rfind(prefix, 0) == 0);
  CHECK(message.find(detail, prefix.size()) != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}

constexpr const char* kMinimal = R"(entrypoint: python3 train.py
searcher:
  name: random
  metric: val_loss
  max_length: 10
  max_trials: 4
)";

// SPEC §2's example, as a user would write it.
constexpr const char* kSpecExample = R"(name: digits-asha
entrypoint: python3 train.py --epochs-per-unit 1
workdir: .
hyperparameters:
  lr:        {type: log, minval: -4, maxval: -1, base: 10}
  hidden:    {type: int, minval: 16, maxval: 256}
  dropout:   {type: double, minval: 0.0, maxval: 0.5}
  optimizer: {type: categorical, vals: [sgd, adam]}
  batch_size: 64
  arch:
    depth: {type: int, minval: 1, maxval: 4}
searcher:
  name: asha
  metric: val_loss
  smaller_is_better: true
  max_length: 81
  max_trials: 64
  max_concurrent_trials: 4
  divisor: 3
resources:
  slots_per_trial: 1
  devices: auto
  peers: none
max_restarts: 3
checkpoint:
  period: 1
  keep_trial_latest: 1
  keep_trial_best: 1
  keep_experiment_best: 0
reproducibility:
  seed: 1234
  deterministic: false
data: [data/]
environment: {OMP_NUM_THREADS: "1"}
notify: {webhook: "https://hooks.example.com/cairn"}
)";

using Type = HyperparameterSpec::Type;

TEST_CASE("config: the SPEC example parses into the right values") {
  TempDir dir;
  fs::path file = dir.write("configs/digits.yaml", kSpecExample);
  fs::create_directories(dir.path() / "configs/data");  // data: must exist for a new experiment
  Result<ExperimentConfig> loaded = load_experiment_config(file, {});
  INFO(loaded.status().message());
  REQUIRE(loaded.ok());
  const ExperimentConfig& c = *loaded;

  CHECK(c.name == "digits-asha");
  CHECK(c.entrypoint == std::vector<std::string>{"python3", "train.py", "--epochs-per-unit", "1"});
  CHECK_FALSE(is_builtin_entrypoint(c));
  CHECK(c.config_path == fs::absolute(file).lexically_normal());
  CHECK(c.workdir == (dir.path() / "configs").lexically_normal());

  REQUIRE(c.hyperparameters.size() == 6);
  const HyperparameterSpec& lr = c.hyperparameters.at("lr");
  CHECK(lr.type == Type::kLog);
  CHECK(lr.minval == -4);
  CHECK(lr.maxval == -1);
  CHECK(lr.base == 10);
  CHECK_FALSE(lr.count.has_value());
  CHECK(lr.line == 5);
  const HyperparameterSpec& hidden = c.hyperparameters.at("hidden");
  CHECK(hidden.type == Type::kInt);
  CHECK(hidden.minval == 16);
  CHECK(hidden.maxval == 256);
  CHECK(c.hyperparameters.at("dropout").type == Type::kDouble);
  CHECK(c.hyperparameters.at("dropout").maxval == 0.5);
  const HyperparameterSpec& optimizer = c.hyperparameters.at("optimizer");
  CHECK(optimizer.type == Type::kCategorical);
  CHECK(optimizer.vals == std::vector<Json>{"sgd", "adam"});
  const HyperparameterSpec& batch = c.hyperparameters.at("batch_size");
  CHECK(batch.type == Type::kConst);
  CHECK(batch.value == Json(64));
  CHECK(batch.value.is_number_integer());
  const HyperparameterSpec& arch = c.hyperparameters.at("arch");
  CHECK(arch.type == Type::kNested);
  CHECK(arch.line == 10);
  REQUIRE(arch.children.count("depth") == 1);
  CHECK(arch.children.at("depth").type == Type::kInt);
  CHECK(arch.children.at("depth").maxval == 4);
  CHECK(arch.children.at("depth").line == 11);

  CHECK(c.searcher.name == "asha");
  CHECK(c.searcher.metric == "val_loss");
  CHECK(c.searcher.smaller_is_better);
  CHECK(c.searcher.max_length == 81);
  CHECK(c.searcher.length_unit.empty());
  CHECK(c.searcher.max_trials == 64);
  CHECK(c.searcher.max_concurrent_trials == 4);
  CHECK(c.searcher.divisor == 3);
  CHECK(c.searcher.min_length == 1);
  CHECK(c.searcher.max_rungs == 5);
  CHECK(c.searcher.mode == "standard");

  CHECK(c.resources.slots_per_trial == 1);
  CHECK(c.resources.devices == "auto");
  CHECK(c.resources.peers_mode == "none");
  CHECK(c.resources.peers.empty());
  CHECK(c.max_restarts == 3);
  CHECK(c.rank_wait_timeout == 600);
  CHECK(c.checkpoint.period == 1);
  CHECK(c.checkpoint.keep_trial_latest == 1);
  CHECK(c.checkpoint.keep_trial_best == 1);
  CHECK(c.checkpoint.keep_experiment_best == 0);
  CHECK(c.reproducibility.seed == std::optional<uint64_t>(1234));
  CHECK_FALSE(c.reproducibility.deterministic);
  CHECK(c.data == std::vector<std::string>{"data/"});
  CHECK(c.environment == std::map<std::string, std::string>{{"OMP_NUM_THREADS", "1"}});
  CHECK(c.notify.webhooks == std::vector<std::string>{"https://hooks.example.com/cairn"});
  CHECK(c.notify.wants(NotifyEvent::kEnd));
  CHECK(c.notify.wants(NotifyEvent::kTrialError));
  CHECK_FALSE(c.notify.wants(NotifyEvent::kBestImproved));

  CHECK(c.resolved["searcher"]["max_trials"] == 64);
  CHECK(c.resolved["hyperparameters"]["lr"]["minval"] == -4);
  CHECK(c.resolved["hyperparameters"]["dropout"]["minval"].is_number_float());
  CHECK(c.resolved["environment"]["OMP_NUM_THREADS"] == "1");
  CHECK(c.resolved.begin().key() == "name");  // document order is kept
}

TEST_CASE("config: defaults for everything left out") {
  TempDir dir;
  ExperimentConfig c = parse_ok(dir, kMinimal);
  CHECK(c.name == "exp");
  CHECK(c.workdir == dir.path());
  CHECK(c.config_path == dir.path() / "exp.yaml");
  CHECK(c.hyperparameters.empty());
  CHECK(c.searcher.divisor == 3);
  CHECK(c.searcher.max_concurrent_trials == 0);
  CHECK(c.resources.slots_per_trial == 1);
  CHECK(c.resources.devices == "auto");
  CHECK(c.max_restarts == 3);
  CHECK(c.checkpoint.period == 1);
  CHECK_FALSE(c.reproducibility.seed.has_value());
  CHECK(c.data.empty());
  CHECK(c.environment.empty());
  CHECK_FALSE(c.notify.enabled());
}

TEST_CASE("config: values in their other accepted forms") {
  TempDir dir;
  dir.write("code/data/train.csv", "x\n");
  ExperimentConfig c = parse_ok(dir, R"(entrypoint: [python3, train.py, --epochs, 5]
workdir: code/
hyperparameters:
  lr: {type: log, minval: -3, maxval: 0, base: 2, count: 4}
  layers: [64, 32]
  flag: {type: const, val: {a: 1}}
  quoted: "64"
searcher:
  name: grid
  metric: accuracy
  smaller_is_better: false
  max_length: {epochs: 81}
  min_length: {epochs: 3}
resources:
  peers: [10.0.0.2:7070, "[::1]:7071", gpu-box.local:7072]
  devices: cpu
  slots_per_trial: 2
reproducibility: {seed: 18446744073709551615, deterministic: true}
data: data/train.csv
environment: {OMP_NUM_THREADS: 1, SCALE: 1.50, VERBOSE: true}
)");
  CHECK(c.entrypoint == std::vector<std::string>{"python3", "train.py", "--epochs", "5"});
  CHECK(c.workdir == dir.path() / "code");
  CHECK(c.hyperparameters.at("lr").base == 2);
  CHECK(c.hyperparameters.at("lr").count == 4);
  CHECK(c.hyperparameters.at("layers").value == Json::parse("[64, 32]"));
  CHECK(c.hyperparameters.at("flag").type == Type::kConst);
  CHECK(c.hyperparameters.at("flag").value == Json::parse(R"({"a": 1})"));
  CHECK(c.hyperparameters.at("quoted").value == Json("64"));
  CHECK(c.searcher.name == "grid");
  CHECK(c.searcher.max_trials == 0);
  CHECK_FALSE(c.searcher.smaller_is_better);
  CHECK(c.searcher.max_length == 81);
  CHECK(c.searcher.length_unit == "epochs");
  CHECK(c.searcher.min_length == 3);
  CHECK(c.resources.peers_mode == "list");
  CHECK(c.resources.peers ==
        std::vector<std::string>{"10.0.0.2:7070", "[::1]:7071", "gpu-box.local:7072"});
  CHECK(c.resources.devices == "cpu");
  CHECK(c.resources.slots_per_trial == 2);
  CHECK(c.reproducibility.seed == std::optional<uint64_t>(18446744073709551615ull));
  CHECK(c.reproducibility.deterministic);
  CHECK(c.data == std::vector<std::string>{"data/train.csv"});
  CHECK(c.environment.at("OMP_NUM_THREADS") == "1");
  CHECK(c.environment.at("SCALE") == "1.50");  // as written, not reformatted
  CHECK(c.environment.at("VERBOSE") == "true");

  ExperimentConfig peers = parse_ok(dir, std::string(kMinimal) + "resources: {peers: auto}\n");
  CHECK(peers.resources.peers_mode == "auto");
  ExperimentConfig listed =
      parse_ok(dir, std::string(kMinimal) + "resources: {peers: \"a:1,b:2\"}\n");
  CHECK(listed.resources.peers == std::vector<std::string>{"a:1", "b:2"});
}

TEST_CASE("config: entrypoint strings split like shell words, expanding nothing") {
  TempDir dir;
  auto argv_of = [&](const std::string& entrypoint_line) {
    return parse_ok(dir, entrypoint_line + "\n" + std::string(kMinimal).substr(29)).entrypoint;
  };
  CHECK(argv_of(R"(entrypoint: python3 train.py --note "two words" 'single quoted')") ==
        std::vector<std::string>{"python3", "train.py", "--note", "two words", "single quoted"});
  CHECK(argv_of(R"(entrypoint: run my\ file.py)") == std::vector<std::string>{"run", "my file.py"});
  CHECK(argv_of(R"(entrypoint: echo $HOME ~ *.py ${X})") ==
        std::vector<std::string>{"echo", "$HOME", "~", "*.py", "${X}"});
  CHECK(argv_of(R"(entrypoint: prog '' "a\"b" "\$x" "\n" 'it''s' --k="v w")") ==
        std::vector<std::string>{"prog", "", "a\"b", "$x", "\\n", "its", "--k=v w"});
  CHECK(argv_of(R"(entrypoint: ["a b", "$HOME"])") == std::vector<std::string>{"a b", "$HOME"});

  ExperimentConfig builtin =
      parse_ok(dir, "entrypoint: builtin:mlp\n" + std::string(kMinimal).substr(29));
  CHECK(builtin.entrypoint == std::vector<std::string>{"builtin:mlp"});
  CHECK(is_builtin_entrypoint(builtin));

  Result<std::vector<std::string>> words = config::split_command_words("  a\tb \\\n c  ");
  REQUIRE(words.ok());
  CHECK(*words == std::vector<std::string>{"a", "b", "c"});
  CHECK_FALSE(config::split_command_words("say 'unclosed").ok());
  CHECK_FALSE(config::split_command_words("a | b").ok());
  CHECK(config::split_command_words("'a | b'").ok());
}

TEST_CASE("config: searcher aliases") {
  TempDir dir;
  for (const char* alias : {"adaptive_asha", "async_halving", "asha"}) {
    std::string yaml = std::string(kMinimal);
    yaml.replace(yaml.find("random"), 6, alias);
    CHECK(parse_ok(dir, yaml).searcher.name == "asha");
  }
  std::string single = std::string(kMinimal);
  single.replace(single.find("random"), 6, "single");
  CHECK(parse_ok(dir, single).searcher.max_trials == 1);
}

TEST_CASE("config: single without max_length trains to the trial's own end") {
  TempDir dir;
  ExperimentConfig c = parse_ok(dir, R"(entrypoint: python3 train.py
searcher: {name: single, metric: loss}
)");
  CHECK(c.searcher.own_length);
  CHECK(c.searcher.max_length == SearcherConfig::kOwnLength);
  ExperimentConfig bounded = parse_ok(dir, R"(entrypoint: python3 train.py
searcher: {name: single, metric: loss, max_length: 5}
)");
  CHECK_FALSE(bounded.searcher.own_length);
  CHECK(bounded.searcher.max_length == 5);
}

TEST_CASE("config: time_metric and max_time measure lengths in a validation metric") {
  TempDir dir;
  ExperimentConfig c = parse_ok(dir, R"(entrypoint: python3 train.py
searcher: {name: asha, metric: loss, time_metric: batches, max_time: 800, max_trials: 4}
)");
  CHECK(c.searcher.time_metric == "batches");
  CHECK(c.searcher.max_length == 800);
  CHECK_FALSE(c.searcher.own_length);
}

TEST_CASE("config: Determined's cluster keys are accepted with one warning each") {
  TempDir dir;
  ExperimentConfig c = parse_ok(dir, R"(entrypoint: python3 train.py
searcher: {name: adaptive_asha, metric: loss, max_length: 8, max_trials: 2}
resources: {slots_per_trial: 1, resource_pool: gpus}
environment:
  image: determinedai/pytorch:0.38
  environment_variables: [A=1, B=x=y]
checkpoint_storage: {type: shared_fs, host_path: /mnt, save_trial_latest: 3}
bind_mounts: [{host_path: /data, container_path: /data}]
checkpoint: {keep_trial_best: 2}
)");
  CHECK(c.environment == std::map<std::string, std::string>{{"A", "1"}, {"B", "x=y"}});
  CHECK(c.checkpoint.keep_trial_latest == 3);  // from save_trial_latest
  CHECK(c.checkpoint.keep_trial_best == 2);
  REQUIRE(c.warnings.size() == 4);
  CHECK(c.warnings[0].starts_with("exp.yaml:3: resources.resource_pool: "));
  CHECK(c.warnings[1].starts_with("exp.yaml:5: environment.image: "));
  CHECK(c.warnings[2].starts_with("exp.yaml:7: checkpoint_storage: "));
  CHECK(c.warnings[3].starts_with("exp.yaml:8: bind_mounts: "));
  // cairn's own shape of environment is still a map of variables, with no warning.
  ExperimentConfig plain = parse_ok(dir, R"(entrypoint: python3 train.py
searcher: {name: single, metric: loss, max_length: 8}
environment: {IMAGE: x}
)");
  CHECK(plain.environment.at("IMAGE") == "x");
  CHECK(plain.warnings.empty());
}

TEST_CASE("config: Determined's keys that mean something here, by the value's shape") {
  TempDir dir;
  ExperimentConfig c = parse_ok(dir, R"(entrypoint: python3 train.py
searcher:
  name: async_halving
  metric: loss
  max_length: {batches: 640}
  max_trials: 8
  num_rungs: 3
  stop_once: true
data: {url: "s3://bucket/x", batch: 32, splits: [train, val]}
resources: {devices: ["/dev/infiniband:/dev/infiniband"]}
reproducibility: {experiment_seed: 777}
min_checkpoint_period: {batches: 64}
min_validation_period: {batches: 32}
records_per_epoch: 5000
log_policies:
  - name: Bad input
    pattern: ".*ValueError: bad input.*"
    action: cancel_retries
  - pattern: ".*uncorrectable ECC error encountered.*"
    action: {type: exclude_node}
  - name: Just a label
)");
  CHECK(c.searcher.name == "asha");  // async_halving: one bracket of num_rungs rungs
  CHECK(c.searcher.mode == "aggressive");
  CHECK(c.searcher.max_rungs == 3);
  CHECK(c.searcher.stop_once);
  CHECK(c.user_data == Json{{"url", "s3://bucket/x"}, {"batch", 32}, {"splits", {"train", "val"}}});
  CHECK(c.data.empty());  // not cairn's data paths
  CHECK(c.resources.devices == "auto");
  REQUIRE(c.reproducibility.seed.has_value());
  CHECK(*c.reproducibility.seed == 777);
  CHECK(c.checkpoint.period == 64);
  CHECK(c.resolved["checkpoint"]["period"] == 64);
  // The config's own policies, after Determined's default one for CUDA running out of memory.
  REQUIRE(c.log_policies.size() == 4);
  CHECK(c.log_policies[0].name == "CUDA OOM");
  CHECK(c.log_policies[0].action == LogPolicy::Action::kCancelRetries);
  CHECK(c.log_policies[1].name == "Bad input");
  CHECK(c.log_policies[1].pattern == ".*ValueError: bad input.*");
  CHECK(c.log_policies[1].action == LogPolicy::Action::kCancelRetries);
  CHECK(c.log_policies[1].where == "exp.yaml:16");
  CHECK(c.log_policies[2].name.empty());
  CHECK(c.log_policies[2].action == LogPolicy::Action::kExcludeNode);
  CHECK(c.log_policies[3].action == LogPolicy::Action::kNone);
  // One warning for each key that changes nothing here, in the file's order.
  REQUIRE(c.warnings.size() == 4);
  CHECK(c.warnings[0].starts_with("exp.yaml:10: resources.devices: "));
  CHECK(c.warnings[1].starts_with("exp.yaml:13: min_validation_period: "));
  CHECK(c.warnings[2].starts_with("exp.yaml:14: records_per_epoch: "));
  CHECK(c.warnings[3].starts_with("exp.yaml:20: log_policies[1].action: exclude_node"));
  // Determined's defaults for what the config does not write.
  CHECK(c.determined_defaults.because == "searcher.stop_once");
  CHECK(c.searcher.divisor == 4);
  CHECK(c.searcher.max_concurrent_trials == 16);
  CHECK(c.max_restarts == 5);
  CHECK(c.resolved["searcher"]["divisor"] == 4);
  CHECK(c.resolved["max_restarts"] == 5);
  CHECK(c.resolved["determined_defaults"]["because"] == "searcher.stop_once");
  CHECK(c.resolved["determined_defaults"]["values"]["searcher.max_concurrent_trials"] == 16);
}

TEST_CASE(
    "config: Determined's defaults apply only to a config with its keys, and never over "
    "what it writes") {
  TempDir dir;
  // cairn's own config: cairn's defaults, no log policy.
  ExperimentConfig cairn_config = parse_ok(dir, R"(entrypoint: python3 train.py
searcher: {name: asha, metric: loss, max_length: 9, max_trials: 9}
data: [.]
)");
  CHECK(cairn_config.determined_defaults.because.empty());
  CHECK(cairn_config.searcher.divisor == 3);
  CHECK(cairn_config.searcher.max_concurrent_trials == 0);
  CHECK(cairn_config.max_restarts == 3);
  CHECK(cairn_config.log_policies.empty());
  CHECK_FALSE(cairn_config.retry_repeated_failures);
  CHECK_FALSE(cairn_config.resolved.contains("determined_defaults"));
  CHECK(cairn_config.user_data.is_null());
  // One Determined-only key (a cluster key here) is enough; what the config writes wins,
  // and a policy named "CUDA OOM" replaces Determined's.
  ExperimentConfig written = parse_ok(dir, R"(entrypoint: python3 train.py
searcher: {name: adaptive_asha, metric: loss, max_length: 9, max_trials: 9, divisor: 3}
max_restarts: 1
retry_repeated_failures: true
bind_mounts: []
log_policies: [{name: CUDA OOM}]
)",
                                      {"searcher.max_concurrent_trials=2"});
  CHECK(written.determined_defaults.because == "bind_mounts");
  CHECK(written.searcher.divisor == 3);
  CHECK(written.searcher.max_concurrent_trials == 2);
  CHECK(written.max_restarts == 1);
  CHECK(written.retry_repeated_failures);
  CHECK(written.determined_defaults.values.empty());
  REQUIRE(written.log_policies.size() == 1);
  CHECK(written.log_policies[0].action == LogPolicy::Action::kNone);
  // The searcher's bracket_rungs reach the plan's config; a single searcher gets no
  // concurrency default (it has one trial).
  ExperimentConfig single = parse_ok(dir, R"(entrypoint: python3 train.py
searcher: {name: single, metric: loss}
reproducibility: {experiment_seed: 5}
)");
  CHECK(single.determined_defaults.because == "reproducibility.experiment_seed");
  CHECK(single.searcher.max_concurrent_trials == 0);
  CHECK(single.max_restarts == 5);
  ExperimentConfig brackets = parse_ok(dir, R"(entrypoint: python3 train.py
searcher: {name: adaptive_asha, metric: loss, max_length: 64, max_trials: 16, bracket_rungs: [3, 1]}
)");
  CHECK(brackets.searcher.bracket_rungs == std::vector<int>{3, 1});
  CHECK(brackets.searcher.divisor == 4);
  // reproducibility.seed wins over experiment_seed (cairn reproduce sets it with --set).
  ExperimentConfig both = parse_ok(dir, R"(entrypoint: python3 train.py
searcher: {name: single, metric: loss}
reproducibility: {experiment_seed: 5}
)",
                                   {"reproducibility.seed=9"});
  CHECK(*both.reproducibility.seed == 9);
  // An experiment recorded before Determined's defaults were applied keeps cairn's.
  drop_determined_defaults(written);
  CHECK(written.max_restarts == 1);  // written by the config: unchanged
  drop_determined_defaults(single);
  CHECK(single.max_restarts == 3);
  CHECK(single.log_policies.empty());
  CHECK(single.determined_defaults.because.empty());
  CHECK_FALSE(single.resolved.contains("determined_defaults"));
  drop_determined_defaults(brackets);
  CHECK(brackets.searcher.divisor == 3);
  CHECK(brackets.searcher.max_concurrent_trials == 0);
}

TEST_CASE("config: YAML merge keys (<<) add the keys a map does not write itself") {
  TempDir dir;
  ExperimentConfig c = parse_ok(dir, R"(entrypoint: python3 train.py
hyperparameters:
  lr: &range {type: double, minval: 0.1, maxval: 0.5}
  momentum:
    <<: *range
    maxval: 0.9
  wd:
    <<: [{minval: 0.01}, *range]
searcher:
  <<: {name: single, metric: loss, max_length: 99}
  max_length: 3
)");
  CHECK(c.hyperparameters.at("momentum").minval == 0.1);
  CHECK(c.hyperparameters.at("momentum").maxval == 0.9);  // the map's own key wins
  CHECK(c.hyperparameters.at("wd").minval == 0.01);       // the first map of the list wins
  CHECK(c.hyperparameters.at("wd").maxval == 0.5);
  CHECK(c.searcher.name == "single");
  CHECK(c.searcher.max_length == 3);
  // A mistake in a merged value is named where it is written: the anchor's line.
  check_bad_input(parse(dir, "entrypoint: x\nsearcher:\n  <<: &s {name: bayes}\n"),
                  "exp.yaml:3: searcher.name: ", "must be one of");
  check_bad_input(parse(dir, "entrypoint: x\nsearcher:\n  <<: 3\n"),
                  "exp.yaml:3: searcher.<<: ", "a merge key takes a map");
  // Quoted, "<<" is an ordinary key.
  check_bad_input(parse(dir, "entrypoint: x\nsearcher:\n  \"<<\": {name: single}\n"),
                  "exp.yaml:3: searcher.<<: ", "unknown key");
}

TEST_CASE("config: a file that ends with --- is one document") {
  TempDir dir;
  CHECK(parse_ok(dir, std::string(kMinimal) + "---\n").searcher.max_trials == 4);
  check_bad_input(parse(dir, std::string(kMinimal) + "---\nname: x\n"),
                  "exp.yaml:8: ", "a second YAML document");
}

TEST_CASE("config: --set overrides") {
  TempDir dir;
  const std::string yaml = std::string(kMinimal) + R"(hyperparameters:
  lr: {type: log, minval: -4, maxval: -1}
  arch:
    depth: {type: int, minval: 1, maxval: 4}
)";
  SUBCASE("a scalar") {
    ExperimentConfig c = parse_ok(dir, yaml, {"searcher.max_trials=8"});
    CHECK(c.searcher.max_trials == 8);
    CHECK(c.resolved["searcher"]["max_trials"] == 8);
  }
  SUBCASE("later sets win") {
    ExperimentConfig c = parse_ok(dir, yaml, {"searcher.max_trials=8", "searcher.max_trials=9"});
    CHECK(c.searcher.max_trials == 9);
  }
  SUBCASE("a whole subtree, nested") {
    ExperimentConfig c = parse_ok(
        dir, yaml,
        {"hyperparameters.lr=0.1", "hyperparameters.arch.depth={type: int, minval: 2, maxval: 3}",
         "hyperparameters.arch.width=128"});
    CHECK(c.hyperparameters.at("lr").type == Type::kConst);
    CHECK(c.hyperparameters.at("lr").value == Json(0.1));
    const HyperparameterSpec& arch = c.hyperparameters.at("arch");
    CHECK(arch.children.at("depth").minval == 2);
    CHECK(arch.children.at("depth").line == 0);  // from --set, not from a file line
    CHECK(arch.children.at("width").value == Json(128));
  }
  SUBCASE("a list") {
    ExperimentConfig c = parse_ok(dir, yaml, {"entrypoint=[python3, other.py, --fast]"});
    CHECK(c.entrypoint == std::vector<std::string>{"python3", "other.py", "--fast"});
  }
  SUBCASE("a new key and a new section") {
    ExperimentConfig c =
        parse_ok(dir, yaml, {"reproducibility.seed=7", "name=tuned", "searcher.divisor=4"});
    CHECK(c.reproducibility.seed == std::optional<uint64_t>(7));
    CHECK(c.name == "tuned");
    CHECK(c.searcher.divisor == 4);
    CHECK(c.resolved["reproducibility"]["seed"] == 7);
  }
  SUBCASE("a bad value names the --set") {
    check_bad_input(parse(dir, yaml, {"searcher.max_trials=abc"}),
                    "--set searcher.max_trials=abc: searcher.max_trials: ", "expected an integer");
    check_bad_input(
        parse(dir, yaml, {"searcher.max_trails=3"}),
        "--set searcher.max_trails=3: searcher.max_trails: ", "did you mean 'max_trials'?");
    check_bad_input(
        parse(dir, yaml, {"hyperparameters.arch.depth.minval=9"}),
        "--set hyperparameters.arch.depth.minval=9: hyperparameters.arch.depth.minval: ",
        "greater than maxval 4");
    check_bad_input(parse(dir, yaml, {"entrypoint.program=x"}),
                    "--set entrypoint.program=x: entrypoint: ", "not a map");
    check_bad_input(parse(dir, yaml, {"searcher.max_trials=[1,"}),
                    "--set searcher.max_trials=[1,: searcher.max_trials: ", "yaml syntax error");
    check_bad_input(parse(dir, yaml, {"name=a\n---\nb"}),
                    "--set name=a --- b: name: ", "a second YAML document");
    check_bad_input(parse(dir, yaml, {"searcher"}), "--set searcher: ", "expected KEY=VALUE");
    check_bad_input(parse(dir, yaml, {"searcher..name=grid"}),
                    "--set searcher..name=grid: ", "empty part");
    check_bad_input(parse(dir, yaml, {"searcher={name: random}"}),
                    "--set searcher={name: random}: searcher.metric: ", "is required");
  }
}

struct Mistake {
  const char* what;
  std::string yaml;
  const char* prefix;  // exactly "exp.yaml:LINE: KEY: "
  const char* detail;  // part of what follows
};

// kMinimal's searcher with its lines replaced: lines 2-6 are "searcher:" and its four keys.
std::string with_searcher(const std::string& searcher_body) {
  return "entrypoint: python3 train.py\nsearcher:\n" + searcher_body;
}

std::string with_extra(const std::string& extra) {
  return std::string(kMinimal) + extra;
}

const std::vector<Mistake>& mistakes() {
  static const std::vector<Mistake> table = {
      {"unknown top-level key", "entrypoint: x\nhyperparameter:\n  lr: 0.1\n",
       "exp.yaml:2: hyperparameter: ", "unknown key; did you mean 'hyperparameters'?"},
      {"searcher key misplaced at the top", with_extra("max_rungs: 3\n"),
       "exp.yaml:7: max_rungs: ", "did you mean searcher.max_rungs?"},
      {"misspelt searcher key",
       with_searcher("  name: random\n  metric: m\n  max_lenght: 10\n  max_trials: 4\n"),
       "exp.yaml:5: searcher.max_lenght: ", "did you mean 'max_length'?"},
      {"missing metric", with_searcher("  name: random\n  max_length: 10\n  max_trials: 4\n"),
       "exp.yaml:2: searcher.metric: ", "is required"},
      {"missing entrypoint", "# a comment\nsearcher: {name: single, metric: m, max_length: 1}\n",
       "exp.yaml:2: entrypoint: ", "is required"},
      {"missing searcher", "entrypoint: python3 train.py\n",
       "exp.yaml:1: searcher: ", "is required"},
      {"unknown searcher", with_searcher("  name: ashaa\n  metric: m\n  max_length: 10\n"),
       "exp.yaml:3: searcher.name: ", "did you mean 'asha'?"},
      {"searcher not a map", "entrypoint: x\nsearcher: [random]\n",
       "exp.yaml:2: searcher: ", "expected a map"},
      {"max_length zero", with_searcher("  name: single\n  metric: m\n  max_length: 0\n"),
       "exp.yaml:5: searcher.max_length: ", "must be at least 1, got 0"},
      // single alone may leave it out (the trial trains to its own end); others may not.
      {"max_length missing", with_searcher("  name: random\n  metric: m\n  max_trials: 2\n"),
       "exp.yaml:2: searcher.max_length: ", "is required"},
      {"max_time without time_metric",
       with_searcher("  name: asha\n  metric: m\n  max_time: 9\n  max_trials: 2\n"),
       "exp.yaml:5: searcher.max_time: ", "needs time_metric"},
      {"max_length with time_metric",
       with_searcher("  name: asha\n  metric: m\n  time_metric: b\n  max_length: 9\n"),
       "exp.yaml:6: searcher.max_length: ", "give max_time instead"},
      {"Determined environment with an unknown key",
       "entrypoint: python3 train.py\nsearcher: {name: single, metric: m}\n"
       "environment:\n  image: x\n  colour: blue\n",
       "exp.yaml:5: environment.colour: ", "unknown key of Determined's environment"},
      {"max_length unknown unit",
       with_searcher("  name: single\n  metric: m\n  max_length: {minutes: 5}\n"),
       "exp.yaml:5: searcher.max_length.minutes: ", "unknown key"},
      {"max_length two units",
       with_searcher("  name: single\n  metric: m\n  max_length: {epochs: 5, batches: 9}\n"),
       "exp.yaml:5: searcher.max_length: ", "one unit"},
      {"random without max_trials",
       with_searcher("  name: random\n  metric: m\n  max_length: 10\n"),
       "exp.yaml:2: searcher.max_trials: ", "is required"},
      {"max_trials not an integer",
       with_searcher("  name: random\n  metric: m\n  "
                     "max_length: 10\n  max_trials: 2.5\n"),
       "exp.yaml:6: searcher.max_trials: ", "expected an integer, got 2.5"},
      {"divisor of 1",
       with_searcher("  name: asha\n  metric: m\n  max_length: 9\n  max_trials: 4\n  divisor: 1\n"),
       "exp.yaml:7: searcher.divisor: ", "must be greater than 1"},
      {"min_length above max_length",
       with_searcher("  name: hyperband\n  metric: m\n  max_length: 9\n  min_length: 10\n"),
       "exp.yaml:6: searcher.min_length: ", "greater than max_length 9"},
      {"max_rungs zero",
       with_searcher(
           "  name: asha\n  metric: m\n  max_length: 9\n  max_trials: 4\n  max_rungs: 0\n"),
       "exp.yaml:7: searcher.max_rungs: ", "must be at least 1"},
      {"unknown mode",
       with_searcher("  name: asha\n  metric: m\n  max_length: 9\n  max_trials: 4\n  mode: fast\n"),
       "exp.yaml:7: searcher.mode: ", "aggressive, standard, conservative"},
      {"smaller_is_better not a bool",
       with_searcher("  name: single\n  metric: m\n  max_length: 1\n  smaller_is_better: 1\n"),
       "exp.yaml:6: searcher.smaller_is_better: ", "expected true or false"},
      {"minval above maxval",
       with_extra("hyperparameters:\n  hidden: {type: int, minval: 256, maxval: 16}\n"),
       "exp.yaml:8: hyperparameters.hidden.minval: ", "256 is greater than maxval 16"},
      {"log range beyond a double",
       with_extra("hyperparameters:\n  lr: {type: log, minval: 400, maxval: 401}\n"),
       "exp.yaml:8: hyperparameters.lr.minval: ", "base^400 is infinite"},
      {"double range too wide",
       with_extra("hyperparameters:\n  x: {type: double, minval: -1e308, maxval: 1e308}\n"),
       "exp.yaml:8: hyperparameters.x.maxval: ", "too wide for a double"},
      {"nested error path",
       with_extra("hyperparameters:\n  arch:\n    depth:\n      type: int\n      minval: 1.5\n"
                  "      maxval: 4\n"),
       "exp.yaml:11: hyperparameters.arch.depth.minval: ", "expected an integer, got 1.5"},
      {"int range without maxval", with_extra("hyperparameters:\n  n: {type: int, minval: 1}\n"),
       "exp.yaml:8: hyperparameters.n.maxval: ", "is required"},
      {"unknown hyperparameter type",
       with_extra("hyperparameters:\n  p: {type: float, minval: 0, maxval: 1}\n"),
       "exp.yaml:8: hyperparameters.p.type: ", "did you mean 'double'?"},
      {"unknown key in a spec",
       with_extra("hyperparameters:\n  p:\n    type: double\n    min: 0\n    maxval: 1\n"),
       "exp.yaml:10: hyperparameters.p.min: ", "did you mean 'minval'?"},
      {"categorical without choices",
       with_extra("hyperparameters:\n  opt: {type: categorical, vals: []}\n"),
       "exp.yaml:8: hyperparameters.opt.vals: ", "empty list"},
      {"categorical vals not a list",
       with_extra("hyperparameters:\n  opt: {type: categorical, vals: sgd}\n"),
       "exp.yaml:8: hyperparameters.opt.vals: ", "expected a list"},
      {"log base of 1",
       with_extra("hyperparameters:\n  lr: {type: log, minval: -4, maxval: -1, base: 1}\n"),
       "exp.yaml:8: hyperparameters.lr.base: ", "not 1"},
      {"base on a double",
       with_extra("hyperparameters:\n  lr:\n    type: double\n    minval: 0\n    maxval: 1\n"
                  "    base: 2\n"),
       "exp.yaml:12: hyperparameters.lr.base: ", "only applies to log"},
      {"count of zero",
       with_extra("hyperparameters:\n  lr: {type: double, minval: 0, maxval: 1, count: 0}\n"),
       "exp.yaml:8: hyperparameters.lr.count: ", "must be at least 1"},
      {"count on a categorical",
       with_extra("hyperparameters:\n  o:\n    type: categorical\n    vals: [a]\n    count: 2\n"),
       "exp.yaml:11: hyperparameters.o.count: ", "only applies to int, double and log"},
      {"grid double without count",
       with_searcher("  name: grid\n  metric: m\n  max_length: 1\nhyperparameters:\n"
                     "  dropout:\n    type: double\n    minval: 0\n    maxval: 0.5\n"),
       "exp.yaml:7: hyperparameters.dropout.count: ", "required by the grid searcher"},
      {"grid int range too wide without count",
       with_searcher("  name: grid\n  metric: m\n  max_length: 1\nhyperparameters:\n"
                     "  seed: {type: int, minval: 0, maxval: 20000}\n"),
       "exp.yaml:7: hyperparameters.seed.count: ", "holds 20001"},
      {"grid too large",
       with_searcher("  name: grid\n  metric: m\n  max_length: 1\nhyperparameters:\n"
                     "  a: {type: int, minval: 1, maxval: 1000}\n"
                     "  b: {type: double, minval: 0, maxval: 1, count: 101}\n"),
       "exp.yaml:6: hyperparameters: ", "101000 points"},
      {"empty hyperparameter", with_extra("hyperparameters:\n  lr:\n"),
       "exp.yaml:8: hyperparameters.lr: ", "is empty"},
      {"slots_per_trial zero", with_extra("resources:\n  slots_per_trial: 0\n"),
       "exp.yaml:8: resources.slots_per_trial: ", "must be at least 1"},
      {"unknown devices", with_extra("resources:\n  devices: tpu\n"),
       "exp.yaml:8: resources.devices: ", "auto, cpu, gpu"},
      {"peer without port", with_extra("resources:\n  peers: [10.0.0.2:7070, gpu-box]\n"),
       "exp.yaml:8: resources.peers[1]: ", "host:port"},
      {"unknown resources key", with_extra("resources:\n  slots: 2\n"),
       "exp.yaml:8: resources.slots: ", "unknown key"},
      {"negative max_restarts", with_extra("max_restarts: -1\n"),
       "exp.yaml:7: max_restarts: ", "must be at least 0"},
      {"negative checkpoint period", with_extra("checkpoint:\n  period: -1\n"),
       "exp.yaml:8: checkpoint.period: ", "must be 0 (only at decision points and stops) or more"},
      {"negative rank_wait_timeout", with_extra("rank_wait_timeout: -1\n"),
       "exp.yaml:7: rank_wait_timeout: ", "must be at least 0"},
      {"text rank_wait_timeout", with_extra("rank_wait_timeout: soon\n"),
       "exp.yaml:7: rank_wait_timeout: ", "integer"},
      {"negative keep", with_extra("checkpoint:\n  keep_trial_best: -1\n"),
       "exp.yaml:8: checkpoint.keep_trial_best: ", "must be at least 0"},
      {"negative seed", with_extra("reproducibility:\n  seed: -5\n"),
       "exp.yaml:8: reproducibility.seed: ", "non-negative integer"},
      {"fractional seed", with_extra("reproducibility: {seed: 1.5}\n"),
       "exp.yaml:7: reproducibility.seed: ", "non-negative integer"},
      {"deterministic not a bool", with_extra("reproducibility:\n  deterministic: yes\n"),
       "exp.yaml:8: reproducibility.deterministic: ", "expected true or false"},
      {"data neither a map nor paths", with_extra("data: true\n"),
       "exp.yaml:7: data: ", "expected a string"},
      {"log_policies not a list", with_extra("log_policies: {name: x}\n"),
       "exp.yaml:7: log_policies: ", "must be a list"},
      {"log policy with an unknown action",
       with_extra("log_policies:\n  - {name: x, pattern: a, action: retry}\n"),
       "exp.yaml:8: log_policies[0].action: ", "must be cancel_retries or exclude_node"},
      {"old-shape log policy with an unknown type",
       with_extra("log_policies:\n  - pattern: a\n    action: {type: nope}\n"),
       "exp.yaml:9: log_policies[0].action: ", "must be cancel_retries or exclude_node"},
      {"log policy with a bad pattern",
       with_extra("log_policies:\n  - {name: x, pattern: 'a(', action: cancel_retries}\n"),
       "exp.yaml:8: log_policies[0].pattern: ", "not a regular expression"},
      {"log policy action without a pattern",
       with_extra("log_policies:\n  - {name: x, action: cancel_retries}\n"),
       "exp.yaml:8: log_policies[0].action: ", "needs a pattern"},
      {"log policy with an unknown key",
       with_extra("log_policies:\n  - {name: x, pattern: a, actoin: cancel_retries}\n"),
       "exp.yaml:8: log_policies[0].actoin: ", "did you mean 'action'?"},
      {"experiment_seed not an integer", with_extra("reproducibility: {experiment_seed: x}\n"),
       "exp.yaml:7: reproducibility.experiment_seed: ", "non-negative integer"},
      {"async_halving with num_rungs and max_rungs",
       with_searcher("  name: async_halving\n  metric: m\n  max_length: 10\n  max_trials: 4\n"
                     "  num_rungs: 3\n  max_rungs: 3\n"),
       "exp.yaml:8: searcher.max_rungs: ", "drop max_rungs"},
      {"async_halving with a mode other than aggressive",
       with_searcher("  name: async_halving\n  metric: m\n  max_length: 10\n  max_trials: 4\n"
                     "  num_rungs: 3\n  mode: standard\n"),
       "exp.yaml:8: searcher.mode: ", "one bracket"},
      {"bracket_rungs past max_rungs",
       with_searcher("  name: asha\n  metric: m\n  max_length: 10\n  max_trials: 4\n"
                     "  max_rungs: 3\n  bracket_rungs: [3, 4]\n"),
       "exp.yaml:8: searcher.bracket_rungs: ", "must be at most 3, got 4"},
      {"two warm starts",
       with_searcher("  name: single\n  metric: m\n  max_length: 10\n  source_trial_id: 7\n"
                     "  source_checkpoint_uuid: ab12\n"),
       "exp.yaml:7: searcher.source_checkpoint_uuid: ", "not both"},
      {"a warm start from trial 0",
       with_searcher("  name: single\n  metric: m\n  max_length: 10\n  source_trial_id: 0\n"),
       "exp.yaml:6: searcher.source_trial_id: ", "at least 1"},
      {"min_checkpoint_period in another unit",
       with_searcher("  name: single\n  metric: m\n  max_length: {batches: 100}\n"
                     "min_checkpoint_period: {epochs: 1}\n"),
       "exp.yaml:6: min_checkpoint_period: ", "write it in batches"},
      {"retry_repeated_failures not a bool", with_extra("retry_repeated_failures: 2\n"),
       "exp.yaml:7: retry_repeated_failures: ", "expected true or false"},
      {"a key neither cairn's nor Determined's", with_extra("log_policy: []\n"),
       "exp.yaml:7: log_policy: ", "did you mean 'log_policies'?"},
      {"data item not a string", with_extra("data:\n  - a\n  - [b]\n"),
       "exp.yaml:9: data[1]: ", "expected a string"},
      {"data path missing", with_extra("data:\n  - no/such/file.csv\n"),
       "exp.yaml:8: data[0]: ", "no/such/file.csv does not exist"},
      {"environment sets CAIRN_", with_extra("environment:\n  CAIRN_SEED: 3\n"),
       "exp.yaml:8: environment.CAIRN_SEED: ", "set by cairn"},
      {"environment bad name", with_extra("environment:\n  1ABC: x\n"),
       "exp.yaml:8: environment.1ABC: ", "not a valid variable name"},
      {"environment value a list", with_extra("environment:\n  PATHS: [a, b]\n"),
       "exp.yaml:8: environment.PATHS: ", "expected a string or a number"},
      {"environment not a map", with_extra("environment: [A=1]\n"),
       "exp.yaml:7: environment: ", "expected a map"},
      {"webhook not http", with_extra("notify:\n  webhook: ftp://example.com/x\n"),
       "exp.yaml:8: notify.webhook: ", "http:// or https://"},
      {"unknown notify key", with_extra("notify:\n  email: me@example.com\n"),
       "exp.yaml:8: notify.email: ", "unknown key"},
      {"webhook list item not http",
       with_extra("notify:\n  webhook:\n    - https://a.example/x\n    - hooks/y\n"),
       "exp.yaml:10: notify.webhook[1]: ", "http:// or https://"},
      {"webhook with a space", with_extra("notify:\n  webhook: \"https://a.example/x y\"\n"),
       "exp.yaml:8: notify.webhook: ", "without spaces"},
      {"notify.on unknown event",
       with_extra("notify:\n  webhook: https://a/x\n  on: [end, done]\n"),
       "exp.yaml:9: notify.on[1]: ", "end, trial_error, best_improved"},
      {"notify.webhook_env not a name", with_extra("notify:\n  webhook_env: my-hook\n"),
       "exp.yaml:8: notify.webhook_env: ", "must name an environment variable"},
      {"notify without a webhook", with_extra("notify:\n  on: [end]\n"),
       "exp.yaml:7: notify: ", "not where"},
      {"workdir missing",
       "entrypoint: x\nworkdir: nope\nsearcher: {name: single, metric: m, "
       "max_length: 1}\n",
       "exp.yaml:2: workdir: ", "does not exist"},
      {"workdir a file",
       "entrypoint: x\nworkdir: plain.txt\nsearcher: {name: single, metric: "
       "m, max_length: 1}\n",
       "exp.yaml:2: workdir: ", "is not a directory"},
      {"name a list", "name: [a]\n" + std::string(kMinimal),
       "exp.yaml:1: name: ", "expected a string"},
      {"entrypoint empty", "entrypoint: ''\nsearcher: {name: single, metric: m, max_length: 1}\n",
       "exp.yaml:1: entrypoint: ", "is empty"},
      {"entrypoint open quote",
       "entrypoint: python3 'train.py\nsearcher: {name: single, metric: m, max_length: 1}\n",
       "exp.yaml:1: entrypoint: ", "not closed"},
      {"entrypoint with a pipe",
       "entrypoint: python3 train.py | tee log\nsearcher: {name: single, metric: m, "
       "max_length: 1}\n",
       "exp.yaml:1: entrypoint: ", "without a shell"},
      {"unknown builtin",
       "entrypoint: builtin:cnn\nsearcher: {name: single, metric: m, max_length: 1}\n",
       "exp.yaml:1: entrypoint: ", "builtin:mlp"},
      {"top level a list", "- entrypoint: x\n", "exp.yaml:1: ", "top level must be a map"},
      {"empty file", "# nothing yet\n", "exp.yaml:1: ", "the config is empty"},
      {"key not a string", with_extra("environment:\n  1: x\n"),
       "exp.yaml:8: environment.1: ", "a key must be a string"},
      {"duplicate key", with_extra("max_restarts: 1\nmax_restarts: 2\n"),
       "exp.yaml:8: max_restarts: ", "duplicate key (first written on line 7)"},
      {"yaml syntax error", "entrypoint: x\nsearcher: {name: single\n  bad: [\n",
       "exp.yaml:", "yaml syntax error"},
  };
  return table;
}

TEST_CASE("config: each mistake names the file, line and key (exit 2)") {
  TempDir dir;
  dir.write("plain.txt", "not a directory\n");
  REQUIRE(mistakes().size() >= 20);
  for (const Mistake& mistake : mistakes()) {
    CAPTURE(mistake.what);
    CAPTURE(mistake.yaml);
    check_bad_input(parse(dir, mistake.yaml), mistake.prefix, mistake.detail);
  }
}

// A builtin:mlp config with `hparams` (YAML lines, indented two spaces) under
// hyperparameters (line 4 on) and a searcher on line 2.
std::string mlp_config(const std::string& hparams, const std::string& searcher = "random") {
  return "entrypoint: builtin:mlp\nsearcher: {name: " + searcher +
         ", metric: val_loss, max_length: 3, max_trials: 4}\nhyperparameters:\n" + hparams;
}

TEST_CASE("config: builtin:mlp refuses at config time what its trials would refuse") {
  TempDir dir;
  struct Case {
    const char* what;
    std::string yaml;
    std::string prefix;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {"unknown optimizer", mlp_config("  optimizer: rmsprop\n"),
       "exp.yaml:4: hyperparameters.optimizer: ", "must be \"sgd\" or \"adam\", got \"rmsprop\""},
      {"negative lr", mlp_config("  lr: -1\n"),
       "exp.yaml:4: hyperparameters.lr: ", "must be a number in (0, 10], got -1"},
      {"hidden 0", mlp_config("  hidden: 0\n"), "exp.yaml:4: hyperparameters.hidden: ", "got 0"},
      {"layers above 64", mlp_config("  layers: 65\n"),
       "exp.yaml:4: hyperparameters.layers: ", "[0, 64]"},
      {"unknown key", mlp_config("  lr: 0.1\n  hiden: 3\n"),
       "exp.yaml:5: hyperparameters.hiden: ", "unknown hyperparameter 'hiden'"},
      {"a nested map", mlp_config("  arch:\n    depth: 2\n"),
       "exp.yaml:4: hyperparameters.arch: ", "unknown hyperparameter 'arch'"},
      {"a categorical with a bad choice",
       mlp_config("  optimizer:\n    type: categorical\n    vals:\n      - sgd\n      - rmsprop\n"),
       "exp.yaml:8: hyperparameters.optimizer: ", "got \"rmsprop\" (one of its vals)"},
      {"an int range that includes 0",
       mlp_config("  hidden:\n    type: int\n    minval: 0\n    maxval: 64\n"),
       "exp.yaml:6: hyperparameters.hidden: ", "got 0 (its minval)"},
      {"a log range beyond lr's", mlp_config("  lr: {type: log, minval: -3, maxval: 2}\n"),
       "exp.yaml:4: hyperparameters.lr: ",
       "got 99.9999999999998 (base^x for the largest x below its maxval that the search draws)"},
      {"a double range for an integer key",
       mlp_config("  hidden: {type: double, minval: 16, maxval: 64}\n"),
       "exp.yaml:4: hyperparameters.hidden: ",
       "must be an integer in [1, 65536], got 63.99999999999999"},
      {"a grid point out of range",
       mlp_config("  momentum: {type: double, minval: 0.5, maxval: 1, count: 3}\n", "grid"),
       "exp.yaml:4: hyperparameters.momentum: ", "got 1.0 (its maxval)"},
      {"a random double range beyond momentum's",
       mlp_config("  momentum: {type: double, minval: 0.5, maxval: 1.5}\n"),
       "exp.yaml:4: hyperparameters.momentum: ",
       "got 1.4999999999999998 (the largest value below its maxval that the search draws)"},
      {"a features range too wide for the default samples",
       mlp_config("  dataset: teacher\n  features: {type: int, minval: 2, maxval: 200000}\n"),
       "exp.yaml:5: hyperparameters.features: ",
       "'samples' × 'features' must stay below 2e9, got 20000 × 200000 (its maxval)"},
      {"samples and features, both given",
       mlp_config("  samples: 100000000\n  dataset: teacher\n"
                  "  features: {type: int, minval: 2, maxval: 21}\n"),
       "exp.yaml:4: hyperparameters.samples: ", "got 100000000 × 21"},
      {"features that suit a searched dataset only with many other keys searched too",
       mlp_config("  dataset: {type: categorical, vals: [teacher, spirals]}\n"
                  "  features: {type: int, minval: 2, maxval: 20}\n"
                  "  lr: {type: double, minval: 0.01, maxval: 0.1}\n"
                  "  momentum: {type: double, minval: 0.1, maxval: 0.9}\n"
                  "  weight_decay: {type: double, minval: 0.0, maxval: 0.1}\n"
                  "  noise: {type: double, minval: 0.0, maxval: 0.1}\n"
                  "  val_fraction: {type: double, minval: 0.1, maxval: 0.2}\n"
                  "  hidden: {type: int, minval: 16, maxval: 64}\n"
                  "  layers: {type: int, minval: 1, maxval: 2}\n"
                  "  batch_size: {type: int, minval: 16, maxval: 64}\n"
                  "  threads: {type: int, minval: 1, maxval: 2}\n"),
       "exp.yaml:5: hyperparameters.features: ",
       "must be 2 for the spirals dataset, got 20 (its maxval)"},
      {"features that do not suit a searched dataset",
       mlp_config("  dataset: {type: categorical, vals: [teacher, spirals]}\n  features: 8\n"),
       "exp.yaml:5: hyperparameters.features: ", "must be 2 for the spirals dataset"},
      {"a length in batches",
       "entrypoint: builtin:mlp\nsearcher:\n  name: single\n  metric: val_loss\n"
       "  max_length: {batches: 100}\n",
       "exp.yaml:5: searcher.max_length.batches: ", "builtin:mlp trains in epochs"},
      {"a length in records",
       "entrypoint: builtin:mlp\nsearcher:\n  name: hyperband\n  metric: val_loss\n"
       "  max_length:\n    records: 5000\n",
       "exp.yaml:6: searcher.max_length.records: ", "builtin:mlp trains in epochs"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    check_bad_input(parse(dir, c.yaml), c.prefix, c.detail);
  }
  check_bad_input(parse(dir, mlp_config("  lr: 0.1\n"), {"hyperparameters.optimizer=rms"}),
                  "--set hyperparameters.optimizer=rms: hyperparameters.optimizer: ", "\"rms\"");

  // What builtin:mlp takes passes, searched or not.
  parse_ok(dir, mlp_config("  optimizer: {type: categorical, vals: [sgd, adam]}\n"
                           "  lr: {type: log, minval: -3, maxval: -0.5, base: 10}\n"
                           "  hidden: {type: int, minval: 16, maxval: 128}\n"
                           "  layers: {type: int, minval: 0, maxval: 3}\n"
                           "  momentum: {type: double, minval: 0, maxval: 0.99}\n"
                           "  dataset: teacher\n  features: 8\n"));
  parse_ok(dir, mlp_config("  layers: 0\n  hidden: 64.0\n"));  // softmax regression
  // No random draw reaches a double range's maxval; a grid's last point is maxval itself.
  parse_ok(dir, mlp_config("  momentum: {type: double, minval: 0.5, maxval: 1.0}\n"));
  parse_ok(dir, mlp_config("  momentum: {type: double, minval: 0.5, maxval: 1.0}\n", "asha"));
  parse_ok(dir, mlp_config("  momentum: {type: log, minval: -2, maxval: 0}\n"));
  // A grid searches its points only: these are all integers.
  parse_ok(dir, mlp_config("  hidden: {type: double, minval: 16, maxval: 32, count: 3}\n", "grid"));
  parse_ok(dir,
           "entrypoint: builtin:mlp\nsearcher: {name: single, metric: val_loss, "
           "max_length: {epochs: 3}}\n");
  // Other entrypoints keep their own hyperparameters and units.
  parse_ok(dir,
           "entrypoint: python3 train.py\nsearcher: {name: single, metric: val_loss, "
           "max_length: {batches: 100}}\nhyperparameters: {optimizer: rmsprop, hidden: 0}\n");
}

// What `cairn resume` and `cairn reproduce` read: the config stored with an experiment that
// was created before builtin:mlp's checks (or before they were tightened). It ran then, so
// it must still resume; only a new experiment's config is checked against them.
TEST_CASE("config: a stored builtin:mlp config is read without the checks of a new experiment") {
  TempDir dir;
  const std::string yaml =
      "entrypoint: builtin:mlp\nsearcher: {name: grid, metric: val_loss, max_length: {batches: "
      "9}}\nhyperparameters:\n  momentum: {type: double, minval: 0.5, maxval: 1, count: 3}\n";
  check_bad_input(parse(dir, yaml), "exp.yaml:", "builtin:mlp");
  Result<ExperimentConfig> stored =
      parse_experiment_config(yaml, "exp.yaml", dir.path(), {}, ConfigUse::kStoredExperiment);
  INFO(stored.status().message());
  REQUIRE(stored.ok());
  CHECK(stored->searcher.length_unit == "batches");

  // Through what `cairn resume` calls.
  const Json experiment = {{"name", "old"},
                           {"config_file", (dir.path() / "exp.yaml").string()},
                           {"config_text", yaml},
                           {"sets", Json::array({"searcher.max_length.batches=10"})}};
  Result<ExperimentConfig> resumed = cli::stored_config(experiment, StoreLayout(dir.path()));
  INFO(resumed.status().message());
  REQUIRE(resumed.ok());
  CHECK(resumed->name == "old");
  CHECK(resumed->searcher.max_length == 10);
  // Its other checks still hold: a stored config is not taken blindly.
  const Json broken = {{"config_file", (dir.path() / "exp.yaml").string()},
                       {"config_text", "entrypoint: builtin:mlp\n"}};
  CHECK_FALSE(cli::stored_config(broken, StoreLayout(dir.path())).ok());
}

TEST_CASE("config: reading the file") {
  TempDir dir;
  fs::create_directories(dir.path() / "project" / "code");
  fs::path file = dir.write("project/exp.yaml",
                            "entrypoint: builtin:mlp\nworkdir: code\n"
                            "searcher: {name: single, metric: val_loss, "
                            "max_length: 3}\n");
  Result<ExperimentConfig> loaded = load_experiment_config(file, {"searcher.max_length=5"});
  INFO(loaded.status().message());
  REQUIRE(loaded.ok());
  CHECK(loaded->workdir == (dir.path() / "project" / "code").lexically_normal());
  CHECK(loaded->name == "exp");
  CHECK(loaded->searcher.max_length == 5);

  Result<ExperimentConfig> missing = load_experiment_config(dir.path() / "nope.yaml", {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().exit_code() == 2);
  CHECK(missing.status().message().rfind((dir.path() / "nope.yaml").string() + ": ", 0) == 0);

  fs::path bad = dir.write("bad.yaml", "entrypoint: x\nsearcher: {name: single}\n");
  Result<ExperimentConfig> failed = load_experiment_config(bad, {});
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message() ==
        bad.string() +
            ":2: searcher.metric: is required; the validation metric to optimize, "
            "such as val_loss");
}

TEST_CASE("config: Determined's warm start keys name their source and where they were written") {
  TempDir dir;
  ExperimentConfig by_trial = parse_ok(dir, R"(entrypoint: python3 train.py
searcher:
  name: single
  metric: val_loss
  max_length: 10
  source_trial_id: 7
)");
  REQUIRE(by_trial.searcher.warm_start.has_value());
  CHECK(by_trial.searcher.warm_start->key == "searcher.source_trial_id");
  CHECK(by_trial.searcher.warm_start->trial_number == 7);
  CHECK(by_trial.searcher.warm_start->where.ends_with("exp.yaml:6"));
  ExperimentConfig by_uuid = parse_ok(dir, R"(entrypoint: python3 train.py
searcher: {name: single, metric: val_loss, max_length: 10,
           source_checkpoint_uuid: 0b9f3c2e-1d4a-4c5b-9e8f-7a6b5c4d3e2f}
)");
  REQUIRE(by_uuid.searcher.warm_start.has_value());
  CHECK(by_uuid.searcher.warm_start->trial_number == 0);
  CHECK(by_uuid.searcher.warm_start->checkpoint == "0b9f3c2e-1d4a-4c5b-9e8f-7a6b5c4d3e2f");
  CHECK_FALSE(parse_ok(dir, kMinimal).searcher.warm_start.has_value());
}

}  // namespace
}  // namespace cairn
