/* NumPy .npy reader and writer (npy.h), float32 little-endian only.
 *
 * Format (numpy/lib/format.py, NEP 1): magic "\x93NUMPY", major and minor version bytes, the
 * header length (uint16 LE for 1.0, uint32 LE for 2.0 and 3.0), then a Python dict literal with
 * the keys 'descr', 'fortran_order' and 'shape', padded with spaces and ended by '\n', then the raw
 * data. The parser accepts exactly that dict, keys in any order, and nothing else; every error
 * message names the file. */
#include "ufp4/npy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/fileio.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ufp4's npy reader copies float32 data as is and needs a little-endian host"
#endif

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
#define NPY_ALIGN 64
#define NPY_GROWTH_DIGITS 21 /* numpy >= 1.23 leaves room for shape[0] to grow to 21 digits */

/* ---------------------------------------------------------------- header parser */

typedef struct {
  const char *p, *end;
  const char *name;
} cursor;

static void skip_ws(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

static int bad(const cursor *c, const char *what) {
  return ufp4_fail(UFP4_EFORMAT, "%s: malformed .npy header: %s", c->name, what);
}

static int expect(cursor *c, char ch, const char *what) {
  skip_ws(c);
  if (c->p >= c->end || *c->p != ch) return bad(c, what);
  c->p++;
  return UFP4_OK;
}

/* A Python string literal in single or double quotes, without escapes (none of the valid keys
 * or dtypes need one). */
static int parse_str(cursor *c, char *buf, size_t cap) {
  skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return bad(c, "expected a string");
  char q = *c->p++;
  size_t k = 0;
  while (c->p < c->end && *c->p != q) {
    if (*c->p == '\\' || *c->p == '\n') return bad(c, "unsupported character in a string");
    if (k + 1 >= cap) return bad(c, "string too long");
    buf[k++] = *c->p++;
  }
  if (c->p >= c->end) return bad(c, "unterminated string");
  c->p++;
  buf[k] = 0;
  return UFP4_OK;
}

static int parse_bool(cursor *c, int *v) {
  skip_ws(c);
  size_t left = (size_t)(c->end - c->p);
  if (left >= 4 && memcmp(c->p, "True", 4) == 0) {
    *v = 1;
    c->p += 4;
  } else if (left >= 5 && memcmp(c->p, "False", 5) == 0) {
    *v = 0;
    c->p += 5;
  } else {
    return bad(c, "fortran_order is not True or False");
  }
  return UFP4_OK;
}

/* A non-negative decimal integer that fits in size_t. */
static int parse_dim(cursor *c, size_t *v) {
  skip_ws(c);
  if (c->p < c->end && *c->p == '-')
    return ufp4_fail(UFP4_EFORMAT, "%s: negative dimension in shape", c->name);
  if (c->p >= c->end || *c->p < '0' || *c->p > '9') return bad(c, "shape entry is not an integer");
  size_t x = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    size_t digit = (size_t)(*c->p - '0');
    if (x > (SIZE_MAX - digit) / 10)
      return ufp4_fail(UFP4_EFORMAT, "%s: shape dimension too large", c->name);
    x = x * 10 + digit;
    c->p++;
  }
  *v = x;
  return UFP4_OK;
}

/* "()", "(n,)", "(n, m)", "(n, m,)": a Python tuple; "(n)" is an int, not a tuple. */
static int parse_shape(cursor *c, ufp4_npy *out) {
  int st = expect(c, '(', "shape is not a tuple");
  if (st) return st;
  int nd = 0;
  skip_ws(c);
  if (c->p < c->end && *c->p == ')') {
    c->p++;
    out->ndim = 0;
    return UFP4_OK;
  }
  for (;;) {
    if (nd == UFP4_NPY_MAX_DIMS)
      return ufp4_fail(UFP4_EFORMAT, "%s: more than %d dimensions", c->name, UFP4_NPY_MAX_DIMS);
    if ((st = parse_dim(c, &out->shape[nd]))) return st;
    nd++;
    skip_ws(c);
    if (c->p < c->end && *c->p == ')') {
      if (nd == 1) return bad(c, "shape '(n)' is not a tuple (need '(n,)')");
      c->p++;
      break;
    }
    if ((st = expect(c, ',', "expected ',' or ')' in shape"))) return st;
    skip_ws(c);
    if (c->p < c->end && *c->p == ')') {
      c->p++;
      break;
    }
  }
  out->ndim = nd;
  return UFP4_OK;
}

