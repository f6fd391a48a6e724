/* gnuplot plots for the commands that write figures (report, drift, sweep). */
#ifndef UFP4_PLOT_H
#define UFP4_PLOT_H

#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Writes DIR/NAME.gp (common settings, then `body` once for an SVG and once for a PNG terminal) and
 * runs gnuplot in DIR, producing NAME.svg and NAME.png. `body` holds the plot commands (labels,
 * `plot 'file.dat' ...`), data files are the caller's. Returns 0 when plotted, 1 when gnuplot is
 * missing or failed (see DIR/gnuplot.log; the script stays for later), or a negative status. */
int ufp4_plot_gnuplot(const char *dir, const char *name, const char *body, int width, int height);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
