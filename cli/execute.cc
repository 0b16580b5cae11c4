#include "execute.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/executor/cpu_device.h"
#include "stepcast/executor/launch.h"
#include "stepcast/executor/measure.h"
#include "stepcast/executor/runner.h"
#include "stepcast/models/compute.h"
#include "stepcast/models/lower.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/scenario.h"
#include "stepcast/sim/run.h"
#ifdef STEPCAST_HAVE_MPI
#include "stepcast/executor/mpi_comm.h"
#endif
#ifdef STEPCAST_HAVE_CUDA
#include "stepcast/executor/cuda_backend.h"
#endif

namespace stepcast::cli {

namespace {

constexpr int kExitOk = 0, kExitFail = 1, kExitInput = 2;

int input_error(const std::string& message) {
  std::fprintf(stderr, "stepcast: error: %s\n", message.c_str());
  return kExitInput;
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot open file"};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Machine {
  std::unique_ptr<exec::Communicator> host;    // MPI, when built with it
  std::unique_ptr<exec::Device> device;
  std::unique_ptr<exec::Communicator> comm;    // the data plane
  exec::Communicator& data() { return comm ? *comm : *host; }
};

// The backend's device and communicator; an error message when this build cannot.
Result<Machine*> open_machine_or_throw(const std::string& backend, Machine& m) {
  (void)m;  // unused in builds without MPI and CUDA
  if (backend != "cpu_mpi" && backend != "cuda_nccl") {
    return Error{fmt::format("--backend: \"{}\" is not a backend (cpu_mpi, cuda_nccl)", backend)};
  }
#ifdef STEPCAST_HAVE_MPI
  m.host = exec::make_mpi_communicator();
#endif
  if (backend == "cpu_mpi") {
#ifndef STEPCAST_HAVE_MPI
    return Error{"--backend cpu_mpi: this stepcast was built without MPI (configure with -DSTEPCAST_WITH_MPI=ON)"};
#else
    m.device = exec::make_cpu_device();
    return &m;
#endif
  }
#ifndef STEPCAST_HAVE_CUDA
  return Error{"--backend cuda_nccl: this stepcast was built without CUDA (configure with -DSTEPCAST_WITH_CUDA=ON)"};
#else
  const exec::LaunchInfo li = exec::detect_launch();
  exec::CudaOptions o;
  o.local_rank = li.local_rank;
  if (!m.host) o.id_file = "stepcast-nccl-id";
  m.device = exec::make_cuda_device(o);
  const int rank = m.host ? m.host->rank() : li.rank;
  const int world = m.host ? m.host->world() : li.world;
  m.comm = exec::make_nccl_communicator(*m.device, m.host.get(), rank, world, o);
  return &m;
#endif
}

// open_machine_or_throw with the backends' exceptions (no GPU, MPI failures) as errors.
Result<Machine*> open_machine(const std::string& backend, Machine& m) {
  try {
    return open_machine_or_throw(backend, m);
  } catch (const std::exception& e) {
    return Error{e.what()};
  }
}

// Loads a scenario and applies --scale-down; the plan's layout is checked again.
Result<Scenario> load_scaled(const std::string& path, int factor) {
  auto s = load_scenario_file(path);
  if (!s.ok()) return s.error();
  Scenario sc = *s;
  if (factor > 1) {
    try {
      sc.model = exec::scale_down(sc.model, factor, sc.plan.pp * sc.plan.virtual_stages, sc.plan.tp);
    } catch (const std::invalid_argument& e) {
      return Error{e.what()};
    }
    auto errs = layout_errors(sc.model, sc.cluster, sc.plan, sc.workload);
    if (!errs.empty()) return Error{fmt::format("--scale-down {}: {}", factor, errs.front())};
  }
  return sc;
}

exec::ExecContext context_of(const Scenario& s) { return exec::ExecContext{s.model, s.cluster, s.plan, s.workload}; }

std::string gib(double b) { return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024)); }

}  // namespace

// ---- execute ------------------------------------------------------------------------------

