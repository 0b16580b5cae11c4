#include "stepcast/executor/measure.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>
#include <tuple>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/models/collectives.h"
#include "stepcast/models/compute.h"

namespace stepcast::exec {

using nlohmann::json;

// ---- scale-down -----------------------------------------------------------------------

ModelSpec scale_down(const ModelSpec& m, int f, int min_layers, int min_heads) {
  if (f < 1) throw std::invalid_argument(fmt::format("--scale-down: {} must be at least 1", f));
  if (f == 1) return m;
  ModelSpec s = m;
  s.name = fmt::format("{} / {}", m.name, f);
  s.num_attention_heads = std::max(min_heads, m.num_attention_heads / f);
  s.num_kv_heads = std::max(1, m.num_kv_heads / f);
  while (s.num_attention_heads % s.num_kv_heads != 0) --s.num_kv_heads;
  s.head_dim = m.head_dim > 0 ? m.head_dim : m.hidden_size / m.num_attention_heads;
  s.hidden_size = s.head_dim * s.num_attention_heads;
  s.ffn_hidden_size = std::max<std::int64_t>(1, m.ffn_hidden_size / f);
  s.vocab_size = std::max<std::int64_t>(64, m.vocab_size / f);
  s.num_layers = std::max(min_layers, m.num_layers / f);
  if (s.moe) {
    s.moe->expert_ffn_hidden_size = std::max<std::int64_t>(1, m.moe->expert_ffn_hidden_size / f);
    s.moe->shared_expert_ffn_hidden_size = std::max<std::int64_t>(0, m.moe->shared_expert_ffn_hidden_size / f);
    s.moe->num_dense_layers = std::min(s.moe->num_dense_layers, s.num_layers - 1);
  }
  if (s.mla) {
    s.mla->q_lora_rank = std::max<std::int64_t>(1, m.mla->q_lora_rank / f);
    s.mla->kv_lora_rank = std::max<std::int64_t>(1, m.mla->kv_lora_rank / f);
  }
  s.reference_params_total.reset();
  return s;
}

// ---- wire format of one rank's result ---------------------------------------------------

namespace {

// A rank's spans as rows [op, step, stream, post_ns, begin_ns, end_ns], and its step ends.
json spans_json(const RankTimeline& t) {
  json spans = json::array();
  for (const Span& s : t.spans) {
    spans.push_back({s.op, s.step, static_cast<int>(s.stream), s.post.ns(), s.begin.ns(), s.end.ns()});
  }
  return spans;
}
json step_end_json(const RankTimeline& t) {
  json ends = json::array();
  for (SimTime e : t.step_end) ends.push_back(e.ns());
  return ends;
}

}  // namespace

std::string rank_result_wire(const RankResult& r) {
  return json{{"rank", r.timeline.rank}, {"stage", r.timeline.stage}, {"spans", spans_json(r.timeline)},
              {"step_end", step_end_json(r.timeline)},
              {"step_s", r.step_s}, {"verified", r.verified_elements}, {"wrong", r.wrong_elements},
              {"errors", r.errors}, {"peak", r.peak_memory_bytes}, {"predicted_peak", r.predicted_peak_bytes}}
      .dump();
}

namespace {

void read_spans(const json& j, RankTimeline& t) {
  for (const json& s : j.at("spans")) {
    Span sp;
    sp.op = s.at(0).get<std::uint32_t>();
    sp.step = s.at(1).get<std::uint16_t>();
    sp.stream = static_cast<Stream>(s.at(2).get<int>());
    sp.post = SimTime::from_ns(s.at(3).get<std::int64_t>());
    sp.begin = SimTime::from_ns(s.at(4).get<std::int64_t>());
    sp.end = SimTime::from_ns(s.at(5).get<std::int64_t>());
    t.spans.push_back(sp);
  }
  for (const json& e : j.at("step_end")) t.step_end.push_back(SimTime::from_ns(e.get<std::int64_t>()));
}

}  // namespace

RankResult rank_result_from_wire(const std::string& s) {
  const json j = json::parse(s);
  RankResult r;
  r.timeline.rank = j.at("rank").get<int>();
  r.timeline.stage = j.at("stage").get<int>();
  read_spans(j, r.timeline);
  r.step_s = j.at("step_s").get<std::vector<double>>();
  r.verified_elements = j.at("verified").get<std::int64_t>();
  r.wrong_elements = j.at("wrong").get<std::int64_t>();
  r.errors = j.at("errors").get<std::vector<std::string>>();
  r.peak_memory_bytes = j.at("peak").get<double>();
  r.predicted_peak_bytes = j.at("predicted_peak").get<double>();
  r.timeline.peak_bytes = r.peak_memory_bytes;
  return r;
}

// ---- measured.json ----------------------------------------------------------------------

double Measurement::median_step_s() const {
  if (step_time_s.empty()) return 0;
  std::vector<double> v = step_time_s;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string measurement_json(const Measurement& m) {
  json ranks = json::array();
  for (const RankTimeline& r : m.timeline.ranks) {
    ranks.push_back({{"rank", r.rank}, {"stage", r.stage}, {"step_end", step_end_json(r)},
                     {"spans_columns", "op, step, stream, post_ns, begin_ns, end_ns"}, {"spans", spans_json(r)}});
  }
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["kind"] = "stepcast-measurement";
  j["scenario"] = m.scenario;
  j["scale_down"] = m.scale_down;
  j["backend"] = m.backend;
  j["device"] = m.device;
  j["communicator"] = m.communicator;
  j["host"] = m.host;
  j["ranks"] = m.ranks;
  j["warmup"] = m.warmup;
  j["steps"] = m.steps;
  j["step_time_s"] = m.step_time_s;
  j["step_time_median_s"] = m.median_step_s();
  j["predicted_step_time_s"] = m.predicted_step_time_s;
  j["verification"] = {{"elements", m.verified_elements}, {"wrong", m.wrong_elements}, {"errors", m.errors}};
  j["memory"] = {{"peak_bytes", m.peak_memory_bytes}, {"predicted_peak_bytes", m.predicted_peak_bytes}};
  j["timeline"] = ranks;
  return j.dump(1) + "\n";
}

Result<Measurement> parse_measurement(const std::string& text, const std::string& path) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{path + ": not a JSON object"};
  if (j.value("kind", "") != "stepcast-measurement") {
    return Error{path + ": kind: not a stepcast measurement (written by `stepcast execute`)"};
  }
  try {
    Measurement m;
    m.scenario = j.at("scenario").get<std::string>();
    m.scale_down = j.at("scale_down").get<int>();
    m.backend = j.at("backend").get<std::string>();
    m.device = j.at("device").get<std::string>();
    m.communicator = j.at("communicator").get<std::string>();
    m.host = j.value("host", "");
    m.ranks = j.at("ranks").get<int>();
    m.warmup = j.at("warmup").get<int>();
    m.steps = j.at("steps").get<int>();
    m.step_time_s = j.at("step_time_s").get<std::vector<double>>();
    m.predicted_step_time_s = j.at("predicted_step_time_s").get<double>();
    m.verified_elements = j.at("verification").at("elements").get<std::int64_t>();
    m.wrong_elements = j.at("verification").at("wrong").get<std::int64_t>();
    for (const json& r : j.at("timeline")) {
      RankTimeline t;
      t.rank = r.at("rank").get<int>();
      t.stage = r.at("stage").get<int>();
      read_spans(r, t);
      m.timeline.ranks.push_back(std::move(t));
    }
    for (const RankTimeline& r : m.timeline.ranks) {
      if (m.timeline.step_end.size() < r.step_end.size()) m.timeline.step_end.resize(r.step_end.size());
      for (std::size_t s = 0; s < r.step_end.size(); ++s) m.timeline.step_end[s] = std::max(m.timeline.step_end[s], r.step_end[s]);
    }
    return m;
  } catch (const json::exception& e) {
    return Error{fmt::format("{}: malformed measurement: {}", path, e.what())};
  }
}

// ---- microbenchmarks --------------------------------------------------------------------

std::vector<GemmPoint> bench_gemm(Device& dev, const std::vector<GemmShape>& shapes, double min_time_s) {
  std::vector<GemmPoint> out;
  for (const GemmShape& g : shapes) {
    dev.gemm(Stream::kCompute, g);  // warm-up (allocates operands)
    dev.synchronize();
    int iters = 1;
    double t = 0;
    for (;;) {
      const EventPtr a = dev.record(Stream::kCompute);
      for (int i = 0; i < iters; ++i) dev.gemm(Stream::kCompute, g);
      const EventPtr b = dev.record(Stream::kCompute);
      dev.synchronize();
      t = b->time_s() - a->time_s();
      if (t >= min_time_s || iters >= (1 << 20)) break;
      iters *= 2;
    }
    out.push_back(GemmPoint{g, t / iters});
  }
  return out;
}

std::vector<CollectivePoint> bench_collectives(Device& dev, Communicator& comm, const std::vector<CollKind>& kinds,
                                               double min_bytes, double max_bytes, int iterations, int ranks_per_node) {
  std::vector<CollectivePoint> out;
  const CommGroup world = comm.create_group(0);
  const int n = world.size();
  const std::size_t esize = dtype_bytes(dev.comm_dtype());
  for (CollKind kind : kinds) {
    for (double bytes = min_bytes; bytes <= max_bytes * 1.0000001; bytes *= 2) {
      const std::size_t total = std::max<std::size_t>(static_cast<std::size_t>(n), static_cast<std::size_t>(bytes / static_cast<double>(esize)));
      const std::size_t chunk = total / static_cast<std::size_t>(n);
      std::size_t send_n = total, recv_n = total;
      if (kind == CollKind::kAllGather) send_n = chunk, recv_n = chunk * static_cast<std::size_t>(n);
      if (kind == CollKind::kReduceScatter) send_n = chunk * static_cast<std::size_t>(n), recv_n = chunk;
      if (kind == CollKind::kAllToAll) send_n = recv_n = chunk * static_cast<std::size_t>(n);
      Buffer send = dev.alloc(send_n), recv = dev.alloc(recv_n);
      std::vector<float> host(send_n);
      for (std::size_t i = 0; i < send_n; ++i) host[i] = pattern_value(comm.rank(), 1, i);
      dev.upload(send, host);
      comm.collective(dev, Stream::kDp, kind, world, send, recv)->wait();  // warm-up
      dev.synchronize();
      comm.barrier();
      const double t0 = dev.now_s();
      EventPtr last;
      for (int i = 0; i < iterations; ++i) {
        last = comm.collective(dev, Stream::kDp, kind, world, send, recv);
        last->wait();
      }
      dev.synchronize();
      const double dt = comm.max_all(dev.now_s() - t0) / iterations;
      // Verify the last result (same seeded inputs every iteration).
      std::vector<float> got(recv_n), exp(recv_n, 0.0f);
      dev.download(recv, got);
      const std::size_t me = static_cast<std::size_t>(world.index), nn = static_cast<std::size_t>(n);
      for (std::size_t k = 0; k < recv_n; ++k) {
        switch (kind) {
          case CollKind::kAllGather: exp[k] = pattern_value(world.members[k / chunk], 1, k % chunk); break;
          case CollKind::kReduceScatter:
            for (std::size_t j = 0; j < nn; ++j) exp[k] += pattern_value(world.members[j], 1, me * chunk + k);
            break;
          case CollKind::kAllToAll: exp[k] = pattern_value(world.members[k / chunk], 1, me * chunk + k % chunk); break;
          case CollKind::kBroadcast: exp[k] = pattern_value(world.members[0], 1, k); break;
          default:
            for (std::size_t j = 0; j < nn; ++j) exp[k] += pattern_value(world.members[j], 1, k);
        }
      }
      std::int64_t wrong = 0;
      for (std::size_t k = 0; k < recv_n; ++k) wrong += got[k] != exp[k];
      dev.release(send);
      dev.release(recv);
      CollectivePoint p;
      p.kind = kind;
      p.bytes = static_cast<double>(std::max(send_n, recv_n) * esize);
      p.count = std::max(send_n, recv_n);
      p.ranks = n;
      p.inter_node = n > ranks_per_node;
      p.time_s = dt;
      p.wrong = static_cast<std::int64_t>(comm.max_all(static_cast<double>(wrong)));
      out.push_back(p);
    }
  }
  return out;
}

std::string bench_json(const BenchFile& b) {
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["kind"] = "stepcast-bench";
  j["bench"] = b.kind;
  j["device"] = b.device;
  j["communicator"] = b.communicator;
  j["ranks"] = b.ranks;
  json pts = json::array();
  for (const GemmPoint& g : b.gemm) {
    pts.push_back({{"m", g.shape.m}, {"n", g.shape.n}, {"k", g.shape.k}, {"time_s", g.time_s},
                   {"tflops", g.shape.flops() / g.time_s / 1e12}});
  }
  for (const CollectivePoint& c : b.collectives) {
    const double algbw = c.bytes / c.time_s / 1e9;
    pts.push_back({{"collective", std::string(to_string(c.kind))}, {"bytes", c.bytes}, {"count", c.count},
                   {"ranks", c.ranks}, {"inter_node", c.inter_node}, {"time_s", c.time_s}, {"algbw_GBps", algbw},
                   {"busbw_GBps", algbw * bus_factor(c.kind, c.ranks)}, {"wrong", c.wrong}});
  }
  j["results"] = pts;
  return j.dump(1) + "\n";
}

Result<BenchFile> parse_bench(const std::string& text, const std::string& path) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("kind", "") != "stepcast-bench") {
    return Error{path + ": kind: not a stepcast bench file (written by `stepcast bench ... --json FILE`)"};
  }
  try {
    BenchFile b;
    b.kind = j.at("bench").get<std::string>();
    b.device = j.value("device", "");
    b.communicator = j.value("communicator", "");
    b.ranks = j.value("ranks", 1);
    for (const json& p : j.at("results")) {
      if (p.contains("m")) {
        GemmPoint g;
        g.shape.m = p.at("m").get<std::int64_t>();
        g.shape.n = p.at("n").get<std::int64_t>();
        g.shape.k = p.at("k").get<std::int64_t>();
        g.time_s = p.at("time_s").get<double>();
        b.gemm.push_back(g);
      } else {
        CollectivePoint c;
        const std::string k = p.at("collective").get<std::string>();
        bool known = false;
        for (CollKind kind : {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                              CollKind::kAllToAll, CollKind::kBroadcast, CollKind::kSendRecv}) {
          if (to_string(kind) == k) c.kind = kind, known = true;
        }
        if (!known) return Error{fmt::format("{}: results: unknown collective \"{}\"", path, k)};
        c.bytes = p.at("bytes").get<double>();
        c.count = p.at("count").get<std::size_t>();
        c.ranks = p.at("ranks").get<int>();
        c.inter_node = p.at("inter_node").get<bool>();
        c.time_s = p.at("time_s").get<double>();
        c.wrong = p.at("wrong").get<std::int64_t>();
        b.collectives.push_back(c);
      }
    }
    return b;
  } catch (const json::exception& e) {
    return Error{fmt::format("{}: malformed bench file: {}", path, e.what())};
  }
}

