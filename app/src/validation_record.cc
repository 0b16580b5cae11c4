#include "validation_record.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <regex>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stepcast/models/presets.h"
#include "stepcast/models/scenario.h"

namespace stepcast::app::validation {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using reader::Diagnostics;
using reader::ObjectReader;

// Megatron pads the vocabulary to a multiple of make-vocab-size-divisible-by (128) x TP.
constexpr std::int64_t kVocabPadMultiple = 128;
constexpr std::int64_t kMaxCount = 1'000'000'000'000;  // any count or dimension of a record

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

bool contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The part of a description the rules' regular expressions read: its first 1000 characters
// (the longest description of a shipped record has 269). libstdc++'s std::regex recurses per
// character, so an unbounded input (a fuzzed or pasted megabyte) would overflow the stack.
constexpr std::size_t kRegexInputMax = 1000;
std::string clip(const std::string& s) { return s.size() <= kRegexInputMax ? s : s.substr(0, kRegexInputMax); }

// What the Llama architecture stands for in the assumptions that choose it.
constexpr const char* kLlamaBlock =
    "Llama architecture (RMSNorm, SwiGLU FFN with 3 matrices, RoPE, no linear biases, untied embeddings, no dropout)";

// A description as it appears in an assumption: quoted, at most 40 characters.
std::string quote(const std::string& s) { return reader::describe(json(s)); }

// The ZeRO stage a lower-case description names: "zero" followed by separators and an optional
// "stage", then a digit 0..3 that is not part of a longer number ("ZeRO-3", "zero3", "ZeRO
// Stage-2", "zero_stage=3", "ZeRO (stage 1)"; not "ZeRO-30"), or "stage N" elsewhere in a
// description that names ZeRO or DeepSpeed ("Zero Redundancy Optimizer, stage 3"); "ZeRO++"
// without a stage is 3 (it extends ZeRO-3); -1 when it names none.
int zero_stage_in(const std::string& low) {
  static const std::regex kZero(R"(zero(?:\+\+)?[ \-_=:(]*(?:stage[ \-_=:(]*)?([0-3])(?![0-9]))");
  static const std::regex kStage(R"(stage[ \-_=:(]*([0-3])(?![0-9]))");
  const std::string d = clip(low);
  std::smatch m;
  if (std::regex_search(d, m, kZero)) return m[1].str()[0] - '0';
  if ((contains(d, "zero") || contains(d, "deepspeed")) && std::regex_search(d, m, kStage)) return m[1].str()[0] - '0';
  return contains(d, "zero++") ? 3 : -1;
}

// A positive integer field. Absent or null: nullopt (with "missing (required): a positive
// integer" or "expected a positive integer, got null" when `required`). A count written as
// text ("8", "128,256" with thousands separators) is read as that number and printed as an
// assumption of `rec`.
std::optional<std::int64_t> positive(ObjectReader& r, std::string_view key, bool required, Record& rec) {
  const json* v = r.raw(key);
  if (!v) {
    if (required) r.diag().add(r.path_of(key), "missing (required): a positive integer");
    return std::nullopt;
  }
  if (v->is_null() && !required) return std::nullopt;
  std::optional<std::int64_t> x;
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxCount)) {
    r.diag().add(r.path_of(key), fmt::format("{} is out of range (1 to {})", reader::describe(*v), kMaxCount));
    return std::nullopt;
  }
  if (v->is_number_integer()) {
    x = v->get<std::int64_t>();
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 0x1p62) x = static_cast<std::int64_t>(d);
  } else if (v->is_string()) {
    const std::string& t = v->get_ref<const std::string&>();
    const std::size_t b = t.find_first_not_of(" \t"), e = t.find_last_not_of(" \t");
    std::string digits = b == std::string::npos ? std::string() : t.substr(b, e - b + 1);
    // Thousands separators between groups of three digits, one character throughout ("128,256",
    // "8_192", "65 536").
    static const std::regex kGrouped(R"(\d{1,3}([,_ '])\d{3}(?:\1\d{3})*)");
    if (digits.size() <= 32 && std::regex_match(digits, kGrouped)) {
      digits.erase(std::remove_if(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c) == 0; }),
                   digits.end());
    }
    if (!digits.empty() && digits.size() <= 13 &&
        std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
      x = std::stoll(digits);
      if (*x >= 1 && *x <= kMaxCount) {
        rec.assumptions.push_back(fmt::format("{} {}: {} (a count written as text)", key, quote(t), *x));
      }
    }
  }
  if (!x || *x < 1) {
    r.diag().add(r.path_of(key), "expected a positive integer, got " + reader::describe(*v));
    return std::nullopt;
  }
  if (*x > kMaxCount) {
    r.diag().add(r.path_of(key), fmt::format("{} is out of range (1 to {})", *x, kMaxCount));
    return std::nullopt;
  }
  return x;
}

// A parallel degree a record may leave out (absent or null): 1, printed.
std::int64_t degree(ObjectReader& r, std::string_view key, Record& rec) {
  if (auto x = positive(r, key, false, rec)) return *x;
  rec.assumptions.push_back(fmt::format("{} not stated: 1", key));
  return 1;
}

// A measured quantity: absent or null -> 0; else a finite number > 0. A number written as
// text ("5,762", "1.2e3") is read as that number, printed as an assumption; so is one with a
// unit that restates the quantity ("727 TFLOP/s", "5762 tokens/s"), a k or M multiplier
// ("1.6k": 1600; lower-case m is not mega) or, for mfu, a percent sign ("41.2%": 0.412).
double measurement(ObjectReader& r, std::string_view key, Record& rec) {
  const json* v = r.raw(key);
  if (!v || v->is_null()) return 0;
  if (v->is_string()) {
    std::string t = v->get<std::string>().size() <= 64 ? v->get<std::string>() : std::string();
    t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == ',' || c == '_' || c == ' '; }), t.end());
    double scale = 1;
    const auto strip = [&](std::string_view suffix) {
      if (t.size() <= suffix.size() || lower(t.substr(t.size() - suffix.size())) != suffix) return false;
      t.resize(t.size() - suffix.size());
      return true;
    };
    // "per GPU" after the unit ("1100 tokens/s/GPU"): the key says what it is per.
    if (!strip("/gpu")) strip("pergpu");
    for (std::string_view unit :
         {"tflop/s", "tflops", "tokens/sec", "tokens/s", "tok/s", "samples/sec", "samples/s", "gib"}) {
      if (strip(unit)) break;
    }
    if ((key == "iteration_time_s" || key == "step_time_s") && !strip("sec")) strip("s");
    if (key == "peak_memory_gib" && strip("gb")) scale = 1e9 / (1024.0 * 1024.0 * 1024.0);  // GB: 10^9 bytes
    if (key == "mfu" && strip("%")) {
      scale = 0.01;
    } else if (!t.empty() && (t.back() == 'k' || t.back() == 'K')) {
      t.pop_back();
      scale = 1e3;
    } else if (!t.empty() && t.back() == 'M') {
      t.pop_back();
      scale = 1e6;
    }
    static const std::regex kNumber(R"([0-9]+(\.[0-9]*)?([eE][+-]?[0-9]{1,3})?)");
    if (!t.empty() && std::regex_match(t, kNumber)) {
      const double x = scale * std::stod(t);
      if (std::isfinite(x) && x > 0) {
        rec.assumptions.push_back(
            fmt::format("{} {}: {} (a number written as text)", key, quote(v->get<std::string>()), x));
        return x;
      }
    }
  }
  if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() <= 0) {
    r.diag().add(r.path_of(key), "expected a positive number, got " + reader::describe(*v));
    return 0;
  }
  return v->get<double>();
}

// A description (absent or null: nullopt; not a string: an error).
std::optional<std::string> text(ObjectReader& r, std::string_view key) {
  const json* v = r.raw(key);
  if (!v || v->is_null()) return std::nullopt;
  return r.string(key);
}

// The yes/no a lower-case word says: "yes", "on", "true", "enabled" or "no", "off", "false",
// "disabled"; nullopt for any other word.
std::optional<bool> yes_no(const std::string& low) {
  static const std::pair<const char*, bool> kWords[] = {{"yes", true},     {"no", false},      {"on", true},
                                                        {"off", false},    {"true", true},     {"false", false},
                                                        {"enabled", true}, {"disabled", false}};
  for (const auto& [word, value] : kWords) {
    if (low == word) return value;
  }
  return std::nullopt;
}

// A yes/no field: true or false, or (printed as an assumption) a word that says it (yes_no) in
// any case.
std::optional<bool> flag(ObjectReader& r, std::string_view key, Record& rec) {
  const json* v = r.raw(key);
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_string()) {
    if (const auto value = yes_no(lower(v->get<std::string>()))) {
      rec.assumptions.push_back(fmt::format("{} {}: {}", key, quote(v->get<std::string>()), *value));
      return value;
    }
    r.diag().add(r.path_of(key), "expected true or false (or yes/no, on/off), got " + reader::describe(*v));
    return std::nullopt;
  }
  return r.boolean(key);
}

// A required nested object: nullptr with a message when missing, null or not an object.
const json* section(ObjectReader& r, std::string_view key) {
  if (!r.has(key)) {
    r.raw(key);
    r.diag().add(r.path_of(key), "missing (required): an object");
    return nullptr;
  }
  return r.object(key);
}

// Prints the mapping of a description unless it is the value's own name.
void mapped(Record& rec, const char* field, const std::string& desc, const std::string& value) {
  if (lower(desc) != value) rec.assumptions.push_back(fmt::format("{} {}: {}", field, quote(desc), value));
}

// plan.fp8_recipe from the precision's words (Megatron-Bridge's compute_dtype names:
// fp8_cs current scaling, fp8_mx MXFP8, fp8_sc sub-channel, i.e. blockwise): MX -> mxfp8,
// blockwise / sub-channel -> blockwise, delayed -> delayed, current scaling or tensorwise ->
// tensorwise; not stated -> tensorwise (Transformer Engine's current scaling, the default).
void fp8_recipe_rule(Record& r, const std::string& desc, const std::string& low) {
  const auto says = [&](std::initializer_list<const char*> words) {
    return std::any_of(words.begin(), words.end(), [&](const char* w) { return contains(low, w); });
  };
  if (says({"mxfp8", "fp8-mx", "fp8_mx", "fp8mx"})) {
    r.fp8_recipe = "mxfp8";
  } else if (says({"blockwise", "block-wise", "fp8-sc", "fp8_sc", "sub-channel", "subchannel"})) {
    r.fp8_recipe = "blockwise";
  } else if (says({"delayed", "fp8-ds", "fp8_ds"})) {
    r.fp8_recipe = "delayed";
  } else if (says({"fp8-cs", "fp8_cs", "current scaling", "tensorwise"})) {
    r.fp8_recipe = "tensorwise";
  } else {
    r.assumptions.push_back(fmt::format(
        "fp8 scaling not stated in precision {}: tensorwise (Transformer Engine's current scaling)", quote(desc)));
    return;
  }
  r.assumptions.push_back(fmt::format("fp8_recipe from precision {}: {}", quote(desc), r.fp8_recipe));
}

// model.mla: multi-head latent attention's ranks by Hugging Face's names (q_lora_rank 0 or
// null: no query compression); model.mtp_modules (or num_nextn_predict_layers, its Hugging
// Face name); model.n_group and model.topk_group, DeepSeek's node-limited routing (the
// scenario's moe.expert_groups and limited_groups).
void read_mla_and_mtp(ObjectReader& f, Record& r) {
  if (const json* v = f.raw("mla"); v && !v->is_null()) {
    if (!v->is_object()) {
      f.diag().add(f.path_of("mla"),
                   "expected an object of multi-head latent attention's ranks (q_lora_rank, "
                   "kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim), got " +
                       reader::describe(*v));
    } else {
      ObjectReader m(*v, f.path_of("mla"), f.diag());
      static constexpr std::pair<const char*, std::int64_t> kRanks[] = {
          {"q_lora_rank", 0}, {"kv_lora_rank", 1}, {"qk_nope_head_dim", 1}, {"qk_rope_head_dim", 0}, {"v_head_dim", 1}};
      for (const auto& [key, min] : kRanks) {
        if (const json* x = m.raw(key); x && x->is_null() && std::string_view(key) == "q_lora_rank") {
          r.mla.emplace_back(key, 0);  // DeepSeek-V2-Lite's config: no query compression
        } else if (auto n = m.integer(key, min, 1'000'000)) {
          r.mla.emplace_back(key, *n);
        } else if (!m.has(key) && min > 0) {
          m.diag().add(m.path_of(key), "missing (required with model.mla)");
        }
      }
      m.finish(&r.ignored_keys);
    }
  }
  for (const char* key : {"mtp_modules", "num_nextn_predict_layers"}) {
    if (auto n = f.integer(key, 0, 16)) {
      r.mtp_modules = *n;
      r.mtp_stated = true;
    }
  }
  if (auto g = f.integer("n_group", 1, 1'000'000)) r.expert_groups = *g;
  if (auto g = f.integer("topk_group", 1, 1'000'000)) r.limited_groups = *g;
}

