#include "stepcast/sim/perturb.h"

#include <algorithm>
#include <cmath>


namespace stepcast::sim {

namespace {

constexpr std::uint64_t kJitterPurpose = 1, kSkewPurpose = 2;

std::uint64_t key(std::uint64_t seed, std::uint64_t purpose, std::uint64_t rank, std::uint64_t step,
                  std::uint64_t op) {
  std::uint64_t k = mix64(seed ^ 0x9e3779b97f4a7c15ULL);
  k = mix64(k ^ purpose);
  k = mix64(k ^ rank);
  k = mix64(k ^ (step << 1));
  return mix64(k ^ (op << 2));
}

// A multiplicative factor 1 + cv z, floored at 0.1 (a time cannot shrink to nothing).
double factor(double cv, std::uint64_t k) { return std::max(0.1, 1.0 + cv * normal_draw(k)); }

}  // namespace

std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finaliser (Steele, Lea, Flood 2014)
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double normal_draw(std::uint64_t k) {
  // Two uniforms in (0, 1) from the key, then Box-Muller.
  const std::uint64_t a = mix64(k), b = mix64(a ^ 0xd1b54a32d192ed03ULL);
  const double u1 = (static_cast<double>(a >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = (static_cast<double>(b >> 11) + 0.5) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

ScenarioPerturbations::ScenarioPerturbations(const PerturbationSpec& spec, const Placement& placement,
                                             std::uint64_t seed)
    : spec_(spec), placement_(placement), seed_(seed) {}

bool ScenarioPerturbations::targets(const StragglerSpec& s, int rank) const {
  if (s.ranks.empty() && s.nodes.empty()) return true;
  if (std::find(s.ranks.begin(), s.ranks.end(), rank) != s.ranks.end()) return true;
  return std::find(s.nodes.begin(), s.nodes.end(), placement_.node(rank)) != s.nodes.end();
}

double ScenarioPerturbations::rank_factor(int rank, int step) const {
  double f = 1.0;
  for (const StragglerSpec& s : spec_.stragglers) {
    if (!active(s, step) || !targets(s, rank)) continue;
    if (s.kind == StragglerKind::kSlowdown) f *= s.factor;
    if (s.kind == StragglerKind::kDataSkew) {
      f *= factor(s.cv, key(seed_, kSkewPurpose, static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(step), 0));
    }
  }
  return f;
}

SimTime ScenarioPerturbations::compute(int rank, int step, std::uint32_t op_index, const Op& op, SimTime base) const {
  double f = 1.0;
  double extra_s = 0;
  for (const StragglerSpec& s : spec_.stragglers) {
    if (!active(s, step) || !targets(s, rank)) continue;
    switch (s.kind) {
      case StragglerKind::kSlowdown: f *= s.factor; break;
      case StragglerKind::kDataSkew:
        f *= factor(s.cv, key(seed_, kSkewPurpose, static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(step), 0));
        break;
      case StragglerKind::kJitter:
        f *= factor(s.cv, key(seed_, kJitterPurpose, static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(step),
                              s.per_op ? op_index + 1ULL : 0));
        break;
      case StragglerKind::kInputStall:
        if (op.cclass == ComputeClass::kInput && (step - s.from_step) % std::max(1, s.every_steps) == 0) {
          extra_s += s.duration_s;
        }
        break;
      case StragglerKind::kSlowLink: break;
    }
  }
  // Host-side work: a slower GPU does not slow it (input: only stalls change it); nor the
  // host optimizer step.
  if (op.cclass == ComputeClass::kInput || op.cclass == ComputeClass::kHost ||
      op.cclass == ComputeClass::kHostOptimizer)
    f = 1.0;
  // Interference is sized from the collective's time, not the GPU's pace.
  if (op.cclass == ComputeClass::kInterference) f = 1.0;
  return SimTime::from_ns(static_cast<std::int64_t>(std::llround(static_cast<double>(base.ns()) * f))) +
         SimTime::from_s(extra_s);
}

SimTime ScenarioPerturbations::comm(std::span<const int> ranks, const Op&, SimTime base) const {
  double f = 1.0;
  for (const StragglerSpec& s : spec_.stragglers) {
    if (s.kind != StragglerKind::kSlowLink) continue;
    for (int r : ranks) {
      if (std::find(s.nodes.begin(), s.nodes.end(), placement_.node(r)) != s.nodes.end() ||
          std::find(s.ranks.begin(), s.ranks.end(), r) != s.ranks.end()) {
        f = std::min(f, s.factor);  // the slowest member's link bounds the transfer
        break;
      }
    }
  }
  if (f >= 1.0) return base;
  return SimTime::from_ns(static_cast<std::int64_t>(std::llround(static_cast<double>(base.ns()) / f)));
}

bool ScenarioPerturbations::stops(int rank, int step, std::uint32_t op_index, SimTime now) const {
  if (!spec_.crash || spec_.crash->rank != rank) return false;
  const CrashSpec& c = *spec_.crash;
  if (c.at_time_s && now.seconds() >= *c.at_time_s) return true;
  return c.at_op && step == c.step && op_index == *c.at_op;
}

double ScenarioPerturbations::collective_bytes(int rank, int step, std::uint32_t op_index, const Op& op) const {
  if (spec_.mismatch && spec_.mismatch->rank == rank && spec_.mismatch->step == step &&
      spec_.mismatch->at_op == op_index) {
    return op.bytes * spec_.mismatch->bytes_factor;
  }
  return op.bytes;
}

}  // namespace stepcast::sim
