/* GGUF writer and ggml block encodings (gguf.h). The header (key-values and tensor infos) is
 * composed in memory; the file is written in one atomic step, header then the tensors' data. */
#include "ufp4/gguf.h"

#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF writer stores integers and floats as they are in memory and needs a little-endian host"
#endif

#define GGUF_ALIGN 32
enum { V_U32 = 4, V_I32 = 5, V_F32 = 6, V_BOOL = 7, V_STR = 8, V_ARR = 9 };

typedef struct {
  uint8_t *p;
  size_t n, cap;
  int oom;
} bytes;

typedef struct {
  char *name;
  ufp4_ggml_type type;
  int ndim;
  uint64_t ne[4];
  uint8_t *data;
  size_t size;
} tensor;

struct ufp4_gguf {
  bytes kv;          /* the encoded key-value pairs */
  char **keys;       /* for the duplicate check */
  size_t n_kv;
  tensor *t;
  size_t n_t;
};

static void put(bytes *b, const void *src, size_t n) {
  if (b->oom) return;
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p, b->cap = cap;
  }
  memcpy(b->p + b->n, src, n);
  b->n += n;
}
static void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_str(bytes *b, const char *s, size_t n) {
  put_u64(b, n);
  put(b, s, n);
}

size_t ufp4_ggml_block_elems(ufp4_ggml_type t) {
  switch (t) {
  case UFP4_GGML_F32:
  case UFP4_GGML_BF16: return 1;
  case UFP4_GGML_MXFP4: return 32;
  case UFP4_GGML_NVFP4: return 64;
  }
  return 0;
}

size_t ufp4_ggml_block_bytes(ufp4_ggml_type t) {
  switch (t) {
  case UFP4_GGML_F32: return 4;
  case UFP4_GGML_BF16: return 2;
  case UFP4_GGML_MXFP4: return 17;
  case UFP4_GGML_NVFP4: return 36;
  }
  return 0;
}

const char *ufp4_ggml_type_name(ufp4_ggml_type t) {
  switch (t) {
  case UFP4_GGML_F32: return "F32";
  case UFP4_GGML_BF16: return "BF16";
  case UFP4_GGML_MXFP4: return "MXFP4";
  case UFP4_GGML_NVFP4: return "NVFP4";
  }
  return "?";
}

/* ggml packs a run of 2h elements as h bytes: element j low, element j+h high (not the adjacent
 * pairs of the OCP FP4x2 order). */
static void pack_halves(const uint8_t *codes, int h, uint8_t *out) {
  for (int j = 0; j < h; j++) out[j] = (uint8_t)((codes[j] & 0x0F) | (codes[j + h] & 0x0F) << 4);
}

void ufp4_gguf_mxfp4_block(const uint8_t codes[32], uint8_t e8m0, uint8_t out[17]) {
  out[0] = e8m0;
  pack_halves(codes, 16, out + 1);
}

void ufp4_gguf_nvfp4_block(const uint8_t codes[64], const uint8_t e4m3[4], uint8_t out[36]) {
  memcpy(out, e4m3, 4);
  for (int s = 0; s < 4; s++) pack_halves(codes + 16 * s, 8, out + 4 + 8 * s);
}

int ufp4_gguf_create(ufp4_gguf **out) {
  *out = calloc(1, sizeof **out);
  return *out ? 0 : ufp4_fail(UFP4_ENOMEM, "gguf: out of memory");
}

void ufp4_gguf_free(ufp4_gguf *g) {
  if (!g) return;
  free(g->kv.p);
  for (size_t i = 0; i < g->n_kv; i++) free(g->keys[i]);
  free(g->keys);
  for (size_t i = 0; i < g->n_t; i++) free(g->t[i].name), free(g->t[i].data);
  free(g->t);
  free(g);
}

