#include "stepcast/models/program.h"

#include <fmt/format.h>

namespace stepcast {

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::kCompute: return "compute";
    case OpKind::kCollective: return "collective";
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
    case OpKind::kAlloc: return "alloc";
    case OpKind::kFree: return "free";
  }
  return "?";
}
const char* to_string(ComputeClass c) {
  switch (c) {
    case ComputeClass::kGemm: return "gemm";
    case ComputeClass::kAttention: return "attention";
    case ComputeClass::kElementwise: return "elementwise";
    case ComputeClass::kOptimizer: return "optimizer";
    case ComputeClass::kInput: return "input";
    case ComputeClass::kHost: return "host";
    case ComputeClass::kInterference: return "interference";
    case ComputeClass::kHostOptimizer: return "host_optimizer";
  }
  return "?";
}
const char* to_string(CommClass c) {
  switch (c) {
    case CommClass::kNone: return "none";
    case CommClass::kTp: return "tp";
    case CommClass::kDp: return "dp";
    case CommClass::kPp: return "pp";
    case CommClass::kCp: return "cp";
    case CommClass::kEp: return "ep";
  }
  return "?";
}
const char* to_string(GroupKind g) {
  switch (g) {
    case GroupKind::kTp: return "tp";
    case GroupKind::kCp: return "cp";
    case GroupKind::kEp: return "ep";
    case GroupKind::kDp: return "dp";
    case GroupKind::kEdp: return "edp";
    case GroupKind::kPp: return "pp";
    case GroupKind::kEtp: return "etp";
    case GroupKind::kEtpEp: return "etpep";
    case GroupKind::kWorld: return "world";
  }
  return "?";
}
const char* to_string(Stream s) {
  switch (s) {
    case Stream::kCompute: return "compute";
    case Stream::kTp: return "comm.tp";
    case Stream::kCp: return "comm.cp";
    case Stream::kEp: return "comm.ep";
    case Stream::kDp: return "comm.dp";
    case Stream::kPp: return "p2p";
    case Stream::kPpRecv: return "p2p.recv";
    case Stream::kHostOut: return "host.out";
    case Stream::kHostIn: return "host.in";
  }
  return "?";
}

int Placement::stride(int dim) const {
  const int size[4] = {tp, cp, dp, pp};
  int st = 1;
  for (int d : order) {
    if (d == dim) return st;
    st *= size[d];
  }
  return st;
}

Coords Placement::coords(int r) const {
  const int size[4] = {tp, cp, dp, pp};
  int v[4] = {};
  for (int d : order) {
    v[d] = r % size[d];
    r /= size[d];
  }
  return Coords{v[0], v[1], v[2], v[3]};
}

int Placement::rank(const Coords& c) const {
  return c.t * stride(0) + c.c * stride(1) + c.d * stride(2) + c.p * stride(3);
}

int Placement::group_size(GroupKind g) const {
  switch (g) {
    case GroupKind::kTp: return tp;
    case GroupKind::kCp: return cp;
    case GroupKind::kEp: return ep;
    case GroupKind::kDp: return dp * cp;
    case GroupKind::kEdp: return tp * cp * dp / (expert_tp() * ep);
    case GroupKind::kPp: return pp;
    case GroupKind::kEtp: return expert_tp();
    case GroupKind::kEtpEp: return expert_tp() * ep;
    case GroupKind::kWorld: return world();
  }
  return 1;
}

int Placement::group_stride(GroupKind g) const {
  switch (g) {
    case GroupKind::kTp: return stride(0);
    case GroupKind::kCp: return stride(1);
    case GroupKind::kEp: return folded() ? expert_tp() : data_stride();
    case GroupKind::kDp: return data_stride();
    case GroupKind::kEdp: return folded() ? expert_tp() * ep : data_stride() * ep;
    case GroupKind::kPp: return stride(3);
    case GroupKind::kEtp: return folded() ? 1 : stride(0);
    case GroupKind::kEtpEp: return 1;
    case GroupKind::kWorld: return 1;
  }
  return 1;
}

int Placement::group_member(GroupKind g, int r, int i) const {
  return group_root(g, r) + i * group_stride(g);
}

int Placement::group_root(GroupKind g, int r) const {
  if (g == GroupKind::kEtpEp) return r - r % (expert_tp() * ep);  // a block (loader)
  if (g == GroupKind::kWorld) return 0;
  const Coords c = coords(r);
  // Flattened data index: cp and dp are adjacent, the inner one first.
  const int f = stride(1) < stride(2) ? c.c + cp * c.d : c.d + dp * c.c;
  const int fs = data_stride();
  if (folded() && (g == GroupKind::kEp || g == GroupKind::kEdp || g == GroupKind::kEtp)) {
    // pp outermost (loader): the stage-local index is et + etp * (e + ep * ed).
    const int i = r % (tp * cp * dp);
    const int et = expert_tp();
    if (g == GroupKind::kEtp) return r - i % et;
    return g == GroupKind::kEp ? r - ((i / et) % ep) * et : r - (i / (et * ep)) * (et * ep);
  }
  switch (g) {
    case GroupKind::kTp: return r - c.t * stride(0);
    case GroupKind::kCp: return r - c.c * stride(1);
    case GroupKind::kDp: return r - f * fs;
    case GroupKind::kEp: return r - (f % ep) * fs;
    case GroupKind::kEdp: return r - (f - f % ep) * fs;
    case GroupKind::kPp: return r - c.p * stride(3);
    case GroupKind::kEtp: return r - c.t * stride(0);  // not folded: the TP group
    case GroupKind::kEtpEp:
    case GroupKind::kWorld: break;  // above
  }
  return r;
}

ExpertLayoutError expert_layout_error(const Placement& pl) {
  const int etp = pl.expert_tp();
  const std::int64_t stage = std::int64_t{pl.tp} * pl.cp * pl.dp;
  if (stage % (std::int64_t{etp} * pl.ep) != 0) {
    if (etp == pl.tp) {
      return {"ep", fmt::format("{} does not divide dp x cp ({} x {}): experts are sharded across data-parallel ranks",
                                pl.ep, pl.dp, pl.cp)};
    }
    return {"ep", fmt::format("etp x ep = {} x {} does not divide tp x cp x dp = {} (the ranks of a pipeline stage)",
                              etp, pl.ep, stage)};
  }
  if (etp != pl.tp && pl.order[3] != 3) {
    return {"etp", fmt::format("{} != tp {} (parallel folding) needs pp outermost in the placement", etp, pl.tp)};
  }
  return {};
}

GroupShape Placement::stage_pair(int a, int b) const {
  const bool same_node = node(stage_peer(0, a)) == node(stage_peer(0, b));
  return GroupShape{2, same_node ? 2 : 1, same_node ? 1 : 2};
}

int Placement::stage_peer(int r, int stage) const {
  const Coords c = coords(r);
  return r + (stage - c.p) * stride(3);
}

std::vector<std::uint32_t> collective_sequence(const RoleTemplate& role) {
  std::vector<std::uint32_t> seq(role.ops.size(), 0);
  std::array<std::uint32_t, kNumGroupKinds> per_group{};
  for (std::size_t i = 0; i < role.ops.size(); ++i) {
    const Op& op = role.ops[i];
    if (op.kind == OpKind::kCollective) seq[i] = ++per_group[static_cast<std::size_t>(op.group)];
  }
  return seq;
}

std::uint32_t Program::intern(std::string name) {
  names.push_back(std::move(name));
  return static_cast<std::uint32_t>(names.size() - 1);
}

}  // namespace stepcast
