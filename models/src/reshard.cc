#include "stepcast/models/reshard.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "stepcast/models/params.h"
#include "stepcast/models/program.h"

namespace stepcast {

namespace {

// Pipeline stage of every layer: chunk k of pp x v holds chunk_layers() layers and runs on
// stage k mod pp (the interleaved schedule's assignment; v = 1 for the others).
std::vector<int> stage_of_layer(const ModelSpec& m, const Plan& p) {
  const int chunks = p.pp * std::max(1, p.virtual_stages);
  std::vector<int> stage(static_cast<std::size_t>(m.num_layers), 0);
  for (int k = 0; k < chunks; ++k) {
    const int first = chunk_first_layer(m, p, k);
    for (int l = first; l < first + chunk_layers(m, p, k); ++l) stage[static_cast<std::size_t>(l)] = k % p.pp;
  }
  return stage;
}

// [a/A, (a+1)/A) and [b/B, (b+1)/B) overlap (the tensor-parallel slices of one dimension).
bool slices_overlap(int a, int A, int b, int B) {
  return std::int64_t{a} * B < std::int64_t{b + 1} * A && std::int64_t{b} * A < std::int64_t{a + 1} * B;
}

}  // namespace

Result<Plan> parse_reshard_layout(const std::string& text, const Plan& old, const std::string& option) {
  Plan to = old;
  std::optional<int> gpus;
  bool dp_given = false;
  std::size_t pos = 0;
  if (text.empty()) return Error{option + ": empty layout (e.g. tp=8,pp=2,dp=2)"};
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    pos = comma + 1;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) return Error{fmt::format("{}: \"{}\" is not key=value (e.g. tp=8)", option, item)};
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (value.empty() || value.size() > 6 ||
        !std::all_of(value.begin(), value.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; })) {
      return Error{fmt::format("{}: {}: \"{}\" is not a positive integer", option, key, value)};
    }
    const int v = std::stoi(value);
    if (key == "zero") {
      if (v > 3) return Error{fmt::format("{}: zero: {} is not 0, 1, 2 or 3", option, v)};
      to.zero = v;
      continue;
    }
    if (v < 1) return Error{fmt::format("{}: {}: {} must be at least 1", option, key, v)};
    if (key == "tp") to.tp = v;
    else if (key == "pp") to.pp = v;
    else if (key == "dp") { to.dp = v; dp_given = true; }
    else if (key == "cp") to.cp = v;
    else if (key == "ep") to.ep = v;
    else if (key == "etp") to.etp = v;
    else if (key == "gpus") gpus = v;
    else return Error{fmt::format("{}: \"{}\" is not a layout key (tp, pp, dp, cp, ep, etp, zero, gpus)", option, key)};
  }
  if (gpus) {
    const int per_dp = to.tp * to.pp * to.cp;
    if (dp_given && to.world() != *gpus) {
      return Error{fmt::format("{}: gpus={} but tp x pp x dp x cp = {}", option, *gpus, to.world())};
    }
    if (*gpus % per_dp != 0) {
      return Error{fmt::format("{}: gpus={} is not a multiple of tp x pp x cp = {}", option, *gpus, per_dp)};
    }
    to.dp = *gpus / per_dp;
  }
  if (to.pp == 1) to.virtual_stages = 1;
  return to;
}

