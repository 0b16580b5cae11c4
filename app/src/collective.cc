#include "stepcast/app/collective.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "preset_lookup.h"
#include "stepcast/models/json_reader.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/text.h"

namespace stepcast::app {

namespace {

constexpr std::int64_t kMaxSizeBytes = std::int64_t{1} << 50;  // 1 PiB: bounds the sweep at 48 rows
constexpr int kMaxGpus = 1 << 20;
constexpr std::int64_t kSweepStartBytes = 8;  // nccl-tests' usual -b 8

// The band's input ranges (docs/model-reference.md "5.6 Band"). The latencies of every
// cluster preset are unverified priors ("source" of models/data/clusters.json): 0.5x to 2x.
// intra_efficiency 0.82 is [S] (~370 of 450 GB/s busbw on 8xH100, docs/cost-model-sources.md section 5.4): +-0.05.
// inter_efficiency 0.9 has no source [U]: +-0.10. Efficiencies stay within (0, 1].
constexpr double kAlphaLow = 0.5, kAlphaHigh = 2.0;
constexpr double kIntraSpread = 0.05, kInterSpread = 0.10;

struct SizeUnit {
  std::string_view suffix;
  double factor;
};
constexpr std::array<SizeUnit, 16> kUnits{{
    {"", 1}, {"B", 1},
    {"K", 1024.0}, {"k", 1024.0}, {"KiB", 1024.0}, {"KB", 1e3}, {"kB", 1e3},
    {"M", 1048576.0}, {"MiB", 1048576.0}, {"MB", 1e6},
    {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9},
    {"T", 1099511627776.0}, {"TiB", 1099511627776.0}, {"TB", 1e12},
}};

std::string size_expected(std::string_view text) {
  return "expected a size in bytes such as 1GiB, 512MiB, 1GB, 64K, 1e9 or 1048576, got \"" +
         printable(text) + "\"";
}

// Rounded to 1e-6 so that 0.82 - 0.05 reads 0.77, not 0.7699999999999999.
double clamp_efficiency(double e) { return std::round(std::clamp(e, 0.01, 1.0) * 1e6) / 1e6; }

// The algorithms collective_cost knows, in the order the report lists them.
constexpr std::array<CollAlgo, 5> kAlgos{CollAlgo::kRing, CollAlgo::kTree, CollAlgo::kHierarchical,
                                         CollAlgo::kPairwise, CollAlgo::kDirect};

// One algorithm (or kAuto) at `bytes`, with its band: the model at the corners of the input
// ranges. For a fixed algorithm every formula of section 5.2 rises with each latency and falls
// with each efficiency, so the corners bound it; all eight are evaluated anyway.
CollectiveRow price(const ClusterSpec& c, CollKind kind, const GroupShape& g, std::int64_t bytes, CollAlgo algo,
                    const CollectiveBandRule& band, NcclProto proto) {
  const CollectiveCost point = collective_cost(c, kind, g, static_cast<double>(bytes), algo, proto);
  CollectiveRow row;
  row.algo = point.algo;
  row.proto = point.proto;
  row.size_bytes = bytes;
  row.time_s = point.time_s;
  row.algbw_GBps = point.algbw_GBps;
  row.busbw_GBps = point.busbw_GBps;
  row.band_low_s = row.band_high_s = point.time_s;
  if (band.calibrated || !(point.time_s > 0)) return row;
  for (double a : {band.alpha_low, band.alpha_high}) {
    for (double ei : {band.intra_low, band.intra_high}) {
      for (double en : {band.inter_low, band.inter_high}) {
        ClusterSpec corner = c;
        corner.intra_latency_us *= a;
        corner.inter_latency_us *= a;
        corner.nccl_latency_scale *= a;
        corner.intra_efficiency = ei;
        corner.inter_efficiency = en;
        const double t = collective_cost(corner, kind, g, static_cast<double>(bytes), point.algo, proto).time_s;
        if (!std::isfinite(t) || t <= 0) continue;
        row.band_low_s = std::min(row.band_low_s, t);
        row.band_high_s = std::max(row.band_high_s, t);
      }
    }
  }
  return row;
}

bool usable(const CollectiveRow& r) { return r.time_s > 0 && std::isfinite(r.time_s); }

std::string bus_factor_formula(CollKind kind) {
  switch (kind) {
    case CollKind::kAllReduce: return "2(n-1)/n";
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
    case CollKind::kAllToAll: return "(n-1)/n";
    case CollKind::kBroadcast:
    case CollKind::kSendRecv: return "1";
  }
  return "1";
}

std::string algo_name(CollAlgo a) { return a == CollAlgo::kAuto ? "calibrated" : std::string(to_string(a)); }

std::string placement_text(const CollectiveReport& r) {
  const GroupShape& g = r.shape;
  const std::string how = r.stride == 1 ? "contiguous (stride 1)" : fmt::format("stride {}", r.stride);
  const std::string which = r.group ? fmt::format(" (the plan's {} group)", to_string(*r.group)) : "";
  return fmt::format("{} ranks {}{}: {} per node on {} node{} of {} GPUs", g.ranks, how, which, g.ranks_per_node,
                     g.nodes, g.nodes == 1 ? "" : "s", r.cluster.gpus_per_node);
}

constexpr std::array<GroupKind, 4> kPlanGroups{GroupKind::kTp, GroupKind::kCp, GroupKind::kEp, GroupKind::kDp};

}  // namespace

Result<std::int64_t> parse_size_bytes(std::string_view text) {
  const std::string s(text);
  if (s.empty()) return Error{size_expected(text)};
  // The longest prefix that reads as a number: digits, '.', and an exponent.
  std::size_t end = 0;
  while (end < s.size() && (std::isdigit(static_cast<unsigned char>(s[end])) || s[end] == '.')) ++end;
  if (end < s.size() && (s[end] == 'e' || s[end] == 'E') && end > 0) {
    std::size_t e = end + 1;
    if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
    if (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) {
      while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
      end = e;
    }
  }
  double number = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + end, number);
  if (end == 0 || ec != std::errc() || ptr != s.data() + end) return Error{size_expected(text)};
  const std::string_view suffix = std::string_view(s).substr(end);
  const auto unit = std::find_if(kUnits.begin(), kUnits.end(), [&](const SizeUnit& u) { return u.suffix == suffix; });
  if (unit == kUnits.end()) {
    return Error{size_expected(text) + " (units: B; KiB, MiB, GiB, TiB and K, M, G = powers of 1024; "
                                       "KB, MB, GB, TB = powers of 1000)"};
  }
  const double bytes = number * unit->factor;
  if (!std::isfinite(bytes) || bytes < 1 || bytes > static_cast<double>(kMaxSizeBytes)) {
    return Error{fmt::format("expected a size from 1 B to 1 PiB (2^50 B), got \"{}\"", printable(text))};
  }
  if (bytes != std::floor(bytes)) {
    return Error{fmt::format("\"{}\" is not a whole number of bytes ({})", printable(text), bytes)};
  }
  return static_cast<std::int64_t>(bytes);
}