// A record named for the DeepSeek-V3 preset (DeepSeek-V3 or R1, its shapes: 61 layers of
// hidden 7168) takes from models/data/models.json what it does not state: the multi-head
// latent attention's ranks, the one multi-token-prediction module the technical report
// trained with, and the router's node-limited groups; printed.
void preset_rule(const std::string& name_low, Record& r) {
  std::string alnum;  // "DeepSeek-V3", "DeepSeekV3" (NVIDIA's tables), "deepseek_v3": "deepseekv3"
  for (char ch : name_low) {
    if (std::isalnum(static_cast<unsigned char>(ch))) alnum += ch;
  }
  const bool named = contains(alnum, "deepseekv3") || contains(alnum, "deepseekr1");
  const ModelSpec& p = builtin_presets().models.at("deepseek-v3");
  if (!named || r.layers != p.num_layers || r.hidden != p.hidden_size) return;
  r.deepseek_v3 = true;
  std::vector<std::string> took;
  if (r.mla.empty() && p.mla) {
    r.mla = {{"q_lora_rank", p.mla->q_lora_rank},
             {"kv_lora_rank", p.mla->kv_lora_rank},
             {"qk_nope_head_dim", p.mla->qk_nope_head_dim},
             {"qk_rope_head_dim", p.mla->qk_rope_head_dim},
             {"v_head_dim", p.mla->v_head_dim}};
    took.push_back(fmt::format(
        "multi-head latent attention (q_lora_rank {}, kv_lora_rank {}, qk_nope_head_dim {}, "
        "qk_rope_head_dim {}, v_head_dim {})",
        p.mla->q_lora_rank, p.mla->kv_lora_rank, p.mla->qk_nope_head_dim, p.mla->qk_rope_head_dim, p.mla->v_head_dim));
  }
  if (!r.mtp_stated && p.mtp_layers > 0) {
    r.mtp_modules = p.mtp_layers;
    took.push_back(fmt::format("{} multi-token-prediction module", p.mtp_layers));
  }
  if (r.expert_groups == 0 && p.moe && p.moe->expert_groups > 0) {
    r.expert_groups = p.moe->expert_groups;
    r.limited_groups = p.moe->limited_groups;
    took.push_back(fmt::format("node-limited routing ({} expert groups, {} per token)", p.moe->expert_groups,
                               p.moe->limited_groups));
  }
  if (!took.empty()) {
    r.assumptions.push_back(
        fmt::format("model named DeepSeek-V3 with its shapes: the deepseek-v3 preset's {}", fmt::join(took, ", ")));
  }
}

void read_model(ObjectReader& f, Record& r) {
  f.ignore({"notes"});
  for (auto [key, out] :
       {std::pair{"params", &r.stated_params}, std::pair{"activated_params", &r.stated_active_params}}) {
    if (const json* v = f.raw(key); v && v->is_number() && std::isfinite(v->get<double>()) && v->get<double>() > 0) {
      *out = v->get<double>();  // a description otherwise ("175B"): not read
    }
  }
  std::string name_low;  // the model's name, lower case ("" when not given)
  if (auto name = text(f, "name")) {
    const std::string n = lower(*name);
    name_low = n;
    // The families that publish Llama's block (RMSNorm, SwiGLU, RoPE, no biases, untied).
    static const char* const kLlamaLike[] = {"llama",    "qwen",    "mistral", "mixtral", "deepseek", "internlm",
                                             "baichuan", "olmo",    "gemma",   "phi-3",   "phi3",     "phi-4",
                                             "stablelm", "granite", "chatglm", "glm-4",   "yi-",      "minicpm"};
    if (std::any_of(std::begin(kLlamaLike), std::end(kLlamaLike), [&](const char* k) { return contains(n, k); })) {
      r.architecture = Architecture::kLlama;
      r.learned_positions = false;
      // Qwen3 adds a per-head RMSNorm on q and k (Hugging Face modeling_qwen3.py q_norm,
      // k_norm; Megatron-Bridge's Qwen3 providers set qk_layernorm).
      r.qk_norm = contains(n, "qwen3");
      r.assumptions.push_back(fmt::format("model {}: {}{}", quote(*name), kLlamaBlock,
                                          r.qk_norm ? "; Qwen3's per-head RMSNorm on q and k (qk_norm)" : ""));
    } else if (contains(n, "gpt-oss") || contains(n, "gpt oss") || contains(n, "gpt_oss")) {
      r.architecture = Architecture::kLlama;
      r.learned_positions = false;
      r.linear_bias_override = true;
      r.assumptions.push_back(fmt::format(
          "model {}: GPT-OSS architecture (RMSNorm, SwiGLU FFN with 3 matrices, RoPE, biases on every linear "
          "layer and expert, untied embeddings, no dropout; the attention sinks are not modelled)",
          quote(*name)));
    }
  }
  r.layers = positive(f, "layers", true, r).value_or(0);
  r.hidden = positive(f, "hidden", true, r).value_or(0);
  r.heads = positive(f, "heads", true, r).value_or(0);
  r.vocab = positive(f, "vocab", true, r).value_or(0);
  // A sequence length written as "4k" / "128K": thousands of tokens in powers of two (4096,
  // 131072), as context lengths are named.
  if (const json* sv = f.raw("seq_len"); sv && sv->is_string()) {
    std::smatch k;
    const std::string t = sv->get<std::string>();
    if (t.size() <= 32 && std::regex_match(t, k, std::regex(R"(\s*(\d{1,4})\s*[kK]\s*)"))) {
      r.seq = std::stoll(k[1].str()) * 1024;
      r.assumptions.push_back(fmt::format("seq_len {}: {} (k = 1024 tokens)", quote(t), r.seq));
    }
  }
  if (r.seq == 0) r.seq = positive(f, "seq_len", true, r).value_or(0);
  r.head_dim = positive(f, "head_dim", false, r);
  r.sliding_window = positive(f, "sliding_window", false, r).value_or(0);
  if (const json* v = f.raw("window_attn_skip_freq"); v && !v->is_null()) {
    const bool ok = v->is_number_integer() &&
                    (v->get<std::int64_t>() == 0 || (v->get<std::int64_t>() >= 2 && v->get<std::int64_t>() <= 1000));
    if (!ok) {
      f.diag().add(f.path_of("window_attn_skip_freq"),
                   "expected 0 (every layer windowed) or an integer from 2 to 1000 (layers numbered N, 2N, ... keep "
                   "full attention), got " +
                       reader::describe(*v));
    } else if (r.sliding_window == 0) {
      f.diag().add(f.path_of("window_attn_skip_freq"), "given without sliding_window (the window's size in tokens)");
    } else {
      r.window_attn_skip_freq = v->get<std::int64_t>();
    }
  }
  if (r.sliding_window > 0) {
    r.assumptions.push_back(
        fmt::format("sliding_window {}: each query of a windowed layer attends the last {} keys; {}", r.sliding_window,
                    r.sliding_window,
                    r.window_attn_skip_freq == 0
                        ? std::string("every layer windowed (window_attn_skip_freq 0 or not given)")
                        : fmt::format("layers numbered {}, {}, ... keep full attention (window_attn_skip_freq {})",
                                      r.window_attn_skip_freq, 2 * r.window_attn_skip_freq, r.window_attn_skip_freq)));
  }
  if (const json* moe = f.raw("moe"); moe && !moe->is_null()) {
    r.moe = moe->is_string() ? moe->get<std::string>() : moe->dump();
    if (r.moe.empty()) r.moe = "(empty)";
  }
  read_mla_and_mtp(f, r);
  if (auto kv = positive(f, "kv_heads", false, r)) {
    r.kv_heads = *kv;
  } else {
    r.kv_heads = r.heads;
    r.assumptions.push_back("kv_heads not given: multi-head attention (kv_heads = heads)");
  }
  if (auto ffn = positive(f, "ffn_hidden", false, r)) {
    r.ffn = *ffn;
    // A dense model of no named family whose FFN is narrower than 3.75 x hidden has a gated
    // FFN's width (SwiGLU's 8/3 x hidden rounded up; Llama 3's 3.5 x): a GELU FFN is 4 x hidden
    // in every GPT-family model (GPT-3, BLOOM, OPT, Falcon, MPT, Nemotron-4).
    // A model named GPT keeps the GPT family whatever its width.
    const bool named_gpt = contains(name_low, "gpt");
    if (r.architecture == Architecture::kGpt && !named_gpt && r.moe.empty() && r.hidden > 0 &&
        4 * r.ffn < 15 * r.hidden) {
      r.architecture = Architecture::kLlama;
      r.learned_positions = false;
      r.assumptions.push_back(
          fmt::format("ffn_hidden {} = {:.2f} x hidden, a gated FFN's width (a GELU FFN's is 4 "
                      "x hidden): {}",
                      r.ffn, static_cast<double>(r.ffn) / static_cast<double>(r.hidden), kLlamaBlock));
    }
  } else if (r.moe.empty()) {
    r.ffn = 4 * r.hidden;
    r.assumptions.push_back("ffn_hidden not given: 4 x hidden");
  }
  // model.dropout: a probability (0: none) or a yes/no flag; the family's default otherwise
  // (GPT on, Llama off).
  if (const json* d = f.raw("dropout"); d && d->is_number()) {
    const double p = d->get<double>();
    if (!std::isfinite(p) || p < 0 || p >= 1) {
      f.diag().add(f.path_of("dropout"),
                   fmt::format("expected a probability in [0, 1) or true/false, got {}", reader::describe(*d)));
    } else {
      r.dropout = p > 0;
      r.assumptions.push_back(fmt::format("dropout {}: {}", p, p > 0 ? "on" : "off (no dropout kernels or masks)"));
    }
  } else if (auto on = flag(f, "dropout", r)) {
    r.dropout = *on;
  }
  if (auto pos = text(f, "positional")) {
    const std::string p = lower(*pos);
    r.learned_positions = contains(p, "learned") || contains(p, "absolute");
    if (!r.learned_positions) {
      r.assumptions.push_back(fmt::format(
          "positional {}: no position parameters (stepcast's parameter-free \"rope\" setting)", quote(*pos)));
    }
  }
  preset_rule(name_low, r);
  f.finish(&r.ignored_keys);
}

void read_hardware(ObjectReader& f, Record& r) {
  if (auto text = f.string("interconnect")) r.interconnect = *text;
  auto gpu = f.required_string("gpu");
  r.gpu = gpu.value_or("");
  r.gpus = positive(f, "gpus_total", false, r).value_or(0);  // 0: not stated (read_record derives it)
  const auto gpn = positive(f, "gpus_per_node", false, r);
  r.gpus_per_node = gpn.value_or(8);
  r.gpus_per_node_stated = gpn.has_value();
  f.finish(&r.ignored_keys);
}

// What a layout reads before the measured section is known (recompute's default depends
// on the record's FLOP accounting).
struct LayoutText {
  std::optional<std::string> recompute;
  std::optional<std::int64_t> grad_accum;
  std::optional<std::int64_t> global_batch_tokens;  // layout.global_batch_tokens: the batch in tokens
};

