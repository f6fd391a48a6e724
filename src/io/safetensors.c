/* safetensors reader and atomic writer (see include/ufp4/safetensors.h for the format rules). */
#include "ufp4/safetensors.h"

#include "core/utf8.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/minifloat.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this code copies it as host-order memory"
#endif

/* cJSON keeps numbers as doubles: integers above 2^53 would silently lose bits. */
#define JSON_INT_MAX 9007199254740992.0

static const struct {
  const char *name;
  int bits;
} dtypes[UFP4_ST_NDTYPES] = {
    [UFP4_ST_BOOL] = {"BOOL", 8},       [UFP4_ST_U8] = {"U8", 8},
    [UFP4_ST_I8] = {"I8", 8},           [UFP4_ST_F8_E5M2] = {"F8_E5M2", 8},
    [UFP4_ST_F8_E4M3] = {"F8_E4M3", 8}, [UFP4_ST_F8_E8M0] = {"F8_E8M0", 8},
    [UFP4_ST_I16] = {"I16", 16},        [UFP4_ST_U16] = {"U16", 16},
    [UFP4_ST_F16] = {"F16", 16},        [UFP4_ST_BF16] = {"BF16", 16},
    [UFP4_ST_I32] = {"I32", 32},        [UFP4_ST_U32] = {"U32", 32},
    [UFP4_ST_F32] = {"F32", 32},        [UFP4_ST_F64] = {"F64", 64},
    [UFP4_ST_I64] = {"I64", 64},        [UFP4_ST_U64] = {"U64", 64},
    [UFP4_ST_C64] = {"C64", 64},        [UFP4_ST_F4] = {"F4", 4},
    [UFP4_ST_F6_E2M3] = {"F6_E2M3", 6}, [UFP4_ST_F6_E3M2] = {"F6_E3M2", 6},
};

const char *ufp4_st_dtype_name(ufp4_st_dtype d) {
  return ((unsigned)d < UFP4_ST_NDTYPES) ? dtypes[d].name : NULL;
}

int ufp4_st_dtype_bits(ufp4_st_dtype d) { return ((unsigned)d < UFP4_ST_NDTYPES) ? dtypes[d].bits : 0; }

int ufp4_st_dtype_from_name(const char *s, ufp4_st_dtype *out) {
  for (int i = 0; s && i < UFP4_ST_NDTYPES; i++)
    if (strcmp(s, dtypes[i].name) == 0) {
      *out = (ufp4_st_dtype)i;
      return 0;
    }
  return UFP4_EINVAL;
}

/* Element count and byte size of a shape; 0 on success, -1 when a product overflows or the bits
 * do not fill whole bytes. Overflow is checked in dimension order, as the reference does. */
static int shape_size(const size_t *shape, int ndim, int bits, size_t *count, size_t *nbytes) {
  uint64_t c = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] != 0 && c > UINT64_MAX / shape[i]) return -1;
    c *= shape[i];
  }
  if (c > UINT64_MAX / (uint64_t)bits || (c * (uint64_t)bits) % 8 != 0) return -1;
  if (c > SIZE_MAX || c * (uint64_t)bits / 8 > SIZE_MAX) return -1;
  *count = (size_t)c;
  *nbytes = (size_t)(c * (uint64_t)bits / 8);
  return 0;
}

static const char *os_error(int err, char *buf, size_t len) {
  if (strerror_r(err, buf, len) != 0) snprintf(buf, len, "errno %d", err);
  return buf;
}

/* ====================================================================== writer */

/* The atomic write is core's (fileio.h), so is its fault hook; the safetensors names remain. */
void ufp4_st_test_fault(ufp4_st_fault f) {
  static const ufp4_io_fault io[] = {[UFP4_ST_FAULT_NONE] = UFP4_IO_FAULT_NONE,
                                     [UFP4_ST_FAULT_WRITE] = UFP4_IO_FAULT_WRITE,
                                     [UFP4_ST_FAULT_FSYNC] = UFP4_IO_FAULT_FSYNC,
                                     [UFP4_ST_FAULT_RENAME] = UFP4_IO_FAULT_RENAME};
  ufp4_io_test_fault((unsigned)f < sizeof io / sizeof *io ? io[f] : UFP4_IO_FAULT_NONE);
}

typedef struct {
  const ufp4_st_tensor *t;
  size_t count, nbytes, begin;
} wentry;

