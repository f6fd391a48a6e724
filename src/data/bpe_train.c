/* BPE training with incremental pair counts (see ufp4/tokenizer.h for the rules). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/byte_unicode.h"
#include "data/grow.h"
#include "data/hashmap.h"
#include "core/utf8.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/tokenizer.h"

typedef struct {
  uint32_t a, b;
  int64_t count;
  uint32_t *occ; /* words that contained the pair when it was counted (may be stale) */
  uint32_t n_occ, cap_occ;
  uint32_t pushed_at; /* merge number at which the pair was queued for a heap push */
} pair_rec;

typedef struct {
  int64_t count;
  uint32_t a, b;
} heap_ent;

typedef struct {
  /* words: unique pre-tokens with their frequencies */
  size_t n_words;
  uint32_t *sym;   /* symbols of all words, word w at sym[start[w]], len[w] long */
  size_t *start;
  uint32_t *len, *freq, *visited;
  /* pairs */
  ufp4_u64map pmap; /* (a << 32 | b) -> index into pairs */
  pair_rec *pairs;
  size_t n_pairs, cap_pairs;
  heap_ent *heap;
  size_t n_heap, cap_heap;
  uint32_t *touched;
  size_t n_touched, cap_touched;
  /* tokens */
  ufp4_strmap tok_by_bytes;
  uint8_t *tblob;
  size_t *toff, n_tok, cap_tok, tblob_len, tblob_cap;
  uint32_t (*merges)[2];
  size_t n_merges, cap_merges;
} trainer;

static int heap_less(const heap_ent *x, const heap_ent *y) { /* x has lower priority than y */
  if (x->count != y->count) return x->count < y->count;
  if (x->a != y->a) return x->a > y->a;
  return x->b > y->b;
}

static int heap_push(trainer *t, heap_ent e) {
  if (ufp4_grow((void **)&t->heap, &t->cap_heap, t->n_heap + 1, sizeof e)) return -1;
  size_t i = t->n_heap++;
  while (i && heap_less(&t->heap[(i - 1) / 2], &e)) {
    t->heap[i] = t->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  t->heap[i] = e;
  return 0;
}

static heap_ent heap_pop(trainer *t) {
  heap_ent top = t->heap[0], last = t->heap[--t->n_heap];
  size_t i = 0, n = t->n_heap;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && heap_less(&t->heap[c], &t->heap[c + 1])) c++;
    if (!heap_less(&last, &t->heap[c])) break;
    t->heap[i] = t->heap[c];
    i = c;
  }
  if (n) t->heap[i] = last;
  return top;
}

static pair_rec *get_pair(trainer *t, uint32_t a, uint32_t b, int create) {
  uint64_t key = (uint64_t)a << 32 | b;
  uint64_t *v = ufp4_u64map_get(&t->pmap, key);
  if (v) return &t->pairs[*v];
  if (!create) return NULL;
  if (ufp4_grow((void **)&t->pairs, &t->cap_pairs, t->n_pairs + 1, sizeof *t->pairs)) return NULL;
  if (!ufp4_u64map_put(&t->pmap, key, t->n_pairs)) return NULL;
  pair_rec *p = &t->pairs[t->n_pairs++];
  memset(p, 0, sizeof *p);
  p->a = a;
  p->b = b;
  p->pushed_at = UINT32_MAX;
  return p;
}

static int add_occ(pair_rec *p, uint32_t w) {
  if (p->n_occ && p->occ[p->n_occ - 1] == w) return 0;
  size_t cap = p->cap_occ;
  if (ufp4_grow((void **)&p->occ, &cap, (size_t)p->n_occ + 1, sizeof *p->occ)) return -1;
  p->cap_occ = (uint32_t)cap;
  p->occ[p->n_occ++] = w;
  return 0;
}

static int add_token(trainer *t, const uint8_t *bytes, size_t n) {
  if (ufp4_grow((void **)&t->toff, &t->cap_tok, t->n_tok + 2, sizeof *t->toff) ||
      ufp4_grow((void **)&t->tblob, &t->tblob_cap, t->tblob_len + n, 1))
    return -1;
  if (!t->n_tok) t->toff[0] = 0;
  memcpy(t->tblob + t->tblob_len, bytes, n);
  if (!ufp4_strmap_put(&t->tok_by_bytes, bytes, n, t->n_tok, NULL)) return -1;
  t->tblob_len += n;
  t->toff[++t->n_tok] = t->tblob_len;
  return 0;
}

