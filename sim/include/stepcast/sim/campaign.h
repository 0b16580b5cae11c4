// Campaign simulation: a whole training run as events over wall time (docs/reliability.md
// "Campaign semantics"): training steps, checkpoints (synchronous, or a snapshot pause
// followed by a background write), failures from seeded streams, detection, waiting for
// replacement nodes, rescheduling, initialisation, restore, and the work lost back to the
// last *durable* checkpoint. Times are integer nanoseconds (SimTime); the same model and
// failures give the same result, bit for bit.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "stepcast/models/reliability.h"
#include "stepcast/models/sim_time.h"

namespace stepcast::sim {

// ---------------------------------------------------------------------------------------
// Random numbers: our own distributions over std::mt19937_64 (the standard fixes the
// engine's bit stream, not its distributions'). tests/sim/campaign_test.cc pins the draws.

// splitmix64 (Steele, Lea, Flood 2014) of the three values chained: independent streams
// for (seed, purpose, index).
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t purpose, std::uint64_t index);
// (0, 1]: the top 53 bits of one draw, ((x >> 11) + 1) / 2^53.
double uniform_open01(std::mt19937_64& gen);
// Inverse CDF: -mean ln U. REQUIRES: mean > 0.
double exponential_draw(std::mt19937_64& gen, double mean);
// Inverse CDF: scale (-ln U)^(1/shape). REQUIRES: shape > 0, scale > 0.
double weibull_draw(std::mt19937_64& gen, double shape, double scale);
// The scale whose Weibull mean is `mean`: mean / Gamma(1 + 1/shape).
double weibull_scale_for_mean(double mean, double shape);

inline constexpr SimTime kNever = SimTime::from_ns(INT64_MAX);

// ---------------------------------------------------------------------------------------
// The job, resolved for a campaign.

struct CauseModel {
  std::int64_t units = 0;           // GPUs, nodes or switches exposed
  double unit_rate_per_s = 0;       // failures per unit-second
  Lifetime lifetime = Lifetime::kExponential;
  double weibull_shape = 1;
  SimTime detection;                // failure -> job stopped
  int nodes_down = 0;               // nodes to replace per failure (0: software)
};

struct CampaignModel {
  SimTime step_time;                // one training step, failure-free
  std::int64_t steps_total = 0;     // steps of the whole training
  std::int64_t interval_steps = 1;  // a checkpoint every this many steps, and at the end
  SimTime pause;                    // training stalls per checkpoint
  SimTime background;               // async: write after the pause; 0 = durable at its end
  SimTime restore;                  // reading the last durable checkpoint back
  std::array<CauseModel, kFailureCauses> causes{};  // indexed by FailureCause
  SimTime reschedule, init;
  int spare_nodes = 0;
  SimTime replace_node;             // a failed node returns this long after detection
  std::int64_t world = 1;           // GPUs (for GPU-hours)
  SimTime wall_limit = kNever;      // a run that has not finished by then stops (finished = false)
  // Skip over whole checkpoint periods that end before the next failure in O(1) instead of
  // one by one. Same result either way (tested); false only to check that.
  bool fast_forward = true;
};

// ---------------------------------------------------------------------------------------
// Failures: an interface (STYLE habit 3) with the seeded implementation and a scripted
// fake for tests.

struct Failure {
  SimTime time;
  FailureCause cause = FailureCause::kGpu;
};

class FailureSource {
 public:
  virtual ~FailureSource() = default;
  // The i-th failure (i = 0, 1, 2, ...), in non-decreasing time; time kNever when none.
  // Failures happen in wall time whatever the job is doing (running, checkpointing, down).
  virtual Failure at(std::size_t i) = 0;
};

// One generator per cause, seeded derive_seed(seed, kFailureStreamPurpose, cause).
// Exponential causes: one stream with the summed rate (units x unit rate; exact by
// memorylessness). Weibull causes: every unit has its own lifetime, starting new at time 0
// and renewed when it fails (the failed part is replaced). Ties: lower cause first.
class RandomFailures final : public FailureSource {
 public:
  RandomFailures(const std::array<CauseModel, kFailureCauses>& causes, std::uint64_t seed);
  Failure at(std::size_t i) override;

