/* The corpus options that `ufp4 prepare` and `ufp4 tokenizer` share: --corpus PATH and
 * --separator S, where S may spell a newline, a tab and a backslash as \n, \t and \\ so that it
 * can be typed on a command line. */
#ifndef UFP4_CLI_CORPUS_FLAGS_H
#define UFP4_CLI_CORPUS_FLAGS_H

#include "ufp4/corpus.h"

typedef struct {
  const char *path, *separator; /* separator as typed, escapes not yet undone */
} cli_corpus_opts;

/* --corpus or --separator at argv[*i]: the contract of cli_value (1 taken, -1 missing value,
 * 0 neither). */
int cli_corpus_flag(int argc, char **argv, int *i, cli_corpus_opts *o);
/* ufp4_corpus_load of o->path split at the unescaped separator; a ufp4 status. */
int cli_corpus_load(const cli_corpus_opts *o, ufp4_corpus *out);

#endif
