// Reliability inputs of a scenario and their closed-form models (docs/reliability.md):
// the failure model (`faults.failures`), the checkpoint policy (`checkpoint`), the
// checkpoint cost model (bytes per state part, write / snapshot / restore times) and the
// classic interval formulas (Young 1974, Daly 2006). Plain values filled by the scenario
// loader, which validates every field; the campaign simulation (sim/campaign.h) runs them
// over a whole training.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "stepcast/models/specs.h"
#include "stepcast/models/stragglers.h"

namespace stepcast {

// ---------------------------------------------------------------------------------------
// Failure model.

enum class Lifetime { kExponential, kWeibull };

// What interrupts the job, in report order. Each cause counts its rate per unit of a fixed
// kind (failure_unit_name): per GPU-hour (gpu), per node-hour (host, nic, software), per
// switch-hour (switch; one switch serves `nodes_per_switch` nodes).
enum class FailureCause { kGpu = 0, kHost = 1, kNic = 2, kSwitch = 3, kSoftware = 4 };
inline constexpr int kFailureCauses = 5;
inline constexpr std::array<FailureCause, kFailureCauses> kAllFailureCauses = {
    FailureCause::kGpu, FailureCause::kHost, FailureCause::kNic, FailureCause::kSwitch,
    FailureCause::kSoftware};

const char* failure_cause_name(FailureCause cause);  // "gpu", "host", "nic", "switch", "software"
const char* failure_unit_name(FailureCause cause);   // "GPU", "node", "node", "switch", "node"
// Hardware causes take nodes out of service (they must be replaced before a restart);
// software failures restart on the same nodes.
bool failure_replaces_nodes(FailureCause cause);

struct ComponentFailures {
  double rate_per_unit_h = 0;          // failures per unit-hour (unit: failure_unit_name), >= 0
  Lifetime lifetime = Lifetime::kExponential;
  double weibull_shape = 1.0;          // k > 0 (Weibull only); the scale keeps the mean at 1/rate
  std::optional<double> detection_s;   // failure -> job stopped; unset: FailureSpec::detection_s
};

struct FailureSpec {
  std::string name = "custom";         // the preset it started from, or "custom"
  std::string source;                  // where the figures come from
  std::array<ComponentFailures, kFailureCauses> components;  // indexed by FailureCause
  int nodes_per_switch = 1;            // nodes a switch failure takes down (>= 1)
  double detection_s = 600;            // default detection latency, s
  double reschedule_s = 120;           // allocate nodes and launch processes, s
  double init_s = 300;                 // process start, communicator init, model build, s
  int spare_nodes = 0;                 // hot spares that replace a failed node at once
  double replace_node_h = 24;          // a failed node is back in service this long after
                                       // its failure is detected (repair or replacement), h

