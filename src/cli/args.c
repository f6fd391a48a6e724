#include "cli/args.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"

int cli_value(int argc, char **argv, int *i, const char *name, const char **value) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0) return 0;
  if (a[n] == '=') {
    *value = a + n + 1;
    return 1;
  }
  if (a[n] != '\0') return 0;
  if (*i + 1 >= argc) {
    fprintf(stderr, "ufp4: %s needs a value\n", name);
    return -1;
  }
  *value = argv[++*i];
  return 1;
}

int cli_flag(char **argv, int i, const char *name) { return strcmp(argv[i], name) == 0; }

int cli_wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
  return 0;
}

int cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    fprintf(stderr, "ufp4 %s: %s: '%s' is not an integer in [%ld, %ld]\n", cmd, flag, s, lo, hi);
    return -1;
  }
  *out = v;
  return 0;
}

int cli_parse_size(const char *cmd, const char *flag, const char *s, size_t lo, size_t hi, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
    fprintf(stderr, "ufp4 %s: %s: '%s' is not an integer in [%zu, %zu]\n", cmd, flag, s, lo, hi);
    return -1;
  }
  *out = (size_t)v;
  return 0;
}

int cli_parse_u64(const char *cmd, const char *flag, const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s || *end || s[0] == '-') {
    fprintf(stderr, "ufp4 %s: %s: '%s' is not an unsigned 64-bit integer\n", cmd, flag, s);
    return -1;
  }
  *out = (uint64_t)v;
  return 0;
}

int cli_parse_double(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
    fprintf(stderr, "ufp4 %s: %s: '%s' is not a number in [%g, %g]\n", cmd, flag, s, lo, hi);
    return -1;
  }
  *out = v;
  return 0;
}

int cli_error(const char *cmd, const char *context) {
  if (context)
    fprintf(stderr, "ufp4 %s: %s: %s\n", cmd, context, ufp4_last_error());
  else
    fprintf(stderr, "ufp4 %s: %s\n", cmd, ufp4_last_error());
  return 1;
}

/* The command line as typed, quoted where a shell would need it. */
char *cli_command_line(int argc, char **argv) {
  size_t cap = 16;
  for (int i = 0; i < argc; i++) cap += 4 * strlen(argv[i]) + 3;
  char *s = malloc(cap);
  if (!s) return NULL;
  size_t n = (size_t)snprintf(s, cap, "ufp4");
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const int plain = a[0] && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=,./:@%") ==
                                      strlen(a);
    s[n++] = ' ';
    if (plain) {
      memcpy(s + n, a, strlen(a));
      n += strlen(a);
      continue;
    }
    s[n++] = '\'';
    for (; *a; a++) {
      if (*a == '\'') {
        memcpy(s + n, "'\\''", 4);
        n += 4;
      } else s[n++] = *a;
    }
    s[n++] = '\'';
  }
  s[n] = 0;
  return s;
}
