#include "stepcast/sim/backend.h"

namespace stepcast::sim {

SimTime AnalyticBackend::collective_time(const Program& program, const Op& op) {
  const Placement& pl = program.placement;
  const GroupShape g = group_shape(pl.group_size(op.group), pl.group_stride(op.group),
                                   pl.gpus_per_node);
  return SimTime::from_s(collective_cost(cluster_, op.coll, g, op.bytes).time_s);
}

SimTime AnalyticBackend::p2p_time(const Program& program, const Op& op, int from_stage,
                                  int to_stage) {
  const Placement& pl = program.placement;
  const int a = pl.stage_peer(0, from_stage), b = pl.stage_peer(0, to_stage);
  const bool same_node = pl.node(a) == pl.node(b);
  const GroupShape g{2, same_node ? 2 : 1, same_node ? 1 : 2};
  return SimTime::from_s(collective_cost(cluster_, CollKind::kSendRecv, g, op.bytes).time_s);
}

}  // namespace stepcast::sim
