// stepcast collective KIND SIZE (--gpus N [--stride K] | --group tp|cp|ep|dp)
//                     [--cluster NAME | --cluster-file FILE] [--algo ALGO] [--proto LL|LL128|Simple] [--sweep] [--json]
#include "commands.h"
#include "stepcast/app/collective.h"

namespace stepcast::cli {

Command add_collective(CLI::App& app) {
  struct Args {
    std::string kind, size, cluster = "dgx-h100", cluster_file, algo, proto, group;
    int gpus = 0, stride = 1;
    bool sweep = false, json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "collective", "One collective priced by the model: time, algbw and busbw (nccl-tests definitions) per algorithm");
  sub->add_option("KIND", a->kind, "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast or send_recv")
      ->required();
  sub->add_option("SIZE", a->size,
                  "Buffer size in bytes as nccl-tests counts it (all_gather, reduce_scatter, all_to_all: the whole "
                  "gathered buffer). KiB, MiB, GiB, TiB and K, M, G, T are powers of 1024 (as nccl-tests -b/-e); "
                  "KB, MB, GB, TB powers of 1000; 1e9 and 1048576 are bytes")
      ->required();
  auto* gpus = sub->add_option(
      "--gpus", a->gpus,
      "Ranks in the group (at least 2; send_recv: one transfer between two ranks --stride apart, --gpus "
      "optional); or --group");
  sub->add_option("--stride", a->stride,
                  "Members this many GPUs apart in rank order (default 1: contiguous; e.g. 8 for a DP group across "
                  "nodes of 8)");
  auto* preset = sub->add_option("--cluster", a->cluster, "Cluster preset (stepcast presets); default dgx-h100");
  sub->add_option("--cluster-file", a->cluster_file, "Scenario file whose cluster is used")->excludes(preset);
  sub->add_option("--group", a->group,
                  "tp, cp, ep or dp: the group of the --cluster-file scenario's plan (its size and stride, in "
                  "Megatron's rank order and the plan's placement) instead of --gpus and --stride");
  sub->add_option("--algo", a->algo,
                  "ring, tree, hierarchical, pairwise, direct or auto; default: every algorithm the model has for "
                  "KIND, the one auto picks marked (auto runs what NCCL runs: the faster of ring and tree for "
                  "all_reduce, one ring for all_gather and reduce_scatter; hierarchical is a what-if)");
  sub->add_option("--proto", a->proto,
                  "LL, LL128 or Simple: price NCCL's ring and tree with this protocol only, as NCCL_PROTO forces it "
                  "(default: each algorithm's fastest, as NCCL's tuner picks)");
  sub->add_flag("--sweep", a->sweep, "Also the size curve: 8 B doubling up to SIZE, as nccl-tests -b 8 -e SIZE -f 2");
  sub->add_flag("--json", a->json, "Print the JSON report");
  return {sub, [a, gpus] {
            app::CollectiveRequest q;
            auto kind = app::parse_coll_kind(a->kind);
            if (!kind.ok()) return input_error("KIND: " + kind.error().message);
            auto size = app::parse_size_bytes(a->size);
            if (!size.ok()) return input_error("SIZE: " + size.error().message);
            if (!a->algo.empty()) {
              auto algo = app::parse_coll_algo(a->algo);
              if (!algo.ok()) return input_error("--algo: " + algo.error().message);
              q.algo = *algo;
            }
            if (!a->group.empty()) {
              auto group = app::parse_plan_group(a->group);
              if (!group.ok()) return input_error("--group: " + group.error().message);
              q.group = *group;
            }
            if (!a->proto.empty()) {
              auto proto = app::parse_nccl_proto(a->proto);
              if (!proto.ok()) return input_error("--proto: " + proto.error().message);
              q.proto = *proto;
            }
            q.kind = *kind;
            q.size_bytes = *size;
            q.gpus = a->gpus;
            q.gpus_stated = gpus->count() > 0;
            q.stride = a->stride;
            q.cluster = a->cluster;
            if (!a->cluster_file.empty()) q.cluster_file = app::ScenarioInput::file(a->cluster_file);
            q.sweep = a->sweep;
            auto r = app::run_collective(q);
            if (!r.ok()) return input_error(r.error().message);
            return print(a->json ? app::collective_json(*r) : app::collective_text(*r));
          }};
}

}  // namespace stepcast::cli
