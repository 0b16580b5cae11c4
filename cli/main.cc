// The stepcast command: parses arguments, calls the libraries, prints. Exit codes:
// 0 success, 1 a check or run failed, 2 bad input or usage.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/models/compute.h"
#include "stepcast/models/estimate.h"
#include "stepcast/models/params.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/report.h"
#include "stepcast/models/scenario.h"
#include "checkpoint.h"
#include "commands.h"
#include "plan.h"
#include "diagnose.h"
#include "simulate.h"
#include "validate.h"

namespace {

using stepcast::cli::input_error;
using stepcast::cli::kExitInput;

int run(int argc, char** argv) {
  CLI::App app{"stepcast: a deterministic simulator and scaling planner for distributed training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("stepcast 0.1.0"));
  app.footer(stepcast::cli::kExitCodesHelp);

  std::vector<stepcast::cli::Command> commands;
  commands.push_back(stepcast::cli::add_presets(app));
  commands.push_back(stepcast::cli::add_estimate(app));
  commands.push_back(stepcast::cli::add_execute(app));
  commands.push_back(stepcast::cli::add_bench(app));
  commands.push_back(stepcast::cli::add_calibrate(app));

  std::string validate_path;
  bool validate_json = false;
  CLI::App* val = app.add_subcommand(
      "validate", "Predict published training runs and compare with their measurements");
  val->add_option("FILE", validate_path, "Validation runs JSON (docs/data/validation-runs.json)")
      ->required();
  val->add_flag("--json", validate_json, "Print the comparison as JSON");
  std::string validate_scenarios;
  val->add_option("--scenarios", validate_scenarios,
                  "Also write each record's generated scenario to DIR/<id>.json");

  stepcast::cli::SimulateArgs sim_args;
  CLI::App* simc = app.add_subcommand("simulate", "Event simulation of the scenario's training step(s)");
  simc->add_option("SCENARIO", sim_args.scenario, "Scenario JSON file")->required();
  simc->add_flag("--json", sim_args.json, "Print the JSON report");
  simc->add_option("--trace", sim_args.trace, "Write a Chrome/Perfetto trace-event JSON file");
  simc->add_flag("--full", sim_args.full, "Simulate every rank (default: one per pipeline stage)");
  simc->add_option("--steps", sim_args.steps, "Training steps to simulate (default 1)");
  simc->add_option("--network", sim_args.network,
                   "Network backend: analytic (alpha-beta, each collective alone) or simgrid (flows that contend); "
                   "default: the scenario's");

  std::vector<std::string> check_paths;
  CLI::App* checkc = app.add_subcommand("check", "Run the expect block of every scenario (files or folders)");
  checkc->add_option("PATH", check_paths, "Scenario files or folders")->required();

  stepcast::cli::CheckpointArgs ckpt_args;
  CLI::App* ckptc = app.add_subcommand(
      "checkpoint", "Failure-aware checkpoint interval (Young, Daly, simulated), sync vs async, goodput");
  ckptc->add_option("SCENARIO", ckpt_args.scenario,
                    "Scenario JSON file with faults.failures and workload.train_tokens")
      ->required();
  ckptc->add_flag("--json", ckpt_args.json, "Print the JSON report");
  ckptc->add_option("--csv", ckpt_args.csv, "Write the interval sweep (goodput curve) as CSV to FILE");
  ckptc->add_option("--runs", ckpt_args.runs, "Monte Carlo runs per interval (default 64)");

  stepcast::cli::DiagnoseArgs diag_args;
  CLI::App* diagc = app.add_subcommand(
      "diagnose", "Explain a run: outlier ranks, input stalls, exposed communication, hangs, resume audit");
  diagc->add_option("INPUT", diag_args.input, "Scenario JSON file, or a trace written by stepcast (--trace)")
      ->required();
  diagc->add_flag("--json", diag_args.json, "Print the JSON report");
  diagc->add_option("--steps", diag_args.steps, "Steps to simulate for a scenario (default 10)");

  stepcast::cli::CompareArgs cmp_args;
  CLI::App* cmpc = app.add_subcommand(
      "compare",
      "Decompose the step-time difference of two scenarios or measured runs; work per GPU; scaling efficiency");
  cmpc->add_option("A", cmp_args.a, "Scenario JSON file, or measured.json of stepcast execute (the baseline)")
      ->required();
  cmpc->add_option("B", cmp_args.b, "Scenario JSON file, or measured.json of stepcast execute")->required();
  cmpc->add_flag("--json", cmp_args.json, "Print the JSON report");
  cmpc->add_option("--steps", cmp_args.steps, "Steps to simulate for each scenario (default 10)");

  stepcast::cli::PlanArgs plan_args;
  CLI::App* planc = app.add_subcommand(
      "plan", "Search every layout, rank by time to train (failures included), tokens/s or cost; explain");
  planc->add_option("SCENARIO", plan_args.scenario,
                    "Scenario JSON file (the plan may be partial or absent when it has a search section)")
      ->required();
  planc->add_flag("--json", plan_args.json, "Print the JSON report");
  planc->add_option("--csv", plan_args.csv, "Write every ranked layout as CSV to FILE");
  planc->add_option("--explain", plan_args.explain,
                    "Why LAYOUT (\"tp=8,pp=4,...\") is rejected, or where it ranks and what limits it");
  planc->add_option("--threads", plan_args.threads, "Search threads (default: search.threads; 0 = one per core)");
  planc->add_option("--top-k", plan_args.top_k,
                    "Layouts re-simulated with the event engine (default: search.top_k, 20)");
  planc->add_option("--top", plan_args.rows, "Ranked layouts listed (default 20)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 reports an unknown command as "A subcommand is required"; name it instead.
    if (argc >= 2 && argv[1][0] != '-') {
      const std::string word = argv[1];
      std::string names;
      bool known = false;
      for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        known = known || sub->get_name() == word;
        names += (names.empty() ? "" : ", ") + sub->get_name();
      }
      if (!known) return input_error("unknown command \"" + word + "\" (commands: " + names + ")");
    }
    std::fprintf(stderr, "stepcast: error: %s\nRun with --help for more information.\n", e.what());
    return kExitInput;
  }
  if (simc->parsed()) return stepcast::cli::cmd_simulate(sim_args);
  if (checkc->parsed()) return stepcast::cli::cmd_check(check_paths);
  if (ckptc->parsed()) return stepcast::cli::cmd_checkpoint(ckpt_args);
  if (planc->parsed()) return stepcast::cli::cmd_plan(plan_args);
  if (diagc->parsed()) return stepcast::cli::cmd_diagnose(diag_args);
  if (cmpc->parsed()) return stepcast::cli::cmd_compare(cmp_args);
  for (const stepcast::cli::Command& c : commands) {
    if (c.sub->parsed()) return c.run();
  }
  if (val->parsed()) return stepcast::cli::cmd_validate(validate_path, validate_json, validate_scenarios);
  return kExitInput;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stepcast: internal error: %s\n", e.what());
    return 1;
  }
}