 private:
  struct Stream {
    std::mt19937_64 gen;
    double mean_s = 0;                 // exponential: of the cause; Weibull: of one unit
    double scale_s = 0, shape = 1;     // Weibull
    bool weibull = false;
    SimTime next = kNever;             // exponential: the cause's next failure
    std::vector<std::pair<std::int64_t, std::int64_t>> heap;  // Weibull: (ns, unit), min-heap
  };
  SimTime peek(const Stream& s) const;
  void advance(Stream& s);
  std::array<Stream, kFailureCauses> streams_;
  std::vector<Failure> seen_;
};

inline constexpr std::uint64_t kFailureStreamPurpose = 0x6661696c75726573ULL;  // "failures"
inline constexpr std::uint64_t kCampaignPurpose = 0x63616d706169676eULL;       // "campaign"

// A fixed list of failures (for hand-built cases). REQUIRES: non-decreasing times.
class ScriptedFailures final : public FailureSource {
 public:
  explicit ScriptedFailures(std::vector<Failure> failures) : failures_(std::move(failures)) {}
  Failure at(std::size_t i) override { return i < failures_.size() ? failures_[i] : Failure{kNever}; }

 private:
  std::vector<Failure> failures_;
};

// ---------------------------------------------------------------------------------------
// One run.

struct CampaignRun {
  bool finished = true;
  SimTime wall;                 // time to train: first step to the final durable checkpoint
  SimTime productive;           // steps_total x step_time
  // Every instant of `wall` is exactly one of these (they sum to wall):
  SimTime compute;              // steps run, including those later lost
  SimTime checkpoint;           // checkpoint pauses and waits for a previous async write
  SimTime detection, node_wait, restart, restore;  // down: restart = reschedule + init
  SimTime lost;                 // compute - productive: work redone after failures
  std::array<int, kFailureCauses> failures{};
  // Lost compute plus the down time that followed, per cause (x world = GPU-time).
  std::array<SimTime, kFailureCauses> lost_by_cause{};
  std::int64_t durable_checkpoints = 0;
  double goodput() const {     // ETTR: productive / wall
    return wall.ns() > 0 ? static_cast<double>(productive.ns()) / static_cast<double>(wall.ns()) : 0.0;
  }
};

// REQUIRES: step_time > 0, steps_total >= 1, interval_steps >= 1.
CampaignRun run_campaign(const CampaignModel& model, FailureSource& failures);

// ---------------------------------------------------------------------------------------
// Monte Carlo.

struct Stats {
  double mean = 0, p10 = 0, p50 = 0, p90 = 0;  // percentiles: linear between order statistics
};
Stats stats_of(std::vector<double> values);

struct CampaignSummary {
  std::int64_t interval_steps = 0;
  double interval_s = 0;        // compute between checkpoints
  int runs = 0, unfinished = 0;
  Stats goodput;
  Stats wall_s;
  // Means per run, seconds.
  double compute_s = 0, checkpoint_s = 0, lost_s = 0, detection_s = 0, node_wait_s = 0,
         restart_s = 0, restore_s = 0;
  std::array<double, kFailureCauses> failures{};    // mean count per run
  std::array<double, kFailureCauses> lost_gpu_h{};  // mean GPU-hours lost per run
};

// `runs` seeds for a scenario seed: derive_seed(seed, kCampaignPurpose, i).
std::vector<std::uint64_t> campaign_seeds(std::uint64_t scenario_seed, int runs);

// Runs `model` at every interval (steps) for every seed; the intervals of one seed see the
// same failures (common random numbers), so differences between intervals are not noise
// from different failure draws. One summary per interval, in the given order.
std::vector<CampaignSummary> sweep_campaigns(const CampaignModel& model,
                                             const std::vector<std::int64_t>& intervals,
                                             const std::vector<std::uint64_t>& seeds);

}  // namespace stepcast::sim
