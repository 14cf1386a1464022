#include "engine/coordinator/checkpoint_parts.h"

#include <algorithm>
#include <map>

namespace cairn {

Result<std::vector<CheckpointFile>> merge_checkpoint_parts(
    const std::vector<CheckpointPart>& parts) {
  struct Held {
    const CheckpointFile* file;
    const std::string* machine;
  };
  std::map<std::string, Held> by_path;
  for (const CheckpointPart& part : parts)
    for (const CheckpointFile& f : part.files) {
      auto [it, added] = by_path.emplace(f.path, Held{&f, &part.machine});
      if (added) continue;
      const CheckpointFile& other = *it->second.file;
      if (other.sha256 != f.sha256 || other.size != f.size)
        return Status::BadInput("checkpoint file '" + f.path.substr(0, 300) +
                                "' was written with different content on " + *it->second.machine +
                                " and on " + part.machine +
                                " (ranks on different machines must write distinct files)");
    }
  // A path that is a file in one part and a directory in another ("a" and "a/b"): sorted,
  // "a/…" comes right after "a" or after other "a…" names that sort before '/'.
  for (auto it = by_path.begin(); it != by_path.end(); ++it) {
    const std::string prefix = it->first + "/";
    auto below = by_path.lower_bound(prefix);
    if (below != by_path.end() && below->first.compare(0, prefix.size(), prefix) == 0)
      return Status::BadInput("checkpoint path '" + it->first.substr(0, 300) + "' is a file on " +
                              *it->second.machine + " and a directory on " +
                              *below->second.machine);
  }
  std::vector<CheckpointFile> out;
  out.reserve(by_path.size());
  for (const auto& [path, held] : by_path) out.push_back(*held.file);
  return out;
}

}  // namespace cairn
