// The rendezvous of a data-parallel trial's ranks: a small key/value table per trial attempt,
// reached over the control channel (docs/protocol.md, "Rendezvous"). Through it the ranks
// exchange what their collective library needs to connect (Gloo's listening addresses, the
// NCCL unique id), so no shared file system and no extra port is needed, and a rank placed
// on another machine finds the others the same way.
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/trial_state.h"

namespace cairn {
namespace {

// Keys and values are short printable strings (binary data is hex-encoded by the SDK);
// the bounds keep one misbehaving trial from growing the coordinator without limit.
constexpr size_t kMaxKeyBytes = 256;
constexpr size_t kMaxValueBytes = 64 << 10;
constexpr size_t kMaxKeys = 4096;

Json kv_answer(const Json& seq) {
  return Json{{"type", "kv"}, {"re", seq}};
}

}  // namespace

void Coordinator::handle_kv_set(Trial& trial, ControlConnection& conn, const Json& msg) {
  const Json seq = msg.value("seq", Json(0));
  if (!msg.contains("key") || !msg["key"].is_string() || !msg.contains("value") ||
      !msg["value"].is_string()) {
    reply(conn,
          Json{{"type", "error"}, {"re", seq}, {"message", "kv_set needs a string key and value"}});
    return;
  }
  const std::string key = msg["key"].get<std::string>();
  const std::string value = msg["value"].get<std::string>();
  if (key.size() > kMaxKeyBytes || value.size() > kMaxValueBytes ||
      (!trial.kv.count(key) && trial.kv.size() >= kMaxKeys)) {
    reply(conn, Json{{"type", "error"},
                     {"re", seq},
                     {"message", "kv_set: key or value too large, or too many keys"}});
    return;
  }
  trial.kv[key] = value;
  // The answer is "kv", never "ack": an ack tells the SDK that the reports sent before it
  // are durable, and this table is not written to the store.
  reply(conn, kv_answer(seq));
  auto [first, last] = trial.kv_waiting.equal_range(key);
  for (auto it = first; it != last; ++it) {
    Json answer = kv_answer(it->second.second);
    answer["value"] = value;
    reply_to(it->second.first, std::move(answer));
  }
  trial.kv_waiting.erase(first, last);
}

void Coordinator::handle_kv_get(Trial& trial, ControlConnection& conn, const Json& msg) {
  const Json seq = msg.value("seq", Json(0));
  if (!msg.contains("key") || !msg["key"].is_string()) {
    reply(conn, Json{{"type", "error"}, {"re", seq}, {"message", "kv_get needs a string key"}});
    return;
  }
  const std::string key = msg["key"].get<std::string>();
  if (auto it = trial.kv.find(key); it != trial.kv.end()) {
    Json answer = kv_answer(seq);
    answer["value"] = it->second;
    reply(conn, std::move(answer));
    return;
  }
  // Answered when some rank sets the key; the SDK bounds how long it waits.
  if (trial.kv_waiting.size() >= kMaxKeys) {
    reply(conn,
          Json{{"type", "error"}, {"re", seq}, {"message", "kv_get: too many waiting requests"}});
    return;
  }
  trial.kv_waiting.emplace(key, std::make_pair(conn.fd(), seq));
}

}  // namespace cairn
