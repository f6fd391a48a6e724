/* Stochastic-rounding stream ids (stream.h): the packing keeps the values of the packing ufp4 used
 * before it had a name, distinct tuples within range get distinct streams, and a configuration
 * whose tuples would wrap onto another's stream (rank 1024, layer 4096, expert 2048, too many
 * micro-batches) is refused by the check, the linear layer and the trainer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "train_test_util.h"
#include "ufp4/error.h"
#include "ufp4/linear.h"
#include "ufp4/model.h"
#include "ufp4/stream.h"
#include "ufp4/train.h"

/* The packing as llama.c, moe.c and qlinear.c wrote it by hand: the model's stream_base, plus
 * e << 50 for expert e, shifted left by 3 and plus the operand. */
static uint64_t old_stream(uint64_t batch, uint64_t rank, uint64_t layer, uint64_t expert,
                           uint64_t proj, uint64_t op) {
  uint64_t base = ((batch * 1024 + rank) * 4096 + layer) * 8 + proj;
  base += expert << 50;
  return (base << 3) + op;
}

static ufp4_stream_id id_of(uint64_t step, uint32_t micro, uint32_t micro_steps, uint32_t rank,
                            uint32_t layer, uint32_t expert, uint32_t proj, uint32_t op) {
  ufp4_stream_id id = {.seed = 1, .step = step, .micro = micro, .micro_steps = micro_steps,
                       .rank = rank, .layer = layer, .expert = expert, .proj = proj, .operand = op};
  return id;
}

/* Every field at its boundaries (and a few inner values): same 64-bit value as the old packing
 * wherever the id passes the check. */
static void test_value_is_the_old_packing(void **state) {
  (void)state;
  const uint64_t steps[] = {0, 1, 2, 12345, (UINT64_C(1) << 25) - 1, (UINT64_C(1) << 34) - 1};
  const uint32_t ranks[] = {0, 1, 513, 1023}, layers[] = {0, 1, 77, 4095};
  const uint32_t experts[] = {0, 1, 3, 1024, 2047};
  size_t checked = 0;
  for (size_t s = 0; s < sizeof steps / sizeof *steps; s++)
    for (size_t r = 0; r < 4; r++)
      for (size_t l = 0; l < 4; l++)
        for (size_t e = 0; e < 5; e++)
          for (uint32_t proj = 0; proj < 8; proj++)
            for (uint32_t op = 0; op < 8; op++) {
              ufp4_stream_id id = id_of(steps[s], 0, 1, ranks[r], layers[l], experts[e], proj, op);
              if (ufp4_stream_check(&id)) continue;
              uint64_t want = old_stream(steps[s], ranks[r], layers[l], experts[e], proj, op);
              assert_true(ufp4_stream_value(&id) == want);
              checked++;
            }
  assert_true(checked > 4 * 4 * 5 * 8 * 8 * 4); /* most of the grid is in range */
  /* With gradient accumulation the trainer passes step * accum + micro as the model's step. */
  ufp4_stream_id id = id_of(41, 2, 3, 5, 6, 0, 4, 2);
  assert_int_equal(ufp4_stream_check(&id), 0);
  assert_true(ufp4_stream_batch(&id) == 41 * 3 + 2);
  assert_true(ufp4_stream_value(&id) == old_stream(41 * 3 + 2, 5, 6, 0, 4, 2));
  /* The seed keys Philox; it is not packed. */
  ufp4_stream_id other = id;
  other.seed = 99;
  assert_true(ufp4_stream_value(&other) == ufp4_stream_value(&id));
}

