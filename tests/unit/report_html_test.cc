#include "cli/report_html.h"

#include <doctest/doctest.h>

#include <string>

namespace cairn::cli {

TEST_CASE("report: markup in names and values is escaped") {
  CHECK(html_escape("<b a=\"x\">'&'</b>") == "&lt;b a=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/b&gt;");
  const Json experiment{{"id", 3},
                        {"name", "<i>x</i>"},
                        {"state", "ACTIVE"},
                        {"config", {{"searcher", {{"name", "random"}, {"metric", "m&m"}}}}}};
  ReportTrial t;
  t.record = Json{{"id", "3.1"}, {"state", "RUNNING"}, {"hparams", {{"opt", "<sgd>"}}}};
  t.validation.push_back({1, Json{{"m&m", 0.5}}});
  const std::string page = render_report_html(experiment, {t});
  CHECK(page.find("<i>") == std::string::npos);
  CHECK(page.find("&lt;i&gt;x&lt;/i&gt;") != std::string::npos);
  CHECK(page.find("<sgd>") == std::string::npos);
  CHECK(page.find("m&amp;m at each validation") != std::string::npos);
}

TEST_CASE("report: an experiment without validations yet gets empty charts, not NaN") {
  const Json experiment{
      {"id", 1}, {"state", "ACTIVE"}, {"config", {{"searcher", {{"metric", "val_loss"}}}}}};
  ReportTrial t;
  t.record = Json{{"id", "1.1"}, {"state", "RUNNING"}, {"hparams", Json::object()}};
  // A NaN or infinite metric is recorded as null: left out, never plotted.
  t.validation.push_back({1, Json{{"val_loss", nullptr}}});
  const std::string page = render_report_html(experiment, {t});
  CHECK(page.find("no data yet") != std::string::npos);
  CHECK(page.find("<polyline") == std::string::npos);  // nothing plotted, NaN least of all
  CHECK(page.find("<circle") == std::string::npos);
  CHECK(page.find("<td>1.1</td>") != std::string::npos);
}

TEST_CASE("report: a metric spanning decades gets a log axis; one within a decade does not") {
  const Json experiment{
      {"id", 2}, {"state", "COMPLETED"}, {"config", {{"searcher", {{"metric", "loss"}}}}}};
  auto page_for = [&](double last) {
    ReportTrial t;
    t.record = Json{{"id", "2.1"}, {"state", "COMPLETED"}, {"hparams", Json::object()}};
    t.validation.push_back({1, Json{{"loss", 1.0}}});
    t.validation.push_back({2, Json{{"loss", last}}});
    return render_report_html(experiment, {t});
  };
  CHECK(page_for(0.001).find(">loss (log scale)</text>") != std::string::npos);
  CHECK(page_for(0.5).find("(log scale)") == std::string::npos);
}

TEST_CASE("report: several experiments share the charts, each keeps its best marked") {
  auto exp = [](int id) {
    return Json{{"id", id},
                {"state", "COMPLETED"},
                {"config", {{"searcher", {{"name", "random"}, {"metric", "m"}}}}}};
  };
  auto trial = [](const std::string& id, double m) {
    ReportTrial t;
    t.record = Json{{"id", id}, {"state", "COMPLETED"}, {"hparams", {{"lr", m}}}};
    t.validation.push_back({1, Json{{"m", m}}});
    t.validation.push_back({2, Json{{"m", m / 2}}});
    return t;
  };
  const std::string page =
      render_report_html({ReportExperiment{exp(1), {trial("1.1", 0.4), trial("1.2", 0.2)}},
                          ReportExperiment{exp(2), {trial("2.1", 0.3), trial("2.2", 0.6)}}});
  CHECK(page.find("<h1>Experiments 1, 2</h1>") != std::string::npos);
  CHECK(page.find("<g class=\"series best\" data-trial=\"1.2\">") != std::string::npos);
  CHECK(page.find("<g class=\"series best\" data-trial=\"2.1\">") != std::string::npos);
  CHECK(page.find("<g class=\"series\" data-trial=\"2.2\">") != std::string::npos);
  CHECK(page.find("Written by <code>cairn report 1 2</code>") != std::string::npos);
}

}  // namespace cairn::cli
