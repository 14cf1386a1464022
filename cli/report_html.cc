#include "cli/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "cli/report_axis.h"
#include "cli/report_importance.h"
#include "cli/report_lineage.h"
#include "common/metric_order.h"

namespace cairn::cli {

namespace {

// Colours that stay apart for a dozen series; more reuse them (the tooltip names each).
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kWidth = 640, kHeight = 340;
constexpr int kLeft = 78, kRight = 24, kTop = 30, kBottom = 52;
constexpr const char* kBestColour = "#000";

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string coord(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::optional<double> finite(const Json& v) {
  if (!v.is_number()) return std::nullopt;
  const double d = v.get<double>();
  if (!std::isfinite(d)) return std::nullopt;
  return d;
}

std::string value_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return number(v.get<double>());
  return v.dump();
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

// One trial of any experiment on the page.
struct TrialView {
  size_t experiment = 0;
  std::string id;
  const ReportTrial* trial = nullptr;
  std::map<std::string, Json> hparams;
  std::optional<double> best;  // its best value of the metric
  std::optional<double> rank;  // 1 = best of the page
  bool is_best = false;        // the best trial of its experiment
  std::string colour;
};

// A plot area: the frame, grid, tick labels and axis titles; the caller adds the marks.
struct Plot {
  Axis x, y;
  std::vector<std::string> x_names;  // categories, when x is categorical (at 0, 1, …)
  int width = kWidth, height = kHeight;
  int plot_w() const { return width - kLeft - kRight; }
  int plot_h() const { return height - kTop - kBottom; }
  double px(double v) const { return kLeft + x.fraction(v) * plot_w(); }
  double py(double v) const { return kTop + (1 - y.fraction(v)) * plot_h(); }
};

std::string svg_open(const std::string& title, int width, int height) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
         "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) +
         " " + std::to_string(height) + "\" role=\"img\" aria-label=\"" + html_escape(title) +
         "\"><text x=\"" + std::to_string(width / 2) +
         "\" y=\"18\" text-anchor=\"middle\" font-weight=\"bold\">" + html_escape(title) +
         "</text>";
}

std::string axis_title(const std::string& name, Scale scale) {
  return scale == Scale::kLog ? name + " (log scale)" : name;
}

std::string frame(const Plot& p, const std::string& x_title, const std::string& y_title) {
  std::string svg;
  const std::string small = "font-size=\"11\" fill=\"#555\"";
  for (double t : p.y.ticks()) {
    const std::string y = coord(p.py(t));
    svg += "<line class=\"grid\" x1=\"" + std::to_string(kLeft) + "\" x2=\"" +
           std::to_string(kLeft + p.plot_w()) + "\" y1=\"" + y + "\" y2=\"" + y +
           "\" stroke=\"#eee\"/>";
    svg += "<text class=\"tick\" x=\"" + std::to_string(kLeft - 5) + "\" y=\"" +
           coord(p.py(t) + 4) + "\" text-anchor=\"end\" " + small + ">" +
           html_escape(p.y.label(t)) + "</text>";
  }
  const std::string below = std::to_string(kTop + p.plot_h() + 15);
  if (p.x_names.empty()) {
    for (double t : p.x.ticks()) {
      const std::string x = coord(p.px(t));
      svg += "<line class=\"grid\" y1=\"" + std::to_string(kTop) + "\" y2=\"" +
             std::to_string(kTop + p.plot_h()) + "\" x1=\"" + x + "\" x2=\"" + x +
             "\" stroke=\"#eee\"/>";
      svg += "<text class=\"tick\" x=\"" + x + "\" y=\"" + below + "\" text-anchor=\"middle\" " +
             small + ">" + html_escape(p.x.label(t)) + "</text>";
    }
  } else {
    for (size_t i = 0; i < p.x_names.size(); ++i)
      svg += "<text class=\"tick\" x=\"" + coord(p.px(static_cast<double>(i))) + "\" y=\"" + below +
             "\" text-anchor=\"middle\" " + small + ">" + html_escape(p.x_names[i]) + "</text>";
  }
  svg += "<rect x=\"" + std::to_string(kLeft) + "\" y=\"" + std::to_string(kTop) + "\" width=\"" +
         std::to_string(p.plot_w()) + "\" height=\"" + std::to_string(p.plot_h()) +
         "\" fill=\"none\" stroke=\"#999\"/>";
  svg += "<text class=\"axis-title\" x=\"" + std::to_string(kLeft + p.plot_w() / 2) + "\" y=\"" +
         std::to_string(p.height - 10) + "\" text-anchor=\"middle\">" + html_escape(x_title) +
         "</text>";
  const std::string mid = std::to_string(kTop + p.plot_h() / 2);
  svg += "<text class=\"axis-title\" x=\"16\" y=\"" + mid +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " + mid + ")\">" +
         html_escape(y_title) + "</text>";
  return svg;
}

std::string no_data(const std::string& title) {
  return svg_open(title, kWidth, kHeight) + "<rect x=\"" + std::to_string(kLeft) + "\" y=\"" +
         std::to_string(kTop) + "\" width=\"" + std::to_string(kWidth - kLeft - kRight) +
         "\" height=\"" + std::to_string(kHeight - kTop - kBottom) +
         "\" fill=\"none\" stroke=\"#999\"/><text x=\"" + std::to_string(kWidth / 2) + "\" y=\"" +
         std::to_string(kHeight / 2) +
         "\" text-anchor=\"middle\" fill=\"#777\">no data yet</text></svg>";
}

Scale metric_scale(const Extent& e) {
  return spans_decades(e) ? Scale::kLog : Scale::kLinear;
}

// One curve per trial: a line through its points and a point at each, every one titled.
std::string learning_curves(
    const std::string& title, const std::string& metric, const std::vector<TrialView>& trials,
    const std::function<const std::vector<MetricPoint>&(const TrialView&)>& points_of) {
  Extent xs, ys;
  std::vector<std::vector<std::pair<double, double>>> series(trials.size());
  for (size_t i = 0; i < trials.size(); ++i)
    for (const MetricPoint& p : points_of(trials[i]))
      if (p.metrics.is_object() && p.metrics.contains(metric))
        if (auto y = finite(p.metrics[metric])) {
          series[i].emplace_back(static_cast<double>(p.step), *y);
          xs.add(static_cast<double>(p.step));
          ys.add(*y);
        }
  if (!ys.any) return no_data(title);
  Plot plot{Axis(xs, Scale::kLinear), Axis(ys, metric_scale(ys)), {}};
  std::string svg = svg_open(title, kWidth, kHeight) +
                    frame(plot, "step (units trained)", axis_title(metric, plot.y.scale()));
  // The best trials last, so they are drawn on top.
  std::vector<size_t> order(trials.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(), [&](size_t i) { return !trials[i].is_best; });
  for (size_t i : order) {
    const TrialView& t = trials[i];
    if (series[i].empty()) continue;
    const std::string colour = t.is_best ? kBestColour : t.colour;
    svg += std::string("<g class=\"series") + (t.is_best ? " best" : "") + "\" data-trial=\"" +
           html_escape(t.id) + "\"><title>trial " + html_escape(t.id) +
           (t.is_best ? " (best)" : "") + "</title>";
    if (series[i].size() > 1) {
      svg += "<polyline fill=\"none\" stroke-width=\"" + std::string(t.is_best ? "3" : "1.5") +
             "\" stroke=\"" + colour + "\" points=\"";
      for (const auto& [a, b] : series[i]) svg += coord(plot.px(a)) + "," + coord(plot.py(b)) + " ";
      svg += "\"/>";
    }
    for (const auto& [a, b] : series[i])
      svg += "<circle class=\"point\" r=\"" + std::string(t.is_best ? "3.5" : "2.5") + "\" cx=\"" +
             coord(plot.px(a)) + "\" cy=\"" + coord(plot.py(b)) + "\" fill=\"" + colour +
             "\"><title>trial " + html_escape(t.id) + ", step " + number(a) + ": " +
             html_escape(metric) + " " + number(b) + "</title></circle>";
    if (t.is_best) {
      const auto& [a, b] = series[i].back();
      svg += "<text class=\"best-label\" x=\"" + coord(plot.px(a) - 4) + "\" y=\"" +
             coord(plot.py(b) - 7) + "\" text-anchor=\"end\" font-size=\"11\">★ best " +
             html_escape(t.id) + "</text>";
    }
    svg += "</g>";
  }
  return svg + "</svg>";
}

// The configured type of hyperparameter "a.b" (its spec in the config), "" when unknown.
std::string hparam_type(const Json& config, const std::string& name) {
  const Json* node = &config;
  if (!node->is_object() || !node->contains("hyperparameters")) return "";
  node = &(*node)["hyperparameters"];
  size_t start = 0;
  while (start <= name.size()) {
    const size_t dot = std::min(name.find('.', start), name.size());
    const std::string part = name.substr(start, dot - start);
    if (!node->is_object() || !node->contains(part)) return "";
    node = &(*node)[part];
    start = dot + 1;
  }
  return node->is_object() ? node->value("type", "") : "";
}

struct HparamAxis {
  std::string name;
  bool numeric = true;
  Scale scale = Scale::kLinear;
  std::vector<std::string> names;  // categories, sorted
  Extent extent;
  double position(const Json& v) const {
    if (numeric) return v.get<double>();
    return static_cast<double>(std::find(names.begin(), names.end(), value_text(v)) -
                               names.begin());
  }
};

HparamAxis hparam_axis(const std::string& name, const std::vector<TrialView>& trials,
                       const std::vector<ReportExperiment>& experiments) {
  HparamAxis a;
  a.name = name;
  std::set<std::string> categories;
  bool log = false;
  for (const TrialView& t : trials) {
    auto it = t.hparams.find(name);
    if (it == t.hparams.end()) continue;
    a.numeric = a.numeric && it->second.is_number();
    categories.insert(value_text(it->second));
    if (hparam_type(experiments[t.experiment].experiment.value("config", Json::object()), name) ==
        "log")
      log = true;
  }
  if (a.numeric) {
    for (const TrialView& t : trials)
      if (auto it = t.hparams.find(name); it != t.hparams.end())
        a.extent.add(it->second.get<double>());
    a.scale = log && a.extent.lo > 0 ? Scale::kLog : Scale::kLinear;
  } else {
    a.names.assign(categories.begin(), categories.end());
    a.extent.add(-0.5);
    a.extent.add(static_cast<double>(a.names.size()) - 0.5);
  }
  return a;
}

std::string scatter(const HparamAxis& h, const std::string& metric,
                    const std::vector<TrialView>& trials) {
  const std::string title = metric + " vs " + h.name;
  Extent ys;
  for (const TrialView& t : trials)
    if (t.best && t.hparams.count(h.name)) ys.add(*t.best);
  if (!ys.any) return no_data(title);
  Plot plot{Axis(h.extent, h.scale), Axis(ys, metric_scale(ys)), h.names};
  if (!h.numeric) {  // categories sit at 0, 1, … with half a slot either side
    Extent e;
    e.add(-0.5);
    e.add(static_cast<double>(h.names.size()) - 0.5);
    plot.x = Axis(e, Scale::kLinear);
  }
  std::string svg =
      svg_open(title, kWidth, kHeight) +
      frame(plot, axis_title(h.name, h.scale), axis_title("best " + metric, plot.y.scale()));
  for (const TrialView& t : trials) {
    auto it = t.hparams.find(h.name);
    if (!t.best || it == t.hparams.end()) continue;
    const double x = plot.px(h.position(it->second)), y = plot.py(*t.best);
    svg += std::string("<circle class=\"point") + (t.is_best ? " best" : "") + "\" data-trial=\"" +
           html_escape(t.id) + "\" r=\"" + (t.is_best ? "6" : "4") + "\" fill=\"" + t.colour +
           "\" fill-opacity=\"0.75\"" + (t.is_best ? " stroke=\"#000\" stroke-width=\"2\"" : "") +
           " cx=\"" + coord(x) + "\" cy=\"" + coord(y) + "\"><title>trial " + html_escape(t.id) +
           (t.is_best ? " (best)" : "") + ": " + html_escape(h.name) + " " +
           html_escape(value_text(it->second)) + ", " + html_escape(metric) + " " +
           number(*t.best) + "</title></circle>";
  }
  return svg + "</svg>";
}

// One vertical axis per hyperparameter that varies, the metric last; a line per trial.
std::string parallel_coordinates(const std::vector<HparamAxis>& axes, const std::string& metric,
                                 const std::vector<TrialView>& trials, const MetricOrder& order) {
  const std::string title = "parallel coordinates: hyperparameters and " + metric;
  Extent ms;
  for (const TrialView& t : trials)
    if (t.best) ms.add(*t.best);
  if (axes.empty() || !ms.any) return no_data(title);
  const Axis metric_axis(ms, metric_scale(ms));
  const int n = static_cast<int>(axes.size()) + 1;
  const int width = std::max(kWidth, 140 * n);
  const int top = 48, bottom = 40, h = kHeight - top - bottom;
  auto ax_x = [&](int i) { return kLeft + (width - kLeft - kRight) * i / std::max(1, n - 1); };
  std::vector<Axis> scales;
  for (const HparamAxis& a : axes) scales.emplace_back(a.extent, a.scale);
  std::string svg = svg_open(title, width, kHeight);
  const std::string small = "font-size=\"11\" fill=\"#555\"";
  auto draw_axis = [&](int i, const std::string& name, const Axis& axis,
                       const std::vector<std::string>& names) {
    const std::string x = std::to_string(ax_x(i));
    svg += "<line x1=\"" + x + "\" x2=\"" + x + "\" y1=\"" + std::to_string(top) + "\" y2=\"" +
           std::to_string(top + h) + "\" stroke=\"#999\"/>";
    svg += "<text class=\"axis-title\" x=\"" + x + "\" y=\"" + std::to_string(top - 12) +
           "\" text-anchor=\"middle\" font-size=\"12\">" +
           html_escape(axis_title(name, axis.scale())) + "</text>";
    if (names.empty()) {
      for (double t : axis.ticks())
        svg += "<text class=\"tick\" x=\"" + std::to_string(ax_x(i) - 4) + "\" y=\"" +
               coord(top + (1 - axis.fraction(t)) * h + 4) + "\" text-anchor=\"end\" " + small +
               ">" + html_escape(axis.label(t)) + "</text>";
    } else {
      for (size_t k = 0; k < names.size(); ++k)
        svg += "<text class=\"tick\" x=\"" + std::to_string(ax_x(i) - 4) + "\" y=\"" +
               coord(top + (1 - axis.fraction(static_cast<double>(k))) * h + 4) +
               "\" text-anchor=\"end\" " + small + ">" + html_escape(names[k]) + "</text>";
    }
  };
  for (size_t i = 0; i < axes.size(); ++i)
    draw_axis(static_cast<int>(i), axes[i].name, scales[i], axes[i].names);
  draw_axis(n - 1, metric, metric_axis, {});
  std::vector<size_t> idx;
  for (size_t i = 0; i < trials.size(); ++i)
    if (trials[i].best) idx.push_back(i);
  std::stable_partition(idx.begin(), idx.end(), [&](size_t i) { return !trials[i].is_best; });
  for (size_t i : idx) {
    const TrialView& t = trials[i];
    // Colour by the metric: green the best end, red the worst.
    double f = metric_axis.fraction(*t.best);
    if (!order.better(ms.lo, ms.hi) && ms.lo != ms.hi) f = 1 - f;  // larger is better
    const int red = static_cast<int>(std::lround(40 + 200 * f)),
              green = static_cast<int>(std::lround(170 - 120 * f));
    char colour[16];
    std::snprintf(colour, sizeof colour, "#%02x%02x50", red, green);
    std::string points, words;
    for (size_t k = 0; k < axes.size(); ++k) {
      auto it = t.hparams.find(axes[k].name);
      if (it == t.hparams.end()) continue;
      points += std::to_string(ax_x(static_cast<int>(k))) + "," +
                coord(top + (1 - scales[k].fraction(axes[k].position(it->second))) * h) + " ";
      words += ", " + axes[k].name + " " + value_text(it->second);
    }
    points +=
        std::to_string(ax_x(n - 1)) + "," + coord(top + (1 - metric_axis.fraction(*t.best)) * h);
    svg += std::string("<polyline class=\"trial-line") + (t.is_best ? " best" : "") +
           "\" data-trial=\"" + html_escape(t.id) + "\" fill=\"none\" stroke=\"" +
           (t.is_best ? kBestColour : colour) + "\" stroke-width=\"" + (t.is_best ? "3" : "1.5") +
           "\" stroke-opacity=\"0.8\" points=\"" + points + "\"><title>trial " + html_escape(t.id) +
           (t.is_best ? " (best)" : "") + ": " + html_escape(metric) + " " + number(*t.best) +
           html_escape(words) + "</title></polyline>";
  }
  return svg + "</svg>";
}

// Hyperband/ASHA: per bracket a column per rung; each trial's result at a rung is a dot at
// its metric (filled: promoted), and a line follows a trial from rung to rung.
std::string brackets_view(const Json& state, const std::string& exp_id, const std::string& metric,
                          const std::string& best_id) {
  const Json brackets = state.value("brackets", Json::array());
  if (!brackets.is_array() || brackets.empty()) return "";
  const std::string title =
      "experiment " + exp_id + ": brackets and rungs (who was promoted where)";
  Extent ms;
  int columns = 0;
  for (const Json& b : brackets)
    for (const Json& r : b.value("rungs", Json::array())) {
      ++columns;
      for (const Json& res : r.value("results", Json::array()))
        if (auto m = finite(res.value("metric", Json()))) ms.add(*m);
    }
  if (!ms.any || columns == 0) return no_data(title);
  const Axis y(ms, metric_scale(ms));
  const int slot = 90, gap = 30, top = 48, bottom = 40, h = kHeight - top - bottom;
  const int width =
      std::max(kWidth, kLeft + kRight + columns * slot + static_cast<int>(brackets.size()) * gap);
  std::string svg = svg_open(title, width, kHeight);
  const std::string small = "font-size=\"11\" fill=\"#555\"";
  auto py = [&](double v) { return top + (1 - y.fraction(v)) * h; };
  for (double t : y.ticks())
    svg += "<text class=\"tick\" x=\"" + std::to_string(kLeft - 5) + "\" y=\"" + coord(py(t) + 4) +
           "\" text-anchor=\"end\" " + small + ">" + html_escape(y.label(t)) + "</text>";
  const std::string mid = std::to_string(top + h / 2);
  svg += "<text class=\"axis-title\" x=\"16\" y=\"" + mid +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " + mid + ")\">" +
         html_escape(axis_title(metric + " at the rung", y.scale())) + "</text>";
  int x = kLeft + gap / 2;
  for (const Json& b : brackets) {
    const Json rungs = b.value("rungs", Json::array());
    const int bx = x;
    svg += "<g class=\"bracket\"><text x=\"" +
           std::to_string(bx + static_cast<int>(rungs.size()) * slot / 2) + "\" y=\"" +
           std::to_string(top - 14) + "\" text-anchor=\"middle\" font-size=\"12\">bracket " +
           std::to_string(b.value("bracket", 0)) + "</text>";
    std::map<int64_t, std::pair<double, double>> last;  // trial → its dot at the previous rung
    for (const Json& r : rungs) {
      const int cx = x + slot / 2;
      svg += "<line x1=\"" + std::to_string(cx) + "\" x2=\"" + std::to_string(cx) + "\" y1=\"" +
             std::to_string(top) + "\" y2=\"" + std::to_string(top + h) + "\" stroke=\"#ddd\"/>";
      svg += "<text class=\"tick\" x=\"" + std::to_string(cx) + "\" y=\"" +
             std::to_string(top + h + 15) + "\" text-anchor=\"middle\" " + small + ">@" +
             std::to_string(r.value("length", 0)) + "</text>";
      std::set<int64_t> promoted;
      for (const Json& p : r.value("promoted", Json::array()))
        if (p.is_number_integer()) promoted.insert(p.get<int64_t>());
      for (const Json& res : r.value("results", Json::array())) {
        auto m = finite(res.value("metric", Json()));
        if (!m) continue;
        const int64_t trial = res.value("trial", int64_t{0});
        const std::string id = exp_id + "." + std::to_string(trial);
        const bool up = promoted.count(trial) || res.value("state", "") == "promoted";
        const double dy = py(*m);
        if (auto it = last.find(trial); it != last.end())
          svg += "<line class=\"promotion\" x1=\"" + coord(it->second.first) + "\" y1=\"" +
                 coord(it->second.second) + "\" x2=\"" + coord(cx) + "\" y2=\"" + coord(dy) +
                 "\" stroke=\"#1f77b4\" stroke-opacity=\"0.5\"/>";
        last[trial] = {cx, dy};
        const bool best = id == best_id;
        svg +=
            std::string("<circle class=\"point") + (best ? " best" : "") + "\" data-trial=\"" +
            html_escape(id) + "\" r=\"" + (best ? "6" : "4") + "\" cx=\"" + coord(cx) + "\" cy=\"" +
            coord(dy) + "\" fill=\"" + (up ? "#1f77b4" : "#fff") + "\" stroke=\"" +
            (best ? "#000" : "#1f77b4") + "\" stroke-width=\"" + (best ? "2" : "1.5") +
            "\"><title>trial " + html_escape(id) + ", bracket " +
            std::to_string(b.value("bracket", 0)) + ", rung @" +
            std::to_string(r.value("length", 0)) + ": " + html_escape(metric) + " " + number(*m) +
            " (" +
            html_escape(up ? std::string("promoted") : res.value("state", std::string("stopped"))) +
            ")</title></circle>";
      }
      x += slot;
    }
    svg += "</g>";
    x += gap;
  }
  return svg + "</svg>";
}