/* The collisions the old packing allowed, and the check refusing each of them. */
static void test_old_packing_collided(void **state) {
  (void)state;
  /* Rank 1024 drew rank 0's bits one micro-batch later. */
  assert_true(old_stream(7, 1024, 3, 0, 2, 1) == old_stream(8, 0, 3, 0, 2, 1));
  ufp4_stream_id id = id_of(7, 0, 1, 1024, 3, 0, 2, 1);
  assert_int_equal(ufp4_stream_check(&id), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "rank 1024"));
  id.rank = 1023;
  assert_int_equal(ufp4_stream_check(&id), 0);
  /* Layer 4096 drew the next rank's layer 0. */
  assert_true(old_stream(0, 0, 4096, 0, 0, 0) == old_stream(0, 1, 0, 0, 0, 0));
  id = id_of(0, 0, 1, 0, 4096, 0, 0, 0);
  assert_int_equal(ufp4_stream_check(&id), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "layer 4096"));
  /* Expert 2048 drew expert 0's. */
  assert_true(old_stream(5, 0, 0, 2048, 4, 0) == old_stream(5, 0, 0, 0, 4, 0));
  id = id_of(5, 0, 1, 0, 0, 2048, 4, 0);
  assert_int_equal(ufp4_stream_check(&id), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "expert 2048"));
  /* Projection and operand fields of 3 bits. */
  id = id_of(0, 0, 1, 0, 0, 0, 8, 0);
  assert_int_equal(ufp4_stream_check(&id), UFP4_EINVAL);
  id = id_of(0, 0, 1, 0, 0, 0, 0, 8);
  assert_int_equal(ufp4_stream_check(&id), UFP4_EINVAL);
  /* With experts, micro-batch 2^25 of expert 0 drew expert 1's bits of micro-batch 0. */
  const uint64_t moe_batches = UINT64_C(1) << 25;
  assert_true(old_stream(moe_batches, 0, 0, 0, 4, 0) == old_stream(0, 0, 0, 1, 4, 0));
  id = id_of(moe_batches, 0, 1, 0, 0, 1, 4, 0);
  assert_int_equal(ufp4_stream_check(&id), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "expert"));
  id.step = moe_batches - 1;
  assert_int_equal(ufp4_stream_check(&id), 0);
  /* Without experts the micro-batch index has 34 bits: past them the streams would reach the
   * ASCII-tagged ones under the same seed, "INIT" << 32 (weight init) first. */
  assert_true(old_stream(UINT64_C(0x494e4954) << 4, 0, 0, 0, 0, 0) == UINT64_C(0x494e4954) << 32);
  id = id_of(moe_batches, 0, 1, 0, 0, 0, 4, 0);
  assert_int_equal(ufp4_stream_check(&id), 0);
  id.step = UINT64_C(1) << 34;
  assert_int_equal(ufp4_stream_check(&id), UFP4_EINVAL);
  /* step * micro_steps + micro must not overflow, and micro stays below micro_steps. */
  id = id_of(UINT64_MAX / 2 + 1, 1, 2, 0, 0, 0, 0, 0);
  assert_int_equal(ufp4_stream_check(&id), UFP4_EINVAL);
  id = id_of(3, 2, 2, 0, 0, 0, 0, 0);
  assert_int_equal(ufp4_stream_check(&id), UFP4_EINVAL);
  assert_int_equal(ufp4_stream_check(NULL), UFP4_EINVAL);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Values of n ids, sorted: fails on a repeat. */
static void assert_distinct(uint64_t *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_u64);
  for (size_t i = 1; i < n; i++)
    if (v[i] == v[i - 1]) fail_msg("stream value 0x%llx repeats", (unsigned long long)v[i]);
}

/* Exhaustive over small ranges: 8 values of every field but the expert (4), all distinct. */
static void test_distinct_small_ranges(void **state) {
  (void)state;
  const size_t n = (size_t)8 * 8 * 8 * 8 * 8 * 4;
  uint64_t *v = malloc(n * sizeof *v);
  size_t i = 0;
  for (uint32_t b = 0; b < 8; b++)
    for (uint32_t r = 0; r < 8; r++)
      for (uint32_t l = 0; l < 8; l++)
        for (uint32_t e = 0; e < 4; e++)
          for (uint32_t p = 0; p < 8; p++)
            for (uint32_t op = 0; op < 8; op++) {
              ufp4_stream_id id = id_of(b / 2, b % 2, 2, r, l, e, p, op);
              v[i++] = ufp4_stream_value(&id);
            }
  assert_distinct(v, n);
  free(v);
}

/* Each field's boundary values (0, 1, last - 1, last) against the largest maxima the check
 * accepts, with and without experts: all distinct. */
static void check_boundaries(uint64_t last_step, uint32_t last_expert) {
  const uint32_t ms = 3;
  const ufp4_stream_id max = id_of(last_step, ms - 1, ms, 1023, 4095, last_expert, 7, 7);
  assert_int_equal(ufp4_stream_check(&max), 0);
  ufp4_stream_id past = max;
  past.step++;
  assert_int_equal(ufp4_stream_check(&past), UFP4_EINVAL); /* the largest accepted step */
  const uint64_t steps[] = {0, 1, last_step - 1, last_step};
  const uint32_t ranks[] = {0, 1, 1022, 1023}, layers[] = {0, 1, 4094, 4095};
  const uint32_t experts[] = {0, 1, last_expert - 1, last_expert};
  const int n_experts = last_expert ? 4 : 1;
  const size_t n = (size_t)4 * ms * 4 * 4 * (size_t)n_experts * 4 * 4;
  uint64_t *v = malloc(n * sizeof *v);
  const uint32_t small[] = {0, 1, 6, 7};
  size_t i = 0;
  for (int s = 0; s < 4; s++)
    for (uint32_t mi = 0; mi < ms; mi++)
      for (int r = 0; r < 4; r++)
        for (int l = 0; l < 4; l++)
          for (int e = 0; e < n_experts; e++)
            for (int p = 0; p < 4; p++)
              for (int o = 0; o < 4; o++) {
                ufp4_stream_id id =
                    id_of(steps[s], mi, ms, ranks[r], layers[l], experts[e], small[p], small[o]);
                v[i++] = ufp4_stream_value(&id);
              }
  assert_distinct(v, n);
  free(v);
}

