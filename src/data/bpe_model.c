/* BPE files (GPT-2's encoder.json + vocab.bpe format) and the encoding of one pre-token. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/byte_unicode.h"
#include "data/tok_internal.h"
#include "core/utf8.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

static const char eot_name[] = "<|endoftext|>";
enum { CACHE_MAX_PIECE = 64, CACHE_MAX_ENTRIES = 1 << 20 };

/* A token string in the byte-unicode alphabet -> its bytes; returns the byte count or -1. */
static long unicode_to_bytes(const char *s, uint8_t *out, size_t cap) {
  size_t n = strlen(s), k = 0;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    int l = ufp4_utf8_decode((const uint8_t *)s + i, n - i, &cp);
    int b = l ? ufp4_unicode_to_byte(cp) : -1;
    if (b < 0 || k == cap) return -1;
    out[k++] = (uint8_t)b;
    i += (size_t)l;
  }
  return (long)k;
}

static int load_encoder(ufp4_tokenizer *t, const char *path, const char *json, size_t len,
                        ufp4_strmap *by_bytes) {
  cJSON *root = cJSON_ParseWithLength(json, len);
  if (!root) return ufp4_fail(UFP4_EFORMAT, "%s: not valid JSON", path);
  int rc = 0;
  if (!cJSON_IsObject(root)) {
    rc = ufp4_fail(UFP4_EFORMAT, "%s: expected a JSON object of token -> id", path);
    goto done;
  }
  int n = cJSON_GetArraySize(root);
  if (n < 257) {
    rc = ufp4_fail(UFP4_EFORMAT, "%s: %d entries, fewer than the 256 byte tokens + <|endoftext|>", path, n);
    goto done;
  }
  t->vocab = (uint32_t)n;
  t->eot = -1;
  size_t *lens = calloc((size_t)n, sizeof *lens);
  uint8_t (*bytes)[256] = malloc((size_t)n * 256);
  t->off = malloc(((size_t)n + 1) * sizeof *t->off);
  if (!lens || !bytes || !t->off) {
    free(lens);
    free(bytes);
    rc = ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
    goto done;
  }
  for (size_t i = 0; i < (size_t)n; i++) lens[i] = SIZE_MAX;
  for (cJSON *e = root->child; e; e = e->next) {
    /* The range test comes before the integer test: converting a double outside long's range
     * (1e300, NaN) to an integer is undefined behaviour. */
    if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0 && e->valuedouble < n) ||
        e->valuedouble != (double)(size_t)e->valuedouble) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s: token \"%.40s\" has id %g; ids must be the integers 0..%d", path,
                     e->string, e->valuedouble, n - 1);
      break;
    }
    size_t id = (size_t)e->valuedouble;
    if (lens[id] != SIZE_MAX) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s: id %zu is used twice", path, id);
      break;
    }
    long l = unicode_to_bytes(e->string, bytes[id], 256);
    if (l <= 0) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s: token \"%.40s\" is empty, too long or not in GPT-2's byte alphabet",
                     path, e->string);
      break;
    }
    lens[id] = (size_t)l;
    if (!strcmp(e->string, eot_name)) {
      t->eot = (int64_t)id;
      continue; /* never the result of a merge */
    }
    int added;
    if (!ufp4_strmap_put(by_bytes, bytes[id], (size_t)l, id, &added)) {
      rc = ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
      break;
    }
    if (!added) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s: token \"%.40s\" appears twice", path, e->string);
      break;
    }
  }
  size_t total = 0;
  for (size_t i = 0; !rc && i < (size_t)n; i++) total += lens[i];
  if (!rc && !(t->blob = malloc(total ? total : 1))) rc = ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  if (!rc) {
    size_t k = 0;
    for (size_t i = 0; i < (size_t)n; i++) {
      t->off[i] = k;
      memcpy(t->blob + k, bytes[i], lens[i]);
      k += lens[i];
    }
    t->off[n] = k;
    for (int b = 0; !rc && b < 256; b++) {
      uint8_t c = (uint8_t)b;
      uint64_t *id = ufp4_strmap_get(by_bytes, &c, 1);
      if (!id) rc = ufp4_fail(UFP4_EFORMAT, "%s: no token for byte 0x%02x", path, b);
      else t->byte_id[b] = (uint32_t)*id;
    }
  }
  if (!rc && t->eot < 0) rc = ufp4_fail(UFP4_EFORMAT, "%s: no %s token", path, eot_name);
  free(lens);
  free(bytes);
done:
  cJSON_Delete(root);
  return rc;
}

static int add_merge(ufp4_tokenizer *t, uint32_t a, uint32_t b, uint32_t rank, uint32_t res, int *added) {
  uint64_t key = (uint64_t)a << 32 | b;
  *added = !ufp4_u64map_get(&t->merges, key);
  if (!*added) return 0;
  return ufp4_u64map_put(&t->merges, key, (uint64_t)rank << 32 | res) ? 0 : -1;
}

