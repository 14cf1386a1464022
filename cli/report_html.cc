#include "cli/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "common/metric_order.h"

namespace cairn::cli {

namespace {

// Colours that stay apart for a dozen trials; more reuse them (the tooltip names each).
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kWidth = 640, kHeight = 320;
constexpr int kLeft = 70, kRight = 20, kTop = 30, kBottom = 45;

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

struct Series {
  std::string label;  // the trial id
  std::vector<std::pair<double, double>> points;
};

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
  // A range of one value gets some width, so that its points sit in the middle.
  std::pair<double, double> padded() const {
    if (lo < hi) return {lo, hi};
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    return {lo - pad, hi + pad};
  }
};

std::optional<double> finite(const Json& v) {
  if (!v.is_number()) return std::nullopt;
  const double d = v.get<double>();
  if (!std::isfinite(d)) return std::nullopt;
  return d;
}

// The frame, axis labels and the end values of both axes; `draw` adds the marks.
template <typename Draw>
std::string chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                  Range x, Range y, const std::vector<std::string>& x_names, Draw draw) {
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(kWidth) +
                    "\" height=\"" + std::to_string(kHeight) + "\" role=\"img\" aria-label=\"" +
                    html_escape(title) + "\">";
  svg += "<text x=\"" + std::to_string(kWidth / 2) + "\" y=\"18\" text-anchor=\"middle\" " +
         "font-weight=\"bold\">" + html_escape(title) + "</text>";
  const int plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  svg += "<rect x=\"" + std::to_string(kLeft) + "\" y=\"" + std::to_string(kTop) + "\" width=\"" +
         std::to_string(plot_w) + "\" height=\"" + std::to_string(plot_h) +
         "\" fill=\"none\" stroke=\"#999\"/>";
  if (x.empty() || y.empty()) {
    svg += "<text x=\"" + std::to_string(kWidth / 2) + "\" y=\"" + std::to_string(kHeight / 2) +
           "\" text-anchor=\"middle\" fill=\"#777\">no data yet</text></svg>";
    return svg;
  }
  const auto [x0, x1] = x.padded();
  const auto [y0, y1] = y.padded();
  auto px = [&, x0 = x0, x1 = x1](double v) { return kLeft + (v - x0) / (x1 - x0) * plot_w; };
  auto py = [&, y0 = y0, y1 = y1](double v) { return kTop + (y1 - v) / (y1 - y0) * plot_h; };
  const std::string small = "font-size=\"11\" fill=\"#555\"";
  // Axis values: both ends of each axis (the categories by name, for a categorical x).
  svg += "<text x=\"" + std::to_string(kLeft - 4) + "\" y=\"" + std::to_string(kTop + 4) +
         "\" text-anchor=\"end\" " + small + ">" + number(y1) + "</text>";
  svg += "<text x=\"" + std::to_string(kLeft - 4) + "\" y=\"" + std::to_string(kTop + plot_h) +
         "\" text-anchor=\"end\" " + small + ">" + number(y0) + "</text>";
  const std::string axis_y = std::to_string(kTop + plot_h + 14);
  if (x_names.empty()) {
    svg += "<text x=\"" + std::to_string(kLeft) + "\" y=\"" + axis_y + "\" " + small + ">" +
           number(x0) + "</text>";
    svg += "<text x=\"" + std::to_string(kLeft + plot_w) + "\" y=\"" + axis_y +
           "\" text-anchor=\"end\" " + small + ">" + number(x1) + "</text>";
  } else {
    for (size_t i = 0; i < x_names.size(); ++i)
      svg += "<text x=\"" + number(px(static_cast<double>(i))) + "\" y=\"" + axis_y +
             "\" text-anchor=\"middle\" " + small + ">" + html_escape(x_names[i]) + "</text>";
  }
  svg += "<text x=\"" + std::to_string(kLeft + plot_w / 2) + "\" y=\"" +
         std::to_string(kHeight - 8) + "\" text-anchor=\"middle\">" + html_escape(x_label) +
         "</text>";
  svg += "<text x=\"14\" y=\"" + std::to_string(kTop + plot_h / 2) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 14 " +
         std::to_string(kTop + plot_h / 2) + ")\">" + html_escape(y_label) + "</text>";
  draw(svg, px, py);
  return svg + "</svg>";
}

