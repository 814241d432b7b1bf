// C = alpha op(A) op(B) + beta C in double, row-major, from the definition: the reference the
// CPU kernels' and the CUDA backend's GEMM tests compare with. A is m x k (k x m when
// transposed), B k x n (n x k).
#pragma once

#include <vector>

namespace dtplan::test {

inline std::vector<double> gemm_reference(bool ta, bool tb, int m, int n, int k, double alpha,
                                          const std::vector<float>& a, const std::vector<float>& b,
                                          double beta, const std::vector<float>& c) {
  std::vector<double> out(c.size());
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) {
        const double x = ta ? a[p * m + i] : a[i * k + p];
        const double y = tb ? b[j * k + p] : b[p * n + j];
        s += x * y;
      }
      out[i * n + j] = alpha * s + beta * c[i * n + j];
    }
  }
  return out;
}

}  // namespace dtplan::test
