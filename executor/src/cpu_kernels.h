// The cpu device's matrix products, in a translation unit of their own. They run Eigen's
// kernels on matrices the device allocates itself (cpu_device.cc), so the sanitized build
// compiles this file at -O2 without instrumentation (executor/CMakeLists.txt): under
// AddressSanitizer at -O1 Eigen's GEMM kernel ran 15x slower and took over half of CI's
// sanitized test time while checking no stepcast code (docs/testing.md, "Build time").
#pragma once

#include <Eigen/Core>

namespace stepcast::exec::cpu {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>;

// c = a * b. Throws std::invalid_argument unless a is m x k, b is k x n and c is m x n.
void matmul(const Mat& a, const Mat& b, Mat& c);

}  // namespace stepcast::exec::cpu
