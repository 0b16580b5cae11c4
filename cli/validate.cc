#include "validate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/models/estimate.h"
#include "stepcast/models/scenario.h"

namespace stepcast::cli {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int kExitOk = 0;
constexpr int kExitInput = 2;
// Megatron pads the vocabulary to a multiple of make-vocab-size-divisible-by (128) x TP.
constexpr std::int64_t kVocabPadMultiple = 128;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

bool contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

// A JSON value as a user recognises it in a message.
std::string describe(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// Reads the fields of one JSON object, collecting one message per problem with its path.
// Keys not asked for are accepted: records carry sources and notes.
class Fields {
 public:
  Fields(const json& obj, std::string path, std::vector<std::string>& errors)
      : obj_(obj), path_(std::move(path)), errors_(errors) {}

  std::string path_of(const char* key) const { return path_ + "." + key; }
  void fail(const char* key, const std::string& reason) {
    errors_.push_back(path_of(key) + ": " + reason);
  }

  // nullptr when absent or null.
  const json* get(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<std::int64_t> integer(const char* key, bool required, std::int64_t min = 1) {
    const json* v = get(key);
    if (!v) {
      if (required) fail(key, "required: a positive integer");
      return std::nullopt;
    }
    std::optional<std::int64_t> x;
    if (v->is_number_integer()) {
      x = v->get<std::int64_t>();
    } else if (v->is_number_float()) {
      const double d = v->get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) x = static_cast<std::int64_t>(d);
    }
    if (!x || *x < min || *x > 1'000'000'000'000) {
      fail(key, fmt::format("expected {} integer, got {}", min > 0 ? "a positive" : "a non-negative",
                            describe(*v)));
      return std::nullopt;
    }
    return x;
  }

  std::optional<double> number(const char* key, bool required) {
    const json* v = get(key);
    if (!v) {
      if (required) fail(key, "required: a positive number");
      return std::nullopt;
    }
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() <= 0) {
      fail(key, "expected a positive number, got " + describe(*v));
      return std::nullopt;
    }
    return v->get<double>();
  }

  std::optional<std::string> string(const char* key, bool required) {
    const json* v = get(key);
    if (!v) {
      if (required) fail(key, "required: a string");
      return std::nullopt;
    }
    if (!v->is_string()) {
      fail(key, "expected a string, got " + describe(*v));
      return std::nullopt;
    }
    return v->get<std::string>();
  }

  std::optional<bool> boolean(const char* key) {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) {
      fail(key, "expected true or false, got " + describe(*v));
      return std::nullopt;
    }
    return v->get<bool>();
  }

  // The nested object `key`, or nullptr (with a message when required or not an object).
  const json* object(const char* key, bool required) {
    const json* v = get(key);
    if (!v) {
      if (required) fail(key, "required: an object");
      return nullptr;
    }
    if (!v->is_object()) {
      fail(key, "expected an object, got " + describe(*v));
      return nullptr;
    }
    return v;
  }

 private:
  const json& obj_;
  std::string path_;
  std::vector<std::string>& errors_;
};

// FLOP accountings a record's `measured.flop_accounting` may name.
enum class Accounting { kNarayananEq3, kKorthikantiEq7 };

// Everything read from one record, already mapped to stepcast's vocabulary.
struct Record {
  std::string id;
  // model
  std::int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, seq = 0;
  std::int64_t vocab_padded = 0;
  bool learned_positions = true;
  // hardware
  std::string gpu;
  std::int64_t gpus = 0, gpus_per_node = 8;
  // layout
  std::int64_t tp = 1, pp = 1, cp = 1, ep = 1, global_batch = 0, microbatch = 1, virtual_stages = 1;
  std::optional<std::int64_t> dp;
  bool sequence_parallel = false, flash_attention = false;
  std::string schedule = "1f1b", recompute = "none", precision = "bf16";
  int zero = 0;
  // measured
  double tflops = 0, iteration_s = 0, samples_per_s = 0;
  Accounting accounting = Accounting::kNarayananEq3;
  std::vector<std::string> assumptions;
};