LayoutText read_layout(ObjectReader& f, Record& r) {
  LayoutText t;
  f.ignore({"techniques", "system"});
  r.tp = degree(f, "tp", r);
  r.pp = degree(f, "pp", r);
  r.dp = positive(f, "dp", false, r);
  r.cp = positive(f, "cp", false, r).value_or(1);
  r.ep = positive(f, "ep", false, r).value_or(1);
  r.etp = positive(f, "etp", false, r).value_or(0);
  r.global_batch = positive(f, "global_batch", false, r).value_or(0);  // 0: not stated (read_record)
  t.global_batch_tokens = positive(f, "global_batch_tokens", false, r);
  t.grad_accum = positive(f, "grad_accum", false, r);
  if (const json* pl = f.raw("pipeline_layout"); pl && !pl->is_null()) r.pipeline_layout = *pl;
  if (auto mb = positive(f, "microbatch", false, r)) {
    r.microbatch = *mb;
  } else {
    r.microbatch_assumption = static_cast<int>(r.assumptions.size());
    r.assumptions.push_back("microbatch not stated: 1");  // microbatch_rule may derive it
  }
  r.microbatch_group = positive(f, "microbatch_group_size_per_vp_stage", false, r).value_or(0);
  std::optional<std::int64_t> v = positive(f, "virtual_stages", false, r);
  if (!v) {
    // The chunk count in the schedule's description: "interleaved, 5 virtual stages", "VP=4",
    // "vp 4", "4 model chunks".
    if (const json* st = f.raw("schedule"); st && st->is_string() && st->get<std::string>().size() <= 200) {
      static const std::regex kCount(
          R"((\d{1,3})\s*(virtual|model chunks|chunks)|\b(vp|vpp|virtual_stages|virtual stages|virtual pipeline( stages| size)?)\s*[=:]?\s*(\d{1,3})\b)");
      std::smatch mt;
      const std::string low = lower(st->get<std::string>());
      if (std::regex_search(low, mt, kCount)) {
        const std::int64_t n = std::stoll(mt[1].matched ? mt[1].str() : mt[5].str());
        if (n >= 1 && n <= 1000) {
          v = n;
          r.assumptions.push_back(
              fmt::format("virtual_stages not stated, schedule {}: {}", quote(st->get<std::string>()), n));
        }
      }
    }
  }
  const bool chunks = v && *v >= 2;
  // Megatron's interleaved 1F1B over the stated chunks, with the assumption that chose it.
  auto interleave = [&](std::string why) {
    r.schedule = "interleaved";
    r.virtual_stages = *v;
    if (!why.empty()) r.assumptions.push_back(fmt::format("{}: Megatron's interleaved 1F1B", why));
  };
  if (auto s = text(f, "schedule")) {
    const std::string low = lower(*s);
    if (r.pp == 1) {
      // One stage: nothing to schedule.
    } else if (contains(low, "interleaved")) {
      if (chunks) {
        interleave("");
      } else {
        r.assumptions.push_back(fmt::format("schedule {} stated without a chunk count: plain 1F1B", quote(*s)));
      }
    } else if (contains(low, "gpipe")) {
      r.schedule = "gpipe";
    } else if (contains(low, "1f1b") || contains(low, "pipedream") || contains(low, "pipeline") ||
               contains(low, "virtual")) {
      // Megatron's 1F1B over virtual stages is its interleaved schedule.
      if (chunks) interleave(fmt::format("schedule {} with virtual_stages {}", quote(*s), *v));
      else mapped(r, "schedule", *s, "1f1b");
    } else if (chunks) {
      interleave(fmt::format("schedule {} not recognised; virtual_stages {}", quote(*s), *v));
    } else {
      r.assumptions.push_back(fmt::format("schedule {} not recognised: 1F1B", quote(*s)));
    }
  } else if (r.pp > 1 && chunks) {
    interleave(fmt::format("schedule not stated, virtual_stages {}", *v));
  } else if (r.pp > 1) {
    r.assumptions.push_back("schedule not stated: 1F1B");
  }
  if (const json* rc = f.raw("recompute"); rc && rc->is_boolean()) {
    // true: activation checkpointing on, Megatron's --checkpoint-activations (every layer); false: off.
    t.recompute = rc->get<bool>() ? "full" : "none";
    r.assumptions.push_back(fmt::format("recompute {}: {}", rc->get<bool>() ? "true" : "false", *t.recompute));
  } else {
    t.recompute = text(f, "recompute");
  }
  if (auto d = text(f, "moe_dispatcher")) r.moe_dispatcher_text = *d;
  if (auto o = flag(f, "moe_a2a_overlap", r)) {
    r.moe_a2a_overlap = *o;
    r.moe_a2a_overlap_stated = true;
  }
  std::optional<std::string> zero_text;
  if (const json* zv = f.raw("zero_fsdp");
      zv && zv->is_number_integer() && zv->get<std::int64_t>() >= 0 && zv->get<std::int64_t>() <= 3) {
    zero_text = fmt::format("zero-{}", zv->get<std::int64_t>());  // a stage number: ZeRO that stage
  } else {
    zero_text = text(f, "zero_fsdp");
  }
  if (auto z = zero_text) {
    const std::string low = lower(*z);
    const int stage = zero_stage_in(low);
    // HSDP (torchtitan's name), HYBRID_SHARD (PyTorch FSDP's): sharded inside a group, replicated across.
    const bool hybrid = contains(low, "hsdp") || contains(low, "hybrid_shard") || contains(low, "hybrid shard") ||
                        contains(low, "hybrid-shard");
    if (stage == 3 || contains(low, "full_shard") || hybrid) {
      r.zero = 3;  // PyTorch FSDP's FULL_SHARD; HYBRID_SHARD shards within a node and replicates across
      if (hybrid) {
        r.assumptions.push_back(
            "zero_fsdp HYBRID_SHARD: priced as FULL_SHARD over the whole data-parallel group (stepcast has no "
            "hybrid sharding group; the real all-gathers stay inside a node)");
      }
    } else if (stage == 2 || contains(low, "shard_grad_op")) {
      r.zero = 2;
    } else if (stage == 1 || contains(low, "distributed optimizer")) {
      r.zero = 1;
    } else if (stage == 0) {
      r.zero = 0;
    } else if (starts_with(low, "no") || contains(low, "fsdp=0") || contains(low, "ddp") || contains(low, "no_shard")) {
      r.zero = 0;  // "no FSDP (FSDP=0 in table: DDP)", "none", "DDP"
    } else if (contains(low, "fsdp") || contains(low, "fully sharded")) {
      r.zero = 3;
    } else if (contains(low, "shard")) {
      r.zero = 1;  // Megatron's distributed optimizer: optimizer state sharded, parameters gathered once a step
    } else {
      r.assumptions.push_back(fmt::format("zero_fsdp {} not recognised: ZeRO 0", quote(*z)));
    }
    const std::string canon = fmt::format("zero-{}", r.zero);
    if (low != canon) r.assumptions.push_back(fmt::format("zero_fsdp {}: ZeRO {}", quote(*z), r.zero));
  } else {
    r.assumptions.push_back("ZeRO not stated: 0 (replicated optimizer, as Megatron's DDP)");
  }
  const std::string gpu = lower(r.gpu);
  const bool hopper_or_later =
      contains(gpu, "h100") || contains(gpu, "h800") || contains(gpu, "h200") || contains(gpu, "b200");
  if (auto sp = flag(f, "sequence_parallel", r)) {
    r.sequence_parallel = *sp;
  } else if (r.tp > 1) {
    r.sequence_parallel = hopper_or_later;
    r.assumptions.push_back(hopper_or_later ? "sequence_parallel not stated: on (Hopper and later: Megatron-Core "
                                              "stacks run it with tensor parallelism)"
                                            : "sequence_parallel not stated: off");
  }
  if (auto p = text(f, "precision")) {
    const std::string low = lower(*p);
    // FP8 training keeps 16-bit master weights and non-GEMM work ("BF16 with FP8 GEMMs"): a
    // description naming FP8, not to say it is off, is FP8. FP4 (NVFP4, MXFP4) has no price
    // of its own: FP8's, which errs slow.
    const bool fp8_off = contains(low, "no fp8") || contains(low, "without fp8") || contains(low, "fp8 off") ||
                         contains(low, "fp8 disabled") || contains(low, "not fp8");
    const bool fp4 = contains(low, "fp4");
    if (fp4) {
      r.precision = "fp8";
      r.assumptions.push_back(
          fmt::format("precision {}: FP4 GEMMs are not modelled, priced as FP8 (errs slow)", quote(*p)));
    } else if ((contains(low, "fp8") || contains(low, "float8")) && !fp8_off) {
      r.precision = "fp8";  // float8: torchao's name
    } else if (contains(low, "bf16") || contains(low, "bfloat16")) {
      r.precision = "bf16";
    } else if (contains(low, "fp16") || contains(low, "16-bit") || contains(low, "float16")) {
      r.precision = "fp16";
    } else {
      r.assumptions.push_back(fmt::format("precision {} not recognised: bf16", quote(*p)));
    }
    if (!fp4) mapped(r, "precision", *p, r.precision);
    // FP4 is priced as FP8's default recipe (its assumption above says FP4 is not modelled).
    if (r.precision == "fp8" && !fp4) fp8_recipe_rule(r, *p, low);
  } else {
    r.assumptions.push_back("precision not stated: bf16");
  }
  if (auto fa = flag(f, "flash_attention", r)) {
    r.flash_attention = *fa;
  } else {
    r.flash_attention = hopper_or_later;
    r.assumptions.push_back(
        r.flash_attention
            ? "FlashAttention not stated: on (Hopper and later: every training stack runs fused attention)"
            : "FlashAttention not stated: off (fused softmax with the s x s scores in memory)");
  }
  f.finish(&r.ignored_keys);
  return t;
}

void read_measured(ObjectReader& f, Record& r) {
  f.ignore({"pct_of_peak", "aggregate_pflops", "training_time_days_300B_tokens"});
  r.tflops = measurement(f, "tflops_per_gpu", r);
  r.iteration_s = measurement(f, "iteration_time_s", r);
  r.samples_per_s = measurement(f, "samples_per_s", r);
  r.tokens_per_s = measurement(f, "tokens_per_s", r);
  r.tokens_per_s_per_gpu = measurement(f, "tokens_per_s_per_gpu", r);
  r.peak_memory_gib = measurement(f, "peak_memory_gib", r);
  r.mfu = measurement(f, "mfu", r);
  if (r.mfu > 100) {
    f.diag().add(f.path_of("mfu"),
                 fmt::format("expected a fraction (0 to 1) or a percentage (up to 100), got {}", r.mfu));
    r.mfu = 0;
  } else if (r.mfu > 1) {
    r.assumptions.push_back(fmt::format("mfu {}: {} (a percentage)", r.mfu, r.mfu / 100));
    r.mfu /= 100;
  }
  r.model_tflops = measurement(f, "model_tflops_per_gpu", r);
  // Other names of the same quantities: read as the names above, printed.
  for (const auto& [alias, name, out] :
       {std::tuple{"step_time_s", "iteration_time_s", &r.iteration_s},
        std::tuple{"tokens_per_sec_per_gpu", "tokens_per_s_per_gpu", &r.tokens_per_s_per_gpu},
        std::tuple{"tokens_per_sec", "tokens_per_s", &r.tokens_per_s},
        std::tuple{"samples_per_sec", "samples_per_s", &r.samples_per_s}}) {
    if (const double x = measurement(f, alias, r); x > 0 && *out <= 0) {
      *out = x;
      r.assumptions.push_back(fmt::format("measured.{}: read as {}", alias, name));
    }
  }
  const bool rate = r.tokens_per_s_per_gpu > 0 || r.tokens_per_s > 0 || r.samples_per_s > 0;
  if (r.model_tflops > 0 && r.tflops <= 0 && rate) {
    r.assumptions.push_back(
        fmt::format("model_tflops_per_gpu ({}) is under the source's own FLOP accounting, not reproduced here: "
                    "throughput compared as tokens/s",
                    r.model_tflops));
  }
  const auto acc = text(f, "flop_accounting");
  const std::string low = lower(clip(acc.value_or("")));
  if (contains(low, "72*b") || contains(low, "eq. 7") || contains(low, "eq7")) {
    r.accounting = Accounting::kKorthikantiEq7;
    r.accounting_stated = true;
  } else if (contains(low, "96*b") || contains(low, "eq. 3") || contains(low, "eq3")) {
    r.accounting = Accounting::kNarayananEq3;
    r.accounting_stated = true;
  } else if (contains(low, "palm") || contains(low, "12*l*h*s") || contains(low, "12lhs") ||
             contains(low, "12*l*h*q*t") || contains(low, "12lhqt")) {
    r.accounting = Accounting::kPalm;
    r.accounting_stated = true;
  } else if (std::regex_search(low, std::regex(R"((^|[^0-9.])6\s*[*x]?\s*(n|p|nd|pd|params|parameters)\b)"))) {
    r.accounting = Accounting::kSixN;
    r.accounting_stated = true;
  } else if (r.tflops > 0) {
    r.assumptions.push_back(fmt::format("FLOP accounting {}: Narayanan eq. 3 (96 B s l h^2 ...)",
                                        acc ? "not recognised" : "not stated"));
  }
  f.finish(&r.ignored_keys);
}

