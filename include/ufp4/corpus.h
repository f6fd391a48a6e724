/* Text corpora for tokenization and BPE training.
 *
 * A corpus is
 *  - a file: one document, or, with a separator, the documents between occurrences of it
 *    (empty pieces, e.g. after a trailing separator, are skipped);
 *  - a directory: every regular file whose name ends in ".txt", one document each, in strcmp
 *    order of the names (not recursive).
 * Document order is therefore deterministic. Every file must be non-empty, valid UTF-8
 * (see ufp4/tokenizer.h); errors name the file and the byte offset. */
#ifndef UFP4_CORPUS_H
#define UFP4_CORPUS_H

#include <stddef.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef struct {
  size_t n_docs;
  char **names;       /* file path, or "path#k" for the k-th piece of a separated file */
  const char **texts; /* document bytes (not NUL-terminated), pointing into owned buffers */
  size_t *lens;
  size_t total_bytes;
  /* owned file buffers */
  char **bufs;
  size_t n_bufs;
} ufp4_corpus;

/* separator: NULL or "" for one document per file. */
int ufp4_corpus_load(const char *path, const char *separator, ufp4_corpus *out);
void ufp4_corpus_free(ufp4_corpus *c);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
