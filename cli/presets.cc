// stepcast presets [--json]
#include "commands.h"
#include "stepcast/app/presets.h"

namespace stepcast::cli {

Command add_presets(CLI::App& app) {
  struct Args {
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("presets", "List model, GPU, cluster and failure-model presets");
  sub->add_flag("--json", a->json, "Print JSON");
  return {sub, [a] {
            auto r = app::run_presets({});
            if (!r.ok()) return input_error(r.error().message);
            return print(a->json ? app::presets_json(*r) : app::presets_text(*r));
          }};
}

}  // namespace stepcast::cli
