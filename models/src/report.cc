#include "stepcast/models/report.h"

#include "stepcast/models/pipeline_layout.h"

#include <cmath>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>
#include <fmt/format.h>

#include "stepcast/models/compute.h"
#include "stepcast/models/names.h"
#include "stepcast/models/pipeline_layout.h"
#include "stepcast/models/text.h"

namespace stepcast {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Integral byte counts are reported as integers.
std::int64_t whole(double bytes) { return static_cast<std::int64_t>(std::llround(bytes)); }

std::string human(double x) {  // 70553706496 -> "70.55 B"
  if (x >= 1e12) return fmt::format("{:.2f} T", x / 1e12);
  if (x >= 1e9) return fmt::format("{:.2f} B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.2f} M", x / 1e6);
  return fmt::format("{:.0f}", x);
}


}  // namespace

std::optional<Error> estimate_report_error(const Estimate& e) {
  const std::pair<const char*, double> numbers[] = {
      {"model_flops_per_step", e.model_flops_per_step},
      {"hardware_flops_per_step", e.hardware_flops_per_step},
      {"executed_flops_per_step", e.executed_flops_per_step},
      {"step_time_s", e.step_time_s},
      {"tokens_per_s", e.tokens_per_s},
      {"step_time_band_s.p10", e.step_time_band.p10},
      {"step_time_band_s.p90", e.step_time_band.p90},
      {"tokens_per_s_band.p10", e.tokens_per_s_band.p10},
      {"tokens_per_s_band.p90", e.tokens_per_s_band.p90},
      {"mfu", e.mfu},
      {"hfu", e.hfu},
      {"breakdown_s.compute", e.breakdown.compute},
      {"breakdown_s.exposed_comm", e.breakdown.exposed_comm},
      {"breakdown_s.bubble", e.breakdown.bubble},
      {"breakdown_s.wait", e.breakdown.wait},
      {"breakdown_s.optimizer", e.breakdown.optimizer},
      {"breakdown_s.input", e.breakdown.input},
      {"moe_blocks_s", e.breakdown.moe},
      {"optimizer_s.gradient_clip", e.breakdown.optimizer_clip},
      {"gradient_norm_sync_s", e.breakdown.grad_norm_sync},
      {"sp_grad_sync_s", e.breakdown.sp_grad_sync},
      {"compute_s.gemm", e.compute.gemm},
      {"compute_s.attention", e.compute.attention},
      {"compute_s.memory_bound", e.compute.memory_bound},
      {"compute_s.recompute", e.compute.recompute},
      {"compute_s.output", e.compute.output},
      {"compute_s.interference", e.compute.interference},
      {"exposed_comm_s.tp", e.exposed.tp},
      {"exposed_comm_s.dp", e.exposed.dp},
      {"exposed_comm_s.pp", e.exposed.pp},
      {"exposed_comm_s.cp", e.exposed.cp},
      {"exposed_comm_s.ep", e.exposed.ep},
      {"memory_bytes.params", e.memory.params},
      {"memory_bytes.grads", e.memory.grads},
      {"memory_bytes.optimizer", e.memory.optimizer},
      {"memory_bytes.activations", e.memory.activations},
      {"memory_bytes.buffers", e.memory.buffers},
      {"memory_bytes.total", e.memory.total},
      {"memory_bytes.capacity", e.memory.capacity},
      {"memory_bytes.usable", e.memory.usable},
      {"memory_bytes.host", e.memory.host},
  };
  for (const auto& [name, x] : numbers) {
    // Byte counts are printed as int64 (whole()): beyond 9e18 bytes (8 EiB) they would wrap.
    const bool bytes = std::string_view(name).starts_with("memory_bytes.");
    if (!std::isfinite(x) || (bytes && std::abs(x) > 9e18)) {
      return Error{fmt::format("internal error: the estimate's {} is {} (not a finite number); please "
                               "report this scenario",
                               name, x)};
    }
  }
  if (!(e.step_time_s > 0)) {
    return Error{fmt::format("internal error: the estimate's step_time_s is {} (not positive); please "
                             "report this scenario",
                             e.step_time_s)};
  }
  if (e.step_time_s > kMaxStepTimeS) {
    return Error{fmt::format("the estimated step time is {:.3g} s, more than the {:g} s stepcast simulates "
                             "(check the model size, the GPU's rates and efficiencies, and the calibration)",
                             e.step_time_s, kMaxStepTimeS)};
  }
  return std::nullopt;
}

