// stepcast simulate SCENARIO [--json] [--trace FILE] [--full] [--steps N] [--network NAME]
#include <fmt/format.h>

#include "commands.h"
#include "stepcast/app/simulate.h"

namespace stepcast::cli {

Command add_simulate(CLI::App& app) {
  struct Args {
    std::string scenario, trace, network;
    bool json = false, full = false;
    int steps = 1;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("simulate", "Event simulation of the scenario's training step(s)");
  sub->add_option("SCENARIO", a->scenario, "Scenario JSON file")->required();
  sub->add_flag("--json", a->json, "Print the JSON report");
  sub->add_option("--trace", a->trace, "Write a Chrome/Perfetto trace-event JSON file");
  sub->add_flag("--full", a->full, "Simulate every rank (default: one per pipeline stage)");
  sub->add_option("--steps", a->steps, "Training steps to simulate (default 1)");
  sub->add_option("--network", a->network,
                  "Network backend: analytic (alpha-beta, each collective alone) or simgrid (flows that contend); "
                  "default: the scenario's");
  return {sub, [a] {
            if (a->steps < 1 || a->steps > app::kMaxSimulatedSteps) {
              return input_error(fmt::format("--steps: {} is out of range (1 to {})", a->steps, app::kMaxSimulatedSteps));
            }
            app::SimulateRequest req{app::ScenarioInput::file(a->scenario), a->full, a->steps, a->network,
                                     !a->trace.empty()};
            auto r = app::run_simulate(req);
            if (!r.ok()) return input_error(r.error().message);
            if (!r->run.note.empty()) note(r->run.note);
            if (!a->trace.empty() && !write_output("--trace", a->trace, r->trace_json)) return kExitFailed;
            if (r->hang()) {
              std::fprintf(stderr, "stepcast: %s\n", r->hang_report().c_str());
              return kExitFailed;
            }
            return print(a->json ? app::simulate_json(*r) : app::simulate_text(*r));
          }};
}

}  // namespace stepcast::cli
