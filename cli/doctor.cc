// `cairn doctor`: checks what cairn needs and can use here — the store, code snapshots,
// CPU and GPU devices, OpenBLAS's kernels (cairn's and NumPy's), the CUDA driver, NCCL,
// Gloo, Python and the SDK — one line each,
// with what to do about a problem.
#include <git2/version.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/blas_report.h"
#include "cli/command.h"
#include "collective/gloo_collective.h"
#include "common/cpu_features.h"
#include "common/embedded.h"
#include "common/file_util.h"
#include "engine/coordinator/subprocess.h"
#include "engine/coordinator/trial_process.h"
#include "gpu/runtime_probe.h"
#include "gpu/version_text.h"
#include "trainer/blas.h"
#include "trainer/blas_core_type.h"

namespace cairn::cli {
namespace fs = std::filesystem;

namespace {

struct Check {
  std::string name;
  std::string status;  // "ok", "warn" (works, with less), "fail" (cairn cannot work)
  std::string detail;
};

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown model";
}

Check store_check(const GlobalOptions& global) {
  auto store = open_store(global);
  if (!store.ok()) {
    if (store.status().kind() == ErrorKind::kNotFound)
      return {"store", "ok", "none here yet: `cairn run` creates .cairn/ beside its config"};
    return {"store", "fail", store.status().message()};
  }
  const fs::path probe = store->tmp() / ("doctor-" + std::to_string(::getpid()));
  Status st = write_file_atomic(probe, "ok");
  std::error_code ec;
  fs::remove(probe, ec);
  if (!st.ok())
    return {"store", "fail", store->root().string() + " is not writable: " + st.message()};
  return {"store", "ok",
          store->root().string() + " (" + std::to_string(list_experiment_ids(*store).size()) +
              " experiments)"};
}

// The kernels an OpenBLAS runs, against what this CPU supports (cli/blas_report.h):
// `who` is "OpenBLAS" (cairn's own) or "NumPy's OpenBLAS (FILE)".
Check blas_check(const std::string& name, const std::string& who, const std::string& core,
                 bool builtin) {
  const BlasReport r = blas_report();
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  const std::string set_by =
      forced && *forced ? " (set by OPENBLAS_CORETYPE=" + std::string(forced) + ")" : "";
  const auto type = blas::find_core_type(core);
  // What builtin:mlp trials run: the user's variable wins (trainer/blas_core_type.h).
  std::string trials;
  if (builtin && !r.cairn_core.empty())
    trials = !set_by.empty() ? "; builtin:mlp trials run them too (a user's OPENBLAS_CORETYPE "
                               "wins)"
                             : "; builtin:mlp runs " + r.cairn_core + "'s, " + r.deterministic +
                                   "'s with deterministic: true";
  if (r.cairn_core.empty() || !blas::falls_short(core, this_cpu_features()))
    return {name, "ok",
            who + " runs its " + core + " kernels" + set_by +
                (r.cairn_core.empty() ? "" : ", as new as this CPU supports (" + r.cpu + ")") +
                trials};
  const bool generic = type && type->needs <= blas::IsaLevel::kSse3;
  std::string detail = who + " runs its " + (generic ? "generic " : "") + core + " kernels" +
                       set_by + " on a CPU that supports " + r.cairn_core + "'s (" + r.cpu + "): ";
  if (!set_by.empty())
    detail += "unset OPENBLAS_CORETYPE, or set it to " + r.cairn_core +
              (builtin ? " (builtin:mlp trials run what it says too)" : "");
  else if (builtin)
    detail += "builtin:mlp trials get OPENBLAS_CORETYPE=" + r.cairn_core +
              " from cairn; for your own trials, set it in the config's environment:";
  else
    detail += "set OPENBLAS_CORETYPE=" + r.cairn_core +
              " in the config's environment: (cairn does not change a trial's numerics)";
  return {name, "warn", detail};
}

// `blas`: the OpenBLAS the interpreter's NumPy (and torch) loads, through the SDK's own
// lookup (sdk/python/cairn.py, _loaded_openblas); one library serves both on Debian.
Check python_check(std::optional<Check>* blas) {
  const auto env = process_environment();
  auto python = resolve_program("/usr/bin/python3", ".", env);
  if (!python.ok()) python = resolve_program("python3", ".", env);
  if (!python.ok())
    return {"python", "warn", "no python3: Python trials cannot run (builtin:mlp can)"};
  // The SDK cairn hands to trials, imported by that interpreter.
  auto dir = make_unique_dir(fs::temp_directory_path(), "cairn-doctor-");
  if (!dir.ok()) return {"python", "warn", dir.status().message()};
  ScopedDirRemover cleanup(*dir);
  if (!write_file_atomic(*dir / "cairn.py", kPythonSdkSource).ok())
    return {"python", "warn", "cannot write the SDK to " + dir->string()};
  auto with_sdk = env;
  with_sdk["PYTHONPATH"] = dir->string();
  const std::string out = run_capture({*python, "-c",
                                       "import sys, cairn\n"
                                       "try:\n    import torch; t = 'torch ' + torch.__version__\n"
                                       "except Exception:\n    t = 'no torch'\n"
                                       "try:\n    import numpy\n"
                                       "except Exception:\n    pass\n"
                                       "print(sys.version.split()[0], t)\n"
                                       // The OpenBLAS that NumPy (and torch) loaded, if any.
                                       "for p, c in cairn._loaded_openblas():\n"
                                       "    print('blas', c, p)\n"},
                                      with_sdk, 60);
  if (out.empty()) return {"python", "fail", *python + " cannot import cairn's Python SDK"};
  std::istringstream lines(out);
  std::string line, blas_line;
  std::getline(lines, line);
  if (std::getline(lines, blas_line) && blas_line.rfind("blas ", 0) == 0) {
    const size_t space = blas_line.find(' ', 5);
    if (space != std::string::npos)
      *blas = blas_check("pyblas", "NumPy's OpenBLAS (" + blas_line.substr(space + 1) + ")",
                         blas_line.substr(5, space - 5), /*builtin=*/false);
  }
  return {"python", "ok", *python + " " + line + "; the SDK imports"};
}

std::vector<Check> run_checks(const GlobalOptions& global) {
  std::vector<Check> checks;
  checks.push_back(store_check(global));
  checks.push_back({"git", "ok",
                    std::string("libgit2 ") + LIBGIT2_VERSION +
                        " (built in): code snapshots need no git installation"});
  checks.push_back(
      {"cpu", "ok",
       std::to_string(std::thread::hardware_concurrency()) + " cores, " + cpu_model()});
  // cairn's OpenBLAS: the kernels it runs here, and builtin:mlp's (cli/blas_report.h).
  checks.push_back(blas_check("blas", "OpenBLAS", blas::core_in_use(), /*builtin=*/true));
  // The same loaders, and so the same checks, as a trial's (gpu/runtime_probe.h).
  const GpuRuntime gpu = probe_gpu_runtime(/*libraries=*/true);
  const bool have_gpu = gpu.driver_usable();
  if (have_gpu)
    checks.push_back({"gpu", "ok", gpu.describe()});
  else if (gpu.driver)
    checks.push_back(
        {"gpu", "warn",
         gpu.driver_status.message() +
             (gpu.device_count > 0 ? "; " + std::to_string(gpu.device_count) +
                                         " GPU(s) for trials that bring their own CUDA, none for "
                                         "builtin:mlp"
                                   : ": trials run on CPU")});
  else
    checks.push_back({"gpu", "ok", "no CUDA driver (libcuda.so.1): trials run on CPU"});
  if (gpu.nccl_usable())
    checks.push_back({"nccl", "ok", "libnccl.so.2 " + nccl_version_text(gpu.nccl_version)});
  else
    checks.push_back(
        {"nccl", have_gpu ? "warn" : "ok",
         gpu.nccl_status.message() + ": no GPU all-reduce (install NCCL for multi-GPU trials)"});
  // builtin:mlp compiles its kernels with NVRTC and multiplies with cuBLAS: without either
  // it trains on the CPU even where there is a GPU.
  checks.push_back(gpu.cublas
                       ? Check{"cublas", "ok", "libcublas " + gpu.cublas_version}
                       : Check{"cublas", have_gpu ? "warn" : "ok",
                               gpu.cublas_status.message() + ": builtin:mlp trains on the CPU"});
  checks.push_back(gpu.nvrtc
                       ? Check{"nvrtc", "ok", "libnvrtc " + gpu.nvrtc_version}
                       : Check{"nvrtc", have_gpu ? "warn" : "ok",
                               gpu.nvrtc_status.message() + ": builtin:mlp trains on the CPU"});
  {
    // A real all-reduce between two threads over loopback TCP: what builtin:mlp's ranks do.
    const auto start = std::chrono::steady_clock::now();
    const Status gloo = gloo_loopback_check(std::chrono::seconds(10));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    if (gloo.ok())
      checks.push_back({"gloo", "ok",
                        "2 ranks all-reduced over TCP on 127.0.0.1 in " + std::to_string(ms) +
                            " ms (builtin:mlp data parallel on CPU)"});
    else
      checks.push_back({"gloo", "warn",
                        "CPU all-reduce fails: " + gloo.message() +
                            " (data-parallel builtin:mlp trials cannot run)"});
  }
  std::optional<Check> python_blas;
  checks.push_back(python_check(&python_blas));
  if (python_blas) checks.push_back(*python_blas);
  return checks;
}

int doctor(const GlobalOptions& global, bool json) {
  const std::vector<Check> checks = run_checks(global);
  const bool failed =
      std::any_of(checks.begin(), checks.end(), [](const Check& c) { return c.status == "fail"; });
  if (json) {
    Json doc = Json::array();
    for (const Check& c : checks)
      doc.push_back({{"check", c.name}, {"status", c.status}, {"detail", c.detail}});
    print_json(doc);
  } else {
    for (const Check& c : checks) {
      std::string name = c.name;
      name.resize(8, ' ');
      std::cout << (c.status == "ok"     ? "ok    "
                    : c.status == "warn" ? "warn  "
                                         : "FAIL  ")
                << name << c.detail << "\n";
    }
  }
  return failed ? 1 : 0;
}

}  // namespace

void add_doctor(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Check the environment: store, git, CPU/GPU devices, OpenBLAS kernels, CUDA, NCCL, Gloo, "
      "Python SDK");
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([&global, &outcome, json] { outcome.exit_code = doctor(global, *json); });
}

}  // namespace cairn::cli
