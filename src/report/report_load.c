/* Reading run folders: config.json, metrics.jsonl and diagnostics.jsonl. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json_file.h"
#include "core/strbuf.h"
#include "report/report_internal.h"
#include "report/report_load.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

const char *const rpt_operands[RPT_N_OPERANDS] = {"fprop.x", "fprop.w", "dgrad.dy", "dgrad.w", "wgrad.dy", "wgrad.x"};
const char *const rpt_gemms[RPT_N_GEMMS] = {"fprop", "dgrad", "wgrad"};

int rpt_load_config(const char *dir, char *recipe, size_t recipe_size, long long *seed, char *overrides,
                    size_t overrides_size) {
  char path[4200];
  snprintf(path, sizeof path, "%s/config.json", dir);
  cJSON *j;
  int rc = ufp4_json_read_object(path, 64u << 20, "the run configuration", NULL, &j);
  if (rc) return rc;
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "recipe");
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "seed");
  if (!cJSON_IsString(r) || !r->valuestring[0]) rc = ufp4_fail(UFP4_EFORMAT, "%s: \"recipe\" string missing", path);
  else if (!cJSON_IsNumber(s) || s->valuedouble < 0 || s->valuedouble != floor(s->valuedouble) ||
           s->valuedouble > 9007199254740992.0)
    rc = ufp4_fail(UFP4_EFORMAT, "%s: \"seed\" must be a non-negative integer", path);
  else {
    /* A scheduled run is its schedule: its "recipe" is only the first phase. */
    const cJSON *sched = cJSON_GetObjectItemCaseSensitive(j, "schedule");
    const int has = cJSON_IsString(sched) && sched->valuestring[0];
    snprintf(recipe, recipe_size, "%s", has ? sched->valuestring : r->valuestring);
    *seed = (long long)s->valuedouble;
    /* Per-projection overrides (an array of "PATTERN=SPEC"), ';'-joined; "" without them. */
    const cJSON *ov = cJSON_GetObjectItemCaseSensitive(j, "overrides"), *it;
    const cJSON *list = cJSON_IsArray(ov) ? ov : NULL;
    size_t used = 0;
    overrides[0] = '\0';
    cJSON_ArrayForEach(it, list) {
      if (!cJSON_IsString(it)) continue;
      int w = snprintf(overrides + used, used < overrides_size ? overrides_size - used : 0, "%s%s", used ? ";" : "",
                       it->valuestring);
      if (w > 0) used += (size_t)w;
    }
    if (used >= overrides_size)
      rc = ufp4_fail(UFP4_EFORMAT, "%s: \"overrides\" longer than %zu bytes", path, overrides_size - 1);
  }
  cJSON_Delete(j);
  return rc;
}

char *rpt_load_projection_table(const char *dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/config.json", dir);
  cJSON *j;
  if (ufp4_json_read_object(path, 64u << 20, NULL, NULL, &j)) return NULL;
  const cJSON *phases = cJSON_GetObjectItemCaseSensitive(j, "projection_recipes"), *ph;
  ufp4_strbuf b = {0};
  if (!cJSON_IsArray(phases)) phases = NULL;
  cJSON_ArrayForEach(ph, phases) {
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(ph, "step");
    const cJSON *lines = cJSON_GetObjectItemCaseSensitive(ph, "recipes"), *line;
    if (!cJSON_IsNumber(step) || !cJSON_IsArray(lines)) continue;
    ufp4_strbuf_printf(&b, "from step %d:\n", step->valueint);
    cJSON_ArrayForEach(line, lines)
      if (cJSON_IsString(line)) ufp4_strbuf_printf(&b, "  %s\n", line->valuestring);
  }
  cJSON_Delete(j);
  if (!b.oom) return b.s;
  ufp4_strbuf_free(&b);
  return NULL;
}

char *rpt_recipe_projection_table(const ufp4_report *r, size_t recipe) {
  for (size_t i = 0; i < r->n_runs; i++)
    if (!strcmp(r->runs[i].recipe, r->recipes[recipe].recipe)) return rpt_load_projection_table(r->runs[i].dir);
  return NULL;
}

static int series_push(ufp4_series *s, size_t *cap, int step, double v) {
  if (s->n == *cap) {
    size_t nc = *cap ? 2 * *cap : 256;
    int *ns = realloc(s->step, nc * sizeof *ns);
    if (!ns) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
    s->step = ns;
    double *nv = realloc(s->value, nc * sizeof *nv);
    if (!nv) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
    s->value = nv;
    *cap = nc;
  }
  s->step[s->n] = step;
  s->value[s->n++] = v;
  return 0;
}

