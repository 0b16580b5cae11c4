// Prediction bands: a p10-p90 interval around a predicted step time (docs/model-reference.md,
// "Prediction bands"). The error model has two documented inputs:
//   - per-mechanism uncertainty: each part of the step (compute, exposed communication,
//     bubble, optimizer, straggler wait) has a relative uncertainty set by the status of the
//     constants that price it (sourced [S]/[V] or not [U]; kPartUncertainty in band.cc);
//   - the residuals of `stepcast validate` on published runs: their mean log error (how far
//     measured runs landed from the prediction, on average) and its spread, per software
//     stack where validate compares enough records of that stack, else over every record.
// The log of the true step time is taken as normal with mean log(T) + mu (the validation
// bias) and variance sigma_v^2 + sum_i (share_i * u_i)^2; p10 and p90 are its 10th and 90th
// percentiles. A band says where published runs of this kind landed around the prediction
// plus what the unsourced constants could add; it is not a statistical guarantee.
#pragma once

#include <string_view>

#include "stepcast/models/specs.h"

namespace stepcast {

struct Band {
  double p10 = 0, p90 = 0;
  bool contains(double x) const { return p10 <= x && x <= p90; }
  bool overlaps(const Band& o) const { return p10 <= o.p90 && o.p10 <= p90; }
};

// The parts of one step (seconds): their sum is the step time the band is around.
struct StepParts {
  double compute = 0;
  double exposed_comm = 0;
  double bubble = 0;
  double optimizer = 0;
  double wait = 0;
  double input = 0;  // given by the scenario: no uncertainty of the model's
  double host = 0;   // GPU idle while the host dispatches kernels (launch-bound)
  double interference = 0;  // compute slowed by overlapped collectives (not in `compute`)
  // Of the parts above (an attribution, not added to the total): the seconds spent in the
  // MoE blocks of mixture-of-experts layers -- router, token permutation, shared and routed
  // experts, their exposed all-to-alls and host stall. Their own uncertainty applies to it.
  double moe = 0;
  double total() const { return compute + exposed_comm + bubble + optimizer + wait + input + host + interference; }
};

// Relative 1-sigma uncertainty of each part (log scale), from the status of its constants.
struct PartUncertainty {
  double compute, exposed_comm, bubble, optimizer, wait, host, interference;
  double moe;  // the MoE blocks (StepParts::moe), on top of the parts they lie in
};
const PartUncertainty& part_uncertainty();

// The validation residuals the band uses (log of measured / predicted step time).
struct ValidationResiduals {
  int records = 0;
  double mean_log = 0;  // > 0: measured runs took longer than predicted (optimistic model)
  double sd_log = 0;    // sample standard deviation
};
// Over every compared record, whatever its stack (the pooled residuals).
const ValidationResiduals& validation_residuals();

// A stack's own residuals (its records only) when validate compares at least
// kMinStackRecords of them, else the pooled ones: with fewer, a mean and a spread say more
// about the records than about the stack.
inline constexpr int kMinStackRecords = 5;
const ValidationResiduals& stack_validation_residuals(Stack stack);  // its records only
const ValidationResiduals& validation_residuals(Stack stack);        // what its bands use

// The band of a step with these parts: p10 <= p90, both finite and positive for total > 0.
Band step_time_band(const StepParts& parts, const ValidationResiduals& residuals);

// The band of a rate inversely proportional to step time (tokens/s, samples/s): `rate` is
// the point value at `step_time_s`; p10 of the rate comes from p90 of the time.
Band rate_band(const Band& step_band, double step_time_s, double rate);

// Whether two predictions of the same model on the same cluster are too close to rank: the
// shared errors (the validation bias and spread, a part's constants) move both alike and
// cancel in their ratio, so what separates them is how differently their steps are made up.
// With shares s_i of each part, sigma_d^2 = sum_i (u_i (s_a,i - s_b,i))^2, and they tie when
// |log(value_b / value_a)| <= z90 sigma_d (within the p10-p90 of their difference). Marginal
// bands would overlap for nearly every pair. `value_*` > 0: step time, time to train, cost,
// or tokens/s (the ratio's log is symmetric).
bool ties(double value_a, const StepParts& a, double value_b, const StepParts& b);

// The tie rule's threshold: z90 sigma_d, the largest |log(value_b / value_a)| that ties()
// calls a tie for steps made up as `a` and `b`; 0 when either has no parts.
double tie_log_threshold(const StepParts& a, const StepParts& b);

}  // namespace stepcast
