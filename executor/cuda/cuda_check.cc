#include "cuda_check.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <stdexcept>
#include <string_view>

namespace stepcast::exec::cuda_detail {
namespace {

std::string_view base_name(const char* path) {
  const std::string_view p(path);
  const auto slash = p.find_last_of('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}

[[noreturn]] void fail(const ErrorContext& ctx, const char* call, const char* file, int line, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {} failed at {}:{}: {}", ctx.where(), call, base_name(file), line, what));
}

}  // namespace

std::string ErrorContext::where() const {
  const std::string r = rank >= 0 ? fmt::format("rank {}", rank) : std::string("rank ?");
  const std::string g = gpu >= 0 ? fmt::format(" (GPU {})", gpu) : std::string();
  return fmt::format("{}{} on {}", r, g, host.empty() ? std::string("?") : host);
}

std::string host_name() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) return "?";
  return std::string(buf.data());
}

void throw_error(const ErrorContext& ctx, const char* call, const char* file, int line, cudaError_t e) {
  fail(ctx, call, file, line, fmt::format("{} [{}]", cudaGetErrorString(e), cudaGetErrorName(e)));
}

void throw_error(const ErrorContext& ctx, const char* call, const char* file, int line, cublasStatus_t e) {
  fail(ctx, call, file, line, fmt::format("{} [status {}]", cublasLtGetStatusString(e), static_cast<int>(e)));
}

void throw_error(const ErrorContext& ctx, const char* call, const char* file, int line, ncclResult_t e) {
  const char* last = ncclGetLastError(nullptr);
  std::string what = fmt::format("{} [ncclResult {}]", ncclGetErrorString(e), static_cast<int>(e));
  if (last != nullptr && *last != '\0') what += fmt::format("; last NCCL error: {}", last);
  what += " (rerun with NCCL_DEBUG=INFO for details)";
  fail(ctx, call, file, line, what);
}

}  // namespace stepcast::exec::cuda_detail
