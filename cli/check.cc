// stepcast check PATH... [--json]
#include "commands.h"
#include "stepcast/app/check.h"

namespace stepcast::cli {

Command add_check(CLI::App& app) {
  struct Args {
    std::vector<std::string> paths;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("check", "Run the expect block of every scenario (files or folders)");
  sub->add_option("PATH", a->paths, "Scenario files or folders")->required();
  sub->add_flag("--json", a->json, "Print the results as JSON");
  return {sub, [a] {
            Progress progress("checking");
            auto r = app::run_check(app::CheckRequest{a->paths, progress.callback()});
            progress.clear();
            if (!r.ok()) return input_error(r.error().message);
            const int code = r->errors > 0 ? kExitInput : r->failed > 0 ? kExitFailed : kExitOk;
            return print(a->json ? app::check_json(*r) : app::check_text(*r), code);
          }};
}

}  // namespace stepcast::cli