// Reads record `index`; appends messages to `errors` for a malformed record.
Record read_record(const json& rec, std::size_t index, std::vector<std::string>& errors) {
  Record r;
  const std::string path = fmt::format("records[{}]", index);
  if (!rec.is_object()) {
    errors.push_back(path + ": expected an object, got " + describe(rec));
    return r;
  }
  const std::size_t before = errors.size();
  Fields top(rec, path, errors);
  r.id = top.string("id", true).value_or(path);

  if (const json* m = top.object("model", true)) {
    Fields f(*m, top.path_of("model"), errors);
    r.layers = f.integer("layers", true).value_or(0);
    r.hidden = f.integer("hidden", true).value_or(0);
    r.heads = f.integer("heads", true).value_or(0);
    r.vocab = f.integer("vocab", true).value_or(0);
    r.seq = f.integer("seq_len", true).value_or(0);
    if (auto kv = f.integer("kv_heads", false)) {
      r.kv_heads = *kv;
    } else {
      r.kv_heads = r.heads;
      r.assumptions.push_back("kv_heads not given: multi-head attention (kv_heads = heads)");
    }
    if (auto ffn = f.integer("ffn_hidden", false)) {
      r.ffn = *ffn;
    } else {
      r.ffn = 4 * r.hidden;
      r.assumptions.push_back("ffn_hidden not given: 4 x hidden");
    }
    if (auto pos = f.string("positional", false)) {
      const std::string p = lower(*pos);
      r.learned_positions = contains(p, "learned") || contains(p, "absolute");
      if (!r.learned_positions) {
        r.assumptions.push_back(fmt::format(
            "positional \"{}\": no position parameters (stepcast's parameter-free \"rope\" "
            "setting)",
            *pos));
      }
    }
  }
  if (const json* h = top.object("hardware", true)) {
    Fields f(*h, top.path_of("hardware"), errors);
    r.gpu = f.string("gpu", true).value_or("");
    r.gpus = f.integer("gpus_total", true).value_or(0);
    r.gpus_per_node = f.integer("gpus_per_node", false).value_or(8);
  }
  if (const json* l = top.object("layout", true)) {
    Fields f(*l, top.path_of("layout"), errors);
    r.tp = f.integer("tp", true).value_or(1);
    r.pp = f.integer("pp", true).value_or(1);
    r.dp = f.integer("dp", false);
    r.cp = f.integer("cp", false).value_or(1);
    r.ep = f.integer("ep", false).value_or(1);
    r.global_batch = f.integer("global_batch", true).value_or(1);
    if (auto mb = f.integer("microbatch", false)) {
      r.microbatch = *mb;
    } else {
      r.assumptions.push_back("microbatch not stated: 1");
    }
    const std::optional<std::int64_t> v = f.integer("virtual_stages", false);
    if (auto s = f.string("schedule", false)) {
      const std::string low = lower(*s);
      if (contains(low, "interleaved")) {
        if (v && *v >= 2) {
          r.schedule = "interleaved";
          r.virtual_stages = *v;
        } else {
          r.assumptions.push_back(
              "schedule \"interleaved 1F1B\" stated without a chunk count: plain 1F1B");
        }
      } else if (contains(low, "gpipe")) {
        r.schedule = "gpipe";
      } else if (contains(low, "1f1b") || contains(low, "pipedream") || contains(low, "pipeline")) {
        r.schedule = "1f1b";
        if (!contains(low, "1f1b")) r.assumptions.push_back("pipeline schedule: 1F1B");
      } else {
        f.fail("schedule", fmt::format("expected a description naming \"interleaved\", \"gpipe\", "
                                       "\"1f1b\" or a pipeline engine, got \"{}\"",
                                       *s));
      }
    } else {
      r.assumptions.push_back("schedule not stated: 1F1B");
    }
    if (r.pp == 1 && r.schedule != "1f1b") r.schedule = "1f1b";  // nothing to interleave
    if (auto rc = f.string("recompute", false)) {
      const std::string low = lower(*rc);
      if (low.rfind("full", 0) == 0) r.recompute = "full";
      else if (low.rfind("selective", 0) == 0) r.recompute = "selective";
      else if (low.rfind("none", 0) == 0 || low.rfind("no", 0) == 0) r.recompute = "none";
      else {
        f.fail("recompute", fmt::format("expected a description starting with \"full\", "
                                        "\"selective\" or \"none\", got \"{}\"",
                                        *rc));
      }
    } else {
      r.assumptions.push_back("recompute not stated: none");
    }
    if (auto z = f.string("zero_fsdp", false)) {
      const std::string low = lower(*z);
      if (contains(low, "zero-3") || contains(low, "zero3") || contains(low, "fsdp")) r.zero = 3;
      else if (contains(low, "zero-2") || contains(low, "zero2")) r.zero = 2;
      else if (contains(low, "zero-1") || contains(low, "zero1") || contains(low, "distributed optimizer")) r.zero = 1;
      else if (contains(low, "none") || contains(low, "ddp")) r.zero = 0;
      else {
        f.fail("zero_fsdp", fmt::format("expected a description naming ZeRO-1/2/3, FSDP, DDP or "
                                        "none, got \"{}\"",
                                        *z));
      }
    } else {
      r.assumptions.push_back("ZeRO not stated: 0 (replicated optimizer, as Megatron's DDP)");
    }
    r.sequence_parallel = f.boolean("sequence_parallel").value_or(false);
    if (auto p = f.string("precision", false)) {
      const std::string low = lower(*p);
      if (contains(low, "bf16")) r.precision = "bf16";
      else if (contains(low, "fp8")) r.precision = "fp8";
      else if (contains(low, "fp16") || contains(low, "16-bit")) r.precision = "fp16";
      else {
        f.fail("precision",
               fmt::format("expected a description naming bf16, fp16, 16-bit or fp8, got \"{}\"", *p));
      }
    } else {
      r.assumptions.push_back("precision not stated: bf16");
    }
    if (auto fa = f.boolean("flash_attention")) {
      r.flash_attention = *fa;
    } else {
      r.assumptions.push_back(
          "FlashAttention not stated: off (fused softmax with the s x s scores in memory)");
    }
  }
  if (const json* me = top.object("measured", true)) {
    Fields f(*me, top.path_of("measured"), errors);
    r.tflops = f.number("tflops_per_gpu", false).value_or(0);
    r.iteration_s = f.number("iteration_time_s", false).value_or(0);
    r.samples_per_s = f.number("samples_per_s", false).value_or(0);
    const std::string acc = lower(f.string("flop_accounting", false).value_or(""));
    if (contains(acc, "96*b")) {
      r.accounting = Accounting::kNarayananEq3;
    } else if (contains(acc, "72*b")) {
      r.accounting = Accounting::kKorthikantiEq7;
    } else {
      r.assumptions.push_back("FLOP accounting not recognised: Narayanan eq. 3 (96 B s l h^2 ...)");
    }
  }
  if (errors.size() != before) return r;
  if (r.heads % r.kv_heads != 0) {
    errors.push_back(fmt::format("{}.model.kv_heads: {} does not divide heads ({})", path,
                                 r.kv_heads, r.heads));
  }
  const std::int64_t pad = kVocabPadMultiple * r.tp;
  r.vocab_padded = (r.vocab + pad - 1) / pad * pad;
  if (r.vocab_padded != r.vocab) {
    r.assumptions.push_back(fmt::format("vocab {} padded to {} (Megatron: multiple of 128 x tp)",
                                        r.vocab, r.vocab_padded));
  }
  return r;
}