typedef struct {
  trainer *t;
  const uint8_t *s;
  ufp4_strmap *words;
  int oom;
} count_ctx;

static int count_piece(void *ctx, size_t off, size_t n) {
  count_ctx *c = ctx;
  int added;
  uint64_t *v = ufp4_strmap_put(c->words, c->s + off, n, 0, &added);
  if (!v) return c->oom = UFP4_ENOMEM;
  (*v)++;
  return 0;
}

static int build_words(trainer *t, const ufp4_corpus *corpus, const uint32_t byte_id[256]) {
  ufp4_strmap words = {0};
  int rc = 0;
  for (size_t d = 0; !rc && d < corpus->n_docs; d++) {
    count_ctx c = {t, (const uint8_t *)corpus->texts[d], &words, 0};
    rc = ufp4_pretokenize(corpus->texts[d], corpus->lens[d], corpus->names ? corpus->names[d] : NULL,
                          count_piece, &c);
    if (c.oom) rc = ufp4_fail(UFP4_ENOMEM, "bpe train: out of memory");
  }
  if (rc) {
    ufp4_strmap_free(&words);
    return rc;
  }
  /* word order = first appearance in the arena, which is deterministic */
  t->n_words = words.n;
  t->start = malloc((words.n + 1) * sizeof *t->start);
  t->len = malloc(words.n * sizeof *t->len);
  t->freq = malloc(words.n * sizeof *t->freq);
  t->visited = malloc(words.n * sizeof *t->visited);
  t->sym = malloc((words.arena_len ? words.arena_len : 1) * sizeof *t->sym);
  size_t *order = malloc(words.n * sizeof *order);
  if (!t->start || !t->len || !t->freq || !t->visited || !t->sym || !order) {
    free(order);
    ufp4_strmap_free(&words);
    return ufp4_fail(UFP4_ENOMEM, "bpe train: out of memory");
  }
  for (size_t i = 0, k = 0; i < words.cap; i++)
    if (words.slots[i].len != SIZE_MAX) order[k++] = i;
  /* slots are in hash order; sort them by arena offset */
  for (size_t i = 0; i < words.n; i++) t->visited[i] = 0;
  size_t *by_off = calloc(words.arena_len + 1, sizeof *by_off);
  if (!by_off) {
    free(order);
    ufp4_strmap_free(&words);
    return ufp4_fail(UFP4_ENOMEM, "bpe train: out of memory");
  }
  for (size_t k = 0; k < words.n; k++) by_off[words.slots[order[k]].off] = order[k] + 1;
  size_t w = 0, pos = 0;
  for (size_t off = 0; off < words.arena_len; off++) {
    if (!by_off[off]) continue;
    const ufp4_strmap_slot *s = &words.slots[by_off[off] - 1];
    t->start[w] = pos;
    t->len[w] = (uint32_t)s->len;
    t->freq[w] = (uint32_t)s->val;
    for (size_t i = 0; i < s->len; i++) t->sym[pos++] = byte_id[words.arena[s->off + i]];
    w++;
  }
  free(by_off);
  free(order);
  ufp4_strmap_free(&words);
  return 0;
}

static int count_pairs(trainer *t) {
  for (size_t w = 0; w < t->n_words; w++) {
    const uint32_t *s = t->sym + t->start[w];
    for (uint32_t i = 0; i + 1 < t->len[w]; i++) {
      pair_rec *p = get_pair(t, s[i], s[i + 1], 1);
      if (!p || add_occ(p, (uint32_t)w)) return -1;
      p->count += t->freq[w];
    }
  }
  for (size_t i = 0; i < t->n_pairs; i++)
    if (heap_push(t, (heap_ent){t->pairs[i].count, t->pairs[i].a, t->pairs[i].b})) return -1;
  return 0;
}