static void test_distinct_at_boundaries(void **state) {
  (void)state;
  /* Micro-batch indices below 2^34 (dense) or 2^25 (experts), 3 micro-batches per step. */
  check_boundaries(((UINT64_C(1) << 34) - 3) / 3, 0);
  check_boundaries(((UINT64_C(1) << 25) - 3) / 3, 2047);
}

/* The model's run check: a world of 1025 ranks is refused, 1024 is not. */
static void test_model_refuses_rank_1024(void **state) {
  (void)state;
  ufp4_model_config c = ufp4_model_config_default();
  assert_int_equal(ufp4_model_check_streams(&c, 1000, 4, 1024), 0);
  assert_int_equal(ufp4_model_check_streams(&c, 1000, 4, 1025), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "rank 1024"));
  assert_int_equal(ufp4_model_check_streams(&c, 0, 4, 2), UFP4_EINVAL);
  /* With experts the micro-batches are fewer: 2^25 pass, one more does not. */
  c.moe_experts = 4;
  c.moe_top_k = 2;
  c.moe_ffn = 32;
  ufp4_model_config_resolve(&c);
  assert_int_equal(ufp4_model_check_streams(&c, UINT64_C(1) << 24, 2, 8), 0);
  assert_int_equal(ufp4_model_check_streams(&c, (UINT64_C(1) << 24) + 1, 2, 8), UFP4_EINVAL);
}

/* A quantized GEMM under stochastic rounding refuses a stream that does not fit (it used to draw
 * another rank's bits). */
static void test_linear_refuses_rank_1024(void **state) {
  (void)state;
  enum { N = 16, IN = 16, OUT = 16 };
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("e2m1,sr=all,rht=none", &r), 0);
  float X[N * IN], W[OUT * IN], Y[N * OUT];
  for (int i = 0; i < N * IN; i++) X[i] = W[i] = (float)(i % 7) - 3.0f;
  float *scratch = malloc(ufp4_linear_scratch_floats(N, IN, OUT) * sizeof(float));
  ufp4_linear_ctx ctx = {.recipe = &r, .stream = {.seed = 1, .rank = 1023}};
  assert_int_equal(ufp4_linear_forward(&ctx, X, W, Y, N, IN, OUT, scratch), 0);
  ctx.stream.rank = 1024;
  assert_int_equal(ufp4_linear_forward(&ctx, X, W, Y, N, IN, OUT, scratch), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "rank 1024"));
  /* Round-to-nearest operands draw no random bits, so their stream need not fit. */
  assert_int_equal(ufp4_recipe_parse("e2m1,sr=none,rht=none", &r), 0);
  assert_int_equal(ufp4_linear_forward(&ctx, X, W, Y, N, IN, OUT, scratch), 0);
  free(scratch);
}

/* The trainer refuses a world of 1025 before it starts (or launches) anything. */
static void test_train_refuses_world_1025(void **state) {
  (void)state;
  const train_synth s = {.batch = 2, .seq = 8, .vocab = 16, .seed = 1, .mul = 3, .add = 1};
  ufp4_train_config c = train_tiny_config("/nonexistent/ufp4_stream_test", "e2m1", &s, 2);
  c.world = 1025;
  c.rank = 0;
  ufp4_data_source data = {0};
  ufp4_train_result res;
  assert_int_equal(ufp4_train(&c, &data, 0, &res), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "rank 1024"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_value_is_the_old_packing), cmocka_unit_test(test_old_packing_collided),
      cmocka_unit_test(test_distinct_small_ranges),    cmocka_unit_test(test_distinct_at_boundaries),
      cmocka_unit_test(test_model_refuses_rank_1024),  cmocka_unit_test(test_linear_refuses_rank_1024),
      cmocka_unit_test(test_train_refuses_world_1025),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