// The cluster preset of a GPU name, or "" when there is none.
std::string cluster_preset_for(const std::string& gpu) {
  const std::string g = lower(gpu);
  if (contains(g, "pcie")) return "";  // the presets are SXM servers
  if (contains(g, "a100") && (contains(g, "80gb") || contains(g, "80 gb"))) return "dgx-a100";
  if (contains(g, "h100")) return "dgx-h100";
  if (contains(g, "h200")) return "dgx-h200";
  if (contains(g, "b200")) return "dgx-b200";
  return "";
}

double accounting_flops(const Record& r, std::string* name) {
  const double B = static_cast<double>(r.global_batch), s = static_cast<double>(r.seq);
  const double l = static_cast<double>(r.layers), h = static_cast<double>(r.hidden);
  const double V = static_cast<double>(r.vocab_padded);
  if (r.accounting == Accounting::kKorthikantiEq7) {
    *name = "korthikanti2022_eq7 (72 B s l h^2 (1 + s/6h + V/12lh), no recompute)";
    return 72.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  }
  *name = "narayanan2021_eq3 (96 B s l h^2 (1 + s/6h + V/16lh), incl. recompute)";
  return 96.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

// Predicts one record; fills the prediction part of `row`.
void predict(const Record& r, ValidationRow& row) {
  const std::string preset = cluster_preset_for(r.gpu);
  if (preset.empty()) {
    row.reason = fmt::format("no cluster preset for gpu \"{}\" (known: SXM A100-80GB, H100, H200, B200)",
                             r.gpu);
    return;
  }
  if (r.gpus_per_node != 8) {
    row.reason = fmt::format("{} GPUs per node; the {} preset has 8", r.gpus_per_node, preset);
    return;
  }
  if (r.gpus % r.gpus_per_node != 0) {
    row.reason = fmt::format("{} GPUs are not whole nodes of {}", r.gpus, r.gpus_per_node);
    return;
  }
  ordered_json sc;
  sc["format"] = 1;
  sc["name"] = r.id;
  sc["model"] = {{"name", r.id},
                 {"family", "gpt"},
                 {"num_layers", r.layers},
                 {"hidden_size", r.hidden},
                 {"num_attention_heads", r.heads},
                 {"num_kv_heads", r.kv_heads},
                 {"ffn_hidden_size", r.ffn},
                 {"ffn_activation", "gelu"},
                 {"ffn_matrices", 2},
                 {"norm", "layernorm"},
                 {"tied_embeddings", true},
                 {"linear_bias", true},
                 {"dropout", true},
                 {"vocab_size", r.vocab_padded},
                 {"position_embedding", r.learned_positions ? "learned" : "rope"},
                 {"max_seq_len", r.seq},
                 {"train_seq_len", r.seq}};
  sc["cluster"] = {{"preset", preset}, {"nodes", r.gpus / r.gpus_per_node}};
  ordered_json plan = {{"tp", r.tp}, {"pp", r.pp}};
  if (r.dp) plan["dp"] = *r.dp;
  plan["cp"] = r.cp;
  plan["ep"] = r.ep;
  plan["sequence_parallel"] = r.sequence_parallel;
  plan["schedule"] = r.schedule;
  plan["virtual_stages"] = r.virtual_stages;
  plan["microbatch"] = r.microbatch;
  plan["global_batch"] = r.global_batch;
  plan["zero"] = r.zero;
  plan["recompute"] = r.recompute;
  plan["precision"] = r.precision;
  plan["flash_attention"] = r.flash_attention;
  sc["plan"] = plan;
  sc["workload"] = {{"seq_len", r.seq}};

  row.scenario_json = sc.dump(2);
  auto scenario = parse_scenario(row.scenario_json);
  if (!scenario.ok()) {
    std::istringstream lines(scenario.error().message);
    std::string l;
    while (std::getline(lines, l)) row.reason += (row.reason.empty() ? "" : "; ") + l;
    return;
  }
  const Estimate e = estimate(*scenario);
  row.predicted = true;
  row.accounting_flops_per_step = accounting_flops(r, &row.accounting);
  row.predicted_iteration_s = e.step_time_s;
  row.predicted_tflops =
      row.accounting_flops_per_step / (e.step_time_s * static_cast<double>(e.world)) / 1e12;
  row.predicted_samples_per_s = static_cast<double>(r.global_batch) / e.step_time_s;
  row.stepcast_mfu = e.mfu;
  row.stepcast_hfu = e.hfu;
  row.compute_s = e.breakdown.compute;
  row.tp_s = e.exposed.tp;
  row.dp_s = e.exposed.dp;
  row.pp_s = e.exposed.pp;
  row.bubble_s = e.breakdown.bubble;
  row.optimizer_s = e.breakdown.optimizer;
  row.memory_total_bytes = e.memory.total;
  row.memory_usable_bytes = e.memory.usable;
  if (!e.memory.fits) {
    row.reason = fmt::format("does not fit: stage {} needs {:.1f} GiB, {:.1f} GiB usable",
                             e.memory.stage, e.memory.total / kGiB, e.memory.usable / kGiB);
    return;
  }
  row.feasible = true;
}

std::string layout_of(const Record& r, const ValidationRow& row) {
  std::string dp = r.dp ? std::to_string(*r.dp) : "?";
  if (!r.dp && row.gpus > 0 && r.tp * r.pp * r.cp > 0 && row.gpus % (r.tp * r.pp * r.cp) == 0) {
    dp = std::to_string(row.gpus / (r.tp * r.pp * r.cp));
  }
  std::string s = fmt::format("tp{} pp{} dp{}", r.tp, r.pp, dp);
  if (r.cp > 1) s += fmt::format(" cp{}", r.cp);
  if (r.ep > 1) s += fmt::format(" ep{}", r.ep);
  if (r.virtual_stages > 1) s += fmt::format(" v{}", r.virtual_stages);
  s += fmt::format(" mb{} gbs{}", r.microbatch, r.global_batch);
  return s;
}

std::string pct(double x) { return fmt::format("{:+.1f}%", 100 * x); }

}  // namespace

