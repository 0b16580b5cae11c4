// The trace reader (analysis/trace.h). Oracles: hand-written trace text whose every field
// is known, and the reader's messages, asserted whole (path and reason).
#include "stepcast/analysis/trace.h"

#include "stepcast/models/timeline.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace stepcast {
namespace {

std::string trace_error(const std::string& text) {
  auto r = analysis::read_trace(text);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.error().message;
}

const std::string kMeta =
    R"({"ph":"M","name":"stepcast","pid":0,"args":{"format":1,"world":4,"tp":1,"cp":1,"dp":4,"pp":1,"ep":1,)"
    R"("gpus_per_node":4,"order":[0,1,2,3],"step_end_us":[100.000]}})";

std::string with_event(const std::string& event) {
  return R"({"traceEvents":[)" + kMeta + "," + event + "]}";
}

TEST(ReadTrace, RejectsWhatIsNotAStepcastTraceNamingTheField) {
  EXPECT_EQ(trace_error(R"({"traceEvents":[]})"),
            "not a stepcast trace: no {\"ph\":\"M\",\"name\":\"stepcast\"} metadata event before its slices (write "
            "traces with `stepcast simulate --trace FILE`)");
  EXPECT_EQ(trace_error(R"({"model": "llama3-8b"})"), "not a stepcast trace: no \"traceEvents\" list");
  EXPECT_EQ(trace_error(R"([1, 2])"), "not a stepcast trace: expected a JSON object with \"traceEvents\", got [1,2]");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + kMeta + ",17]}"),
            "traceEvents[1]: expected an event object, got 17");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"F mb0 L0 attn","pid":1,"tid":0,"ts":1,"dur":2,)"
                                   R"("args":{"step":"x","kind":"compute","class":"gemm"}})")),
            "traceEvents[1].args.step: expected an integer, got \"x\"");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"F","pid":9,"tid":0,"ts":1,"dur":2,)"
                                   R"("args":{"step":0,"kind":"compute","class":"gemm"}})")),
            "traceEvents[1].pid: rank 9 is outside the trace's world (4 ranks)");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"dp.ar","pid":1,"tid":4,"ts":1,"dur":2,)"
                                   R"("args":{"step":0,"kind":"collective","bytes":4,"wait_us":0,"group":"dq",)"
                                   R"("collective":"all_reduce","group_root":0,"seq":1}})")),
            "traceEvents[1].args.group: \"dq\" is not one of \"tp\", \"cp\", \"ep\", \"dp\", \"edp\", \"pp\", \"etp\", "
            "\"etpep\", \"world\"");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"F","pid":1,"tid":0,"ts":1,"dur":2,)"
                                   R"("args":{"step":3,"kind":"compute","class":"gemm"}})")),
            "traceEvents[1].args.step: 3 is beyond the trace's 1 steps (step_end_us)");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"F","pid":1,"tid":0,"ts":1,)"
                                   R"("args":{"step":0,"kind":"compute","class":"gemm"}})")),
            "traceEvents[1].dur: missing (required)");
  std::string meta2 = kMeta;
  meta2.replace(meta2.find("\"format\":1"), 10, "\"format\":2");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + meta2 + "]}"),
            "traceEvents[0].args.format: 2 is not supported (this stepcast reads format 1)");
  std::string meta3 = kMeta;
  meta3.replace(meta3.find("\"world\":4"), 9, "\"world\":6");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + meta3 + "]}"),
            "traceEvents[0].args.world: 6 is not tp x cp x dp x pp = 4");
  std::string meta4 = kMeta;
  meta4.replace(meta4.find("[100.000]"), 9, "[]");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + meta4 + "]}"),
            "traceEvents[0].args.step_end_us: expected a list of step end times (one per step), got []");
}

TEST(ReadTrace, TellsTracesFromScenarios) {
  EXPECT_TRUE(analysis::looks_like_trace(R"({"displayTimeUnit":"ns","traceEvents":[]})"));
  EXPECT_FALSE(analysis::looks_like_trace(R"({"model": "llama3-8b", "plan": {}})"));
}


// A trace with one rank's compute op and one DP all-reduce, written as the writer does
// (times in microseconds with nanosecond decimals), plus keys the reader skips.
const std::string kSmall = R"j({"displayTimeUnit":"ns",
  // comments are allowed, as in every input file
  "traceEvents":[)j" + kMeta + R"j(,
  {"ph":"M","name":"process_name","pid":2,"args":{"name":"rank 2 (stage 0, node 0)"}},
  {"ph":"X","name":"F mb0","pid":2,"tid":0,"ts":1.500,"dur":20.250,"cat":"x",
   "args":{"step":0,"kind":"compute","class":"attention","flops":12,"layer":0}},
  {"ph":"X","name":"wait: dp.ar","pid":2,"tid":4,"ts":21.750,"dur":3.000,"args":{"step":0,"kind":"collective"}},
  {"ph":"X","name":"dp.ar","pid":2,"tid":4,"ts":24.750,"dur":70.001,
   "args":{"step":0,"kind":"collective","bytes":4096,"wait_us":3.000,"group":"dp","collective":"all_reduce",
           "group_root":0,"seq":1}},
  {"ph":"C","name":"memory GiB","pid":2,"ts":1,"args":{"GiB":1.5}}
]})j";

