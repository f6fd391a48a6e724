#include "ufp4/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/hashmap.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "token shards are written with little-endian stores"
#endif

static const uint8_t magic[8] = {'U', 'F', 'P', '4', 'T', 'O', 'K', 0};

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static uint32_t width_for(uint32_t vocab) { return vocab <= 65536 ? 2 : 4; }

void ufp4_shard_header_pack(const ufp4_shard_info *info, uint8_t out[UFP4_SHARD_HEADER_BYTES]) {
  memset(out, 0, UFP4_SHARD_HEADER_BYTES);
  memcpy(out, magic, 8);
  put32(out + 8, UFP4_SHARD_VERSION);
  put32(out + 12, info->tokenizer_id);
  put32(out + 16, info->vocab_size);
  put32(out + 20, info->token_width);
  put64(out + 24, info->token_count);
  put64(out + 32, info->tokenizer_hash);
  put64(out + 40, info->n_docs);
  put64(out + 56, ufp4_fnv1a64(UFP4_FNV_OFFSET, out, 56));
}

int ufp4_shard_header_parse(const uint8_t *b, size_t n, const char *path, ufp4_shard_info *info) {
  if (n < UFP4_SHARD_HEADER_BYTES)
    return ufp4_fail(UFP4_EFORMAT, "%s: truncated shard header (%zu of %u bytes)", path, n, UFP4_SHARD_HEADER_BYTES);
  if (memcmp(b, magic, 8)) return ufp4_fail(UFP4_EFORMAT, "%s: not a ufp4 token shard (bad magic)", path);
  uint32_t version = get32(b + 8);
  if (version != UFP4_SHARD_VERSION)
    return ufp4_fail(UFP4_EFORMAT, "%s: shard version %u, this build reads version %u", path, version,
                     UFP4_SHARD_VERSION);
  if (get64(b + 56) != ufp4_fnv1a64(UFP4_FNV_OFFSET, b, 56))
    return ufp4_fail(UFP4_EFORMAT, "%s: corrupt shard header (checksum mismatch)", path);
  info->tokenizer_id = get32(b + 12);
  info->vocab_size = get32(b + 16);
  info->token_width = get32(b + 20);
  info->token_count = get64(b + 24);
  info->tokenizer_hash = get64(b + 32);
  info->n_docs = get64(b + 40);
  if (info->tokenizer_id > 2) return ufp4_fail(UFP4_EFORMAT, "%s: unknown tokenizer id %u", path, info->tokenizer_id);
  if (!info->vocab_size) return ufp4_fail(UFP4_EFORMAT, "%s: vocabulary size 0", path);
  if (info->token_width != width_for(info->vocab_size))
    return ufp4_fail(UFP4_EFORMAT, "%s: token width %u does not suit vocabulary size %u", path, info->token_width,
                     info->vocab_size);
  if (get64(b + 48)) return ufp4_fail(UFP4_EFORMAT, "%s: reserved header field is not 0", path);
  return 0;
}

struct ufp4_shard_writer {
  ufp4_atomic_file f;
  ufp4_shard_info info;
  uint8_t buf[1 << 16];
  size_t nbuf;
};

int ufp4_shard_writer_open(const char *path, const ufp4_shard_info *info, ufp4_shard_writer **out) {
  *out = NULL;
  if (info->tokenizer_id > 2 || !info->vocab_size)
    return ufp4_fail(UFP4_EINVAL, "%s: bad tokenizer id %u or vocabulary size %u", path, info->tokenizer_id,
                     info->vocab_size);
  ufp4_shard_writer *w = calloc(1, sizeof *w);
  if (!w) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  w->info = *info;
  w->info.token_width = width_for(info->vocab_size);
  w->info.token_count = 0;
  int rc = ufp4_atomic_open(&w->f, path);
  uint8_t header[UFP4_SHARD_HEADER_BYTES] = {0}; /* placeholder until commit */
  if (!rc) rc = ufp4_atomic_write(&w->f, header, sizeof header);
  if (rc) {
    ufp4_shard_writer_abort(w);
    return rc;
  }
  *out = w;
  return 0;
}

int ufp4_shard_writer_append(ufp4_shard_writer *w, const uint32_t *ids, size_t n) {
  uint32_t width = w->info.token_width;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] >= w->info.vocab_size)
      return ufp4_fail(UFP4_EINVAL, "%s: token %u is outside the vocabulary of %u", w->f.path, ids[i],
                       w->info.vocab_size);
    if (w->nbuf + width > sizeof w->buf) {
      int rc = ufp4_atomic_write(&w->f, w->buf, w->nbuf);
      if (rc) return rc;
      w->nbuf = 0;
    }
    for (uint32_t k = 0; k < width; k++) w->buf[w->nbuf++] = (uint8_t)(ids[i] >> (8 * k));
  }
  w->info.token_count += n;
  return 0;
}

