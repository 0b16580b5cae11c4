// stepcast checkpoint SCENARIO [--json] [--csv FILE] [--runs N] [--reshard-to LAYOUT]
#include <fmt/format.h>

#include "commands.h"
#include "stepcast/app/checkpoint.h"

namespace stepcast::cli {

Command add_checkpoint(CLI::App& app) {
  struct Args {
    std::string scenario, csv, reshard;
    bool json = false;
    int runs = 64;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "checkpoint", "Failure-aware checkpoint interval (Young, Daly, simulated), sync vs async, goodput");
  sub->add_option("SCENARIO", a->scenario, "Scenario JSON file with faults.failures and workload.train_tokens")
      ->required();
  sub->add_flag("--json", a->json, "Print the JSON report");
  sub->add_option("--csv", a->csv, "Write the interval sweep (goodput curve) as CSV to FILE");
  sub->add_option("--runs", a->runs, "Monte Carlo runs per interval (default 64)");
  sub->add_option("--reshard-to", a->reshard,
                  "Instead: what each rank of LAYOUT (tp=8,pp=2,dp=2 or gpus=32) reads from the checkpoint, and how long");
  return {sub, [a] {
            if (!a->reshard.empty()) {
              auto r = app::run_reshard(app::ReshardRequest{app::ScenarioInput::file(a->scenario), a->reshard});
              if (!r.ok()) return input_error(r.error().message);
              return print(a->json ? app::reshard_json(*r) : app::reshard_text(*r));
            }
            if (a->runs < 1 || a->runs > 10000) {
              return input_error(fmt::format("--runs: {} is out of range (1 to 10000)", a->runs));
            }
            Progress progress("checkpoint");
            progress.status(fmt::format("simulating one step, then {} failure campaigns per interval", a->runs));
            auto r = app::run_checkpoint(app::CheckpointRequest{app::ScenarioInput::file(a->scenario), a->runs});
            progress.clear();
            if (!r.ok()) return input_error(r.error().message);
            if (!r->advice) {
              std::fprintf(stderr, "stepcast: %s\n", r->run_failure.c_str());
              return kExitFailed;
            }
            if (!a->csv.empty() && !write_output("--csv", a->csv, app::checkpoint_csv(*r))) return kExitFailed;
            return print(a->json ? app::checkpoint_json(*r) : app::checkpoint_text(*r));
          }};
}

}  // namespace stepcast::cli
