#include "training/progress.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

/* "1h05m" or "3m07s". */
static void format_eta(double s, char *buf, size_t size) {
  if (!isfinite(s) || s < 0) s = 0;
  long t = (long)(s + 0.5);
  if (t >= 3600) snprintf(buf, size, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
}

void progress_step(const ufp4_train_config *cfg, const char *label, const train_step_stats *st,
                   int start, double train_s) {
  const int done = st->step, tty = isatty(fileno(stderr));
  const int every = cfg->steps >= 20 ? cfg->steps / 20 : 1;
  if (!tty && done % every != 0 && done != cfg->steps) return;
  char eta[32], total[48] = "";
  const double left = train_s / (done - start) * (cfg->steps - done);
  format_eta(left, eta, sizeof eta);
  if (cfg->eta_after_s > 0) {
    char all[32];
    format_eta(left + cfg->eta_after_s, all, sizeof all);
    snprintf(total, sizeof total, ", all runs %s", all);
  }
  fprintf(stderr, "%s[%s] step %d/%d  loss %.4f  lr %.2e  %.0f tok/s  ETA %s%s%s", tty ? "\r" : "",
          label, done, cfg->steps, st->loss, st->lr, st->tokens_per_s, eta, total,
          tty && done < cfg->steps ? "   " : "\n");
  fflush(stderr);
}

void progress_skipped(int step) {
  fprintf(stderr, "\nstep %d: non-finite loss or gradient, update skipped\n", step);
}