Result<CollKind> parse_coll_kind(std::string_view text) {
  std::string s(text);
  std::replace(s.begin(), s.end(), '-', '_');
  for (CollKind k : {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter, CollKind::kAllToAll,
                     CollKind::kBroadcast, CollKind::kSendRecv}) {
    if (to_string(k) == s) return k;
  }
  return Error{"unknown collective \"" + printable(text) +
               "\" (kinds: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv)"};
}

Result<CollAlgo> parse_coll_algo(std::string_view text) {
  for (CollAlgo a : {CollAlgo::kAuto, CollAlgo::kRing, CollAlgo::kTree, CollAlgo::kHierarchical,
                     CollAlgo::kPairwise, CollAlgo::kDirect}) {
    if (to_string(a) == text) return a;
  }
  return Error{"unknown algorithm \"" + printable(text) + "\" (algorithms: auto, ring, tree, hierarchical, pairwise, direct)"};
}

Result<NcclProto> parse_nccl_proto(std::string_view text) {
  // The names to_string(NcclProto) prints, in any case (NCCL_PROTO's reading).
  const auto same = [text](std::string_view name) {
    return std::equal(text.begin(), text.end(), name.begin(), name.end(), [](char a, char b) {
      return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
    });
  };
  for (NcclProto p : {NcclProto::kLL, NcclProto::kLL128, NcclProto::kSimple}) {
    if (same(to_string(p))) return p;
  }
  return Error{"unknown protocol \"" + printable(text) + "\" (NCCL's protocols: LL, LL128, Simple)"};
}

std::string format_size(std::int64_t bytes) {
  static constexpr std::array<const char*, 5> kNames{"KiB", "MiB", "GiB", "TiB", "PiB"};
  std::string best = fmt::format("{} B", bytes);
  std::int64_t unit = 1024;
  for (const char* name : kNames) {
    if (bytes >= unit && bytes % unit == 0) best = fmt::format("{} {}", bytes / unit, name);
    unit *= 1024;
  }
  return best;
}

