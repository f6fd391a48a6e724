#include <cblas.h>
#include <assert.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "linear/packed_gemm_internal.h"
#include "linear/sgemm_internal.h"

#include "ufp4/gemm.h"

/* Tile sizes: big enough that each call runs near OpenBLAS's single-thread peak, small enough that
 * a 1024-row product still gives every thread several tiles. */
#define TILE_M 128
#define TILE_N 512

static CBLAS_TRANSPOSE blas_trans(ufp4_gemm_trans t) {
  return t == UFP4_GEMM_T ? CblasTrans : CblasNoTrans;
}

/* One OpenBLAS call: rows [i0, i0 + mi) and columns [j0, j0 + nj) of C. */
static void tile_call(ufp4_gemm_trans ta, ufp4_gemm_trans tb, size_t i0, size_t mi, size_t j0, size_t nj, size_t k,
                      float alpha, const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                      size_t ldc) {
  /* The tile's first row of op(A) and first column of op(B). */
  const float *a = ta == UFP4_GEMM_N ? A + i0 * lda : A + i0;
  const float *b = tb == UFP4_GEMM_T ? B + j0 * ldb : B + j0;
  cblas_sgemm(CblasRowMajor, blas_trans(ta), blas_trans(tb), (int)mi, (int)nj, (int)k, alpha, a, (int)lda, b,
              (int)ldb, beta, C + i0 * ldc + j0, (int)ldc);
}

void ufp4_sgemm(ufp4_gemm_trans ta, ufp4_gemm_trans tb, size_t m, size_t n, size_t k, float alpha,
                const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                size_t ldc) {
  const size_t tm = (m + TILE_M - 1) / TILE_M, tn = (n + TILE_N - 1) / TILE_N;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t t = 0; t < tm * tn; t++) {
    size_t i0 = (t / tn) * TILE_M, j0 = (t % tn) * TILE_N;
    size_t mi = m - i0 < TILE_M ? m - i0 : TILE_M, nj = n - j0 < TILE_N ? n - j0 : TILE_N;
    tile_call(ta, tb, i0, mi, j0, nj, k, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

/* Pieces (sgemm_internal.h): grids below FEW_TILES tiles are cut into pieces of PIECE_ROWS rows, a
 * multiple of 12. 36 rows: a d = 64 Wgrad (C 64 x 64, one tile) becomes 36 + 28 rows, two nearly
 * equal calls, each still long enough along k to amortize its packing. */
#define FEW_TILES 4
#define PIECE_ROWS 36
#define MAX_PIECES (FEW_TILES * ((TILE_M + PIECE_ROWS - 1) / PIECE_ROWS))

size_t ufp4_sgemm_pieces_rows(size_t m, size_t n, size_t *i0, size_t *rows, size_t max) {
  const size_t tm = (m + TILE_M - 1) / TILE_M, tn = (n + TILE_N - 1) / TILE_N;
  if (tm * tn >= FEW_TILES || strcmp(ufp4_blas_core(), "Haswell") != 0) return 0;
  size_t np = 0;
  for (size_t r = 0; r < tm; r++) {
    const size_t t0 = r * TILE_M, mt = m - t0 < TILE_M ? m - t0 : TILE_M;
    for (size_t off = 0; off < mt; off += PIECE_ROWS, np++) {
      assert(np < max); /* MAX_PIECES covers FEW_TILES tiles */
      i0[np] = t0 + off;
      rows[np] = mt - off < PIECE_ROWS ? mt - off : PIECE_ROWS;
    }
  }
  return np;
}

/* Whether this call's threads could share pieces: more than one thread, and not already inside a
 * parallel region (where the tiles run serially, and a piece only repacks op(B) once more: about
 * 1.04-1.37x the time of whole tiles on one thread). Which path runs never changes the bits. */
static int pieces_pay(void) { return omp_get_max_threads() > 1 && !omp_in_parallel(); }

/* The row ranges of ufp4_sgemm_pieces' grid: its pieces, or whole tiles' rows; returns the count
 * (at most MAX_UNITS). */
#define MAX_UNITS 512
static size_t row_units(size_t m, size_t n, size_t *i0, size_t *rows) {
  size_t np = pieces_pay() ? ufp4_sgemm_pieces_rows(m, n, i0, rows, MAX_PIECES) : 0;
  if (np) return np;
  for (size_t r = 0; r * TILE_M < m && np < MAX_UNITS; r++, np++) {
    i0[np] = r * TILE_M;
    rows[np] = m - i0[np] < TILE_M ? m - i0[np] : TILE_M;
  }
  return np;
}

void ufp4_sgemm_pieces(ufp4_gemm_trans ta, ufp4_gemm_trans tb, size_t m, size_t n, size_t k, float alpha,
                       const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc) {
  size_t i0[MAX_PIECES], rows[MAX_PIECES];
  const size_t np = pieces_pay() ? ufp4_sgemm_pieces_rows(m, n, i0, rows, MAX_PIECES) : 0;
  if (np == 0) {
    ufp4_sgemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const size_t tn = (n + TILE_N - 1) / TILE_N;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t t = 0; t < np * tn; t++) {
    const size_t p = t / tn, j0 = (t % tn) * TILE_N, nj = n - j0 < TILE_N ? n - j0 : TILE_N;
    tile_call(ta, tb, i0[p], rows[p], j0, nj, k, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

int ufp4_sgemm_packed(ufp4_gemm_trans ta, ufp4_gemm_trans tb, size_t m, size_t n, size_t k, const float *A,
                      size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
                      ufp4_pack_xform xform) {
  if (m > (size_t)MAX_UNITS * TILE_M || !ufp4_pgemm_ready()) return -1;
  size_t i0[MAX_UNITS], rows[MAX_UNITS];
  const size_t np = row_units(m, n, i0, rows), tn = (n + TILE_N - 1) / TILE_N;
  /* One packing buffer per thread, all allocated before anything is written. */
  const size_t per = ufp4_pgemm_buffer_floats(TILE_M);
  float *bufs = malloc((size_t)omp_get_max_threads() * per * sizeof *bufs);
  if (!bufs) return -1;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t t = 0; t < np * tn; t++) {
    const size_t p = t / tn, j0 = (t % tn) * TILE_N, nj = n - j0 < TILE_N ? n - j0 : TILE_N;
    /* The unit as one call: its rows of op(A), its columns of op(B), its block of C. */
    const float *a = ta == UFP4_GEMM_N ? A + i0[p] * lda : A + i0[p];
    const float *b = tb == UFP4_GEMM_T ? B + j0 * ldb : B + j0;
    ufp4_pgemm(ta, tb, rows[p], nj, k, a, lda, b, ldb, beta, C + i0[p] * ldc + j0, ldc, xform,
               bufs + (size_t)omp_get_thread_num() * per);
  }
  free(bufs);
  return 0;
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
