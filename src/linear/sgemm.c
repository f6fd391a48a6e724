#include <cblas.h>

#include "ufp4/gemm.h"

/* Tile sizes: big enough that each call runs near OpenBLAS's single-thread peak, small enough that
 * a 1024-row product still gives every thread several tiles. */
#define TILE_M 128
#define TILE_N 512

static CBLAS_TRANSPOSE blas_trans(ufp4_gemm_trans t) {
  return t == UFP4_GEMM_T ? CblasTrans : CblasNoTrans;
}

void ufp4_sgemm(ufp4_gemm_trans ta, ufp4_gemm_trans tb, size_t m, size_t n, size_t k, float alpha,
                const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                size_t ldc) {
  const size_t tm = (m + TILE_M - 1) / TILE_M, tn = (n + TILE_N - 1) / TILE_N;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t t = 0; t < tm * tn; t++) {
    size_t i0 = (t / tn) * TILE_M, j0 = (t % tn) * TILE_N;
    size_t mi = m - i0 < TILE_M ? m - i0 : TILE_M, nj = n - j0 < TILE_N ? n - j0 : TILE_N;
    /* The tile's first row of op(A) and first column of op(B). */
    const float *a = ta == UFP4_GEMM_N ? A + i0 * lda : A + i0;
    const float *b = tb == UFP4_GEMM_T ? B + j0 * ldb : B + j0;
    cblas_sgemm(CblasRowMajor, blas_trans(ta), blas_trans(tb), (int)mi, (int)nj, (int)k, alpha, a,
                (int)lda, b, (int)ldb, beta, C + i0 * ldc + j0, (int)ldc);
  }
}

const char *ufp4_blas_core(void) {
  const char *name = openblas_get_corename();
  return name ? name : "unknown";
}

void ufp4_sgemm_abt(const float *A, const float *B, float *C, size_t m, size_t n, size_t k, float beta) {
  ufp4_sgemm(UFP4_GEMM_N, UFP4_GEMM_T, m, n, k, 1.0f, A, k, B, k, beta, C, n);
}

void ufp4_sgemm_ab(const float *A, const float *B, float *C, size_t m, size_t n, size_t k, float beta) {
  ufp4_sgemm(UFP4_GEMM_N, UFP4_GEMM_N, m, n, k, 1.0f, A, k, B, n, beta, C, n);
}

void ufp4_sgemm_atb(const float *A, const float *B, float *C, size_t m, size_t n, size_t k, float beta) {
  ufp4_sgemm(UFP4_GEMM_T, UFP4_GEMM_N, m, n, k, 1.0f, A, m, B, n, beta, C, n);
}
