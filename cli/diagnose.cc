#include "diagnose.h"
#include "stepcast/app/measurement.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "stepcast/models/scenario.h"
#include "stepcast/sim/diagnose.h"
#include "stepcast/sim/run.h"

namespace stepcast::cli {

namespace {

constexpr int kExitOk = 0, kExitProblem = 1, kExitInput = 2;

int input_error(const std::string& message) {
  std::fprintf(stderr, "stepcast: error: %s\n", message.c_str());
  return kExitInput;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream s;
  s << f.rdbuf();
  if (!f && !f.eof()) return std::nullopt;
  return s.str();
}

std::optional<int> checked_steps(const std::optional<int>& steps, std::string& error) {
  const int n = steps.value_or(sim::kDiagnoseSteps);
  if (n < 1 || n > 10000) {
    error = fmt::format("--steps: {} is out of range (1 to 10000)", n);
    return std::nullopt;
  }
  return n;
}

}  // namespace

int cmd_diagnose(const DiagnoseArgs& a) {
  const auto text = read_file(a.input);
  if (!text) return input_error(fmt::format("{}: cannot read the file", a.input));
  sim::Diagnosis d;
  if (sim::looks_like_trace(*text)) {
    if (a.steps) std::fprintf(stderr, "stepcast: note: --steps is ignored for a trace (it has its own steps)\n");
    auto trace = sim::read_trace(*text);
    if (!trace.ok()) return input_error(fmt::format("{}: {}", a.input, trace.error().message));
    d = sim::diagnose_trace(*trace);
    d.source = a.input;
  } else {
    std::string why;
    const auto steps = checked_steps(a.steps, why);
    if (!steps) return input_error(why);
    auto s = load_scenario_file(a.input);
    if (!s.ok()) return input_error(s.error().message);
    auto r = sim::diagnose_scenario(*s, *steps);
    if (!r.ok()) return input_error(r.error().message);
    d = std::move(r).value();
  }
  std::cout << (a.json ? sim::diagnosis_json(d) : sim::diagnosis_text(d));
  return d.problem() ? kExitProblem : kExitOk;
}

int cmd_compare(const CompareArgs& a) {
  std::string why;
  const auto steps = checked_steps(a.steps, why);
  if (!steps) return input_error(why);
  sim::CompareSide sides[2];
  const std::string* paths[2] = {&a.a, &a.b};
  for (int i = 0; i < 2; ++i) {
    const std::string& path = *paths[i];
    const auto text = read_file(path);
    if (!text) return input_error(fmt::format("{}: cannot read the file", path));
    if (app::looks_like_measurement(*text)) {
      auto side = app::measured_compare_side(path);
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
      return kExitProblem;
    }
    sides[i] = std::move(side).value();
  }
  const sim::Comparison c = sim::compare(sides[0], sides[1]);
  std::cout << (a.json ? sim::comparison_json(c) : sim::comparison_text(c));
  return kExitOk;
}

}  // namespace stepcast::cli
