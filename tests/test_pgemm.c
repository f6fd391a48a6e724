/* ufp4_pgemm (src/linear/packed_gemm_internal.h): OpenBLAS's Haswell micro-kernel on panels ufp4
 * packs, against OpenBLAS itself. Its packing against OpenBLAS's own packing routines, byte for
 * byte; its products against cblas_sgemm on one thread, bit for bit, over shapes that exercise
 * every cut of the driver (K above 2 x 320 and between 320 and 640, M above 320 and above 640,
 * tails of every size) in the four orientations with beta 0 and 1; with bf16 rounding while
 * packing, against cblas_sgemm on rounded copies. Skipped where the Haswell kernels are not the
 * ones loaded (ufp4_pgemm_ready). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "linear/packed_gemm_internal.h"
#include "linear/sgemm_internal.h"
#include "ufp4/linear.h"
#include "ufp4/minifloat.h"
#include "ufp4/recipe.h"
#include "ufp4/philox.h"

static float *filled(size_t n, uint64_t stream) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  assert_non_null(p);
  for (size_t i = 0; i < n; i++) p[i] = ufp4_philox_normal(13, stream, i);
  return p;
}

/* Where the Haswell kernels are the ones loaded (the tests pin them on AVX2 machines), the packed
 * GEMM must be available: a missing symbol would silently bring back the copies. */
static void test_ready_under_haswell(void **state) {
  (void)state;
  const char *config = openblas_get_config();
  if (strcmp(ufp4_blas_core(), "Haswell") != 0 || !config || !strstr(config, "OpenBLAS 0.3.21") ||
      !strstr(config, "DYNAMIC_ARCH"))
    skip();
  assert_true(ufp4_pgemm_ready());
}

static void test_packing_is_openblas(void **state) {
  (void)state;
  if (!ufp4_pgemm_ready()) skip();
  const size_t ld = 700, rows = 700;
  float *X = filled(ld * rows, 1);
  const size_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 17, 33, 320};
  const size_t nsz = sizeof sizes / sizeof *sizes;
  float *mine = malloc(700 * 700 * sizeof(float)), *theirs = malloc(700 * 700 * sizeof(float));
  assert_non_null(mine);
  assert_non_null(theirs);
  for (size_t a = 0; a < nsz; a++)
    for (size_t b = 0; b < nsz; b++) {
      const size_t kl = sizes[a], w = sizes[b], ls = 3, off = 5;
      for (int tr = 0; tr < 2; tr++) {
        const ufp4_gemm_trans t = tr ? UFP4_GEMM_T : UFP4_GEMM_N;
        /* M side from op(B): itcopy when B is [k, n], incopy when [n, k]. */
        ufp4_pgemm_pack_m(t, X, ld, ls, kl, off, w, UFP4_PACK_PLAIN, mine);
        ufp4_pgemm_blas_copy(tr ? 0 : 1)((long)kl, (long)w, tr ? X + ls + off * ld : X + off + ls * ld, (long)ld,
                                         theirs);
        if (memcmp(mine, theirs, kl * w * sizeof(float)))
          fail_msg("M-side panel %zu x %zu (%s) differs from OpenBLAS's", kl, w, tr ? "incopy" : "itcopy");
        /* N side from op(A): oncopy when A is [m, k], otcopy when [k, m]. */
        ufp4_pgemm_pack_n(t, X, ld, ls, kl, off, w, UFP4_PACK_PLAIN, mine);
        ufp4_pgemm_blas_copy(tr ? 3 : 2)((long)kl, (long)w, tr ? X + off + ls * ld : X + ls + off * ld, (long)ld,
                                         theirs);
        if (memcmp(mine, theirs, kl * w * sizeof(float)))
          fail_msg("N-side panel %zu x %zu (%s) differs from OpenBLAS's", kl, w, tr ? "otcopy" : "oncopy");
      }
    }
  free(X);
  free(mine);
  free(theirs);
}

