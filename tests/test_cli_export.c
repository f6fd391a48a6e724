/* `ufp4 export` from the command line: what it writes and what it refuses (the files themselves
 * are checked in llama.cpp by tests/test_gguf_llama.mjs). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cli_fixture.h"
#include "ufp4/model.h"
#include "ufp4/model_io.h"
#include "ufp4/quant.h"
#include "ufp4/recipe.h"

static char work[] = "/tmp/ufp4_cli_export.XXXXXX";
static const char *cli;
static char ckpt[4200];

static int setup(void **state) {
  if (cli_fixture_setup(state, work, &cli)) return -1;
  static char out[1 << 16];
  /* d_model 32: the projections' inputs fit MXFP4's block of 32 but not NVFP4's 64 (except down) */
  if (cli_run(out, sizeof out, "%s train --data %s/data --out %s/run --steps 2 --layers 1 --d-model 32 --heads 2 "
              "--ffn 64 --seq-len 16 --batch 2 --eval-every 0 --eval-batches 1 --no-progress", cli, work, work))
    return -1;
  snprintf(ckpt, sizeof ckpt, "%s/run/ckpt/step_00000002", work);
  return 0;
}

static int export(char *out, size_t size, const char *args) {
  return cli_run(out, size, "%s export --checkpoint %s %s", cli, ckpt, args);
}

static void test_writes_gguf(void **state) {
  (void)state;
  static char out[1 << 14], args[8192], path[4300];
  snprintf(path, sizeof path, "%s/m.gguf", work);
  snprintf(args, sizeof args, "--format gguf-mxfp4 --tokenizer bytes --out %s", path);
  assert_int_equal(export(out, sizeof out, args), 0);
  assert_non_null(strstr(out, "7 in 4 bits"));
  assert_non_null(strstr(out, "SQNR"));
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  char magic[4];
  assert_int_equal(fread(magic, 1, 4, fp), 4);
  fclose(fp);
  assert_memory_equal(magic, "GGUF", 4);
  /* everything excluded: a valid file with no 4-bit tensor */
  snprintf(args, sizeof args, "--format gguf-nvfp4 --tokenizer bytes --out %s --exclude 'model.layers.*'", path);
  assert_int_equal(export(out, sizeof out, args), 0);
  assert_non_null(strstr(out, " 0 in 4 bits"));
  /* the reference checkpoint */
  snprintf(args, sizeof args, "--format dequant-mxfp4 --out %s/deq", work);
  assert_int_equal(export(out, sizeof out, args), 0);
  assert_int_equal(cli_run(out, sizeof out, "%s eval --checkpoint %s/deq --data %s/data --batches 1 --batch 1", cli, work, work), 0);
}

/* The Hugging Face rows: hf-mxfp4 with its default E8M0 floor rule holds the same codes as
 * gguf-mxfp4, so `ufp4 eval` of the export and of the dequant-mxfp4 reference (another code path,
 * gguf_export.c) print the same loss. */
static void test_writes_hf(void **state) {
  (void)state;
  static char out[1 << 14], args[8192], a[1 << 14], b[1 << 14];
  snprintf(args, sizeof args, "--format hf-mxfp4 --out %s/hfm", work);
  assert_int_equal(export(out, sizeof out, args), 0);
  assert_non_null(strstr(out, "7 tensors in 4 bits"));
  assert_null(strstr(out, "run's recipe")); /* an fp32 run: nothing of its own to hold (it said "cannot hold") */
  snprintf(args, sizeof args, "--format dequant-mxfp4 --out %s/deq2", work);
  assert_int_equal(export(out, sizeof out, args), 0);
  assert_int_equal(cli_run(a, sizeof a, "%s eval --checkpoint %s/hfm --data %s/data --batches 2 --batch 1", cli, work, work), 0);
  assert_int_equal(cli_run(b, sizeof b, "%s eval --checkpoint %s/deq2 --data %s/data --batches 2 --batch 1", cli, work, work), 0);
  const char *la = strstr(a, "loss "), *lb = strstr(b, "loss ");
  assert_non_null(la);
  assert_non_null(lb);
  assert_memory_equal(la, lb, 14);
  /* --exclude adds to the defaults; NVFP4's 64 does not divide 32 columns, so exclude all but down */
  snprintf(args, sizeof args, "--format hf-nvfp4 --out %s/hfn --exclude '*_attn.*' --exclude '*gate_proj' --exclude '*up_proj'", work);
  assert_int_equal(export(out, sizeof out, args), 0);
  assert_non_null(strstr(out, "1 tensors in 4 bits"));
  assert_non_null(strstr(out, "input_scale: 0 of 1 projections calibrated"));
}

