// The agent's side of a `cairn resume` that adopts the ranks a killed coordinator left
// running (docs/peers.md "Reattach", "Adoption"). The old coordinator's session is detached
// (agent_sessions.h); its journal is useless to the new coordinator, which counts nothing
// of it. So adoption is not a resume: the new connection claims the owner's detached session
// with a fresh journal, and every rank's control stream is opened again towards the new
// coordinator as if the rank had just connected — its `hello` replayed, then the requests
// the old coordinator never answered — while the rank itself notices nothing.
//
// Two requests, on a connection that carries nothing else yet:
// - {"type": "session_adopt", "window", "link_window", "owner"}: as session_open, but the
//   owner's newest detached session is claimed instead of ended. The answer is
//   {"type": "session_adopted", "id", "window", "ranks": [{"rank": K, "trial", "attempt",
//   "trial_rank", "pid", "running"}]} (the kept ranks, K the old coordinator's name for each
//   on the connection), or the `session` answer of session_open when there is nothing to
//   adopt. Until the next request the session is paused: nothing is read from its ranks.
// - {"type": "adopt_ranks", "ranks": [K, …]}: the coordinator took these ranks as its own;
//   the others are killed (waited for, so their slots are free for what comes next), each
//   adopted rank's streams are opened again with their replay, and relaying goes on. No
//   answer: the streams' control_open frames follow.
//
// What the old session's journal still held for the dead coordinator is not sent again as
// it is: output is sent again from KeptOutput, from the byte where the new coordinator found
// the rank's output file ending (adopt_ranks' "output_at"), so every byte reaches the file
// once (the new coordinator reads that file on from the offset the old one committed); exits
// of ranks that ended meanwhile come from the rank host, which had not reported them; control
// bytes are replayed from StreamLines.
//
// {"type": "adopt_ranks", "ranks": [K, …], "output_at": [S, …]}: S the size of rank K's
// output file at the new coordinator (-1 or missing: nothing is sent again).
//
// Each kept rank of session_adopted also says which operations it was given (its
// next_operation answers, AnsweredOperations): "operations": {"count": N, "latest": [{"length":
// L} or {"done": true}, …]}. The new coordinator learns them there, before any stream is
// replayed, so that every rank of a gang gets the same n-th operation whichever agent's replay
// it reads first (docs/peers.md "A gang's operations").
//
// Thread-safety: a session's connection thread only (AgentSessions::claim_owner locks).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/json.h"
#include "peer/peer_connection.h"
#include "peer/rank_messages.h"

namespace cairn {

class AgentSessions;
struct AgentSession;

// The next_operation answers one rank was given in its attempt: how many, and the latest
// kMaxKept of them. A gang's ranks get the same sequence of operations (docs/protocol.md,
// "Multi-rank trials"), but each asks for the next one when it gets there, so a killed
// coordinator may have answered the n-th to some ranks only; the one that adopts the gang
// answers the others' n-th alike from these (engine/coordinator/gang_operations.h). A few
// small values per rank, outside StreamLines' byte bound.
struct AnsweredOperations {
  // How far apart a gang's ranks can be: each rank's n-th operation waits for the others at
  // the first step of the (n-1)-th one, so one or two in practice (an operation of no steps,
  // such as a restarted attempt's first, lets a rank ask the next one at once).
  static constexpr size_t kMaxKept = 8;

  int64_t count = 0;        // answers given, this one included
  std::deque<Json> latest;  // {"length": L} or {"done": true}, oldest first

