/* BPE tokenizer files. The input is encoder.json, a NUL byte, vocab.bpe, a NUL byte, then text
 * (missing parts are empty). Files that load must encode the text so that decode(encode(text))
 * gives the text back (tokenizer.h), and every id must be inside the vocabulary. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "ufp4/tokenizer.h"

static const uint8_t *split(const uint8_t **p, const uint8_t *end, size_t *len) {
  const uint8_t *start = *p;
  const uint8_t *nul = memchr(start, 0, (size_t)(end - start));
  *len = (size_t)((nul ? nul : end) - start);
  *p = nul ? nul + 1 : end;
  return start;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *p = data, *end = data + size;
  size_t ne, nv, nt;
  const uint8_t *enc = split(&p, end, &ne), *voc = split(&p, end, &nv);
  const uint8_t *text = p;
  nt = (size_t)(end - p);
  fuzz_file fe, fv;
  fuzz_file_make(&fe, enc, ne);
  fuzz_file_make(&fv, voc, nv);
  ufp4_tokenizer *tok;
  int rc = ufp4_tokenizer_load_bpe(fe.path, fv.path, &tok);
  if (rc) {
    const char *msg = ufp4_last_error();
    if (getenv("UFP4_FUZZ_VERBOSE")) fprintf(stderr, "rejected: %s\n", msg);
    if (!strstr(msg, fe.path) && !strstr(msg, fv.path)) abort();
  } else {
    ufp4_tokvec ids = {0};
    if (ufp4_tokenizer_encode(tok, (const char *)text, nt, "fuzz text", &ids) == 0) {
      uint32_t vocab = ufp4_tokenizer_vocab_size(tok);
      for (size_t i = 0; i < ids.n; i++)
        if (ids.ids[i] >= vocab || (int64_t)ids.ids[i] == ufp4_tokenizer_eot(tok)) abort();
      char *back;
      size_t nb;
      if (ufp4_tokenizer_decode(tok, ids.ids, ids.n, &back, &nb)) abort();
      if (nb != nt || memcmp(back, text, nt)) abort();
      free(back);
    }
    ufp4_tokvec_free(&ids);
    ufp4_tokenizer_free(tok);
  }
  fuzz_file_drop(&fe);
  fuzz_file_drop(&fv);
  return 0;
}
