// Where a use case gets its scenario: a file (the CLI) or a scenario already in memory
// (the GUI's editor). Every use case that takes a scenario takes a ScenarioInput.
#pragma once

#include <optional>
#include <string>

#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"

namespace stepcast::app {

struct ScenarioInput {
  std::string path;                  // read when `scenario` is empty
  std::optional<Scenario> scenario;  // used as is when set
  // As LoadOptions::plan_template: a scenario with a `search` section may carry a partial plan.
  bool plan_template = false;

  static ScenarioInput file(std::string p) { return ScenarioInput{std::move(p), std::nullopt, false}; }
  static ScenarioInput value(Scenario s) { return ScenarioInput{"", std::move(s), false}; }
};

// The scenario: loaded and validated from `path` (errors name the file and the JSON path),
// or the in-memory one.
Result<Scenario> load(const ScenarioInput& input);

}  // namespace stepcast::app
