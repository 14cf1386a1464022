#include "cli/notify_redaction.h"

namespace cairn::cli {

std::string redacted_url(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "(a URL)";
  const size_t start = scheme + 3;
  size_t end = url.find_first_of("/?#", start);
  if (end == std::string::npos) end = url.size();
  std::string host = url.substr(start, end - start);
  if (size_t at = host.rfind('@'); at != std::string::npos) host = host.substr(at + 1);
  return url.substr(0, start) + host + "/…";
}

Json redact_notify(Json config) {
  if (!config.is_object() || !config.contains("notify") || !config["notify"].is_object())
    return config;
  Json& webhook = config["notify"]["webhook"];
  if (webhook.is_string()) {
    webhook = redacted_url(webhook.get<std::string>());
  } else if (webhook.is_array()) {
    for (Json& url : webhook)
      if (url.is_string()) url = redacted_url(url.get<std::string>());
  } else if (webhook.is_null()) {
    config["notify"].erase("webhook");
  }
  return config;
}

}  // namespace cairn::cli