/* Replaces every (a,b) by c in the words that contain it, adjusting the counts of the pairs
 * around each site; pairs containing c are queued for the heap. */
static int apply_merge(trainer *t, uint32_t a, uint32_t b, uint32_t c, uint32_t merge_no) {
  pair_rec *p = get_pair(t, a, b, 0);
  uint32_t *occ = p->occ, n_occ = p->n_occ;
  p->occ = NULL;
  p->n_occ = p->cap_occ = 0;
  t->n_touched = 0;
  int rc = 0;
  for (uint32_t k = 0; !rc && k < n_occ; k++) {
    uint32_t w = occ[k];
    if (t->visited[w] == merge_no + 1) continue;
    t->visited[w] = merge_no + 1;
    uint32_t *s = t->sym + t->start[w], n = t->len[w], f = t->freq[w];
    int found = 0;
    for (uint32_t i = 0; i + 1 < n && !found; i++) found = s[i] == a && s[i + 1] == b;
    if (!found) continue;
    for (uint32_t i = 0; i + 1 < n; i++) get_pair(t, s[i], s[i + 1], 0)->count -= f;
    uint32_t j = 0;
    for (uint32_t i = 0; i < n;) {
      if (i + 1 < n && s[i] == a && s[i + 1] == b) s[j++] = c, i += 2;
      else s[j++] = s[i++];
    }
    t->len[w] = n = j;
    for (uint32_t i = 0; !rc && i + 1 < n; i++) {
      pair_rec *q = get_pair(t, s[i], s[i + 1], 1);
      if (!q) {
        rc = -1;
        break;
      }
      q->count += f;
      if (s[i] != c && s[i + 1] != c) continue;
      if (add_occ(q, w)) rc = -1;
      if (q->pushed_at != merge_no) {
        q->pushed_at = merge_no;
        if (ufp4_grow((void **)&t->touched, &t->cap_touched, t->n_touched + 1, sizeof *t->touched)) rc = -1;
        else t->touched[t->n_touched++] = (uint32_t)(q - t->pairs);
      }
    }
  }
  free(occ);
  for (size_t i = 0; !rc && i < t->n_touched; i++) {
    const pair_rec *q = &t->pairs[t->touched[i]];
    if (q->count > 0 && heap_push(t, (heap_ent){q->count, q->a, q->b})) rc = -1;
  }
  return rc ? ufp4_fail(UFP4_ENOMEM, "bpe train: out of memory") : 0;
}

static int learn(trainer *t, uint32_t max_tokens) {
  uint8_t buf[1024];
  while (t->n_tok < max_tokens && t->n_heap) {
    heap_ent e = heap_pop(t);
    pair_rec *p = get_pair(t, e.a, e.b, 0);
    if (p->count != e.count) { /* stale: requeue with the current count */
      if (p->count > 0 && heap_push(t, (heap_ent){p->count, p->a, p->b}))
        return ufp4_fail(UFP4_ENOMEM, "bpe train: out of memory");
      continue;
    }
    if (e.count < 2) break;
    size_t la = t->toff[e.a + 1] - t->toff[e.a], lb = t->toff[e.b + 1] - t->toff[e.b];
    if (la + lb > 256) { /* keep tokens within the loader's 256-byte limit; never pick it again */
      p->count = 0;
      continue;
    }
    memcpy(buf, t->tblob + t->toff[e.a], la);
    memcpy(buf + la, t->tblob + t->toff[e.b], lb);
    uint64_t *existing = ufp4_strmap_get(&t->tok_by_bytes, buf, la + lb);
    uint32_t c = existing ? (uint32_t)*existing : (uint32_t)t->n_tok;
    if (!existing && add_token(t, buf, la + lb)) return ufp4_fail(UFP4_ENOMEM, "bpe train: out of memory");
    if (ufp4_grow((void **)&t->merges, &t->cap_merges, t->n_merges + 1, sizeof *t->merges))
      return ufp4_fail(UFP4_ENOMEM, "bpe train: out of memory");
    t->merges[t->n_merges][0] = e.a;
    t->merges[t->n_merges][1] = e.b;
    int rc = apply_merge(t, e.a, e.b, c, (uint32_t)t->n_merges);
    t->n_merges++;
    if (rc) return rc;
  }
  return 0;
}

