// stepcast gemm M N K [--gpu NAME | --cluster-file FILE] [--precision bf16|fp16|fp8] [--backward] [--sweep] [--against
// FILE] [--json]
#include "stepcast/app/gemm.h"
#include "commands.h"

namespace stepcast::cli {

Command add_gemm(CLI::App& app) {
  struct Args {
    std::int64_t m = 0, n = 0, k = 0;
    std::string gpu = "h100-sxm", cluster_file, precision = "bf16", against;
    bool backward = false, sweep = false, json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "gemm", "One GEMM priced by the model: time, TFLOP/s, and the tile, wave, split-K and short-K factors");
  sub->add_option("M", a->m, "Rows of the output (tokens): (M x K) . (K x N); M N K may be left out with --against");
  sub->add_option("N", a->n, "Columns of the output (output features)");
  sub->add_option("K", a->k, "The inner dimension");
  auto* preset = sub->add_option("--gpu", a->gpu, "GPU preset (stepcast presets); default h100-sxm");
  sub->add_option("--cluster-file", a->cluster_file,
                  "Scenario file whose cluster's GPU is used (calibrations included)")
      ->excludes(preset);
  sub->add_option("--precision", a->precision, "bf16 (default), fp16 or fp8");
  sub->add_flag("--backward", a->backward,
                "Also the backward: the data gradient (M x K x N) and the weight gradient (K x N x M)");
  sub->add_flag("--sweep", a->sweep, "Also the forward at M = 64, 128, ... doubling up to M (where K splits)");
  sub->add_option("--against", a->against,
                  "A stepcast bench gemm --json FILE: every measured shape priced by the model, model/measured");
  sub->add_flag("--json", a->json, "Print the JSON report");
  return {sub, [a] {
            app::GemmRequest q;
            q.m = a->m;
            q.n = a->n;
            q.k = a->k;
            q.gpu = a->gpu;
            if (!a->cluster_file.empty()) q.cluster_file = app::ScenarioInput::file(a->cluster_file);
            q.precision = a->precision;
            q.backward = a->backward;
            q.sweep = a->sweep;
            q.against = a->against;
            auto r = app::run_gemm(q);
            if (!r.ok()) return input_error(r.error().message);
            return print(a->json ? app::gemm_json(*r) : app::gemm_text(*r));
          }};
}

}  // namespace stepcast::cli