std::vector<PlanGroup> plan_groups(const Scenario& s) {
  const Placement place = Placement::of(s.plan, s.cluster.gpus_per_node);
  std::vector<PlanGroup> out;
  for (GroupKind g : kPlanGroups) {
    const int n = place.group_size(g);
    if (n > 1) out.push_back(PlanGroup{g, n, place.group_stride(g)});
  }
  return out;
}

Result<GroupKind> parse_plan_group(std::string_view text) {
  for (GroupKind g : kPlanGroups) {
    if (text == to_string(g)) return g;
  }
  return Error{"unknown group \"" + printable(text) + "\" (the plan's groups: tp, cp, ep, dp)"};
}

Result<CollectiveReport> run_collective(const CollectiveRequest& request) {
  CollectiveRequest q = request;
  std::optional<GroupKind> group;
  if (q.group) {
    // The plan's group sets the ranks and the stride; the scenario is read once, here.
    if (!q.cluster_file) return Error{"--group: needs --cluster-file (a scenario whose plan has the group)"};
    if (q.gpus != 0 || q.gpus_stated || q.stride != 1) {
      return Error{"--group: sets the group's GPUs and stride from the plan; leave out --gpus and --stride"};
    }
    auto s = load(*q.cluster_file);
    if (!s.ok()) return s.error();
    const std::vector<PlanGroup> groups = plan_groups(*s);
    const auto it = std::find_if(groups.begin(), groups.end(), [&](const PlanGroup& g) { return g.kind == *q.group; });
    if (it == groups.end()) {
      return Error{fmt::format("--group: the plan's {} group has one rank (tp {}, cp {}, ep {}, dp {})",
                               to_string(*q.group), s->plan.tp, s->plan.cp, s->plan.ep, s->plan.dp)};
    }
    q.gpus = it->ranks;
    q.gpus_stated = true;
    q.stride = it->stride;
    q.cluster_file->scenario = std::move(*s);
    group = q.group;
  }
  CollectiveReport r;
  r.group = group;
  r.kind = q.kind;
  r.size_bytes = q.size_bytes;
  if (q.size_bytes < 1 || q.size_bytes > kMaxSizeBytes) {
    return Error{fmt::format("SIZE: expected 1 B to 1 PiB (2^50 B), got {} B", q.size_bytes)};
  }
  if (q.sweep && q.size_bytes < kSweepStartBytes) {
    return Error{fmt::format("SIZE: --sweep runs from 8 B up to SIZE; SIZE must be at least 8 B, got {} B",
                             q.size_bytes)};
  }
  const bool p2p = q.kind == CollKind::kSendRecv;
  int gpus = q.gpus;
  if (p2p && gpus == 0 && !q.gpus_stated) gpus = 2;
  if (gpus == 0 && !q.gpus_stated)
    return Error{fmt::format("--gpus: required for {} (the ranks in the group)", to_string(q.kind))};
  if (gpus < (p2p ? 1 : 2) || gpus > kMaxGpus) {
    return Error{fmt::format("--gpus: {} needs {} to {} ranks, got {}", to_string(q.kind), p2p ? 1 : 2, kMaxGpus,
                             q.gpus)};
  }
  if (q.stride < 1 || q.stride > kMaxGpus) {
    return Error{fmt::format("--stride: expected 1 to {}, got {}", kMaxGpus, q.stride)};
  }
  r.stride = q.stride;
  // send_recv is one transfer between two ranks `stride` apart, whatever the group's size.
  r.ranks = p2p ? 2 : gpus;

  if (q.cluster_file) {
    auto s = load(*q.cluster_file);
    if (!s.ok()) return s.error();
    r.cluster = s->cluster;
    r.cluster_label = (q.cluster_file->path.empty() ? std::string("scenario") : q.cluster_file->path) +
                      " (cluster " + r.cluster.name + ")";
  } else {
    const auto& clusters = builtin_presets().clusters;
    const auto it = clusters.find(q.cluster);
    if (it == clusters.end()) return Error{unknown_preset_message("--cluster", "cluster", q.cluster, clusters)};
    r.cluster = it->second;
    r.cluster_label = q.cluster;
  }
  const int gpn = r.cluster.gpus_per_node;
  if (gpn < 1) return Error{"--cluster: the cluster has no GPUs per node"};
  // GPUs the group spans in rank order, and the nodes they fill.
  const std::int64_t span = static_cast<std::int64_t>(r.ranks - 1) * r.stride + 1;
  const std::int64_t nodes_needed = (span + gpn - 1) / gpn;
  if (q.cluster_file) {
    if (nodes_needed > r.cluster.nodes) {
      return Error{fmt::format("--gpus: {} ranks {} apart span {} GPUs ({} nodes); the cluster of {} has {} nodes of {}",
                               r.ranks, r.stride, span, nodes_needed, q.cluster_file->path, r.cluster.nodes, gpn)};
    }
  } else {
    r.cluster.nodes = static_cast<int>(nodes_needed);
  }
  r.shape = group_shape(r.ranks, r.stride, gpn);
  r.bus_factor = bus_factor(q.kind, std::max(r.ranks, 2));
  const NcclProto proto = q.proto.value_or(NcclProto::kNone);
  if (q.proto) {
    if (r.cluster.collectives != CollectiveModel::kNccl) {
      return Error{
          "--proto: the cluster prices its collectives with per-hop alphas (\"collectives\": \"alpha_beta\"); "
          "NCCL's protocols need \"collectives\": \"nccl\""};
    }
    if (!nccl_tuned_kind(q.kind)) {
      return Error{
          fmt::format("--proto: NCCL's tuner prices protocols for all_reduce, all_gather and reduce_scatter, "
                      "not {}",
                      to_string(q.kind))};
    }
    r.forced_proto = proto;
  }

  r.band.calibrated = collective_cost(r.cluster, q.kind, r.shape, static_cast<double>(q.size_bytes)).algo ==
                      CollAlgo::kAuto;
  r.band.intra_low = clamp_efficiency(r.cluster.intra_efficiency - kIntraSpread);
  r.band.intra_high = clamp_efficiency(r.cluster.intra_efficiency + kIntraSpread);
  r.band.inter_low = clamp_efficiency(r.cluster.inter_efficiency - kInterSpread);
  r.band.inter_high = clamp_efficiency(r.cluster.inter_efficiency + kInterSpread);
  if (r.band.calibrated) {
    r.band.alpha_low = r.band.alpha_high = 1;
    r.band.intra_low = r.band.intra_high = r.cluster.intra_efficiency;
    r.band.inter_low = r.band.inter_high = r.cluster.inter_efficiency;
  } else {
    r.band.alpha_low = kAlphaLow;
    r.band.alpha_high = kAlphaHigh;
  }

  const CollectiveRow chosen = price(r.cluster, q.kind, r.shape, q.size_bytes, CollAlgo::kAuto, r.band, proto);
  if (!usable(chosen)) return Error{"the model has no algorithm for " + std::string(to_string(q.kind))};
  r.auto_algo = chosen.algo;
  if (r.band.calibrated) {
    r.algorithms.push_back(chosen);
    r.algorithms.back().is_auto = true;
  } else if (q.algo && *q.algo == CollAlgo::kAuto) {
    r.algorithms.push_back(chosen);
    r.algorithms.back().is_auto = true;
  } else {
    std::string available;
    for (CollAlgo a : kAlgos) {
      CollectiveRow row = price(r.cluster, q.kind, r.shape, q.size_bytes, a, r.band, proto);
      if (!usable(row)) continue;
      available += (available.empty() ? "" : ", ") + std::string(to_string(a));
      row.is_auto = a == r.auto_algo;
      if (!q.algo || *q.algo == a) r.algorithms.push_back(row);
    }
    if (r.algorithms.empty()) {
      return Error{fmt::format("--algo: {} is not available for {} on this group ({}; available: {})",
                               to_string(*q.algo), to_string(q.kind), placement_text(r), available)};
    }
  }

  if (q.sweep) {
    // nccl-tests -b 8 -e SIZE -f 2: 8 B doubling while <= SIZE. With --algo the sweep keeps
    // that algorithm; without, each size gets what auto picks there.
    const CollAlgo sweep_algo = q.algo && !r.band.calibrated ? *q.algo : CollAlgo::kAuto;
    for (std::int64_t b = kSweepStartBytes; b <= q.size_bytes; b *= 2) {
      CollectiveRow row = price(r.cluster, q.kind, r.shape, b, sweep_algo, r.band, proto);
      row.is_auto =
          row.algo == collective_cost(r.cluster, q.kind, r.shape, static_cast<double>(b), CollAlgo::kAuto, proto).algo;
      r.sweep.push_back(row);
    }
  }

  r.notes.push_back(
      "Priced alone on the fabric: no other traffic, leaf oversubscription not applied (docs/model-reference.md 5.1).");
  if (q.kind == CollKind::kAllReduce && !r.band.calibrated) {
    r.notes.push_back(
        "In-network reduction (NVLS, SHARP) is not modelled: NCCL may report a higher all_reduce busbw on NVSwitch "
        "and SHARP fabrics (docs/cost-model-sources.md 5.4).");
  }
  if (r.band.calibrated) {
    r.notes.push_back("A calibration's fit (alpha + beta x bus bytes) priced this collective: no per-algorithm "
                      "times and no band.");
  }
  if (p2p && q.gpus > 2) {
    r.notes.push_back(fmt::format("send_recv is one transfer between two ranks {} apart: --gpus {} does not change it.",
                                  r.stride, q.gpus));
  }
  return r;
}

