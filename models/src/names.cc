#include "stepcast/models/names.h"

namespace stepcast {

std::string_view to_string(Schedule value) { return name_of(value); }
std::string_view to_string(Recompute value) { return name_of(value); }
std::string_view to_string(RecomputeModule value) { return name_of(value); }

std::vector<std::string> recompute_module_names(std::uint32_t bits) {
  std::vector<std::string> out;
  for (const auto& e : Names<RecomputeModule>::kTable) {
    if (bits & module_bit(e.value)) out.emplace_back(e.name);
  }
  return out;
}

std::string recompute_text(const Plan& plan) {
  std::string out(to_string(plan.recompute));
  if (plan.partial_full_recompute()) return out + ":" + std::to_string(plan.recompute_num_layers) + "/chunk";
  if (plan.recompute_group() > 1) return out + ":uniform" + std::to_string(plan.recompute_group());
  if (plan.recompute != Recompute::kSelective || plan.recompute_modules == Plan{}.recompute_modules) return out;
  const std::vector<std::string> names = recompute_module_names(plan.recompute_modules);
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? "," : ":") + names[i];
  return out;
}
std::string_view to_string(Precision value) { return name_of(value); }
std::string_view to_string(Fp8Recipe value) { return name_of(value); }
std::string_view to_string(Stack value) { return name_of(value); }
std::string_view to_string(MoeDispatcher value) { return name_of(value); }
std::string_view to_string(CheckpointMode value) { return name_of(value); }
std::string_view to_string(Lifetime value) { return name_of(value); }
std::string_view to_string(FailureCause value) { return name_of(value); }
std::string_view to_string(Objective value) { return name_of(value); }

std::optional<Schedule> parse_schedule(std::string_view name) { return parse_name<Schedule>(name); }
std::optional<Recompute> parse_recompute(std::string_view name) { return parse_name<Recompute>(name); }
std::optional<Precision> parse_precision(std::string_view name) { return parse_name<Precision>(name); }
std::optional<Stack> parse_stack(std::string_view name) { return parse_name<Stack>(name); }
std::optional<CheckpointMode> parse_checkpoint_mode(std::string_view name) {
  return parse_name<CheckpointMode>(name);
}
std::optional<Lifetime> parse_lifetime(std::string_view name) { return parse_name<Lifetime>(name); }
std::optional<FailureCause> parse_failure_cause(std::string_view name) { return parse_name<FailureCause>(name); }
std::optional<Objective> parse_objective(std::string_view name) { return parse_name<Objective>(name); }

// The public names of reliability.h and search.h, kept for their callers.
const char* failure_cause_name(FailureCause cause) { return name_of(cause).data(); }

const char* failure_unit_name(FailureCause cause) {
  for (const auto& e : Names<FailureCause>::kTable) {
    if (e.value == cause) return e.unit;
  }
  return "?";
}

const char* failure_rate_key(FailureCause cause) {
  for (const auto& e : Names<FailureCause>::kTable) {
    if (e.value == cause) return e.rate_key;
  }
  return "rate_per_node_h";
}

const char* objective_name(Objective objective) { return name_of(objective).data(); }

}  // namespace stepcast
