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

}  // namespace cairn::cli
