#include "cli/webhook_sender.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <random>

#include "common/build_info.h"
#include "common/file_util.h"
#include "store/schema.h"

namespace cairn::cli {

namespace {

std::once_flag curl_init_once;

std::string hex(const unsigned char* bytes, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

std::string random_id() {
  std::random_device device;
  unsigned char bytes[16];
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(device());
  return hex(bytes, sizeof bytes);
}

std::string signature(const std::string& secret, const std::string& timestamp,
                      const std::string& body) {
  const std::string signed_text = timestamp + "." + body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(signed_text.data()), signed_text.size(), mac, &len);
  return "v1=" + hex(mac, len);
}

size_t discard_body(char*, size_t size, size_t n, void*) {
  return size * n;
}

// The worker's abort flag, read by curl's progress callback so drain() can cut a slow
// receiver short.
int abort_transfer(void* flag, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<std::atomic<bool>*>(flag)->load() ? 1 : 0;
}

}  // namespace

WebhookSender::WebhookSender(std::vector<std::string> urls, std::string secret,
                             std::filesystem::path spool, std::set<std::string> committed,
                             WebhookTiming timing)
    : urls_(std::move(urls)),
      secret_(std::move(secret)),
      spool_(std::move(spool)),
      timing_(timing) {
  std::call_once(curl_init_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  load_spool(committed);
  worker_ = std::thread([this] { work(); });
}

void WebhookSender::load_spool(const std::set<std::string>& committed) {
  if (spool_.empty()) return;
  std::error_code ec;
  std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> files;
  for (const auto& entry : std::filesystem::directory_iterator(spool_, ec)) {
    const auto extension = entry.path().extension();
    if ((extension == ".json" || extension == ".pending") && entry.is_regular_file(ec))
      files.emplace_back(entry.last_write_time(ec), entry.path());
  }
  std::sort(files.begin(), files.end());  // oldest first, as they happened
  size_t dropped = 0;
  for (const auto& [when, file] : files) {
    auto text = read_file(file);
    Json body = text.ok() ? Json::parse(*text, nullptr, false) : Json();
    if (!body.is_object() || !body.contains("delivery_id") || !body["delivery_id"].is_string()) {
      std::cerr << "cairn: warning: webhook: " << file.string()
                << " is not a notification cairn wrote; left there\n";
      continue;
    }
    const std::string id = body["delivery_id"].get<std::string>();
    if (file.extension() == ".pending" && !committed.count(id)) {
      // Prepared for a commit that never happened: what it reports was not stored (the
      // resume redoes it, and says so again if it happens again).
      std::filesystem::remove(file, ec);
      ++dropped;
      continue;
    }
    queue_.push_back({body.value("event", ""), id, *text, file});
  }
  if (dropped > 0)
    std::cerr << "cairn: " << dropped
              << " notification(s) of a change an earlier cairn did not store were dropped\n";
  if (!queue_.empty())
    std::cerr << "cairn: delivering " << queue_.size()
              << " notification(s) an earlier cairn left undelivered\n";
}

WebhookSender::~WebhookSender() {
  drain(std::chrono::milliseconds(0));
}

WebhookSender::Delivery WebhookSender::make_delivery(Json payload, const char* extension) {
  Delivery d;
  d.id = random_id();
  payload["delivery_id"] = d.id;
  d.event = payload.value("event", "");
  d.body = payload.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (!spool_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(spool_, ec);
    d.file = spool_ / (d.id + extension);
    if (Status st = write_file_atomic(d.file, d.body); !st.ok()) {
      std::cerr << "cairn: warning: webhook: cannot keep the " << d.event
                << " notification on disk (" << st.message()
                << "); a kill of cairn before its delivery would lose it\n";
      d.file.clear();
    }
  }
  return d;
}

void WebhookSender::enqueue_locked(Delivery d) {
  if (queue_.size() >= kMaxQueued) {
    std::cerr << "cairn: warning: webhook: more than " << kMaxQueued
              << " notifications waiting; the oldest (" << queue_.front().event << ") is "
              << (queue_.front().file.empty() ? "dropped" : "left for the next resume") << "\n";
    queue_.pop_front();
  }
  queue_.push_back(std::move(d));
  wake_.notify_all();
}

std::string WebhookSender::prepare(NotifyEvent, Json payload) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) return "";
  }
  // The file is written on the coordinator's thread: it must be on disk before the commit
  // that holds its marker.
  // One that could not be kept (said) is still delivered at release(), only not across a kill.
  Delivery d = make_delivery(std::move(payload), ".pending");
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string id = d.id;
  prepared_.emplace(id, std::move(d));
  return id;
}

void WebhookSender::release(const std::vector<std::string>& ids) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::string& id : ids) {
    auto it = prepared_.find(id);
    if (it == prepared_.end()) continue;
    if (!closing_) enqueue_locked(std::move(it->second));  // else its file waits for a resume
    prepared_.erase(it);
  }
}

void WebhookSender::discard(const std::vector<std::string>& ids) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::string& id : ids) {
    auto it = prepared_.find(id);
    if (it == prepared_.end()) continue;
    std::error_code ec;
    if (!it->second.file.empty()) std::filesystem::remove(it->second.file, ec);
    prepared_.erase(it);
  }
}

