// libFuzzer target: bytes as an authenticated peer may send them for a checkpoint's
// manifest (peer/checkpoint_manifest.h), parsed as untrusted JSON and checked as the agent
// and the coordinator check a manifest before they write anything it names.
// Any crash, sanitizer report or broken invariant (abort) is a finding.
//
// Built like peer_frame_fuzz (CMakeLists.txt); ctest runs it over
// tests/fuzz/corpus/checkpoint_manifest for a bounded number of runs. To fuzz longer:
//   build/fuzz/checkpoint_manifest_fuzz -max_total_time=600 tests/fuzz/corpus/checkpoint_manifest
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "common/file_util.h"
#include "common/untrusted_json.h"
#include "peer/checkpoint_manifest.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto json = cairn::parse_untrusted_json(text);
  if (!json.ok()) return 0;
  auto manifest = cairn::parse_wire_manifest(*json);
  if (!manifest.ok()) {
    // Refused with one line.
    const std::string& why = manifest.status().message();
    check(!why.empty() && why.find('\n') == std::string::npos && why.size() < 600);
    return 0;
  }
  // What was accepted names only files below the directory it is written to, each once, no
  // file also another's directory, within the bounds.
  check(manifest->files.size() <= cairn::kMaxManifestFiles);
  std::set<std::string> paths;
  uint64_t bytes = 0;
  for (const cairn::WireFile& f : manifest->files) {
    check(cairn::check_manifest_path(f.path).ok());
    check(cairn::stays_below(f.path));
    check(f.path.front() != '/' && f.path != ".." && f.path.rfind("../", 0) != 0 &&
          f.path.find("/../") == std::string::npos &&
          (f.path.size() < 3 || f.path.compare(f.path.size() - 3, 3, "/..") != 0));
    check(f.mode <= 0777 && cairn::is_sha256_hex(f.sha256));
    check(paths.insert(f.path).second);
    bytes += f.size;
  }
  for (const std::string& p : paths)
    for (size_t slash = p.find('/'); slash != std::string::npos; slash = p.find('/', slash + 1))
      check(!paths.count(p.substr(0, slash)));
  check(bytes == manifest->bytes);
  // It reads back the same.
  auto again = cairn::parse_wire_manifest(manifest->to_json());
  check(again.ok() && again->to_json() == manifest->to_json());
  return 0;
}
