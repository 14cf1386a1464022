// `cairn export CKPT DIR`: a checkpoint's files as plain files.
#include <iostream>

#include "cli/command.h"
#include "store/checkpoint_files.h"
#include "store/checkpoint_lookup.h"

namespace cairn::cli {
namespace fs = std::filesystem;

namespace {

int export_checkpoint(const GlobalOptions& global, const std::string& ref, const std::string& dir) {
  auto store = open_store(global);
  if (!store.ok()) return fail(store.status());
  auto ckpt = find_checkpoint(*store, ref);
  if (!ckpt.ok()) return fail(ckpt.status(), "`cairn checkpoints ID` lists checkpoints");
  std::error_code ec;
  if (dir.empty()) return fail(Status::BadInput("DIR is empty: give a new or empty directory"));
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    return fail(Status::BadInput(dir + " is a file: give a new or empty directory"));
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
    return fail(Status::BadInput(dir + " exists and is not an empty directory"));
  ObjectStore objects(store->objects());
  const std::string id = ckpt->record["id"].get<std::string>();
  auto manifest = load_manifest(objects, id);
  if (!manifest.ok()) return fail(manifest.status());
  Status st = materialize_checkpoint(objects, *manifest, dir);
  if (!st.ok()) return fail(st);
  std::cout << "cairn: exported checkpoint " << id.substr(0, 12) << " of trial "
            << ckpt->record.value("trial", "") << " (" << manifest->files.size() << " files, "
            << manifest->bytes << " bytes) to " << dir << "\n";
  return 0;
}

}  // namespace

void add_export(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto ref = std::make_shared<std::string>();
  auto dir = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("export", "Write a checkpoint's files as plain files into DIR");
  cmd->add_option("checkpoint", *ref, "Checkpoint: short hash, TRIAL@latest or TRIAL@best")
      ->required()
      ->type_name("CKPT");
  cmd->add_option("dir", *dir, "Destination directory (new or empty)")
      ->required()
      ->type_name("DIR");
  cmd->callback(
      [&global, &outcome, ref, dir] { outcome.exit_code = export_checkpoint(global, *ref, *dir); });
}

}  // namespace cairn::cli
