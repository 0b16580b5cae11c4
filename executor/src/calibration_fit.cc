#include "stepcast/executor/calibration_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <Eigen/Dense>

#include "stepcast/models/collectives.h"
#include "stepcast/models/compute.h"

namespace stepcast::exec {


namespace {

void add_gemm(ComputeSample& s, const GpuSpec& gpu, Precision p, const GemmShape& g) {
  const double m = static_cast<double>(g.m), n = static_cast<double>(g.n), k = static_cast<double>(g.k);
  s.gemm_flops = g.flops();
  // The bytes the model's per-byte term multiplies (gemm_cost: operands, output, and with
  // split K the fp32 partials), so that the fitted term means what the model applies.
  const GemmCost c = gemm_cost(gpu, p, m, n, k);
  s.quantization = c.tiling.quantization;
  s.operand_bytes = static_cast<double>(g.batch) * c.bytes;
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

std::vector<CommSample> comm_samples(const std::vector<CollectivePoint>& points) {
  std::vector<CommSample> out;
  for (const CollectivePoint& p : points) out.push_back(CommSample{p.kind, p.inter_node, p.ranks, p.bytes, p.time_s});
  return out;
}

void run_samples(const Program& prog, const ExecContext& ctx, const Timeline& t, std::vector<ComputeSample>& compute,
                 std::vector<CommSample>& comm, std::vector<HostSample>* host) {
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
      } else if (host && (w.kind == OpWork::Kind::kHostCopy || w.kind == OpWork::Kind::kHostStep)) {
        host->push_back(HostSample{w.kind == OpWork::Kind::kHostStep, w.bytes, (sp.end - sp.begin).seconds()});
      }
    }
  }
}

HostCalibration fit_host(const std::vector<HostSample>& samples) {
  HostCalibration h;
  auto fit = [&](bool optimizer, double& GBps, FitQuality& q) {
    double bytes = 0, seconds = 0;
    for (const HostSample& s : samples) {
      if (s.optimizer != optimizer || !(s.measured_s > 0)) continue;
      bytes += s.bytes;
      seconds += s.measured_s;
    }
    if (!(bytes > 0 && seconds > 0)) return;
    const double rate = bytes / seconds;
    GBps = rate / 1e9;
    double sq = 0;
    for (const HostSample& s : samples) {
      if (s.optimizer != optimizer || !(s.measured_s > 0)) continue;
      const double r = (s.bytes / rate - s.measured_s) / s.measured_s;
      sq += r * r;
      ++q.points;
    }
    q.rms_relative = std::sqrt(sq / q.points);
  };
  fit(false, h.link_GBps, h.link);
  fit(true, h.optimizer_GBps, h.optimizer);
  return h;
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
