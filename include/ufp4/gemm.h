/* Deterministic fp32 GEMM on top of OpenBLAS.
 *
 * OpenBLAS 0.3.21 gives different bits at different thread counts (measured: every shape tried,
 * 64^3 to 1024x3072x768), which would break "same seed, same result whatever the thread count".
 * So ufp4 cuts C into a fixed grid of tiles that depends only on the shape, and each tile is one
 * single-threaded OpenBLAS call inside an OpenMP loop (OpenBLAS's OpenMP build runs serially when
 * called from a parallel region). A tile's bits then never depend on which thread computes it. */
#ifndef UFP4_GEMM_H
#define UFP4_GEMM_H

#include <stddef.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Whether an operand is stored transposed: A as [k, m] instead of [m, k], B as [n, k] instead of
 * [k, n]. */
typedef enum { UFP4_GEMM_N = 0, UFP4_GEMM_T } ufp4_gemm_trans;

/* C [m, n] = alpha op(A) op(B) + beta C, row-major with leading dimensions lda, ldb, ldc (for
 * products on views into larger arrays, such as one head of an attention layer). The tile grid
 * depends on m and n only; each tile is one single-threaded OpenBLAS call with the same k. */
void ufp4_sgemm(ufp4_gemm_trans ta, ufp4_gemm_trans tb, size_t m, size_t n, size_t k, float alpha,
                const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                size_t ldc);

/* The tight cases, alpha = 1:
 * C [m, n] = A [m, k] B [n, k]^T + beta C, all row-major with tight leading dimensions. */
void ufp4_sgemm_abt(const float *A, const float *B, float *C, size_t m, size_t n, size_t k, float beta);
/* C [m, n] = A [m, k] B [k, n] + beta C. */
void ufp4_sgemm_ab(const float *A, const float *B, float *C, size_t m, size_t n, size_t k, float beta);
/* C [m, n] = A [k, m]^T B [k, n] + beta C. */
void ufp4_sgemm_atb(const float *A, const float *B, float *C, size_t m, size_t n, size_t k, float beta);

/* The name of the kernel set OpenBLAS chose when it loaded ("Haswell", "SkylakeX", "Prescott", ...):
 * it fixes the summation order, and so the bits, of every product. The ufp4 executable pins it to
 * Haswell on CPUs with AVX2 and FMA (src/cli/blas_pin.h); a library caller gets OpenBLAS's own
 * choice unless it sets OPENBLAS_CORETYPE before OpenBLAS loads. */
const char *ufp4_blas_core(void);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
