// stepcast bench gemm|collectives [--backend B] [--gpu G] [--min-bytes N] [--max-bytes N] [--iters N] [--max-size N]
//                                 [--gpus-per-node N] [--json FILE|-]
#include "commands.h"
#include "stepcast/app/bench.h"

namespace stepcast::cli {

Command add_bench(CLI::App& app) {
  struct Args {
    app::BenchRequest request;
    std::string json_out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("bench", "Microbenchmarks on the executor's backend: gemm or collectives");
  sub->add_option("WHAT", a->request.what, "gemm or collectives")->required();
  sub->add_option("--backend", a->request.backend, "cpu_mpi (default) or cuda_nccl");
  sub->add_option("--gpu", a->request.gpu, "GPU preset whose peak the GEMM table compares with");
  sub->add_option("--min-bytes", a->request.min_bytes, "Smallest collective size (default 1024)");
  sub->add_option("--max-bytes", a->request.max_bytes,
                  "Largest collective size (default 4 MiB; refused when it cannot fit in memory)");
  sub->add_option("--iters", a->request.iterations, "Timed iterations per size (default 5)");
  sub->add_option("--max-size", a->request.max_size, "Largest GEMM dimension (64 to 65536)");
  sub->add_option("--gpus-per-node", a->request.gpus_per_node, "Ranks per node (default: the launcher's)");
  sub->add_option("--json", a->json_out, "Write the results as JSON to FILE (- for stdout)");
  return {sub, [a] {
            auto r = app::run_bench(a->request);
            if (!r.ok()) return input_error(r.error().message);
            const int code = r->wrong > 0 ? kExitFailed : kExitOk;
            if (!r->root) return code;
            if (a->json_out.empty()) return print(app::bench_text(*r), code);
            if (a->json_out == "-") return print(app::bench_json(*r), code);
            return write_output("--json", a->json_out, app::bench_json(*r)) ? code : kExitFailed;
          }};
}

}  // namespace stepcast::cli
