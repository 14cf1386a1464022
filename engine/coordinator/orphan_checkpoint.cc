#include "engine/coordinator/orphan_checkpoint.h"

#include <vector>

#include "cairn/detail/checkpoint_files.hpp"
#include "common/file_util.h"
#include "common/json.h"
#include "common/untrusted_json.h"

namespace cairn {

namespace {

bool has_step(const Json& marker) {
  return marker.is_object() && marker.contains("step") && marker["step"].is_number_integer();
}

}  // namespace

Result<int64_t> orphan_step(const std::filesystem::path& dir, int world_size) {
  auto marker_of = [&](int rank) {
    auto text = read_file(dir / sdk_detail::orphan_marker_name(rank));
    return text.ok() ? parse_untrusted_json(*text).value_or(Json()) : Json();
  };
  const Json first = marker_of(0);
  if (!has_step(first)) return Status::Failed("rank 0 did not finish writing it");
  const int64_t step = first["step"].get<int64_t>();
  const Json written_by = first.value("world_size", Json(1));
  if (!written_by.is_number_integer() || written_by.get<int64_t>() != world_size)
    return Status::Failed("written by " + written_by.dump() + " ranks, but the trial has " +
                          std::to_string(world_size));
  std::vector<int> unfinished;
  // A rank that did not enter the checkpoint leaves a marker with "entered": false (and its
  // generator state): the checkpoint is the other ranks', but one that no rank entered is none.
  bool entered = first.value("entered", Json(true)) != Json(false);
  for (int rank = 1; rank < world_size; ++rank) {
    const Json m = marker_of(rank);
    if (!has_step(m) || m["step"].get<int64_t>() != step)
      unfinished.push_back(rank);
    else if (m.value("entered", Json(true)) != Json(false))
      entered = true;
  }
  if (unfinished.empty() && !entered) return Status::Failed("no rank wrote a checkpoint into it");
  if (unfinished.empty()) return step;
  std::string ranks;
  for (int r : unfinished) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return Status::Failed("rank" + std::string(unfinished.size() == 1 ? " " : "s ") + ranks + " of " +
                        std::to_string(world_size) + " did not finish writing it");
}

}  // namespace cairn