std::string line_chart(const std::string& title, const std::string& y_label,
                       const std::vector<Series>& series) {
  Range x, y;
  for (const Series& s : series)
    for (const auto& [a, b] : s.points) {
      x.add(a);
      y.add(b);
    }
  return chart(title, "step", y_label, x, y, {}, [&](std::string& svg, auto px, auto py) {
    for (size_t i = 0; i < series.size(); ++i) {
      const Series& s = series[i];
      if (s.points.empty()) continue;
      const char* colour = kPalette[i % std::size(kPalette)];
      svg += "<g class=\"series\"><title>trial " + html_escape(s.label) + "</title>";
      if (s.points.size() > 1) {
        svg += "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"" + std::string(colour) +
               "\" points=\"";
        for (const auto& [a, b] : s.points) svg += number(px(a)) + "," + number(py(b)) + " ";
        svg += "\"/>";
      }
      const auto& [a, b] = s.points.back();  // where the trial stopped
      svg += "<circle r=\"2.5\" cx=\"" + number(px(a)) + "\" cy=\"" + number(py(b)) + "\" fill=\"" +
             colour + "\"/></g>";
    }
  });
}

// The hyperparameters as "a.b" names and their values, nested maps flattened.
void flatten(const Json& v, const std::string& prefix, std::map<std::string, Json>& out) {
  if (v.is_object()) {
    for (const auto& [k, child] : v.items())
      flatten(child, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  out[prefix] = v;
}

std::string value_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return number(v.get<double>());
  return v.dump();
}

std::string scatter(const std::string& name, const std::string& metric,
                    const std::vector<std::pair<std::string, Json>>& values,  // trial id → hparam
                    const std::map<std::string, double>& best) {
  bool numeric = true;
  for (const auto& [id, v] : values) numeric = numeric && v.is_number();
  std::vector<std::string> names;  // the categories in order, for a categorical x
  if (!numeric) {
    std::set<std::string> seen;
    for (const auto& [id, v] : values) seen.insert(value_text(v));
    names.assign(seen.begin(), seen.end());
  }
  std::vector<std::tuple<std::string, double, double>> points;
  Range x, y;
  for (const auto& [id, v] : values) {
    auto it = best.find(id);
    if (it == best.end()) continue;
    const double xv =
        numeric ? v.get<double>()
                : static_cast<double>(std::find(names.begin(), names.end(), value_text(v)) -
                                      names.begin());
    points.emplace_back(id, xv, it->second);
    x.add(xv);
    y.add(it->second);
  }
  if (!numeric) {  // every category has its place, whether a trial validated there or not
    x.add(0);
    x.add(static_cast<double>(names.size() - 1));
  }
  return chart(metric + " vs " + name, name, "best " + metric, x, y, names,
               [&](std::string& svg, auto px, auto py) {
                 for (const auto& [id, a, b] : points)
                   svg += "<circle r=\"4\" fill=\"#1f77b4\" fill-opacity=\"0.7\" cx=\"" +
                          number(px(a)) + "\" cy=\"" + number(py(b)) + "\"><title>trial " +
                          html_escape(id) + ": " + number(b) + "</title></circle>";
               });
}

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;font-size:13px}"
    "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}"
    "th{background:#f3f3f3}tr.best{background:#fff6d5}"
    ".charts svg{margin:0 1em 1em 0;background:#fff}";

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_report_html(const Json& experiment, const std::vector<ReportTrial>& trials) {
  const Json config = experiment.value("config", Json::object());
  const Json searcher = config.value("searcher", Json::object());
  const std::string metric = searcher.value("metric", "");
  const MetricOrder order(searcher.value("smaller_is_better", true));
  const std::string exp_id = experiment.value("id", Json(0)).dump();
  const std::string name = experiment.value("name", "");

  // Each trial's best value of the searcher's metric, over its validations.
  std::map<std::string, double> best;
  std::string best_trial;
  for (const ReportTrial& t : trials) {
    const std::string id = t.record.value("id", "");
    for (const MetricPoint& p : t.validation) {
      auto v = p.metrics.is_object() && p.metrics.contains(metric) ? finite(p.metrics[metric])
                                                                   : std::nullopt;
      if (!v) continue;
      auto it = best.find(id);
      if (it == best.end() || order.better(*v, it->second)) best[id] = *v;
    }
    if (best.count(id) && (best_trial.empty() || order.better(best[id], best[best_trial])))
      best_trial = id;
  }

  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  html += "<title>cairn experiment " + html_escape(exp_id) +
          (name.empty() ? "" : " " + html_escape(name)) + "</title><style>" + kStyle +
          "</style></head><body>\n";
  html += "<h1>Experiment " + html_escape(exp_id) + (name.empty() ? "" : ": " + html_escape(name)) +
          "</h1>\n<p>";
  html += "state <b>" + html_escape(experiment.value("state", "")) + "</b> · searcher <b>" +
          html_escape(searcher.value("name", "")) + "</b> · metric <b>" + html_escape(metric) +
          "</b> (" + order.better_word() + " is better) · " + std::to_string(trials.size()) +
          " trials";
  if (experiment.contains("seed")) html += " · seed " + html_escape(experiment["seed"].dump());
  if (!best_trial.empty())
    html += " · best trial <b>" + html_escape(best_trial) + "</b> (" + html_escape(metric) + " " +
            number(best[best_trial]) + ")";
  html += "</p>\n";

  // Learning curves.
  std::vector<Series> validation, training;
  std::string training_metric;
  for (const ReportTrial& t : trials)
    for (const MetricPoint& p : t.training)
      if (training_metric.empty() && p.metrics.is_object() && !p.metrics.empty())
        training_metric = p.metrics.contains("loss") ? "loss" : p.metrics.begin().key();
  for (const ReportTrial& t : trials) {
    const std::string id = t.record.value("id", "");
    Series v{id, {}}, tr{id, {}};
    for (const MetricPoint& p : t.validation)
      if (p.metrics.is_object() && p.metrics.contains(metric))
        if (auto y = finite(p.metrics[metric])) v.points.emplace_back(p.step, *y);
    for (const MetricPoint& p : t.training)
      if (p.metrics.is_object() && p.metrics.contains(training_metric))
        if (auto y = finite(p.metrics[training_metric])) tr.points.emplace_back(p.step, *y);
    validation.push_back(std::move(v));
    training.push_back(std::move(tr));
  }
  html += "<h2>Learning curves</h2>\n<div class=\"charts\">";
  html += line_chart(metric + " at each validation", metric, validation);
  if (!training_metric.empty())
    html += line_chart("training " + training_metric, training_metric, training);
  html += "</div>\n";

  // The metric against each hyperparameter that takes more than one value.
  std::map<std::string, std::vector<std::pair<std::string, Json>>> by_hparam;
  std::vector<std::map<std::string, Json>> flat(trials.size());
  for (size_t i = 0; i < trials.size(); ++i) {
    flatten(trials[i].record.value("hparams", Json::object()), "", flat[i]);
    for (const auto& [k, v] : flat[i])
      by_hparam[k].emplace_back(trials[i].record.value("id", ""), v);
  }
  std::string plots;
  for (const auto& [k, values] : by_hparam) {
    std::set<std::string> distinct;
    for (const auto& [id, v] : values) distinct.insert(v.dump());
    if (distinct.size() > 1) plots += scatter(k, metric, values, best);
  }
  if (!plots.empty())
    html += "<h2>Hyperparameters</h2>\n<div class=\"charts\">" + plots + "</div>\n";

  // The trial table.
  html +=
      "<h2>Trials</h2>\n<table><tr><th>trial</th><th>state</th><th>steps</th>"
      "<th>restarts</th><th>best " +
      html_escape(metric) + "</th>";
  for (const auto& [k, values] : by_hparam) html += "<th>" + html_escape(k) + "</th>";
  html += "</tr>\n";
  for (size_t i = 0; i < trials.size(); ++i) {
    const Json& r = trials[i].record;
    const std::string id = r.value("id", "");
    html += std::string("<tr") + (id == best_trial ? " class=\"best\"" : "") + "><td>" +
            html_escape(id) + "</td><td>" + html_escape(r.value("state", "")) + "</td><td>" +
            std::to_string(r.value("steps_completed", int64_t{0})) + "</td><td>" +
            std::to_string(r.value("restarts", int64_t{0})) + "</td><td>" +
            (best.count(id) ? number(best[id]) : "") + "</td>";
    for (const auto& [k, values] : by_hparam) {
      auto it = flat[i].find(k);
      html += "<td>" + (it == flat[i].end() ? "" : html_escape(value_text(it->second))) + "</td>";
    }
    html += "</tr>\n";
  }
  html += "</table>\n<p style=\"color:#777;font-size:12px\">Written by <code>cairn report " +
          html_escape(exp_id) + "</code>.</p>\n</body></html>\n";
  return html;
}

}  // namespace cairn::cli
