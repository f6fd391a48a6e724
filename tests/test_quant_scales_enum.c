/* The AVX2 1x16 kernel's block scales (scales_mx in src/quant/x86/quant_avx2.c) against the
 * scalar rule that is the specification (ufp4_q_block_scale in src/quant/block_quant.c), by
 * enumeration. The two are separate implementations (the vector one works on bit patterns, 8
 * blocks at once, for speed), so this test is what keeps them one rule.
 *
 * For every grid, every E8M0 rule and NVFP4 at several tensor factors, both run on a dense sweep
 * of the finite floats >= 0: every exponent, and in each exponent every mantissa whose low 17 bits
 * are 0, 1 or all ones (the rounding points of E4M3 at bit 20 and of E8M0-EVEN at bits 20-21 lie
 * there, with their neighbours) plus every 521st mantissa. Where the kernel accepts a group of 8
 * (returns 1), each block's scale, encode factor and stored bits must be the scalar ones bit for
 * bit, and the kernel must accept exactly the groups whose 8 blocks the scalar rule encodes by
 * multiplication. Exits 77 (skip) without the x86 kernels or on a CPU without AVX2. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "quant/quant_internal.h"

#ifdef UFP4_HAVE_X86

static float bits_f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static int same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Runs one group of 8 amax values through both rules; returns 1 on agreement. */
static int check_group(const ufp4_qjob *j, const float amax[8]) {
  float sc[8], en[8];
  uint8_t bits[8];
  const int ok = ufp4_q_scales8_avx2(j, amax, sc, en, bits);
  int all_mul = 1;
  for (int b = 0; b < 8; b++) {
    const blk_scale s = ufp4_q_block_scale(j, amax[b], 0);
    all_mul &= s.mode == BLK_MUL;
    if (ok && (s.mode != BLK_MUL || !same(s.scale, sc[b]) || !same(s.enc, en[b]) || s.bits != bits[b])) {
      print_error("scale %d grid %d s_enc %a amax %a: scalar (mode %d, %a, %a, 0x%02x), AVX2 (%a, %a, 0x%02x)\n",
                  (int)j->f->scale, (int)j->f->grid, (double)j->s_enc, (double)amax[b], (int)s.mode,
                  (double)s.scale, (double)s.enc, s.bits, (double)sc[b], (double)en[b], bits[b]);
      return 0;
    }
  }
  if (ok != all_mul) {
    print_error("scale %d grid %d s_enc %a from amax %a: AVX2 %s the group, the scalar rule %s\n",
                (int)j->f->scale, (int)j->f->grid, (double)j->s_enc, (double)amax[0],
                ok ? "accepts" : "refuses", all_mul ? "multiplies every block" : "does not");
    return 0;
  }
  return 1;
}

/* Adds amax = bits_f(e << 23 | m) to the group, checking the group when it is full. */
static void push(const ufp4_qjob *j, float amax[8], int *n, size_t *groups, uint32_t e, uint32_t m) {
  const uint32_t u = e << 23 | m;
  if (u == 0) return; /* an all-zero block is the scalar route's by design */
  amax[(*n)++] = bits_f(u);
  if (*n < 8) return;
  if (!check_group(j, amax)) fail();
  *n = 0;
  (*groups)++;
}

/* The sweep for one format; returns the number of groups checked. */
static size_t sweep(ufp4_qjob *j) {
  float amax[8];
  int n = 0;
  size_t groups = 0;
  const uint32_t lows[] = {0, 1, 0x1FFFF};
  for (uint32_t e = 0; e < 255; e++) {
    for (uint32_t hi = 0; hi < (1u << 6); hi++)
      for (int l = 0; l < 3; l++) push(j, amax, &n, &groups, e, hi << 17 | lows[l]);
    for (uint32_t m = 521; m < (1u << 23); m += 521) push(j, amax, &n, &groups, e, m);
  }
  return groups;
}

static void test_scales_match_by_enumeration(void **state) {
  (void)state;
  if (!ufp4_simd_enabled()) skip();
  const float s_encs[] = {1.0f, UFP4_E4M3_MAX * 6.0f / 3.7f, 0x1p-20f, 0x1p+40f};
  size_t groups = 0;
  for (int g = 0; g < UFP4_GRID_COUNT; g++)
    for (int k = UFP4_SCALE_NVFP4; k < UFP4_SCALE_COUNT; k++) {
      const int n_enc = k == UFP4_SCALE_NVFP4 ? (int)(sizeof s_encs / sizeof *s_encs) : 1;
      for (int i = 0; i < n_enc; i++) {
        ufp4_qformat f;
        memset(&f, 0, sizeof f);
        f.grid = (ufp4_grid_id)g;
        f.scale = (ufp4_scale_kind)k;
        f.block = 16;
        ufp4_qjob j;
        memset(&j, 0, sizeof j);
        j.f = &f;
        j.g = ufp4_grid_get(f.grid);
        j.s_enc = s_encs[i];
        groups += sweep(&j);
      }
    }
  print_message("%zu groups of 8 block scales agree\n", groups);
}

int main(void) {
  if (!ufp4_simd_enabled()) {
    fprintf(stderr, "test_quant_scales_enum: no AVX2/FMA or UFP4_NO_SIMD set; nothing to compare\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_scales_match_by_enumeration)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void) {
  fprintf(stderr, "test_quant_scales_enum: built without the x86 kernels; nothing to compare\n");
  return 77;
}

#endif