int cmd_execute(const ExecuteArgs& a) {
  if (a.steps < 1) return input_error(fmt::format("--steps: {} must be at least 1", a.steps));
  if (a.warmup < 0) return input_error(fmt::format("--warmup: {} must not be negative", a.warmup));
  if (a.scale_down < 1) return input_error(fmt::format("--scale-down: {} must be at least 1", a.scale_down));
  auto sc = load_scaled(a.scenario, a.scale_down);
  if (!sc.ok()) return input_error(sc.error().message);
  Machine machine;
  if (auto opened = open_machine(a.backend, machine); !opened.ok()) return input_error(opened.error().message);
  exec::Communicator& comm = machine.data();
  const bool root = comm.rank() == 0;
  const Program prog = lower(*sc);
  if (comm.world() != prog.placement.world()) {
    if (root) {
      input_error(fmt::format("{}: the plan needs {} ranks but {} were launched (e.g. mpirun -np {} stepcast execute ...)",
                              a.scenario, prog.placement.world(), comm.world(), prog.placement.world()));
    }
    return kExitInput;
  }
  exec::RunOptions ro;
  ro.steps = a.steps;
  ro.warmup = a.warmup;
  ro.verify = !a.no_verify;
  exec::RankResult mine;
  try {
    mine = exec::run_rank(prog, context_of(*sc), *machine.device, comm, ro);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stepcast: rank %d: error: %s\n", comm.rank(), e.what());
    return kExitFail;
  }
  const std::vector<std::string> wires = comm.gather(exec::rank_result_wire(mine));
  if (!root) return mine.wrong_elements > 0 ? kExitFail : kExitOk;

  exec::Measurement m;
  m.scenario = std::filesystem::absolute(a.scenario).string();
  m.scale_down = a.scale_down;
  m.backend = a.backend;
  m.device = machine.device->describe();
  m.communicator = comm.describe();
  m.host = hostname();
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
  if (predicted.ok()) m.predicted_step_time_s = predicted->summary.step_time_s;

  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  const std::string mpath = (std::filesystem::path(a.out) / "measured.json").string();
  const std::string tpath = (std::filesystem::path(a.out) / "trace.json").string();
  if (!write_file(mpath, exec::measurement_json(m)) || !write_file(tpath, chrome_trace_json(prog, m.timeline))) {
    return input_error(fmt::format("--out: cannot write into \"{}\"", a.out));
  }
  const double med = m.median_step_s();
  if (a.json) {
    std::cout << exec::measurement_json(m);
  } else {
    std::cout << fmt::format("stepcast execute: {} on {} ranks ({})\n", sc->name, m.ranks, a.backend);
    std::cout << fmt::format("Device     {}\nComm       {}\n", m.device, m.communicator);
    std::string steps;
    for (double s : m.step_time_s) steps += fmt::format(" {:.4f}", s);
    std::cout << fmt::format("Steps      {} warm-up + {} measured:{} s (median {:.4f} s)\n", a.warmup, a.steps, steps, med);
    if (m.predicted_step_time_s > 0) {
      std::cout << fmt::format("Predicted  {:.4f} s by the simulator{} -> error {:+.1f}%\n", m.predicted_step_time_s,
                               sc->calibration ? " (calibrated)" : " (priors, not calibrated)",
                               100.0 * (m.predicted_step_time_s - med) / med);
    }
    if (ro.verify) {
      std::cout << fmt::format("Verified   {} elements of collectives and receives: {}\n", m.verified_elements,
                               m.wrong_elements == 0 ? "all exact" : fmt::format("{} WRONG", m.wrong_elements));
      for (const std::string& e : m.errors) std::cout << "  " << e << "\n";
    } else {
      std::cout << "Verified   no (--no-verify)\n";
    }
    const double peak = *std::max_element(m.peak_memory_bytes.begin(), m.peak_memory_bytes.end());
    const double pred = *std::max_element(m.predicted_peak_bytes.begin(), m.predicted_peak_bytes.end());
    if (peak > 0) std::cout << fmt::format("Memory     measured peak {} per rank, predicted {}\n", gib(peak), gib(pred));
    else std::cout << fmt::format("Memory     not measured on this backend (predicted peak {} per rank)\n", gib(pred));
    std::cout << fmt::format("Wrote      {} and {} (stepcast diagnose {} works on it)\n", mpath, tpath, tpath);
  }
  return m.wrong_elements > 0 ? kExitFail : kExitOk;
}

// ---- bench --------------------------------------------------------------------------------

