#include "plan.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "stepcast/planner/planner.h"
#include "stepcast/planner/report.h"

namespace stepcast::cli {

namespace {

int input_error(const std::string& message) {
  std::fprintf(stderr, "stepcast: error: %s\n", message.c_str());
  return 2;
}

// A one-line bar on stderr, redrawn in place; only on a terminal.
void draw_progress(std::int64_t done, std::int64_t total) {
  constexpr int kWidth = 30;
  const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\rplanning [%s] %3.0f%%", bar.c_str(), std::min(frac, 1.0) * 100);
  std::fflush(stderr);
}

}  // namespace

int cmd_plan(const PlanArgs& a) {
  if (a.threads < -1 || a.threads > 1024) {
    return input_error(fmt::format("--threads: {} is out of range (0 to 1024; 0 = one per core)", a.threads));
  }
  if (a.top_k < -1 || a.top_k > 1000) return input_error(fmt::format("--top-k: {} is out of range (0 to 1000)", a.top_k));
  if (a.rows < 0 || a.rows > 1'000'000) return input_error(fmt::format("--top: {} is out of range (0 to 1000000)", a.rows));
  LoadOptions lo;
  lo.plan_template = true;
  auto s = load_scenario_file(a.scenario, lo);
  if (!s.ok()) return input_error(s.error().message);

  planner::PlanOptions o;
  o.threads = a.threads;
  if (a.top_k >= 0) o.top_k = a.top_k;
  const bool tty = isatty(STDERR_FILENO) == 1;
  if (tty) o.progress = draw_progress;
  auto r = planner::search_layouts(*s, o);
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!r.ok()) return input_error(r.error().message);

  if (!a.explain.empty()) {
    auto e = planner::explain_layout(*s, *r, a.explain);
    if (!e.ok()) return input_error("--explain: " + e.error().message);
    std::cout << (a.json ? planner::explanation_json(*r, *e) : planner::explanation_text(*r, *e));
    return 0;
  }
  if (!a.csv.empty()) {
    std::ofstream f(a.csv, std::ios::binary);
    f << planner::plan_report_csv(*r);
    if (!f) return input_error("--csv: cannot write " + a.csv);
  }
  planner::ReportOptions ro;
  ro.rows = a.rows;
  std::cout << (a.json ? planner::plan_report_json(*s, *r, ro) : planner::plan_report_text(*s, *r, ro));
  return 0;
}

Result<nlohmann::json> plan_check_fields(Scenario& s) {
  auto r = planner::search_layouts(s, planner::PlanOptions{});
  if (!r.ok()) return r.error();
  if (r->ranked.empty()) {
    return Error{"search: no layout fits in memory (stepcast plan SCENARIO --explain LAYOUT says by how much)"};
  }
  planner::ReportOptions ro;
  ro.rows = 0;
  nlohmann::json report = nlohmann::json::parse(planner::plan_report_json(s, *r, ro));
  nlohmann::json fields = nlohmann::json::object();
  for (const char* key : {"best_layout", "best_gpus", "best_step_time_s", "best_tokens_per_s", "best_mfu",
                          "best_goodput", "best_time_to_train_h", "best_cost", "best_layout_by_tokens_per_s",
                          "plan_space", "plan_feasible", "plan_layout_rank"}) {
    if (report.contains(key)) fields[key] = report[key];
  }
  const planner::Candidate& best = r->ranked.front();
  s.plan = best.plan;
  s.cluster.nodes = best.gpus() / s.cluster.gpus_per_node;
  return fields;
}

}  // namespace stepcast::cli