ReshardPlan reshard_plan(const ModelSpec& m, const ClusterSpec& cluster, const Plan& from, const Plan& to,
                         const Workload& /*workload*/, const CheckpointSpec& spec) {
  ReshardPlan r;
  r.from = from;
  r.to = to;
  r.from_world = from.world();
  r.to_world = to.world();
  r.to_nodes = (r.to_world + cluster.gpus_per_node - 1) / cluster.gpus_per_node;
  const StateBytesPerParam per_param = state_bytes_per_param(to);  // as checkpoint_cost counts them
  const std::vector<int> old_stage = stage_of_layer(m, from);
  const std::vector<int> new_stage = stage_of_layer(m, to);
  const int old_nd = from.dp * from.cp;   // replicas that each wrote 1/old_nd of a slice
  const int new_nd = to.dp * to.cp;
  const int new_nde = std::max(1, to.edp());

  r.storage_read_Bps = spec.read_GBps.value_or(cluster.storage_read_GBps) * 1e9;
  r.node_Bps = cluster.storage_local ? 0.0 : cluster.nic_Gbps * 1e9 / 8.0 * cluster.nics_per_node;
  r.rank_Bps = cluster.nic_bytes_per_s_per_gpu();

  const Placement pl = Placement::of(to, cluster.gpus_per_node);
  std::map<std::pair<int, int>, std::size_t> by_slice;  // (stage, tp index) -> reads[i]
  std::vector<double> rank_bytes(static_cast<std::size_t>(r.to_world), 0.0);
  for (int rank = 0; rank < r.to_world; ++rank) {
    const Coords c = pl.coords(rank);
    const auto key = std::make_pair(c.p, c.t);
    auto it = by_slice.find(key);
    if (it == by_slice.end()) {
      ReshardRead rd;
      rd.stage = c.p;
      rd.tp_index = c.t;
      const RankParams rp = rank_params(m, to, c.p);
      if (spec.saves(StatePart::kModel)) rd.model_bytes = (rp.dense + rp.expert) * per_param.model;
      if (spec.saves(StatePart::kOptimizer)) {
        const double held = to.zero >= 1 ? rp.dense / new_nd + rp.expert / new_nde : rp.dense + rp.expert;
        rd.optimizer_bytes = held * per_param.optimizer;
      }
      for (int l = 0; l < m.num_layers; ++l) {
        if (new_stage[static_cast<std::size_t>(l)] != c.p) continue;
        const int s = old_stage[static_cast<std::size_t>(l)];
        if (std::find(rd.old_stages.begin(), rd.old_stages.end(), s) == rd.old_stages.end()) rd.old_stages.push_back(s);
      }
      std::sort(rd.old_stages.begin(), rd.old_stages.end());
      for (int t = 0; t < from.tp; ++t) {
        if (slices_overlap(c.t, to.tp, t, from.tp)) rd.old_tp.push_back(t);
      }
      // Every replica of an old slice wrote 1/old_nd of it (deduplicated save), so a new
      // rank opens all of them for its weights; for a ZeRO shard alone (model not saved),
      // the old writers its 1/new_nd overlaps.
      const int slices = static_cast<int>(rd.old_stages.size() * rd.old_tp.size());
      const int writers = rd.model_bytes > 0 || to.zero == 0 ? old_nd : std::min(old_nd, (old_nd + new_nd - 1) / new_nd + 1);
      rd.files = rd.total_bytes() > 0 ? slices * writers : 0;
      it = by_slice.emplace(key, r.reads.size()).first;
      r.reads.push_back(std::move(rd));
    }
    ReshardRead& rd = r.reads[it->second];
    rd.ranks.push_back(rank);
    const double other = checkpoint_rank_other_bytes(spec, rank == 0);
    rank_bytes[static_cast<std::size_t>(rank)] = rd.model_bytes + rd.optimizer_bytes + other;
    rd.other_bytes = std::max(rd.other_bytes, other);
  }
  std::sort(r.reads.begin(), r.reads.end(),
            [](const ReshardRead& a, const ReshardRead& b) { return std::pair(a.stage, a.tp_index) < std::pair(b.stage, b.tp_index); });

  double node_max = 0, rank_max = 0;
  std::vector<double> node_bytes(static_cast<std::size_t>(r.to_nodes), 0.0);
  for (int rank = 0; rank < r.to_world; ++rank) {
    const double b = rank_bytes[static_cast<std::size_t>(rank)];
    r.total_read_bytes += b;
    node_bytes[static_cast<std::size_t>(pl.node(rank))] += b;
    rank_max = std::max(rank_max, b);
  }
  for (double b : node_bytes) node_max = std::max(node_max, b);
  // Every rank reads at once: the readers share the storage's aggregate bandwidth, each
  // node's reads pass through its NICs, and a rank gets at most its GPU's NIC share.
  const double fair = r.storage_read_Bps / r.to_world;
  const double rank_rate = r.rank_Bps > 0 ? std::min(fair, r.rank_Bps) : fair;
  for (ReshardRead& rd : r.reads) {
    rd.read_s = rd.total_bytes() / rank_rate;
  }
  r.storage_s = r.total_read_bytes / r.storage_read_Bps;
  r.node_s = r.node_Bps > 0 ? node_max / r.node_Bps : 0.0;
  const double rank_s = r.rank_Bps > 0 ? rank_max / r.rank_Bps : 0.0;
  r.restore_s = std::max({r.storage_s, r.node_s, rank_s});
  r.bound = r.restore_s == r.storage_s ? "storage" : r.restore_s == r.node_s ? "node NICs" : "rank NIC share";
  return r;
}

}  // namespace stepcast
