// stepcast diagnose SCENARIO|TRACE [--json] [--steps N]
#include "commands.h"
#include "stepcast/app/diagnose.h"

namespace stepcast::cli {

Command add_diagnose(CLI::App& app) {
  struct Args {
    std::string input;
    bool json = false;
    std::optional<int> steps;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "diagnose", "Explain a run: outlier ranks, input stalls, exposed communication, hangs, resume audit");
  sub->add_option("INPUT", a->input, "Scenario JSON file, or a trace written by stepcast (--trace, execute)")
      ->required();
  sub->add_flag("--json", a->json, "Print the JSON report");
  sub->add_option("--steps", a->steps, "Steps to simulate for a scenario (default 10)");
  return {sub, [a] {
            Progress progress("diagnose");
            progress.status("reading or simulating " + a->input);
            auto r = app::run_diagnose(app::DiagnoseRequest{a->input, a->steps});
            progress.clear();
            if (!r.ok()) return input_error(r.error().message);
            if (!r->note.empty()) note(r->note);
            return print(a->json ? app::diagnose_json(*r) : app::diagnose_text(*r),
                         r->problem() ? kExitFailed : kExitOk);
          }};
}

}  // namespace stepcast::cli
