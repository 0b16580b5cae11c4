// The real training loop of `stepcast execute --train` (docs/checkpoints.md "The
// trainer"): a small decoder-only transformer built from the scenario's model shape, real
// forward and backward on the CPU (Eigen, f32), AdamW with linear warm-up and cosine decay,
// global gradient-norm clipping, dropout, a seeded shuffling sampler over a deterministic
// synthetic corpus; data parallelism (gradient all-reduce), ZeRO-1 (optimizer moments
// sharded over dp ranks, per tensor by rows) and tensor parallelism (Megatron's column /
// row split of the attention and MLP matrices).
//
// Layout independence (what makes resharding exact up to float summation order): every
// parameter is initialised from a hash of (seed, tensor name, global row, global col); the
// sampler hands out the same global batch in the same order for every dp; dropout masks
// are a hash of (rng seed, rng counter, layer, global sequence index, token, global
// column). Same seed and layout -> bitwise identical losses and parameters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stepcast/executor/backend.h"
#include "stepcast/executor/train_state.h"
#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"

namespace stepcast::exec {

struct TrainConfig {
  // Model: decoder blocks of RMSNorm -> causal multi-head attention (QKV column-parallel,
  // output row-parallel) -> residual -> RMSNorm -> MLP (W1 column-parallel, GELU, dropout,
  // W2 row-parallel) -> residual; then RMSNorm and an untied LM head (replicated over tp),
  // softmax cross-entropy on the next token.
  int layers = 2;
  int hidden = 64;
  int heads = 4;
  int ffn = 256;
  int vocab = 128;
  int seq = 32;
  // Batch: the global batch is microbatch x accumulation x dp sequences per step.
  int microbatch = 1;
  int accumulation = 1;
  // Optimiser: AdamW, lr(t) = lr * t / warmup for t < warmup, then cosine from lr to
  // min_lr over [warmup, total_steps]. Global gradient-norm clipping at clip (0: none).
  double lr = 3e-3;
  double min_lr = 3e-4;
  std::int64_t warmup_steps = 10;
  std::int64_t total_steps = 200;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  double clip = 1.0;
  double dropout = 0.1;       // on the MLP's hidden activations
  std::uint64_t seed = 1;
  std::int64_t corpus_sequences = 4096;   // the synthetic corpus (seq + 1 tokens each)
  TrainLayout layout;
};

// The trainer's config from a scenario: model shape (layers, hidden, heads, ffn, vocab,
// seq = workload.seq_len), plan (tp, dp, zero >= 1 -> zero1, microbatch, accumulation =
// global_batch / (microbatch x dp)), seed. Errors name the field: "plan.pp: --train runs
// tp x dp layouts (pp = 2)", cp, ep, zero 2/3, heads or ffn not divisible by tp, ...
Result<TrainConfig> train_config(const Scenario& scenario);

struct StepResult {
  std::int64_t step = 0;       // the step just done (1-based)
  double loss = 0;             // mean cross-entropy over the global batch's tokens
  double grad_norm = 0;        // global L2 norm before clipping
  double lr = 0;               // the learning rate used
  double seconds = 0;          // this rank's wall time of the step
};

class Trainer {
 public:
  // Collective (creates the tp and dp groups through comm.create_group). `device` gives
  // the communication buffers (the cpu device: host f32).
  Trainer(const TrainConfig& config, Communicator& comm, Device& device);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Collective: one optimizer step (accumulation microbatches, gradient reduction,
  // clipping, AdamW, ZeRO-1 all-gather).
  StepResult step();
  std::int64_t steps_done() const;

  // This rank's state, as the checkpoint cost model counts it (2 + 12 bytes a parameter,
  // each replicated tensor written once: TensorPiece::replicas):
  //   "w.*"       StatePart::kModel: this rank's tp slice of every parameter, bf16 on disk;
  //               replicas: a tp slice's dp ranks (replica = dp index), a tensor
  //               replicated over tp (embedding, head, norm gains) all tp x dp ranks
  //               (replica = world rank).
  //   "master.*"  StatePart::kOptimizer: the fp32 parameters over the rectangles of this
  //               rank's moments; "adam_m.*", "adam_v.*": Adam's moments (the ZeRO-1 row
  //               block of the slice when zero1, else the whole slice). Replicas as the
  //               weights' without ZeRO-1; with it, 1 for a tp slice's block and the tp
  //               ranks of this dp index (replica = tp index) for a replicated tensor's.
  // and the scalars. The pieces' data is f32 (the store rounds "w.*" to bf16).
  RankState export_state() const;
  // The rectangles this rank needs to resume, for load_generation: "w.*" its tp slices,
  // "master.*" its WHOLE tp slices (even with ZeRO-1: the loader assembles them from the
  // shards that hold them, so import_state needs no collective), "adam_m.*" / "adam_v.*"
  // the rectangles export_state writes for this layout.
  std::vector<PieceRequest> wanted_pieces() const;
  // Restores from a loaded state (the wanted_pieces() of the parts in `contents`; others
  // are ignored). With kOptimizer the parameters come from the exact fp32 "master.*"
  // pieces (kModel present or not) and the moments from "adam_*"; without it, from the
  // "w.*" pieces, which a checkpoint holds as bf16, so a model-only resume continues from
  // bf16-rounded parameters with zero moments. Parts not in `contents` are re-initialised
  // as a fresh run would have them (model and optimizer both absent: initial weights;
  // optimizer absent: zero moments; lr_scheduler: step 0; data_sampler: epoch 0, position
  // 0; rng: counter 0; grad_scaler: 1.0; step: 0). Throws std::invalid_argument when a
  // wanted piece of a part in `contents` is missing or its shape differs (nothing is
  // changed then).
  void import_state(const RankState& state, const std::vector<StatePart>& contents);

  // Collective: every parameter assembled into global tensors on rank 0 (name order),
  // empty elsewhere. For comparisons of final parameters across runs and layouts.
  std::vector<TensorPiece> gather_parameters();

  // Parameters of the global model (all tensors, unsharded).
  std::int64_t parameter_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stepcast::exec
