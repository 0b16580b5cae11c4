// Planner speed (issue 7 targets): >= 100,000 closed-form layout evaluations per second
// on one core, and the full Llama-3-405B search on 16,384 H100 (every layout, the goodput
// of each, the top 20 re-simulated by the engine) in < 10 s on 2 cores. Results and
// commands in docs/performance.md.
#include <benchmark/benchmark.h>

#include <stdexcept>
#include <string>

#include "stepcast/models/scenario.h"
#include "stepcast/planner/planner.h"

namespace {

stepcast::Scenario load(const std::string& name) {
  stepcast::LoadOptions o;
  o.plan_template = true;
  auto s = stepcast::load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/" + name, o);
  if (!s.ok()) throw std::runtime_error(s.error().message);
  return *s;
}

const char* k70b = "scenarios/plan/llama3-70b-64xh100.json";
const char* k405b = "scenarios/plan/llama3-405b-16384xh100.json";
const char* k70b_fit = "bench/scenarios/llama3-70b-64xh100-fit.json";
const char* k70b_fit_methods = "bench/scenarios/llama3-70b-64xh100-fit-methods.json";

// The search with `threads` threads and `top_k` engine runs. Counters: closed-form
// evaluations (layouts that reached the memory check: estimate() plus, for those that fit,
// the checkpoint cost and goodput) and layouts of the space (most are pruned in groups
// before any evaluation), per second of wall time.
void plan(benchmark::State& state, const char* name, int threads, int top_k) {
  const stepcast::Scenario s = load(name);
  stepcast::planner::PlanOptions o;
  o.threads = threads;
  o.top_k = top_k;
  std::int64_t evaluations = 0, layouts = 0;
  for (auto _ : state) {
    auto r = stepcast::planner::search_layouts(s, o);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(r->ranked.data());
    evaluations += r->counts.estimated;
    layouts += r->counts.size;
  }
  state.counters["evaluations_per_s"] =
      benchmark::Counter(static_cast<double>(evaluations), benchmark::Counter::kIsRate);
  state.counters["layouts_per_s"] = benchmark::Counter(static_cast<double>(layouts), benchmark::Counter::kIsRate);
}

// Closed form only, one thread: the per-core evaluation rate.
void BM_PlanClosedForm_Llama3_70B_64xH100(benchmark::State& state) { plan(state, k70b, 1, 0); }
BENCHMARK(BM_PlanClosedForm_Llama3_70B_64xH100)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same with recompute none/full and counts [0, "fit"]: each full layout that reaches
// the memory check also bisects for its fewest recomputed layers (estimate() calls not
// counted among the evaluations).
void BM_PlanClosedForm_Llama3_70B_64xH100_FitRecompute(benchmark::State& state) { plan(state, k70b_fit, 1, 0); }
BENCHMARK(BM_PlanClosedForm_Llama3_70B_64xH100_FitRecompute)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same with search.recompute_method ["block", "uniform"]: a full layout whose every layer
// alone does not fit also scans its group sizes for the one that holds the least.
void BM_PlanClosedForm_Llama3_70B_64xH100_FitMethods(benchmark::State& state) { plan(state, k70b_fit_methods, 1, 0); }
BENCHMARK(BM_PlanClosedForm_Llama3_70B_64xH100_FitMethods)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PlanClosedForm_Llama3_405B_16384xH100(benchmark::State& state) { plan(state, k405b, 1, 0); }
BENCHMARK(BM_PlanClosedForm_Llama3_405B_16384xH100)->Unit(benchmark::kMillisecond)->UseRealTime();

// The whole search as `stepcast plan` runs it on 2 cores: closed form, goodput, the top 20
// re-simulated (and any that the engine finds too big replaced), re-ranked, Pareto front.
void BM_Plan_Llama3_405B_16384xH100_Top20_2Threads(benchmark::State& state) { plan(state, k405b, 2, 20); }
BENCHMARK(BM_Plan_Llama3_405B_16384xH100_Top20_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Plan_Llama3_70B_64xH100_Top20_2Threads(benchmark::State& state) { plan(state, k70b, 2, 20); }
BENCHMARK(BM_Plan_Llama3_70B_64xH100_Top20_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
