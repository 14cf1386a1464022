// Delivers the coordinator's notifications (engine/coordinator/notifier.h) as JSON POSTs to
// the `notify.webhook` URLs (docs/config.md, "Notifications"), with libcurl.
//
// notify() only queues: one worker thread owns the network, so a slow or dead receiver never
// delays the coordinator's loop. The queue is bounded (kMaxQueued; the oldest event is dropped
// with a warning when it overflows). Each delivery is tried up to kAttempts times with
// back-off (1 s, 2 s, 4 s) on a connection error, a timeout, a 429 or a 5xx; any other 4xx
// is final. A failure is one line on stderr naming the event and the URL's scheme and host
// only (the path and query carry the secret token), and never reaches back into the run.
// Each POST carries X-Cairn-Delivery (the same id across retries, for the receiver to
// de-duplicate), X-Cairn-Timestamp and, with notify.secret_env, X-Cairn-Signature:
// "v1=" + hex HMAC-SHA256(secret, timestamp + "." + body).
//
// With a spool directory (webhook_spool()), each event is written there (write_file_atomic)
// before notify() returns, and removed once every URL took it (or answered a final 4xx): a
// `kill -9` of cairn, or an end past the drain limit, leaves it there, and the next sender
// on that directory (`cairn resume`, also of an ended experiment, or `resume --all`)
// delivers it first, with its delivery id: at least once.
//
// Thread-safety: notify() and drain() are called from one thread (the coordinator's); the
// worker is private.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/notify_redaction.h"
#include "engine/config/config.h"
#include "engine/coordinator/notifier.h"
#include "store/store_location.h"

namespace cairn::cli {

struct WebhookTiming {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds first_backoff{1000};  // doubled after each failed try
  // best_improved: at most one per this interval; the latest one waits for the next slot.
  std::chrono::milliseconds best_interval{60000};
};

class WebhookSender : public Notifier {
 public:
  static constexpr int kAttempts = 4;
  static constexpr size_t kMaxQueued = 64;

  WebhookSender(std::vector<std::string> urls, std::string secret, std::filesystem::path spool = {},
                WebhookTiming timing = {});
  ~WebhookSender() override;  // drain(0): abandons what is still queued, saying so
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  void notify(NotifyEvent event, Json payload) override;

  // Waits at most `limit` for queued and in-flight deliveries, then stops the worker and says
  // on stderr how many were abandoned. A pending best_improved is dropped (the end event
  // names the best). Later notify() calls are ignored.
  void drain(std::chrono::milliseconds limit);

 private:
  struct Delivery {
    std::string event;  // its payload's `event`
    std::string id;     // X-Cairn-Delivery
    std::string body;
  };
  struct Outcome {
    std::string failure;  // "" when delivered
    bool final = true;    // delivered, or an answer that retrying will not change
  };
  void work();
  // One POST with retries.
  Outcome deliver(const Delivery& d, const std::string& url);
  void load_spool();
  std::filesystem::path spool_file(const Delivery& d) const;
  void enqueue_locked(Json payload);

  std::vector<std::string> urls_;
  std::string secret_;
  std::filesystem::path spool_;
  WebhookTiming timing_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Delivery> queue_;
  bool busy_ = false;               // the worker is delivering one taken from queue_
  bool closing_ = false;            // drain() started: no new events
  bool aborting_ = false;           // drain()'s time is up: stop at once
  std::atomic<bool> abort_{false};  // the same, for curl's progress callback
  // best_improved pacing (the worker's clock).
  std::optional<double> best_value_;
  std::optional<Json> best_pending_;
  std::chrono::steady_clock::time_point best_next_{};
  std::thread worker_;
};

// The sender for `notify`, or null when it names no URL. notify.webhook_env and
// notify.secret_env are read from the environment here; one unset is said on stderr.
std::unique_ptr<WebhookSender> make_webhook_sender(const NotifyConfig& notify,
                                                   const std::filesystem::path& spool);

// Where experiment `id`'s undelivered notifications wait: .cairn/experiments/<id>/notify/.
std::filesystem::path webhook_spool(const StoreLayout& store, int64_t id);
// True when `spool` holds a notification not yet delivered.
bool has_pending_webhooks(const std::filesystem::path& spool);

// How long `cairn run` and `resume` wait for deliveries still pending when they end.
inline constexpr std::chrono::milliseconds kWebhookDrainLimit{15000};

}  // namespace cairn::cli
