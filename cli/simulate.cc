#include "simulate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint.h"
#include "plan.h"
#include "stepcast/models/estimate.h"
#include "stepcast/models/lower.h"
#include "stepcast/models/report.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/timeline.h"
#include "stepcast/analysis/breakdown.h"
#include "stepcast/analysis/simulate_report.h"
#include "stepcast/sim/backend.h"
#include "stepcast/analysis/diagnose.h"
#include "stepcast/sim/incident.h"
#include "stepcast/sim/engine.h"
#include "stepcast/sim/run.h"

namespace stepcast::cli {

namespace {

using Simulated = sim::RunResult;

Result<Simulated> run_simulation(const Scenario& s, bool full, int steps, bool record_memory,
                                 const std::string& network = "") {
  sim::RunOptions o;
  o.full = full;
  o.steps = steps;
  o.record_memory = record_memory;
  o.network = network;
  return sim::run_scenario(s, o);
}

}  // namespace

int cmd_simulate(const SimulateArgs& a) {
  auto s = load_scenario_file(a.scenario);
  if (!s.ok()) {
    std::fprintf(stderr, "stepcast: error: %s\n", s.error().message.c_str());
    return 2;
  }
  if (a.steps < 1 || a.steps > 10000) {
    std::fprintf(stderr, "stepcast: error: --steps: %d is out of range (1 to 10000)\n", a.steps);
    return 2;
  }
  const auto run = run_simulation(*s, a.full, a.steps, !a.trace.empty(), a.network);
  if (!run.ok()) {
    std::fprintf(stderr, "stepcast: error: %s\n", run.error().message.c_str());
    return 2;
  }
  const Simulated& r = *run;
  if (!r.note.empty()) std::fprintf(stderr, "stepcast: note: %s\n", r.note.c_str());
  if (!a.trace.empty()) {
    std::ofstream f(a.trace, std::ios::binary);
    f << chrome_trace_json(r.program, r.out.timeline);
    if (!f) {
      std::fprintf(stderr, "stepcast: error: --trace: cannot write %s\n", a.trace.c_str());
      return 2;
    }
  }
  if (r.out.deadlock) {
    std::fprintf(stderr, "stepcast: %s\n", r.out.deadlock_report.c_str());
    return 1;
  }
  std::cout << (a.json ? analysis::simulate_report_json(*s, r.program, r.summary, r.full, a.steps)
                       : analysis::simulate_report_text(*s, r.program, r.summary, r.full, a.steps));
  return 0;
}

namespace {

const nlohmann::json* lookup(const nlohmann::json& j, const std::string& dotted) {
  const nlohmann::json* cur = &j;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = dotted.find('.', start);
    const std::string key = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

std::string show(const nlohmann::json& v) {
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  return v.dump();
}

bool equal(const nlohmann::json& want, const nlohmann::json& got) {
  if (want.is_number() && got.is_number()) {
    const double a = want.get<double>(), b = got.get<double>();
    return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(a));
  }
  return want == got;
}

// One expectation: returns "" when met, else why not.
std::string check_one(const std::string& key, const nlohmann::json& want, const nlohmann::json& report) {
  const nlohmann::json* got = lookup(report, key);
  if (!got) return fmt::format("{}: not in the report", key);
  if (want.is_object()) {
    const double x = got->get<double>();
    const bool lo_ok = !want.contains("min") || x >= want["min"].get<double>();
    const bool hi_ok = !want.contains("max") || x <= want["max"].get<double>();
    if (lo_ok && hi_ok) return "";
    return fmt::format("{} = {} not in [{}, {}]", key, show(*got), want.contains("min") ? show(want["min"]) : "-inf",
                       want.contains("max") ? show(want["max"]) : "inf");
  }
  if (want.is_array()) {
    for (const auto& w : want) {
      if (equal(w, *got)) return "";
    }
    return fmt::format("{} = {} not one of {}", key, show(*got), want.dump());
  }
  if (equal(want, *got)) return "";
  return fmt::format("{} = {}, expected {}", key, show(*got), show(want));
}

}  // namespace

int cmd_check(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p, ec)) {
        if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path().string());
      }
    } else {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  int passed = 0, failed = 0, errors = 0;
  for (const std::string& f : files) {
    LoadOptions lo;
    lo.plan_template = true;  // a scenario with a `search` section is checked on its best layout
    auto s = load_scenario_file(f, lo);
    if (!s.ok()) {
      std::cout << "ERROR " << s.error().message << "\n";
      ++errors;
      continue;
    }
    if (s->expect_json.empty()) {
      std::cout << "PASS  " << f << " (no expectations)\n";
      ++passed;
      continue;
    }
    nlohmann::json planned = nlohmann::json::object();  // the planner's fields (docs/planner.md)
    if (s->search) {
      auto fields = plan_check_fields(s.value());
      if (!fields.ok()) {
        std::cout << "ERROR " << f << ": " << fields.error().message << "\n";
        ++errors;
        continue;
      }
      planned = *fields;
    }
    // Faults that perturb ranks need every rank and several steps (stalls are periodic);
    // they and checkpoint contents also get the fields of `stepcast diagnose`.
    const bool perturbed = s->faults.perturb.any();
    const bool diagnosed = perturbed || s->checkpoint.has_value();
    const int steps = perturbed ? analysis::kDiagnoseSteps : 1;
    const auto run = run_simulation(*s, false, steps, false);
    if (!run.ok()) {
      std::cout << "ERROR " << f << ": " << run.error().message << "\n";
      ++errors;
      continue;
    }
    const Simulated& r = *run;
    const bool hang_expected = s->faults.perturb.crash || s->faults.perturb.mismatch;
    if (r.out.deadlock && !hang_expected) {
      std::cout << "FAIL  " << f << ": " << r.out.deadlock_report << "\n";
      ++failed;
      continue;
    }
    nlohmann::json report = nlohmann::json::object();
    if (!r.out.deadlock) {
      report = nlohmann::json::parse(analysis::simulate_report_json(*s, r.program, r.summary, r.full, steps));
      // Fields only the closed form reports (e.g. params_active, hfu) come from it.
      const nlohmann::json closed = nlohmann::json::parse(estimate_report_json(*s, estimate(*s)));
      for (auto it = closed.begin(); it != closed.end(); ++it) {
        if (!report.contains(it.key())) report[it.key()] = it.value();
      }
    }
    // With a failure model: the campaign fields (goodput, job_mtbf_h, ...) of
    // `stepcast checkpoint` at the simulated step time.
    if (s->faults.failures && !r.out.deadlock) {
      auto campaign = campaign_report_fields(*s, report["step_time_s"].get<double>());
      if (!campaign.ok()) {
        std::cout << "ERROR " << f << ": " << campaign.error().message << "\n";
        ++errors;
        continue;
      }
      for (auto it = campaign->begin(); it != campaign->end(); ++it) report[it.key()] = it.value();
    }
    if (diagnosed) {
      const nlohmann::json d = nlohmann::json::parse(analysis::diagnosis_json(sim::diagnose_run(*s, r)));
      for (const char* key : {"healthy", "hang", "mismatch", "outlier_ranks", "stalling_hosts", "resume_missing"}) {
        if (d.contains(key)) report[key] = d[key];
      }
    }
    for (auto it = planned.begin(); it != planned.end(); ++it) report[it.key()] = it.value();
    const nlohmann::json expect = nlohmann::json::parse(s->expect_json);
    std::vector<std::string> misses, met;
    for (auto it = expect.begin(); it != expect.end(); ++it) {
      const std::string why = check_one(it.key(), it.value(), report);
      if (why.empty()) met.push_back(fmt::format("{} {}", it.key(), show(*lookup(report, it.key()))));
      else misses.push_back(why);
    }
    if (misses.empty()) {
      std::string m;
      for (std::size_t i = 0; i < met.size(); ++i) m += (i ? ", " : "") + met[i];
      std::cout << "PASS  " << f << " (" << m << ")\n";
      ++passed;
    } else {
      std::string m;
      for (std::size_t i = 0; i < misses.size(); ++i) m += (i ? "; " : "") + misses[i];
      std::cout << "FAIL  " << f << ": " << m << "\n";
      ++failed;
    }
  }
  std::cout << fmt::format("{} passed, {} failed", passed, failed + errors) << "\n";
  if (errors > 0) return 2;
  return failed > 0 ? 1 : 0;
}

}  // namespace stepcast::cli