static int cmp_wentry_name(const void *a, const void *b) {
  return strcmp((*(const wentry *const *)a)->t->name, (*(const wentry *const *)b)->t->name);
}

static int cmp_wentry_layout(const void *a, const void *b) {
  const wentry *x = *(const wentry *const *)a, *y = *(const wentry *const *)b;
  int bx = dtypes[x->t->dtype].bits, by = dtypes[y->t->dtype].bits;
  if (bx != by) return by > bx ? 1 : -1;
  return strcmp(x->t->name, y->t->name);
}

static int cmp_meta_key(const void *a, const void *b) {
  return strcmp((*(const ufp4_st_meta *const *)a)->key, (*(const ufp4_st_meta *const *)b)->key);
}

/* Writes one tensor's bytes, converting a float source to 16 bits through buf a chunk at a time. */
static int write_tensor(ufp4_atomic_file *a, const wentry *e, void *buf, size_t buf_len) {
  const ufp4_st_tensor *t = e->t;
  if (t->src == UFP4_ST_SRC_RAW || t->dtype == UFP4_ST_F32)
    return ufp4_atomic_write(a, t->data, e->nbytes);
  const float *x = t->data;
  uint16_t *h = buf;
  size_t per = buf_len / sizeof *h;
  for (size_t i = 0; i < e->count; i += per) {
    size_t n = e->count - i < per ? e->count - i : per;
    for (size_t j = 0; j < n; j++)
      h[j] = t->dtype == UFP4_ST_BF16 ? ufp4_f32_to_bf16_bits(x[i + j])
                                      : ufp4_f32_to_f16_bits(x[i + j]);
    int rc = ufp4_atomic_write(a, h, n * sizeof *h);
    if (rc) return rc;
  }
  return 0;
}

