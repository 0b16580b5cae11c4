// Resharding a checkpoint (docs/checkpoints.md "Resharding at full size"): a checkpoint
// written by one layout (tp, pp, dp, cp, ep, zero) is loaded by another, e.g. 64 -> 32
// GPUs after losing nodes. Every new rank reads exactly the state it will hold from the
// shard files that cover it, as `stepcast execute --train --resume` does at small scale;
// this is the closed form of what each new rank reads and how long that takes.
#pragma once

#include <string>
#include <vector>

#include "stepcast/models/reliability.h"
#include "stepcast/models/result.h"
#include "stepcast/models/specs.h"

namespace stepcast {

// "tp=4,pp=2,dp=4[,cp=1][,ep=1][,zero=1]": the new layout. Keys not given keep `old`'s
// value, except dp, which is derived from `gpus=N` when that is given instead. Errors start
// with `option` and name the key ("--reshard-to: \"tq\" is not a layout key (tp, pp, dp,
// cp, ep, zero, gpus)").
Result<Plan> parse_reshard_layout(const std::string& text, const Plan& old, const std::string& option = "--reshard-to");

// What one class of new ranks reads (ranks with the same pipeline stage, tensor index and
// optimizer shard position read the same amounts).
struct ReshardRead {
  std::vector<int> ranks;              // every new rank of the class, ascending
  int stage = 0, tp_index = 0;         // its coordinates in the new layout
  double model_bytes = 0;              // bf16 weights of its slice
  double optimizer_bytes = 0;          // fp32 master + moments it holds (its ZeRO shard)
  double other_bytes = 0;              // rng, sampler, scheduler, step, config
  int files = 0;                       // old shard files it opens
  std::vector<int> old_stages;         // old pipeline stages whose layers it needs
  std::vector<int> old_tp;             // old tensor indices whose columns/rows it needs
  double read_s = 0;                   // its bytes at its fair share of the read bandwidth
  double total_bytes() const { return model_bytes + optimizer_bytes + other_bytes; }
};

struct ReshardPlan {
  Plan from, to;
  int from_world = 0, to_world = 0;
  int to_nodes = 0;
  std::vector<ReshardRead> reads;      // by (stage, tp_index, optimizer shard), ascending
  double total_read_bytes = 0;         // every new rank's reads summed (replicas read twice)
  double storage_read_Bps = 0, node_Bps = 0, rank_Bps = 0;
  double storage_s = 0;                // total_read_bytes / storage read bandwidth
  double node_s = 0;                   // the busiest node's reads through its NICs
  double restore_s = 0;                // max(storage_s, node_s, slowest rank)
  std::string bound;                   // "storage", "node NICs", "rank NIC share"
};

// REQUIRES: `from` and `to` valid layouts of `model` (layout_errors() empty for both, on
// a cluster of from.world() and to.world() GPUs). `cluster` gives the storage and NIC
// bandwidths (its node count is replaced by the new world's).
ReshardPlan reshard_plan(const ModelSpec& model, const ClusterSpec& cluster, const Plan& from, const Plan& to,
                         const Workload& workload, const CheckpointSpec& spec);

}  // namespace stepcast
