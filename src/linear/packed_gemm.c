/* ufp4_pgemm: OpenBLAS 0.3.21's single-threaded SGEMM driver, with ufp4's packing (packed_gemm_internal.h).
 *
 * In OpenBLAS's column-major terms the row-major product C [m, n] = op(A) op(B) is
 * C' [M = n, N = m] = op(B)' op(A)': the "M side" panel holds op(B) (C's columns), the "N side"
 * panel op(A) (C's rows). Panel layouts (those of OpenBLAS's gemm_tcopy_8 / gemm_ncopy_8 for the M
 * side and of its 4-wide copies for the N side): the side is cut into blocks of 8 (M) or 4 (N),
 * then one block each of the smaller powers of two for the rest; each block stores, for each k of
 * the K range in order, its block-size values side by side. */
#define _GNU_SOURCE
#include "linear/packed_gemm_internal.h"
#include "linear/transpose_internal.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#include <xmmintrin.h>
#endif


/* OpenBLAS 0.3.21's Haswell SGEMM parameters (param.h) and its level-3 driver's rules. */
#define GEMM_P 320
#define GEMM_Q 320
#define GEMM_R 104512 /* sgemm_r of Debian 12's build (its parameter table); only products with more
                          rows than this see it */
#define UNROLL_M 8
#define UNROLL_N 4

typedef int (*kernel_fn)(long, long, long, float, float *, float *, float *, long);
typedef int (*beta_fn)(long, long, long, float, float *, long, float *, long, float *, long);

static kernel_fn kernel;
static beta_fn beta_op;
static ufp4_blas_copy_fn copies[4];
static int ready;
static int enabled; /* the linear layer's bf16 GEMMs round while packing (off by default) */
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* One product against cblas_sgemm, small enough that OpenBLAS runs it on one thread (m n k below
 * 2^18) and long enough in k to be cut (641 = 320 + 320 + 1): 1 when every bit agrees. */
static int self_test(void) {
  enum { M = 13, N = 29, K = 641 };
  static float a[M * K], b[K * N], c0[M * N], c1[M * N];
  static float buf[GEMM_P * GEMM_Q + GEMM_Q * (M + UNROLL_N)];
  for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7919) % 1009) / 97.0f - 5.0f;
  for (int i = 0; i < K * N; i++) b[i] = (float)((i * 104729) % 997) / 89.0f - 5.5f;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c0, N);
  ufp4_pgemm(UFP4_GEMM_N, UFP4_GEMM_N, M, N, K, a, K, b, N, 0.0f, c1, N, UFP4_PACK_PLAIN, buf);
  return memcmp(c0, c1, sizeof c0) == 0;
}

/* The Haswell kernels of the OpenBLAS that holds cblas_sgemm (not another one the process may have
 * loaded), when it is the 0.3.21 DYNAMIC_ARCH build whose driver ufp4_pgemm copies and a product
 * agrees with cblas_sgemm bit for bit. */
static void resolve(void) {
  static const char *const names[4] = {"sgemm_incopy_HASWELL", "sgemm_itcopy_HASWELL", "sgemm_oncopy_HASWELL",
                                       "sgemm_otcopy_HASWELL"};
  const char *config = openblas_get_config();
  if (!config || !strstr(config, "OpenBLAS 0.3.21") || !strstr(config, "DYNAMIC_ARCH") ||
      strcmp(ufp4_blas_core(), "Haswell") != 0)
    return;
  Dl_info info;
  void *lib = dladdr((void *)cblas_sgemm, &info) && info.dli_fname ? dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD)
                                                                   : NULL;
  if (!lib) return;
  kernel = (kernel_fn)dlsym(lib, "sgemm_kernel_HASWELL");
  beta_op = (beta_fn)dlsym(lib, "sgemm_beta_HASWELL");
  for (int i = 0; i < 4; i++) copies[i] = (ufp4_blas_copy_fn)dlsym(lib, names[i]);
  ready = kernel && beta_op && self_test();
  dlclose(lib); /* RTLD_NOLOAD took a reference; the library stays loaded, cblas_sgemm is in it */
  const char *on = getenv("UFP4_PACKED_GEMM");
  if (ready && on && !strcmp(on, "1")) __atomic_store_n(&enabled, 1, __ATOMIC_RELAXED);
}

int ufp4_pgemm_ready(void) {
  pthread_once(&once, resolve);
  return ready;
}

int ufp4_pgemm_in_use(void) { return ufp4_pgemm_ready() && __atomic_load_n(&enabled, __ATOMIC_RELAXED); }

