#include "cpu_kernels.h"

#include <stdexcept>

#include <fmt/format.h>

namespace stepcast::exec::cpu {

void matmul(const Mat& a, const Mat& b, Mat& c) {
  if (a.cols() != b.rows() || c.rows() != a.rows() || c.cols() != b.cols()) {
    throw std::invalid_argument(fmt::format("cpu matmul: ({} x {}) . ({} x {}) into ({} x {})", a.rows(), a.cols(),
                                            b.rows(), b.cols(), c.rows(), c.cols()));
  }
  c.noalias() = a * b;
}

}  // namespace stepcast::exec::cpu
