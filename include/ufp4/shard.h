/* Token shards: a 64-byte little-endian header followed by the tokens as uint16 (vocabulary
 * <= 65536) or uint32.
 *
 *   offset  size  field
 *        0     8  magic "UFP4TOK\0"
 *        8     4  version (1)
 *       12     4  tokenizer id (ufp4_tok_kind: 0 bytes, 1 gpt2, 2 custom BPE)
 *       16     4  vocabulary size
 *       20     4  token width in bytes (2 or 4; 2 exactly when the vocabulary fits in 16 bits)
 *       24     8  token count
 *       32     8  tokenizer hash (ufp4_tokenizer_hash; 0 for bytes)
 *       40     8  document count
 *       48     8  reserved, 0
 *       56     8  header checksum: FNV-1a 64 of bytes 0..55
 *
 * Writers produce the file atomically (temp file, fsync, rename). Readers mmap it and validate
 * everything before use: file size, magic, version, checksum, width, count against the file
 * length, and every token below the vocabulary size; errors name the file and the problem. */
#ifndef UFP4_SHARD_H
#define UFP4_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

#define UFP4_SHARD_VERSION 1u
#define UFP4_SHARD_HEADER_BYTES 64u

typedef struct {
  uint32_t tokenizer_id, vocab_size, token_width;
  uint64_t token_count, tokenizer_hash, n_docs;
} ufp4_shard_info;

/* Serializes / parses and checks a header (`path` names the file in errors). */
void ufp4_shard_header_pack(const ufp4_shard_info *info, uint8_t out[UFP4_SHARD_HEADER_BYTES]);
int ufp4_shard_header_parse(const uint8_t *bytes, size_t n, const char *path, ufp4_shard_info *info);

typedef struct ufp4_shard_writer ufp4_shard_writer;
/* token_width and token_count of `info` are filled in by the writer. */
int ufp4_shard_writer_open(const char *path, const ufp4_shard_info *info, ufp4_shard_writer **out);
int ufp4_shard_writer_append(ufp4_shard_writer *w, const uint32_t *ids, size_t n);
/* Rewrites the header with the final counts, fsyncs and renames into place; frees w. */
int ufp4_shard_writer_commit(ufp4_shard_writer *w, uint64_t n_docs);
void ufp4_shard_writer_abort(ufp4_shard_writer *w);

typedef struct {
  ufp4_shard_info info;
  const uint8_t *tokens; /* into the mapping */
  void *map;
  size_t map_len;
  char path[4096];
} ufp4_shard;

int ufp4_shard_open(const char *path, ufp4_shard *s);
void ufp4_shard_close(ufp4_shard *s);
static inline uint32_t ufp4_shard_token(const ufp4_shard *s, uint64_t i) {
  if (s->info.token_width == 2) return (uint32_t)s->tokens[2 * i] | (uint32_t)s->tokens[2 * i + 1] << 8;
  const uint8_t *p = s->tokens + 4 * i;
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
/* Copies tokens [start, start+n) to dst; UFP4_EINVAL if the range is out of bounds. */
int ufp4_shard_read(const ufp4_shard *s, uint64_t start, size_t n, uint32_t *dst);
/* Checks that the shard was made by the tokenizer a model expects (id, vocabulary size, hash);
 * UFP4_EFORMAT naming the file and both values otherwise. */
int ufp4_shard_expect(const ufp4_shard *s, uint32_t tokenizer_id, uint32_t vocab_size, uint64_t tokenizer_hash);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
