// The breakdown sweep (analysis/breakdown.h). Oracle: intervals laid out by hand, so each
// part's time is read off the drawing in the comment.
#include "stepcast/analysis/breakdown.h"

#include <gtest/gtest.h>

#include <vector>

namespace stepcast {
namespace {

using analysis::Part;

TEST(Breakdown, EachInstantGoesToOnePartByPriority) {
  //   0        100      150      200            300
  //   |compute |                                      compute beats tp where both run
  //        |tp (50-150)      |
  //                     |wait|                        150-200: wait
  //                          |  nothing: bubble  |
  const std::vector<analysis::PartInterval> iv = {
      {0, 100, Part::kCompute}, {50, 150, Part::kTp}, {150, 200, Part::kWait}};
  const analysis::RankBreakdown b = analysis::sweep_breakdown(3, 1, iv, 300, 1);
  EXPECT_EQ(b.rank, 3);
  EXPECT_EQ(b.stage, 1);
  EXPECT_DOUBLE_EQ(b.compute, 100e-9);
  EXPECT_DOUBLE_EQ(b.tp, 50e-9);
  EXPECT_DOUBLE_EQ(b.wait, 50e-9);
  EXPECT_DOUBLE_EQ(b.bubble, 100e-9);
  EXPECT_DOUBLE_EQ(b.total(), 300e-9);  // the parts sum to the span
  // Over two steps, each part is per step: half.
  EXPECT_DOUBLE_EQ(analysis::sweep_breakdown(3, 1, iv, 300, 2).compute, 50e-9);
}

TEST(Breakdown, MeanIsPartByPart) {
  analysis::RankBreakdown a, b;
  a.compute = 1.0;
  a.dp = 0.5;
  b.compute = 3.0;
  b.bubble = 1.0;
  const analysis::RankBreakdown m = analysis::mean_breakdown({a, b});
  EXPECT_EQ(m.rank, -1);
  EXPECT_DOUBLE_EQ(m.compute, 2.0);
  EXPECT_DOUBLE_EQ(m.dp, 0.25);
  EXPECT_DOUBLE_EQ(m.bubble, 0.5);
  EXPECT_DOUBLE_EQ(m.total(), 0.5 * (a.total() + b.total()));
  EXPECT_DOUBLE_EQ(analysis::mean_breakdown({}).total(), 0.0);
}

TEST(Breakdown, TransferPartByStream) {
  EXPECT_EQ(analysis::transfer_part(Stream::kTp), Part::kTp);
  EXPECT_EQ(analysis::transfer_part(Stream::kPpRecv), Part::kPp);
  EXPECT_EQ(analysis::transfer_part(Stream::kDp), Part::kDp);
}

}  // namespace
}  // namespace stepcast
