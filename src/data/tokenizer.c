#include "ufp4/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/tok_internal.h"
#include "core/utf8.h"
#include "ufp4/error.h"

int ufp4_tokvec_push(ufp4_tokvec *v, uint32_t id) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? 2 * v->cap : 1024;
    uint32_t *p = realloc(v->ids, cap * sizeof *p);
    if (!p) return ufp4_fail(UFP4_ENOMEM, "token vector: out of memory");
    v->ids = p;
    v->cap = cap;
  }
  v->ids[v->n++] = id;
  return 0;
}

void ufp4_tokvec_free(ufp4_tokvec *v) {
  free(v->ids);
  memset(v, 0, sizeof *v);
}

static int open_bytes(ufp4_tokenizer **out) {
  ufp4_tokenizer *t = calloc(1, sizeof *t);
  if (t) t->blob = malloc(256), t->off = malloc(257 * sizeof *t->off);
  if (!t || !t->blob || !t->off) {
    ufp4_tokenizer_free(t);
    return ufp4_fail(UFP4_ENOMEM, "bytes tokenizer: out of memory");
  }
  t->kind = UFP4_TOK_BYTES;
  t->vocab = 256;
  t->eot = -1;
  for (int b = 0; b < 256; b++) t->blob[b] = (uint8_t)b, t->off[b] = (size_t)b, t->byte_id[b] = (uint32_t)b;
  t->off[256] = 256;
  *out = t;
  return 0;
}

int ufp4_tokenizer_load_bpe(const char *encoder_json, const char *vocab_bpe, ufp4_tokenizer **out) {
  *out = NULL;
  ufp4_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return ufp4_fail(UFP4_ENOMEM, "tokenizer: out of memory");
  int rc = ufp4_bpe_load_files(t, encoder_json, vocab_bpe);
  if (rc) {
    ufp4_tokenizer_free(t);
    return rc;
  }
  *out = t;
  return 0;
}

static int is_dir(const char *p) {
  struct stat st;
  return !stat(p, &st) && S_ISDIR(st.st_mode);
}

/* dir + "/" + name into out[cap]; fails on paths too long rather than truncating them. */
static int join(char *out, size_t cap, const char *dir, const char *name) {
  size_t ld = strlen(dir), ln = strlen(name);
  if (ld + 1 + ln + 1 > cap) return ufp4_fail(UFP4_EINVAL, "%s: path too long", dir);
  memcpy(out, dir, ld);
  out[ld] = '/';
  memcpy(out + ld + 1, name, ln + 1);
  return 0;
}

static int open_dir(const char *dir, ufp4_tokenizer **out) {
  char enc[4096], voc[4096];
  int rc = join(enc, sizeof enc, dir, "encoder.json");
  if (!rc) rc = join(voc, sizeof voc, dir, "vocab.bpe");
  return rc ? rc : ufp4_tokenizer_load_bpe(enc, voc, out);
}

int ufp4_tokenizer_open(const char *spec, ufp4_tokenizer **out) {
  *out = NULL;
  if (!spec || !*spec) return ufp4_fail(UFP4_EINVAL, "tokenizer: empty name");
  if (!strcmp(spec, "bytes")) return open_bytes(out);
  char dir[4096];
  if (!strcmp(spec, "gpt2")) {
    const char *env = getenv("UFP4_GPT2_DIR"), *src = getenv("UFP4_SOURCE_DIR");
    if (env && *env) snprintf(dir, sizeof dir, "%s", env);
    else if (src && *src) {
      if (join(dir, sizeof dir, src, "data/raw/gpt2")) return UFP4_EINVAL;
    }
    else snprintf(dir, sizeof dir, "data/raw/gpt2");
    if (!is_dir(dir))
      return ufp4_fail(UFP4_EIO,
                       "%s: GPT-2 tokenizer files are missing (run scripts/fetch_data.sh; a relative path is "
                       "read from the current folder: run from the checkout, or set UFP4_GPT2_DIR or "
                       "UFP4_SOURCE_DIR)", dir);
    int rc = open_dir(dir, out);
    if (!rc && (*out)->kind != UFP4_TOK_GPT2) {
      ufp4_tokenizer_free(*out);
      *out = NULL;
      return ufp4_fail(UFP4_EFORMAT, "%s: encoder.json/vocab.bpe are not GPT-2's (hash mismatch)", dir);
    }
    return rc;
  }
  if (is_dir(spec)) return open_dir(spec, out);
  /* the path of an encoder.json, with vocab.bpe beside it */
  if (strlen(spec) >= sizeof dir) return ufp4_fail(UFP4_EINVAL, "%s: path too long", spec);
  memcpy(dir, spec, strlen(spec) + 1);
  char *slash = strrchr(dir, '/');
  char voc[4096];
  if (slash) {
    *slash = 0;
    if (join(voc, sizeof voc, dir, "vocab.bpe")) return UFP4_EINVAL;
  } else {
    memcpy(voc, "vocab.bpe", sizeof "vocab.bpe");
  }
  struct stat st;
  if (stat(spec, &st))
    return ufp4_fail(UFP4_EIO, "%s: no such tokenizer (expected bytes, gpt2, a directory with "
                               "encoder.json and vocab.bpe, or an encoder.json)", spec);
  return ufp4_tokenizer_load_bpe(spec, voc, out);
}

