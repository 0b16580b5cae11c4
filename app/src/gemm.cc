#include "stepcast/app/gemm.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "preset_lookup.h"
#include "stepcast/executor/bench_file.h"
#include "stepcast/models/json_reader.h"
#include "stepcast/models/names.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/stats.h"
#include "stepcast/models/text.h"

namespace stepcast::app {

namespace {

constexpr std::int64_t kMaxDim = std::int64_t{1} << 30;
constexpr std::int64_t kSweepStartM = 64;  // the sweep's first M (then doubling)

Result<std::int64_t> check_dim(const char* name, std::int64_t v) {
  if (v < 1 || v > kMaxDim) return Error{fmt::format("{}: expected 1 to {} (2^30), got {}", name, kMaxDim, v)};
  return v;
}

GemmPass price(const GpuSpec& gpu, Precision p, std::string name, std::int64_t m, std::int64_t n, std::int64_t k) {
  GemmPass g;
  g.name = std::move(name);
  g.m = m;
  g.n = n;
  g.k = k;
  g.cost = gemm_cost(gpu, p, static_cast<double>(m), static_cast<double>(n), static_cast<double>(k));
  g.tflops = g.cost.time_s > 0 ? g.cost.flops / g.cost.time_s / 1e12 : 0;
  g.memory_bound = g.cost.memory_s > g.cost.compute_s;
  return g;
}

nlohmann::ordered_json pass_json(const GemmPass& g) {
  const GemmTiling& t = g.cost.tiling;
  return {{"name", g.name},
          {"m", g.m},
          {"n", g.n},
          {"k", g.k},
          {"time_s", g.cost.time_s},
          {"tflops", g.tflops},
          {"flops", g.cost.flops},
          {"bytes", g.cost.bytes},
          {"compute_s", g.cost.compute_s},
          {"memory_s", g.cost.memory_s},
          {"bound", g.memory_bound ? "memory" : "compute"},
          {"efficiency", t.efficiency},
          {"q_tile", t.q_tile},
          {"q_wave", t.q_wave},
          {"q_k", t.q_k},
          {"tile_m", t.tile_m},
          {"tile_n", t.tile_n},
          {"tiles", t.tiles},
          {"k_slices", t.k_slices}};
}

// The `against` file's GEMMs priced by the model (exec::read_bench: the one JSON reader).
Result<GemmAgainst> compare_against(const GpuSpec& gpu, Precision p, const std::string& path) {
  auto b = exec::read_bench(path);
  if (!b.ok()) return Error{"--against: " + b.error().message};
  if (b->kind != "gemm") {
    return Error{"--against: " + path + " is a " + b->kind +
                 " bench, not a GEMM one (write one with stepcast bench gemm --json FILE)"};
  }
  if (b->gemm.empty()) return Error{"--against: " + path + " holds no GEMM results"};
  GemmAgainst a;
  a.file = path;
  a.device = b->device;
  std::vector<double> ratios;
  for (const exec::GemmPoint& pt : b->gemm) {
    GemmComparison c;
    c.m = pt.shape.m;
    c.n = pt.shape.n;
    c.k = pt.shape.k;
    c.batch = pt.shape.batch;
    const GemmCost cost =
        gemm_cost(gpu, p, static_cast<double>(c.m), static_cast<double>(c.n), static_cast<double>(c.k));
    c.measured_s = pt.time_s;
    c.model_s = static_cast<double>(c.batch) * cost.time_s;
    c.ratio = c.measured_s > 0 ? c.model_s / c.measured_s : 0;
    c.k_slices = cost.tiling.k_slices;
    c.tiles = cost.tiling.tiles;
    ratios.push_back(c.ratio);
    if (std::abs(c.ratio - 1) <= 0.10) ++a.within_10pct;
    a.rows.push_back(c);
  }
  a.median_ratio = median(ratios);
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  a.min_ratio = *lo;
  a.max_ratio = *hi;
  return a;
}

}  // namespace

Result<GemmReport> run_gemm(const GemmRequest& q) {
  const bool shape = q.m != 0 || q.n != 0 || q.k != 0;
  if (!shape && q.against.empty()) return Error{"M N K: required (the GEMM's shape), or --against FILE"};
  if (shape) {
    for (const auto& [name, v] : {std::pair{"M", q.m}, std::pair{"N", q.n}, std::pair{"K", q.k}}) {
      auto d = check_dim(name, v);
      if (!d.ok()) return d.error();
    }
  } else if (q.sweep || q.backward) {
    return Error{std::string(q.sweep ? "--sweep" : "--backward") + ": needs M N K (the shape to price)"};
  }
  const std::optional<Precision> precision = parse_precision(q.precision);
  if (!precision) {
    return Error{"--precision: unknown precision \"" + printable(q.precision) + "\" (bf16, fp16, fp8)"};
  }
  GemmReport r;
  r.precision = *precision;
  if (q.cluster_file) {
    auto s = load(*q.cluster_file);
    if (!s.ok()) return s.error();
    r.gpu = s->cluster.gpu;
    r.gpu_label =
        (q.cluster_file->path.empty() ? std::string("scenario") : q.cluster_file->path) + " (GPU " + r.gpu.name + ")";
  } else {
    const auto& gpus = builtin_presets().gpus;
    const auto it = gpus.find(q.gpu);
    if (it == gpus.end()) return Error{unknown_preset_message("--gpu", "GPU", q.gpu, gpus)};
    r.gpu = it->second;
    r.gpu_label = q.gpu;
  }
  if (r.precision == Precision::kFp8 && r.gpu.fp8_dense_tflops <= 0) {
    return Error{"--precision: " + r.gpu.name + " has no FP8 tensor cores (fp8_dense_tflops 0)"};
  }
  r.peak_tflops = peak_flops(r.gpu, r.precision) / 1e12;
  if (r.peak_tflops <= 0) return Error{"--gpu: " + r.gpu.name + " has no dense peak for " + q.precision};
  r.ceiling = gemm_efficiency_max(r.gpu, r.precision);
  r.k_half = r.precision == Precision::kFp8 ? r.gpu.gemm_fp8_k_half : r.gpu.gemm_bf16_k_half;

  // The backward as gemm_backward_s prices it: the data gradient (M x N).(N x K) and the
  // weight gradient (K x M).(M x N), each on its own shape.
  if (shape) r.passes.push_back(price(r.gpu, r.precision, "forward", q.m, q.n, q.k));
  if (q.backward) {
    r.passes.push_back(price(r.gpu, r.precision, "data gradient", q.m, q.k, q.n));
    r.passes.push_back(price(r.gpu, r.precision, "weight gradient", q.k, q.n, q.m));
  }
  for (const GemmPass& g : r.passes) r.total_s += g.cost.time_s;
  if (!q.against.empty()) {
    auto cmp = compare_against(r.gpu, r.precision, q.against);
    if (!cmp.ok()) return cmp.error();
    r.against = std::move(*cmp);
  }
  if (q.sweep) {
    // The token dimension's curve: where the tiles stop filling the SMs and K splits.
    for (std::int64_t m = kSweepStartM; m < q.m; m *= 2) {
      r.sweep.push_back(price(r.gpu, r.precision, "forward", m, q.n, q.k));
    }
    r.sweep.push_back(r.passes.front());
  }

  if (r.gpu.gemm_efficiency > 0) {
    r.notes.push_back(fmt::format("the ceiling is the GPU's gemm_efficiency {:.3f} (set or calibrated), not its MAMF",
                                  r.gpu.gemm_efficiency));
  } else if ((r.precision == Precision::kFp8 ? r.gpu.mamf_fp8_tflops : r.gpu.mamf_bf16_tflops) <= 0) {
    r.notes.push_back("no measured ceiling (MAMF) for this GPU and precision: the 0.75 prior [U]");
  } else if (r.gpu.gemm_bf16_sweep_tflops <= 0) {
    // (A preset with a separate short-sweep figure holds a sustained or at-the-cap ceiling.)
    r.notes.push_back(
        "the ceiling is a MAMF sweep's best shape, a short burst at boost clocks; back-to-back GEMMs at the power "
        "limit ran 11% lower in bf16 on an H200 (docs/gpu-measurements.md)");
  }
  if (r.gpu.gemm_s_per_byte > 0) {
    r.notes.push_back(fmt::format("a calibration adds {:.3g} s per operand byte to every GEMM", r.gpu.gemm_s_per_byte));
  }
  r.notes.push_back(
      "one kernel alone on an idle GPU: no launch cost, no communication beside it (compute-communication "
      "interference, docs/model-reference.md 4.5a), no clock drop beyond what the ceiling was measured at");
  r.notes.push_back(
      "stream-K's even spread of a partial last wave is not modelled: one to one and a half waves of tiles ran up "
      "to 1.4x faster than priced on an H200 (docs/gpu-measurements.md)");
  return r;
}

std::string gemm_text(const GemmReport& r) {
  const std::string_view prec = to_string(r.precision);
  std::string out = r.passes.empty()
                        ? fmt::format("stepcast gemm: the GEMMs of {}, {} on {}\n",
                                      r.against ? r.against->file : std::string("?"), prec, r.gpu_label)
                        : fmt::format("stepcast gemm: {} x {} x {} (M x N x K), {} on {}\n", r.passes.front().m,
                                      r.passes.front().n, r.passes.front().k, prec, r.gpu_label);
  out += fmt::format("  GPU        {}: {:.1f} TFLOP/s dense {}, {} SMs, HBM {:.0f} GB/s x {:.2f}\n", r.gpu.name,
                     r.peak_tflops, prec, r.gpu.sms, r.gpu.hbm_bandwidth_GBps, r.gpu.hbm_efficiency);
  out += fmt::format("  ceiling    {:.3f} of peak ({:.1f} TFLOP/s); short-K K_half {}\n", r.ceiling,
                     r.ceiling * r.peak_tflops, r.k_half > 0 ? fmt::format("{:g}", r.k_half) : std::string("none"));
  for (const GemmPass& g : r.passes) {
    const GemmTiling& t = g.cost.tiling;
    out += fmt::format("\n{} ({} x {} x {})\n", g.name, g.m, g.n, g.k);
    out += fmt::format("  time       {}   {:.1f} TFLOP/s, {:.1f}% of peak; {}-bound\n", seconds_text(g.cost.time_s),
                       g.tflops, 100 * g.tflops / r.peak_tflops, g.memory_bound ? "memory" : "compute");
    out += fmt::format("  compute    {}: {:.4g} GFLOP at {:.3f} of peak\n", seconds_text(g.cost.compute_s),
                       g.cost.flops / 1e9, t.efficiency);
    out += fmt::format("  memory     {}: {:.4g} MB{}\n", seconds_text(g.cost.memory_s), g.cost.bytes / 1e6,
                       t.k_slices > 1 ? " (with the split K's fp32 partials)" : "");
    out += fmt::format("  efficiency {:.3f} = ceiling {:.3f} x tile {:.3f} x wave {:.3f} x short-K {:.3f}\n",
                       t.efficiency, r.ceiling, t.q_tile, t.q_wave, t.q_k);
    std::string cut = fmt::format("{:g} x {:g} tiles: {:g} on {} SMs", t.tile_m, t.tile_n, t.tiles, r.gpu.sms);
    if (t.k_slices > 1) {
      cut += fmt::format(", K split {:g} ways ({:g} each), {:g} units", t.k_slices,
                         static_cast<double>(g.k) / t.k_slices, t.tiles * t.k_slices);
    }
    if (r.gpu.sms > 0) cut += fmt::format(" in {:g} wave(s)", std::ceil(t.tiles * t.k_slices / r.gpu.sms));
    out += "  cut        " + cut + "\n";
  }
  if (r.passes.size() > 1) out += fmt::format("\ntotal      {}\n", seconds_text(r.total_s));
  if (!r.sweep.empty()) {
    out +=
        fmt::format("\nsweep: M doubling from {} (N {}, K {})\n", kSweepStartM, r.sweep.front().n, r.sweep.front().k);
    out += fmt::format("  {:>10} {:>12} {:>9} {:>10} {:>7} {:>9} {:>7}  {}\n", "M", "time", "TFLOP/s", "efficiency",
                       "tiles", "K slices", "waves", "bound");
    for (const GemmPass& g : r.sweep) {
      const GemmTiling& t = g.cost.tiling;
      const double waves = r.gpu.sms > 0 ? std::ceil(t.tiles * t.k_slices / r.gpu.sms) : 0;
      out += fmt::format("  {:>10} {:>12} {:>9.1f} {:>10.3f} {:>7g} {:>9g} {:>7g}  {}\n", g.m, seconds_text(g.cost.time_s),
                         g.tflops, t.efficiency, t.tiles, t.k_slices, waves, g.memory_bound ? "memory" : "compute");
    }
  }
  if (r.against) {
    const GemmAgainst& a = *r.against;
    out += fmt::format("\nagainst {}: {}\n", a.file, a.device.empty() ? std::string("(no device line)") : a.device);
    out += fmt::format("  {:>8} {:>8} {:>8} {:>6} {:>12} {:>12} {:>9} {:>7} {:>8}\n", "M", "N", "K", "batch",
                       "measured", "model", "model/meas", "tiles", "K slices");
    for (const GemmComparison& c : a.rows) {
      out += fmt::format("  {:>8} {:>8} {:>8} {:>6} {:>12} {:>12} {:>9.2f} {:>7g} {:>8g}\n", c.m, c.n, c.k, c.batch,
                         seconds_text(c.measured_s), seconds_text(c.model_s), c.ratio, c.tiles, c.k_slices);
    }
    out += fmt::format("  model/measured: median {:.2f}, {} of {} within 10%, range {:.2f} - {:.2f}\n", a.median_ratio,
                       a.within_10pct, a.rows.size(), a.min_ratio, a.max_ratio);
  }
  out += "\nNot in these numbers:\n";
  for (const std::string& n : r.notes) out += "  - " + n + "\n";
  return out;
}

std::string gemm_json(const GemmReport& r) {
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["command"] = "gemm";
  j["gpu"] = {{"name", r.gpu.name},
              {"label", r.gpu_label},
              {"sms", r.gpu.sms},
              {"hbm_bandwidth_GBps", r.gpu.hbm_bandwidth_GBps},
              {"hbm_efficiency", r.gpu.hbm_efficiency}};
  j["precision"] = std::string(to_string(r.precision));
  j["peak_tflops"] = r.peak_tflops;
  j["ceiling"] = r.ceiling;
  j["k_half"] = r.k_half;
  j["passes"] = nlohmann::ordered_json::array();
  for (const GemmPass& g : r.passes) {
    j["passes"].push_back(pass_json(g));
  }
  j["total_s"] = r.total_s;
  if (!r.sweep.empty()) {
    j["sweep"] = nlohmann::ordered_json::array();
    for (const GemmPass& g : r.sweep) j["sweep"].push_back(pass_json(g));
  }
  if (r.against) {
    const GemmAgainst& a = *r.against;
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const GemmComparison& c : a.rows) {
      rows.push_back({{"m", c.m},
                      {"n", c.n},
                      {"k", c.k},
                      {"batch", c.batch},
                      {"measured_s", c.measured_s},
                      {"model_s", c.model_s},
                      {"ratio", c.ratio},
                      {"tiles", c.tiles},
                      {"k_slices", c.k_slices}});
    }
    j["against"] = {{"file", a.file},
                    {"device", a.device},
                    {"rows", rows},
                    {"median_ratio", a.median_ratio},
                    {"min_ratio", a.min_ratio},
                    {"max_ratio", a.max_ratio},
                    {"within_10pct", a.within_10pct}};
  }
  j["notes"] = r.notes;
  return j.dump(1) + "\n";
}

}  // namespace stepcast::app
