// The training state one rank of `stepcast execute --train` holds, as the checkpoint store
// (checkpoint_store.h) saves and loads it, and as the trainer (train.h) exports and imports
// it. Layout-independent by construction: every tensor is addressed in GLOBAL coordinates
// (the unsharded tensor's rows x cols), so a checkpoint written by one layout (tp, dp,
// ZeRO-1 shards) can be read by another, piece by piece (docs/checkpoints.md "Resharding").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepcast/models/reliability.h"   // StatePart: the parts a checkpoint may hold

namespace stepcast::exec {

// A rectangle of a global 2-D tensor (a 1-D tensor of n elements is 1 x n), row-major
// data of rows x cols floats.
struct TensorPiece {
  std::string name;                  // "w.layer3.mlp.w1", "adam_m.layer3.mlp.w1", ...
  std::int64_t global_rows = 0, global_cols = 0;
  std::int64_t row0 = 0, rows = 0;   // [row0, row0 + rows)
  std::int64_t col0 = 0, cols = 0;   // [col0, col0 + cols)
  std::vector<float> data;           // rows * cols, row-major
};

// A rectangle a rank wants to read (the same addressing, without data).
struct PieceRequest {
  std::string name;
  std::int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
};

// The layout that wrote (or reads) a state. world = tp * dp (no pipeline in --train).
struct TrainLayout {
  int tp = 1;
  int dp = 1;
  bool zero1 = false;   // optimizer moments sharded over dp (per tensor, by rows)
  int world() const { return tp * dp; }
};

// Everything one rank saves besides tensors. Each field belongs to one StatePart; a
// checkpoint that omits a part leaves it out and the trainer re-initialises it on load.
struct TrainScalars {
  std::int64_t step = 0;                 // StatePart::kStep: optimizer steps done
  // StatePart::kLrScheduler: the schedule's own step counter (warm-up + cosine).
  std::int64_t scheduler_step = 0;
  // StatePart::kDataSampler: the seeded shuffling sampler's position.
  std::uint64_t sampler_seed = 0;
  std::int64_t sampler_epoch = 0;
  std::int64_t sampler_position = 0;     // sequences of the epoch already consumed
  // StatePart::kRng: the dropout generator (counter-based: seed + counter).
  std::uint64_t rng_seed = 0;
  std::uint64_t rng_counter = 0;
  // StatePart::kGradScaler: dynamic loss scale and its growth tracker.
  double loss_scale = 1.0;
  std::int64_t loss_scale_growth = 0;
};

// One rank's whole state. Tensor names: "w.<param>" (StatePart::kModel), "adam_m.<param>"
// and "adam_v.<param>" (StatePart::kOptimizer).
struct RankState {
  int rank = 0;
  TrainLayout layout;
  TrainScalars scalars;
  std::vector<TensorPiece> pieces;
  // StatePart::kConfig: the model and run configuration as JSON text (informational; a
  // load checks the model shape against it).
  std::string config_json;
};

// Which StatePart a tensor name belongs to (kModel for "w.", kOptimizer for "adam_").
StatePart tensor_part(const std::string& name);

}  // namespace stepcast::exec
