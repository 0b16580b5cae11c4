// The names of the enums that reach files and reports: one table per enum (value <-> name),
// from which printing, parsing and the "one of ..." lists of error messages all derive, so a
// new value is named in exactly one place. Names are the spellings of the scenario files
// (docs/interfaces.md) and of every report; changing one changes output.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepcast/models/reliability.h"
#include "stepcast/models/search.h"
#include "stepcast/models/specs.h"

namespace stepcast {

template <class E>
struct NameEntry {
  E value;
  const char* name;  // a string literal (static, null-terminated)
};

// FailureCause carries the unit its rate counts (failure_unit_name) and the rate's key in
// the failures file (docs/interfaces.md "Units") next to its name.
struct FailureCauseEntry {
  FailureCause value;
  const char* name;
  const char* unit;
  const char* rate_key;
};

// Names<E>::kTable lists every value of E once, in declaration order (the order of the
// "one of ..." lists).
template <class E>
struct Names;

template <>
struct Names<Schedule> {
  static constexpr std::array<NameEntry<Schedule>, 3> kTable{{
      {Schedule::kGpipe, "gpipe"}, {Schedule::kOneFOneB, "1f1b"}, {Schedule::kInterleaved, "interleaved"}}};
};
template <>
struct Names<Recompute> {
  static constexpr std::array<NameEntry<Recompute>, 4> kTable{{
      {Recompute::kNone, "none"}, {Recompute::kSelective, "selective"}, {Recompute::kFull, "full"},
      {Recompute::kSelectiveOp, "selective_op"}}};
};
template <>
struct Names<RecomputeMethod> {
  static constexpr std::array<NameEntry<RecomputeMethod>, 2> kTable{
      {{RecomputeMethod::kBlock, "block"}, {RecomputeMethod::kUniform, "uniform"}}};
};
template <>
struct Names<RecomputeModule> {
  static constexpr std::array<NameEntry<RecomputeModule>, 7> kTable{{
      {RecomputeModule::kCoreAttn, "core_attn"}, {RecomputeModule::kLayernorm, "layernorm"},
      {RecomputeModule::kMlp, "mlp"}, {RecomputeModule::kMoeAct, "moe_act"}, {RecomputeModule::kMoe, "moe"},
      {RecomputeModule::kSharedExperts, "shared_experts"}, {RecomputeModule::kMlaUpProj, "mla_up_proj"}}};
};
template <>
struct Names<Precision> {
  static constexpr std::array<NameEntry<Precision>, 3> kTable{{
      {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}, {Precision::kFp8, "fp8"}}};
};
template <>
struct Names<Fp8Recipe> {
  static constexpr std::array<NameEntry<Fp8Recipe>, 4> kTable{{{Fp8Recipe::kTensorwise, "tensorwise"},
                                                               {Fp8Recipe::kDelayed, "delayed"},
                                                               {Fp8Recipe::kBlockwise, "blockwise"},
                                                               {Fp8Recipe::kMxfp8, "mxfp8"}}};
};
template <>
struct Names<Stack> {
  static constexpr std::array<NameEntry<Stack>, 8> kTable{{{Stack::kMegatronCore, "megatron-core"},
                                                           {Stack::kFsdp2Eager, "fsdp2-eager"},
                                                           {Stack::kFsdp2Compile, "fsdp2-compile"},
                                                           {Stack::kDeepspeedZero, "deepspeed-zero"},
                                                           {Stack::kDeepspeedZero2021, "deepspeed-zero-2021"},
                                                           {Stack::kMegatronDeepspeed, "megatron-deepspeed"},
                                                           {Stack::kLlmFoundry, "llm-foundry"},
                                                           {Stack::kFsdp2CompileLoss, "fsdp2-compile-loss"}}};
};
template <>
struct Names<MoeDispatcher> {
  static constexpr std::array<NameEntry<MoeDispatcher>, 3> kTable{{{MoeDispatcher::kAllToAll, "alltoall"},
                                                                   {MoeDispatcher::kAllGather, "allgather"},
                                                                   {MoeDispatcher::kDeepEp, "deepep"}}};
};
template <>
struct Names<CheckpointMode> {
  static constexpr std::array<NameEntry<CheckpointMode>, 2> kTable{{
      {CheckpointMode::kSync, "sync"}, {CheckpointMode::kAsync, "async"}}};
};
template <>
struct Names<Lifetime> {
  static constexpr std::array<NameEntry<Lifetime>, 2> kTable{{
      {Lifetime::kExponential, "exponential"}, {Lifetime::kWeibull, "weibull"}}};
};
template <>
struct Names<FailureCause> {
  static constexpr std::array<FailureCauseEntry, kFailureCauses> kTable{{
      {FailureCause::kGpu, "gpu", "GPU", "rate_per_gpu_h"},
      {FailureCause::kHost, "host", "node", "rate_per_node_h"},
      {FailureCause::kNic, "nic", "node", "rate_per_node_h"},
      {FailureCause::kSwitch, "switch", "switch", "rate_per_switch_h"},
      {FailureCause::kSoftware, "software", "node", "rate_per_node_h"}}};
};
template <>
struct Names<Objective> {
  static constexpr std::array<NameEntry<Objective>, 3> kTable{{
      {Objective::kTimeToTrain, "time_to_train"}, {Objective::kTokensPerS, "tokens_per_s"},
      {Objective::kCost, "cost"}}};
};

// The name of `value`, a view of a static null-terminated literal (so `.data()` is a valid
// C string); "?" for a value outside the enum (a bug).
template <class E>
constexpr std::string_view name_of(E value) {
  for (const auto& e : Names<E>::kTable) {
    if (e.value == value) return e.name;
  }
  return "?";
}

// The value named exactly `name` (case-sensitive); nullopt for any other string.
template <class E>
constexpr std::optional<E> parse_name(std::string_view name) {
  for (const auto& e : Names<E>::kTable) {
    if (name == e.name) return e.value;
  }
  return std::nullopt;
}

// Every name of E in table order, e.g. {"gpipe", "1f1b", "interleaved"}: the choices of
// ObjectReader::choice.
template <class E>
const std::vector<std::string>& names_of() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& e : Names<E>::kTable) v.emplace_back(e.name);
    return v;
  }();
  return names;
}

