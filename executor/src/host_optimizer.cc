#include "stepcast/executor/host_optimizer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <thread>

namespace stepcast::exec {

std::uint16_t to_bf16(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

void adam_update(std::span<float> w, std::span<const float> g, std::span<float> m, std::span<float> v,
                 std::span<std::uint16_t> w16, const AdamParams& a, std::int64_t t) {
  const double td = static_cast<double>(std::max<std::int64_t>(1, t));
  // The bias corrections folded into the step size and the denominator (as PyTorch's AdamW).
  const auto c1 = static_cast<float>(1.0 - std::pow(static_cast<double>(a.beta1), td));
  const auto c2 = static_cast<float>(1.0 - std::pow(static_cast<double>(a.beta2), td));
  const float step = a.lr / c1, inv_sqrt_c2 = 1.0f / std::sqrt(c2), decay = 1.0f - a.lr * a.weight_decay;
  const float b1 = a.beta1, b2 = a.beta2, nb1 = 1.0f - a.beta1, nb2 = 1.0f - a.beta2;
  const std::size_t n = w.size();
  for (std::size_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = b1 * m[i] + nb1 * gi;
    const float vi = b2 * v[i] + nb2 * gi * gi;
    const float wi = w[i] * decay - step * mi / (std::sqrt(vi) * inv_sqrt_c2 + a.eps);
    m[i] = mi;
    v[i] = vi;
    w[i] = wi;
    w16[i] = to_bf16(wi);
  }
}

void sgd_update(std::span<float> w, std::span<const float> g, std::span<float> m, std::span<std::uint16_t> w16,
                const SgdParams& s) {
  const std::size_t n = w.size();
  for (std::size_t i = 0; i < n; ++i) {
    const float mi = s.momentum * m[i] + g[i] + s.weight_decay * w[i];
    const float wi = w[i] - s.lr * mi;
    m[i] = mi;
    w[i] = wi;
    w16[i] = to_bf16(wi);
  }
}

HostOptimizer::HostOptimizer(int threads, std::size_t max_elements)
    : threads_(std::max(1, threads)), max_elements_(std::max<std::size_t>(1, max_elements)) {}

void HostOptimizer::pass(std::size_t n, bool adam) {
  auto run = [&](std::size_t begin, std::size_t end) {
    const std::size_t k = end - begin;
    std::span<float> w(w_.data() + begin, k), m(m_.data() + begin, k);
    std::span<const float> g(g_.data() + begin, k);
    std::span<std::uint16_t> w16(w16_.data() + begin, k);
    if (adam) {
      adam_update(w, g, m, std::span<float>(v_.data() + begin, k), w16, AdamParams{}, t_);
    } else {
      sgd_update(w, g, m, w16, SgdParams{});
    }
  };
  // Threads only where each gets a worthwhile slice (64 Ki parameters).
  const std::size_t threads =
      std::min<std::size_t>(static_cast<std::size_t>(threads_), std::max<std::size_t>(1, n >> 16));
  if (threads <= 1) {
    run(0, n);
    return;
  }
  std::vector<std::jthread> pool;
  pool.reserve(threads - 1);
  const std::size_t slice = (n + threads - 1) / threads;
  for (std::size_t i = 1; i < threads; ++i) {
    const std::size_t begin = std::min(n, i * slice), end = std::min(n, begin + slice);
    if (begin < end) pool.emplace_back(run, begin, end);
  }
  run(0, std::min(n, slice));
}

void HostOptimizer::step(double elements, bool adam) {
  if (!(elements >= 1)) return;
  const auto total = static_cast<std::size_t>(std::llround(elements));
  const std::size_t ws = std::min(total, max_elements_);
  if (w_.size() < ws) {
    w_.assign(ws, 0.01f);
    g_.assign(ws, 1e-3f);
    m_.assign(ws, 0.0f);
    v_.assign(ws, 0.0f);
    w16_.assign(ws, 0);
  }
  ++t_;
  for (std::size_t done = 0; done < total;) {
    const std::size_t n = std::min(ws, total - done);
    pass(n, adam);
    done += n;
    updated_ += static_cast<double>(n);
  }
}

}  // namespace stepcast::exec
