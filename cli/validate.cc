// stepcast validate FILE [--json] [--scenarios DIR]
#include "commands.h"
#include "stepcast/app/validate.h"

namespace stepcast::cli {

Command add_validate(CLI::App& app) {
  struct Args {
    std::string path;
    bool json = false;
    std::string scenario_dir;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("validate",
                                     "Predict published training runs and compare with their measurements (errors, and "
                                     "whether each lands in its predicted p10-p90 band)");
  sub->add_option("FILE", a->path, "Validation runs JSON (docs/data/validation-runs.json)")->required();
  sub->add_flag("--json", a->json, "Print the comparison as JSON");
  sub->add_option("--scenarios", a->scenario_dir, "Also write each record's generated scenario to DIR/<id>.json");
  return {sub, [a] {
            auto r = app::run_validate({a->path, a->scenario_dir});
            if (!r.ok()) return input_error(r.error().message);
            return print(a->json ? app::validate_json(*r) : app::validate_text(*r));
          }};
}

}  // namespace stepcast::cli