/* A 2-step run of width 64 (NVFP4's GGUF block fits every projection) under the given flags, and
 * its gguf-nvfp4 export's output in out. */
static void export_run(const char *name, const char *flags, char *out, size_t size) {
  static char train[1 << 16];
  assert_int_equal(cli_run(train, sizeof train, "%s train --data %s/data --out %s/%s --steps 2 --layers 2 --d-model 64 "
                           "--heads 2 --ffn 64 --seq-len 16 --batch 2 --eval-every 0 --eval-batches 1 --no-progress %s",
                           cli, work, work, name, flags), 0);
  assert_int_equal(cli_run(out, size, "%s export --checkpoint %s/%s/ckpt/step_00000002 --format gguf-nvfp4 "
                           "--tokenizer bytes --out %s/%s.gguf", cli, work, name, work, name), 0);
}

/* Run `name`'s gguf-nvfp4 export with one --exclude glob; its output in out. */
static void export_excluding(const char *name, const char *glob, char *out, size_t size) {
  assert_int_equal(cli_run(out, size, "%s export --checkpoint %s/%s/ckpt/step_00000002 --format gguf-nvfp4 "
                           "--tokenizer bytes --out %s/%s_x.gguf --exclude '%s'", cli, work, name, work, name, glob), 0);
}

/* The fp32 weights of checkpoint `dir` (freed by the caller with ufp4_model_free). */
static ufp4_model *load_fp32(const char *dir) {
  ufp4_model *m = NULL;
  assert_int_equal(ufp4_model_load(dir, "fp32", 1, &m), 0);
  return m;
}

/* Of every block projection of checkpoint `run` whose name holds `only` (NULL: all) against `deq`
 * (its dequant-nvfp4 export): the elements where deq differs from the scalar reference of `spec`'s
 * fprop weight format. */
static size_t differ_in(const char *run, const char *deq, const char *spec, const char *only, size_t *n_elems) {
  ufp4_model *a = load_fp32(run), *b = load_fp32(deq);
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse(spec, &r), 0);
  ufp4_qformat f = ufp4_recipe_operand_format(&r, UFP4_OP_FPROP_W);
  const ufp4_model_config *c = ufp4_model_get_config(a);
  size_t differ = 0;
  *n_elems = 0;
  for (int i = 0; i < ufp4_model_tensor_count(c); i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    if (t.ndim != 2 || !strstr(t.name, "model.layers.") || !strstr(t.name, "_proj.weight")) continue;
    if (only && !strstr(t.name, only)) continue;
    size_t n = t.shape[0] * t.shape[1];
    float *y = malloc(n * sizeof *y);
    assert_non_null(y);
    assert_int_equal(ufp4_fake_quant_reference(&f, ufp4_model_params(a) + t.offset, y, t.shape[0], t.shape[1]), 0);
    const float *d = ufp4_model_params(b) + t.offset;
    for (size_t k = 0; k < n; k++) differ += d[k] != y[k];
    *n_elems += n;
    free(y);
  }
  ufp4_model_free(a), ufp4_model_free(b);
  return differ;
}

static size_t differ_from(const char *run, const char *deq, const char *spec, size_t *n_elems) {
  return differ_in(run, deq, spec, NULL, n_elems);
}

/* Trains run `name` under `recipe`, exports it to gguf-nvfp4, checks that the export says it used
 * `format` and holds the run's codes, and writes its dequant-nvfp4 folder; their paths into run
 * and deq (4300 bytes each). */