/* Checks the inputs and builds the padded header (8-byte length + JSON + spaces). */
static int build_header(const char *path, wentry *w, wentry **by_name, wentry **layout, size_t n,
                        const ufp4_st_meta *meta, const ufp4_st_meta **meta_sorted, size_t n_meta,
                        char **out, size_t *out_len) {
  size_t bad;
  for (size_t i = 0; i < n; i++) {
    const ufp4_st_tensor *t = w[i].t;
    if (!t->name || !ufp4_utf8_valid_no_nul(t->name, strlen(t->name), &bad))
      return ufp4_fail(UFP4_EINVAL, "%s: tensor %zu has no name or a name that is not UTF-8", path, i);
    if (strcmp(t->name, "__metadata__") == 0)
      return ufp4_fail(UFP4_EINVAL, "%s: \"__metadata__\" is reserved, not a tensor name", path);
    if ((unsigned)t->dtype >= UFP4_ST_NDTYPES)
      return ufp4_fail(UFP4_EINVAL, "%s: tensor %s has unknown dtype %d", path, t->name, (int)t->dtype);
    if (t->src != UFP4_ST_SRC_RAW &&
        !(t->src == UFP4_ST_SRC_F32 &&
          (t->dtype == UFP4_ST_F32 || t->dtype == UFP4_ST_BF16 || t->dtype == UFP4_ST_F16)))
      return ufp4_fail(UFP4_EINVAL, "%s: tensor %s: no conversion from source %d to %s", path, t->name,
                       (int)t->src, dtypes[t->dtype].name);
    if (t->ndim < 0 || t->ndim > UFP4_ST_MAX_DIMS)
      return ufp4_fail(UFP4_EINVAL, "%s: tensor %s has %d dims (0..%d allowed)", path, t->name, t->ndim,
                       UFP4_ST_MAX_DIMS);
    for (int d = 0; d < t->ndim; d++)
      if ((double)t->shape[d] > JSON_INT_MAX)
        return ufp4_fail(UFP4_EINVAL, "%s: tensor %s: dimension %zu is too large", path, t->name,
                         t->shape[d]);
    if (shape_size(t->shape, t->ndim, dtypes[t->dtype].bits, &w[i].count, &w[i].nbytes) != 0)
      return ufp4_fail(UFP4_EINVAL, "%s: tensor %s: shape overflows or is not a whole number of bytes",
                       path, t->name);
    if (w[i].nbytes > 0 && !t->data)
      return ufp4_fail(UFP4_EINVAL, "%s: tensor %s has no data", path, t->name);
    by_name[i] = layout[i] = &w[i];
  }
  qsort(by_name, n, sizeof *by_name, cmp_wentry_name);
  for (size_t i = 1; i < n; i++)
    if (strcmp(by_name[i - 1]->t->name, by_name[i]->t->name) == 0)
      return ufp4_fail(UFP4_EINVAL, "%s: tensor name %s appears twice", path, by_name[i]->t->name);
  for (size_t i = 0; i < n_meta; i++) {
    if (!meta[i].key || !meta[i].value ||
        !ufp4_utf8_valid_no_nul(meta[i].key, strlen(meta[i].key), &bad) ||
        !ufp4_utf8_valid_no_nul(meta[i].value, strlen(meta[i].value), &bad))
      return ufp4_fail(UFP4_EINVAL, "%s: metadata pair %zu is missing or not UTF-8", path, i);
    meta_sorted[i] = &meta[i];
  }
  qsort(meta_sorted, n_meta, sizeof *meta_sorted, cmp_meta_key);
  for (size_t i = 1; i < n_meta; i++)
    if (strcmp(meta_sorted[i - 1]->key, meta_sorted[i]->key) == 0)
      return ufp4_fail(UFP4_EINVAL, "%s: metadata key %s appears twice", path, meta_sorted[i]->key);

  qsort(layout, n, sizeof *layout, cmp_wentry_layout);
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    layout[i]->begin = off;
    if (layout[i]->nbytes > SIZE_MAX - off || (double)(off + layout[i]->nbytes) > JSON_INT_MAX)
      return ufp4_fail(UFP4_EINVAL, "%s: total data size overflows", path);
    off += layout[i]->nbytes;
  }

  /* Numbers go in as raw text: cJSON would print integers above 2^31 through "%g". */
  int rc = UFP4_ENOMEM;
  cJSON *root = cJSON_CreateObject();
  char *json = NULL;
  if (!root) goto done;
  if (n_meta > 0) {
    cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
    if (!m) goto done;
    for (size_t i = 0; i < n_meta; i++)
      if (!cJSON_AddStringToObject(m, meta_sorted[i]->key, meta_sorted[i]->value)) goto done;
  }
  for (size_t i = 0; i < n; i++) {
    const wentry *e = by_name[i];
    char num[UFP4_ST_MAX_DIMS * 24 + 4];
    cJSON *o = cJSON_AddObjectToObject(root, e->t->name);
    if (!o || !cJSON_AddStringToObject(o, "dtype", dtypes[e->t->dtype].name)) goto done;
    size_t k = 0;
    num[k++] = '[';
    for (int d = 0; d < e->t->ndim; d++)
      k += (size_t)snprintf(num + k, sizeof num - k, "%s%zu", d ? "," : "", e->t->shape[d]);
    snprintf(num + k, sizeof num - k, "]");
    if (!cJSON_AddRawToObject(o, "shape", num)) goto done;
    snprintf(num, sizeof num, "[%zu,%zu]", e->begin, e->begin + e->nbytes);
    if (!cJSON_AddRawToObject(o, "data_offsets", num)) goto done;
  }
  json = cJSON_PrintUnformatted(root);
  if (!json) goto done;
  size_t jl = strlen(json), padded = (jl + 7) / 8 * 8;
  char *h = malloc(8 + padded);
  if (!h) goto done;
  for (int b = 0; b < 8; b++) h[b] = (char)(uint8_t)((uint64_t)padded >> (8 * b));
  memcpy(h + 8, json, jl);
  memset(h + 8 + jl, ' ', padded - jl);
  *out = h;
  *out_len = 8 + padded;
  rc = 0;
done:
  if (json) cJSON_free(json);
  cJSON_Delete(root);
  return rc ? ufp4_fail(rc, "%s: out of memory building the header", path) : 0;
}

/* Header, then the tensors in layout order, through core's atomic write (fileio.h): a failure
 * leaves an existing file untouched and no temporary behind. */
static int write_file(const char *path, const char *header, size_t header_len, wentry **layout,
                      size_t n) {
  size_t buf_len = (size_t)1 << 16;
  void *buf = malloc(buf_len);
  if (!buf) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  ufp4_atomic_file a;
  int rc = ufp4_atomic_open(&a, path);
  if (!rc) rc = ufp4_atomic_write(&a, header, header_len);
  for (size_t i = 0; !rc && i < n; i++) rc = write_tensor(&a, layout[i], buf, buf_len);
  free(buf);
  if (rc) {
    ufp4_atomic_abort(&a);
    return rc;
  }
  return ufp4_atomic_commit(&a);
}

