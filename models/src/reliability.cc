#include "stepcast/models/reliability.h"

#include <algorithm>
#include <cmath>

#include "stepcast/models/estimate.h"
#include "stepcast/models/params.h"
#include "stepcast/models/stack.h"

namespace stepcast {

// failure_cause_name and failure_unit_name: names.cc (the FailureCause table).

bool failure_replaces_nodes(FailureCause c) { return c != FailureCause::kSoftware; }

std::int64_t failure_units(const FailureSpec& f, const ClusterSpec& c, FailureCause cause) {
  switch (cause) {
    case FailureCause::kGpu: return c.world();
    case FailureCause::kSwitch: return (std::int64_t{c.nodes} + f.nodes_per_switch - 1) / f.nodes_per_switch;
    case FailureCause::kHost:
    case FailureCause::kNic:
    case FailureCause::kSoftware: return c.nodes;
  }
  return 0;
}

int failure_nodes_down(const FailureSpec& f, const ClusterSpec& c, FailureCause cause) {
  if (!failure_replaces_nodes(cause)) return 0;
  if (cause == FailureCause::kSwitch) return std::min(f.nodes_per_switch, c.nodes);
  return 1;
}

double cause_failure_rate_per_h(const FailureSpec& f, const ClusterSpec& c, FailureCause cause) {
  return static_cast<double>(failure_units(f, c, cause)) * f.component(cause).rate_per_unit_h;
}

double job_failure_rate_per_h(const FailureSpec& f, const ClusterSpec& c) {
  double sum = 0;
  for (FailureCause cause : kAllFailureCauses) sum += cause_failure_rate_per_h(f, c, cause);
  return sum;
}

FailureEnv failure_env(const FailureSpec& f, const ClusterSpec& c) {
  FailureEnv env;
  for (FailureCause cause : kAllFailureCauses) {
    env.cause_rate_per_h[static_cast<std::size_t>(cause)] = cause_failure_rate_per_h(f, c, cause);
  }
  const double rate_h = job_failure_rate_per_h(f, c);
  env.job_rate_per_h = rate_h;
  if (!(rate_h > 0)) return env;
  env.failures = true;
  env.mtbf_s = 3600.0 / rate_h;
  double replace_share = 0;
  for (FailureCause cause : kAllFailureCauses) {
    const double share = env.cause_rate_per_h[static_cast<std::size_t>(cause)] / rate_h;
    env.mean_detection_s += share * f.detection_of(cause);
    if (failure_replaces_nodes(cause)) replace_share += share;
  }
  env.node_wait_s = f.spare_nodes == 0 ? replace_share * f.replace_node_h * 3600.0 : 0.0;
  env.restart_s = env.mean_detection_s + env.node_wait_s + f.reschedule_s + f.init_s;
  return env;
}

const char* state_part_name(StatePart p) {
  switch (p) {
    case StatePart::kModel: return "model";
    case StatePart::kOptimizer: return "optimizer";
    case StatePart::kLrScheduler: return "lr_scheduler";
    case StatePart::kGradScaler: return "grad_scaler";
    case StatePart::kRng: return "rng";
    case StatePart::kDataSampler: return "data_sampler";
    case StatePart::kStep: return "step";
    case StatePart::kConfig: return "config";
  }
  return "?";
}

bool CheckpointSpec::saves(StatePart part) const {
  return std::find(contents.begin(), contents.end(), part) != contents.end();
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// The small parts, bytes [U] (orders of magnitude of what PyTorch / Megatron pickle; they
// are < 1e-6 of a model checkpoint and only matter when the model is not saved):
constexpr double kLrSchedulerBytes = 1024;       // a few scalars (step, base lrs), once
constexpr double kGradScalerBytes = 1024;        // scale, growth tracker, once
constexpr double kRngBytesPerRank = 16 * 1024;   // Python + NumPy + torch CPU (~5 KB mt19937
                                                 // each) + CUDA and TP-tracker states, per rank
constexpr double kSamplerBytesPerDpRank = 4096;  // consumed samples, epoch, shuffle seed
constexpr double kStepBytes = 8;                 // the iteration counter, once
constexpr double kConfigBytes = 64 * 1024;       // the run's arguments, once

}  // namespace

StateBytesPerParam state_bytes_per_param(const Plan& plan) {
  StateBytesPerParam b;
  const bool adam = plan.optimizer == Optimizer::kAdam;
  if (!stack_profile(plan.stack).master_in_optimizer) {
    b.model = 4;
    b.optimizer = adam ? 8 : 4;
    b.master_in_optimizer = false;
  } else {
    b.model = 2;
    b.optimizer = adam ? 12 : 8;
  }
  return b;
}

double checkpoint_rank_other_bytes(const CheckpointSpec& spec, bool first_rank) {
  double b = (spec.saves(StatePart::kRng) ? kRngBytesPerRank : 0.0) +
             (spec.saves(StatePart::kDataSampler) ? kSamplerBytesPerDpRank : 0.0);
  if (first_rank) {
    b += (spec.saves(StatePart::kLrScheduler) ? kLrSchedulerBytes : 0.0) +
         (spec.saves(StatePart::kGradScaler) ? kGradScalerBytes : 0.0) +
         (spec.saves(StatePart::kStep) ? kStepBytes : 0.0) + (spec.saves(StatePart::kConfig) ? kConfigBytes : 0.0);
  }
  return b;
}

CheckpointCost checkpoint_cost(const ModelSpec& m, const ClusterSpec& c, const Plan& p,
                               const Workload& w, const CheckpointSpec& spec) {
  return checkpoint_cost(c, p, spec, stage_states(m, c, p, w));
}

CheckpointCost checkpoint_cost(const ClusterSpec& c, const Plan& p, const CheckpointSpec& spec,
                               std::span<const StageState> stages) {
  CheckpointCost k;
  const double world = c.world();
  const double per_stage = world / p.pp;  // ranks of one pipeline stage
  const bool model = spec.saves(StatePart::kModel);
  const bool optim = spec.saves(StatePart::kOptimizer);
  const double once = (spec.saves(StatePart::kLrScheduler) ? kLrSchedulerBytes : 0.0) +
                      (spec.saves(StatePart::kGradScaler) ? kGradScalerBytes : 0.0) +
                      (spec.saves(StatePart::kStep) ? kStepBytes : 0.0) +
                      (spec.saves(StatePart::kConfig) ? kConfigBytes : 0.0);
  const double rng = spec.saves(StatePart::kRng) ? kRngBytesPerRank : 0.0;
  const double sampler = spec.saves(StatePart::kDataSampler) ? kSamplerBytesPerDpRank : 0.0;
  const StateBytesPerParam per_param = state_bytes_per_param(p);

  for (int s = 0; s < p.pp; ++s) {
    // A replicated tensor is written once, its bytes split evenly among its replicas
    // (PyTorch DCP dedup_save_plans balances them; Megatron's fully parallel save): a rank
    // writes 1/(dp cp) of its dense weights and 1/(dp cp / ep) of its expert weights, the
    // same share a ZeRO-1 rank holds of the optimizer state (StageState::write_params).
    // What the rank holds (ZeRO decides): its weights and optimizer state, the static
    // memory model's figures.
    const StageState& st = stages[static_cast<std::size_t>(s)];
    const double share = st.write_params;
    const double model_share = model ? share * per_param.model : 0.0;
    const double optim_share = optim ? share * per_param.optimizer : 0.0;
    k.part_bytes[static_cast<std::size_t>(StatePart::kModel)] += model_share * per_stage;
    k.part_bytes[static_cast<std::size_t>(StatePart::kOptimizer)] += optim_share * per_stage;
    double write = model_share + optim_share + rng;
    if (s == 0) write += once + sampler;  // rank 0 writes the once-per-job parts
    k.rank_write_bytes = std::max(k.rank_write_bytes, write);
    const double held =
        (model ? st.params_bytes : 0.0) + (optim ? st.optimizer_bytes : 0.0) + rng + (s == 0 ? once + sampler : 0.0);
    k.rank_state_bytes = std::max(k.rank_state_bytes, held);
  }
  k.part_bytes[static_cast<std::size_t>(StatePart::kLrScheduler)] =
      spec.saves(StatePart::kLrScheduler) ? kLrSchedulerBytes : 0.0;
  k.part_bytes[static_cast<std::size_t>(StatePart::kGradScaler)] =
      spec.saves(StatePart::kGradScaler) ? kGradScalerBytes : 0.0;
  k.part_bytes[static_cast<std::size_t>(StatePart::kRng)] = rng * world;
  k.part_bytes[static_cast<std::size_t>(StatePart::kDataSampler)] = sampler * p.dp;
  k.part_bytes[static_cast<std::size_t>(StatePart::kStep)] = spec.saves(StatePart::kStep) ? kStepBytes : 0.0;
  k.part_bytes[static_cast<std::size_t>(StatePart::kConfig)] =
      spec.saves(StatePart::kConfig) ? kConfigBytes : 0.0;
  for (double b : k.part_bytes) k.total_bytes += b;

  // Ranks fill nodes in order; the busiest node holds gpus_per_node ranks like the
  // busiest one (exact when a node holds ranks of one pipeline stage, the usual layout).
  const double ranks_per_node = std::min<double>(c.gpus_per_node, world);
  k.node_write_bytes = ranks_per_node * k.rank_write_bytes;
  k.node_staging_bytes = ranks_per_node * k.rank_state_bytes;
  k.host_memory_bytes = c.host_memory_GiB * kGiB;
  k.staging_fits = k.node_staging_bytes <= k.host_memory_bytes;

  k.storage_write_Bps = spec.write_GBps.value_or(c.storage_write_GBps) * 1e9;
  k.storage_read_Bps = spec.read_GBps.value_or(c.storage_read_GBps) * 1e9;
  k.node_Bps = c.storage_local ? 0.0 : c.nic_Gbps * 1e9 / 8.0 * c.nics_per_node;  // 0: no NIC bound
  k.rank_nic_Bps = c.nic_bytes_per_s_per_gpu();
  k.d2h_Bps = spec.d2h_GBps * 1e9;
  // A node without NICs (a single-node cluster given none) writes to local storage: only
  // the storage bound applies.
  auto over = [](double bytes, double bps) { return bps > 0 ? bytes / bps : 0.0; };

  if (spec.sharded) {
    // Every rank writes its share at once: the writers share the storage's aggregate
    // bandwidth, and each node's share passes through its NICs.
    const double storage = over(k.total_bytes, k.storage_write_Bps);
    const double node = over(k.node_write_bytes, k.node_Bps);
    k.write_s = std::max(storage, node);
    k.write_bound = node > storage ? "node NICs" : "storage";
    // Restore: each node reads back its share, then every replica receives the rest of
    // its state from the rank that read it (one reader per replica group broadcasting,
    // as MegaScale recovers; a pipelined broadcast costs about bytes / link bandwidth).
    const double read = std::max(over(k.total_bytes, k.storage_read_Bps),
                                 over(k.node_write_bytes, k.node_Bps));
    k.restore_s = read + over(std::max(0.0, k.rank_state_bytes - k.rank_write_bytes), k.rank_nic_Bps);
  } else {
    // Gather to rank 0: every byte enters rank 0 through its GPU's share of the node's NICs,
    // and leaves its node for storage; the least of the three rates bounds the write.
    k.rank_write_bytes = k.total_bytes;
    k.node_write_bytes = k.total_bytes;
    double rate = k.storage_write_Bps;
    k.write_bound = "storage";
    if (k.node_Bps > 0 && k.node_Bps < rate) {
      rate = k.node_Bps;
      k.write_bound = "node NICs";
    }
    if (k.rank_nic_Bps > 0 && k.rank_nic_Bps < rate) {
      rate = k.rank_nic_Bps;
      k.write_bound = "rank-0 NIC";
    }
    k.write_s = k.total_bytes / rate;
    // Restore: rank 0 reads the file, then sends every byte out through its NIC share.
    double read_rate = k.storage_read_Bps;
    if (k.node_Bps > 0) read_rate = std::min(read_rate, k.node_Bps);
    if (k.rank_nic_Bps > 0) read_rate = std::min(read_rate, k.rank_nic_Bps);
    k.restore_s = k.total_bytes / read_rate + over(k.total_bytes, k.rank_nic_Bps);
  }
  // A resharded restore (world size changed) also exchanges every rank's state once,
  // all-to-all over the scale-out network [D].
  k.reshard_s = over(k.rank_state_bytes, k.rank_nic_Bps);

  // Besides its bytes, a save creates files and directories and commits them (renames,
  // directory fsyncs, the manifest): a fixed cost, measured by `calibrate`.
  k.commit_s = c.storage_commit_s;
  k.write_s += k.commit_s;

  k.snapshot_s = k.rank_state_bytes / k.d2h_Bps;
  k.async = spec.mode == CheckpointMode::kAsync && k.staging_fits;
  k.pause_s = k.async ? k.async_pause_s() : k.write_s;
  k.background_s = k.async ? k.async_background_s() : 0.0;
  return k;
}

double young_interval_s(double delta_s, double mtbf_s) { return std::sqrt(2.0 * delta_s * mtbf_s); }

double daly_interval_s(double delta_s, double mtbf_s) {
  if (delta_s >= 2.0 * mtbf_s) return mtbf_s;
  const double x = delta_s / (2.0 * mtbf_s);
  return std::sqrt(2.0 * delta_s * mtbf_s) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - delta_s;
}

double daly_segment_wall_s(double tau_s, double delta_s, double restart_s, double mtbf_s) {
  // expm1 keeps the precision when (tau + delta) << M (rare failures).
  return mtbf_s * std::exp(restart_s / mtbf_s) * std::expm1((tau_s + delta_s) / mtbf_s);
}

double daly_wall_time_s(double solve_s, double tau_s, double delta_s, double restart_s,
                        double mtbf_s) {
  return daly_segment_wall_s(tau_s, delta_s, restart_s, mtbf_s) * solve_s / tau_s;
}

double daly_goodput(double tau_s, double delta_s, double restart_s, double mtbf_s) {
  return 1.0 / (daly_segment_wall_s(tau_s, delta_s, restart_s, mtbf_s) / tau_s);
}

}  // namespace stepcast
