// Event engine speed (issue 3 targets, one core): Llama-3-405B on 16,384 H100
// (TP8 PP16 DP128, interleaved, 2,048 x 8,192-token sequences): representative mode
// < 100 ms, full mode < 10 s and < 4 GiB. Results and commands in docs/performance.md.
#include <benchmark/benchmark.h>

#include <stdexcept>
#include <string>

#include "stepcast/models/lower.h"
#include "stepcast/models/scenario.h"
#include "stepcast/analysis/breakdown.h"
#include "stepcast/sim/backend.h"
#include "stepcast/sim/engine.h"
#include "stepcast/sim/run.h"

namespace {

stepcast::Scenario load(const std::string& path) {
  auto s = stepcast::load_scenario_file(path);
  if (!s.ok()) throw std::runtime_error(s.error().message);
  return *s;
}

const std::string k405b = std::string(STEPCAST_SOURCE_DIR) + "/bench/scenarios/llama3-405b-16384xh100.json";
const std::string kGpt3Simgrid =
    std::string(STEPCAST_SOURCE_DIR) + "/bench/scenarios/gpt3-175b-1024xh100-simgrid.json";
const std::string k70b = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json";

void simulate(benchmark::State& state, const std::string& path, bool full) {
  const stepcast::Scenario s = load(path);
  std::uint64_t events = 0;
  for (auto _ : state) {
    stepcast::sim::RunOptions opt;
    opt.full = full;
    auto r = stepcast::sim::run_scenario(s, opt);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(r->summary.step_time_s);
    events += r->out.events;
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

// Issue 4 target: GPT-3 175B, TP8 PP8 DP16 on 1,024 GPUs, one step with the SimGrid backend
// (every rank simulated), < 30 s on one core.
void BM_Simulate_Gpt3_175B_1024xH100_Simgrid(benchmark::State& state) { simulate(state, kGpt3Simgrid, true); }
BENCHMARK(BM_Simulate_Gpt3_175B_1024xH100_Simgrid)->Unit(benchmark::kSecond)->Iterations(1);