/* Appends merge (a, b) to the rank-ordered list that exporters read (ufp4_tokenizer_merge). */
static int push_pair(ufp4_tokenizer *t, uint32_t a, uint32_t b) {
  if ((t->n_merges & (t->n_merges - 1)) == 0) { /* 0, 1, 2, 4, ...: grow to the next power of two */
    uint32_t(*p)[2] = realloc(t->merge_pairs, (size_t)(t->n_merges ? 2 * t->n_merges : 1) * sizeof *p);
    if (!p) return -1;
    t->merge_pairs = p;
  }
  t->merge_pairs[t->n_merges][0] = a, t->merge_pairs[t->n_merges][1] = b;
  t->n_merges++;
  return 0;
}

/* The reference looks ranks up by the string "a,b"; give every pair (x,y) that spells the same
 * string, with x, y and x+y in the vocabulary, the merge's rank (see ufp4/tokenizer.h). */
static int add_aliases(ufp4_tokenizer *t, const ufp4_strmap *by_bytes, const uint8_t *a, size_t la,
                       const uint8_t *b, size_t lb, uint32_t rank) {
  uint8_t key[520];
  if (la + lb + 1 > sizeof key) return 0;
  memcpy(key, a, la);
  key[la] = ',';
  memcpy(key + la + 1, b, lb);
  size_t n = la + lb + 1;
  for (size_t p = 1; p + 1 < n; p++) {
    if (key[p] != ',' || p == la) continue;
    uint64_t *x = ufp4_strmap_get(by_bytes, key, p), *y = ufp4_strmap_get(by_bytes, key + p + 1, n - p - 1);
    if (!x || !y) continue;
    uint8_t cat[520];
    memcpy(cat, key, p);
    memcpy(cat + p, key + p + 1, n - p - 1);
    uint64_t *xy = ufp4_strmap_get(by_bytes, cat, n - 1);
    int added;
    if (xy && add_merge(t, (uint32_t)*x, (uint32_t)*y, rank, (uint32_t)*xy, &added)) return -1;
  }
  return 0;
}

static int load_merges(ufp4_tokenizer *t, const char *path, char *text, size_t len, const ufp4_strmap *by_bytes) {
  size_t line_no = 0;
  uint32_t rank = 0;
  char *p = text, *end = text + len;
  /* first pass: the merges themselves; second pass: aliases, which never displace a merge */
  for (int pass = 0; pass < 2; pass++) {
    p = text;
    line_no = 0;
    rank = 0;
    while (p < end) {
      char *nl = memchr(p, '\n', (size_t)(end - p));
      char *le = nl ? nl : end;
      line_no++;
      char *line = p;
      p = nl ? nl + 1 : end;
      if (line_no == 1 && line[0] == '#') continue; /* "#version: 0.2" */
      if (le == line && !nl) break;
      char *sp = memchr(line, ' ', (size_t)(le - line));
      if (!sp || sp == line || sp + 1 >= le || memchr(sp + 1, ' ', (size_t)(le - sp - 1)))
        return ufp4_fail(UFP4_EFORMAT, "%s:%zu: expected two tokens separated by one space", path, line_no);
      char sa[1024], sb[1024];
      size_t la = (size_t)(sp - line), lb = (size_t)(le - sp - 1);
      if (la >= sizeof sa || lb >= sizeof sb) return ufp4_fail(UFP4_EFORMAT, "%s:%zu: token too long", path, line_no);
      memcpy(sa, line, la), sa[la] = 0;
      memcpy(sb, sp + 1, lb), sb[lb] = 0;
      uint8_t ba[256], bb[256], cat[512];
      long na = unicode_to_bytes(sa, ba, sizeof ba), nb = unicode_to_bytes(sb, bb, sizeof bb);
      if (na <= 0 || nb <= 0)
        return ufp4_fail(UFP4_EFORMAT, "%s:%zu: token not in GPT-2's byte alphabet", path, line_no);
      uint64_t *ia = ufp4_strmap_get(by_bytes, ba, (size_t)na), *ib = ufp4_strmap_get(by_bytes, bb, (size_t)nb);
      memcpy(cat, ba, (size_t)na);
      memcpy(cat + na, bb, (size_t)nb);
      uint64_t *ic = ufp4_strmap_get(by_bytes, cat, (size_t)(na + nb));
      if (!ia || !ib || !ic)
        return ufp4_fail(UFP4_EFORMAT, "%s:%zu: merge \"%s %s\" uses or makes a token missing from encoder.json",
                         path, line_no, sa, sb);
      int added = 1;
      if (pass == 0 && (add_merge(t, (uint32_t)*ia, (uint32_t)*ib, rank, (uint32_t)*ic, &added) ||
                        push_pair(t, (uint32_t)*ia, (uint32_t)*ib)))
        return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
      if (!added) return ufp4_fail(UFP4_EFORMAT, "%s:%zu: merge \"%s %s\" appears twice", path, line_no, sa, sb);
      if (pass == 1 && add_aliases(t, by_bytes, ba, (size_t)na, bb, (size_t)nb, rank))
        return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
      rank++;
    }
  }
  if (!rank) return ufp4_fail(UFP4_EFORMAT, "%s: no merges", path);
  return 0;
}