// The scale-out NICs of a record's nodes (docs/validation.md "How a record becomes a
// scenario"), where its interconnect description states them: "8x 200 Gb/s HDR",
// "4x Omni-Path 100 Gb/s links", "8 x 400 Gbps", "8x HDR", "200 Gb/s x 8", "eight 200G NICs
// per server", "400 Gb/s per GPU".
struct Nics {
  int per_node = 0;
  double gbps = 0;
};

std::optional<Nics> nics_of(const std::string& description, std::int64_t gpus_per_node) {
  const std::string text = clip(description);
  std::smatch m;
  // A link speed's unit: Gb/s, Gbs, Gbps, Gbit/s (not "GB": bytes).
  static const std::string kUnit = R"(\s*G(?:b/?s|bps|bit/?s)\b)";
  static const std::string kSpeed = R"((\d{1,6}(?:\.\d{1,3})?))";
  if (std::regex_search(
          text, m, std::regex(R"(\b(\d{1,4})\s*x\s*(?:[A-Za-z][\w-]*\s+){0,2})" + kSpeed + kUnit, std::regex::icase))) {
    return Nics{std::stoi(m[1].str()), std::stod(m[2].str())};
  }
  // InfiniBand generations by name (IBTA 4x link rates): "8x HDR", "4 x NDR InfiniBand".
  static const std::pair<const char*, double> kInfiniBand[] = {{"edr", 100}, {"hdr", 200}, {"ndr", 400}, {"xdr", 800}};
  if (std::regex_search(
          text, m,
          std::regex(R"(\b(\d{1,4})\s*x\s*(?:[A-Za-z][\w-]*\s+){0,2}(EDR|HDR|NDR|XDR)\b)", std::regex::icase))) {
    const std::string gen = lower(m[2].str());
    for (const auto& [name, gbps] : kInfiniBand) {
      if (gen == name) return Nics{std::stoi(m[1].str()), gbps};
    }
  }
  // The speed first: "200 Gb/s x 8", "200Gbps x8".
  if (std::regex_search(text, m, std::regex(R"(\b)" + kSpeed + kUnit + R"(\s*x\s*(\d{1,4})\b)", std::regex::icase))) {
    return Nics{std::stoi(m[2].str()), std::stod(m[1].str())};
  }
  static const std::pair<const char*, int> kWords[] = {{"one", 1}, {"two", 2}, {"four", 4}, {"eight", 8}, {"sixteen", 16}};
  if (std::regex_search(text, m, std::regex(R"(\b(one|two|four|eight|sixteen)\s+(\d{1,6})\s*G\b)", std::regex::icase))) {
    const std::string word = lower(m[1].str());
    for (const auto& [name, n] : kWords) {
      if (word == name) return Nics{n, std::stod(m[2].str())};
    }
  }
  if (std::regex_search(text, m, std::regex(R"(\b)" + kSpeed + kUnit + R"(\s+per\s+GPU)", std::regex::icase))) {
    return Nics{static_cast<int>(gpus_per_node), std::stod(m[1].str())};
  }
  return std::nullopt;
}

// The software stack of a record (docs/validation.md "Software stack"): read from the
// source title and the layout's framework text (zero_fsdp, techniques, system, schedule).
//   "fsdp2" or "torchtitan": fsdp2-compile if "compile" is named (fsdp2-compile-loss for a
//   torchtitan record dated 2025 or later, which compiles the loss too), else fsdp2-eager;
//   AsyncTP named with tp > 1 and sequence parallelism: the TP communication overlap;
//   MosaicML's Composer or LLM Foundry: llm-foundry;
//   "deepspeed" with ZeRO-3: deepspeed-zero (DeepSpeed's own engine shards the model), or
//   deepspeed-zero-2021 when the record's id or title dates it 2021 or earlier (the first
//   20xx in them), with 16-bit gradients;
//   PyTorch FSDP (FSDP1: "FSDP", FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD) with ZeRO 2 or 3 and no
//   Megatron or NeMo named: fsdp2-eager, the nearest profile;
//   anything else (Megatron-LM, Megatron-Bridge, NeMo, Megatron-DeepSpeed): megatron-core.
// The member `k` of `o` when `o` is an object that has it, else nullptr.
const json* field(const json& o, const char* k) { return o.is_object() && o.contains(k) ? &o.at(k) : nullptr; }

// The record's source title ("" when it has none).
std::string source_title(const json& rec) {
  const json* src = field(rec, "source");
  const json* title = src ? field(*src, "title") : nullptr;
  return title && title->is_string() ? title->get<std::string>() : std::string();
}

// The year that dates a record: the first 20xx in its id or source title, standing alone.
std::optional<int> record_year(const json& rec) {
  const std::string ids =
      clip((rec.contains("id") && rec["id"].is_string() ? rec["id"].get<std::string>() : "") + " " + source_title(rec));
  std::smatch y;
  if (!std::regex_search(ids, y, std::regex(R"((?:^|[^0-9])(20[0-9]{2})(?:[^0-9]|$))"))) return std::nullopt;
  return std::stoi(y[1].str());
}

// PyTorch FSDP (FSDP1) named by itself or by one of its sharding strategies.
bool names_pytorch_fsdp(const std::string& low) {
  return contains(low, "fsdp") || contains(low, "full_shard") || contains(low, "shard_grad_op") ||
         contains(low, "hybrid_shard");
}

void stack_rule(const json& rec, Record& r) {
  std::string text = " " + source_title(rec);
  auto add = [&](const json* v) {
    if (v != nullptr && v->is_string()) text += " " + v->get<std::string>();
  };
  if (const json* lay = field(rec, "layout")) {
    for (const char* k : {"zero_fsdp", "techniques", "system", "schedule"}) add(field(*lay, k));
  }
  const std::string low = lower(text);
  if (contains(low, "fsdp2") || contains(low, "torchtitan")) {
    // torchtitan compiles its loss with the model since 2025 (its December 2024 train.py left
    // the loss eager): a compiled torchtitan record dated 2025 or later runs fsdp2-compile-loss.
    const std::optional<int> year = record_year(rec);
    const bool compiled = contains(low, "compile");
    const bool loss_compiled = compiled && contains(low, "torchtitan") && year && *year >= 2025;
    r.stack = loss_compiled ? "fsdp2-compile-loss" : compiled ? "fsdp2-compile" : "fsdp2-eager";
    r.assumptions.push_back(
        loss_compiled ? fmt::format("stack: PyTorch FSDP2 (torch.compile named, a record of {}: torchtitan compiles "
                                    "the loss with the blocks since 2025): fsdp2-compile-loss",
                                    *year)
                      : fmt::format("stack: PyTorch FSDP2 ({}): {}",
                                    compiled ? "torch.compile named" : "torch.compile not named", r.stack));
    // SDPA's backend: the stack's flash backend unless the record names cuDNN attention
    // (newer PyTorch prefers it on Hopper).
    if (contains(low, "cudnn")) {
      r.attention_kernel = "sdpa-cudnn";
      r.assumptions.push_back("attention: SDPA's cuDNN backend named: sdpa-cudnn");
    }
    // torchtitan's AsyncTP: PyTorch's micro-pipelined tensor parallelism, which splits each
    // sequence-parallel all-gather and reduce-scatter into per-rank pieces that run beside
    // the pieces of its GEMM (torch/distributed/_symmetric_memory fused_all_gather_matmul,
    // fused_matmul_reduce_scatter): priced as the TP communication overlap.
    if ((contains(low, "asynctp") || contains(low, "async tp") || contains(low, "async-tp")) && r.tp > 1 &&
        r.sequence_parallel) {
      r.tp_comm_overlap = true;
      r.assumptions.push_back(
          "AsyncTP named: TP communication overlap (tp_comm_overlap; PyTorch's micro-pipelined all-gather and "
          "reduce-scatter beside the GEMM's pieces)");
    }
  } else if (contains(low, "llm-foundry") || contains(low, "llm foundry") || contains(low, "llmfoundry") ||
             contains(low, "composer") || contains(low, "mosaicml")) {
    r.stack = "llm-foundry";
    r.assumptions.push_back(
        "stack: MosaicML's Composer / LLM Foundry named: llm-foundry (eager PyTorch, PyTorch FSDP per block, a fused "
        "Wqkv, flash-attn's fused cross entropy)");
  } else if (contains(low, "deepspeed") && r.zero == 3) {
    // The DeepSpeed of the record's year: the first 20xx in its id or source title.
    const std::optional<int> year = record_year(rec);
    const bool v2021 = year && *year <= 2021;
    r.stack = v2021 ? "deepspeed-zero-2021" : "deepspeed-zero";
    r.assumptions.push_back(
        v2021 ? fmt::format("stack: DeepSpeed ZeRO-3 without Megatron model parallelism, of the record's year ({}): "
                            "deepspeed-zero-2021 (the stage-3 coordinator that synchronised the device at each "
                            "module's fetch)",
                            *year)
              : std::string("stack: DeepSpeed ZeRO-3 without Megatron model parallelism: deepspeed-zero"));
    // DeepSpeed reduces param.grad, in the model's 16-bit type (no fp32 gradient reduction by
    // default).
    r.grad_dtype = "bf16";
    r.assumptions.push_back("gradients: DeepSpeed ZeRO-3 reduce-scatters the 16-bit param.grad (2 bytes)");
    if (v2021) {
      // DeepSpeed 2021's overlap_comm default (zero/constants.py) is false, and stage3.py then
      // reduces on the current stream: the compute waits for each reduce-scatter.
      r.overlap_grad_reduce = false;
      r.assumptions.push_back(
          "overlap_comm not stated: DeepSpeed's 2021 default, false (ZERO_OPTIMIZATION_OVERLAP_COMM_DEFAULT), so "
          "stage 3 reduces on the compute stream: overlap_grad_reduce false");
    }
  } else if (r.zero <= 1 && (contains(low, "deepspeed pipeline engine") || contains(low, "bf16optimizer") ||
                             contains(low, "megatron-deepspeed"))) {
    r.stack = "megatron-deepspeed";
    r.assumptions.push_back(
        "stack: Megatron-DeepSpeed on DeepSpeed's pipeline engine (named: its pipeline engine, BF16Optimizer or "
        "Megatron-DeepSpeed, with ZeRO 0 or 1): megatron-deepspeed (the fp32 gradients all-reduced after the last "
        "microbatch, the whole fp32 master copy kept)");
  } else if (r.zero >= 2 && !contains(low, "megatron") && !contains(low, "nemo") && names_pytorch_fsdp(low)) {
    r.stack = "fsdp2-eager";
    r.assumptions.push_back(
        "stack: PyTorch FSDP named (not FSDP2, not Composer): fsdp2-eager, the nearest profile (eager PyTorch, one "
        "all-gather per wrapped block, one block ahead)");
  } else {
    r.stack = "megatron-core";  // the common assumption (common_assumptions)
  }
}

// layout.moe_dispatcher: Megatron-Core's token dispatcher as the record names it. HybridEP
// (the flex dispatcher's "hybridep" backend) has no sourced cost here and is priced as NCCL's
// all-to-all, which the printed assumption says (docs/validation.md).
void moe_dispatcher_rule(Record& r) {
  const std::string& t = r.moe_dispatcher_text;
  if (t.empty()) {
    r.assumptions.push_back("moe_dispatcher not stated: NCCL's all-to-all (Megatron-Core's alltoall dispatcher)");
    return;
  }
  const std::string low = lower(t);
  if (contains(low, "hybridep") || contains(low, "hybrid-ep") || contains(low, "hybrid ep")) {
    r.moe_dispatcher = "alltoall";
    r.assumptions.push_back(
        fmt::format("moe_dispatcher {}: HybridEP is not modelled, priced as NCCL's all-to-all", quote(t)));
    return;
  }
  if (contains(low, "deepep")) r.moe_dispatcher = "deepep";
  else if (contains(low, "allgather") || contains(low, "all-gather")) r.moe_dispatcher = "allgather";
  else if (contains(low, "alltoall") || contains(low, "all-to-all")) r.moe_dispatcher = "alltoall";
  else {
    r.assumptions.push_back(fmt::format("moe_dispatcher {} not recognised: NCCL's all-to-all", quote(t)));
    return;
  }
  mapped(r, "moe_dispatcher", t, r.moe_dispatcher);
}