static int descr_ok(const char *d) {
  return strcmp(d, "<f4") == 0 || strcmp(d, "|f4") == 0 || strcmp(d, "=f4") == 0;
}

static int parse_header(const char *h, size_t hlen, const char *name, ufp4_npy *out) {
  cursor c = {h, h + hlen, name};
  int st, seen_descr = 0, seen_fortran = 0, seen_shape = 0, fortran = 0;
  char descr[32];
  if ((st = expect(&c, '{', "header is not a dict"))) return st;
  for (;;) {
    skip_ws(&c);
    if (c.p < c.end && *c.p == '}') {
      c.p++;
      break;
    }
    char key[32];
    if ((st = parse_str(&c, key, sizeof key))) return st;
    if ((st = expect(&c, ':', "expected ':' after a key"))) return st;
    if (strcmp(key, "descr") == 0) {
      if (seen_descr++) return bad(&c, "duplicate key 'descr'");
      if ((st = parse_str(&c, descr, sizeof descr))) return st;
    } else if (strcmp(key, "fortran_order") == 0) {
      if (seen_fortran++) return bad(&c, "duplicate key 'fortran_order'");
      if ((st = parse_bool(&c, &fortran))) return st;
    } else if (strcmp(key, "shape") == 0) {
      if (seen_shape++) return bad(&c, "duplicate key 'shape'");
      if ((st = parse_shape(&c, out))) return st;
    } else {
      return ufp4_fail(UFP4_EFORMAT, "%s: malformed .npy header: unexpected key '%s'", name, key);
    }
    skip_ws(&c);
    if (c.p < c.end && *c.p == ',') {
      c.p++;
      continue;
    }
    if ((st = expect(&c, '}', "expected ',' or '}' after a value"))) return st;
    break;
  }
  skip_ws(&c);
  if (c.p != c.end) return bad(&c, "extra characters after the dict");
  if (!seen_descr) return bad(&c, "missing key 'descr'");
  if (!seen_fortran) return bad(&c, "missing key 'fortran_order'");
  if (!seen_shape) return bad(&c, "missing key 'shape'");
  if (!descr_ok(descr))
    return ufp4_fail(UFP4_EFORMAT, "%s: dtype '%s' is not supported (float32 little-endian '<f4' only)",
                     name, descr);
  if (fortran && out->ndim >= 2)
    return ufp4_fail(UFP4_EFORMAT, "%s: fortran_order True with %d dimensions is not supported",
                     name, out->ndim);
  return UFP4_OK;
}

void ufp4_npy_free(ufp4_npy *a) {
  if (!a) return;
  free(a->data);
  memset(a, 0, sizeof *a);
}

