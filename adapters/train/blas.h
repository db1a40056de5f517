// A thin row-major wrapper over OpenBLAS's sgemm, so layers read as matrix algebra instead of
// CBLAS enum soup, and its counterpart that picks OpenBLAS or cuBLAS by device. Internal to
// hoop_train.
#pragma once

#include <cblas.h>

#include <cstdint>

#include "gpu.h"

namespace hoop::train::blas {

/// C = alpha * op(A) * op(B) + beta * C, all row-major; op(A) is m x k, op(B) is k x n, C is
/// m x n. lda, ldb and ldc are the row strides of A, B and C as stored (before transposing).
inline void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                 float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 float beta, float* c, std::int64_t ldc) {
  // BLAS reads nothing when a dimension is zero, but some builds reject ld < 1 even then.
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

/// gemm() on `device`: OpenBLAS for kCpuDevice, else cuBLAS on that device's stream (the
/// pointers are then device memory).
inline void gemm_on(int device, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                    std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
                    std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (device == kCpuDevice) {
    gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    detail::gpu(device).gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

}  // namespace hoop::train::blas