static int check_name(const char *what, const char *s, size_t n) {
  if (!ufp4_utf8_valid_no_nul(s, n, NULL))
    return ufp4_fail(UFP4_EINVAL, "gguf: %s is not UTF-8 without NUL bytes", what);
  return 0;
}

/* Checks and records the key, then writes it and the value type. */
static int begin_kv(ufp4_gguf *g, const char *key, uint32_t type) {
  size_t n = strlen(key);
  if (!n || check_name("a key", key, n))
    return ufp4_fail(UFP4_EINVAL, "gguf: invalid key '%s'", key);
  for (size_t i = 0; i < g->n_kv; i++)
    if (!strcmp(g->keys[i], key)) return ufp4_fail(UFP4_EINVAL, "gguf: duplicate key '%s'", key);
  char **k = realloc(g->keys, (g->n_kv + 1) * sizeof *k);
  if (!k) return ufp4_fail(UFP4_ENOMEM, "gguf: out of memory");
  g->keys = k;
  if (!(k[g->n_kv] = strdup(key))) return ufp4_fail(UFP4_ENOMEM, "gguf: out of memory");
  g->n_kv++;
  put_str(&g->kv, key, n);
  put_u32(&g->kv, type);
  return 0;
}

static int end_kv(ufp4_gguf *g) {
  return g->kv.oom ? ufp4_fail(UFP4_ENOMEM, "gguf: out of memory") : 0;
}

int ufp4_gguf_kv_str(ufp4_gguf *g, const char *key, const char *value) {
  size_t n = strlen(value);
  if (check_name(key, value, n) || begin_kv(g, key, V_STR)) return UFP4_EINVAL;
  put_str(&g->kv, value, n);
  return end_kv(g);
}

int ufp4_gguf_kv_u32(ufp4_gguf *g, const char *key, uint32_t value) {
  if (begin_kv(g, key, V_U32)) return UFP4_EINVAL;
  put_u32(&g->kv, value);
  return end_kv(g);
}

int ufp4_gguf_kv_f32(ufp4_gguf *g, const char *key, float value) {
  if (begin_kv(g, key, V_F32)) return UFP4_EINVAL;
  put(&g->kv, &value, 4);
  return end_kv(g);
}

int ufp4_gguf_kv_bool(ufp4_gguf *g, const char *key, int value) {
  if (begin_kv(g, key, V_BOOL)) return UFP4_EINVAL;
  uint8_t v = value != 0;
  put(&g->kv, &v, 1);
  return end_kv(g);
}

int ufp4_gguf_kv_str_array(ufp4_gguf *g, const char *key, const char *const *strs,
                           const size_t *lens, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (check_name(key, strs[i], lens[i]))
      return ufp4_fail(UFP4_EINVAL, "gguf: %s[%zu] is not UTF-8 without NUL bytes", key, i);
  if (begin_kv(g, key, V_ARR)) return UFP4_EINVAL;
  put_u32(&g->kv, V_STR);
  put_u64(&g->kv, n);
  for (size_t i = 0; i < n; i++) put_str(&g->kv, strs[i], lens[i]);
  return end_kv(g);
}

int ufp4_gguf_kv_i32_array(ufp4_gguf *g, const char *key, const int32_t *v, size_t n) {
  if (begin_kv(g, key, V_ARR)) return UFP4_EINVAL;
  put_u32(&g->kv, V_I32);
  put_u64(&g->kv, n);
  put(&g->kv, v, n * 4);
  return end_kv(g);
}

size_t ufp4_gguf_tensor_bytes(ufp4_ggml_type type, int ndim, const uint64_t *ne) {
  size_t be = ufp4_ggml_block_elems(type);
  if (!be || ndim < 1 || ndim > 4 || ne[0] % be) return 0;
  size_t n = ne[0] / be * ufp4_ggml_block_bytes(type);
  for (int i = 1; i < ndim; i++) n *= ne[i];
  return n;
}

