/* Measurement tables over grids, raw and rotated: bias_table.h. */
#include "ufp4/bias_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"

void ufp4_bias_table_free(ufp4_bias_table *t) {
  for (int i = 0; t->rows && i < t->n_rows; i++) free(t->rows[i].chain);
  free(t->rows);
  memset(t, 0, sizeof *t);
}

/* The chain of one row's format; its failure is told apart from the measurement's by a prefix. */
static int chain(const ufp4_bias_spec *s, const ufp4_qformat *f, const float *x, size_t rows,
                 size_t cols, ufp4_bias_row *r) {
  r->chain = calloc((size_t)s->layers, sizeof *r->chain);
  if (!r->chain) return ufp4_fail(UFP4_ENOMEM, "out of memory");
  int rc = ufp4_chain_simulate(f, x, rows, cols, s->layers, s->fmt.seed, r->chain);
  if (!rc) return 0;
  char why[1024];
  snprintf(why, sizeof why, "%s", ufp4_last_error());
  return ufp4_fail(rc, "chain simulation: %s", why);
}

/* Row r of grid g: raw when v is 0, else rotated (its dSQNR against the raw row before it). */
static int measure_row(const ufp4_bias_spec *s, ufp4_grid_id g, int v, const float *x, size_t rows,
                       size_t cols, ufp4_bias_row *r) {
  ufp4_qformat f = s->fmt;
  f.grid = g;
  f.rht = v ? s->fmt.rht : 0;
  f.rht_signs = v ? s->fmt.rht_signs : NULL;
  r->grid = f.grid;
  r->rht = f.rht;
  int rc = ufp4_qformat_check(&f, rows, cols);
  if (!rc) rc = ufp4_measure_tensor(&f, x, rows, cols, &r->m);
  if (rc) return rc;
  if (v) r->dsqnr = ufp4_delta_sqnr_db(r[-1].m.nmse, r->m.nmse);
  return s->layers > 0 ? chain(s, &f, x, rows, cols, r) : 0;
}

int ufp4_bias_measure(const ufp4_bias_spec *s, const float *x, size_t rows, size_t cols,
                      ufp4_bias_table *out) {
  memset(out, 0, sizeof *out);
  const int per_grid = s->fmt.rht ? 2 : 1;
  out->layers = s->layers;
  out->rows = calloc((size_t)(s->n_grids * per_grid), sizeof *out->rows);
  if (!out->rows) return ufp4_fail(UFP4_ENOMEM, "out of memory");
  out->n_rows = s->n_grids * per_grid;
  for (int gi = 0; gi < s->n_grids; gi++)
    for (int v = 0; v < per_grid; v++) {
      int rc = measure_row(s, s->grids[gi], v, x, rows, cols, &out->rows[gi * per_grid + v]);
      if (rc) return rc;
    }
  return 0;
}
