/* Shared by the tests that check the fp32 model against an independent PyTorch float64 script
 * (test_model_torch, test_moe_model_torch): skipping without torch, writing a checkpoint and
 * tokens, running the script, and comparing its outputs. Include after cmocka.h. */
#ifndef UFP4_TESTS_TORCH_REF_UTIL_H
#define UFP4_TESTS_TORCH_REF_UTIL_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ufp4/checkpoint.h"
#include "ufp4/fileio.h"
#include "ufp4/model.h"
#include "ufp4/npy.h"
#include "ufp4/philox.h"

/* fp32 accumulation over a few hundred terms: a normwise relative error of some hundred ulps of
 * float is the expected scale; 1000 * FLT_EPSILON leaves room without hiding a real bug (a wrong
 * term moves gradients by whole percents). */
#define TORCH_REF_TOL (1000 * FLT_EPSILON)

/* Skips the test when /usr/bin/python3 cannot import torch; under CI (which installs
 * python3-torch, scripts/setup.sh) that is a failure instead. */
static inline void torch_ref_require_torch(void) {
  if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") == 0) return;
  if (getenv("CI")) fail_msg("/usr/bin/python3 cannot import torch, and CI must run this test");
  print_message("skipped: /usr/bin/python3 with torch is not installed (Debian python3-torch)\n");
  skip();
}

static inline double torch_ref_rel_err(const float *got, const float *want, size_t n) {
  double d = 0, w = 0;
  for (size_t i = 0; i < n; i++) {
    d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
    w += (double)want[i] * want[i];
  }
  return sqrt(d / (w > 0 ? w : 1));
}

/* Fails unless DIR/FILE (.npy) holds n values within TORCH_REF_TOL (normwise) of got. */
static inline void torch_ref_compare(const char *dir, const char *file, const float *got, size_t n,
                                     const char *what) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  ufp4_npy ref;
  assert_int_equal(ufp4_npy_read(path, &ref), 0);
  assert_int_equal(ref.count, n);
  double e = torch_ref_rel_err(got, ref.data, n);
  if (!(e <= TORCH_REF_TOL)) fail_msg("%s: normwise relative error %.3g > %.3g", what, e, (double)TORCH_REF_TOL);
  ufp4_npy_free(&ref);
}

/* The number the script wrote as text into DIR/FILE. */
static inline double torch_ref_read_number(const char *dir, const char *file) {
  char path[4300], *text;
  size_t len;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  assert_int_equal(ufp4_read_file(path, 100, &text, &len), 0);
  double v = atof(text);
  free(text);
  return v;
}

/* Saves m as DIR/ckpt, fills tok/tgt [b * t] from Philox (every 7th target from index 3 ignored,
 * -1), writes them as DIR/tokens.npy and DIR/targets.npy, and runs tests/SCRIPT on them with
 * DIR as its output folder; fails unless the script succeeds. */
static inline void torch_ref_run_script(const char *script, const char *dir, ufp4_model *m, int vocab, int b,
                                        int t, int32_t *tok, int32_t *tgt) {
  const char *src = getenv("UFP4_SOURCE_DIR");
  assert_non_null(src);
  char ckpt[4200], path[4300];
  snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
  assert_int_equal(ufp4_checkpoint_save(ckpt, m, NULL, NULL, NULL), 0);
  const int n = b * t;
  float *ftok = malloc((size_t)n * sizeof *ftok), *ftgt = malloc((size_t)n * sizeof *ftgt);
  assert_non_null(ftok);
  assert_non_null(ftgt);
  for (int i = 0; i < n; i++) {
    tok[i] = (int32_t)(ufp4_philox_u32(1, 1, (uint64_t)i) % (uint32_t)vocab);
    tgt[i] = i % 7 == 3 ? -1 : (int32_t)(ufp4_philox_u32(1, 2, (uint64_t)i) % (uint32_t)vocab);
    ftok[i] = (float)tok[i];
    ftgt[i] = (float)tgt[i];
  }
  size_t shape[2] = {(size_t)b, (size_t)t};
  snprintf(path, sizeof path, "%s/tokens.npy", dir);
  assert_int_equal(ufp4_npy_write(path, ftok, shape, 2), 0);
  snprintf(path, sizeof path, "%s/targets.npy", dir);
  assert_int_equal(ufp4_npy_write(path, ftgt, shape, 2), 0);
  free(ftok);
  free(ftgt);

  char cmd[20000];
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/%s %s/model.safetensors %s/config.json %s/tokens.npy "
           "%s/targets.npy %s", src, script, ckpt, ckpt, dir, dir, dir);
  assert_int_equal(system(cmd), 0);
}

/* Backward from the loss of the last forward, then every parameter gradient against DIR/grad.NAME.npy. */
static inline void torch_ref_compare_grads(const char *dir, ufp4_model *m, const ufp4_model_config *c) {
  ufp4_model_zero_grads(m);
  assert_int_equal(ufp4_model_backward(m, 1.0f), 0);
  const float *g = ufp4_model_grads(m);
  int nt = ufp4_model_tensor_count(c);
  for (int i = 0; i < nt; i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    char file[200];
    snprintf(file, sizeof file, "grad.%s.npy", t.name);
    torch_ref_compare(dir, file, g + t.offset, t.count, t.name);
  }
}

#endif
