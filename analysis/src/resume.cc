#include "stepcast/analysis/resume.h"

#include <algorithm>

namespace stepcast::analysis {

std::string ResumeAudit::missing_list() const {
  std::vector<std::string> names;
  for (const ResumeItem& m : missing) {
    if (m.matters) names.emplace_back(state_part_name(m.part));
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + names[i];
  return out;
}

ResumeAudit resume_audit(const CheckpointSpec& checkpoint, bool loss_scaling, bool master_in_optimizer) {
  ResumeAudit a;
  for (StatePart p : kAllStateParts) {
    if (checkpoint.saves(p)) continue;
    ResumeItem m;
    m.part = p;
    switch (p) {
      case StatePart::kModel:
        // Mixed precision keeps an fp32 master copy of every weight, and after each optimizer
        // step the 16-bit weights are the rounding of it. Where the optimizer state holds
        // that copy (Megatron-Core, DeepSpeed; not FSDP2, whose model part is the fp32
        // copy) and is saved, the weights are recovered exactly by rounding it again.
        m.matters = !(master_in_optimizer && checkpoint.saves(StatePart::kOptimizer));
        m.consequence = m.matters ? "training restarts from the initial weights: everything trained before the "
                                    "restart is lost"
                                  : "none if the loader rounds the saved fp32 master weights (optimizer part) to "
                                    "16 bits: that is what the weights were (DeepSpeed's load_from_fp32_weights, "
                                    "stepcast's trainer); a loader that expects the model part fails or starts from "
                                    "the initial weights";
        break;
      case StatePart::kOptimizer:
        m.consequence = "the optimizer state (Adam moments) restarts from zero: a loss spike after the restart and a "
                        "curve that no longer follows the uninterrupted run";
        break;
      case StatePart::kLrScheduler:
        m.consequence = "the learning rate restarts at the wrong position of its schedule (warm-up again, or the "
                        "wrong point of the decay)";
        break;
      case StatePart::kGradScaler:
        m.matters = loss_scaling;
        m.consequence = loss_scaling ? "the loss scale restarts at its initial value: early overflow skips (steps "
                                       "dropped while the scale backs off)"
                                     : "none here: the run does not scale its loss (no fp16)";
        break;
      case StatePart::kRng:
        m.consequence = "dropout masks and random sampling differ from the uninterrupted run";
        break;
      case StatePart::kDataSampler:
        m.consequence = "the data window repeats after a restart: samples already trained on are seen again and "
                        "others are skipped";
        break;
      case StatePart::kStep:
        m.consequence = "the step counter restarts at 0: whatever is keyed on it (schedules, data order, "
                        "checkpoint names) restarts too";
        break;
      case StatePart::kConfig:
        m.consequence = "nothing checks that the restarted job uses the same layout, batch and sequence length";
        break;
    }
    a.missing.push_back(std::move(m));
  }
  return a;
}

}  // namespace stepcast::analysis