std::string estimate_report_json(const Scenario& s, const Estimate& e) {
  return estimate_report_value(s, e).dump(2) + "\n";
}

nlohmann::ordered_json estimate_report_value(const Scenario& s, const Estimate& e) {
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["scenario"] = s.name;
  j["command"] = "estimate";
  j["world"] = e.world;
  j["params_total"] = e.params.total;
  j["params_active"] = e.params.active;
  j["tokens_per_step"] = e.tokens_per_step;
  j["model_flops_per_step"] = e.model_flops_per_step;
  j["hardware_flops_per_step"] = e.hardware_flops_per_step;
  j["executed_flops_per_step"] = e.executed_flops_per_step;
  j["step_time_s"] = e.step_time_s;
  j["tokens_per_s"] = e.tokens_per_s;
  j["step_time_band_s"] = {{"p10", e.step_time_band.p10}, {"p90", e.step_time_band.p90}};
  j["tokens_per_s_band"] = {{"p10", e.tokens_per_s_band.p10}, {"p90", e.tokens_per_s_band.p90}};
  j["mfu"] = e.mfu;
  j["hfu"] = e.hfu;
  j["mfu_convention"] = kMfuConvention;
  j["breakdown_s"] = {{"compute", e.breakdown.compute},
                      {"exposed_comm", e.breakdown.exposed_comm},
                      {"bubble", e.breakdown.bubble},
                      {"wait", e.breakdown.wait},
                      {"optimizer", e.breakdown.optimizer},
                      {"input", e.breakdown.input}};
  j["compute_s"] = {{"gemm", e.compute.gemm},
                    {"attention", e.compute.attention},
                    {"memory_bound", e.compute.memory_bound},
                    {"recompute", e.compute.recompute},
                    {"output", e.compute.output},
                    {"interference", e.compute.interference}};
  j["optimizer_s"] = {{"gradient_clip", e.breakdown.optimizer_clip}};
  j["gradient_norm_sync_s"] = e.breakdown.grad_norm_sync;
  j["sp_grad_sync_s"] = e.breakdown.sp_grad_sync;
  j["exposed_comm_s"] = {{"tp", e.exposed.tp}, {"dp", e.exposed.dp}, {"pp", e.exposed.pp},
                         {"cp", e.exposed.cp}, {"ep", e.exposed.ep}};
  j["memory_bytes"] = {{"params", whole(e.memory.params)},
                       {"grads", whole(e.memory.grads)},
                       {"optimizer", whole(e.memory.optimizer)},
                       {"activations", whole(e.memory.activations)},
                       {"buffers", whole(e.memory.buffers)},
                       {"total", whole(e.memory.total)},
                       {"capacity", whole(e.memory.capacity)},
                       {"usable", whole(e.memory.usable)}};
  if (s.plan.offloads()) {  // listed only with offload (older reports unchanged)
    j["memory_bytes"]["host"] = whole(e.memory.host);
    j["memory_bytes"]["host_usable"] = whole(e.memory.host_usable);
  }
  j["memory_stage"] = e.memory.stage;
  j["fits"] = e.memory.fits;
  j["microbatches"] = e.microbatches;
  j["slowest_stage"] = e.slowest_stage;
  const Plan& p = s.plan;
  j["plan"] = {{"tp", p.tp}, {"pp", p.pp}, {"dp", p.dp}, {"cp", p.cp}, {"ep", p.ep},
               {"sequence_parallel", p.sequence_parallel},
               {"schedule", to_string(p.schedule)}, {"virtual_stages", p.virtual_stages},
               {"microbatch", p.microbatch}, {"global_batch", p.global_batch}, {"zero", p.zero},
               {"recompute", to_string(p.recompute)},
               {"precision", to_string(p.precision)}};
  if (p.tp_comm_overlap) j["plan"]["tp_comm_overlap"] = true;  // listed only when on (older reports unchanged)
  if (p.fsdp_no_sync) j["plan"]["fsdp_no_sync"] = true;        // likewise
  if (p.moe_a2a_overlap) j["plan"]["moe_a2a_overlap"] = true;  // likewise
  if (p.fp8_recipe != Fp8Recipe::kTensorwise) j["plan"]["fp8_recipe"] = std::string(to_string(p.fp8_recipe));
  if (p.moe_dispatcher != MoeDispatcher::kAllToAll) {          // listed when not the default
    j["plan"]["moe_dispatcher"] = std::string(to_string(p.moe_dispatcher));
  }
  if (!p.reshard_after_forward) j["plan"]["reshard_after_forward"] = false;  // listed when not the default
  if (p.recompute == Recompute::kSelective && p.recompute_modules != Plan{}.recompute_modules) {
    j["plan"]["recompute_modules"] = recompute_module_names(p.recompute_modules);  // listed when not the default
  }
  // Listed when groups of several layers recompute together, and when a count applies.
  if (p.recompute_group() > 1) j["plan"]["recompute_method"] = "uniform";
  if (p.recompute_count() > 0) j["plan"]["recompute_num_layers"] = p.recompute_count();
  if (p.expert_tp() != p.tp) j["plan"]["etp"] = p.expert_tp();  // listed only when folded
  if (!p.pipeline_layout.empty()) j["plan"]["pipeline_layout"] = p.pipeline_layout;  // listed when stated
  if (p.microbatch_group > 0) j["plan"]["microbatch_group_size_per_vp_stage"] = p.microbatch_group;  // when stated
  // The stack and the host-bound part are listed for a non-default stack or when the host
  // stalls the GPU (megatron-core reports are unchanged where its host cost hides).
  if (p.stack != Stack::kMegatronCore) j["plan"]["stack"] = to_string(p.stack);
  if (!p.attention_kernel.empty()) j["plan"]["attention_kernel"] = p.attention_kernel;  // listed when stated
  if (p.stack != Stack::kMegatronCore || e.breakdown.host > 0) j["breakdown_s"]["host"] = e.breakdown.host;
  // MoE models: the seconds of the step in the MoE blocks (already in the parts above; the
  // band's MoE term, docs/model-reference.md section 8). Not listed for dense models.
  if (e.breakdown.moe > 0) j["moe_blocks_s"] = e.breakdown.moe;
  if (e.pace > 1.0) {
    j["slowest_gpu"] = {{"gpu_speed_sigma", s.cluster.gpu_speed_sigma},
                        {"gpus", e.world},
                        {"expected_max_z", expected_max_standard_normal(e.world)},
                        {"pace", e.pace},
                        {"step_s", slowest_gpu_cost_s(s.model, s.cluster, s.plan, s.workload, e.step_time_s)}};
  }
  j["seed"] = s.seed;
  j["network"] = s.network;
  j["notes"] = e.notes;
  return j;
}