int ufp4_shard_writer_commit(ufp4_shard_writer *w, uint64_t n_docs) {
  int rc = ufp4_atomic_write(&w->f, w->buf, w->nbuf);
  w->info.n_docs = n_docs;
  uint8_t header[UFP4_SHARD_HEADER_BYTES];
  ufp4_shard_header_pack(&w->info, header);
  if (!rc && lseek(w->f.fd, 0, SEEK_SET) != 0)
    rc = ufp4_fail(UFP4_EIO, "%s: seek failed: %s", w->f.tmp, strerror(errno));
  if (!rc) rc = ufp4_atomic_write(&w->f, header, sizeof header);
  if (!rc) rc = ufp4_atomic_commit(&w->f);
  else ufp4_atomic_abort(&w->f);
  free(w);
  return rc;
}

void ufp4_shard_writer_abort(ufp4_shard_writer *w) {
  if (!w) return;
  ufp4_atomic_abort(&w->f);
  free(w);
}

int ufp4_shard_open(const char *path, ufp4_shard *s) {
  memset(s, 0, sizeof *s);
  size_t pl = strlen(path);
  memcpy(s->path, path, pl < sizeof s->path ? pl + 1 : sizeof s->path - 1);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return ufp4_fail(UFP4_EIO, "%s: cannot open shard: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    return ufp4_fail(UFP4_EIO, "%s: not a regular file", path);
  }
  size_t n = (size_t)st.st_size;
  if (n < UFP4_SHARD_HEADER_BYTES) {
    close(fd);
    return ufp4_fail(UFP4_EFORMAT, "%s: truncated shard header (%zu of %u bytes)", path, n, UFP4_SHARD_HEADER_BYTES);
  }
  void *map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return ufp4_fail(UFP4_EIO, "%s: mmap failed: %s", path, strerror(errno));
  s->map = map;
  s->map_len = n;
  int rc = ufp4_shard_header_parse(map, n, path, &s->info);
  if (!rc) {
    uint64_t data = n - UFP4_SHARD_HEADER_BYTES;
    if (s->info.token_count > data / s->info.token_width || data != s->info.token_count * s->info.token_width)
      rc = ufp4_fail(UFP4_EFORMAT, "%s: header says %llu tokens (%llu bytes) but the file holds %llu bytes of tokens",
                     path, (unsigned long long)s->info.token_count,
                     (unsigned long long)s->info.token_count * s->info.token_width, (unsigned long long)data);
  }
  s->tokens = (const uint8_t *)map + UFP4_SHARD_HEADER_BYTES;
  for (uint64_t i = 0; !rc && i < s->info.token_count; i++) {
    uint32_t t = ufp4_shard_token(s, i);
    if (t >= s->info.vocab_size)
      rc = ufp4_fail(UFP4_EFORMAT, "%s: token %llu is %u, outside the vocabulary of %u", path, (unsigned long long)i,
                     t, s->info.vocab_size);
  }
  if (rc) ufp4_shard_close(s);
  return rc;
}

void ufp4_shard_close(ufp4_shard *s) {
  if (s->map) munmap(s->map, s->map_len);
  s->map = NULL;
  s->tokens = NULL;
  s->map_len = 0;
}

int ufp4_shard_read(const ufp4_shard *s, uint64_t start, size_t n, uint32_t *dst) {
  if (start > s->info.token_count || n > s->info.token_count - start)
    return ufp4_fail(UFP4_EINVAL, "%s: tokens [%llu, %llu) are out of range (%llu tokens)", s->path,
                     (unsigned long long)start, (unsigned long long)(start + n), (unsigned long long)s->info.token_count);
  for (size_t i = 0; i < n; i++) dst[i] = ufp4_shard_token(s, start + i);
  return 0;
}

int ufp4_shard_expect(const ufp4_shard *s, uint32_t tokenizer_id, uint32_t vocab_size, uint64_t tokenizer_hash) {
  const ufp4_shard_info *i = &s->info;
  if (i->vocab_size != vocab_size)
    return ufp4_fail(UFP4_EFORMAT, "%s: vocabulary size mismatch: the shard has %u, the model expects %u", s->path,
                     i->vocab_size, vocab_size);
  if (i->tokenizer_id != tokenizer_id)
    return ufp4_fail(UFP4_EFORMAT, "%s: tokenizer mismatch: the shard has tokenizer id %u, the model expects %u",
                     s->path, i->tokenizer_id, tokenizer_id);
  if (i->tokenizer_hash != tokenizer_hash)
    return ufp4_fail(UFP4_EFORMAT, "%s: tokenizer files differ: shard hash %016llx, expected %016llx", s->path,
                     (unsigned long long)i->tokenizer_hash, (unsigned long long)tokenizer_hash);
  return 0;
}
