/* The data loader on a synthetic shard whose token i is i % 60000, so every row names its
 * window. Checks: rows are the shard's tokens; each epoch is a permutation (independently:
 * every window at most once, all ranks together cover batches*B*W distinct windows); ranks are
 * disjoint; the order matches a Fisher-Yates reference written here from the header's rule;
 * determinism, seed and epoch dependence, random access; the validation loader's order and end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tok_test_util.h"
#include "ufp4/error.h"
#include "ufp4/loader.h"
#include "ufp4/philox.h"

enum { NTOK = 200001, VOCAB = 60000 };
static char dir[4096], path[4200];

static ufp4_loader *open_loader(size_t B, size_t T, uint64_t seed, uint32_t rank, uint32_t world, int shuffle) {
  ufp4_loader_config c = {B, T, seed, rank, world, shuffle};
  ufp4_loader *l;
  assert_int_equal(ufp4_loader_open(path, &c, &l), 0);
  return l;
}

static void rows_are_windows(void **state) {
  (void)state;
  size_t B = 4, T = 64;
  ufp4_loader *l = open_loader(B, T, 42, 0, 1, 1);
  uint64_t nw = (NTOK - 1) / T;
  assert_int_equal(ufp4_loader_batches_per_epoch(l), nw / B);
  uint32_t *buf = malloc(B * (T + 1) * sizeof *buf);
  for (uint64_t step = 0; step < 50; step++) {
    assert_int_equal(ufp4_loader_next(l, buf), 0);
    for (size_t b = 0; b < B; b++) {
      uint64_t w = ufp4_loader_window(l, step, b);
      assert_true(w < nw);
      for (size_t t = 0; t <= T; t++) assert_int_equal(buf[b * (T + 1) + t], (w * T + t) % VOCAB);
    }
  }
  free(buf);
  ufp4_loader_free(l);
}

static void epochs_and_ranks(void **state) {
  (void)state;
  size_t B = 3, T = 100;
  uint32_t W = 4;
  uint64_t nw = (NTOK - 1) / T; /* 2000 windows: 500 per rank, 166 batches of 3 */
  uint8_t *seen = calloc(nw, 1);
  for (uint64_t epoch = 0; epoch < 3; epoch++) {
    memset(seen, 0, nw);
    size_t count = 0;
    for (uint32_t r = 0; r < W; r++) {
      ufp4_loader *l = open_loader(B, T, 7, r, W, 1);
      uint64_t bpe = ufp4_loader_batches_per_epoch(l);
      assert_int_equal(bpe, (nw / W) / B);
      for (uint64_t k = 0; k < bpe; k++)
        for (size_t b = 0; b < B; b++) {
          uint64_t w = ufp4_loader_window(l, epoch * bpe + k, b);
          if (seen[w]) fail_msg("epoch %llu: window %llu read twice", (unsigned long long)epoch, (unsigned long long)w);
          seen[w] = 1;
          count++;
        }
      ufp4_loader_free(l);
    }
    assert_int_equal(count, (nw / W) / B * B * W);
  }
  free(seen);
}

/* The header's rule, spelled out: Fisher-Yates from the top with j = u32 * (i+1) >> 32, then rank
 * r of W takes positions (k*B + b)*W + r. */
static void matches_reference_shuffle(void **state) {
  (void)state;
  size_t B = 2, T = 1000;
  uint32_t W = 3;
  uint64_t nw = (NTOK - 1) / T, seed = 12345;
  uint64_t *perm = malloc(nw * sizeof *perm);
  for (uint64_t epoch = 0; epoch < 2; epoch++) {
    for (uint64_t i = 0; i < nw; i++) perm[i] = i;
    for (uint64_t i = nw - 1; i > 0; i--) {
      uint64_t j = ((uint64_t)ufp4_philox_u32(seed, epoch, i) * (i + 1)) >> 32, t = perm[i];
      perm[i] = perm[j], perm[j] = t;
    }
    for (uint32_t r = 0; r < W; r++) {
      ufp4_loader *l = open_loader(B, T, seed, r, W, 1);
      uint64_t bpe = ufp4_loader_batches_per_epoch(l);
      for (uint64_t k = 0; k < bpe; k++)
        for (size_t b = 0; b < B; b++)
          assert_int_equal(ufp4_loader_window(l, epoch * bpe + k, b), perm[(k * B + b) * W + r]);
      ufp4_loader_free(l);
    }
  }
  free(perm);
}

