// Calibration: cost-model parameters fitted to measurements on one machine (the
// executor's `stepcast calibrate`), versioned JSON with the hardware fingerprint, the fit
// and its residuals. A scenario's "calibration" (a path or an object) applies it to the
// scenario's cluster: GEMM efficiency ceiling and per-byte term, attention efficiency,
// memory-bound efficiency, and alpha/beta per (collective, scope).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stepcast/models/reliability.h"
#include "stepcast/models/result.h"
#include "stepcast/models/specs.h"

namespace stepcast {

// How well one part of the fit explains its points.
struct FitQuality {
  int points = 0;
  double rms_relative = 0;   // sqrt(mean(((fit - measured) / measured)^2))
};

struct CollectiveCalibration {
  CollectiveFit fit;
  double max_bytes = 0;      // largest measured size (nccl-tests bytes)
  FitQuality quality;
};

// Checkpoint storage measured by `execute --train` saves and restores (docs/checkpoints.md
// "Calibration"): 0 = not measured, the scenario's value stays.
struct CheckpointCalibration {
  double write_GBps = 0;      // aggregate: bytes of a generation / its data phase (sync saves)
  double read_GBps = 0;       // aggregate: bytes every rank read / the slowest rank's read time
  double snapshot_GBps = 0;   // per rank: bytes copied / snapshot pause (async saves)
  // Sync saves split in two: write_GBps = bytes / the time the slowest rank spent filling
  // and fsyncing its shard file; commit_s = the rest of the pause (directories, renames,
  // the manifest), per save. An async save's pause less its snapshot (the previous save's
  // commit) pools into commit_s too.
  double commit_s = 0;
  int saves = 0, restores = 0, snapshots = 0;   // measurements each figure pools
};

// The host link and the host optimizer step as offloaded runs measured them (docs/executor.md
// "Optimizer offload"): 0 = not measured, the cluster's value stays.
struct HostCalibration {
  double link_GBps = 0;  // effective copy rate: bytes / time of every copy, both directions
  FitQuality link;
  double optimizer_GBps = 0;  // one rank's host optimizer step: host memory bytes / time
  FitQuality optimizer;
};

struct Calibration {
  static constexpr int kFormat = 1;
  std::string created;        // ISO date, informational
  // Fingerprint: what was measured, on what.
  std::string backend;        // "cpu_mpi", "cuda_nccl"
  std::string device;         // Device::describe()
  std::string communicator;   // Communicator::describe()
  std::string host;
  int ranks = 0;
  std::string gpu_spec;       // the GpuSpec the efficiencies are relative to (its name)
  double peak_flops = 0;      // that spec's peak for the fitted precision
  // Compute (0 = not fitted, keep the prior).
  double gemm_efficiency = 0;      // ceiling relative to peak_flops
  double gemm_s_per_byte = 0;
  FitQuality gemm;
  double attention_efficiency = 0;
  FitQuality attention;
  double memory_efficiency = 0;    // of hbm_bandwidth_GBps
  FitQuality memory;
  std::vector<CollectiveCalibration> collectives;
  CheckpointCalibration checkpoint;
  HostCalibration host_rates;         // host link and host optimizer step (optimizer offload)
  std::vector<std::string> sources;   // measurement files the fit used
};

// Applies the fitted parameters to `cluster` (GPU efficiencies, collective fits, storage
// write and read bandwidth, the commit cost of a save, the host link and host memory
// bandwidth: the measured rates divided by host_efficiency, so that the model's effective
// rates are the measured ones; the optimizer rate is one GPU's share of the node's).
void apply_calibration(const Calibration& cal, ClusterSpec& cluster);
// Applies the measured snapshot rate (a checkpoint's device-to-host copy) to `checkpoint`.
void apply_calibration(const Calibration& cal, CheckpointSpec& checkpoint);

std::string calibration_json(const Calibration& cal);
// Parses a calibration document; errors name the JSON path ("calibration.gemm.efficiency: ...").
Result<Calibration> parse_calibration(std::string_view text, const std::string& path_prefix = "calibration");

}  // namespace stepcast