int ufp4_st_write(const char *path, const ufp4_st_tensor *tensors, size_t n, const ufp4_st_meta *meta,
                  size_t n_meta) {
  if (!path || (n && !tensors) || (n_meta && !meta))
    return ufp4_fail(UFP4_EINVAL, "ufp4_st_write: NULL path, tensors or metadata");
  int rc;
  char *header = NULL;
  size_t header_len = 0;
  wentry *w = calloc(n ? n : 1, sizeof *w);
  wentry **by_name = calloc(n ? n : 1, sizeof *by_name), **layout = calloc(n ? n : 1, sizeof *layout);
  const ufp4_st_meta **ms = calloc(n_meta ? n_meta : 1, sizeof *ms);
  if (!w || !by_name || !layout || !ms) {
    rc = ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  } else {
    for (size_t i = 0; i < n; i++) w[i].t = &tensors[i];
    rc = build_header(path, w, by_name, layout, n, meta, ms, n_meta, &header, &header_len);
    if (!rc) rc = write_file(path, header, header_len, layout, n);
  }
  free(header);
  free(w);
  free(by_name);
  free(layout);
  free(ms);
  return rc;
}

/* ====================================================================== reader */

struct ufp4_st {
  char *file;
  void *map; /* NULL for ufp4_st_parse */
  size_t map_len;
  ufp4_st_info *t; /* sorted by name; names owned */
  size_t n;
  char **mkey, **mval; /* sorted by key; owned */
  size_t n_meta;
};

void ufp4_st_close(ufp4_st *st) {
  if (!st) return;
  for (size_t i = 0; i < st->n; i++) free((char *)st->t[i].name);
  for (size_t i = 0; i < st->n_meta; i++) {
    free(st->mkey[i]);
    free(st->mval[i]);
  }
  free(st->t);
  free(st->mkey);
  free(st->mval);
  if (st->map) munmap(st->map, st->map_len);
  free(st->file);
  free(st);
}

static int cmp_info_name(const void *a, const void *b) {
  return strcmp(((const ufp4_st_info *)a)->name, ((const ufp4_st_info *)b)->name);
}

static int cmp_info_offsets(const void *a, const void *b) {
  const ufp4_st_info *x = *(const ufp4_st_info *const *)a, *y = *(const ufp4_st_info *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* An integer in [0, 2^53]. Returns 0, or -1 (not an integer), -2 (negative), -3 (too large). */
static int json_uint(const cJSON *v, size_t *out) {
  if (!cJSON_IsNumber(v)) return -1;
  double d = v->valuedouble;
  if (!isfinite(d)) return d < 0 ? -2 : -3;
  if (d != floor(d)) return -1;
  if (d < 0) return -2;
  if (d > JSON_INT_MAX) return -3;
  *out = (size_t)d;
  return 0;
}

static const char *const uint_problem[] = {"", "is not an integer", "is negative", "is above 2^53"};

/* Fills *t (name set by the caller) from a tensor entry; data_len is the data section size. */
static int parse_entry(const char *file, const cJSON *e, size_t data_len, ufp4_st_info *t) {
  const char *nm = t->name;
  if (!cJSON_IsObject(e)) return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: entry is not an object", file, nm);
  const cJSON *dt = NULL, *sh = NULL, *off = NULL, *c;
  cJSON_ArrayForEach(c, e) {
    const cJSON **slot = strcmp(c->string, "dtype") == 0          ? &dt
                         : strcmp(c->string, "shape") == 0        ? &sh
                         : strcmp(c->string, "data_offsets") == 0 ? &off
                                                                  : NULL;
    if (!slot) return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: unexpected key \"%s\"", file, nm, c->string);
    if (*slot) return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: key \"%s\" appears twice", file, nm, c->string);
    *slot = c;
  }
  if (!dt || !sh || !off)
    return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: missing \"%s\"", file, nm,
                     !dt ? "dtype" : !sh ? "shape" : "data_offsets");
  if (!cJSON_IsString(dt) || ufp4_st_dtype_from_name(dt->valuestring, &t->dtype) != 0)
    return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: unknown dtype %s", file, nm,
                     cJSON_IsString(dt) ? dt->valuestring : "(not a string)");
  if (!cJSON_IsArray(sh)) return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: shape is not an array", file, nm);
  int nd = cJSON_GetArraySize(sh);
  if (nd > UFP4_ST_MAX_DIMS)
    return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: %d dims, more than %d", file, nm, nd, UFP4_ST_MAX_DIMS);
  t->ndim = 0;
  cJSON_ArrayForEach(c, sh) {
    int r = json_uint(c, &t->shape[t->ndim]);
    if (r) return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: dimension %d %s", file, nm, t->ndim, uint_problem[-r]);
    t->ndim++;
  }
  if (shape_size(t->shape, t->ndim, dtypes[t->dtype].bits, &t->count, &t->nbytes) != 0)
    return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: shape overflows (or is not a whole number of bytes)",
                     file, nm);
  size_t be[2];
  if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
    return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: data_offsets is not [begin, end]", file, nm);
  for (int i = 0; i < 2; i++) {
    int r = json_uint(cJSON_GetArrayItem(off, i), &be[i]);
    if (r) return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: data_offsets[%d] %s", file, nm, i, uint_problem[-r]);
  }
  if (be[0] > be[1])
    return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: data_offsets [%zu, %zu] end before begin", file, nm,
                     be[0], be[1]);
  if (be[1] - be[0] != t->nbytes)
    return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: data_offsets [%zu, %zu] span %zu bytes, shape and dtype "
                     "need %zu", file, nm, be[0], be[1], be[1] - be[0], t->nbytes);
  if (be[1] > data_len)
    return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s: data_offsets [%zu, %zu] past the end of the %zu-byte "
                     "data section", file, nm, be[0], be[1], data_len);
  t->begin = be[0];
  return 0;
}

