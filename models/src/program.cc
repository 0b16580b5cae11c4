#include "stepcast/models/program.h"

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
  }
  return "?";
}

Coords Placement::coords(int rank) const {
  Coords c;
  c.t = rank % tp;
  rank /= tp;
  c.c = rank % cp;
  rank /= cp;
  c.d = rank % dp;
  c.p = rank / dp;
  return c;
}

int Placement::rank(const Coords& c) const { return c.t + tp * (c.c + cp * (c.d + dp * c.p)); }

int Placement::group_size(GroupKind g) const {
  switch (g) {
    case GroupKind::kTp: return tp;
    case GroupKind::kCp: return cp;
    case GroupKind::kEp: return ep;
    case GroupKind::kDp: return dp * cp;
    case GroupKind::kEdp: return dp * cp / ep;
    case GroupKind::kPp: return pp;
  }
  return 1;
}

int Placement::group_stride(GroupKind g) const {
  switch (g) {
    case GroupKind::kTp: return 1;
    case GroupKind::kCp: return tp;
    case GroupKind::kEp: return tp;
    case GroupKind::kDp: return tp;
    case GroupKind::kEdp: return tp * ep;
    case GroupKind::kPp: return tp * cp * dp;
  }
  return 1;
}

int Placement::group_member(GroupKind g, int r, int i) const {
  return group_root(g, r) + i * group_stride(g);
}

int Placement::group_root(GroupKind g, int r) const {
  const Coords c = coords(r);
  const int dc = c.c + cp * c.d;  // flattened cp x dp index
  switch (g) {
    case GroupKind::kTp: return r - c.t;
    case GroupKind::kCp: return rank({c.t, 0, c.d, c.p});
    case GroupKind::kDp: return rank({c.t, 0, 0, c.p});
    case GroupKind::kEp: {
      const int first = dc - dc % ep;
      return c.t + tp * (first + cp * dp * c.p);
    }
    case GroupKind::kEdp: {
      const int first = dc % ep;
      return c.t + tp * (first + cp * dp * c.p);
    }
    case GroupKind::kPp: return rank({c.t, c.c, c.d, 0});
  }
  return r;
}

int Placement::stage_peer(int r, int stage) const {
  Coords c = coords(r);
  c.p = stage;
  return rank(c);
}

std::uint32_t Program::intern(std::string name) {
  names.push_back(std::move(name));
  return static_cast<std::uint32_t>(names.size() - 1);
}

}  // namespace stepcast
