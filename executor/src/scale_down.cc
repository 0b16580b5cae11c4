#include "stepcast/executor/scale_down.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace stepcast::exec {

ModelSpec scale_down(const ModelSpec& m, int f, int min_layers, int min_heads) {
  if (f < 1) throw std::invalid_argument(fmt::format("--scale-down: {} must be at least 1", f));
  if (f == 1) return m;
  ModelSpec s = m;
  s.name = fmt::format("{} / {}", m.name, f);
  s.num_attention_heads = std::max(min_heads, m.num_attention_heads / f);
  s.num_kv_heads = std::max(1, m.num_kv_heads / f);
  while (s.num_attention_heads % s.num_kv_heads != 0) --s.num_kv_heads;
  s.head_dim = m.head_dim > 0 ? m.head_dim : m.hidden_size / m.num_attention_heads;
  s.hidden_size = s.head_dim * s.num_attention_heads;
  s.ffn_hidden_size = std::max<std::int64_t>(1, m.ffn_hidden_size / f);
  s.vocab_size = std::max<std::int64_t>(64, m.vocab_size / f);
  s.num_layers = std::max(min_layers, m.num_layers / f);
  if (s.moe) {
    s.moe->expert_ffn_hidden_size = std::max<std::int64_t>(1, m.moe->expert_ffn_hidden_size / f);
    s.moe->shared_expert_ffn_hidden_size = std::max<std::int64_t>(0, m.moe->shared_expert_ffn_hidden_size / f);
    s.moe->num_dense_layers = std::min(s.moe->num_dense_layers, s.num_layers - 1);
  }
  if (s.mla) {
    s.mla->q_lora_rank = std::max<std::int64_t>(1, m.mla->q_lora_rank / f);
    s.mla->kv_lora_rank = std::max<std::int64_t>(1, m.mla->kv_lora_rank / f);
  }
  s.reference_params_total.reset();
  return s;
}

Result<Scenario> scale_down_scenario(const Scenario& scenario, int factor) {
  if (factor < 1) return Error{fmt::format("--scale-down: {} must be at least 1", factor)};
  Scenario sc = scenario;
  if (factor == 1) return sc;
  sc.model = scale_down(sc.model, factor, sc.plan.pp * sc.plan.virtual_stages, sc.plan.tp);
  auto errs = layout_errors(sc.model, sc.cluster, sc.plan, sc.workload);
  if (!errs.empty()) return Error{fmt::format("--scale-down {}: {}", factor, errs.front())};
  return sc;
}

}  // namespace stepcast::exec
