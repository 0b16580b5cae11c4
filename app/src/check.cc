#include "stepcast/app/check.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/app/checkpoint.h"
#include "stepcast/app/diagnose.h"
#include "stepcast/app/plan.h"
#include "stepcast/app/simulate.h"
#include "stepcast/models/json_reader.h"

namespace stepcast::app {

namespace {

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

// One expectation: "" when met, else why not.
std::string check_one(const std::string& key, const nlohmann::json& want, const Fields& fields) {
  const nlohmann::json* got = fields.find(key);
  if (!got) {
    std::string msg = fmt::format("expect.{}: not a field of this scenario's reports", key);
    const std::string near = reader::closest(key, fields.names());
    if (!near.empty()) msg += fmt::format("; did you mean \"{}\"?", near);
    return msg;
  }
  if (want.is_object()) {
    if (!got->is_number()) return fmt::format("{} = {} is not a number (a range needs one)", key, show(*got));
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

// The scenario files under `paths`, sorted; a broken *.json link is an error, not skipped.
Result<std::vector<std::string>> scenario_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    const auto st = std::filesystem::status(p, ec);
    if (st.type() == std::filesystem::file_type::not_found) return Error{p + ": no such file or directory"};
    if (st.type() != std::filesystem::file_type::directory) {
      files.push_back(p);
      continue;
    }
    std::size_t found = 0;
    for (auto it = std::filesystem::recursive_directory_iterator(p, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      const auto& e = *it;
      if (e.path().extension() != ".json") continue;
      std::error_code ec2;
      if (e.is_symlink(ec2) && !std::filesystem::exists(e.path(), ec2)) {
        return Error{e.path().string() + ": a broken symbolic link"};
      }
      if (e.is_regular_file(ec2)) {
        files.push_back(e.path().string());
        ++found;
      }
    }
    if (ec) return Error{fmt::format("{}: cannot list the folder ({})", p, ec.message())};
    if (found == 0) return Error{p + ": no scenario files (*.json) in the folder"};
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

// The fields of every report `s` calls for, or why they cannot be had (kError) or why
// the run fails (kFail, a hang nobody expected).
CheckedScenario check_scenario(const std::string& file) {
  CheckedScenario out{file, CheckStatus::kError, ""};
  ScenarioInput in = ScenarioInput::file(file);
  in.plan_template = true;  // a scenario with a `search` section is checked on its best layout
  auto loaded = load(in);
  if (!loaded.ok()) {
    out.detail = loaded.error().message;
    return out;
  }
  Scenario s = std::move(loaded).value();
  if (s.expect_json.empty()) {
    out.status = CheckStatus::kPass;
    out.detail = "no expectations";
    return out;
  }
  Fields fields;
  if (s.search) {
    auto plan = run_plan(PlanRequest{ScenarioInput::value(s), -1, -1, 0, "", {}});
    if (!plan.ok()) {
      out.detail = plan.error().message;
      return out;
    }
    if (plan->result.ranked.empty()) {
      out.detail = "search: no layout fits in memory (stepcast plan SCENARIO --explain LAYOUT says by how much)";
      return out;
    }
    fields.merge(plan_fields(*plan));
    const planner::Candidate& best = plan->result.ranked.front();
    s.plan = best.plan;
    s.cluster.nodes = best.gpus() / s.cluster.gpus_per_node;
  }
  // Faults that perturb ranks need every rank and several steps (stalls are periodic);
  // they and checkpoint contents also get the fields of `stepcast diagnose`.
  const bool perturbed = s.faults.perturb.any();
  const bool diagnosed = perturbed || s.checkpoint.has_value();
  const int steps = perturbed ? kDiagnoseSteps : 1;
  auto sim = run_simulate(SimulateRequest{ScenarioInput::value(s), false, steps, "", false});
  if (!sim.ok()) {
    out.detail = sim.error().message;
    return out;
  }
  const bool hang_expected = s.faults.perturb.crash || s.faults.perturb.mismatch;
  if (sim->hang() && !hang_expected) {
    out.status = CheckStatus::kFail;
    out.detail = sim->hang_report();
    return out;
  }
  if (!sim->hang()) fields.merge(simulate_fields(*sim), /*replace=*/false);
  if (s.faults.failures && !sim->hang()) {
    auto campaign = checkpoint_fields(s, sim->run.summary.step_time_s);
    if (!campaign.ok()) {
      out.detail = campaign.error().message;
      return out;
    }
    fields.merge(*campaign);
  }
  if (diagnosed) fields.merge(diagnose_fields(s, sim->run));
  const nlohmann::ordered_json expect = nlohmann::ordered_json::parse(s.expect_json);
  std::vector<std::string> misses, met;
  for (auto it = expect.begin(); it != expect.end(); ++it) {
    const std::string why = check_one(it.key(), it.value(), fields);
    if (why.empty()) met.push_back(fmt::format("{} {}", it.key(), show(*fields.find(it.key()))));
    else misses.push_back(why);
  }
  out.status = misses.empty() ? CheckStatus::kPass : CheckStatus::kFail;
  const std::vector<std::string>& lines = misses.empty() ? met : misses;
  for (std::size_t i = 0; i < lines.size(); ++i) out.detail += (i ? (misses.empty() ? ", " : "; ") : "") + lines[i];
  return out;
}

}  // namespace

Result<CheckReport> run_check(const CheckRequest& request) {
  auto files = scenario_files(request.paths);
  if (!files.ok()) return files.error();
  CheckReport report;
  const auto total = static_cast<std::int64_t>(files->size());
  for (std::size_t i = 0; i < files->size(); ++i) {
    if (request.progress) request.progress(static_cast<std::int64_t>(i), total);
    CheckedScenario c = check_scenario((*files)[i]);
    if (c.status == CheckStatus::kPass) ++report.passed;
    else if (c.status == CheckStatus::kFail) ++report.failed;
    else ++report.errors;
    report.scenarios.push_back(std::move(c));
  }
  if (request.progress) request.progress(total, total);
  return report;
}

std::string check_text(const CheckReport& r) {
  std::string out;
  for (const CheckedScenario& c : r.scenarios) {
    switch (c.status) {
      case CheckStatus::kPass: out += fmt::format("PASS  {} ({})\n", c.file, c.detail); break;
      case CheckStatus::kFail: out += fmt::format("FAIL  {}: {}\n", c.file, c.detail); break;
      case CheckStatus::kError:
        // Loader messages already start with the file name.
        out += c.detail.rfind(c.file + ": ", 0) == 0 ? fmt::format("ERROR {}\n", c.detail)
                                                      : fmt::format("ERROR {}: {}\n", c.file, c.detail);
        break;
    }
  }
  out += fmt::format("{} passed, {} failed\n", r.passed, r.failed + r.errors);
  return out;
}

std::string check_json(const CheckReport& r) {
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["command"] = "check";
  j["passed"] = r.passed;
  j["failed"] = r.failed;
  j["errors"] = r.errors;
  j["scenarios"] = nlohmann::ordered_json::array();
  for (const CheckedScenario& c : r.scenarios) {
    const char* status = c.status == CheckStatus::kPass ? "pass" : c.status == CheckStatus::kFail ? "fail" : "error";
    j["scenarios"].push_back({{"file", c.file}, {"status", status}, {"detail", c.detail}});
  }
  return j.dump(2) + "\n";
}

}  // namespace stepcast::app
