/* Training-step throughput: tokens/s of one optimizer step (zero grads, forward, backward, global
 * gradient norm, AdamW) per recipe on two model configurations, with the model's phase timers and
 * the peak RSS of a fresh process per measurement against the theoretical footprint.
 *
 * Tokens are uniform random ids from Philox: the cost of a step does not depend on the data. */
#include "bench_train.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "ufp4/fileio.h"
#include "ufp4/gemm.h"
#include "ufp4/linear.h"
#include "ufp4/model.h"
#include "ufp4/optim.h"
#include "ufp4/recipe.h"
#include "ufp4/ufp4.h"

/* The benchmark configurations, one row each. The first three are the llm.c-sized models; the last
 * three ("small-deep") are the shapes the study's hours are spent on: the make-run model, the 4 x 128
 * model on the bytes vocabulary, and the deepest model of the study's depth series. */
typedef struct {
  const char *name;
  int layers, d_model, heads, ffn, vocab, batch, seq_len;
  int experts, top_k, expert_ffn; /* 0 experts: dense */
  int tie;
} bench_config;

static const bench_config CONFIGS[UFP4_BENCH_N_CONFIGS] = {
    {"llmc (V=50257)", 6, 384, 6, 1536, 50257, 4, 256, 0, 0, 0, 0},
    {"small-vocab (V=4096)", 6, 384, 6, 1536, 4096, 4, 256, 0, 0, 0, 0},
    /* The small-vocabulary model with every MLP an MoE of 8 experts, top-2, each expert half as wide as
     * the dense MLP: a token touches the same MLP parameters as in the dense model (plus the router's
     * 8 x 384), so the two rows compare MoE and dense at equal active parameters. */
    {"moe (V=4096, E=8, top-2, Fe=768)", 6, 384, 6, 1536, 4096, 4, 256, 8, 2, 768, 0},
    /* `make run`'s model (Makefile: --layers 2 --d-model 128 --heads 4 --ffn 384 --seq-len 128 --batch 8,
     * BPE-2048 vocabulary, tied embeddings as train's default). */
    {"make-run (L=2 d=128)", 2, 128, 4, 384, 2048, 8, 128, 0, 0, 0, 1},
    /* 4 blocks of d = 128 on the bytes vocabulary, batch 16. */
    {"4x128 (V=256)", 4, 128, 4, 352, 256, 16, 128, 0, 0, 0, 1},
    /* The deepest model of the study's depth series (docs/STUDY.md): 16 blocks of d = 64. */
    {"16x64 (V=2048)", 16, 64, 4, 192, 2048, 8, 128, 0, 0, 0, 1},
};

void ufp4_bench_train_config(int index, ufp4_model_config *c, int *B, int *T, const char **name) {
  const bench_config *b = &CONFIGS[index];
  *c = ufp4_model_config_default();
  c->n_layers = b->layers;
  c->d_model = b->d_model;
  c->n_heads = b->heads;
  c->n_kv_heads = b->heads;
  c->ffn_dim = b->ffn;
  c->seq_len = b->seq_len;
  c->vocab = b->vocab;
  c->tie_embeddings = b->tie;
  c->moe_experts = b->experts;
  c->moe_top_k = b->top_k;
  c->moe_ffn = b->expert_ffn;
  ufp4_model_config_resolve(c);
  *B = b->batch;
  *T = b->seq_len;
  *name = b->name;
}

size_t ufp4_bench_train_theory_bytes(size_t n_params, size_t activation_bytes) {
  return 4 * n_params * sizeof(float) + activation_bytes;
}

typedef struct {
  double step, fwd, bwd, opt, prep, gemm, att, head;
} step_times;

