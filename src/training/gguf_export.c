/* Checkpoint -> GGUF for llama.cpp (gguf_export.h). */
#include "ufp4/gguf_export.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/byte_unicode.h"
#include "training/proj_recipes.h"
#include "ufp4/checkpoint.h"
#include "ufp4/error.h"
#include "ufp4/gguf.h"
#include "ufp4/minifloat.h"
#include "ufp4/model.h"
#include "ufp4/model_io.h"
#include "ufp4/quant.h"
#include "ufp4/recipe.h"
#include "ufp4/tokenizer.h"
#include "ufp4/train.h"

/* HF suffix -> llama.cpp suffix, and which rows to permute: 'q' by n_heads, 'k' by n_kv_heads. */
static const struct {
  const char *hf, *gguf;
  char permute;
  int proj;
} LAYER_NAMES[] = {
    {"input_layernorm.weight", "attn_norm.weight", 0, 0},
    {"self_attn.q_proj.weight", "attn_q.weight", 'q', 1},
    {"self_attn.k_proj.weight", "attn_k.weight", 'k', 1},
    {"self_attn.v_proj.weight", "attn_v.weight", 0, 1},
    {"self_attn.o_proj.weight", "attn_output.weight", 0, 1},
    {"post_attention_layernorm.weight", "ffn_norm.weight", 0, 0},
    {"mlp.gate_proj.weight", "ffn_gate.weight", 0, 1},
    {"mlp.up_proj.weight", "ffn_up.weight", 0, 1},
    {"mlp.down_proj.weight", "ffn_down.weight", 0, 1},
};

typedef struct {
  char name[UFP4_TENSOR_NAME_MAX + 16];
  char permute; /* 0, 'q' or 'k' */
  int proj;     /* a block projection, eligible for 4 bits */
} gguf_name;

static int map_name(const char *hf, gguf_name *g) {
  memset(g, 0, sizeof *g);
  if (!strcmp(hf, "model.embed_tokens.weight")) return snprintf(g->name, sizeof g->name, "token_embd.weight"), 0;
  if (!strcmp(hf, "model.norm.weight")) return snprintf(g->name, sizeof g->name, "output_norm.weight"), 0;
  if (!strcmp(hf, "lm_head.weight")) return snprintf(g->name, sizeof g->name, "output.weight"), 0;
  int layer, n = 0;
  if (sscanf(hf, "model.layers.%d.%n", &layer, &n) == 1 && n > 0)
    for (size_t i = 0; i < sizeof LAYER_NAMES / sizeof *LAYER_NAMES; i++)
      if (!strcmp(hf + n, LAYER_NAMES[i].hf)) {
        snprintf(g->name, sizeof g->name, "blk.%d.%s", layer, LAYER_NAMES[i].gguf);
        g->permute = LAYER_NAMES[i].permute;
        g->proj = LAYER_NAMES[i].proj;
        return 0;
      }
  return ufp4_fail(UFP4_EINVAL, "gguf export: no llama.cpp name for tensor '%s'", hf);
}

/* The HF row that GGUF row r comes from (identity unless q/k). */
static size_t src_row(size_t r, char permute, const ufp4_model_config *c) {
  if (!permute) return r;
  size_t D = (size_t)(c->d_model / c->n_heads), h = r / D, i = r % D;
  return h * D + (i % 2) * (D / 2) + i / 2;
}

static int is_4bit(const ufp4_gguf_export_opts *o, const gguf_name *g, const char *hf) {
  if ((o->kind != UFP4_GGUF_EXPORT_MXFP4 && o->kind != UFP4_GGUF_EXPORT_NVFP4) || !g->proj) return 0;
  for (int i = 0; i < o->n_exclude; i++)
    if (!fnmatch(o->exclude[i], hf, 0)) return 0;
  return 1;
}

/* The weight format of ufp4's recipe of the same name, the one ufp4 trains that format with. */
static int weight_format(ufp4_gguf_export_kind k, ufp4_qformat *f) {
  ufp4_recipe r;
  int rc = ufp4_recipe_parse(k == UFP4_GGUF_EXPORT_MXFP4 ? "mxfp4" : "nvfp4", &r);
  if (rc) return rc;
  *f = ufp4_recipe_operand_format(&r, UFP4_OP_FPROP_W);
  f->rht = 0, f->rht_signs = NULL, f->round = UFP4_ROUND_RNE;
  return 0;
}