static void deterministic_and_seeded(void **state) {
  (void)state;
  size_t B = 2, T = 50;
  ufp4_loader *a = open_loader(B, T, 1, 0, 1, 1), *b = open_loader(B, T, 1, 0, 1, 1), *c = open_loader(B, T, 2, 0, 1, 1);
  uint64_t bpe = ufp4_loader_batches_per_epoch(a);
  uint32_t *x = malloc(B * (T + 1) * 4), *y = malloc(B * (T + 1) * 4);
  int differ_seed = 0, differ_epoch = 0;
  for (uint64_t s = 0; s < 20; s++) {
    assert_int_equal(ufp4_loader_next(a, x), 0);
    assert_int_equal(ufp4_loader_batch(b, s, y), 0); /* random access == sequential */
    assert_memory_equal(x, y, B * (T + 1) * 4);
    differ_seed |= ufp4_loader_window(a, s, 0) != ufp4_loader_window(c, s, 0);
    differ_epoch |= ufp4_loader_window(a, s, 0) != ufp4_loader_window(a, bpe + s, 0);
  }
  assert_true(differ_seed);
  assert_true(differ_epoch);
  /* epochs roll over */
  ufp4_loader *d = open_loader(B, T, 1, 0, 1, 1);
  for (uint64_t s = 0; s < bpe; s++) assert_int_equal(ufp4_loader_next(d, x), 0);
  assert_int_equal(ufp4_loader_epoch(d), 1);
  free(x);
  free(y);
  ufp4_loader_free(a);
  ufp4_loader_free(b);
  ufp4_loader_free(c);
  ufp4_loader_free(d);
}

static void validation_order(void **state) {
  (void)state;
  size_t B = 5, T = 333;
  uint32_t W = 2;
  uint64_t nw = (NTOK - 1) / T; /* 600 windows, 300 per rank, 60 batches */
  uint32_t *x = malloc(B * (T + 1) * 4);
  for (uint32_t r = 0; r < W; r++) {
    ufp4_loader *l = open_loader(B, T, 0, r, W, 0);
    uint64_t bpe = ufp4_loader_batches_per_epoch(l);
    assert_int_equal(bpe, nw / W / B);
    for (int pass = 0; pass < 2; pass++) {
      for (uint64_t k = 0; k < bpe; k++) {
        assert_int_equal(ufp4_loader_next(l, x), 0);
        for (size_t b = 0; b < B; b++) {
          uint64_t w = (k * B + b) * W + r;
          assert_int_equal(x[b * (T + 1)], (w * T) % VOCAB);
          assert_int_equal(x[b * (T + 1) + T], (w * T + T) % VOCAB);
        }
      }
      assert_int_equal(ufp4_loader_next(l, x), 1); /* end of the pass */
    }
    ufp4_loader_free(l);
  }
  free(x);
}

static void bad_configurations(void **state) {
  (void)state;
  ufp4_loader *l;
  ufp4_loader_config c = {4, 64, 0, 2, 2, 1};
  assert_int_equal(ufp4_loader_open(path, &c, &l), UFP4_EINVAL); /* rank >= world */
  c = (ufp4_loader_config){100000, 64, 0, 0, 1, 1};
  assert_int_equal(ufp4_loader_open(path, &c, &l), UFP4_EINVAL); /* not one batch */
  assert_non_null(strstr(ufp4_last_error(), path));
  char missing[4300];
  snprintf(missing, sizeof missing, "%s/none.tok", dir);
  c = (ufp4_loader_config){1, 8, 0, 0, 1, 1};
  assert_int_equal(ufp4_loader_open(missing, &c, &l), UFP4_EIO);
  assert_non_null(strstr(ufp4_last_error(), missing));
}

int main(void) {
  tt_mkdtemp(dir, sizeof dir, "loader");
  snprintf(path, sizeof path, "%s/synthetic.tok", dir);
  ufp4_shard_info info = {.tokenizer_id = 2, .vocab_size = VOCAB};
  ufp4_shard_writer *w;
  uint32_t *ids = malloc(NTOK * sizeof *ids);
  for (uint32_t i = 0; i < NTOK; i++) ids[i] = i % VOCAB;
  if (ufp4_shard_writer_open(path, &info, &w) || ufp4_shard_writer_append(w, ids, NTOK) ||
      ufp4_shard_writer_commit(w, 1)) {
    fprintf(stderr, "cannot write %s: %s\n", path, ufp4_last_error());
    return 1;
  }
  free(ids);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rows_are_windows),          cmocka_unit_test(epochs_and_ranks),
      cmocka_unit_test(matches_reference_shuffle), cmocka_unit_test(deterministic_and_seeded),
      cmocka_unit_test(validation_order),          cmocka_unit_test(bad_configurations),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  tt_rmdir(dir);
  return rc;
}