Result<ValidationReport> validate_runs(std::string_view text) {
  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true,
                      /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    return Error{"invalid JSON: " + what};
  }
  if (!doc.is_object()) return Error{"expected a JSON object at the top level, got " + describe(doc)};
  if (auto f = doc.find("format"); f != doc.end() && !(f->is_number_integer() && f->get<int>() == 1)) {
    return Error{"format: " + describe(*f) + " is not supported (this stepcast reads format 1)"};
  }
  auto recs = doc.find("records");
  if (recs == doc.end()) return Error{"records: required: an array of measured runs"};
  if (!recs->is_array()) return Error{"records: expected an array, got " + describe(*recs)};
  if (recs->empty()) return Error{"records: empty: nothing to validate"};

  std::vector<std::string> errors;
  std::vector<Record> records;
  for (std::size_t i = 0; i < recs->size(); ++i) records.push_back(read_record((*recs)[i], i, errors));
  if (!errors.empty()) {
    std::string msg;
    for (std::size_t i = 0; i < errors.size(); ++i) msg += (i ? "\n" : "") + errors[i];
    return Error{msg};
  }

  ValidationReport rep;
  rep.common_assumptions = {
      "model: GPT family -- LayerNorm, GELU FFN (2 matrices), learned positions (unless the "
      "record says otherwise), linear biases, tied input/output embedding, dropout on",
      "cluster: DGX-class preset of the record's GPU (A100-80GB -> dgx-a100: 8 x A100-SXM4-80GB, "
      "NVLink 3 at 300 GB/s per direction, 8 x 200 Gb/s NICs per node), nodes = GPUs / 8",
      "plan fields the record does not state keep stepcast's defaults: fp32 gradients, "
      "overlapped gradient reduction (25 MiB buckets), 5% memory headroom",
      "efficiencies: stepcast's defaults (GEMM = MAMF/peak x tile x wave quantization, "
      "attention 0.6, HBM 0.8, NVLink 0.82, network 0.9); nothing is fitted to these runs",
      "comparison: the record's own FLOP accounting (Narayanan eq. 3 unless it names another) "
      "evaluated on the record's fields and divided by stepcast's predicted step time x GPUs"};
  double abs_sum = 0, sum = 0, it_abs = 0;
  for (const Record& r : records) {
    ValidationRow row;
    row.id = r.id;
    row.gpus = static_cast<int>(r.gpus);
    row.layout = layout_of(r, row);
    row.assumptions = r.assumptions;
    row.measured_tflops = r.tflops;
    row.measured_iteration_s = r.iteration_s;
    row.measured_samples_per_s = r.samples_per_s;
    predict(r, row);
    if (row.feasible && row.measured_tflops > 0) {
      ++rep.compared;
      abs_sum += std::fabs(row.tflops_error());
      sum += row.tflops_error();
    }
    if (row.feasible && row.measured_iteration_s > 0) {
      ++rep.iteration_compared;
      it_abs += std::fabs(row.iteration_error());
    }
    rep.rows.push_back(std::move(row));
  }
  if (rep.compared > 0) {
    rep.tflops_mean_abs_error = abs_sum / rep.compared;
    rep.tflops_mean_error = sum / rep.compared;
  }
  if (rep.iteration_compared > 0) rep.iteration_mean_abs_error = it_abs / rep.iteration_compared;
  return rep;
}