/* Sorts by step keeping file order among equal steps, then keeps the last line of each step
 * (a resumed run that re-logged a step supersedes the earlier line). */
static void series_sort(ufp4_series *s) {
  for (size_t i = 1; i < s->n; i++) { /* insertion sort: the file is nearly always sorted */
    int st = s->step[i];
    double v = s->value[i];
    size_t j = i;
    for (; j > 0 && s->step[j - 1] > st; j--) {
      s->step[j] = s->step[j - 1];
      s->value[j] = s->value[j - 1];
    }
    s->step[j] = st;
    s->value[j] = v;
  }
  size_t k = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (k && s->step[k - 1] == s->step[i]) k--;
    s->step[k] = s->step[i];
    s->value[k++] = s->value[i];
  }
  s->n = k;
}

static int step_of(const cJSON *j, const char *path, size_t line, int *step) {
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "step");
  if (!cJSON_IsNumber(s) || s->valuedouble < 0 || s->valuedouble > INT32_MAX || s->valuedouble != floor(s->valuedouble))
    return ufp4_fail(UFP4_EFORMAT, "%s:%zu: \"step\" must be a non-negative integer", path, line);
  *step = (int)s->valuedouble;
  return 0;
}

/* One line of a JSONL text starting at *p (which moves past it, and *line counts it): *q is its
 * start, the return its length without trailing white space (\r, space, tab); 0 for a blank one. */
static size_t next_line(char **p, const char *end, const char **q, size_t *line) {
  char *e = memchr(*p, '\n', (size_t)(end - *p));
  if (!e) e = (char *)end;
  (*line)++;
  size_t len = (size_t)(e - *p);
  *q = *p;
  *p = e + 1;
  while (len && ((*q)[len - 1] == '\r' || (*q)[len - 1] == ' ' || (*q)[len - 1] == '\t')) len--;
  return len;
}

int rpt_load_metrics(const char *dir, ufp4_series *train, ufp4_series *val, int *skipped) {
  char path[4200];
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  char *text;
  size_t size;
  int rc = ufp4_read_file_as(path, SIZE_MAX, "the run's metrics", &text, &size);
  if (rc) return rc;
  size_t tcap = 0, vcap = 0, line = 0;
  *skipped = 0;
  for (char *p = text; !rc && p < text + size;) {
    const char *q;
    const size_t len = next_line(&p, text + size, &q, &line);
    if (!len) continue;
    cJSON *j = cJSON_ParseWithLength(q, len);
    if (!j) {
      /* The trainer prints a non-finite loss as nan/inf, which JSON cannot hold; such lines are
       * always marked skipped, and they carry no usable loss anyway. */
      char tmp[1024];
      snprintf(tmp, sizeof tmp, "%.*s", (int)(len < 1000 ? len : 1000), q);
      if (strstr(tmp, "\"skipped\":true")) {
        (*skipped)++;
        continue;
      }
      rc = ufp4_fail(UFP4_EFORMAT, "%s:%zu: malformed JSON line", path, line);
      break;
    }
    int step = 0;
    const cJSON *loss = cJSON_GetObjectItemCaseSensitive(j, "loss");
    const cJSON *vl = cJSON_GetObjectItemCaseSensitive(j, "val_loss");
    const cJSON *sk = cJSON_GetObjectItemCaseSensitive(j, "skipped");
    if (!cJSON_IsObject(j)) rc = ufp4_fail(UFP4_EFORMAT, "%s:%zu: not a JSON object", path, line);
    else if (!loss && !vl) rc = 0; /* some other record: not ours to judge */
    else if ((rc = step_of(j, path, line, &step))) {
    } else if (vl) {
      if (!cJSON_IsNumber(vl)) rc = ufp4_fail(UFP4_EFORMAT, "%s:%zu: \"val_loss\" is not a number", path, line);
      else rc = series_push(val, &vcap, step, vl->valuedouble);
    } else if (cJSON_IsTrue(sk)) {
      (*skipped)++;
    } else if (!cJSON_IsNumber(loss) || !isfinite(loss->valuedouble)) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s:%zu: \"loss\" is not a finite number", path, line);
    } else {
      rc = series_push(train, &tcap, step, loss->valuedouble);
    }
    cJSON_Delete(j);
  }
  free(text);
  if (rc) return rc;
  series_sort(train);
  series_sort(val);
  if (!train->n) return ufp4_fail(UFP4_EFORMAT, "%s: no train loss lines", path);
  return 0;
}

