#include "checkpoint.h"

#include <cstdio>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "stepcast/planner/checkpoint_advice.h"
#include "stepcast/planner/checkpoint_report.h"

namespace stepcast::cli {

namespace {

constexpr int kDefaultRuns = 64;

int input_error(const std::string& message) {
  std::fprintf(stderr, "stepcast: error: %s\n", message.c_str());
  return 2;
}

}  // namespace

int cmd_checkpoint(const CheckpointArgs& args) {
  if (args.runs < 1 || args.runs > 10000) {
    return input_error(fmt::format("--runs: {} is out of range (1 to 10000)", args.runs));
  }
  auto s = load_scenario_file(args.scenario);
  if (!s.ok()) return input_error(s.error().message);
  // Input errors first (they name a field), before the engine runs.
  if (auto e = planner::campaign_input_error(*s)) return input_error(args.scenario + ": " + e->message);
  auto step = planner::engine_step_time_s(*s);
  if (!step.ok()) {
    std::fprintf(stderr, "stepcast: %s\n", step.error().message.c_str());
    return 1;
  }
  planner::AdviceOptions opt;
  opt.runs = args.runs;
  auto a = planner::advise_checkpoint(*s, *step, opt);
  if (!a.ok()) return input_error(args.scenario + ": " + a.error().message);
  if (!args.csv.empty()) {
    std::ofstream f(args.csv, std::ios::binary);
    f << planner::checkpoint_csv(*a);
    if (!f) return input_error(fmt::format("--csv: cannot write {}", args.csv));
  }
  std::cout << (args.json ? planner::checkpoint_json(*a, *s) : planner::checkpoint_text(*a, *s));
  return 0;
}

Result<nlohmann::json> campaign_report_fields(const Scenario& s, double step_time_s) {
  planner::AdviceOptions opt;
  opt.runs = kDefaultRuns;
  auto a = planner::advise_checkpoint(s, step_time_s, opt);
  if (!a.ok()) return a.error();
  return nlohmann::json::parse(planner::checkpoint_check_fields_json(planner::checkpoint_check_fields(*a)));
}

}  // namespace stepcast::cli
