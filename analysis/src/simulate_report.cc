#include "stepcast/analysis/simulate_report.h"

#include <cmath>
#include <cstdint>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/models/band.h"
#include "stepcast/models/compute.h"
#include "stepcast/models/estimate.h"

namespace stepcast::analysis {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::int64_t whole(double bytes) { return static_cast<std::int64_t>(std::llround(bytes)); }

}  // namespace

StepParts simulated_step_parts(const Scenario& s, const SimSummary& sum) {
  const RankBreakdown& c = sum.ranks[sum.critical];
  StepParts parts{c.compute, c.exposed_comm(), c.bubble, c.optimizer,
                  c.wait,    c.input,          0.0};  // no host stall in the engine
  if (s.model.moe) {
    const Estimate e = estimate(s);
    if (e.step_time_s > 0) parts.moe = e.breakdown.moe / e.step_time_s * parts.total();
  }
  return parts;
}

Band simulated_step_band(const Scenario& s, const SimSummary& sum) {
  const StepParts parts = simulated_step_parts(s, sum);
  const Band b = step_time_band(parts, validation_residuals(s.plan.stack));
  if (!(parts.total() > 0)) return b;
  const double k = sum.step_time_s / parts.total();
  return Band{b.p10 * k, b.p90 * k};
}

std::string simulate_report_json(const Scenario& s, const Program& program, const SimSummary& sum, bool full,
                                 int steps) {
  return simulate_report_value(s, program, sum, full, steps).dump(2) + "\n";
}

nlohmann::ordered_json simulate_report_value(const Scenario& s, const Program& program, const SimSummary& sum,
                                             bool full, int steps) {
  const RankBreakdown& c = sum.ranks[sum.critical];
  const RankBreakdown& pk = sum.ranks[sum.peak];
  const MemoryBreakdown mem = stage_memory(s.model, s.cluster, s.plan, s.workload, pk.stage);
  const double world = program.placement.world();
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["scenario"] = s.name;
  j["command"] = "simulate";
  j["mode"] = full ? "full" : "representative";
  j["steps"] = steps;
  j["world"] = program.placement.world();
  j["params_total"] = count_params(s.model).total;
  j["tokens_per_step"] = program.tokens_per_step;
  j["model_flops_per_step"] = program.model_flops_per_step;
  j["step_time_s"] = sum.step_time_s;
  j["step_times_s"] = sum.step_times_s;
  j["tokens_per_s"] = static_cast<double>(program.tokens_per_step) / sum.step_time_s;
  const Band band = simulated_step_band(s, sum);
  const Band rate = rate_band(band, sum.step_time_s, static_cast<double>(program.tokens_per_step) / sum.step_time_s);
  j["step_time_band_s"] = {{"p10", band.p10}, {"p90", band.p90}};
  j["tokens_per_s_band"] = {{"p10", rate.p10}, {"p90", rate.p90}};
  j["mfu"] = program.model_flops_per_step / (sum.step_time_s * world * program.peak_flops_per_gpu);
  // HFU: model FLOPs plus the requested recomputation (estimate.h), over the simulated step.
  j["hfu"] = estimate(s).hardware_flops_per_step / (sum.step_time_s * world * program.peak_flops_per_gpu);
  j["mfu_convention"] = kMfuConvention;
  j["critical_rank"] = c.rank;
  j["breakdown_s"] = {{"compute", c.compute}, {"exposed_comm", c.exposed_comm()}, {"bubble", c.bubble},
                      {"wait", c.wait}, {"optimizer", c.optimizer}, {"input", c.input}};
  // As the estimate report: megatron-core reports keep their keys unless the host shows.
  if (s.plan.stack != Stack::kMegatronCore || c.host > 0) j["breakdown_s"]["host"] = c.host;
  j["exposed_comm_s"] = {{"tp", c.tp}, {"dp", c.dp}, {"pp", c.pp}, {"cp", c.cp}, {"ep", c.ep}};
  const double static_bytes = mem.params + mem.grads + mem.optimizer + mem.buffers;
  j["memory_bytes"] = {{"params", whole(mem.params)},
                       {"grads", whole(mem.grads)},
                       {"optimizer", whole(mem.optimizer)},
                       {"activations", whole(pk.peak_bytes - static_bytes)},
                       {"buffers", whole(mem.buffers)},
                       {"total", whole(pk.peak_bytes)},
                       {"capacity", whole(mem.capacity)},
                       {"usable", whole(mem.usable)}};
  j["memory_rank"] = pk.rank;
  j["fits"] = pk.peak_bytes <= mem.usable;
  // Every GPU time runs at the pace of the job's slowest GPU (docs/model-reference.md 4.5).
  if (const double pace = job_pace(s.cluster); pace > 1.0) j["gpu_pace"] = pace;
  j["seed"] = s.seed;
  j["network"] = s.network;
  if (full) {
    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (const RankBreakdown& b : sum.ranks) {
      ranks.push_back({{"rank", b.rank}, {"stage", b.stage}, {"step_time_s", b.total()},
                       {"compute_s", b.compute}, {"wait_s", b.wait}, {"bubble_s", b.bubble},
                       {"exposed_comm_s", b.exposed_comm()}, {"peak_bytes", whole(b.peak_bytes)}});
    }
    j["ranks"] = ranks;
  }
  return j;
}

