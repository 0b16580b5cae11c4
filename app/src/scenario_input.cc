#include "stepcast/app/scenario_input.h"

namespace stepcast::app {

Result<Scenario> load(const ScenarioInput& input) {
  if (input.scenario) return *input.scenario;
  LoadOptions lo;
  lo.plan_template = input.plan_template;
  return load_scenario_file(input.path, lo);
}

}  // namespace stepcast::app
