/* Tokenizers: raw bytes, GPT-2's byte-level BPE, and BPE vocabularies trained by ufp4 in the same
 * file format (encoder.json + vocab.bpe).
 *
 * Text is UTF-8. Encoding rejects invalid UTF-8 (overlong forms, surrogates, code points above
 * U+10FFFF, truncated sequences) with UFP4_EFORMAT naming the byte offset, for every tokenizer,
 * so that all tokenizers accept exactly the same corpora.
 *
 * BPE encoding follows GPT-2 (Radford et al. 2019) as implemented by the npm package
 * gpt-3-encoder@1.1.4, which is the test reference:
 *  - pre-tokenization by the regex
 *      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *    with JS semantics (\s is JS whitespace, classes from node's Unicode tables, see
 *    src/data/unicode_tables.c); the pieces never cross a match boundary;
 *  - each piece's UTF-8 bytes start as single-byte tokens, then repeatedly the adjacent pair
 *    with the lowest merge rank (line number in vocab.bpe) is merged, every occurrence in one
 *    left-to-right pass, until no adjacent pair has a rank;
 *  - JS-compatibility: the reference looks ranks up by the string "a,b", so a pair (x,y) whose
 *    x+","+y spells a real merge "a,b" takes that merge's rank and merges into x+y. GPT-2's
 *    vocab.bpe has 11 such aliases (e.g. ("\",", "\"") aliasing ("\"", ",\"")); ufp4 reproduces
 *    them so its ids equal the reference's, and among pairs of equal rank the rightmost wins,
 *    as in the reference.
 * Decoding concatenates the tokens' bytes; decode(encode(x)) == x for all valid UTF-8 x.
 *
 * Special token: "<|endoftext|>" (GPT-2 id 50256; the last id of a trained vocabulary) is never
 * produced by encoding text -- the literal string is encoded as ordinary text -- and is what
 * `ufp4 prepare` puts between documents. The bytes tokenizer has no special token (vocabulary 256).
 *
 * A tokenizer object caches the encoding of pre-tokens, so one object must not be used by two
 * threads at once; open one per thread. */
#ifndef UFP4_TOKENIZER_H
#define UFP4_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "ufp4/corpus.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Tokenizer ids as stored in token shards. */
typedef enum {
  UFP4_TOK_BYTES = 0, /* one token per byte, vocabulary 256 */
  UFP4_TOK_GPT2 = 1,  /* BPE files identical to GPT-2's (recognized by their hash) */
  UFP4_TOK_BPE = 2,   /* any other encoder.json + vocab.bpe, e.g. one trained by ufp4 */
} ufp4_tok_kind;

typedef struct ufp4_tokenizer ufp4_tokenizer;

/* A growable array of token ids. Zero-initialize, free with ufp4_tokvec_free. */
typedef struct {
  uint32_t *ids;
  size_t n, cap;
} ufp4_tokvec;

int ufp4_tokvec_push(ufp4_tokvec *v, uint32_t id);
void ufp4_tokvec_free(ufp4_tokvec *v);

/* Opens a tokenizer by name:
 *   "bytes"  the byte tokenizer;
 *   "gpt2"   encoder.json + vocab.bpe from $UFP4_GPT2_DIR, else data/raw/gpt2 under
 *            $UFP4_SOURCE_DIR, else data/raw/gpt2 relative to the working directory;
 *   PATH     a directory holding encoder.json and vocab.bpe, or the path of an encoder.json
 *            with vocab.bpe beside it.
 * Errors name the missing or malformed file. */
int ufp4_tokenizer_open(const char *spec, ufp4_tokenizer **out);
/* Loads a BPE tokenizer from explicit files. */
int ufp4_tokenizer_load_bpe(const char *encoder_json, const char *vocab_bpe, ufp4_tokenizer **out);
void ufp4_tokenizer_free(ufp4_tokenizer *tok);

ufp4_tok_kind ufp4_tokenizer_kind(const ufp4_tokenizer *tok);
const char *ufp4_tokenizer_name(const ufp4_tokenizer *tok); /* "bytes", "gpt2" or "bpe" */
uint32_t ufp4_tokenizer_vocab_size(const ufp4_tokenizer *tok);
/* The <|endoftext|> id, or -1 when the tokenizer has none (bytes). */
int64_t ufp4_tokenizer_eot(const ufp4_tokenizer *tok);
/* FNV-1a 64 over the bytes of encoder.json then vocab.bpe; 0 for bytes. Shards of custom BPE
 * tokenizers store it so a shard is never read with another vocabulary of the same size. */
uint64_t ufp4_tokenizer_hash(const ufp4_tokenizer *tok);
/* FNV-1a 64 of GPT-2's encoder.json then vocab.bpe (the files of docs/SOURCES.md, Data). */
#define UFP4_GPT2_FILES_HASH UINT64_C(0xf1c9dc14a36a3b68)

/* Appends the ids of `text` (len bytes of UTF-8) to `out`. `what` names the input in error
 * messages (a file path); it may be NULL. */
int ufp4_tokenizer_encode(ufp4_tokenizer *tok, const char *text, size_t len, const char *what,
                          ufp4_tokvec *out);
/* Decodes n ids to a malloc'ed, NUL-terminated byte string (*len excludes the NUL). Fails with
 * UFP4_EINVAL on an id outside the vocabulary. */
int ufp4_tokenizer_decode(const ufp4_tokenizer *tok, const uint32_t *ids, size_t n, char **text,
                          size_t *len);
/* The bytes of one token (not NUL-terminated); NULL for an out-of-range id. */
const uint8_t *ufp4_tokenizer_token_bytes(const ufp4_tokenizer *tok, uint32_t id, size_t *len);

/* BPE merges in rank order (the lines of vocab.bpe; not the JS-compatibility aliases): the count
 * (0 for bytes), and the ids of the pair merge `rank` joins. Returns 0, or UFP4_EINVAL for a rank
 * out of range. For exporters that write the vocabulary in another program's format. */
uint32_t ufp4_tokenizer_merge_count(const ufp4_tokenizer *tok);
int ufp4_tokenizer_merge(const ufp4_tokenizer *tok, uint32_t rank, uint32_t *a, uint32_t *b);

/* GPT-2 pre-tokenization alone: calls `piece` for each match, in order, with its byte offset and
 * length. Returns 0, or the first non-zero value `piece` returns, or UFP4_EFORMAT on invalid UTF-8. */
int ufp4_pretokenize(const char *text, size_t len, const char *what,
                     int (*piece)(void *ctx, size_t off, size_t n), void *ctx);

/* BPE training (Sennrich et al. 2016) on GPT-2 pre-tokens, with the incremental pair-count
 * algorithm: counts of adjacent token pairs over the unique pre-token words (weighted by their
 * frequencies) live in a hash table, a max-heap with lazy invalidation picks the most frequent
 * pair, and a merge revisits only the words that contain it. Ties between pairs of equal count
 * go to the smallest (first id, second id); the 256 byte tokens have GPT-2's ids (the
 * bytes-to-unicode order), merge k creates id 256+k, and <|endoftext|> is the last id.
 * vocab_size counts all of these, so vocab_size - 257 merges are learned (fewer if the corpus
 * runs out of pairs that occur at least twice; *out_vocab reports the size reached). Writes
 * DIR/encoder.json and DIR/vocab.bpe atomically. */
int ufp4_bpe_train(const ufp4_corpus *corpus, uint32_t vocab_size, const char *out_dir,
                   uint32_t *out_vocab);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
