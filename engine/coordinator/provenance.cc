#include "engine/coordinator/provenance.h"

#include <unistd.h>

#include "common/file_util.h"
#include "engine/coordinator/dependency_fingerprint.h"
#include "engine/coordinator/store_links.h"
#include "store/code_snapshot.h"
#include "store/data_fingerprint.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

uint64_t snapshot_limit(const ExperimentConfig& config) {
  return static_cast<uint64_t>(config.reproducibility.snapshot_limit_mb) << 20;
}

fs::path absolute_data_path(const ExperimentConfig& config, const std::string& path) {
  fs::path p(path);
  return (p.is_absolute() ? p : config.workdir / p).lexically_normal();
}

Json code_json(const CodeSnapshot& snap) {
  Json code{
      {"commit", snap.commit}, {"tree", snap.tree}, {"files", snap.files}, {"bytes", snap.bytes}};
  if (snap.git) {
    code["git"] = {{"head", snap.git->head},
                   {"branch", snap.git->branch},
                   {"dirty", snap.git->dirty},
                   {"repo_root", snap.git->repo_root}};
  }
  return code;
}

// What a data link holds: a path relative to the link when both lie in the tree that holds
// the store (its parent directory: the project, in the usual layout with .cairn/ inside it;
// with --store elsewhere, wherever that store's parent is), so that moving the project together
// with its store moves both ends and the link still finds the data (resume and reproduce read it at
// the new place); the absolute path of data elsewhere, which a move leaves where it is. Only the
// parents are resolved, so a data entry that is itself a link stays one, unless it is a link in
// the store (through_store_links()): a re-run of a reproduce runs from its checkout, whose data
// entries are such links, and a chain through the checkout would dangle once `cairn gc` (or a
// user) removes it.
fs::path link_target(const StoreLayout& store, const fs::path& target, const fs::path& link) {
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(store.root(), ec);
  if (ec) return target;
  const fs::path tree = root.parent_path();
  const fs::path resolved = resolve_parents(target, ec);
  if (ec) return target;
  const fs::path to = through_store_links(root, resolved);
  // Data elsewhere: where it is given, or, reached through the store's links, where they lead.
  const fs::path absolute = to == resolved ? target : to;
  const fs::path from = fs::weakly_canonical(link.parent_path(), ec);
  if (ec || !lies_inside(to, tree) || !lies_inside(from, tree)) return absolute;
  return to.lexically_relative(from);
}

fs::path without_trailing_slash(const fs::path& p) {
  std::string text = p.string();
  while (text.size() > 1 && text.back() == '/') text.pop_back();
  return text;
}

// Data that was too large to keep is linked from the run directory to the live path, so
// relative paths in the trial's code still find it.
Status link_unstored_data(const StoreLayout& store, const ExperimentConfig& config,
                          const fs::path& dir) {
  for (const std::string& path : config.data) {
    if (fs::path(path).is_absolute()) continue;
    const fs::path link = without_trailing_slash((dir / path).lexically_normal());
    // `../data` puts the link beside the run directory, where the trial's relative path
    // looks; but never outside the store: the link replaces what is at its place, and that
    // could be the user's own files.
    if (!lies_inside(link, store.root())) continue;
    std::error_code ec;
    fs::create_directories(link.parent_path(), ec);
    fs::remove_all(link, ec);
    const fs::path target = without_trailing_slash(absolute_data_path(config, path));
    fs::create_symlink(link_target(store, target, link), link, ec);
    if (ec) return Status::Io("cannot link " + link.string() + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace

Result<Json> capture_provenance(const StoreLayout& store, const ExperimentConfig& config,
                                const std::string& message, const DataFingerprint* data_read,
                                const std::string& recorded_blas_core) {
  SnapshotOptions options;
  options.size_limit = snapshot_limit(config);
  // Only what lies inside the workdir needs leaving out (a workdir may itself lie inside
  // the store: `cairn reproduce` runs from one there). A data path is resolved up to its
  // parent only: in a run directory or a reproduce checkout it is a link to data elsewhere,
  // and the link is data, not code.
  std::error_code ec;
  const fs::path workdir = fs::weakly_canonical(config.workdir, ec);
  auto exclude = [&](const fs::path& given) {
    std::error_code ec2;
    const fs::path plain = without_trailing_slash(given);
    const fs::path path = fs::weakly_canonical(plain.parent_path(), ec2) / plain.filename();
    if (lies_inside(path, workdir)) options.exclude.push_back(path);
  };
  exclude(store.root());
  for (const std::string& path : config.data) exclude(absolute_data_path(config, path));

  Result<DataFingerprint> data =
      data_read ? Result<DataFingerprint>(*data_read)
                : fingerprint_data(store, config.workdir, config.data, options.size_limit);
  if (!data.ok()) return data.status();
  auto repo = CodeRepository::open(store.root());
  if (!repo.ok()) return repo.status();
  auto snap = repo->snapshot(config.workdir, options, message);
  if (!snap.ok()) return snap.status();

  DependencyInput deps;
  deps.entrypoint = config.entrypoint;
  deps.workdir = config.workdir;
  deps.environment = config.environment;
  deps.builtin = is_builtin_entrypoint(config);
  deps.deterministic = config.reproducibility.deterministic;
  deps.recorded_blas_core = recorded_blas_core;
  return Json{{"code", code_json(*snap)},
              {"data", to_json(*data)},
              {"dependencies", dependency_fingerprint(store, deps)}};
}

Status materialize_workdir(const StoreLayout& store, const Json& experiment,
                           const ExperimentConfig& config, const fs::path& dest) {
  auto repo = CodeRepository::open(store.root());
  if (!repo.ok()) return repo.status();
  const Json& code = experiment["code"];
  Status st = repo->checkout(code.value("commit", ""), dest);
  if (!st.ok()) return st;
  // A damaged record says nothing trustworthy about where the data is: refused, rather than
  // taken for data too large to keep and linked to whatever is at the live path now.
  auto data = data_fingerprint_from_json(experiment.value("data", Json::object()));
  if (!data.ok()) return data.status();
  if (data->stored) return restore_data(store, *data, dest);
  return link_unstored_data(store, config, dest);
}

Result<fs::path> prepare_run_directory(const StoreLayout& store, int64_t exp_id,
                                       const Json& experiment, const ExperimentConfig& config) {
  if (!experiment.contains("code")) return config.workdir;
  const fs::path dir = store.experiment(exp_id) / "code";
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return dir;
  // Built beside its final name and renamed into place, so a crash mid-way leaves no half
  // directory that a later resume would take for a complete one.
  const fs::path partial =
      store.experiment(exp_id) / ("code.partial-" + std::to_string(::getpid()));
  fs::remove_all(partial, ec);
  ScopedDirRemover cleanup(partial);
  Status st = materialize_workdir(store, experiment, config, partial);
  if (!st.ok()) return st;
  fs::rename(partial, dir, ec);
  if (ec) return Status::Io("cannot create " + dir.string() + ": " + ec.message());
  cleanup.release();
  return dir;
}

}  // namespace cairn