/* ufp4_pgemm against cblas_sgemm (one thread) on every orientation and beta, plain and bf16. */
static void check(size_t m, size_t n, size_t k) {
  float *A = filled(m * k, 2), *B = filled(n * k, 3), *C0 = filled(m * n, 4);
  float *Ar = malloc((m * k > 0 ? m * k : 1) * sizeof(float)), *Br = malloc((n * k > 0 ? n * k : 1) * sizeof(float));
  float *C1 = malloc(m * n * sizeof(float)), *C2 = malloc(m * n * sizeof(float));
  float *buf = malloc(ufp4_pgemm_buffer_floats(m) * sizeof(float));
  assert_true(Ar && Br && C1 && C2 && buf);
  for (size_t i = 0; i < m * k; i++) Ar[i] = ufp4_round_bf16(A[i]);
  for (size_t i = 0; i < n * k; i++) Br[i] = ufp4_round_bf16(B[i]);
  for (int o = 0; o < 4; o++) {
    const ufp4_gemm_trans ta = (o & 1) ? UFP4_GEMM_T : UFP4_GEMM_N, tb = (o & 2) ? UFP4_GEMM_T : UFP4_GEMM_N;
    const size_t lda = ta == UFP4_GEMM_T ? m : k, ldb = tb == UFP4_GEMM_T ? k : n;
    for (int beta = 0; beta < 2; beta++)
      for (int bf = 0; bf < 2; bf++) {
        memcpy(C1, C0, m * n * sizeof(float));
        memcpy(C2, C0, m * n * sizeof(float));
        cblas_sgemm(CblasRowMajor, ta == UFP4_GEMM_T ? CblasTrans : CblasNoTrans,
                    tb == UFP4_GEMM_T ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, bf ? Ar : A,
                    (int)lda, bf ? Br : B, (int)ldb, (float)beta, C1, (int)n);
        ufp4_pgemm(ta, tb, m, n, k, A, lda, B, ldb, (float)beta, C2, n, bf ? UFP4_PACK_BF16 : UFP4_PACK_PLAIN, buf);
        if (memcmp(C1, C2, m * n * sizeof(float)))
          fail_msg("%zu x %zu x %zu, orientation %d, beta %d, %s: ufp4_pgemm's bits differ from cblas_sgemm's", m, n,
                   k, o, beta, bf ? "bf16" : "plain");
      }
  }
  free(A);
  free(B);
  free(Ar);
  free(Br);
  free(C0);
  free(C1);
  free(C2);
  free(buf);
}

static void test_products_are_openblas(void **state) {
  (void)state;
  if (!ufp4_pgemm_ready()) skip();
  static const size_t ms[] = {1, 5, 13, 36, 64, 128, 192};
  static const size_t ns[] = {1, 3, 12, 17, 64, 321, 700};
  static const size_t ks[] = {1, 7, 64, 321, 641};
  for (size_t a = 0; a < sizeof ms / sizeof *ms; a++)
    for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
      for (size_t c = 0; c < sizeof ks / sizeof *ks; c++) check(ms[a], ns[b], ks[c]);
  /* The linear layers of the study's model: Fprop, Dgrad and Wgrad tiles. */
  check(128, 192, 64);
  check(128, 64, 192);
  check(64, 64, 1024);
}

/* The linear layer's bf16 GEMMs with rounding while packing (ufp4_pgemm_set_in_use) against the
 * rounded copies, including the calls that share an operand over projections: the same bits. */
