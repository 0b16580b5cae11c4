// `stepcast plan`: layout search, ranking, Pareto front and `--explain` (docs/planner.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"

namespace stepcast::cli {

struct PlanArgs {
  std::string scenario;
  bool json = false;
  std::string csv;       // write every ranked layout here ("" = none)
  std::string explain;   // a layout string ("" = none)
  int threads = -1;      // -1: the scenario's search.threads
  int top_k = -1;        // -1: the scenario's search.top_k
  int rows = 20;         // ranked layouts listed
};
int cmd_plan(const PlanArgs& args);

// For `stepcast check` on a scenario with a `search` section: runs the search, sets
// `scenario.plan` and the cluster's nodes to the best layout (so the rest of the check
// simulates that layout), and returns the planner's report fields (best_layout,
// best_tokens_per_s, plan_space, ...; scenario.cc's expectable fields). Error when the
// search fails or nothing fits.
Result<nlohmann::json> plan_check_fields(Scenario& scenario);

}  // namespace stepcast::cli