// The names quoted and joined for "is not one of ..." messages:
// "\"gpipe\", \"1f1b\", \"interleaved\"".
template <class E>
std::string quoted_names() {
  std::string out;
  for (const auto& e : Names<E>::kTable) {
    if (!out.empty()) out += ", ";
    out += '"';
    out += e.name;
    out += '"';
  }
  return out;
}

// Named entry points (the same tables).
std::string_view to_string(Schedule value);
std::string_view to_string(Recompute value);
std::string_view to_string(RecomputeModule value);
// The names of the modules set in `bits` (Plan::recompute_modules), in table order.
std::vector<std::string> recompute_module_names(std::uint32_t bits);
// The plan's recomputation as reports print it: "none", "full", "selective" (Megatron-Core's
// default module, core_attn), or "selective:mla_up_proj,mlp" for other modules.
std::string recompute_text(const Plan& plan);
std::string_view to_string(Precision value);
std::string_view to_string(Fp8Recipe value);
std::string_view to_string(Stack value);
std::string_view to_string(MoeDispatcher value);
std::string_view to_string(CheckpointMode value);
std::string_view to_string(Lifetime value);
std::string_view to_string(FailureCause value);
std::string_view to_string(Objective value);

std::optional<Schedule> parse_schedule(std::string_view name);
std::optional<Recompute> parse_recompute(std::string_view name);
std::optional<Precision> parse_precision(std::string_view name);
std::optional<Stack> parse_stack(std::string_view name);
std::optional<CheckpointMode> parse_checkpoint_mode(std::string_view name);
std::optional<Lifetime> parse_lifetime(std::string_view name);
std::optional<FailureCause> parse_failure_cause(std::string_view name);
std::optional<Objective> parse_objective(std::string_view name);

// The key of `cause`'s rate in a failures file: "rate_per_gpu_h", "rate_per_node_h" or
// "rate_per_switch_h" (from the FailureCause table, as failure_unit_name).
const char* failure_rate_key(FailureCause cause);

}  // namespace stepcast
