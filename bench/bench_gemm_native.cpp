// The reference for bench_cpu_gemm: Eigen's float GEMM built for this very machine
// (-march=native), the best Eigen build the machine can have. Eigen's namespace is renamed, so
// these template instances cannot be merged with the runtime's builds of the same templates.
#include <cstdint>

#define Eigen dtplan_eigen_native
#include <Eigen/Core>

namespace dtplan::bench {

// C = A B, row-major, n x n.
void native_gemm(std::int64_t n, const float* a, const float* b, float* c) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<RowMajor>(c, n, n).noalias() =
      Eigen::Map<const RowMajor>(a, n, n) * Eigen::Map<const RowMajor>(b, n, n);
}

}  // namespace dtplan::bench