/* Whether ggml's block type of kind k holds the codes and scales of format f as they are: E2M1
 * codes chosen deterministically in the weights' own basis (no RHT, no SR), and NVFP4 scales in
 * 1x16 blocks or 16x16 tiles (a tile's scale repeats in its 16 rows' sub-blocks), or an E8M0 scale
 * of any rule in 1x32 blocks. How a block chose its scale does not matter to the decoder, so Four
 * Over Six's choices (f->adaptive) fit, and so does its tensor scale (written as "<name>.scale"). */
static int ggml_holds(ufp4_gguf_export_kind k, const ufp4_qformat *f) {
  if (f->grid != UFP4_GRID_E2M1 || f->rht || f->round == UFP4_ROUND_SR || f->round == UFP4_ROUND_SR8) return 0;
  if (k == UFP4_GGUF_EXPORT_NVFP4)
    return f->scale == UFP4_SCALE_NVFP4 && (f->tile2d == 16 || (!f->tile2d && f->block == 16));
  if (k == UFP4_GGUF_EXPORT_MXFP4) return ufp4_scale_is_e8m0(f->scale) && !f->tile2d && f->block == 32;
  return 0;
}

/* The run's recipe of every projection, and pooled energies: of the fp32 weights and of the
 * export's error against them; of the weights each projection's forward used in the run (its
 * recipe's fprop weight format applied to the fp32 weights, or the fp32 or bf16 weights of a
 * projection it trained in higher precision) and of the export's difference from them. */
typedef struct {
  ufp4_qformat wfmt; /* of a projection not trained in a format ggml holds: the run's, or ufp4's
                        recipe named like the export */
  double sig, err, rsig, rerr;
  proj_recipes rec; /* the recipe each projection trained under at the checkpoint's step
                       (run_recipes); empty when that is not known */
  int no_reference; /* a quantized projection whose run weights lie behind an RHT or SR */
  int n_used;       /* the distinct formats the export used (at most 4 kept) */
  ufp4_qformat used[4];
} energy;

static void describe(const ufp4_qformat *f, char *buf, size_t size);

/* Keeps f among the formats used unless one that reads the same is there. */
static void note_format(energy *e, const ufp4_qformat *f) {
  char a[128], b[128];
  describe(f, a, sizeof a);
  for (int i = 0; i < e->n_used; i++) {
    describe(&e->used[i], b, sizeof b);
    if (!strcmp(a, b)) return;
  }
  if (e->n_used < 4) e->used[e->n_used++] = *f;
}

/* Adds the squared norms of a and of a - b. */
static void add_energy(const float *a, const float *b, size_t n, double *sig, double *err) {
  for (size_t i = 0; i < n; i++) {
    double d = (double)b[i] - a[i];
    *sig += (double)a[i] * a[i], *err += d * d;
  }
}

/* Quantizes one projection [rows][cols] into *q, with the format its run trained it with when
 * ggml's type holds it (counted in res->held), else e->wfmt; and adds to the energies. */
