// stepcast calibrate [MEASURED...] [--bench FILE...] [--holdout MEASURED...] [--out FILE] [--json]
#include <cstdio>

#include "commands.h"
#include "stepcast/app/calibrate.h"

namespace stepcast::cli {

Command add_calibrate(CLI::App& app) {
  struct Args {
    app::CalibrateRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("calibrate", "Fit the cost model to measured runs and benchmarks; report the error");
  sub->add_option("MEASURED", a->request.measured, "measured.json files written by stepcast execute (fitted); those of execute --train fit the checkpoint storage (write, commit, read, snapshot)");
  sub->add_option("--bench", a->request.bench, "stepcast bench --json files (fitted)");
  sub->add_option("--holdout", a->request.holdout, "measured.json files predicted but not fitted (execute --train ones: their save pause)");
  sub->add_option("--out", a->request.out, "Calibration JSON to write (default calibration.json)");
  sub->add_flag("--json", a->json, "Print the report as JSON");
  return {sub, [a] {
            auto r = app::run_calibrate(a->request);
            if (!r.ok()) return input_error(r.error().message);
            for (const std::string& w : r->warnings) std::fprintf(stderr, "stepcast: warning: %s\n", w.c_str());
            if (r->refused.empty() && !write_output("--out", a->request.out, r->calibration_json)) return kExitFailed;
            const int code = print(a->json ? app::calibrate_json(*r) : app::calibrate_text(*r));
            if (!r->refused.empty()) return run_error(r->refused);
            return code;
          }};
}

}  // namespace stepcast::cli
