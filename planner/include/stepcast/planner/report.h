// Reports of a layout search (docs/planner.md "Output"): a readable table, one JSON
// object (format 1), CSV of every ranked layout, and the explanation of one layout. Pure
// functions of their inputs: equal results give byte-identical reports.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "stepcast/models/scenario.h"
#include "stepcast/planner/planner.h"

namespace stepcast::planner {

struct ReportOptions {
  int rows = 20;  // ranked layouts listed (text and JSON); the Pareto front is listed whole
};

std::string plan_report_text(const Scenario& scenario, const PlanResult& result, const ReportOptions& options);

// Top-level fields include those `expect` may name (scenario.cc): best_layout, best_gpus,
// best_step_time_s, best_tokens_per_s, best_mfu, best_goodput, best_time_to_train_h (with
// workload.train_tokens), best_cost (with a price), best_layout_by_tokens_per_s,
// plan_space, plan_feasible, plan_layout_rank (1-based, when the scenario's plan ranks).
// Nothing to rank (no layout fits): the best_* fields are absent.
std::string plan_report_json(const Scenario& scenario, const PlanResult& result, const ReportOptions& options);
// The same report as a JSON value (what plan_report_json prints).
nlohmann::ordered_json plan_report_value(const Scenario& scenario, const PlanResult& result,
                                         const ReportOptions& options);

// One header line and one line per ranked layout, best first.
std::string plan_report_csv(const PlanResult& result);

std::string explanation_text(const PlanResult& result, const Explanation& explanation);
std::string explanation_json(const PlanResult& result, const Explanation& explanation);

}  // namespace stepcast::planner