std::string collective_row_label(const CollectiveRow& row) {
  std::string s = algo_name(row.algo);
  if (row.proto != NcclProto::kNone) s += " (" + std::string(to_string(row.proto)) + ")";
  return s;
}

std::string collective_text(const CollectiveReport& r) {
  const ClusterSpec& c = r.cluster;
  std::string out;
  out += fmt::format("{} of {} ({} B) on {} GPUs, cluster {}\n", to_string(r.kind), format_size(r.size_bytes),
                     r.size_bytes, r.ranks, r.cluster_label);
  out += fmt::format("placement: {}\n", placement_text(r));
  out += fmt::format("links: scale-up {:g} GB/s per GPU per direction x efficiency {:g}, alpha {:g} us; "
                     "scale-out {:g} GB/s per GPU ({} x {:g} Gb/s / {} GPUs) x efficiency {:g}, alpha {:g} us\n",
                     c.intra_bandwidth_GBps, c.intra_efficiency, c.intra_latency_us,
                     c.nic_bytes_per_s_per_gpu() / 1e9, c.nics_per_node, c.nic_Gbps, c.gpus_per_node,
                     c.inter_efficiency, c.inter_latency_us);
  if (r.forced_proto != NcclProto::kNone) {
    out += fmt::format(
        "ring and tree: NCCL's tuner (src/graph/tuning.cc 2.19-2.28) on its {} protocol only, as "
        "NCCL_PROTO={} forces it; the alphas price the others\n",
        to_string(r.forced_proto), to_string(r.forced_proto));
  } else if (c.collectives == CollectiveModel::kNccl) {
    out +=
        "ring and tree: NCCL's tuner (src/graph/tuning.cc 2.19-2.28): the fastest of its LL, LL128 and Simple "
        "protocols, each with its own latencies and share of the links; the alphas price the others\n";
  }
  out += fmt::format("sizes as nccl-tests: algbw = size / time; busbw = algbw x {} = algbw x {:g}\n\n",
                     bus_factor_formula(r.kind), r.bus_factor);
  out += fmt::format("  {:<22}{:>14}{:>14}{:>14}   {}\n", "algorithm", "time (us)", "algbw (GB/s)", "busbw (GB/s)",
                     "band (us)");
  for (const CollectiveRow& row : r.algorithms) {
    out += fmt::format("  {:<22}{:>14.2f}{:>14.2f}{:>14.2f}   {:.2f} - {:.2f}\n",
                       collective_row_label(row) + (row.is_auto ? " *" : ""), row.time_s * 1e6, row.algbw_GBps,
                       row.busbw_GBps, row.band_low_s * 1e6, row.band_high_s * 1e6);
  }
  if (r.kind == CollKind::kAllGather || r.kind == CollKind::kReduceScatter) {
    out += fmt::format("  * = what auto picks ({}: NCCL runs {} as one ring; the others are what-ifs)\n",
                       algo_name(r.auto_algo), to_string(r.kind));
  } else if (r.kind == CollKind::kAllReduce) {
    out += fmt::format("  * = what auto picks ({}: the faster of NCCL's ring and tree; hierarchical is a what-if)\n",
                       algo_name(r.auto_algo));
  } else {
    out += fmt::format("  * = what auto picks ({}: the fastest)\n", algo_name(r.auto_algo));
  }
  if (r.band.calibrated) {
    out += "band: none (a calibration's fit priced it)\n";
  } else {
    out += fmt::format("band: from input uncertainty (not a statistical interval): latencies {:g}x to {:g}x their "
                       "priors, intra_efficiency {:.2f} to {:.2f}, inter_efficiency {:.2f} to {:.2f}; the model at "
                       "the corners\n",
                       r.band.alpha_low, r.band.alpha_high, r.band.intra_low, r.band.intra_high, r.band.inter_low,
                       r.band.inter_high);
  }
  if (!r.sweep.empty()) {
    out += fmt::format("\nsweep (8 B doubling up to {}):\n", format_size(r.size_bytes));
    out += fmt::format("  {:>16}{:>14}{:>14}{:>14}  {:<22}{}\n", "size (B)", "time (us)", "algbw (GB/s)",
                       "busbw (GB/s)", "algorithm", "band (us)");
    for (const CollectiveRow& row : r.sweep) {
      out +=
          fmt::format("  {:>16}{:>14.2f}{:>14.2f}{:>14.2f}  {:<22}{:.2f} - {:.2f}\n", row.size_bytes, row.time_s * 1e6,
                      row.algbw_GBps, row.busbw_GBps, collective_row_label(row) + (row.is_auto ? " *" : ""),
                      row.band_low_s * 1e6, row.band_high_s * 1e6);
    }
  }
  if (!r.notes.empty()) out += "\n";
  for (const std::string& n : r.notes) out += "note: " + n + "\n";
  return out;
}