static int quantize(const ufp4_gguf_export_opts *o, const char *hf, const float *w, size_t rows,
                    size_t cols, ufp4_qtensor *q, ufp4_gguf_export_result *res, energy *e) {
  int rc = 0;
  size_t gblock = o->kind == UFP4_GGUF_EXPORT_MXFP4 ? 32 : 64;
  if (cols % gblock)
    return ufp4_fail(UFP4_EINVAL, "gguf export: %s has %zu input columns, not a multiple of %s's block of %zu (exclude it)",
                     hf, cols, o->kind == UFP4_GGUF_EXPORT_MXFP4 ? "MXFP4" : "NVFP4", gblock);
  const ufp4_recipe *r = proj_recipes_find(&e->rec, hf);
  ufp4_qformat fmt = e->wfmt;
  if (r && ufp4_recipe_gemm_precision(r, UFP4_FPROP) == UFP4_PREC_FP4) {
    ufp4_qformat had = ufp4_recipe_operand_format(r, UFP4_OP_FPROP_W);
    if (ggml_holds(o->kind, &had)) fmt = had, res->held++;
  } else if (r) {
    res->kept_quantized++;
  }
  if ((rc = ufp4_quantize(&fmt, w, rows, cols, q))) return rc;
  note_format(e, &fmt);
  float *y = malloc(2 * rows * cols * sizeof *y);
  if (!y) return ufp4_fail(UFP4_ENOMEM, "gguf export: out of memory for %s", hf);
  ufp4_dequantize(q, y);
  add_energy(w, y, rows * cols, &e->sig, &e->err);
  const int known = r ? proj_forward_weights(r, w, rows, cols, y + rows * cols) : 0;
  if (known < 0) rc = known;
  else if (r && !known) e->no_reference = 1;
  else if (r) add_energy(y + rows * cols, y, rows * cols, &e->rsig, &e->rerr);
  free(y);
  return rc;
}

/* The stored scale byte of element (r, c): 1xN blocks, or one per 16x16 tile. */
static uint8_t scale_at(const ufp4_qtensor *q, size_t r, size_t c) {
  if (q->fmt.tile2d) return q->scale_bits[(r / 16) * ((q->cols + 15) / 16) + c / 16];
  size_t N = (size_t)q->fmt.block, nb = (q->cols + N - 1) / N;
  return q->scale_bits[r * nb + c / N];
}

/* ggml blocks of q, rows in GGUF order. */
static void encode_blocks(const ufp4_qtensor *q, ufp4_gguf_export_kind k, char permute,
                          const ufp4_model_config *c, uint8_t *out) {
  size_t be = k == UFP4_GGUF_EXPORT_MXFP4 ? 32 : 64, bb = k == UFP4_GGUF_EXPORT_MXFP4 ? 17 : 36;
  for (size_t r = 0; r < q->rows; r++) {
    size_t s = src_row(r, permute, c);
    const uint8_t *codes = q->codes + s * q->cols;
    for (size_t b = 0; b < q->cols / be; b++, out += bb) {
      if (k == UFP4_GGUF_EXPORT_MXFP4) {
        ufp4_gguf_mxfp4_block(codes + b * be, scale_at(q, s, b * be), out);
      } else {
        uint8_t d[4];
        for (int j = 0; j < 4; j++) d[j] = scale_at(q, s, b * be + 16 * (size_t)j);
        ufp4_gguf_nvfp4_block(codes + b * be, d, out);
      }
    }
  }
}

/* Adds one parameter tensor (and NVFP4's .scale) to g. */
static int add_tensor(ufp4_gguf *g, const ufp4_gguf_export_opts *o, const ufp4_model_config *c,
                      const ufp4_tensor_info *t, const float *w, ufp4_gguf_export_result *res,
                      energy *e) {
  gguf_name gn;
  int rc = map_name(t->name, &gn);
  if (rc) return rc;
  size_t rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->ndim == 2 ? t->shape[1] : t->shape[0];
  uint64_t ne[2] = {cols, rows};
  int quant = is_4bit(o, &gn, t->name);
  ufp4_ggml_type type = quant ? (o->kind == UFP4_GGUF_EXPORT_MXFP4 ? UFP4_GGML_MXFP4 : UFP4_GGML_NVFP4)
                        : (o->kind == UFP4_GGUF_EXPORT_BF16 && t->ndim == 2) ? UFP4_GGML_BF16
                                                                              : UFP4_GGML_F32;
  size_t size = ufp4_gguf_tensor_bytes(type, t->ndim, ne);
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) return ufp4_fail(UFP4_ENOMEM, "gguf export: out of memory for %s", t->name);
  ufp4_qtensor q = {0};
  float inv = 1.0f;
  if (quant && !(rc = quantize(o, t->name, w, rows, cols, &q, res, e))) {
    encode_blocks(&q, o->kind, gn.permute, c, buf);
    inv = 1.0f / q.tensor_scale;
    res->quantized++;
  } else if (!quant) {
    for (size_t r = 0; r < rows; r++) {
      const float *src = w + src_row(r, gn.permute, c) * cols;
      for (size_t j = 0; j < cols; j++) {
        if (type == UFP4_GGML_BF16) {
          uint16_t h = ufp4_f32_to_bf16_bits(src[j]);
          memcpy(buf + 2 * (r * cols + j), &h, 2);
        } else {
          memcpy(buf + 4 * (r * cols + j), &src[j], 4);
        }
      }
    }
  }
  if (!rc) rc = ufp4_gguf_add_tensor(g, gn.name, type, t->ndim, ne, buf, size);
  if (!rc) res->tensors++;
  if (!rc && type == UFP4_GGML_NVFP4) {
    char sname[sizeof gn.name + 8];
    snprintf(sname, sizeof sname, "%.*s.scale", (int)(strlen(gn.name) - strlen(".weight")), gn.name);
    uint64_t one = 1;
    rc = ufp4_gguf_add_tensor(g, sname, UFP4_GGML_F32, 1, &one, &inv, sizeof inv);
    if (!rc) res->tensors++;
  }
  ufp4_qtensor_free(&q);
  free(buf);
  return rc;
}