std::string estimate_report_text(const Scenario& s, const Estimate& e) {
  const Plan& p = s.plan;
  const ClusterSpec& c = s.cluster;
  std::string o;
  auto line = [&](const std::string& x) { o += x + "\n"; };
  line(fmt::format("stepcast estimate: {}", s.name));
  const int windowed = windowed_layers(s.model);
  line(fmt::format(
      "  model    {} ({} layers, h={}, heads {}/{}{}{})", s.model.name, s.model.num_layers, s.model.hidden_size,
      s.model.num_attention_heads, s.model.num_kv_heads,
      s.model.moe ? fmt::format(", MoE {}x top-{}", s.model.moe->num_experts, s.model.moe->top_k) : "",
      windowed > 0 ? fmt::format(", {}-token window on {} of them", s.model.sliding_window, windowed) : ""));
  line(fmt::format("  cluster  {}: {} nodes x {} {} = {} GPUs", c.name, c.nodes, c.gpus_per_node,
                   c.gpu.name, c.world()));
  line(fmt::format(
      "  plan     tp={} pp={} dp={} cp={} ep={}{} sp={} schedule={}{} microbatch={} "
      "global_batch={} (m={}) zero={}{} recompute={} precision={}",
      p.tp, p.pp, p.dp, p.cp, p.ep,
      (p.expert_tp() != p.tp ? fmt::format(" etp={}", p.expert_tp()) : "") +
          (p.moe_a2a_overlap ? " (a2a overlap)" : "") +
          (p.moe_allgather_dispatcher() ? " (allgather dispatcher)" : "") +
          (p.moe_deepep_dispatcher() ? " (DeepEP dispatcher)" : ""),
      p.sequence_parallel ? (p.tp_comm_overlap ? "on+overlap" : "on") : "off", to_string(p.schedule),
      p.virtual_stages > 1
          ? fmt::format(" v={}", p.virtual_stages) +
                (p.microbatch_group > 0 ? fmt::format(" (microbatch groups of {})", p.microbatch_group) : "")
          : "",
      p.microbatch, p.global_batch, e.microbatches, p.zero,
      std::string(p.fsdp_no_sync ? " (no_sync)" : "") + (p.reshard_after_forward ? "" : " (no reshard)"),
      recompute_text(p), to_string(p.precision)));
  if (!p.pipeline_layout.empty()) {
    line(fmt::format("  layers   {} per model chunk (plan.pipeline_layout)", pipeline_layout_text(p.pipeline_layout)));
  }
  if (p.stack != Stack::kMegatronCore) line(fmt::format("  stack    {}", to_string(p.stack)));
  if (!p.attention_kernel.empty()) line(fmt::format("  attention kernel {}", p.attention_kernel));
  line("");
  line("Parameters");
  line(fmt::format("  total {} ({})   active per token {} ({})", e.params.total, human(static_cast<double>(e.params.total)),
                   e.params.active, human(static_cast<double>(e.params.active))));
  line("");
  line("FLOPs");
  line(fmt::format("  tokens per step       {} ({} x {})", e.tokens_per_step, p.global_batch, s.workload.seq_len));
  line(fmt::format("  model FLOPs per step  {:.4g}  ({:.4g} per token)", e.model_flops_per_step,
                   e.model_flops_per_step / static_cast<double>(e.tokens_per_step)));
  line(fmt::format("  hardware FLOPs        {:.4g}  (model FLOPs + requested recomputation; for HFU)",
                   e.hardware_flops_per_step));
  line(fmt::format("  executed FLOPs        {:.4g}  (as the kernels run: causal attention, FlashAttention backward)",
                   e.executed_flops_per_step));
  line("");
  line(fmt::format("Memory per GPU (worst rank: pipeline stage {})", e.memory.stage));
  auto mem = [&](const char* name, double b) { line(fmt::format("  {:<12}{:>10.2f} GiB", name, b / kGiB)); };
  mem("params", e.memory.params);
  mem("grads", e.memory.grads);
  mem("optimizer", e.memory.optimizer);
  mem("activations", e.memory.activations);
  mem("buffers", e.memory.buffers);
  mem("total", e.memory.total);
  line(fmt::format("  {:<12}{:>10.2f} GiB of {:.2f} GiB ({:.0f}% kept as headroom)", "usable",
                   e.memory.usable / kGiB, e.memory.capacity / kGiB, p.memory_headroom * 100));
  if (p.offloads()) {
    line(fmt::format("  {:<12}{:>10.2f} GiB of {:.2f} GiB per GPU (offload: optimizer {:g}, activations {:g}, "
                     "weights {:g})",
                     "host", e.memory.host / kGiB, e.memory.host_usable / kGiB, p.offload_optimizer,
                     p.offload_activations, p.offload_weights));
  }
  line(fmt::format("  fits: {}", e.memory.fits ? "yes"
                                 : e.memory.total > e.memory.usable
                                     ? fmt::format("NO, short by {:.2f} GiB", (e.memory.total - e.memory.usable) / kGiB)
                                     : fmt::format("NO, host memory short by {:.2f} GiB per GPU",
                                                   (e.memory.host - e.memory.host_usable) / kGiB)));
  line("");
  line(fmt::format("Step time {} (slowest pipeline stage: {}); band p10-p90 {} - {}", seconds_text(e.step_time_s),
                   e.slowest_stage, seconds_text(e.step_time_band.p10), seconds_text(e.step_time_band.p90)));
  auto part = [&](const char* name, double t) {
    line(fmt::format("  {:<22}{:>12}  {:5.1f}%", name, seconds_text(t), 100 * t / e.step_time_s));
  };
  part("compute", e.breakdown.compute);
  part("  GEMMs", e.compute.gemm);
  if (e.compute.attention > 0) part("  attention core", e.compute.attention);
  part("  memory-bound", e.compute.memory_bound);
  if (e.compute.recompute > 0) part("  recompute", e.compute.recompute);
  if (e.compute.output > 0) part("  output head", e.compute.output);
  if (e.compute.interference > 0) part("  interference", e.compute.interference);
  part("exposed comm", e.breakdown.exposed_comm);
  if (e.exposed.tp > 0) part("  tp", e.exposed.tp);
  if (e.breakdown.sp_grad_sync > 0) part("    sequence-parallel grads", e.breakdown.sp_grad_sync);
  if (e.exposed.dp > 0) part("  dp", e.exposed.dp);
  if (e.breakdown.grad_norm_sync > 0) part("    gradient norm sync", e.breakdown.grad_norm_sync);
  if (e.exposed.pp > 0) part("  pp", e.exposed.pp);
  if (e.exposed.cp > 0) part("  cp", e.exposed.cp);
  if (e.exposed.ep > 0) part("  ep", e.exposed.ep);
  part("pipeline bubble", e.breakdown.bubble);
  part("optimizer", e.breakdown.optimizer);
  if (e.breakdown.optimizer_clip > 0) part("  gradient norm/clip", e.breakdown.optimizer_clip);
  if (e.breakdown.input > 0) part("input", e.breakdown.input);
  if (e.breakdown.host > 0) part(s.plan.offloads() ? "host (dispatch+offload)" : "host (launch-bound)", e.breakdown.host);
  if (e.breakdown.moe > 0) {
    part("of which MoE blocks", e.breakdown.moe);
    line("   (router, permutation, experts and their all-to-alls, inside the parts above; they widen the");
    line("    band: docs/model-reference.md section 8)");
  }
  if (e.pace > 1.0) {
    line(fmt::format("  of which the slowest of {} GPUs {} (every GPU time x {:.4f}: spread {:.2f}% x E[max] {:.2f};",
                     e.world, seconds_text(slowest_gpu_cost_s(s.model, s.cluster, s.plan, s.workload, e.step_time_s)), e.pace,
                     100 * s.cluster.gpu_speed_sigma, expected_max_standard_normal(e.world)));
    line("   docs/model-reference.md section 4.5)");
  }
  line("");
  line(fmt::format("Throughput  {:.0f} tokens/s ({:.0f} per GPU); band p10-p90 {:.0f} - {:.0f}", e.tokens_per_s,
                   e.tokens_per_s / static_cast<double>(e.world), e.tokens_per_s_band.p10, e.tokens_per_s_band.p90));
  line(fmt::format("MFU {:.1f}%  HFU {:.1f}%  ({:.0f} TFLOP/s per GPU of {:.1f} peak {})", 100 * e.mfu,
                   100 * e.hfu, e.mfu * peak_flops(c.gpu, p.precision) / 1e12,
                   peak_flops(c.gpu, p.precision) / 1e12, to_string(p.precision)));
  line(fmt::format("  ({})", kMfuConvention));
  if (s.workload.train_tokens > 0) {
    const double days = s.workload.train_tokens / e.tokens_per_s / 86400;
    line(fmt::format("Training {:.3g} tokens: {:.1f} days without failures (band {:.1f} - {:.1f})",
                     s.workload.train_tokens, days, s.workload.train_tokens / e.tokens_per_s_band.p90 / 86400,
                     s.workload.train_tokens / e.tokens_per_s_band.p10 / 86400));
  }
  line("  (bands: where published runs landed around such predictions, plus the unsourced");
  line("   constants' uncertainty; docs/model-reference.md, Prediction bands)");
  for (const auto& n : e.notes) line("note: " + n);
  return o;
}

}  // namespace stepcast
