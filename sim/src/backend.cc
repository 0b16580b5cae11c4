#include "stepcast/sim/backend.h"

namespace stepcast::sim {

SimTime AnalyticBackend::collective_time(const Program& program, const Op& op) {
  const Placement& pl = program.placement;
  const GroupShape g = group_shape(pl.group_size(op.group), pl.group_stride(op.group),
                                   pl.gpus_per_node);
  if (program.deepep(op)) return SimTime::from_s(deepep_time_s(cluster_, g, op.bytes, program.deepep_rdma_per_byte));
  return SimTime::from_s(collective_cost(cluster_, op.coll, g, op.bytes).time_s);
}

SimTime AnalyticBackend::p2p_time(const Program& program, const Op& op, int from_stage,
                                  int to_stage) {
  const GroupShape g = program.placement.stage_pair(from_stage, to_stage);
  return SimTime::from_s(op.transfers * collective_cost(cluster_, CollKind::kSendRecv, g, op.bytes).time_s);
}

}  // namespace stepcast::sim