int ufp4_bench_train_one(int config, const char *recipe, int warmup, int steps, ufp4_bench_train_result *r) {
  memset(r, 0, sizeof *r);
  ufp4_model_config c;
  int B, T;
  const char *name;
  ufp4_bench_train_config(config, &c, &B, &T, &name);
  ufp4_recipe rec;
  int rc = ufp4_recipe_parse(recipe, &rec);
  if (rc) return rc;
  ufp4_model *m = NULL;
  if ((rc = ufp4_model_create(&m, &c, B))) return rc;
  const size_t n = ufp4_model_num_params(m), BT = (size_t)B * T;
  float *mom = calloc(n, sizeof(float)), *var = calloc(n, sizeof(float));
  int32_t *tok = malloc((BT + 1) * sizeof(int32_t));
  step_times *st = calloc((size_t)steps, sizeof *st);
  double *v = malloc((size_t)steps * sizeof *v);
  const int nt = ufp4_model_tensor_count(&c);
  size_t *seg = malloc((size_t)nt * sizeof *seg);
  uint8_t *decay = malloc((size_t)nt);
  if (!mom || !var || !tok || !st || !v || !seg || !decay) {
    rc = ufp4_fail(UFP4_ENOMEM, "out of memory");
    goto done;
  }
  for (int i = 0; i < nt; i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(&c, i, &t);
    seg[i] = t.offset;
    decay[i] = t.ndim == 2;
  }
  ufp4_model_init(m, 1234);
  if ((rc = ufp4_model_set_recipe(m, &rec, 1234))) goto done;
  ufp4_model_set_timing(m, 1);
  ufp4_adamw_config oc = ufp4_adamw_default();
  oc.total_steps = warmup + steps;
  for (int s = 0; s < warmup + steps && !rc; s++) {
    for (size_t i = 0; i <= BT; i++) tok[i] = (int32_t)(ufp4_philox_u32(99, (uint64_t)s, i) % (uint32_t)c.vocab);
    ufp4_model_reset_phase_times(m);
    ufp4_model_set_step(m, (uint64_t)s, 0);
    double t0 = bench_now_s();
    ufp4_model_zero_grads(m);
    if ((rc = ufp4_model_forward(m, tok, tok + 1, B, T, &r->loss))) break;
    if ((rc = ufp4_model_backward(m, 1.0f))) break;
    double t1 = bench_now_s();
    double gn = ufp4_grad_norm(ufp4_model_grads(m), n);
    float scale = gn > oc.grad_clip ? (float)(oc.grad_clip / gn) : 1.0f;
    ufp4_adamw_step(ufp4_model_params(m), ufp4_model_grads(m), mom, var, n, &oc, ufp4_lr_at(&oc, s), s + 1, scale, seg,
                    decay, nt);
    double t2 = bench_now_s();
    if (s < warmup) continue;
    ufp4_model_times pt;
    ufp4_model_phase_times(m, &pt);
    st[s - warmup] = (step_times){t2 - t0, pt.forward, pt.backward, t2 - t1, pt.linear_prepare, pt.linear_gemm,
                                  pt.attention, pt.head};
  }
  if (rc) goto done;
#define MED(field, out)                                          \
  do {                                                           \
    for (int i = 0; i < steps; i++) v[i] = st[i].field;          \
    r->out = bench_median(v, steps);                             \
  } while (0)
  MED(step, step);
  MED(fwd, forward);
  MED(bwd, backward);
  MED(opt, optimizer);
  MED(prep, prepare);
  MED(gemm, gemm);
  MED(att, attention);
  MED(head, head);
#undef MED
  r->n_params = n;
  r->activation_bytes = ufp4_model_activation_bytes(m);
  r->scratch_bytes = ufp4_model_scratch_bytes(m);
done:
  free(mom);
  free(var);
  free(tok);
  free(st);
  free(v);
  free(seg);
  free(decay);
  ufp4_model_free(m);
  return rc;
}

int ufp4_bench_train_child(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: ufp4 bench train-child CONFIG RECIPE WARMUP STEPS\n");
    return 2;
  }
  int config = atoi(argv[1]), warmup = atoi(argv[3]), steps = atoi(argv[4]);
  if (config < 0 || config >= UFP4_BENCH_N_CONFIGS || warmup < 0 || steps < 1) {
    fprintf(stderr, "ufp4 bench train-child: bad arguments\n");
    return 2;
  }
  ufp4_bench_train_result r;
  if (ufp4_bench_train_one(config, argv[2], warmup, steps, &r)) {
    fprintf(stderr, "ufp4 bench train-child: %s\n", ufp4_last_error());
    return 1;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("UFP4TRAIN %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.17g %ld %zu %zu %zu\n", r.step, r.forward, r.backward,
         r.optimizer, r.prepare, r.gemm, r.attention, r.head, r.loss, ru.ru_maxrss, r.n_params, r.activation_bytes,
         r.scratch_bytes);
  return 0;
}