namespace {

double finite(double x) { return std::isfinite(x) ? x : 0.0; }

nlohmann::ordered_json row_json(const CollectiveRow& row) {
  return {{"algo", algo_name(row.algo)},
          {"protocol", row.proto == NcclProto::kNone ? nlohmann::ordered_json(nullptr)
                                                     : nlohmann::ordered_json(std::string(to_string(row.proto)))},
          {"size_bytes", row.size_bytes},
          {"time_us", finite(row.time_s * 1e6)},
          {"algbw_GBps", finite(row.algbw_GBps)},
          {"busbw_GBps", finite(row.busbw_GBps)},
          {"band_us", {{"low", finite(row.band_low_s * 1e6)}, {"high", finite(row.band_high_s * 1e6)}}},
          {"auto", row.is_auto}};
}

}  // namespace

std::string collective_json(const CollectiveReport& r) {
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["kind"] = std::string(to_string(r.kind));
  j["size_bytes"] = r.size_bytes;
  j["cluster"] = r.cluster_label;
  j["placement"] = {{"ranks", r.ranks},
                    {"stride", r.stride},
                    {"group", r.group ? nlohmann::ordered_json(to_string(*r.group)) : nlohmann::ordered_json(nullptr)},
                    {"gpus_per_node", r.cluster.gpus_per_node},
                    {"ranks_per_node", r.shape.ranks_per_node},
                    {"nodes", r.shape.nodes}};
  j["links"] = {{"intra_bandwidth_GBps", r.cluster.intra_bandwidth_GBps},
                {"intra_efficiency", r.cluster.intra_efficiency},
                {"intra_latency_us", r.cluster.intra_latency_us},
                {"inter_bandwidth_per_gpu_GBps", finite(r.cluster.nic_bytes_per_s_per_gpu() / 1e9)},
                {"inter_efficiency", r.cluster.inter_efficiency},
                {"inter_latency_us", r.cluster.inter_latency_us},
                {"collectives", r.cluster.collectives == CollectiveModel::kNccl ? "nccl" : "alpha_beta"}};
  j["forced_protocol"] = r.forced_proto == NcclProto::kNone
                             ? nlohmann::ordered_json(nullptr)
                             : nlohmann::ordered_json(std::string(to_string(r.forced_proto)));
  j["bus_factor"] = r.bus_factor;
  j["band_rule"] = {{"what", r.band.calibrated ? "none: a calibration's fit priced the collective"
                                               : "band from input uncertainty (not a statistical interval)"},
                    {"alpha_scale", {r.band.alpha_low, r.band.alpha_high}},
                    {"intra_efficiency", {r.band.intra_low, r.band.intra_high}},
                    {"inter_efficiency", {r.band.inter_low, r.band.inter_high}}};
  j["auto"] = algo_name(r.auto_algo);
  j["algorithms"] = nlohmann::ordered_json::array();
  for (const CollectiveRow& row : r.algorithms) j["algorithms"].push_back(row_json(row));
  if (!r.sweep.empty()) {
    j["sweep"] = nlohmann::ordered_json::array();
    for (const CollectiveRow& row : r.sweep) j["sweep"].push_back(row_json(row));
  }
  j["notes"] = r.notes;
  return j.dump(2) + "\n";
}

}  // namespace stepcast::app