void ufp4_pgemm_set_in_use(int on) {
  pthread_once(&once, resolve);
  __atomic_store_n(&enabled, on ? 1 : 0, __ATOMIC_RELAXED);
}

ufp4_blas_copy_fn ufp4_pgemm_blas_copy(int which) {
  pthread_once(&once, resolve);
  return which >= 0 && which < 4 ? copies[which] : NULL;
}

size_t ufp4_pgemm_buffer_floats(size_t m) {
  const size_t rows = m < GEMM_R ? m : GEMM_R;
  return (size_t)GEMM_P * GEMM_Q + (size_t)GEMM_Q * (rows + UNROLL_N);
}

/* ufp4_round_bf16, inline and branch-free (the integer steps of minifloat.c): RNE on the top 16
 * bits, a NaN keeps its top bits and is made quiet. */
static inline float bf16r(float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  const uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u, q = (u | 0x00400000u) & 0xFFFF0000u;
  u = (u & 0x7FFFFFFFu) > 0x7F800000u ? q : r;
  memcpy(&v, &u, sizeof v);
  return v;
}

#ifdef __SSE2__
#define XF4(v, x) ((x) == UFP4_PACK_BF16 ? bf16x4(v) : (v)) /* transpose_internal.h */
#endif
#define XF(v, x) ((x) == UFP4_PACK_BF16 ? bf16r(v) : (v))

/* dst[kk * bs + t] = xf(src[kk * ld + t]): a block whose bs values are contiguous for each k. */
static inline __attribute__((always_inline)) void block_rows(const float *src, size_t ld, size_t kl, size_t bs,
                                                              ufp4_pack_xform x, float *dst) {
#ifdef __SSE2__
  if (bs == 8 || bs == 4) {
    for (size_t kk = 0; kk < kl; kk++) {
      _mm_storeu_ps(dst + kk * bs, XF4(_mm_loadu_ps(src + kk * ld), x));
      if (bs == 8) _mm_storeu_ps(dst + kk * bs + 4, XF4(_mm_loadu_ps(src + kk * ld + 4), x));
    }
    return;
  }
#endif
  for (size_t kk = 0; kk < kl; kk++)
    for (size_t t = 0; t < bs; t++) dst[kk * bs + t] = XF(src[kk * ld + t], x);
}

/* dst[kk * bs + t] = xf(src[t * ld + kk]): a block of bs rows, each contiguous along k. */
static inline __attribute__((always_inline)) void block_cols(const float *src, size_t ld, size_t kl, size_t bs,
                                                              ufp4_pack_xform x, float *dst) {
  size_t kk = 0;
#ifdef __SSE2__
  if (bs == 8 || bs == 4) {
    for (; kk + 4 <= kl; kk += 4)
      for (size_t t0 = 0; t0 < bs; t0 += 4) { /* a 4 x 4 transpose per 4 rows and 4 k */
        __m128 r0 = XF4(_mm_loadu_ps(src + (t0 + 0) * ld + kk), x), r1 = XF4(_mm_loadu_ps(src + (t0 + 1) * ld + kk), x);
        __m128 r2 = XF4(_mm_loadu_ps(src + (t0 + 2) * ld + kk), x), r3 = XF4(_mm_loadu_ps(src + (t0 + 3) * ld + kk), x);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        _mm_storeu_ps(dst + (kk + 0) * bs + t0, r0);
        _mm_storeu_ps(dst + (kk + 1) * bs + t0, r1);
        _mm_storeu_ps(dst + (kk + 2) * bs + t0, r2);
        _mm_storeu_ps(dst + (kk + 3) * bs + t0, r3);
      }
  }
#endif
  for (; kk < kl; kk++)
    for (size_t t = 0; t < bs; t++) dst[kk * bs + t] = XF(src[t * ld + kk], x);
}

/* Block sizes: full blocks of `full`, then the powers of two below it that the rest needs. */
static inline size_t block_at(size_t left, size_t full) {
  if (left >= full) return full;
  size_t b = full >> 1;
  while (b > left) b >>= 1;
  return b;
}

/* The two panels, with xform a constant in each instantiation. */
static inline __attribute__((always_inline)) void pack_m(ufp4_gemm_trans tb, const float *B, size_t ldb, size_t ls,
                                                          size_t kl, size_t c0, size_t mi, ufp4_pack_xform x,
                                                          float *dst) {
  for (size_t i = 0; i < mi;) {
    const size_t bs = block_at(mi - i, UNROLL_M);
    if (tb == UFP4_GEMM_N) block_rows(B + ls * ldb + c0 + i, ldb, kl, bs, x, dst); /* op(B)[kk, c] = B[kk ldb + c] */
    else block_cols(B + (c0 + i) * ldb + ls, ldb, kl, bs, x, dst);                /* = B[c ldb + kk] */
    dst += bs * kl;
    i += bs;
  }
}