// The mixture-of-experts description of a record (docs/validation.md "How a record becomes
// a scenario"): "128 routed experts", "top-8", "expert intermediate 768" (or "expert FFN
// 768"), "no shared expert" / "2 shared experts" ("shared expert intermediate 1408"),
// "first 3 layers dense" / "3 dense layers" / "first layer dense", or the same as
// Megatron-Core's and Hugging Face's configuration names.
void moe_rule(Record& r) {
  if (r.moe.empty()) return;
  const std::string d = lower(clip(r.moe));
  std::smatch m;
  auto number = [&](const char* pattern) -> std::int64_t {
    if (!std::regex_search(d, m, std::regex(pattern))) return 0;
    const std::string digits = m[1].str();
    return digits.size() > 9 ? 0 : std::stoll(digits);
  };
  // The first pattern that matches; the later ones read the configuration names of Megatron-Core
  // (num_experts, moe_router_topk, moe_ffn_hidden_size, moe_shared_expert_intermediate_size) and
  // Hugging Face (n_routed_experts, num_experts_per_tok, moe_intermediate_size,
  // n_shared_experts, first_k_dense_replace), as a record may quote them.
  auto first = [&](std::initializer_list<const char*> patterns) -> std::int64_t {
    for (const char* p : patterns)
      if (const std::int64_t n = number(p); n > 0) return n;
    return 0;
  };
  r.moe_experts = first({R"((\d+)\s+(?:routed\s+)?experts)",
                         R"((?:num_experts|n_routed_experts|num_local_experts|num_moe_experts)\s*[=:]?\s*(\d+))",
                         R"((?:^|[^a-z_])e\s*=\s*(\d+))"});
  r.moe_top_k = first({R"(top[- ]?(\d+))", R"(top[-_ ]?k\s*[=:]?\s*(\d+))",
                       R"((?:moe_router_topk|num_experts_per_tok|experts per token)\s*[=:]?\s*(\d+))",
                       R"((?:^|[^a-z_])k\s*=\s*(\d+))"});
  r.moe_ffn = first({R"(expert\s+(?:intermediate|ffn)(?:\s+(?:hidden\s+)?size)?\s*(?:of\s+)?(\d+))",
                     R"(moe[_ ](?:intermediate|ffn)(?:[_ ](?:hidden[_ ])?size)?\s*[=:]?\s*(\d+))"});
  if (!contains(d, "no shared")) {
    r.moe_shared =
        first({R"((\d+)\s+shared(?:\s+experts?)?)", R"((?:n_shared_experts|num_shared_experts)\s*[=:]?\s*(\d+))"});
    r.moe_shared_ffn = first({R"(shared\s+expert\s+(?:intermediate|ffn)(?:\s+(?:hidden\s+)?size)?\s*(?:of\s+)?(\d+))",
                              R"(moe_shared_expert_intermediate_size\s*[=:]?\s*(\d+))"});
    // Megatron-Core states the shared experts' total width alone: one shared expert of it.
    if (r.moe_shared == 0 && r.moe_shared_ffn > 0) r.moe_shared = 1;
    if (r.moe_shared > 0 && r.moe_shared_ffn == 0) r.moe_shared_ffn = r.moe_ffn;
  }
  r.moe_dense = std::max(
      {number(R"(first\s+(\d+)\s+(?:layers\s+)?dense)"), number(R"((\d+)\s+dense\s+layers)"),
       number(R"(first_k_dense_replace\s*[=:]?\s*(\d+))"),
       std::regex_search(d, std::regex(R"(first\s+layer\s+(?:is\s+)?dense)")) ? std::int64_t{1} : std::int64_t{0}});
  if (r.moe_ffn < 1 && r.moe_dense == 0 && r.ffn > 0 && r.moe_experts >= 1) {
    // Every layer MoE and no expert width stated: each expert is the model's FFN (Mixtral, GShard).
    r.moe_ffn = r.ffn;
    r.assumptions.push_back(
        fmt::format("moe {}: expert FFN width not stated, every layer MoE: ffn_hidden ({})", quote(r.moe), r.ffn));
  }
  std::vector<std::string> missing;
  if (r.moe_experts < 1) missing.push_back("the number of routed experts (\"N routed experts\")");
  if (r.moe_top_k < 1 || r.moe_top_k > r.moe_experts) missing.push_back("experts per token (\"top-K\")");
  if (r.moe_ffn < 1) missing.push_back("the expert FFN width (\"expert intermediate F\")");
  if (!missing.empty()) {
    for (const std::string& x : missing) r.moe_missing += (r.moe_missing.empty() ? "" : ", ") + x;
    r.moe_experts = 0;
    return;
  }
  moe_dispatcher_rule(r);
  // Token dropping: "capacity factor 1.25" (or moe_expert_capacity_factor), padded where the
  // text says pad; "token drop" alone is Megatron-Bridge's apply_moe_token_drop (capacity
  // factor 1.0, padded); "dropless" or nothing: dropless.
  std::string dropping = "dropless (no capacity factor)";
  if (std::regex_search(
          d, m, std::regex(R"((?:capacity[_ ]factor|moe_expert_capacity_factor)\s*(?:of\s+)?[=:]?\s*(\d*\.?\d+))"))) {
    r.moe_capacity_factor = std::stod(m[1].str());
    r.moe_pad_to_capacity = contains(d, "pad");
    dropping = fmt::format("token dropping at capacity factor {:g}{}", r.moe_capacity_factor,
                           r.moe_pad_to_capacity ? ", padded" : " (not padded)");
  } else if ((contains(d, "token drop") || contains(d, "tokendrop")) && !contains(d, "no token drop")) {
    r.moe_capacity_factor = 1.0;
    r.moe_pad_to_capacity = true;
    dropping =
        "token dropping without a stated capacity: capacity factor 1, padded (Megatron-Bridge's "
        "apply_moe_token_drop)";
  }
  if (r.moe_capacity_factor > 0) {
    if (r.moe_dispatcher != "alltoall") {
      // Megatron-Core drops tokens only in its alltoall dispatcher.
      r.assumptions.push_back(
          fmt::format("moe_dispatcher {}: token dropping runs the alltoall dispatcher", r.moe_dispatcher));
      r.moe_dispatcher = "alltoall";
    }
  }
  r.assumptions.push_back(
      fmt::format("moe {}: {} experts, top-{}, expert FFN {}, {} shared{}, {} leading dense "
                  "layers; tokens spread evenly over the experts (no load imbalance), {}",
                  quote(r.moe), r.moe_experts, r.moe_top_k, r.moe_ffn, r.moe_shared,
                  r.moe_shared > 0 ? fmt::format(" (FFN {})", r.moe_shared_ffn) : "", r.moe_dense, dropping));
}

// A record of NVIDIA's Megatron-Bridge performance summary ran the configuration of that
// repository's scripts/performance (docs/validation.md): every recipe sets
// use_distributed_optimizer=True (the table's "FSDP=0" means Megatron-FSDP off, not the
// distributed optimizer off), the performance scripts set grad_reduce_in_fp32=False, and
// they enable TP communication overlap (tp_comm_overlap) where tp > 1.
void bridge_rule(const json& rec, Record& r) {
  const std::string title = lower(source_title(rec));
  const bool bridge = contains(title, "megatron-bridge");
  // NeMo's own performance tables (before Megatron-Bridge) ran NeMo's recipes: their optimizer
  // is the distributed one (nemo/collections/llm/recipes/optim/adam.py
  // distributed_fused_adam_with_cosine_annealing: use_distributed_optimizer=True), and NeMo's
  // scripts/performance set grad_reduce_in_fp32=False for FP8 only (helpers.py
  // set_precision_configs; BF16 keeps the bf16_mixed plugin's fp32 reduction).
  const bool nemo = !bridge && contains(title, "nemo") && r.stack == "megatron-core";
  if (!bridge && !nemo) return;
  std::string applied;
  if (r.zero == 0) {
    r.zero = 1;
    applied += bridge ? "distributed optimizer (ZeRO 1: use_distributed_optimizer=True in every recipe; FSDP=0 is "
                        "Megatron-FSDP off)"
                      : "distributed optimizer (ZeRO 1: use_distributed_optimizer=True in NeMo's recipe optimizer)";
  }
  if (bridge || r.precision == "fp8") {
    r.grad_dtype = "bf16";
    applied += std::string(applied.empty() ? "" : "; ") + "gradients reduced in bf16 (grad_reduce_in_fp32=False)";
  }
  // NeMo's dense recipes pass tp_comm_overlap=True with their userbuffers configurations; its
  // MoE recipes (Mixtral, DeepSeek-V3) leave it off.
  if (r.tp > 1 && r.sequence_parallel && (bridge || r.moe.empty())) {
    r.tp_comm_overlap = true;
    applied += std::string(applied.empty() ? "" : "; ") + "TP communication overlap (tp_comm_overlap)";
  }
  if (!applied.empty()) {
    r.assumptions.push_back(std::string(bridge ? "Megatron-Bridge performance recipe (scripts/performance): "
                                               : "NeMo recipe (its performance scripts): ") +
                            applied);
  }
}

// NVIDIA's DeepSeek-V3 recipe for what a Megatron-Bridge DeepSeek-V3 record does not state
// (Megatron-Bridge scripts/performance/configs/deepseek/deepseek_llm_pretrain.py):
// - every GPU: expert_tensor_parallel_size 1 (workload_base_configs.py);
// - H100: recompute_modules ["mla_up_proj", "mlp"], the DeepEP dispatcher (enable_deepep=True),
//   the all-to-all overlap (set_moe_a2a_overlap_overrides), overlap_grad_reduce False, and with
//   pp x vp = 32 the layout "Et|(tt|)*30mL";
// - B200 and GB200: recompute_modules ["mla_up_proj"], NCCL's all-to-all (enable_deepep=False),
//   the gradient reduction overlapped, stepcast's even split (layout=None).
// Returns whether it set the recomputation (the recompute rule then says nothing more).
bool bridge_deepseek_rule(const json& rec, Record& r, bool recompute_stated) {
  if (!r.deepseek_v3 || !contains(lower(source_title(rec)), "megatron-bridge")) return false;
  const std::string gpu = lower(r.gpu);
  const bool h100 = contains(gpu, "h100");
  const bool blackwell = contains(gpu, "b200");
  if (!h100 && !blackwell) return false;
  std::vector<std::string> applied;
  if (r.etp == 0 && r.tp > 1) {
    r.etp = 1;  // DEEPSEEK_V3_*_PARALLEL_CONFIG: expert_tensor_parallel_size=1
    applied.push_back("expert tensor parallelism 1 (expert_tensor_parallel_size=1)");
  }
  if (!recompute_stated) {
    r.recompute = "selective";
    r.recompute_modules =
        h100 ? std::vector<std::string>{"mla_up_proj", "mlp"} : std::vector<std::string>{"mla_up_proj"};
    applied.push_back(fmt::format("selective recomputation of {}", fmt::join(r.recompute_modules, ", ")));
  }
  if (h100 && r.moe_dispatcher_text.empty() && r.moe_capacity_factor <= 0) {  // token dropping: alltoall
    r.moe_dispatcher = "deepep";
    for (std::string& a : r.assumptions) {
      if (starts_with(a, "moe_dispatcher not stated")) a = "moe_dispatcher not stated: DeepEP (the recipe's)";
    }
    applied.push_back("the DeepEP dispatcher (enable_deepep=True)");
  }
  if (h100 && !r.moe_a2a_overlap_stated && (r.pp == 1 || r.virtual_stages >= 2)) {
    r.moe_a2a_overlap = true;
    applied.push_back("the all-to-all overlap (set_moe_a2a_overlap_overrides)");
  }
  if (h100) {
    r.overlap_grad_reduce = false;
    applied.push_back("the gradient reduction after the backward (overlap_grad_reduce=False)");
    if (r.pipeline_layout.is_null() && r.pp * r.virtual_stages == 32) {
      r.pipeline_layout = "Et|(tt|)*30mL";
      applied.push_back("pipeline layout \"Et|(tt|)*30mL\"");
    }
  }
  if (!applied.empty()) {
    r.assumptions.push_back(fmt::format("Megatron-Bridge DeepSeek-V3 recipe ({}, deepseek_llm_pretrain.py): {}",
                                        h100 ? "H100" : "B200/GB200", fmt::join(applied, "; ")));
  }
  return !recompute_stated;
}

// Megatron-Core's recompute_modules named in a selective recompute's description, as whole
// words in the order written ("selective: moe_act, layernorm"); none: Megatron's default
// selective recomputation (the attention core).
std::vector<std::string> recompute_modules_in(const std::string& low) {
  static const std::array<std::string_view, 7> kModules{"core_attn", "layernorm",      "mlp",        "moe_act",
                                                        "moe",       "shared_experts", "mla_up_proj"};
  std::vector<std::string> out;
  std::string word;
  const auto take = [&] {
    if (std::find(kModules.begin(), kModules.end(), word) != kModules.end() &&
        std::find(out.begin(), out.end(), word) == out.end()) {
      out.push_back(word);
    }
    word.clear();
  };
  for (char ch : low) {
    if ((ch >= 'a' && ch <= 'z') || ch == '_') word += ch;
    else take();
  }
  take();
  return out;
}

