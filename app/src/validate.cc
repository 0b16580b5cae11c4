#include "stepcast/app/validate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/models/estimate.h"
#include "stepcast/models/file_io.h"
#include "stepcast/models/json_reader.h"
#include "stepcast/models/names.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/stats.h"
#include "validation_record.h"

namespace stepcast::app {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using validation::Record;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The sharded microbatch rule's one microbatch a step (validation_record.cc microbatch_rule),
// lowered to its largest divisor whose layout fits where the whole per-rank batch does not.
void lower_microbatch(Record& r) {
  if (!r.microbatch_per_step) return;
  const std::int64_t all = r.microbatch;
  for (std::int64_t d = all; d >= 1; --d) {
    if (all % d != 0) continue;
    Record trial = r;
    trial.microbatch = d;
    const validation::ScenarioBuild build = validation::build_scenario(trial);
    if (!build.scenario) return;  // predict() says why
    const auto scenario = parse_scenario(build.scenario->dump());
    if (!scenario.ok()) return;
    if (!estimate(*scenario).memory.fits) continue;
    if (d == all) return;
    r.microbatch = d;
    r.assumptions[static_cast<std::size_t>(r.microbatch_assumption)] +=
        fmt::format("; {} does not fit: the largest divisor that fits, {} ({} microbatches a step)", all, d, all / d);
    return;
  }
}

// Fills the prediction part of `row` from the record's scenario.
void predict(Record& r, ValidationRow& row) {
  validation::ScenarioBuild build = validation::build_scenario(r);
  row.assumptions = r.assumptions;  // build_scenario may add GPU rules
  if (!build.scenario) {
    row.reason = build.reason;
    return;
  }
  row.scenario_json = build.scenario->dump(2);
  auto scenario = parse_scenario(row.scenario_json);
  if (!scenario.ok()) {
    const std::string& msg = scenario.error().message;
    std::size_t start = 0;
    while (start <= msg.size()) {  // one line: "; " between the loader's lines
      const std::size_t nl = msg.find('\n', start);
      row.reason += (row.reason.empty() ? "" : "; ") + msg.substr(start, nl - start);
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    return;
  }
  const Estimate e = estimate(*scenario);
  const double world = static_cast<double>(e.world);
  row.predicted = true;
  row.accounting_flops_per_step =
      validation::accounting_flops(r, static_cast<double>(e.params.active), &row.accounting);
  row.predicted_iteration_s = e.step_time_s;
  row.predicted_tflops = row.accounting_flops_per_step / (e.step_time_s * world) / 1e12;
  row.predicted_samples_per_s = static_cast<double>(r.global_batch) / e.step_time_s;
  row.predicted_tokens_per_s = static_cast<double>(e.tokens_per_step) / e.step_time_s;
  row.stepcast_mfu = e.mfu;
  row.stepcast_hfu = e.hfu;
  row.compute_s = e.breakdown.compute;
  row.attention_s = e.compute.attention;
  row.ep_s = e.exposed.ep;
  row.cp_s = e.exposed.cp;
  row.tp_s = e.exposed.tp;
  row.dp_s = e.exposed.dp;
  row.pp_s = e.exposed.pp;
  row.bubble_s = e.breakdown.bubble;
  row.optimizer_s = e.breakdown.optimizer;
  row.host_s = e.breakdown.host;
  row.band_p10_s = e.step_time_band.p10;
  row.band_p90_s = e.step_time_band.p90;
  row.memory_total_bytes = e.memory.total;
  row.memory_usable_bytes = e.memory.usable;
  if (row.metric == "TFLOP/s/GPU") row.predicted_value = row.predicted_tflops;
  else if (row.metric == "tokens/s/GPU") row.predicted_value = row.predicted_tokens_per_s / world;
  else if (row.metric == "tokens/s") row.predicted_value = row.predicted_tokens_per_s;
  else if (row.metric == "samples/s") row.predicted_value = row.predicted_samples_per_s;
  else if (row.metric == "model TFLOP/s") row.predicted_value = e.model_flops_per_step / (e.step_time_s * world) / 1e12;
  else if (row.metric == "MFU %") row.predicted_value = 100 * e.mfu;
  if (!e.memory.fits) {
    row.reason = fmt::format("does not fit: stage {} needs {:.1f} GiB, {:.1f} GiB usable", e.memory.stage,
                             e.memory.total / kGiB, e.memory.usable / kGiB);
    return;
  }
  row.feasible = true;
}

ValidationRow row_of(Record& r) {
  lower_microbatch(r);
  ValidationRow row;
  row.id = r.id;
  row.gpus = static_cast<int>(r.gpus);
  row.layout = validation::layout_of(r);
  row.stack = parse_stack(r.stack).value_or(Stack::kMegatronCore);
  row.moe = !r.moe.empty();
  row.measured_tflops = r.tflops;
  row.measured_iteration_s = r.iteration_s;
  row.measured_samples_per_s = r.samples_per_s;
  row.measured_tokens_per_s = r.tokens_per_s;
  row.measured_tokens_per_s_per_gpu = r.tokens_per_s_per_gpu;
  row.measured_peak_memory_gib = r.peak_memory_gib;
  row.measured_mfu = r.mfu;
  row.measured_model_tflops = r.model_tflops;
  const std::pair<const char*, double> metrics[] = {
      {"TFLOP/s/GPU", r.tflops},      {"tokens/s/GPU", r.tokens_per_s_per_gpu}, {"tokens/s", r.tokens_per_s},
      {"samples/s", r.samples_per_s}, {"model TFLOP/s", r.model_tflops},        {"MFU %", 100 * r.mfu}};
  for (const auto& [name, value] : metrics) {
    if (value > 0) {
      row.metric = name;
      row.measured_value = value;
      break;
    }
  }
  // The two metrics of a record that measures no rate are stepcast's own FLOP convention.
  static constexpr const char* kConvention =
      "model FLOPs = 3 x the forward's matmul FLOPs with the full s x s attention square (PaLM, Narayanan)";
  if (row.metric == "model TFLOP/s") {
    r.assumptions.push_back(
        fmt::format("throughput compared as model TFLOP/s per GPU (the record measures no rate): "
                    "stepcast's {}, per predicted step and GPU; a source counting otherwise "
                    "differs by its accounting",
                    kConvention));
  } else if (row.metric == "MFU %") {
    r.assumptions.push_back(
        fmt::format("throughput compared as MFU (the record measures no rate): stepcast's MFU, {}, "
                    "over the dense peak of the record's precision (FP8's for fp8); a source "
                    "counting otherwise differs by its accounting",
                    kConvention));
  }
  predict(r, row);
  if (row.metric.empty() && row.measured_iteration_s <= 0 && row.measured_peak_memory_gib <= 0) {
    row.assumptions.push_back("nothing measured to compare");
  }
  return row;
}

void summarize(ValidateReport& rep) {
  std::vector<double> abs_errors;
  double sum = 0, it_abs = 0, mem = 0, mem_abs = 0;
  double moe_sum = 0;
  for (const ValidationRow& r : rep.rows) {
    if (r.has_throughput_error() && r.moe) {
      ++rep.moe_compared;
      moe_sum += r.throughput_error();
      if (r.in_band()) ++rep.moe_within_band;
    } else if (r.has_throughput_error()) {
      const double e = r.throughput_error();
      abs_errors.push_back(std::fabs(e));
      sum += e;
      if (std::fabs(e) <= 0.10) ++rep.within_10_percent;
      if (r.in_band()) ++rep.within_band;
    }
    if (r.has_iteration_error()) {
      ++rep.iteration_compared;
      it_abs += std::fabs(r.iteration_error());
    }
    if (r.has_memory_error()) {
      ++rep.memory_compared;
      mem += r.memory_error();
      mem_abs += std::fabs(r.memory_error());
    }
  }
  rep.compared = static_cast<int>(abs_errors.size());
  if (rep.moe_compared > 0) rep.moe_mean_error = moe_sum / rep.moe_compared;
  if (!abs_errors.empty()) {
    double abs_sum = 0;
    for (double x : abs_errors) abs_sum += x;
    rep.mean_abs_error = abs_sum / static_cast<double>(abs_errors.size());
    rep.mean_error = sum / static_cast<double>(abs_errors.size());
    rep.median_abs_error = median(abs_errors);
  }
  if (rep.iteration_compared > 0) rep.iteration_mean_abs_error = it_abs / rep.iteration_compared;
  if (rep.memory_compared > 0) {
    rep.memory_mean_error = mem / rep.memory_compared;
    rep.memory_mean_abs_error = mem_abs / rep.memory_compared;
  }
}

// A record id as a file name: [A-Za-z0-9.-] kept, anything else '_'.
std::string file_name_of(const std::string& id) {
  std::string name = id;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-') ch = '_';
  }
  if (name.empty() || name[0] == '.') name = "_" + name;  // never hidden, never ".."
  return name + ".json";
}

std::optional<Error> write_scenarios(ValidateReport& rep, const std::string& dir) {
  const std::string shown = "scenario_dir " + reader::printable(dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error{shown + ": cannot create directory (" + ec.message() + ")"};
  for (const ValidationRow& r : rep.rows) {
    if (r.scenario_json.empty()) continue;
    const std::string file = (std::filesystem::path(dir) / file_name_of(r.id)).string();
    std::string text = "// Generated by `stepcast validate " + rep.path + "` from record " + r.id + ".\n";
    for (const auto& a : rep.common_assumptions) text += "// assumption: " + a + "\n";
    for (const auto& a : r.assumptions) text += "// assumption: " + a + "\n";
    text += r.scenario_json + "\n";
    if (auto e = write_file_atomic(file, text)) return Error{shown + ": " + e->message};
    rep.written.push_back(file);
  }
  return std::nullopt;
}

std::string pct(double x) { return fmt::format("{:+.1f}%", 100 * x); }

ordered_json positive_or_null(double x) { return x > 0 ? ordered_json(x) : ordered_json(nullptr); }

}  // namespace

bool ValidationRow::in_band() const {
  const double implied = predicted_iteration_s * predicted_value / measured_value;
  return band_p10_s <= implied && implied <= band_p90_s;
}

double ValidationRow::memory_error() const {
  return (memory_total_bytes / kGiB - measured_peak_memory_gib) / measured_peak_memory_gib;
}

Result<ValidateReport> run_validate(const ValidateRequest& request) {
  auto text = reader::read_input_file(request.path);
  if (!text.ok()) return text.error();
  Result<ValidateReport> rep = run_validate_text(*text, request.path);
  if (!rep.ok()) return rep;
  if (!request.scenario_dir.empty()) {
    if (auto e = write_scenarios(rep.value(), request.scenario_dir)) return *e;
  }
  return rep;
}

Result<ValidateReport> run_validate_text(std::string_view text, const std::string& source) {
  const std::string shown = reader::printable(source);
  auto parsed = reader::parse_document(text);
  if (!parsed.ok()) return Error{reader::prefix_lines(shown, parsed.error().message)};
  const json& doc = *parsed;
  auto fail = [&](const std::string& m) { return Error{shown + ": " + m}; };
  if (!doc.is_object()) return fail("expected a JSON object at the top level, got " + reader::describe(doc));

  reader::Diagnostics diag;
  reader::ObjectReader top(doc, "", diag);
  top.ignore({"description", "flop_formulas"});
  if (const json* f = top.raw("format"); f && !(f->is_number_integer() && f->get<std::int64_t>() == 1)) {
    return fail("format: " + reader::describe(*f) + " is not supported (this stepcast reads format 1)");
  }
  const json* recs = top.raw("records");
  if (!recs) return fail("records: missing (required): an array of measured runs");
  if (!recs->is_array()) return fail("records: expected an array, got " + reader::describe(*recs));
  if (recs->empty()) return fail("records: empty: nothing to validate");
  top.finish();

  std::vector<Record> records = validation::read_records(doc, diag);
  if (!diag.empty()) return Error{reader::prefix_lines(shown, diag.joined())};

  ValidateReport rep;
  rep.path = source;
  rep.common_assumptions = validation::common_assumptions();
  for (Record& r : records) rep.rows.push_back(row_of(r));
  summarize(rep);
  return rep;
}

std::string validate_text(const ValidateReport& rep) {
  std::string o;
  auto line = [&](const std::string& x) { o += x + "\n"; };
  std::size_t id_w = 4, layout_w = 6;
  for (const ValidationRow& r : rep.rows) {
    id_w = std::max(id_w, r.id.size() + 2);
    layout_w = std::max(layout_w, r.layout.size() + 2);
  }
  auto val = [](double v) { return v >= 1000 ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v); };
  line("stepcast validate: predicted vs measured training runs");
  line(
      "throughput: the record's TFLOP/s per GPU under its own FLOP accounting, else tokens/s (per GPU), samples/s, "
      "model TFLOP/s or MFU;");
  line("error = (predicted - measured) / measured; '-' not measured, 'n/a' not predicted");
  line("");
  const std::string head = fmt::format("{:<{}}{:>5}  {:<{}}", "id", id_w, "GPUs", "layout", layout_w);
  line(fmt::format("{:<{}}{:<44}{:<28}{}", "", head.size(), "throughput", "iteration time, s", "peak memory, GiB"));
  line(head + fmt::format("{:<13}{:>10}{:>10}{:>9}  {:>8}{:>10}{:>8}  {:>8}{:>10}{:>8}", "metric", "measured",
                          "predicted", "error", "measured", "predicted", "error", "measured", "predicted",
                          "error"));
  for (const ValidationRow& r : rep.rows) {
    const bool mt = r.measured_value > 0, mi = r.measured_iteration_s > 0, mm = r.measured_peak_memory_gib > 0;
    const std::string na = r.feasible ? "-" : "n/a";
    std::string s = fmt::format("{:<{}}{:>5}  {:<{}}", r.id, id_w, r.gpus, r.layout, layout_w);
    s += fmt::format("{:<13}{:>10}{:>10}{:>9}  ", r.metric.empty() ? "-" : r.metric, mt ? val(r.measured_value) : "-",
                     r.feasible && mt ? val(r.predicted_value) : na,
                     r.has_throughput_error() ? pct(r.throughput_error()) : na);
    s += fmt::format("{:>8}{:>10}{:>8}  ", mi ? fmt::format("{:.2f}", r.measured_iteration_s) : "-",
                     r.feasible ? fmt::format("{:.2f}", r.predicted_iteration_s) : na,
                     r.has_iteration_error() ? pct(r.iteration_error()) : na);
    s += fmt::format("{:>8}{:>10}{:>8}", mm ? fmt::format("{:.1f}", r.measured_peak_memory_gib) : "-",
                     r.predicted ? fmt::format("{:.1f}", r.memory_total_bytes / kGiB) : "n/a",
                     r.has_memory_error() ? pct(r.memory_error()) : (r.predicted ? "-" : "n/a"));
    while (!s.empty() && s.back() == ' ') s.pop_back();
    line(s);
  }
  line("");
  if (rep.compared > 0) {
    line(
        fmt::format("throughput: {} records compared; median |error| {:.1f}%, mean |error| {:.1f}%, mean signed "
                    "error {}, within 10%: {} of {}; measured inside the predicted p10-p90 band: {} of {}",
                    rep.compared, 100 * rep.median_abs_error, 100 * rep.mean_abs_error, pct(rep.mean_error),
                    rep.within_10_percent, rep.compared, rep.within_band, rep.compared));
  } else if (rep.moe_compared > 0) {
    line("throughput: no dense record compared (the mixture-of-experts records are summarised apart)");
  } else {
    line("throughput: no feasible record with a measurement");
  }
  if (rep.moe_compared > 0) {
    line(
        fmt::format("mixture-of-experts throughput, apart (not in the line above or the band residuals): {} "
                    "record{} compared, mean signed error {}; measured inside the predicted band: {} of {}",
                    rep.moe_compared, rep.moe_compared == 1 ? "" : "s", pct(rep.moe_mean_error), rep.moe_within_band,
                    rep.moe_compared));
  }
  if (rep.iteration_compared > 0) {
    line(fmt::format("iteration time: mean |error| {:.1f}% over {} record{}", 100 * rep.iteration_mean_abs_error,
                     rep.iteration_compared, rep.iteration_compared == 1 ? "" : "s"));
  }
  if (rep.memory_compared > 0) {
    line(fmt::format("peak memory: mean error {} (mean |error| {:.1f}%) over {} record{}", pct(rep.memory_mean_error),
                     100 * rep.memory_mean_abs_error, rep.memory_compared, rep.memory_compared == 1 ? "" : "s"));
  }
  std::size_t infeasible = 0;
  for (const auto& r : rep.rows) infeasible += r.feasible ? 0 : 1;
  if (infeasible > 0) {
    line("");
    line("Not predicted (stepcast cannot express the record, or its layout does not run)");
    for (const auto& r : rep.rows) {
      if (!r.feasible) line(fmt::format("  {}: {}", r.id, r.reason));
    }
  }
  line("");
  line("Predicted step (share of step time) and worst-stage memory");
  line("(attn: the attention core's kernels, part of compute; ep, cp: exposed all-to-all and ring exchange;");
  line(" host: the GPU waiting for the host)");
  line(fmt::format("{:<{}}{:>9}{:>9}{:>7}{:>7}{:>7}{:>7}{:>7}{:>7}{:>8}{:>7}{:>7}{:>14}", "id", id_w, "step s",
                   "compute", "attn", "tp", "dp", "pp", "ep", "cp", "bubble", "optim", "host", "memory GiB"));
  for (const auto& r : rep.rows) {
    if (!r.predicted) continue;
    const double t = r.predicted_iteration_s;
    auto share = [&](double x) { return fmt::format("{:.1f}%", 100 * x / t); };
    line(fmt::format("{:<{}}{:>9.2f}{:>9}{:>7}{:>7}{:>7}{:>7}{:>7}{:>7}{:>8}{:>7}{:>7}{:>14}", r.id, id_w, t,
                     share(r.compute_s), share(r.attention_s), share(r.tp_s), share(r.dp_s), share(r.pp_s),
                     share(r.ep_s), share(r.cp_s), share(r.bubble_s), share(r.optimizer_s), share(r.host_s),
                     fmt::format("{:.1f}/{:.1f}", r.memory_total_bytes / kGiB, r.memory_usable_bytes / kGiB)));
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

std::string validate_json(const ValidateReport& rep) {
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
    x["predicted"] = r.predicted;
    x["feasible"] = r.feasible;
    x["reason"] = r.reason.empty() ? ordered_json(nullptr) : ordered_json(r.reason);
    x["metric"] = r.metric.empty() ? ordered_json(nullptr) : ordered_json(r.metric);
    x["measured"] = {{"value", positive_or_null(r.measured_value)},
                     {"tflops_per_gpu", positive_or_null(r.measured_tflops)},
                     {"iteration_time_s", positive_or_null(r.measured_iteration_s)},
                     {"samples_per_s", positive_or_null(r.measured_samples_per_s)},
                     {"tokens_per_s", positive_or_null(r.measured_tokens_per_s)},
                     {"tokens_per_s_per_gpu", positive_or_null(r.measured_tokens_per_s_per_gpu)},
                     {"model_tflops_per_gpu", positive_or_null(r.measured_model_tflops)},
                     {"mfu", positive_or_null(r.measured_mfu)},
                     {"peak_memory_gib", positive_or_null(r.measured_peak_memory_gib)}};
    if (r.predicted) {
      x["prediction"] = {
          {"value", r.metric.empty() ? ordered_json(nullptr) : ordered_json(r.predicted_value)},
          {"tflops_per_gpu", r.predicted_tflops},
          {"iteration_time_s", r.predicted_iteration_s},
          {"iteration_time_band_s", {{"p10", r.band_p10_s}, {"p90", r.band_p90_s}}},
          {"samples_per_s", r.predicted_samples_per_s},
          {"tokens_per_s", r.predicted_tokens_per_s},
          {"peak_memory_gib", r.memory_total_bytes / kGiB},
          {"accounting", r.accounting},
          {"accounting_flops_per_step", r.accounting_flops_per_step},
          {"stepcast_mfu", r.stepcast_mfu},
          {"stepcast_hfu", r.stepcast_hfu},
          {"breakdown_s",
           {{"compute", r.compute_s},
            {"attention_core", r.attention_s},
            {"exposed_tp", r.tp_s},
            {"exposed_ep", r.ep_s},
            {"exposed_cp", r.cp_s},
            {"exposed_dp", r.dp_s},
            {"exposed_pp", r.pp_s},
            {"bubble", r.bubble_s},
            {"optimizer", r.optimizer_s},
            {"host", r.host_s}}},
          {"memory_bytes",
           {{"total", std::llround(r.memory_total_bytes)}, {"usable", std::llround(r.memory_usable_bytes)}}}};
    } else {
      x["prediction"] = nullptr;
    }
    x["error"] = {
        {"throughput", r.has_throughput_error() ? ordered_json(r.throughput_error()) : ordered_json(nullptr)},
        {"iteration_time_s", r.has_iteration_error() ? ordered_json(r.iteration_error()) : ordered_json(nullptr)},
        {"peak_memory", r.has_memory_error() ? ordered_json(r.memory_error()) : ordered_json(nullptr)}};
    x["in_band"] = r.has_throughput_error() ? ordered_json(r.in_band()) : ordered_json(nullptr);
    x["assumptions"] = r.assumptions;
    rows.push_back(std::move(x));
  }
  j["records"] = std::move(rows);
  auto or_null = [](int n, double v) { return n > 0 ? ordered_json(v) : ordered_json(nullptr); };
  j["summary"] = {{"compared", rep.compared},
                  {"median_abs_error", or_null(rep.compared, rep.median_abs_error)},
                  {"mean_abs_error", or_null(rep.compared, rep.mean_abs_error)},
                  {"mean_error", or_null(rep.compared, rep.mean_error)},
                  {"within_10_percent", rep.within_10_percent},
                  {"within_band", rep.within_band},
                  {"moe_compared", rep.moe_compared},
                  {"moe_within_band", rep.moe_within_band},
                  {"moe_mean_error", or_null(rep.moe_compared, rep.moe_mean_error)},
                  {"iteration_compared", rep.iteration_compared},
                  {"iteration_mean_abs_error", or_null(rep.iteration_compared, rep.iteration_mean_abs_error)},
                  {"memory_compared", rep.memory_compared},
                  {"memory_mean_error", or_null(rep.memory_compared, rep.memory_mean_error)},
                  {"memory_mean_abs_error", or_null(rep.memory_compared, rep.memory_mean_abs_error)}};
  return j.dump(2) + "\n";
}

}  // namespace stepcast::app
