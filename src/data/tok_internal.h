/* The tokenizer object shared by tokenizer.c (open, bytes, decode) and bpe_model.c (BPE files
 * and encoding). */
#ifndef UFP4_DATA_TOK_INTERNAL_H
#define UFP4_DATA_TOK_INTERNAL_H

#include "data/hashmap.h"
#include "ufp4/tokenizer.h"

struct ufp4_tokenizer {
  ufp4_tok_kind kind;
  uint32_t vocab;
  int64_t eot;
  uint64_t hash;
  uint8_t *blob;      /* token bytes, id by id */
  size_t *off;        /* vocab + 1 offsets into blob */
  uint32_t byte_id[256];
  ufp4_u64map merges; /* (a << 32 | b) -> (rank << 32 | merged id) */
  uint32_t (*merge_pairs)[2]; /* the merges of vocab.bpe in rank order, without the aliases */
  uint32_t n_merges;
  /* encode cache: piece bytes -> (offset into cache_ids << 8 | count) */
  ufp4_strmap cache;
  uint32_t *cache_ids;
  size_t cache_n, cache_cap;
  uint32_t *word, *word2;
  size_t word_cap;
};

int ufp4_bpe_load_files(ufp4_tokenizer *t, const char *encoder_json, const char *vocab_bpe);
int ufp4_bpe_encode_piece(ufp4_tokenizer *t, const uint8_t *s, size_t n, ufp4_tokvec *out);

#endif