int ufp4_gguf_add_tensor(ufp4_gguf *g, const char *name, ufp4_ggml_type type, int ndim,
                         const uint64_t *ne, const void *data, size_t size) {
  size_t want = ufp4_gguf_tensor_bytes(type, ndim, ne);
  if (!want)
    return ufp4_fail(UFP4_EINVAL, "gguf: tensor '%s': %d dims, ne[0] %llu not a multiple of %s's block of %zu",
                     name, ndim, (unsigned long long)(ndim > 0 ? ne[0] : 0), ufp4_ggml_type_name(type),
                     ufp4_ggml_block_elems(type));
  if (size != want)
    return ufp4_fail(UFP4_EINVAL, "gguf: tensor '%s': %zu bytes given, its shape needs %zu", name, size, want);
  if (!*name || check_name("a tensor name", name, strlen(name)))
    return ufp4_fail(UFP4_EINVAL, "gguf: invalid tensor name '%s'", name);
  for (size_t i = 0; i < g->n_t; i++)
    if (!strcmp(g->t[i].name, name)) return ufp4_fail(UFP4_EINVAL, "gguf: duplicate tensor '%s'", name);
  tensor *t = realloc(g->t, (g->n_t + 1) * sizeof *t);
  if (!t) return ufp4_fail(UFP4_ENOMEM, "gguf: out of memory");
  g->t = t;
  tensor *x = &t[g->n_t];
  *x = (tensor){.type = type, .ndim = ndim, .size = size};
  memcpy(x->ne, ne, (size_t)ndim * sizeof *ne);
  x->name = strdup(name);
  x->data = malloc(size ? size : 1);
  if (!x->name || !x->data) {
    free(x->name), free(x->data);
    return ufp4_fail(UFP4_ENOMEM, "gguf: out of memory for tensor '%s'", name);
  }
  memcpy(x->data, data, size);
  g->n_t++;
  return 0;
}

static size_t pad_to(size_t n) { return (GGUF_ALIGN - n % GGUF_ALIGN) % GGUF_ALIGN; }

int ufp4_gguf_write(const ufp4_gguf *g, const char *path, uint64_t *size) {
  static const uint8_t zeros[GGUF_ALIGN];
  bytes h = {0};
  put(&h, "GGUF", 4);
  put_u32(&h, 3);
  put_u64(&h, g->n_t);
  put_u64(&h, g->n_kv);
  put(&h, g->kv.p, g->kv.n);
  uint64_t off = 0;
  for (size_t i = 0; i < g->n_t; i++) {
    const tensor *t = &g->t[i];
    put_str(&h, t->name, strlen(t->name));
    put_u32(&h, (uint32_t)t->ndim);
    for (int d = 0; d < t->ndim; d++) put_u64(&h, t->ne[d]);
    put_u32(&h, (uint32_t)t->type);
    put_u64(&h, off);
    off += t->size + pad_to(t->size);
  }
  put(&h, zeros, pad_to(h.n));
  if (h.oom) {
    free(h.p);
    return ufp4_fail(UFP4_ENOMEM, "%s: out of memory composing the GGUF header", path);
  }
  size_t np = 1 + 2 * g->n_t;
  const void **parts = malloc(np * sizeof *parts);
  size_t *sizes = malloc(np * sizeof *sizes);
  int rc;
  if (!parts || !sizes) {
    rc = ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  } else {
    parts[0] = h.p, sizes[0] = h.n;
    for (size_t i = 0; i < g->n_t; i++) {
      parts[1 + 2 * i] = g->t[i].data, sizes[1 + 2 * i] = g->t[i].size;
      parts[2 + 2 * i] = zeros, sizes[2 + 2 * i] = pad_to(g->t[i].size);
    }
    rc = ufp4_write_parts_atomic(path, parts, sizes, np);
    if (!rc && size) *size = h.n + off;
  }
  free(parts), free(sizes), free(h.p);
  return rc;
}
