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

// Oracle: mixed precision's bookkeeping. The 16-bit weights are the rounding of the fp32
// master copy the optimizer part holds, so the model part is redundant beside it, and only
// beside it (execute --resume-check --omit model resumes bitwise; docs/checkpoints.md).
TEST(ResumeAudit, AMissingModelPartMattersOnlyWithoutTheOptimizersMasterCopy) {
  CheckpointSpec c;
  c.contents = {StatePart::kOptimizer, StatePart::kLrScheduler, StatePart::kGradScaler, StatePart::kRng,
                StatePart::kDataSampler, StatePart::kStep, StatePart::kConfig};
  const analysis::ResumeAudit with_master = analysis::resume_audit(c);
  ASSERT_EQ(with_master.missing.size(), 1u);
  EXPECT_EQ(with_master.missing[0].part, StatePart::kModel);
  EXPECT_FALSE(with_master.missing[0].matters);
  EXPECT_NE(with_master.missing[0].consequence.find("fp32 master"), std::string::npos);
  EXPECT_TRUE(with_master.ok());
  // FSDP2's optimizer holds only the moments: its model part is the fp32 copy.
  const analysis::ResumeAudit fsdp2 = analysis::resume_audit(c, false, false);
  EXPECT_TRUE(fsdp2.missing[0].matters);
  EXPECT_EQ(fsdp2.missing_list(), "model");
  c.contents.erase(c.contents.begin());  // neither weights nor master
  const analysis::ResumeAudit neither = analysis::resume_audit(c);
  ASSERT_EQ(neither.missing.size(), 2u);
  EXPECT_TRUE(neither.missing[0].matters);
  EXPECT_NE(neither.missing[0].consequence.find("initial weights"), std::string::npos);
  EXPECT_EQ(neither.missing_list(), "model,optimizer");
}

}  // namespace
}  // namespace stepcast
