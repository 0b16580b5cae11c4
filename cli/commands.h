// The commands of `stepcast`, one per file: each adds its subcommand (with its options
// bound to its own request) to `app` and returns how to run it once parsed.
#pragma once

#include "common.h"

namespace stepcast::cli {

Command add_presets(CLI::App& app);
Command add_estimate(CLI::App& app);
Command add_simulate(CLI::App& app);
Command add_check(CLI::App& app);
Command add_plan(CLI::App& app);
Command add_diagnose(CLI::App& app);
Command add_compare(CLI::App& app);
Command add_checkpoint(CLI::App& app);
Command add_validate(CLI::App& app);
Command add_execute(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_calibrate(CLI::App& app);
Command add_collective(CLI::App& app);
Command add_gemm(CLI::App& app);

}  // namespace stepcast::cli