std::string simulate_report_text(const Scenario& s, const Program& program, const SimSummary& sum,
                                 bool full, int steps) {
  const RankBreakdown& c = sum.ranks[sum.critical];
  const RankBreakdown& pk = sum.ranks[sum.peak];
  const MemoryBreakdown mem = stage_memory(s.model, s.cluster, s.plan, s.workload, pk.stage);
  const double world = program.placement.world();
  std::string o;
  auto line = [&](const std::string& x) { o += x + "\n"; };
  line(fmt::format("stepcast simulate: {} ({} mode, {} step{}, {} ranks simulated)", s.name,
                   full ? "full" : "representative", steps, steps == 1 ? "" : "s", sum.ranks.size()));
  line(fmt::format("Step time {:.4f} s   tokens/s {:.0f}   MFU {:.1f}%", sum.step_time_s,
                   static_cast<double>(program.tokens_per_step) / sum.step_time_s,
                   100 * program.model_flops_per_step / (sum.step_time_s * world * program.peak_flops_per_gpu)));
  const Band band = simulated_step_band(s, sum);
  line(fmt::format("  band p10-p90 {:.4f} - {:.4f} s (docs/model-reference.md, Prediction bands)", band.p10, band.p90));
  if (steps > 1) {
    std::string st;
    for (double x : sum.step_times_s) st += fmt::format(" {:.4f}", x);
    line("  per step:" + st);
  }
  line(fmt::format("Breakdown of the critical rank {} (pipeline stage {}):", c.rank, c.stage));
  auto part = [&](const char* name, double t) {
    line(fmt::format("  {:<18}{:>12.4f} s  {:5.1f}%", name, t, 100 * t / sum.step_time_s));
  };
  part("compute", c.compute);
  if (const double pace = job_pace(s.cluster); pace > 1.0) {
    line(fmt::format("    (every GPU time x {:.4f}: the pace of the slowest of {} GPUs, docs/model-reference.md 4.5)",
                     pace, s.cluster.world()));
  }
  part("exposed comm", c.exposed_comm());
  if (c.tp > 0) part("  tp", c.tp);
  if (c.dp > 0) part("  dp", c.dp);
  if (c.pp > 0) part("  pp", c.pp);
  if (c.cp > 0) part("  cp", c.cp);
  if (c.ep > 0) part("  ep", c.ep);
  part("bubble", c.bubble);
  part("wait", c.wait);
  part("optimizer", c.optimizer);
  if (c.input > 0) part("input", c.input);
  if (c.host > 0) part("host", c.host);
  line(fmt::format("Peak memory {:.2f} GiB on rank {} (stage {}) of {:.2f} GiB usable: {}", pk.peak_bytes / kGiB,
                   pk.rank, pk.stage, mem.usable / kGiB, pk.peak_bytes <= mem.usable ? "fits" : "DOES NOT FIT"));
  line("Per pipeline stage (first rank of each):");
  line(fmt::format("  {:>5} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}", "stage", "rank", "compute", "comm", "bubble",
                   "wait", "peak GiB"));
  int last_stage = -1;
  for (const RankBreakdown& b : sum.ranks) {
    if (b.stage == last_stage) continue;
    last_stage = b.stage;
    line(fmt::format("  {:>5} {:>6} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.2f}", b.stage, b.rank, b.compute,
                     b.exposed_comm(), b.bubble, b.wait, b.peak_bytes / kGiB));
  }
  return o;
}

}  // namespace stepcast::analysis
