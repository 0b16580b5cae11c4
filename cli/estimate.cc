// stepcast estimate SCENARIO [--json]
#include "commands.h"
#include "stepcast/app/estimate.h"

namespace stepcast::cli {

Command add_estimate(CLI::App& app) {
  struct Args {
    std::string scenario;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "estimate", "Closed-form estimate: parameters, FLOPs, memory per rank, step time, MFU");
  sub->add_option("SCENARIO", a->scenario, "Scenario JSON file")->required();
  sub->add_flag("--json", a->json, "Print the JSON report");
  return {sub, [a] {
            auto r = app::run_estimate({app::ScenarioInput::file(a->scenario)});
            if (!r.ok()) return input_error(r.error().message);
            return print(a->json ? app::estimate_json(*r) : app::estimate_text(*r));
          }};
}

}  // namespace stepcast::cli