static inline __attribute__((always_inline)) void pack_n(ufp4_gemm_trans ta, const float *A, size_t lda, size_t ls,
                                                          size_t kl, size_t r0, size_t nj, ufp4_pack_xform x,
                                                          float *dst) {
  for (size_t j = 0; j < nj;) {
    const size_t bs = block_at(nj - j, UNROLL_N);
    if (ta == UFP4_GEMM_N) block_cols(A + (r0 + j) * lda + ls, lda, kl, bs, x, dst); /* op(A)[r, kk] = A[r lda + kk] */
    else block_rows(A + ls * lda + r0 + j, lda, kl, bs, x, dst);                    /* = A[kk lda + r] */
    dst += bs * kl;
    j += bs;
  }
}

void ufp4_pgemm_pack_m(ufp4_gemm_trans tb, const float *B, size_t ldb, size_t ls, size_t kl, size_t c0, size_t mi,
                       ufp4_pack_xform x, float *dst) {
  if (x == UFP4_PACK_BF16) pack_m(tb, B, ldb, ls, kl, c0, mi, UFP4_PACK_BF16, dst);
  else pack_m(tb, B, ldb, ls, kl, c0, mi, UFP4_PACK_PLAIN, dst);
}

void ufp4_pgemm_pack_n(ufp4_gemm_trans ta, const float *A, size_t lda, size_t ls, size_t kl, size_t r0, size_t nj,
                       ufp4_pack_xform x, float *dst) {
  if (x == UFP4_PACK_BF16) pack_n(ta, A, lda, ls, kl, r0, nj, UFP4_PACK_BF16, dst);
  else pack_n(ta, A, lda, ls, kl, r0, nj, UFP4_PACK_PLAIN, dst);
}

/* The driver's cut of a length: whole, halved to a multiple of `unroll` between one and two
 * blocks, or one block. */
static inline size_t cut(size_t left, size_t block, size_t unroll) {
  if (left >= 2 * block) return block;
  if (left > block) return ((left / 2 + unroll - 1) / unroll) * unroll;
  return left;
}

void ufp4_pgemm(ufp4_gemm_trans ta, ufp4_gemm_trans tb, size_t m, size_t n, size_t k, const float *A, size_t lda,
                const float *B, size_t ldb, float beta, float *C, size_t ldc, ufp4_pack_xform x, float *buf) {
  /* Column-major view: M = n (C's columns, from op(B)), N = m (C's rows, from op(A)). */
  const size_t M = n, N = m;
  if (M == 0 || N == 0) return;
  if (beta != 1.0f) beta_op((long)M, (long)N, 0, beta, NULL, 0, NULL, 0, C, (long)ldc);
  if (k == 0) return;
  float *sa = buf, *sb = buf + (size_t)GEMM_P * GEMM_Q;
  for (size_t js = 0; js < N; js += GEMM_R) {
    const size_t min_j = N - js < GEMM_R ? N - js : GEMM_R;
    for (size_t ls = 0, min_l; ls < k; ls += min_l) {
      min_l = cut(k - ls, GEMM_Q, UNROLL_M);
      size_t min_i = cut(M, GEMM_P, UNROLL_M);
      const int l1stride = M > GEMM_P;
      ufp4_pgemm_pack_m(tb, B, ldb, ls, min_l, 0, min_i, x, sa);
      for (size_t jjs = js, min_jj; jjs < js + min_j; jjs += min_jj) {
        min_jj = min_j + js - jjs;
        if (min_jj >= 3 * UNROLL_N) min_jj = 3 * UNROLL_N;
        else if (min_jj > UNROLL_N) min_jj = UNROLL_N;
        float *sbp = sb + (l1stride ? min_l * (jjs - js) : 0);
        ufp4_pgemm_pack_n(ta, A, lda, ls, min_l, jjs, min_jj, x, sbp);
        kernel((long)min_i, (long)min_jj, (long)min_l, 1.0f, sa, sbp, C + jjs * ldc, (long)ldc);
      }
      for (size_t is = min_i; is < M; is += min_i) {
        min_i = cut(M - is, GEMM_P, UNROLL_M);
        ufp4_pgemm_pack_m(tb, B, ldb, ls, min_l, is, min_i, x, sa);
        kernel((long)min_i, (long)min_j, (long)min_l, 1.0f, sa, sb, C + is + js * ldc, (long)ldc);
      }
    }
  }
}