// Megatron-Core's recompute_modules named in prose, in Megatron's order: a norm ("RMSNorm",
// "LayerNorm", "layer norm") layernorm, "MLA up-projection(s)" mla_up_proj, "core attention"
// or "attention core" core_attn, the experts' activation ("expert activation", "MoE
// activation") moe_act.
std::vector<std::string> modules_in_prose(const std::string& low) {
  std::vector<std::string> out;
  if (contains(low, "core attention") || contains(low, "attention core")) out.push_back("core_attn");
  if (contains(low, "rmsnorm") || contains(low, "layernorm") || contains(low, "layer norm")) {
    out.push_back("layernorm");
  }
  if (contains(low, "expert activation") || contains(low, "moe activation")) out.push_back("moe_act");
  if (contains(low, "up-proj") || contains(low, "up proj") || contains(low, "up_proj")) out.push_back("mla_up_proj");
  return out;
}

// A record that does not state its microbatch (read_layout said "1"):
// - with grad_accum and global_batch: global_batch / (grad_accum x dp);
// - sharded (ZeRO-3, FSDP) without a pipeline, with global_batch and no grad_accum: one
//   microbatch a step, global_batch / dp. A sharded step gathers every weight again for each
//   microbatch (docs/model-reference.md, Known gaps: "ZeRO-3 repeats the all-gathers every
//   microbatch"), so such runs take their whole per-rank batch at once unless they state an
//   accumulation: torchtitan's local batch size and DeepSpeed's
//   train_micro_batch_size_per_gpu are the per-rank batch, with no accumulation by default.
//   validate lowers it to the largest divisor that fits where it does not (validate.cc);
// - else 1, Megatron's default micro-batch-size.
// Each case rewrites the "microbatch not stated" line in place, so the rules keep their order.
// The record's data-parallel size: stated, else what the loader derives (GPUs / (tp pp cp)).
std::int64_t record_dp(const Record& r) {
  return r.dp ? *r.dp : r.gpus / std::max<std::int64_t>(1, r.tp * r.pp * r.cp);
}

void microbatch_rule(Record& r, std::int64_t dp, const std::optional<std::int64_t>& grad_accum) {
  if (r.microbatch_assumption < 0 || r.global_batch <= 0 || dp <= 0) return;
  std::string& said = r.assumptions[static_cast<std::size_t>(r.microbatch_assumption)];
  if (grad_accum) {
    if (r.global_batch % (*grad_accum * dp) != 0) return;  // read_record names the mismatch
    r.microbatch = r.global_batch / (*grad_accum * dp);
    said = fmt::format("microbatch not stated: global_batch / (grad_accum x dp) = {} / ({} x {}) = {}", r.global_batch,
                       *grad_accum, dp, r.microbatch);
  } else if (r.zero >= 3 && r.pp == 1 && r.global_batch % dp == 0) {
    r.microbatch = r.global_batch / dp;
    r.microbatch_per_step = r.microbatch > 1;
    said = fmt::format(
        "microbatch not stated, ZeRO-3 without a pipeline: one microbatch a step, global_batch / dp = {} / {} = {} "
        "(a sharded step gathers the weights again for every microbatch)",
        r.global_batch, dp, r.microbatch);
  }
}

Record read_record(const json& rec, const std::string& path, Diagnostics& diag) {
  Record r;
  r.id = path;
  if (!rec.is_object()) {
    diag.add(path, "expected an object, got " + reader::describe(rec));
    return r;
  }
  const std::size_t before = diag.size();
  ObjectReader top(rec, path, diag);
  top.ignore({"source", "derived", "notes", "unverified"});
  if (auto id = top.required_string("id")) {
    if (id->empty()) diag.add(top.path_of("id"), "expected a non-empty string");
    else r.id = *id;
  }
  const json* m = section(top, "model");
  const json* h = section(top, "hardware");
  const json* l = section(top, "layout");
  const json* me = section(top, "measured");
  top.finish(&r.ignored_keys);
  if (m) {
    ObjectReader f(*m, top.path_of("model"), diag);
    read_model(f, r);
  }
  if (h) {
    ObjectReader f(*h, top.path_of("hardware"), diag);
    read_hardware(f, r);
  }
  LayoutText lt;
  if (l) {
    ObjectReader f(*l, top.path_of("layout"), diag);
    lt = read_layout(f, r);
  }
  if (me) {
    ObjectReader f(*me, top.path_of("measured"), diag);
    read_measured(f, r);
  }
  if (!r.ignored_keys.empty()) {
    std::vector<std::string> keys;
    for (const std::string& k : r.ignored_keys) {
      keys.push_back(k.rfind(path + ".", 0) == 0 ? k.substr(path.size() + 1) : k);
    }
    r.assumptions.push_back(fmt::format("not read (stepcast has no rule for them): {}", fmt::join(keys, ", ")));
  }
  if (h && r.gpus == 0) {
    // Not stated: the layout's product when it states dp, else the record cannot be placed.
    if (r.dp) {
      r.gpus = r.tp * r.pp * r.cp * *r.dp;
      r.assumptions.push_back(fmt::format("gpus_total not stated: tp x pp x cp x dp = {} x {} x {} x {} = {}", r.tp,
                                          r.pp, r.cp, *r.dp, r.gpus));
    } else {
      diag.add(path + ".hardware.gpus_total", "missing (required): a positive integer (or layout.dp, to derive it)");
    }
  }
  // A run on fewer than 8 GPUs whose node size is not stated ran on part of one node.
  if (!r.gpus_per_node_stated && r.gpus > 0 && r.gpus < 8) {
    r.gpus_per_node = r.gpus;
    r.assumptions.push_back(fmt::format("gpus_per_node not stated, {} GPUs: one node", r.gpus));
  }
  if (diag.size() != before) return r;
  stack_rule(rec, r);
  bridge_rule(rec, r);
  moe_rule(r);

  const bool recipe_recompute = bridge_deepseek_rule(rec, r, lt.recompute.has_value());

  // Recompute last: its default follows the record's FLOP accounting.
  if (recipe_recompute) {
    // The recipe's (bridge_deepseek_rule).
  } else if (lt.recompute) {
    const std::string low = lower(*lt.recompute);
    const bool torchtitan = starts_with(r.stack, "fsdp2");  // fsdp2-eager, fsdp2-compile, fsdp2-compile-loss
    const bool says_none = starts_with(low, "none") || starts_with(low, "no ") || yes_no(low) == false;
    if (starts_with(low, "full")) r.recompute = "full";
    else if (contains(low, "selective")) r.recompute = torchtitan ? "selective_op" : "selective";
    else if (says_none) r.recompute = "none";
    else if (contains(low, "full")) r.recompute = "full";
    // Modules named in prose ("RMSNorm and MLA up-projections", DeepSeek-V3's report):
    // selective recomputation of those.
    else if (!modules_in_prose(low).empty()) r.recompute = "selective";
    // "activation checkpointing", "gradient checkpointing", "yes": every layer's activations
    // recomputed, what those words meant before selective recomputation (Megatron's
    // --checkpoint-activations, DeepSpeed's and PyTorch's checkpoint of each block).
    else if (contains(low, "checkpoint") || contains(low, "recomput") || yes_no(low) == true) r.recompute = "full";
    if (r.recompute == "selective") {
      r.recompute_modules = recompute_modules_in(low);
      if (r.recompute_modules.empty()) r.recompute_modules = modules_in_prose(low);
    }
    // Megatron's recompute_method: "block" recomputes the first recompute_num_layers layers
    // of each pipeline chunk in full; "uniform" every layer, in groups of that many.
    static const std::regex kBlock(R"(method\W{0,3}block\b|^\W*(full\W+)?block\b|\bblock\W{0,3}\d)");
    // The layer count, the first of: "recompute_num_layers 4", "4 layers", "block 4".
    static const std::regex kCounts[] = {std::regex(R"(num_layers\D{0,3}(\d{1,5})\b)"),
                                         std::regex(R"(\b(\d{1,5})\s*layers?\b)"),
                                         std::regex(R"(\bblock\D{0,3}(\d{1,5})\b)")};
    const bool whole_layers = r.recompute != "selective" && r.recompute != "selective_op" && !says_none;
    const bool block = whole_layers && std::regex_search(low, kBlock);
    const bool uniform = whole_layers && contains(low, "uniform");
    std::int64_t count = 0;
    for (const std::regex& re : kCounts) {
      if (std::smatch n; std::regex_search(low, n, re)) {
        count = std::stoll(n[1].str());
        break;
      }
    }
    const bool counted = count > 0;
    if (block || uniform) r.recompute = "full";
    if (block && counted) r.recompute_num_layers = count;
    // "uniform" with groups of several layers, where stepcast expresses it (not beside ZeRO-3
    // or the merged all-to-all step, both read before this).
    const bool grouped = !block && uniform && count > 1 && r.zero < 3 && !r.moe_a2a_overlap;
    if (grouped) {
      r.recompute_uniform = true;
      r.recompute_num_layers = count;
      r.assumptions.push_back(
          fmt::format("recompute {}: full, every layer, in groups of {} layers of each pipeline chunk that keep one "
                      "input each (Megatron-Core recompute_method \"uniform\": plan.recompute_method, "
                      "plan.recompute_num_layers)",
                      quote(*lt.recompute), r.recompute_num_layers));
    } else if (block && counted) {
      r.assumptions.push_back(
          fmt::format("recompute {}: full for the first {} layers of each pipeline chunk, the others keep their "
                      "activations (Megatron-Core recompute_method \"block\": plan.recompute_num_layers)",
                      quote(*lt.recompute), r.recompute_num_layers));
    } else if (block || uniform) {
      r.assumptions.push_back(
          fmt::format("recompute {}: full, every layer ({})", quote(*lt.recompute),
                      block       ? "block without a layer count"
                      : count > 1 ? "Megatron-Core recompute_method \"uniform\"; its groups of several layers are "
                                    "not expressed beside ZeRO-3 or the all-to-all overlap, so memory errs high"
                                  : "Megatron-Core recompute_method \"uniform\", one layer per group"));
    } else if (r.recompute == "none" && !says_none) {
      r.assumptions.push_back(fmt::format("recompute {} not recognised: none", quote(*lt.recompute)));
    } else if (r.recompute == "selective_op") {
      r.assumptions.push_back(fmt::format(
          "recompute {} under FSDP2/torchtitan: selective_op (torchtitan's op-level policy: its configs' "
          "selective_ac_option \"op\")",
          quote(*lt.recompute)));
    } else if (!r.recompute_modules.empty()) {
      r.assumptions.push_back(fmt::format("recompute {}: selective, recompute_modules {}", quote(*lt.recompute),
                                          fmt::join(r.recompute_modules, ", ")));
    } else {
      mapped(r, "recompute", *lt.recompute, r.recompute);
    }
  } else if (r.tflops > 0 && r.accounting_stated && r.accounting == Accounting::kNarayananEq3) {
    r.recompute = "full";
    r.assumptions.push_back(
        "recompute not stated: full (the record's FLOP accounting, Narayanan eq. 3, counts the recomputed "
        "forward)");
  } else {
    r.assumptions.push_back("recompute not stated: none");
  }

  if (r.heads % r.kv_heads != 0) {
    diag.add(path + ".model.kv_heads", fmt::format("{} does not divide heads ({})", r.kv_heads, r.heads));
  }
  if (r.global_batch == 0 && lt.global_batch_tokens && r.seq > 0) {
    if (*lt.global_batch_tokens % r.seq != 0) {
      diag.add(path + ".layout.global_batch_tokens",
               fmt::format("{} is not a whole number of sequences of {} tokens", *lt.global_batch_tokens, r.seq));
    } else {
      r.global_batch = *lt.global_batch_tokens / r.seq;
      r.assumptions.push_back(fmt::format("global_batch_tokens {}: {} sequences of {} tokens", *lt.global_batch_tokens,
                                          r.global_batch, r.seq));
    }
  }
  const std::int64_t dp = record_dp(r);
  microbatch_rule(r, dp, lt.grad_accum);
  if (r.global_batch == 0 && dp > 0) {
    // Not stated: the accumulation the record states, else one microbatch per data-parallel
    // rank when there is no pipeline; a pipeline's fill depends on the microbatch count, so a
    // pipelined record without either is not predicted (build_scenario).
    if (lt.grad_accum) {
      r.global_batch = *lt.grad_accum * r.microbatch * dp;
      r.assumptions.push_back(fmt::format("global_batch not stated: grad_accum x microbatch x dp = {} x {} x {} = {}",
                                          *lt.grad_accum, r.microbatch, dp, r.global_batch));
    } else if (r.pp == 1) {
      r.global_batch = r.microbatch * dp;
      r.assumptions.push_back(fmt::format(
          "global_batch not stated: one microbatch per data-parallel rank, no accumulation (microbatch x dp = {} x {} "
          "= {})",
          r.microbatch, dp, r.global_batch));
    }
  } else if (lt.grad_accum && dp > 0 && *lt.grad_accum * r.microbatch * dp != r.global_batch) {
    diag.add(path + ".layout.grad_accum",
             fmt::format("{} does not match global_batch / (microbatch x dp) = {} / ({} x {})", *lt.grad_accum,
                         r.global_batch, r.microbatch, dp));
  }
  // Megatron pads the vocabulary (its --make-vocab-size-divisible-by, 128, times tp); the
  // PyTorch stacks keep the model's own size.
  const bool megatron = r.stack == "megatron-core" || r.stack == "megatron-deepspeed";
  const std::int64_t pad = megatron ? kVocabPadMultiple * r.tp : 1;
  r.vocab_padded = (r.vocab + pad - 1) / pad * pad;
  if (r.vocab_padded != r.vocab) {
    r.assumptions.push_back(
        fmt::format("vocab {} padded to {} (Megatron: multiple of 128 x tp)", r.vocab, r.vocab_padded));
  }
  return r;
}

