#include "cli/report_lineage.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

#include "cli/report_html.h"

namespace cairn::cli {

namespace {

std::string coord(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

bool is_clone(const Json& r) {
  return r.contains("parent") && r["parent"].is_object() &&
         r["parent"].value("trial", Json()).is_string();
}

// Trial ids compare by their trial number ("1.10" after "1.9").
int64_t trial_number(const std::string& id) {
  const size_t dot = id.find('.');
  return dot == std::string::npos ? 0 : std::strtoll(id.c_str() + dot + 1, nullptr, 10);
}

}  // namespace

std::string parent_text(const Json& r) {
  if (!is_clone(r)) return "";
  return r["parent"]["trial"].get<std::string>() + " @ " +
         std::to_string(r["parent"].value("step", int64_t{0}));
}

std::string lineage_chart(const std::string& exp_id, const std::vector<Json>& records,
                          const std::vector<std::string>& best_text) {
  if (std::none_of(records.begin(), records.end(), is_clone)) return "";
  std::map<std::string, size_t> by_id;
  for (size_t i = 0; i < records.size(); ++i) by_id[records[i].value("id", "")] = i;
  // Children of each trial; roots are trials that are not clones, or whose parent is not on
  // the page.
  std::map<size_t, std::vector<size_t>> children;
  std::vector<size_t> roots;
  for (size_t i = 0; i < records.size(); ++i) {
    auto parent = is_clone(records[i])
                      ? by_id.find(records[i]["parent"]["trial"].get<std::string>())
                      : by_id.end();
    if (parent != by_id.end() && parent->second != i)
      children[parent->second].push_back(i);
    else
      roots.push_back(i);
  }
  auto by_number = [&](size_t a, size_t b) {
    return trial_number(records[a].value("id", "")) < trial_number(records[b].value("id", ""));
  };
  std::sort(roots.begin(), roots.end(), by_number);
  for (auto& [_, list] : children) std::sort(list.begin(), list.end(), by_number);
  std::vector<size_t> order;
  std::vector<bool> seen(records.size(), false);
  std::function<void(size_t)> visit = [&](size_t i) {
    if (seen[i]) return;  // a damaged record's cycle is drawn once
    seen[i] = true;
    order.push_back(i);
    for (size_t c : children[i]) visit(c);
  };
  for (size_t r : roots) visit(r);

  int64_t max_step = 1;
  auto start_of = [&](size_t i) {
    return is_clone(records[i]) ? records[i]["parent"].value("step", int64_t{0}) : int64_t{0};
  };
  auto end_of = [&](size_t i) {
    return std::max(start_of(i), records[i].value("steps_completed", int64_t{0}));
  };
  for (size_t i : order) max_step = std::max(max_step, end_of(i));
  constexpr int kLeft = 70, kRight = 24, kTop = 40, kRow = 18, kBottom = 40, kWidth = 640;
  const int height = kTop + kRow * static_cast<int>(order.size()) + kBottom;
  const double plot_w = kWidth - kLeft - kRight;
  auto px = [&](int64_t step) {
    return kLeft + plot_w * static_cast<double>(step) / static_cast<double>(max_step);
  };
  std::map<size_t, double> row_y;
  for (size_t r = 0; r < order.size(); ++r) row_y[order[r]] = kTop + kRow * (r + 0.5);

  const std::string title = "experiment " + exp_id + ": lineage (who was cloned from whom)";
  std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(kWidth) +
      "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(kWidth) + " " +
      std::to_string(height) + "\" role=\"img\" aria-label=\"" + html_escape(title) +
      "\"><text x=\"" + std::to_string(kWidth / 2) +
      "\" y=\"18\" text-anchor=\"middle\" font-weight=\"bold\">" + html_escape(title) + "</text>";
  const std::string small = "font-size=\"11\" fill=\"#555\"";
  const double bottom = kTop + kRow * static_cast<double>(order.size());
  svg += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + coord(px(max_step)) + "\" y1=\"" +
         coord(bottom) + "\" y2=\"" + coord(bottom) + "\" stroke=\"#888\"/>";
  for (int k = 0; k <= 4; ++k) {
    const int64_t step = max_step * k / 4;
    svg += "<text class=\"tick\" x=\"" + coord(px(step)) + "\" y=\"" + coord(bottom + 15) +
           "\" text-anchor=\"middle\" " + small + ">" + std::to_string(step) + "</text>";
  }
  svg += "<text class=\"axis-title\" x=\"" + coord(kLeft + plot_w / 2) + "\" y=\"" +
         coord(bottom + 32) + "\" text-anchor=\"middle\">step (units trained)</text>";
  for (size_t i : order) {
    const Json& r = records[i];
    const std::string id = r.value("id", "");
    const double y = row_y[i];
    const bool clone = is_clone(r);
    const std::string state = r.value("state", "");
    const bool stopped = state == "STOPPED";
    std::string tip = "trial " + id;
    if (clone) tip += ", cloned from " + parent_text(r);
    tip +=
        ", steps " + std::to_string(start_of(i)) + "–" + std::to_string(end_of(i)) + ", " + state;
    if (i < best_text.size() && !best_text[i].empty()) tip += ", " + best_text[i];
    svg += "<g class=\"lineage-trial\" data-trial=\"" + html_escape(id) + "\"";
    if (clone)
      svg += " data-parent=\"" + html_escape(r["parent"]["trial"].get<std::string>()) + "\"";
    svg += "><title>" + html_escape(tip) + "</title>";
    svg += "<text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" + coord(y + 4) +
           "\" text-anchor=\"end\" " + small + ">" + html_escape(id) + "</text>";
    // A link from the parent's bar, at the step the clone was made, down to the clone's.
    if (clone)
      if (auto p = by_id.find(r["parent"]["trial"].get<std::string>());
          p != by_id.end() && row_y.count(p->second))
        svg += "<line class=\"clone-link\" x1=\"" + coord(px(start_of(i))) + "\" y1=\"" +
               coord(row_y[p->second]) + "\" x2=\"" + coord(px(start_of(i))) + "\" y2=\"" +
               coord(y) + "\" stroke=\"#888\" stroke-dasharray=\"3 2\"/>";
    svg += "<line class=\"bar\" x1=\"" + coord(px(start_of(i))) + "\" y1=\"" + coord(y) +
           "\" x2=\"" + coord(px(end_of(i))) + "\" y2=\"" + coord(y) + "\" stroke=\"" +
           (stopped ? "#bbb" : "#1f77b4") + "\" stroke-width=\"8\"/>";
    if (clone)
      svg += "<circle cx=\"" + coord(px(start_of(i))) + "\" cy=\"" + coord(y) +
             "\" r=\"3\" fill=\"#fff\" stroke=\"#555\"/>";
    svg += "</g>";
  }
  return svg + "</svg>";
}

}  // namespace cairn::cli