// ---- samples ----------------------------------------------------------------------------

namespace {

void add_gemm(ComputeSample& s, const GpuSpec& gpu, Precision p, const GemmShape& g) {
  const double m = static_cast<double>(g.m), n = static_cast<double>(g.n), k = static_cast<double>(g.k);
  s.gemm_flops = g.flops();
  s.quantization = gemm_efficiency(gpu, p, m, n, k) / gemm_efficiency_max(gpu, p);
  const double elem = p == Precision::kFp8 ? 1.0 : 2.0;
  s.operand_bytes = static_cast<double>(g.batch) * (elem * (m * k + k * n) + 2.0 * m * n);
}

}  // namespace

std::vector<ComputeSample> compute_samples(const GpuSpec& gpu, Precision p, const std::vector<GemmPoint>& points) {
  std::vector<ComputeSample> out;
  for (const GemmPoint& g : points) {
    ComputeSample s;
    add_gemm(s, gpu, p, g.shape);
    s.measured_s = g.time_s;
    out.push_back(s);
  }
  return out;
}

void run_samples(const Program& prog, const ExecContext& ctx, const Timeline& t, std::vector<ComputeSample>& compute,
                 std::vector<CommSample>& comm) {
  const GpuSpec& gpu = ctx.cluster.gpu;
  for (const RankTimeline& r : t.ranks) {
    const RoleTemplate& role = prog.roles.at(static_cast<std::size_t>(r.stage));
    for (const Span& sp : r.spans) {
      const Op& op = role.ops.at(sp.op);
      const OpWork w = op_work(ctx, op);
      if (w.kind == OpWork::Kind::kCompute) {
        ComputeSample s;
        if (w.has_gemm) add_gemm(s, gpu, ctx.plan.precision, w.gemm);
        if (w.has_attention) s.core_flops = w.attention.flops();
        s.bytes = w.bytes;
        s.measured_s = (sp.end - sp.post).seconds();
        compute.push_back(s);
      } else if (w.kind == OpWork::Kind::kCollective) {
        const Placement& pl = prog.placement;
        const GroupShape g = group_shape(pl.group_size(op.group), pl.group_stride(op.group), pl.gpus_per_node);
        if (g.ranks <= 1) continue;
        CommSample c;
        c.kind = op.coll;
        c.inter_node = g.nodes > 1;
        c.ranks = g.ranks;
        c.bytes = op.bytes;
        c.measured_s = (sp.end - sp.begin).seconds();
        comm.push_back(c);
      }
    }
  }
}

