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
#include "execute.h"
#include "simulate.h"

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
  commands.push_back(stepcast::cli::add_validate(app));

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

  stepcast::cli::ExecuteArgs exe_args;
  CLI::App* exec = app.add_subcommand("execute", "Run the scenario's plan for real (MPI ranks or GPUs), measure, write the trace");
  exec->add_option("SCENARIO", exe_args.scenario, "Scenario JSON file")->required();
  exec->add_option("--backend", exe_args.backend, "cpu_mpi (default) or cuda_nccl");
  exec->add_option("--steps", exe_args.steps, "Measured steps (default 3)");
  exec->add_option("--warmup", exe_args.warmup, "Warm-up steps before measuring (default 1)");
  exec->add_option("--scale-down", exe_args.scale_down,
                   "Divide hidden size, heads, FFN, vocabulary and layers by F, keeping the plan's structure");
  exec->add_flag("--no-verify", exe_args.no_verify, "Do not check collective results");
  exec->add_option("--out", exe_args.out, "Directory for measured.json and trace.json (default stepcast-execute)");
  exec->add_flag("--json", exe_args.json, "Print the measurement JSON");

  stepcast::cli::BenchArgs bench_args;
  CLI::App* benchc = app.add_subcommand("bench", "Microbenchmarks on the executor's backend: gemm or collectives");
  benchc->add_option("WHAT", bench_args.what, "gemm or collectives")->required();
  benchc->add_option("--backend", bench_args.backend, "cpu_mpi (default) or cuda_nccl");
  benchc->add_option("--gpu", bench_args.gpu, "GPU preset whose peak the GEMM table compares with");
  benchc->add_option("--min-bytes", bench_args.min_bytes, "Smallest collective size (default 1024)");
  benchc->add_option("--max-bytes", bench_args.max_bytes, "Largest collective size (default 4 MiB)");
  benchc->add_option("--iters", bench_args.iterations, "Timed iterations per size (default 5)");
  benchc->add_option("--max-size", bench_args.max_size, "Largest GEMM dimension");
  benchc->add_option("--gpus-per-node", bench_args.gpus_per_node, "Ranks per node (default: the launcher's)");
  benchc->add_option("--json", bench_args.json_out, "Write the results as JSON to FILE (- for stdout)");

  stepcast::cli::CalibrateArgs cal_args;
  CLI::App* calc = app.add_subcommand("calibrate", "Fit the cost model to measured runs and benchmarks; report the error");
  calc->add_option("MEASURED", cal_args.measured, "measured.json files written by stepcast execute (fitted)");
  calc->add_option("--bench", cal_args.bench, "stepcast bench --json files (fitted)");
  calc->add_option("--holdout", cal_args.holdout, "measured.json files predicted but not fitted");
  calc->add_option("--out", cal_args.out, "Calibration JSON to write (default calibration.json)");
  calc->add_flag("--json", cal_args.json, "Print the report as JSON");

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
  if (exec->parsed()) return stepcast::cli::cmd_execute(exe_args);
  if (benchc->parsed()) return stepcast::cli::cmd_bench(bench_args);
  if (calc->parsed()) return stepcast::cli::cmd_calibrate(cal_args);
  if (checkc->parsed()) return stepcast::cli::cmd_check(check_paths);
  if (ckptc->parsed()) return stepcast::cli::cmd_checkpoint(ckpt_args);
  if (planc->parsed()) return stepcast::cli::cmd_plan(plan_args);
  if (diagc->parsed()) return stepcast::cli::cmd_diagnose(diag_args);
  if (cmpc->parsed()) return stepcast::cli::cmd_compare(cmp_args);
  for (const stepcast::cli::Command& c : commands) {
    if (c.sub->parsed()) return c.run();
  }
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