TEST(ReadTrace, ReadsEveryFieldToTheNanosecond) {
  auto r = analysis::read_trace(kSmall);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const analysis::Trace& t = *r;
  EXPECT_EQ(t.placement.world(), 4);
  EXPECT_EQ(t.step_end_ns, (std::vector<std::int64_t>{100'000}));
  ASSERT_EQ(t.ranks.size(), 1u);  // only rank 2 is present
  EXPECT_EQ(t.ranks[0].rank, 2);
  ASSERT_EQ(t.ranks[0].ops.size(), 2u);  // the "wait:" slice and the counter are skipped
  const analysis::TraceOp& f = t.ranks[0].ops[0];
  EXPECT_EQ(t.names[f.name], "F mb0");
  EXPECT_EQ(f.kind, analysis::TraceOpKind::kCompute);
  EXPECT_EQ(f.cclass, ComputeClass::kAttention);
  EXPECT_EQ(f.post_ns, 1'500);
  EXPECT_EQ(f.begin_ns, 1'500);
  EXPECT_EQ(f.end_ns, 21'750);
  const analysis::TraceOp& a = t.ranks[0].ops[1];
  EXPECT_EQ(a.kind, analysis::TraceOpKind::kCollective);
  EXPECT_EQ(a.stream, Stream::kDp);
  EXPECT_EQ(a.group, GroupKind::kDp);
  EXPECT_EQ(a.coll, CollKind::kAllReduce);
  EXPECT_EQ(a.seq, 1u);
  EXPECT_EQ(a.bytes, 4096.0);
  EXPECT_EQ(a.post_ns, 21'750);  // ts - wait_us
  EXPECT_EQ(a.begin_ns, 24'750);
  EXPECT_EQ(a.end_ns, 94'751);
}

TEST(ReadTrace, AFoldedExpertLayoutRoundTrips) {
  // tp 2 x dp 4 with ep 8 folded over the stage (etp 1): the trace names etp, and the groups
  // read back are the writer's (EP {0..7}); an unfolded trace has no etp key.
  Program prog;
  prog.placement = Placement{2, 1, 4, 1, 8, 8, {0, 1, 2, 3}, 1};
  Timeline tl;
  tl.step_end = {SimTime::from_s(0.001)};
  const std::string text = chrome_trace_json(prog, tl);
  EXPECT_NE(text.find(R"("ep":8,"etp":1,)"), std::string::npos);
  auto r = analysis::read_trace(text);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->placement.folded());
  EXPECT_EQ(r->placement.group_root(GroupKind::kEp, 7), 0);
  EXPECT_EQ(r->placement.group_size(GroupKind::kEdp), 1);
  // An expert-TP group of its own (etp 4 > tp 2, ep 2): the ETP groups read back are the
  // stage's 4 innermost ranks.
  prog.placement.etp = 4;
  prog.placement.ep = 2;
  auto e = analysis::read_trace(chrome_trace_json(prog, tl));
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->placement.group_root(GroupKind::kEtp, 6), 4);
  EXPECT_EQ(e->placement.group_size(GroupKind::kEtp), 4);
  EXPECT_EQ(e->placement.group_root(GroupKind::kEp, 6), 2);
  prog.placement.etp = 0;
  prog.placement.ep = 4;
  EXPECT_EQ(chrome_trace_json(prog, tl).find("etp"), std::string::npos);
}

// --- bad input: each message asserted whole ----------------------------------------------

TEST(ReadTraceBadInput, ATruncatedFileNamesTheEventItEndsIn) {
  const std::string cut = kSmall.substr(0, kSmall.find("\"group\":\"dp\""));
  // The file ends after "wait_us" of the fifth event (traceEvents[4]), where a key should follow.
  EXPECT_EQ(trace_error(cut),
            "traceEvents[4].args.wait_us: invalid JSON: parse error at line 9, column 70: syntax error while parsing "
            "object key - unexpected end of input; expected string literal");
  EXPECT_EQ(trace_error(""), "empty document: expected a JSON object");
}

TEST(ReadTraceBadInput, WrongTypesNameTheField) {
  const std::string x = R"({"ph":"X","name":"F","pid":1,"tid":0,)";
  EXPECT_EQ(trace_error(with_event(x + R"("ts":"1","dur":2,"args":{"step":0,"kind":"compute","class":"gemm"}})")),
            "traceEvents[1].ts: expected a number, got \"1\"");
  EXPECT_EQ(trace_error(with_event(x + R"("ts":1,"dur":-2,"args":{"step":0,"kind":"compute","class":"gemm"}})")),
            "traceEvents[1].dur: -2 is out of range (0 to 1000000000000)");
  EXPECT_EQ(trace_error(with_event(x + R"("ts":1,"dur":2,"args":[]})")), "traceEvents[1].args: expected an object, got []");
  EXPECT_EQ(trace_error(with_event(x + R"("ts":1,"dur":2})")), "traceEvents[1].args: missing (required)");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"F","pid":1.5,"tid":0,"ts":1,"dur":2,"args":{}})")),
            "traceEvents[1].pid: expected an integer, got 1.5");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"F","pid":1,"tid":9,"ts":1,"dur":2,"args":{}})")),
            "traceEvents[1].tid: 9 is out of range (0 to 8)");
  EXPECT_EQ(trace_error(with_event(R"({"ph":3})")), "traceEvents[1].ph: expected a string, got 3");
  EXPECT_EQ(trace_error(with_event(x + R"("ts":1,"dur":2,"args":{"step":0,"kind":"compute","class":"gemmm"}})")),
            "traceEvents[1].args.class: \"gemmm\" is not one of \"gemm\", \"attention\", \"elementwise\", "
            "\"optimizer\", \"input\", \"host\", \"interference\", \"host_optimizer\"");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"dp.ar","pid":1,"tid":4,"ts":1,"dur":2,)"
                                   R"("args":{"step":0,"kind":"collective","bytes":-4,"wait_us":0}})")),
            "traceEvents[1].args.bytes: -4 is out of range (0 to 1e+18)");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"dp.ar","pid":1,"tid":4,"ts":1,"dur":2,)"
                                   R"("args":{"step":0,"kind":"collective","bytes":4,"wait_us":0,"group":"dp",)"
                                   R"("collective":"all_reduce","group_root":0,"seq":0}})")),
            "traceEvents[1].args.seq: 0 is out of range (1 to 4000000000)");
}

