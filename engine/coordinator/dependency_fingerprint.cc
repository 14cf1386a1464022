#include "engine/coordinator/dependency_fingerprint.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/build_info.h"
#include "common/file_util.h"
#include "engine/coordinator/subprocess.h"
#include "engine/coordinator/trial_blas_core.h"
#include "engine/coordinator/trial_process.h"
#include "gpu/cuda_driver.h"
#include "gpu/nccl_library.h"
#include "store/data_fingerprint.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

std::string first_line_value(const fs::path& file, const std::string& key, char sep) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t at = line.find(sep);
    if (at == std::string::npos) continue;
    std::string v = line.substr(at + 1);
    const size_t b = v.find_first_not_of(" \t\"");
    const size_t e = v.find_last_not_of(" \t\"");
    return b == std::string::npos ? "" : v.substr(b, e - b + 1);
  }
  return "";
}

// The ELF program interpreter (PT_INTERP) of a dynamically linked executable; "" for
// anything else, which is never run.
std::string elf_interpreter(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  unsigned char ident[64] = {};
  if (!in.read(reinterpret_cast<char*>(ident), 64)) return "";
  if (std::memcmp(ident,
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      ident[4] != 2 /* 64-bit */)
    return "";
  uint64_t phoff;
  uint16_t phentsize, phnum;
  std::memcpy(&phoff, ident + 32, 8);
  std::memcpy(&phentsize, ident + 54, 2);
  std::memcpy(&phnum, ident + 56, 2);
  for (uint16_t i = 0; i < phnum && i < 256; ++i) {
    unsigned char ph[56] = {};
    in.seekg(static_cast<std::streamoff>(phoff + uint64_t{i} * phentsize));
    if (!in.read(reinterpret_cast<char*>(ph), 56)) return "";
    uint32_t type;
    uint64_t offset, size;
    std::memcpy(&type, ph, 4);
    std::memcpy(&offset, ph + 8, 8);
    std::memcpy(&size, ph + 32, 8);
    if (type != 3 /* PT_INTERP */ || size == 0 || size > 4096) continue;
    std::string interp(size, '\0');
    in.seekg(static_cast<std::streamoff>(offset));
    if (!in.read(interp.data(), static_cast<std::streamsize>(size))) return "";
    return std::string(interp.c_str());
  }
  return "";
}

// "1.2.13" from /lib/…/libz.so.1.2.13; "" when the file name carries no version.
std::string version_from_name(const std::string& file_name) {
  static const std::regex re(R"(\.so\.([0-9]+(\.[0-9]+)+)$)");
  std::smatch m;
  if (std::regex_search(file_name, m, re)) return m[1];
  return "";
}

class Fingerprint {
 public:
  Fingerprint(const StoreLayout& store, const DependencyInput& in)
      : hasher_(store), in_(in), env_(process_environment()) {
    for (const auto& [k, v] : in.environment) env_[k] = v;
  }

  Json build() {
    out_["cairn"] = std::string(CAIRN_VERSION) + " (" + kGitRev + ", " + CAIRN_BUILD_TYPE + ")";
    if (auto os = first_line_value("/etc/os-release", "PRETTY_NAME=", '='); !os.empty())
      out_["os"] = os;
    struct utsname u;
    if (::uname(&u) == 0)
      out_["kernel"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
    if (auto cpu = first_line_value("/proc/cpuinfo", "model name", ':'); !cpu.empty())
      out_["cpu"] = cpu;
    // Versions, whatever cairn's own GPU code makes of them: a PyTorch trial uses an NCCL
    // too old for cairn's collective, and its version still tells environments apart.
    // NCCL stays loaded once asked, as everywhere in cairn (gpu/shared_library.h): unloading
    // a libnccl whose static cudart has run beside libcuda is not a path anyone tests, and
    // the pages of a library mapped but unused cost next to nothing.
    const cuda::Driver& driver = cuda::driver();
    if (driver.library_loaded) {
      out_["cuda-driver"] = std::to_string(driver.version);
      out_["gpu"] = std::to_string(driver.device_count) + " CUDA device(s)";
    }
    // Raw numbers (22809, not 2.28.9), as every earlier record has them: comparing with
    // those must not show a difference that is not there.
    if (const int nccl = nccl_library().version; nccl > 0) out_["nccl"] = std::to_string(nccl);
    if (!in_.builtin && !in_.entrypoint.empty()) program(in_.entrypoint[0]);
    // builtin:mlp is cairn itself: what it links dynamically (Gloo, the C++ runtime) is
    // part of its environment like a script's libraries are of its.
    std::error_code ec;
    if (in_.builtin)
      if (const fs::path self = fs::read_symlink("/proc/self/exe", ec); !ec) libraries(self);
    if (in_.builtin)
      if (auto core = blas_core_fingerprint(in_.deterministic, in_.recorded_blas_core, env_);
          !core.empty())
        out_["openblas-core"] = core;
    for (const auto& [k, v] : in_.environment) out_["env " + k] = v;
    return out_;
  }

 private:
  std::string hashed(const fs::path& file) {
    auto h = hasher_.hash(file);
    return h.ok() ? "sha256:" + h->substr(0, 16) : "unreadable";
  }

  void program(const std::string& name) {
    auto resolved = resolve_program(name, in_.workdir, env_);
    if (!resolved.ok()) return;
    std::error_code ec;
    fs::path path = fs::canonical(*resolved, ec);
    if (ec) path = *resolved;
    // A program inside the workdir is code: it is in the snapshot, and compared there. As a
    // dependency too, every edit of ./train.sh would show twice.
    const fs::path workdir = fs::weakly_canonical(in_.workdir, ec);
    const bool is_code = !ec && lies_inside(path, workdir);
    if (!is_code) out_["program"] = path.string() + " " + hashed(path);
    fs::path binary = path;
    // A script: its `#!` interpreter is what runs (`/usr/bin/env python3` resolved on PATH).
    std::ifstream in(path);
    std::string first;
    if (std::getline(in, first) && first.rfind("#!", 0) == 0) {
      std::istringstream words(first.substr(2));
      std::string interp, arg;
      words >> interp >> arg;
      if (fs::path(interp).filename() == "env" && !arg.empty()) interp = arg;
      auto r = resolve_program(interp, in_.workdir, env_);
      if (!r.ok()) return;
      binary = fs::canonical(*r, ec);
      if (ec) binary = *r;
      out_["interpreter"] = binary.string() + " " + hashed(binary);
    }
    libraries(binary);
    // Run only what is certainly a Python interpreter: a dynamically linked executable named
    // like one (python3, python3.11). Anything else named python* could be the user's own
    // program, which must not run at `cairn run` with arguments it was not written for.
    static const std::regex python_name(R"(^python[0-9.]*$)");
    if (std::regex_match(binary.filename().string(), python_name) &&
        !elf_interpreter(binary).empty())
      python(binary);
  }

  void libraries(const fs::path& binary) {
    const std::string interp = elf_interpreter(binary);
    if (interp.empty()) return;
    // The dynamic loader lists what it would load, without running the program.
    std::istringstream lines(run_capture({interp, "--list", binary.string()}, env_, 20));
    std::string line;
    while (std::getline(lines, line)) {
      const size_t arrow = line.find(" => ");
      std::string name, file;
      std::istringstream words(line);
      words >> name;
      if (arrow != std::string::npos) {
        std::istringstream rest(line.substr(arrow + 4));
        rest >> file;
      } else if (!name.empty() && name[0] == '/') {
        file = name;
        name = fs::path(name).filename().string();
      }
      if (name.empty() || file.empty() || file[0] != '/') continue;  // vdso, "not found"
      std::error_code ec;
      const fs::path real = fs::canonical(file, ec);
      if (ec) continue;
      const std::string version = version_from_name(real.filename().string());
      out_[name] = version.empty() ? hashed(real) : version;
    }
  }

  void python(const fs::path& interpreter) {
    static const char* kScript =
        "import sys, importlib.metadata as m\n"
        "print('python', sys.version.split()[0])\n"
        "for d in m.distributions():\n"
        "    n = d.metadata['Name']\n"
        "    if n: print(n, d.version)\n";
    std::istringstream lines(run_capture({interpreter.string(), "-c", kScript}, env_, 30));
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      std::string name, version;
      if (!(words >> name >> version)) continue;
      if (!out_.contains(name)) out_[name] = version;
    }
  }

  FileHasher hasher_;
  const DependencyInput& in_;
  std::map<std::string, std::string> env_;
  Json out_ = Json::object();
};

}  // namespace

Json dependency_fingerprint(const StoreLayout& store, const DependencyInput& in) {
  Fingerprint fp(store, in);
  Json out = fp.build();
  // Sorted keys, so the record reads (and compares) the same whatever the discovery order.
  Json sorted = Json::object();
  std::vector<std::string> keys;
  for (auto it = out.begin(); it != out.end(); ++it) keys.push_back(it.key());
  std::sort(keys.begin(), keys.end());
  for (const std::string& k : keys) sorted[k] = out[k];
  return sorted;
}

}  // namespace cairn
