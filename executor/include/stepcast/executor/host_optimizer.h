// The host's optimizer step under optimizer offload, run for real (docs/executor.md "Optimizer
// offload"): fp32 weights, gradients and moments in host memory, updated in place, and the
// 16-bit (bf16) copy of the weights that goes back to the GPU, as ZeRO-Offload's CPU Adam and
// Megatron-Core's CPU optimizer keep them. Per parameter it moves the bytes the cost model
// counts (layer_cost.h host_optimizer_bytes_per_param): AdamW reads 16 and writes 12 + 2,
// SGD with momentum reads 12 and writes 8 + 2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace stepcast::exec {

struct AdamParams {
  float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
};
struct SgdParams {
  float lr = 1e-4f, momentum = 0.9f, weight_decay = 0.01f;
};

// One AdamW update (decoupled weight decay) at step t >= 1 of every element, and the
// weights' bf16 copy (round to nearest even). All spans have w.size() elements.
void adam_update(std::span<float> w, std::span<const float> g, std::span<float> m, std::span<float> v,
                 std::span<std::uint16_t> w16, const AdamParams& a, std::int64_t t);
// One SGD-with-momentum update (m = mu m + g + wd w; w -= lr m) and the bf16 copy.
void sgd_update(std::span<float> w, std::span<const float> g, std::span<float> m, std::span<std::uint16_t> w16,
                const SgdParams& s);
// The bf16 nearest to `x` (round to nearest even; x finite).
std::uint16_t to_bf16(float x);

// The step over a rank's offloaded parameters. The state lives in a working set of at most
// `max_elements` parameters; a step over more passes over it again, so the memory traffic
// is the full count's without holding a large model's states.
class HostOptimizer {
 public:
  explicit HostOptimizer(int threads = 1, std::size_t max_elements = std::size_t{1} << 24);
  // One step of Adam (else SGD with momentum) over `elements` parameters, on `threads`
  // host threads.
  void step(double elements, bool adam);
  std::int64_t steps() const { return t_; }
  double elements_updated() const { return updated_; }  // over all steps
  std::size_t working_set() const { return w_.size(); }
  std::span<const float> weights() const { return w_; }
  int threads() const { return threads_; }

 private:
  void pass(std::size_t n, bool adam);
  int threads_;
  std::size_t max_elements_;
  std::int64_t t_ = 0;
  double updated_ = 0;
  std::vector<float> w_, g_, m_, v_;
  std::vector<std::uint16_t> w16_;
};

}  // namespace stepcast::exec