static int add_hparams(ufp4_gguf *g, const ufp4_model_config *c, const char *dir) {
  int rc = ufp4_gguf_kv_str(g, "general.architecture", "llama");
  if (!rc) rc = ufp4_gguf_kv_str(g, "general.name", dir);
  if (!rc) rc = ufp4_gguf_kv_u32(g, "llama.context_length", (uint32_t)c->seq_len);
  if (!rc) rc = ufp4_gguf_kv_u32(g, "llama.embedding_length", (uint32_t)c->d_model);
  if (!rc) rc = ufp4_gguf_kv_u32(g, "llama.block_count", (uint32_t)c->n_layers);
  if (!rc) rc = ufp4_gguf_kv_u32(g, "llama.feed_forward_length", (uint32_t)c->ffn_dim);
  if (!rc) rc = ufp4_gguf_kv_u32(g, "llama.attention.head_count", (uint32_t)c->n_heads);
  if (!rc) rc = ufp4_gguf_kv_u32(g, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads);
  if (!rc) rc = ufp4_gguf_kv_u32(g, "llama.rope.dimension_count", (uint32_t)(c->d_model / c->n_heads));
  if (!rc) rc = ufp4_gguf_kv_f32(g, "llama.rope.freq_base", (float)c->rope_theta);
  if (!rc) rc = ufp4_gguf_kv_f32(g, "llama.attention.layer_norm_rms_epsilon", c->rms_eps);
  if (!rc) rc = ufp4_gguf_kv_u32(g, "llama.vocab_size", (uint32_t)c->vocab);
  return rc;
}

/* The bytes b[0..len) in GPT-2's byte-to-unicode alphabet (UTF-8, at most 2 bytes each) into out. */
static size_t unicode_text(const uint8_t *b, size_t len, const uint32_t cp[256], char *out) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    uint32_t u = cp[b[i]];
    if (u < 0x80) out[n++] = (char)u;
    else out[n++] = (char)(0xC0 | u >> 6), out[n++] = (char)(0x80 | (u & 0x3F)); /* all < U+0800 */
  }
  return n;
}

typedef struct {
  char **s;
  size_t *len;
  size_t n;
} strlist;

static void strlist_free(strlist *l) {
  if (l->s)
    for (size_t i = 0; i < l->n; i++) free(l->s[i]);
  free(l->s), free(l->len);
}

static int strlist_init(strlist *l, size_t n) {
  l->n = n;
  l->s = calloc(n ? n : 1, sizeof *l->s);
  l->len = calloc(n ? n : 1, sizeof *l->len);
  return l->s && l->len ? 0 : ufp4_fail(UFP4_ENOMEM, "gguf export: out of memory for the vocabulary");
}

