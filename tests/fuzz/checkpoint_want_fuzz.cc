// libFuzzer target: bytes as an authenticated peer may send them for a checkpoint_want
// (peer/checkpoint_want.h), parsed as untrusted JSON and checked as the sending side checks
// it before it reads any file: against a fixed manifest of three contents (empty, small,
// large), whose digests the corpus names. What is accepted names only the manifest's
// contents, each once, each from an offset within it. Any crash, sanitizer report or broken
// invariant (abort) is a finding.
//
// ctest runs it over tests/fuzz/corpus/checkpoint_want for a bounded number of runs. To fuzz
// longer: build/fuzz/checkpoint_want_fuzz -max_total_time=600 tests/fuzz/corpus/checkpoint_want
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "common/untrusted_json.h"
#include "peer/checkpoint_want.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

cairn::WireManifest fixed_manifest() {
  cairn::WireManifest m;
  m.files.push_back({"a/empty", 0, 0644, std::string(64, '0')});
  m.files.push_back({"b/small", 1000, 0644, std::string(64, 'a')});
  m.files.push_back({"c/large", uint64_t{200} << 20, 0600, std::string(64, 'b')});
  m.files.push_back({"d/same-as-small", 1000, 0644, std::string(64, 'a')});
  for (const auto& f : m.files) m.bytes += f.size;
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const cairn::WireManifest manifest = fixed_manifest();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto json = cairn::parse_untrusted_json(text);
  if (!json.ok()) return 0;
  auto wanted = cairn::parse_checkpoint_want(*json, manifest);
  if (!wanted.ok()) {
    const std::string& why = wanted.status().message();
    check(!why.empty() && why.find('\n') == std::string::npos && why.size() < 300);
    return 0;
  }
  std::set<std::string> seen;
  std::vector<cairn::WantedContent> again;
  for (const cairn::WantedFile& w : *wanted) {
    check(w.file != nullptr);
    check(w.file >= manifest.files.data() &&
          w.file < manifest.files.data() + manifest.files.size());
    check(seen.insert(w.file->sha256).second);
    check(w.from <= w.file->size);
    again.push_back({w.file->sha256, w.from});
  }
  // What this side would send back parses to the same.
  auto round = cairn::parse_checkpoint_want(cairn::checkpoint_want_message(again), manifest);
  check(round.ok() && round->size() == wanted->size());
  for (size_t i = 0; i < round->size(); ++i)
    check((*round)[i].file == (*wanted)[i].file && (*round)[i].from == (*wanted)[i].from);
  return 0;
}
