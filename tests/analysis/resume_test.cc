// The resume audit (analysis/resume.h). Oracle: the table of docs/incidents.md
// "Resume audit", one consequence per missing part.
#include "stepcast/analysis/resume.h"

#include <gtest/gtest.h>

namespace stepcast {
namespace {

TEST(ResumeAudit, ACompleteCheckpointResumesExactly) {
  const analysis::ResumeAudit a = analysis::resume_audit(CheckpointSpec{});
  EXPECT_TRUE(a.missing.empty());
  EXPECT_TRUE(a.ok());
  EXPECT_EQ(a.missing_list(), "");
}

TEST(ResumeAudit, EachMissingPartIsNamedWithItsConsequence) {
  CheckpointSpec c;
  c.contents = {StatePart::kModel, StatePart::kOptimizer, StatePart::kGradScaler, StatePart::kStep, StatePart::kConfig};
  const analysis::ResumeAudit a = analysis::resume_audit(c);
  ASSERT_EQ(a.missing.size(), 3u);
  EXPECT_EQ(a.missing[0].part, StatePart::kLrScheduler);
  EXPECT_EQ(a.missing[0].consequence,
            "the learning rate restarts at the wrong position of its schedule (warm-up again, or the wrong point of the "
            "decay)");
  EXPECT_EQ(a.missing[1].part, StatePart::kRng);
  EXPECT_EQ(a.missing[1].consequence, "dropout masks and random sampling differ from the uninterrupted run");
  EXPECT_EQ(a.missing[2].part, StatePart::kDataSampler);
  EXPECT_EQ(a.missing[2].consequence,
            "the data window repeats after a restart: samples already trained on are seen again and others are skipped");
  EXPECT_EQ(a.missing_list(), "data_sampler,lr_scheduler,rng");
  EXPECT_FALSE(a.ok());
}

TEST(ResumeAudit, AMissingLossScalerMattersOnlyWithFp16) {
  CheckpointSpec c;
  c.contents = {StatePart::kModel, StatePart::kOptimizer, StatePart::kLrScheduler, StatePart::kRng,
                StatePart::kDataSampler, StatePart::kStep, StatePart::kConfig};
  const analysis::ResumeAudit bf16 = analysis::resume_audit(c, false);
  ASSERT_EQ(bf16.missing.size(), 1u);
  EXPECT_FALSE(bf16.missing[0].matters);
  EXPECT_TRUE(bf16.ok());
  const analysis::ResumeAudit fp16 = analysis::resume_audit(c, true);
  EXPECT_TRUE(fp16.missing[0].matters);
  EXPECT_EQ(fp16.missing_list(), "grad_scaler");
  EXPECT_NE(fp16.missing[0].consequence.find("early overflow skips"), std::string::npos);
}

}  // namespace
}  // namespace stepcast
