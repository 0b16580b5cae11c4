// The stepcast command: registers every command (one file each, cli/<command>.cc), parses,
// runs the one parsed. Exit codes: cli/common.h.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"

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
  commands.push_back(stepcast::cli::add_collective(app));
  commands.push_back(stepcast::cli::add_gemm(app));
  commands.push_back(stepcast::cli::add_validate(app));
  commands.push_back(stepcast::cli::add_simulate(app));
  commands.push_back(stepcast::cli::add_check(app));
  commands.push_back(stepcast::cli::add_checkpoint(app));
  commands.push_back(stepcast::cli::add_diagnose(app));
  commands.push_back(stepcast::cli::add_compare(app));
  commands.push_back(stepcast::cli::add_plan(app));
  commands.push_back(stepcast::cli::add_execute(app));
  commands.push_back(stepcast::cli::add_bench(app));
  commands.push_back(stepcast::cli::add_calibrate(app));

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
