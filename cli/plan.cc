// stepcast plan SCENARIO [--json] [--csv FILE] [--explain LAYOUT] [--threads N] [--top N] [--resimulate N]
#include <fmt/format.h>

#include "commands.h"
#include "stepcast/app/plan.h"

namespace stepcast::cli {

Command add_plan(CLI::App& app) {
  struct Args {
    std::string scenario, csv, explain;
    bool json = false;
    int threads = -1, resimulate = -1, rows = 20;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "plan", "Search every layout, rank by time to train (failures included), tokens/s or cost; explain");
  sub->add_option("SCENARIO", a->scenario,
                  "Scenario JSON file (the plan may be partial or absent when it has a search section)")
      ->required();
  sub->add_flag("--json", a->json, "Print the JSON report");
  sub->add_option("--csv", a->csv, "Write every ranked layout as CSV to FILE");
  sub->add_option("--explain", a->explain,
                  "Why LAYOUT (\"tp=8,pp=4,...\") is rejected, or where it ranks and what limits it");
  sub->add_option("--threads", a->threads, "Search threads (default: search.threads; 0 = one per core)");
  sub->add_option("--top", a->rows, "How many ranked layouts the report lists (default 20)");
  sub->add_option("--resimulate,--top-k", a->resimulate,
                  "How many of the best layouts the event engine re-simulates and re-ranks (default: search.top_k, "
                  "20); --top-k is the old name");
  return {sub, [a] {
            if (a->threads < -1 || a->threads > 1024) {
              return input_error(fmt::format("--threads: {} is out of range (0 to 1024; 0 = one per core)", a->threads));
            }
            if (a->resimulate < -1 || a->resimulate > 1000) {
              return input_error(fmt::format("--resimulate: {} is out of range (0 to 1000)", a->resimulate));
            }
            if (a->rows < 0 || a->rows > 1'000'000) {
              return input_error(fmt::format("--top: {} is out of range (0 to 1000000)", a->rows));
            }
            Progress progress("planning");
            app::PlanRequest req{app::ScenarioInput::file(a->scenario), a->threads, a->resimulate, a->rows,
                                 a->explain, progress.callback()};
            auto r = app::run_plan(req);
            progress.clear();
            if (!r.ok()) {
              const std::string& m = r.error().message;
              return input_error(m.rfind("explain: ", 0) == 0 ? "--" + m : m);
            }
            if (!r->explanation && !a->csv.empty() && !write_output("--csv", a->csv, app::plan_csv(*r))) {
              return kExitFailed;
            }
            return print(a->json ? app::plan_json(*r) : app::plan_text(*r));
          }};
}

}  // namespace stepcast::cli