TEST(ReadTraceBadInput, NestingNulBytesAndRepeatedKeysAreRefused) {
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","args":)" + std::string(70, '[') + std::string(70, ']') + "}")),
            "invalid JSON: nesting deeper than 64 levels at line 1");
  std::string nul = with_event(R"({"ph":"X","name":"F"})");
  nul[nul.size() - 5] = '\0';
  EXPECT_EQ(trace_error(nul), "invalid JSON: NUL byte at line 1, column 197 (is this a binary file?)");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"F","ph":"M"})")),
            "traceEvents[1].ph: duplicate key (each key may appear once)");
}

TEST(ReadTraceBadInput, MissingOrBrokenMetadataIsNamed) {
  std::string no_gpn = kMeta;
  no_gpn.replace(no_gpn.find("\"gpus_per_node\":4,"), 18, "");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + no_gpn + "]}"), "traceEvents[0].args.gpus_per_node: missing (required)");
  std::string bad_order = kMeta;
  bad_order.replace(bad_order.find("[0,1,2,3]"), 9, "[0,1,1,3]");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + bad_order + "]}"),
            "traceEvents[0].args.order: expected a permutation of [0, 1, 2, 3], got [0,1,1,3]");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + kMeta + "," + kMeta + "]}"),
            "traceEvents[1]: a second stepcast metadata event (the first is traceEvents[0])");
  std::string huge = kMeta;
  huge.replace(huge.find("\"tp\":1"), 6, "\"tp\":100000000");
  huge.replace(huge.find("\"cp\":1"), 6, "\"cp\":100000000");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + huge + "]}"),
            "traceEvents[0].args.world: 4 is not tp x cp x dp x pp (more than 100000000)");
  // Expert groups: etp x ep must divide the stage's ranks (here 4 of tp 1 x dp 4).
  std::string ep8 = kMeta;
  ep8.replace(ep8.find("\"ep\":1"), 6, "\"ep\":8");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + ep8 + "]}"),
            "traceEvents[0].args.ep: 8 does not divide dp x cp (4 x 1): experts are sharded across data-parallel ranks");
  std::string etp = kMeta;
  etp.replace(etp.find("\"ep\":1"), 6, "\"ep\":1,\"etp\":3");
  EXPECT_EQ(
      trace_error(R"({"traceEvents":[)" + etp + "]}"),
      "traceEvents[0].args.ep: etp x ep = 3 x 1 does not divide tp x cp x dp = 4 (the ranks of a pipeline stage)");
  // Events without the metadata event: not a trace of ours (a Perfetto or PyTorch trace).
  EXPECT_EQ(trace_error(R"({"traceEvents":[{"ph":"X","name":"F","pid":1,"tid":0,"ts":1,"dur":2,"args":{}}]})"),
            "not a stepcast trace: no {\"ph\":\"M\",\"name\":\"stepcast\"} metadata event before its slices (write "
            "traces with `stepcast simulate --trace FILE`)");
}

}  // namespace
}  // namespace stepcast