std::string importance_table(const std::vector<Importance>& importance) {
  std::string html =
      "<table class=\"importance\"><tr><th>hyperparameter</th><th>η²</th><th></th>"
      "<th>groups</th></tr>\n";
  for (const Importance& i : importance) {
    const int bar = static_cast<int>(std::lround(200 * std::clamp(i.eta_squared, 0.0, 1.0)));
    html += "<tr class=\"hparam\"><td>" + html_escape(i.name) + "</td><td>" +
            number(std::round(i.eta_squared * 1000) / 1000) +
            "</td><td><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"204\" height=\"12\" "
            "role=\"img\" aria-label=\"importance of " +
            html_escape(i.name) + "\"><rect width=\"" + std::to_string(bar) +
            "\" height=\"12\" fill=\"#1f77b4\"><title>" + html_escape(i.name) + ": η² " +
            number(i.eta_squared) + "</title></rect></svg></td><td>" + std::to_string(i.groups) +
            "</td></tr>\n";
  }
  return html + "</table>\n";
}

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;font-size:13px}"
    "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}"
    "th{background:#f3f3f3}tr.best{background:#fff6d5}"
    ".charts svg{margin:0 1em 1em 0;background:#fff}"
    ".note{color:#555;font-size:13px}";

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
  return render_report_html(std::vector<ReportExperiment>{{experiment, trials}});
}

