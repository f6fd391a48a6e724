/* The run-config flags: every row of UFP4_TRAIN_SCHEMA (training/train_schema.h) that has a flag,
 * parsed within the same range as its config.json key. */
#include "cli/train_flags.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cli/args.h"
#include "training/train_schema.h"

/* " (default V)", or "" when the default is a sentinel outside the range (the help says what it
 * stands for). */
static void default_text(const ufp4_train_field *f, const ufp4_train_config *def, char *buf,
                         size_t size) {
  const char *at = (const char *)def + f->offset;
  double v = 0;
  buf[0] = '\0';
  switch (f->kind) {
  case UFP4_CFG_TEXT:
  case UFP4_CFG_RECIPE:
    if (*at) snprintf(buf, size, " (default %s)", at); /* "" (no schedule) says nothing */
    return;
  case UFP4_CFG_OVERRIDES: return;
  case UFP4_CFG_POLICY:
    snprintf(buf, size, " (default %s)",
             *(const ufp4_nan_policy *)at == UFP4_NAN_STOP ? "stop" : "skip");
    return;
  case UFP4_CFG_INT: v = *(const int *)at; break;
  case UFP4_CFG_FLOAT: v = *(const float *)at; break;
  case UFP4_CFG_DOUBLE: v = *(const double *)at; break;
  case UFP4_CFG_SEED: v = (double)*(const uint64_t *)at; break;
  case UFP4_CFG_DERIVED: return;
  }
  if (v >= f->lo && v <= f->hi) snprintf(buf, size, " (default %g)", v);
}

static int listed(const char *flag, const char *const *own) {
  for (; own && *own; own++)
    if (!strcmp(flag, *own)) return 1;
  return 0;
}

/* The train flags that set one run's recipe: a grid command (compare, sweep) gives each run its
 * own from --recipes, so it refuses these and its help leaves them out. */
static const char *const grid_refused[] = {"--recipe", "--schedule", NULL};

static void flags_usage(FILE *out, const ufp4_train_config *def, const char *const *own,
                        const char *const *refused) {
  for (size_t k = 0; k < ufp4_train_n_fields; k++) {
    const ufp4_train_field *f = &ufp4_train_fields[k];
    if (!f->flag || listed(f->flag, own) || listed(f->flag, refused)) continue;
    char dflt[600];
    default_text(f, def, dflt, sizeof dflt);
    fprintf(out, "  %-18s  %s%s\n", f->flag, f->help, dflt);
  }
}

void ufp4_train_flags_usage(FILE *out, const ufp4_train_config *def, const char *const *own) {
  flags_usage(out, def, own, NULL);
}

void ufp4_grid_flags_usage(FILE *out, const ufp4_train_config *def, const char *const *own) {
  flags_usage(out, def, own, grid_refused);
}

/* A seed must survive config.json, whose numbers are doubles. */
static int parse_seed(const char *cmd, const ufp4_train_field *f, const char *v, uint64_t *seed) {
  uint64_t u;
  if (cli_parse_u64(cmd, f->flag, v, &u)) return -1;
  if (u > (uint64_t)f->hi) {
    fprintf(stderr, "ufp4 %s: %s: '%s' is above %.0f (config.json could not record it exactly)\n",
            cmd, f->flag, v, f->hi);
    return -1;
  }
  *seed = u;
  return 0;
}

int ufp4_cli_append_override(const char *cmd, const char *flag, const char *v, char *at, size_t size) {
  const size_t len = strlen(at);
  if (!strchr(v, '=') || strchr(v, ';')) {
    fprintf(stderr, "ufp4 %s: %s: expected PATTERN=SPEC without ';', not '%s'\n", cmd, flag, v);
    return -1;
  }
  if (len + strlen(v) + 2 > size) {
    fprintf(stderr, "ufp4 %s: %s: too many overrides (under %zu bytes in all)\n", cmd, flag, size);
    return -1;
  }
  snprintf(at + len, size - len, "%s%s", len ? ";" : "", v);
  return 0;
}

/* Parses v into the member of f; 0 or -1 (message printed). */
static int parse_value(const char *cmd, const ufp4_train_field *f, const char *v,
                       ufp4_train_config *cfg) {
  char *at = (char *)cfg + f->offset;
  long lv;
  double dv;
  switch (f->kind) {
  case UFP4_CFG_INT:
    if (cli_parse_long(cmd, f->flag, v, (long)f->lo, (long)f->hi, &lv)) return -1;
    *(int *)at = (int)lv;
    return 0;
  case UFP4_CFG_FLOAT:
  case UFP4_CFG_DOUBLE:
    if (cli_parse_double(cmd, f->flag, v, f->lo, f->hi, &dv)) return -1;
    if (f->kind == UFP4_CFG_FLOAT) *(float *)at = (float)dv;
    else *(double *)at = dv;
    return 0;
  case UFP4_CFG_SEED: return parse_seed(cmd, f, v, (uint64_t *)at);
  case UFP4_CFG_TEXT:
  case UFP4_CFG_RECIPE:
    if (strlen(v) >= f->size) {
      fprintf(stderr, "ufp4 %s: %s: value too long (under %zu bytes)\n", cmd, f->flag, f->size);
      return -1;
    }
    strcpy(at, v);
    return 0;
  case UFP4_CFG_OVERRIDES: return ufp4_cli_append_override(cmd, f->flag, v, at, f->size);
  case UFP4_CFG_POLICY:
    if (strcmp(v, "skip") && strcmp(v, "stop")) {
      fprintf(stderr, "ufp4 %s: %s: expected skip or stop, not '%s'\n", cmd, f->flag, v);
      return -1;
    }
    *(ufp4_nan_policy *)at = strcmp(v, "stop") ? UFP4_NAN_SKIP : UFP4_NAN_STOP;
    return 0;
  case UFP4_CFG_DERIVED: break;
  }
  return -1;
}

int ufp4_train_flags_parse(const char *cmd, int argc, char **argv, int *i, ufp4_train_config *cfg) {
  for (size_t k = 0; k < ufp4_train_n_fields; k++) {
    const ufp4_train_field *f = &ufp4_train_fields[k];
    const char *v;
    int r = f->flag ? cli_value(argc, argv, i, f->flag, &v) : 0;
    if (r < 0) return -1;
    if (r > 0) return parse_value(cmd, f, v, cfg) ? -1 : 1;
  }
  return 0;
}

int ufp4_grid_flags_parse_or_fail(const char *cmd, int argc, char **argv, int *i, ufp4_train_config *cfg) {
  for (const char *const *f = grid_refused; *f; f++) {
    const size_t n = strlen(*f);
    if (!strncmp(argv[*i], *f, n) && (argv[*i][n] == '\0' || argv[*i][n] == '=')) {
      fprintf(stderr,
              "ufp4 %s: %s sets one run's recipe (ufp4 train); %s gives each run its own from --recipes "
              "(see ufp4 %s --help)\n",
              cmd, *f, cmd, cmd);
      return -1;
    }
  }
  return ufp4_train_flags_parse_or_fail(cmd, argc, argv, i, cfg);
}

int ufp4_train_flags_parse_or_fail(const char *cmd, int argc, char **argv, int *i,
                                   ufp4_train_config *cfg) {
  if (cli_flag(argv, *i, "--no-progress")) {
    cfg->progress = 0;
    return 1;
  }
  int r = ufp4_train_flags_parse(cmd, argc, argv, i, cfg);
  if (r == 0) {
    fprintf(stderr, "ufp4 %s: unknown option '%s' (see ufp4 %s --help)\n", cmd, argv[*i], cmd);
    return -1;
  }
  return r;
}
