// Slow links: the transfer time of each collective instance (end - begin: data moving,
// after the last member arrived) compared with the same collective (step, sequence number,
// size: groups of different pipeline stages run different collectives under one sequence
// number) in the other groups of its kind. Jitter and slow compute change when ranks arrive, not
// how long the data takes to move, so a group that moves data for longer has a slow link.
#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>

#include "detect.h"
#include "robust.h"

namespace stepcast::analysis::detail {

namespace {

constexpr std::array<GroupKind, 7> kLinkGroups = {GroupKind::kTp,  GroupKind::kCp,  GroupKind::kEp,   GroupKind::kDp,
                                                  GroupKind::kEdp, GroupKind::kEtp, GroupKind::kEtpEp};

// One collective instance: its transfer time (the longest of its members').
struct Transfer {
  int step = 0;
  std::uint32_t seq = 0;
  double bytes = 0;
  int root = 0;
  std::int64_t ns = 0;
};

// Per group kind (GroupKind value), the transfers sorted by (step, seq, bytes, root).
std::map<int, std::vector<Transfer>> transfers_by_kind(const Trace& trace) {
  // (kind, step, seq, bytes, root) -> ns
  std::map<std::tuple<int, int, std::uint32_t, double, int>, std::int64_t> longest;
  for (const TraceRank& r : trace.ranks) {
    for (const TraceOp& o : r.ops) {
      if (o.kind != TraceOpKind::kCollective) continue;
      std::int64_t& ns = longest[{static_cast<int>(o.group), o.step, o.seq, o.bytes, o.group_root}];
      ns = std::max(ns, o.end_ns - o.begin_ns);
    }
  }
  std::map<int, std::vector<Transfer>> out;
  for (const auto& [key, ns] : longest) {
    const auto& [kind, step, seq, bytes, root] = key;
    out[kind].push_back({step, seq, bytes, root, ns});
  }
  return out;
}

// What one group kind's comparison found for each group (by root).
struct GroupHits {
  std::set<int> steps;
  double ratio_sum = 0;
  int slow_transfers = 0;
  std::vector<std::pair<int, std::uint32_t>> where;  // (step, seq) of its slow transfers
};

// The slow transfers of one kind: each instance [a, b) of one (step, seq, bytes) against its
// median; the MAD pooled over every instance of the kind.
std::map<int, GroupHits> slow_transfers(const std::vector<Transfer>& t, const DiagnoseOptions& opt) {
  struct Bucket {
    std::size_t a, b;
    double median;
  };
  std::vector<Bucket> buckets;
  std::vector<double> xs, dev;
  for (std::size_t a = 0; a < t.size();) {
    std::size_t b = a;
    while (b < t.size() && t[b].step == t[a].step && t[b].seq == t[a].seq && t[b].bytes == t[a].bytes) ++b;
    if (b - a >= 3) {  // a majority to compare with
      xs.clear();
      for (std::size_t k = a; k < b; ++k) xs.push_back(static_cast<double>(t[k].ns));
      const double med = median(xs);
      for (double x : xs) dev.push_back(std::abs(x - med));
      buckets.push_back({a, b, med});
    }
    a = b;
  }
  const double mad = median(dev);
  std::map<int, GroupHits> hits;
  for (const Bucket& bk : buckets) {
    if (bk.median <= 0) continue;
    for (std::size_t k = bk.a; k < bk.b; ++k) {
      const double x = static_cast<double>(t[k].ns);
      if (x < opt.min_link_slowdown * bk.median || robust_z(x - bk.median, mad) < opt.z_threshold) continue;
      GroupHits& h = hits[t[k].root];
      h.steps.insert(t[k].step);
      h.ratio_sum += x / bk.median;
      ++h.slow_transfers;
      h.where.emplace_back(t[k].step, t[k].seq);
    }
  }
  return hits;
}

std::vector<int> members_of(const Placement& pl, GroupKind g, int root) {
  std::vector<int> m;
  for (int i = 0; i < pl.group_size(g); ++i) m.push_back(pl.group_member(g, root, i));
  std::sort(m.begin(), m.end());
  return m;
}

// The ranks common to every group; empty when there is none.
std::vector<int> common_ranks(const std::vector<SlowGroup>& groups) {
  std::vector<int> common = groups.front().members;
  for (const SlowGroup& g : groups) {
    std::vector<int> both;
    std::set_intersection(common.begin(), common.end(), g.members.begin(), g.members.end(), std::back_inserter(both));
    common = std::move(both);
  }
  return common;
}

}  // namespace

std::vector<SlowLink> detect_slow_links(const Trace& trace, const PerRankStep& prs, const DiagnoseOptions& opt,
                                        LinkHits& hits) {
  hits.assign(trace.ranks.size() * static_cast<std::size_t>(prs.steps), 0);
  const int min_steps = std::max(1, std::min(opt.min_outlier_steps, prs.steps));
  const Placement& pl = trace.placement;
  std::map<int, std::size_t> slot_of;
  for (std::size_t i = 0; i < trace.ranks.size(); ++i) slot_of[trace.ranks[i].rank] = i;
  const std::map<int, std::vector<Transfer>> by_kind = transfers_by_kind(trace);
  std::vector<SlowGroup> groups;
  for (GroupKind g : kLinkGroups) {
    const auto it = by_kind.find(static_cast<int>(g));
    if (it == by_kind.end()) continue;
    for (const auto& [root, h] : slow_transfers(it->second, opt)) {
      if (static_cast<int>(h.steps.size()) < min_steps) continue;
      SlowGroup sg{g, members_of(pl, g, root), static_cast<int>(h.steps.size()), h.ratio_sum / h.slow_transfers};
      for (int step : h.steps) {
        for (int m : sg.members) {
          const auto s = slot_of.find(m);
          if (s != slot_of.end()) hits[prs.at(s->second, step)] = 1;
        }
      }
      groups.push_back(std::move(sg));
    }
  }
  std::vector<SlowLink> links;
  if (groups.empty()) return links;
  auto link = [&pl](std::vector<int> ranks, std::vector<SlowGroup> gs) {
    std::set<int> nodes;
    for (int r : ranks) nodes.insert(pl.node(r));
    return SlowLink{std::move(ranks), {nodes.begin(), nodes.end()}, std::move(gs)};
  };
  std::vector<int> common = common_ranks(groups);
  if (!common.empty()) {
    links.push_back(link(std::move(common), std::move(groups)));
    return links;
  }
  // Slow groups with no rank in common: each is its own suspect.
  for (SlowGroup& g : groups) {
    std::vector<int> members = g.members;
    links.push_back(link(std::move(members), {std::move(g)}));
  }
  std::stable_sort(links.begin(), links.end(),
                   [](const SlowLink& a, const SlowLink& b) { return a.ranks.front() < b.ranks.front(); });
  return links;
}

}  // namespace stepcast::analysis::detail