/* A token's bytes in the byte-unicode alphabet, NUL-terminated, into out[cap]. */
static void token_string(const trainer *t, uint32_t id, const uint32_t cp[256], char *out) {
  size_t k = 0;
  for (size_t i = t->toff[id]; i < t->toff[id + 1]; i++) k += (size_t)ufp4_utf8_encode(cp[t->tblob[i]], (uint8_t *)out + k);
  out[k] = 0;
}

static int write_files(const trainer *t, const char *dir) {
  uint32_t cp[256];
  ufp4_byte_to_unicode(cp);
  char path[4096], s[1100], s2[1100];
  if (mkdir(dir, 0777) && errno != EEXIST)
    return ufp4_fail(UFP4_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
  cJSON *root = cJSON_CreateObject();
  int ok = root != NULL;
  for (uint32_t id = 0; ok && id < t->n_tok; id++) {
    token_string(t, id, cp, s);
    ok = cJSON_AddNumberToObject(root, s, id) != NULL;
  }
  ok = ok && cJSON_AddNumberToObject(root, "<|endoftext|>", (double)t->n_tok);
  char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!json) return ufp4_fail(UFP4_ENOMEM, "bpe train: out of memory");
  snprintf(path, sizeof path, "%.4000s/encoder.json", dir);
  int rc = ufp4_write_file_atomic(path, json, strlen(json));
  free(json);
  if (rc) return rc;
  size_t cap = 64 + t->n_merges * 2200, n = 0;
  char *text = malloc(cap);
  if (!text) return ufp4_fail(UFP4_ENOMEM, "bpe train: out of memory");
  n += (size_t)sprintf(text, "#version: 0.2\n");
  for (size_t m = 0; m < t->n_merges; m++) {
    token_string(t, t->merges[m][0], cp, s);
    token_string(t, t->merges[m][1], cp, s2);
    n += (size_t)sprintf(text + n, "%s %s\n", s, s2);
  }
  snprintf(path, sizeof path, "%.4000s/vocab.bpe", dir);
  rc = ufp4_write_file_atomic(path, text, n);
  free(text);
  return rc;
}

static void trainer_free(trainer *t) {
  free(t->sym);
  free(t->start);
  free(t->len);
  free(t->freq);
  free(t->visited);
  for (size_t i = 0; i < t->n_pairs; i++) free(t->pairs[i].occ);
  free(t->pairs);
  ufp4_u64map_free(&t->pmap);
  free(t->heap);
  free(t->touched);
  ufp4_strmap_free(&t->tok_by_bytes);
  free(t->tblob);
  free(t->toff);
  free(t->merges);
}

int ufp4_bpe_train(const ufp4_corpus *corpus, uint32_t vocab_size, const char *out_dir, uint32_t *out_vocab) {
  if (vocab_size < 258 || vocab_size > (1u << 24))
    return ufp4_fail(UFP4_EINVAL, "bpe train: vocabulary size %u is outside 258..%u", vocab_size, 1u << 24);
  if (!corpus->n_docs) return ufp4_fail(UFP4_EINVAL, "bpe train: empty corpus");
  trainer t;
  memset(&t, 0, sizeof t);
  uint8_t order[256];
  uint32_t byte_id[256];
  ufp4_byte_order(order);
  int rc = 0;
  for (int k = 0; !rc && k < 256; k++) {
    byte_id[order[k]] = (uint32_t)k;
    if (add_token(&t, &order[k], 1)) rc = ufp4_fail(UFP4_ENOMEM, "bpe train: out of memory");
  }
  if (!rc) rc = build_words(&t, corpus, byte_id);
  if (!rc && count_pairs(&t)) rc = ufp4_fail(UFP4_ENOMEM, "bpe train: out of memory");
  if (!rc) rc = learn(&t, vocab_size - 1);
  if (!rc) rc = write_files(&t, out_dir);
  if (!rc && out_vocab) *out_vocab = (uint32_t)t.n_tok + 1;
  trainer_free(&t);
  return rc;
}
