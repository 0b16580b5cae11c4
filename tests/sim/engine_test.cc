// scratch exploration
#include "stepcast/sim/engine.h"
#include <gtest/gtest.h>
#include <cstdio>
#include "stepcast/models/estimate.h"
#include "stepcast/models/lower.h"
#include "stepcast/models/scenario.h"
#include "stepcast/sim/analysis.h"
#include "stepcast/sim/backend.h"

namespace stepcast {
namespace {

Scenario scen(const std::string& text) {
  auto r = parse_scenario(text);
  if (!r.ok()) { ADD_FAILURE() << r.error().message; return {}; }
  return r.value();
}

void explore(const char* label, const Scenario& s) {
  const Program prog = lower(s);
  sim::AnalyticBackend be(s.cluster);
  for (bool full : {false, true}) {
    sim::EngineOptions o; o.full = full;
    auto out = sim::simulate(prog, be, o);
    if (out.deadlock) { std::printf("%s DEADLOCK\n%s\n", label, out.deadlock_report.c_str()); return; }
    auto sum = sim::analyze(prog, out.timeline);
    const Estimate e = estimate(s);
    const auto& c = sum.ranks[sum.critical];
    std::printf("%s full=%d engine %.6f est %.6f diff %+.2f%% | eng comp %.4f tp %.4f cp %.4f ep %.4f pp %.4f dp %.4f bub %.4f wait %.4f opt %.4f | est comp %.4f tp %.4f cp %.4f ep %.4f pp %.4f dp %.4f bub %.4f opt %.4f\n",
      label, full, sum.step_time_s, e.step_time_s, 100*(sum.step_time_s/e.step_time_s-1), c.compute, c.tp, c.cp, c.ep, c.pp, c.dp, c.bubble, c.wait, c.optimizer,
      e.breakdown.compute, e.exposed.tp, e.exposed.cp, e.exposed.ep, e.exposed.pp, e.exposed.dp, e.breakdown.bubble, e.breakdown.optimizer);
    for (int st = 0; st < s.plan.pp; ++st) {
      double peak = 0;
      for (auto& r : out.timeline.ranks) if (r.stage == st) { peak = r.peak_bytes; break; }
      std::printf("   stage %d peak %.0f static %.0f diff %.3f\n", st, peak, stage_memory(s.model, s.cluster, s.plan, s.workload, st).total,
        peak - stage_memory(s.model, s.cluster, s.plan, s.workload, st).total);
    }
  }
}

TEST(Explore, Layouts) {
  explore("shipped", *load_scenario_file(STEPCAST_SOURCE_DIR "/scenarios/llama3-70b-64xh100.json"));
  explore("zero3", scen(R"({"model":"llama3-8b","cluster":{"preset":"dgx-h100","nodes":2},
    "plan":{"tp":1,"pp":1,"dp":16,"zero":3,"global_batch":64},"workload":{"seq_len":4096}})"));
  explore("interleaved", scen(R"({"model":"llama3-70b","cluster":{"preset":"dgx-h100","nodes":4},
    "plan":{"tp":8,"pp":4,"dp":1,"sequence_parallel":true,"schedule":"interleaved","virtual_stages":2,"global_batch":16,"zero":1,"recompute":"selective"},"workload":{"seq_len":8192}})"));
  explore("cp", scen(R"({"model":"llama3-8b","cluster":{"preset":"dgx-h100","nodes":2},
    "plan":{"tp":4,"cp":2,"pp":1,"dp":2,"sequence_parallel":true,"global_batch":16,"zero":1},"workload":{"seq_len":8192}})"));
  explore("moe", scen(R"({"model":"mixtral-8x7b","cluster":{"preset":"dgx-h100","nodes":2},
    "plan":{"tp":2,"pp":2,"dp":4,"ep":4,"sequence_parallel":true,"global_batch":32,"zero":1},"workload":{"seq_len":4096}})"));
  explore("gpipe", scen(R"({"model":"llama3-8b","cluster":{"preset":"dgx-h100","nodes":1},
    "plan":{"tp":2,"pp":4,"dp":1,"schedule":"gpipe","global_batch":16},"workload":{"seq_len":4096}})"));
  explore("gpipe-full", scen(R"({"model":"llama3-8b","cluster":{"preset":"dgx-h100","nodes":1},
    "plan":{"tp":2,"pp":4,"dp":1,"schedule":"gpipe","global_batch":16,"recompute":"full"},"workload":{"seq_len":4096}})"));
  explore("1f1b-full", scen(R"({"model":"llama3-8b","cluster":{"preset":"dgx-h100","nodes":1},
    "plan":{"tp":2,"pp":4,"dp":1,"global_batch":16,"recompute":"full"},"workload":{"seq_len":4096}})"));
}

}  // namespace
}  // namespace stepcast