void ufp4_tokenizer_free(ufp4_tokenizer *t) {
  if (!t) return;
  free(t->blob);
  free(t->off);
  ufp4_u64map_free(&t->merges);
  free(t->merge_pairs);
  ufp4_strmap_free(&t->cache);
  free(t->cache_ids);
  free(t->word);
  free(t->word2);
  free(t);
}

ufp4_tok_kind ufp4_tokenizer_kind(const ufp4_tokenizer *t) { return t->kind; }
const char *ufp4_tokenizer_name(const ufp4_tokenizer *t) {
  return t->kind == UFP4_TOK_BYTES ? "bytes" : t->kind == UFP4_TOK_GPT2 ? "gpt2" : "bpe";
}
uint32_t ufp4_tokenizer_vocab_size(const ufp4_tokenizer *t) { return t->vocab; }
int64_t ufp4_tokenizer_eot(const ufp4_tokenizer *t) { return t->eot; }
uint64_t ufp4_tokenizer_hash(const ufp4_tokenizer *t) { return t->hash; }
uint32_t ufp4_tokenizer_merge_count(const ufp4_tokenizer *t) { return t->n_merges; }

int ufp4_tokenizer_merge(const ufp4_tokenizer *t, uint32_t rank, uint32_t *a, uint32_t *b) {
  if (rank >= t->n_merges)
    return ufp4_fail(UFP4_EINVAL, "tokenizer: merge %u out of range (%u merges)", rank, t->n_merges);
  *a = t->merge_pairs[rank][0], *b = t->merge_pairs[rank][1];
  return 0;
}

const uint8_t *ufp4_tokenizer_token_bytes(const ufp4_tokenizer *t, uint32_t id, size_t *len) {
  if (id >= t->vocab) return NULL;
  *len = t->off[id + 1] - t->off[id];
  return t->blob + t->off[id];
}

typedef struct {
  ufp4_tokenizer *t;
  const uint8_t *s;
  ufp4_tokvec *out;
} piece_ctx;

static int on_piece(void *ctx, size_t off, size_t n) {
  piece_ctx *p = ctx;
  return ufp4_bpe_encode_piece(p->t, p->s + off, n, p->out);
}

int ufp4_tokenizer_encode(ufp4_tokenizer *t, const char *text, size_t len, const char *what,
                          ufp4_tokvec *out) {
  if (t->kind == UFP4_TOK_BYTES) {
    size_t bad;
    if (!ufp4_utf8_valid(text, len, &bad))
      return ufp4_fail(UFP4_EFORMAT, "%s: invalid UTF-8 at byte offset %zu", what ? what : "text", bad);
    if (out->cap - out->n < len) {
      size_t cap = out->n + len;
      uint32_t *p = realloc(out->ids, cap * sizeof *p);
      if (!p) return ufp4_fail(UFP4_ENOMEM, "token vector: out of memory");
      out->ids = p;
      out->cap = cap;
    }
    for (size_t i = 0; i < len; i++) out->ids[out->n++] = (uint8_t)text[i];
    return 0;
  }
  piece_ctx p = {t, (const uint8_t *)text, out};
  return ufp4_pretokenize(text, len, what, on_piece, &p);
}

int ufp4_tokenizer_decode(const ufp4_tokenizer *t, const uint32_t *ids, size_t n, char **text, size_t *len) {
  *text = NULL;
  *len = 0;
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] >= t->vocab)
      return ufp4_fail(UFP4_EINVAL, "decode: token %zu is id %u, outside the vocabulary of %u", i, ids[i],
                       t->vocab);
    total += t->off[ids[i] + 1] - t->off[ids[i]];
  }
  char *s = malloc(total + 1);
  if (!s) return ufp4_fail(UFP4_ENOMEM, "decode: out of memory");
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    size_t l = t->off[ids[i] + 1] - t->off[ids[i]];
    memcpy(s + k, t->blob + t->off[ids[i]], l);
    k += l;
  }
  s[k] = 0;
  *text = s;
  *len = k;
  return 0;
}