/* tokens[i]: ufp4 token i in GPT-2's alphabet, or padding; types[i]: 1 normal, 3 control, 5 unused. */
static int vocab_strings(const ufp4_tokenizer *tok, uint32_t vocab, strlist *tokens, int32_t *types) {
  uint32_t cp[256];
  ufp4_byte_to_unicode(cp);
  int rc = strlist_init(tokens, vocab);
  int64_t eot = ufp4_tokenizer_eot(tok);
  for (uint32_t i = 0; !rc && i < vocab; i++) {
    size_t len;
    const uint8_t *b = i < ufp4_tokenizer_vocab_size(tok) ? ufp4_tokenizer_token_bytes(tok, i, &len) : NULL;
    size_t cap = b ? 2 * len + 1 : 32;
    if (!(tokens->s[i] = malloc(cap))) return ufp4_fail(UFP4_ENOMEM, "gguf export: out of memory");
    if ((int64_t)i == eot || !b) {
      tokens->len[i] = b ? len : (size_t)snprintf(tokens->s[i], cap, "<|ufp4_unused_%u|>", i);
      if (b) memcpy(tokens->s[i], b, len); /* "<|endoftext|>" as it is, a control token */
      types[i] = b ? 3 : 5;
    } else {
      tokens->len[i] = unicode_text(b, len, cp, tokens->s[i]);
      types[i] = 1;
    }
  }
  return rc;
}

/* "a b" for each merge, in GPT-2's alphabet. */
static int merge_strings(const ufp4_tokenizer *tok, const strlist *tokens, strlist *merges) {
  uint32_t n = ufp4_tokenizer_merge_count(tok);
  int rc = strlist_init(merges, n);
  for (uint32_t r = 0; !rc && r < n; r++) {
    uint32_t a, b;
    if ((rc = ufp4_tokenizer_merge(tok, r, &a, &b))) break;
    size_t la = tokens->len[a], lb = tokens->len[b];
    if (!(merges->s[r] = malloc(la + lb + 1))) return ufp4_fail(UFP4_ENOMEM, "gguf export: out of memory");
    memcpy(merges->s[r], tokens->s[a], la);
    merges->s[r][la] = ' ';
    memcpy(merges->s[r] + la + 1, tokens->s[b], lb);
    merges->len[r] = la + lb + 1;
  }
  return rc;
}

static int add_tokenizer(ufp4_gguf *g, const char *spec, uint32_t vocab) {
  ufp4_tokenizer *tok;
  int rc = ufp4_tokenizer_open(spec, &tok);
  if (rc) return rc;
  if (ufp4_tokenizer_vocab_size(tok) > vocab) {
    rc = ufp4_fail(UFP4_EINVAL, "gguf export: tokenizer %s has %u tokens, more than the model's vocabulary of %u",
                   spec, ufp4_tokenizer_vocab_size(tok), vocab);
    ufp4_tokenizer_free(tok);
    return rc;
  }
  strlist tokens = {0}, merges = {0};
  int32_t *types = malloc(vocab * sizeof *types);
  if (!types) rc = ufp4_fail(UFP4_ENOMEM, "gguf export: out of memory");
  if (!rc) rc = vocab_strings(tok, vocab, &tokens, types);
  if (!rc) rc = merge_strings(tok, &tokens, &merges);
  if (!rc) rc = ufp4_gguf_kv_str(g, "tokenizer.ggml.model", "gpt2");
  if (!rc) rc = ufp4_gguf_kv_str(g, "tokenizer.ggml.pre", "gpt-2");
  if (!rc) rc = ufp4_gguf_kv_str_array(g, "tokenizer.ggml.tokens", (const char *const *)tokens.s, tokens.len, vocab);
  if (!rc) rc = ufp4_gguf_kv_i32_array(g, "tokenizer.ggml.token_type", types, vocab);
  if (!rc) rc = ufp4_gguf_kv_str_array(g, "tokenizer.ggml.merges", (const char *const *)merges.s, merges.len, merges.n);
  int64_t eot = ufp4_tokenizer_eot(tok);
  if (!rc && eot >= 0) rc = ufp4_gguf_kv_u32(g, "tokenizer.ggml.bos_token_id", (uint32_t)eot);
  if (!rc && eot >= 0) rc = ufp4_gguf_kv_u32(g, "tokenizer.ggml.eos_token_id", (uint32_t)eot);
  if (!rc) rc = ufp4_gguf_kv_bool(g, "tokenizer.ggml.add_bos_token", 0);
  if (!rc) rc = ufp4_gguf_kv_bool(g, "tokenizer.ggml.add_eos_token", 0);
  strlist_free(&tokens), strlist_free(&merges), free(types);
  ufp4_tokenizer_free(tok);
  return rc;
}

