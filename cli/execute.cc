// stepcast execute SCENARIO [--backend B] [--steps N] [--warmup N] [--scale-down F] [--no-verify] [--out DIR] [--json]
#include <cstdio>

#include "commands.h"
#include "stepcast/app/execute.h"

namespace stepcast::cli {

Command add_execute(CLI::App& app) {
  struct Args {
    app::ExecuteRequest request;
    bool no_verify = false;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("execute", "Run the scenario's plan for real (MPI ranks or GPUs), measure, write the trace");
  sub->add_option("SCENARIO", a->request.scenario, "Scenario JSON file")->required();
  sub->add_option("--backend", a->request.backend, "cpu_mpi (default) or cuda_nccl");
  sub->add_option("--steps", a->request.steps, "Measured steps (default 3)");
  sub->add_option("--warmup", a->request.warmup, "Warm-up steps before measuring (default 1)");
  sub->add_option("--scale-down", a->request.scale_down,
                  "Divide hidden size, heads, FFN, vocabulary and layers by F, keeping the plan's structure");
  sub->add_flag("--no-verify", a->no_verify, "Do not check collective results");
  sub->add_option("--out", a->request.out, "Directory for measured.json and trace.json (default stepcast-execute)");
  sub->add_flag("--json", a->json, "Print the measurement JSON");
  return {sub, [a] {
            a->request.verify = !a->no_verify;
            Progress progress("stepcast execute: steps");
            a->request.progress = progress.callback();
            auto r = app::run_execute(a->request);
            progress.clear();
            if (!r.ok()) return r.error().message.empty() ? kExitInput : input_error(r.error().message);
            if (!r->run_error.empty()) {
              std::fprintf(stderr, "stepcast: %s\n", r->run_error.c_str());
              return kExitFailed;
            }
            if (!r->root) return r->failed() ? kExitFailed : kExitOk;
            if (!write_output("--out", r->measured_path, r->measured_json) ||
                !write_output("--out", r->trace_path, r->trace_json)) {
              return kExitFailed;
            }
            return print(a->json ? app::execute_json(*r) : app::execute_text(*r), r->failed() ? kExitFailed : kExitOk);
          }};
}

}  // namespace stepcast::cli
