#include "ufp4/corpus.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/grow.h"
#include "core/utf8.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

typedef struct {
  ufp4_corpus *c;
  size_t cap_docs, cap_bufs;
} builder;

static int add_doc(builder *b, const char *name, const char *text, size_t len) {
  ufp4_corpus *c = b->c;
  size_t cap = b->cap_docs;
  if (ufp4_grow((void **)&c->names, &cap, c->n_docs + 1, sizeof *c->names) ||
      (cap = b->cap_docs, ufp4_grow((void **)&c->texts, &cap, c->n_docs + 1, sizeof *c->texts)) ||
      (cap = b->cap_docs, ufp4_grow((void **)&c->lens, &cap, c->n_docs + 1, sizeof *c->lens)))
    return ufp4_fail(UFP4_ENOMEM, "corpus: out of memory");
  b->cap_docs = cap;
  c->names[c->n_docs] = strdup(name);
  if (!c->names[c->n_docs]) return ufp4_fail(UFP4_ENOMEM, "corpus: out of memory");
  c->texts[c->n_docs] = text;
  c->lens[c->n_docs] = len;
  c->n_docs++;
  c->total_bytes += len;
  return 0;
}

static int add_file(builder *b, const char *path, const char *sep) {
  char *buf;
  size_t n, bad;
  int rc = ufp4_read_file(path, SIZE_MAX, &buf, &n);
  if (rc) return rc;
  ufp4_corpus *c = b->c;
  if (ufp4_grow((void **)&c->bufs, &b->cap_bufs, c->n_bufs + 1, sizeof *c->bufs)) {
    free(buf);
    return ufp4_fail(UFP4_ENOMEM, "corpus: out of memory");
  }
  c->bufs[c->n_bufs++] = buf;
  if (!n) return ufp4_fail(UFP4_EFORMAT, "%s: empty file", path);
  if (!ufp4_utf8_valid(buf, n, &bad))
    return ufp4_fail(UFP4_EFORMAT, "%s: invalid UTF-8 at byte offset %zu", path, bad);
  if (!sep || !*sep) return add_doc(b, path, buf, n);
  size_t seplen = strlen(sep), start = 0, k = 0;
  char name[4200];
  while (start <= n) {
    const char *hit = NULL;
    for (size_t i = start; i + seplen <= n; i++)
      if (buf[i] == sep[0] && !memcmp(buf + i, sep, seplen)) {
        hit = buf + i;
        break;
      }
    size_t end = hit ? (size_t)(hit - buf) : n;
    if (end > start) {
      snprintf(name, sizeof name, "%s#%zu", path, k++);
      if ((rc = add_doc(b, name, buf + start, end - start))) return rc;
    }
    if (!hit) break;
    start = end + seplen;
  }
  if (!k) return ufp4_fail(UFP4_EFORMAT, "%s: no document between separators", path);
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int ufp4_corpus_load(const char *path, const char *separator, ufp4_corpus *out) {
  memset(out, 0, sizeof *out);
  builder b = {out, 0, 0};
  struct stat st;
  if (stat(path, &st)) return ufp4_fail(UFP4_EIO, "%s: %s", path, strerror(errno));
  int rc = 0;
  if (!S_ISDIR(st.st_mode)) {
    rc = add_file(&b, path, separator);
  } else {
    DIR *d = opendir(path);
    if (!d) return ufp4_fail(UFP4_EIO, "%s: cannot open directory: %s", path, strerror(errno));
    char **files = NULL;
    size_t nf = 0, cap = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
      size_t l = strlen(e->d_name);
      if (l < 5 || strcmp(e->d_name + l - 4, ".txt") || e->d_name[0] == '.') continue;
      if (ufp4_grow((void **)&files, &cap, nf + 1, sizeof *files) || !(files[nf] = strdup(e->d_name))) {
        rc = ufp4_fail(UFP4_ENOMEM, "corpus: out of memory");
        break;
      }
      nf++;
    }
    closedir(d);
    if (!rc && !nf) rc = ufp4_fail(UFP4_EFORMAT, "%s: directory holds no *.txt file", path);
    if (!rc) qsort(files, nf, sizeof *files, cmp_str);
    char full[4096];
    for (size_t i = 0; !rc && i < nf; i++) {
      snprintf(full, sizeof full, "%s/%s", path, files[i]);
      rc = add_file(&b, full, separator);
    }
    for (size_t i = 0; i < nf; i++) free(files[i]);
    free(files);
  }
  if (rc) ufp4_corpus_free(out);
  return rc;
}

void ufp4_corpus_free(ufp4_corpus *c) {
  for (size_t i = 0; i < c->n_docs; i++) free(c->names[i]);
  for (size_t i = 0; i < c->n_bufs; i++) free(c->bufs[i]);
  free(c->names);
  free(c->texts);
  free(c->lens);
  free(c->bufs);
  memset(c, 0, sizeof *c);
}