static int load(const char *dir, ufp4_model **m) {
  int rc = ufp4_model_load(dir, "fp32", 1, m);
  if (!rc && ufp4_model_get_config(*m)->moe_experts > 0) {
    rc = ufp4_fail(UFP4_EINVAL, "%s: an MoE checkpoint; the GGUF export handles dense models only", dir);
    ufp4_model_free(*m), *m = NULL;
  }
  return rc;
}

/* Sets e->wfmt and, from the run folder above dir (DIR/../../config.json), e->rec: the recipe each
 * projection of model c trained under when the checkpoint was written. That is the schedule's
 * phase that ran the checkpoint's last step, with the run's overrides and the blocks its recipe
 * kept in fp32 (proj_recipes_resolve), and res->run_recipe names it. e->rec stays empty, and
 * res->recipe_holds -1, for a high-precision export, without a run config, for a schedule whose
 * step the folder's name does not give, and when no block projection trained in 4 bits. */
static int run_recipes(const char *dir, ufp4_gguf_export_kind kind, const ufp4_model_config *c,
                       ufp4_gguf_export_result *res, energy *e) {
  res->recipe_holds = -1;
  res->recipe_sqnr_db = NAN;
  int rc = weight_format(kind, &e->wfmt);
  if (rc || (kind != UFP4_GGUF_EXPORT_MXFP4 && kind != UFP4_GGUF_EXPORT_NVFP4)) return rc;
  char path[4200];
  snprintf(path, sizeof path, "%s/../../config.json", dir);
  ufp4_train_config cfg = ufp4_train_config_default();
  ufp4_recipe_schedule sched;
  ufp4_recipe base;
  FILE *fp = fopen(path, "rb");
  if (!fp) return 0;
  fclose(fp);
  const char *spec = ufp4_train_config_load(path, &cfg) ? NULL : ufp4_train_recipe_at(&cfg, dir, &sched);
  if (!spec || ufp4_recipe_parse(spec, &base)) return 0;
  /* The format of the projections it did not train in a format ggml holds: its own, if it has one. */
  ufp4_qformat own = ufp4_recipe_operand_format(&base, UFP4_OP_FPROP_W);
  if (ufp4_recipe_gemm_precision(&base, UFP4_FPROP) == UFP4_PREC_FP4 && ggml_holds(kind, &own)) e->wfmt = own;
  int n = snprintf(res->run_recipe, sizeof res->run_recipe, "%s", spec);
  if (n >= 0 && (size_t)n < sizeof res->run_recipe && (cfg.overrides[0] || sched.n > 1))
    snprintf(res->run_recipe + n, sizeof res->run_recipe - (size_t)n, " (%s%s%s)", cfg.overrides[0] ? "with its overrides" : "",
             cfg.overrides[0] && sched.n > 1 ? ", " : "", sched.n > 1 ? "its schedule's phase at this step" : "");
  /* The run's overrides must fit this checkpoint's model, as the HF export requires too. */
  if ((rc = proj_recipes_resolve(c, &base, cfg.overrides, &e->rec))) return rc;
  if (!proj_recipes_block_fp4(&e->rec)) {
    proj_recipes_free(&e->rec);
    return 0;
  }
  res->recipe_holds = 0; /* finish() decides */
  return 0;
}

/* "e2m1, nvfp4 scales, 16x16 tiles, rne[, 4over6 by mse]" */
static void describe(const ufp4_qformat *f, char *buf, size_t size) {
  char shape[32];
  if (f->tile2d) snprintf(shape, sizeof shape, "%dx%d tiles", f->tile2d, f->tile2d);
  else snprintf(shape, sizeof shape, "1x%d blocks", f->block);
  int n = snprintf(buf, size, "e2m1, %s scales, %s, %s", ufp4_scale_name(f->scale), shape, ufp4_round_name(f->round));
  if (f->adaptive && n >= 0 && (size_t)n < size)
    snprintf(buf + n, size - (size_t)n, ", %s by %s", ufp4_adaptive_name(f->adaptive), ufp4_metric_name(f->metric));
}

