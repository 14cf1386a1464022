#include "peer/session_adoption.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>
#include <vector>

#include "common/untrusted_json.h"
#include "peer/agent_log.h"
#include "peer/agent_sessions.h"

namespace cairn {

namespace {

using Clock = std::chrono::steady_clock;

// How long adopt_ranks waits for the ranks it kills to end, and session_adopt for an older
// connection of the owner to let go of the session.
constexpr auto kLetGoTime = std::chrono::seconds(5);

std::string short_id(const std::string& id) {
  return id.substr(0, 8);
}

// Training batches are the bulk of a stream and never answered: not parsed (the SDKs put
// "type" first).
bool is_training_line(std::string_view line) {
  return line.starts_with(R"({"type":"training")") || line.starts_with(R"({"type": "training")");
}

int64_t integer_field(const Json& m, const char* name) {
  const Json v = m.is_object() ? m.value(name, Json()) : Json();
  return v.is_number_integer() ? v.get<int64_t>() : -1;
}

std::string string_field(const Json& m, const char* name) {
  const Json v = m.is_object() ? m.value(name, Json()) : Json();
  return v.is_string() ? v.get<std::string>() : std::string();
}

}  // namespace

// --- StreamLines -------------------------------------------------------------------------

namespace {

// Appends `bytes` to `partial`, leaving out a line over StreamLines::kMaxLineBytes (from its
// start to its newline, `skipping` meanwhile).
void append_bounded(std::string& partial, bool& skipping, std::string_view bytes) {
  if (skipping) {
    const size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) return;
    skipping = false;
    bytes.remove_prefix(nl + 1);
  }
  partial.append(bytes);
  const size_t last = partial.rfind('\n');
  const size_t open = last == std::string::npos ? partial.size() : partial.size() - last - 1;
  if (open > StreamLines::kMaxLineBytes) {
    partial.resize(partial.size() - open);
    skipping = true;
  }
}

}  // namespace