int cmd_bench(const BenchArgs& a) {
  if (a.what != "gemm" && a.what != "collectives") {
    return input_error(fmt::format("bench: \"{}\" is not a benchmark (gemm, collectives)", a.what));
  }
  if (a.iterations < 1) return input_error("--iters: must be at least 1");
  if (!(a.min_bytes > 0) || a.max_bytes < a.min_bytes) {
    return input_error("--min-bytes/--max-bytes: need 0 < min-bytes <= max-bytes");
  }
  const std::string gpu_name = !a.gpu.empty() ? a.gpu : (a.backend == "cuda_nccl" ? "h100-sxm" : "cpu-core");
  const auto& gpus = builtin_presets().gpus;
  auto it = gpus.find(gpu_name);
  if (it == gpus.end()) return input_error(fmt::format("--gpu: unknown GPU preset \"{}\"", gpu_name));
  const GpuSpec& gpu = it->second;
  Machine machine;
  if (auto opened = open_machine(a.backend, machine); !opened.ok()) return input_error(opened.error().message);
  exec::Communicator& comm = machine.data();
  exec::BenchFile bf;
  bf.kind = a.what;
  bf.device = machine.device->describe();
  bf.communicator = comm.describe();
  bf.ranks = comm.world();
  const bool root = comm.rank() == 0;
  if (a.what == "gemm") {
    const int top = a.max_size > 0 ? a.max_size : (a.backend == "cuda_nccl" ? 16384 : 1024);
    std::vector<exec::GemmShape> shapes;
    for (int s = 64; s <= top; s *= 2) shapes.push_back({s, s, s, 1});
    for (int n = 64; n <= top * 4; n *= 4) shapes.push_back({std::max(64, top / 4), n, std::max(64, top / 4), 1});
    bf.gemm = exec::bench_gemm(*machine.device, shapes, 0.05);
    if (root && a.json_out.empty()) {
      std::cout << fmt::format("# stepcast bench gemm: {} (rank 0 of {}); % of {} peak {:.1f} TFLOP/s\n", bf.device,
                               bf.ranks, gpu_name, peak_flops(gpu, Precision::kBf16) / 1e12);
      std::cout << fmt::format("{:>8}{:>8}{:>8}{:>7}{:>12}{:>11}{:>9}\n", "m", "n", "k", "type", "time(us)", "TFLOP/s",
                               "%peak");
      for (const exec::GemmPoint& p : bf.gemm) {
        const double tf = p.shape.flops() / p.time_s;
        std::cout << fmt::format("{:>8}{:>8}{:>8}{:>7}{:>12.2f}{:>11.4f}{:>8.1f}%\n", p.shape.m, p.shape.n, p.shape.k,
                                 to_string(machine.device->compute_dtype()), p.time_s * 1e6, tf / 1e12,
                                 100.0 * tf / peak_flops(gpu, Precision::kBf16));
      }
    }
  } else {
    int rpn = a.gpus_per_node;
    if (rpn <= 0) {
      const char* l = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
      rpn = l ? std::max(1, std::atoi(l)) : comm.world();
    }
    const std::vector<CollKind> kinds = {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                                         CollKind::kAllToAll, CollKind::kBroadcast};
    bf.collectives = exec::bench_collectives(*machine.device, comm, kinds, a.min_bytes, a.max_bytes, a.iterations, rpn);
    if (root && a.json_out.empty()) {
      std::cout << fmt::format("# stepcast bench collectives: {} ranks ({} per node), {}; {}\n", bf.ranks, rpn,
                               bf.communicator, bf.device);
      std::cout << "# algbw = size / time; busbw = algbw x bus factor (nccl-tests: 2(n-1)/n all-reduce, (n-1)/n "
                   "all-gather, reduce-scatter, all-to-all, 1 broadcast)\n";
      std::cout << fmt::format("{:>15}{:>12}{:>12}{:>6}{:>12}{:>10}{:>10}{:>8}\n", "collective", "size(B)", "count", "type",
                               "time(us)", "algbw", "busbw", "#wrong");
      for (const exec::CollectivePoint& p : bf.collectives) {
        const double algbw = p.bytes / p.time_s / 1e9;
        std::cout << fmt::format("{:>15}{:>12.0f}{:>12}{:>6}{:>12.1f}{:>10.3f}{:>10.3f}{:>8}\n", to_string(p.kind), p.bytes,
                                 p.count, to_string(machine.device->comm_dtype()), p.time_s * 1e6, algbw,
                                 algbw * bus_factor(p.kind, p.ranks), p.wrong);
      }
    }
  }
  std::int64_t wrong = 0;
  for (const auto& p : bf.collectives) wrong += p.wrong;
  if (root && !a.json_out.empty()) {
    if (a.json_out == "-") std::cout << exec::bench_json(bf);
    else if (!write_file(a.json_out, exec::bench_json(bf))) return input_error(fmt::format("--json: cannot write \"{}\"", a.json_out));
  }
  return wrong > 0 ? kExitFail : kExitOk;
}

