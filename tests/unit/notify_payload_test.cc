#include "engine/coordinator/notify_payload.h"

#include <doctest/doctest.h>

#include "cli/notify_redaction.h"

namespace cairn {

TEST_CASE("notify payload: the end of an experiment, as text and as fields") {
  NotifyExperiment exp{7, "mnist", "COMPLETED", "box"};
  Json p = experiment_end_payload(exp, NotifyCounts{8, 7, 1}, NotifyBest{"7.3", "val_loss", 0.125});
  CHECK(p["event"] == "experiment_end");
  CHECK(p["text"] ==
        "cairn: experiment 7 'mnist' COMPLETED on box: 7 of 8 trials completed, 1 errored; best "
        "trial 7.3 (val_loss 0.125) (cairn show 7)");
  CHECK(p["experiment"]["id"] == 7);
  CHECK(p["experiment"]["state"] == "COMPLETED");
  CHECK(p["trials"]["total"] == 8);
  CHECK(p["trials"]["errored"] == 1);
  CHECK(p["best"]["trial"] == "7.3");
  CHECK(p["best"]["value"] == 0.125);
  CHECK(p["host"] == "box");
  CHECK(p["hint"] == "cairn show 7");
  CHECK(p["timestamp"].is_number_integer());
  Json none = experiment_end_payload(exp, NotifyCounts{2, 0, 2}, std::nullopt);
  CHECK(none["best"].is_null());
  CHECK(none["text"].get<std::string>().find("best") == std::string::npos);
}

TEST_CASE("notify payload: a trial's error names the trial, why and its restarts") {
  Json p = trial_error_payload(NotifyExperiment{3, "", "ACTIVE", ""}, "3.2", "exited with 1", 2);
  CHECK(p["event"] == "trial_error");
  CHECK(
      p["text"] ==
      "cairn: trial 3.2 of experiment 3 failed: exited with 1 (after 2 restarts) (cairn logs 3.2)");
  CHECK(p["trial"] == Json{{"id", "3.2"}, {"error", "exited with 1"}, {"restarts", 2}});
}

TEST_CASE("webhook URLs are logged without their path, query or credentials") {
  CHECK(cli::redacted_url("https://hooks.slack.com/services/T0/B0/secret") ==
        "https://hooks.slack.com/…");
  CHECK(cli::redacted_url("http://user:pw@127.0.0.1:8080/x?token=1") == "http://127.0.0.1:8080/…");
  CHECK(cli::redacted_url("https://example.com?token=1") == "https://example.com/…");
  Json config{{"notify",
               {{"webhook", {"https://a.example/t/1", "http://b.example:81/t"}}, {"on", {"end"}}}},
              {"name", "x"}};
  CHECK(cli::redact_notify(config)["notify"] ==
        Json{{"webhook", {"https://a.example/…", "http://b.example:81/…"}}, {"on", {"end"}}});
  CHECK(cli::redact_notify(Json{{"name", "x"}}) == Json{{"name", "x"}});
}

}  // namespace cairn
