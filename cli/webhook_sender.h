// Delivers the coordinator's notifications (engine/coordinator/notifier.h) as JSON POSTs to
// the `notify.webhook` URLs (docs/config.md, "notify"), with libcurl.
//
// One worker thread owns the network, so a slow or dead receiver never delays the
// coordinator's loop. The queue is bounded (kMaxQueued; the oldest event is dropped with a
// warning when it overflows). Each delivery is tried up to kAttempts times with back-off
// (1 s, 2 s, 4 s) on a connection error, a timeout, a 429 or a 5xx; any other 4xx is final.
// A failure is one line on stderr naming the event and the URL's scheme and host only (the
// path and query carry the secret token), and never reaches back into the run. Each POST
// carries X-Cairn-Delivery (the same id across retries, for the receiver to de-duplicate),
// X-Cairn-Timestamp and, with notify.secret_env, X-Cairn-Signature:
// "v1=" + hex HMAC-SHA256(secret, timestamp + "." + body).
//
// The spool directory (webhook_spool()) makes delivery at least once: prepare() writes the
// event as <id>.pending (write_file_atomic) before the coordinator commits its marker, and
// release() queues it; notify() writes <id>.json and queues it at once. A file is removed
// once every URL took it (or answered a final 4xx). The next sender on that directory
// (`cairn resume`, also of an ended experiment, or `resume --all`) delivers first, with
// their delivery ids, every <id>.json and each <id>.pending whose marker the store holds
// (`committed`), and removes a .pending whose marker it does not: the state change it
// reported was never stored.
//
// Thread-safety: notify(), prepare(), release(), discard() and drain() are called from one
// thread (the coordinator's); the worker is private.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli/notify_redaction.h"
#include "engine/config/config.h"
#include "engine/coordinator/notifier.h"
#include "store/experiment_db.h"
#include "store/store_location.h"

namespace cairn::cli {

struct WebhookTiming {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds first_backoff{1000};  // doubled after each failed try
};

class WebhookSender : public Notifier {
 public:
  static constexpr int kAttempts = 4;
  static constexpr size_t kMaxQueued = 64;

  // `committed`: the delivery ids whose markers (schema::notify_key) the experiment's store
  // holds, for the pending files an earlier cairn left in `spool`.
  WebhookSender(std::vector<std::string> urls, std::string secret, std::filesystem::path spool = {},
                std::set<std::string> committed = {}, WebhookTiming timing = {});
  ~WebhookSender() override;  // drain(0): abandons what is still queued, saying so
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  std::string prepare(NotifyEvent event, Json payload) override;
  void release(const std::vector<std::string>& ids) override;
  void discard(const std::vector<std::string>& ids) override;
  void notify(NotifyEvent event, Json payload) override;

  // Waits at most `limit` for queued and in-flight deliveries, then stops the worker and says
  // on stderr how many were abandoned (they stay in the spool). Later events are ignored.
  void drain(std::chrono::milliseconds limit);

 private:
  struct Delivery {
    std::string event;  // its payload's `event`
    std::string id;     // X-Cairn-Delivery
    std::string body;
    std::filesystem::path file;  // in the spool; empty without one
  };
  struct Outcome {
    std::string failure;  // "" when delivered
    bool final = true;    // delivered, or an answer that retrying will not change
  };
  void work();
  // One POST with retries.
  Outcome deliver(const Delivery& d, const std::string& url);
  void load_spool(const std::set<std::string>& committed);
  // Gives the payload its delivery id and keeps it in the spool as <id>.<extension>.
  Delivery make_delivery(Json payload, const char* extension);
  void enqueue_locked(Delivery d);

  std::vector<std::string> urls_;
  std::string secret_;
  std::filesystem::path spool_;
  WebhookTiming timing_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Delivery> queue_;
  std::map<std::string, Delivery> prepared_;  // by id: waiting for release() or discard()
  bool busy_ = false;                         // the worker is delivering one taken from queue_
  bool closing_ = false;                      // drain() started: no new events
  bool aborting_ = false;                     // drain()'s time is up: stop at once
  std::atomic<bool> abort_{false};            // the same, for curl's progress callback
  std::thread worker_;
};

// The sender for `notify`, or null when it names no URL. notify.webhook_env and
// notify.secret_env are read from the environment here; one unset is said on stderr.
// `committed`: as for WebhookSender (notify_markers()).
std::unique_ptr<WebhookSender> make_webhook_sender(const NotifyConfig& notify,
                                                   const std::filesystem::path& spool,
                                                   std::set<std::string> committed = {});

// Where experiment `id`'s undelivered notifications wait: .cairn/experiments/<id>/notify/.
std::filesystem::path webhook_spool(const StoreLayout& store, int64_t id);
// True when `spool` holds a notification not yet delivered (or a pending one, which the next
// sender delivers or drops by its marker).
bool has_pending_webhooks(const std::filesystem::path& spool);
// The delivery ids of the notification markers in an experiment's store.
Result<std::set<std::string>> notify_markers(const ExperimentDb& db);

// How long `cairn run` and `resume` wait for deliveries still pending when they end.
inline constexpr std::chrono::milliseconds kWebhookDrainLimit{15000};

}  // namespace cairn::cli