std::string render_report_html(const std::vector<ReportExperiment>& experiments) {
  const Json first = experiments.empty() ? Json::object() : experiments[0].experiment;
  const Json searcher = first.value("config", Json::object()).value("searcher", Json::object());
  const std::string metric = searcher.value("metric", "");
  const MetricOrder order(searcher.value("smaller_is_better", true));
  const bool several = experiments.size() > 1;

  // Every trial of the page, with its best value of the metric over its validations.
  std::vector<TrialView> trials;
  std::vector<std::string> best_of(experiments.size());
  for (size_t e = 0; e < experiments.size(); ++e) {
    std::optional<double> exp_best;
    for (const ReportTrial& t : experiments[e].trials) {
      TrialView v;
      v.experiment = e;
      v.id = t.record.value("id", "");
      v.trial = &t;
      flatten(t.record.value("hparams", Json::object()), "", v.hparams);
      for (const MetricPoint& p : t.validation) {
        auto m = p.metrics.is_object() && p.metrics.contains(metric) ? finite(p.metrics[metric])
                                                                     : std::nullopt;
        if (m && (!v.best || order.better(*m, *v.best))) v.best = m;
      }
      if (v.best && (!exp_best || order.better(*v.best, *exp_best))) {
        exp_best = v.best;
        best_of[e] = v.id;
      }
      const size_t n = several ? e : trials.size();
      v.colour = kPalette[n % std::size(kPalette)];
      trials.push_back(std::move(v));
    }
  }
  for (TrialView& t : trials)
    t.is_best = !best_of[t.experiment].empty() && best_of[t.experiment] == t.id;
  {
    std::vector<size_t> ranked;
    for (size_t i = 0; i < trials.size(); ++i)
      if (trials[i].best) ranked.push_back(i);
    std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
      return order.better(*trials[a].best, *trials[b].best);
    });
    for (size_t r = 0; r < ranked.size(); ++r) trials[ranked[r]].rank = static_cast<double>(r + 1);
  }

  std::string ids, command = "cairn report";
  for (const ReportExperiment& e : experiments) {
    ids += (ids.empty() ? "" : ", ") + e.experiment.value("id", Json(0)).dump();
    command += " " + e.experiment.value("id", Json(0)).dump();
  }
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  const std::string name = several ? "" : first.value("name", "");
  html += "<title>cairn " + std::string(several ? "experiments " : "experiment ") +
          html_escape(ids) + (name.empty() ? "" : " " + html_escape(name)) + "</title><style>" +
          kStyle + "</style></head><body>\n";
  html += "<h1>" + std::string(several ? "Experiments " : "Experiment ") + html_escape(ids) +
          (name.empty() ? "" : ": " + html_escape(name)) + "</h1>\n";
  for (size_t e = 0; e < experiments.size(); ++e) {
    const Json& exp = experiments[e].experiment;
    const Json s = exp.value("config", Json::object()).value("searcher", Json::object());
    html += "<p class=\"summary\">";
    if (several)
      html += "<span style=\"color:" + std::string(kPalette[e % std::size(kPalette)]) +
              "\">■</span> experiment <b>" + html_escape(exp.value("id", Json(0)).dump()) +
              "</b> " + html_escape(exp.value("name", "")) + " · ";
    html += "state <b>" + html_escape(exp.value("state", "")) + "</b> · searcher <b>" +
            html_escape(s.value("name", "")) + "</b> · metric <b>" +
            html_escape(s.value("metric", "")) + "</b> (" +
            MetricOrder(s.value("smaller_is_better", true)).better_word() + " is better) · " +
            std::to_string(experiments[e].trials.size()) + " trials";
    if (exp.contains("seed")) html += " · seed " + html_escape(exp["seed"].dump());
    for (const TrialView& t : trials)
      if (t.experiment == e && t.is_best)
        html += " · best trial <b>" + html_escape(t.id) + "</b> (" + html_escape(metric) + " " +
                number(*t.best) + ")";
    if (s.value("metric", "") != metric)
      html += " · <i>plotted by " + html_escape(metric) + " (the first experiment's metric)</i>";
    html += "</p>\n";
  }

  // Learning curves.
  std::string training_metric;
  for (const TrialView& t : trials)
    for (const MetricPoint& p : t.trial->training)
      if (training_metric.empty() && p.metrics.is_object() && !p.metrics.empty())
        training_metric = p.metrics.contains("loss") ? "loss" : p.metrics.begin().key();
  html += "<h2>Learning curves</h2>\n<div class=\"charts\">";
  html += learning_curves(
      metric + " at each validation", metric, trials,
      [](const TrialView& t) -> const std::vector<MetricPoint>& { return t.trial->validation; });
  if (!training_metric.empty())
    html += learning_curves(
        "training " + training_metric, training_metric, trials,
        [](const TrialView& t) -> const std::vector<MetricPoint>& { return t.trial->training; });
  html += "</div>\n";

  // The hyperparameters that take more than one value.
  std::map<std::string, std::set<std::string>> distinct;
  for (const TrialView& t : trials)
    for (const auto& [k, v] : t.hparams) distinct[k].insert(v.dump());
  std::vector<std::string> varying;
  for (const auto& [k, values] : distinct)
    if (values.size() > 1) varying.push_back(k);
  std::vector<std::map<std::string, Json>> hp;
  std::vector<std::optional<double>> ranks;
  for (const TrialView& t : trials) {
    hp.push_back(t.hparams);
    ranks.push_back(t.rank);
  }
  const std::vector<Importance> importance = hparam_importance(hp, ranks);
  // Most important first; the rest by name.
  std::vector<std::string> shown;
  for (const Importance& i : importance) shown.push_back(i.name);
  for (const std::string& k : varying)
    if (std::find(shown.begin(), shown.end(), k) == shown.end()) shown.push_back(k);
  std::vector<HparamAxis> axes;
  for (const std::string& k : shown) axes.push_back(hparam_axis(k, trials, experiments));
  if (!axes.empty()) {
    html += "<h2>Hyperparameters</h2>\n<div class=\"charts\">";
    for (const HparamAxis& a : axes) html += scatter(a, metric, trials);
    html += "</div>\n<h2>Parallel coordinates</h2>\n<div class=\"charts\">" +
            parallel_coordinates(axes, metric, trials, order) + "</div>\n";
    html += "<h2>Which hyperparameters matter</h2>\n";
    if (importance.empty())
      html += "<p class=\"note\">Too few trials with a " + html_escape(metric) +
              " to estimate (4 are needed).</p>\n";
    else
      html += importance_table(importance);
    html += "<p class=\"note\">Method: " + std::string(kImportanceMethod) + ".</p>\n";
  }

  // Hyperband and ASHA: brackets and rungs.
  std::string brackets;
  for (size_t e = 0; e < experiments.size(); ++e) {
    const Json& exp = experiments[e].experiment;
    brackets += brackets_view(exp.value("searcher_state", Json::object()),
                              exp.value("id", Json(0)).dump(), metric, best_of[e]);
  }
  if (!brackets.empty())
    html +=
        "<h2>Brackets and rungs</h2>\n<p class=\"note\">Each dot is a trial's result at a "
        "rung (filled: promoted to the next); lines follow a trial up the rungs.</p>\n"
        "<div class=\"charts\">" +
        brackets + "</div>\n";

  // Population-based training: who was cloned from whom, and at which step.
  std::string lineage;
  bool any_clone = false;
  for (size_t e = 0; e < experiments.size(); ++e) {
    std::vector<Json> records;
    std::vector<std::string> best_text;
    for (const TrialView& t : trials)
      if (t.experiment == e) {
        records.push_back(t.trial->record);
        best_text.push_back(t.best ? "best " + metric + " " + number(*t.best) : "");
      }
    const std::string chart =
        lineage_chart(experiments[e].experiment.value("id", Json(0)).dump(), records, best_text);
    any_clone = any_clone || !chart.empty();
    lineage += chart;
  }
  if (any_clone)
    html +=
        "<h2>Lineage</h2>\n<p class=\"note\">Each bar is a trial over the steps it trained "
        "(grey: stopped and replaced); a clone starts from its parent's checkpoint where the "
        "dashed line leaves the parent's bar.</p>\n<div class=\"charts\">" +
        lineage + "</div>\n";

  // The trial table.
  html +=
      "<h2>Trials</h2>\n<table><tr><th>trial</th><th>state</th><th>steps</th>"
      "<th>restarts</th><th>best " +
      html_escape(metric) + "</th>";
  if (any_clone) html += "<th>cloned from</th>";
  for (const std::string& k : varying) html += "<th>" + html_escape(k) + "</th>";
  html += "</tr>\n";
  for (const TrialView& t : trials) {
    const Json& r = t.trial->record;
    html += std::string("<tr") + (t.is_best ? " class=\"best\"" : "") + "><td>" +
            html_escape(t.id) + "</td><td>" + html_escape(r.value("state", "")) + "</td><td>" +
            std::to_string(r.value("steps_completed", int64_t{0})) + "</td><td>" +
            std::to_string(r.value("restarts", int64_t{0})) + "</td><td>" +
            (t.best ? number(*t.best) : "") + "</td>";
    if (any_clone) html += "<td>" + html_escape(parent_text(r)) + "</td>";
    for (const std::string& k : varying) {
      auto it = t.hparams.find(k);
      html += "<td>" + (it == t.hparams.end() ? "" : html_escape(value_text(it->second))) + "</td>";
    }
    html += "</tr>\n";
  }
  html += "</table>\n<p style=\"color:#777;font-size:12px\">Written by <code>" +
          html_escape(command) + "</code>.</p>\n</body></html>\n";
  return html;
}

}  // namespace cairn::cli
