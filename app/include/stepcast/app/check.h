// `check`: runs the `expect` block of every scenario (files, or folders searched for
// *.json) against the reports the scenario calls for, and says which expectations hold.
// The fields come from the reports themselves (Fields): the simulation (plus the closed
// form's fields it lacks), with faults.failures the checkpoint campaign, with perturbing
// faults or a checkpoint block the diagnosis, with a `search` section the planner's best
// layout (which the rest of the check then simulates).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stepcast/models/result.h"

namespace stepcast::app {

struct CheckRequest {
  std::vector<std::string> paths;  // scenario files or folders
  // Called before each scenario with (scenarios done, total); may be empty.
  std::function<void(std::int64_t, std::int64_t)> progress;
};

enum class CheckStatus { kPass, kFail, kError };

struct CheckedScenario {
  std::string file;
  CheckStatus status = CheckStatus::kPass;
  // kPass: the met expectations ("step_time_s 7.12, fits true"), or "no expectations";
  // kFail: the misses; kError: why the scenario could not be checked.
  std::string detail;
};

struct CheckReport {
  std::vector<CheckedScenario> scenarios;  // sorted by file
  int passed = 0, failed = 0, errors = 0;
};

// Errors: a path that does not exist, a folder without scenarios, a broken symlink named
// *.json in a folder (never skipped silently). A scenario that fails to load is an error
// row of the report, not an error of the call.
Result<CheckReport> run_check(const CheckRequest& request);

std::string check_text(const CheckReport& report);  // PASS/FAIL/ERROR lines and the counts
std::string check_json(const CheckReport& report);

}  // namespace stepcast::app
