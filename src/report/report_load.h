/* Run-folder readers used by report.c (not a public API). */
#ifndef UFP4_REPORT_LOAD_H
#define UFP4_REPORT_LOAD_H

#include <stddef.h>

#include "ufp4/report.h"

/* config.json: the "recipe" string (a scheduled run's "schedule" instead), "seed", and the
 * "overrides" ';'-joined ("" for none; UFP4_EFORMAT when they do not fit overrides_size). */
int rpt_load_config(const char *dir, char *recipe, size_t recipe_size, long long *seed, char *overrides,
                    size_t overrides_size);
/* config.json's per-projection recipe table (written for runs with overrides or a schedule) as
 * text, "from step S:" then its lines indented, malloc'ed; NULL when there is none (or it cannot be
 * read: the table is shown, never checked). */
char *rpt_load_projection_table(const char *dir);
/* The table of recipe `recipe` of r, from its first run's folder (its seeds share the table). */
char *rpt_recipe_projection_table(const ufp4_report *r, size_t recipe);
/* metrics.jsonl: train (non-skipped) and val series, sorted by step. A line that is not JSON but
 * says "skipped":true (nan loss) counts as skipped; any other malformed line is an error. */
int rpt_load_metrics(const char *dir, ufp4_series *train, ufp4_series *val, int *skipped);
/* The folder name `ufp4 compare` gives a recipe spec's runs: letters, digits, '-' and '.' kept,
 * anything else '_'. */
void rpt_recipe_dir_name(const char *spec, char *out, size_t size);

#endif
