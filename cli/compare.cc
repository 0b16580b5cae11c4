// stepcast compare A B [--json] [--steps N]
#include <fmt/format.h>

#include "commands.h"
#include "execute.h"
#include "stepcast/models/json_reader.h"
#include "stepcast/models/scenario.h"
#include "stepcast/sim/diagnose.h"

namespace stepcast::cli {

namespace {

struct CompareArgs {
  std::string a, b;
  bool json = false;
  std::optional<int> steps;
};

std::optional<int> checked_steps(const std::optional<int>& steps, std::string& error) {
  const int n = steps.value_or(sim::kDiagnoseSteps);
  if (n < 1 || n > 10000) {
    error = fmt::format("--steps: {} is out of range (1 to 10000)", n);
    return std::nullopt;
  }
  return n;
}

int run_compare_legacy(const CompareArgs& a) {
  std::string why;
  const auto steps = checked_steps(a.steps, why);
  if (!steps) return input_error(why);
  sim::CompareSide sides[2];
  const std::string* paths[2] = {&a.a, &a.b};
  for (int i = 0; i < 2; ++i) {
    const std::string& path = *paths[i];
    const auto text = reader::read_input_file(path);
    if (!text.ok()) return input_error(text.error().message);
    if (looks_like_measurement(*text)) {
      auto side = measured_compare_side(path);
      if (!side.ok()) return input_error(side.error().message);
      sides[i] = std::move(side).value();
      continue;
    }
    if (sim::looks_like_trace(*text)) {
      return input_error(fmt::format("{}: a trace; compare needs scenarios or measured runs (measured.json of "
                                     "stepcast execute: they give the batch and the work per GPU); diagnose reads traces",
                                     path));
    }
    auto s = load_scenario_file(path);
    if (!s.ok()) return input_error(s.error().message);
    auto side = sim::compare_side(*s, *steps);
    if (!side.ok()) return input_error(side.error().message);
    if (!side->hang_report.empty()) {
      std::fprintf(stderr, "stepcast: %s: %s\n", path.c_str(), side->hang_report.c_str());
      return kExitFailed;
    }
    sides[i] = std::move(side).value();
  }
  const sim::Comparison c = sim::compare(sides[0], sides[1]);
  return print(a.json ? sim::comparison_json(c) : sim::comparison_text(c));
}

}  // namespace

Command add_compare(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* sub = app.add_subcommand(
      "compare",
      "Decompose the step-time difference of two scenarios or measured runs; work per GPU; scaling efficiency");
  sub->add_option("A", a->a, "Scenario JSON file, or measured.json of stepcast execute (the baseline)")->required();
  sub->add_option("B", a->b, "Scenario JSON file, or measured.json of stepcast execute")->required();
  sub->add_flag("--json", a->json, "Print the JSON report");
  sub->add_option("--steps", a->steps, "Steps to simulate for each scenario (default 10)");
  return {sub, [a] { return run_compare_legacy(*a); }};
}

}  // namespace stepcast::cli