std::string validation_report_text(const ValidationReport& rep) {
  std::string o;
  auto line = [&](const std::string& x) { o += x + "\n"; };
  auto opt = [](bool has, double v, const char* f) {
    return has ? fmt::format(fmt::runtime(f), v) : std::string("-");
  };
  line("stepcast validate: predicted vs measured training runs");
  line("TFLOP/s per GPU under each record's own FLOP accounting; error = (predicted - measured) / measured");
  line("");
  constexpr const char* kRow = "{:<26}{:>6}  {:<28}{:>9}{:>10}{:>8}  {:>9}{:>10}{:>8}";
  line(fmt::format("{:<62}{:<29}{}", "", "TFLOP/s per GPU", "iteration time, s"));
  line(fmt::format(fmt::runtime(kRow), "id", "GPUs", "layout", "measured", "predicted", "error",
                   "measured", "predicted", "error"));
  for (const ValidationRow& r : rep.rows) {
    const bool mt = r.measured_tflops > 0, mi = r.measured_iteration_s > 0;
    if (!r.feasible) {
      line(fmt::format(fmt::runtime(kRow), r.id, r.gpus, r.layout, opt(mt, r.measured_tflops, "{:.1f}"),
                       "-", "n/a", opt(mi, r.measured_iteration_s, "{:.2f}"), "-", "n/a"));
      continue;
    }
    line(fmt::format(fmt::runtime(kRow), r.id, r.gpus, r.layout, opt(mt, r.measured_tflops, "{:.1f}"),
                     fmt::format("{:.1f}", r.predicted_tflops), mt ? pct(r.tflops_error()) : "-",
                     opt(mi, r.measured_iteration_s, "{:.2f}"),
                     fmt::format("{:.2f}", r.predicted_iteration_s),
                     mi ? pct(r.iteration_error()) : "-"));
  }
  line("");
  if (rep.compared > 0) {
    line(fmt::format("mean |error| TFLOP/s per GPU: {:.1f}% over {} records (mean signed error {})",
                     100 * rep.tflops_mean_abs_error, rep.compared, pct(rep.tflops_mean_error)));
  } else {
    line("mean |error| TFLOP/s per GPU: no feasible record with a measurement");
  }
  if (rep.iteration_compared > 0) {
    line(fmt::format("mean |error| iteration time: {:.1f}% over {} record{}",
                     100 * rep.iteration_mean_abs_error, rep.iteration_compared,
                     rep.iteration_compared == 1 ? "" : "s"));
  }
  std::size_t infeasible = 0;
  for (const auto& r : rep.rows) infeasible += r.feasible ? 0 : 1;
  if (infeasible > 0) {
    line("");
    line("Not predicted (infeasible in stepcast)");
    for (const auto& r : rep.rows) {
      if (!r.feasible) line(fmt::format("  {}: {}", r.id, r.reason));
    }
  }
  line("");
  line("Predicted step (share of step time) and worst-rank memory");
  line(fmt::format("{:<26}{:>9}{:>9}{:>7}{:>7}{:>7}{:>8}{:>7}{:>14}", "id", "step s", "compute", "tp",
                   "dp", "pp", "bubble", "optim", "memory GiB"));
  for (const auto& r : rep.rows) {
    if (!r.predicted) continue;
    const double t = r.predicted_iteration_s;
    auto share = [&](double x) { return fmt::format("{:.1f}%", 100 * x / t); };
    line(fmt::format("{:<26}{:>9.2f}{:>9}{:>7}{:>7}{:>7}{:>8}{:>7}{:>14}", r.id, t, share(r.compute_s),
                     share(r.tp_s), share(r.dp_s), share(r.pp_s), share(r.bubble_s),
                     share(r.optimizer_s),
                     fmt::format("{:.1f}/{:.1f}", r.memory_total_bytes / kGiB,
                                 r.memory_usable_bytes / kGiB)));
  }
  line("");
  line("Assumptions (every record)");
  for (const auto& a : rep.common_assumptions) line("  - " + a);
  line("Assumptions (per record)");
  for (const auto& r : rep.rows) {
    std::string list;
    for (std::size_t i = 0; i < r.assumptions.size(); ++i) list += (i ? "; " : "") + r.assumptions[i];
    line(fmt::format("  {}: {}", r.id, list.empty() ? "none beyond the above" : list));
  }
  return o;
}

