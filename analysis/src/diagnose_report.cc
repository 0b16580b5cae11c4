#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/analysis/diagnose.h"
#include "stepcast/analysis/format.h"

namespace stepcast::analysis {

namespace {

nlohmann::json breakdown_json(const RankBreakdown& b) {
  nlohmann::json j = nlohmann::json::object();
  j["compute"] = b.compute;
  j["exposed_comm"] = b.exposed_comm();
  j["bubble"] = b.bubble;
  j["wait"] = b.wait;
  j["optimizer"] = b.optimizer;
  j["input"] = b.input;
  j["host"] = b.host;
  return j;
}

// The outlier table of the text report.
void outlier_table(const Diagnosis& d, std::string& o) {
  auto line = [&](const std::string& x) { o += x + "\n"; };
  const DiagnoseOptions& t = d.options;
  line(fmt::format("Outlier ranks (vs the median of their pipeline stage, each step: robust z >= {:g} and compute "
                   ">= {:g} % above,",
                   t.z_threshold, 100 * t.min_compute_excess));
  line(fmt::format("or arrival >= {:g} % of a step behind the group's median; flagged in >= {} steps)",
                   100 * t.min_lateness_step_fraction, std::max(1, std::min(t.min_outlier_steps, d.steps))));
  if (d.outliers.empty()) {
    line("  none");
  } else {
    line(fmt::format("  {:>5} {:>5} {:>5} {:>10} {:>10} {:>8} {:>8} {:>6} {:>9}  {}", "rank", "node", "stage", "compute s",
                     "median s", "excess", "steps", "late", "late s", "wait caused per step (mean per peer)"));
    for (const OutlierRank& x : d.outliers) {
      std::string caused;
      for (const CausedWait& c : x.caused) {
        caused += fmt::format("{}{} {:.4f} s", caused.empty() ? "" : ", ", to_string(c.group), c.per_peer_s);
      }
      line(fmt::format("  {:>5} {:>5} {:>5} {:>10.4f} {:>10.4f} {:>+7.1f}% {:>8} {:>6} {:>9.4f}  {}", x.rank, x.node,
                       x.stage, x.compute_s, x.median_compute_s, 100 * x.compute_excess,
                       fmt::format("{}/{}", x.compute_steps, x.steps), x.late_steps, x.lateness_s,
                       caused.empty() ? "-" : caused));
    }
  }
}

// The input-stall table of the text report.
void stall_table(const Diagnosis& d, std::string& o) {
  auto line = [&](const std::string& x) { o += x + "\n"; };
  const DiagnoseOptions& t = d.options;
  line(fmt::format("Input stalls per host (input time vs the median of all hosts and steps: robust z >= {:g}, "
                   ">= {:g} % above it and >= {:g} % of a step)",
                   t.z_threshold, 100 * t.min_stall_input_fraction, 100 * t.min_stall_step_fraction));
  if (d.stalls.empty()) {
    line("  none");
  } else {
    line(fmt::format("  {:>5}  {:<12} {:<16} {:>9} {:>10} {:>10} {:>12}", "host", "ranks", "stalled steps", "period",
                     "excess s", "per step s", "peers wait s"));
    for (const InputStall& s : d.stalls) {
      line(fmt::format("  {:>5}  {:<12} {:<16} {:>9} {:>10.4f} {:>10.4f} {:>12.4f}", s.node, rank_ranges(s.ranks),
                       join_ints(s.stalled_steps, ","), s.period > 0 ? fmt::format("every {}", s.period) : "-",
                       s.excess_s, s.per_step_s, s.peers_wait_s));
    }
  }
}

// The slow-link table of the text report (only when there is one).
void link_table(const Diagnosis& d, std::string& o) {
  auto line = [&](const std::string& x) { o += x + "\n"; };
  line(fmt::format("Slow links (a group's transfers vs the same collective in the other groups of its kind: >= {:g}x "
                   "and robust z >= {:g})",
                   d.options.min_link_slowdown, d.options.z_threshold));
  line(fmt::format("  {:<12} {:<6} {:<24} {:>9} {:>8}", "ranks", "group", "members", "slowdown", "steps"));
  for (const SlowLink& l : d.links) {
    for (const SlowGroup& g : l.groups) {
      line(fmt::format("  {:<12} {:<6} {:<24} {:>8.2f}x {:>8}", rank_ranges(l.ranks), to_string(g.group),
                       rank_ranges(g.members), g.slowdown, fmt::format("{}/{}", g.steps, d.steps)));
    }
  }
}

}  // namespace

std::string diagnosis_json(const Diagnosis& d) { return diagnosis_value(d).dump(2) + "\n"; }

nlohmann::ordered_json diagnosis_value(const Diagnosis& d) {
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["command"] = "diagnose";
  j["source"] = d.source;
  j["input"] = d.input;
  j["mode"] = d.mode;
  j["world"] = d.world;
  j["ranks_analysed"] = d.ranks_analysed;
  j["steps"] = d.steps;
  if (d.input == "scenario") j["seed"] = d.seed;
  j["healthy"] = !d.problem();
  j["hang"] = d.hang;
  j["mismatch"] = !d.mismatches.empty();
  if (!d.hang) {
    j["outlier_ranks"] = d.outlier_list();
    j["stalling_hosts"] = d.stalling_list();
    j["slow_link_ranks"] = d.link_list();
  }
  j["resume_missing"] = d.resume ? d.resume->missing_list() : "";
  if (d.hang) {
    j["hang_report"] = d.hang_report;
    j["mismatches"] = d.mismatches;
  } else {
    j["step_time_s"] = d.step_time_s;
    if (d.step_time_band) j["step_time_band_s"] = {{"p10", d.step_time_band->p10}, {"p90", d.step_time_band->p90}};
    j["step_times_s"] = d.step_times_s;
    nlohmann::ordered_json outs = nlohmann::ordered_json::array();
    for (const OutlierRank& o : d.outliers) {
      nlohmann::ordered_json caused = nlohmann::ordered_json::array();
      for (const CausedWait& c : o.caused) {
        caused.push_back({{"group", to_string(c.group)}, {"group_size", c.group_size}, {"per_peer_s", c.per_peer_s},
                          {"summed_s", c.summed_s}});
      }
      outs.push_back({{"rank", o.rank}, {"node", o.node}, {"stage", o.stage}, {"compute_s", o.compute_s},
                      {"median_compute_s", o.median_compute_s}, {"compute_excess", o.compute_excess},
                      {"compute_outlier_steps", o.compute_steps}, {"late_steps", o.late_steps},
                      {"lateness_s", o.lateness_s}, {"caused_wait_per_step", caused}});
    }
    j["outliers"] = outs;
    nlohmann::ordered_json stalls = nlohmann::ordered_json::array();
    for (const InputStall& s : d.stalls) {
      stalls.push_back({{"node", s.node}, {"ranks", s.ranks}, {"stalled_steps", s.stalled_steps},
                        {"period_steps", s.period}, {"median_input_s", s.median_input_s}, {"excess_s", s.excess_s},
                        {"per_step_s", s.per_step_s}, {"peers_wait_s", s.peers_wait_s}});
    }
    j["input_stalls"] = stalls;
    nlohmann::ordered_json links = nlohmann::ordered_json::array();
    for (const SlowLink& l : d.links) {
      nlohmann::ordered_json groups = nlohmann::ordered_json::array();
      for (const SlowGroup& g : l.groups) {
        groups.push_back({{"group", to_string(g.group)}, {"members", g.members}, {"steps", g.steps},
                          {"slowdown", g.slowdown}});
      }
      links.push_back({{"ranks", l.ranks}, {"nodes", l.nodes}, {"groups", groups}});
    }
    j["slow_links"] = links;
    j["breakdown_s"] = breakdown_json(d.mean);
    nlohmann::ordered_json comm;
    for (std::size_t k = 0; k < kCommKindNames.size(); ++k) comm[kCommKindNames[k]] = d.comm.by_kind[k];
    j["exposed_comm_s"] = comm;
    j["exposed_comm_fraction"] = d.comm.fraction;
  }
  if (d.resume) {
    nlohmann::ordered_json miss = nlohmann::ordered_json::array();
    for (const ResumeItem& m : d.resume->missing) {
      miss.push_back({{"part", state_part_name(m.part)}, {"matters", m.matters}, {"consequence", m.consequence}});
    }
    j["resume_audit"] = {{"missing", miss}};
  }
  nlohmann::ordered_json verdict = nlohmann::ordered_json::array();
  for (const Finding& f : d.verdict) verdict.push_back({{"severity", f.problem ? "problem" : "note"}, {"text", f.text}});
  j["verdict"] = verdict;
  return j;
}

std::string diagnosis_text(const Diagnosis& d) {
  std::string o;
  auto line = [&](const std::string& x) { o += x + "\n"; };
  line(fmt::format("stepcast diagnose: {} ({}, {} of {} ranks{}, {} step{})", d.source, d.input, d.ranks_analysed,
                   d.world,
                   d.mode == "representative" ? " (representative mode: no rank is perturbed, one per stage)" : "",
                   d.steps, d.steps == 1 ? "" : "s"));
  if (d.hang) {
    line("");
    line(d.hang_report);
  } else {
    double lo = d.step_times_s.empty() ? 0 : d.step_times_s.front(), hi = lo;
    for (double s : d.step_times_s) {
      lo = std::min(lo, s);
      hi = std::max(hi, s);
    }
    line(fmt::format("Step time {:.4f} s (mean; min {:.4f}, max {:.4f}){}", d.step_time_s, lo, hi,
                     d.step_time_band ? fmt::format("; predicted p10-p90 {:.4f} - {:.4f} s (docs/model-reference.md "
                                                    "section 8)",
                                                    d.step_time_band->p10, d.step_time_band->p90)
                                      : std::string()));
    const RankBreakdown& m = d.mean;
    line(fmt::format("Mean over ranks per step: compute {:.4f}  exposed comm {:.4f}  bubble {:.4f}  wait {:.4f}  "
                     "optimizer {:.4f}  input {:.4f} s",
                     m.compute, m.exposed_comm(), m.bubble, m.wait, m.optimizer, m.input));
    line("");
    outlier_table(d, o);
    line("");
    stall_table(d, o);
    if (!d.links.empty()) {
      line("");
      link_table(d, o);
    }
    line("");
    std::string kinds;
    for (std::size_t k = 0; k < kCommKindNames.size(); ++k) {
      kinds += fmt::format("  {} {:.4f}", kCommKindNames[k], d.comm.by_kind[k]);
    }
    line(fmt::format("Exposed communication (mean over ranks, s per step):{}  total {:.4f} ({:.1f} % of the step)", kinds,
                     d.comm.total, 100 * d.comm.fraction));
  }
  if (d.resume) {
    line("");
    line("Resume audit (checkpoint.contents)");
    if (d.resume->missing.empty()) line("  complete: every part of the training state is saved");
    for (const ResumeItem& m : d.resume->missing) {
      line(fmt::format("  {:<13} {}: {}", state_part_name(m.part), m.matters ? "MISSING" : "missing, harmless",
                       m.consequence));
    }
  }
  line("");
  line("Verdict");
  for (const Finding& f : d.verdict) line(fmt::format("  {} {}", f.problem ? "PROBLEM" : "note   ", f.text));
  return o;
}


}  // namespace stepcast::analysis
