/* The table behind `ufp4 bias`: the paper's measures (measures.h) of one tensor under each of
 * several grids, without RHT and with it, and optionally the compounding of the attenuation through
 * a chain of quantized GEMMs per row of the table. */
#ifndef UFP4_BIAS_TABLE_H
#define UFP4_BIAS_TABLE_H

#include <stddef.h>
#include "ufp4/measures.h"
#include "ufp4/quant.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* One measurement: a grid, raw (rht 0) or rotated. */
typedef struct {
  ufp4_grid_id grid;
  int rht;
  ufp4_qmeasures m;
  double dsqnr;            /* rotated rows only: 10 log10(NMSE_raw / NMSE_rht) */
  ufp4_chain_layer *chain; /* `layers` entries, or NULL when no chain was asked for */
} ufp4_bias_row;

typedef struct {
  /* Block, scale, rounding and seed of every measurement; fmt.rht > 0 adds a rotated row after
   * each raw one, with fmt.rht_signs; fmt.grid is ignored. fmt.seed also draws the chain's W_k. */
  ufp4_qformat fmt;
  const ufp4_grid_id *grids;
  int n_grids;
  int layers; /* > 0: also ufp4_chain_simulate of that many GEMMs per row */
} ufp4_bias_spec;

typedef struct {
  ufp4_bias_row *rows; /* per grid in order: raw, then rotated when fmt.rht > 0 */
  int n_rows;
  int layers;
} ufp4_bias_table;

/* Measures the rows x cols tensor x (cols the reduction dimension) under s. A chain failure's
 * message starts "chain simulation: ". *out is allocated: free it with ufp4_bias_table_free, also
 * after a failure. */
int ufp4_bias_measure(const ufp4_bias_spec *s, const float *x, size_t rows, size_t cols,
                      ufp4_bias_table *out);
void ufp4_bias_table_free(ufp4_bias_table *t);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