static int parse_meta(const char *file, const cJSON *m, ufp4_st *st) {
  if (!cJSON_IsObject(m)) return ufp4_fail(UFP4_EFORMAT, "%s: __metadata__ is not an object", file);
  size_t n = (size_t)cJSON_GetArraySize(m);
  st->mkey = calloc(n ? n : 1, sizeof *st->mkey);
  st->mval = calloc(n ? n : 1, sizeof *st->mval);
  if (!st->mkey || !st->mval) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", file);
  const cJSON *c;
  cJSON_ArrayForEach(c, m) {
    if (!cJSON_IsString(c))
      return ufp4_fail(UFP4_EFORMAT, "%s: __metadata__ value of \"%s\" is not a string", file, c->string);
    char *k = strdup(c->string), *v = strdup(c->valuestring);
    if (!k || !v) {
      free(k);
      free(v);
      return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", file);
    }
    st->mkey[st->n_meta] = k;
    st->mval[st->n_meta] = v;
    st->n_meta++;
  }
  /* Insertion sort of index pairs keeps keys and values together; metadata is small. */
  for (size_t i = 1; i < st->n_meta; i++)
    for (size_t j = i; j > 0 && strcmp(st->mkey[j - 1], st->mkey[j]) > 0; j--) {
      char *tk = st->mkey[j], *tv = st->mval[j];
      st->mkey[j] = st->mkey[j - 1], st->mval[j] = st->mval[j - 1];
      st->mkey[j - 1] = tk, st->mval[j - 1] = tv;
    }
  for (size_t i = 1; i < st->n_meta; i++)
    if (strcmp(st->mkey[i - 1], st->mkey[i]) == 0)
      return ufp4_fail(UFP4_EFORMAT, "%s: __metadata__ key \"%s\" appears twice", file, st->mkey[i]);
  return 0;
}