int ufp4_bpe_load_files(ufp4_tokenizer *t, const char *encoder_json, const char *vocab_bpe) {
  char *ej = NULL, *vb = NULL;
  size_t nej, nvb;
  ufp4_strmap by_bytes = {0};
  int rc = ufp4_read_file(encoder_json, SIZE_MAX, &ej, &nej);
  if (!rc) rc = ufp4_read_file(vocab_bpe, SIZE_MAX, &vb, &nvb);
  if (!rc && !nej) rc = ufp4_fail(UFP4_EFORMAT, "%s: empty file", encoder_json);
  if (!rc && !nvb) rc = ufp4_fail(UFP4_EFORMAT, "%s: empty file", vocab_bpe);
  if (!rc) rc = load_encoder(t, encoder_json, ej, nej, &by_bytes);
  if (!rc) rc = load_merges(t, vocab_bpe, vb, nvb, &by_bytes);
  if (!rc) {
    t->hash = ufp4_fnv1a64(ufp4_fnv1a64(UFP4_FNV_OFFSET, ej, nej), vb, nvb);
    t->kind = t->hash == UFP4_GPT2_FILES_HASH ? UFP4_TOK_GPT2 : UFP4_TOK_BPE;
  }
  free(ej);
  free(vb);
  ufp4_strmap_free(&by_bytes);
  return rc;
}

/* Merges by rank with the reference's semantics: find the lowest-ranked adjacent pair (the
 * rightmost among equal ranks), merge all its occurrences in one left-to-right pass, repeat. */
static size_t bpe_word(const ufp4_tokenizer *t, uint32_t *w, uint32_t *tmp, size_t m) {
  while (m > 1) {
    uint64_t best = UINT64_MAX;
    for (size_t i = 0; i + 1 < m; i++) {
      const uint64_t *v = ufp4_u64map_get(&t->merges, (uint64_t)w[i] << 32 | w[i + 1]);
      if (v && (*v >> 32) <= (best >> 32)) best = (*v & ~UINT64_C(0xffffffff)) | i;
    }
    if (best == UINT64_MAX) break;
    size_t at = best & 0xffffffff;
    uint32_t a = w[at], b = w[at + 1];
    uint32_t res = (uint32_t)*ufp4_u64map_get(&t->merges, (uint64_t)a << 32 | b);
    size_t j = 0;
    for (size_t i = 0; i < m;) {
      if (i + 1 < m && w[i] == a && w[i + 1] == b) tmp[j++] = res, i += 2;
      else tmp[j++] = w[i++];
    }
    memcpy(w, tmp, j * sizeof *w);
    m = j;
  }
  return m;
}

int ufp4_bpe_encode_piece(ufp4_tokenizer *t, const uint8_t *s, size_t n, ufp4_tokvec *out) {
  int cacheable = n <= CACHE_MAX_PIECE;
  if (cacheable) {
    const uint64_t *v = ufp4_strmap_get(&t->cache, s, n);
    if (v) {
      for (size_t i = 0, k = (size_t)(*v >> 8); i < (*v & 0xff); i++)
        if (ufp4_tokvec_push(out, t->cache_ids[k + i])) return UFP4_ENOMEM;
      return 0;
    }
  }
  if (n > t->word_cap) {
    free(t->word);
    free(t->word2);
    t->word = malloc(n * sizeof *t->word);
    t->word2 = malloc(n * sizeof *t->word2);
    t->word_cap = n;
    if (!t->word || !t->word2) {
      t->word_cap = 0;
      return ufp4_fail(UFP4_ENOMEM, "encode: out of memory");
    }
  }
  for (size_t i = 0; i < n; i++) t->word[i] = t->byte_id[s[i]];
  size_t m = bpe_word(t, t->word, t->word2, n);
  for (size_t i = 0; i < m; i++)
    if (ufp4_tokvec_push(out, t->word[i])) return UFP4_ENOMEM;
  if (cacheable) {
    if (t->cache.n >= CACHE_MAX_ENTRIES) ufp4_strmap_clear(&t->cache), t->cache_n = 0;
    if (t->cache_n + m > t->cache_cap) {
      size_t cap = t->cache_cap ? 2 * t->cache_cap : 4096;
      while (cap < t->cache_n + m) cap *= 2;
      uint32_t *p = realloc(t->cache_ids, cap * sizeof *p);
      if (!p) return 0; /* the cache is an optimization only */
      t->cache_ids = p;
      t->cache_cap = cap;
    }
    memcpy(t->cache_ids + t->cache_n, t->word, m * sizeof *t->word);
    if (ufp4_strmap_put(&t->cache, s, n, (uint64_t)t->cache_n << 8 | m, NULL)) t->cache_n += m;
  }
  return 0;
}
