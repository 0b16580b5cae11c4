// `stepcast simulate` and `stepcast check`.
#pragma once

#include <string>
#include <vector>

namespace stepcast::cli {

struct SimulateArgs {
  std::string scenario;
  bool json = false;
  std::string trace;
  bool full = false;
  int steps = 1;
  std::string network;  // "" = the scenario's
};
int cmd_simulate(const SimulateArgs& args);

// Runs every scenario's `expect` block (files, or folders searched for *.json).
int cmd_check(const std::vector<std::string>& paths);

}  // namespace stepcast::cli
