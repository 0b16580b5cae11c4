#include "stepcast/sim/run.h"

#include <memory>
#include <utility>

#include <fmt/format.h>

#include "stepcast/models/lower.h"
#include "stepcast/sim/backend.h"
#include "stepcast/sim/perturb.h"
#include "stepcast/sim/simgrid_backend.h"

namespace stepcast::sim {

Result<RunResult> run_scenario(const Scenario& s, const RunOptions& o) {
  RunResult r;
  r.network = o.network.empty() ? s.network : o.network;
  r.full = o.full;
  if (r.network != "analytic" && r.network != "simgrid") {
    return Error{fmt::format("--network: \"{}\" is not one of \"analytic\", \"simgrid\"", r.network)};
  }
  if (r.network == "simgrid") {
    if (!simgrid_available()) {
      return Error{"network: \"simgrid\" is not available: this stepcast was built without SimGrid "
                   "(configure with -DSTEPCAST_WITH_SIMGRID=ON)"};
    }
    if (s.cluster.world() > kSimgridMaxRanks) {
      return Error{fmt::format("network: \"simgrid\" supports up to {} GPUs; the cluster has {}",
                               kSimgridMaxRanks, s.cluster.world())};
    }
    // Groups on different nodes may share NICs and leaf uplinks: representative mode
    // could not see their contention.
    if (!r.full && s.cluster.nodes > 1) {
      r.full = true;
      r.note = "simgrid on more than one node: every rank simulated (groups may contend)";
    }
  }
  std::unique_ptr<ScenarioPerturbations> perturb;
  if (s.faults.perturb.any()) {
    if (!r.full) {
      r.full = true;
      r.note = "faults perturb individual ranks: every rank simulated";
    }
  }
  r.program = lower(s);
  if (s.faults.perturb.any()) {
    perturb = std::make_unique<ScenarioPerturbations>(s.faults.perturb, r.program.placement, s.seed);
  }
  std::unique_ptr<NetworkBackend> backend;
  if (r.network == "simgrid") {
    auto sg = make_simgrid_backend(s.cluster, r.program);  // loads the plugin on first use
    if (!sg) return sg.error();
    backend = std::move(sg).value();
  } else {
    backend = std::make_unique<AnalyticBackend>(s.cluster);
  }
  EngineOptions eo;
  eo.full = r.full;
  eo.steps = o.steps;
  eo.record_memory = o.record_memory;
  eo.perturb = perturb.get();
  r.out = simulate(r.program, *backend, eo);
  if (!r.out.deadlock) r.summary = analyze(r.program, r.out.timeline);
  return r;
}

}  // namespace stepcast::sim
