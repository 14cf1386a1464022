#include "engine/coordinator/entrypoint_check.h"

#include <filesystem>
#include <regex>

#include "engine/coordinator/trial_process.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

// The script a Python command line runs: the first argument that is not an option, or
// nothing with -m/-c (a module or a string) or no such argument. Options that take a value
// (-W, -X) skip it.
const std::string* python_script(const std::vector<std::string>& argv) {
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.rfind("-m", 0) == 0 || a.rfind("-c", 0) == 0 || a == "-" || a == "--") return nullptr;
    if (a == "-W" || a == "-X") {
      ++i;
      continue;
    }
    if (!a.empty() && a[0] == '-') continue;
    return &a;
  }
  return nullptr;
}

}  // namespace

Status check_entrypoint(const ExperimentConfig& config) {
  if (is_builtin_entrypoint(config) || config.entrypoint.empty()) return Status::Ok();
  const std::string where =
      config.entrypoint_where.empty() ? config.config_path.string() : config.entrypoint_where;
  std::map<std::string, std::string> env = current_environment();
  for (const auto& [k, v] : config.environment) env[k] = v;
  auto program = resolve_program(config.entrypoint[0], config.workdir, env);
  if (!program.ok()) return Status::BadInput(where + ": " + program.status().message());
  // Only what is named like a Python interpreter: other programs' arguments mean anything.
  static const std::regex python_name(R"(^python[0-9.]*$)");
  if (!std::regex_match(fs::path(*program).filename().string(), python_name)) return Status::Ok();
  const std::string* script = python_script(config.entrypoint);
  if (script == nullptr) return Status::Ok();
  const fs::path path =
      fs::path(*script).is_absolute() ? fs::path(*script) : config.workdir / *script;
  std::error_code ec;
  // A file, or a directory or zip archive with __main__.py: python runs those too.
  if (fs::exists(path, ec)) return Status::Ok();
  return Status::BadInput(where + ": entrypoint: python script '" + *script + "' not found in " +
                          config.workdir.string());
}

}  // namespace cairn