// ---- calibrate ----------------------------------------------------------------------------

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
      cls = op.cclass == ComputeClass::kGemm ? "GEMM" : op.cclass == ComputeClass::kAttention ? "attention" : "memory-bound";
      d = (sp.end - sp.post).seconds();
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

struct Loaded {
  std::string path;
  exec::Measurement m;
  Scenario sc;
  Program prog;
};

Result<Loaded> load_measurement(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return text.error();
  auto m = exec::parse_measurement(*text, path);
  if (!m.ok()) return m.error();
  auto sc = load_scaled(m->scenario, m->scale_down);
  if (!sc.ok()) return Error{fmt::format("{}: scenario {}: {}", path, m->scenario, sc.error().message)};
  Loaded l{path, *m, *sc, lower(*sc)};
  for (const RankTimeline& r : l.m.timeline.ranks) {
    if (r.stage < 0 || static_cast<std::size_t>(r.stage) >= l.prog.roles.size()) {
      return Error{fmt::format("{}: rank {} has stage {} but the scenario's plan has {} stages (scenario changed?)", path,
                               r.rank, r.stage, l.prog.roles.size())};
    }
    for (const Span& s : r.spans) {
      if (s.op >= l.prog.roles[static_cast<std::size_t>(r.stage)].ops.size()) {
        return Error{fmt::format("{}: op {} does not exist in the scenario's Program (scenario changed?)", path, s.op)};
      }
    }
  }
  return l;
}

}  // namespace

bool looks_like_measurement(const std::string& text) {
  const auto head = text.substr(0, 256);
  return head.find("\"kind\": \"stepcast-measurement\"") != std::string::npos;
}

Result<analysis::CompareSide> measured_compare_side(const std::string& path) {
  auto l = load_measurement(path);
  if (!l.ok()) return l.error();
  return analysis::compare_side_measured(l->sc, l->prog, l->m.timeline, l->sc.name + " (measured)");
}

