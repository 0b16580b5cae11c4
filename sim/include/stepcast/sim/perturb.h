// The engine's Perturbations built from a scenario's `faults` (models/stragglers.h).
// Randomness (jitter, data skew) is a counter-based hash of (seed, rank, step, op, purpose)
// turned into normal draws: the same scenario and seed give the same run on any machine,
// whatever order ranks are simulated in.
#pragma once

#include <cstdint>
#include <vector>

#include "stepcast/models/program.h"
#include "stepcast/models/stragglers.h"
#include "stepcast/sim/engine.h"

namespace stepcast::sim {

// A standard normal draw from `key` (splitmix64 + Box-Muller), and the 64-bit mixer.
std::uint64_t mix64(std::uint64_t x);
double normal_draw(std::uint64_t key);

class ScenarioPerturbations final : public Perturbations {
 public:
  ScenarioPerturbations(const PerturbationSpec& spec, const Placement& placement, std::uint64_t seed);
  SimTime compute(int rank, int step, std::uint32_t op_index, const Op& op, SimTime base) const override;
  SimTime comm(std::span<const int> ranks, const Op& op, SimTime base) const override;
  bool stops(int rank, int step, std::uint32_t op_index, SimTime now) const override;
  double collective_bytes(int rank, int step, std::uint32_t op_index, const Op& op) const override;

  // The compute-time factor of `rank` in `step` from slowdown and data skew (no jitter).
  double rank_factor(int rank, int step) const;

 private:
  bool targets(const StragglerSpec& s, int rank) const;
  static bool active(const StragglerSpec& s, int step) { return step >= s.from_step && step <= s.to_step; }

  PerturbationSpec spec_;
  Placement placement_;
  std::uint64_t seed_;
};

}  // namespace stepcast::sim
