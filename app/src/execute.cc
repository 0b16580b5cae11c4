#include "stepcast/app/execute.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "stepcast/analysis/simulate_report.h"
#include "stepcast/executor/launch.h"
#include "stepcast/executor/machine.h"
#include "stepcast/executor/runner.h"
#include "stepcast/executor/scale_down.h"
#include "stepcast/executor/wire.h"
#include "stepcast/models/lower.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/timeline.h"
#include "stepcast/sim/run.h"

namespace stepcast::app {

namespace {

std::string gib(double b) { return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024)); }

}  // namespace

Result<ExecuteReport> run_execute(const ExecuteRequest& a) {
  if (a.steps < 1) return Error{fmt::format("--steps: {} must be at least 1", a.steps)};
  if (a.warmup < 0) return Error{fmt::format("--warmup: {} must not be negative", a.warmup)};
  if (a.scale_down < 1) return Error{fmt::format("--scale-down: {} must be at least 1", a.scale_down)};
  auto loaded = load_scenario_file(a.scenario);
  if (!loaded.ok()) return loaded.error();
  auto sc = exec::scale_down_scenario(*loaded, a.scale_down);
  if (!sc.ok()) return sc.error();
  auto machine = exec::open_machine(a.backend);
  if (!machine.ok()) return machine.error();
  exec::Communicator& comm = machine.value().data();
  exec::Device& device = *machine.value().device;
  ExecuteReport rep;
  rep.rank = comm.rank();
  rep.root = comm.rank() == 0;
  rep.backend = a.backend;
  rep.verify = a.verify;
  const Program prog = lower(*sc);
  if (comm.world() != prog.placement.world()) {
    if (!rep.root) return Error{""};
    return Error{fmt::format("{}: the plan needs {} ranks but {} were launched (e.g. mpirun -np {} stepcast execute ...)",
                             a.scenario, prog.placement.world(), comm.world(), prog.placement.world())};
  }
  exec::RunOptions ro;
  ro.steps = a.steps;
  ro.warmup = a.warmup;
  ro.verify = a.verify;
  if (rep.root && a.progress) ro.on_step = [&a](int done, int total) { a.progress(done, total); };
  exec::RankResult mine;
  try {
    mine = exec::run_rank(prog, exec::ExecContext{sc->model, sc->cluster, sc->plan, sc->workload}, device, comm, ro);
  } catch (const std::exception& e) {
    rep.run_error = fmt::format("rank {}: error: {}", comm.rank(), e.what());
    return rep;
  }
  const std::vector<std::string> wires = comm.gather(exec::rank_result_wire(mine));
  if (!rep.root) {
    rep.measurement.wrong_elements = mine.wrong_elements;
    return rep;
  }
  exec::Measurement& m = rep.measurement;
  m.scenario = std::filesystem::absolute(a.scenario).string();
  m.scale_down = a.scale_down;
  m.backend = a.backend;
  m.device = device.describe();
  m.communicator = comm.describe();
  m.host = exec::host_name();
  m.ranks = comm.world();
  m.warmup = a.warmup;
  m.steps = a.steps;
  std::vector<RankTimeline> ranks;
  m.step_time_s.assign(static_cast<std::size_t>(a.steps), 0.0);
  for (const std::string& w : wires) {
    exec::RankResult r = exec::rank_result_from_wire(w);
    for (std::size_t s = 0; s < r.step_s.size() && s < m.step_time_s.size(); ++s) {
      m.step_time_s[s] = std::max(m.step_time_s[s], r.step_s[s]);
    }
    m.verified_elements += r.verified_elements;
    m.wrong_elements += r.wrong_elements;
    for (const std::string& e : r.errors) if (m.errors.size() < 16) m.errors.push_back(e);
    m.peak_memory_bytes.push_back(r.peak_memory_bytes);
    m.predicted_peak_bytes.push_back(r.predicted_peak_bytes);
    ranks.push_back(std::move(r.timeline));
  }
  m.timeline = exec::merge_timelines(prog, std::move(ranks));
  auto predicted = sim::run_scenario(*sc, sim::RunOptions{});
  if (predicted.ok() && !predicted->summary.ranks.empty()) {
    m.predicted_step_time_s = predicted->summary.step_time_s;
    const Band band = analysis::simulated_step_band(*sc, predicted->summary);
    m.predicted_p10_s = band.p10;
    m.predicted_p90_s = band.p90;
  }
  rep.scenario_name = sc->name;
  rep.calibrated = sc->calibration.has_value();

  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  if (ec) return Error{fmt::format("--out: cannot create directory \"{}\": {}", a.out, ec.message())};
  rep.measured_path = (std::filesystem::path(a.out) / "measured.json").string();
  rep.trace_path = (std::filesystem::path(a.out) / "trace.json").string();
  rep.measured_json = exec::measurement_json(m);
  rep.trace_json = chrome_trace_json(prog, m.timeline);
  return rep;
}

std::string execute_json(const ExecuteReport& r) { return r.measured_json; }

std::string execute_text(const ExecuteReport& r) {
  const exec::Measurement& m = r.measurement;
  const double med = m.median_step_s();
  std::string out;
  out += fmt::format("stepcast execute: {} on {} ranks ({})\n", r.scenario_name, m.ranks, r.backend);
  out += fmt::format("Device     {}\nComm       {}\n", m.device, m.communicator);
  std::string steps;
  for (double s : m.step_time_s) steps += fmt::format(" {:.4f}", s);
  out += fmt::format("Steps      {} warm-up + {} measured:{} s (median {:.4f} s)\n", m.warmup, m.steps, steps, med);
  if (m.predicted_step_time_s > 0) {
    out += fmt::format("Predicted  {:.4f} s by the simulator{} -> error {:+.1f}%\n", m.predicted_step_time_s,
                       r.calibrated ? " (calibrated)" : " (priors, not calibrated)",
                       100.0 * (m.predicted_step_time_s - med) / med);
    if (m.predicted_p90_s > 0) {
      const bool inside = m.predicted_p10_s <= med && med <= m.predicted_p90_s;
      out += fmt::format(
          "           p10-p90 {:.4f} - {:.4f} s (docs/model-reference.md section 8): the measured median "
          "is {} it\n",
          m.predicted_p10_s, m.predicted_p90_s, inside ? "inside" : "outside");
    }
  }
  if (r.verify) {
    out += fmt::format("Verified   {} elements of collectives and receives: {}\n", m.verified_elements,
                       m.wrong_elements == 0 ? "all exact" : fmt::format("{} WRONG", m.wrong_elements));
    for (const std::string& e : m.errors) out += "  " + e + "\n";
  } else {
    out += "Verified   no (--no-verify)\n";
  }
  const double peak = m.peak_memory_bytes.empty() ? 0 : *std::max_element(m.peak_memory_bytes.begin(), m.peak_memory_bytes.end());
  const double pred =
      m.predicted_peak_bytes.empty() ? 0 : *std::max_element(m.predicted_peak_bytes.begin(), m.predicted_peak_bytes.end());
  if (peak > 0) out += fmt::format("Memory     measured peak {} per rank, predicted {}\n", gib(peak), gib(pred));
  else out += fmt::format("Memory     not measured on this backend (predicted peak {} per rank)\n", gib(pred));
  out += fmt::format("Wrote      {} and {} (stepcast diagnose {} works on it)\n", r.measured_path, r.trace_path,
                     r.trace_path);
  return out;
}

}  // namespace stepcast::app