static void export_deq(const char *name, const char *flags, const char *format, char *run, char *deq) {
  static char out[1 << 14], want[256];
  export_run(name, flags, out, sizeof out);
  snprintf(want, sizeof want, "4-bit weights: %s\n", format);
  if (!strstr(out, want)) fail_msg("no line %swithin\n%s", want, out);
  assert_true(strstr(out, " trained with this weight format: the file holds its codes and scales") ||
              strstr(out, " trained with these weight formats: the file holds its codes and scales"));
  snprintf(run, 4300, "%s/%s/ckpt/step_00000002", work, name);
  snprintf(deq, 4300, "%s/%s_deq", work, name);
  assert_int_equal(cli_run(out, sizeof out, "%s export --checkpoint %s --format dequant-nvfp4 --out %s", cli, run, deq), 0);
}

/* A Four Over Six run's NVFP4 export holds its 4/6 codes: every projection of the dequant-nvfp4
 * reference (the same codes and scales as the GGUF file) equals the scalar reference of the
 * nvfp4-4over6 weight format, and differs from plain nvfp4's somewhere, so blocks chose 4. So does
 * a run with NVFP4 scales in 1x16 blocks (tile2d=0) hold its own: the encoder's other layout. */
static void test_gguf_holds_four_over_six(void **state) {
  (void)state;
  static char run[4300], deq[4300];
  export_deq("r_1x16", "--recipe nvfp4,tile2d=0", "e2m1, nvfp4 scales, 1x16 blocks, rne", run, deq);
  size_t n16, n_tiles;
  assert_int_equal(differ_from(run, deq, "nvfp4,tile2d=0", &n16), 0);
  assert_true(n16 > 0 && differ_from(run, deq, "nvfp4", &n_tiles) > 0);
  export_deq("r_46w", "--recipe nvfp4-4over6", "e2m1, nvfp4 scales, 16x16 tiles, rne, 4over6 by mse", run, deq);
  size_t n, n_plain;
  assert_int_equal(differ_from(run, deq, "nvfp4-4over6", &n), 0);
  size_t plain = differ_from(run, deq, "nvfp4", &n_plain);
  assert_true(n > 0 && n == n_plain);
  assert_true(plain > 0 && plain < n);
}

/* "SQNR of the conversion against the weights the recipe's forward used: X dB" in out. */
static double forward_db(const char *out) {
  const char *s = strstr(out, "the recipe's forward used: ");
  if (!s) fail_msg("no SQNR against the forward's weights in\n%s", out);
  return strtod(s + strlen("the recipe's forward used: "), NULL);
}

/* What the GGUF export says of the run's own quantization. Plain nvfp4 and nvfp4-4over6: the file
 * holds its codes (4/6 since 2026-12-03). keep_first=1: block 1 holds the recipe's codes, block 0
 * (whose forward used the fp32 weights) is quantized all the same, so the SQNR against the
 * forward's weights is finite (it was +inf when block 0 was compared with its own requantized
 * copy). e2m1 (FP32 block scales): requantized, with a finite SQNR. */
