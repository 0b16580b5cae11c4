// `collective`: one collective, priced by the model every command uses (docs/model-reference.md
// section 5: NCCL's tuner for ring and tree, alpha-beta forms for the others; "One collective"
// in docs/collective.md). Time, algbw and busbw with the
// nccl-tests definitions, every algorithm the model has for the kind (the one `auto` picks
// marked), a band from the uncertainty of the model's inputs, and optionally the size sweep
// nccl-tests prints (8 B doubling up to the size).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepcast/app/scenario_input.h"
#include "stepcast/models/collectives.h"
#include "stepcast/models/program.h"
#include "stepcast/models/result.h"
#include "stepcast/models/specs.h"

namespace stepcast::app {

// "1GiB", "512MiB", "4KiB": binary (1024^k); "1GB", "4kB": decimal (1000^k); "64K", "1M",
// "1G", "1T" (one letter): binary, as nccl-tests' -b/-e; "1e9", "1048576", "8B": bytes. The
// number may have a fraction or an exponent; the result must be a whole number of bytes
// from 1 to 2^50. Errors say why ("expected a size such as 1GiB, 512MiB, 1e9, got ...").
Result<std::int64_t> parse_size_bytes(std::string_view text);
// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"
// (also with '-' for '_'). Errors list the kinds.
Result<CollKind> parse_coll_kind(std::string_view text);
// "auto", "ring", "tree", "hierarchical", "pairwise", "direct".
Result<CollAlgo> parse_coll_algo(std::string_view text);
// "LL", "LL128" or "Simple" (case-insensitive, as NCCL_PROTO reads them).
Result<NcclProto> parse_nccl_proto(std::string_view text);
// A group of a scenario's plan: its ranks and the distance between neighbours in rank order
// (Placement::group_size / group_stride: Megatron's order, the plan's placement).
struct PlanGroup {
  GroupKind kind = GroupKind::kTp;
  int ranks = 1;
  int stride = 1;
};
// The plan's TP, CP, EP and DP groups of more than one rank, in that order.
std::vector<PlanGroup> plan_groups(const Scenario& scenario);
// "tp", "cp", "ep" or "dp". Errors list them.
Result<GroupKind> parse_plan_group(std::string_view text);

// Bytes as "1 GiB", "512 MiB" when an exact multiple of a binary unit, else "1000000000 B".
std::string format_size(std::int64_t bytes);

struct CollectiveRequest {
  CollKind kind = CollKind::kAllReduce;
  std::int64_t size_bytes = 0;   // nccl-tests size (collectives.h); 1 to 2^50
  // Ranks in the group; at least 2, except send_recv (one transfer between two ranks
  // `stride` apart; 0 there means 2). At most 1,048,576.
  int gpus = 0;
  // --gpus was given: then 0 is a count out of range, not "not given".
  bool gpus_stated = false;
  int stride = 1;                // members `stride` GPUs apart in rank order (1 = contiguous)
  std::string cluster = "dgx-h100";          // a cluster preset, used when cluster_file is unset
  std::optional<ScenarioInput> cluster_file;  // a scenario whose `cluster` is used instead
  std::optional<CollAlgo> algo;  // unset: every algorithm the model has; kAuto: the one auto picks
  // Set: NCCL's ring and tree priced with this protocol only (as NCCL_PROTO forces it); needs
  // a cluster with `"collectives": "nccl"` and a kind NCCL's tuner prices.
  std::optional<NcclProto> proto;
  // Set: the group is this group of cluster_file's plan (REQUIRES cluster_file; gpus 0 and
  // stride 1, which it sets).
  std::optional<GroupKind> group;
  bool sweep = false;            // also the sizes 8, 16, ... <= size_bytes (REQUIRES size >= 8)
};

// The corners the band is evaluated at (docs/model-reference.md "5.6 Band").
struct CollectiveBandRule {
  double alpha_low = 0.5, alpha_high = 2.0;    // x the cluster's latencies (unverified priors)
  double intra_low = 0, intra_high = 0;        // intra_efficiency range (absolute)
  double inter_low = 0, inter_high = 0;        // inter_efficiency range (absolute)
  bool calibrated = false;  // a calibration's fit priced the collective: no band (low = high)
};

// One priced collective: `algo` at `size_bytes`.
struct CollectiveRow {
  CollAlgo algo = CollAlgo::kRing;  // kAuto only when a calibration's fit priced it
  NcclProto proto = NcclProto::kNone;  // NCCL's protocol (kNccl clusters' ring and tree)
  std::int64_t size_bytes = 0;
  double time_s = 0;
  double algbw_GBps = 0;  // size / time / 1e9
  double busbw_GBps = 0;  // algbw x bus factor
  double band_low_s = 0, band_high_s = 0;  // band from input uncertainty; low <= time <= high
  bool is_auto = false;   // the algorithm `auto` picks at this size
};

struct CollectiveReport {
  CollKind kind = CollKind::kAllReduce;
  std::int64_t size_bytes = 0;
  ClusterSpec cluster;   // nodes = the nodes the group spans (a preset), or the file's
  std::string cluster_label;  // "dgx-h100" or "FILE (cluster NAME)"
  int ranks = 0, stride = 1;
  std::optional<GroupKind> group;  // the plan's group the ranks are (request.group)
  GroupShape shape;      // as collective_cost sees it
  double bus_factor = 1;
  CollectiveBandRule band;
  std::vector<CollectiveRow> algorithms;  // at size_bytes; the ones asked for, model order
  CollAlgo auto_algo = CollAlgo::kRing;   // what kAuto picks at size_bytes
  NcclProto forced_proto = NcclProto::kNone;  // --proto, else kNone (each row's fastest)
  std::vector<CollectiveRow> sweep;       // empty without request.sweep
  std::vector<std::string> notes;         // what the numbers leave out, one sentence each
};

// Errors (input), each naming the argument: "--gpus: ...", "--stride: ...", "--cluster: ...
// (presets: ...)", the scenario's own errors for cluster_file, "--group: ..." (no cluster_file,
// gpus or stride given too, a group of one rank), "--algo: ... not available", "--proto: ..."
// (an alpha-beta cluster, a kind NCCL's tuner does not price), "SIZE: ..." (sweep below 8 B).
Result<CollectiveReport> run_collective(const CollectiveRequest& request);

// "ring (LL128)": the row's algorithm ("calibrated" for a fit) and NCCL's protocol where one
// priced it, as the text report and the GUI label rows.
std::string collective_row_label(const CollectiveRow& row);

// The readable report: the question, the placement, the links, one row per algorithm, the
// band rule, then the sweep and the notes.
std::string collective_text(const CollectiveReport& report);
// One JSON object (format 1; docs/collective.md). Every number is finite.
std::string collective_json(const CollectiveReport& report);

}  // namespace stepcast::app
