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
  // Stored as bf16 (2 bytes an element): the store writes the round-to-nearest-even bf16
  // of each f32 value and a load widens it back to f32 (exact for values bf16 represents,
  // a relative error up to 2^-9 otherwise). false: stored as the f32 values themselves.
  bool bf16 = false;
  // Deduplicated save (PyTorch DCP's dedup_save_plans, Megatron's fully parallel save):
  // the same rectangle with the same values is held by `replicas` ranks, of which this
  // rank is number `replica` (0-based), and the store writes only this rank's share of it,
  // so that the rectangle is written once in total, its bytes split evenly. The share:
  // when rows >= replicas, the rows cut into `replicas` consecutive blocks (the first
  // rows % replicas blocks one row longer), block `replica`; else, when cols >= replicas,
  // the columns cut the same way; else the whole rectangle, written by replica 0 alone.
  // Each written share is its own rectangle in the manifest; a load assembles any
  // rectangle from the shares. The replicas must agree on rectangle, values and these
  // two fields (nothing checks it: a share no one writes is a gap the load reports).
  int replicas = 1;
  int replica = 0;
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

// One rank's whole state. Tensor names: "w.<param>" (StatePart::kModel: the weights, bf16
// on disk), "master.<param>" (the fp32 master weights), "adam_m.<param>" and
// "adam_v.<param>" (Adam's moments), the last three StatePart::kOptimizer: 2 + 12 bytes a
// parameter, as the checkpoint cost model counts them (models/src/reliability.cc).
struct RankState {
  int rank = 0;
  TrainLayout layout;
  TrainScalars scalars;
  std::vector<TensorPiece> pieces;
  // StatePart::kConfig: the model and run configuration as JSON text (informational; a
  // load checks the model shape against it).
  std::string config_json;
};

// Which StatePart a tensor name belongs to (kOptimizer for "adam_*" and "master.*",
// kModel for everything else: "w.*"). The store and the trainer both go by it.
inline StatePart tensor_part(const std::string& name) {
  return name.starts_with("adam_") || name.starts_with("master.") ? StatePart::kOptimizer : StatePart::kModel;
}

}  // namespace stepcast::exec
