// Network backends: how long communication ops take. The engine asks once per template
// op (groups of one kind have the same shape under the regular placement), so a backend
// is not on the engine's hot path.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "stepcast/models/program.h"
#include "stepcast/models/sim_time.h"
#include "stepcast/models/specs.h"

namespace stepcast::sim {

// A network whose transfers contend for links (flow-level): instead of a fixed duration
// per op, the engine hands it each transfer when it starts and learns when it ends. The
// engine's event loop runs inside run(), so the network's clock and the engine's advance
// together.
class FlowNetwork {
 public:
  virtual ~FlowNetwork() = default;
  // Whether this collective (members in group order) or p2p ({src, dst}) goes through the
  // flow model; false: the engine uses the backend's fixed duration.
  virtual bool handles(const Program& program, const Op& op, std::span<const int> ranks) = 0;
  // Starts transfer `handle` at `now` (the network's current time).
  virtual void start(std::uint64_t handle, const Program& program, const Op& op,
                     std::span<const int> ranks, SimTime now) = 0;
  // True while transfers are in flight.
  virtual bool busy() const = 0;
  // Advances the network to `until` at most, stopping early when transfers end; appends
  // (handle, end time) of finished transfers to `done`. REQUIRES: called from run()'s body.
  virtual void advance(SimTime until, std::vector<std::pair<std::uint64_t, SimTime>>& done) = 0;
  // Runs `body` (the engine's loop) inside the network simulation.
  virtual void run(const std::function<void()>& body) = 0;
};

class NetworkBackend {
 public:
  virtual ~NetworkBackend() = default;
  // The flow-level network, or nullptr for a backend with fixed durations.
  virtual FlowNetwork* flows() { return nullptr; }
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