// The cluster and GPU presets of a GPU description ("" when there is none).
struct GpuPreset {
  const char* cluster;
  const char* gpu;
  // How a GPU without a preset of its own is priced, printed after `gpu "...": ` ("" for a
  // preset's own GPU).
  const char* rule = "";
  // The export parts (A800, H800): the A100's and H100's compute and memory with NVLink cut
  // to 400 GB/s bidirectional, 200 GB/s per direction (NVIDIA's A800 and H800 SXM product
  // specifications); 0 = the preset's own NVLink.
  double nvlink_GBps = 0;
  bool eight_gpu_nodes = false;  // a GB200: 8-GPU dgx-b200 nodes whatever the tray or rack
};
GpuPreset preset_for(const std::string& description) {
  const std::string g = lower(description);
  if (contains(g, "pcie")) return {"", ""};  // the presets are SXM servers
  // The NVL cards (H100 NVL, H200 NVL) are PCIe boards joined in pairs by NVLink bridges: "NVL"
  // as a word of its own, not NVLink and not a rack's NVL72 or NVL36.
  for (std::size_t at = g.find("nvl"); at != std::string::npos; at = g.find("nvl", at + 1)) {
    const bool word_start = at == 0 || !std::isalnum(static_cast<unsigned char>(g[at - 1]));
    const bool word_end = at + 3 == g.size() || !std::isalnum(static_cast<unsigned char>(g[at + 3]));
    if (word_start && word_end) return {"", ""};
  }
  if (contains(g, "a800")) {
    return {"dgx-a100", "a100-sxm-80gb",
            "an A800, the dgx-a100 preset's GPU with NVLink at 200 GB/s per direction (400 GB/s bidirectional, "
            "NVIDIA's A800 specification",
            200};
  }
  if (contains(g, "h800")) {
    return {"dgx-h100", "h100-sxm",
            "an H800, the dgx-h100 preset's GPU with NVLink at 200 GB/s per direction (400 GB/s bidirectional, "
            "NVIDIA's H800 specification",
            200};
  }
  if (contains(g, "gh200")) {  // before "h200", which it contains
    return {"dgx-h100", "h100-sxm",
            "a GH200 priced as the H100 SXM (the same GH100 GPU at the H100's clocks and ceilings; its HBM as stated, "
            "its Grace CPU and chip-to-chip link not modelled)"};
  }
  if (contains(g, "a100")) return {"dgx-a100", "a100-sxm-80gb"};
  if (contains(g, "h100")) return {"dgx-h100", "h100-sxm"};
  if (contains(g, "h200")) return {"dgx-h200", "h200-sxm"};
  if (contains(g, "gb200")) {  // before "b200", which it contains
    return {"dgx-b200", "b200",
            "a GB200 priced as the B200 on dgx-b200 nodes of 8 GPUs (the same Blackwell GPU; the GB200's higher "
            "power limit and 72-GPU NVLink domain are not modelled: errs slow)",
            0, true};
  }
  if (contains(g, "b200")) return {"dgx-b200", "b200"};
  return {"", ""};
}

}  // namespace

std::vector<Record> read_records(const json& doc, Diagnostics& diag) {
  std::vector<Record> records;
  const json& recs = doc.at("records");
  records.reserve(recs.size());
  std::map<std::string, std::size_t> first;  // id -> the record that has it first
  for (std::size_t i = 0; i < recs.size(); ++i) {
    const std::string path = reader::index("records", i);
    records.push_back(read_record(recs[i], path, diag));
    if (records.back().id == path) continue;  // no id read
    // Ids name the written scenario files: a repeated one would overwrite another's.
    const auto [it, added] = first.emplace(records.back().id, i);
    if (!added) {
      diag.add(path + ".id", fmt::format("{} repeats records[{}].id", quote(records.back().id), it->second));
    }
  }
  return records;
}

ScenarioBuild build_scenario(Record& r) {
  ScenarioBuild out;
  if (r.global_batch == 0) {
    out.reason = fmt::format(
        "global_batch not stated (nor grad_accum) with pp {}: the pipeline's fill depends on the number of "
        "microbatches",
        r.pp);
    return out;
  }
  if (!r.moe.empty() && r.moe_experts == 0) {
    out.reason = fmt::format("mixture-of-experts model (model.moe {}) without {}", quote(r.moe), r.moe_missing);
    return out;
  }
  if (r.ep > 1 && r.moe.empty()) {
    out.reason = fmt::format("expert parallelism (ep {}) without a stated MoE model", r.ep);
    return out;
  }
  const GpuPreset preset = preset_for(r.gpu);
  if (*preset.cluster == '\0') {
    out.reason = fmt::format(
        "no cluster preset for gpu {} (known: SXM A100, H100, H200, B200; A800 and H800 as A100 and H100 with their "
        "NVLink; GH200 as H100; GB200 as B200)",
        quote(r.gpu));
    return out;
  }
  // A GB200 record runs on the B200 preset: the same Blackwell GPU, on 8-GPU dgx-b200 nodes
  // whatever the record's tray or rack size. What the GB200 has more (a higher power limit,
  // a 72-GPU NVLink domain) is not modelled, so the prediction errs slow.
  if (preset.eight_gpu_nodes && r.gpus_per_node != 8 && r.gpus % 8 == 0) r.gpus_per_node = 8;
  if (preset.nvlink_GBps > 0) {
    r.assumptions.push_back(fmt::format("gpu {}: {}; preset {}: {} GB/s)", quote(r.gpu), preset.rule, preset.cluster,
                                        builtin_presets().clusters.at(preset.cluster).intra_bandwidth_GBps));
  } else if (*preset.rule != '\0') {
    r.assumptions.push_back(fmt::format("gpu {}: {}", quote(r.gpu), preset.rule));
  }
  // A record on one node may use part of it (a single-GPU run). Several nodes of fewer than 8
  // GPUs (HGX boards of 4, quad GH200 nodes) are nodes of that many of the preset's GPUs, each
  // with the preset's NVLink bandwidth; more than 8 per node is not predicted.
  const bool part_of_one_node = r.gpus == r.gpus_per_node && r.gpus_per_node >= 1 && r.gpus_per_node < 8;
  const bool small_nodes = !part_of_one_node && r.gpus_per_node >= 1 && r.gpus_per_node < 8;
  if (r.gpus_per_node > 8) {
    out.reason = fmt::format("{} GPUs per node; the {} preset has 8", r.gpus_per_node, preset.cluster);
    return out;
  }
  if (part_of_one_node) {
    r.assumptions.push_back(fmt::format("{} GPU{} of one {} node", r.gpus, r.gpus == 1 ? "" : "s", preset.cluster));
  }
  if (r.gpus % r.gpus_per_node != 0) {
    out.reason = fmt::format("{} GPUs are not whole nodes of {}", r.gpus, r.gpus_per_node);
    return out;
  }
  // A power limit stated in the GPU description ("500 W cap") selects the preset measured at
  // that limit where there is one, named "<preset>-<watts>w" (h100-sxm-500w: its GEMM ceilings
  // were measured at 500 W);
  // another limit keeps the preset's ceilings, measured at its own TDP, and says so.
  std::string gpu_preset = preset.gpu;
  std::smatch m;
  const std::string desc = clip(r.gpu);
  if (std::regex_search(desc, m, std::regex(R"((\d+)\s*W\b)"))) {
    const int watts = std::stoi(m[1].str());
    const GpuSpec& rated = builtin_presets().gpus.at(preset.gpu);
    const std::string capped = fmt::format("{}-{}w", preset.gpu, watts);
    if (builtin_presets().gpus.count(capped) != 0) {
      gpu_preset = capped;
      r.assumptions.push_back(
          fmt::format("gpu {}: a {} W power limit: preset {} (its GEMM ceilings measured at {} W; "
                      "{} is rated {} W)",
                      quote(r.gpu), watts, capped, watts, preset.gpu, rated.tdp_W));
    } else if (rated.tdp_W > 0 && watts < rated.tdp_W) {
      r.assumptions.push_back(
          fmt::format("gpu {}: a {} W power limit, no preset measured at it: {}'s ceilings, "
                      "measured at its {} W (optimistic)",
                      quote(r.gpu), watts, preset.gpu, rated.tdp_W));
    }
  }
  // Capacity ("96GB") and bandwidth ("2.4 TB/s") stated in the GPU description replace the
  // preset's figures; everything else about the GPU is the preset's.
  const GpuSpec& base = builtin_presets().gpus.at(gpu_preset);
  ordered_json gpu = {{"preset", gpu_preset}};
  if (std::regex_search(desc, m, std::regex(R"((\d+)\s*GB(?![/a-z]))", std::regex::icase))) {
    const double gib = std::stod(m[1].str());
    if (gib != base.hbm_GiB) {
      gpu["hbm_GiB"] = gib;
      r.assumptions.push_back(
          fmt::format("gpu {}: {} GiB HBM (preset {}: {} GiB)", quote(r.gpu), gib, gpu_preset, base.hbm_GiB));
    }
  } else if (std::string(preset.gpu) == "a100-sxm-80gb") {
    r.assumptions.push_back(fmt::format("gpu {} without a capacity: A100-SXM4-80GB", quote(r.gpu)));
  }
  if (std::regex_search(desc, m, std::regex(R"((\d+(?:\.\d+)?)\s*TB/s)", std::regex::icase))) {
    const double gbps = std::stod(m[1].str()) * 1000;
    if (gbps != base.hbm_bandwidth_GBps) {
      gpu["hbm_bandwidth_GBps"] = gbps;
      r.assumptions.push_back(fmt::format("gpu {}: HBM {} GB/s (preset {}: {} GB/s)", quote(r.gpu), gbps, gpu_preset,
                                          base.hbm_bandwidth_GBps));
    }
  }

  const bool llama = r.architecture == Architecture::kLlama;
  ordered_json model = {{"name", r.id},
                        {"family", llama ? "llama" : "gpt"},
                        {"num_layers", r.layers},
                        {"hidden_size", r.hidden},
                        {"num_attention_heads", r.heads},
                        {"num_kv_heads", r.kv_heads}};
  if (r.head_dim) model["head_dim"] = *r.head_dim;
  model["ffn_hidden_size"] = r.ffn > 0 ? r.ffn : r.moe_ffn;  // an all-MoE record need not state a dense width
  model["ffn_activation"] = llama ? "swiglu" : "gelu";
  model["ffn_matrices"] = llama ? 3 : 2;
  model["norm"] = llama ? "rmsnorm" : "layernorm";
  model["tied_embeddings"] = !llama;
  model["linear_bias"] = !llama || r.linear_bias_override;
  if (r.qk_norm) model["qk_norm"] = true;
  model["dropout"] = r.dropout.value_or(!llama);
  model["vocab_size"] = r.vocab_padded;
  model["position_embedding"] = r.learned_positions ? "learned" : "rope";
  model["max_seq_len"] = r.seq;
  model["train_seq_len"] = r.seq;
  if (r.sliding_window > 0) {
    model["sliding_window"] = r.sliding_window;
    model["window_attn_skip_freq"] = r.window_attn_skip_freq;
  }
  if (!r.mla.empty()) {
    model["attention"] = "mla";
    ordered_json mla = ordered_json::object();
    for (const auto& [key, value] : r.mla) mla[key] = value;
    model["mla"] = std::move(mla);
  }
  if (r.mtp_modules > 0) model["mtp_modules"] = r.mtp_modules;
  if (r.moe_experts > 0) {
    model["moe"] = {{"num_experts", r.moe_experts},
                    {"top_k", r.moe_top_k},
                    {"expert_ffn_hidden_size", r.moe_ffn},
                    {"num_shared_experts", r.moe_shared},
                    {"shared_expert_ffn_hidden_size", r.moe_shared_ffn},
                    {"num_dense_layers", r.moe_dense}};
    if (r.expert_groups > 0) model["moe"]["expert_groups"] = r.expert_groups;
    if (r.limited_groups > 0) model["moe"]["limited_groups"] = r.limited_groups;
    if (r.moe_capacity_factor > 0) {
      model["moe"]["capacity_factor"] = r.moe_capacity_factor;
      if (r.moe_pad_to_capacity) model["moe"]["pad_to_capacity"] = true;
    }
  }

  ordered_json sc;
  sc["format"] = 1;
  sc["name"] = r.id;
  sc["model"] = std::move(model);
  sc["cluster"] = {{"preset", preset.cluster}, {"nodes", r.gpus / r.gpus_per_node}};
  if (part_of_one_node || small_nodes) sc["cluster"]["gpus_per_node"] = r.gpus_per_node;
  if (gpu.size() > 1 || gpu_preset != preset.gpu) sc["cluster"]["gpu"] = std::move(gpu);
  if (preset.nvlink_GBps > 0) sc["cluster"]["intra_node"] = {{"bandwidth_GBps", preset.nvlink_GBps}};
  // NICs per node and their speed, where the interconnect description states them; nodes of
  // fewer GPUs without them keep the preset's NICs per GPU.
  const auto nics = nics_of(r.interconnect, r.gpus_per_node);
  const bool nics_stated = nics && nics->per_node >= 1 && nics->per_node <= 1024 && nics->gbps >= 0.1;
  if (small_nodes) {
    const ClusterSpec& pc = builtin_presets().clusters.at(preset.cluster);
    const int per_node = std::max(1, static_cast<int>(pc.nics_per_node * r.gpus_per_node / pc.gpus_per_node));
    if (!nics_stated) sc["cluster"]["inter_node"] = {{"nic_Gbps", pc.nic_Gbps}, {"nics_per_node", per_node}};
    r.assumptions.push_back(fmt::format(
        "{} GPUs per node: nodes of {} {} GPUs (the {} preset's GPU and NVLink bandwidth per GPU){}", r.gpus_per_node,
        r.gpus_per_node, preset.gpu, preset.cluster,
        nics_stated ? std::string()
                    : fmt::format(", {} x {} Gb/s NICs per node (the preset's per GPU)", per_node, pc.nic_Gbps)));
  }
  if (nics_stated) {
    const ClusterSpec& pc = builtin_presets().clusters.at(preset.cluster);
    if (nics->per_node != pc.nics_per_node || nics->gbps != pc.nic_Gbps) {
      sc["cluster"]["inter_node"] = {{"nic_Gbps", nics->gbps}, {"nics_per_node", nics->per_node}};
      r.assumptions.push_back(fmt::format("interconnect {}: {} x {} Gb/s NICs per node (preset {}: {} x {} Gb/s)",
                                          quote(r.interconnect), nics->per_node, nics->gbps, preset.cluster,
                                          pc.nics_per_node, pc.nic_Gbps));
    }
  }
  ordered_json plan = {{"tp", r.tp}, {"pp", r.pp}};
  if (r.dp) plan["dp"] = *r.dp;
  plan["cp"] = r.cp;
  plan["ep"] = r.ep;
  if (r.etp > 0) plan["etp"] = r.etp;
  plan["sequence_parallel"] = r.sequence_parallel;
  if (r.tp_comm_overlap) plan["tp_comm_overlap"] = true;
  if (r.grad_dtype != "fp32") plan["grad_dtype"] = r.grad_dtype;
  if (!r.overlap_grad_reduce) plan["overlap_grad_reduce"] = false;
  plan["schedule"] = r.schedule;
  plan["virtual_stages"] = r.virtual_stages;
  if (!r.pipeline_layout.is_null()) plan["pipeline_layout"] = r.pipeline_layout;
  const std::int64_t rdp = record_dp(r);
  if (r.schedule == "interleaved" && r.microbatch_group == 0 && rdp > 0 && r.pp >= 2 && r.microbatch > 0 &&
      r.global_batch > 0 && r.global_batch % (r.microbatch * rdp) == 0) {
    // The run ran, so Megatron-Core ran its microbatches in groups it accepts: where pp does
    // not divide them, the smallest such group (scenario.h smallest_microbatch_group).
    const std::int64_t micro = r.global_batch / (r.microbatch * rdp);
    if (micro % r.pp != 0) {
      if (const std::int64_t g = smallest_microbatch_group(static_cast<int>(r.pp), micro); g > 0) {
        r.microbatch_group = g;
        r.assumptions.push_back(fmt::format(
            "microbatch_group_size_per_vp_stage not stated, {} microbatches not a multiple of pp {}: {}, the smallest "
            "group Megatron-Core's interleaved schedule runs them in",
            micro, r.pp, g));
      }
    }
  }
  if (r.microbatch_group > 0) plan["microbatch_group_size_per_vp_stage"] = r.microbatch_group;
  plan["microbatch"] = r.microbatch;
  plan["global_batch"] = r.global_batch;
  plan["zero"] = r.zero;
  plan["stack"] = r.stack;
  plan["recompute"] = r.recompute;
  plan["precision"] = r.precision;
  if (r.precision == "fp8" && r.fp8_recipe != "tensorwise") plan["fp8_recipe"] = r.fp8_recipe;
  plan["flash_attention"] = r.flash_attention;
  if (!r.attention_kernel.empty()) plan["attention_kernel"] = r.attention_kernel;
  if (r.moe_experts > 0 && r.moe_dispatcher != "alltoall") plan["moe_dispatcher"] = r.moe_dispatcher;
  if (r.moe_a2a_overlap) plan["moe_a2a_overlap"] = true;
  if (!r.recompute_modules.empty()) plan["recompute_modules"] = r.recompute_modules;
  if (r.recompute_num_layers > 0) plan["recompute_num_layers"] = r.recompute_num_layers;
  if (r.recompute_uniform) plan["recompute_method"] = "uniform";
  sc["plan"] = std::move(plan);
  sc["workload"] = {{"seq_len", r.seq}};
  out.scenario = std::move(sc);
  return out;
}

