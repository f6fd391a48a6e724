/* E4M3, bfloat16, binary16 and E8M0 conversions (see include/ufp4/minifloat.h).
 *
 * Every conversion works on the float's bit pattern with integer arithmetic, so the result never
 * depends on the floating-point environment (rounding mode, flush-to-zero).
 * Policy details beyond the header: E4M3 encode saturates +-Inf to +-448 like finite overflow (PTX
 * .satfinite clamps infinities too); NaN of either sign encodes to 0x7F. ufp4_e8m0_scale reads a
 * negative amax as |amax|. */
#include "ufp4/minifloat.h"

#include <math.h>
#include <string.h>

static inline uint32_t f2u(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static inline float u2f(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* Round the unsigned integer v / 2^shift to nearest, ties to even. shift in [1, 31]. */
static inline uint32_t rne_shift(uint32_t v, int shift) {
  uint32_t q = v >> shift;
  uint32_t rem = v & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  return q + (rem > half || (rem == half && (q & 1u)));
}

uint8_t ufp4_f32_to_e4m3(float x) {
  uint32_t u = f2u(x);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  if (a >= 0x43E00000u) return sign | 0x7E; /* |x| >= 448 (and Inf) */
  uint32_t e = a >> 23;
  if (e >= 127 - 6) {
    /* E4M3 normal: keep 3 of the 23 mantissa bits; a carry out of the mantissa correctly bumps
     * the exponent, and |x| < 448 keeps the result <= 0x7E. */
    uint32_t r = rne_shift(a, 20);
    return sign | (uint8_t)(r - ((127u - 7u) << 3));
  }
  /* E4M3 subnormal m * 2^-9: m = round(sig * 2^(e-150) * 2^9) = round(sig / 2^(141-e)). m = 8
   * is the smallest normal, code 0x08, so the carry needs no special case. Float denormals and
   * anything below 2^-11 round to 0 (shift >= 26 makes sig / 2^shift < 1/4). */
  if (e == 0) return sign;
  int shift = 141 - (int)e;
  if (shift >= 26) return sign;
  uint32_t sig = (a & 0x7FFFFFu) | 0x800000u;
  return sign | (uint8_t)rne_shift(sig, shift);
}

float ufp4_e4m3_to_f32(uint8_t code) {
  int neg = code & 0x80;
  int e = (code >> 3) & 0xF;
  int m = code & 7;
  float v;
  if (e == 15 && m == 7)
    v = NAN;
  else if (e == 0)
    v = ldexpf((float)m, -9);
  else
    v = ldexpf((float)(8 + m), e - 10);
  return neg ? -v : v;
}

uint16_t ufp4_f32_to_bf16_bits(float x) {
  uint32_t u = f2u(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* keep NaN quiet */
  /* Rounding can carry into the exponent, and from the largest finite into Inf, as IEEE RNE does. */
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float ufp4_round_bf16(float x) { return u2f((uint32_t)ufp4_f32_to_bf16_bits(x) << 16); }

uint16_t ufp4_f32_to_f16_bits(float x) {
  uint32_t u = f2u(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u | (uint16_t)((a >> 13) & 0x01FFu); /* quiet NaN */
  if (a >= 0x477FF000u) return sign | 0x7C00u; /* >= 65520 = 65504 + half an ulp: ties go to Inf */
  if (a < 0x38800000u) {
    /* Below 2^-14 the result is a binary16 subnormal q * 2^-24, q = round(|x| * 2^24). */
    uint32_t e = a >> 23;
    if (e < 102) return sign; /* |x| < 2^-25: rounds to zero (a tie is impossible) */
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    /* |x| * 2^24 = m * 2^(e - 126); shift in [14, 24]. q = 0x400 is the smallest normal, correctly
     * encoded. */
    return sign | (uint16_t)rne_shift(m, 126 - (int)e);
  }
  /* Rebias 127 -> 15 and round the 13 dropped bits to nearest even; a carry bumps the exponent. */
  a = a - 0x38000000u + 0x0FFFu + ((a >> 13) & 1u);
  return sign | (uint16_t)(a >> 13);
}

float ufp4_f16_bits_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return u2f(sign | 0x7F800000u | (m << 13));
  if (e != 0) return u2f(sign | ((e + 112u) << 23) | (m << 13));
  return u2f(f2u((float)m * 0x1p-24f) | sign); /* subnormal (or zero): exact in float */
}

float ufp4_e8m0_to_f32(uint8_t code) {
  if (code == 255) return NAN;
  if (code == 0) return u2f(0x00400000u); /* 2^-127, a float denormal */
  return u2f((uint32_t)code << 23);
}

uint8_t ufp4_e8m0_scale(float amax, const ufp4_grid *g, ufp4_e8m0_rule rule) {
  if (!g) return 255;
  uint32_t u = f2u(amax) & 0x7FFFFFFFu;
  if (u >= 0x7F800000u) return 255;
  if (u == 0) return 0;
  int unbiased;
  switch (rule) {
    case UFP4_E8M0_CEIL:
      unbiased = (int)(u >> 23) - 127 + ((u & 0x7FFFFFu) != 0) - g->emax;
      break;
    case UFP4_E8M0_EVEN: {
      /* Half-up rounding of the mantissa to mbits bits; the mask drops the mantissa. A carry may
       * reach the Inf exponent field (255), which then reads as 2^128 like torchao does. */
      uint32_t r = (u + (1u << (23 - g->mbits - 1))) & 0xFF800000u;
      unbiased = (int)(r >> 23) - 127 - g->emax;
      break;
    }
    case UFP4_E8M0_RCEIL: {
      uint32_t d = f2u(fabsf(amax) * (1.0f / g->g_max));
      uint32_t de = d >> 23, dm = d & 0x7FFFFFu;
      /* An fp32 denormal descale lies in (0, 2^-126): E8M0 code 0 is 2^-127 (mantissa 0x400000),
       * so it rounds up to code 1 only above that. */
      int biased = de ? (int)de + (dm != 0) : (dm > 0x400000u);
      unbiased = biased - 127;
      break;
    }
    case UFP4_E8M0_FLOOR:
    default:
      unbiased = (int)(u >> 23) - 127 - g->emax;
      break;
  }
  if (unbiased < -127) unbiased = -127;
  if (unbiased > 127) unbiased = 127;
  return (uint8_t)(unbiased + 127);
}
