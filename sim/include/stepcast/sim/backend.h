// Network backends: how long communication ops take. The engine asks once per template
// op (groups of one kind have the same shape under the regular placement), so a backend
// is not on the engine's hot path.
#pragma once

#include "stepcast/models/program.h"
#include "stepcast/models/sim_time.h"
#include "stepcast/models/specs.h"

namespace stepcast::sim {

class NetworkBackend {
 public:
  virtual ~NetworkBackend() = default;
  // Duration of collective `op` (kind, group kind, bytes) once all members have arrived.
  virtual SimTime collective_time(const Program& program, const Op& op) = 0;
  // Duration of the transfer of send/recv `op` between pipeline stages `from` and `to`
  // of the same (t, c, d) coordinates.
  virtual SimTime p2p_time(const Program& program, const Op& op, int from_stage, int to_stage) = 0;
};

// Alpha-beta costs of the foundation's collective models (collectives.h).
class AnalyticBackend final : public NetworkBackend {
 public:
  explicit AnalyticBackend(const ClusterSpec& cluster) : cluster_(cluster) {}
  SimTime collective_time(const Program& program, const Op& op) override;
  SimTime p2p_time(const Program& program, const Op& op, int from_stage, int to_stage) override;

 private:
  ClusterSpec cluster_;
};

}  // namespace stepcast::sim