static void test_linear_bf16_same_bits(void **state) {
  (void)state;
  if (!ufp4_pgemm_ready()) skip();
  omp_set_num_threads(2);
  const size_t n = 256, in = 64, out[2] = {192, 64};
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("bf16", &r), 0);
  float *X = filled(n * in, 5), *W0 = filled(out[0] * in, 6), *W1 = filled(out[1] * in, 7);
  float *dY0 = filled(n * out[0], 8), *dY1 = filled(n * out[1], 9);
  float *scratch = malloc(ufp4_linear_scratch_floats(n, in, out[0]) * 2 * sizeof(float));
  assert_non_null(scratch);
  float *res[2][5];
  for (int packed = 0; packed < 2; packed++) {
    ufp4_pgemm_set_in_use(packed);
    ufp4_linear_ctx ctx[2] = {{.recipe = &r, .stream = {.seed = 3, .proj = 1}},
                              {.recipe = &r, .stream = {.seed = 3, .proj = 2}}};
    float *Y0 = calloc(n * out[0], sizeof(float)), *Y1 = calloc(n * out[1], sizeof(float));
    float *dX = calloc(n * in, sizeof(float)), *dW0 = calloc(out[0] * in, sizeof(float));
    float *dW1 = calloc(out[1] * in, sizeof(float));
    assert_true(Y0 && Y1 && dX && dW0 && dW1);
    const float *W[2] = {W0, W1}, *dY[2] = {dY0, dY1};
    float *Y[2] = {Y0, Y1}, *dW[2] = {dW0, dW1};
    assert_int_equal(ufp4_linear_forward_shared(ctx, 2, X, W, Y, n, in, out, scratch), 0);
    assert_int_equal(ufp4_linear_backward_shared(ctx, 2, dY, X, W, dX, dW, n, in, out, scratch), 0);
    assert_int_equal(ufp4_linear_backward(&ctx[0], dY0, X, W0, dX, dW0, n, in, out[0], scratch), 0);
    res[packed][0] = Y0, res[packed][1] = Y1, res[packed][2] = dX, res[packed][3] = dW0, res[packed][4] = dW1;
  }
  ufp4_pgemm_set_in_use(0);
  const size_t sizes[5] = {n * out[0], n * out[1], n * in, out[0] * in, out[1] * in};
  for (int i = 0; i < 5; i++) {
    if (memcmp(res[0][i], res[1][i], sizes[i] * sizeof(float))) fail_msg("output %d differs with rounding in the packing", i);
    free(res[0][i]);
    free(res[1][i]);
  }
  free(X);
  free(W0);
  free(W1);
  free(dY0);
  free(dY1);
  free(scratch);
}

/* ufp4_sgemm_packed over grids that are not cut (4 tiles or more, more than one column tile),
 * against ufp4_sgemm_pieces on rounded copies; a return of 0 says the packed path ran. */
static void test_packed_grid_same_bits(void **state) {
  (void)state;
  if (!ufp4_pgemm_ready()) skip();
  omp_set_num_threads(2);
  static const size_t shapes[][3] = {{1024, 192, 64}, {600, 700, 33}, {513, 1100, 130}};
  for (size_t s = 0; s < 3; s++) {
    const size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    float *A = filled(m * k, 10), *B = filled(n * k, 11), *C1 = filled(m * n, 12), *C2 = malloc(m * n * sizeof(float));
    assert_non_null(C2);
    memcpy(C2, C1, m * n * sizeof(float));
    for (size_t i = 0; i < m * k; i++) A[i] = A[i] * 3.0f;
    const int rc = ufp4_sgemm_packed(UFP4_GEMM_N, UFP4_GEMM_T, m, n, k, A, k, B, k, 1.0f, C1, n, UFP4_PACK_BF16);
    assert_int_equal(rc, 0);
    for (size_t i = 0; i < m * k; i++) A[i] = ufp4_round_bf16(A[i]);
    for (size_t i = 0; i < n * k; i++) B[i] = ufp4_round_bf16(B[i]);
    ufp4_sgemm_pieces(UFP4_GEMM_N, UFP4_GEMM_T, m, n, k, 1.0f, A, k, B, k, 1.0f, C2, n);
    if (memcmp(C1, C2, m * n * sizeof(float))) fail_msg("%zu x %zu x %zu: packed grid differs", m, n, k);
    free(A);
    free(B);
    free(C1);
    free(C2);
  }
  omp_set_num_threads(1);
}

int main(void) {
  /* cblas_sgemm on one thread: the reference is OpenBLAS as ufp4's tiles call it. */
  omp_set_num_threads(1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ready_under_haswell),
      cmocka_unit_test(test_packing_is_openblas),
      cmocka_unit_test(test_products_are_openblas),
      cmocka_unit_test(test_linear_bf16_same_bits),
      cmocka_unit_test(test_packed_grid_same_bits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