  // The coordinator's answer to a next_operation ({"type": "operation", "length"|"done"});
  // anything else is not an operation and is not counted.
  void add(const Json& answer);
  // {"count": N, "latest": [...]}, as session_adopted carries it.
  Json to_json() const;
};

// The control protocol's lines of one relayed stream (docs/protocol.md), as far as a new
// coordinator needs them to carry on: the rank's `hello`, and what the rank sent since the
// last `ack` (after which the coordinator had committed everything it read before) minus
// the requests already answered. Lines are untrusted (common/untrusted_json.h); a line that
// is not JSON is kept as a line without "seq". Bounded: at most kMaxBytes of these lines are
// kept, the oldest dropped first (lines read that long ago were committed by their
// coordinator).
//
// Two answered requests are kept with their answers, because a gang agrees on them: a
// `sync` (the rank's latest answered one) and a `checkpoint_begin` (until the rank's
// `checkpoint_end` of that step is answered). The dead coordinator may have answered them
// to this rank and not yet to another one of its gang; the new coordinator then needs to
// know the decision (the sync's stop, the round's staging directory here) to answer the
// others alike. The replay carries each, in its place among the other lines, as
// {"type":"answered","request":{…the rank's line…},"answer":{…the dead coordinator's…}}:
// no answer is due to it (docs/peers.md "Adoption", docs/protocol.md). These answered
// requests are kept outside kMaxBytes, so that a rank reporting heavily while its round waits
// cannot push them out, and under bounds of their own: at most kMaxAnswered of them (the
// rank's latest sync and its checkpoint_begins not yet ended; the oldest begin goes first),
// each at most kMaxAnsweredBytes (request and answer; a conforming SDK's are about 100 bytes
// and a path). An ack does not drop them either: it says the coordinator had committed what
// the rank sent before, not that the gang's other ranks had their answers.
//
// The rank's next_operation answers are counted apart (AnsweredOperations, operations()):
// a new coordinator learns them from session_adopted, not from the replay.
class StreamLines {
 public:
  static constexpr size_t kMaxBytes = 192 * 1024;  // inside one control window
  static constexpr size_t kMaxAnswered = 8;
  static constexpr size_t kMaxAnsweredBytes = 16 * 1024;
  // A line longer than this (the coordinator drops lines over 16 MiB) is not kept: its bytes
  // are skipped up to its end, so a rank that never ends a line grows nothing here.
  static constexpr size_t kMaxLineBytes = size_t{16} << 20;

  // Bytes the agent read from the rank's socket.
  void from_rank(std::string_view bytes);
  // Bytes from the coordinator for the rank: returns what to write to the rank (the answer
  // to a replayed hello is left out) and sets *swallowed to the bytes left out.
  std::string to_rank(std::string_view bytes, size_t* swallowed);
  // What the new coordinator gets on the re-opened stream: the hello, the lines not known to
  // be answered or committed, and a line the rank has not finished. From then on the first
  // line from the coordinator (its answer to the hello) does not reach the rank, unless the
  // rank never had an answer to its hello.
  std::string replay();

  bool said_hello() const { return !hello_.empty(); }
  // The lines under kMaxBytes, and the answered requests kept apart (at most kMaxAnswered
  // of at most kMaxAnsweredBytes each).
  size_t kept_bytes() const { return bytes_; }
  size_t answered_bytes() const { return answered_bytes_; }
  size_t answered_count() const { return answered_count_; }

  // The rank's next_operation answers seen on this stream, counted on from those given to
  // set_operations (the rank's earlier streams: ControlRelay carries them over).
  const AnsweredOperations& operations() const { return operations_; }
  void set_operations(AnsweredOperations operations) { operations_ = std::move(operations); }

 private:
  // What a line is, as far as the replay cares.
  enum class Kind {
    kOther,
    kSync,
    kCheckpointBegin,
    kCheckpointEnd,
    kCheckpointAbort,
    kNextOperation
  };
  struct Line {
    std::string text;  // with its '\n'
    int64_t seq = -1;  // -1: no answer expected
    Kind kind = Kind::kOther;
    int64_t step = -1;   // kSync, kCheckpointBegin, kCheckpointEnd, kCheckpointAbort
    std::string answer;  // an answered request kept for the replay: the answer (no '\n')
  };
  void answered(const std::string& line);
  void erase(size_t i);  // the i-th kept line
  // The request at `i` was answered with `answer`, which the gang's other ranks may lack: kept
  // apart from the byte bound, or dropped when over kMaxAnsweredBytes.
  void keep_answered(size_t i, const std::string& answer);
  void trim();