void WebhookSender::notify(NotifyEvent, Json payload) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) return;
  }
  Delivery d = make_delivery(std::move(payload), ".json");
  std::lock_guard<std::mutex> lock(mutex_);
  enqueue_locked(std::move(d));
}

void WebhookSender::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return aborting_ || !queue_.empty() || closing_; });
    if (aborting_) return;
    if (queue_.empty()) {
      if (closing_) return;
      continue;
    }
    Delivery d = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    bool settled = true;  // every URL took it, or gave an answer final for it
    for (const std::string& url : urls_) {
      const Outcome outcome = deliver(d, url);
      settled = settled && outcome.final;
      // Cut short by drain(): its one summary line says so.
      if (!outcome.failure.empty() && !abort_.load())
        std::cerr << "cairn: warning: webhook " << d.event << " to " << redacted_url(url)
                  << " not delivered: " << outcome.failure
                  << (outcome.final || d.file.empty() ? "" : "; kept for the next resume") << "\n";
    }
    if (settled && !d.file.empty()) {
      std::error_code ec;
      std::filesystem::remove(d.file, ec);
    }
    lock.lock();
    busy_ = false;
    wake_.notify_all();
  }
}

WebhookSender::Outcome WebhookSender::deliver(const Delivery& d, const std::string& url) {
  std::chrono::milliseconds backoff = timing_.first_backoff;
  std::string why;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    if (abort_.load())
      return {why.empty() ? "cairn was ending" : why + "; cairn was ending", false};
    CURL* curl = curl_easy_init();
    if (!curl) return {"libcurl could not start a request", false};
    const std::string timestamp = std::to_string(static_cast<int64_t>(std::time(nullptr)));
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, ("X-Cairn-Delivery: " + d.id).c_str());
    headers = curl_slist_append(headers, ("X-Cairn-Event: " + d.event).c_str());
    headers = curl_slist_append(headers, ("X-Cairn-Timestamp: " + timestamp).c_str());
    if (!secret_.empty())
      headers = curl_slist_append(
          headers, ("X-Cairn-Signature: " + signature(secret_, timestamp, d.body)).c_str());
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
    const std::string agent = std::string("cairn/") + CAIRN_VERSION;
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, d.body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(d.body.size()));
    curl_easy_setopt(curl, CURLOPT_USERAGENT, agent.c_str());
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(timing_.connect_timeout.count()));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timing_.request_timeout.count()));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard_body);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, abort_transfer);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &abort_);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    const CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    bool retry = true;
    if (rc != CURLE_OK) {
      why = rc == CURLE_ABORTED_BY_CALLBACK ? "cairn was ending" : curl_easy_strerror(rc);
    } else if (status >= 200 && status < 300) {
      return {"", true};
    } else {
      why = "HTTP " + std::to_string(status);
      retry = status == 429 || status >= 500;
    }
    if (!retry) return {why, true};
    if (attempt == kAttempts) break;
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, backoff, [this] { return aborting_; });
    backoff *= 2;
  }
  return {why + " (" + std::to_string(kAttempts) + " tries)", false};
}

void WebhookSender::drain(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!worker_.joinable()) return;
  closing_ = true;
  wake_.notify_all();
  const bool done = wake_.wait_for(lock, limit, [this] { return queue_.empty() && !busy_; });
  size_t abandoned = 0;
  if (!done) {
    abandoned = queue_.size() + (busy_ ? 1 : 0);
    aborting_ = true;
    abort_.store(true);
    wake_.notify_all();
  }
  lock.unlock();
  worker_.join();
  if (abandoned > 0)
    std::cerr << "cairn: warning: webhook: " << abandoned
              << " notification(s) not delivered before cairn ended\n";
}

std::filesystem::path webhook_spool(const StoreLayout& store, int64_t id) {
  return store.experiment(id) / "notify";
}

bool has_pending_webhooks(const std::filesystem::path& spool) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(spool, ec))
    if (entry.path().extension() == ".json" || entry.path().extension() == ".pending") return true;
  return false;
}

Result<std::set<std::string>> notify_markers(const ExperimentDb& db) {
  std::set<std::string> ids;
  const std::string_view prefix = schema::kNotifyPrefix;
  Status st = db.scan(prefix, [&](std::string_view key, std::string_view) {
    ids.emplace(key.substr(prefix.size()));
    return true;
  });
  if (!st.ok()) return st;
  return ids;
}

std::unique_ptr<WebhookSender> make_webhook_sender(const NotifyConfig& notify,
                                                   const std::filesystem::path& spool,
                                                   std::set<std::string> committed) {
  std::vector<std::string> urls = notify.webhooks;
  if (!notify.webhook_env.empty()) {
    const char* value = std::getenv(notify.webhook_env.c_str());
    if (value && *value)
      urls.emplace_back(value);
    else
      std::cerr << "cairn: warning: notify.webhook_env: " << notify.webhook_env
                << " is not set; no notification goes to it\n";
  }
  std::string secret;
  if (!notify.secret_env.empty()) {
    const char* value = std::getenv(notify.secret_env.c_str());
    if (value && *value)
      secret = value;
    else
      std::cerr << "cairn: warning: notify.secret_env: " << notify.secret_env
                << " is not set; notifications go unsigned\n";
  }
  if (urls.empty()) return nullptr;
  return std::make_unique<WebhookSender>(std::move(urls), std::move(secret), spool,
                                         std::move(committed));
}

}  // namespace cairn::cli
