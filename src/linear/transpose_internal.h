/* Operand copies of the linear layer with bf16 rounding fused in (transpose.c). Rounding is
 * elementwise, so rounding on the way gives the bits of ufp4_round_bf16 applied afterwards. */
#ifndef UFP4_GEMM_TRANSPOSE_INTERNAL_H
#define UFP4_GEMM_TRANSPOSE_INTERNAL_H

#include <stddef.h>

/* dst[i] = ufp4_round_bf16(src[i]) for i < n. */
void ufp4_round_bf16_copy(const float *src, float *dst, size_t n);
/* dst [cols, rows] = ufp4_round_bf16(src [rows, cols])^T. */
void ufp4_transpose_round_bf16(const float *src, float *dst, size_t rows, size_t cols);

#endif