static double sqnr_db(double sig, double err) { return err > 0 ? 10.0 * log10(sig / err) : INFINITY; }

static void finish(ufp4_gguf_export_result *res, const energy *e) {
  size_t n = 0;
  for (int i = 0; i < e->n_used && n < sizeof res->weight_format; i++) {
    char one[sizeof res->weight_format];
    describe(&e->used[i], one, sizeof one);
    int k = snprintf(res->weight_format + n, sizeof res->weight_format - n, "%s%s", i ? "; " : e->n_used > 1 ? "by projection: " : "", one);
    n = k < 0 ? sizeof res->weight_format : n + (size_t)k;
  }
  res->sqnr_db = sqnr_db(e->sig, e->err);
  res->follows_run = res->held > 0;
  if (res->recipe_holds < 0) return;
  /* Every 4-bit projection in the format its run trained it with: the file holds what it trained. */
  res->recipe_holds = res->held == res->quantized;
  if (!res->recipe_holds && !e->no_reference) res->recipe_sqnr_db = sqnr_db(e->rsig, e->rerr);
}

static void energy_free(energy *e) { proj_recipes_free(&e->rec); }

int ufp4_gguf_export(const char *dir, const char *path, const ufp4_gguf_export_opts *o,
                     ufp4_gguf_export_result *res) {
  memset(res, 0, sizeof *res);
  if (!o->tokenizer) return ufp4_fail(UFP4_EINVAL, "gguf export: a tokenizer is required");
  ufp4_model *m;
  int rc = load(dir, &m);
  if (rc) return rc;
  const ufp4_model_config *c = ufp4_model_get_config(m);
  ufp4_gguf *g;
  energy e = {0};
  if ((rc = run_recipes(dir, o->kind, c, res, &e)) || (rc = ufp4_gguf_create(&g))) goto out;
  rc = add_hparams(g, c, dir);
  if (!rc) rc = add_tokenizer(g, o->tokenizer, (uint32_t)c->vocab);
  for (int i = 0; !rc && i < ufp4_model_tensor_count(c); i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    rc = add_tensor(g, o, c, &t, ufp4_model_params(m) + t.offset, res, &e);
  }
  if (!rc) rc = ufp4_gguf_write(g, path, &res->bytes);
  finish(res, &e);
  ufp4_gguf_free(g);
out:
  energy_free(&e);
  ufp4_model_free(m);
  return rc;
}

int ufp4_gguf_export_dequantized(const char *dir, const char *out_dir, const ufp4_gguf_export_opts *o,
                                 ufp4_gguf_export_result *res) {
  memset(res, 0, sizeof *res);
  ufp4_model *m;
  int rc = load(dir, &m);
  if (rc) return rc;
  const ufp4_model_config *c = ufp4_model_get_config(m);
  energy e = {0};
  rc = run_recipes(dir, o->kind, c, res, &e);
  for (int i = 0; !rc && i < ufp4_model_tensor_count(c); i++) {
    ufp4_tensor_info t;
    gguf_name gn;
    ufp4_model_tensor(c, i, &t);
    if ((rc = map_name(t.name, &gn)) || !is_4bit(o, &gn, t.name)) continue;
    float *w = ufp4_model_params(m) + t.offset;
    ufp4_qtensor q = {0};
    if (!(rc = quantize(o, t.name, w, t.shape[0], t.shape[1], &q, res, &e))) {
      ufp4_dequantize(&q, w);
      res->quantized++;
    }
    ufp4_qtensor_free(&q);
  }
  if (!rc) rc = ufp4_checkpoint_save(out_dir, m, NULL, NULL, NULL);
  finish(res, &e);
  energy_free(&e);
  ufp4_model_free(m);
  return rc;
}
