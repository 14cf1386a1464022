#include "engine/coordinator/remote_adoption.h"

#include "engine/coordinator/remote_session.h"

namespace cairn {

std::vector<KeptRank> parse_kept_ranks(const Json& answer) {
  std::vector<KeptRank> out;
  const Json ranks = answer.value("ranks", Json::array());
  if (!ranks.is_array()) return out;
  for (const Json& r : ranks) {
    if (!r.is_object()) continue;
    const Json id = r.value("rank", Json()), trial = r.value("trial", Json()),
               attempt = r.value("attempt", Json()), rank = r.value("trial_rank", Json()),
               pid = r.value("pid", Json()), running = r.value("running", Json());
    if (!id.is_number_integer() || !trial.is_string() || !attempt.is_number_integer() ||
        !rank.is_number_integer() || !running.is_boolean())
      continue;
    auto operations = parse_kept_operations(r);
    if (!operations.ok()) continue;
    KeptRank k;
    k.operations = std::move(*operations);
    k.id = id.get<int64_t>();
    k.trial = trial.get<std::string>().substr(0, 200);
    k.attempt = attempt.get<int64_t>();
    k.rank = rank.get<int64_t>();
    k.pid = pid.is_number_integer() ? pid.get<int64_t>() : 0;
    k.running = running.get<bool>();
    out.push_back(std::move(k));
  }
  return out;
}

Result<std::string> open_adopting_session(PeerConnection& peer, SessionJournal& journal,
                                          std::chrono::milliseconds link_window, Deadline deadline,
                                          std::vector<KeptRank>* kept, bool* adopted) {
  *adopted = false;
  kept->clear();
  const RemoteSessionOptions options = remote_session_options();
  if (!options.adopt) return open_remote_session(peer, journal, link_window, deadline);
  Json adopt{{"type", "session_adopt"},
             {"window", static_cast<int64_t>(options.window.count())},
             {"link_window", static_cast<int64_t>((link_window.count() + 999) / 1000)},
             {"owner", options.owner}};
  if (Status sent = peer.send(adopt, deadline); !sent.ok()) return sent;
  auto answer = peer.receive(deadline);
  if (!answer.ok()) return answer.status();
  if (!answer->has_value()) return Status::Failed("the agent closed the connection");
  const Json& m = **answer;
  const std::string type = m.value("type", "");
  if ((type == "session" || type == "session_adopted") && m.value("id", Json()).is_string()) {
    peer.set_journal(&journal);
    if (type == "session_adopted") {
      *adopted = true;
      *kept = parse_kept_ranks(m);
    }
    return m["id"].get<std::string>();
  }
  if (type == "error" && m.value("code", Json()) != "no_session")
    return open_remote_session(peer, journal, link_window, deadline);  // an older agent
  return Status::Failed("the agent refused a session: " +
                        m.value("reason", std::string("no reason")).substr(0, 300));
}

Json adopt_ranks_message(const std::vector<int64_t>& ids, const std::vector<int64_t>& output_at) {
  return Json{{"type", "adopt_ranks"}, {"ranks", ids}, {"output_at", output_at}};
}

}  // namespace cairn
