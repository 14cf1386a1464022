#include "peer/checkpoint_want.h"

#include <map>
#include <set>

namespace cairn {

Json checkpoint_want_message(const std::vector<WantedContent>& wanted) {
  Json digests = Json::array();
  Json offsets = Json::object();
  for (const WantedContent& w : wanted) {
    digests.push_back(w.sha256);
    if (w.from > 0) offsets[w.sha256] = w.from;
  }
  Json m{{"type", "checkpoint_want"}, {"digests", std::move(digests)}};
  if (!offsets.empty()) m["offsets"] = std::move(offsets);
  return m;
}

Result<std::vector<WantedFile>> parse_checkpoint_want(const Json& m, const WireManifest& manifest) {
  if (!m.is_object() || m.value("type", Json()) != "checkpoint_want" ||
      !m.value("digests", Json()).is_array())
    return Status::BadInput("expected checkpoint_want");
  std::map<std::string, const WireFile*> by_digest;
  for (const WireFile& f : manifest.files) by_digest.emplace(f.sha256, &f);
  std::vector<WantedFile> wanted;
  std::map<std::string, size_t> asked;  // digest -> its index in `wanted`
  for (const Json& d : m["digests"]) {
    if (!d.is_string() || !by_digest.count(d.get<std::string>()) ||
        !asked.emplace(d.get<std::string>(), wanted.size()).second)
      return Status::BadInput("checkpoint_want names a digest the manifest does not, or twice");
    wanted.push_back({by_digest[d.get<std::string>()], 0});
  }
  const Json offsets = m.value("offsets", Json());
  if (offsets.is_null()) return wanted;
  if (!offsets.is_object()) return Status::BadInput("checkpoint_want's offsets is not an object");
  for (const auto& [digest, offset] : offsets.items()) {
    auto it = asked.find(digest);
    if (it == asked.end())
      return Status::BadInput("checkpoint_want gives an offset for a content it does not ask for");
    WantedFile& w = wanted[it->second];
    // A count: an integer, not negative (JSON parsing gives a positive one as unsigned).
    const bool count =
        offset.is_number_unsigned() || (offset.is_number_integer() && offset.get<int64_t>() >= 0);
    if (!count || offset.get<uint64_t>() > w.file->size)
      return Status::BadInput("checkpoint_want asks for " + digest.substr(0, 12) +
                              " from an offset beyond its " + std::to_string(w.file->size) +
                              " bytes");
    w.from = offset.get<uint64_t>();
  }
  return wanted;
}

}  // namespace cairn
