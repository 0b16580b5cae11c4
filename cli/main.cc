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
#include "commands.h"
#include "execute.h"

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
  commands.push_back(stepcast::cli::add_simulate(app));
  commands.push_back(stepcast::cli::add_check(app));
  commands.push_back(stepcast::cli::add_checkpoint(app));
  commands.push_back(stepcast::cli::add_diagnose(app));
  commands.push_back(stepcast::cli::add_compare(app));
  commands.push_back(stepcast::cli::add_plan(app));

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
  if (exec->parsed()) return stepcast::cli::cmd_execute(exe_args);
  if (benchc->parsed()) return stepcast::cli::cmd_bench(bench_args);
  if (calc->parsed()) return stepcast::cli::cmd_calibrate(cal_args);
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
