// Layout strings: one parallel layout as the planner prints it and as `--explain` and
// `expect.best_layout` take it (docs/planner.md "Layout strings"):
//   tp=8,pp=4,dp=2,cp=1,ep=1,sp=true,schedule=1f1b,v=1,mb=1,gb=64,zero=1,recompute=selective
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "stepcast/models/result.h"
#include "stepcast/models/specs.h"

namespace stepcast::planner {

// The searched fields of `plan` in the order above (the world is tp x pp x dp x cp), with
// ",tpo=true" after sp when plan.tp_comm_overlap is on (absent when off), and
// ",stack=NAME" at the end when plan.stack is not the default megatron-core.
std::string layout_string(const Plan& plan);

// "gpipe", "1f1b", "interleaved"; "none", "selective", "full".
const char* schedule_name(Schedule schedule);
const char* recompute_name(Recompute recompute);
// A recompute_modules set as layout strings write it: Megatron-Core's names joined by "+"
// ("moe_act+layernorm"), in the table order of stepcast/models/names.h.
std::string recompute_modules_text(std::uint32_t modules);

struct ParsedLayout {
  Plan plan;                   // `base` with the named fields set
  std::optional<int> gpus;     // "gpus=N" when named
  bool dp_given = false;       // "dp=N" named (else the caller derives it)
  bool gb_given = false;       // "gb=N" named
  bool schedule_given = false;
  bool a2a_given = false;  // "a2a=..." named (else the scenario's flag where it applies)
  bool modules_given = false;  // "recompute_modules=..." named (else the default set with "recompute=...")
};

// Parses "key=value" pairs separated by commas, on top of `base`. Keys: tp, pp, dp, cp, ep,
// sp (true/false/1/0), tpo (or tp_comm_overlap; true/false/1/0), schedule, v (or virtual_stages), mb (or microbatch),
// gb (or global_batch), zero, recompute, recompute_num_layers, recompute_method, recompute_modules (names joined by
// "+"; "recompute=..." without it is the default set), stack, gpus, offload_*. "v=N" with N >= 2 and no schedule named
// implies "interleaved". Errors quote the whole string and name the key, e.g.
// `"tp=8,pq=4": unknown key "pq"; did you mean "pp"?`.
Result<ParsedLayout> parse_layout(std::string_view text, const Plan& base);

}  // namespace stepcast::planner
