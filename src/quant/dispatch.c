/* The choice of quantization kernels (quant_internal.h): the one place that knows which kernel
 * families exist. The AVX2 family is compiled only on x86-64 builds with UFP4_SIMD=ON
 * (UFP4_HAVE_X86) and runs only when ufp4_simd_enabled() (AVX2 and FMA, UFP4_NO_SIMD unset);
 * everything else runs the scalar reference of block_quant.c. */
#include "quant/quant_internal.h"

#ifdef UFP4_HAVE_X86
/* Applies the 16-point RHT of 1x16 blocks in registers (the band and the tensor amax). */
static const ufp4_q_kernels avx2_kernels = {
    .amax_finite = ufp4_q_amax_finite_avx2,
    .amax_finite_rht16 = ufp4_q_amax_finite_rht16_avx2,
    .fill_rbits = ufp4_q_fill_rbits_avx2,
    .band = ufp4_q_band_avx2,
    .fuses_rht16 = 1,
    .rht_simd = 1,
    .cols_band = ufp4_q_cols_band_avx2,
    .cols_rounds = 1u << UFP4_ROUND_RNE | 1u << UFP4_ROUND_SR,
    .amax_cols_rht16 = ufp4_q_amax_cols_rht16_avx2,
};
#endif

/* The families with their random bits replaced, while a test's hook is installed. */
static ufp4_q_fill_rbits_fn rbits_hook;
static ufp4_q_kernels hooked_reference;
#ifdef UFP4_HAVE_X86
static ufp4_q_kernels hooked_avx2;
#endif

void ufp4_q_test_set_rbits_hook(ufp4_q_fill_rbits_fn fill) {
  hooked_reference = ufp4_q_reference_kernels;
  hooked_reference.fill_rbits = fill;
#ifdef UFP4_HAVE_X86
  hooked_avx2 = avx2_kernels;
  hooked_avx2.fill_rbits = fill;
#endif
  rbits_hook = fill;
}

const ufp4_q_kernels *ufp4_q_kernels_pick(void) {
#ifdef UFP4_HAVE_X86
  if (ufp4_simd_enabled()) return rbits_hook ? &hooked_avx2 : &avx2_kernels;
#endif
  return rbits_hook ? &hooked_reference : &ufp4_q_reference_kernels;
}

int ufp4_quantize(const ufp4_qformat *f, const float *x, size_t rows, size_t cols, ufp4_qtensor *q) {
  return ufp4_q_quantize(f, x, rows, cols, q, ufp4_q_kernels_pick());
}

int ufp4_fake_quant(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols) {
  return ufp4_q_fake_quant(f, x, y, rows, cols, ufp4_q_kernels_pick());
}

int ufp4_fake_quant_t(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols) {
  return ufp4_q_fake_quant_t(f, x, y, rows, cols, ufp4_q_kernels_pick());
}