  const ComponentFailures& component(FailureCause c) const {
    return components[static_cast<std::size_t>(c)];
  }
  ComponentFailures& component(FailureCause c) { return components[static_cast<std::size_t>(c)]; }
  double detection_of(FailureCause c) const { return component(c).detection_s.value_or(detection_s); }
};

struct FaultSpec {
  std::optional<FailureSpec> failures;  // faults.failures
  PerturbationSpec perturb;             // faults.stragglers, faults.crash, faults.mismatch
};

// Units of each cause in a job on `cluster`: GPUs, nodes, or switches =
// ceil(nodes / nodes_per_switch).
std::int64_t failure_units(const FailureSpec& spec, const ClusterSpec& cluster, FailureCause cause);
// Nodes one failure of `cause` takes out of service: 0 (software), 1, or
// min(nodes_per_switch, nodes) for a switch.
int failure_nodes_down(const FailureSpec& spec, const ClusterSpec& cluster, FailureCause cause);
// Failures per hour of the whole job from `cause` (units x rate), and their sum; the job's
// mean time between failures is 1 / job_failure_rate_per_h (independent components add
// rates; a Weibull component has the same mean rate by construction).
double cause_failure_rate_per_h(const FailureSpec& spec, const ClusterSpec& cluster, FailureCause cause);
double job_failure_rate_per_h(const FailureSpec& spec, const ClusterSpec& cluster);

// The failure environment of a job on `cluster`: what every closed form (the planner's
// goodput, the checkpoint advice) takes from the failure model. The one place these are
// computed (docs/reliability.md "Intervals and the recommendation").
struct FailureEnv {
  bool failures = false;        // the job fails at all (job failure rate > 0)
  std::array<double, kFailureCauses> cause_rate_per_h{};  // per cause, the whole job, 1/h
  double job_rate_per_h = 0;    // their sum, 1/h
  double mtbf_s = 0;            // M = 3600 / job_rate_per_h (0 when !failures), s
  double mean_detection_s = 0;  // detection latency weighted by each cause's share, s
  double node_wait_s = 0;       // no spares: the hardware share x replace_node_h; else 0, s
  double restart_s = 0;         // detection + node wait + reschedule + init; the restore,
                                // which depends on the layout, is not included, s
};
// Without spares every hardware failure waits for its node to come back; with spares the
// closed form assumes the pool never runs dry (the campaign simulation does not). A spec
// whose rates are all 0 gives failures = false and zeros elsewhere.
FailureEnv failure_env(const FailureSpec& spec, const ClusterSpec& cluster);

// ---------------------------------------------------------------------------------------
// Checkpoint policy.

enum class CheckpointMode { kSync, kAsync };

// The parts of a training state a checkpoint may hold, in the order of `checkpoint.contents`.
enum class StatePart {
  kModel = 0, kOptimizer, kLrScheduler, kGradScaler, kRng, kDataSampler, kStep, kConfig
};
inline constexpr int kStateParts = 8;
inline constexpr std::array<StatePart, kStateParts> kAllStateParts = {
    StatePart::kModel, StatePart::kOptimizer, StatePart::kLrScheduler, StatePart::kGradScaler,
    StatePart::kRng, StatePart::kDataSampler, StatePart::kStep, StatePart::kConfig};
const char* state_part_name(StatePart part);  // "model", "optimizer", "lr_scheduler", ...

struct CheckpointSpec {
  // At most one of the two is set; neither: `stepcast checkpoint` recommends an interval.
  std::optional<double> interval_s;             // compute time between checkpoints, s
  std::optional<std::int64_t> interval_steps;   // steps between checkpoints
  CheckpointMode mode = CheckpointMode::kSync;
  bool sharded = true;                          // false: gather to rank 0, which writes
  // The parts saved, as written in the scenario (no duplicates, not empty); default all.
  std::vector<StatePart> contents{kAllStateParts.begin(), kAllStateParts.end()};
  std::optional<double> write_GBps;             // overrides cluster.storage.write_GBps
  std::optional<double> read_GBps;              // overrides cluster.storage.read_GBps
  double d2h_GBps = 25;                         // device-to-host snapshot rate per GPU (async)

  bool saves(StatePart part) const;
};

// ---------------------------------------------------------------------------------------
// Checkpoint cost model (docs/reliability.md "Checkpoint cost model").

// Bytes per parameter of the model and optimizer parts, by where the stack keeps the fp32
// master copy of the weights (its profile's master_in_optimizer, models/data/stacks.json;
// docs/checkpoints.md "What a checkpoint contains"):
// - Megatron-Core's distributed optimizer and DeepSpeed ZeRO keep it in the optimizer
//   state: model = the 16-bit weights (2 B), optimizer = master + Adam m, v (12 B; SGD:
//   master + momentum, 8 B).
// - PyTorch FSDP2 keeps the sharded parameters in their original dtype (fp32) and casts
//   to param_dtype only for the all-gather (MixedPrecisionPolicy docstring, torch/distributed/
//   fsdp/_fully_shard/_fsdp_api.py): model = fp32 (4 B), optimizer = m, v (8 B; SGD: 4 B).
struct StateBytesPerParam {
  double model = 2, optimizer = 12;
  bool master_in_optimizer = true;   // the optimizer part can restore the weights
};
StateBytesPerParam state_bytes_per_param(const Plan& plan);

struct CheckpointCost {
  // Bytes of one checkpoint: unique data (replicas written once), by part and in total.
  std::array<double, kStateParts> part_bytes{};
  double total_bytes = 0;
  double rank_write_bytes = 0;     // the busiest rank's share of the write (sharded)
  double node_write_bytes = 0;     // the busiest node's share
  double rank_state_bytes = 0;     // state held by the rank holding the most (async snapshot)
  double node_staging_bytes = 0;   // pinned host memory an async snapshot needs per node
  double host_memory_bytes = 0;    // cluster.host_memory_GiB
  bool staging_fits = false;       // node_staging_bytes <= host_memory_bytes
  // Bandwidths used, bytes/s.
  double storage_write_Bps = 0, storage_read_Bps = 0;  // aggregate, shared by all writers
  double node_Bps = 0;             // one node's NICs
  double rank_nic_Bps = 0;         // one GPU's share of its node's NICs
  double d2h_Bps = 0;
  // Times, s.
  double write_s = 0;              // write of one checkpoint to storage, commit_s included
  double commit_s = 0;             // of write_s: the fixed cost of a save (cluster.storage_commit_s)
  const char* write_bound = "";    // "storage", "node NICs" or "rank-0 NIC"
  double snapshot_s = 0;           // device-to-host copy of the busiest rank's state
  bool async = false;              // mode async and the staging fits
  double pause_s = 0;              // training stalls: write_s (sync) or async_pause_s()
  double background_s = 0;         // async: async_background_s() (0 when sync)
  double restore_s = 0;            // read + distribute, same world size
  double reshard_s = 0;            // extra when the world size changed (exchange of state)