double accounting_flops(const Record& r, double active_params, std::string* name) {
  const double B = static_cast<double>(r.global_batch), s = static_cast<double>(r.seq);
  const double l = static_cast<double>(r.layers), h = static_cast<double>(r.hidden);
  const double V = static_cast<double>(r.vocab_padded);
  if (r.accounting == Accounting::kSixN || r.accounting == Accounting::kPalm) {
    // N: the parameters a token uses as the record states them (activated ones for a
    // mixture of experts), else stepcast's count.
    double N = active_params;
    const char* from = "stepcast's count";
    if (!r.moe.empty() && r.stated_active_params > 0) {
      N = r.stated_active_params;
      from = "model.activated_params";
    } else if (r.moe.empty() && r.stated_params > 0) {
      N = r.stated_params;
      from = "model.params";
    }
    if (r.accounting == Accounting::kSixN) {
      *name = fmt::format("6 N per token (N = {:.4g}, {})", N, from);
      return 6.0 * N * B * s;
    }
    *name = fmt::format("PaLM (6 N + 12 l h s per token, N = {:.4g}, {})", N, from);
    return B * s * (6.0 * N + 12.0 * l * h * s);
  }
  if (r.accounting == Accounting::kKorthikantiEq7) {
    *name = "korthikanti2022_eq7 (72 B s l h^2 (1 + s/6h + V/12lh), no recompute)";
    return 72.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  }
  *name = "narayanan2021_eq3 (96 B s l h^2 (1 + s/6h + V/16lh), incl. recompute)";
  return 96.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

std::string layout_of(const Record& r) {
  std::string dp = r.dp ? std::to_string(*r.dp) : "?";
  const std::int64_t model_ranks = r.tp * r.pp * r.cp;
  if (!r.dp && r.gpus > 0 && model_ranks > 0 && r.gpus % model_ranks == 0) dp = std::to_string(r.gpus / model_ranks);
  std::string s = fmt::format("tp{} pp{} dp{}", r.tp, r.pp, dp);
  if (r.cp > 1) s += fmt::format(" cp{}", r.cp);
  if (r.ep > 1) s += fmt::format(" ep{}", r.ep);
  if (r.virtual_stages > 1) s += fmt::format(" v{}", r.virtual_stages);
  if (r.zero > 0) s += fmt::format(" z{}", r.zero);
  s += r.global_batch > 0 ? fmt::format(" mb{} gbs{}", r.microbatch, r.global_batch)
                          : fmt::format(" mb{} gbs?", r.microbatch);
  return s;
}

std::vector<std::string> common_assumptions() {
  return {
      "model: GPT family -- LayerNorm, GELU FFN (2 matrices), learned positions (unless the record says "
      "otherwise), linear biases, tied input/output embedding, dropout on; a model named Llama, Qwen, "
      "Mistral, Mixtral, DeepSeek, InternLM or Baichuan: Llama architecture",
      "cluster: DGX-class preset of the record's GPU (A100 -> dgx-a100: 8 x A100-SXM4-80GB, NVLink 3 at 300 GB/s "
      "per direction, 8 x 200 Gb/s NICs per node; H100 -> dgx-h100), nodes = GPUs / 8; a power limit stated in the "
      "GPU description (\"500 W cap\") selects the GPU preset measured at it where there is one (H100 at 500 W: "
      "h100-sxm-500w, its GEMM ceilings measured at 500 W); HBM capacity and "
      "bandwidth stated in the GPU description replace the preset's; so do the NICs per node and their speed where the "
      "interconnect description states them (\"8x 200 Gb/s\", \"4x Omni-Path 100 Gb/s\", \"eight 200G NICs\", \"400 "
      "Gb/s "
      "per GPU\"); the rest of it is not read",
      "plan fields the record does not state keep stepcast's defaults: fp32 gradients, overlapped gradient "
      "reduction (25 MiB buckets), 5% memory headroom",
      "stack: megatron-core (Megatron-LM, Megatron-Bridge, NeMo) unless the record names FSDP2 or torchtitan "
      "(fsdp2-eager; fsdp2-compile when it names torch.compile; fsdp2-compile-loss for a compiled torchtitan record "
      "of 2025 or later), Composer or LLM Foundry (llm-foundry), DeepSpeed "
      "with ZeRO-3 (deepspeed-zero; deepspeed-zero-2021 for records of 2021 or before), with ZeRO 0 or 1, "
      "DeepSpeed's pipeline engine, its BF16Optimizer or Megatron-DeepSpeed (megatron-deepspeed), or PyTorch FSDP "
      "with ZeRO 2 or 3 (fsdp2-eager); the vocabulary padded to 128 x tp on the Megatron stacks only",
      "efficiencies: stepcast's defaults (GEMM = ceiling/peak x tile x wave quantization x short K, the ceiling "
      "the GPU's MAMF or, on Hopper, the sustained rate measured on an H200; attention with "
      "FlashAttention on Hopper: the stack's kernel's published figures by sequence length, models/data/"
      "attention.json (megatron-core cuDNN, the PyTorch stacks FlashAttention-2), else 0.6; HBM 0.8, "
      "NVLink 0.82, network 0.9); nothing is fitted to these runs",
      "throughput: the record's TFLOP/s per GPU under its own FLOP accounting (Narayanan eq. 3 unless it names "
      "another) evaluated on the record's fields and divided by stepcast's predicted step time x GPUs; else "
      "tokens/s per GPU, tokens/s or samples/s from the predicted step time; with none of those, model TFLOP/s per "
      "GPU or MFU under stepcast's own FLOP count",
      "peak memory: stepcast's worst-stage total against the record's measured peak (max over ranks)"};
}

}  // namespace stepcast::app::validation