static void test_gguf_and_run_recipe(void **state) {
  (void)state;
  static char out[1 << 14];
  export_run("r_nvfp4", "--recipe nvfp4", out, sizeof out);
  assert_non_null(strstr(out, "the file holds its codes and scales"));
  assert_non_null(strstr(out, "4-bit weights: e2m1, nvfp4 scales, 16x16 tiles, rne\n"));
  export_run("r_46", "--recipe nvfp4-4over6", out, sizeof out);
  assert_non_null(strstr(out, "the run's recipe nvfp4-4over6,"));
  assert_non_null(strstr(out, " trained with this weight format: the file holds its codes and scales"));
  export_run("r_e2m1", "--recipe e2m1", out, sizeof out);
  assert_null(strstr(out, "the file holds"));
  assert_non_null(strstr(out, "cannot hold the weight quantization of the run's recipe e2m1,"));
  assert_non_null(strstr(out, "4-bit weights: e2m1, nvfp4 scales, 16x16 tiles, rne\n"));
  const char *s = strstr(out, "the recipe's forward used: ");
  assert_non_null(s);
  double db = strtod(s + strlen("the recipe's forward used: "), NULL);
  assert_true(db > 5.0 && db < 200.0);
  export_run("r_keep", "--recipe nvfp4,keep_first=1", out, sizeof out);
  if (!strstr(out, "note: the file holds the codes and scales of the run's recipe nvfp4") ||
      !strstr(out, "keep_first=1,keep_last=0\nin 7 of its 14 4-bit projections; 7 the run trained in fp32 or bf16 were quantized"))
    fail_msg("keep_first=1:\n%s", out);
  assert_true(forward_db(out) > 5.0 && forward_db(out) < 200.0);
  /* the kept block excluded: the file holds exactly what the run trained with, and its SQNR is
   * that of the 4-bit projections (it printed 0.00 dB before 2026-12-03) */
  export_excluding("r_keep", "model.layers.0.*", out, sizeof out);
  assert_non_null(strstr(out, " 7 in 4 bits"));
  assert_non_null(strstr(out, " trained with this weight format: the file holds its codes and scales"));
  assert_null(strstr(out, "forward used"));
  s = strstr(out, ", SQNR ");
  assert_non_null(s);
  db = strtod(s + strlen(", SQNR "), NULL);
  assert_true(db > 5.0 && db < 200.0);
  /* everything excluded: nothing in 4 bits, nothing said of the recipe */
  export_excluding("r_keep", "model.layers.*", out, sizeof out);
  assert_non_null(strstr(out, " 0 in 4 bits"));
  assert_null(strstr(out, "recipe"));
}

/* A run with per-projection overrides or a schedule is exported projection by projection, each in
 * the format it trained with where ggml holds it. Block 0 in bf16 by an override: block 1 holds
 * the run's NVFP4 codes, block 0 is quantized all the same and compared with its bf16 weights; with
 * block 0 excluded the file holds the run. Block 1's MLP in nvfp4-4over6 on an nvfp4 run: both
 * formats, and the dequant-nvfp4 reference equals each one's scalar reference quantizer where the
 * run used it. A schedule: the phase of the checkpoint's last step decides; a last phase in bf16
 * leaves nothing 4-bit to compare. */
