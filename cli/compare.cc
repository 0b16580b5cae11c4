// stepcast compare A B [--json] [--steps N]
#include "commands.h"
#include "stepcast/app/compare.h"

namespace stepcast::cli {

Command add_compare(CLI::App& app) {
  struct Args {
    std::string a, b;
    bool json = false;
    std::optional<int> steps;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "compare",
      "Decompose the step-time difference of two scenarios or measured runs; work per GPU; scaling efficiency");
  sub->add_option("A", a->a, "Scenario JSON file, or measured.json of stepcast execute (the baseline)")->required();
  sub->add_option("B", a->b, "Scenario JSON file, or measured.json of stepcast execute")->required();
  sub->add_flag("--json", a->json, "Print the JSON report");
  sub->add_option("--steps", a->steps, "Steps to simulate for each scenario (default 10)");
  return {sub, [a] {
            auto r = app::run_compare(app::CompareRequest{a->a, a->b, a->steps});
            if (!r.ok()) return input_error(r.error().message);
            if (!r->comparison) {
              std::fprintf(stderr, "stepcast: %s\n", r->hang.c_str());
              return kExitFailed;
            }
            return print(a->json ? app::compare_json(*r) : app::compare_text(*r));
          }};
}

}  // namespace stepcast::cli
