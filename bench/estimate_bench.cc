// Closed-form evaluations per second on one core: the planner's fast path.
// Target (issue 2): >= 100,000 estimates/s per core. Results in docs/performance.md.
#include <benchmark/benchmark.h>

#include <string>

#include "stepcast/models/estimate.h"
#include "stepcast/models/scenario.h"

namespace {

stepcast::Scenario load(const std::string& text) {
  auto s = stepcast::parse_scenario(text);
  if (!s.ok()) throw std::runtime_error(s.error().message);
  return *s;
}

void run(benchmark::State& state, const std::string& text) {
  const stepcast::Scenario s = load(text);
  for (auto _ : state) {
    stepcast::Estimate e = stepcast::estimate(s);
    benchmark::DoNotOptimize(e.step_time_s);
  }
  state.SetItemsProcessed(state.iterations());
}

// The shipped scenario: Llama-3-70B, TP8 PP4 DP2 on 64 H100.
void BM_Estimate_Llama3_70B_64xH100(benchmark::State& state) {
  run(state, R"({"model":"llama3-70b","cluster":{"preset":"dgx-h100","nodes":8},
    "plan":{"tp":8,"pp":4,"dp":2,"sequence_parallel":true,"global_batch":64,"zero":1,
            "recompute":"selective"}})");
}
BENCHMARK(BM_Estimate_Llama3_70B_64xH100);

// The same with partial full recomputation (recompute_num_layers 5 of each stage's 20
// layers): the layers are priced twice, recomputing and kept (docs/model-reference.md §3.8).
void BM_Estimate_Llama3_70B_64xH100_BlockRecompute(benchmark::State& state) {
  run(state, R"({"model":"llama3-70b","cluster":{"preset":"dgx-h100","nodes":8},
    "plan":{"tp":8,"pp":4,"dp":2,"sequence_parallel":true,"global_batch":64,"zero":1,
            "recompute":"full","recompute_num_layers":5}})");
}
BENCHMARK(BM_Estimate_Llama3_70B_64xH100_BlockRecompute);

// Llama-3-405B as in its paper: TP8 PP16 DP128 on 16,384 H100 (uneven 126-layer split).
void BM_Estimate_Llama3_405B_16384xH100(benchmark::State& state) {
  run(state, R"({"model":"llama3-405b","cluster":{"preset":"dgx-h100","nodes":2048},
    "plan":{"tp":8,"pp":16,"dp":128,"sequence_parallel":true,"global_batch":2048,"zero":1}})");
}
BENCHMARK(BM_Estimate_Llama3_405B_16384xH100);

// DeepSeek-V3 (MLA + MoE) with EP: TP1... on 2,048 H800-class GPUs (here H100).
void BM_Estimate_DeepSeekV3_EP64(benchmark::State& state) {
  run(state, R"({"model":"deepseek-v3","cluster":{"preset":"dgx-h100","nodes":256},
    "plan":{"tp":1,"pp":16,"dp":128,"ep":64,"global_batch":15360,"zero":1,"precision":"fp8",
            "recompute":"full"}})");
}
BENCHMARK(BM_Estimate_DeepSeekV3_EP64);

// The same with DeepEP's dispatcher (docs/model-reference.md §5.11): the routing statistics
// of the router's 4 of 8 expert groups in each layer_comm.
void BM_Estimate_DeepSeekV3_EP64_DeepEP(benchmark::State& state) {
  run(state, R"({"model":"deepseek-v3","cluster":{"preset":"dgx-h100","nodes":256},
    "plan":{"tp":1,"pp":16,"dp":128,"ep":64,"global_batch":15360,"zero":1,"precision":"fp8",
            "recompute":"full","moe_dispatcher":"deepep"}})");
}
BENCHMARK(BM_Estimate_DeepSeekV3_EP64_DeepEP);

// GPT-3 175B on DeepSpeed's 2021 ZeRO-3 (stack deepspeed-zero-2021): the per-module fetch
// walks the coordinator over one microbatch's trace (96 layers: 1,160 module uses).
void BM_Estimate_Gpt3_175B_Zero3_DeepSpeed2021_384xA100(benchmark::State& state) {
  run(state, R"({"model":"gpt3-175b","cluster":{"preset":"dgx-a100","nodes":48},
    "plan":{"tp":1,"pp":1,"dp":384,"microbatch":4,"global_batch":1536,"zero":3,"precision":"fp16",
            "recompute":"full","grad_dtype":"bf16","stack":"deepspeed-zero-2021"}})");
}
BENCHMARK(BM_Estimate_Gpt3_175B_Zero3_DeepSpeed2021_384xA100);

}  // namespace