std::string validation_report_json(const ValidationReport& rep) {
  ordered_json j;
  j["format"] = 1;
  j["command"] = "validate";
  j["common_assumptions"] = rep.common_assumptions;
  ordered_json rows = ordered_json::array();
  for (const ValidationRow& r : rep.rows) {
    ordered_json x;
    x["id"] = r.id;
    x["gpus"] = r.gpus;
    x["layout"] = r.layout;
    x["feasible"] = r.feasible;
    x["reason"] = r.reason.empty() ? ordered_json(nullptr) : ordered_json(r.reason);
    x["measured"] = {
        {"tflops_per_gpu", r.measured_tflops > 0 ? ordered_json(r.measured_tflops) : ordered_json(nullptr)},
        {"iteration_time_s", r.measured_iteration_s > 0 ? ordered_json(r.measured_iteration_s) : ordered_json(nullptr)},
        {"samples_per_s", r.measured_samples_per_s > 0 ? ordered_json(r.measured_samples_per_s) : ordered_json(nullptr)}};
    if (r.predicted) {
      x["predicted"] = {{"tflops_per_gpu", r.predicted_tflops},
                        {"iteration_time_s", r.predicted_iteration_s},
                        {"samples_per_s", r.predicted_samples_per_s},
                        {"accounting", r.accounting},
                        {"accounting_flops_per_step", r.accounting_flops_per_step},
                        {"stepcast_mfu", r.stepcast_mfu},
                        {"stepcast_hfu", r.stepcast_hfu},
                        {"breakdown_s", {{"compute", r.compute_s},
                                         {"exposed_tp", r.tp_s},
                                         {"exposed_dp", r.dp_s},
                                         {"exposed_pp", r.pp_s},
                                         {"bubble", r.bubble_s},
                                         {"optimizer", r.optimizer_s}}},
                        {"memory_bytes", {{"total", std::llround(r.memory_total_bytes)},
                                          {"usable", std::llround(r.memory_usable_bytes)}}}};
    } else {
      x["predicted"] = nullptr;
    }
    const bool cmp = r.feasible && r.measured_tflops > 0;
    const bool cmpi = r.feasible && r.measured_iteration_s > 0;
    x["error"] = {{"tflops_per_gpu", cmp ? ordered_json(r.tflops_error()) : ordered_json(nullptr)},
                  {"iteration_time_s", cmpi ? ordered_json(r.iteration_error()) : ordered_json(nullptr)}};
    x["assumptions"] = r.assumptions;
    rows.push_back(std::move(x));
  }
  j["records"] = std::move(rows);
  j["summary"] = {
      {"compared", rep.compared},
      {"tflops_mean_abs_error", rep.compared ? ordered_json(rep.tflops_mean_abs_error) : ordered_json(nullptr)},
      {"tflops_mean_error", rep.compared ? ordered_json(rep.tflops_mean_error) : ordered_json(nullptr)},
      {"iteration_compared", rep.iteration_compared},
      {"iteration_mean_abs_error",
       rep.iteration_compared ? ordered_json(rep.iteration_mean_abs_error) : ordered_json(nullptr)}};
  return j.dump(2) + "\n";
}

