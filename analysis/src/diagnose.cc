#include "stepcast/analysis/diagnose.h"

#include <algorithm>

#include <fmt/format.h>

#include "detect.h"
#include "robust.h"
#include "stepcast/analysis/format.h"

namespace stepcast::analysis {

namespace {

// ---------------------------------------------------------------------------------------
// The verdict: one sentence per finding.

// Who stopped and whom the others wait for, from the lines of a hang report (ours: the
// engine's or hang_report_of_trace's).
Finding hang_finding(const std::string& report) {
  std::vector<int> stopped, never;
  std::size_t pos = 0;
  while ((pos = report.find("\n  ", pos)) != std::string::npos) {
    pos += 3;
    const std::string l = report.substr(pos, report.find('\n', pos) - pos);
    const std::size_t sp = l.find(' '), paren = l.find(" (");
    if (l.find("stopped") != std::string::npos && sp != std::string::npos && paren != std::string::npos && sp < paren) {
      const std::vector<int> who = parse_rank_ranges(l.substr(sp + 1, paren - sp - 1));
      stopped.insert(stopped.end(), who.begin(), who.end());
    }
    const std::size_t na = l.find("never arrived: ");
    if (na != std::string::npos) {
      const std::vector<int> who = parse_rank_ranges(l.substr(na + 15, l.find(';', na) - na - 15));
      never.insert(never.end(), who.begin(), who.end());
    }
  }
  std::string t = "the run hangs";
  const bool first = report.find("(stopped first)") != std::string::npos;  // a trace's report
  if (!stopped.empty()) {
    t += fmt::format(": rank{} {} stopped{}", stopped.size() == 1 ? "" : "s", rank_ranges(stopped),
                     first ? " first; the others completed ops after it, then nothing" : "");
  }
  if (!never.empty()) {
    t += fmt::format("{} the others wait in collectives for rank{} {}, which never arrive{}", stopped.empty() ? ":" : " and",
                     never.size() == 1 ? "" : "s", rank_ranges(never), never.size() == 1 ? "s" : "");
  }
  if (stopped.empty() && never.empty()) t += ": no rank can proceed";
  return {true, t + " (hang report above)"};
}

Finding outlier_finding(const OutlierRank& o) {
  std::string t = fmt::format("rank {} (node {}, stage {}): ", o.rank, o.node, o.stage);
  if (o.compute_steps > 0) {
    t += fmt::format("compute {:.1f} % above its stage's median in {}/{} steps ({} vs {} per step)",
                     100 * o.compute_excess, o.compute_steps, o.steps, human_duration(o.compute_s),
                     human_duration(o.median_compute_s));
  } else {
    t += fmt::format("compute normal ({:.1f} % from its stage's median), but it arrives late at its collectives in "
                     "{}/{} steps ({} per step behind its groups' median arrivals, summed over its collectives): idle "
                     "time on its own side, such as host or launch delays",
                     100 * o.compute_excess, o.late_steps, o.steps, human_duration(o.lateness_s));
  }
  std::string caused;
  for (const CausedWait& c : o.caused) {
    caused += fmt::format("{}its {} group ({} ranks) waits {} per step for it", caused.empty() ? "" : ", ",
                          to_string(c.group), c.group_size, human_duration(c.per_peer_s));
  }
  if (!caused.empty()) t += "; " + caused + " (mean per peer)";
  return {true, t};
}

Finding stall_finding(const InputStall& s, int steps) {
  const std::string when =
      s.stalled_steps.size() == 1
          ? fmt::format("in step {}", s.stalled_steps.front())
          : fmt::format("in {}/{} steps ({}{})", s.stalled_steps.size(), steps, "steps " + join_ints(s.stalled_steps, ", "),
                        s.period > 0 ? fmt::format(": every {} steps", s.period) : ": irregular");
  std::string t = fmt::format("host {} (ranks {}): input stalls {} longer than the median input time {}, {} per step on "
                              "average",
                              s.node, rank_ranges(s.ranks), human_duration(s.excess_s), when,
                              human_duration(s.per_step_s));
  if (s.peers_wait_s > 0) t += fmt::format("; its peers wait {} per stalled step for it", human_duration(s.peers_wait_s));
  return {true, t};
}

Finding link_finding(const SlowLink& l, int steps) {
  std::string t = l.ranks.size() == 1
                      ? fmt::format("slow link at rank {} (node {}): ", l.ranks.front(), l.nodes.front())
                      : fmt::format("slow link among ranks {} (node{} {}): ", rank_ranges(l.ranks),
                                    l.nodes.size() == 1 ? "" : "s", rank_ranges(l.nodes));
  for (std::size_t i = 0; i < l.groups.size(); ++i) {
    const SlowGroup& g = l.groups[i];
    const char* kind = to_string(g.group);
    t += i == 0 ? fmt::format("its {} group (ranks {}) moves data {:.2f}x as long as the other {} groups in {}/{} steps",
                              kind, rank_ranges(g.members), g.slowdown, kind, g.steps, steps)
                : fmt::format(", its {} group (ranks {}) {:.2f}x in {}/{} steps", kind, rank_ranges(g.members),
                              g.slowdown, g.steps, steps);
  }
  return {true, t + "; every member waits for those transfers alike: it costs exposed communication, not a slow rank"};
}

// Notes on a finished run: exposed communication and input time worth knowing.
void add_notes(const Diagnosis& d, std::vector<Finding>& verdict) {
  const DiagnoseOptions& opt = d.options;
  if (d.comm.fraction >= opt.exposed_comm_note_fraction) {
    std::string kinds;
    for (std::size_t k = 0; k < kCommKindNames.size(); ++k) {
      if (d.comm.by_kind[k] > 0.01 * d.comm.total) {
        kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", kCommKindNames[k], human_duration(d.comm.by_kind[k]));
      }
    }
    verdict.push_back({false, fmt::format("exposed communication: {} per step ({:.1f} % of the step): {}",
                                          human_duration(d.comm.total), 100 * d.comm.fraction, kinds)});
  }
  if (d.mean.input >= opt.input_note_fraction * d.step_time_s) {
    verdict.push_back({false, fmt::format("input: {} per step on average ({:.1f} % of the step) reading input",
                                          human_duration(d.mean.input), 100 * d.mean.input / d.step_time_s)});
  }
}

}  // namespace

void rebuild_verdict(Diagnosis& d) {
  std::vector<Finding>& v = d.verdict;
  v.clear();
  if (d.hang) {
    v.push_back(hang_finding(d.hang_report));
    for (const std::string& m : d.mismatches) v.push_back({true, "collective mismatch: " + m});
  }
  for (const OutlierRank& o : d.outliers) v.push_back(outlier_finding(o));
  for (const SlowLink& l : d.links) v.push_back(link_finding(l, d.steps));
  for (const InputStall& s : d.stalls) v.push_back(stall_finding(s, d.steps));
  if (d.resume) {
    for (const ResumeItem& m : d.resume->missing) {
      v.push_back({m.matters, fmt::format("the checkpoint lacks {}: {}", state_part_name(m.part), m.consequence)});
    }
  }
  const bool any_problem = std::any_of(v.begin(), v.end(), [](const Finding& f) { return f.problem; });
  if (!d.hang && d.step_time_s > 0) add_notes(d, v);
  if (!any_problem && !d.hang) {
    v.push_back({false, fmt::format("healthy: no outlier rank, input stall or hang among {} ranks over {} steps",
                                    d.ranks_analysed, d.steps)});
  }
  std::stable_partition(v.begin(), v.end(), [](const Finding& f) { return f.problem; });
}

bool Diagnosis::problem() const {
  return std::any_of(verdict.begin(), verdict.end(), [](const Finding& f) { return f.problem; });
}

std::string Diagnosis::outlier_list() const {
  std::vector<int> v;
  for (const OutlierRank& o : outliers) v.push_back(o.rank);
  return join_ints(v, ",");
}

std::string Diagnosis::link_list() const {
  std::vector<int> v;
  for (const SlowLink& l : links) v.insert(v.end(), l.ranks.begin(), l.ranks.end());
  return join_ints(v, ",");
}

std::string Diagnosis::stalling_list() const {
  std::vector<int> v;
  for (const InputStall& s : stalls) v.push_back(s.node);
  return join_ints(v, ",");
}

Diagnosis diagnose_trace(const Trace& trace, const DiagnoseOptions& opt) {
  Diagnosis d;
  d.input = "trace";
  d.mode = "trace";
  d.world = trace.placement.world();
  d.ranks_analysed = static_cast<int>(trace.ranks.size());
  d.steps = trace.steps();
  d.options = opt;
  if (!trace.complete()) {
    d.hang = true;
    d.hang_report = detail::hang_report_of_trace(trace);
    rebuild_verdict(d);
    return d;
  }
  std::int64_t prev = 0;
  for (std::int64_t e : trace.step_end_ns) {
    d.step_times_s.push_back(static_cast<double>(e - prev) * 1e-9);
    prev = e;
  }
  d.step_time_s = static_cast<double>(trace.step_end_ns.back()) * 1e-9 / d.steps;
  const double median_step_ns = median(d.step_times_s) * 1e9;

  // Breakdown and its mean over ranks.
  d.ranks = trace_breakdown(trace);
  d.mean = mean_breakdown(d.ranks);
  d.comm.by_kind = {d.mean.tp, d.mean.cp, d.mean.ep, d.mean.pp, d.mean.dp};
  d.comm.total = d.mean.exposed_comm();
  d.comm.fraction = d.step_time_s > 0 ? d.comm.total / d.step_time_s : 0;

  const detail::PerRankStep prs = detail::per_rank_step(trace);
  detail::StalledSteps stalled;
  d.stalls = detail::detect_input_stalls(trace, prs, opt, median_step_ns, stalled);
  detail::LinkHits link_hits;
  d.links = detail::detect_slow_links(trace, prs, opt, link_hits);
  d.outliers = detail::detect_outliers(trace, prs, opt, median_step_ns, stalled, link_hits);
  rebuild_verdict(d);
  return d;
}

}  // namespace stepcast::analysis