// ---- the fit ----------------------------------------------------------------------------

namespace {

// Minimizes sum((X b - t)^2) with b >= 0 (columns dropped while a coefficient is
// negative). Absolute, not relative, errors: the fit must preserve the total time of the
// ops (what a step's prediction adds up), and relative least squares is biased toward
// the fastest samples when measurements are noisy. Returns b (size = X.cols()).
Eigen::VectorXd nnls(const Eigen::MatrixXd& X, const Eigen::VectorXd& t) {
  const Eigen::Index n = X.rows(), k = X.cols();
  Eigen::VectorXd b = Eigen::VectorXd::Zero(k);
  std::vector<bool> active(static_cast<std::size_t>(k), true);
  for (int round = 0; round < k; ++round) {
    std::vector<Eigen::Index> cols;
    for (Eigen::Index c = 0; c < k; ++c) if (active[static_cast<std::size_t>(c)]) cols.push_back(c);
    if (cols.empty()) break;
    Eigen::MatrixXd A(n, static_cast<Eigen::Index>(cols.size()));
    for (Eigen::Index i = 0; i < n; ++i)
      for (std::size_t c = 0; c < cols.size(); ++c) A(i, static_cast<Eigen::Index>(c)) = X(i, cols[c]);
    const Eigen::VectorXd& y = t;
    const Eigen::VectorXd sol = A.colPivHouseholderQr().solve(y);
    bool negative = false;
    b.setZero();
    for (std::size_t c = 0; c < cols.size(); ++c) {
      b(cols[c]) = sol(static_cast<Eigen::Index>(c));
      if (sol(static_cast<Eigen::Index>(c)) < 0) {
        active[static_cast<std::size_t>(cols[c])] = false;
        negative = true;
      }
    }
    if (!negative) return b;
  }
  return b.cwiseMax(0.0);
}

FitQuality quality(const Eigen::MatrixXd& X, const Eigen::VectorXd& t, const Eigen::VectorXd& b) {
  FitQuality q;
  q.points = static_cast<int>(t.size());
  if (t.size() == 0) return q;
  const Eigen::VectorXd rel = ((X * b).array() - t.array()) / t.array();
  q.rms_relative = std::sqrt(rel.squaredNorm() / static_cast<double>(t.size()));
  return q;
}

}  // namespace