int cmd_validate(const std::string& path, bool as_json, const std::string& scenario_dir) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "stepcast: error: %s: cannot open file\n", path.c_str());
    return kExitInput;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  auto rep = validate_runs(ss.str());
  if (!rep.ok()) {
    std::istringstream lines(rep.error().message);
    std::string l;
    while (std::getline(lines, l)) std::fprintf(stderr, "stepcast: error: %s: %s\n", path.c_str(), l.c_str());
    return kExitInput;
  }
  if (!scenario_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(scenario_dir, ec);
    for (const ValidationRow& r : rep->rows) {
      if (r.scenario_json.empty()) continue;
      std::string name = r.id;  // a file name: keep [A-Za-z0-9._-]
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-') ch = '_';
      }
      const std::filesystem::path file = std::filesystem::path(scenario_dir) / (name + ".json");
      std::ofstream out(file, std::ios::binary);
      std::string header = "// Generated by `stepcast validate " + path + "` from record " + r.id + ".\n";
      for (const auto& a : rep->common_assumptions) header += "// assumption: " + a + "\n";
      for (const auto& a : r.assumptions) header += "// assumption: " + a + "\n";
      out << header << r.scenario_json << "\n";
      if (!out) {
        std::fprintf(stderr, "stepcast: error: --scenarios %s: cannot write %s\n",
                     scenario_dir.c_str(), file.string().c_str());
        return kExitInput;
      }
    }
  }
  std::cout << (as_json ? validation_report_json(*rep) : validation_report_text(*rep));
  return kExitOk;
}

}  // namespace stepcast::cli
