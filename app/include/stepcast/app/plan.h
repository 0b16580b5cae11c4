// `plan`: search every layout of a scenario's model on its cluster (or a sweep), rank by
// time to train with failures, tokens/s or cost, re-simulate the best, Pareto front;
// optionally explain one layout (docs/planner.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "stepcast/app/fields.h"
#include "stepcast/app/scenario_input.h"
#include "stepcast/planner/planner.h"
#include "stepcast/planner/report.h"

namespace stepcast::app {

struct PlanRequest {
  ScenarioInput scenario;       // loaded as a plan template (the plan may be partial)
  int threads = -1;             // -1: search.threads; 0: one per core; else 1 to 1024
  int resimulate = -1;          // layouts re-simulated by the engine; -1: search.top_k
  int rows = 20;                // ranked layouts listed in the report
  std::string explain;          // a layout ("tp=8,pp=4,...") to explain; "" = none
  // Progress of the search (done, total), on the calling thread; may be empty.
  std::function<void(std::int64_t, std::int64_t)> progress;
  // When set and it becomes true (from any thread) the search stops as soon as it can and
  // run_plan returns Error{"search cancelled"} (planner::PlanOptions::cancel).
  const std::atomic<bool>* cancel = nullptr;
};

struct PlanReport {
  Scenario scenario;
  planner::PlanResult result;
  planner::ReportOptions options;
  std::optional<planner::Explanation> explanation;  // when requested
};

// Errors: the scenario's, options out of range, the search's (an objective without the
// inputs it needs, ...), an explain string that is not a layout ("explain: ...").
Result<PlanReport> run_plan(const PlanRequest& request);

// The explanation when one was requested, else the ranked table.
std::string plan_text(const PlanReport& report);
std::string plan_json(const PlanReport& report);
// Every ranked layout as CSV.
std::string plan_csv(const PlanReport& report);
// best_layout, best_gpus, ... (docs/planner.md): what `check` may expect of a search.
Fields plan_fields(const PlanReport& report);

}  // namespace stepcast::app
