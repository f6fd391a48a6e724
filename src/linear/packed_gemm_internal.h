/* A GEMM whose operands are transformed while they are packed (packed_gemm.c), with the bits of
 * OpenBLAS's own single-threaded cblas_sgemm.
 *
 * OpenBLAS packs each operand into panels for its micro-kernel; ufp4 cannot hook that packing, so a
 * rounded operand had to be written in full and read again. OpenBLAS (Debian's DYNAMIC_ARCH build)
 * exports each kernel set's micro-kernel, sgemm_kernel_HASWELL among them. ufp4_pgemm runs that
 * micro-kernel on panels ufp4 packs itself, in the blocking of OpenBLAS 0.3.21's level-3 driver
 * (driver/level3/level3.c: K cut at GEMM_Q = 320, M at GEMM_P = 320, N handed over in runs of 12
 * then 4), so every element of C gets the same kernel calls on the same values in the same order,
 * and the same bits as cblas_sgemm run on one thread (tests/test_pgemm.c, against cblas_sgemm and
 * against OpenBLAS's own packing routines). The packing applies xform to each element on the way.
 *
 * Only under the Haswell kernel set (the one the ufp4 executable pins) of OpenBLAS 0.3.21's
 * DYNAMIC_ARCH build, with the symbols found in the library that holds cblas_sgemm and one product
 * checked against it bit for bit at first use: then ufp4_pgemm_ready() is 1; otherwise callers keep
 * the OpenBLAS path. */
#ifndef UFP4_LINEAR_PACKED_GEMM_INTERNAL_H
#define UFP4_LINEAR_PACKED_GEMM_INTERNAL_H

#include <stddef.h>

#include "ufp4/gemm.h"

typedef enum {
  UFP4_PACK_PLAIN = 0, /* the values as stored */
  UFP4_PACK_BF16,      /* ufp4_round_bf16 of each value */
} ufp4_pack_xform;

/* 1 when OpenBLAS's Haswell micro-kernel is loaded and is the kernel set in use. */
int ufp4_pgemm_ready(void);

/* Whether the linear layer's bf16 GEMMs round their operands while packing them (qlinear.c):
 * ufp4_pgemm_ready() and switched on, by UFP4_PACKED_GEMM=1 in the environment or
 * ufp4_pgemm_set_in_use(1). Off by default: on this project's 2-core machine it measured no faster
 * than rounding into a copy and calling OpenBLAS (docs/PERFORMANCE.md, "Rounding while packing").
 * Either way the bits are the same. */
int ufp4_pgemm_in_use(void);
void ufp4_pgemm_set_in_use(int on);

/* Floats of the two packing buffers ufp4_pgemm needs for a product with m rows of C. */
size_t ufp4_pgemm_buffer_floats(size_t m);

/* Row-major C [m, n] = op(A) op(B) + beta C (beta 0 or 1), op as in ufp4_sgemm, every element of A
 * and B passed through xform as it is packed; one thread; buf: ufp4_pgemm_buffer_floats(m) floats.
 * The bits of cblas_sgemm on one thread on the transformed operands. Requires ufp4_pgemm_ready(). */
void ufp4_pgemm(ufp4_gemm_trans ta, ufp4_gemm_trans tb, size_t m, size_t n, size_t k, const float *A, size_t lda,
                const float *B, size_t ldb, float beta, float *C, size_t ldc, ufp4_pack_xform xform, float *buf);

/* OpenBLAS's own packing routines of the same kernel set, for the tests (NULL when not loaded):
 * which = 0 incopy, 1 itcopy, 2 oncopy, 3 otcopy, each (long m, long n, float *a, long lda, float *b). */
typedef int (*ufp4_blas_copy_fn)(long, long, float *, long, float *);
ufp4_blas_copy_fn ufp4_pgemm_blas_copy(int which);

/* The panels ufp4_pgemm packs, for the tests: the M-side panel (min_i values of C's columns c0..,
 * k-range ls..ls+kl, from op(B)) and the N-side panel (nj rows of C r0.., from op(A)). */
void ufp4_pgemm_pack_m(ufp4_gemm_trans tb, const float *B, size_t ldb, size_t ls, size_t kl, size_t c0, size_t mi,
                       ufp4_pack_xform xform, float *dst);
void ufp4_pgemm_pack_n(ufp4_gemm_trans ta, const float *A, size_t lda, size_t ls, size_t kl, size_t r0, size_t nj,
                       ufp4_pack_xform xform, float *dst);

#endif