static int diag_push(rpt_diag_set *s, int step, rpt_diag_point pt) {
  if (step < s->step) return 0;
  if (step > s->step) {
    s->step = step;
    s->n = 0;
  }
  if (s->n == s->cap) {
    size_t nc = s->cap ? 2 * s->cap : 64;
    rpt_diag_point *np = realloc(s->p, nc * sizeof *np);
    if (!np) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
    s->p = np;
    s->cap = nc;
  }
  s->p[s->n++] = pt;
  return 0;
}

static double numv(const cJSON *j, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int index_of(const char *const *names, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], s)) return i;
  return -1;
}

void rpt_diag_free(struct ufp4_report_diag *d) {
  if (!d) return;
  free(d->op.p);
  free(d->gemm.p);
  free(d->drift.p);
  free(d);
}

/* Lines of kinds this reader does not know are ignored (the format is still growing); a line
 * that is not JSON is an error naming the file and line. */
int rpt_diag_load(const char *dir, struct ufp4_report_diag **out) {
  *out = NULL;
  char path[4200];
  snprintf(path, sizeof path, "%s/diagnostics.jsonl", dir);
  struct stat st;
  if (stat(path, &st) != 0 && errno == ENOENT) return 0;
  char *text;
  size_t size;
  int rc = ufp4_read_file_as(path, SIZE_MAX, "diagnostics", &text, &size);
  if (rc) return rc;
  struct ufp4_report_diag *d = calloc(1, sizeof *d);
  if (!d) {
    free(text);
    return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  }
  d->op.step = d->gemm.step = d->drift.step = -1;
  d->max_layer = -1;
  size_t line = 0;
  for (char *p = text; !rc && p < text + size;) {
    const char *q;
    const size_t len = next_line(&p, text + size, &q, &line);
    if (!len) continue;
    cJSON *j = cJSON_ParseWithLength(q, len);
    int step;
    if (!j || !cJSON_IsObject(j)) rc = ufp4_fail(UFP4_EFORMAT, "%s:%zu: malformed JSON line", path, line);
    else if (!(rc = step_of(j, path, line, &step))) {
      const cJSON *drift = cJSON_GetObjectItemCaseSensitive(j, "drift");
      const cJSON *layer = cJSON_GetObjectItemCaseSensitive(j, "layer");
      const cJSON *operand = cJSON_GetObjectItemCaseSensitive(j, "operand");
      const cJSON *gemm = cJSON_GetObjectItemCaseSensitive(j, "gemm");
      if (cJSON_IsArray(drift)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, drift) {
          const cJSON *l = cJSON_GetObjectItemCaseSensitive(it, "layer");
          if (!cJSON_IsNumber(l) || l->valuedouble < 0 || l->valuedouble > 1e6) continue;
          rpt_diag_point pt = {(int)l->valuedouble, 0, numv(it, "norm_ratio"), numv(it, "cosine")};
          if ((rc = diag_push(&d->drift, step, pt))) break;
          if (pt.layer > d->max_layer) d->max_layer = pt.layer;
        }
      } else if (cJSON_IsNumber(layer) && layer->valuedouble >= 0 && layer->valuedouble <= 1e6) {
        rpt_diag_point pt = {(int)layer->valuedouble, -1, NAN, NAN};
        rpt_diag_set *set = NULL;
        if (cJSON_IsString(operand) && (pt.kind = index_of(rpt_operands, RPT_N_OPERANDS, operand->valuestring)) >= 0) {
          pt.v1 = numv(j, "alpha");
          pt.v2 = numv(j, "sqnr_db");
          set = &d->op;
        } else if (cJSON_IsString(gemm) && (pt.kind = index_of(rpt_gemms, RPT_N_GEMMS, gemm->valuestring)) >= 0) {
          pt.v1 = numv(j, "out_sqnr_db");
          set = &d->gemm;
        }
        if (set) {
          rc = diag_push(set, step, pt);
          if (pt.layer > d->max_layer) d->max_layer = pt.layer;
        }
      }
    }
    cJSON_Delete(j);
  }
  free(text);
  if (rc) {
    rpt_diag_free(d);
    return rc;
  }
  *out = d;
  return 0;
}

/* A folder name for a recipe spec: letters, digits, '-', '.' kept; everything else '_'. */
void rpt_recipe_dir_name(const char *spec, char *out, size_t size) {
  size_t j = 0;
  for (size_t i = 0; spec[i] && j + 1 < size; i++) {
    char ch = spec[i];
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '-' || ch == '.';
    out[j++] = ok ? ch : '_';
  }
  out[j] = '\0';
}