  // An async save pauses for its snapshot and the commit of the previous save (the
  // collective and the manifest); its files are written in the background after the pause.
  double async_pause_s() const { return snapshot_s + commit_s; }
  double async_background_s() const { return write_s - commit_s; }
};

// REQUIRES: a validated layout. `spec.mode` async with a staging that does not fit in host
// memory falls back to the synchronous write (async = false).
// Bytes of the small parts (rng, data sampler, and on the first rank the scheduler, grad
// scaler, step and config) one rank writes and reads back; the constants are [U]
// (docs/reliability.md).
double checkpoint_rank_other_bytes(const CheckpointSpec& spec, bool first_rank);

// What the rank of one pipeline stage holds, as a checkpoint writes and stages it
// (checkpoint_cost): its share of the replicated state, in parameters (its
// dense parameters / (dp cp) + its expert parameters / (dp cp tp / (ep etp)): a replicated
// tensor is written once, split among its replicas), and its static memory's weights and
// optimizer state in bytes (estimate.h stage_memory;
// estimate() leaves every stage's in Estimate::stages, estimate.h stage_states without one).
struct StageState {
  double write_params = 0;
  double params_bytes = 0;
  double optimizer_bytes = 0;
  bool operator==(const StageState&) const = default;
};

CheckpointCost checkpoint_cost(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan,
                               const Workload& workload, const CheckpointSpec& spec);
// The same from each pipeline stage's state, as estimate() leaves it (Estimate::stages), so
// that a caller holding the estimate does not price the stages' memory again.
// REQUIRES: stages.size() == plan.pp.
CheckpointCost checkpoint_cost(const ClusterSpec& cluster, const Plan& plan, const CheckpointSpec& spec,
                               std::span<const StageState> stages);

// ---------------------------------------------------------------------------------------
// Interval formulas (docs/cost-model-sources.md section 8). delta = checkpoint pause, M = job MTBF,
// R = restart time, tau = compute between checkpoints, T_s = failure-free compute; all in
// seconds. REQUIRES: delta > 0, M > 0.

// Young (1974), CACM 17(9): tau = sqrt(2 delta M).
double young_interval_s(double delta_s, double mtbf_s);
// Daly (2006), FGCS 22(3), eq. 37: sqrt(2 delta M) [1 + sqrt(delta/(2M))/3 + delta/(18M)] - delta
// for delta < 2M, else M.
double daly_interval_s(double delta_s, double mtbf_s);
// Daly's expected wall time of one segment of tau compute followed by a checkpoint, with
// exponential failures (failures also during restart): M e^{R/M} (e^{(tau+delta)/M} - 1).
// The one Daly formula: daly_wall_time_s and daly_goodput are this, scaled.
// REQUIRES: M > 0.
double daly_segment_wall_s(double tau_s, double delta_s, double restart_s, double mtbf_s);
// Daly's expected wall time for T_s of failure-free compute:
// T_w = daly_segment_wall_s(tau, delta, R, M) T_s / tau. REQUIRES: tau, M > 0.
double daly_wall_time_s(double solve_s, double tau_s, double delta_s, double restart_s, double mtbf_s);
// Daly's goodput T_s / T_w = tau / daly_segment_wall_s(tau, delta, R, M), in (0, 1].
// REQUIRES: tau, M > 0.
double daly_goodput(double tau_s, double delta_s, double restart_s, double mtbf_s);

}  // namespace stepcast
