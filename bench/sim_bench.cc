// Event engine speed (issue 3 targets, one core): Llama-3-405B on 16,384 H100
// (TP8 PP16 DP128, interleaved, 2,048 x 8,192-token sequences): representative mode
// < 100 ms, full mode < 10 s and < 4 GiB. Results and commands in docs/performance.md.
#include <benchmark/benchmark.h>

#include <stdexcept>
#include <string>

#include "stepcast/models/lower.h"
#include "stepcast/models/scenario.h"
#include "stepcast/sim/analysis.h"
#include "stepcast/sim/backend.h"
#include "stepcast/sim/engine.h"

namespace {

stepcast::Scenario load(const std::string& path) {
  auto s = stepcast::load_scenario_file(path);
  if (!s.ok()) throw std::runtime_error(s.error().message);
  return *s;
}

const std::string k405b = std::string(STEPCAST_SOURCE_DIR) + "/bench/scenarios/llama3-405b-16384xh100.json";
const std::string k70b = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json";

void simulate(benchmark::State& state, const std::string& path, bool full) {
  const stepcast::Scenario s = load(path);
  std::uint64_t events = 0;
  for (auto _ : state) {
    const stepcast::Program program = stepcast::lower(s);
    stepcast::sim::AnalyticBackend backend(s.cluster);
    stepcast::sim::EngineOptions opt;
    opt.full = full;
    opt.record_memory = false;
    const stepcast::sim::SimOutput out = stepcast::sim::simulate(program, backend, opt);
    const stepcast::sim::SimSummary sum = stepcast::sim::analyze(program, out.timeline);
    benchmark::DoNotOptimize(sum.step_time_s);
    events += out.events;
  }
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}

// Lowering + engine + analysis, as `stepcast simulate` runs them.
void BM_Simulate_Llama3_70B_64xH100_Representative(benchmark::State& state) { simulate(state, k70b, false); }
BENCHMARK(BM_Simulate_Llama3_70B_64xH100_Representative)->Unit(benchmark::kMillisecond);

void BM_Simulate_Llama3_70B_64xH100_Full(benchmark::State& state) { simulate(state, k70b, true); }
BENCHMARK(BM_Simulate_Llama3_70B_64xH100_Full)->Unit(benchmark::kMillisecond);

void BM_Simulate_Llama3_405B_16384xH100_Representative(benchmark::State& state) { simulate(state, k405b, false); }
BENCHMARK(BM_Simulate_Llama3_405B_16384xH100_Representative)->Unit(benchmark::kMillisecond);

void BM_Simulate_Llama3_405B_16384xH100_Full(benchmark::State& state) { simulate(state, k405b, true); }
BENCHMARK(BM_Simulate_Llama3_405B_16384xH100_Full)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
