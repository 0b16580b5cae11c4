#include "stepcast/executor/cpu_device.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <Eigen/Core>

#include <fmt/format.h>
#include "cpu_kernels.h"
#include "stepcast/executor/host_optimizer.h"

namespace stepcast::exec {

const char* to_string(Dtype t) {
  switch (t) {
    case Dtype::kF32: return "f32";
    case Dtype::kBf16: return "bf16";
    case Dtype::kFp8: return "fp8";
  }
  return "?";
}

std::size_t dtype_bytes(Dtype t) {
  switch (t) {
    case Dtype::kF32: return 4;
    case Dtype::kBf16: return 2;
    case Dtype::kFp8: return 1;
  }
  return 4;
}

double host_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

class DoneEvent final : public Event {
 public:
  explicit DoneEvent(double t) : t_(t) {}
  bool done() override { return true; }
  void wait() override {}
  double time_s() override { return t_; }

 private:
  double t_;
};

using cpu::Mat;
using cpu::matmul;

class CpuDevice final : public Device {
 public:
  std::string describe() const override {
    return fmt::format("cpu: {} (Eigen {}.{}.{}, f32, 1 thread per rank)", cpu_model(), EIGEN_WORLD_VERSION,
                       EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION);
  }
  Dtype compute_dtype() const override { return Dtype::kF32; }
  Dtype comm_dtype() const override { return Dtype::kF32; }
  double now_s() override { return host_now_s(); }
  EventPtr record(Stream) override { return done_event(host_now_s()); }
  void wait(Stream, const EventPtr& e) override {
    if (e) e->wait();
  }

  void gemm(Stream, const GemmShape& g) override {
    Operands& o = operands(g.m, g.n, g.k);
    for (std::int64_t b = 0; b < g.batch; ++b) matmul(o.a, o.b, o.c);
    sink_ = sink_ + o.c(0, 0);
  }

  void attention(Stream, const AttentionShape& a) override {
    Operands& qk = operands(a.sq, a.sk, a.d);   // Q (sq x d) . K^T (d x sk)
    Operands& pv = operands(a.sq, a.d, a.sk);   // P (sq x sk) . V (sk x d)
    for (std::int64_t b = 0; b < a.batch; ++b) {
      matmul(qk.a, qk.b, qk.c);
      // Softmax-like row pass over the scores: read, scale, write.
      qk.c.array() = (qk.c.array() - qk.c(0, 0)) * 0.125f;
      matmul(qk.c, pv.b, pv.c);
    }
    sink_ = sink_ + pv.c(0, 0);
  }

  void elementwise(Stream, double bytes) override {
    // y = 0.5 y + x: reads 8 and writes 4 bytes per element.
    const auto n = static_cast<Eigen::Index>(std::max(1.0, bytes / 12.0));
    if (x_.size() < n) {
      x_ = Eigen::VectorXf::Constant(n, 1.0f);
      y_ = Eigen::VectorXf::Zero(n);
    }
    y_.head(n) = 0.5f * y_.head(n) + x_.head(n);
    sink_ = sink_ + y_(0);
  }

  void host_copy(Stream, double bytes, bool to_host) override {
    // Ranks are processes on one host: a copy between two buffers of the rank's memory
    // stands for the transfer, in passes of at most kCopyChunk bytes.
    constexpr std::size_t kCopyChunk = 64u << 20;
    auto left = static_cast<std::size_t>(std::max(0.0, bytes));
    const std::size_t chunk = std::min(left, kCopyChunk);
    if (device_side_.size() < chunk) {
      device_side_.assign(chunk, 1);
      host_side_.assign(chunk, 2);
    }
    while (left > 0) {
      const std::size_t n = std::min(left, chunk);
      if (to_host) {
        std::memcpy(host_side_.data(), device_side_.data(), n);
      } else {
        std::memcpy(device_side_.data(), host_side_.data(), n);
      }
      left -= n;
    }
    sink_ = sink_ + static_cast<float>(host_side_.empty() ? 0 : host_side_[0]);
  }

  void host_optimizer(Stream, double elements, bool adam) override { host_opt_.step(elements, adam); }

  Buffer alloc(std::size_t count) override {
    Buffer b;
    b.count = count;
    b.dtype = Dtype::kF32;
    b.data = new float[count]();
    return b;
  }
  void release(Buffer& b) override {
    delete[] static_cast<float*>(b.data);
    b.data = nullptr;
    b.count = 0;
  }
  void* alloc_bytes(double) override { return nullptr; }
  void free_bytes(void*) override {}
  void upload(const Buffer& b, std::span<const float> host) override {
    std::copy_n(host.data(), std::min(host.size(), b.count), static_cast<float*>(b.data));
  }
  void download(const Buffer& b, std::span<float> host) override {
    std::copy_n(static_cast<const float*>(b.data), std::min(host.size(), b.count), host.data());
  }
  void synchronize() override {}
  double peak_memory_bytes() override { return 0; }
  void reset_peak_memory() override {}

 private:
  struct Operands {
    Mat a, b, c;
  };
  Operands& operands(std::int64_t m, std::int64_t n, std::int64_t k) {
    auto [it, added] = cache_.try_emplace(std::make_tuple(m, n, k));
    if (added) {
      it->second.a = Mat::Constant(m, k, 0.01f);
      it->second.b = Mat::Constant(k, n, 0.02f);
      it->second.c = Mat::Zero(m, n);
    }
    return it->second;
  }

  static std::string cpu_model() {
    std::FILE* f = std::fopen("/proc/cpuinfo", "r");
    if (!f) return "unknown cpu";
    char line[512];
    std::string model = "unknown cpu";
    while (std::fgets(line, sizeof line, f)) {
      std::string s(line);
      if (s.rfind("model name", 0) == 0) {
        const auto colon = s.find(':');
        model = s.substr(colon + 2);
        while (!model.empty() && (model.back() == '\n' || model.back() == ' ')) model.pop_back();
        break;
      }
    }
    std::fclose(f);
    return model;
  }

  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, Operands> cache_;
  Eigen::VectorXf x_, y_;
  std::vector<unsigned char> device_side_, host_side_;  // host_copy
  HostOptimizer host_opt_{1};                           // one thread per rank, as the GEMMs
  volatile float sink_ = 0;
};

}  // namespace

EventPtr done_event(double t) { return std::make_shared<DoneEvent>(t); }

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

}  // namespace stepcast::exec
