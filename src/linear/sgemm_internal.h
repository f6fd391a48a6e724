/* The linear layer's GEMM (sgemm.c): ufp4_sgemm's tile grid, with the rows of a product that has
 * few tiles cut into pieces so that its threads share it, under the one kernel set for which those
 * pieces are known to give the same bits as the whole tiles. */
#ifndef UFP4_LINEAR_SGEMM_INTERNAL_H
#define UFP4_LINEAR_SGEMM_INTERNAL_H

#include <stddef.h>

#include "linear/packed_gemm_internal.h"
#include "ufp4/gemm.h"

/* As ufp4_sgemm, and the same bits. Under OpenBLAS's Haswell kernels (the set the ufp4 executable
 * and the tests pin), when the grid has fewer than 4 tiles, each tile's rows are cut, from the
 * tile's first row, into pieces of a multiple of 12 rows, each its own single-threaded OpenBLAS
 * call. Why the bits stay those of the whole tile: OpenBLAS hands the rows of C to its micro-kernel
 * (C^T's columns, its N) in runs that start at the tile's first row and step by 12 (3 x
 * SGEMM_UNROLL_N, and the kernel's n12 loop), ending in a shorter run: so a piece boundary at a
 * multiple of 12 meets the same runs, each element goes through the same kernel path, and the
 * reduction over k (cut by k alone) is unchanged. tests/test_sgemm_pieces.c checks it against the
 * whole tiles over the linear layer's shapes and more, in all four orientations. The pieces depend
 * on the shape and the kernel set; they are cut only when the call has more than one thread to share
 * them (on one thread a piece costs a repacking of op(B)), which is safe for determinism because
 * the pieces give the whole tiles' bits (the test compares 1 and 2 threads too). Under any other
 * kernel set this is ufp4_sgemm. */
void ufp4_sgemm_pieces(ufp4_gemm_trans ta, ufp4_gemm_trans tb, size_t m, size_t n, size_t k, float alpha,
                       const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc);

/* ufp4_sgemm_pieces' grid (its pieces, or whole tiles), each unit one ufp4_pgemm: OpenBLAS's
 * micro-kernel on panels packed by ufp4, every element of A and B through xform on the way. The
 * bits of ufp4_sgemm_pieces on the transformed operands (tests/test_pgemm.c), with no transformed
 * copy written. Alpha is 1. Returns 0, or -1 having written nothing: ufp4_pgemm_ready() is 0, m is
 * above 65536 rows, or the packing buffers could not be allocated. */
int ufp4_sgemm_packed(ufp4_gemm_trans ta, ufp4_gemm_trans tb, size_t m, size_t n, size_t k, const float *A,
                      size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
                      ufp4_pack_xform xform);

/* The pieces as row ranges [i0, i0 + rows) of C (whatever the thread count), for the tests: fills
 * them (max must be at least 16) and returns their count (0 when the grid is not cut). */
size_t ufp4_sgemm_pieces_rows(size_t m, size_t n, size_t *i0, size_t *rows, size_t max);

#endif