int cmd_calibrate(const CalibrateArgs& a) {
  if (a.measured.empty() && a.bench.empty()) return input_error("calibrate: give measured runs (MEASURED.json) or --bench files");
  std::vector<Loaded> fit_runs, holdout_runs;
  for (const std::string& p : a.measured) {
    auto l = load_measurement(p);
    if (!l.ok()) return input_error(l.error().message);
    fit_runs.push_back(std::move(*l));
  }
  for (const std::string& p : a.holdout) {
    auto l = load_measurement(p);
    if (!l.ok()) return input_error(l.error().message);
    holdout_runs.push_back(std::move(*l));
  }
  std::vector<exec::BenchFile> benches;
  for (const std::string& p : a.bench) {
    auto text = read_file(p);
    if (!text.ok()) return input_error(text.error().message);
    auto b = exec::parse_bench(*text, p);
    if (!b.ok()) return input_error(b.error().message);
    benches.push_back(std::move(*b));
  }
  const Scenario* ref = !fit_runs.empty() ? &fit_runs[0].sc : !holdout_runs.empty() ? &holdout_runs[0].sc : nullptr;
  GpuSpec gpu = ref ? ref->cluster.gpu : builtin_presets().gpus.at("cpu-core");
  const Precision prec = ref ? ref->plan.precision : Precision::kBf16;
  std::vector<exec::ComputeSample> compute;
  std::vector<exec::CommSample> comm;
  for (const Loaded& l : fit_runs) exec::run_samples(l.prog, context_of(l.sc), l.m.timeline, compute, comm);
  for (const exec::BenchFile& b : benches) {
    for (auto& s : exec::compute_samples(gpu, prec, b.gemm)) compute.push_back(s);
    for (const exec::CollectivePoint& p : b.collectives) {
      comm.push_back(exec::CommSample{p.kind, p.inter_node, p.ranks, p.bytes, p.time_s});
    }
  }
  Calibration cal = exec::fit_calibration(gpu, prec, compute, comm);
  {
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    cal.created = date;
  }
  if (!fit_runs.empty()) {
    const exec::Measurement& m = fit_runs[0].m;
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
  for (const auto& l : fit_runs) cal.sources.push_back(std::filesystem::absolute(l.path).string());
  for (const auto& p : a.bench) cal.sources.push_back(std::filesystem::absolute(p).string());
  if (!write_file(a.out, calibration_json(cal))) return input_error(fmt::format("--out: cannot write \"{}\"", a.out));

  nlohmann::ordered_json report;
  report["calibration"] = a.out;
  report["fit"] = nlohmann::json::parse(calibration_json(cal));
  report["runs"] = nlohmann::json::array();
  std::ostringstream text;
  text << fmt::format("stepcast calibrate: {} compute samples, {} collective samples -> {}\n", compute.size(), comm.size(), a.out);
  auto rms = [](const FitQuality& q) {
    return q.points > 0 ? fmt::format("rms {:.1f}% over {} ops", 100 * q.rms_relative, q.points)
                        : std::string("no op dominated by it");
  };
  text << fmt::format("Fit        GEMM efficiency {:.3f} of {:.3g} TFLOP/s + {:.3g} s/byte ({}); attention {:.3f} ({}); "
                      "memory-bound {:.3f} of {:.3g} GB/s ({})\n",
                      cal.gemm_efficiency, cal.peak_flops / 1e12, cal.gemm_s_per_byte, rms(cal.gemm),
                      cal.attention_efficiency, rms(cal.attention), cal.memory_efficiency, gpu.hbm_bandwidth_GBps,
                      rms(cal.memory));
  for (const CollectiveCalibration& c : cal.collectives) {
    text << fmt::format("           {} {}: alpha {:.1f} us, busbw {:.3f} GB/s (rms {:.1f}%, {} points)\n",
                        to_string(static_cast<CollKind>(c.fit.kind)),
                        c.fit.scope == CollScope::kIntraNode ? "intra-node" : "inter-node", c.fit.alpha_s * 1e6,
                        c.fit.beta_s_per_byte > 0 ? 1e-9 / c.fit.beta_s_per_byte : 0.0, 100 * c.quality.rms_relative,
                        c.quality.points);
  }
  auto report_run = [&](const Loaded& l, const char* role) -> bool {
    Scenario after = l.sc;
    apply_calibration(cal, after.cluster);
    auto b = sim::run_scenario(l.sc, sim::RunOptions{});
    auto f = sim::run_scenario(after, sim::RunOptions{});
    if (!b.ok() || !f.ok()) return false;
    const double meas = l.m.median_step_s();
    const double pb = b->summary.step_time_s, pa = f->summary.step_time_s;
    const RankTimeline* mr = nullptr;
    for (const RankTimeline& r : l.m.timeline.ranks) if (r.rank == 0) mr = &r;
    const RankTimeline* br = nullptr;
    const RankTimeline* ar = nullptr;
    for (const RankTimeline& r : b->out.timeline.ranks) if (r.rank == 0) br = &r;
    for (const RankTimeline& r : f->out.timeline.ranks) if (r.rank == 0) ar = &r;
    text << fmt::format("\n{} {} ({})\n", role, l.path, l.sc.name);
    text << fmt::format("  {:<16}{:>12}{:>12}{:>9}{:>12}{:>9}\n", "rank 0, s/step", "measured", "before", "error", "after", "error");
    nlohmann::ordered_json jr;
    jr["file"] = l.path;
    jr["role"] = role;
    if (mr && br && ar) {
      auto mc = class_seconds(l.prog, *mr, l.m.steps);
      auto bc = class_seconds(b->program, *br, 1);
      auto ac = class_seconds(f->program, *ar, 1);
      for (const auto& [cls, mv] : mc) {
        const double bv = bc[cls], av = ac[cls];
        text << fmt::format("  {:<16}{:>12.4f}{:>12.4f}{:>8.1f}%{:>12.4f}{:>8.1f}%\n", cls, mv, bv, 100 * (bv - mv) / mv, av,
                            100 * (av - mv) / mv);
        jr["classes"][cls] = {{"measured_s", mv}, {"before_s", bv}, {"after_s", av}};
      }
    }
    text << fmt::format("  {:<16}{:>12.4f}{:>12.4f}{:>8.1f}%{:>12.4f}{:>8.1f}%\n", "step (median)", meas, pb,
                        100 * (pb - meas) / meas, pa, 100 * (pa - meas) / meas);
    jr["step"] = {{"measured_s", meas}, {"before_s", pb}, {"after_s", pa}, {"error_before", (pb - meas) / meas},
                  {"error_after", (pa - meas) / meas}};
    report["runs"].push_back(jr);
    return true;
  };
  for (const Loaded& l : fit_runs) if (!report_run(l, "Fitted on")) return input_error(l.path + ": cannot simulate its scenario");
  for (const Loaded& l : holdout_runs) if (!report_run(l, "Held out")) return input_error(l.path + ": cannot simulate its scenario");
  std::cout << (a.json ? report.dump(2) + "\n" : text.str());
  return kExitOk;
}

}  // namespace stepcast::cli