void StreamLines::from_rank(std::string_view bytes) {
  append_bounded(partial_in_, skip_in_, bytes);
  size_t start = 0;
  for (size_t nl; (nl = partial_in_.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(partial_in_.data() + start, nl - start);
    Line kept;
    kept.text.assign(line);
    kept.text += '\n';
    if (!is_training_line(line)) {
      const Json m = parse_untrusted_json(line).value_or(Json());
      const std::string type = string_field(m, "type");
      if (type == "hello" && hello_.empty()) {
        hello_ = std::move(kept.text);
        continue;
      }
      kept.seq = integer_field(m, "seq");
      kept.kind = type == "sync"               ? Kind::kSync
                  : type == "checkpoint_begin" ? Kind::kCheckpointBegin
                  : type == "checkpoint_end"   ? Kind::kCheckpointEnd
                  : type == "checkpoint_abort" ? Kind::kCheckpointAbort
                  : type == "next_operation"   ? Kind::kNextOperation
                                               : Kind::kOther;
      kept.step = integer_field(m, "step");
    }
    bytes_ += kept.text.size();
    lines_.push_back(std::move(kept));
  }
  partial_in_.erase(0, start);
  trim();
}

void StreamLines::erase(size_t i) {
  if (lines_[i].answer.empty()) {
    bytes_ -= lines_[i].text.size();
  } else {
    answered_bytes_ -= lines_[i].text.size() + lines_[i].answer.size();
    --answered_count_;
  }
  lines_.erase(lines_.begin() + static_cast<std::ptrdiff_t>(i));
}

void StreamLines::keep_answered(size_t i, const std::string& answer) {
  Line& request = lines_[i];
  if (request.text.size() + answer.size() > kMaxAnsweredBytes) {
    erase(i);  // no SDK sends such a line: answered, never sent again
    return;
  }
  bytes_ -= request.text.size();
  request.answer = answer;
  answered_bytes_ += request.text.size() + request.answer.size();
  ++answered_count_;
  // Over the count, the oldest goes: a checkpoint_begin whose end never came (a sync is one).
  for (size_t j = 0; answered_count_ > kMaxAnswered && j < lines_.size();)
    if (!lines_[j].answer.empty())
      erase(j);
    else
      ++j;
}

void StreamLines::answered(const std::string& line) {
  const Json m = parse_untrusted_json(line).value_or(Json());
  const int64_t re = integer_field(m, "re");
  if (re < 0) return;
  size_t at = 0;
  while (at < lines_.size() && !(lines_[at].seq == re && lines_[at].answer.empty())) ++at;
  if (at == lines_.size()) return;
  Line& request = lines_[at];
  const Kind kind = request.kind;
  const int64_t step = request.step;
  const std::string type = string_field(m, "type");
  if (kind == Kind::kNextOperation && type == "operation") operations_.add(m);
  // An ack is sent only once everything the coordinator read before the request is durable
  // (docs/protocol.md): what came before it need never be sent again — but for the answered
  // requests kept for the gang, whose other ranks may not have had their answers (an ack
  // goes to one rank), unless the ack ends that round for this rank.
  if (type == "ack") {
    // The rounds this rank has left: the one whose end is acknowledged, and those it aborted
    // (the coordinator read the abort: its round failed for every rank).
    std::set<int64_t> left;
    if (kind == Kind::kCheckpointEnd) left.insert(step);
    for (size_t i = 0; i <= at; ++i)
      if (lines_[i].kind == Kind::kCheckpointAbort) left.insert(lines_[i].step);
    for (size_t i = 0, n = 0; n <= at; ++n) {
      const Line& l = lines_[i];
      const bool ends_it = l.kind == Kind::kCheckpointBegin && left.count(l.step);
      if (!l.answer.empty() && !ends_it)
        ++i;
      else
        erase(i);
    }
    return;
  }
  // Kept with its answer (see the class comment): the gang's other ranks may not have theirs.
  const bool decided =
      (kind == Kind::kSync && type == "sync") ||
      (kind == Kind::kCheckpointBegin &&
       ((type == "checkpoint_dir" && m.value("path", Json()).is_string()) || type == "error"));
  if (decided && step >= 0) {
    if (kind == Kind::kSync) {
      // Every rank had this sync's answer before any had the next one's: the older ones are
      // settled for the whole gang.
      for (size_t i = 0; i < at;) {
        if (lines_[i].kind == Kind::kSync && !lines_[i].answer.empty()) {
          erase(i);
          --at;
        } else {
          ++i;
        }
      }
    }
    keep_answered(at, line);
    return;
  }
  if (kind == Kind::kCheckpointEnd) {
    // The round of that step is over for this rank: its begin need not be told again.
    for (size_t i = 0; i < at;) {
      if (lines_[i].kind == Kind::kCheckpointBegin && !lines_[i].answer.empty() &&
          lines_[i].step == step) {
        erase(i);
        --at;
      } else {
        ++i;
      }
    }
  }
  erase(at);  // answered: never sent again
}

std::string StreamLines::to_rank(std::string_view bytes, size_t* swallowed) {
  *swallowed = 0;
  std::string out(bytes);
  if (swallow_) {
    // The coordinator's answer to the replayed hello (welcome): the rank had its own.
    const size_t nl = out.find('\n');
    const size_t cut = nl == std::string::npos ? out.size() : nl + 1;
    *swallowed = cut;
    out.erase(0, cut);
    if (nl != std::string::npos) swallow_ = false;
  }
  append_bounded(partial_out_, skip_out_, out);
  size_t start = 0;
  for (size_t nl; (nl = partial_out_.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (!hello_.empty()) hello_answered_ = true;
    answered(partial_out_.substr(start, nl - start));
  }
  partial_out_.erase(0, start);
  return out;
}

std::string StreamLines::replay() {
  std::string out = hello_;
  for (const Line& l : lines_) {
    if (l.answer.empty()) {
      out += l.text;
      continue;
    }
    // The request as the rank sent it and the answer it got, so the new coordinator knows
    // the decision; nothing answers this line.
    out += R"({"type":"answered","request":)";
    out.append(l.text, 0, l.text.size() - 1);
    out += R"(,"answer":)";
    out += l.answer;
    out += "}\n";
  }
  out += partial_in_;
  swallow_ = !hello_.empty() && hello_answered_;
  return out;
}

void StreamLines::trim() {
  // The oldest lines without an answer go; the answered requests have their own bounds.
  for (size_t i = 0; bytes_ > kMaxBytes && i < lines_.size();)
    if (lines_[i].answer.empty())
      erase(i);
    else
      ++i;
}

// --- AnsweredOperations ------------------------------------------------------------------

void AnsweredOperations::add(const Json& answer) {
  Json operation;
  if (answer.value("done", Json()) == Json(true)) {
    operation = Json{{"done", true}};
  } else if (const Json length = answer.value("length", Json());
             length.is_number_integer() && length.get<int64_t>() >= 0) {
    operation = Json{{"length", length.get<int64_t>()}};
  } else {
    return;  // no cairn answers so: not an operation the rank was given
  }
  ++count;
  latest.push_back(std::move(operation));
  if (latest.size() > kMaxKept) latest.pop_front();
}

Json AnsweredOperations::to_json() const {
  Json out{{"count", count}, {"latest", Json::array()}};
  for (const Json& op : latest) out["latest"].push_back(op);
  return out;
}

// --- KeptOutput --------------------------------------------------------------------------

void KeptOutput::sent(std::string_view bytes, int64_t frame) {
  if (bytes.empty()) return;
  pieces_.push_back({frame, std::string(bytes)});
  bytes_ += bytes.size();
  // Over the bound the oldest go, byte-exact: an adoption that needs them says how many.
  while (bytes_ > max_ && !pieces_.empty()) {
    std::string& front = pieces_.front().bytes;
    const size_t drop = std::min(front.size(), bytes_ - max_);
    at_ += drop;
    bytes_ -= drop;
    if (drop == front.size())
      pieces_.pop_front();
    else
      front.erase(0, drop);
  }
}

void KeptOutput::acknowledged(int64_t frames) {
  while (!pieces_.empty() && pieces_.front().frame <= frames) {
    at_ += pieces_.front().bytes.size();
    bytes_ -= pieces_.front().bytes.size();
    pieces_.pop_front();
  }
}

std::string KeptOutput::replay_from(uint64_t end, uint64_t* lost) {
  std::string out;
  if (lost) *lost = end < at_ ? at_ - end : 0;
  if (end < at_) {
    // The file lacks bytes this agent no longer has: said, not a silent gap.
    out =
        "cairn: " + std::to_string(at_ - end) + " bytes of output were lost while cairn was away\n";
    for (const Piece& p : pieces_) out += p.bytes;
  } else {
    uint64_t skip = end - at_;  // already in the file
    for (const Piece& p : pieces_) {
      if (skip >= p.bytes.size()) {
        skip -= p.bytes.size();
        continue;
      }
      out.append(p.bytes, static_cast<size_t>(skip));
      skip = 0;
    }
  }
  pieces_.clear();
  bytes_ = 0;
  at_ = end;
  return out;
}

// --- the session's ranks -----------------------------------------------------------------

void note_launch(AgentSession& session, const RemoteLaunch& launch) {
  auto env = [&](const char* name) {
    auto it = launch.env.find(name);
    return it == launch.env.end() ? std::string() : it->second;
  };
  KeptRankFacts facts;
  facts.trial = env("CAIRN_TRIAL_ID").substr(0, 200);
  facts.attempt = std::strtoll(env("CAIRN_ATTEMPT").c_str(), nullptr, 10);
  facts.trial_rank = std::strtoll(env("RANK").c_str(), nullptr, 10);
  session.adoption.ranks[launch.rank] = std::move(facts);
  session.adoption.outputs.erase(launch.rank);
  if (launch.output_at >= 0)
    session.adoption.outputs.emplace(launch.rank,
                                     KeptOutput(static_cast<uint64_t>(launch.output_at)));
}

void note_rank_ended(AgentSession& session, int64_t rank) {
  session.adoption.ranks.erase(rank);
  session.adoption.outputs.erase(rank);
}

void note_output(AgentSession& session, int64_t rank, std::string_view bytes) {
  // Without a session nothing is acknowledged, and nothing can be adopted.
  if (session.id.empty()) return;
  auto it = session.adoption.outputs.find(rank);
  if (it == session.adoption.outputs.end()) return;
  it->second.acknowledged(session.journal.acknowledged_count());
  it->second.sent(bytes, session.journal.sent_count());
}

// --- claiming ----------------------------------------------------------------------------

Result<std::shared_ptr<AgentSession>> AgentSessions::claim_owner(const std::string& owner) {
  std::vector<std::shared_ptr<AgentSession>> ended;
  std::shared_ptr<AgentSession> chosen;
  bool busy = false;
  {
    std::lock_guard lock(mutex_);
    for (auto& [id, s] : sessions_) {
      if (owner.empty() || s->owner != owner) continue;
      if (s->attached) {
        // Its coordinator is gone without this agent noticing: asked to let go and detach
        // (not to end: it is what this adoption wants).
        s->release = true;
        const char byte = 1;
        (void)!::write(s->wake_write.get(), &byte, 1);
        busy = true;
      } else if (!chosen || s->detached_at > chosen->detached_at) {
        chosen = s;
      }
    }
    if (busy) return Status::Failed("a connection of this owner still holds its session");
    // Older detached sessions of the owner (a coordinator killed twice): ended, as a new
    // session of the owner ends them.
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (it->second != chosen && !it->second->attached && it->second->owner == owner) {
        ended.push_back(it->second);
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
    if (chosen) {
      chosen->attached = true;
      chosen->release = false;
      chosen->end_on_release = false;
    }
  }
  for (auto& s : ended) {
    agent_log("ended session " + short_id(s->id) + " (" + std::to_string(s->running) +
              " ranks): a newer session of its experiment is adopted instead");
    end_locked(*s);
  }
  return chosen;
}

// --- the requests ------------------------------------------------------------------------

bool is_adoption_request(const std::string& type) {
  return type == "session_adopt" || type == "adopt_ranks";
}

namespace {

bool refuse(PeerConnection& peer, const std::string& type, const std::string& who,
            const std::string& why) {
  agent_log("refused a " + type + " from " + who + ": " + why);
  Json reply{{"type", "error"}, {"code", "no_session"}, {"reason", why}};
  return peer.send(reply, Clock::now() + std::chrono::seconds(30)).ok();
}

// Waits (bounded) until each of `pids` has ended; they stay unreaped for the rank host.
void wait_ended(const std::vector<int64_t>& pids) {
  const auto until = Clock::now() + kLetGoTime;
  for (int64_t pid : pids) {
    while (pid > 0 && Clock::now() < until) {
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
          info.si_pid == pid)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

bool serve_adopt(AgentSessions& sessions, PeerConnection& peer,
                 std::shared_ptr<AgentSession>& session, const Json& request,
                 const std::string& who) {
  const std::string type = "session_adopt";
  if (!session->id.empty()) return refuse(peer, type, who, "this connection has a session already");
  if (session->host || session->running > 0)
    return refuse(peer, type, who, "this connection runs ranks already");
  const Json window = request.value("window", Json());
  const Json link = request.value("link_window", Json(0));
  const Json owner = request.value("owner", Json());
  if (!window.is_number_integer() || window.get<int64_t>() < 0 || !link.is_number_integer() ||
      link.get<int64_t>() < 0 || !owner.is_string() ||
      owner.get_ref<const std::string&>().size() > 4096 || owner.get<std::string>().empty())
    return refuse(peer, type, who,
                  "a session_adopt needs \"window\" and \"link_window\" (whole seconds >= 0) and "
                  "\"owner\" (a string of 1 to 4096 bytes)");
  Result<std::shared_ptr<AgentSession>> claimed = std::shared_ptr<AgentSession>();
  for (const auto until = Clock::now() + kLetGoTime;;) {
    claimed = sessions.claim_owner(owner.get<std::string>());
    if (claimed.ok() || Clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!claimed.ok() || !*claimed) {
    // Nothing to adopt: an ordinary session (which ends what the owner still has).
    Json open = request;
    open["type"] = "session_open";
    return serve_session_request(sessions, peer, session, open, who);
  }
  std::shared_ptr<AgentSession> adopted = *claimed;
  const auto seconds = std::chrono::seconds(std::min<int64_t>(
      std::max(window.get<int64_t>(), link.get<int64_t>()), kMaxReattachWindow.count()));
  adopted->window = seconds;
  adopted->link_window = std::chrono::seconds(link.get<int64_t>());
  // The new coordinator counts this connection's frames from its answer on; what the old
  // journal kept was for the dead one.
  adopted->journal = SessionJournal();
  adopted->adoption.paused = true;
  if (adopted->control) {
    adopted->control->forget_peer();
    adopted->control->set_paused(true);
  }
  Json ranks = Json::array();
  for (const auto& [rank, facts] : adopted->adoption.ranks) {
    const bool running = adopted->host && adopted->host->alive(rank);
    ranks.push_back(
        {{"rank", rank},
         {"trial", facts.trial},
         {"attempt", facts.attempt},
         {"trial_rank", facts.trial_rank},
         {"pid", adopted->host ? adopted->host->pid(rank) : 0},
         {"running", running},
         // Which operations it was given: a gang's others get the same (header).
         {"operations", adopted->control ? adopted->control->operations_of(rank).to_json()
                                         : AnsweredOperations().to_json()}});
  }
  session = adopted;
  agent_log("adopting session " + short_id(session->id) + " for " + who + " (" +
            std::to_string(ranks.size()) + " ranks kept)");
  Json reply{{"type", "session_adopted"},
             {"id", session->id},
             {"window", seconds.count()},
             {"ranks", std::move(ranks)}};
  if (!peer.send(reply, Clock::now() + std::chrono::seconds(30)).ok()) return false;
  peer.set_journal(&session->journal);
  return true;
}

bool serve_adopt_ranks(PeerConnection& peer, AgentSession& session, const Json& request,
                       const std::string& who) {
  if (!session.adoption.paused)
    return refuse(peer, "adopt_ranks", who, "this connection adopted no session");
  std::set<int64_t> taken;
  std::map<int64_t, int64_t> output_at;  // where each one's output file ends there
  const Json ids = request.value("ranks", Json::array());
  const Json ats = request.value("output_at", Json::array());
  for (size_t i = 0; ids.is_array() && i < ids.size(); ++i) {
    const Json& r = ids[i];
    if (!r.is_number_integer() || !session.adoption.ranks.count(r.get<int64_t>())) continue;
    taken.insert(r.get<int64_t>());
    if (ats.is_array() && i < ats.size() && ats[i].is_number_integer() &&
        ats[i].get<int64_t>() >= 0)
      output_at[r.get<int64_t>()] = ats[i].get<int64_t>();
  }
  std::vector<int64_t> killed;
  for (const auto& [rank, facts] : session.adoption.ranks) {
    if (taken.count(rank) || !session.host) continue;
    killed.push_back(session.host->pid(rank));
    session.host->signal(rank, SIGKILL);
    agent_log("ended rank " + std::to_string(rank) + " of " + who + " (trial " + facts.trial +
              ", attempt " + std::to_string(facts.attempt) +
              "): its new coordinator did not adopt it");
  }
  wait_ended(killed);  // reaped by the next look at the ranks, which frees their slots
  for (int64_t rank : taken) {
    const KeptRankFacts& facts = session.adoption.ranks[rank];
    agent_log("adopted rank " + std::to_string(rank) + " (trial " + facts.trial + ", attempt " +
              std::to_string(facts.attempt) + ", pid " +
              std::to_string(session.host ? session.host->pid(rank) : 0) + ") for " + who +
              ": it goes on");
  }
  // Each adopted rank's output the new coordinator's file lacks, before anything newer:
  // what went to the dead coordinator and never reached the file. Every piece is sent (and
  // kept) even after a failed send, as relayed output is: a later adoption settles it.
  bool ok = true;
  for (auto it = session.adoption.outputs.begin(); it != session.adoption.outputs.end();) {
    const int64_t rank = it->first;
    auto at = output_at.find(rank);
    if (!taken.count(rank) || at == output_at.end()) {
      it = session.adoption.outputs.erase(it);  // not adopted, or its file's end not said
      continue;
    }
    uint64_t lost = 0;
    const std::string replay = it->second.replay_from(static_cast<uint64_t>(at->second), &lost);
    ++it;
    if (lost > 0)
      agent_log("rank " + std::to_string(rank) + " of " + who + ": " + std::to_string(lost) +
                " bytes of output were lost while cairn was away (more than " +
                std::to_string(KeptOutput::kMaxBytes >> 20) + " MiB unacknowledged)");
    for (size_t off = 0; off < replay.size(); off += kOutputChunkBytes) {
      const std::string_view piece = std::string_view(replay).substr(off, kOutputChunkBytes);
      Status sent =
          peer.send(output_message(rank, piece), Clock::now() + std::chrono::seconds(ok ? 30 : 0));
      note_output(session, rank, piece);
      if (!sent.ok() && ok) {
        agent_log("dropped " + who + ": " + sent.message());
        ok = false;
      }
    }
  }
  if (session.control) {
    session.control->adopt(taken);
    session.control->set_paused(false);
  }
  session.adoption.paused = false;
  return ok;
}

}  // namespace

bool serve_adoption_request(AgentSessions& sessions, PeerConnection& peer,
                            std::shared_ptr<AgentSession>& session, const Json& request,
                            const std::string& who) {
  if (request["type"] == "session_adopt") return serve_adopt(sessions, peer, session, request, who);
  return serve_adopt_ranks(peer, *session, request, who);
}

}  // namespace cairn
