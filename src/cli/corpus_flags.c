#include "cli/corpus_flags.h"

#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "ufp4/error.h"

int cli_corpus_flag(int argc, char **argv, int *i, cli_corpus_opts *o) {
  int r = cli_value(argc, argv, i, "--corpus", &o->path);
  return r ? r : cli_value(argc, argv, i, "--separator", &o->separator);
}

static char *unescape(const char *s) {
  char *o = malloc(strlen(s) + 1), *p = o;
  if (!o) return NULL;
  for (; *s; s++) {
    if (s[0] == '\\' && (s[1] == 'n' || s[1] == 't' || s[1] == '\\')) {
      *p++ = s[1] == 'n' ? '\n' : s[1] == 't' ? '\t' : '\\';
      s++;
    } else {
      *p++ = *s;
    }
  }
  *p = 0;
  return o;
}

int cli_corpus_load(const cli_corpus_opts *o, ufp4_corpus *out) {
  char *sep = NULL;
  if (o->separator && !(sep = unescape(o->separator))) {
    memset(out, 0, sizeof *out);
    return ufp4_fail(UFP4_ENOMEM, "%s: out of memory for the separator", o->path);
  }
  int rc = ufp4_corpus_load(o->path, sep, out);
  free(sep);
  return rc;
}