  std::string hello_;
  std::deque<Line> lines_;
  size_t bytes_ = 0;  // of the lines without an answer
  size_t answered_bytes_ = 0, answered_count_ = 0;
  AnsweredOperations operations_;
  std::string partial_in_, partial_out_;
  bool skip_in_ = false, skip_out_ = false;  // inside a line over kMaxLineBytes
  bool swallow_ = false;                     // drop the next line from the coordinator
  // A line came from the coordinator after the hello, its answer: a replay's hello is then
  // answered to the agent only. A rank killed between its hello and the answer gets the new
  // coordinator's welcome instead of waiting for it until its SDK gives up.
  bool hello_answered_ = false;
};

// The output of one rank that its coordinator may not have written to the trial's output
// file: what the agent relayed in frames the coordinator has not said it received (its
// heartbeats' "received", session_journal.h: the coordinator writes an output frame to the
// file before it reads the next frame, so a frame it counts is in the file). Each byte is
// known by where it lands in that file: the launch says where the rank's first byte does
// (RemoteLaunch::output_at), and the file only ever grows by the rank's output after it.
// Bounded: at most kMaxBytes are kept, the oldest dropped first; an adoption that needs
// dropped bytes says how many were lost in one line of the rank's output instead.
class KeptOutput {
 public:
  static constexpr size_t kMaxBytes = size_t{4} << 20;  // seconds of a chatty rank's output

  explicit KeptOutput(uint64_t at, size_t max_bytes = kMaxBytes) : at_(at), max_(max_bytes) {}

  // `bytes` of the rank's output went out in the connection's frame number `frame`.
  void sent(std::string_view bytes, int64_t frame);
  // The coordinator has received the connection's first `frames` frames (written them).
  void acknowledged(int64_t frames);
  // A new coordinator's output file ends at `end`: what to send it so that the file holds
  // every byte once — the kept bytes from `end` on, after `cairn: N bytes of output were
  // lost while cairn was away` when some before them were dropped (the bound). Forgets
  // everything kept (the frames those bytes are sent in are noted again with sent()), and
  // numbers the next byte from `end` plus what it returns. *lost (when given): the bytes
  // dropped by the bound, 0 when none.
  std::string replay_from(uint64_t end, uint64_t* lost = nullptr);

  size_t kept_bytes() const { return bytes_; }
  uint64_t kept_from() const { return at_; }

 private:
  struct Piece {
    int64_t frame;
    std::string bytes;
  };
  std::deque<Piece> pieces_;
  uint64_t at_;  // where the first kept byte (or, with none, the next one) lands in the file
  size_t bytes_ = 0;
  size_t max_;
};

// A rank a session started: what a new coordinator needs to know it by.
struct KeptRankFacts {
  std::string trial;  // CAIRN_TRIAL_ID
  int64_t attempt = 0;
  int64_t trial_rank = 0;  // RANK
};

// Per session: the ranks started and not yet reported ended, and whether the session waits
// for its adopter's adopt_ranks (nothing is read from its ranks meanwhile).
struct SessionAdoption {
  std::map<int64_t, KeptRankFacts> ranks;
  // The output of the ranks whose launch said where it lands (RemoteLaunch::output_at).
  std::map<int64_t, KeptOutput> outputs;
  bool paused = false;
};

// The connection's launch of `launch` started.
void note_launch(AgentSession& session, const RemoteLaunch& launch);
// The rank's end was reported.
void note_rank_ended(AgentSession& session, int64_t rank);
// `bytes` of the rank's output were just sent (journaled) on the session's connection.
void note_output(AgentSession& session, int64_t rank, std::string_view bytes);

bool is_adoption_request(const std::string& type);
// Answers session_adopt or adopt_ranks (above) of coordinator `who` on `peer`, whose session
// is `session` (replaced by the adopted one). Returns false when the connection broke.
bool serve_adoption_request(AgentSessions& sessions, PeerConnection& peer,
                            std::shared_ptr<AgentSession>& session, const Json& request,
                            const std::string& who);

}  // namespace cairn
