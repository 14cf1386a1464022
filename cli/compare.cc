// `cairn compare ID ID… [--json] [--diff]`: trials side by side, and what differs between
// them in plain words, by category (SPEC §1, §5): code, data, dependency, hparam, seed,
// config. Every trial after the first is compared with the first.
#include <iostream>
#include <optional>
#include <set>

#include "cli/code_change_summary.h"
#include "cli/command.h"
#include "cli/notify_redaction.h"
#include "cli/table.h"
#include "cli/trial_ref.h"
#include "store/code_snapshot.h"
#include "store/data_fingerprint.h"

namespace cairn::cli {

namespace {

struct Difference {
  std::string category, what;
  std::vector<Json> values;  // one per trial, in the order given
  std::string text;          // the sentence for humans (against the first trial)
};

std::string value_text(const Json& v) {
  if (v.is_null()) return "(none)";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return format_number(v.get<double>());
  return v.dump();
}

// Dotted keys to leaf values: {"a": {"b": 1}} -> {"a.b": 1}.
void flatten(const Json& j, const std::string& prefix, std::map<std::string, Json>& out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out[prefix] = j;
  }
}

// Compares the same keyed values across trials; adds a difference for each key whose
// values are not all equal.
void compare_maps(const std::string& category, const std::vector<std::map<std::string, Json>>& maps,
                  std::vector<Difference>& out) {
  std::set<std::string> keys;
  for (const auto& m : maps)
    for (const auto& [k, v] : m) keys.insert(k);
  for (const std::string& key : keys) {
    Difference d{category, key, {}, {}};
    for (const auto& m : maps) {
      auto it = m.find(key);
      d.values.push_back(it == m.end() ? Json(nullptr) : it->second);
    }
    bool same = true;
    for (const Json& v : d.values) same = same && v == d.values.front();
    if (same) continue;
    d.text = category + " " + key + ": " + value_text(d.values.front());
    for (size_t i = 1; i < d.values.size(); ++i) d.text += " → " + value_text(d.values[i]);
    out.push_back(std::move(d));
  }
}

// The parts of a config that are not already compared in their own category: hparams,
// the seed and environment have theirs; the workdir's content is the code; a name is a label.
std::map<std::string, Json> config_map(const Json& experiment) {
  Json config = redact_notify(experiment.value("config", Json::object()));
  for (const char* key : {"hyperparameters", "environment", "name", "workdir"}) config.erase(key);
  if (config.contains("reproducibility")) {
    config["reproducibility"].erase("seed");
    // `reproducibility: {seed: 7}` and no section at all ask for the same.
    if (config["reproducibility"].empty()) config.erase("reproducibility");
  }
  std::map<std::string, Json> out;
  flatten(config, "", out);
  out.erase("");
  return out;
}

// A trial whose record compare could read only in part: named on stderr and in --json's
// "warnings", while everything else is still compared.
struct Warning {
  std::string trial, category, message;
};

// Each trial's data fingerprint; nullopt, with a warning, where the record is damaged.
std::vector<std::optional<DataFingerprint>> read_data_records(const std::vector<TrialRef>& refs,
                                                              std::vector<Warning>& warnings) {
  std::vector<std::optional<DataFingerprint>> fps;
  for (const TrialRef& r : refs) {
    auto fp = data_fingerprint_from_json(r.experiment.value("data", Json()));
    if (fp.ok()) {
      fps.emplace_back(std::move(*fp));
      continue;
    }
    fps.emplace_back();
    warnings.push_back({r.id, "data", fp.status().message()});
  }
  return fps;
}

// Data: per file, against the first trial, in compare_data()'s words (those `cairn reproduce`
// uses): a file is "added" when the first trial lacks it, "removed" when every other trial
// does, "changed" otherwise. The values are the short hashes (null: no such file). A trial
// whose data record is damaged takes no part (its values are null; read_data_records warns),
// and the first readable one stands for the first.
void compare_data_files(const std::vector<std::optional<DataFingerprint>>& fps,
                        std::vector<Difference>& out) {
  std::vector<std::map<std::string, std::string>> short_hashes;
  std::vector<const DataFingerprint*> readable;
  for (const auto& fp : fps) {
    short_hashes.emplace_back();
    if (!fp) continue;
    for (const DataFile& f : fp->files) short_hashes.back()[f.path] = f.sha256.substr(0, 12);
    readable.push_back(&*fp);
  }
  std::map<std::string, std::string> how;  // path -> its word
  std::map<std::string, size_t> removed_in;
  for (size_t i = 1; i < readable.size(); ++i) {
    const DataChanges c = compare_data(*readable.front(), *readable[i]);
    for (const std::string& p : c.changed) how.emplace(p, "changed");
    for (const std::string& p : c.added) how[p] = "added";
    for (const std::string& p : c.removed) {
      how.emplace(p, "changed");
      ++removed_in[p];
    }
  }
  for (auto& [path, word] : how) {
    if (removed_in[path] == readable.size() - 1) word = "removed";
    Difference d{"data", path, {}, "data: " + path + " " + word};
    for (const auto& hashes : short_hashes) {
      auto it = hashes.find(path);
      d.values.push_back(it == hashes.end() ? Json(nullptr) : Json(it->second));
    }
    out.push_back(std::move(d));
  }
}

// Code: the snapshots' trees, file by file, each against the first trial's.
Status compare_code(const StoreLayout& store, const std::vector<TrialRef>& refs,
                    std::vector<Difference>& out) {
  const Json& first = refs.front().experiment.value("code", Json::object());
  std::optional<CodeRepository> repo;
  for (size_t i = 1; i < refs.size(); ++i) {
    const Json& code = refs[i].experiment.value("code", Json::object());
    if (code.value("tree", "") == first.value("tree", "")) continue;
    if (!first.contains("commit") || !code.contains("commit")) {
      Difference d{"code", "snapshot", {}, "code: not recorded for every trial"};
      for (const TrialRef& r : refs)
        d.values.push_back(r.experiment.value("code", Json::object()).value("tree", Json()));
      out.push_back(std::move(d));
      continue;
    }
    if (!repo) {
      auto opened = CodeRepository::open(store.root());
      if (!opened.ok()) return opened.status();
      repo.emplace(std::move(*opened));
    }
    auto changes =
        repo->diff(first["commit"].get<std::string>(), code["commit"].get<std::string>());
    if (!changes.ok()) return changes.status();
    for (const FileChange& c : *changes) {
      Difference d{"code", c.path, {}, {}};
      for (size_t k = 0; k < refs.size(); ++k)
        d.values.push_back(k == 0   ? ""
                           : k == i ? (c.kind == 'A'   ? "added"
                                       : c.kind == 'D' ? "removed"
                                                       : "modified")
                                    : "");
      out.push_back(std::move(d));
    }
    out.push_back(
        {"",
         "",
         {},
         "code: " + code_change_summary(*changes) + (refs.size() > 2 ? " in " + refs[i].id : "")});
  }
  return Status::Ok();
}

int compare(const GlobalOptions& global, const std::vector<std::string>& ids, bool json,
            bool patch) {
  if (ids.size() < 2) return fail(Status::BadInput("compare needs at least two ids"));
  auto store = open_store(global);
  if (!store.ok()) return fail(store.status());
  std::vector<TrialRef> refs;
  for (const std::string& id : ids) {
    auto ref = load_trial_ref(*store, id);
    if (!ref.ok()) return fail(ref.status());
    refs.push_back(std::move(*ref));
  }

  std::vector<Difference> diffs;
  if (Status st = compare_code(*store, refs, diffs); !st.ok()) return fail(st);

  std::vector<std::map<std::string, Json>> deps, hparams, seeds, configs;
  for (const TrialRef& r : refs) {
    std::map<std::string, Json> d;
    flatten(r.experiment.value("dependencies", Json::object()), "", d);
    d.erase("");
    deps.push_back(std::move(d));
    std::map<std::string, Json> h;
    flatten(r.trial.value("hparams", Json::object()), "", h);
    h.erase("");
    hparams.push_back(std::move(h));
    seeds.push_back({{"seed", r.trial.value("seed", Json())}});
    configs.push_back(config_map(r.experiment));
  }
  std::vector<Warning> warnings;
  const std::vector<std::optional<DataFingerprint>> data = read_data_records(refs, warnings);
  compare_data_files(data, diffs);
  // Said first, and on stderr, so that neither the table nor --json's stdout hides it.
  for (const Warning& w : warnings)
    std::cerr << "cairn: warning: trial " << w.trial << ": " << w.message << "; its " << w.category
              << " is left out of the comparison\n";
  compare_maps("dependency", deps, diffs);
  compare_maps("hparam", hparams, diffs);
  std::vector<Difference> seed_diffs;
  compare_maps("seed", seeds, seed_diffs);
  for (Difference& d : seed_diffs) {
    d.text = d.text.substr(std::string("seed ").size());  // "seed: 17 → 42"
    diffs.push_back(std::move(d));
  }
  compare_maps("config", configs, diffs);

  if (json) {
    Json doc{{"trials", Json::array()}, {"differences", Json::array()}};
    for (const TrialRef& r : refs) {
      Json t = trial_json(r.trial);
      t["experiment"] = r.experiment.value("id", Json());
      t["final_validation"] = r.validation.empty() ? Json() : r.validation.back().metrics;
      t["code"] = r.experiment.value("code", Json());
      const std::optional<DataFingerprint>& fp = data[static_cast<size_t>(&r - refs.data())];
      t["data_digest"] = fp && !fp->digest.empty() ? Json(fp->digest) : Json();
      doc["trials"].push_back(std::move(t));
    }
    doc["warnings"] = Json::array();
    for (const Warning& w : warnings)
      doc["warnings"].push_back(
          {{"trial", w.trial}, {"category", w.category}, {"message", w.message}});
    for (const Difference& d : diffs) {
      if (d.category.empty()) continue;  // a summary line, for humans only
      doc["differences"].push_back(
          {{"category", d.category}, {"what", d.what}, {"values", d.values}});
    }
    print_json(doc);
    return 0;
  }

  std::vector<std::string> header{""};
  for (const TrialRef& r : refs) header.push_back(r.id);
  Table table(header);
  auto row = [&](const std::string& name, auto&& cell) {
    std::vector<std::string> cells{name};
    for (const TrialRef& r : refs) cells.push_back(cell(r));
    table.add(std::move(cells));
  };
  row("state", [](const TrialRef& r) { return r.trial.value("state", ""); });
  row("steps",
      [](const TrialRef& r) { return std::to_string(r.trial.value("steps_completed", 0)); });
  row("seed", [](const TrialRef& r) { return value_text(r.trial.value("seed", Json())); });
  std::set<std::string> hkeys;
  for (const auto& h : hparams)
    for (const auto& [k, v] : h) hkeys.insert(k);
  for (const std::string& k : hkeys) {
    row(k, [&](const TrialRef& r) {
      std::map<std::string, Json> h;
      flatten(r.trial.value("hparams", Json::object()), "", h);
      return h.count(k) ? value_text(h[k]) : std::string("-");
    });
  }
  std::set<std::string> metrics;
  for (const TrialRef& r : refs) {
    const Json best = r.trial.value("best_validation", Json());
    if (best.is_object())
      for (auto it = best.begin(); it != best.end(); ++it) metrics.insert(it.key());
  }
  for (const std::string& m : metrics) {
    row("best " + m, [&](const TrialRef& r) {
      const Json bv = r.trial.value("best_validation", Json());
      return bv.is_object() && bv.contains(m) ? value_text(bv[m]) : std::string("-");
    });
    row("final " + m, [&](const TrialRef& r) {
      if (r.validation.empty() || !r.validation.back().metrics.contains(m)) return std::string("-");
      return value_text(r.validation.back().metrics[m]);
    });
  }
  row("code", [](const TrialRef& r) {
    const Json code = r.experiment.value("code", Json::object());
    std::string s = code.value("commit", "-").substr(0, 10);
    if (code.contains("git")) s += code["git"].value("dirty", false) ? " (dirty)" : "";
    return s;
  });
  row("data", [&](const TrialRef& r) {
    const std::optional<DataFingerprint>& fp = data[static_cast<size_t>(&r - refs.data())];
    if (!fp) return std::string("damaged");
    if (fp->files.empty()) return std::string("-");
    return std::to_string(fp->files.size()) + " files " + fp->digest.substr(0, 10);
  });
  table.print(std::cout);

  std::cout << "\n";
  size_t shown = 0;
  for (const Difference& d : diffs) {
    if (d.category == "code") continue;  // summarised by the line without a category
    if (shown++ == 0) std::cout << "differences (against " << refs.front().id << "):\n";
    std::cout << "  " << d.text << "\n";
  }
  if (shown == 0)
    std::cout << "no differences in code, data, dependencies, hyperparameters, seeds or config\n";

  if (patch) {
    auto repo = CodeRepository::open(store->root());
    if (!repo.ok()) return fail(repo.status());
    const std::string a = refs.front().experiment.value("code", Json::object()).value("commit", "");
    for (size_t i = 1; i < refs.size(); ++i) {
      const std::string b = refs[i].experiment.value("code", Json::object()).value("commit", "");
      if (a.empty() || b.empty()) continue;
      auto text = repo->patch(a, b);
      if (!text.ok()) return fail(text.status());
      std::cout << "\n" << *text;
    }
  }
  return 0;
}

}  // namespace

void add_compare(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto ids = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  auto patch = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "compare", "Trials side by side, and what differs: code, data, dependencies, hparams, seeds");
  cmd->add_option("ids", *ids, "Trials (EXP.N) or experiments (EXP: its best trial), two or more")
      ->required()
      ->expected(2, -1)
      ->type_name("ID");
  cmd->add_flag("--json", *json, "Print one JSON document");
  cmd->add_flag("--diff", *patch, "Also print the code changes as a patch");
  cmd->callback([&global, &outcome, ids, json, patch] {
    outcome.exit_code = compare(global, *ids, *json, *patch);
  });
}

}  // namespace cairn::cli
