// `execute --train`: trains the scenario's model (scaled down) for real on MPI ranks with
// checkpoints, and `execute --resume-check N`: proves that a resumed run continues as if it
// had never stopped (docs/checkpoints.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stepcast/executor/checkpoint_store.h"
#include "stepcast/executor/train.h"
#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"

namespace stepcast::app {

struct TrainRequest {
  std::string scenario;
  std::string backend = "cpu_mpi";     // --train runs on the cpu device (f32)
  int steps = 20;                      // optimizer steps to run (after a resume: more steps)
  int scale_down = 1;
  std::string layout;                  // "tp=1,dp=2,zero=1": overrides the plan's layout
  std::string out = "stepcast-train";  // measured.json, params.bin
  std::string checkpoint_dir;          // default OUT/checkpoints
  int checkpoint_every = 0;            // steps between saves (0: none)
  int keep = 2;
  bool async = false;
  std::vector<StatePart> omit;         // parts left out of every save
  std::string resume;                  // a checkpoint directory: resume from its newest loadable generation
  std::string crash;                   // fault injection (exec::parse_crash_point), or $STEPCAST_CHECKPOINT_CRASH
  double lr = 0, dropout = -1;         // overrides (0 / -1: the trainer's defaults)
  std::int64_t warmup_steps = -1, total_steps = -1;
  std::function<void(std::int64_t, std::int64_t)> progress;   // rank 0, after each step
};

struct TrainCheckpoint {
  std::int64_t generation = 0;
  double bytes = 0;                    // every rank's shard, summed
  double rank_bytes = 0;               // the largest shard
  // Max over ranks. data_s: the part of write_s spent filling and fsyncing the shard file.
  double snapshot_s = 0, write_s = 0, data_s = 0, commit_s = 0, pause_s = 0;
};

struct TrainReport {
  bool root = false;
  std::string run_error;               // non-empty: this rank failed (exit 1)
  std::string scenario_name;
  exec::TrainConfig config;
  std::int64_t parameters = 0;
  std::int64_t first_step = 1;         // 1, or the resumed generation + 1
  std::vector<double> losses, grad_norms, lrs, step_s;   // per step run (step_s: max over ranks)
  std::vector<TrainCheckpoint> checkpoints;
  // The resume, when there was one.
  std::int64_t resumed_from = -1;
  exec::TrainLayout resumed_layout;
  std::vector<StatePart> resumed_contents;
  double restore_bytes = 0, restore_s = 0;   // summed over ranks / max over ranks
  int restore_shards = 0;                    // max over ranks
  std::uint32_t params_crc = 0;              // CRC-32 of params.bin
  std::string measured_path, params_path;
  std::string measured_json;
  std::string params_bin;                    // the final parameters (global tensors, name order)
};

// Collective over the launched ranks. Errors (input, exit 2): the scenario's, the layout
// string's, train_config's (naming the plan field), the crash point's, a resume directory
// with no loadable generation (the reason per generation), ranks launched != tp x dp.
Result<TrainReport> run_train(const TrainRequest& request);
// The scenario as --train runs it: loaded, scaled down by `scale_down`, its layout
// replaced by `layout` ("tp=1,dp=2,zero=1"; "" keeps the plan's) on one node.
Result<Scenario> train_scenario(const std::string& path, int scale_down, const std::string& layout);
std::string train_text(const TrainReport& report);
std::string train_json(const TrainReport& report);

// --- resume-check -------------------------------------------------------------------

// One launch of `execute --train` (new processes): the command line after "stepcast".
// Returns the exit code. The CLI runs `mpirun -np W stepcast ...`; tests run the ranks
// as threads of a fresh in-process world.
using TrainLauncher = std::function<int(int ranks, const std::vector<std::string>& args)>;

struct ResumeCheckRequest {
  std::string scenario;
  int n = 5;                           // N: compare 2N straight vs N + save + restore + N
  std::string layout;                  // the run's layout override (as TrainRequest)
  std::string reshard_to;              // the resumed run's layout ("": the same)
  std::vector<StatePart> omit;         // left out of the save
  int scale_down = 1;
  std::string out = "stepcast-resume-check";
  double tolerance = 1e-4;             // relative, for a resharded resume
};

struct ResumeCheckReport {
  std::string scenario_name;
  int n = 0;
  exec::TrainLayout layout, resumed_layout;
  std::vector<StatePart> omitted;
  std::vector<double> straight, resumed;   // losses of steps N+1..2N
  int first_diverging_step = -1;           // 1-based step where the losses part (-1: never)
  double max_loss_diff = 0;                // max |straight - resumed| / straight over N+1..2N
  double max_param_diff = 0;               // max |a - b| over the final parameters
  bool bitwise = false;                    // losses and parameters identical to the bit
  bool pass = false;                       // bitwise (same layout, nothing omitted) or within tolerance
  double tolerance = 0;
  std::string audit;                       // the resume audit of the omitted parts (analysis::resume_audit)
  bool audit_agrees = true;                // the audit's "matters" == a divergence was seen
};

Result<ResumeCheckReport> run_resume_check(const ResumeCheckRequest& request, const TrainLauncher& launch);
std::string resume_check_text(const ResumeCheckReport& report);
std::string resume_check_json(const ResumeCheckReport& report);

// Parses "sampler,rng" (names: sampler|data_sampler, rng, scheduler|lr_scheduler,
// optimizer, model, grad_scaler, step, config). Errors name the item.
Result<std::vector<StatePart>> parse_state_parts(const std::string& list, const std::string& option);

}  // namespace stepcast::app
