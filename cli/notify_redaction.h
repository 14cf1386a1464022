// Webhook URLs carry their secret in the path or query (a Slack token): whatever cairn prints
// of them goes through here. `show --json` and `compare` print a stored config's `notify`
// this way; the webhook sender's warnings print the URL this way.
#pragma once

#include <string>

#include "common/json.h"

namespace cairn::cli {

// Scheme and host only: "https://hooks.slack.com/…" (credentials before the host dropped too).
std::string redacted_url(const std::string& url);

// `config` (a stored experiment's resolved config) with every notify.webhook URL redacted.
Json redact_notify(Json config);

}  // namespace cairn::cli
