// Private to stepcast_app: one record of a validation file (docs/data/validation-runs.json)
// read into stepcast's vocabulary, and the fixed rules that turn it into a scenario
// (docs/validation.md, "How a record becomes a scenario"). Nothing here is fitted to the
// measurements.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stepcast/models/json_reader.h"

namespace stepcast::app::validation {

// FLOP accountings a record's `measured.flop_accounting` may name.
// A record's FLOP accounting of its TFLOP/s: Narayanan et al. eq. 3 (with the recomputed
// forward), Korthikanti et al. eq. 7 (model FLOPs), 6 N per token, or PaLM's 6 N + 12 l h s.
enum class Accounting { kNarayananEq3, kKorthikantiEq7, kSixN, kPalm };

enum class Architecture { kGpt, kLlama };

// Everything read from one record, already mapped to stepcast's vocabulary.
struct Record {
  std::string id;
  // model
  Architecture architecture = Architecture::kGpt;
  std::int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, seq = 0;
  std::optional<std::int64_t> head_dim;
  std::int64_t vocab_padded = 0;
  double stated_params = 0, stated_active_params = 0;  // model.params, model.activated_params (0: not given)
  bool learned_positions = true;
  bool linear_bias_override = false;  // GPT-OSS: the Llama architecture with linear biases
  bool qk_norm = false;               // Qwen3: a per-head RMSNorm on q and k (model.qk_norm)
  std::optional<bool> dropout;        // model.dropout as stated (nullopt: the family's default)
  // Sliding-window attention, as the record states it (model.sliding_window,
  // model.window_attn_skip_freq: Megatron-Core's names); 0 = none.
  std::int64_t sliding_window = 0, window_attn_skip_freq = 0;
  std::string moe;                      // the record's MoE description ("" for a dense model)
  // Read from `moe` (moe_rule): routed experts, experts per token, expert FFN width, shared
  // experts and their width, leading dense layers; experts 0 when the description does not
  // state all three of the first (then `moe_missing` names what is missing).
  std::int64_t moe_experts = 0, moe_top_k = 0, moe_ffn = 0, moe_shared = 0, moe_shared_ffn = 0, moe_dense = 0;
  double moe_capacity_factor = 0;  // model.moe.capacity_factor (0: dropless)
  bool moe_pad_to_capacity = false;
  std::string moe_missing;
  // Multi-head latent attention (model.mla, the five ranks by Hugging Face's names; empty:
  // none), multi-token-prediction modules (model.mtp_modules or num_nextn_predict_layers)
  // and the router's node-limited groups (DeepSeek's n_group / topk_group). A record named
  // for the DeepSeek-V3 preset with its shapes takes what it leaves out from the preset
  // (preset_rule).
  std::vector<std::pair<std::string, std::int64_t>> mla;
  std::int64_t mtp_modules = 0, expert_groups = 0, limited_groups = 0;
  bool mtp_stated = false;
  bool deepseek_v3 = false;  // named DeepSeek-V3 (or R1) with the preset's shapes (preset_rule)
  bool moe_a2a_overlap_stated = false;
  // hardware
  std::string gpu;                      // the record's description
  std::string interconnect;             // the record's description ("" when absent)
  std::int64_t gpus = 0, gpus_per_node = 8;
  bool gpus_per_node_stated = false;
  // layout
  std::int64_t tp = 1, pp = 1, cp = 1, ep = 1, global_batch = 0, microbatch = 1, virtual_stages = 1;
  // Where the record does not state its microbatch, the rule that chose it (microbatch_rule):
  // the index of its line in `assumptions` (-1: stated), and whether the sharded rule took
  // one microbatch a step (global_batch / dp), which validate lowers to the largest divisor
  // that fits where that does not.
  // layout.pipeline_layout as written (null: not stated): plan.pipeline_layout, a list of
  // layers per model chunk or Megatron-Core's layout string; the scenario loader checks it.
  nlohmann::json pipeline_layout;
  int microbatch_assumption = -1;
  bool microbatch_per_step = false;
  std::optional<std::int64_t> dp;
  bool sequence_parallel = false, flash_attention = false;
  std::string attention_kernel;  // "" = the stack's (plan.attention_kernel)
  std::string schedule = "1f1b", recompute = "none", precision = "bf16";
  std::string fp8_recipe = "tensorwise";  // plan.fp8_recipe, with precision fp8
  // layout.microbatch_group_size_per_vp_stage (Megatron-Core's interleaved microbatch group;
  // 0: not stated, build_scenario takes the smallest that runs when pp does not divide m).
  std::int64_t microbatch_group = 0;
  // layout.moe_dispatcher as written ("" = not stated) and the plan.moe_dispatcher it maps to
  // (moe_dispatcher_rule): "alltoall" (also for HybridEP, which is not modelled), "allgather", "deepep".
  std::string moe_dispatcher_text, moe_dispatcher = "alltoall";
  // layout.moe_a2a_overlap (Megatron-Core's overlap_moe_expert_parallel_comm) and the
  // Megatron-Core recompute_modules named in a "selective" layout.recompute.
  bool moe_a2a_overlap = false;
  std::int64_t etp = 0;  // layout.etp, expert tensor parallelism (0: not stated, the plan's default tp)
  std::vector<std::string> recompute_modules;
  // With recompute "full": Megatron-Core's recompute_method "block" over this many layers
  // of each pipeline chunk (plan.recompute_num_layers; 0: every layer).
  std::int64_t recompute_num_layers = 0;
  // Megatron-Core's recompute_method "uniform" with recompute_num_layers > 1 layers per group
  // (plan.recompute_method); false: "block" (or every layer alone).
  bool recompute_uniform = false;
  int zero = 0;
  std::string stack = "megatron-core";  // plan.stack, by the framework rule (stack_rule)
  // Megatron-Bridge performance recipes (bridge_rule): gradients reduced in bf16, TP
  // communication overlap with sequence parallelism.
  std::string grad_dtype = "fp32";
  bool overlap_grad_reduce = true;  // false: the stack's reduction on the compute stream (DeepSpeed 2021's default)
  bool tp_comm_overlap = false;
  // measured (absent: <= 0)
  double tflops = 0, iteration_s = 0, samples_per_s = 0, tokens_per_s = 0, tokens_per_s_per_gpu = 0;
  double peak_memory_gib = 0;
  double model_tflops = 0;  // measured.model_tflops_per_gpu (the source's own model-FLOP count)
  double mfu = 0;           // measured.mfu as a fraction (a percentage above 1 is divided by 100)
  Accounting accounting = Accounting::kNarayananEq3;
  bool accounting_stated = false;
  std::vector<std::string> assumptions;  // the record-specific rules applied, in rule order
  // Keys stepcast does not read (not within two edits of one it does: those are errors),
  // as paths; printed as one assumption.
  std::vector<std::string> ignored_keys;
};

// Reads every record of a parsed validation file. Problems go to `diag`, one line per
// problem, each naming its JSON path ("records[3].model.hidden: expected a positive
// integer, got \"x\""); unknown keys are reported with "did you mean"; a repeated id is an
// error (ids name the written scenario files). Descriptive fields
// (schedule, recompute, precision, ...) are never errors: an unrecognised description
// falls back to the documented default and says so in the record's assumptions.
// REQUIRES: doc is an object.
std::vector<Record> read_records(const nlohmann::json& doc, reader::Diagnostics& diag);

// The scenario of one record (format 1), or why stepcast cannot express the record yet
// (a mixture-of-experts model, no cluster preset for its GPU, GPUs that are not whole
// nodes). Exactly one of the two is set. Appends the GPU rules it applies (a capacity or
// bandwidth read from the GPU description) to r.assumptions.
struct ScenarioBuild {
  std::optional<nlohmann::ordered_json> scenario;
  std::string reason;
};
ScenarioBuild build_scenario(Record& r);

// The record's own FLOP accounting of one iteration, and its name.
// `active_params`: stepcast's count of the parameters a token uses, for the 6 N accountings
// of a record that states no model.params.
double accounting_flops(const Record& r, double active_params, std::string* name);

// "tp8 pp4 dp32 mb1 gbs1792" (dp derived from the GPU count when the record omits it).
std::string layout_of(const Record& r);

// The rules every record shares (printed once).
std::vector<std::string> common_assumptions();

}  // namespace stepcast::app::validation
