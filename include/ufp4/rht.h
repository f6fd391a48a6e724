/* Random Hadamard Transform, applied block-diagonally along rows.
 *
 * H_1 = [1], H_2n = (1/sqrt 2) [[H_n, H_n], [H_n, -H_n]] (orthonormal, symmetric). With a sign
 * diagonal S, H' = S H is orthogonal, and (X H')(W H')^T = X W^T exactly in real arithmetic.
 * ufp4 applies H' to each consecutive chunk of n elements of a row: x <- x S H, i.e. the signs
 * first, then the fast Walsh-Hadamard transform scaled by 1/sqrt(n). */
#ifndef UFP4_RHT_H
#define UFP4_RHT_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

#define UFP4_RHT_MIN 2
#define UFP4_RHT_MAX 256

/* NVIDIA's fixed 16-entry sign vector (Transformer Engine NVFP4 recipe). */
extern const float ufp4_rht_signs_nvidia16[16];

/* In-place orthonormal FWHT of one block of n floats (n a power of two, 1..UFP4_RHT_MAX; any
 * other n leaves x untouched). Butterflies unscaled, then one multiply by 1/sqrt(n) rounded to
 * float (exact for n a power of 4, e.g. 0.25 for n = 16). */
void ufp4_fwht(float *x, int n);
/* n random signs from Philox (seed, stream 0x5248545349474e53 "RHTSIGNS", index i). */
void ufp4_rht_signs_random(float *signs, int n, uint64_t seed);
/* x <- x S H on every n-chunk of every row; cols must be a multiple of n. signs NULL = all +1.
 * Returns 0 or UFP4_EINVAL. */
int ufp4_rht_rows(float *x, size_t rows, size_t cols, int n, const float *signs);
/* The inverse: x <- x H S. */
int ufp4_rht_rows_inverse(float *x, size_t rows, size_t cols, int n, const float *signs);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
