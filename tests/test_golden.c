/* The parity kit's library parts: SHA-256 against FIPS 180-4's published vectors, each format's
 * recipe provenance against the recipes themselves, and the writer's refusals. The kit's contents
 * are checked by tests/test_parity_kit.py (regeneration, the Python checker, hand-computed ties). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/golden.h"
#include "ufp4/recipe.h"

static void test_sha256_vectors(void **state) {
  (void)state;
  char hex[65];
  assert_int_equal(ufp4_sha256_hex("", 0, hex), 0);
  assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  assert_int_equal(ufp4_sha256_hex("abc", 3, hex), 0);
  assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 448 bits: two blocks */
  assert_int_equal(ufp4_sha256_hex(two, strlen(two), hex), 0);
  assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  /* A file hashes like its bytes; a missing one is an error naming it. */
  char path[] = "/tmp/ufp4_golden_sha_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "abc", 3), 3);
  close(fd);
  assert_int_equal(ufp4_sha256_file(path, hex), 0);
  assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  unlink(path);
  assert_int_not_equal(ufp4_sha256_file(path, hex), 0);
  assert_non_null(strstr(ufp4_last_error(), path));
}

/* Each format says "SPEC: operand ...": every named operand of that recipe must get exactly the
 * format's grid, scale, block or tile, rounding, RHT size and adaptive scaling with its metric. */
static void test_formats_match_recipes(void **state) {
  (void)state;
  size_t n;
  const ufp4_golden_format *f = ufp4_golden_formats(&n);
  assert_true(n >= 20);
  int seen_scale[UFP4_SCALE_COUNT] = {0}, tiles = 0, rht = 0, seen_metric[UFP4_METRIC_COUNT] = {0};
  int four_scale[UFP4_SCALE_COUNT] = {0};
  for (size_t i = 0; i < n; i++) {
    char spec[128], ops[128];
    const char *colon = strchr(f[i].recipe, ':');
    assert_non_null(colon);
    snprintf(spec, sizeof spec, "%.*s", (int)(colon - f[i].recipe), f[i].recipe);
    snprintf(ops, sizeof ops, "%s", colon + 1);
    ufp4_recipe r;
    assert_int_equal(ufp4_recipe_parse(spec, &r), 0);
    int n_ops = 0;
    for (char *save, *tok = strtok_r(ops, " ", &save); tok; tok = strtok_r(NULL, " ", &save), n_ops++) {
      int op = 0;
      while (op < UFP4_N_OPERANDS && strcmp(ufp4_operand_name((ufp4_operand)op), tok)) op++;
      assert_true(op < UFP4_N_OPERANDS);
      ufp4_qformat q = ufp4_recipe_operand_format(&r, (ufp4_operand)op);
      assert_int_equal(q.grid, f[i].fmt.grid);
      assert_int_equal(q.scale, f[i].fmt.scale);
      assert_int_equal(q.tile2d, f[i].fmt.tile2d);
      if (!q.tile2d) assert_int_equal(q.block, f[i].fmt.block);
      assert_int_equal(q.round, f[i].fmt.round);
      assert_int_equal(q.rht, f[i].fmt.rht);
      assert_int_equal(q.adaptive, f[i].fmt.adaptive);
      if (q.adaptive) assert_int_equal(q.metric, f[i].fmt.metric);
      if (q.rht) assert_int_equal(f[i].rht_signs, r.rht_signs == UFP4_SIGNS_NVIDIA ? 2 : 1);
      else assert_int_equal(f[i].rht_signs, 0);
    }
    assert_true(n_ops > 0);
    assert_int_equal(ufp4_qformat_check(&f[i].fmt, 16, 64), 0);
    for (size_t j = 0; j < i; j++) assert_string_not_equal(f[i].name, f[j].name);
    seen_scale[f[i].fmt.scale] = 1;
    tiles += f[i].fmt.tile2d != 0;
    rht += f[i].fmt.rht != 0;
    if (f[i].fmt.adaptive == UFP4_ADAPTIVE_4OVER6) {
      seen_metric[f[i].fmt.metric] = 1;
      four_scale[f[i].fmt.scale] = 1;
    }
  }
  /* Four Over Six: every metric, and each scale kind it takes (FP32, NVFP4, E8M0 RCEIL). */
  for (int m = 0; m < UFP4_METRIC_COUNT; m++) assert_true(seen_metric[m]);
  assert_true(four_scale[UFP4_SCALE_FP32] && four_scale[UFP4_SCALE_NVFP4] && four_scale[UFP4_SCALE_E8M0_RCEIL]);
  /* The list: every scale kind (each E8M0 rule), NVFP4 tiles, formats with RHT. */
  for (int k = 0; k < UFP4_SCALE_COUNT; k++) assert_true(seen_scale[k]);
  assert_true(tiles > 0 && rht > 0);
}

static void test_refuses_existing_folder(void **state) {
  (void)state;
  char dir[] = "/tmp/ufp4_golden_XXXXXX";
  assert_non_null(mkdtemp(dir));
  assert_int_equal(ufp4_golden_write(dir), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), dir));
  assert_non_null(strstr(ufp4_last_error(), "exists"));
  assert_int_equal(ufp4_golden_write(""), UFP4_EINVAL);
  /* A folder that cannot be created (its parent is a file) is an error, not a crash. */
  char file[600], sub[700];
  snprintf(file, sizeof file, "%s/f", dir);
  assert_int_equal(ufp4_write_file_atomic(file, "x", 1), 0);
  snprintf(sub, sizeof sub, "%s/kit", file);
  assert_int_not_equal(ufp4_golden_write(sub), 0);
  assert_int_equal(ufp4_remove_tree(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256_vectors),
      cmocka_unit_test(test_formats_match_recipes),
      cmocka_unit_test(test_refuses_existing_folder),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