static int parse_json(const char *file, const cJSON *root, const uint8_t *data, size_t data_len,
                      ufp4_st *st) {
  if (!cJSON_IsObject(root)) return ufp4_fail(UFP4_EFORMAT, "%s: header JSON is not an object", file);
  size_t total = (size_t)cJSON_GetArraySize(root);
  st->t = calloc(total ? total : 1, sizeof *st->t);
  if (!st->t) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", file);
  int seen_meta = 0, rc;
  const cJSON *c;
  cJSON_ArrayForEach(c, root) {
    if (strcmp(c->string, "__metadata__") == 0) {
      if (seen_meta++) return ufp4_fail(UFP4_EFORMAT, "%s: __metadata__ appears twice", file);
      if ((rc = parse_meta(file, c, st))) return rc;
      continue;
    }
    ufp4_st_info *t = &st->t[st->n];
    if (!(t->name = strdup(c->string))) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", file);
    st->n++;
    if ((rc = parse_entry(file, c, data_len, t))) return rc;
    t->data = data + t->begin;
  }
  qsort(st->t, st->n, sizeof *st->t, cmp_info_name);
  for (size_t i = 1; i < st->n; i++)
    if (strcmp(st->t[i - 1].name, st->t[i].name) == 0)
      return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s appears twice", file, st->t[i].name);

  /* The spec wants the data section exactly tiled: sorted by offsets, each tensor must start
   * where the previous one ended, and the last must end at the end of the file. */
  const ufp4_st_info **ord = malloc((st->n ? st->n : 1) * sizeof *ord);
  if (!ord) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", file);
  for (size_t i = 0; i < st->n; i++) ord[i] = &st->t[i];
  qsort(ord, st->n, sizeof *ord, cmp_info_offsets);
  size_t end = 0;
  const char *prev = NULL;
  rc = 0;
  for (size_t i = 0; i < st->n && !rc; i++) {
    const ufp4_st_info *t = ord[i];
    if (t->begin < end)
      rc = ufp4_fail(UFP4_EFORMAT, "%s: tensors %s and %s overlap (byte %zu)", file, prev, t->name, t->begin);
    else if (t->begin > end)
      rc = ufp4_fail(UFP4_EFORMAT, "%s: gap in the data section: bytes [%zu, %zu) before tensor %s belong to "
                     "no tensor", file, end, t->begin, t->name);
    end = t->begin + t->nbytes;
    prev = t->name;
  }
  free(ord);
  if (!rc && end != data_len)
    rc = ufp4_fail(UFP4_EFORMAT, "%s: data section has %zu bytes but the tensors cover %zu", file, data_len,
                   end);
  return rc;
}

int ufp4_st_parse(const uint8_t *buf, size_t len, const char *name, ufp4_st **out) {
  if (!out) return ufp4_fail(UFP4_EINVAL, "ufp4_st_parse: NULL output");
  *out = NULL;
  if (!name) name = "(memory)";
  if (!buf && len) return ufp4_fail(UFP4_EINVAL, "%s: NULL buffer", name);
  if (len < 8) return ufp4_fail(UFP4_EFORMAT, "%s: %zu bytes, shorter than the 8-byte header size", name, len);
  uint64_t hn = 0;
  for (int b = 7; b >= 0; b--) hn = (hn << 8) | buf[b];
  if (hn > UFP4_ST_MAX_HEADER)
    return ufp4_fail(UFP4_EFORMAT, "%s: header size %llu exceeds the limit of %llu bytes", name,
                     (unsigned long long)hn, (unsigned long long)UFP4_ST_MAX_HEADER);
  if (hn > len - 8)
    return ufp4_fail(UFP4_EFORMAT, "%s: header size %llu runs past the end of the %zu-byte file", name,
                     (unsigned long long)hn, len);
  if (hn == 0) return ufp4_fail(UFP4_EFORMAT, "%s: header size is 0 (no JSON)", name);
  size_t bad;
  if (!ufp4_utf8_valid_no_nul(buf + 8, (size_t)hn, &bad))
    return ufp4_fail(UFP4_EFORMAT, "%s: header is not valid UTF-8 (or holds a NUL) at byte %zu", name, 8 + bad);

  ufp4_st *st = calloc(1, sizeof *st);
  char *text = malloc((size_t)hn + 1);
  cJSON *root = NULL;
  int rc;
  if (!st || !text || !(st->file = strdup(name))) {
    rc = ufp4_fail(UFP4_ENOMEM, "%s: out of memory", name);
    goto done;
  }
  memcpy(text, buf + 8, (size_t)hn);
  text[hn] = '\0';
  const char *stop = NULL;
  root = cJSON_ParseWithOpts(text, &stop, 1); /* 1: only whitespace may follow the JSON value */
  if (!root) {
    rc = ufp4_fail(UFP4_EFORMAT, "%s: header is not valid JSON (error near header byte %td)", name,
                   stop ? stop - text : (ptrdiff_t)-1);
    goto done;
  }
  rc = parse_json(name, root, buf + 8 + hn, len - 8 - (size_t)hn, st);
done:
  cJSON_Delete(root);
  free(text);
  if (rc) {
    ufp4_st_close(st);
    return rc;
  }
  *out = st;
  return 0;
}

