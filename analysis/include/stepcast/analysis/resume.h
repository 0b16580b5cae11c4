// The resume audit: what a checkpoint (checkpoint.contents) lacks for an exact resume,
// and what goes wrong after a restart because of each missing part.
#pragma once

#include <string>
#include <vector>

#include "stepcast/models/reliability.h"

namespace stepcast::analysis {

struct ResumeItem {
  StatePart part = StatePart::kModel;
  bool matters = true;       // false: missing without effect (grad_scaler without fp16)
  std::string consequence;   // what goes wrong after a restart
};

struct ResumeAudit {
  std::vector<ResumeItem> missing;  // in the order of kAllStateParts
  // The missing parts that matter, names sorted alphabetically and comma-separated
  // ("data_sampler,lr_scheduler,rng"); "" when the resume is exact.
  std::string missing_list() const;
  bool ok() const { return missing_list().empty(); }
};

// The parts of the training state that `checkpoint` does not save. `loss_scaling`: the
// run scales its loss (fp16); otherwise a missing grad_scaler is listed as harmless.
// `master_in_optimizer`: the optimizer part holds the fp32 master weights
// (state_bytes_per_param), so a missing model part is recovered from it when the optimizer
// part is saved.
ResumeAudit resume_audit(const CheckpointSpec& checkpoint, bool loss_scaling = false, bool master_in_optimizer = true);

}  // namespace stepcast::analysis
