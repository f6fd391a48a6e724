#include <cblas.h>

#include "ufp4/gemm.h"

/* Tile sizes: big enough that each call runs near OpenBLAS's single-thread peak, small enough that
 * a 1024-row product still gives every thread several tiles. */
#define TILE_M 128
#define TILE_N 512

static void tiled(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, const float *A, const float *B, float *C, size_t m,
                  size_t n, size_t k, float beta) {
  const size_t tm = (m + TILE_M - 1) / TILE_M, tn = (n + TILE_N - 1) / TILE_N;
  const size_t lda = ta == CblasNoTrans ? k : m, ldb = tb == CblasTrans ? k : n;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t t = 0; t < tm * tn; t++) {
    size_t i0 = (t / tn) * TILE_M, j0 = (t % tn) * TILE_N;
    size_t mi = m - i0 < TILE_M ? m - i0 : TILE_M, nj = n - j0 < TILE_N ? n - j0 : TILE_N;
    const float *a = ta == CblasNoTrans ? A + i0 * lda : A + i0;
    const float *b = tb == CblasTrans ? B + j0 * ldb : B + j0;
    cblas_sgemm(CblasRowMajor, ta, tb, (int)mi, (int)nj, (int)k, 1.0f, a, (int)lda, b, (int)ldb, beta,
                C + i0 * n + j0, (int)n);
  }
}

void ufp4_sgemm_abt(const float *A, const float *B, float *C, size_t m, size_t n, size_t k, float beta) {
  tiled(CblasNoTrans, CblasTrans, A, B, C, m, n, k, beta);
}

void ufp4_sgemm_ab(const float *A, const float *B, float *C, size_t m, size_t n, size_t k, float beta) {
  tiled(CblasNoTrans, CblasNoTrans, A, B, C, m, n, k, beta);
}

void ufp4_sgemm_atb(const float *A, const float *B, float *C, size_t m, size_t n, size_t k, float beta) {
  tiled(CblasTrans, CblasNoTrans, A, B, C, m, n, k, beta);
}