/* Runs one measurement in a fresh process (the ufp4 binary re-executed), so that its peak RSS is
 * its own and not the high-water mark of earlier measurements. */
static int run_child(const char *self, int config, const char *recipe, int warmup, int steps,
                     ufp4_bench_train_result *r) {
  int fd[2];
  if (pipe(fd)) return ufp4_fail(UFP4_EIO, "pipe: %s", strerror(errno));
  char cfg[16], wu[16], ns[16];
  snprintf(cfg, sizeof cfg, "%d", config);
  snprintf(wu, sizeof wu, "%d", warmup);
  snprintf(ns, sizeof ns, "%d", steps);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    return ufp4_fail(UFP4_EIO, "fork: %s", strerror(errno));
  }
  if (pid == 0) {
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]);
    close(fd[1]);
    char *args[] = {(char *)self, "bench", "train-child", cfg, (char *)recipe, wu, ns, NULL};
    execv(self, args);
    _exit(127);
  }
  close(fd[1]);
  char buf[1024];
  size_t len = 0;
  ssize_t got;
  while (len < sizeof buf - 1 && (got = read(fd[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)got;
  buf[len] = 0;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  memset(r, 0, sizeof *r);
  const char *line = strstr(buf, "UFP4TRAIN ");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !line ||
      sscanf(line, "UFP4TRAIN %lf %lf %lf %lf %lf %lf %lf %lf %lf %ld %zu %zu %zu", &r->step, &r->forward,
             &r->backward, &r->optimizer, &r->prepare, &r->gemm, &r->attention, &r->head, &r->loss, &r->maxrss_kb,
             &r->n_params, &r->activation_bytes, &r->scratch_bytes) != 13)
    return ufp4_fail(UFP4_EIO, "the measurement of %s on config %d failed (child status %d)", recipe,
                     config, status);
  return 0;
}

static double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

int ufp4_bench_train(const ufp4_bench_train_opts *o, const char *self_exe, FILE *out) {
  cJSON *root = o->json_path ? cJSON_CreateObject() : NULL;
  cJSON *jruns = root ? cJSON_AddArrayToObject(root, "train") : NULL;
  if (root) {
    cJSON_AddNumberToObject(root, "threads", ufp4_get_threads());
    cJSON_AddNumberToObject(root, "steps", o->steps);
    cJSON_AddNumberToObject(root, "warmup", o->warmup);
  }
  int rc = 0;
  fprintf(out, "ufp4 bench train: one optimizer step (zero grads, forward, backward, grad norm, AdamW), median of %d "
               "steps after %d warm-up, %d threads%s\n",
          o->steps, o->warmup, ufp4_get_threads(), o->rss ? ", each row in a fresh process" : "");
  for (int ci = 0; ci < UFP4_BENCH_N_CONFIGS && !rc; ci++) {
    if (!(o->configs & (1 << ci))) continue;
    ufp4_model_config c;
    int B, T;
    const char *name;
    ufp4_bench_train_config(ci, &c, &B, &T, &name);
    fprintf(out, "\nconfig %s: L=%d d=%d heads=%d ffn=%d vocab=%d, B=%d T=%d (%d tokens/step), %zu parameters, %zu active\n",
            name, c.n_layers, c.d_model, c.n_heads, c.moe_experts > 0 ? c.moe_ffn : c.ffn_dim, c.vocab, B, T, B * T,
            ufp4_model_param_count(&c), ufp4_model_active_param_count(&c));
    fprintf(out, "%-6s %9s %8s %7s | %7s %7s %7s | %7s %7s %7s %7s %7s | %8s %8s %6s | %s\n", "recipe",
            "tokens/s", "step ms", "x fp32", "fwd", "bwd", "optim", "quant", "gemm", "attn", "head", "other",
            "RSS MiB", "theory", "ratio", "last loss");
    double fp32_step = 0.0;
    for (int ri = 0; ri < o->n_recipes && !rc; ri++) {
      ufp4_bench_train_result r;
      rc = o->rss ? run_child(self_exe, ci, o->recipes[ri], o->warmup, o->steps, &r)
                  : ufp4_bench_train_one(ci, o->recipes[ri], o->warmup, o->steps, &r);
      if (rc) break;
      if (!strcmp(o->recipes[ri], "fp32")) fp32_step = r.step;
      const double other = r.step - r.optimizer - r.prepare - r.gemm - r.attention - r.head;
      const double theory = (double)ufp4_bench_train_theory_bytes(r.n_params, r.activation_bytes);
      char ratio[16] = "-", rss[16] = "-", rr[16] = "-";
      if (fp32_step > 0) snprintf(ratio, sizeof ratio, "%.3f", r.step / fp32_step);
      if (r.maxrss_kb > 0) {
        snprintf(rss, sizeof rss, "%.0f", r.maxrss_kb / 1024.0);
        snprintf(rr, sizeof rr, "%.2f", r.maxrss_kb * 1024.0 / theory);
      }
      fprintf(out, "%-6s %9.1f %8.1f %7s | %7.1f %7.1f %7.1f | %7.1f %7.1f %7.1f %7.1f %7.1f | %8s %8.0f %6s | %.17g\n",
              o->recipes[ri], B * T / r.step, 1e3 * r.step, ratio, 1e3 * r.forward, 1e3 * r.backward,
              1e3 * r.optimizer, 1e3 * r.prepare, 1e3 * r.gemm, 1e3 * r.attention, 1e3 * r.head, 1e3 * other, rss,
              mib(theory), rr, r.loss);
      fflush(out);
      if (jruns) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddItemToArray(jruns, j);
        cJSON_AddStringToObject(j, "config", name);
        cJSON_AddNumberToObject(j, "vocab", c.vocab);
        cJSON_AddStringToObject(j, "recipe", o->recipes[ri]);
        cJSON_AddNumberToObject(j, "tokens_per_s", B * T / r.step);
        cJSON_AddNumberToObject(j, "step_s", r.step);
        if (fp32_step > 0) cJSON_AddNumberToObject(j, "step_vs_fp32", r.step / fp32_step);
        cJSON_AddNumberToObject(j, "forward_s", r.forward);
        cJSON_AddNumberToObject(j, "backward_s", r.backward);
        cJSON_AddNumberToObject(j, "optimizer_s", r.optimizer);
        cJSON_AddNumberToObject(j, "quantization_s", r.prepare);
        cJSON_AddNumberToObject(j, "gemm_s", r.gemm);
        cJSON_AddNumberToObject(j, "attention_s", r.attention);
        cJSON_AddNumberToObject(j, "head_s", r.head);
        cJSON_AddNumberToObject(j, "other_s", other);
        cJSON_AddNumberToObject(j, "loss", r.loss);
        cJSON_AddNumberToObject(j, "params", (double)r.n_params);
        cJSON_AddNumberToObject(j, "activation_bytes", (double)r.activation_bytes);
        cJSON_AddNumberToObject(j, "scratch_bytes", (double)r.scratch_bytes);
        cJSON_AddNumberToObject(j, "theory_bytes", theory);
        if (r.maxrss_kb > 0) cJSON_AddNumberToObject(j, "peak_rss_bytes", r.maxrss_kb * 1024.0);
      }
      if (ri == o->n_recipes - 1)
        fprintf(out, "params %zu (%.1f MiB x 4 with grads and AdamW), activations %.1f MiB, scratch %.1f MiB\n",
                r.n_params, mib(4.0 * r.n_params), mib((double)r.activation_bytes), mib((double)r.scratch_bytes));
    }
  }
  if (!rc)
    fprintf(out, "\nphases in ms: quant = operand preparation of the block projections (copy/transpose, rounding, "
                 "RHT, quantization); gemm = their SGEMMs; head = final norm + lm_head + cross-entropy; other = "
                 "norms, rope, SwiGLU, embedding, residuals; theory = params + grads + 2 AdamW moments + "
                 "activations (scratch not counted); last loss = loss of the last timed step (the same bits at any thread "
                 "count)\n");
  if (!rc && root) {
    char *txt = cJSON_Print(root);
    rc = txt ? ufp4_write_file_atomic(o->json_path, txt, strlen(txt)) : ufp4_fail(UFP4_ENOMEM, "out of memory");
    free(txt);
  }
  cJSON_Delete(root);
  return rc;
}