Calibration fit_calibration(const GpuSpec& gpu, Precision p, const std::vector<ComputeSample>& compute,
                            const std::vector<CommSample>& comm) {
  Calibration cal;
  const double peak = peak_flops(gpu, p);
  const double bw = gpu.hbm_bandwidth_GBps * 1e9;
  cal.gpu_spec = gpu.name;
  cal.peak_flops = peak;
  std::vector<const ComputeSample*> v;
  for (const ComputeSample& s : compute) if (s.measured_s > 0) v.push_back(&s);
  if (!v.empty()) {
    const auto n = static_cast<Eigen::Index>(v.size());
    Eigen::MatrixXd X(n, 4);
    Eigen::VectorXd t(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      const ComputeSample& s = *v[static_cast<std::size_t>(i)];
      X(i, 0) = s.gemm_flops > 0 ? s.gemm_flops / (s.quantization * peak) : 0.0;
      X(i, 1) = s.operand_bytes;
      X(i, 2) = s.core_flops / peak;
      X(i, 3) = s.bytes / bw;
      t(i) = s.measured_s;
    }
    // Columns with no samples are left out of the fit (their coefficient stays 0).
    std::vector<Eigen::Index> used;
    for (Eigen::Index c = 0; c < 4; ++c) if (X.col(c).cwiseAbs().maxCoeff() > 0) used.push_back(c);
    Eigen::MatrixXd Xu(n, static_cast<Eigen::Index>(used.size()));
    for (std::size_t c = 0; c < used.size(); ++c) Xu.col(static_cast<Eigen::Index>(c)) = X.col(used[c]);
    const Eigen::VectorXd bu = nnls(Xu, t);
    Eigen::VectorXd b = Eigen::VectorXd::Zero(4);
    for (std::size_t c = 0; c < used.size(); ++c) b(used[c]) = bu(static_cast<Eigen::Index>(c));
    if (b(0) > 0) cal.gemm_efficiency = 1.0 / b(0);
    cal.gemm_s_per_byte = b(1);
    if (b(2) > 0) cal.attention_efficiency = 1.0 / b(2);
    if (b(3) > 0) cal.memory_efficiency = 1.0 / b(3);
    // Residuals by the part that dominates each sample's fitted time.
    auto subset_quality = [&](int part) {
      std::vector<Eigen::Index> rows;
      for (Eigen::Index i = 0; i < n; ++i) {
        Eigen::Index best = 0;
        double most = -1;
        for (Eigen::Index c = 0; c < 4; ++c) {
          const double x = X(i, c) * b(c);
          if (x > most) most = x, best = c;
        }
        if ((part == 0 && best <= 1) || (part != 0 && best == part)) rows.push_back(i);
      }
      Eigen::MatrixXd Xs(static_cast<Eigen::Index>(rows.size()), 4);
      Eigen::VectorXd ts(static_cast<Eigen::Index>(rows.size()));
      for (std::size_t r = 0; r < rows.size(); ++r) {
        Xs.row(static_cast<Eigen::Index>(r)) = X.row(rows[r]);
        ts(static_cast<Eigen::Index>(r)) = t(rows[r]);
      }
      return quality(Xs, ts, b);
    };
    cal.gemm = subset_quality(0);
    cal.attention = subset_quality(2);
    cal.memory = subset_quality(3);
  }
  // Collectives per (kind, scope).
  std::map<std::pair<int, bool>, std::vector<const CommSample*>> groups;
  for (const CommSample& c : comm) if (c.measured_s > 0 && c.bytes > 0) groups[{static_cast<int>(c.kind), c.inter_node}].push_back(&c);
  for (const auto& [key, pts] : groups) {
    Eigen::MatrixXd X(static_cast<Eigen::Index>(pts.size()), 2);
    Eigen::VectorXd t(static_cast<Eigen::Index>(pts.size()));
    double max_bytes = 0;
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const auto r = static_cast<Eigen::Index>(i);
      X(r, 0) = 1.0;
      X(r, 1) = pts[i]->bytes * bus_factor(pts[i]->kind, std::max(2, pts[i]->ranks));
      t(r) = pts[i]->measured_s;
      max_bytes = std::max(max_bytes, pts[i]->bytes);
    }
    const Eigen::VectorXd b = nnls(X, t);
    CollectiveCalibration cc;
    cc.fit.kind = key.first;
    cc.fit.scope = key.second ? CollScope::kInterNode : CollScope::kIntraNode;
    cc.fit.alpha_s = b(0);
    cc.fit.beta_s_per_byte = b(1);
    cc.max_bytes = max_bytes;
    cc.quality = quality(X, t, b);
    cal.collectives.push_back(cc);
  }
  return cal;
}

}  // namespace stepcast::exec