int ufp4_npy_parse(const uint8_t *buf, size_t len, const char *name, ufp4_npy *out) {
  if (!name) name = "(buffer)";
  if (!out) return ufp4_fail(UFP4_EINVAL, "%s: NULL output", name);
  memset(out, 0, sizeof *out);
  if (!buf && len) return ufp4_fail(UFP4_EINVAL, "%s: NULL buffer", name);
  if (len < 8 || memcmp(buf, npy_magic, 6) != 0)
    return ufp4_fail(UFP4_EFORMAT, "%s: not a .npy file (bad magic)", name);
  int major = buf[6], minor = buf[7];
  if (major < 1 || major > 3 || minor != 0)
    return ufp4_fail(UFP4_EFORMAT, "%s: unsupported .npy version %d.%d", name, major, minor);
  size_t start = major == 1 ? 10 : 12;
  if (len < start) return ufp4_fail(UFP4_EFORMAT, "%s: truncated .npy header", name);
  size_t hlen = major == 1 ? (size_t)buf[8] | (size_t)buf[9] << 8
                           : (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
                                 (size_t)buf[11] << 24;
  if (hlen > len - start)
    return ufp4_fail(UFP4_EFORMAT, "%s: header length %zu runs past the end of the file", name,
                     hlen);
  for (size_t i = 0; i < hlen; ++i)
    if (buf[start + i] == 0 || buf[start + i] >= 0x80)
      return ufp4_fail(UFP4_EFORMAT, "%s: malformed .npy header: non-ASCII byte", name);
  int st = parse_header((const char *)buf + start, hlen, name, out);
  if (st) {
    memset(out, 0, sizeof *out);
    return st;
  }
  size_t count = 1;
  for (int i = 0; i < out->ndim; ++i) {
    if (out->shape[i] && count > SIZE_MAX / sizeof(float) / out->shape[i]) {
      memset(out, 0, sizeof *out);
      return ufp4_fail(UFP4_EFORMAT, "%s: shape product overflows", name);
    }
    count *= out->shape[i];
  }
  size_t have = len - start - hlen, want = count * sizeof(float);
  if (have != want) {
    memset(out, 0, sizeof *out);
    return ufp4_fail(UFP4_EFORMAT, "%s: %s data: %zu bytes for %zu float32 values (%zu bytes)",
                     name, have < want ? "truncated" : "trailing", have, count, want);
  }
  out->count = count;
  out->data = malloc(want ? want : sizeof(float));
  if (!out->data) {
    memset(out, 0, sizeof *out);
    return ufp4_fail(UFP4_ENOMEM, "%s: out of memory for %zu values", name, count);
  }
  if (want) memcpy(out->data, buf + start + hlen, want);
  return UFP4_OK;
}

int ufp4_npy_read(const char *path, ufp4_npy *out) {
  if (!path || !out) return ufp4_fail(UFP4_EINVAL, "ufp4_npy_read: NULL argument");
  memset(out, 0, sizeof *out);
  char *buf;
  size_t len;
  int st = ufp4_read_file(path, SIZE_MAX, &buf, &len);
  if (st) return st;
  st = ufp4_npy_parse((const uint8_t *)buf, len, path, out);
  free(buf);
  return st;
}

/* ---------------------------------------------------------------- writer */

/* The header numpy 1.24 writes: keys sorted, shape as a Python tuple, spare spaces for shape[0] to
 * grow, then spaces and '\n' so that the data starts at a multiple of 64 bytes (a full 64 spaces
 * when already aligned, as numpy does). Returns the header text length, excluding the prefix. */
static size_t build_header(char *h, size_t cap, const size_t *shape, int ndim) {
  size_t k = (size_t)snprintf(h, cap, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
  for (int i = 0; i < ndim; ++i)
    k += (size_t)snprintf(h + k, cap - k, "%zu%s", shape[i], (ndim == 1 || i + 1 < ndim) ? ", " : "");
  if (ndim == 1) k -= 1; /* "(n,)" not "(n, )" */
  k += (size_t)snprintf(h + k, cap - k, "), }");
  if (ndim > 0) {
    char digits[32];
    int nd = snprintf(digits, sizeof digits, "%zu", shape[0]);
    for (int i = nd; i < NPY_GROWTH_DIGITS; ++i) h[k++] = ' ';
  }
  size_t total = 10 + k + 1;
  size_t pad = NPY_ALIGN - total % NPY_ALIGN;
  for (size_t i = 0; i < pad; ++i) h[k++] = ' ';
  h[k++] = '\n';
  return k;
}

int ufp4_npy_write(const char *path, const float *data, const size_t *shape, int ndim) {
  if (!path) return ufp4_fail(UFP4_EINVAL, "ufp4_npy_write: NULL path");
  if (ndim < 0 || ndim > UFP4_NPY_MAX_DIMS)
    return ufp4_fail(UFP4_EINVAL, "%s: cannot write %d dimensions (0..%d)", path, ndim,
                     UFP4_NPY_MAX_DIMS);
  if (ndim > 0 && !shape) return ufp4_fail(UFP4_EINVAL, "%s: NULL shape", path);
  size_t count = 1;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] && count > SIZE_MAX / sizeof(float) / shape[i])
      return ufp4_fail(UFP4_EINVAL, "%s: shape product overflows", path);
    count *= shape[i];
  }
  if (count && !data) return ufp4_fail(UFP4_EINVAL, "%s: NULL data", path);

  char header[1024];
  size_t hlen = build_header(header, sizeof header, shape, ndim);
  uint8_t prefix[10];
  memcpy(prefix, npy_magic, 6);
  prefix[6] = 1;
  prefix[7] = 0;
  prefix[8] = (uint8_t)(hlen & 0xff);
  prefix[9] = (uint8_t)(hlen >> 8);

  const void *parts[3] = {prefix, header, data};
  size_t sizes[3] = {sizeof prefix, hlen, count * sizeof(float)};
  return ufp4_write_parts_atomic(path, parts, sizes, 3);
}