static void test_gguf_follows_overrides(void **state) {
  (void)state;
  static char out[1 << 14], run[4300], deq[4300];
  export_run("r_ovr", "--recipe nvfp4 --override 'model.layers.0.*=bf16'", out, sizeof out);
  if (!strstr(out, "note: the file holds the codes and scales of the run's recipe nvfp4") ||
      !strstr(out, " (with its overrides)\nin 7 of its 14 4-bit projections; 7 the run trained in fp32 or bf16 were quantized"))
    fail_msg("block 0 in bf16:\n%s", out);
  assert_true(forward_db(out) > 5.0 && forward_db(out) < 200.0);
  export_excluding("r_ovr", "model.layers.0.*", out, sizeof out);
  assert_non_null(strstr(out, " trained with this weight format: the file holds its codes and scales"));

  export_deq("r_mix", "--recipe nvfp4 --override 'model.layers.1.mlp.*=nvfp4-4over6'",
             "by projection: e2m1, nvfp4 scales, 16x16 tiles, rne; e2m1, nvfp4 scales, 16x16 tiles, rne, 4over6 by mse",
             run, deq);
  size_t n_mlp, n0, n_attn, n_plain;
  assert_int_equal(differ_in(run, deq, "nvfp4-4over6", "layers.1.mlp.", &n_mlp), 0);
  assert_int_equal(differ_in(run, deq, "nvfp4", "layers.0.", &n0), 0);
  assert_int_equal(differ_in(run, deq, "nvfp4", "layers.1.self_attn.", &n_attn), 0);
  assert_true(n_mlp > 0 && n0 > 0 && n_attn > 0);
  assert_true(differ_in(run, deq, "nvfp4", "layers.1.mlp.", &n_plain) > 0);

  /* the Hugging Face export reads the run the same way */
  assert_int_equal(cli_run(out, sizeof out, "%s export --checkpoint %s --format hf-nvfp4 --out %s/r_mix_hf", cli, run, work), 0);
  assert_non_null(strstr(out, "rne and others, by projection)"));
  assert_non_null(strstr(out, " (with its overrides) trained with these weight formats: the file holds its codes"));
  assert_int_equal(cli_run(out, sizeof out, "%s export --checkpoint %s/r_ovr/ckpt/step_00000002 --format hf-nvfp4 --out %s/r_ovr_hf",
                           cli, work, work), 0);
  if (!strstr(out, " (with its overrides)\nin 7 of its 14 4-bit projections; 7 the run trained in fp32 or bf16 were quantized"))
    fail_msg("hf-nvfp4 of block 0 in bf16:\n%s", out);
  assert_true(forward_db(out) > 5.0 && forward_db(out) < 200.0);

  export_run("r_sched", "--recipe e2m1 --schedule 'e2m1@0,nvfp4@1'", out, sizeof out);
  if (!strstr(out, "the run's recipe nvfp4 (its schedule's phase at this step) trained with this weight format: the file holds"))
    fail_msg("a schedule into nvfp4:\n%s", out);
  assert_int_equal(cli_run(out, sizeof out, "%s export --checkpoint %s/r_sched/ckpt/step_00000002 --format hf-nvfp4 --out %s/r_sched_hf",
                           cli, work, work), 0);
  assert_non_null(strstr(out, "the run's recipe nvfp4 (its schedule's phase at this step) trained with this weight format"));
  /* the phase that ran step 1 of 2, not the one that would start at step 2 */
  export_run("r_sched2", "--recipe nvfp4 --schedule 'nvfp4@0,e2m1@2'", out, sizeof out);
  if (!strstr(out, "the run's recipe nvfp4 (its schedule's phase at this step) trained with this weight format: the file holds"))
    fail_msg("a schedule whose second phase starts after the checkpoint:\n%s", out);
  /* a folder not named step_N: the phase is unknown, and the export says so */
  assert_int_equal(cli_run(out, sizeof out, "ln -s step_00000002 %s/r_sched2/ckpt/latest && %s export --checkpoint "
                           "%s/r_sched2/ckpt/latest --format gguf-nvfp4 --tokenizer bytes --out %s/r_sched2_l.gguf",
                           work, cli, work, work), 0);
  assert_non_null(strstr(out, "this folder's name does not give the checkpoint's step"));
  assert_null(strstr(out, "the file holds"));
  export_run("r_sched_bf16", "--recipe nvfp4 --schedule 'nvfp4@0,bf16@1'", out, sizeof out);
  assert_non_null(strstr(out, " 14 in 4 bits"));
  assert_null(strstr(out, "the file holds"));
  assert_null(strstr(out, "note:"));
}

static void test_refusals(void **state) {
  (void)state;
  static char out[1 << 14], args[8192];
  assert_int_equal(export(out, sizeof out, "--format gguf-q4 --out /dev/null"), 2);
  assert_non_null(strstr(out, "unknown format 'gguf-q4'"));
  assert_int_equal(export(out, sizeof out, "--format gguf-f32 --out /dev/null"), 2);
  assert_non_null(strstr(out, "needs --tokenizer"));
  snprintf(args, sizeof args, "--format gguf-nvfp4 --tokenizer bytes --out %s/n.gguf", work);
  assert_int_equal(export(out, sizeof out, args), 1);
  assert_non_null(strstr(out, "model.layers.0.self_attn.q_proj.weight has 32 input columns, not a multiple of NVFP4's block of 64"));
  snprintf(args, sizeof args, "--format gguf-f32 --tokenizer gpt2 --out %s/g.gguf", work);
  assert_int_equal(export(out, sizeof out, args), 1);
  assert_non_null(strstr(out, "more than the model's vocabulary of 256"));
  assert_int_equal(cli_run(out, sizeof out, "%s export --checkpoint %s/none --format gguf-f32 --tokenizer bytes --out %s/x.gguf",
                           cli, work, work), 1);
  assert_non_null(strstr(out, "/none"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_writes_gguf),
      cmocka_unit_test(test_writes_hf),
      cmocka_unit_test(test_gguf_and_run_recipe),
      cmocka_unit_test(test_gguf_holds_four_over_six),
      cmocka_unit_test(test_gguf_follows_overrides),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, setup, cli_fixture_teardown);
}
