#include "stepcast/planner/report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/models/band.h"
#include "stepcast/models/names.h"
#include "stepcast/planner/layout.h"

namespace stepcast::planner {

namespace {

using ojson = nlohmann::ordered_json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// 1234567 -> "1,234,567" (locale-free, so reports are the same everywhere).
std::string grouped(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string objective_words(Objective o) {
  switch (o) {
    case Objective::kTimeToTrain: return "time to train";
    case Objective::kTokensPerS: return "tokens/s";
    case Objective::kCost: return "cost";
  }
  return "?";
}

std::string schedule_cell(const Plan& p) {
  if (p.schedule == Schedule::kInterleaved) {
    // ":vN/gG" when the microbatches run in groups other than pp (microbatch_group_size_per_vp_stage).
    if (p.microbatch_group > 0) return fmt::format("interleaved:{}/g{}", p.virtual_stages, p.microbatch_group);
    return fmt::format("interleaved:{}", p.virtual_stages);
  }
  return schedule_name(p.schedule);
}

// "full:N" when only the first N layers of each chunk recompute (plan.recompute_num_layers),
// "full/G" when every layer recomputes in groups of G (recompute_method "uniform").
std::string recompute_cell(const Plan& p) {
  if (p.partial_full_recompute()) return fmt::format("full:{}", p.recompute_num_layers);
  if (p.recompute_group() > 1) return fmt::format("full/{}", p.recompute_group());
  return recompute_name(p.recompute);
}

std::string money(double dollars) {
  if (dollars >= 1e6) return fmt::format("{:.2f}M", dollars / 1e6);
  if (dollars >= 1e3) return fmt::format("{:.1f}k", dollars / 1e3);
  return fmt::format("{:.0f}", dollars);
}


bool has_train(const Scenario& s) { return s.workload.train_tokens > 0; }

// The bands of one row's figures (docs/planner.md, "Bands"): tokens/s from the step band
// (band.h rate_band); time to train and cost scale with the step time at the row's goodput.
struct RowBands {
  Band tokens_per_s, time_to_train_s, cost;
};

RowBands row_bands(const Candidate& x) {
  const Figures& f = x.figures();
  RowBands b;
  if (!(f.step_time_s > 0)) return b;
  b.tokens_per_s = rate_band(x.step_time_band, f.step_time_s, f.tokens_per_s);
  const double lo = x.step_time_band.p10 / f.step_time_s, hi = x.step_time_band.p90 / f.step_time_s;
  b.time_to_train_s = Band{f.time_to_train_s * lo, f.time_to_train_s * hi};
  b.cost = Band{f.cost * lo, f.cost * hi};
  return b;
}

ojson band_json(const Band& b, double unit = 1.0) { return {{"p10", b.p10 / unit}, {"p90", b.p90 / unit}}; }

struct Columns {
  bool train = false, cost = false, failures = false;
  bool stack = false;  // more than one stack searched
  bool etp = false;      // a ranked layout folds its experts (etp != tp)
  bool dispatcher = false;  // more than one MoE token dispatcher searched
  bool offload = false;  // a ranked layout offloads
  bool modules = false;  // a ranked layout recomputes modules other than the default set
};

Columns columns_of(const Scenario& s, const PlanResult& r) {
  Columns c;
  c.train = has_train(s);
  c.cost = r.search.price_per_gpu_hour > 0 && c.train;
  c.failures = s.faults.failures.has_value();
  c.stack = r.search.stack.size() > 1;
  c.dispatcher = r.search.moe_dispatcher.size() > 1;
  for (const Candidate& x : r.ranked) {
    c.etp = c.etp || x.plan.expert_tp() != x.plan.tp;
    c.offload = c.offload || x.plan.offloads();
    c.modules = c.modules ||
                (x.plan.recompute == Recompute::kSelective && x.plan.recompute_modules != kDefaultRecomputeModules);
  }
  return c;
}

// The time to train and cost of one row with their bands, keys prefixed ("" or "best_").
void train_cost_json(ojson& j, const std::string& prefix, const Figures& f, const RowBands& bands, const Columns& c) {
  if (c.train) {
    j[prefix + "time_to_train_h"] = f.time_to_train_s / 3600.0;
    j[prefix + "time_to_train_band_h"] = band_json(bands.time_to_train_s, 3600.0);
  }
  if (c.cost) {
    j[prefix + "cost"] = f.cost;
    j[prefix + "cost_band"] = band_json(bands.cost);
  }
}

std::string table_header(const Columns& c) {
  std::string h = fmt::format(" {:>5}  {:>6} {:>3} {:>3} {:>4} {:>3} {:>3} {:>3}  {:<14} {:>3} {:>6} {:>4}  {:<9}  {:>8} {:>8}  {:>10} {:>6}  {:>11} {:>6}",
                              "rank", "GPUs", "tp", "pp", "dp", "cp", "ep", "sp", "schedule", "mb", "gb", "zero",
                              "recompute", "step s", "closed", "tokens/s", "MFU", "mem GiB", "spare");
  if (c.failures) h += fmt::format("  {:>7} {:>6}", "goodput", "ckpt s");
  if (c.train) h += fmt::format("  {:>8}", "train d");
  if (c.cost) h += fmt::format("  {:>9}", "cost $");
  if (c.stack) h += fmt::format("  {:<14}", "stack");
  if (c.etp) h += fmt::format("  {:>3}", "etp");
  if (c.dispatcher) h += fmt::format("  {:<10}", "dispatcher");
  if (c.offload) h += fmt::format("  {:<14}", "offload o/a/w");
  if (c.modules) h += fmt::format("  {}", "recomputed modules");
  return h + "\n";
}

std::string table_row(const Columns& c, std::size_t rank, const Candidate& x) {
  const Plan& p = x.plan;
  const Figures& f = x.figures();
  std::string row = fmt::format(
      " {:>5}  {:>6} {:>3} {:>3} {:>4} {:>3} {:>3} {:>3}  {:<14} {:>3} {:>6} {:>4}  {:<9}  {:>8.3f} {:>8}  {:>10} "
      "{:>5.1f}%  {:>11} {:>6.1f}",
      fmt::format("{}{}", rank + 1, x.ties_best ? "~" : ""), p.world(), p.tp, p.pp, p.dp, p.cp, p.ep,
      p.sequence_parallel ? (p.tp_comm_overlap ? "ovl" : "on") : "-", schedule_cell(p), p.microbatch, p.global_batch,
      p.zero, recompute_cell(p), f.step_time_s,
      x.simulated ? fmt::format("{:.3f}", x.closed.step_time_s) : std::string("="),
      grouped(std::llround(f.tokens_per_s)), f.mfu * 100,
      fmt::format("{:.1f}/{:.1f}", x.peak_bytes() / kGiB, x.usable_bytes / kGiB), x.spare_bytes() / kGiB);
  if (c.failures) row += fmt::format("  {:>6.2f}% {:>6.0f}", f.goodput * 100, f.checkpoint_interval_s);
  if (c.train) row += fmt::format("  {:>8.1f}", f.time_to_train_s / 86400.0);
  if (c.cost) row += fmt::format("  {:>9}", money(f.cost));
  if (c.stack) row += fmt::format("  {:<14}", to_string(p.stack));
  if (c.etp) row += fmt::format("  {:>3}", p.expert_tp());
  if (c.dispatcher) row += fmt::format("  {:<10}", to_string(p.moe_dispatcher));
  if (c.offload) {
    row += fmt::format("  {:<14}", p.offloads() ? fmt::format("{:g}/{:g}/{:g}", p.offload_optimizer,
                                                             p.offload_activations, p.offload_weights)
                                                : "-");
  }
  if (c.modules) {
    row +=
        "  " + (p.recompute == Recompute::kSelective ? recompute_modules_text(p.recompute_modules) : std::string("-"));
  }
  return row + "\n";
}

ojson row_json(std::size_t rank, const Candidate& x, const Columns& c) {
  const Figures& f = x.figures();
  ojson j;
  j["rank"] = rank + 1;
  j["layout"] = layout_string(x.plan);
  j["gpus"] = x.gpus();
  j["stack"] = to_string(x.plan.stack);
  j["simulated"] = x.simulated;
  j["step_time_s"] = f.step_time_s;
  j["closed_form_step_time_s"] = x.closed.step_time_s;
  j["step_time_band_s"] = {{"p10", x.step_time_band.p10}, {"p90", x.step_time_band.p90}};
  j["ties_best"] = x.ties_best;
  const RowBands bands = row_bands(x);
  j["tokens_per_s"] = f.tokens_per_s;
  j["tokens_per_s_band"] = band_json(bands.tokens_per_s);
  j["mfu"] = f.mfu;
  j["memory_bytes"] = x.peak_bytes();
  j["closed_form_memory_bytes"] = x.memory_bytes;
  j["usable_bytes"] = x.usable_bytes;
  j["spare_bytes"] = x.spare_bytes();
  if (c.failures) {
    j["goodput"] = f.goodput;
    j["checkpoint_mode"] = to_string(f.checkpoint_mode);
    j["checkpoint_interval_steps"] = f.checkpoint_interval_steps;
    j["checkpoint_interval_s"] = f.checkpoint_interval_s;
    j["checkpoint_pause_s"] = f.checkpoint_pause_s;
    j["checkpoint_bytes"] = x.checkpoint_bytes;
    j["restore_s"] = f.restore_s;
  }
  train_cost_json(j, "", f, bands, c);
  return j;
}

ojson counts_json(const SpaceCounts& c) {
  ojson j;
  j["space"] = c.size;
  j["feasible"] = c.feasible;
  j["estimated"] = c.estimated;
  ojson rej = ojson::object();
  for (int i = 0; i < kRejectReasons; ++i) rej[reject_key(static_cast<Reject>(i))] = c.rejected[static_cast<std::size_t>(i)];
  j["rejected"] = rej;
  return j;
}

std::string list_of_ints(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

}  // namespace

std::string plan_report_text(const Scenario& s, const PlanResult& r, const ReportOptions& o) {
  const Columns cols = columns_of(s, r);
  std::string out = fmt::format("stepcast plan: {}\n\n", s.name);
  std::string gbs;
  for (std::int64_t g : r.search.global_batch) gbs += (gbs.empty() ? "" : ", ") + grouped(g);
  out += fmt::format("Searched   {} GPUs ({} GPUs per node, {}); global batch {} x {} tokens{}\n",
                     list_of_ints(r.search.gpus), s.cluster.gpus_per_node, s.cluster.gpu.name, gbs,
                     grouped(s.workload.seq_len),
                     r.search.allow_tp_across_nodes ? "; TP may span nodes" : "; TP inside a node");
  if (cols.stack) {
    std::string names;
    for (Stack st : r.search.stack) names += (names.empty() ? "" : ", ") + std::string(to_string(st));
    out += fmt::format("Stacks     {} (each layout under each)\n", names);
  }
  std::string objective = fmt::format("Objective  {}", objective_words(r.objective));
  if (cols.train) objective += fmt::format(" of {:.4g} tokens", s.workload.train_tokens);
  if (cols.failures) {
    objective += fmt::format(" with failures ({}; a checkpoint interval per layout)", s.faults.failures->name);
  } else if (cols.train) {
    objective += " (no failure model: failure-free)";
  }
  if (cols.cost) objective += fmt::format(", at ${:.2f} per GPU-hour", r.search.price_per_gpu_hour);
  out += objective + "\n";
  out += fmt::format("Space      {} layouts: {} ranked, {} rejected\n", grouped(r.counts.size),
                     grouped(r.counts.feasible), grouped(r.counts.rejected_total()));
  for (int i = 0; i < kRejectReasons; ++i) {
    const std::int64_t n = r.counts.rejected[static_cast<std::size_t>(i)];
    if (n == 0) continue;
    const Reject reason = static_cast<Reject>(i);
    std::string text = reject_text(reason);
    if (reason == Reject::kMemory) {
      text += fmt::format(" ({:.0f}% of HBM kept free", s.plan.memory_headroom * 100);
      if (!r.engine_rejected.empty()) {
        text += fmt::format("; {} of them fit by the closed form but not by the engine's simulated peak",
                            r.engine_rejected.size());
      }
      text += ")";
    }
    if (reason == Reject::kTpAcrossNodes) text += " (search.allow_tp_across_nodes is false)";
    out += fmt::format("  {:>13}  {}\n", grouped(n), text);
  }
  if (r.sweep.size() > 1) {
    out += fmt::format("\nSweep  {:>6} {:>7} {:>9} {:>8} {:>11}{}{}  best layout of each\n", "GPUs", "batch", "layouts",
                       "ranked", "tokens/s", cols.train ? fmt::format(" {:>8}", "train d") : "",
                       cols.cost ? fmt::format(" {:>9}", "cost $") : "");
    for (const SweepCounts& sw : r.sweep) {
      const Candidate* best = nullptr;
      for (const Candidate& c : r.ranked) {
        if (c.gpus() == sw.gpus && c.plan.global_batch == sw.global_batch) {
          best = &c;
          break;
        }
      }
      out += fmt::format("       {:>6} {:>7} {:>9} {:>8}", sw.gpus, grouped(sw.global_batch), grouped(sw.counts.size),
                         grouped(sw.counts.feasible));
      if (!best) {
        out += "           -  (nothing fits)\n";
        continue;
      }
      const Figures& f = best->figures();
      out += fmt::format(" {:>11}", grouped(std::llround(f.tokens_per_s)));
      if (cols.train) out += fmt::format(" {:>8.1f}", f.time_to_train_s / 86400.0);
      if (cols.cost) out += fmt::format(" {:>9}", money(f.cost));
      out += "  " + layout_string(best->plan) + "\n";
    }
  }
  if (r.ranked.empty()) {
    out += "\nNo layout fits. `stepcast plan SCENARIO --explain LAYOUT` says what does not fit and by how much.\n";
    return out;
  }
  out += fmt::format("\nRanked by {}", objective_words(r.objective));
  if (r.simulated > 0) {
    out += fmt::format(": #1-#{} re-simulated with the event engine and re-ranked (\"closed\": the closed form's "
                       "step), the rest by the closed form\n",
                       r.simulated);
  } else {
    out += " (closed form)\n";
  }
  out += table_header(cols);
  const std::size_t rows = std::min(r.ranked.size(), static_cast<std::size_t>(std::max(o.rows, 0)));
  for (std::size_t i = 0; i < rows; ++i) out += table_row(cols, i, r.ranked[i]);
  if (rows < r.ranked.size()) out += fmt::format("  ... {} more (--top N, --csv FILE)\n", grouped(static_cast<std::int64_t>(r.ranked.size() - rows)));
  if (!r.ranked.empty()) {
    const Candidate& best = r.ranked.front();
    const RowBands bands = row_bands(best);
    out += fmt::format("#1's step: {:.3f} s, band p10-p90 {:.3f} - {:.3f} s; tokens/s {} - {}", best.figures().step_time_s,
                       best.step_time_band.p10, best.step_time_band.p90,
                       grouped(std::llround(bands.tokens_per_s.p10)), grouped(std::llround(bands.tokens_per_s.p90)));
    if (cols.train) {
      out += fmt::format("; time to train {:.1f} - {:.1f} d", bands.time_to_train_s.p10 / 86400.0,
                         bands.time_to_train_s.p90 / 86400.0);
    }
    if (cols.cost) out += fmt::format("; cost ${} - ${}", money(bands.cost.p10), money(bands.cost.p90));
    out += ". ";
    out += r.ties_with_best == 0
               ? std::string("No other layout ties with #1.\n")
               : fmt::format("\"~\": {} layout{} tie{} with #1 (the difference is within what their step make-up "
                             "leaves uncertain; docs/planner.md)\n",
                             r.ties_with_best, r.ties_with_best == 1 ? "" : "s", r.ties_with_best == 1 ? "s" : "");
  }

  // The front can hold hundreds of layouts (JSON and CSV list them all). The text shows,
  // per GPU count, the fastest point and the fastest with at least 10% and 25% of the HBM
  // spare (the front trades time for spare memory, down to layouts nobody would run).
  out += fmt::format("\nPareto front (fewer GPUs, shorter {}, more spare memory): {} layouts; per GPU count the "
                     "fastest, and the fastest with 10% and 25% of HBM spare\n",
                     cols.train ? "time to train" : "time per token", r.pareto.size());
  out += table_header(cols);
  for (std::size_t k = 0; k < r.pareto.size();) {
    std::size_t end = k;
    while (end < r.pareto.size() && r.ranked[r.pareto[end]].gpus() == r.ranked[r.pareto[k]].gpus()) ++end;
    std::size_t last = r.pareto.size();  // the last row printed
    for (double share : {0.0, 0.10, 0.25}) {
      for (std::size_t i = k; i < end; ++i) {
        const Candidate& c = r.ranked[r.pareto[i]];
        if (c.spare_bytes() >= share * c.capacity_bytes) {
          if (i != last) out += table_row(cols, r.pareto[i], c);
          last = i;
          break;
        }
      }
    }
    k = end;
  }
  const Candidate& best = r.ranked.front();
  out += fmt::format("\nBest       {} on {} GPUs\n", layout_string(best.plan), best.gpus());
  if (r.best_by_tokens != 0) {
    out += fmt::format("Fastest    {} (most tokens/s, rank {})\n", layout_string(r.ranked[r.best_by_tokens].plan),
                       r.best_by_tokens + 1);
  }
  if (r.search.plan_is_layout) {
    if (r.scenario_layout) {
      out += fmt::format("Scenario   {}: rank {} of {}\n", layout_string(r.ranked[*r.scenario_layout].plan),
                         *r.scenario_layout + 1,
                         grouped(static_cast<std::int64_t>(r.ranked.size())));
    } else {
      out += fmt::format("Scenario   {}: not ranked (--explain shows why)\n", layout_string(s.plan));
    }
  }
  for (const std::string& n : r.notes) out += "Note       " + n + "\n";
  out += "Explain    stepcast plan SCENARIO --explain \"tp=8,pp=2,...\" (why rejected, or rank and limits)\n";
  return out;
}

std::string plan_report_json(const Scenario& s, const PlanResult& r, const ReportOptions& o) {
  return plan_report_value(s, r, o).dump(2) + "\n";
}

nlohmann::ordered_json plan_report_value(const Scenario& s, const PlanResult& r, const ReportOptions& o) {
  const Columns cols = columns_of(s, r);
  ojson j;
  j["format"] = 1;
  j["scenario"] = s.name;
  j["objective"] = objective_name(r.objective);
  ojson search;
  search["gpus"] = r.search.gpus;
  search["global_batch"] = r.search.global_batch;
  search["allow_tp_across_nodes"] = r.search.allow_tp_across_nodes;
  {
    ojson stacks = ojson::array();
    if (r.search.stack.empty()) stacks.push_back(to_string(s.plan.stack));
    for (Stack st : r.search.stack) stacks.push_back(to_string(st));
    search["stack"] = stacks;
  }
  if (s.model.moe) {
    ojson dispatchers = ojson::array();
    if (r.search.moe_dispatcher.empty()) dispatchers.push_back(to_string(s.plan.moe_dispatcher));
    for (MoeDispatcher d : r.search.moe_dispatcher) dispatchers.push_back(to_string(d));
    search["moe_dispatcher"] = dispatchers;
  }
  if (!r.search.recompute_num_layers.empty() || r.search.recompute_num_layers_fit) {
    // As given: the counts, then "fit" (the fewest that fit, per layout).
    ojson counts = ojson::array();
    for (int n : r.search.recompute_num_layers) counts.push_back(n);
    if (r.search.recompute_num_layers_fit) counts.push_back("fit");
    search["recompute_num_layers"] = counts;
  }
  if (!r.search.recompute_modules.empty()) {
    ojson sets = ojson::array();
    for (std::uint32_t set : r.search.recompute_modules) sets.push_back(recompute_module_names(set));
    search["recompute_modules"] = sets;
  }
  if (!r.search.recompute_method.empty()) {
    ojson methods = ojson::array();
    for (RecomputeMethod m : r.search.recompute_method) methods.push_back(name_of(m));
    search["recompute_method"] = methods;
  }
  search["top_k"] = r.top_k;
  search["simulated"] = r.simulated;
  search["memory_headroom"] = s.plan.memory_headroom;
  if (r.search.price_per_gpu_hour > 0) search["price_per_gpu_hour"] = r.search.price_per_gpu_hour;
  j["search"] = search;
  j["plan_space"] = r.counts.size;
  j["plan_feasible"] = r.counts.feasible;
  j["counts"] = counts_json(r.counts);
  ojson sweep = ojson::array();
  for (const SweepCounts& sw : r.sweep) {
    ojson e;
    e["gpus"] = sw.gpus;
    e["global_batch"] = sw.global_batch;
    e.update(counts_json(sw.counts));
    sweep.push_back(e);
  }
  j["sweep"] = sweep;
  if (!r.ranked.empty()) {
    const Candidate& best = r.ranked.front();
    const Figures& f = best.figures();
    j["best_layout"] = layout_string(best.plan);
    j["best_gpus"] = best.gpus();
    j["best_step_time_s"] = f.step_time_s;
    const RowBands bands = row_bands(best);
    j["best_step_time_band_s"] = band_json(best.step_time_band);
    j["ties_with_best"] = r.ties_with_best;
    j["best_tokens_per_s"] = f.tokens_per_s;
    j["best_tokens_per_s_band"] = band_json(bands.tokens_per_s);
    j["best_mfu"] = f.mfu;
    j["best_goodput"] = f.goodput;
    train_cost_json(j, "best_", f, bands, cols);
    j["best_layout_by_tokens_per_s"] = layout_string(r.ranked[r.best_by_tokens].plan);
  }
  if (r.scenario_layout) j["plan_layout_rank"] = *r.scenario_layout + 1;
  ojson ranked = ojson::array();
  const std::size_t rows = std::min(r.ranked.size(), static_cast<std::size_t>(std::max(o.rows, 0)));
  for (std::size_t i = 0; i < rows; ++i) ranked.push_back(row_json(i, r.ranked[i], cols));
  j["ranked"] = ranked;
  ojson pareto = ojson::array();
  for (std::size_t i : r.pareto) pareto.push_back(row_json(i, r.ranked[i], cols));
  j["pareto"] = pareto;
  j["notes"] = r.notes;
  return j;
}

std::string plan_report_csv(const PlanResult& r) {
  std::string out =
      "rank,layout,gpus,tp,pp,dp,cp,ep,sp,schedule,virtual_stages,microbatch,global_batch,zero,recompute,"
      "simulated,step_time_s,closed_form_step_time_s,tokens_per_s,mfu,memory_bytes,usable_bytes,goodput,"
      "checkpoint_mode,checkpoint_interval_s,checkpoint_pause_s,restore_s,time_to_train_h,cost,pareto,stack,"
      "recompute_num_layers,recompute_method,recompute_modules\n";
  std::vector<char> front(r.ranked.size(), 0);
  for (std::size_t i : r.pareto) front[i] = 1;
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const Candidate& c = r.ranked[i];
    const Plan& p = c.plan;
    const Figures& f = c.figures();
    // The layout string holds commas: quoted (RFC 4180).
    out += fmt::format(
        "{},\"{}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.6g},{:.0f},{:.0f},"
        "{:.6g},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},{},{}\n",
        i + 1, layout_string(p), p.world(), p.tp, p.pp, p.dp, p.cp, p.ep, p.sequence_parallel ? "true" : "false",
        schedule_name(p.schedule), p.virtual_stages, p.microbatch, p.global_batch, p.zero, recompute_name(p.recompute),
        c.simulated ? "true" : "false", f.step_time_s, c.closed.step_time_s, f.tokens_per_s, f.mfu, c.peak_bytes(),
        c.usable_bytes, f.goodput, to_string(f.checkpoint_mode), f.checkpoint_interval_s, f.checkpoint_pause_s,
        f.restore_s, f.time_to_train_s / 3600.0, f.cost, front[i] ? "true" : "false", to_string(p.stack),
        p.recompute_count(), p.recompute_group() > 1 ? "uniform" : "block",
        p.recompute == Recompute::kSelective ? recompute_modules_text(p.recompute_modules) : std::string());
  }
  return out;
}

std::string explanation_text(const PlanResult& r, const Explanation& e) {
  std::string out = fmt::format("Layout     {} on {} GPUs\n", e.layout, e.plan.world());
  for (const std::string& why : e.folded) out += "Folded     " + why + "\n";
  for (const std::string& why : e.outside) out += "Outside    " + why + "\n";
  if (e.rejected) {
    out += fmt::format("Rejected   {} (counted as \"{}\")\n", reject_text(*e.rejected), reject_key(*e.rejected));
    for (const std::string& p : e.problems) out += "  " + p + "\n";
    return out;
  }
  const Candidate& c = *e.evaluated;
  const Figures& f = c.figures();
  const std::string of = grouped(static_cast<std::int64_t>(r.ranked.size()));
  if (e.outside.empty()) {
    out += fmt::format("Rank       {} of {} by {}{}\n", *e.rank + 1, of, objective_words(r.objective),
                       c.simulated ? " (re-simulated with the event engine)" : " (closed form)");
  } else {
    out += fmt::format("Rank       would be {} of {} by {} (closed form)\n", *e.rank + 1, of, objective_words(r.objective));
  }
  out += fmt::format("Figures    step {:.3f} s, {} tokens/s, MFU {:.1f}%", f.step_time_s,
                     grouped(std::llround(f.tokens_per_s)), f.mfu * 100);
  if (f.time_to_train_s > 0) out += fmt::format(", time to train {:.1f} days", f.time_to_train_s / 86400.0);
  if (f.cost > 0) out += fmt::format(", cost ${}", money(f.cost));
  out += "\n";
  for (const std::string& l : e.limits) out += "Limits     " + l + "\n";
  return out;
}

std::string explanation_json(const PlanResult& r, const Explanation& e) {
  ojson j;
  j["format"] = 1;
  j["layout"] = e.layout;
  j["gpus"] = e.plan.world();
  j["folded"] = e.folded;
  j["in_space"] = e.outside.empty();
  j["outside"] = e.outside;
  if (e.rejected) {
    j["rejected"] = reject_key(*e.rejected);
    j["problems"] = e.problems;
  } else {
    const Candidate& c = *e.evaluated;
    const Figures& f = c.figures();
    j["rank"] = *e.rank + 1;
    j["ranked"] = r.ranked.size();
    j["simulated"] = c.simulated;
    j["step_time_s"] = f.step_time_s;
    j["tokens_per_s"] = f.tokens_per_s;
    j["mfu"] = f.mfu;
    j["goodput"] = f.goodput;
    if (f.time_to_train_s > 0) j["time_to_train_h"] = f.time_to_train_s / 3600.0;
    if (f.cost > 0) j["cost"] = f.cost;
    j["memory_bytes"] = c.peak_bytes();
    j["usable_bytes"] = c.usable_bytes;
    j["limits"] = e.limits;
  }
  return j.dump(2) + "\n";
}

}  // namespace stepcast::planner
