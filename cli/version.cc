// `cairn version`: version and build details.
#include <cblas.h>
#include <git2/version.h>
#include <openssl/opensslv.h>
#include <rocksdb/version.h>

#include <iostream>

#include "cli/blas_report.h"
#include "cli/command.h"
#include "common/build_info.h"
#include "gpu/runtime_probe.h"

namespace cairn::cli {

namespace {

#ifdef CAIRN_STATIC_LINK
constexpr const char* kStaticLibs = "static";
#else
constexpr const char* kStaticLibs = "shared";
#endif

// What `version --json` says of cuBLAS and NVRTC, which it does not load.
const Json kCheckedByDoctor = {
    {"loaded_at_run_time", true}, {"checked", false}, {"see", "cairn doctor"}};

Json version_json() {
  // Cheap on purpose: the driver and NCCL only (the loaders the trainer and the collective
  // use). Not the size of the files decides but what loading them touches: opening libnccl
  // (218 MB here) adds about 3 MB of resident memory and no measurable time, libcublas
  // (54 MB, but it brings libcublasLt, 542 MB) about 215 MB and 70 ms, libnvrtc (109 MB)
  // about 33 MB; `cairn version` went from 13 MB and ~0 s to 260 MB and ~0.1 s with both.
  // `cairn doctor` checks them.
  const GpuRuntime gpu = probe_gpu_runtime(/*libraries=*/false);
  auto rocks = std::to_string(ROCKSDB_MAJOR) + "." + std::to_string(ROCKSDB_MINOR) + "." +
               std::to_string(ROCKSDB_PATCH);
  return Json{{"version", CAIRN_VERSION},
              {"git", kGitRev},
              {"build", CAIRN_BUILD_TYPE},
              {"compiler", CAIRN_COMPILER},
              {"libraries",
               {{"rocksdb", {{"version", rocks}, {"linked", kStaticLibs}}},
                {"libgit2", {{"version", LIBGIT2_VERSION}, {"linked", kStaticLibs}}},
                {"yaml-cpp", {{"linked", kStaticLibs}}},
                // Shared always: libcurl loads the shared libssl/libcrypto (docs/peers.md).
                {"openssl", {{"version", OPENSSL_VERSION_TEXT}, {"linked", "shared"}}},
                {"openblas",
                 {{"config", openblas_get_config()},
                  {"linked", kStaticLibs},
                  // The kernels it runs here, and builtin:mlp's (cli/blas_report.h).
                  {"kernels", blas_report_json(blas_report())}}},
                // Debian ships Gloo as a shared library only; it brings the shared libstdc++.
                {"gloo", {{"linked", "shared"}}},
                {"libstdc++", {{"linked", "shared"}}}}},
              {"cuda",
               {{"loaded_at_run_time", true},
                {"driver", gpu.driver},
                {"driver_version", gpu.driver_version},
                {"devices", gpu.device_count},
                // Whether cairn's GPU code can use the driver (every entry point, a device).
                {"usable", gpu.driver_usable()}}},
              {"nccl",
               {{"loaded_at_run_time", true},
                {"found", gpu.nccl},
                {"version", gpu.nccl_version},
                // Whether cairn's collective can use it (NCCL 2.14 or later, every entry point).
                {"usable", gpu.nccl_usable()}}},
              // Kept for scripts that read these keys (earlier versions filled them): never
              // checked here, see above.
              {"cublas", kCheckedByDoctor},
              {"nvrtc", kCheckedByDoctor},
              {"gpu", gpu.describe()}};
}

int version(bool json) {
  Json v = version_json();
  if (json) {
    print_json(v);
    return 0;
  }
  std::cout << "cairn " << v["version"].get<std::string>() << " (git "
            << v["git"].get<std::string>() << ", " << v["build"].get<std::string>() << ", "
            << v["compiler"].get<std::string>() << ")\n";
  for (const auto& [name, lib] : v["libraries"].items()) {
    std::cout << "  " << name;
    if (lib.contains("version")) std::cout << " " << lib["version"].get<std::string>();
    if (lib.contains("config")) std::cout << " (" << lib["config"].get<std::string>() << ")";
    std::cout << ", " << lib["linked"].get<std::string>() << "\n";
  }
  std::cout << "  OpenBLAS kernels: " << blas_report_text(blas_report()) << "\n";
  std::cout << "  GPU: " << v["gpu"].get<std::string>() << " (loaded at run time)\n";
  return 0;
}

}  // namespace

void add_version(CLI::App& app, GlobalOptions&, Outcome& outcome) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("version", "Print version and build details");
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([&outcome, json] { outcome.exit_code = version(*json); });
}

}  // namespace cairn::cli
