#include "stepcast/app/calibrate.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/app/measurement.h"
#include "stepcast/app/train.h"
#include "stepcast/executor/bench_file.h"
#include "stepcast/executor/calibration_fit.h"
#include "stepcast/models/collectives.h"
#include "stepcast/models/json_reader.h"
#include "stepcast/models/reliability.h"
#include "stepcast/models/presets.h"
#include "stepcast/sim/run.h"

namespace stepcast::app {

namespace {

// Seconds per step by op class on one rank of a timeline.
std::map<std::string, double> class_seconds(const Program& prog, const RankTimeline& r, int steps) {
  std::map<std::string, double> out;
  const RoleTemplate& role = prog.roles.at(static_cast<std::size_t>(r.stage));
  for (const Span& sp : r.spans) {
    const Op& op = role.ops.at(sp.op);
    std::string cls;
    double d = 0;
    if (op.kind == OpKind::kCompute && op.stream == Stream::kCompute) {
      cls = op.cclass == ComputeClass::kGemm            ? "GEMM"
            : op.cclass == ComputeClass::kAttention     ? "attention"
            : op.cclass == ComputeClass::kHostOptimizer ? "host optimizer"
                                                        : "memory-bound";
      d = (sp.end - sp.post).seconds();
    } else if (op.kind == OpKind::kCompute && (op.stream == Stream::kHostOut || op.stream == Stream::kHostIn)) {
      cls = "host link";
      d = (sp.end - sp.begin).seconds();
    } else if (op.kind == OpKind::kCollective || op.kind == OpKind::kCompute) {
      cls = fmt::format("{} comm", to_string(op.comm));
      d = (sp.end - sp.begin).seconds();
    } else {
      continue;
    }
    out[cls] += d / std::max(1, steps);
  }
  return out;
}

const RankTimeline* rank0(const Timeline& t) {
  const RankTimeline* found = nullptr;
  for (const RankTimeline& r : t.ranks) if (r.rank == 0) found = &r;
  return found;
}

// The run predicted before and after `cal`; false when a simulation fails.
bool predict_run(const MeasuredRun& l, const Calibration& cal, const char* role, CalibrateRun& out) {
  Scenario after = l.scenario;
  apply_calibration(cal, after.cluster);
  auto b = sim::run_scenario(l.scenario, sim::RunOptions{});
  auto f = sim::run_scenario(after, sim::RunOptions{});
  if (!b.ok() || !f.ok()) return false;
  out.file = l.path;
  out.role = role;
  out.scenario_name = l.scenario.name;
  out.measured_s = l.measurement.median_step_s();
  out.before_s = b->summary.step_time_s;
  out.after_s = f->summary.step_time_s;
  const RankTimeline* mr = rank0(l.measurement.timeline);
  const RankTimeline* br = rank0(b->out.timeline);
  const RankTimeline* ar = rank0(f->out.timeline);
  if (mr && br && ar) {
    out.has_classes = true;
    auto mc = class_seconds(l.program, *mr, l.measurement.steps);
    auto bc = class_seconds(b->program, *br, 1);
    auto ac = class_seconds(f->program, *ar, 1);
    for (const auto& [cls, mv] : mc) out.classes[cls] = CalibrateRun::Class{mv, bc[cls], ac[cls]};
  }
  return true;
}

std::string rms_text(const FitQuality& q) {
  return q.points > 0 ? fmt::format("rms {:.1f}% over {} ops", 100 * q.rms_relative, q.points)
                      : std::string("no op dominated by it");
}

std::string scope_text(const CollectiveCalibration& c) {
  return c.fit.scope == CollScope::kIntraNode ? "intra-node" : "inter-node";
}

// A training run's checkpoint measurements (measured.json of `execute --train`).
struct CheckpointRun {
  std::string path;
  Scenario scenario;        // as the run ran it (scaled down, its layout)
  CheckpointSpec spec;      // contents and mode as saved
  std::vector<double> pause_s, data_s, bytes, snapshot_s, rank_bytes;   // per save
  double restore_bytes = 0, restore_s = 0;
};

// A training run's measurement (`"kind": "stepcast-train"`), or nullopt for any other file
// (a measured.json of `execute`, which load_measured_run reads).
Result<std::optional<CheckpointRun>> load_checkpoint_run(const std::string& path) {
  auto text = reader::read_input_file(path);
  if (!text.ok()) return text.error();
  auto doc = reader::parse_document(*text);
  if (!doc.ok()) return Error{reader::prefix_lines(path, doc.error().message)};
  if (!doc->is_object() || doc->value("kind", std::string()) != "stepcast-train") return std::optional<CheckpointRun>{};
  CheckpointRun run;
  run.path = path;
  try {
    const auto& l = doc->at("layout");
    const std::string layout = fmt::format("tp={},dp={},zero={}", l.at("tp").get<int>(), l.at("dp").get<int>(),
                                           l.at("zero1").get<bool>() ? 1 : 0);
    auto sc = train_scenario(doc->at("scenario").get<std::string>(), doc->at("scale_down").get<int>(), layout);
    if (!sc.ok()) return Error{path + ": scenario: " + sc.error().message};
    run.scenario = std::move(sc).value();
    const auto& ck = doc->at("checkpoint");
    run.spec = run.scenario.checkpoint.value_or(CheckpointSpec{});
    auto parts = parse_state_parts(ck.at("contents").get<std::string>(), path + ": checkpoint.contents");
    if (!parts.ok()) return parts.error();
    run.spec.contents = *parts;
    run.spec.mode = ck.at("async").get<bool>() ? CheckpointMode::kAsync : CheckpointMode::kSync;
    for (const auto& sv : ck.at("saves")) {
      run.pause_s.push_back(sv.at("pause_s").get<double>());
      // data_s: the slowest rank's shard file (absent from measurements of before 2026-12:
      // the whole pause then counts as data).
      run.data_s.push_back(std::min(run.pause_s.back(), sv.value("data_s", run.pause_s.back())));
      run.bytes.push_back(sv.at("bytes").get<double>());
      run.snapshot_s.push_back(sv.at("snapshot_s").get<double>());
      run.rank_bytes.push_back(sv.at("rank_bytes").get<double>());
    }
    if (doc->contains("restore")) {
      run.restore_bytes = doc->at("restore").at("bytes").get<double>();
      run.restore_s = doc->at("restore").at("read_s").get<double>();
    }
  } catch (const nlohmann::json::exception& e) {
    return Error{fmt::format("{}: not a complete `execute --train` measurement: {}", path, e.what())};
  }
  return std::optional<CheckpointRun>(std::move(run));
}

// Pools the runs' saves, restores and async snapshots into rates. A sync save's pause is
// split where the store measured it: the shard files' data (bytes / write rate) and the rest
// (directories, renames, the manifest: a fixed cost per save).
CheckpointCalibration fit_checkpoint(const std::vector<CheckpointRun>& runs) {
  CheckpointCalibration c;
  double wb = 0, ws = 0, rb = 0, rs = 0, sb = 0, ss = 0, fixed = 0;
  for (const CheckpointRun& r : runs) {
    for (std::size_t i = 0; i < r.pause_s.size(); ++i) {
      if (r.spec.mode == CheckpointMode::kSync) {
        wb += r.bytes[i];
        ws += r.data_s[i];
        fixed += r.pause_s[i] - r.data_s[i];
        ++c.saves;
      } else {
        sb += r.rank_bytes[i];
        ss += r.snapshot_s[i];
        fixed += r.pause_s[i] - r.snapshot_s[i];  // the previous save's commit
        ++c.snapshots;
      }
    }
    if (r.restore_s > 0) {
      rb += r.restore_bytes;
      rs += r.restore_s;
      ++c.restores;
    }
  }
  if (ws > 0) c.write_GBps = wb / ws / 1e9;
  if (c.saves + c.snapshots > 0) c.commit_s = std::max(0.0, fixed / (c.saves + c.snapshots));
  if (rs > 0) c.read_GBps = rb / rs / 1e9;
  if (ss > 0) c.snapshot_GBps = sb / ss / 1e9;
  return c;
}

// The cost model's save pause for the run's checkpoint, on `cluster` (priors or calibrated).
CheckpointCost predicted_checkpoint(const CheckpointRun& r, const ClusterSpec& cluster) {
  return checkpoint_cost(r.scenario.model, cluster, r.scenario.plan, r.scenario.workload, r.spec);
}

CheckpointRunReport checkpoint_report(const CheckpointRun& r, const Calibration& cal, const char* role) {
  CheckpointRunReport out;
  out.file = r.path;
  out.role = role;
  out.scenario_name = r.scenario.name;
  out.saves = static_cast<int>(r.pause_s.size());
  out.async = r.spec.mode == CheckpointMode::kAsync;
  ClusterSpec after = r.scenario.cluster;
  apply_calibration(cal, after);
  CheckpointRun with_after = r;
  apply_calibration(cal, with_after.spec);
  const CheckpointCost before = predicted_checkpoint(r, r.scenario.cluster);
  const CheckpointCost calibrated = predicted_checkpoint(with_after, after);
  for (std::size_t i = 0; i < r.pause_s.size(); ++i) {
    out.measured_s += r.pause_s[i] / static_cast<double>(r.pause_s.size());
    out.measured_bytes += r.bytes[i] / static_cast<double>(r.pause_s.size());
  }
  out.predicted_bytes = before.total_bytes;
  out.before_s = before.pause_s;
  out.after_s = calibrated.pause_s;
  return out;
}

}  // namespace

Result<CalibrateReport> run_calibrate(const CalibrateRequest& a) {
  if (a.measured.empty() && a.bench.empty()) return Error{"calibrate: give measured runs (MEASURED.json) or --bench files"};
  std::vector<MeasuredRun> fit_runs, holdout_runs;
  std::vector<CheckpointRun> fit_ckpt, holdout_ckpt;
  for (const std::string& p : a.measured) {
    auto c = load_checkpoint_run(p);
    if (!c.ok()) return c.error();
    if (*c) {
      fit_ckpt.push_back(std::move(*c.value()));
      continue;
    }
    auto l = load_measured_run(p);
    if (!l.ok()) return l.error();
    fit_runs.push_back(std::move(l).value());
  }
  for (const std::string& p : a.holdout) {
    auto c = load_checkpoint_run(p);
    if (!c.ok()) return c.error();
    if (*c) {
      holdout_ckpt.push_back(std::move(*c.value()));
      continue;
    }
    auto l = load_measured_run(p);
    if (!l.ok()) return l.error();
    holdout_runs.push_back(std::move(l).value());
  }
  std::vector<exec::BenchFile> benches;
  for (const std::string& p : a.bench) {
    auto b = exec::read_bench(p);
    if (!b.ok()) return b.error();
    benches.push_back(std::move(b).value());
  }
  const Scenario* ref = !fit_runs.empty() ? &fit_runs[0].scenario : !holdout_runs.empty() ? &holdout_runs[0].scenario : nullptr;
  const GpuSpec gpu = ref ? ref->cluster.gpu : builtin_presets().gpus.at("cpu-core");
  const Precision prec = ref ? ref->plan.precision : Precision::kBf16;
  std::vector<exec::ComputeSample> compute;
  std::vector<exec::CommSample> comm;
  std::vector<exec::HostSample> host;
  for (const MeasuredRun& l : fit_runs) {
    exec::run_samples(l.program,
                      exec::ExecContext{l.scenario.model, l.scenario.cluster, l.scenario.plan, l.scenario.workload},
                      l.measurement.timeline, compute, comm, &host);
  }
  for (const exec::BenchFile& b : benches) {
    for (const exec::ComputeSample& s : exec::compute_samples(gpu, prec, b.gemm)) compute.push_back(s);
    for (const exec::CommSample& s : exec::comm_samples(b.collectives)) comm.push_back(s);
  }
  CalibrateReport rep;
  rep.out = a.out;
  rep.hbm_bandwidth_GBps = gpu.hbm_bandwidth_GBps;
  rep.compute_samples = compute.size();
  rep.comm_samples = comm.size();
  Calibration& cal = rep.calibration;
  cal = exec::fit_calibration(gpu, prec, compute, comm);
  {
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    cal.created = date;
  }
  if (!fit_runs.empty()) {
    const exec::Measurement& m = fit_runs[0].measurement;
    cal.backend = m.backend;
    cal.device = m.device;
    cal.communicator = m.communicator;
    cal.host = m.host;
    cal.ranks = m.ranks;
  } else if (!benches.empty()) {
    cal.device = benches[0].device;
    cal.communicator = benches[0].communicator;
    cal.ranks = benches[0].ranks;
  }
  cal.checkpoint = fit_checkpoint(fit_ckpt);
  cal.host_rates = exec::fit_host(host);
  for (const MeasuredRun& l : fit_runs) cal.sources.push_back(std::filesystem::absolute(l.path).string());
  for (const CheckpointRun& c : fit_ckpt) cal.sources.push_back(std::filesystem::absolute(c.path).string());
  for (const std::string& p : a.bench) cal.sources.push_back(std::filesystem::absolute(p).string());
  rep.calibration_json = calibration_json(cal);

  for (const MeasuredRun& l : fit_runs) {
    CalibrateRun r;
    if (!predict_run(l, cal, "Fitted on", r)) return Error{l.path + ": cannot simulate its scenario"};
    rep.runs.push_back(std::move(r));
  }
  for (const MeasuredRun& l : holdout_runs) {
    CalibrateRun r;
    if (!predict_run(l, cal, "Held out", r)) return Error{l.path + ": cannot simulate its scenario"};
    rep.runs.push_back(std::move(r));
  }

  for (const CheckpointRun& c : fit_ckpt) rep.checkpoint_runs.push_back(checkpoint_report(c, cal, "Fitted on"));
  for (const CheckpointRun& c : holdout_ckpt) rep.checkpoint_runs.push_back(checkpoint_report(c, cal, "Held out"));

  // Warnings: fits that do not explain single samples.
  auto warn = [&](const std::string& part, const FitQuality& q) {
    if (q.points > 0 && q.rms_relative > kRmsWarnRelative) {
      rep.warnings.push_back(fmt::format("{} fit: rms error {:.0f}% over {} points: the formula does not explain single "
                                         "samples (noisy or time-sliced measurements?); only totals are trustworthy",
                                         part, 100 * q.rms_relative, q.points));
    }
  };
  warn("GEMM", cal.gemm);
  warn("attention", cal.attention);
  warn("memory-bound", cal.memory);
  warn("host link", cal.host_rates.link);
  warn("host optimizer step", cal.host_rates.optimizer);
  for (const CollectiveCalibration& c : cal.collectives) {
    warn(fmt::format("{} {}", to_string(static_cast<CollKind>(c.fit.kind)), scope_text(c)), c.quality);
  }
  // Refusal: worse on its own inputs.
  double before = 0, after = 0;
  int fitted = 0;
  for (const CalibrateRun& r : rep.runs) {
    if (r.role != std::string("Fitted on")) continue;
    before += std::abs(r.error_before());
    after += std::abs(r.error_after());
    ++fitted;
  }
  if (fitted > 0 && after > before) {
    rep.refused = fmt::format("{} not written: the calibration predicts the step time of the run{} it was fitted on "
                              "worse than the priors (mean |error| {:.1f}% before, {:.1f}% after); the measurements "
                              "are probably too noisy for this fit (see the rms above)",
                              a.out, fitted == 1 ? "" : "s", 100 * before / fitted, 100 * after / fitted);
  }
  return rep;
}

std::string calibrate_text(const CalibrateReport& r) {
  const Calibration& cal = r.calibration;
  std::string text = fmt::format("stepcast calibrate: {} compute samples, {} collective samples -> {}\n", r.compute_samples,
                                 r.comm_samples, r.out);
  if (r.compute_samples + r.comm_samples > 0) text += fmt::format("Fit        GEMM efficiency {:.3f} of {:.3g} TFLOP/s + {:.3g} s/byte ({}); attention {:.3f} ({}); "
                      "memory-bound {:.3f} of {:.3g} GB/s ({})\n",
                      cal.gemm_efficiency, cal.peak_flops / 1e12, cal.gemm_s_per_byte, rms_text(cal.gemm),
                      cal.attention_efficiency, rms_text(cal.attention), cal.memory_efficiency, r.hbm_bandwidth_GBps,
                      rms_text(cal.memory));
  for (const CollectiveCalibration& c : cal.collectives) {
    text += fmt::format("           {} {}: alpha {:.1f} us, busbw {:.3f} GB/s (rms {:.1f}%, {} points)\n",
                        to_string(static_cast<CollKind>(c.fit.kind)), scope_text(c), c.fit.alpha_s * 1e6,
                        c.fit.beta_s_per_byte > 0 ? 1e-9 / c.fit.beta_s_per_byte : 0.0, 100 * c.quality.rms_relative,
                        c.quality.points);
  }
  if (cal.checkpoint.saves + cal.checkpoint.restores + cal.checkpoint.snapshots > 0) {
    text += fmt::format("Checkpoint storage write {:.3f} GB/s + {:.4f} s per save to create and commit its files ({} "
                        "saves), read {:.3f} GB/s ({} restores), snapshot {:.3f} GB/s per rank ({} async saves)\n",
                        cal.checkpoint.write_GBps, cal.checkpoint.commit_s, cal.checkpoint.saves, cal.checkpoint.read_GBps,
                        cal.checkpoint.restores, cal.checkpoint.snapshot_GBps, cal.checkpoint.snapshots);
  }
  if (cal.host_rates.link.points + cal.host_rates.optimizer.points > 0) {
    text += fmt::format("Host       link {:.3f} GB/s ({}); optimizer step {:.3f} GB/s of host memory per rank ({})\n",
                        cal.host_rates.link_GBps, rms_text(cal.host_rates.link), cal.host_rates.optimizer_GBps,
                        rms_text(cal.host_rates.optimizer));
  }
  for (const CheckpointRunReport& c : r.checkpoint_runs) {
    text += fmt::format("\n{} {} ({}): {} {} save(s) of {:.2f} MB (the model counts {:.2f} MB)\n", c.role, c.file,
                        c.scenario_name, c.saves, c.async ? "async" : "sync", c.measured_bytes / 1e6,
                        c.predicted_bytes / 1e6);
    text += fmt::format("  {:<16}{:>12}{:>12}{:>9}{:>12}{:>9}\n", "save pause, s", "measured", "before", "error", "after",
                        "error");
    text += fmt::format("  {:<16}{:>12.4f}{:>12.4f}{:>8.1f}%{:>12.4f}{:>8.1f}%\n", "checkpoint", c.measured_s, c.before_s,
                        100 * c.error_before(), c.after_s, 100 * c.error_after());
  }
  for (const CalibrateRun& run : r.runs) {
    text += fmt::format("\n{} {} ({})\n", run.role, run.file, run.scenario_name);
    text += fmt::format("  {:<16}{:>12}{:>12}{:>9}{:>12}{:>9}\n", "rank 0, s/step", "measured", "before", "error", "after",
                        "error");
    for (const auto& [cls, c] : run.classes) {
      // A class under the table's resolution in every column (joins; the GPU's optimizer
      // share under full optimizer offload) has no time to compare.
      if (std::max({c.measured_s, c.before_s, c.after_s}) < 5e-5) continue;
      text += fmt::format("  {:<16}{:>12.4f}{:>12.4f}{:>8.1f}%{:>12.4f}{:>8.1f}%\n", cls, c.measured_s, c.before_s,
                          100 * (c.before_s - c.measured_s) / c.measured_s, c.after_s,
                          100 * (c.after_s - c.measured_s) / c.measured_s);
    }
    text += fmt::format("  {:<16}{:>12.4f}{:>12.4f}{:>8.1f}%{:>12.4f}{:>8.1f}%\n", "step (median)", run.measured_s,
                        run.before_s, 100 * run.error_before(), run.after_s, 100 * run.error_after());
  }
  return text;
}

std::string calibrate_json(const CalibrateReport& r) {
  nlohmann::ordered_json report;
  report["calibration"] = r.out;
  report["fit"] = nlohmann::json::parse(r.calibration_json);
  report["runs"] = nlohmann::json::array();
  for (const CalibrateRun& run : r.runs) {
    nlohmann::ordered_json jr;
    jr["file"] = run.file;
    jr["role"] = run.role;
    for (const auto& [cls, c] : run.classes) {
      jr["classes"][cls] = {{"measured_s", c.measured_s}, {"before_s", c.before_s}, {"after_s", c.after_s}};
    }
    jr["step"] = {{"measured_s", run.measured_s}, {"before_s", run.before_s}, {"after_s", run.after_s},
                  {"error_before", run.error_before()}, {"error_after", run.error_after()}};
    report["runs"].push_back(jr);
  }
  report["checkpoint_runs"] = nlohmann::json::array();
  for (const CheckpointRunReport& c : r.checkpoint_runs) {
    report["checkpoint_runs"].push_back({{"file", c.file}, {"role", c.role}, {"saves", c.saves}, {"async", c.async},
                                         {"measured_bytes", c.measured_bytes}, {"predicted_bytes", c.predicted_bytes},
                                         {"measured_s", c.measured_s}, {"before_s", c.before_s}, {"after_s", c.after_s},
                                         {"error_before", c.error_before()}, {"error_after", c.error_after()}});
  }
  if (!r.refused.empty()) report["refused"] = r.refused;
  return report.dump(2) + "\n";
}

}  // namespace stepcast::app