int ufp4_st_open(const char *path, ufp4_st **out) {
  if (!path || !out) return ufp4_fail(UFP4_EINVAL, "ufp4_st_open: NULL argument");
  *out = NULL;
  char errbuf[128];
  int fd = open(path, O_RDONLY);
  if (fd < 0) return ufp4_fail(UFP4_EIO, "%s: cannot open: %s", path, os_error(errno, errbuf, sizeof errbuf));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int err = errno;
    close(fd);
    return ufp4_fail(UFP4_EIO, "%s: fstat failed: %s", path, os_error(err, errbuf, sizeof errbuf));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return ufp4_fail(UFP4_EIO, "%s: not a regular file", path);
  }
  size_t len = (size_t)sb.st_size;
  void *map = NULL;
  if (len > 0) {
    map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int err = errno;
      close(fd);
      return ufp4_fail(UFP4_EIO, "%s: mmap failed: %s", path, os_error(err, errbuf, sizeof errbuf));
    }
  }
  close(fd);
  int rc = ufp4_st_parse(map, len, path, out);
  if (rc) {
    if (map) munmap(map, len);
    return rc;
  }
  (*out)->map = map;
  (*out)->map_len = len;
  return 0;
}

size_t ufp4_st_count(const ufp4_st *st) { return st ? st->n : 0; }

const ufp4_st_info *ufp4_st_at(const ufp4_st *st, size_t i) { return st && i < st->n ? &st->t[i] : NULL; }

const ufp4_st_info *ufp4_st_find(const ufp4_st *st, const char *name) {
  if (!st || !name) return NULL;
  ufp4_st_info key = {.name = name};
  return bsearch(&key, st->t, st->n, sizeof *st->t, cmp_info_name);
}

size_t ufp4_st_meta_count(const ufp4_st *st) { return st ? st->n_meta : 0; }

const char *ufp4_st_meta_key(const ufp4_st *st, size_t i) { return st && i < st->n_meta ? st->mkey[i] : NULL; }

const char *ufp4_st_meta_get(const ufp4_st *st, const char *key) {
  for (size_t i = 0; st && key && i < st->n_meta; i++)
    if (strcmp(st->mkey[i], key) == 0) return st->mval[i];
  return NULL;
}

static void shape_str(char *s, size_t len, const size_t *shape, int ndim) {
  size_t k = (size_t)snprintf(s, len, "[");
  for (int d = 0; d < ndim && k < len; d++)
    k += (size_t)snprintf(s + k, len - k, "%s%zu", d ? "," : "", shape[d]);
  if (k < len) snprintf(s + k, len - k, "]");
}

int ufp4_st_read_f32(const ufp4_st *st, const char *name, float *dst, const size_t *shape, int ndim) {
  if (!st || !name || (ndim && !shape) || ndim < 0)
    return ufp4_fail(UFP4_EINVAL, "ufp4_st_read_f32: bad argument");
  const ufp4_st_info *t = ufp4_st_find(st, name);
  if (!t) return ufp4_fail(UFP4_EINVAL, "%s: no tensor named %s", st->file, name);
  int same = t->ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
  if (!same) {
    char have[UFP4_ST_MAX_DIMS * 24 + 4], want[256];
    shape_str(have, sizeof have, t->shape, t->ndim);
    shape_str(want, sizeof want, shape, ndim);
    return ufp4_fail(UFP4_EINVAL, "%s: tensor %s has shape %s, expected %s", st->file, name, have, want);
  }
  if (t->count && !dst) return ufp4_fail(UFP4_EINVAL, "ufp4_st_read_f32: NULL destination");
  const uint8_t *p = t->data;
  switch (t->dtype) {
  case UFP4_ST_F32:
    if (t->nbytes) memcpy(dst, p, t->nbytes);
    return 0;
  case UFP4_ST_BF16:
  case UFP4_ST_F16:
    for (size_t i = 0; i < t->count; i++) {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      if (t->dtype == UFP4_ST_F16) {
        dst[i] = ufp4_f16_bits_to_f32(h);
      } else {
        uint32_t u = (uint32_t)h << 16;
        memcpy(&dst[i], &u, 4);
      }
    }
    return 0;
  case UFP4_ST_F64:
    for (size_t i = 0; i < t->count; i++) {
      double v;
      memcpy(&v, p + 8 * i, 8);
      dst[i] = (float)v;
    }
    return 0;
  default:
    return ufp4_fail(UFP4_EINVAL, "%s: tensor %s has dtype %s, not F32/BF16/F16/F64", st->file, name,
                     dtypes[t->dtype].name);
  }
}
