#include "stepcast/app/plan.h"

#include <fmt/format.h>

namespace stepcast::app {

Result<PlanReport> run_plan(const PlanRequest& request) {
  if (request.threads < -1 || request.threads > 1024) {
    return Error{fmt::format("threads: {} is out of range (0 to 1024; 0 = one per core)", request.threads)};
  }
  if (request.resimulate < -1 || request.resimulate > 1000) {
    return Error{fmt::format("resimulate: {} is out of range (0 to 1000)", request.resimulate)};
  }
  if (request.rows < 0 || request.rows > 1'000'000) {
    return Error{fmt::format("rows: {} is out of range (0 to 1000000)", request.rows)};
  }
  ScenarioInput in = request.scenario;
  in.plan_template = true;
  auto s = load(in);
  if (!s.ok()) return s.error();
  planner::PlanOptions o;
  o.threads = request.threads;
  if (request.resimulate >= 0) o.top_k = request.resimulate;
  o.progress = request.progress;
  o.cancel = request.cancel;
  auto r = planner::search_layouts(*s, o);
  if (!r.ok()) return r.error();
  PlanReport report{std::move(s).value(), std::move(r).value(), {}, std::nullopt};
  report.options.rows = request.rows;
  if (!request.explain.empty()) {
    auto e = planner::explain_layout(report.scenario, report.result, request.explain);
    if (!e.ok()) return Error{"explain: " + e.error().message};
    report.explanation = std::move(e).value();
  }
  for (const std::string& n : report.scenario.notes) report.result.notes.push_back(n);
  return report;
}

std::string plan_text(const PlanReport& r) {
  if (r.explanation) return planner::explanation_text(r.result, *r.explanation);
  return planner::plan_report_text(r.scenario, r.result, r.options);
}

std::string plan_json(const PlanReport& r) {
  if (r.explanation) return planner::explanation_json(r.result, *r.explanation);
  return planner::plan_report_json(r.scenario, r.result, r.options);
}

std::string plan_csv(const PlanReport& r) { return planner::plan_report_csv(r.result); }

Fields plan_fields(const PlanReport& r) {
  planner::ReportOptions ro;
  ro.rows = 0;
  const Fields all = Fields::of(planner::plan_report_value(r.scenario, r.result, ro));
  Fields f;
  for (const std::string& name : all.names()) {
    if (name.rfind("best_", 0) == 0 || name.rfind("plan_", 0) == 0) f.set(name, *all.find(name));
  }
  return f;
}

}  // namespace stepcast::app
